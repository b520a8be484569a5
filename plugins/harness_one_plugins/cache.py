"""The ``cache`` plugin: reuse recent results of read-only tools, and of tools that opt in (off by default)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from harness_one import (
    Call,
    Clock,
    Outcome,
    Tool,
    ToolDefinitionError,
    ToolRegistry,
    applies_to,
    fingerprint,
    hookimpl,
    rendered_length,
)
from harness_one.state import copied

from ._options import count, provides, seconds

__all__ = ["CachePlugin"]

_KEY = "cache.key"
#: The context key left out of a cache key: the request's own metadata (an MCP request's ``_meta``: a progress
#: token, a ``traceparent``, new with each request), not who asks.
_PER_REQUEST = "_meta"


def _key(value: Any) -> str | None:
    """``value`` (arguments, a context) as a cache key: its JSON with each number as the tool gets it
    (``5`` and ``5.0``, ``2**60`` and ``float(2**60)``, ``0.0`` and ``-0.0`` are different keys, unlike
    idempotency's check); None for a value that is not plain JSON data (:func:`_plain`): its ``repr`` may
    not tell two apart, and its JSON spelling is another value's (a tuple a list's, a str Enum its string's)."""
    return fingerprint(value, json_only=True, whole_numbers=False) if _plain(value) else None


_SCALARS = (str, int, float, bool, type(None))
#: The most items a value whose lists or dicts repeat may write as JSON, each repeat counted (the renderer's bound on
#: repeats): past it its key or its rendering would take time out of proportion to its size (a "billion laughs").
_MAX_WRITTEN = 500_000


def _plain(value: Any) -> bool:
    """Whether ``value`` is plain JSON data: dicts with string keys, lists, and scalars of exactly those
    types (no subclass, no object whose ``repr`` hides its size), no list or dict inside itself (a cycle). A
    list or dict in it more than once (``{"a": shared, "b": shared}``) is plain while its JSON writes at most
    :data:`_MAX_WRITTEN` items. Linear in its distinct parts, not recursive."""
    if type(value) is dict:  # the common case, a flat object of scalars, decided in one pass
        for key, item in value.items():
            if type(key) is not str:
                return False
            if type(item) not in _SCALARS:
                break
        else:
            return True
    stack, seen, shared = [value], set(), False
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if id(item) in seen:  # in it twice: shared, or a cycle (told apart below), its parts checked once
                shared = True
                continue
            seen.add(id(item))
            if kind is dict:
                if any(type(key) is not str for key in item):
                    return False
                stack.extend(item.values())
            else:
                stack.extend(item)
        elif kind not in _SCALARS:
            return False
    return not shared or _written_within(value, _MAX_WRITTEN)


def _written_within(value: Any, limit: int) -> bool:
    """Whether ``value`` (plain but for cycles) is inside itself nowhere, and its JSON writes at most ``limit`` items,
    each repeat counted: linear in its distinct lists and dicts (each one's count kept), not recursive."""
    written: dict[int, int] = {}  # of each list and dict counted: the items its JSON writes
    open_: set[int] = set()  # those being counted: one met again inside itself is a cycle
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, done = stack.pop()
        parts = item.values() if type(item) is dict else item
        if done:  # each list or dict in it counted by now
            total = len(item) + sum(written[id(part)] for part in parts if type(part) is dict or type(part) is list)
            if total > limit:
                return False
            written[id(item)] = total
            open_.discard(id(item))
        elif id(item) in open_:
            return False
        elif id(item) not in written:
            open_.add(id(item))
            stack.append((item, True))
            stack.extend((part, False) for part in parts if type(part) is dict or type(part) is list)
    return True


def _who_asks(context: Any) -> Any:
    """The part of a call's ``context`` a cache key holds: all of it but :data:`_PER_REQUEST` (copied only when
    that is there, or when ``context`` is not a dict)."""
    if _PER_REQUEST in context:
        return {key: value for key, value in context.items() if key != _PER_REQUEST}
    return context if isinstance(context, dict) else dict(context)


class CachePlugin:
    """Answers a repeated call from memory for ``cache_ttl`` seconds.

    Cached: a tool with its own ``cache_ttl`` (its author's opt-in; it needs an idempotent or
    read-only tool), and, when ``ttl`` is given here, every tool marked ``read_only``. Never
    cached: a tool marked ``destructive`` (whatever its ``cache_ttl``: a delete after a re-create
    must run), an idempotent tool without its own ``cache_ttl`` (setting 21, 25, then 21 again must
    run the third), and a tool whose answer changes from one call to the next with the same
    arguments (the time, a random draw), which opts out with ``options={"cache": False}``. The
    key is the tool and its validated arguments, and the call's context for a tool that reads it
    (a ``Call`` parameter) but its ``_meta`` (a request's own metadata: an MCP progress token or
    ``traceparent``, new with each request), compared as JSON with each number as the tool gets it (``5`` and
    ``5.0`` are two keys): a call whose arguments or context hold anything but plain JSON data (an
    object, whose ``repr`` may not tell two callers apart; a tuple or a ``str`` Enum, whose JSON is a
    list's or a string's) is neither answered from the cache nor cached (``uncached`` in the stats). Only a result that is plain JSON data (dicts with string keys,
    lists, strings, numbers, booleans, None) is kept, so that its characters bound its memory (a
    large array renders as a short ``repr``); another result is not cached (``uncached`` too, not
    a miss). A result is kept from the time it is stored: a clock that steps back before that time
    expires it. Each caller gets its own copy of a cached result; a result is served only for
    the tool that made it (not after ``add(..., replace=True)``). Separate from idempotency keys:
    a cache hit is an optimisation, an idempotency replay is a guarantee.

    Args:
        ttl: seconds to keep results of every read-only tool that does not opt out
            (None: only tools with ``cache_ttl``).
        max_entries: bound on cached results (least recently used go first).
        max_chars: bound on the characters of all cached results together, each measured as the
            model reads it (:func:`~harness_one.rendered_length`; least recently used go first;
            a larger result alone is not cached).
        clock: time source (default: the registry's clock).
    """

    name = "cache"
    order = 70

    def __init__(
        self,
        *,
        ttl: float | None = None,
        max_entries: int = 1024,
        max_chars: int = 50_000_000,
        clock: Clock | None = None,
    ) -> None:
        self.ttl = seconds(ttl, "cache ttl", optional=True)
        self.max_entries = count(max_entries, "cache max_entries")
        self.max_chars = count(max_chars, "cache max_chars")
        self.clock = provides(clock, "cache clock", "a clock", ("now",), optional=True)
        # key -> (stored, expires, result, the tool that made it, its characters)
        self._entries: OrderedDict[tuple[str, str, str], tuple[float, float, Any, Tool, int]] = OrderedDict()
        self._chars = 0  # of all entries
        self._live: set[Tool] = set()  # the tools added and not removed: a result of another is not kept
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.uncached = 0

    def ttl_for(self, tool: Tool) -> float | None:
        """How long ``tool``'s results are kept, or None: not cached."""
        if tool.options.get("cache", True) is not True or tool.destructive:
            return None  # opted out (its answer changes from call to call), or skipping a call would lose a change
        if tool.cache_ttl is not None:  # its author's opt-in (Tool.create allows it for idempotent or read-only tools)
            return tool.cache_ttl
        return self.ttl if tool.read_only else None  # an idempotent write changes state: run it each time

    @hookimpl
    def harness_tool_added(self, tool: Tool) -> None:
        opted = tool.options.get("cache", True)
        if type(opted) is not bool:  # "false" would be truthy: refused when the tool is added, not guessed
            raise ToolDefinitionError(
                f"Tool '{tool.name}': the 'cache' option must be true or false, got {opted!r}.", tool=tool.name
            )
        with self._lock:
            self._live.add(tool)

    @hookimpl(tryfirst=True)
    @applies_to(lambda self, tool: self.ttl_for(tool) is not None)
    def harness_pre_call(self, call: Call) -> Outcome | None:
        tool = call.tool
        # A tool that reads the context (who asks) may answer each caller differently.
        seen = _key(_who_asks(call.context)) if tool.call_param is not None else ""
        asked = _key(call.arguments)
        if seen is None or asked is None:
            with self._lock:
                self.uncached += 1
            return None
        key = (tool.name, asked, seen)
        now = (self.clock or call.registry.clock).now()
        with self._lock:
            found = self._entries.get(key)
            if found is not None and found[0] <= now < found[1] and found[3] is tool:  # (a clock stepped back: expired)
                self._entries.move_to_end(key)
                self.hits += 1
                cached = found[2]
            else:
                self.misses += 1
                found = None
        if found is not None:
            if _KEY in call.state:  # an earlier attempt's miss: this hit is no result to store (its ttl runs on)
                del call.state[_KEY]
            return Outcome.success(copied(cached))  # copied outside the lock
        call.state[_KEY] = key
        return None

    @hookimpl
    @applies_to(lambda self, tool: self.ttl_for(tool) is not None)
    def harness_post_call(self, call: Call) -> None:
        key = call.take(_KEY)
        ttl = self.ttl_for(call.tool)
        if key is None or ttl is None:  # a hit answered before the tool ran
            return
        if not _plain(call.result):  # its characters would not bound its memory (an array's short repr)
            with self._lock:
                self.misses -= 1
                self.uncached += 1
            return
        size = rendered_length(call.result)
        if size > self.max_chars:  # alone it would push out every other entry
            return
        try:
            kept = copied(call.result)
        except TypeError:  # one that cannot be copied (a lock, a socket) is not cached
            return
        now = (self.clock or call.registry.clock).now()
        with self._lock:
            if call.tool not in self._live:  # removed or replaced while it ran: its entries were dropped, and one
                return  # kept now would never be served, yet count towards the bounds
            self._drop(key)
            self._entries[key] = (now, now + ttl, kept, call.tool, size)  # served to this tool only, not to one replacing it
            self._chars += size
            while len(self._entries) > self.max_entries or self._chars > self.max_chars:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: tuple[str, str, str]) -> None:
        """Forget the entry ``key`` (if any), and its characters (under the lock)."""
        found = self._entries.pop(key, None)
        if found is not None:
            self._chars -= found[4]

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        with self._lock:
            self._live.discard(tool)
            for key in [k for k in self._entries if k[0] == tool.name]:
                self._drop(key)

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        return {"hits": self.hits, "misses": self.misses, "uncached": self.uncached, "entries": len(self._entries)}
