"""The ``validation`` plugin: JSON Schema checks compiled once per tool, errors a model can act on.

jsonschema-rs decides valid or invalid; jsonschema (pure Python, imported on the first refusal,
or for a schema naming a format such as json-pointer or regex, whose checker jsonschema-rs is
given) lists what is wrong, and decides within a time budget what jsonschema-rs cannot read.
With ``backend="python"`` jsonschema does both. Either way a refusal is a
:class:`~harness_one.ToolArgumentError` whose problems name the field and what was expected
(the verdict's first error, when the listing finds none in its time).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import itertools
import json
import math
import numbers
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urldefrag

from harness_one import (
    ArgumentLimits,
    ArgumentProblem,
    Call,
    Clock,
    Tool,
    ToolArgumentError,
    ToolRegistry,
    hookimpl,
    json_path,
    json_pointer,
    json_type,
    listed_names,
    per_tool,
    preview,
    rust_pattern,
    rust_schema,
    schema_objects,
    subschemas,
)

from . import _formats

if TYPE_CHECKING:  # typeshed types the regular expression internals under their pre-3.11 names only
    import sre_compile
    import sre_constants
    import sre_parse

    from harness_one import Redactor
else:
    from re import _compiler as sre_compile
    from re import _constants as sre_constants
    from re import _parser as sre_parse

__all__ = ["Backend", "CompiledSchema", "ValidationPlugin", "check_limits", "compile_schema", "rust_available"]

Backend = Literal["auto", "python", "rust"]
FORMATS = ("date-time", "date", "time", "email", "uri", "uuid", "ipv4", "ipv6", "hostname")

#: At most this many problems are listed in one refusal.
MAX_PROBLEMS = 20
#: At most this many allowed property names are listed in a refusal of an unexpected one.
MAX_NAMES = 20
#: Seconds the error listing may take; then it stops with the problems found so far (a refusal stays under 10 ms).
LISTING_BUDGET = 0.005
#: Seconds the pure-Python backend may spend matching patterns for one call; past it the call is refused.
PATTERN_BUDGET = 0.005
#: Seconds the pure-Python verdict may take where jsonschema-rs cannot judge the arguments; past it they are refused.
VERDICT_BUDGET = 0.02
#: Backtracking steps jsonschema-rs may take for one pattern with backreferences or lookaround (about 0.6 ms).
BACKTRACK_LIMIT = 20_000

_FLOAT = 1  # a float somewhere (an integer-valued one may need to become an int)
_ODD = 2  # a value jsonschema-rs cannot be trusted with: int past the text limit, NaN, non-str key, subclass, non-JSON type
_I_MIN, _I_MAX = -(1 << 63), (1 << 64) - 1  # integers in this range are never too long (checked first, at no cost)
_BOUNDS: dict[int, int] = {4300: 10**4300}  # digits -> the first integer past them


def _int_bound() -> tuple[int, int]:
    """The interpreter's int-to-text limit in digits (4300 when there is none), and ``10 ** digits``."""
    digits = sys.get_int_max_str_digits() or 4300
    bound = _BOUNDS.get(digits)
    if bound is None:
        bound = _BOUNDS[digits] = 10**digits
    return digits, bound


def _too_long(value: int) -> bool:
    """Whether ``value`` has more digits than the int-to-text limit (no JSON text holds it; jsonschema-rs reads any other exactly)."""
    return not _I_MIN <= value <= _I_MAX and abs(value) >= _int_bound()[1]


_CHUNK = 4096  # items of a long list measured between two checks of the size so far
_TIMED_OUT = "harness-one: pattern matching timed out"


class _Budget:
    """Until when (on ``now``'s clock) the pure-Python pattern matcher may run for this validation."""

    __slots__ = ("deadline", "now")

    def __init__(self, seconds: float, now: Callable[[], float]) -> None:
        self.now = now
        self.deadline = now() + seconds

    def left(self) -> float:
        return self.deadline - self.now()


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("harness_one_validation_budget", default=None)
#: Set while problems are listed: every keyword of the listing validator checks it first.
_LISTING: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("harness_one_listing_budget", default=None)
#: The references of the schema whose errors are being listed (to tell an alternative's tag from the schema).
_LISTED_REFS: contextvars.ContextVar[_Refs | None] = contextvars.ContextVar("harness_one_listed_refs", default=None)


class _OutOfTime(Exception):
    """The error listing ran past :data:`LISTING_BUDGET`."""


def _tick() -> None:
    """Stop the error listing once :data:`LISTING_BUDGET` is spent (no effect outside a listing)."""
    budget = _LISTING.get()
    if budget is not None and budget.left() <= 0:
        raise _OutOfTime


def _guarded(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """``keyword`` (a jsonschema keyword function) that first stops the listing once its time is up."""

    def guarded(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = _LISTING.get()
        if budget is not None and budget.left() <= 0:
            raise _OutOfTime
        return keyword(validator, value, instance, schema)

    return guarded


@functools.cache
def _rust() -> Any:
    try:
        import jsonschema_rs
    except ImportError:  # pragma: no cover - jsonschema-rs is a dependency; the Python backend still works
        return None
    return jsonschema_rs


def rust_available() -> bool:
    """Whether the jsonschema-rs backend can be used (it is a dependency; False only in a broken install)."""
    return _rust() is not None


def _refuse_remote_rs(uri: str) -> Any:
    raise ValueError(f"remote reference {uri} is never fetched")


# ---------------------------------------------------------------------------- what jsonschema-rs is given

_SURROGATE = re.compile("[\ud800-\udfff]")
_STAND_IN = re.compile("[\U0010f800-\U0010ffff]")
_SHIFT = 0x10F800 - 0xD800  # a lone surrogate's stand-in: as far into the last 2,048 code points (private use)
# What could tell a lone surrogate from its stand-in: in a pattern, a code point escape or a class
# of surrogates or private use; in a pattern or a value, a character from U+D800 on.
_TELLS_PATTERN = re.compile(r"\\u|\\[pP]\{[^}]*(?:Co|Cs|Private|Surrogate)")
_TELLS_VALUE = re.compile("[\ud800-\U0010ffff]")


def _plain(instance: Any, stand_in: bool) -> tuple[Any, bool] | None:
    """``instance`` as the plain JSON values it is sent as, read back from its JSON text, and whether
    lone surrogates in it stand in; None where jsonschema-rs cannot be given it.

    A ``str``, ``int`` or ``float`` subclass (a ``StrEnum`` member, numpy's ``float64``) becomes
    the value it holds, a ``dict`` or ``list`` subclass or a tuple a dict or list. jsonschema-rs
    reads only what UTF-8 can hold: a lone surrogate, valid in a Python string (and in the JSON
    escape ``"\\ud800"``), becomes its stand-in with ``stand_in`` (None without). None too where
    no JSON text holds ``instance`` (``bytes``, other objects), or where two keys would become one.
    """
    try:
        text = json.dumps(instance, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None
    stood = _SURROGATE.search(text) is not None
    if stood:
        if not stand_in or _STAND_IN.search(text) is not None:
            return None  # (a real character where a stand-in would go: they would be one; jsonschema judges)
        text = _SURROGATE.sub(lambda m: chr(ord(m.group()) + _SHIFT), text)
    try:
        return json.loads(text, object_pairs_hook=_distinct), stood
    except ValueError:
        return None


def _distinct(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object read back by :func:`_plain`; ValueError where two of its keys are one (two ``str``
    subclass keys of one text, kept apart by their own ``__eq__``)."""
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("two keys are one")
    return found


def _back(text: str) -> str:
    """``text`` as it was before :func:`_plain` gave its lone surrogates stand-ins."""
    return _STAND_IN.sub(lambda m: chr(ord(m.group()) - _SHIFT), text)


def _tells_surrogates_apart(schema: Any) -> bool:
    """Whether ``schema`` could tell a lone surrogate from its stand-in: any name or value in it (a
    property name, an ``enum`` member, a pattern) holding a character from U+D800 on, or a pattern's
    code point escape or class of surrogates or private use."""
    try:
        if _TELLS_VALUE.search(json.dumps(schema, ensure_ascii=False)):
            return True
    except (TypeError, ValueError):
        return True
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    if _TELLS_PATTERN.search(value):
                        return True
                elif key == "patternProperties" and isinstance(value, dict):
                    if any(_TELLS_PATTERN.search(name) for name in value):
                        return True
                    stack.extend(value.values())
                elif key not in ("enum", "const") and isinstance(value, (dict, list)):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return False


#: Formats jsonschema-rs checks natively as the strict checkers of ``_formats`` do (the JSON Schema
#: Test Suite and fuzzing say so); for any other, it is given the Python backend's checker.
_NATIVE_FORMATS = frozenset({"date", "date-time", "time", "uuid", "ipv4", "ipv6", "uri"})
#: The same before draft 2019-09: jsonschema-rs knows no ``uuid`` there (it passed "not-a-uuid").
_NATIVE_FORMATS_DRAFT7 = _NATIVE_FORMATS - {"uuid"}


def _rust_formats(schema: Any, old: bool = False) -> dict[str, Callable[[str], bool]] | None:
    """The checkers jsonschema-rs is given for the formats ``schema`` names, so both backends decide alike.

    The strict ones for hostname and email (jsonschema-rs reads IDNA labels its own way),
    jsonschema's for the others it has (imported here only for those), and one that accepts
    anything where it has none (jsonschema-rs would otherwise assert duration, iri,
    uri-template, ..., which the Python backend does not). ``old``: a part of the schema is of a draft
    before 2019-09 (:func:`_older_draft`), where jsonschema-rs knows no ``uuid``.
    """
    names = _format_names(schema) - (_NATIVE_FORMATS_DRAFT7 if old else _NATIVE_FORMATS)
    if not names:
        return None
    found: dict[str, Callable[[str], bool]] = {n: _formats.STRICT_FORMATS[n] for n in names if n in _formats.STRICT_FORMATS}
    if names - found.keys():
        from jsonschema import validators

        base = validators.validator_for(
            dict(schema) if isinstance(schema, Mapping) else {}, default=validators.Draft202012Validator
        )
        checker = _format_checker(base)
        found.update({name: _checker_of(checker, name) for name in names - found.keys()})
    return found


def _checker_of(checker: Any, name: str) -> Callable[[str], bool]:
    """``checker``'s check of the format ``name`` as a function of a string (the function itself where it raises nothing)."""
    if name not in checker.checkers:
        return _any_text
    func, raises = checker.checkers[name]
    return func if not raises else functools.partial(checker.conforms, format=name)


def _format_names(schema: Any) -> set[str]:
    """Every ``format`` a schema names."""
    return {name for name in _keyed(schema, "format") if isinstance(name, str)}


def _keyed(schema: Any, key: str) -> Iterator[Any]:
    """The value of every ``key`` in ``schema`` (anything so keyed, a property name too: a safe over-estimate)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if key in node:
                yield node[key]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _any_text(value: str) -> bool:
    """The check of a format the Python backend does not assert."""
    return True


def _rust_keywords(schema: Any) -> dict[str, Any] | None:
    """The keywords jsonschema-rs is given for ``schema``: ``multipleOf`` (:class:`_MultipleOf`), where it has one
    (only there: a call under any other schema does no more work)."""
    for _ in _keyed(schema, "multipleOf"):
        return {"multipleOf": _MultipleOf}
    return None


#: Keywords jsonschema-rs asserts in drafts 6 and 7 and jsonschema reads as annotations in every draft.
_CONTENT = frozenset({"contentMediaType", "contentEncoding"})


def _older_draft(schema: Any, draft: int) -> bool:
    """Whether a part of ``schema`` is read as a draft before 2019-09: the root's dialect, or a subschema's ``$schema``."""
    return draft <= 7 or any("$schema" in node for node in itertools.islice(subschemas(schema), 1, None))


def _rust_schema(schema: Any, old: bool) -> Any:
    """The schema jsonschema-rs is given (:func:`harness_one.rust_schema`): without ``contentMediaType`` and
    ``contentEncoding`` where a part is of draft 6 or 7 (``old``), in which jsonschema-rs asserts them; jsonschema
    reads them as annotations in every draft, as jsonschema-rs does from 2019-09 on."""
    return rust_schema(schema, drop=_CONTENT if old else frozenset())


def _patterns(schema: Any) -> Iterator[str]:
    """Every ``pattern`` and ``patternProperties`` name in ``schema`` (:func:`harness_one.schema_objects`)."""
    for node, _ in schema_objects(schema):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        if isinstance(node.get("patternProperties"), dict):
            yield from node["patternProperties"]


class _MultipleOf:
    """``multipleOf`` as jsonschema-rs is given it: :func:`_is_multiple` decides, as on the Python backend
    (jsonschema-rs's own reads some floats past 2**53 by their binary value: ``9e22`` was no multiple of 3)."""

    __slots__ = ("divisor",)

    def __init__(self, parent_schema: Any, value: Any, schema_path: Any) -> None:
        self.divisor = _ratio(value)  # a number > 0: jsonschema-rs checked the schema first

    def validate(self, instance: Any) -> None:
        kind = type(instance)  # jsonschema-rs gives plain JSON values (a bool is no number)
        if (kind is float or kind is int) and not _is_multiple(instance, self.divisor):
            raise ValueError(_NOT_MULTIPLE)


_BASE_URI = "urn:harness-one:parameters"  # the base URI of a schema without an $id
_METASCHEMAS = ("https://json-schema.org/", "http://json-schema.org/")  # where jsonschema-rs's bundled ones are


def _pointed(root: Any, fragment: str, fallback: Any) -> Any:
    """The node the JSON pointer ``fragment`` names in ``root``, else ``fallback``."""
    if fragment and not fragment.startswith("/"):
        return fallback  # an anchor
    try:
        return json_pointer(root, fragment)
    except KeyError:
        return fallback


class _Refs:
    """The references of one schema, resolved as jsonschema-rs's validator resolves them
    (JSON pointers, anchors, embedded ``$id`` resources), and its draft (4, 6, 7, 19 or 20).

    ``resolver`` is None without jsonschema-rs, or for a schema it cannot register (one with a
    remote reference, which the definition check refuses): then no reference is followed.
    """

    __slots__ = ("draft", "resolver", "root")

    def __init__(self, root: Any) -> None:
        self.root = root
        self.resolver: Any = None
        self.draft = 20
        rs = _rust()
        if rs is not None and isinstance(root, Mapping):
            with contextlib.suppress(Exception):
                resolved = rs.Registry([(_BASE_URI, root)], retriever=_refuse_remote_rs).resolver(_BASE_URI).lookup("")
                self.resolver, self.draft = resolved.resolver, resolved.draft

    def lookup(self, scope: Any, ref: str, *, own: bool = False) -> tuple[Any, Any] | None:
        """The schema ``ref`` names from the base URI of ``scope`` (a resolver) and the resolver of its own
        references, or None. In the root resource it is the schema itself (jsonschema-rs gives a copy).
        With ``own``, None too where it is outside the schema: in a metaschema jsonschema-rs bundles (the only
        resources it holds besides the schema's own, as no remote reference is fetched)."""
        if scope is None:
            return None
        try:
            resolved = scope.lookup(ref)
        except Exception:  # nothing there
            return None
        base = resolved.resolver.base_uri
        if own and base != self.resolver.base_uri and base.startswith(_METASCHEMAS):
            return None
        uri, fragment = urldefrag(ref)
        node = resolved.contents
        if uri in ("", self.resolver.base_uri) and scope.base_uri == self.resolver.base_uri:
            node = _pointed(self.root, fragment, node)
        return node, resolved.resolver


# ---------------------------------------------------------------------------- limits and odd values


def _too_big(size: int, max_bytes: int) -> ToolArgumentError:
    return ToolArgumentError(
        [
            ArgumentProblem(
                "$",
                f"arguments are about {size} bytes; the limit is {max_bytes}",
                "limits",
                f"<= {max_bytes} bytes",
                f"~{size} bytes",
            )
        ]
    )


def _too_slow() -> ArgumentProblem:
    budget = f"{VERDICT_BUDGET * 1000:g} ms"
    text = f"arguments could not be checked within {budget}, so send smaller or simpler arguments"
    return ArgumentProblem("$", text, "limits", f"arguments checked within {budget}")


def _scan(args: dict[Any, Any], limits: ArgumentLimits) -> int:
    """Refuse arguments deeper than ``max_depth`` or larger than about ``max_bytes``; return flags.

    One loop for flat arguments (the common case); an iterative walk otherwise, so nothing
    downstream ever sees input that could exhaust the stack.
    """
    if len(args) <= 32:
        flags = size = 0
        for key, value in args.items():
            kind = type(value)
            if kind is str:
                size += len(value) + 2  # and its quotes: an empty string is not free
            elif kind is int:
                if _too_long(value):
                    flags |= _ODD
            elif kind is float:
                flags |= _FLOAT
                if value - value:  # NaN or infinity
                    flags |= _ODD
            elif kind is not bool and value is not None:
                return _scan_nested(args, limits)
            if type(key) is str:
                size += len(key)
            else:
                flags |= _ODD
        if size <= limits.max_bytes:
            return flags
    return _scan_nested(args, limits)


def _uniform(values: Collection[Any]) -> tuple[int, int] | None:
    """(size, flags) of ``values`` when all are of one plain scalar type; else None."""
    ends = (values[0], values[-1]) if type(values) is list else (next(iter(values)), next(reversed(values)))  # type: ignore[call-overload]
    if type(ends[0]) is not type(ends[1]):
        return None  # mixed: the caller's loop is cheaper than finding out at C speed
    kinds = set(map(type, values))
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    count = len(values)
    if kind is str:
        return sum(map(len, values)) + 2 * count, 0
    if kind is int:
        return 8 * count, _ODD if _too_long(min(values)) or _too_long(max(values)) else 0
    if kind is float:
        return 8 * count, _FLOAT if all(map(math.isfinite, values)) else _FLOAT | _ODD
    if kind is bool or kind is type(None):
        return 4 * count, 0
    return None


def _scan_nested(root: Any, limits: ArgumentLimits) -> int:
    """The walk of :func:`_scan`, level by level (no tuple per container).

    An empty container adds its size and nothing else, so it is only kept when it is a level
    too deep; a long list is measured in chunks, so input far past ``max_bytes`` stops early.
    """
    max_depth, max_bytes, max_containers = limits.max_depth, limits.max_bytes, limits.max_containers
    flags = size = containers = 0
    level: list[Any] = [root]
    depth = 1
    while level:
        if depth > max_depth:
            raise limits.too_deep()  # (the wording every depth refusal has)
        deep = depth >= max_depth  # a container below this level is too deep, even an empty one
        below: list[Any] = []
        push = below.append
        if containers > max_containers:
            raise limits.too_many()
        for node in level:
            if size > max_bytes:
                raise _too_big(size, max_bytes)
            if type(node) is not dict and type(node) is not list and type(node) is not tuple:
                flags |= _ODD
            if isinstance(node, dict):
                if len(node) > 64 and set(map(type, node)) == {str}:
                    size += sum(map(len, node))
                else:
                    for key in node:
                        if type(key) is str:
                            size += len(key)
                        else:
                            flags |= _ODD
                            size += 8
                values: Collection[Any] = node.values()
            else:
                values = node
            chunks: Iterable[Collection[Any]] = (values,)
            if type(values) is list and len(values) > _CHUNK:
                chunks = (values[i : i + _CHUNK] for i in range(0, len(values), _CHUNK))
            for chunk in chunks:
                if size > max_bytes:
                    raise _too_big(size, max_bytes)
                if containers > max_containers:
                    raise limits.too_many()
                if len(chunk) > 64:  # a long run of one scalar type is measured at C speed
                    found = _uniform(chunk)
                    if found is not None:
                        size += found[0]
                        flags |= found[1]
                        continue
                for value in chunk:
                    kind = type(value)
                    if kind is str:
                        size += len(value) + 2  # and its quotes: an empty string is not free
                    elif kind is dict or kind is list or kind is tuple:  # jsonschema-rs reads a tuple as an array
                        if value or deep:
                            push(value)
                        size += 2
                        containers += 1
                    elif kind is int:
                        if _too_long(value):
                            flags |= _ODD
                        size += 8
                    elif kind is float:
                        flags |= _FLOAT
                        if value - value:
                            flags |= _ODD
                        size += 8
                    elif kind is bool or value is None:
                        size += 4
                    else:
                        flags |= _ODD
                        if isinstance(value, (dict, list, tuple)):  # a subclass: walked like the list or dict it is sent as
                            push(value)
                            containers += 1
                        elif isinstance(value, str):
                            size += len(value) + 2  # and its quotes: an empty string is not free
                        elif isinstance(value, (bytes, bytearray)):
                            size += len(value) + 2
                        elif isinstance(value, float):
                            flags |= _FLOAT
                        else:
                            size += 8
        depth += 1
        level = below
    if size > max_bytes:
        raise _too_big(size, max_bytes)
    if containers > max_containers:
        raise limits.too_many()
    return flags


def _branching(schema: Any) -> bool:
    """Whether an error's tree of alternatives may grow with the input's depth: ``anyOf``/``oneOf`` in a schema whose
    references recurse (an expression of two alternatives: 2**depth), or may (a dynamic reference, an anchor, another
    document's). Naming its first error would walk the tree past any budget (what the listing, cut at its budget, did
    not); alternatives without recursion make a tree as large as the schema, at most."""
    if next(_keyed(schema, "anyOf"), None) is None and next(_keyed(schema, "oneOf"), None) is None:
        return False
    if next(_keyed(schema, "$dynamicRef"), None) is not None or next(_keyed(schema, "$recursiveRef"), None) is not None:
        return True
    refs = [ref for ref in _keyed(schema, "$ref") if isinstance(ref, str)]
    if any(ref != "#" and not ref.startswith("#/") for ref in refs):
        return True  # an anchor, another document: where it leads is not followed here
    seen: set[str] = set()

    def recurses(pointer: str, path: tuple[str, ...]) -> bool:
        if any(pointer == p or p.startswith(pointer + "/") or pointer == "#" for p in path):
            return True  # back to a place on the way here, or to one holding it
        if pointer in seen:
            return False
        seen.add(pointer)
        inner = [ref for ref in _keyed(_pointed(schema, pointer[1:], None), "$ref") if isinstance(ref, str)]
        return any(recurses(ref, (*path, pointer)) for ref in inner)

    try:
        return any(recurses(ref, ()) for ref in refs)
    except RecursionError:  # a chain of references deeper than Python's stack: taken as one that may recurse
        return True


def check_limits(args: Any, limits: ArgumentLimits) -> None:
    """Refuse arguments nested deeper than ``max_depth`` or larger than about ``max_bytes``."""
    if type(args) is dict:
        _scan(args, limits)
    else:
        _scan_nested(args, limits)


_FINITE = "a finite number"  # what a NaN or an infinity is refused as, where the schema takes a number
#: An infinity as a refusal names it (a NaN is ``NaN``): the spelling of the listing's ``got NaN``.
_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}
_INDEX = re.compile(r"(?<=\[)(\d+)(?=\])")  # an array index in a JSON path: its digits, between brackets


def _non_finite(value: Any) -> str | None:
    """How a refusal names ``value`` if it is a NaN or an infinity, a float, a ``Decimal`` or another real number
    (numpy's ``float32``, ``longdouble``) (``NaN``, ``Infinity``, ``-Infinity``); None for any other value."""
    if isinstance(value, float):
        return None if math.isfinite(value) else _NON_FINITE.get(value, "NaN")
    if isinstance(value, _decimal()) and not value.is_finite():  # a signalling NaN too (comparing one raises)
        return "NaN" if value.is_nan() else "-Infinity" if value.is_signed() else "Infinity"
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        try:
            number = float(value)
            if math.isfinite(number) or (not math.isnan(number) and value != number):  # finite, past float's range
                return None
        except Exception:  # a float() that raises (a Fraction past float's range): no NaN, the schema judges it
            return None
        return _NON_FINITE.get(number, "NaN")
    return None


def _path_order(problem: ArgumentProblem) -> tuple[Any, ...]:
    """``problem``'s path as it sorts: as text, but an array index as a number (``$.a[2]`` before ``$.a[10]``).

    Each piece of text keeps its ``[``, so paths part where their texts part, as before.
    """
    pieces: list[Any] = _INDEX.split(problem.path)
    pieces[1::2] = map(int, pieces[1::2])
    return (*pieces, problem.keyword)


def _odd_problems(
    root: dict[Any, Any] | list[Any], numberless: Callable[[tuple[Any, ...]], bool] | None = None
) -> list[ArgumentProblem]:
    """What no JSON document holds: non-string keys, NaN and infinities, integers past the
    int-to-text limit (4300 digits unless the application set another).

    A NaN or an infinity at a path where ``numberless`` says the schema takes no number is left
    out (:meth:`CompiledSchema._odd_refusal` has the schema say what it takes there).
    """
    problems: list[ArgumentProblem] = []
    max_digits, int_bound = _int_bound()
    stack: list[tuple[Any, tuple[Any, ...]]] = [(root, ())]
    while stack and len(problems) < MAX_PROBLEMS:
        node, path = stack.pop()
        items: Iterable[tuple[Any, Any]] = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(node, dict) and not isinstance(key, str):
                got, shown = json_type(key), _preview(key)
                said = got if shown == got else f"{got} {shown}"  # "got null", not "got null null"
                problems.append(
                    ArgumentProblem(json_path(path), f"property names must be strings, got {said}", "type", "string", got)
                )
                continue
            where = (*path, key)
            named = _non_finite(value)  # as the listing (and JSON-ish text) spells it, not Python's "nan"
            if named is not None:
                if numberless is None or not numberless(where):
                    problems.append(ArgumentProblem(json_path(where), f"expected {_FINITE}, got {named}", "type", _FINITE, named))
            elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= int_bound:
                digits = int(value.bit_length() * 0.30103) + 1
                problems.append(
                    ArgumentProblem(
                        json_path(where),
                        f"expected an integer of at most {max_digits} digits, got one of about {digits} digits",
                        "limits",
                        f"at most {max_digits} digits",
                        f"~{digits} digits",
                    )
                )
            elif isinstance(value, (dict, list, tuple)):
                stack.append((value, where))
    problems.sort(key=_path_order)
    return problems


# ---------------------------------------------------------------------------- the Python validator

_SearchFn = Callable[[str, str], "bool | None"]  # (pattern, text) -> matched, or None when out of time


def _warm_patterns(schema: Any) -> None:
    """Compile every ``pattern`` and ``patternProperties`` key of ``schema`` (:func:`_patterns`) for the Python matcher."""
    for pattern in _patterns(schema):
        with contextlib.suppress(Exception):  # a pattern the definition check refused
            _python_pattern(pattern)


@functools.lru_cache(maxsize=4096)
def _python_pattern(pattern: str) -> Any:
    """The compiled ``regex`` pattern the Python backend matches the ECMA-262 ``pattern`` with, rewritten by
    :func:`_formats.python_pattern` (raises ``regex.error``)."""
    import regex

    return regex.compile(_formats.python_pattern(pattern))


def _search_python(pattern: str, text: str) -> bool | None:
    rx = _python_pattern(pattern)
    budget = _BUDGET.get()
    remaining = PATTERN_BUDGET if budget is None else budget.left()
    if remaining <= 0:
        return None
    try:
        return rx.search(text, timeout=remaining) is not None
    except TimeoutError:
        return None


@functools.lru_cache(maxsize=4096)
def _rust_matcher(pattern: str) -> Any:
    rs = _rust()
    return rs.validator_for(
        {"pattern": rust_pattern(pattern)}, pattern_options=rs.FancyRegexOptions(backtrack_limit=BACKTRACK_LIMIT)
    )


def _search_rust(pattern: str, text: str) -> bool | None:
    """The same verdict jsonschema-rs gave (used when listing its refusals); Python for what it cannot take.

    None when jsonschema-rs gave up at its backtracking limit: not matched in time, which is not a mismatch.
    """
    try:
        error = next(iter(_rust_matcher(pattern).iter_errors("" + text)), None)
    except Exception:
        return _search_python(pattern, text)
    return True if error is None else None if _gave_up(error) else False


def _gave_up(error: Any) -> bool:
    """Whether a jsonschema-rs error is its pattern matcher giving up at the backtracking limit."""
    return isinstance(error.kind, _rust().ValidationErrorKind.BacktrackLimitExceeded)


def _timed_out() -> Any:
    from jsonschema.exceptions import ValidationError

    return ValidationError(_TIMED_OUT)


def _extras(instance: Mapping[str, Any], schema: Mapping[str, Any], search: _SearchFn) -> Iterator[str]:
    """The keys neither ``properties`` nor ``patternProperties`` cover, lazily (a refusal lists a few)."""
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    if not patterns:
        return (k for k in instance if k not in properties)
    return (k for k in instance if k not in properties and not any(search(p, k) for p in patterns))


_NOT_MULTIPLE = "is not a multiple of the divisor"


@functools.cache
def _decimal() -> Any:
    """``decimal.Decimal``, imported when a ``multipleOf`` first needs it (once: an import statement costs 1-2 us)."""
    from decimal import Decimal

    return Decimal


def _ratio(number: Any) -> tuple[int, int]:
    """The number ``number`` spells, exactly, as numerator and denominator: a float the decimal number of its
    shortest repr, as JSON text spells it (``float.__repr__``: a subclass's own repr, ``np.float64(2.5)``, is not read)."""
    if isinstance(number, float):
        number = _decimal()(float.__repr__(number))
    return number.as_integer_ratio()  # type: ignore[no-any-return]


def _is_multiple(number: Any, divisor: tuple[int, int]) -> bool:
    """Whether ``number`` is a whole multiple of ``divisor`` (a :func:`_ratio`), exactly, on the decimal numbers
    the JSON spells: ``19.99`` is a multiple of ``0.01`` and ``9e22`` of ``3``; ``0.30000000000000004`` is not of ``0.01``."""
    try:
        top, bottom = _ratio(number)
    except (ValueError, OverflowError):  # NaN or an infinity (the listing of a refusal for one elsewhere)
        return False
    return top * divisor[1] % (bottom * divisor[0]) == 0


def _keywords(search: _SearchFn, draft2020: bool) -> dict[str, Callable[..., Iterator[Any]]]:
    """Keyword functions that match patterns with ``search`` and stay linear on hostile input."""
    from jsonschema._utils import find_evaluated_item_indexes_by_schema
    from jsonschema.exceptions import ValidationError

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string"):
            found = search(patrn, instance)
            if found is None:
                yield _timed_out()
            elif not found:
                yield ValidationError("does not match the pattern")

    def pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, value in instance.items():
                found = search(patrn, key)
                if found is None:
                    error = _timed_out()
                    error.relative_path.append(key)
                    yield error
                elif found:
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(validator: Any, ap: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        if validator.is_type(ap, "object"):
            for extra in _extras(instance, schema, search):
                yield from validator.descend(instance[extra], ap, path=extra)
        elif not ap:
            extras = list(itertools.islice(_extras(instance, schema, search), MAX_PROBLEMS))  # as many as are listed
            if extras:
                error = ValidationError("unexpected properties")
                error.harness_extras = extras
                yield error

    def unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if unique and validator.is_type(instance, "array") and not _unique(instance):
            yield ValidationError("has non-unique elements")

    def evaluated_keys(validator: Any, instance: Any, schema: Any) -> set[str]:
        # jsonschema's find_evaluated_property_keys_by_schema, with a set and the guarded matcher.
        if validator.is_type(schema, "boolean"):
            return set()
        keys: set[str] = set()
        for ref_keyword in ("$ref", "$dynamicRef"):
            ref = schema.get(ref_keyword)
            if ref is not None:
                resolved = validator._resolver.lookup(ref)
                inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
                keys |= evaluated_keys(inner, instance, resolved.contents)
        properties = schema.get("properties")
        if validator.is_type(properties, "object"):
            keys |= properties.keys() & instance.keys()
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            subschema = schema.get(keyword)
            if subschema is True or subschema == {}:
                keys |= instance.keys()
            elif subschema is not None and subschema is not False:
                keys |= {k for k, v in instance.items() if next(validator.descend(v, subschema), None) is None}
        for patrn in schema.get("patternProperties", {}):
            keys |= {k for k in instance if search(patrn, k)}
        for key, subschema in schema.get("dependentSchemas", {}).items():
            if key in instance:
                keys |= evaluated_keys(validator, instance, subschema)
        for keyword in ("allOf", "oneOf", "anyOf"):
            for subschema in schema.get(keyword, []):
                if next(validator.descend(instance, subschema), None) is None:
                    keys |= evaluated_keys(validator, instance, subschema)
        if "if" in schema:
            if validator.evolve(schema=schema["if"]).is_valid(instance):
                keys |= evaluated_keys(validator, instance, schema["if"])
                if "then" in schema:
                    keys |= evaluated_keys(validator, instance, schema["then"])
            elif "else" in schema:
                keys |= evaluated_keys(validator, instance, schema["else"])
        return keys

    def unevaluated_properties(validator: Any, up: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        evaluated = evaluated_keys(validator, instance, schema)
        if up is True:
            return
        extras = [
            k
            for k in instance
            if k not in evaluated
            and (up is False or next(validator.descend(instance[k], up, path=k, schema_path=k), None) is not None)
        ]
        if extras:
            error = ValidationError(f"{len(extras)} unevaluated properties")
            error.harness_extras = extras
            yield error

    def unevaluated_items(validator: Any, ui: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "array"):
            return
        evaluated = set(find_evaluated_item_indexes_by_schema(validator, instance, schema))
        if any(i not in evaluated for i in range(len(instance))):
            yield ValidationError("unevaluated items are not allowed")

    def multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Iterator[Any]:
        number = validator.is_type(instance, "number") and validator.is_type(divisor, "number") and divisor > 0
        if number and not _is_multiple(instance, _ratio(divisor)):  # as jsonschema-rs is told to decide (_MultipleOf)
            yield ValidationError(_NOT_MULTIPLE)

    _unique = _all_unique if search is _search_python else _unique_rust
    found: dict[str, Callable[..., Iterator[Any]]] = {
        "multipleOf": multiple_of,
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
        "uniqueItems": unique_items,
    }
    if draft2020:
        found["unevaluatedProperties"] = unevaluated_properties
        found["unevaluatedItems"] = unevaluated_items
    return found


def _quiet(base: Any) -> dict[str, Callable[..., Iterator[Any]]]:
    """``base``'s keywords whose jsonschema text is the repr of the whole value (33 ms for a large
    one), as functions that build no text from it (:func:`_message` words the problem); and
    ``propertyNames``, whose problems keep the name they are about (``harness_name``).
    """
    from jsonschema import _keywords as kw
    from jsonschema import _legacy_keywords as legacy
    from jsonschema._utils import equal
    from jsonschema.exceptions import ValidationError

    def type_(validator: Any, types: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not any(validator.is_type(instance, kind) for kind in ([types] if isinstance(types, str) else types)):
            yield ValidationError("is not of the type")

    def enum(validator: Any, choices: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not any(equal(choice, instance) for choice in choices):
            yield ValidationError("is not one of the choices")

    def not_(validator: Any, subschema: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.evolve(schema=subschema).is_valid(instance):
            yield ValidationError("matches the schema it must not")

    def any_of(validator: Any, alternatives: Any, instance: Any, schema: Any) -> Iterator[Any]:
        errors = []
        for index, subschema in enumerate(alternatives):
            found = list(validator.descend(instance, subschema, schema_path=index))
            if not found:
                return
            errors.extend(found)
        yield ValidationError("matches none of the alternatives", context=errors)

    def one_of(validator: Any, alternatives: Any, instance: Any, schema: Any) -> Iterator[Any]:
        errors = []
        for index, subschema in enumerate(alternatives):
            found = list(validator.descend(instance, subschema, schema_path=index))
            if not found:
                if any(validator.evolve(schema=other).is_valid(instance) for other in alternatives[index + 1 :]):
                    yield ValidationError("matches more than one of the alternatives")
                return
            errors.extend(found)
        yield ValidationError("matches none of the alternatives", context=errors)

    def counted(kind: str, most: bool) -> Callable[..., Iterator[Any]]:
        def count(validator: Any, limit: Any, instance: Any, schema: Any) -> Iterator[Any]:
            if validator.is_type(instance, kind) and (len(instance) > limit if most else len(instance) < limit):
                yield ValidationError("has too many" if most else "has too few")

        return count

    def contains(validator: Any, subschema: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "array"):
            return
        draft7 = base.VALIDATORS["contains"] is legacy.contains_draft6_draft7  # no minContains, maxContains
        least, most = (1, None) if draft7 else (schema.get("minContains", 1), schema.get("maxContains"))
        matches = validator.evolve(schema=subschema).is_valid
        found = 0
        for item in instance:
            if matches(item):
                found += 1
                if most is not None and found > most:
                    text = f"Too many items match the given schema (expected at most {most})"
                    yield ValidationError(text, validator="maxContains", validator_value=most)
                    return
                if most is None and found >= least:
                    return
        if not found and least:
            yield ValidationError("no item matches")
        elif found < least:
            text = f"Too few items match the given schema (expected at least {least} but only {found} matched)"
            yield ValidationError(text, validator="minContains", validator_value=least)

    # `items: false` after prefixItems (additionalItems after an items list): the value is how many are allowed.
    def items(validator: Any, subschema: Any, instance: Any, schema: Any) -> Iterator[Any]:
        allowed = len(schema.get("prefixItems", ()))
        if subschema is False and validator.is_type(instance, "array") and len(instance) > allowed:
            yield ValidationError("has items past the allowed ones", validator_value=allowed)
        else:
            yield from kw.items(validator, subschema, instance, schema)

    def additional_items(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
        listed = schema.get("items")
        if extra is False and isinstance(listed, list) and validator.is_type(instance, "array") and len(instance) > len(listed):
            yield ValidationError("has items past the allowed ones", validator_value=len(listed))
        else:
            yield from legacy.additionalItems(validator, extra, instance, schema)

    def property_names(validator: Any, subschema: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "object"):
            for name in instance:
                for error in validator.descend(instance=name, schema=subschema):
                    error.harness_name = name
                    yield error

    quiet: dict[Any, Callable[..., Iterator[Any]]] = {
        kw.type: type_,
        kw.enum: enum,
        kw.not_: not_,
        kw.anyOf: any_of,
        kw.oneOf: one_of,
        kw.minItems: counted("array", most=False),
        kw.maxItems: counted("array", most=True),
        kw.minProperties: counted("object", most=False),
        kw.maxProperties: counted("object", most=True),
        kw.contains: contains,
        legacy.contains_draft6_draft7: contains,
        kw.items: items,
        legacy.additionalItems: additional_items,
        kw.propertyNames: property_names,
    }
    return {name: quiet[fn] for name, fn in base.VALIDATORS.items() if fn in quiet}


def _frozen(value: Any) -> Any:
    """A hashable form under JSON Schema equality (1 == 1.0, true != 1, objects unordered)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, dict):
        return ("o", frozenset((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("a", tuple(_frozen(v) for v in value))
    if value is None or isinstance(value, str):
        return value
    return ("?", id(value))


def _all_unique(items: list[Any]) -> bool:
    seen: set[Any] = set()
    for i, item in enumerate(items):
        if not i % 256:
            _tick()
        key = _frozen(item)
        if key in seen:
            return False
        seen.add(key)
    return True


@functools.cache
def _rust_unique() -> Callable[[Any], bool]:
    return _rust().validator_for({"uniqueItems": True}).is_valid  # type: ignore[no-any-return]


def _unique_rust(items: list[Any]) -> bool:
    """jsonschema-rs's verdict on ``uniqueItems`` (the one the listing explains); Python for what it cannot read."""
    try:
        return _rust_unique()(items)
    except Exception:
        return _all_unique(items)


@functools.cache
def _extended(base: Any, engine: str, listing: bool = False, false_schemas: bool = False) -> Any:
    """``base`` with the guarded pattern and quiet keywords; for ``listing``, every keyword also watches the listing time.

    With ``false_schemas`` (the schema holds a ``false``), a ``false`` subschema's error has
    the path of the value it refuses and no repr of it: jsonschema's ``descend`` writes
    ``False schema does not allow <repr>`` at the path of the object holding it (``$`` for
    ``properties: {x: false}``), 120 ms for 60 integers of 4,000 digits.
    """
    from jsonschema import _legacy_keywords as legacy
    from jsonschema import validators
    from jsonschema.exceptions import ValidationError

    search = _search_rust if engine == "rust" else _search_python
    keywords = {**base.VALIDATORS, **_quiet(base), **_keywords(search, base is validators.Draft202012Validator)}
    # 2019-09 split `dependencies` in two; jsonschema-rs still reads it there, so both backends do.
    keywords.setdefault("dependencies", legacy.dependencies_draft4_draft6_draft7)
    if listing:
        keywords = {name: _guarded(fn) for name, fn in keywords.items()}
    checker = base.TYPE_CHECKER.redefine_many({"array": _is_array, "number": _is_number})
    extended = validators.extend(base, keywords, type_checker=checker)
    extended.evolve = _evolve_extended(extended, base, engine, listing, false_schemas)  # this class only
    if not false_schemas:
        return extended
    descend = extended.descend

    def descend_quietly(
        self: Any, instance: Any, schema: Any, path: Any = None, schema_path: Any = None, resolver: Any = None
    ) -> Iterator[Any]:
        if schema is not False:
            return descend(self, instance, schema, path, schema_path, resolver)  # type: ignore[no-any-return]
        error = ValidationError("no value is allowed here", validator=None, validator_value=None, instance=instance, schema=False)
        if path is not None:
            error.path.appendleft(path)
        if schema_path is not None:
            error.schema_path.appendleft(schema_path)
        return iter((error,))

    extended.descend = descend_quietly  # this class only: extend() made it
    return extended


def _evolve_extended(extended: Any, base: Any, engine: str, listing: bool, false_schemas: bool) -> Callable[..., Any]:
    """``evolve`` for an :func:`_extended` class: a subschema (one a ``$ref`` lands on too) keeps the plugin's keywords.

    jsonschema's own ``evolve`` takes the class named by the ``$schema`` of the subschema it
    moves to: for ``{"$schema": ..., "properties": {"child": {"$ref": "#"}}}`` the stock class
    of that draft, without the pattern time budget, the quiet keywords or exact ``multipleOf``
    (10 s for one 26-character string). Here the same dialect keeps this class, and a
    subschema naming another dialect gets that dialect's extended class.
    """
    import attrs
    from jsonschema import validators

    fields = [(field.name, field.alias) for field in attrs.fields(extended) if field.init]

    def evolve(self: Any, **changes: Any) -> Any:
        schema = changes.setdefault("schema", self.schema)
        cls = extended
        if isinstance(schema, dict) and "$schema" in schema:
            dialect = validators.validator_for(schema, default=base)
            if dialect is not base:
                cls = _extended(dialect, engine, listing, false_schemas)
        for name, alias in fields:
            if alias not in changes:
                changes[alias] = getattr(self, name)
        return cls(**changes)

    return evolve


def _is_array(checker: Any, instance: Any) -> bool:
    """A list, or a tuple from a caller in the process (sent as the list it is, read so by jsonschema-rs)."""
    return isinstance(instance, (list, tuple))


def _is_number(checker: Any, instance: Any) -> bool:
    """A real number (``Decimal`` and ``Fraction`` too), not a bool; not a ``complex``, which jsonschema counts
    as a number (``numbers.Number``) and no JSON holds: ``expected number, got complex``, as other non-JSON values."""
    kind = type(instance)
    if kind is int or kind is float:
        return True
    if isinstance(instance, bool) or not isinstance(instance, numbers.Number):
        return False
    return isinstance(instance, numbers.Real) or not isinstance(instance, numbers.Complex)  # Decimal is not Complex


def _holds_false(schema: Any) -> bool:
    """Whether ``false`` appears anywhere in ``schema`` (as a subschema or not: a cheap, safe over-estimate)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if node is False:
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


@functools.cache
def _format_checker(base: Any) -> Any:
    checker = _formats.strict_format_checker(base.FORMAT_CHECKER)
    if "regex" in checker.checkers:
        checker.checkers["regex"] = (_is_regex, ())
    return checker


#: Characters a ``format: "regex"`` value may have (reading one takes up to ~3 us a character).
MAX_REGEX_LENGTH = 1000
#: Levels a ``format: "regex"`` value's parentheses may be nested (counted outside escapes and character classes).
MAX_REGEX_DEPTH = 100
# escapes, classes and comments (``(?#...)``, to its first ")"): their parentheses nest nothing
_OUTSIDE_PARENS = re.compile(r"\(\?#[^)]*\)|\\.|\[\^?\]?(?:\\.|[^\]\\])*\]", re.DOTALL)
_PAREN_STEP = {"(": 1, ")": -1}
_QUIET = threading.Lock()  # catch_warnings swaps the process's filters: one reading at a time, so none is left behind


def _is_regex(value: object) -> bool:
    """The check of ``format: "regex"`` on both backends: :func:`_regex_fault` finds nothing (anything but a string passes)."""
    return not isinstance(value, str) or _regex_fault(value) is None


def _regex_fault(value: str) -> str | None:
    """Why ``value`` is not a regular expression in Python's ``re`` syntax (what jsonschema's own check takes), or None.

    Read by ``re``'s parser with its warnings silenced, and checked for what only its compiler
    refuses (:func:`_lookbehind_fault`), never compiled: compiling ``(?i)`` and a thousand wide
    ranges took 6 s. Within :data:`MAX_REGEX_LENGTH` and :data:`MAX_REGEX_DEPTH`, so reading it
    takes at most a few ms and no input exhausts the stack. Cached: a refusal reads it up to three times.
    """
    if len(value) > MAX_REGEX_LENGTH:  # (checked before the cache, which keeps no longer value)
        return f"{len(value)} characters; a regex here may have at most {MAX_REGEX_LENGTH}"
    return _read_regex(value)


@functools.lru_cache(maxsize=64)
def _read_regex(value: str) -> str | None:
    """:func:`_regex_fault` of a value within :data:`MAX_REGEX_LENGTH`."""
    nested = f"parentheses nested more than {MAX_REGEX_DEPTH} levels deep"
    if value.count("(") > MAX_REGEX_DEPTH:
        steps = map(_PAREN_STEP.get, _OUTSIDE_PARENS.sub("", value), itertools.repeat(0))
        if max(itertools.accumulate(steps), default=0) > MAX_REGEX_DEPTH:
            return nested
    try:
        with _QUIET, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FutureWarning "Possible nested set" and the like, to stderr
            parsed = sre_parse.parse(value)
        return _lookbehind_fault(parsed)
    except (re.error, OverflowError, ValueError) as exc:  # a repetition count past 2**32; (?L), (?au): flags no str takes
        return str(exc)
    except RecursionError:  # within the depth limit, but called with little of the stack left
        return nested


def _lookbehind_fault(parsed: Any) -> str | None:
    """What ``re``'s compiler refuses in a parsed pattern, as it words it: a look-behind of no fixed width (nothing else)."""
    stack = [parsed]
    while stack:
        for op, av in stack.pop().data:
            if op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT) and av[0] < 0:
                low, high = av[1].getwidth()
                if low > sre_compile.MAXCODE:
                    return "looks too much behind"
                if low != high:
                    return "look-behind requires fixed-width pattern"
            for part in av if isinstance(av, (tuple, list)) else (av,):
                subs = part if isinstance(part, list) else (part,)  # a branch holds a list of subpatterns
                stack.extend(sub for sub in subs if isinstance(sub, sre_parse.SubPattern))
    return None


@functools.cache
def _no_remote() -> Any:
    import referencing
    import referencing.exceptions

    def refuse(uri: str) -> Any:
        raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]

    return referencing.Registry(retrieve=refuse)  # type: ignore[call-arg]


def _python_validator(schema: Mapping[str, Any] | bool, formats: bool, engine: str, *, listing: bool = False) -> Any:
    import regex  # noqa: F401 - imported here, not inside the first pattern match's time budget
    from jsonschema import validators

    _warm_patterns(schema)  # compiled now, so no pattern budget is spent compiling

    base = validators.validator_for(schema if isinstance(schema, bool) else dict(schema), default=validators.Draft202012Validator)
    checker = _format_checker(base) if formats else None
    extended = _extended(base, engine, listing, _holds_false(schema))
    return extended(schema, format_checker=checker, registry=_no_remote())


# ---------------------------------------------------------------------------- compiled schemas


class CompiledSchema:
    """A schema compiled once: a fast verdict, the full error list, integer and default plans."""

    __slots__ = (
        "_defaults",
        "_fast",
        "_formats",
        "_integers",
        "_lister",
        "_py",
        "_refs",
        "_rs",
        "_secret_keys",
        "_surrogates_matter",
        "backend",
        "schema",
    )

    def __init__(
        self,
        schema: Mapping[str, Any] | bool,
        backend: Backend = "auto",
        *,
        formats: bool = True,
        extra_secret_keys: Iterable[str] = (),
    ) -> None:
        self.schema = schema
        self._secret_keys = _key_names(extra_secret_keys)
        rs = _rust() if backend != "python" else None
        if backend == "rust" and rs is None:
            raise RuntimeError("backend='rust' needs the jsonschema-rs package (pip install jsonschema-rs)")
        self.backend = "rust" if rs is not None else "python"
        self._formats = formats
        self._fast: Callable[[Any], bool] | None = None
        self._rs: Any = None
        self._py: Any = None
        self._lister: Any = None
        self._refs = _Refs(schema)
        self._surrogates_matter = False
        if rs is not None:
            old = _older_draft(schema, self._refs.draft)
            self._rs = rs.validator_for(
                _rust_schema(schema, old),
                formats=_rust_formats(schema, old) if formats else None,
                validate_formats=formats,
                keywords=_rust_keywords(schema),
                retriever=_refuse_remote_rs,
                pattern_options=rs.FancyRegexOptions(backtrack_limit=BACKTRACK_LIMIT),
            )
            self._fast = self._rs.is_valid
            self._surrogates_matter = _tells_surrogates_apart(schema)
        else:
            self._python()
        self._integers = _integer_plan(schema, self._refs)
        self._defaults = _integral_defaults(_default_plan(schema, self._refs), self._integers)

    def _python(self) -> Any:
        if self._py is None:
            self._py = _python_validator(self.schema, self._formats, self.backend)
        return self._py

    def _listing(self) -> Any:
        if self._lister is None:
            self._lister = _python_validator(self.schema, self._formats, self.backend, listing=True)
        return self._lister

    def _rust_verdict(self, instance: Any, flags: int) -> bool | None:
        """jsonschema-rs's verdict, or None where it cannot judge ``instance`` exactly (jsonschema decides then).

        What it cannot read as it is (a subclass or a lone surrogate) it judges as :meth:`_rust_view` gives it.
        """
        fast = self._fast
        if fast is None:
            return None
        if not flags & _ODD:
            try:
                return bool(fast(instance))
            except UnicodeEncodeError:  # a lone surrogate
                pass
            except Exception:
                return None
        view = self._rust_view(instance)
        if view is None:
            return None
        try:
            return bool(fast(view[0]))
        except Exception:
            return None

    def _python_first(self, instance: Any, now: Callable[[], float]) -> tuple[bool, Any]:
        """jsonschema's verdict and first error (None when valid, or when it raised: then invalid).

        Where jsonschema-rs could not judge (backend ``"rust"``), the verdict has
        :data:`VERDICT_BUDGET` seconds; past it the arguments are refused.
        """
        python = self.backend == "python"
        validator = self._python() if python else self._listing()  # built before the clock starts
        token = _LISTING.set(None if python else _Budget(VERDICT_BUDGET, now))
        try:
            first = next(validator.iter_errors(instance), None)
        except _OutOfTime:
            raise ToolArgumentError([_too_slow()]) from None
        except Exception:
            return False, None
        finally:
            _LISTING.reset(token)
        return first is None, first

    def check(
        self, args: dict[str, Any], limits: ArgumentLimits, clock: Clock | None = None, plain: bool = False
    ) -> dict[str, Any]:
        """``args`` validated: limits, verdict, then integers and defaults filled in (in a copy).

        ``clock`` times the pattern, verdict and listing budgets (the system clock by default).
        ``plain=True`` vouches that ``args`` holds only JSON values within ``limits`` (decoded
        from JSON text, see :attr:`Call.decoded`), so they are not walked again.
        """
        flags = _FLOAT if plain else _scan(args, limits)  # JSON text may hold floats; nothing else to flag
        if flags & _ODD:
            odd = _odd_problems(args)
            if odd:
                raise ToolArgumentError(self._odd_refusal(args, odd, clock))
        verdict = self._rust_verdict(args, flags)
        if verdict is not True:
            self._listing()  # built (jsonschema imported) before the clock starts
            now = clock.now if clock is not None else time.monotonic
            token = _BUDGET.set(_Budget(PATTERN_BUDGET, now))  # one pattern budget for the verdict and the listing
            try:
                first = None
                if verdict is None:
                    verdict, first = self._python_first(args, now)
                if not verdict:
                    raise ToolArgumentError(self._problems(args, clock, first))
            finally:
                _BUDGET.reset(token)
        if flags & _FLOAT and self._integers is not None:
            try:
                args = _to_integers(args, self._integers)
            except _Inexact as exc:
                raise exc.refusal(self._secrets()) from None
        if self._defaults is not None:
            args = _fill(args, self._defaults)
        return args

    def is_valid(self, instance: Any) -> bool:
        """The verdict for any JSON value (default limits apply: deeper or larger input raises ToolArgumentError)."""
        flags = _scan_nested([instance], ArgumentLimits())
        if flags & _ODD and _odd_problems([instance]):
            return False
        verdict = self._rust_verdict(instance, flags)
        if verdict is not None:
            return verdict
        validator = self._python()
        token = _BUDGET.set(_Budget(PATTERN_BUDGET, time.monotonic))
        try:
            return bool(validator.is_valid(instance))
        finally:
            _BUDGET.reset(token)

    def problems(self, instance: Any, clock: Clock | None = None) -> list[ArgumentProblem]:
        """What is wrong, each with its JSON path, keyword, what was expected and what came.

        At most :data:`MAX_PROBLEMS`; listing stops after :data:`LISTING_BUDGET` seconds on
        ``clock``. When it found nothing by then, jsonschema-rs's first error is named.
        """
        return self._problems(instance, clock, None)

    def _problems(
        self, instance: Any, clock: Clock | None, first: Any, known: Iterable[ArgumentProblem] = ()
    ) -> list[ArgumentProblem]:
        """:meth:`problems`; ``first`` is the Python verdict's first error, named if the listing finds nothing;
        ``known`` are problems found before, listed with the listing's."""
        found: list[ArgumentProblem] = list(known)
        before = len(found)
        secrets = self._secrets()
        validator = self._listing()  # built (jsonschema imported) before the clock starts
        now = clock.now if clock is not None else time.monotonic
        listing = _Budget(LISTING_BUDGET, now)
        token = _BUDGET.set(_BUDGET.get() or _Budget(PATTERN_BUDGET, now))
        listing_token = _LISTING.set(listing)
        refs_token = _LISTED_REFS.set(self._refs)
        stopped = ""
        late = False  # out of time after a problem: stop at the next one, not after it as the last
        try:
            for error in validator.iter_errors(instance):
                if late:
                    raise _OutOfTime
                found.extend(_describe(error, secrets))
                if len(found) >= MAX_PROBLEMS:
                    stopped = f"only the first {MAX_PROBLEMS} problems are listed"
                    break
                if listing.left() <= 0:  # the rest of the walk gets one more budget to tell whether another follows
                    late = True
                    listing.deadline = listing.now() + LISTING_BUDGET
        except _OutOfTime:
            stopped = "more problems may follow; fix these first"
        except Exception as exc:
            reason = f"arguments could not be checked completely ({type(exc).__name__})"
            found.append(ArgumentProblem("$", reason, "schema", "arguments made of JSON values"))
        finally:
            _LISTED_REFS.reset(refs_token)
            _LISTING.reset(listing_token)
            _BUDGET.reset(token)
        # Out of time, or the backends disagree: the verdict's own first error names the place, unless its error tree
        # may grow with the input (alternatives under a $ref that recurses: one that doubles with each level).
        if len(found) == before and not (stopped and _branching(self.schema)):
            found += _describe(first, secrets) if first is not None else self._rust_problems(instance)
        unique = sorted(_distinct_problems(found), key=_path_order)[:MAX_PROBLEMS]
        if not unique and stopped:
            stopped = ""
            text = f"arguments do not match the schema; finding where took longer than {LISTING_BUDGET * 1000:g} ms"
            unique.append(
                ArgumentProblem("$", text + ", so send smaller or simpler arguments", "limits", "arguments that match the schema")
            )
        elif not unique:  # what no JSON holds (1e400 read as infinity), or what neither backend could place
            odd = _odd_problems(instance) if isinstance(instance, (dict, list)) else []
            unique = odd[:MAX_PROBLEMS] or [
                ArgumentProblem("$", "arguments do not match the schema", "schema", "arguments that match the schema")
            ]
        if stopped:  # every problem says what was expected, the note on a listing cut short too
            unique.append(ArgumentProblem.listing_cut(stopped))
        return unique

    def _odd_refusal(self, args: dict[Any, Any], odd: list[ArgumentProblem], clock: Clock | None) -> list[ArgumentProblem]:
        """The problems of ``args`` holding what no JSON document holds (``odd``, from :func:`_odd_problems`).

        A NaN or an infinity where the schema takes no number is told what the schema takes there
        (``expected string, got NaN``, by the listing, which reads it as a number): "expected a
        finite number" would have the model send a number, refused again. Where one is refused as
        not finite, that alone is said of it (not the listing's ``expected a number <= 10``).
        """
        if all(problem.expected != _FINITE for problem in odd):
            return odd
        planner = _IntegerPlanner(self._refs)
        numbers = planner.plan(self.schema, 0, frozenset(), self._refs.resolver)
        kept = _odd_problems(args, lambda where: _numberless(numbers, where, planner))
        if kept == odd:
            return odd
        finite = {problem.path for problem in kept if problem.expected == _FINITE}
        return [p for p in self._problems(args, clock, None, kept) if p.path not in finite or p in kept]

    def _rust_view(self, instance: Any) -> tuple[Any, bool] | None:
        """What jsonschema-rs judges for ``instance`` it cannot read as it is, and whether lone surrogates in it
        stand in (:func:`_plain`); None where it cannot judge it, or the schema could tell a surrogate from its stand-in."""
        return _plain(instance, not self._surrogates_matter)

    def _rust_problems(self, instance: Any) -> list[ArgumentProblem]:
        """jsonschema-rs's first error for ``instance``, worded as the listing words it (none where it cannot judge)."""
        validator = self._rs
        if validator is None:
            return []
        stood = False
        try:
            try:
                validator.validate(instance)
            except _rust().ValidationError:
                raise
            except Exception:  # what it cannot read as it is: a subclass, a lone surrogate
                view = self._rust_view(instance)
                if view is None:
                    return []
                stood = view[1]
                validator.validate(view[0])
        except _rust().ValidationError as error:
            return _describe(_read_rust(error, self._refs, instance, stood=stood), self._secrets())
        except Exception:
            return []
        return []

    def _secrets(self) -> Redactor:
        """The redactor of this schema's refusals: :data:`harness_one.MODEL_SECRET_KEYS` and the extra key names."""
        return _secrets(self._secret_keys)

    def fill_defaults(self, instance: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``instance`` with schema defaults for missing properties (the original is untouched)."""
        if not self._defaults:
            return instance
        return _fill(instance, self._defaults)


def compile_schema(
    schema: Mapping[str, Any] | bool, backend: Backend = "auto", *, formats: bool = True, extra_secret_keys: Iterable[str] = ()
) -> CompiledSchema:
    """Compile ``schema`` for repeated validation (remote references are never fetched).

    ``formats`` asserts the ``format`` keyword (harness-one's default; the JSON Schema
    specification's default is annotation only). ``extra_secret_keys``: key names whose values
    its refusals do not show, besides :data:`harness_one.MODEL_SECRET_KEYS` (see :class:`ValidationPlugin`).
    """
    return CompiledSchema(schema, backend, formats=formats, extra_secret_keys=extra_secret_keys)


# ---------------------------------------------------------------------------- integers and defaults

# [this value is an integer, properties, items, prefix items, additional properties, pattern properties];
# a property or pattern whose plan is None keeps ``additionalProperties``' plan off the names it covers.
# A list, so that a recursive ``$ref`` makes a plan that holds itself.
_IntPlan = list[Any]


def _integer_plan(schema: Any, refs: _Refs) -> _IntPlan | None:
    """Where a validated ``2.0`` becomes ``2``: where the schema takes integers and no other numbers
    (JSON Schema's integer rule: ``2.0`` passed as an integer there).

    Followed: properties, pattern properties, additional properties, items, prefix items,
    ``allOf`` and ``$ref``s within the schema, to a pointer or an anchor (one back into a ``$ref``
    being followed gives the plan being made for it: a recursive schema is a plan that holds
    itself, at any depth); ``anyOf``/``oneOf`` and ``if``/``then``/``else`` (a missing ``then`` or
    ``else`` takes anything), each place an integer only where every alternative takes no
    other numbers there; ``dependentSchemas`` and the schemas of ``dependencies`` (draft 7's form) for
    the property that makes one apply (as ``then`` after an ``if`` requiring only one property, it
    applies whenever that property is there).
    """
    planner = _IntegerPlanner(refs)
    root = planner.plan(schema, 0, frozenset(), refs.resolver)
    return _lowered(root, {}, _reaching_whole(root))


def _parts(node: _Numbers) -> list[_Numbers | None]:
    return [node.extra, node.items, *node.props.values(), *(sub for _, sub in node.patterns), *node.prefix]


def _reaching_whole(root: _Numbers | None) -> set[int]:
    """The ids of the nodes from which a ``_WHOLE`` node can be reached (itself included): only these
    lower to a plan. A recursive schema's nodes hold each other, so without this a tree schema with
    no integer in it would still be a plan, walked through every argument of every call."""
    nodes: dict[int, _Numbers] = {}
    holders: dict[int, list[int]] = {}  # what holds each node
    todo = [root] if root is not None else []
    while todo:
        node = todo.pop()
        if id(node) in nodes:
            continue
        nodes[id(node)] = node
        for sub in _parts(node):
            if sub is not None:
                holders.setdefault(id(sub), []).append(id(node))
                todo.append(sub)
    found = {key for key, node in nodes.items() if node.kind == _WHOLE}
    todo_ids = list(found)
    while todo_ids:
        for holder in holders.get(todo_ids.pop(), ()):
            if holder not in found:
                found.add(holder)
                todo_ids.append(holder)
    return found


class _Planner:
    """A walk of one root schema with bounded work (depth and nodes), following its ``$ref``s as
    jsonschema-rs resolves them (JSON pointers, anchors, embedded ``$id`` resources; never back
    into one being followed). ``scope`` is the resolver of the references met on the way."""

    MAX_DEPTH = 32
    MAX_NODES = 5000

    def __init__(self, refs: _Refs) -> None:
        self.refs = refs
        self.nodes = 0

    def _enter(self, schema: Any, depth: int) -> bool:
        """Count a node: whether it is a schema to walk, within the bounds."""
        self.nodes += 1
        return isinstance(schema, Mapping) and depth <= self.MAX_DEPTH and self.nodes <= self.MAX_NODES

    def _scope(self, schema: Mapping[str, Any], scope: Any) -> Any:
        """The resolver of ``schema``'s own references: that of its ``$id``, if it has one."""
        ident = schema.get("id" if self.refs.draft == 4 else "$id")
        if isinstance(ident, str) and not (self.refs.draft <= 7 and "$ref" in schema):  # drafts 4-7 ignore $ref's siblings
            found = self.refs.lookup(scope, ident)
            if found is not None:
                return found[1]
        return scope

    def _ref(
        self, schema: Mapping[str, Any], seen: frozenset[str], scope: Any, *, own: bool = False
    ) -> tuple[Any, frozenset[str], Any] | None:
        """The target of ``schema``'s ``$ref``, the refs followed with it and the resolver of its own, or None
        (with ``own``, also where the target is outside the schema: :meth:`_Refs.lookup`)."""
        ref = schema.get("$ref")
        if not isinstance(ref, str) or scope is None:
            return None
        key = f"{scope.base_uri} {ref}"
        found = None if key in seen else self.refs.lookup(scope, ref, own=own)
        return None if found is None else (found[0], seen | {key}, found[1])


_NO_NUMBER, _WHOLE, _ANY_NUMBER = 0, 1, 2  # the numbers a schema takes at one place: none, integers only, any


class _Numbers:
    """What a schema says of the numbers a value may be (``kind``) and those within it: a property's
    schema and those of the patterns it matches apply to it (else ``extra``), an item's prefix
    schema (else ``items``). A part that is None takes anything."""

    __slots__ = ("extra", "items", "kind", "patterns", "prefix", "props")

    def __init__(
        self,
        kind: int = _ANY_NUMBER,
        props: dict[str, _Numbers | None] | None = None,
        patterns: tuple[tuple[str, _Numbers | None], ...] = (),
        extra: _Numbers | None = None,
        items: _Numbers | None = None,
        prefix: tuple[_Numbers | None, ...] = (),
    ) -> None:
        self.kind = kind
        self.props = props or {}
        self.patterns = patterns
        self.extra = extra
        self.items = items
        self.prefix = prefix

    def prop(self, name: str, planner: _IntegerPlanner) -> _Numbers | None:
        """What applies to the property ``name``."""
        found = [sub for pattern, sub in self.patterns if _matches(pattern, name)]
        if name in self.props:
            found.append(self.props[name])
        return planner.meet(found) if found else self.extra

    def item(self, index: int) -> _Numbers | None:
        """What applies to the item at ``index``."""
        return self.prefix[index] if index < len(self.prefix) else self.items

    def takes_anything(self) -> bool:
        """Whether this says nothing: any number here, anything in every part."""
        parts = (*self.props.values(), *(sub for _, sub in self.patterns), self.extra, self.items, *self.prefix)
        return self.kind == _ANY_NUMBER and all(part is None for part in parts)


class _Later(_Numbers):
    """The node of a ``$ref`` target, made before its parts are known (filled once they are), so a
    ``$ref`` back into it can point at it; unfilled, it takes anything."""

    __slots__ = ()


_NOTHING = _Numbers(_NO_NUMBER)  # what a `false` schema takes, and what is within a value that has no parts
_NOTHING.extra = _NOTHING.items = _NOTHING
_LEAVES = {kind: _Numbers(kind, extra=_NOTHING, items=_NOTHING) for kind in (_NO_NUMBER, _WHOLE, _ANY_NUMBER)}  # no parts
# keywords other schemas apply through
_APPLYING = frozenset(
    {"$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "if", "dependentSchemas", "dependencies"}
)


class _IntegerPlanner(_Planner):
    """Finds what one root schema says of numbers, as :class:`_Numbers`."""

    def __init__(self, refs: _Refs) -> None:
        super().__init__(refs)
        self.made = 0  # nodes made by meet and join, bounded as the walk is
        self.pending: dict[str, _Later] = {}  # the nodes of the $refs being followed, by key
        self.used: set[int] = set()  # those met again below themselves
        self.expanding: set[int] = set()  # those whose parts meet or join is combining now
        # With no $id below the root, a $dynamicRef or $recursiveRef resolves as a $ref would (one dynamic scope).
        self.lexical = isinstance(refs.root, Mapping) and not any(
            True for key in ("$id", "id") for _ in _keyed([v for k, v in refs.root.items() if k != key], key)
        )

    def plan(self, schema: Any, depth: int, seen: frozenset[str], scope: Any) -> _Numbers | None:
        if schema is False:
            return _NOTHING
        if not self._enter(schema, depth):
            return None
        scope = self._scope(schema, scope)
        below = depth + 1
        if schema.keys().isdisjoint(_APPLYING):  # the common case: its own keywords alone
            return self._own(schema, below, seen, scope)
        target = self._target(schema, below, seen, scope)
        draft = self.refs.draft
        if draft <= 7 and "$ref" in schema:  # drafts 4-7 ignore $ref's siblings
            return target
        found = [self._own(schema, below, seen, scope), target]
        if self.lexical and draft >= 19:  # one resource: a $dynamicRef or $recursiveRef lands where a $ref would
            found += [self._target(schema, below, seen, scope, key) for key in ("$dynamicRef", "$recursiveRef") if key in schema]
        found += [self.plan(sub, below, seen, scope) for sub in _listed(schema.get("allOf"))]
        for key in ("anyOf", "oneOf"):
            if _listed(schema.get(key)):
                found.append(self.join([self.plan(sub, below, seen, scope) for sub in schema[key]]))
        if draft >= 7 and "if" in schema:
            found.append(self._condition(schema, below, seen, scope))
        for key in ("dependentSchemas", "dependencies") if draft >= 19 else ("dependencies",):  # (read in every draft)
            dependent = schema.get(key)
            if isinstance(dependent, Mapping):  # a list under `dependencies` names properties, no schema: nothing
                found += [self._present(name, self.plan(sub, below, seen, scope)) for name, sub in dependent.items()]
        return self.meet(found)

    def _target(
        self, schema: Mapping[str, Any], depth: int, seen: frozenset[str], scope: Any, keyword: str = "$ref"
    ) -> _Numbers | None:
        """What the target of ``schema``'s ``$ref`` (or ``keyword``) says; back into a reference being followed,
        the node being made for it."""
        ref = schema.get(keyword)
        if not isinstance(ref, str) or scope is None:
            return None
        key = f"{scope.base_uri} {ref}"
        if key in seen:
            later = self.pending.get(key)
            if later is not None:
                self.used.add(id(later))
            return later
        resolved = self.refs.lookup(scope, ref)
        if resolved is None:
            return None
        followed = (resolved[0], seen | {key}, resolved[1])
        later = self.pending[key] = _Later()
        try:
            found = self.plan(followed[0], depth, followed[1], followed[2])
        finally:
            del self.pending[key]
        if id(later) not in self.used or found is None:
            return found  # (a node met again that says nothing takes anything, as a _Later left unfilled does)
        for name in _Numbers.__slots__:
            setattr(later, name, getattr(found, name))
        return later

    def _own(self, schema: Mapping[str, Any], depth: int, seen: frozenset[str], scope: Any) -> _Numbers | None:
        """What ``schema``'s own keywords say (``type``, ``enum``/``const``, its properties and items)."""
        kinds = _kinds(schema)
        kind = _ANY_NUMBER if kinds is None or "number" in kinds else _WHOLE if "integer" in kinds else _NO_NUMBER
        choices = _choices(schema)
        if choices is not None:
            numbers = {type(c) for c in choices if type(c) in (int, float)}
            kind = min(kind, _NO_NUMBER if not numbers else _ANY_NUMBER if float in numbers else _WHOLE)
        objects = (kinds is None or "object" in kinds) and (choices is None or any(type(c) is dict for c in choices))
        arrays = (kinds is None or "array" in kinds) and (choices is None or any(type(c) is list for c in choices))
        if not objects and not arrays:
            return _LEAVES[kind]
        node = _Numbers(kind, extra=_NOTHING, items=_NOTHING)  # no parts, unless it may be an object or an array
        if objects:
            found = schema.get("properties")
            if isinstance(found, Mapping):
                node.props = {name: self.plan(sub, depth, seen, scope) for name, sub in found.items()}
            found = schema.get("patternProperties")
            if isinstance(found, Mapping):
                node.patterns = tuple((pattern, self.plan(sub, depth, seen, scope)) for pattern, sub in found.items())
            node.extra = self.plan(schema.get("additionalProperties"), depth, seen, scope)
        if arrays:
            items, prefix = schema.get("items"), schema.get("prefixItems") if self.refs.draft == 20 else None
            if isinstance(items, list):  # tuple validation before 2020-12
                prefix, items = items, schema.get("additionalItems")
            node.items = self.plan(items, depth, seen, scope)
            node.prefix = tuple(self.plan(sub, depth, seen, scope) for sub in _listed(prefix))
        return None if node.takes_anything() else node

    def _condition(self, schema: Mapping[str, Any], depth: int, seen: frozenset[str], scope: Any) -> _Numbers | None:
        """``if``/``then``/``else``: either branch may apply, but where ``if`` only requires one property,
        ``then`` applies to that property whenever it is there."""
        then = self.meet([self.plan(schema["if"], depth, seen, scope), self.plan(schema.get("then", True), depth, seen, scope)])
        either = self.join([then, self.plan(schema.get("else", True), depth, seen, scope)])
        name = _sole_requirement(schema["if"])
        return either if name is None else self.meet([either, self._present(name, then)])

    def _present(self, name: str, node: _Numbers | None) -> _Numbers | None:
        """What ``node`` says of the property ``name`` alone: a schema that applies whenever it is there."""
        return None if node is None else _Numbers(props={name: node.prop(name, self)})

    def meet(self, nodes: list[_Numbers | None]) -> _Numbers | None:
        """What several schemas that all apply to a value say of it (bounded: past it, one of them)."""
        found: _Numbers | None = None
        for node in nodes:
            if node is None or found is _NOTHING or node is found or self._looping(node):
                continue  # (a recursive node met again inside itself is left out: what it adds is not known, a looser plan)
            if found is None or node is _NOTHING or self._looping(found):
                found = node
                continue
            if not self._make():
                continue
            a, b = found, node
            with self._expanding(a, b):
                found = _Numbers(
                    min(a.kind, b.kind),
                    {name: self.meet([a.prop(name, self), b.prop(name, self)]) for name in {**a.props, **b.props}},
                    a.patterns
                    + b.patterns,  # a name a pattern of one matches is then held to that pattern, not the other's extra
                    self.meet([a.extra, b.extra]),
                    self.meet([a.items, b.items]),
                    tuple(self.meet([a.item(i), b.item(i)]) for i in range(max(len(a.prefix), len(b.prefix)))),
                )
        return found

    def _looping(self, node: _Numbers) -> bool:
        """Whether ``node`` is a recursive node meet or join is already combining (so met again inside itself)."""
        return isinstance(node, _Later) and id(node) in self.expanding

    @contextlib.contextmanager
    def _expanding(self, *nodes: _Numbers) -> Iterator[None]:
        added = {id(node) for node in nodes if isinstance(node, _Later) and id(node) not in self.expanding}
        self.expanding |= added
        try:
            yield
        finally:
            self.expanding -= added

    def join(self, nodes: list[_Numbers | None]) -> _Numbers | None:
        """What one of several schemas, not known which, says of a value (bounded: past it, nothing)."""
        found: _Numbers = _NOTHING
        for node in nodes:
            if node is None or self._looping(node):
                return None
            if node is _NOTHING or node is found:
                continue
            if found is _NOTHING:
                found = node
                continue
            if not self._make() or self._looping(found):
                return None
            a, b = found, node
            loose = bool(a.patterns or b.patterns)  # which names they match is not known here: the others take anything
            with self._expanding(a, b):
                found = _Numbers(
                    max(a.kind, b.kind),
                    {name: self.join([a.prop(name, self), b.prop(name, self)]) for name in {**a.props, **b.props}},
                    (),
                    None if loose else self.join([a.extra, b.extra]),
                    self.join([a.items, b.items]),
                    tuple(self.join([a.item(i), b.item(i)]) for i in range(max(len(a.prefix), len(b.prefix)))),
                )
        return found

    def _make(self) -> bool:
        """Count a node made by meet or join: whether it is within the bounds."""
        self.made += 1
        return self.made <= self.MAX_NODES


def _numberless(node: _Numbers | None, path: tuple[Any, ...], planner: _IntegerPlanner) -> bool:
    """Whether the schema ``node`` plans surely takes no number at ``path`` (None takes anything)."""
    for part in path:
        if node is None:
            return False
        node = node.prop(part, planner) if isinstance(part, str) else node.item(part)
    return node is not None and node.kind == _NO_NUMBER


def _lowered(node: _Numbers | None, done: dict[int, _IntPlan | None], useful: set[int]) -> _IntPlan | None:
    """``node`` as the plan :func:`_to_integers` follows (None where nothing becomes an integer: where no
    node of ``useful`` is); ``done`` holds the plans of the nodes already lowered, by id (meet and join share nodes)."""
    if node is None or node is _NOTHING or id(node) not in useful:
        return None
    if id(node) in done:
        return done[id(node)]
    plan: _IntPlan = [False, None, None, None, None, None]
    done[id(node)] = plan  # what a node met again below itself (a recursive $ref) lowers to
    extra = _lowered(node.extra, done, useful)
    props = {name: _lowered(sub, done, useful) for name, sub in node.props.items()}
    patterns = tuple((pattern, _lowered(sub, done, useful)) for pattern, sub in node.patterns)
    if extra is None:  # a property or pattern in which nothing becomes an integer need not be known
        props = {name: sub for name, sub in props.items() if sub is not None}
        patterns = tuple(pair for pair in patterns if pair[1] is not None)
    items = _lowered(node.items, done, useful)
    prefix = [_lowered(sub, done, useful) for sub in node.prefix]
    while prefix and items is None and prefix[-1] is None:
        prefix.pop()
    plan[:] = [node.kind == _WHOLE, props or None, items, prefix or None, extra, patterns or None]
    if any(plan):
        return plan
    done[id(node)] = None  # (a node below it that met it again holds this plan: it changes nothing)
    return None


_ANNOTATIONS = frozenset({"$comment", "title", "description", "examples", "default", "deprecated", "readOnly", "writeOnly"})


def _sole_requirement(schema: Any) -> str | None:
    """The one property whose presence alone makes ``schema`` hold (``{"required": ["c"]}``), else None."""
    if not isinstance(schema, Mapping) or schema.keys() - _ANNOTATIONS != {"required"}:
        return None
    required = schema["required"]
    return required[0] if isinstance(required, list) and len(required) == 1 and isinstance(required[0], str) else None


def _choices(schema: Mapping[str, Any]) -> list[Any] | None:
    """The values ``schema``'s ``enum`` or ``const`` allows (None without either)."""
    choices = schema.get("enum") if "enum" in schema else [schema["const"]] if "const" in schema else None
    return choices if isinstance(choices, list) else None


def _kinds(schema: Mapping[str, Any]) -> list[Any] | None:
    kind = schema.get("type")
    return [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None


def _merge(found: list[_IntPlan | None]) -> _IntPlan | None:
    """One plan from several that apply to the same value (the first one wins where they differ)."""
    if len(found) == 1:
        merged = found[0]
        if merged is None:
            return None
    else:
        plans = [plan for plan in found if plan is not None]
        if not plans:
            return None
        properties: dict[str, _IntPlan | None] = {}
        prefix: list[_IntPlan | None] = []
        for plan in plans:
            for key, field in (plan[1] or {}).items():
                if properties.get(key) is None:
                    properties[key] = field
            for i, item in enumerate(plan[3] or ()):
                if i >= len(prefix):
                    prefix.append(item)
                elif prefix[i] is None:
                    prefix[i] = item
        merged = [
            any(p[0] for p in plans),
            properties or None,
            next((p[2] for p in plans if p[2] is not None), None),
            prefix if any(p is not None for p in prefix) else None,
            next((p[4] for p in plans if p[4] is not None), None),
            tuple(pair for p in plans for pair in p[5] or ()) or None,
        ]
    return merged if any(merged) else None


_NO_FLOATS = frozenset({int, str, bool, type(None)})  # types of values _to_integers leaves as they are
_EXACT = float(1 << 53)  # from here on a float is not the integer that was written (2**53 + 1 reads as 2**53)


class _Inexact(Exception):
    """A whole float at or past 2**53 where an integer is expected; ``parts`` is its path, innermost first."""

    def __init__(self, value: float) -> None:
        super().__init__(value)
        self.value = value
        self.parts: list[Any] = []

    def refusal(self, secrets: Redactor) -> ToolArgumentError:
        """The argument error, the value not shown under a key ``secrets`` hides (as :func:`_got` shows values)."""
        parts = self.parts[::-1]
        shown = _got(self.value, parts, secrets)
        expected = "an integer without a fraction or exponent"
        text = f"expected {expected}, got {shown} (past 2**53 such a number is rounded)"
        return ToolArgumentError([ArgumentProblem(json_path(parts), text, "type", expected, shown)])


def _to_integers(value: Any, plan: _IntPlan) -> Any:
    """``value`` with integer-valued floats made ints where ``plan`` says ``integer`` (a copy where changed).

    Raises :class:`_Inexact` for one at or past 2**53 (``1e308`` would become 309 digits of float noise).
    """
    is_int, properties, items, prefix, extra, patterns = plan
    kind = type(value)
    if kind is float:
        if is_int and value.is_integer():
            if -_EXACT < value < _EXACT:
                return int(value)
            raise _Inexact(value)
        return value
    if kind is dict:
        out = value
        pairs = properties.items() if properties and not extra and not patterns else [(k, _sub(plan, k)) for k in value]
        for key, sub in pairs:
            item = value.get(key, _MISSING)
            if item is _MISSING or sub is None or type(item) in (int, str, bool):
                continue
            try:
                new = _to_integers(item, sub)
            except _Inexact as exc:
                exc.parts.append(key)
                raise
            if new is not item:
                if out is value:
                    out = dict(value)
                out[key] = new
        return out
    if (kind is list or kind is tuple) and (items or prefix):
        if len(value) > 64 and set(map(type, value)) <= _NO_FLOATS:  # a long list with no float in it, seen at C speed
            return value
        plans = [(prefix[i] if prefix and i < len(prefix) else items) for i in range(len(value))]
        try:
            new_list = [_to_integers(v, p) if p is not None else v for v, p in zip(value, plans)]
        except _Inexact as exc:
            exc.parts.append(next(i for i, (v, p) in enumerate(zip(value, plans)) if p is not None and _inexact(v, p)))
            raise
        if all(a is b for a, b in zip(new_list, value)):
            return value
        return new_list if kind is list else tuple(new_list)
    if kind in _NO_FLOATS or kind is list or kind is tuple:
        return value
    return _subclass_to_integers(value, plan)


def _subclass_to_integers(value: Any, plan: _IntPlan) -> Any:
    """:func:`_to_integers` of a ``float``, ``dict``, ``list`` or ``tuple`` subclass (numpy's ``float64``, an
    ``OrderedDict``): as of the plain value it is sent as, that value where anything in it changed, else ``value``."""
    plain: Any
    if isinstance(value, float):
        plain = float.__float__(value)  # the number it holds, as JSON text and the verdict read it
    elif isinstance(value, dict):
        plain = dict(value)
    elif isinstance(value, list):
        plain = list(value)
    elif isinstance(value, tuple):
        plain = tuple(value)
    else:
        return value
    new = _to_integers(plain, plan)
    return value if new is plain else new


def _inexact(value: Any, plan: _IntPlan) -> bool:
    """Whether :func:`_to_integers` refuses ``value`` (to find which item of a list it refused)."""
    try:
        _to_integers(value, plan)
    except _Inexact:
        return True
    return False


def _sub(plan: _IntPlan, key: str) -> _IntPlan | None:
    """The plan of the property ``key``: its own and those of the patterns it matches, else the additional one."""
    properties, extra, patterns = plan[1], plan[4], plan[5]
    found = [properties[key]] if properties and key in properties else []
    if patterns:
        found += [sub for pattern, sub in patterns if _matches(pattern, key)]
    return _merge(found) if found else extra


def _matches(pattern: str, key: str) -> bool:
    """Whether ``key`` matches ``pattern`` (as validation matched it; not matched in time counts as no)."""
    return (_search_rust if _rust() is not None else _search_python)(pattern, key) is True


_Plan = dict[str, tuple[Any, "dict[str, Any] | None"]]
_MISSING = object()
_Applying = list[tuple[Mapping[str, Any], frozenset[str], Any]]  # schemas, the refs followed to each, its scope


def _default_plan(schema: Any, refs: _Refs) -> _Plan | None:
    """The defaults to fill in, property by property: under ``properties``, through ``$ref``s within
    the schema (to a pointer or an anchor; in drafts 4-7 from a ``$ref``'s target alone, not its siblings)
    and ``allOf``, and through an ``anyOf``/``oneOf`` only one
    alternative of which can be an object (``Address | None``: which alternative a value matched
    is not known here). Not from ``if``/``then``/``else``, ``dependentSchemas`` or ``dependencies``
    (whether they apply depends on the values) nor ``patternProperties`` (no name to fill)."""
    planner = _DefaultPlanner(refs)
    return planner.plan(planner.applying(schema, 0, frozenset(), refs.resolver), 0)


class _DefaultPlanner(_Planner):
    """Builds a :data:`_Plan` for one root schema."""

    def plan(self, nodes: _Applying, depth: int) -> _Plan | None:
        """The plan of a value that all of ``nodes`` describe."""
        props: dict[str, _Applying] = {}
        for node, seen, scope in nodes:
            found = node.get("properties")
            if isinstance(found, Mapping):
                for name, sub in found.items():
                    props.setdefault(name, []).extend(self.applying(sub, depth + 1, seen, scope))
        plan: _Plan = {}
        for name, applying in props.items():
            default = next((node["default"] for node, _, _ in applying if "default" in node), _MISSING)
            nested = self.plan(applying, depth + 1)
            if default is not _MISSING or nested:
                plan[name] = (default, nested)
        return plan or None

    def applying(self, schema: Any, depth: int, seen: frozenset[str], scope: Any) -> _Applying:
        """``schema`` and the schemas that apply to the same value with it (not back into a ``$ref`` being followed)."""
        if not self._enter(schema, depth):
            return []
        scope = self._scope(schema, scope)
        # Defaults come from the schema's own parts: not through a $ref into a metaschema (whose defaults,
        # `minLength: 0` and more, would fill a schema an argument holds).
        followed = self._ref(schema, seen, scope, own=True)
        if self.refs.draft <= 7 and "$ref" in schema:  # drafts 4-7 ignore $ref's siblings: only its target applies
            return [] if followed is None else self.applying(followed[0], depth + 1, followed[1], followed[2])
        found: _Applying = [(schema, seen, scope)]
        if followed is not None:
            found += self.applying(followed[0], depth + 1, followed[1], followed[2])
        for sub in _listed(schema.get("allOf")):
            found += self.applying(sub, depth + 1, seen, scope)
        alternatives = [sub for key in ("anyOf", "oneOf") for sub in _listed(schema.get(key))]
        objects = [sub for sub in alternatives if self._may_be_object(sub, depth + 1, seen, scope)]
        if len(objects) == 1:
            found += self.applying(objects[0], depth + 1, seen, scope)
        return found

    def _may_be_object(self, schema: Any, depth: int, seen: frozenset[str], scope: Any) -> bool:
        if not isinstance(schema, Mapping):
            return schema is not False
        return all(
            (kinds := _kinds(node)) is None or "object" in kinds for node, _, _ in self.applying(schema, depth, seen, scope)
        )


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _integral_defaults(plan: _Plan | None, integers: _IntPlan | None) -> _Plan | None:
    """``plan`` with each default as a value sent in its place becomes (``default: 2.0`` of an integer is ``2``;
    a whole float past 2**53, refused when sent, stays as the schema has it)."""
    if plan is None or integers is None:
        return plan
    out: _Plan = {}
    for name, (default, nested) in plan.items():
        sub = _sub(integers, name)
        value = default
        if sub is not None and default is not _MISSING:
            with contextlib.suppress(_Inexact):
                value = _to_integers(default, sub)
        out[name] = (value, _integral_defaults(nested, sub))
    return out


def _fill(instance: dict[str, Any], plan: _Plan) -> dict[str, Any]:
    out = instance
    for name, (default, nested) in plan.items():
        if name not in instance:
            if default is not _MISSING:
                if out is instance:
                    out = dict(instance)
                out[name] = copy.deepcopy(default)
        elif nested and isinstance(instance[name], dict):  # a subclass too: filled in a plain copy
            filled = _fill(instance[name], nested)
            if filled is not instance[name]:
                if out is instance:
                    out = dict(instance)
                out[name] = filled
    return out


# ---------------------------------------------------------------------------- messages


def _distinct_problems(found: list[ArgumentProblem]) -> list[ArgumentProblem]:
    """``found`` with each problem once: the first of those saying the same at the same path (``maxItems`` and
    ``items: false`` both refuse a third item of a pair as "expected at most 2 items")."""
    distinct: dict[tuple[str, str], ArgumentProblem] = {}
    for problem in found:
        distinct.setdefault((problem.path, problem.message), problem)
    return list(distinct.values())


_preview = preview  # (the core's previewer, one for the plugin's refusals and a tool's own checks)
_show = _preview

#: What an argument error shows in place of a value under a secret key.
_HIDDEN = "(redacted)"


def _key_names(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` as a tuple, one string being one name (``extra_secret_keys="ssn"``), as the redactor reads it;
    ``TypeError`` for one that is not a string (refused when the plugin is made, not at its first refusal)."""
    found = (names,) if isinstance(names, str) else tuple(names)
    odd = next((name for name in found if not isinstance(name, str)), None)
    if odd is not None:
        raise TypeError(f"extra_secret_keys takes key names (strings), got {type(odd).__name__} {odd!r}")
    return found


@functools.lru_cache(maxsize=32)
def _secrets(extra: tuple[str, ...] = ()) -> Redactor:
    """The redactor of the errors the model reads: :data:`harness_one.MODEL_SECRET_KEYS` (as exception texts
    are masked) and ``extra`` key names, matched on a key's last words; made on the first refusal."""
    from harness_one import MODEL_QUERY_SECRET_KEYS, MODEL_SECRET_KEYS, Redactor  # only a refusal needs it

    return Redactor(MODEL_SECRET_KEYS, extra_keys=extra, last_words=True, query_keys=MODEL_QUERY_SECRET_KEYS)


def _got(value: Any, path: Iterable[Any], redactor: Redactor, hidden: bool = False) -> str:
    """``value``, found at ``path``, as an argument error shows it: :func:`_preview` with secrets masked as in exception texts.

    A value under a secret key (any key of ``path``: ``$.api_key``, ``$.auth.user``), or ``hidden``
    (its schema marks it secret: :func:`_secret_schema`), is not shown (:data:`_HIDDEN`; null and
    booleans are, holding nothing). In a value shown, what is
    under a secret key is ``[REDACTED]``, and text is masked as the redactor masks it
    (``password=...``, URL user-info). Only refusals come here, never a call that passes.
    """
    shown = value is None or isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value))
    if not shown and (hidden or any(isinstance(k, str) and redactor.is_secret(k) for k in path)):
        return _HIDDEN
    return _preview(value, redactor=redactor)


def _secret_schema(schema: Any) -> bool:
    """Whether ``schema`` marks its value secret: ``writeOnly`` or ``format: password`` (as pydantic writes a ``SecretStr``),
    on itself or on one of its ``anyOf``/``oneOf`` alternatives (``SecretStr | None``)."""
    if not isinstance(schema, Mapping):
        return False
    nodes = [schema, *(sub for key in ("anyOf", "oneOf") for sub in _listed(schema.get(key)) if isinstance(sub, Mapping))]
    return any(node.get("writeOnly") is True or node.get("format") == "password" for node in nodes)


def _describe(error: Any, secrets: Redactor, hidden: bool = False) -> list[ArgumentProblem]:
    """The problems ``error`` (jsonschema's, or jsonschema-rs's read as one) names; ``secrets`` says which values are not
    shown, and ``hidden`` that this one is not (nor one whose schema marks it secret)."""
    hidden = hidden or _secret_schema(error.schema)
    kw = str(error.validator)
    expect: Any = error.validator_value
    got = error.instance
    path = json_path(error.absolute_path)
    why, trigger = _rule(error.relative_schema_path, list(error.absolute_path), kw == "required")
    if trigger is not None and kw in ("anyOf", "oneOf"):
        why = ""  # (after the alternatives it would read as the last one's)
    elif trigger is not None and kw != "required":
        why = f" (a rule that applies when {trigger} is present)"
    name = getattr(error, "harness_name", None)
    in_name = "" if name is None else f" (in the property name {_show(name)})"
    why += in_name
    if error.message == _TIMED_OUT:
        if kw == "patternProperties":
            return [ArgumentProblem(path, "this property name could not be matched against the schema's patterns in time", kw)]
        return [
            ArgumentProblem(
                path,
                f"could not be matched against the pattern {expect!r} within the time limit; send a shorter or simpler value",
                kw,
                _show(expect, 120),
                _got(got, error.absolute_path, secrets, hidden),
            )
        ]
    if kw == "required":
        missing = [name for name in expect if isinstance(got, dict) and name not in got][:MAX_PROBLEMS]
        # (worded as `dependentRequired` is, when it is a rule of the schema a property's presence applies)
        text = f"required when {trigger} is present{in_name}" if trigger is not None else f"required property is missing{why}"
        return [ArgumentProblem(json_path([*error.absolute_path, name]), text, kw, "present", "missing") for name in missing] or [
            ArgumentProblem(path, error.message + why, kw)
        ]
    if kw in ("anyOf", "oneOf"):
        branch = _only_fitting_branch(error)
        if branch:
            return [problem for sub in branch for problem in _describe(sub, secrets, hidden)]
    if kw == "type" and _said_by_choices(error):
        return []
    extras = getattr(error, "harness_extras", None)
    if extras is not None:
        known = set((error.schema.get("properties") or {}) if isinstance(error.schema, Mapping) else ())
        text = "unexpected property; allowed properties: " + listed_names(known, MAX_NAMES)
        if kw == "unevaluatedProperties":
            text = "unexpected property (no part of the schema allows it)"
        return [
            ArgumentProblem(json_path([*error.absolute_path, k]), text, kw, "no such property", _show(k))
            for k in extras[:MAX_PROBLEMS]
        ]
    if kw == "dependentRequired" or (kw == "dependencies" and isinstance(got, dict)):
        problems = []
        for trigger, needed in (expect or {}).items():
            if trigger in got and isinstance(needed, list):
                for name in needed:
                    if name not in got:
                        problems.append(
                            ArgumentProblem(
                                json_path([*error.absolute_path, name]),
                                f"required when '{trigger}' is present",
                                kw,
                                "present",
                                "missing",
                            )
                        )
        if problems:
            return problems
    return [
        ArgumentProblem(
            path,
            _message(kw, expect, got, error, secrets, hidden) + why,
            kw,
            _expected(kw, expect, error.schema),
            _got(got, error.absolute_path, secrets, hidden),
        )
    ]


#: Keywords of a schema whose next part of a schema path is a name (a property's, a definition's), not a keyword.
_NAMING = frozenset({"properties", "patternProperties", "$defs", "definitions"})
#: Keywords whose schema applies to the instance they stand beside (what follows an ``allOf``, ``anyOf`` or ``oneOf``
#: is the index of an alternative).
_IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "$ref", "$dynamicRef"})
#: Keywords whose schema applies to a property or an item of their instance (``properties``, ``patternProperties`` and
#: ``prefixItems`` then name which; ``items`` does when it is a draft 7 list).
_INTO = frozenset({"properties", "patternProperties", "prefixItems", "items", "additionalProperties", "additionalItems"})


def _rule(schema_path: Iterable[Any], instance_path: list[Any], required: bool) -> tuple[str, str | None]:
    """Why a schema's rule at ``schema_path`` (its keyword last) applied to the instance at ``instance_path``, as a
    refusal says it, and the property whose presence made it apply, quoted as the refusal names it.

    A ``then``/``else`` anywhere on the path: " (required by an if/then rule of the schema)" (or "if/else", the
    innermost), and no property. Else the innermost ``dependentSchemas``/``dependencies`` schema: its property,
    ``'card'`` when it stands beside the one the problem names (the missing one for ``required``, else the instance
    itself), else by its JSON path (``'$.card'``), and " (required when 'card' is present)"; a path on which the
    instance the schema applies to cannot be told (an unknown keyword) names none. ``("", None)`` for neither.
    """
    parts = list(schema_path)
    why, rule = "", None
    at = 0
    while at < len(parts):
        part = parts[at]
        if part in ("then", "else"):
            why = f" (required by an if/{part} rule of the schema)"
        elif part in ("dependentSchemas", "dependencies"):
            if at + 2 < len(parts):  # (a rule of its schema, not the keyword itself)
                rule = at
            at += 1
        elif part in _NAMING:
            at += 1
        at += 1
    if why or rule is None:
        return why, None
    trigger, steps, at = parts[rule + 1], 0, rule + 2
    while at < len(parts) - 1:  # the instance the dependent schema applies to: how many steps above this one
        part = parts[at]
        if part in _INTO:
            steps += 1
            at += 2 if part in ("properties", "patternProperties", "prefixItems") or isinstance(parts[at + 1], int) else 1
        elif part in _IN_PLACE or part in ("dependentSchemas", "dependencies"):
            at += 1 if part in _IN_PLACE - {"allOf", "anyOf", "oneOf"} else 2
        else:
            return "", None
    if steps > len(instance_path):
        return "", None
    holder = instance_path[: len(instance_path) - steps]
    beside = holder == (instance_path if required else instance_path[:-1])
    named = f"'{trigger}'" if beside else f"'{json_path([*holder, trigger])}'"
    return f" (required when {named} is present)", named


class _RustError:
    """A jsonschema-rs error read as the jsonschema error :func:`_describe` words: the same keyword, paths and values.

    ``refs`` finds the schema holding the keyword (for the allowed properties, the triggers of
    ``dependentRequired``, ``enum`` beside ``type``); ``root`` is the instance as given, from
    which the value at fault is taken (so a lone surrogate shows as itself, not its stand-in).
    """

    def __init__(self, error: Any, refs: _Refs, root: Any, *, stood: bool, within: _RustError | None = None) -> None:
        kind = error.kind
        name = type(kind).__name__
        self.evaluation = list(error.evaluation_path)
        path = [_back(p) if stood and isinstance(p, str) else p for p in error.instance_path]
        self.absolute_path = path
        self.relative_path = path[len(within.absolute_path) :] if within else path
        self.relative_schema_path = self.evaluation[len(within.evaluation) :] if within else self.evaluation
        self.schema = _schema_holding(refs, error.absolute_keyword_location, error.schema_path)
        self.instance = _value_at(root, path, error.instance, stood)
        self.message: str = error.message
        self.context: list[_RustError] = []
        self.harness_name: Any = None
        self.harness_extras: list[str] | None = None
        keyword = error.schema_path[-1] if error.schema_path else None
        self.validator = str(keyword)
        found = self.schema.get(keyword, _MISSING) if isinstance(self.schema, Mapping) else _MISSING
        self.validator_value = _kind_value(kind) if found is _MISSING else found
        if name in ("AnyOf", "OneOfNotValid"):
            self.context = [_read_rust(sub, refs, root, stood=stood, within=self) for branch in kind.context for sub in branch]
        elif name == "Required" and keyword != "required" and not isinstance(self.validator_value, Mapping):
            self.validator, self.validator_value = "required", [kind.property]  # dependentRequired, not found
        elif name in ("AdditionalProperties", "UnevaluatedProperties"):
            self.validator_value = False
            self.harness_extras = [_back(k) if stood else k for k in kind.unexpected]
        elif name == "AdditionalItems":
            self.validator_value = kind.limit  # how many items are allowed, as the listing says it
        elif name == "FalseSchema":
            self._false(refs, keyword, root)
        elif name == "BacktrackLimitExceeded":
            self._gave_up(error.schema_path, keyword)
        if self.validator == "type" and _said_by_choices(self):  # named as its enum or const (the listing drops the type)
            self.validator = "const" if "const" in self.schema else "enum"
            self.validator_value = self.schema[self.validator]

    def _false(self, refs: _Refs, keyword: Any, root: Any) -> None:
        """A ``false`` subschema: in 2020-12, ``items: false`` after ``prefixItems`` says how many items are allowed."""
        self.validator, self.validator_value = "None", None
        if keyword == "items" and refs.draft == 20 and self.absolute_path and type(self.absolute_path[-1]) is int:
            self.validator, self.validator_value = "items", self.absolute_path[-1]  # the first item past the allowed ones
            self.absolute_path = self.absolute_path[:-1]
            self.relative_path = self.relative_path[:-1]
            self.instance = _value_at(root, self.absolute_path, None, False)

    def _gave_up(self, schema_path: list[Any], keyword: Any) -> None:
        """jsonschema-rs's pattern matcher stopped at its backtracking limit: not matched in time, as the listing says."""
        self.message = _TIMED_OUT
        if len(schema_path) > 1 and schema_path[-2] == "patternProperties":
            self.validator, self.validator_value = "patternProperties", keyword
        else:
            self.validator = "pattern"
            self.validator_value = self.schema.get("pattern", "") if isinstance(self.schema, Mapping) else ""


def _read_rust(error: Any, refs: _Refs, root: Any, *, stood: bool, within: _RustError | None = None) -> _RustError:
    """A jsonschema-rs error as :class:`_RustError`; a ``propertyNames`` one as its inner error, about the name
    (at the object's path, as jsonschema gives it)."""
    kind = error.kind
    if not isinstance(kind, _rust().ValidationErrorKind.PropertyNames):
        return _RustError(error, refs, root, stood=stood, within=within)
    inner = _RustError(kind.error, refs, root, stood=stood, within=within)
    inner.instance = inner.harness_name = _back(kind.error.instance) if stood else kind.error.instance
    return inner


def _kind_value(kind: Any) -> Any:
    """The keyword's value as a jsonschema-rs error kind holds it (when the schema holding it is not found)."""
    if hasattr(kind, "property"):  # required
        return [kind.property]
    for attribute in ("limit", "options", "expected_value", "pattern", "format", "schema", "context"):
        if hasattr(kind, attribute):
            return getattr(kind, attribute)
    types = getattr(kind, "types", None)
    if types is not None:
        return types[0] if len(types) == 1 else list(types)
    return None


def _schema_holding(refs: _Refs, location: str | None, schema_path: list[Any]) -> Any:
    """The schema object holding the keyword at ``schema_path`` in the resource ``location`` names (None if not found)."""
    node = refs.root
    if location:  # a resource with an $id: jsonschema-rs's path is within it
        found = refs.lookup(refs.resolver, urldefrag(location)[0])
        if found is None:
            return None
        node = found[0]  # the root itself when it is the root's $id
    for token in schema_path[:-1]:
        if isinstance(node, Mapping):
            present = token in node
        else:
            present = isinstance(node, list) and type(token) is int and 0 <= token < len(node)
        if not present:
            return None
        node = node[token]
    return node


def _value_at(root: Any, path: list[Any], fallback: Any, stood: bool) -> Any:
    """The value at ``path`` in ``root``, else ``fallback`` (jsonschema-rs's copy, read back from stand-ins)."""
    node = root
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return _back(fallback) if stood and isinstance(fallback, str) else fallback
    return node


def _said_by_choices(error: Any) -> bool:
    """A ``type`` problem the same schema's ``enum``/``const`` problem already says (naming the exact values).

    ``{"type": "string", "enum": ["r", "g"]}`` given ``5`` fails both keywords; listing
    ``expected one of ["r", "g"], got 5`` alone says all. Kept when a choice has another type.
    """
    schema = error.schema
    if not isinstance(schema, Mapping) or not ("enum" in schema or "const" in schema):
        return False
    choices = [schema["const"]] if "const" in schema else schema["enum"]
    if not isinstance(choices, list) or not choices:
        return False
    types = error.validator_value
    kinds = {types} if isinstance(types, str) else set(types) if isinstance(types, list) else set()
    from jsonschema._utils import equal  # imported with the listing validator already

    got = error.instance
    return not any(equal(choice, got) for choice in choices) and all(_of_type(choice, kinds) for choice in choices)


def _of_type(value: Any, kinds: set[Any]) -> bool:
    kind = json_type(value)
    if kind in kinds:
        return True
    if kind == "integer":
        return "number" in kinds
    return kind == "number" and "integer" in kinds and float(value).is_integer()


def _only_fitting_branch(error: Any) -> list[Any] | None:
    """The errors of the one ``anyOf``/``oneOf`` alternative whose type fits the value, if only one does.

    ``Address | None`` given an object with a bad field is reported at that field, not as
    "must match at least one of the alternatives". Of several that fit, one whose tag matches:
    an alternative refused by its tag (``kind: "bank"`` given ``"card"``) is left out when
    another is not (``Card | Bank``). A tag is a property every alternative requires with a
    ``const``/``enum``, no two alternatives sharing a value (:func:`_tags`), read from the schema:
    an ordinary ``Literal`` field is none.
    """
    branches: dict[Any, list[Any]] = {}
    for sub in error.context or ():
        branches.setdefault(sub.relative_schema_path[0] if sub.relative_schema_path else None, []).append(sub)
    fitting = [
        errors
        for errors in branches.values()
        if not any(str(sub.validator) == "type" and not sub.relative_path for sub in errors)
    ]
    if len(fitting) > 1 and (tags := _tags(error.validator_value)):
        tagged = [errors for errors in fitting if not any(_wrong_tag(sub, tags) for sub in errors)]
        fitting = tagged or fitting
    return fitting[0] if len(fitting) == 1 and len(branches) > 1 else None


def _wrong_tag(error: Any, tags: frozenset[str]) -> bool:
    """Whether ``error`` is a ``const``/``enum`` refusal of a tag property of the alternative's value."""
    return str(error.validator) in ("const", "enum") and len(error.relative_path) == 1 and error.relative_path[0] in tags


def _tags(alternatives: Any) -> frozenset[str]:
    """The properties of a value that tell ``alternatives`` apart (on the error path only): those every
    alternative requires and holds to a ``const`` or an ``enum``, no value in two alternatives' sets
    (``kind`` of ``Card | Bank``). Read through local ``$ref``s of the schema being listed; none
    where any alternative cannot be read so."""
    refs = _LISTED_REFS.get()
    if refs is None or refs.resolver is None or not isinstance(alternatives, list) or len(alternatives) < 2:
        return frozenset()
    sets: list[dict[str, set[str]]] = []
    for alternative in alternatives:
        nodes = _applied(refs, alternative)
        required = {name for node in nodes for name in _listed(node.get("required")) if isinstance(name, str)}
        values: dict[str, set[str]] = {}
        for name in required:
            for node in nodes:
                props = node.get("properties")
                sub = props.get(name) if isinstance(props, Mapping) else None
                found = None if sub is None else next(filter(None, (_tag_values(n) for n in _applied(refs, sub))), None)
                if found is not None:
                    values[name] = found
                    break
        sets.append(values)
    tags = set(sets[0]).intersection(*sets[1:])
    return frozenset(
        name for name in tags if sum(len(values[name]) for values in sets) == len(set().union(*(values[name] for values in sets)))
    )


def _applied(refs: _Refs, schema: Any) -> list[Mapping[str, Any]]:
    """``schema`` and what its chain of ``$ref``s (from the root's scope) and ``allOf`` add to it, bounded."""
    out: list[Mapping[str, Any]] = []
    todo = [schema]
    while todo and len(out) < 32:
        node = todo.pop()
        if not isinstance(node, Mapping):
            continue
        out.append(node)
        ref = node.get("$ref")
        if isinstance(ref, str):
            found = refs.lookup(refs.resolver, ref)
            if found is not None:
                todo.append(found[0])
        todo += _listed(node.get("allOf"))
    return out


def _tag_values(schema: Mapping[str, Any]) -> set[str] | None:
    """The values (as JSON text) a schema's ``const`` or ``enum`` allows, or None."""
    if "const" in schema:
        return {json.dumps(schema["const"], sort_keys=True)}
    if isinstance(schema.get("enum"), list):
        return {json.dumps(value, sort_keys=True) for value in schema["enum"]}
    return None


def _expected(kw: str, expect: Any, schema: Any = None) -> str:
    symbols = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if kw in ("minimum", "maximum") and isinstance(schema, Mapping) and schema.get("exclusive" + kw.title()) is True:
        kw = "exclusive" + kw.title()  # draft-04: a boolean exclusiveMaximum makes maximum a strict bound
    if kw in symbols:
        return f"{symbols[kw]} {_show(expect)}"
    if kw == "type":
        return expect if isinstance(expect, str) else " or ".join(map(str, expect))
    if kw == "enum":
        return "one of " + _show(expect, 200)
    if kw in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"):
        return f"{kw} {expect}"
    if kw in ("items", "additionalItems"):  # false after a list of item schemas: how many there may be
        return f"at most {expect} items"
    return _show(expect, 120)


def _message(kw: str, expect: Any, got: Any, error: Any, secrets: Redactor, hidden: bool = False) -> str:
    hidden = hidden or _secret_schema(error.schema)
    shown = _got(got, error.absolute_path, secrets, hidden)
    if kw == "type":
        kind = json_type(got)  # "got integer 5", and "got null", not "got null null"; "got NaN", no JSON number
        plain = shown == kind or (isinstance(got, float) and not math.isfinite(got))
        return f"expected {_expected(kw, expect)}, got " + (shown if plain else f"{kind} {shown}")
    if kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return f"expected a number {_expected(kw, expect, error.schema)}, got {shown}"
    if kw == "enum":
        return f"expected {_expected(kw, expect)}, got {shown}"
    if kw == "const":
        return f"expected exactly {_show(expect)}, got {shown}"
    if kw == "minLength":
        return f"expected at least {expect} characters, got {len(got)}"
    if kw == "maxLength":
        return f"expected at most {expect} characters, got {len(got)}"
    if kw == "minItems":
        return f"expected at least {expect} items, got {len(got)}"
    if kw in ("maxItems", "items", "additionalItems"):
        return f"expected at most {expect} items, got {len(got)}"
    if kw == "minProperties":
        return f"expected at least {expect} properties, got {len(got)}"
    if kw == "maxProperties":
        return f"expected at most {expect} properties, got {len(got)}"
    if kw == "pattern":
        return f"expected a string matching the pattern {_show(expect, 120)}, got {shown}"
    if kw == "format":
        text = _formats.explained(expect, got, shown)
        fault = _regex_fault(got) if expect == "regex" and isinstance(got, str) and shown != _HIDDEN else None
        if fault is None:
            return text
        from harness_one import Redactor  # only a refusal needs it

        fault = Redactor.escape_surrogates(secrets.mask(fault))  # re's words quote the value: masked as it is
        return f"{text}: " + (fault if len(fault) <= 120 else fault[:117] + "...")
    if kw == "multipleOf":
        return f"expected a multiple of {_show(expect)}, got {shown}"
    if kw == "uniqueItems":
        return "expected all items to be unique"
    if kw == "unevaluatedItems":
        return "unexpected items (no part of the schema allows them)"
    if kw in ("oneOf", "anyOf"):
        options = []
        subs = [sub for sub in error.context or () if not (str(sub.validator) == "type" and _said_by_choices(sub))]
        where = json_path(error.absolute_path)
        for sub in sorted(subs, key=lambda e: e.relative_schema_path[0] if e.relative_schema_path else 0):
            number = sub.relative_schema_path[0] + 1 if sub.relative_schema_path else "?"
            for problem in _describe(sub, secrets, hidden):  # worded as at the top: the path, the names
                at = "" if problem.path == where else f"{problem.path}: "
                options.append(f"option {number}: {at}{problem.message}")
            if len(options) >= 6:
                break
        del options[6:]
        if kw == "oneOf" and not error.context:
            return f"matches more than one of the {len(expect)} alternatives; it must match exactly one"
        head = "must match exactly one of the alternatives" if kw == "oneOf" else "must match at least one of the alternatives"
        return head + ("; " + "; ".join(options) if options else "")
    if kw == "not":
        return f"must not match the schema {_show(expect)}"
    if kw == "dependentSchemas":
        return "does not match the schema that applies when a property is present"
    if kw in ("None", "False"):  # a `false` subschema
        return "no value is allowed here"
    if kw == "contains":
        return f"expected at least one item matching {_show(expect)}"
    if kw in ("minContains", "maxContains") and isinstance(error.schema, Mapping):
        most = "at most" if kw == "maxContains" else "at least"
        return f"expected {most} {expect} items matching {_show(error.schema.get('contains'))}"
    text = str(error.message)
    return text if len(text) <= 200 else text[:197] + "..."


# ---------------------------------------------------------------------------- the plugin


class ValidationPlugin:
    """Validates every call's arguments against its tool's schema, then fills schema defaults.

    Args:
        backend: ``"auto"`` (jsonschema-rs, the default install), ``"python"`` (jsonschema only) or ``"rust"``.
            The error list comes from jsonschema (the verdict's first error when it finds none in time).
        formats: assert ``format`` (date-time, email, uri, uuid, ipv4/6, hostname, ...).
        extra_secret_keys: key names whose values its argument errors do not show either, added to
            :data:`harness_one.MODEL_SECRET_KEYS` and matched as they are (on a key's last words:
            ``ssn`` hides ``$.ssn`` and ``$.customer_ssn``, not ``$.ssn_format``). The ``logging``
            plugin's ``extra_secret_keys`` apply to logs only: name a key here too to keep its value
            out of the errors the model reads.
    """

    name = "validation"
    order = 80

    def __init__(self, backend: Backend = "auto", *, formats: bool = True, extra_secret_keys: Iterable[str] = ()) -> None:
        from ._options import flag  # here: the options are checked once, when the plugin is built

        if not isinstance(backend, str) or backend not in ("auto", "rust", "python"):
            raise ValueError(f"validation backend must be 'auto', 'rust' or 'python', not {backend!r}")
        self.backend: Backend = backend
        self.formats = flag(formats, "validation formats")
        self.extra_secret_keys = _key_names(extra_secret_keys)
        self._compiled: dict[Tool, CompiledSchema] = {}

    def compiled(self, tool: Tool) -> CompiledSchema:
        """The tool's compiled schema (compiled now, and not kept, for a tool no registry of this plugin has)."""
        found = self._compiled.get(tool)
        if found is None:  # not kept: harness_tool_added keeps every registered tool's (this one was removed)
            found = compile_schema(tool.parameters, self.backend, formats=self.formats, extra_secret_keys=self.extra_secret_keys)
        return found

    @hookimpl
    def harness_tool_added(self, tool: Tool) -> None:
        self._compiled[tool] = compile_schema(
            tool.parameters, self.backend, formats=self.formats, extra_secret_keys=self.extra_secret_keys
        )

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        self._compiled.pop(tool, None)

    @hookimpl(trylast=True)
    @per_tool(lambda plugin, tool: plugin._pre_validate_for(tool))
    def harness_pre_validate(self, call: Call) -> None:
        self._pre_validate_for(call.tool)(call)

    def _pre_validate_for(self, tool: Tool) -> Callable[[Call], None]:
        """The check of ``tool``'s arguments, bound once per tool to its compiled schema.

        The common case is decided here, in one loop: a flat object of plain JSON scalars
        within the size limit, which jsonschema-rs finds valid. Anything else takes the whole
        way, :meth:`CompiledSchema.check`.
        """
        compiled = self.compiled(tool)
        check, fast, integers, defaults = compiled.check, compiled._fast, compiled._integers, compiled._defaults
        # Other tools' keys are their parameters' names (the core refuses any other): short, known.
        named = tool.accepts_any

        def pre_validate(call: Call) -> None:
            args = call.arguments
            if fast is not None and len(args) <= 32:
                floats = False
                size = 0
                for value in args.values():
                    kind = type(value)
                    if kind is int:
                        # Not chained, single-digit bounds: the comparisons take the interpreter's fast path.
                        if (value >= -0x3FFFFFFF and value <= 0x3FFFFFFF) or _I_MIN <= value <= _I_MAX:
                            continue
                        break
                    if kind is str:
                        size += len(value) + 2  # and its quotes: an empty string is not free
                    elif kind is float:
                        if value - value:  # NaN or infinity
                            break
                        floats = True
                    elif kind is not bool and value is not None:
                        break
                else:
                    if named:  # a **kwargs tool takes any key: its length counts like a value's
                        size += sum(len(key) + 3 for key in args if type(key) is str)
                    if size <= call.registry.limits.max_bytes:
                        try:
                            valid = fast(args)
                        except ValueError:  # lone surrogates (UnicodeEncodeError): the whole way decides
                            valid = False
                        if valid:
                            if floats and integers is not None:
                                try:
                                    call.arguments = args = _to_integers(args, integers)
                                except _Inexact as exc:
                                    raise exc.refusal(compiled._secrets()) from None
                            if defaults is not None:
                                call.arguments = _fill(args, defaults)
                            return
            registry = call.registry
            checked = check(args, registry.limits, registry.clock, call.decoded is args)
            if checked is not args:
                call.arguments = checked

        return pre_validate

    @property
    def argument_secrets(self) -> Redactor | None:
        """The redactor of the excerpt of JSON text its registry cannot decode, when ``extra_secret_keys`` adds to
        :data:`harness_one.MODEL_SECRET_KEYS` (read on that refusal only; None: the default)."""
        return _secrets(self.extra_secret_keys) if self.extra_secret_keys else None

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        backends = {c.backend for c in tuple(self._compiled.values())}  # tools come and go meanwhile
        return {"backend": ", ".join(sorted(backends)) or self.backend, "compiled": len(self._compiled)}
