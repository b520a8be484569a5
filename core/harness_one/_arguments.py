"""Decoding the arguments an agent sends into the ``dict`` a tool is called with."""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._errors import ArgumentProblem, ToolArgumentError
from ._schema import _short as _shown
from ._schema import json_path, json_type, listed_names

if TYPE_CHECKING:
    from ._redact import Redactor

__all__ = [
    "MAX_DIGITS",
    "ArgumentLimits",
    "LongNumber",
    "TinyNumber",
    "check_signature",
    "decode_arguments",
    "find_long",
    "load_json",
    "long_numbers",
    "masked_json",
    "plain_json",
]

#: Python's default int-to-text limit; integers past the interpreter's current limit are refused where they stand.
MAX_DIGITS = 4300
_LISTED = 20  # unexpected argument names listed one by one; the rest are counted


def _digit_limit() -> int:
    """The interpreter's int-to-text limit now (``sys.set_int_max_str_digits``; 0 for none)."""
    return sys.get_int_max_str_digits()


class LongNumber(ValueError):
    """A JSON integer past the int-to-text limit (``limit`` digits), with the JSON path where it stands. Its
    :meth:`problem` is how every reader of JSON text refuses it (:class:`TinyNumber`: a float that reads as 0.0)."""

    def __init__(self, path: str, digits: int, limit: int = MAX_DIGITS) -> None:
        super().__init__(f"{path}: a number of {digits} digits (the limit is {limit})")
        self.path = path
        self.digits = digits
        self.limit = limit

    def problem(self) -> ArgumentProblem:
        """The argument problem it is: ``$.n: a number of 5001 digits is too long to read``."""
        return ArgumentProblem(
            self.path,
            f"a number of {self.digits} digits is too long to read",
            "limits",
            f"a number of at most {self.limit} digits",
            f"{self.digits} digits",
        )


def long_numbers(found: list[int]) -> Callable[[str], Any]:
    """A ``parse_int`` for ``json.loads`` that reads an integer past the int-to-text limit in force as a marker of its
    digits (appended to ``found``), never its value: :func:`find_long` then names where the first one stands."""

    def parse_int(digits: str) -> Any:
        try:
            return int(digits)
        except ValueError:  # past the limit in force now, whatever the application set it to
            found.append(len(digits) - digits.startswith("-"))
            return _Long(found[-1])

    return parse_int


def find_long(value: Any) -> LongNumber | None:
    """The first integer :func:`long_numbers` marked in ``value`` (its path from ``value``), or None."""
    found = _find_marker(value, _Long)
    return None if found is None else LongNumber(json_path(reversed(found[0])), found[1].digits, _digit_limit())


class _Long:
    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _find_marker(value: Any, kind: type[Any]) -> tuple[list[Any], Any] | None:
    """The path (its parts, innermost first) of the first ``kind`` in ``value`` (a marker a parse hook left), and it.

    Iterative, each step's path one link to its parent's: text the decoder read at any depth is walked whole.
    """
    stack: list[tuple[Any, Any]] = [(value, None)]  # (a value, its path: (key, the parent's path) or None)
    while stack:
        node, path = stack.pop()
        if isinstance(node, kind):
            parts = []
            while path is not None:
                key, path = path
                parts.append(key)
            return parts, node
        if isinstance(node, dict):
            stack.extend((item, (key, path)) for key, item in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((node[i], (i, path)) for i in range(len(node) - 1, -1, -1))
    return None


class _Tiny(float):
    """0.0, read from ``literal``: a number too small for a float (still a float to whatever reads it)."""

    __slots__ = ("literal",)
    literal: str


def _tiny_floats(literal: str) -> Any:
    """A ``parse_float`` for ``json.loads``: a number with a digit other than 0 that a float reads as 0.0 (``1e-400``,
    too small for one, which ``exclusiveMinimum: 0`` would refuse and ``multipleOf`` take) is read as a marker of it."""
    value = float(literal)
    if value == 0.0 and literal.lower().partition("e")[0].strip("-0."):
        tiny = _Tiny(value)
        tiny.literal = literal
        return tiny
    return value


#: What a number too small for a float needs: an exponent of 3 digits below zero (``1e-400``) or, with one of 2,
#: over 200 zeros before its first other digit (``0.000...1e-99``). :func:`load_json` looks for its parts first.
_LONG_RUN = "0" * 200  # (also a run of 200 digits in :func:`plain_json`'s shape of the text)
_TINY = re.compile(r"[eE]-\d{3}|" + _LONG_RUN)


class TinyNumber(LongNumber):
    """A JSON number with a digit other than 0 that a float reads as 0.0 (``1e-400``: too small for one), with the
    JSON path where it stands: it would pass as 0.0, refused by ``exclusiveMinimum: 0`` and taken by ``multipleOf``.
    A ``LongNumber`` for its readers' ``except``: ``path`` and :meth:`problem` are what the two share (no ``digits``)."""

    def __init__(self, path: str, literal: str) -> None:
        from ._schema import _hidden

        ValueError.__init__(self, f"{path}: {literal} is too small for a float")
        self.path = path
        self.literal = "(redacted)" if _hidden(path) else literal if len(literal) <= 60 else literal[:57] + "..."

    def problem(self) -> ArgumentProblem:
        """``$.a: expected a number a float can hold, got 1e-400 (too small for a float: it reads as 0.0)``, worded as
        one too large for a float is."""
        return ArgumentProblem(
            self.path,
            f"expected a number a float can hold, got {self.literal} (too small for a float: it reads as 0.0)",
            "type",
            "a number a float can hold",
            self.literal,
        )


#: JSON text from this length on is parsed with the cyclic garbage collector paused: a payload
#: of many small arrays would otherwise set off collections that cost more than the parse.
_QUIET_FROM = 16 * 1024


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (process-wide) unless it is already off; resume after."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


#: The whitespace JSON allows around a value (RFC 8259); ``str.strip()`` removes more.
_JSON_SPACE = " \t\r\n"
#: What may stand between a value and a mistake after it: space, and the arrays and objects it closes.
_AFTER_VALUE = _JSON_SPACE + "]}"
#: What a number or a literal read before a mistake in it (``12ab``, ``true1``) is made of.
_LITERAL = "0123456789+-.eEtruefalsn"

#: ``json.loads`` of a ``str`` without its per-call look at its keyword arguments (about 2,900
#: instructions of a short text's 13,000). A leading BOM is refused as any other stray character.
_decode = json.JSONDecoder().decode
_decode_tiny = json.JSONDecoder(parse_float=_tiny_floats).decode


def load_json(text: str) -> Any:
    """``json.loads`` that names the path of a number no Python number holds (:class:`LongNumber`: an integer too
    long to read; :class:`TinyNumber`: a float too small, which would read as 0.0), for every reader of JSON text.

    Raises ``json.JSONDecodeError`` for invalid JSON and ``RecursionError`` past the decoder's depth.
    """
    # Text that may hold a number too small for a float is read with markers of them (_tiny_floats), in the one parse.
    # (Looks at C speed first: text without a "-" pays one; 200 zeros need no pattern to say so.)
    shaped = (len(text) > 200 and _LONG_RUN in text) or (
        "-" in text and ("e-" in text or "E-" in text) and _TINY.search(text) is not None
    )
    decode = _decode_tiny if shaped else _decode
    try:
        if len(text) < _QUIET_FROM:
            value = decode(text)
        else:
            with _collector_paused():
                value = decode(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer past the interpreter's digit limit: read again to find where it stands
        pass
    else:
        if shaped and (found := _find_marker(value, _Tiny)) is not None:
            raise TinyNumber(json_path(reversed(found[0])), found[1].literal)
        return value
    long: list[int] = []
    value = json.loads(text, parse_int=long_numbers(long))
    if long:
        raise find_long(value) or LongNumber("$", long[0], _digit_limit())
    return value  # pragma: no cover  (a ValueError other than the digit limit)


def _more_containers(text: str, most: int) -> bool:
    """Whether JSON ``text`` holds more than ``most`` arrays and objects, counted at C speed:
    its brackets, and when there are too many, those outside its strings.

    Linear in the text: with the escaped backslashes and quotes taken out, every quote left
    opens or closes a string (one never closed runs to the end), so every other piece between
    quotes is inside one.
    """
    brackets = text.count("[") + text.count("{")
    if brackets <= most:
        return False
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    inside = "".join(text.split('"')[1::2])
    return brackets - inside.count("[") - inside.count("{") > most


#: The text as :func:`plain_json` reads it: digits as 0, ``E`` as ``e``, ``{`` as ``[``, signs dropped.
_SHAPE = bytes.maketrans(b"123456789E{", b"000000000e[")


def plain_json(raw: str | bytes | bytearray | memoryview, limits: ArgumentLimits) -> bool:
    """Whether decoded JSON text ``raw`` surely holds no NaN or infinity and no nesting past ``limits``.

    Read on the text, at C speed: fewer brackets than ``max_depth`` (and
    ``max_containers``) bound the depth (and the count of arrays and objects); no ``NaN``,
    ``Infinity``, exponent of 3 digits or run of 200 digits means every float is finite (a
    number too large for a float, such as ``1e400``, reads as infinity; fewer digits with an
    exponent of 2 stay under 1e298). Text that fails this is not wrong, only not vouched for
    (the validation plugin then walks it): a string "1e400" is no number, but counts here.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    shape = (data.tobytes() if isinstance(data, memoryview) else data).translate(_SHAPE, b"+-").decode("latin-1")
    return (
        shape.count("[") <= min(limits.max_depth, limits.max_containers)
        and "NaN" not in shape
        and "Infinity" not in shape
        and "e000" not in shape
        and _LONG_RUN not in shape
    )


@dataclass(frozen=True, slots=True)
class ArgumentLimits:
    """Refuse oversized input cheaply, before anything recursive sees it.

    ``max_bytes`` bounds a JSON string's length (and, via the validation plugin, the
    estimated size of a ``dict``); ``max_depth`` bounds nesting of objects and arrays;
    ``max_containers`` bounds how many arrays and objects the arguments hold (their own object
    aside; counted on JSON text before it is parsed, and by the validation
    plugin), since each costs a parse and a walk in Python. The defaults keep a refusal of
    any payload just under them within a few milliseconds (see docs/limits.md); raise them
    for tools that take large documents.
    """

    max_bytes: int = 256 * 1024
    max_depth: int = 64
    max_containers: int = 10_000

    def too_deep(self) -> ToolArgumentError:
        """The refusal of arguments nested past ``max_depth``, worded alike wherever it is found (JSON text
        past the decoder's depth here, a walk of the arguments in the validation plugin)."""
        most = self.max_depth
        return _problem(f"arguments are nested more than {most} levels deep", "limits", f"depth <= {most}", f"depth > {most}")

    def too_many(self) -> ToolArgumentError:
        """The refusal of arguments holding more than ``max_containers`` arrays and objects, worded alike
        wherever it is found (JSON text counted here, a walk of the arguments in the validation plugin)."""
        most = self.max_containers
        return _problem(
            f"arguments hold more than {most} arrays and objects", "limits", f"<= {most} arrays and objects", f"> {most}"
        )


def decode_arguments(raw: Any, limits: ArgumentLimits, secrets: Redactor | None = None) -> dict[str, Any]:
    """A ``dict`` from a dict, a mapping, ``None``, or a JSON string/bytes holding an object.

    ``secrets``: the redactor of the excerpt of invalid JSON a refusal shows (default: that of
    :data:`~harness_one.MODEL_SECRET_KEYS`; see :func:`_near`).
    """
    if type(raw) is dict:
        return raw
    if raw is None:
        return {}
    if isinstance(raw, (str, bytes, bytearray, memoryview)):
        return _parse(raw, limits, secrets)
    if isinstance(raw, Mapping):
        try:
            return dict(raw)
        except Exception as exc:
            raise _problem(f"arguments could not be read as a mapping: {type(exc).__name__}", "type", "object") from None
    got = json_type(raw)
    raise ToolArgumentError([ArgumentProblem("$", f"arguments must be a JSON object, got {got}", "type", "object", got)])


def _problem(message: str, keyword: str, expected: str, got: str | None = None) -> ToolArgumentError:
    return ToolArgumentError([ArgumentProblem("$", message, keyword, expected, got)])


def _parse(raw: str | bytes | bytearray | memoryview, limits: ArgumentLimits, secrets: Redactor | None = None) -> dict[str, Any]:
    size = len(raw) if isinstance(raw, str) else raw.nbytes if isinstance(raw, memoryview) else len(raw)
    if isinstance(raw, str) and size * 4 > limits.max_bytes and size <= limits.max_bytes and not raw.isascii():
        size = len(raw.encode("utf-8", "surrogatepass"))  # text is measured in UTF-8 bytes, as bytes are
    if size > limits.max_bytes:  # text with more characters than that is not encoded to be measured
        least = "at least " if isinstance(raw, str) and size == len(raw) and not raw.isascii() else ""
        raise _problem(
            f"arguments are {least}{size} bytes; the limit is {limits.max_bytes}",
            "limits",
            f"<= {limits.max_bytes} bytes",
            f"{least}{size} bytes",
        )
    if isinstance(raw, str):
        text = raw
    else:
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _problem(
                f"arguments are not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at position {exc.start})",
                "json",
                "UTF-8 text",
                "invalid UTF-8",
            ) from None
    if not text.strip(_JSON_SPACE):  # only JSON's whitespace: "\u3000" or "\x0b" is text that is not JSON
        return {}
    # (the arguments' own object is not one of them)
    if len(text) > limits.max_containers and _more_containers(text, limits.max_containers + 1):
        raise limits.too_many()
    try:
        value = load_json(text)
    except LongNumber as exc:
        raise ToolArgumentError([exc.problem()]) from None
    except json.JSONDecodeError as exc:
        # (the decoder's "Invalid control character at", "Unterminated string starting at")
        where = f"{exc.msg.removesuffix(' at')} at line {exc.lineno} column {exc.colno}"
        raise _problem(
            f"arguments are not valid JSON: {where} (near {_near(text, exc.pos, secrets)!r})",
            "json",
            "valid JSON",
            "invalid JSON",
        ) from None
    except RecursionError:  # deeper than the decoder reads (about the interpreter's recursion limit, less the stack)
        if limits.max_depth < sys.getrecursionlimit() // 2:  # so surely past max_depth: worded as every depth refusal
            raise limits.too_deep() from None
        raise _problem(  # (a max_depth the decoder may not reach: not claimed to be passed; as the MCP server words it)
            "arguments are nested too deeply to read", "limits", f"depth <= {limits.max_depth}", "deeper than JSON is read"
        ) from None
    if not isinstance(value, dict):
        got = json_type(value)
        raise _problem(f"arguments must be a JSON object, got {got}", "type", "object", got)
    return value


#: Characters before a mistake in JSON text read to mask what the 40 around it show.
_LOOK_BACK = 1000
#: A name cut at the start of that window is read whole up to this many characters (the longest
#: name the masking rules read, and its quotes).
_NAME_BACK = 104


def _near(text: str, pos: int, secrets: Redactor | None = None) -> str:
    """The 40 characters of JSON ``text`` around a mistake at ``pos``, as an error shows them.

    Masked by ``secrets`` (default: the redactor of ``mask_secrets``, :data:`~harness_one.MODEL_SECRET_KEYS`)
    with the 1,000 characters before them in view, so the value of a secret key the mistake follows is
    not shown (``{"api_key": "sk-..." "n": 1}``); a string those characters start inside is masked
    whole when it is the value of a secret key, however long, and read from its opening quote when it
    is short (a name cut off). When the mistake may be inside the value of a secret key (inside its
    string; after it, space or closing brackets between, unless the mistake is the next name, a string
    and a colon: a quote in the value may have closed it early; inside an unquoted value or where one
    starts), everything from that value to the end of the excerpt is masked; after a secret name with
    no colon, everything from the mistake. Linear, at C speed: ``text`` is valid JSON up to
    ``pos``, so with the escaped backslashes and quotes blanked out (positions kept), every quote
    before ``pos`` opens or closes a string.
    """
    return _masked(text, pos, secrets, max(0, pos - _LOOK_BACK), pos + 20)[-40:]


def masked_json(text: str, secrets: Redactor, limit: int) -> str:
    """The first ``limit`` characters of ``text``, arguments that are no valid JSON (a model's answer cut short), as
    logs and traces show them: masked by ``secrets`` as the excerpt of their refusal is (see :func:`_near`), from
    their start, so a value the mistake may be in, or that follows a secret name without its colon, is masked to
    the end (``{"passwd" "[REDACTED]``), and a secret name JSON-escaped is read decoded (``"pass\\u0077ord"``).
    Linear in ``limit``; never raises."""
    head = text[:limit]
    try:
        load_json(head)
    except json.JSONDecodeError as exc:  # (the text's own mistake, or the cut's when it comes later)
        pos = exc.pos
    except (ValueError, RecursionError):  # a number too long to read, nesting past the decoder's depth: read whole
        pos = len(head)
    else:  # valid JSON up to the cut (or all of it: not an object): read whole
        pos = len(head)
    return _masked(head, pos, secrets, 0, len(head))


def _masked(text: str, pos: int, secrets: Redactor | None, start: int, end: int) -> str:
    """``text[start:end]`` around a mistake at ``pos``, masked as :func:`_near` describes (with the ``text`` before
    ``start`` in view)."""
    from ._redact import _MODEL, REDACTED  # (a refusal only)

    secrets = secrets or _MODEL
    plain = text[:end]
    if "\\" in plain:
        plain = plain.replace("\\\\", "__").replace('\\"', "__")
    cut, hide = end, None  # masked from `cut` to the end (a secret value the mistake is in); `hide`: a secret string
    if plain.count('"', 0, pos) % 2:  # the mistake is inside a string
        opened = plain.rfind('"', 0, pos)
        if _secret_value(text, plain, opened, secrets):
            cut = opened + 1
    else:
        closed = start + len(plain[start:pos].rstrip(_AFTER_VALUE)) - 1
        token = start + len(plain[start:pos].rstrip(_LITERAL))
        if closed >= start and plain[closed] == '"':  # the mistake follows a string (and maybe the closers after it)
            opened = plain.rfind('"', 0, closed)
            if _secret_value(text, plain, opened, secrets):
                if closed == pos - 1 or not _starts_name(plain, pos, end):  # a quote inside it may have closed it early
                    cut = opened + 1
                else:  # the next name: a comma left out
                    hide = (opened + 1, closed)
            elif not plain[closed + 1 : pos].strip(_JSON_SPACE) and _secret_name(text, plain, opened, closed, secrets):
                cut = pos  # a secret name without its colon: what follows is its value
        elif token < pos and _secret_value(text, plain, token, secrets):  # inside an unquoted value (`12ab`, `true1`)
            cut = token
        elif _secret_value(text, plain, pos, secrets):  # where a secret key's value starts (unquoted, or never closed)
            cut = pos + (plain[pos : pos + 1] == '"')
    shown, lead = start, ""
    if plain.count('"', 0, start) % 2:  # the window starts inside a string
        opened = plain.rfind('"', 0, start)
        if _secret_value(text, plain, opened, secrets):
            closed = plain.find('"', start, cut)
            lead, shown, cut = (REDACTED, end, end) if closed == -1 else (REDACTED, closed, cut)
        elif start - opened <= _NAME_BACK:
            shown = opened
    if hide is not None and hide[0] >= shown:
        window = lead + text[shown : hide[0]] + REDACTED + text[hide[1] : cut]
    else:
        window = lead + text[shown:cut]
    if cut < end:
        window += REDACTED
    return secrets.mask(window)


def _secret_value(text: str, plain: str, opened: int, secrets: Redactor) -> bool:
    """Whether the value starting at ``opened`` (a string's opening quote, or an unquoted value's first
    character) is the value of a secret key (``plain``: ``text`` with escapes blanked out, as :func:`_near`
    makes it)."""
    before = plain[:opened].rstrip(_JSON_SPACE)
    if not before.endswith(":"):
        return False
    before = before[:-1].rstrip(_JSON_SPACE)
    if not before.endswith('"'):
        return False
    return _is_secret(text, plain.rfind('"', 0, len(before) - 1), len(before), secrets)


def _secret_name(text: str, plain: str, opened: int, closed: int, secrets: Redactor) -> bool:
    """Whether the string ``text[opened : closed + 1]`` stands where an object's key does and names a secret."""
    return plain[:opened].rstrip(_JSON_SPACE).endswith(("{", ",")) and _is_secret(text, opened, closed + 1, secrets)


def _is_secret(text: str, opened: int, end: int, secrets: Redactor) -> bool:
    """``secrets.is_secret`` of the JSON string ``text[opened:end]``, read decoded (``"api\\u005fkey"`` is
    ``api_key``)."""
    try:
        name = _decode(text[opened:end])
    except ValueError:  # (not a name: the text before it is not JSON)
        return False
    return isinstance(name, str) and secrets.is_secret(name)


def _starts_name(plain: str, pos: int, end: int) -> bool:
    """Whether a string starting at ``pos`` is followed by a colon within ``plain[:end]`` (the name of the next key)."""
    if plain[pos : pos + 1] != '"':
        return False
    closed = plain.find('"', pos + 1, end)
    return closed != -1 and plain[closed + 1 : end].lstrip(_JSON_SPACE).startswith(":")


def check_signature(args: dict[Any, Any], accepted: frozenset[str], required: frozenset[str], accepts_any: bool) -> None:
    """The backstop when no validator ran: non-string, unknown or missing parameters, named.

    Work beyond set operations is bounded: a flood of names is refused as fast as a few.
    """
    problems = []
    odd = [] if set(map(type, args)) <= {str} else [k for k in args if type(k) is not str]
    for key in odd[:10]:
        got = json_type(key)
        shown = "" if key is None else f" {str(key).lower() if isinstance(key, bool) else _short(key)}"
        problems.append(ArgumentProblem("$", f"property names must be strings, got {got}{shown}", "type", "string", got))
    if not accepts_any:
        unknown = len(args) - len(args.keys() & accepted) - len(odd)
        firsts = sorted(itertools.islice((k for k in args if type(k) is str and k not in accepted), _LISTED))
        names = listed_names(accepted, _LISTED) if firsts else ""  # the first few; the rest are counted
        for key in firsts:  # past the first few, in the order they came
            problems.append(
                ArgumentProblem(
                    json_path((key,)),
                    f"unexpected argument; expected one of: {names}",
                    "additionalProperties",
                    "no such property",
                    _shown(key),
                )
            )
        if unknown > _LISTED:
            problems.append(
                ArgumentProblem(
                    "$", f"and {unknown - _LISTED} more unexpected arguments", "additionalProperties", "no such property"
                )
            )
    for key in sorted(required - args.keys()):
        problems.append(ArgumentProblem(json_path((key,)), "required argument is missing", "required", "present", "missing"))
    if problems:
        raise ToolArgumentError(problems)


def call_param_sent(name: str, tool: str) -> ToolArgumentError:
    """The refusal of an argument named like the tool's ``Call`` parameter (a ``**kwargs`` tool takes any other name)."""
    return ToolArgumentError(
        [
            ArgumentProblem(
                json_path((name,)),
                f"unexpected argument; '{name}' is the tool's Call parameter, which harness-one passes itself",
                "additionalProperties",
                "no such property",
                _shown(name),
            )
        ],
        tool=tool,
    )


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."
