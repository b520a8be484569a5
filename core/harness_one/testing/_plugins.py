"""``PluginTests``: what a plugin owes the hook contract, under one thread or sixteen."""

from __future__ import annotations

import ast
import asyncio
import contextvars
import copy
import dataclasses
import functools
import gc
import inspect
import itertools
import json
import logging
import os
import re
import sys
import textwrap
import threading
import tracemalloc
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import BuiltinFunctionType, CodeType, FrameType, FunctionType, MethodType, ModuleType
from typing import Any, ClassVar

import pluggy
import pytest

from .. import hookspecs
from .._call import Call, Outcome
from .._clock import ManualClock
from .._entrypoints import PLUGIN_GROUP, entry_points
from .._errors import (
    ApprovalUnavailable,
    CircuitOpen,
    PluginError,
    RateLimitExceeded,
    ToolBusy,
    ToolCancelled,
    ToolError,
    ToolExecutionError,
    ToolNotFound,
)
from .._log import _structlog, log_event
from .._plugins import CHECK_HOOK_NAMES, HOOK_NAMES, KEY_GUARD, missing_guards, misspelling_of
from .._registry import ToolRegistry
from .._tool import Tool
from ..hookspecs import PER_CALL_HOOKS, PROJECT, hookimpl
from ._audit import blocking_calls
from ._suite import _HARNESS_ONE, BoundedClock, Progress, Suite, _bounded_check, _own_code, _where, progress, run_async
from .pytest_plugin import _KEY as _NOTES
from .pytest_plugin import _suite_of

__all__ = ["PluginTests", "footprint"]

PROBE = "conformance_probe"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")
_MARK = PROJECT + "_impl"
#: Seconds a call of the thread check waits for the others to reach the probe.
_MEET_TIMEOUT = 5.0  # only a plugin that holds calls back waits it out; a loaded machine must not fail a sound one
#: Failed calls, and cancelled ones, after which a call must still get through.
_RELEASE_CALLS = 100
#: The event loop steps after which the release check cancels an acall: 0, 1, ... up to this many less one.
_CUT_POINTS = 8
#: Event loop steps a cancelled acall is given to end before the probe it waits in returns.
_DRAIN_STEPS = 100
#: How many objects the state reachable from a plugin (:func:`footprint`) may grow by over a check's later calls.
_GROWN_OBJECTS = 32
#: What each call of the growth check is, in turn: most succeed, one fails in the tool (``fail=True``), one is
#: refused by the kit's gate before the plugin's ``pre_call`` (what a call takes must be given back on every path),
#: and then followed by a call of a tool the registry does not have (each its own name, as a model makes them up:
#: only ``harness_call_refused`` sees it; not a turn of its own, so the turns' counts stay what they were).
_GROWTH_CYCLE = ("ok", "ok", "ok", "fail", "ok", "ok", "ok", "refused")
#: The ``x`` of the calls the kit's gate refuses (of any below 0).
_REFUSED_X = -1
#: The start of the names of the tools the kit calls that the registry does not have: unlike the probe's, so the
#: registry's search for a close name to suggest, no concern of the plugin's, ends at once (with ``conformance_unknown_``
#: it took a fifth of a plugin's growth check).
_UNKNOWN = "no_such_tool_"
#: Characters (or bytes) the ``str``, ``bytes`` and ``bytearray`` objects reachable from a plugin may grow by, in all,
#: over the second half of the growth check's calls, besides one per such object reachable at its end: a fixed
#: allowance (a last error's message that is longer than the one before), not one per call, so a string that grows by
#: a character per call fails; the one per object is for a bounded set of strings each a character longer (the ids of
#: the last 1,000 calls, once the process's call counter passes a power of ten), so the longest of them may not grow
#: by more than the fixed allowance either (constant data beside a growing trail buys it nothing).
_GROWN_TEXT = 256
#: Seconds the kit's clock advances before each call of the growth check: the 5,000 calls it compares span about 40
#: minutes, so what a plugin keeps for a shorter time window (a sliding-window limiter) is given up again, while a
#: quota of 60 calls a minute still refuses most calls (they come twice as fast).
_GROWTH_TICK = 0.5
#: The user property under which the check beside the standard plugins reports where the plugin runs.
PLAN_PROPERTY = "harness_one_plan"
_SETUP_HOOKS = ("harness_configure", "harness_tool_added", "harness_tool_removed", "harness_stats")
#: The hook that observes a request refused before it became a call: the registry logs what it raises, never raises it.
_REFUSED_HOOK = "harness_call_refused"
#: The hooks the fault check injects into, in the order it checks them.
_FAULT_HOOKS = (*_SETUP_HOOKS, _REFUSED_HOOK, *PER_CALL_HOOKS)
_OPAQUE = (
    type,
    ModuleType,
    CodeType,
    FrameType,
    threading.Thread,
    threading.Condition,
    threading.Event,
    threading.Semaphore,
    threading.Barrier,
    type(threading.Lock()),
    type(threading.RLock()),
    ToolRegistry,
    Tool,
    # logging's, shared by the process: a plugin's logger reaches the root logger's handlers, such as pytest's log
    # capture, which keeps every record logged
    logging.Logger,
    logging.Handler,
)


class InjectedFault(RuntimeError):
    """The exception the kit raises inside a hook implementation."""


class _Recovers:
    """A plugin whose on_error recovers every failure: what an ``after_decision`` implementation acts on."""

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Outcome:
        return Outcome.success({"x": 0})


def _probe(x: int = 0, fail: bool = False) -> dict[str, int]:
    """Return x and its double; fail=True raises."""
    if fail:
        raise ValueError("the probe failed on purpose")
    return {"x": x, "double": 2 * x}


class _Meeting:
    """Where the calls of the thread check meet: how many were in the probe at once, at most, and whether they
    failed to meet."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties)
        self.lock = threading.Lock()
        self.inside = self.most = self.met = 0
        self.broken = False

    def probe(self) -> Callable[..., dict[str, int]]:
        """The probe, waiting at the barrier first: the calls of the thread check are all in flight at once, between
        their ``pre_call`` and ``post_call``. A plugin that lets fewer through at once breaks the barrier (after
        ``_MEET_TIMEOUT`` seconds, once), which is noted (with the most calls that were in the probe at once): the
        calls then go on without it."""

        def conformance_probe(x: int = 0, fail: bool = False) -> dict[str, int]:
            """Return x and its double; fail=True raises."""
            with self.lock:
                self.inside += 1
                self.most = max(self.most, self.inside)
            try:
                self.barrier.wait(_MEET_TIMEOUT)
            except threading.BrokenBarrierError:
                with self.lock:
                    if not self.broken:  # the most in flight until then (after it, calls no longer wait for each other)
                        self.broken, self.met = True, self.most
            finally:
                with self.lock:
                    self.inside -= 1
            return _probe(x, fail)

        return conformance_probe


async def _aprobe(x: int = 0, fail: bool = False) -> dict[str, int]:
    """Return x and its double, asynchronously; fail=True raises."""
    return _probe(x, fail)


def _waiting_probe(reached: list[int], release: asyncio.Event) -> Callable[..., Any]:
    """The async probe, waiting for ``release`` once it has noted its ``x`` in ``reached``: calls the release
    check cancels are cut off inside the tool, or earlier, in a plugin's ``Await``."""

    async def conformance_probe_async(x: int = 0, fail: bool = False) -> dict[str, int]:
        """Return x and its double, once released; fail=True raises."""
        reached.append(x)
        await release.wait()
        return _probe(x, fail)

    return conformance_probe_async


_LRU_CACHE = type(functools.lru_cache(maxsize=None)(len))
#: The names of the hooks: a stuck frame of the code under test by one of these names is the plugin's hook.
_HOOK_NAMES = HOOK_NAMES


def _hook_frame(frame: FrameType) -> str | None:
    """``frame``, described, when it runs a hook implementation of the code under test."""
    return f"the plugin's {_where(frame)}" if frame.f_code.co_name in _HOOK_NAMES and _own_code(frame, library=False) else None


def _own_modules(root: Any) -> list[ModuleType]:
    """The modules whose state is ``root``'s own: a module root, or those defining its classes (but for harness-one's
    and the built-in ones), and every module imported under their top-level package, whose tables a plugin's code
    may keep state in too (``myplug.store`` beside ``myplug.plugin``)."""
    if isinstance(root, ModuleType):
        names = {root.__name__}
    else:
        names = {k.__module__ for k in type(root).__mro__ if k is not object}
    tops = {name.split(".")[0] for name in names} - {"harness_one", "builtins"}
    found = {
        name: module
        for name, module in sys.modules.copy().items()  # (taken at once: see harness_one._runners._files)
        if name.split(".")[0] in tops and isinstance(module, ModuleType)
    }
    if isinstance(root, ModuleType):  # itself, imported or not
        found[root.__name__] = root
    return [found[name] for name in sorted(found)]


def footprint(root: Any, *, limit: int = 1_000_000) -> int:
    """How many objects are reachable from ``root`` through attributes, containers, function closures and
    defaults, bound methods (built-in ones too), partials and ``functools.lru_cache`` (each entry one); and
    from the root's own classes (their attributes, but for ``object``'s and harness-one's) and the globals of
    the modules of their top-level packages, or from the globals of a module root's top-level package.

    Registries, tools, modules, classes, threads, locks, loggers and log handlers are not entered, nor a module's
    dunder globals (``__loader__``, ``__builtins__``): they are not the object's own state. Bounded by ``limit``.
    """
    return _walk(root, limit)[0]


def _walk(root: Any, limit: int = 1_000_000) -> tuple[int, int, int, int]:
    """:func:`footprint` of ``root``, the total length of the ``str``, ``bytes`` and ``bytearray`` objects it counted
    (a string that grows in place is one object however long it gets), how many of them it counted, and the longest."""
    kinds = (
        []
        if isinstance(root, ModuleType)
        else [k for k in type(root).__mro__ if k is not object and k.__module__.split(".")[0] != "harness_one"]
    )
    # A module's dunder globals are the import system's, not its state: under pytest, a test module's __loader__
    # reaches pytest's own, such as the records its log capture keeps of every call's logged failure.
    own: list[Any] = [vars(k) for k in kinds] + [
        {name: value for name, value in vars(m).copy().items() if not (name.startswith("__") and name.endswith("__"))}
        for m in _own_modules(root)
    ]
    seen: set[int] = set()
    stack = [root, *own]
    count = text = strings = longest = 0
    while stack and count < limit:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        count += 1
        if isinstance(obj, (str, bytes, bytearray)):
            text += len(obj)
            strings += 1
            longest = max(longest, len(obj))
            continue
        if obj is None or isinstance(obj, (*_OPAQUE, int, float, complex, bool)):
            continue
        if isinstance(obj, Mapping):
            try:
                items = list(obj.items())
            except Exception:  # a lazy mapping that cannot be read (a vault offline): one object
                continue
            for key, value in items:
                stack += (key, value)
        elif isinstance(obj, (list, tuple, set, frozenset, deque)):
            stack.extend(list(obj))
        elif isinstance(obj, FunctionType):
            stack.extend(_cells(obj))
            stack.extend([*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()])
        elif isinstance(obj, MethodType):
            stack += (obj.__self__, obj.__func__)
        elif isinstance(obj, BuiltinFunctionType):  # such as rows.append: its __self__ is rows (or a module)
            stack.append(obj.__self__)
        elif isinstance(obj, functools.partial):
            stack += (obj.func, obj.args, obj.keywords)
        elif isinstance(obj, (staticmethod, classmethod)):
            stack.append(obj.__func__)
        elif isinstance(obj, _LRU_CACHE):  # what it caches is out of reach: count its entries
            count += obj.cache_info().currsize
            stack.append(obj.__wrapped__)
        else:
            stack.extend(list(getattr(obj, "__dict__", {}).values()))
            for klass in type(obj).__mro__:
                for slot in getattr(klass, "__slots__", ()):
                    if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                        stack.append(getattr(obj, slot))
    return count, text, strings, longest


def _cells(fn: FunctionType) -> list[Any]:
    """What ``fn``'s closure holds (its filled cells)."""
    found = []
    for cell in fn.__closure__ or ():
        try:
            found.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    return found


@dataclass(frozen=True)
class _Impl:
    """One hook implementation: the attribute that holds it, the hook it implements (``specname`` or the
    attribute's name) and the function."""

    attr: str
    hook: str
    fn: Callable[..., Any]


def _impls(plugin: Any) -> dict[str, _Impl]:
    """The plugin's hook implementations by attribute (what pluggy would register: two may implement one hook)."""
    found: dict[str, _Impl] = {}
    for attr in dir(plugin):
        value = getattr(plugin, attr, None)
        options = getattr(value, _MARK, None)
        if isinstance(options, dict) and callable(value):
            found[attr] = _Impl(attr, options.get("specname") or attr, value)
    return found


def _unwrap(fn: Any) -> Any:
    """The function a hook runs: through ``per_tool`` adapters (``__wrapped__``), ``functools.partial`` and bound methods."""
    for _ in range(100):  # a bound: a chain of wrappers could loop
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif isinstance(fn, MethodType):
            fn = fn.__func__
        elif getattr(fn, "__wrapped__", None) is not None:
            fn = fn.__wrapped__
        else:
            break
    return fn


def _code(fn: Any) -> CodeType | None:
    code = getattr(_unwrap(fn), "__code__", None)
    return code if isinstance(code, CodeType) else None


def _prepared(registry: ToolRegistry, plugin: str, hook: str) -> Callable[..., Any] | None:
    """What ``per_tool`` prepared for the probe tool from ``plugin``'s ``hook`` (None: not ``per_tool``)."""
    plan = registry.plugins.plan
    tool_plan = plan.for_tool(registry.get(PROBE))
    short = hook.removeprefix("harness_")
    generic = {id(step.fn) for step in plan.steps[short]}
    alone = plan.order[short] == (plugin,)  # the only plugin with this hook: whatever is prepared is its own
    for each in (tool_plan, tool_plan.keyed):
        for fn in getattr(each, short, ()) if each is not None else ():
            if getattr(fn, "harness_guard", None) is not None:  # the core's refusal standing in for a missing plugin
                continue
            owner = tool_plan.plugin_of(fn)  # None when the core cannot tell by the code (a partial, a callable object)
            if id(fn) not in generic and (owner == plugin or (owner is None and alone)):
                return fn  # type: ignore[no-any-return]
    return None


def _fault_lines(fn: Any) -> list[tuple[int, str]]:
    """The first line inside each ``try`` body and each ``with`` body of ``fn`` (a ``contextlib.suppress``
    swallows too), and which of the two it is; none without source."""
    raw = _unwrap(fn)
    code = _code(raw)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(raw)))
    except (OSError, TypeError, SyntaxError):
        return []
    if code is None:
        return []
    tries = (ast.Try, ast.TryStar)
    found: dict[int, str] = {}
    for node in ast.walk(tree):
        what = "try" if isinstance(node, tries) else "with" if isinstance(node, (ast.With, ast.AsyncWith)) else None
        if what is not None and node.body:  # type: ignore[attr-defined]
            found.setdefault(code.co_firstlineno + node.body[0].lineno - 1, what)  # type: ignore[attr-defined]
    return sorted(found.items())


def _callees(plugin: Any, hooks: set[CodeType]) -> list[tuple[CodeType, int, str]]:
    """The lines inside a ``try`` or ``with`` body of the functions a hook may call: the other functions of the
    plugin's classes and of the modules of their top-level package (``(code, line, where)``)."""
    modules = _own_modules(plugin)
    own = {m.__name__ for m in modules}
    kinds = [] if isinstance(plugin, ModuleType) else [k for k in type(plugin).__mro__ if k.__module__ in own]
    spaces: list[Mapping[str, Any]] = [vars(k) for k in kinds] + [vars(m) for m in modules]
    found: dict[CodeType, FunctionType] = {}
    for space in spaces:
        for value in list(space.values()):
            raw = _unwrap(value.__func__ if isinstance(value, (staticmethod, classmethod)) else value)
            if isinstance(raw, FunctionType) and raw.__module__ in own and raw.__code__ not in hooks:
                found.setdefault(raw.__code__, raw)
    return [
        (code, line, f"inside the {what} of {fn.__qualname__}, which it calls")
        for code, fn in found.items()
        for line, what in _fault_lines(fn)
    ]


@dataclass
class _Trace:
    """Hook frames entered while tracing, and whether the fault was raised."""

    codes: Mapping[CodeType, int | None]
    inject: bool
    entered: int = 0
    fired: bool = False


@contextmanager
def _traced(codes: Mapping[CodeType, int | None], *, inject: bool) -> Iterator[_Trace]:
    """Watch frames of ``codes`` in this thread; with ``inject``, raise :class:`InjectedFault` in the first one,
    at its first line, or at its given line (inside the hook's own ``try`` or ``with``, which must not swallow it)."""
    trace = _Trace(codes, inject)

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if trace.fired:
            return None
        target = codes.get(frame.f_code)
        if event == "line" and (target is None or frame.f_lineno == target):
            trace.fired = True
            raise InjectedFault("a fault injected by the harness-one conformance kit")
        return local

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code in codes:
            trace.entered += 1
            return local if inject and not trace.fired else None
        return None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield trace
    finally:
        sys.settrace(previous)


#: The logger ``log_event`` writes harness-one's own events to (a plugin's failure in a hook the registry observes).
_HARNESS_LOGGER = "harness_one"


class _FailureRecords(logging.Handler):
    """Collects the fields of the ``plugin failed`` records of the stdlib's ``harness_one`` logger."""

    def __init__(self, found: list[Mapping[str, Any]]) -> None:
        super().__init__(logging.ERROR)
        self.found = found

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "harness_one", None)
        if isinstance(fields, Mapping) and isinstance(record.args, tuple) and record.args[:1] == ("plugin failed",):
            self.found.append(fields)


@contextmanager
def _plugin_failures() -> Iterator[list[Mapping[str, Any]]]:
    """The fields (``plugin``, ``hook``, ``error``) of each ``plugin failed`` event harness-one logs meanwhile, read
    once the block ends: through structlog's ``capture_logs`` when the application configured structlog (where
    ``log_event`` sends them), else from the stdlib's ``harness_one`` logger, let through at ``ERROR`` meanwhile (a
    ``logging.disable``, as a conftest may set, and the logger's ``disabled``, as ``dictConfig`` sets, are lifted)."""
    found: list[Mapping[str, Any]] = []
    if _structlog() is not None:  # (where log_event sends them)
        from structlog.testing import capture_logs

        with capture_logs() as events:
            yield found
        found.extend(event for event in events if event.get("event") == "plugin failed")
        return
    logger = logging.getLogger(_HARNESS_LOGGER)
    handler, level, disabled, off = _FailureRecords(found), logger.level, logger.disabled, logging.root.manager.disable
    if off:
        logging.disable(logging.NOTSET)
    logger.disabled = False
    if not logger.isEnabledFor(logging.ERROR):
        logger.setLevel(logging.ERROR)
    logger.addHandler(handler)
    try:
        yield found
    finally:
        logger.removeHandler(handler)
        if logger.level != level:
            logger.setLevel(level)
        logger.disabled = disabled
        if off:
            logging.disable(off)


#: The plugin a test event of :func:`_failures_seen` names.
_CANARY = "harness_one_conformance_canary"


def _failures_seen() -> bool:
    """Whether :func:`_plugin_failures` sees a ``plugin failed`` event harness-one logs (not when the application's
    logging drops it before the kit can read it: a structlog filtering below ``ERROR``, a filter on the logger)."""
    with _plugin_failures() as found:
        log_event(logging.ERROR, "plugin failed", plugin=_CANARY, hook=_REFUSED_HOOK, error="a test event of the kit's")
    return bool(_failed_in(found, _CANARY, _REFUSED_HOOK))


@contextmanager
def _root_handlers_detached() -> Iterator[None]:
    """The root logger with a ``NullHandler`` in place of its handlers meanwhile (so the stdlib's last resort does not
    print each record either): what they keep of a record (pytest's log capture keeps every one) is not the plugin's
    state, though the plugin's code allocated it."""
    root = logging.getLogger()
    handlers, null = root.handlers[:], logging.NullHandler()
    for handler in handlers:
        root.removeHandler(handler)
    root.addHandler(null)
    try:
        yield
    finally:
        root.removeHandler(null)
        for handler in handlers:
            root.addHandler(handler)


def _failed_in(found: Sequence[Mapping[str, Any]], plugin: str, hook: str) -> list[str]:
    """The errors among ``found`` (of :func:`_plugin_failures`) of ``plugin``'s ``hook``."""
    return [str(f.get("error")) for f in found if f.get("plugin") == plugin and f.get("hook") == hook]


#: Bytes per call the plugin's own code may allocate and keep (over the last quarter of the growth calls).
_KEPT_BYTES_PER_CALL = 4


def _own_files(plugin: Any, codes: Mapping[CodeType, int | None]) -> list[str]:
    """The plugin's source files: of its hooks (and what ``per_tool`` prepared), its module or its class, and the
    modules of their top-level package (but harness-one's)."""
    files = {code.co_filename for code in codes}
    modules = _own_modules(plugin)
    if not isinstance(plugin, ModuleType) and type(plugin).__module__ in sys.modules:  # its class, even harness-one's
        modules.append(sys.modules[type(plugin).__module__])
    files |= {name for name in (getattr(m, "__file__", None) for m in modules) if isinstance(name, str)}
    return sorted(files)


#: Frames ``tracemalloc`` keeps of each allocation in the growth check: one the plugin's code makes through a library
#: (``logging.getLogger(call.call_id)``, a list a helper package keeps) is the plugin's when one of its lines is among
#: the innermost 3 frames: ``logging.getLogger(call.call_id)`` in a hook is (its allocations are 2 frames below the
#: hook's line; with 1 or 2 frames it passed). Each frame more makes every traced call dearer (the traced phase cost
#: about 1.7 times what it cost with 1 frame with 3, 2.7 times with 4, 5 to 7 times with 16); a logger per call, the
#: commonest state kept through a library, is also caught directly, by counting ``logging``'s loggers.
_TRACED_FRAMES = 3

#: Loggers ``logging`` may gain over the second half of the growth calls (it keeps every logger for the life of the
#: process, whoever asked for it: the plugin, or harness-one's ``log_event(logger=...)`` on its behalf).
_NEW_LOGGERS = 32


def _kept_bytes(files: list[str], before: int, window: int, call: Callable[[], Any]) -> tuple[int, int]:
    """Bytes allocated during the last ``window`` of ``before + window`` calls of ``call`` by code in ``files``, or
    by what it called (a line of them among the allocation's traced frames), and still alive after them
    (allocations are traced from the first call, so what a bounded cache replaces within the window is not
    counted); and how many frames were traced (fewer than ``_TRACED_FRAMES`` when tracing had already begun)."""
    if not files:
        return 0, 0
    own = frozenset(files)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(_TRACED_FRAMES)
    frames = tracemalloc.get_traceback_limit()
    try:
        # A full collection empties the interpreter's free lists: an object the plugin keeps is then one allocated
        # while traced, not a reused untraced one (a tuple freed before tracing began), which would make the live set
        # look as if it grew as the untraced ones were replaced.
        gc.collect()
        for _ in range(before):
            call()
        gc.collect()  # the cycles of finished calls (a span, the Call), traced below the plugin's lines, are garbage
        first = tracemalloc.take_snapshot()
        for _ in range(window):
            call()
        gc.collect()
        last = tracemalloc.take_snapshot()
    finally:
        if started:
            tracemalloc.stop()
    # Grouped by traceback first, then each distinct traceback read once (filtering every trace through
    # tracemalloc.Filter(all_frames=True) costs seconds per plugin file).
    kept = sum(
        stat.size_diff for stat in last.compare_to(first, "traceback") if stat.size_diff and _plugins_own(stat.traceback, own)
    )
    return max(0, kept), frames


def _plugins_own(traceback: tracemalloc.Traceback, own: frozenset[str]) -> bool:
    """Whether the allocation of ``traceback`` is the plugin's: the innermost of its frames that runs the plugin's
    files or harness-one's runs the plugin's (what harness-one's own code allocates and keeps, such as a cache of its
    redactor's, is harness-one's to bound, even when the plugin called it)."""
    for frame in reversed(traceback):  # the innermost first (a Traceback runs from the oldest frame)
        if frame.filename in own:
            return True
        if os.path.normcase(os.path.abspath(frame.filename)).startswith(_HARNESS_ONE):
            return False
    return False


def _outcome(
    registry: ToolRegistry, tool: str, arguments: Mapping[str, Any], options: Mapping[str, Any], *, asynchronous: bool
) -> tuple[Any, ToolError | None]:
    """What a call of ``tool`` returned, or the ``ToolError`` it raised instead, through ``call`` or ``acall``
    (any other exception fails the check: see :func:`_escaped`)."""
    try:
        if asynchronous:
            return run_async(registry.acall(tool, dict(arguments), **options)), None
        return registry.call(tool, dict(arguments), **options), None
    except ToolError as exc:
        return None, exc
    except Exception as exc:
        raise _escaped(exc, "acall" if asynchronous else "call", arguments) from exc


async def _aoutcome(
    registry: ToolRegistry, tool: str, arguments: Mapping[str, Any], options: Mapping[str, Any]
) -> tuple[Any, ToolError | None]:
    """What an ``acall`` of ``tool`` returned, or the ``ToolError`` it raised instead, in the running loop."""
    try:
        return await registry.acall(tool, dict(arguments), **options), None
    except ToolError as exc:
        return None, exc
    except Exception as exc:
        raise _escaped(exc, "acall", arguments) from exc


def _escaped(exc: Exception, way: str, arguments: Mapping[str, Any]) -> AssertionError:
    """The failure of a check whose ``call`` (or ``acall``) raised ``exc``, which is not a ``ToolError``: every call
    ends in a value or a ``ToolError``, so a plugin's answer the core let through (or a bug of the core) is named."""
    return AssertionError(
        f"a non-ToolError escaped {way} with {dict(arguments)!r}: {type(exc).__name__}: {str(exc)[:300]} (a call ends in "
        "a value or a ToolError: does a hook answer with something the core does not take, such as "
        "Outcome(error=...) of another exception?)"
    )


class _Refused(ToolError):
    """The refusal of the kit's guard."""


#: The refusals the kit's guard raises in turn: its own ``ToolError``, and those the standard plugins raise
#: before a tool runs (a rate limit, an open circuit, a full bulkhead, an approval nothing can give).
_REFUSALS: tuple[Callable[[str], ToolError], ...] = (
    lambda tool: _Refused(f"the conformance kit's guard refuses every call of {tool!r}"),
    lambda tool: RateLimitExceeded(retry_after=60.0, tool=tool),
    lambda tool: CircuitOpen(retry_after=60.0, tool=tool),
    lambda tool: ToolBusy(f"the conformance kit's guard: {tool!r} is busy", tool=tool),
    lambda tool: ApprovalUnavailable(f"the conformance kit's guard: nothing can approve a call of {tool!r}", tool=tool),
)


class _Guard:
    """Refuses every call, while ``on``, in a ``pre_call`` that runs before every other plugin's, as access control
    does, with ``refusal`` (one of ``_REFUSALS``); lets every call through while off."""

    name = "harness_one_conformance_guard"
    order = -(10**9)

    def __init__(self) -> None:
        self.refused = 0
        self.on = True
        self.refusal: Callable[[str], ToolError] = _REFUSALS[0]

    @hookimpl(tryfirst=True)
    def harness_pre_call(self, call: Call) -> None:
        if not self.on:
            return
        self.refused += 1
        raise self.refusal(call.tool.name)


class _Gate:
    """Refuses the calls of ``x <= _REFUSED_X`` in a ``pre_call`` that runs before every other plugin's, as access
    control does, and lets the others through."""

    name = "harness_one_conformance_gate"
    order = -(10**9)

    @hookimpl(tryfirst=True)
    def harness_pre_call(self, call: Call) -> None:
        x = call.arguments.get("x")
        if isinstance(x, int) and x <= _REFUSED_X:
            raise _Refused(f"the conformance kit's gate refuses the calls of {call.tool.name!r} with x below 0")


def _own_refusals(errors: Sequence[BaseException], total: int, *, at_once: int | None = None, most: bool = True) -> str:
    """When most of ``total`` calls (any of them, for calls made ``at_once`` or when not ``most``) ended in ``errors``
    that are the plugin's own refusals (a ``ToolError`` the tool, a crashing hook, a cancellation or the kit did not
    raise), what to do about it; else nothing."""
    own = Counter(
        type(e).__name__
        for e in errors
        if isinstance(e, ToolError) and not isinstance(e, (ToolExecutionError, PluginError, ToolCancelled, _Refused))
    )
    if not own or (most and at_once is None and 2 * sum(own.values()) <= total):
        return ""
    kinds = ", ".join(sorted(own))
    concurrent = (
        f"; this check makes {at_once} calls at once, so a cap on calls in flight must let {at_once} through "
        "(plugin_factory = lambda: MyPlugin(max_in_flight=64))"
        if at_once is not None
        else ""
    )
    return (
        f"\n{sum(own.values())} of the {total} calls were refused by the plugin itself ({kinds}): a plugin with limits (a "
        "quota, a rate, a budget) is checked with generous ones, passed through plugin_factory "
        f"(plugin_factory = lambda: MyPlugin(per_minute=1e9)){concurrent}"
    )


def _shown_errors(errors: Sequence[BaseException], limit: int = 3) -> str:
    """The most frequent of ``errors``, as ``Class: message (n x)``."""
    counts = Counter(f"{type(e).__name__}: {str(e)[:160]}" for e in errors)
    return "; ".join(f"{text} ({n} x)" if n > 1 else text for text, n in counts.most_common(limit))


class _Standin:
    """A plugin put in the place of the one under test."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.calls += 1


def _names_unchecked(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A check of the plugin kit, bounded as every check is, that registers the plugin without the registration's
    check of hook names (an unmarked ``harness_on_error``, a misspelt ``optionalhook``): ``test_hooks_match_specs``
    reports those, and each other check still runs the plugin, so every defect fails its own check."""

    @functools.wraps(fn)
    def unchecked(*args: Any, **kwargs: Any) -> Any:
        token = CHECK_HOOK_NAMES.set(False)  # (in the check's own copy of the context)
        try:
            return fn(*args, **kwargs)
        finally:
            CHECK_HOOK_NAMES.reset(token)

    return _bounded_check(unchecked)


class PluginTests(Suite, standard=True, provided=("make_plugin", "call_options", "make_registry", "make_standard_registry")):
    """The checks every plugin passes. Subclass it and say how to build the plugin::

        from harness_one.testing import PluginTests

        class TestAudit(PluginTests):
            plugin_factory = Audit             # a class or a function returning a new plugin
            tool_options = {"tags": ["admin"]}  # defineTool keywords that make the plugin act

    The kit calls a probe tool, ``conformance_probe(x: int = 0, fail: bool = False)``, built
    with ``tool_options``; :meth:`call_options` gives the keywords of each call (an
    idempotency key, a context). ``entry_point`` is the plugin's name in the
    ``harness_one.plugins`` group, if it ships there; ``plugin_options`` are the options
    it is loaded with from there, when it needs some.

    Capability flags: ``supports_async`` (True): the plugin works for ``acall`` too. ``guards_calls``
    (False): the plugin refuses calls (access control), so its ``pre_call`` must run before every standard
    plugin's.

    Each check runs in a daemon thread given ``check_deadline`` seconds (30): a hook that never returns fails the
    check, naming the hook and showing its thread's stack, instead of hanging the run; while it stays stuck, the
    suite's later checks fail at once, naming it.
    """

    plugin_factory: ClassVar[Any] = None
    plugin_name: ClassVar[str | None] = None
    entry_point: ClassVar[str | None] = None
    #: The options the entry point's plugin is loaded with in ``test_entry_point`` (``ToolRegistry(plugin_options=
    #: {entry_point: plugin_options})``), for a plugin that needs some; ``plugin_factory`` builds it for the others.
    plugin_options: ClassVar[Mapping[str, Any]] = {}
    tool_options: ClassVar[Mapping[str, Any]] = {}
    supports_async: ClassVar[bool] = True
    guards_calls: ClassVar[bool] = False
    threads: ClassVar[int] = 16
    calls_per_thread: ClassVar[int] = 100
    growth_calls: ClassVar[int] = 10_000
    #: Whether each call of the growth check has its own ``x`` (False: all have ``x = 1``, for a plugin that keeps
    #: each key for a time measured on its own clock, such as idempotency records, which the check cannot tell from
    #: keeping it forever; the summary lists it).
    distinct_arguments: ClassVar[bool] = True
    _harness_tuning: ClassVar[Mapping[str, bool]] = {
        "threads": True,
        "calls_per_thread": True,
        "growth_calls": True,
        "distinct_arguments": False,
    }
    _harness_stuck: ClassVar[tuple[str, str]] = (
        "hook",
        "a hook that waits for what only another call gives, or no one: a lock taken in pre_call and released only "
        "in post_call, an Event no one sets",
    )

    #: Each check bounded, and registering the plugin without the check of hook names (see :func:`_names_unchecked`).
    _harness_check = staticmethod(_names_unchecked)

    def _harness_locate(self, given: Mapping[str, Any]) -> Callable[[FrameType], str | None]:
        """A stuck check names the plugin's hook it waits in."""
        return _hook_frame

    #: Where the running check's notes go: the summary's list for the suite, and the check's name (run by pytest).
    _harness_notes: tuple[dict[str, list[str]], str, str] | None = None

    @pytest.fixture(autouse=True)
    def _harness_one_notes(self, request: pytest.FixtureRequest) -> None:
        """Lets a check add a note to the summary (the pytest plugin's list of this suite's)."""
        notes = request.config.stash.get(_NOTES, None)
        if notes is not None:
            self._harness_notes = (notes, _suite_of(request.node), request.node.name)

    def _note(self, line: str) -> None:
        """Note ``line`` in the summary, under the suite and the running check (nowhere, run outside pytest)."""
        if self._harness_notes is not None:
            notes, suite, check = self._harness_notes
            notes.setdefault(suite, []).append(f"{check}: {line}")

    # ------------------------------------------------------------------ building

    def make_plugin(self) -> Any:
        """A new plugin from ``plugin_factory`` (a class, function, staticmethod or property)."""
        for klass in type(self).__mro__:
            if "plugin_factory" in vars(klass):
                raw = vars(klass)["plugin_factory"]
                break
        else:  # pragma: no cover - PluginTests itself defines it
            raw = None
        if raw is None:
            pytest.fail(f"{type(self).__name__}: set plugin_factory = MyPlugin (or a function returning one)", pytrace=False)
        factory = self.plugin_factory if isinstance(raw, (property, staticmethod, classmethod)) else raw
        plugin = factory()
        return plugin() if isinstance(plugin, type) else plugin

    def name_of(self, plugin: Any) -> str:
        """The name the plugin is registered under in these checks."""
        name = self.plugin_name or getattr(plugin, "name", None) or self.entry_point
        return name if isinstance(name, str) and name else "plugin_under_test"

    def probe_tool(self, *, asynchronous: bool = False) -> Tool:
        return Tool.create(
            _aprobe if asynchronous else _probe, name=PROBE + ("_async" if asynchronous else ""), **self.tool_options
        )

    def call_options(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Keywords for ``registry.call`` with ``arguments`` (override: an idempotency key, a context)."""
        return {}

    def make_registry(self, plugin: Any) -> ToolRegistry:
        """A registry with only ``plugin`` (and a manual clock, so no check sleeps) and the probe tool."""
        registry = ToolRegistry(
            standard_plugins=False, autoload=False, clock=BoundedClock(), plugins={self.name_of(plugin): plugin}
        )
        registry.add(self.probe_tool())
        return registry

    def _registry(self, plugin: Any, *, standard: bool = False) -> ToolRegistry:
        """What :meth:`make_registry` (or, ``standard``, :meth:`make_standard_registry`) gives for ``plugin``, which
        must hold it under its name: a registry without it would pass every check without checking anything."""
        made = "make_standard_registry" if standard else "make_registry"
        registry = self.make_standard_registry(plugin) if standard else self.make_registry(plugin)
        name = self.name_of(plugin)
        got = registry.plugins.get(name) if name in registry.plugins else None
        if got is not plugin:
            pytest.fail(
                f"{made} gave a registry without the plugin it was given (under {name!r}: {got!r}): register it "
                f"(ToolRegistry(plugins={{{name!r}: plugin}}) or registry.plugins.register(plugin, {name!r})), or every "
                "check runs without it",
                pytrace=False,
            )
        return registry

    def call(self, registry: ToolRegistry, x: int = 1, *, fail: bool = False) -> Any:
        arguments = {"x": x, "fail": fail} if fail else {"x": x}
        return registry.call(PROBE, arguments, **self.call_options(arguments))

    def ended(
        self, registry: ToolRegistry, arguments: Mapping[str, Any], *, tool: str = PROBE, asynchronous: bool = False
    ) -> tuple[str, str]:
        """How a call of ``tool`` ends, through ``call`` or ``acall``: ``("value", repr)`` or ``("error", "Class: message")``."""
        value, error = _outcome(registry, tool, arguments, self.call_options(arguments), asynchronous=asynchronous)
        return ("error", f"{type(error).__name__}: {error}") if error is not None else ("value", repr(value))

    def answers(self, xs: Sequence[int], *, tool: str = PROBE, asynchronous: bool = False) -> dict[int, Any]:
        """What a new plugin, alone in a new registry, answers each call of ``tool`` with ``x`` in ``xs``, in turn:
        the values the checks expect (a plugin may transform results: its ``post_call`` may assign ``call.result``).
        A call it answers with an error expects the probe's own value (``{"x": x, "double": 2 * x}``)."""
        plugin = self.make_plugin()
        registry = self._registry(plugin)
        if tool != PROBE:
            registry.add(self.probe_tool(asynchronous=True), replace=True)

        async def each() -> list[tuple[Any, ToolError | None]]:
            return [
                await _aoutcome(registry, tool, {"x": x}, self.call_options({"x": x}))
                for x in xs  # one after another, as the sync calls
            ]

        if asynchronous:
            got = run_async(each())
        else:
            got = [_outcome(registry, tool, {"x": x}, self.call_options({"x": x}), asynchronous=False) for x in xs]
        return {x: _probe(x) if error is not None else value for x, (value, error) in zip(xs, got)}

    def hook_codes(self, plugin: Any) -> dict[CodeType, int | None]:
        """The code of every hook implementation, and of what ``per_tool`` prepares from them."""
        impls = [i.fn for i in _impls(plugin).values()]
        codes: dict[CodeType, int | None] = {c: None for c in map(_code, impls) if c is not None}
        if any(hasattr(fn, "harness_per_tool") for fn in impls):
            fresh = self.make_plugin()  # a twin's prepared functions share their code with this plugin's
            registry = self._registry(fresh)
            for hook in PER_CALL_HOOKS:
                prepared = _prepared(registry, self.name_of(fresh), hook)
                code = _code(prepared) if prepared is not None else None
                if code is not None:
                    codes[code] = None
        return codes

    def assert_silent(self, registry: ToolRegistry, plugin: Any, why: str) -> None:
        """The call goes on without the plugin, or, when the probe sets an option the plugin guards
        (``requires_approval``, ``max_calls``), or the call an idempotency key and the plugin is the
        one that honours keys, and no plugin took its name, is refused for want of it (those guards
        fail closed)."""
        name = self.name_of(plugin)
        options = self.tool_options.get("options") or {}
        active = registry.plugins.names()
        guarded = [f"'{option}' option" for option, owner in missing_guards(options, active) if owner == name]
        if name == KEY_GUARD and name not in active and self.call_options({"x": 3}).get("idempotency_key") is not None:
            guarded.append("idempotency key")
        with _traced(self.hook_codes(plugin), inject=False) as trace:
            if guarded:
                with pytest.raises(PluginError) as refused:
                    self.call(registry, 3)
                assert refused.value.plugin == name and guarded[0] in refused.value.message
            else:
                assert self.call(registry, 3) == {"x": 3, "double": 6}
        assert trace.entered == 0, f"the plugin's hooks still ran {trace.entered} time(s) after it was {why}"

    # ------------------------------------------------------------------ the hook contract

    def test_has_a_name(self) -> None:
        """The plugin has a name (what blocking, replacing and configuring use): its own ``name``, which must
        match ``plugin_name`` and ``entry_point`` when they are set, or the one they give it."""
        plugin = self.make_plugin()
        name = getattr(plugin, "name", None)
        given = [g for g in (self.plugin_name, self.entry_point) if g is not None]
        if name is None and given:
            return  # registered under the name its entry point (or plugin_name) gives it
        assert isinstance(name, str) and _NAME.match(name), (
            f"{type(plugin).__name__} has no usable name ({name!r}): give it a class attribute name = 'my_plugin' "
            "(letters, digits, '_', '.', '-'), or set entry_point (or plugin_name) in the suite if it ships under one"
        )
        for each in given:
            assert name == each, f"the plugin calls itself {name!r}, but is registered as {each!r}"

    def test_hooks_match_specs(self) -> None:
        """Every ``harness_*`` function is a marked implementation of a hook spec, as pluggy validates it, and every
        marked implementation names a hook spec. One marked ``optionalhook=True`` may name a hook no spec of this
        harness-one has (a newer one's, which it implements and still loads here), listed in the summary, but not
        a misspelling of a spec's name (one as alike as ``harness_post_cal`` to ``harness_post_call``)."""
        plugin = self.make_plugin()
        problems = []
        manager = pluggy.PluginManager(PROJECT)
        manager.add_hookspecs(hookspecs)
        try:
            manager.register(plugin, name=self.name_of(plugin))
            manager.check_pending()
        except pluggy.PluginValidationError as exc:
            problems.append(str(exc))
        marked = _impls(plugin)
        newer: list[_Impl] = []
        for attr in dir(plugin):
            if attr.startswith("harness_") and callable(getattr(plugin, attr, None)) and attr not in marked:
                problems.append(f"{attr} is not marked with @hookimpl, so it is never called")
        for impl in marked.values():
            caller = getattr(manager.hook, impl.hook, None)
            if getattr(caller, "spec", None) is not None:
                continue
            meant = misspelling_of(impl.hook)
            if not getattr(impl.fn, _MARK).get("optionalhook"):
                problems.append(f"{impl.attr} implements {impl.hook}, which no hook spec names, so it is never called")
            elif meant is not None:
                problems.append(
                    f"{impl.attr} implements {impl.hook}, which no hook spec names, so it is never called: a misspelling "
                    f"of {meant}? (optionalhook=True keeps pluggy from saying so)"
                )
            else:
                newer.append(impl)
        assert not problems, "hook implementations that do not match the hook specs:\n  - " + "\n  - ".join(problems)
        for impl in newer:
            self._note(
                f"{impl.attr} implements {impl.hook} (optionalhook=True), which no hook spec of this harness-one "
                "names: a newer harness-one's hook, never called here"
            )

    def test_hooks_are_plain_functions(self) -> None:
        """No hook is a coroutine or generator (pluggy never awaits), nor returns an awaitable (a coroutine of an
        ``async def`` helper: never awaited, its work never done); per-call hooks are not wrappers."""
        problems = []
        plugin = self.make_plugin()
        for impl in _impls(plugin).values():
            raw = getattr(impl.fn, "__func__", impl.fn)
            if inspect.iscoroutinefunction(raw) or inspect.isasyncgenfunction(raw) or inspect.isgeneratorfunction(raw):
                problems.append(f"{impl.attr} is a coroutine or generator: hooks are synchronous and return decisions")
            options = getattr(impl.fn, _MARK)
            if impl.hook in PER_CALL_HOOKS and (options.get("wrapper") or options.get("hookwrapper")):
                problems.append(f"{impl.attr} is a wrapper: per-call hooks cannot be")
        assert not problems, "hooks the pipeline cannot run:\n  - " + "\n  - ".join(problems)
        registry = self._registry(plugin)
        codes = self.hook_codes(plugin)
        returned: dict[str, str] = {}

        def watch(frame: FrameType, event: str, arg: Any) -> None:
            if event == "return" and frame.f_code in codes and inspect.isawaitable(arg):
                returned.setdefault(frame.f_code.co_name, type(arg).__name__)
                if inspect.iscoroutine(arg):
                    arg.close()  # never awaited: closed, so it is not reported again at exit

        previous = sys.getprofile()
        sys.setprofile(watch)
        try:
            for fail in (False, True):
                with suppress(ToolError):
                    self.call(registry, fail=fail)
        finally:
            sys.setprofile(previous)
        problems = [
            f"{hook} returned a {kind}, which nothing awaits: a hook that waits returns an Await with an async twin"
            for hook, kind in sorted(returned.items())
        ]
        assert not problems, "hooks the pipeline cannot run:\n  - " + "\n  - ".join(problems)

    def test_registers_and_unregisters(self) -> None:
        """Registered, the plugin serves calls; unregistered, it is gone and never called; a new one registers again."""
        plugin = self.make_plugin()
        name = self.name_of(plugin)
        registry = self._registry(plugin)
        expected = self.answers([1, 2])
        got = self.call(registry)
        assert got == expected[1], f"a call with x=1 gave {got!r}, where a new plugin alone gave {expected[1]!r}"
        assert registry.plugins.unregister(name) is plugin
        assert name not in registry.plugins and all(name not in names for names in registry.plugins.plan.order.values())
        self.assert_silent(registry, plugin, "unregistered")
        registry.plugins.register(self.make_plugin(), name)
        got = self.call(registry, 2)
        assert got == expected[2], (
            f"registered again, a call with x=2 gave {got!r}, where a new plugin alone gave {expected[2]!r}"
        )

    def test_stats_after_calls(self) -> None:
        """``registry.stats()`` works with the plugin, before any call and after calls that succeed, fail in the tool
        and are refused before the plugin's ``pre_call`` (through ``call`` and, with ``supports_async``, ``acall``):
        its ``harness_stats`` neither raises nor returns what the core refuses (a ``PluginError`` naming it), what it
        gives is valid JSON (``json.dumps(..., allow_nan=False)`` takes it: no ``NaN`` nor ``Infinity``), as monitoring
        reads it, the core's count of the tool's calls (``stats["tools"][name]["calls"]``) is the real one, and none of
        its per-tool statistics is left out of ``registry.stats()``: a ``"calls"`` of its own that is not the core's
        count, statistics for a tool the registry does not have."""
        plugin = self.make_plugin()
        name = self.name_of(plugin)
        registry = self._registry(plugin)
        registry.plugins.register(_Gate(), _Gate.name)
        problems: list[str] = []

        def gathered(when: str, calls: int) -> None:
            try:
                stats = registry.stats()
                answer = dict(registry.plugins.call_each("harness_stats", registry=registry)).get(name) or {}
            except PluginError as exc:
                whose = "its" if exc.plugin == name else f"{exc.plugin or 'no plugin'}'s"
                problems.append(f"{when}, registry.stats() raised {whose} PluginError: {exc}")
                return
            own = {"registry.stats()[" + repr(name) + "]": stats.get(name), "registry.stats()['tools']": stats.get("tools")}
            for where, part in own.items():
                try:
                    json.dumps(part, allow_nan=False)  # (NaN and Infinity are no JSON: a parser refuses them)
                except (TypeError, ValueError) as exc:
                    problems.append(f"{when}, {where} is not valid JSON ({type(exc).__name__}: {exc}): {part!r}"[:500])
            tools = stats.get("tools")
            counted = tools.get(PROBE, {}).get("calls") if isinstance(tools, dict) else None
            if counted != calls or type(counted) is not int:
                problems.append(
                    f"{when}, registry.stats()['tools'][{PROBE!r}]['calls'] is {counted!r}, not the {calls} calls made"
                )
            for tool, values in (answer.get("tools") or {}).items():  # what registry.stats() leaves out of them
                if not isinstance(tools, dict) or tool not in tools:
                    problems.append(
                        f"{when}, its harness_stats gives statistics for tool {tool!r}, which the registry does not "
                        "have: registry.stats() leaves them out"
                    )
                elif "calls" in values and values["calls"] != tools[tool].get("calls"):
                    problems.append(
                        f"{when}, its harness_stats gives {values['calls']!r} as the 'calls' of tool {tool!r}, not the "
                        f"{tools[tool].get('calls')!r} calls made: registry.stats() keeps the core's count and leaves "
                        "the plugin's out (name its own counters otherwise)"
                    )

        gathered("before any call", 0)
        ways = (False, True) if self.supports_async else (False,)
        for arguments, asynchronous in itertools.product(({"x": 1}, {"x": 2, "fail": True}, {"x": _REFUSED_X}), ways):
            _outcome(registry, PROBE, arguments, self.call_options(dict(arguments)), asynchronous=asynchronous)
        made = 3 * len(ways)
        gathered(f"after {made} calls (that succeed, fail in the tool, are refused before the plugin's pre_call)", made)
        assert not problems, (
            f"registry.stats() with the plugin {name!r} (harness_stats returns a dict, or None, of what "
            "json.dumps(..., allow_nan=False) takes; its 'tools' a dict per tool name, beside the core's 'calls'):\n  - "
            + "\n  - ".join(problems)
        )

    def test_blocked_by_name(self) -> None:
        """Blocked by its name, the plugin leaves the registry and is never called."""
        plugin = self.make_plugin()
        name = self.name_of(plugin)
        registry = self._registry(plugin)
        registry.plugins.block(name)
        assert registry.plugins.is_blocked(name) and name not in registry.plugins
        self.assert_silent(registry, plugin, "blocked")

    def test_replaced_by_name(self) -> None:
        """Another plugin registered under its name takes its place entirely."""
        plugin = self.make_plugin()
        name = self.name_of(plugin)
        registry = self._registry(plugin)
        standin = _Standin()
        registry.plugins.replace(name, standin)
        assert registry.plugins.get(name) is standin
        self.assert_silent(registry, plugin, "replaced")
        assert standin.calls == 1

    def test_entry_point(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Shipped as an entry point, the plugin loads by name, and blocking the name keeps it out."""
        if self.entry_point is None:
            self.switched_off("entry_point", "not shipped in the harness_one.plugins group")
        name = self.entry_point
        assert any(ep.name == name for ep in entry_points(PLUGIN_GROUP)), f"no entry point {name!r} in {PLUGIN_GROUP!r}"
        expected = type(self.make_plugin())
        options = {name: dict(self.plugin_options)} if self.plugin_options else None
        loaded = ToolRegistry(allow=[name], autoload=True, plugin_options=options)
        if loaded.plugins.failures:
            configured = (
                f"loaded with plugin_options = {dict(self.plugin_options)!r}"
                if self.plugin_options
                else "loaded with no options: a plugin that needs some gets them from the suite's plugin_options = "
                "{'option': value}, passed as ToolRegistry(plugin_options={entry_point: plugin_options}), as a deployment "
                "configures it"
            )
            pytest.fail(
                "the entry point failed to load:\n"
                + "\n".join(
                    f"  - {f.name} ({f.distribution}): {f.error}\n{f.traceback.rstrip()}" for f in loaded.plugins.failures
                )
                + f"\n({configured})",
                pytrace=False,
            )
        assert isinstance(loaded.plugins.get(name), expected), f"entry point {name!r} gave {loaded.plugins.get(name)!r}"
        assert name not in ToolRegistry(allow=[name], block=[name], autoload=True, plugin_options=options).plugins
        monkeypatch.setenv("HARNESS_ONE_BLOCK_PLUGINS", name)
        assert name not in ToolRegistry(allow=[name], autoload=True, plugin_options=options).plugins

    def inject(self, attr: str, target: tuple[CodeType, int] | None = None) -> tuple[_Trace, BaseException | None, str]:
        """Trigger hook implementation ``attr`` of a new plugin with a fault injected: at its first line, or at
        ``target``, a line of its code (or of a function it calls) inside a ``try`` or ``with`` body."""
        plugin = self.make_plugin()
        impl = _impls(plugin)[attr]
        hook, fn = impl.hook, impl.fn
        registry = None if hook == "harness_configure" else self._registry(plugin)
        if registry is not None and hook == "harness_on_error" and getattr(fn, "harness_after_decision", False):
            registry.plugins.register(_Recovers(), "kit_recovers")  # it runs only on another plugin's decision
        if registry is not None and hook in PER_CALL_HOOKS and hasattr(fn, "harness_per_tool"):
            fn = _prepared(registry, self.name_of(plugin), hook) or fn  # what calls run (``per_tool``)
        code = _code(fn)
        assert code is not None
        outcome: BaseException | None = None
        codes: dict[CodeType, int | None] = {code: None} if target is None else {target[0]: target[1]}
        with _traced(codes, inject=True) as trace:
            try:
                if registry is None:
                    self.make_registry(plugin)
                elif hook == "harness_tool_added":
                    registry.add(self.probe_tool(asynchronous=True))
                elif hook == "harness_tool_removed":
                    registry.remove(PROBE)
                elif hook == "harness_stats":
                    registry.stats()
                elif hook == _REFUSED_HOOK:  # a call of a tool the registry does not have
                    registry.call(_UNKNOWN + "fault", {"x": 1}, **self.call_options({"x": 1}))
                else:  # in a copy of the context: a hook cut short may leave context variables set
                    contextvars.copy_context().run(self.call, registry, fail=hook == "harness_on_error")
            except Exception as exc:
                outcome = exc
        return trace, outcome, self.name_of(plugin)

    def test_raising_hook_is_a_plugin_error(self) -> None:
        """A fault inside each hook implementation reaches the caller as a ``PluginError`` naming the plugin; one in
        ``harness_call_refused``, which the registry logs and never raises, is logged as the plugin's failure, and the
        call of a tool the registry does not have still ends in ``ToolNotFound``.

        The fault is raised at the hook's first line, inside each of its ``try`` and ``with`` bodies, and inside
        those of the functions it calls (the plugin's methods and its module's functions): none may swallow it. With
        no fault injected, the plugin's ``harness_call_refused`` does not fail on such a call: that failure, logged
        only, would lose what it observes on every refused request.
        """
        plugin = self.make_plugin()
        impls = _impls(plugin)
        registry = self._registry(self.make_plugin())
        name = self.name_of(plugin)
        ordered = sorted(
            (i for i in impls.values() if i.hook in _FAULT_HOOKS and _code(i.fn) is not None),
            key=lambda i: (_FAULT_HOOKS.index(i.hook), i.attr),
        )
        callees = _callees(plugin, set(self.hook_codes(plugin)))
        problems = []
        seen: bool | None = None  # whether the kit can read the failures harness-one logs, once asked
        unseen: list[str] = []
        if any(i.hook == _REFUSED_HOOK for i in ordered):
            with _plugin_failures() as found:
                ended = self.ended(self._registry(self.make_plugin()), {"x": 1}, tool=_UNKNOWN + "plain")
            for error in _failed_in(found, name, _REFUSED_HOOK)[:1]:
                problems.append(
                    f"{_REFUSED_HOOK} failed on a call of a tool the registry does not have, with no fault injected "
                    f"(logged, never raised: what it observes of every refused request is lost): {error[:300]}"
                )
            if not ended[1].startswith(f"{ToolNotFound.__name__}:"):
                problems.append(f"a call of a tool the registry does not have ended {ended[1][:300]}, not in ToolNotFound")
        for impl in ordered:
            per_tool = impl.hook in PER_CALL_HOOKS and hasattr(impl.fn, "harness_per_tool")
            run = _prepared(registry, name, impl.hook) if per_tool else None
            code = _code(run or impl.fn)
            if code is None:
                problems.append(
                    f"{impl.attr}: per_tool prepared {run!r} for the probe tool, which has no Python code to inject a "
                    "fault into: prepare a function, a bound method, or a functools.partial of one"
                )
                continue
            targets: list[tuple[tuple[CodeType, int] | None, str]] = [(None, "at its first line")]
            targets += [((code, line), f"inside its {what} at line {line}") for line, what in _fault_lines(run or impl.fn)]
            targets += [((callee, line), f"{where}, at line {line}") for callee, line, where in callees]
            for target, place in targets:
                with _plugin_failures() as found:
                    trace, outcome, _ = self.inject(impl.attr, target)
                if target is None and not trace.entered:
                    problems.append(
                        f"{impl.attr} never ran for the probe tool: set tool_options (or call_options) so the plugin acts"
                    )
                    break
                if not trace.fired:
                    continue  # not on this call's path: the first-line fault covers the hook
                where = f"{impl.attr} ({place})"
                if impl.hook == _REFUSED_HOOK:  # logged, never raised: the call ends as it would without the plugin
                    logged = _failed_in(found, name, impl.hook)
                    if not isinstance(outcome, ToolNotFound):
                        problems.append(
                            f"{where}: the call of a tool the registry does not have ended in "
                            f"{type(outcome).__name__} {str(outcome)[:200]!r}, not ToolNotFound"
                        )
                    elif not logged:
                        seen = _failures_seen() if seen is None else seen  # once: it logs a test event
                        if not seen:
                            unseen.append(where)
                        else:
                            problems.append(
                                f"{where}: the fault was swallowed: no failure of {name!r} in {impl.hook} was logged "
                                "(the registry logs what it raises, naming the plugin)"
                            )
                    continue
                if isinstance(outcome, PluginError) and outcome.plugin == name and name in str(outcome):
                    continue
                if outcome is None:
                    problems.append(f"{where}: the fault was swallowed and the call succeeded")
                else:
                    problems.append(
                        f"{where}: became {type(outcome).__name__} {str(outcome)[:200]!r}, not a PluginError naming {name!r}"
                    )
        if unseen:
            problems.append(
                f"{', '.join(unseen)}: the kit could not observe the failures harness-one logs, so it cannot tell whether "
                f"the fault was logged or swallowed (a test event of its own, logged at ERROR on the {_HARNESS_LOGGER!r} "
                "logger, or sent to structlog when the application configured it, never reached the kit: a structlog "
                "filtering below ERROR, a filter on the logger?)"
            )
        assert not problems, "faults in hooks that are not reported as the plugin's:\n  - " + "\n  - ".join(problems)

    def test_arguments_stay_the_callers(self) -> None:
        """Beside the standard plugins, a call with a field missing or of the wrong type ends as any call may (a
        value, or a ``ToolError`` such as validation's ``ToolArgumentError``), never in the plugin's ``PluginError``;
        and no call changes the arguments or the ``context`` the caller holds, nested ones included, beside them or
        alone (where the plugin's hooks get the caller's own dict). The context is the one :meth:`call_options` gives,
        else one of the kit's (``{"conformance": {"caller": ["kit"]}}``)."""
        plugin = self.make_plugin()
        name = self.name_of(plugin)
        problems = []
        nested: dict[str, Any] = {"x": 1, "extra": {"k": {"v": [1]}, "token": "conformance"}}
        every: tuple[dict[str, Any], ...] = (
            {"x": 1},
            {"x": 1, "fail": False},
            {},
            {"x": "seven"},
            {"x": "7"},
            {"x": None},
            {"x": 1, "extra": [1]},
            nested,
        )
        # Beside the standard plugins (validation among them), and alone: validation gives the hooks a new dict when it
        # fills in a default, so only a call that sends every field, or a registry without it, hands the plugin the
        # caller's own dict.
        for standard in (True, False):
            registry = self._registry(self.make_plugin() if not standard else plugin, standard=standard)
            where = "" if standard else " (the plugin alone)"
            for arguments in every if standard else ({"x": 1}, {"x": 1, "fail": False}, nested):
                held = copy.deepcopy(arguments)
                options = self.call_options(held)
                context = options.setdefault("context", {"conformance": {"caller": ["kit"]}})
                try:
                    context_held = copy.deepcopy(context)
                except Exception:  # a context that cannot be copied (a lock in it): not compared
                    context_held = context
                try:
                    registry.call(PROBE, arguments, **options)
                except PluginError as exc:
                    if exc.plugin == name and standard:
                        problems.append(f"{held!r}: {exc}")
                except ToolError:
                    pass
                except Exception as exc:
                    problems.append(f"{held!r}{where}: {_escaped(exc, 'call', held)}")
                if arguments != held:
                    problems.append(
                        f"{held!r}{where}: the call changed the caller's arguments to {arguments!r} (assign "
                        "call.arguments a new dict, copying what it changes inside too)"
                    )
                if context != context_held:
                    problems.append(
                        f"{held!r}{where}: the call changed the caller's context {context_held!r} to {context!r} (it is "
                        "the caller's, shared with every call it is given to: keep what a call needs in call.state)"
                    )
        assert not problems, "calls with arguments the plugin did not expect:\n  - " + "\n  - ".join(problems)

    # ------------------------------------------------------------------ under load

    def test_sixteen_threads(self) -> None:
        """Sixteen threads calling at once each get their own right answers. The probe waits until all sixteen
        calls reach it, so each call's hooks run while the others are between their ``pre_call`` and ``post_call``."""
        plugin = self.make_plugin()
        registry = self._registry(plugin)
        barrier = threading.Barrier(self.threads)
        probe = registry.get(PROBE)
        meeting = _Meeting(self.threads)
        registry.add(dataclasses.replace(probe, fn=meeting.probe()), replace=True)
        wrong: list[str] = []
        errors: list[BaseException] = []
        expected = self.answers([x for i in range(self.threads) for x in (i, i + 100)])

        def worker(i: int) -> None:
            barrier.wait()
            for k in range(self.calls_per_thread):
                x = i + 100 * (k % 2)
                try:
                    got = self.call(registry, x)
                except Exception as exc:
                    errors.append(exc)
                    continue
                if got != expected[x]:
                    wrong.append(f"thread {i} sent x={x}, got {got!r} (alone, one at a time, {expected[x]!r})")

        pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(self.threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        total = self.threads * self.calls_per_thread
        shown = sorted({f"{type(e).__name__}: {str(e)[:160]}" for e in errors})[:3]
        assert not errors and not wrong, (
            f"under {self.threads} threads, {len(errors)} of {total} calls failed and {len(wrong)} got another answer "
            "than the plugin alone gives one call at a time (another call's?): "
            + "; ".join(shown + wrong[:3])
            + _own_refusals(errors, total, at_once=self.threads)
        )
        assert not meeting.broken, (
            f"only {meeting.met} of {self.threads} calls were in flight at once (the probe waited {_MEET_TIMEOUT:g} s "
            f"for all {self.threads} to reach it): the plugin serializes calls (a lock held from pre_call to post_call "
            "or on_error makes every call of the process wait for the one before it; a cap on calls in flight must let "
            f"{self.threads} through: plugin_factory = lambda: MyPlugin(max_in_flight=64))"
        )

    def test_no_per_call_state(self) -> None:
        """After 10,000 calls the plugin holds no more than after 5,000 (objects reachable from it, the total length of
        the strings, bytes and bytearrays among them, give or take ``_GROWN_TEXT`` and a character each, and memory its
        own files allocated, directly or through a library they called, over calls 8,751-10,000 and kept), and keeps no
        ``Call`` alive. Of every 8 calls, one fails in the tool and one is refused before the plugin's ``pre_call`` (by the kit's
        gate), then followed by a call of a tool the registry does not have (each its own name, as a model makes them
        up: ``harness_call_refused`` sees it): what a call keeps must go on the error path too. Each call has its own
        ``x`` (and its own ``call_options``), and a manual clock advances half a second before each call: what a
        plugin keeps per key or per time window must be bounded.

        What the process held before the check is frozen meanwhile (``gc.freeze``): the check's collections and its
        scan for ``Call`` objects then cost what the check made, not the size of the whole process (a large test
        session's heap cost them seconds each)."""
        gc.freeze()
        try:
            self._no_per_call_state()
        finally:
            gc.unfreeze()

    def _no_per_call_state(self) -> None:
        plugin = self.make_plugin()
        registry = self._registry(plugin)
        registry.plugins.register(_Gate(), _Gate.name)
        turns = itertools.count()
        failed: list[ToolError] = []
        call, call_options = registry.call, self.call_options
        tick = registry.clock.advance if isinstance(registry.clock, ManualClock) else None
        made = progress(self.growth_calls)  # a check past its deadline that still makes calls is slow, not stuck
        loggers = logging.Logger.manager.loggerDict

        distinct = self.distinct_arguments

        def step() -> None:
            turn = next(turns)
            kind = _GROWTH_CYCLE[turn % len(_GROWTH_CYCLE)]
            x = turn if distinct else 1
            arguments: dict[str, Any] = (
                {"x": x} if kind == "ok" else {"x": x, "fail": True} if kind == "fail" else {"x": _REFUSED_X - x + 1}
            )
            calls = [(PROBE, arguments)]
            if kind == "refused":  # a name of its own even without distinct_arguments
                calls.append((f"{_UNKNOWN}{turn}", {"x": x}))
            if tick is not None:
                tick(_GROWTH_TICK)
            for tool, given in calls:
                try:
                    call(tool, given, **call_options(dict(given)))
                except ToolError as exc:
                    if kind == "ok":
                        failed.append(exc.with_traceback(None))  # not its frames: they hold the call
                except Exception as exc:
                    raise _escaped(exc, "call", given) from None
            made.made()  # ends the loop once the check is past its deadline, or the kit's clock stopped the calls

        def all_succeeded(calls: int) -> None:
            meant = sum(1 for i in range(calls) if _GROWTH_CYCLE[i % len(_GROWTH_CYCLE)] == "ok")
            assert not failed, (
                f"{len(failed)} of the first {meant} calls meant to succeed ended in an error: {_shown_errors(failed)}"
                + _own_refusals(failed, meant, most=False)  # its clock moves on: a limit refuses some calls only
            )

        half = self.growth_calls // 2
        for _ in range(half):
            step()
        all_succeeded(half)  # before the rest of the calls: they would fail the same way
        (middle, middle_text, _, middle_longest), named = _walk(plugin), len(loggers)
        window = half // 4
        for _ in range(half - 2 * window):
            step()
        made.traced = True  # a slow report past the deadline now counts the kit's tracing in the time per call
        try:
            with _root_handlers_detached():  # a record the plugin logs, which they keep, is allocated by its code
                kept, frames = _kept_bytes(_own_files(plugin, self.hook_codes(plugin)), window, window, step)
        finally:
            made.traced = False
        new_loggers = len(loggers) - named
        if 0 < frames < _TRACED_FRAMES:
            self._note(
                f"tracemalloc was already tracing {frames} frame(s) per allocation (not the kit's {_TRACED_FRAMES}): what "
                "the plugin allocates through a library deeper than that is not counted"
            )
        end, end_text, strings, longest = _walk(plugin)
        grown, grown_text, allowed_text = end - middle, end_text - middle_text, _GROWN_TEXT + strings
        all_succeeded(self.growth_calls)
        assert grown <= _GROWN_OBJECTS, (
            f"the state reachable from the plugin grew by {grown} objects over calls {half + 1}-{self.growth_calls} "
            f"(about {grown / half:.2f} per call; of every {len(_GROWTH_CYCLE)} calls, one failed in the tool and one "
            "was refused before the plugin's pre_call, then followed by a call of a tool the registry does not have, "
            "each its own name, which harness_call_refused sees; each call had its own x, and the kit's manual clock advanced "
            f"{_GROWTH_TICK:g} s between calls): it keeps something per call or per key (on the error path too: on_error "
            "sees every call that does not reach post_call)"
        )
        assert kept <= _KEPT_BYTES_PER_CALL * window, (
            f"the plugin's own code (or what it called) allocated {kept:,} bytes over calls "
            f"{self.growth_calls - window + 1}-{self.growth_calls} that are still alive (about {kept / window:.0f} per "
            "call: a growing string, a module-level table, an unbounded lru_cache, a table keyed by the arguments, a "
            "logger named per call?): it keeps something per call or per key"
        )
        assert new_loggers <= _NEW_LOGGERS, (
            f"{new_loggers:,} loggers were made over calls {half + 1}-{self.growth_calls} (logging.getLogger, directly or "
            "through harness-one's log_event(logger=...)), and logging keeps every logger for the life of the process: a "
            "logger named per call or per key (by call.call_id, the arguments)? Name loggers by module or plugin, and put "
            "what varies in the record"
        )
        assert grown_text <= allowed_text, (
            f"the strings, bytes and bytearrays reachable from the plugin grew by {grown_text:,} characters (or bytes) in "
            f"all over calls {half + 1}-{self.growth_calls} (about {grown_text / half:.2f} per call; at most "
            f"{allowed_text:,} in all may come and go: {_GROWN_TEXT}, and one for each of the {strings:,} reachable at "
            "the end): a string or bytearray that grows per call (a trail, a log kept in memory) keeps something per call"
        )
        assert longest - middle_longest <= _GROWN_TEXT, (
            f"the longest string, bytes or bytearray reachable from the plugin grew by {longest - middle_longest:,} "
            f"characters (or bytes) over calls {half + 1}-{self.growth_calls}, to {longest:,} (at most {_GROWN_TEXT} may "
            "come and go, whatever else is reachable): one that grows per call (a trail, a log kept in memory) keeps "
            "something per call"
        )
        gc.collect()
        alive = sum(1 for o in gc.get_objects() if type(o) is Call and o.registry is registry)
        assert alive <= 2, f"{alive} Call objects of finished calls are still alive: the plugin keeps references to them"

    def test_async_calls(self) -> None:
        """Through ``acall``, for async and sync tools alike, concurrently; a call ends through ``acall`` as it ends
        through ``call``: a successful one with the same value, a failing one with the same error, or the same value a
        plugin recovered it with."""
        if not self.supports_async:
            self.switched_off("supports_async", "the plugin serves synchronous calls only")
        plugin = self.make_plugin()
        registry = self._registry(plugin)
        registry.add(self.probe_tool(asynchronous=True))

        async def main() -> list[Any]:
            calls = []
            for x in range(20):
                for tool in (PROBE, PROBE + "_async"):
                    arguments = {"x": x}
                    calls.append(registry.acall(tool, arguments, **self.call_options(arguments)))
            return await asyncio.gather(*calls, return_exceptions=True)

        with blocking_calls() as blocked:
            got = run_async(main())
        assert not blocked, (
            f"a hook blocked the event loop under acall: {'; '.join(sorted(set(blocked))[:3])} (a hook that waits "
            "returns an Await with an async twin, as writing-plugins.md shows)"
        )
        errors = [g for g in got if isinstance(g, BaseException)]
        failed = f"{len(errors)} of {len(got)} acalls made at once failed: {_shown_errors(errors)}"
        assert not errors, failed + _own_refusals(errors, len(got), at_once=len(got))
        expected = {tool: self.answers(range(20), tool=tool, asynchronous=True) for tool in (PROBE, PROBE + "_async")}
        wrong = [
            f"{tool} with x={x} gave {value!r}, where one acall at a time gave {expected[tool][x]!r}"
            for (x, tool), value in zip(((x, t) for x in range(20) for t in (PROBE, PROBE + "_async")), got)
            if value != expected[tool][x]
        ]
        assert not wrong, f"{len(wrong)} of {len(got)} acalls made at once got another answer: " + "; ".join(wrong[:3])
        problems = []
        for arguments, tool in itertools.product(({"x": 1}, {"x": 1, "fail": True}), (PROBE, PROBE + "_async")):
            through_call = self.ended(registry, arguments, tool=tool)
            through_acall = self.ended(registry, arguments, tool=tool, asynchronous=True)
            if through_call != through_acall:
                problems.append(f"{tool}: call gave {through_call[1]}, acall {through_acall[1]} (with {arguments})")
        assert not problems, "a call ends differently through acall than through call:\n  - " + "\n  - ".join(problems)

    def test_a_refusal_stands(self) -> None:
        """A call another plugin refuses before the tool runs (the kit's guard: a ``pre_call`` that raises, before the
        plugin's, a ``ToolError`` as access control does, then in turn ``RateLimitExceeded``, ``CircuitOpen``,
        ``ToolBusy`` and ``ApprovalUnavailable`` as the standard plugins do) ends in an error, through ``call`` and (with
        ``supports_async``) ``acall``, all of them back to back after the same call was let through once (so a plugin
        that remembers good results has one, and one that serves it after a streak of errors sees a streak): the plugin
        may translate the refusal or retry it, but not answer it with a value
        (``Outcome.success`` recovers what the tool raised), nor fail on it with a ``PluginError``. Nor does a
        call whose tool fails (``fail=True``, the plugin alone) end in a ``PluginError``."""
        plugin = self.make_plugin()
        name = self.name_of(plugin)
        registry = self._registry(plugin)
        guard = _Guard()
        registry.plugins.register(guard, _Guard.name)
        problems = []
        ways = (False, True) if self.supports_async else (False,)
        # The same call let through once first: a plugin that remembers a good result ("serve stale on error") has one
        # to answer the refusals with, as it would in service; and the refusals then come back to back, so one that
        # serves it only after a streak of errors (one error may be transient, a streak an outage) sees a streak.
        guard.on = False
        _outcome(registry, PROBE, {"x": 1}, self.call_options({"x": 1}), asynchronous=False)
        guard.on = True
        refusals = list(itertools.product(_REFUSALS, ways))
        for turn, (refusal, asynchronous) in enumerate(refusals, 1):
            guard.refusal = refusal
            way, refused = "acall" if asynchronous else "call", guard.refused
            what = type(refusal(PROBE)).__name__
            what = "ToolError" if what == _Refused.__name__ else what
            value, error = _outcome(registry, PROBE, {"x": 1}, self.call_options({"x": 1}), asynchronous=asynchronous)
            if guard.refused == refused:
                continue  # the plugin answered before the guard ran: no refusal to judge
            if error is None:
                problems.append(
                    f"{way}: the guard's refusal ({what}) became the value {value!r}, refusal {turn} of {len(refusals)} "
                    "in a row after the same call was let through (recover with a value only what the tool raised, a "
                    "ToolExecutionError, not with a remembered result; translate a refusal with Outcome.failure, or let "
                    "it stand)"
                )
            elif isinstance(error, PluginError):
                whose = "the plugin's own" if error.plugin == name else f"a PluginError of {error.plugin or 'no plugin'}:"
                problems.append(
                    f"{way}: the guard's refusal ({what}) became {whose} {type(error).__name__}: {error} (its "
                    "on_error also sees calls an earlier pre_call refused, which its own pre_call never saw)"
                )
        if not guard.refused:
            self.nothing_to_check("the plugin's pre_call answered every call before the kit's guard ran")
        assert not problems, "a call refused before the tool ran did not end in an error:\n  - " + "\n  - ".join(problems)
        alone = self._registry(self.make_plugin())
        arguments = {"x": 1, "fail": True}
        for asynchronous in (False, True) if self.supports_async else (False,):
            _, error = _outcome(alone, PROBE, arguments, self.call_options(arguments), asynchronous=asynchronous)
            if isinstance(error, PluginError):
                problems.append(
                    f"{'acall' if asynchronous else 'call'} with {arguments}, the plugin alone: the tool's failure became "
                    f"{type(error).__name__}: {error} (on_error answers a Retry, an Outcome or None, and does not raise)"
                )
        assert not problems, "a call whose tool failed ended in a PluginError:\n  - " + "\n  - ".join(problems)

    def test_releases_after_failures_and_cancellations(self) -> None:
        """After 100 failed calls, and (``supports_async``) 100 ``acall``s cancelled at each step of their way (in a
        plugin's ``Await`` or in the tool), calls still get through: what a call takes is given back on the error path
        too. A cancelled ``acall`` ends in ``CancelledError``, however far it got, and the cancelled calls grow the state
        reachable from the plugin (:func:`footprint`) by no more than the failed ones did, give or take what
        ``test_no_per_call_state`` allows (a ring of the latest calls' latencies grows with either): a slot kept per
        cancelled call fails whatever the plugin's cap."""
        made = progress(2 * _RELEASE_CALLS)  # ends the loops once the kit's clock stopped the calls
        ways = (False, True) if self.supports_async else (False,)
        # A new plugin's first calls, before any failed one: a module plugin's (a shared factory's) state is every
        # plugin's, and what the failed calls kept would fail these too
        firsts = [self.ended(self._registry(self.make_plugin()), {"x": 1}, asynchronous=asynchronous) for asynchronous in ways]
        plugin = self.make_plugin()
        registry = self._registry(plugin)
        fresh = footprint(plugin)
        for i in range(_RELEASE_CALLS):
            self.ended(registry, {"x": 10_000 + i, "fail": True})
            made.made()
        failed = footprint(plugin)
        problems, reached, early = run_async(self._cancel_calls(registry, made)) if self.supports_async else ([], True, [])
        grown = footprint(plugin) - failed
        if grown > failed - fresh + _GROWN_OBJECTS:
            problems.append(
                f"the state reachable from the plugin grew by {grown} objects over {_RELEASE_CALLS} cancelled acalls, "
                f"where {_RELEASE_CALLS} failed calls grew it by {failed - fresh}: it keeps something per cancelled "
                "call (give back what pre_call took in on_error too: a cancelled call reaches it as ToolCancelled)"
            )
        what = f"{_RELEASE_CALLS} failed" + (f" and {_RELEASE_CALLS} cancelled" if self.supports_async else "")
        if isinstance(registry.clock, ManualClock):
            registry.clock.advance(86_400.0)  # a circuit opened by the failures half-opens, limits refill
        for asynchronous, first in zip(ways, firsts):
            got = self.ended(registry, {"x": 1}, asynchronous=asynchronous)
            expected = first[1] if first[0] == "value" else repr(_probe(1))  # as answers() expects
            way = "an acall" if asynchronous else "a call"
            if got == ("value", expected):
                continue
            if first[0] == "value":
                problems.append(
                    f"after {what} calls, {way} ended {got[1]}, where a new plugin's first call gives {expected}: give "
                    "back what pre_call took in on_error too (a cancelled call reaches it as ToolCancelled)"
                )
            else:  # a new plugin fails it too: nothing the failed calls left behind
                problems.append(
                    f"after {what} calls, {way} ended {got[1]}"
                    + (" (as a new plugin's first one does)" if got == first else f" (a new plugin's first one: {first[1]})")
                )
        if not reached and not problems:
            problems.append(
                "no cancelled acall reached the tool: set tool_options (or call_options) so calls get through"
                + _own_refusals(early, _RELEASE_CALLS)
            )
        assert not problems, "calls on the error path:\n  - " + "\n  - ".join(problems)

    async def _cancel_calls(self, registry: ToolRegistry, made: Progress) -> tuple[list[str], bool, list[BaseException]]:
        """Cancel ``_RELEASE_CALLS`` acalls of the async probe, each after a few steps of the loop (0 to
        ``_CUT_POINTS - 1``): those that did not end in ``CancelledError``, whether any reached the tool, and the
        errors of those that ended before they were cut off. Ends early, as ``made`` says, once the kit's clock
        stopped the calls."""
        reached: list[int] = []
        release = asyncio.Event()
        registry.add(dataclasses.replace(self.probe_tool(asynchronous=True), fn=_waiting_probe(reached, release)), replace=True)
        swallowed: list[str] = []
        early: list[BaseException] = []
        for i in range(_RELEASE_CALLS):
            if i:
                made.made()
            arguments = {"x": 20_000 + i}
            task = asyncio.ensure_future(registry.acall(PROBE + "_async", dict(arguments), **self.call_options(arguments)))
            for _ in range(i % _CUT_POINTS):
                await asyncio.sleep(0)
            if task.done():  # ended before the cut: how is the other checks' business
                error = None if task.cancelled() else task.exception()
                if error is not None:
                    early.append(error)
                continue
            task.cancel()
            for _ in range(_DRAIN_STEPS):
                if task.done():
                    break
                await asyncio.sleep(0)
            if not task.done():  # the cancellation was lost on the way: let the probe return
                release.set()
                await asyncio.wait({task})
                release.clear()
            if task.cancelled():
                continue
            error = task.exception()
            ended = f"{type(error).__name__}: {error}" if error is not None else f"returned {task.result()!r}"
            swallowed.append(f"an acall cancelled after {i % _CUT_POINTS} steps of the event loop {ended}")
        shown = "; ".join(swallowed[:3])
        problems = [f"{len(swallowed)} of {_RELEASE_CALLS} cancelled acalls did not end in CancelledError: {shown}"]
        return (problems if swallowed else []), bool(reached), early

    # ------------------------------------------------------------------ beside the standard plugins

    def make_standard_registry(self, plugin: Any) -> ToolRegistry:
        """A registry with the standard plugins and ``plugin`` (in the place of the standard plugin of its name),
        a manual clock and the probe tool (override it as you override :meth:`make_registry`)."""
        registry = ToolRegistry(autoload=False, clock=BoundedClock(), plugins={self.name_of(plugin): plugin})
        registry.add(self.probe_tool())
        return registry

    def test_beside_the_standard_plugins(self, record_property: Callable[[str, object], None]) -> None:
        """Beside the standard plugins, calls end as they do with the plugin alone (a failing one too, through
        ``call`` and ``acall``); the summary shows where its hooks run. With ``guards_calls``, its ``pre_call``
        runs before every standard plugin's: a cache hit or an idempotency replay cannot answer a call it refuses."""
        plugin = self.make_plugin()
        name = self.name_of(plugin)
        registry = self._registry(plugin, standard=True)
        order = registry.plugins.plan.order
        shown = [
            f"{hook}: " + " ".join(f"[{n}]" if n == name else n for n in names) for hook, names in order.items() if name in names
        ]
        record_property(PLAN_PROPERTY, "; ".join(shown) or "in no per-call hook")
        alone = self._registry(self.make_plugin())
        problems = []
        for arguments in ({"x": 1}, {"x": 2, "fail": True}):
            for asynchronous in (False, True) if self.supports_async else (False,):
                expected = self.ended(alone, arguments, asynchronous=asynchronous)
                got = self.ended(registry, arguments, asynchronous=asynchronous)
                if expected != got:
                    way = "acall" if asynchronous else "call"
                    problems.append(f"{way} with {arguments}: alone it gave {expected[1]}, beside them {got[1]}")
        if self.guards_calls:
            names = order["pre_call"]
            if name not in names:
                problems.append("guards_calls = True, but the plugin has no harness_pre_call")
            elif names.index(name) > 0:
                problems.append(
                    f"guards_calls = True, but the pre_call of {', '.join(names[: names.index(name)])} runs before the "
                    "plugin's (an idempotency replay or a cache hit answers a call before it is refused): mark the "
                    "plugin's pre_call @hookimpl(tryfirst=True) and give the plugin an order below the standard ones"
                )
        assert not problems, "beside the standard plugins:\n  - " + "\n  - ".join(problems)
