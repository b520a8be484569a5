"""JSON out of harness-one: text for the model, answer lines, and argument fingerprints.

One encoder for everything harness-one writes, with one rule for what JSON cannot hold:

- a lone surrogate (``"\\ud800"``, which no UTF-8 stream can carry) becomes U+FFFD (:func:`safe_text`);
- ``NaN`` and the infinities become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
- an integer longer than Python's int-to-text limit (4,300 digits) is written in full;
- other values go through :func:`json_default` (dataclasses, enums, sets, bytes, pydantic models
  and pydantic dataclasses by alias, ``isoformat()`` for dates and times,
  else ``str()``); one that none of these can read (its
  ``__str__`` raises) becomes ``"<TypeName>"``;
- a container (or dataclass) inside itself becomes the string ``"<cycle>"`` where it recurs;
- a value whose containers (lists, tuples, dicts, their subclasses, sets, dataclasses) hold more
  than :data:`MAX_ITEMS` items in all, each counted each time it is written (the same list in it
  many times over: ``yaml.safe_load`` of nested aliases, a "billion laughs"), is written with each
  repeat of a container already written, once that many items have been, as the string
  ``"<repeat>"``: so it takes time and memory in proportion to its distinct parts, not to its
  expansion. (A ``model_dump()`` expands inside the model's library, before this sees it.)

So the output is always valid JSON in valid UTF-8, whatever a tool returned.

A text that shows a value rather than carrying it (a log field, a span attribute, the value an
argument error quotes) keeps each lone surrogate as its backslash escape instead
(:func:`escape_surrogates`), so the value can be told and recovered. What the model reads as a
result or an error keeps U+FFFD: it is what a UTF-8 decoder or a JSON encoder with
``errors="replace"`` makes of such text; it replaces one character with one, so
:func:`rendered_length` measures a result without searching it and a tool's ``max_chars`` holds;
and an escape would read as the six characters ``\\ud83d`` a tool may have returned itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import enum
import functools
import gc
import hashlib
import itertools
import json
import math
import pickle
import re
import sys
from collections.abc import Callable
from typing import Any, Literal, overload

__all__ = [
    "dumps",
    "escape_controls",
    "escape_surrogates",
    "fingerprint",
    "json_data",
    "json_default",
    "json_line",
    "preview",
    "render_value",
    "rendered_length",
    "safe_text",
    "struct_data",
    "text_of",
]

_SURROGATE = re.compile("[\ud800-\udfff]")
#: What :func:`escape_controls` escapes beyond ``json.dumps`` (C0 controls, quotes, backslashes): DEL, the C1 controls
#: (U+009B is a terminal's CSI), the line and paragraph separators and lone surrogates, each as its ``\\u`` escape.
_RAW_CONTROL = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_NON_FINITE: dict[float, str] = {math.inf: "Infinity", -math.inf: "-Infinity"}
#: Digits converted at a time, and ints written in chunks from about that size: under the lowest
#: int-to-text limit Python allows (640), whatever limit the application sets, whenever.
_INT_DIGITS = 600
_CHUNKED_FROM = 1_990  # bits: 600 digits need 1,994
#: Items of lists, tuples and dicts written, repeats counted, before a repeat is written as ``"<repeat>"``:
#: at least two characters each (``1,``), as many as the output_limit plugin's default (one million characters).
MAX_ITEMS = 500_000
_CONTAINERS = frozenset({dict, list, tuple})
#: Types written as themselves, never holding a container.
_LEAVES = frozenset({str, int, float, bool, type(None)})
_PLAIN = _CONTAINERS | _LEAVES


def text_of(value: Any) -> str:
    """``str(value)``, or ``"<TypeName>"`` when that raises: a broken ``__str__`` stops no answer."""
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__}>"


def json_default(value: Any) -> Any:
    """``json.dumps`` fallback: dataclasses, enums, sets, bytes, dates and times, anything with
    ``model_dump``, else :func:`text_of`.

    A ``datetime``, ``date`` or ``time`` is its ``isoformat()`` (``2024-01-01T12:00:00+00:00``), the
    RFC 3339 text its inferred schema describes; ``str()`` would write a space for the ``T``.
    """
    try:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            if hasattr(type(value), "__pydantic_fields__"):  # a pydantic dataclass (or a subclass): as pydantic writes it
                return _pydantic_adapter(type(value)).dump_python(value, by_alias=True, warnings=False)
            return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}  # one level: the encoder comes back
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, (datetime.date, datetime.time)):  # a datetime is a date
            return value.isoformat()
        if isinstance(value, (set, frozenset, tuple)):
            return list(value)
        if isinstance(value, (bytes, bytearray)):
            return bytes(value).decode("utf-8", "replace")
        dump = getattr(value, "model_dump", None)
        if callable(dump):
            return _model_data(value, dump)
    except Exception:  # a field or model_dump that raises: the value is written as any other object
        pass
    return text_of(value)


@functools.lru_cache(maxsize=256)
def _pydantic_adapter(kind: type) -> Any:
    """pydantic's ``TypeAdapter`` of a pydantic dataclass ``kind`` (its subclasses too, which have no serializer of their
    own): its aliases, excluded and computed fields and serializers, as its output schema describes it."""
    return sys.modules["pydantic"].TypeAdapter(kind)


def _model_data(value: Any, dump: Callable[..., Any]) -> Any:
    """A model's data, its values written by the encoder: a pydantic model's ``model_dump(by_alias=True)`` (quiet),
    the keys its output schema names (``model_dump()`` when the model's own ``model_dump`` takes no options);
    ``model_dump()`` of any other library's model."""
    pydantic = sys.modules.get("pydantic")  # never imported here: a pydantic model means it is loaded
    if pydantic is None or not isinstance(value, pydantic.BaseModel):
        return dump()
    for options in ({"by_alias": True, "warnings": False}, {"by_alias": True}):
        try:  # no serializer warning: it would print the values (a token) to stderr, or raise under -W error
            return dump(**options)
        except TypeError:  # a model_dump of its own that takes fewer options
            pass
    return dump()


def safe_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (so it encodes as UTF-8): text the model reads
    (see the module docstring for why not :func:`escape_surrogates`)."""
    return _SURROGATE.sub("\ufffd", text)


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (which UTF-8 cannot encode) as its backslash escape, ``\\ud83d``:
    text that shows a value (logs, spans, the values argument errors quote), which stays recoverable."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _long_int(value: int) -> str:
    """All the digits of an int past the int-to-text limit, converted in chunks under it."""
    sign, value = ("-", -value) if value < 0 else ("", value)
    chunk = 10 ** (_INT_DIGITS - 1)
    parts = []
    while value >= chunk:
        value, low = divmod(value, chunk)
        parts.append(str(low).zfill(_INT_DIGITS - 1))
    parts.append(str(value))
    return sign + "".join(reversed(parts))


class _Cleaner:
    """Copies a value with the JSON gaps filled, for :func:`dumps`.

    What JSON text cannot carry as a Python value (a long int, and any string that looks like the
    token standing for one) becomes a token, put back as its JSON text after encoding. A container
    inside itself becomes ``"<cycle>"`` (followed, ``a = []; a += [a, a]`` has 2**200 paths). With
    ``bounded``, a container met again once :data:`MAX_ITEMS` items have been copied becomes ``"<repeat>"``.
    """

    def __init__(self, *, bounded: bool = False) -> None:
        self.texts: list[str] = []
        self.open: set[int] = set()  # the containers being copied, outermost to here
        self.written: set[int] | None = set() if bounded else None  # the containers copied, when bounded
        self.copied = 0  # items of the containers copied, repeats counted (when bounded)
        self.made: list[Any] = []  # what json_default made, kept while bounded: a freed one's id could come again

    def value(self, value: Any, depth: int = 0) -> Any:
        if depth > 200:
            return "..."
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind is float:
            return value if math.isfinite(value) else _NON_FINITE.get(value, "NaN")
        if kind is int:
            return self.integer(value)
        if value is None or kind is bool:
            return value
        if isinstance(value, int):
            return self.integer(int(value))
        if isinstance(value, float):
            return self.value(float(value), depth)
        if id(value) in self.open:
            return "<cycle>"
        if self.written is not None and (kind in _CONTAINERS or _composite(kind)):
            if self.copied >= MAX_ITEMS and id(value) in self.written:
                return "<repeat>"
            self.written.add(id(value))
            if isinstance(value, (dict, list, tuple)):  # a set or a dataclass: the list or dict it becomes counts
                self.copied += len(value)
        self.open.add(id(value))
        try:
            if isinstance(value, dict):
                return {self.key(k): self.value(v, depth + 1) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [self.value(v, depth + 1) for v in value]
            made = json_default(value)
            if self.written is not None:
                self.made.append(made)
            return self.value(made, depth + 1)
        except Exception:  # a mapping or a sequence whose reading raises: named, as a value whose str() raises
            return f"<{kind.__name__}>"
        finally:
            self.open.discard(id(value))

    def token(self, text: str) -> str:
        self.texts.append(text)
        return f"{_TOKEN}{len(self.texts) - 1}"

    def text(self, value: str) -> str:
        return self.token(json.dumps(value, ensure_ascii=False)) if _TOKEN in value else value

    def integer(self, value: int) -> Any:
        if value.bit_length() < _CHUNKED_FROM:
            return value
        return self.token(_long_int(value))

    def key(self, key: Any) -> str:
        if type(key) is str:
            return self.text(key)
        if isinstance(key, float) and not math.isfinite(key):
            return _NON_FINITE.get(key, "NaN")
        if isinstance(key, int) and not isinstance(key, bool):
            return _long_int(key) if key.bit_length() >= _CHUNKED_FROM else str(key)
        if key is None or isinstance(key, (bool, float)):
            return json.dumps(key)
        return self.text(text_of(json_default(key)))


class _Data(_Cleaner):
    """The cleaner for :func:`json_data`: strings made UTF-8 safe, ints kept whatever their length."""

    def text(self, value: str) -> str:
        return safe_text(value)

    def integer(self, value: int) -> Any:
        return value


#: The largest integer a double holds exactly (2**53; 2**53 + 1 is the first one it rounds).
_EXACT_INT = 2**53


class _StructData(_Data):
    """The cleaner for :func:`struct_data`: also an int a double would round written as its digits."""

    def integer(self, value: int) -> Any:
        return value if -_EXACT_INT <= value <= _EXACT_INT else _long_int(value)


def _exact_int(digits: str) -> int | str:
    """A JSON integer as :func:`struct_data` keeps it: an int when a double holds it exactly, else its digits."""
    if len(digits) < 16:  # within 10**15 - 1
        return int(digits)
    if len(digits) > 17:  # past 2**53 (16 digits, 17 with a sign): never converted (no int-to-text limit to meet)
        return digits
    number = int(digits)
    return number if -_EXACT_INT <= number <= _EXACT_INT else digits


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=json_default)
_TOKEN = "\x00harness-one-long-int:"
_TOKEN_JSON = re.compile(r'"\\u0000harness-one-long-int:(\d+)"')


def dumps(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON text (non-ASCII kept), valid whatever it holds; see the module docstring."""
    text = _json(value, indent)
    # Outside strings JSON text is ASCII, so a surrogate here is inside a string: replace it in place.
    return safe_text(text) if _SURROGATE.search(text) else text


_LINE_BREAKS = re.compile("[\x85\u2028\u2029]")


def json_line(value: Any) -> str:
    """:func:`dumps` for a JSON Lines stream: the line breaks JSON leaves raw in a string (U+0085,
    U+2028, U+2029: a reader that splits at every line break, ``str.splitlines``, would cut the line
    there) written as ``\\u2028``. For ``run``'s answers, not the per-call path."""
    return _LINE_BREAKS.sub(lambda m: f"\\u{ord(m.group()):04x}", dumps(value))


def _composite(kind: type) -> bool:
    """Whether a value of type ``kind`` is written as a list or an object other than a plain ``dict``,
    ``list`` or ``tuple``: one of their subclasses (``OrderedDict``), a set, a dataclass."""
    return issubclass(kind, (dict, list, tuple, set, frozenset)) or dataclasses.is_dataclass(kind)


def _items(value: Any) -> tuple[int, Any]:
    """The items ``value`` (a container, see :func:`_composite`) is written with, and what they are."""
    if isinstance(value, dict):
        return len(value), value.values()
    if isinstance(value, (list, tuple, set, frozenset)):
        return len(value), value
    fields = [getattr(value, f.name, None) for f in dataclasses.fields(value)]
    return len(fields), fields


def _expansion(value: Any, counts: dict[int, int], depth: int = 0) -> int:
    """The items of the containers in ``value`` (itself one), each counted each time it is written, up
    to ``MAX_ITEMS + 1`` (also past 200 levels, where the cleaner stops), or ``-1`` when no container
    in it is written twice (then the bound changes nothing): linear in its distinct containers,
    whose counts ``counts`` keeps (its entry ``-1`` is set when one is met twice)."""
    known = counts.get(id(value))
    if known is not None:
        counts[-1] = 1
        return known
    counts[id(value)] = 0  # in itself (a cycle): written as "<cycle>"
    total, items = _items(value)
    for item in items:
        kind = type(item)
        if kind in _CONTAINERS or (kind not in _LEAVES and _composite(kind)):
            total = MAX_ITEMS + 1 if depth >= 200 else min(total + _expansion(item, counts, depth + 1), MAX_ITEMS + 1)
    counts[id(value)] = total
    return total


def _repeats_beyond(value: Any) -> bool:
    """Whether ``value``'s containers hold more than :data:`MAX_ITEMS` items, repeats counted, one of them
    written twice.

    Level by level in C: counted (:func:`_expansion`) only when a container in it is held twice
    (in it, or also elsewhere), so a value without shared containers costs a look at each part."""
    kind = type(value)
    if kind not in _CONTAINERS and (kind in _LEAVES or not _composite(kind)):
        return False
    level = [value]
    while True:
        parts = gc.get_referents(*level)
        kinds = set(map(type, parts))
        if kinds <= _LEAVES:
            return False
        if kinds <= _CONTAINERS:
            level = parts
        elif kinds <= _PLAIN:  # most values: JSON's own types
            level = list(itertools.compress(parts, map(_CONTAINERS.__contains__, map(type, parts))))
        else:  # also subclasses, sets, dataclasses (and leaves of other types: dates, enums)
            wanted = {kind for kind in kinds if kind in _CONTAINERS or (kind not in _LEAVES and _composite(kind))}
            if not wanted:
                return False
            level = list(itertools.compress(parts, map(wanted.__contains__, map(type, parts))))
        del parts  # each container is now held by its parent and by ``level``
        if _most_held(level) > _HELD_ONCE:
            counts: dict[int, int] = {}
            return _expansion(value, counts) > MAX_ITEMS and -1 in counts


def _most_held(level: list[Any]) -> int:
    return max(map(sys.getrefcount, level))


def _held_once() -> int:
    parent: list[list[Any]] = [[]]
    return _most_held(list(parent))


#: What :func:`_most_held` reads for a container held by one parent (and the level).
_HELD_ONCE = _held_once()


def _json(value: Any, indent: int | None = None) -> str:
    """:func:`dumps` but for its lone surrogates, each of which it replaces with one character."""
    if _repeats_beyond(value):
        return _cleaned(value, indent, _Cleaner(bounded=True))
    try:
        if indent is None:  # json.dumps with these options, without building an encoder each time
            return _ENCODER.encode(value)
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=json_default, indent=indent)
    except Exception:  # NaN, a long int, a cycle, a value whose reading raises: the cleaner's copy
        return _cleaned(value, indent, _Cleaner())


def _cleaned(value: Any, indent: int | None, cleaner: _Cleaner) -> str:
    """``value`` written through ``cleaner``'s copy, its tokens put back."""
    text = json.dumps(cleaner.value(value), ensure_ascii=False, allow_nan=False, default=str, indent=indent)
    if cleaner.texts:
        text = _TOKEN_JSON.sub(lambda m: cleaner.texts[int(m.group(1))], text)
    return text


def json_data(value: Any) -> Any:
    """``value`` as plain JSON data (dicts, lists, strings, numbers), what :func:`dumps` would write.

    For a provider SDK that takes data rather than text (Gemini): strings made UTF-8 safe, NaN and
    the rest as :func:`dumps` writes them, ints kept. ``value`` itself when it is already so.
    """
    if _repeats_beyond(value):
        return _Data(bounded=True).value(value)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except Exception:  # as in _json: NaN, a long int, a cycle, a value whose reading raises
        return _Data().value(value)
    return _Data().value(value) if _SURROGATE.search(text) else value


def struct_data(value: Any) -> Any:
    """:func:`json_data` for an API whose data is a protobuf ``Struct`` (Gemini's function responses),
    whose numbers are doubles and whose keys are strings.

    An int past 2**53 in size (which a double rounds, or cannot hold) becomes its decimal digits
    as a string; a key that is not a string becomes the text :func:`dumps` writes for it (``1`` ->
    ``"1"``, ``True`` -> ``"true"``), and of keys that then coincide the last one's value is kept,
    as a JSON reader of that text keeps it. Always a copy: plain dicts, lists, strings, numbers.
    """
    if _repeats_beyond(value):
        return _StructData(bounded=True).value(value)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        if not _SURROGATE.search(text):
            return json.loads(text, parse_int=_exact_int)
    except Exception:  # as in json_data
        pass
    return _StructData().value(value)


def render_value(value: Any) -> str:
    """What the model reads for a result: a string as is (made UTF-8 safe), anything else as JSON."""
    if isinstance(value, str):
        return safe_text(value)
    return dumps(value)


def rendered_length(value: Any) -> int:
    """Characters the model reads for a result ``value``: the length of
    :meth:`CallResult.for_model() <harness_one.CallResult.for_model>` for a call that returned it.

    For a tool that keeps its result within a number of characters (``max_chars``): a string is
    measured as it is (made UTF-8 safe it keeps its length), anything else is written once as
    harness-one's JSON (not searched for lone surrogates: replacing them keeps the length).
    Inside a list or an object a value takes the characters it takes alone (nesting past 200
    levels and repeats past 500,000 items aside), so the parts of a result can be measured one by
    one; a string there is quoted and escaped: ``rendered_length([text]) - 2``.
    """
    if isinstance(value, str):
        return len(value)
    return len(_json(value))  # its lone surrogates, replaced one for one, change no length


#: Modules whose values' ``repr`` says all they hold (a date, a Decimal, a UUID, a path): fingerprinted by it.
_FAITHFUL_REPR = frozenset({"builtins", "datetime", "decimal", "uuid", "fractions", "pathlib", "ipaddress", "enum"})


def _typed(value: Any) -> dict[str, Any]:
    """A value that is not JSON, for :func:`fingerprint`, by what it holds: a secret (pydantic's ``SecretStr``, whose
    ``repr`` is the same for every secret) by its value's digest; a set by its items in order; a pydantic model or a
    dataclass by its fields (every one: excluded and private ones too); a date, a ``Decimal``, an enum and the like
    by their ``repr``; any other object by the digest of its pickle (its ``repr`` may hide what differs), or its
    ``repr`` when it does not pickle. Two that differ so never match; equal ones do, in any process."""
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    reveal = getattr(value, "get_secret_value", None)
    if callable(reveal):
        with contextlib.suppress(Exception):
            secret = reveal()
            if isinstance(secret, (str, bytes)):
                data = secret.encode("utf-8", "surrogatepass") if isinstance(secret, str) else secret
                return {"\u0000type": kind, "secret": hashlib.sha256(data).hexdigest()}
    if isinstance(value, (set, frozenset)):
        with contextlib.suppress(Exception):
            return {"\u0000type": kind, "items": sorted(_canonical(item, _typed) for item in value)}
    pydantic = sys.modules.get("pydantic")  # never imported here: a pydantic model means it is loaded
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        private = getattr(value, "__pydantic_private__", None) or {}
        return {"\u0000type": kind, "fields": dict(vars(value)), "private": dict(private)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"\u0000type": kind, "fields": {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}}
    if type(value).__module__.partition(".")[0] not in _FAITHFUL_REPR:
        with contextlib.suppress(Exception):
            return {"\u0000type": kind, "pickle": hashlib.sha256(pickle.dumps(value, protocol=5)).hexdigest()}
    return {"\u0000type": kind, "repr": repr(value)}


@overload
def fingerprint(arguments: Any, *, json_only: Literal[False] = ..., whole_numbers: bool = ...) -> str: ...
@overload
def fingerprint(arguments: Any, *, json_only: Literal[True], whole_numbers: bool = ...) -> str | None: ...
def fingerprint(arguments: Any, *, json_only: bool = False, whole_numbers: bool = True) -> str | None:
    """A stable SHA-256 digest of (validated) arguments: equal JSON values give equal digests.

    Keys are sorted, so ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` match, and a whole
    number is one number however it is spelled (``1``, ``1.0``, ``1e0``): idempotency keys'
    check. With ``whole_numbers=False`` each number is kept as the tool gets it (``5`` and
    ``5.0``, ``0.0`` and ``-0.0`` differ): cache keys. A value that is not JSON (a set, a date,
    from a caller in this process) is written with its type, so it never matches the string
    of its ``repr`` (a secret by its value's digest, a pydantic model by its fields: :func:`_typed`); with ``json_only``, such a value gives None instead: its ``repr`` may not
    tell two values apart (``<User object at 0x...>`` at a reused address, ``SecretStr('**********')``).
    """
    default = _not_json if json_only else _typed
    try:
        text = _canonical(arguments, default)
        if whole_numbers and (".0" in text or "e+" in text):  # how a whole float is written (1.0, 1e+16): write it as an int
            text = _canonical(_whole(arguments), default)
    except Exception:  # also a repr() that raises, keys of mixed types (unsorted then, secrets still by digest)
        if json_only:
            return None
        try:
            text = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False, default=_typed)
        except Exception:
            text = dumps(arguments)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _not_json(value: Any) -> Any:
    raise TypeError(f"not JSON: {type(value).__name__}")


def _canonical(value: Any, default: Callable[[Any], Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=default)


def _whole(value: Any) -> Any:
    """``value`` with each float that is a whole number made an int (in dicts, lists and tuples)."""
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is dict:
        return {key: _whole(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_whole(item) for item in value]
    return value


def preview(value: Any, limit: int = 60, redactor: Any = None) -> str:
    """``value`` as an argument error shows it: short JSON text (bounded work for any size: a string's first 80
    characters, 8 items of an array or object, 3 levels; ``...`` where something was left out), control characters
    (C0, DEL, C1), the line and paragraph separators and lone surrogates escaped (``\\u009b``), cut to ``limit``
    characters. With ``redactor`` (a :class:`~harness_one.Redactor`), what is shown is masked as it is taken, before
    any cut (a cut could leave half a secret no mask recognises): text (its first 400 characters) as
    :meth:`~harness_one.Redactor.mask` masks it, a value under a secret key, a ``[secret name, value]`` pair's value.
    The validation plugin's refusals and :meth:`~harness_one.ArgumentProblem.mismatch` show values so."""
    small, cut = _shrink(value, redactor)
    text = escape_controls(json.dumps(small, ensure_ascii=False))
    if len(text) > limit:
        return text[: limit - 3] + "..."
    return text + ("..." if cut and not isinstance(value, str) else "")


def escape_controls(text: str) -> str:
    """JSON ``text`` (``ensure_ascii=False``) with what ``json.dumps`` leaves raw and a terminal or a log would not
    show as written escaped: DEL, the C1 controls, U+2028/U+2029 and lone surrogates (``\\u009b``, ``\\ud83d``)."""
    if text.isascii() and "\x7f" not in text:
        return text
    return _RAW_CONTROL.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    """The ``\\u`` escape of the character ``match`` found, as JSON writes a C0 control (``\\u001b``)."""
    return f"\\u{ord(match[0]):04x}"


def _shrink(value: Any, redactor: Any, depth: int = 0) -> tuple[Any, bool]:
    """A small copy of ``value`` for :func:`preview`, masked by ``redactor`` (if any), and whether anything was left out."""
    if isinstance(value, str):
        text = str(value[:400]) if redactor is None else redactor.mask(value[:400])
        return (text[:80], True) if len(text) > 80 else (text, len(value) > 400)
    if isinstance(value, bool) or value is None:
        return value, False
    if isinstance(value, int):
        if value.bit_length() < 200:
            return int(value), False
        return f"<integer of about {int(value.bit_length() * 0.30103) + 1} digits>", False
    if isinstance(value, float):
        return float(value), False
    if isinstance(value, (dict, list, tuple)):
        if depth >= 3:
            return ("{...}" if isinstance(value, dict) else "[...]"), True
        cut = len(value) > 8
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for k, v in itertools.islice(value.items(), 8):
                name = str(k)[:40] if isinstance(k, str) else str(_shrink(k, None, 3)[0])[:40]  # (10**5000: no str())
                if redactor is not None and isinstance(k, str) and redactor.is_secret(k):
                    from ._redact import REDACTED

                    out[name] = REDACTED
                    continue
                out[name], more = _shrink(v, redactor, depth + 1)
                cut = cut or more
            return out, cut
        if redactor is not None and len(value) == 2 and isinstance(value[0], str) and redactor.is_secret(value[0]):
            from ._redact import REDACTED

            return [_shrink(value[0], redactor, depth + 1)[0], REDACTED], False
        items = []
        for v in itertools.islice(value, 8):
            item, more = _shrink(v, redactor, depth + 1)
            items.append(item)
            cut = cut or more
        return items, cut
    return f"<{type(value).__name__}>", False
