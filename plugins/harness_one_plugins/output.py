"""The ``output_limit`` plugin: caps what one result costs the model's context.

A result is measured as the model reads it (a string as is, anything else as harness-one's
JSON), in characters or in UTF-8 bytes. Beyond the limit it is cut, with a marker that states
the original size, or refused with an error the model can act on.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness_one import Call, Outcome, Tool, ToolDefinitionError, ToolError, ToolRegistry, applies_to, hookimpl

from ._text import rendered

__all__ = ["DEFAULT_MAX_OUTPUT", "MODES", "UNITS", "OutputLimit", "OutputLimitPlugin", "OutputTooLarge"]

#: The registry-wide default: one million characters (FastMCP's response limit is 1 MB).
DEFAULT_MAX_OUTPUT = 1_000_000
UNITS = ("chars", "bytes")
MODES = ("truncate", "refuse")
#: The smallest limit that leaves room for the truncation marker.
_MIN_TRUNCATE = 100
_SHORT_INT = 10**18  # ints within it (and floats) render in at most 24 characters: never measured
_WORDS = {"chars": "characters", "bytes": "bytes"}
#: The most characters a cut backs up so as not to split a symbol (an emoji ZWJ sequence with skin tones is 11).
_BACK = 16
_ZWJ = "\u200d"
#: A character that joins the one before it: the zero-width joiner, the text and emoji variation selectors,
#: the emoji skin tones.
_JOINERS = frozenset("\u200d\ufe0e\ufe0f" + "".join(map(chr, range(0x1F3FB, 0x1F400))))
#: The regional indicators (two make a flag), and how many of them before a cut are counted to pair them.
_FLAG_HALVES = "".join(map(chr, range(0x1F1E6, 0x1F200)))
_FLAG_RUN = 1_000


def _mark(char: str) -> bool:
    """A mark that belongs to the character before it (Mn, Me, and Mc: a spacing vowel sign)."""
    return unicodedata.combining(char) != 0 or unicodedata.category(char)[0] == "M"


def _boundary(text: str, end: int) -> int:
    """``end``, backed up (at most :data:`_BACK` characters) so that ``text[:end]`` does not end inside a
    symbol: before a combining mark or a joiner, just after a ZWJ, or between the halves of a flag."""
    floor = max(end - _BACK, 0)
    while floor < end < len(text):
        after, before = text[end], text[end - 1]
        if after in _JOINERS or before == _ZWJ or _mark(after):
            end -= 1
            continue
        if after in _FLAG_HALVES and before in _FLAG_HALVES:  # pairs count from the run's start (up to _FLAG_RUN back)
            seen = text[max(end - _FLAG_RUN, 0) : end]
            if (len(seen) - len(seen.rstrip(_FLAG_HALVES))) % 2:
                end -= 1
        break
    return end


class OutputTooLarge(ToolError):
    """A result was larger than its tool's ``max_output`` and the limit's mode is ``refuse``."""

    kind = "output_too_large"

    def __init__(self, size: int, limit: int, unit: str, *, tool: str | None = None, call_id: str | None = None) -> None:
        self.size, self.limit, self.unit = size, limit, unit
        word = _WORDS.get(unit, unit)
        subject = f"Tool '{tool}'" if tool else "The tool"
        super().__init__(
            f"{subject} returned {size:,} {word}, more than the {limit:,} it may return. "
            "Call it again asking for less: a narrower query, fewer items, or one page of the results.",
            tool=tool,
            call_id=call_id,
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "size": self.size, "limit": self.limit, "unit": self.unit}


@dataclass(frozen=True, slots=True)
class OutputLimit:
    """At most ``limit`` characters or bytes (``unit``) per result; ``mode`` says what happens beyond."""

    limit: int
    unit: str = "chars"
    mode: str = "truncate"

    @classmethod
    def parse(cls, value: Any, *, tool: str, base: OutputLimit | None = None, base_limit: bool = True) -> OutputLimit | None:
        """``max_output=20000`` or ``{"limit": 20000, "unit": "bytes", "mode": "refuse"}``; ``None``/``False``: no limit.

        Keys a mapping leaves out come from ``base`` (the plugin's settings); its ``limit`` only
        with ``base_limit`` (a plugin without a default limit has none to give).
        """
        if value is None or value is False:
            return None
        unit = base.unit if base is not None else "chars"
        mode = base.mode if base is not None else "truncate"
        if isinstance(value, Mapping):
            unknown = set(value) - {"limit", "unit", "mode"}
            if unknown:
                raise ToolDefinitionError(
                    f"Tool '{tool}': unknown max_output keys {sorted(unknown)}; known: ['limit', 'mode', 'unit'].", tool=tool
                )
            if "limit" not in value and (base is None or not base_limit):
                raise ToolDefinitionError(f"Tool '{tool}': max_output needs a 'limit'.", tool=tool)
            limit = value.get("limit", base.limit if base is not None else 0)
            unit, mode = value.get("unit", unit), value.get("mode", mode)
        else:
            limit = value
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ToolDefinitionError(f"Tool '{tool}': max_output must be a positive integer, got {limit!r}.", tool=tool)
        if unit not in UNITS:
            raise ToolDefinitionError(f"Tool '{tool}': max_output unit must be one of {list(UNITS)}, got {unit!r}.", tool=tool)
        if mode not in MODES:
            raise ToolDefinitionError(f"Tool '{tool}': max_output mode must be one of {list(MODES)}, got {mode!r}.", tool=tool)
        if mode == "truncate" and limit < _MIN_TRUNCATE:
            raise ToolDefinitionError(
                f"Tool '{tool}': a truncating max_output must be at least {_MIN_TRUNCATE} (room for the marker), got {limit}.",
                tool=tool,
            )
        return cls(limit, unit, mode)

    def measure(self, text: str) -> int:
        """The size of ``text`` in this limit's unit."""
        return len(text) if self.unit == "chars" else len(text.encode("utf-8", "surrogatepass"))

    def over(self, text: str) -> int | None:
        """The size of ``text`` when it exceeds the limit, else None (no encoding when it surely fits)."""
        if self.unit == "chars":
            size = len(text)
        elif len(text) * 4 <= self.limit:  # UTF-8 takes at most 4 bytes a character
            return None
        else:
            size = self.measure(text)
        return size if size > self.limit else None

    def truncate(self, text: str, size: int) -> str:
        """``text`` cut so that it and the marker fit in ``limit``; the marker states ``size`` and what is shown."""
        word = _WORDS[self.unit]

        def marker(shown: int) -> str:
            return f"\n[output truncated: {size:,} {word} in all, the first {shown:,} shown]"

        kept = self.limit
        for _ in range(3):  # the marker's length depends on the number it shows
            room = self.limit - self.measure(marker(kept))
            if room == kept:
                break
            kept = room
        if self.unit == "chars":
            end = kept
        else:  # cut at a character boundary: never half a character
            end = len(text.encode("utf-8", "surrogatepass")[:kept].decode("utf-8", "ignore"))
        head = text[: _boundary(text, end)]  # nor half a symbol: a flag, an accented letter, an emoji sequence
        return head + marker(self.measure(head))


class OutputLimitPlugin:
    """Caps each result at its tool's ``max_output`` (in ``Tool.options``), or at the plugin's.

    Strings are measured as they are; other results as the JSON the model reads. Numbers,
    booleans and ``None`` are never limited. Beyond the limit, ``mode="truncate"`` returns the
    text cut to fit, ending with ``[output truncated: N characters in all, the first M
    shown]``; ``mode="refuse"`` raises :class:`OutputTooLarge`. A structured result of a tool
    with an ``output_schema`` cannot be cut into a valid value, so it is refused in either mode.

    Args:
        max_output: the limit for tools that declare none (``None`` or ``False``: only tools that
            declare one), checked as a tool's own ``max_output`` is (``0`` is refused).
        unit: ``"chars"`` or ``"bytes"`` (UTF-8), for the default and for tools that give a number.
        mode: ``"truncate"`` or ``"refuse"``, likewise.
    """

    name = "output_limit"
    order = 55  # post_call: after unmarked transforms of other plugins, before idempotency and cache store

    def __init__(
        self, *, max_output: int | bool | None = DEFAULT_MAX_OUTPUT, unit: str = "chars", mode: str = "truncate"
    ) -> None:
        #: No default limit (None or False, as for a tool's own max_output): only unit and mode are the plugin's.
        unlimited = max_output is None or max_output is False
        base = OutputLimit.parse({"limit": _MIN_TRUNCATE if unlimited else max_output, "unit": unit, "mode": mode}, tool="*")
        assert base is not None
        self.base = base
        self.default = None if unlimited else base
        self._limits: dict[Tool, OutputLimit] = {}
        self._lock = threading.Lock()
        self.truncated = 0
        self.refused = 0

    def limit_for(self, tool: Tool) -> OutputLimit | None:
        """The limit that applies to ``tool`` (its own ``max_output`` option, else the default)."""
        if "max_output" in tool.options:
            return OutputLimit.parse(
                tool.options["max_output"], tool=tool.name, base=self.base, base_limit=self.default is not None
            )
        return self.default

    @hookimpl
    def harness_tool_added(self, tool: Tool) -> None:
        limit = self.limit_for(tool)  # a bad option is a ToolDefinitionError when the tool is added
        if limit is not None:
            self._limits[tool] = limit

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        self._limits.pop(tool, None)

    @hookimpl(trylast=True)
    @applies_to(lambda plugin, tool: plugin.limit_for(tool) is not None, after_decision=True)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        """An answer an on-error hook recovered with (``Outcome.success``, which no post-call hook sees) is
        bounded as a result is: ``call.decision`` is replaced by the bounded answer, or by the refusal."""
        decision = call.decision
        if type(decision) is not Outcome or decision.error is not None:
            return
        kept = call.result
        call.result = decision.value
        try:
            self.harness_post_call(call)
        except OutputTooLarge as exc:
            call.decision = Outcome.failure(exc)
        else:
            if call.result is not decision.value:
                call.decision = Outcome.success(call.result)
        finally:
            call.result = kept

    @hookimpl
    @applies_to(lambda plugin, tool: plugin.limit_for(tool) is not None)
    def harness_post_call(self, call: Call) -> None:
        value = call.result
        kind = type(value)
        if (
            value is None
            or kind is bool
            or (kind is int and ((value >= -0x3FFFFFFF and value <= 0x3FFFFFFF) or -_SHORT_INT < value < _SHORT_INT))
            or kind is float
        ):
            return  # at most 24 characters as the model reads them; a larger int is measured (7**200000: 169,020 digits)
        limit = self._limits.get(call.tool) or self.limit_for(call.tool)  # a tool removed while its call runs
        assert limit is not None  # applies_to
        if kind is not str and isinstance(value, str):  # a str subclass is text, truncated like str
            value, kind = str.__str__(value), str
        text = value if kind is str else rendered(value)
        size = limit.over(text)
        if size is None:
            return
        if limit.mode == "refuse" or (kind is not str and call.tool.output_schema is not None):
            with self._lock:
                self.refused += 1
            raise OutputTooLarge(size, limit.limit, limit.unit, tool=call.tool.name, call_id=call.call_id)
        with self._lock:
            self.truncated += 1
        call.result = limit.truncate(rendered(value) if kind is str else text, size)

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        return {"truncated": self.truncated, "refused": self.refused}
