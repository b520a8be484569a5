"""ToolRegistry: the catalogue of tools and the one place every call goes through."""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import itertools
import math
import threading
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from numbers import Real
from operator import attrgetter
from types import CoroutineType, MethodType
from typing import TYPE_CHECKING, Any, ClassVar, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

from ._arguments import ArgumentLimits, check_signature, decode_arguments, plain_json
from ._call import (
    _EMPTY,
    Await,
    Call,
    CallResult,
    Lingering,
    Outcome,
    ProgressCallback,
    Retry,
    _Unreportable,
    new_call_id,
    progress_callback,
)
from ._clock import SYSTEM_CLOCK, Clock
from ._errors import (
    ArgumentProblem,
    PluginError,
    ToolArgumentError,
    ToolCancelled,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolNotFound,
    ToolTimeout,
    call_failure,
    exception_text,
    outside_text,
    tool_failure,
    unawaited,
)
from ._lazy import lazy_attribute, lazy_module
from ._log import log_event
from ._suggest import NameIndex
from ._tool import Tool

if TYPE_CHECKING:
    import asyncio

    from ._plugins import ToolPlan
    from .state import State
else:  # imported on first use: a program that never awaits a tool never imports asyncio
    asyncio = lazy_module("asyncio", __name__)

__all__ = ["ToolRegistry"]

P = ParamSpec("P")
R = TypeVar("R")
_perf = time.perf_counter
_monotonic = time.monotonic
#: Seconds a lookup of an unknown name waits for another thread's loading of the tool packages.
_DISCOVERY_WAIT = 60.0
#: ``_entry``'s ``call_id`` when the lookup is not for a call (``get``, ``remove``).
_NOT_A_CALL: Any = object()
#: Where the tools a plain ``@defineTool`` registers meanwhile come from (``local:FILE`` while ``harness-one`` imports a
#: tools entry): the name conflict it makes says so.
LOADING_SOURCE: contextvars.ContextVar[str | None] = contextvars.ContextVar("harness_one_loading_source", default=None)
_timeout_cm: Any = lazy_attribute("asyncio", "timeout", __name__, "_timeout_cm")

#: What the attempt generator yields: keyword arguments to run the tool with, seconds to
#: sleep, a hook's :class:`Await` to resolve (its value set before the generator resumes), or
#: what a tool run inside it raised that is not an ``Exception`` (for the driver to raise).
Step = dict[str, Any] | float | Await | BaseException


class _shared(Generic[P, R]):  # noqa: N801 - behaves like a method decorator
    """A method that acts on the default registry when called on the class.

    ``ToolRegistry.call(...)`` is ``ToolRegistry.default().call(...)``; on an instance it is
    an ordinary method (bound once, in ``__init__``). A class-level read is answered first by
    :class:`_SharedType`'s property; this ``__get__`` answers it for a subclass that overrides
    a shared method, and tells type checkers what it returns.
    """

    def __init__(self, func: Callable[Concatenate[ToolRegistry, P], R]) -> None:
        self.func = func
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__

    @overload
    def __get__(self, obj: None, owner: type[ToolRegistry]) -> Callable[P, R]: ...

    @overload
    def __get__(self, obj: ToolRegistry, owner: type[ToolRegistry] | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: ToolRegistry | None, owner: type[ToolRegistry] | None = None) -> Callable[P, R]:
        if obj is None:
            obj = ToolRegistry.default()
            bound = obj.__dict__.get(self.__name__)  # instances pre-bind their shared methods
            if bound is not None:
                return bound  # type: ignore[no-any-return]
        return MethodType(self.func, obj)


class _SharedType(type):
    """The type of :class:`ToolRegistry`: ``ToolRegistry.call`` is ``_current.call``, read in C.

    For each shared method it holds a property whose getter is an ``attrgetter``, so a
    class-level call costs two attribute reads and no Python ``__get__``. ``_current`` is the
    default registry (whose instance binds its shared methods once), :data:`_LAZY` before it
    exists, or an :class:`_Overridden` on a subclass that overrides a shared method.

    Assigning or deleting a shared method on a class later (a test's
    ``mock.patch.object(ToolRegistry, "call")``) removes that property for good: from then on
    the classes' own attributes answer, through :class:`_shared`'s ``__get__``, in Python.
    """

    def __setattr__(cls, name: str, value: Any) -> None:
        _unbind(name)
        super().__setattr__(name, value)

    def __delattr__(cls, name: str) -> None:
        _unbind(name)
        super().__delattr__(name)


def _unbind(name: str) -> None:
    if name in _SHARED and isinstance(vars(_SharedType).get(name), property):
        with contextlib.suppress(AttributeError):  # another thread's assignment removed it first
            type.__delattr__(_SharedType, name)


class _Lazy:
    """``ToolRegistry._current`` while there is no default registry: reading a method creates it."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        return getattr(ToolRegistry.default(), name)


class _Overridden:
    """``_current`` of a subclass that overrides a shared method: its class-level reads as Python resolves them."""

    __slots__ = ("cls",)

    def __init__(self, cls: type[ToolRegistry]) -> None:
        self.cls = cls

    def __getattr__(self, name: str) -> Any:
        attr = _defined(self.cls, name)
        get = getattr(type(attr), "__get__", None)
        return attr if get is None else get(attr, None, self.cls)


def _defined(cls: type, name: str) -> Any:
    """What ``name`` is in the class body that defines it for ``cls`` (no descriptor applied)."""
    return next(vars(k)[name] for k in cls.__mro__ if name in vars(k))


_LAZY = _Lazy()


class _Entry:
    """A registered tool, its call counter and its prepared hook plan.

    Calls take a value from ``counter`` (atomic without a lock); reading the count takes one
    too, under ``registry._lock``, and ``reads`` subtracts what reading consumed.
    """

    __slots__ = ("counter", "direct", "plan", "reads", "simple", "tool")

    def __init__(self, tool: Tool) -> None:
        self.tool = tool
        self.counter = itertools.count()
        self.reads = 0
        self.plan: ToolPlan | None = None
        #: Callable directly when no hook applies: sync, no converters, no Call parameter, no **kwargs.
        self.simple = not (tool.is_async or tool.converters or tool.call_param or tool.accepts_any)
        #: ``simple`` and no hook applies (set with ``plan``): a call without options skips the pipeline.
        self.direct = False

    def calls(self) -> int:
        count = next(self.counter) - self.reads
        self.reads += 1
        return count


class ToolRegistry(metaclass=_SharedType):
    """A catalogue of tools and the pipeline that calls them.

    There is one process-wide default registry, which ``@defineTool`` fills and which the
    class-level methods use (``ToolRegistry.call("add", {...})``). Every ``ToolRegistry()``
    is independent of it and of each other: its own tools, plugins (and so its own rate
    limits, idempotency records and metrics), clock and state.

    Args:
        plugins: extra plugins (objects, modules or classes), or ``{name: plugin}`` to
            register them under names (a standard name replaces the standard plugin).
        standard_plugins: load the standard plugins shipped with harness-one.
        autoload: load third-party plugins from the ``harness_one.plugins`` entry points
            (default: on, unless ``HARNESS_ONE_DISABLE_PLUGIN_AUTOLOAD`` is set).
        block: plugin names to keep out (added to ``HARNESS_ONE_BLOCK_PLUGINS``).
        allow: if given, only these entry-point plugins load (default:
            ``HARNESS_ONE_PLUGINS`` when set).
        strict: raise :class:`PluginError` when a plugin fails to load, instead of logging
            and reporting it (default: ``HARNESS_ONE_STRICT_PLUGINS``).
        plugin_options: ``{plugin name: {option: value}}``, passed as keyword arguments to
            entry-point plugin factories (over ``HARNESS_ONE_PLUGIN_<NAME>``). Options for
            a name no installed or given plugin has are a load failure, like options a
            factory refuses.
        discover: load tools from the ``harness_one.tools`` entry points (lazily: a name the
            registry does not know loads the entry point of that name, a listing loads all).
            The default registry does; new instances do not.
        clock: the time source of every policy (rate limits, waits between attempts,
            deadlines); durations are measured with ``time.perf_counter``.
        limits: size and nesting limits for incoming arguments.
        state: where shared policy state lives (see :mod:`harness_one.state`): ``None``
            (this process), ``"sqlite:///PATH"``, or a :class:`~harness_one.state.State`.
    """

    # What every call reads is a slot. An instance has more attributes (the pre-bound shared
    # methods among them) than CPython keeps inline, so its ``__dict__`` is a real dict, and
    # CPython does not specialize attribute reads from such a dict when the class keeps it
    # itself (each would be a full lookup, about 150 instructions); with a ``__dict__`` slot,
    # method lookups on the registry are specialized too.
    __slots__ = ("__dict__", "__weakref__", "_tools", "clock", "limits")

    _default_lock: ClassVar[threading.Lock] = threading.Lock()
    #: The thread building the default registry (its plugins load meanwhile), else None.
    _default_builder: ClassVar[int | None] = None
    #: What the class-level shared methods are read from (see :class:`_SharedType`): on
    #: ``ToolRegistry``, the default registry, or :data:`_LAZY` while there is none.
    _current: ClassVar[Any] = _LAZY

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if any(_defined(cls, name) is not attr for name, attr in _SHARED.items()):
            cls._current = _Overridden(cls)

    def __init__(
        self,
        *,
        plugins: Iterable[Any] | Mapping[str, Any] = (),
        standard_plugins: bool = True,
        autoload: bool | None = None,
        block: Iterable[str] = (),
        allow: Iterable[str] | None = None,
        strict: bool | None = None,
        plugin_options: Mapping[str, Mapping[str, Any]] | None = None,
        discover: bool = False,
        clock: Clock = SYSTEM_CLOCK,
        limits: ArgumentLimits | None = None,
        state: str | State | None = None,
    ) -> None:
        from ._plugins import PluginSet  # imported with the first registry, not at start-up
        from .state import State

        self.clock = clock
        self.limits = limits or ArgumentLimits()
        self.state = state if isinstance(state, State) else State(state)
        self._tools: dict[str, _Entry] = {}
        self._index = NameIndex()
        self._lock = threading.RLock()
        cls = type(self)
        for name, attr in _SHARED.items():  # bind once: instance calls skip the descriptor
            if cls is ToolRegistry or _defined(cls, name) is attr:
                self.__dict__[name] = MethodType(attr.func, self)  # not where a subclass overrides it
        self._discover = discover
        self._discovered = False
        self._refreshes = 0  # refresh_entry_points()'s count when every package was last loaded
        #: Names removed here: a tool package's tool of that name is not loaded into this registry again.
        self._removed: set[str] = set()
        #: Held by the thread loading tool packages, through their imports. Not ``_lock``: a thread
        #: that an import starts and waits for may add tools meanwhile (``_lock`` is taken per package).
        self._discovery_lock = threading.RLock()
        self._discovering: int | None = None  # the thread loading every tool package, while it does
        self._loaded = threading.Event()  # clear while that loading runs
        self._loaded.set()
        self._exports: dict[tuple[str, bool | str], Any] = {}
        self._stale_exports: dict[tuple[str, bool | str], Any] = {}
        self._version = 0  # counts changes of the tools, for the exports cache
        from ._discovery import DiscoveryReport

        self.discovery = DiscoveryReport()
        try:
            self.plugins = PluginSet(
                self,
                plugins=plugins,
                standard=standard_plugins,
                autoload=autoload,
                block=block,
                allow=allow,
                strict=strict,
                options=plugin_options,
            )
        except BaseException:
            # Holds none of its plugins (a plugin's state is free for the next registry), though a reference cycle
            # may keep it alive until the garbage collector runs
            self._unbuilt = True
            raise

    # ------------------------------------------------------------------ the default registry

    @classmethod
    def default(cls) -> ToolRegistry:
        """The process-wide registry that ``@defineTool`` and the class-level methods use.

        It loads installed tool packages (lazily) and takes its state location from
        ``HARNESS_ONE_REDIS_URL`` or else ``HARNESS_ONE_STATE``, with ``HARNESS_ONE_REDIS_PREFIX``
        as its Redis key prefix.
        """
        registry = ToolRegistry._current
        if registry is _LAZY:
            if ToolRegistry._default_builder == threading.get_ident():  # waiting for the lock would be for ever
                raise PluginError(
                    "The default registry is being set up and its plugins are loading: a plugin cannot use it "
                    "while it loads (in its module or its factory). Put its tools in a tool package instead, "
                    "or define them with @defineTool(registry=None)."
                )
            _take_default_lock()
            try:
                registry = ToolRegistry._current
                if registry is _LAZY:
                    from ._config import environment_state

                    ToolRegistry._default_builder = threading.get_ident()
                    try:
                        registry = ToolRegistry(discover=True, state=environment_state() or None)
                    finally:
                        ToolRegistry._default_builder = None
                    ToolRegistry._current = registry
            finally:
                ToolRegistry._default_lock.release()
        return registry  # type: ignore[no-any-return]

    @classmethod
    def set_default(cls, registry: ToolRegistry | None) -> ToolRegistry | None:
        """Install ``registry`` as the default (``None``: a fresh one on next use); returns the old one."""
        _take_default_lock()
        try:
            old, ToolRegistry._current = ToolRegistry._current, _LAZY if registry is None else registry
        finally:
            ToolRegistry._default_lock.release()
        return None if old is _LAZY else old

    # ------------------------------------------------------------------ catalogue

    def tools(self) -> list[Tool]:
        """The registered tools, in registration order."""
        self._ensure_discovered()
        return self._tool_list()

    def _tool_list(self) -> list[Tool]:
        with self._lock:
            return [e.tool for e in self._tools.values()]

    @_shared
    def add(self, /, tool: Tool | Callable[..., Any], *, replace: bool = False, **definition: Any) -> Tool:
        """Register a :class:`Tool`, a ``@defineTool`` function, or a plain function (with ``defineTool``'s keywords).

        A second tool of the same name is a :class:`ToolDefinitionError` unless ``replace=True``,
        except that a tool defined in code replaces one from an installed tool package (with a
        warning; ``registry.discovery.conflicts`` and ``harness-one doctor`` show it). Safe
        while other threads call tools.
        """
        from ._discovery import as_tool

        item = as_tool(tool, definition)
        self._insert(item, replace=replace)
        return item

    register = add

    def _insert(self, tool: Tool, *, replace: bool) -> None:
        with self._lock:
            old = self._tools.get(tool.name)
            if old is not None and old.tool is tool:
                return
            if tool.source is None and not replace and ToolRegistry._current is self:  # a package's plain @defineTool?
                from ._discovery import imported_tool

                if imported_tool(self, tool, None if old is None else old.tool):
                    return
            if old is not None and not replace:
                if tool.source is not None or old.tool.source is None:
                    where = f" (from {old.tool.source})" if old.tool.source else ""
                    raise ToolDefinitionError(
                        f"A tool named '{tool.name}' is already registered{where}; pass replace=True to replace it.",
                        tool=tool.name,
                    )
                from ._discovery import Conflict

                kept = LOADING_SOURCE.get() or "code in this process"
                self.discovery.conflicts.append(Conflict(tool.name, kept=kept, skipped=old.tool.source))
                log_event(30, "tool name conflict", tool=tool.name, kept=kept, skipped=old.tool.source)
            if old is not None:
                self.plugins.plan.forget(old.tool)
            # Before the catalogue changes: a plugin refusing the tool leaves every plugin and the old tool as they were.
            failed = self.plugins.tool_changed(None if old is None else old.tool, tool)
            entry = self._tools[tool.name] = _Entry(tool)
            if old is not None:  # one counter: calls still counting on the old entry are not lost
                entry.counter, entry.reads = old.counter, old.reads
            if old is None:
                self._index.add(tool.name)
            self._exported(tool, grew=old is None)
            if failed is not None:  # a plugin's harness_tool_removed of the old tool: raised once the change is made
                raise failed

    def _exported(self, tool: Tool, *, grew: bool) -> None:
        """Keep cached exports current: extend them by one tool, or drop them when a tool changed."""
        self._version += 1  # an export built meanwhile is not cached
        if not self._exports:
            return
        if not grew:
            self._forget_exports()
            return
        exports = {}
        for key, found in self._exports.items():
            try:
                exports[key] = found.extended(tool, copy=False)
            except Exception:  # e.g. the tool cannot be exported strictly: the next export rebuilds, and says why
                continue
        self._exports = exports

    def _forget_exports(self) -> None:
        """A tool was removed or replaced: the next export is rebuilt, reusing each unchanged tool's share."""
        self._stale_exports.update(self._exports)
        self._exports = {}

    @_shared
    def remove(self, /, name: str) -> Tool:
        """Unregister the tool called ``name`` and return it; safe while other threads call tools.

        The name stays removed from this registry: no tool package's tool of that name is loaded
        into it later (a listing, a lookup, a refresh); code can add a tool of that name again.
        """
        complete = True
        if isinstance(name, str) and name not in self._tools:
            complete = self._ensure_discovered(name)  # a package's tool is removed, not loaded later
        with self._lock:
            entry = self._tools.get(name) if isinstance(name, str) else None
            if entry is None:
                raise self._not_found(name, loading=not complete)
            del self._tools[name]
            self._removed.add(name)
            self._index.remove(name)
            self._version += 1
            self._forget_exports()
            self.plugins.plan.forget(entry.tool)
            self.plugins.call_each("harness_tool_removed", tool=entry.tool, registry=self)  # all told, then one error raised
            return entry.tool

    unregister = remove

    @_shared
    def get(self, /, name: str) -> Tool:
        """The tool called ``name``, or :class:`ToolNotFound` with close-name suggestions."""
        return self._entry(name).tool

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name not in self._tools:
            self._ensure_discovered(name)
        return name in self._tools

    def __len__(self) -> int:
        self._ensure_discovered()
        return len(self._tools)

    @_shared
    def names(self) -> list[str]:
        """The tool names, in registration order."""
        self._ensure_discovered()
        with self._lock:
            return list(self._tools)

    @_shared
    def list_tools(self, /, *, names_only: bool = False) -> Any:
        """What the model sees: ``{name: {"description", "parameters"}}``.

        Iterating it yields the names, so ``list(ToolRegistry.list_tools())`` is the list of
        names; ``names_only=True`` returns that list directly.
        """
        self._ensure_discovered()
        with self._lock:
            if names_only:
                return list(self._tools)
            return {n: {"description": e.tool.description, "parameters": e.tool.parameters} for n, e in self._tools.items()}

    @_shared
    def call_count(self, /, name: str) -> int:
        """How many calls tool ``name`` has received, refused and failed ones included."""
        entry = self._entry(name)
        with self._lock:
            return entry.calls()

    @_shared
    def stats(self) -> dict[str, Any]:
        """``{"tools": {name: {"calls": n, ...}}, <plugin name>: {...}}``: counters plus each plugin's statistics.

        A plugin whose ``harness_stats`` raises, or returns anything but a dict (its ``"tools"`` a
        dict per tool name), makes it raise a :class:`PluginError` naming the plugin. A plugin's per-tool
        statistics are merged into those of the tools the registry has, beside the core's ``"calls"``: its own
        ``"calls"`` for a tool, and its statistics for a tool the registry does not have, are left out.
        """
        with self._lock:
            tools: dict[str, dict[str, Any]] = {n: {"calls": e.calls()} for n, e in self._tools.items()}
        out: dict[str, Any] = {"tools": tools}
        for plugin, data in self.plugins.call_each("harness_stats", registry=self):
            problem = _stats_problem(plugin, data)
            if problem is not None:
                raise PluginError(problem, plugin=plugin)
            if not data:
                continue
            rest = {k: v for k, v in data.items() if k != "tools"}
            if rest:
                out[plugin] = rest
            for tool_name, tool_stats in (data.get("tools") or {}).items():
                entry = tools.get(tool_name)
                if entry is not None:  # not invented for a tool the registry lacks (one removed since the plugin counted it)
                    entry.update({k: v for k, v in tool_stats.items() if k != "calls"})  # the core's count is the real one
        return out

    @_shared
    def export(
        self, format: str = "openai", *, strict: bool | str = False, names: Iterable[str] | None = None, copy: bool = True
    ) -> Any:
        """The tools in a provider's format, as an :class:`~harness_one.export.Export`.

        Formats: :data:`harness_one.export.FORMATS`. ``strict`` (OpenAI): ``True`` for every
        tool or an error, ``"auto"`` per tool with the exceptions reported. ``names``: only
        these tools, in this order (a name given twice is exported once). Whole exports are
        cached; adding a tool extends the cached exports by that one tool, and after a removal
        or replacement each unchanged tool's definition is reused.

        Each export is the caller's to change (add a provider's own tools, mark one for
        caching): it is a deep copy. ``copy=False`` skips the copy, for a caller that only reads
        or serialises it (at 100,000 tools the copy costs more than the cached export): the
        registry's cached export and the tools' own schemas, never to be changed.
        """
        from .export import export_tools

        if names is not None:
            if isinstance(names, (str, bytes)):
                raise TypeError(f"names must be an iterable of tool names, not a {type(names).__name__}: names=[{names!r}]")
            return export_tools([self.get(n) for n in dict.fromkeys(names)], format, strict=strict, copy=copy)
        key = (format, strict)
        found = self._exports.get(key)
        if found is None:
            version = self._version
            complete = self._ensure_discovered()
            found = export_tools(self.tools(), format, strict=strict, reuse=self._stale_exports.get(key), copy=False)
            with self._lock:
                if self._version == version and complete:  # no tool changed while it was built, none still loading
                    self._exports[key] = found
                    self._stale_exports.pop(key, None)
        return found.copy() if copy else found

    # ------------------------------------------------------------------ discovery

    def load_entry_points(self, *, refresh: bool = False) -> Any:
        """Load every tool package of the ``harness_one.tools`` group now; returns the discovery report.

        ``refresh=True`` reads the installed entry points again and tries again the packages that
        failed to load (their failures are dropped from the report, and recorded anew if they fail again).

        While another thread loads them, waits for it at most ``_DISCOVERY_WAIT`` seconds, then
        raises :class:`TimeoutError` (a thread that a package's import waits for would wait for ever).
        """
        from ._discovery import load_tool_entry_points
        from ._entrypoints import refresh_entry_points, refreshes

        if refresh:
            refresh_entry_points()
        if not self._discovery_lock.acquire(timeout=_DISCOVERY_WAIT):
            raise TimeoutError(f"another thread is loading the tool packages and did not finish within {_DISCOVERY_WAIT:g} s")
        try:
            if refresh:  # a package that failed to load (a dependency missing, since installed) is tried again
                self.discovery.retry()
            outer = self._discovering is None  # (the lock is re-entrant: only this thread can be inside)
            if outer:  # before _discovered: a lookup that sees it also sees the loading under way
                self._discovering = threading.get_ident()
                self._loaded.clear()
            self._refreshes = refreshes()  # read before the entry points: a refresh from now on is seen
            self._discovered = True  # a package's import that calls back does not load again
            try:
                load_tool_entry_points(self, self.discovery)
            except BaseException:
                if outer:  # interrupted (Ctrl-C in a slow import): the next lookup loads what is missing
                    self._discovered = False
                raise
            finally:
                if outer:
                    self._discovering = None
                    self._loaded.set()
        finally:
            self._discovery_lock.release()
        return self.discovery

    def _ensure_discovered(self, name: str | None = None) -> bool:
        """Load the tool packages that may provide ``name`` (None: every package), unless done.

        A package's import runs without ``_lock``; this thread may be one that the import waits
        for, so another thread's loading is waited for at most ``_DISCOVERY_WAIT`` seconds.
        False: it had not finished by then, and the answer is given without it. A name removed here
        loads nothing; after :func:`refresh_entry_points`, a registry that loaded every package loads those installed since.
        """
        if not self._discover or (name is not None and name in self._removed):
            return True
        from ._entrypoints import refreshes

        if self._discovered and self._refreshes == refreshes():
            if self._loaded.is_set() or self._discovering == threading.get_ident():
                return True
            if self._loaded.wait(_DISCOVERY_WAIT):
                return True
        elif self._discovery_lock.acquire(timeout=_DISCOVERY_WAIT):
            try:
                self._discover_now(name)
            finally:
                self._discovery_lock.release()
            return True
        log_event(30, "tool packages still loading in another thread", waited=_DISCOVERY_WAIT, tool=name)
        return False

    def _discover_now(self, name: str | None) -> None:
        """Under the discovery lock: load the package providing ``name``, or every package (unless another thread just did;
        once every package was loaded, those installed since, after a refresh)."""
        if self._discovered:
            from ._entrypoints import refreshes

            if self._discovering is None and self._refreshes != refreshes():  # (not from within this thread's loading)
                self.load_entry_points()
            return
        if name is not None:
            from ._discovery import load_named_entry_point

            if load_named_entry_point(self, self.discovery, name):
                return
        self.load_entry_points()

    def _entry(self, name: Any, call_id: Any = _NOT_A_CALL) -> _Entry:
        """The entry of ``name``, loading tool packages for it; else ``ToolNotFound`` (for a call,
        given its ``call_id``, observed by the plugins as a refused call first)."""
        try:
            entry = self._tools.get(name)
        except TypeError:  # an unhashable name
            entry = None
        if entry is None:
            complete = True
            if isinstance(name, str):
                complete = self._ensure_discovered(name)
                entry = self._tools.get(name)
            if entry is None:
                err = self._not_found(name, loading=not complete)
                if isinstance(name, str) and (self.discovery.failed or self.discovery.known_failed):
                    from ._discovery import not_loaded_note

                    note = not_loaded_note(self.discovery, name)  # the package that would provide it failed to import
                    if note:
                        err.message += note
                        err.args = (err.message,)
                raise err if call_id is _NOT_A_CALL else self._refused(name, err, call_id)
        return entry

    def _refused(self, name: Any, err: ToolError, call_id: Any) -> ToolError:
        """``err``, which refuses a request before it became a call, once the plugins observed it
        (``harness_call_refused``): it carries the call's id (given, as text, or a new one) from here on."""
        if err.call_id is None:  # a given "" is kept, as on calls that reach the tool
            given = None if call_id is None else _text(call_id, str)  # 5 -> "5", as calls keep it
            err.call_id = given if given is not None else new_call_id()
        text = name if type(name) is str else "" if name is None else _named(name)
        self.plugins.observe("harness_call_refused", registry=self, name=text[:200], error=err)
        return err

    def _not_found(self, name: Any, *, loading: bool = False) -> ToolNotFound:
        text = _named(name)  # (the index reads what it iterates at once: no lock, as other threads change it)
        close = self._index.suggest(text) if isinstance(name, str) and len(name) <= 256 else []
        return ToolNotFound(
            text[:200],
            available=self._index.first(20),
            suggestions=close,
            total=len(self._index),
            discovers=self._discover,
            still_loading=_DISCOVERY_WAIT if loading else None,
        )

    # ------------------------------------------------------------------ calling

    def _refuse_running_loop(self, call: Call) -> None:
        """A blocking call of an async tool cannot start a loop inside a running one: a ToolError saying what to use."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        name = call.tool.name
        message = f"Tool '{name}' is async and an event loop is running here: use 'await registry.acall(...)'."
        raise self._refused(name, ToolError(message, tool=name), call._id)

    def _plans_changed(self) -> None:
        for entry in list(self._tools.values()):
            entry.plan = None
            entry.direct = False

    def _plan(self, entry: _Entry) -> ToolPlan:
        """The entry's plan, built now; kept only if the plugins and the tool are still the ones it was built for.

        A plugin change publishes its plan before it clears the entries' plans, so a change that
        lands before the store is seen by the check after it (and the store undone). No lock: a
        call never waits for one (a plugin's setup hooks run under the registry's lock).
        """
        plans = self.plugins.plan
        tool = entry.tool
        plan = plans.for_tool(tool)  # a plugin's failure here is a PluginError naming it
        if self.plugins.plan is plans and self._tools.get(tool.name) is entry:
            entry.direct = entry.simple and plan.empty
            entry.plan = plan
            if self.plugins.plan is plans and self._tools.get(tool.name) is entry:
                return plan
            entry.plan, entry.direct = None, False  # changed meanwhile: the next call prepares it again
        if self._tools.get(tool.name) is not entry:
            plans.forget(tool)  # a replaced or removed tool's plan is not kept
        return plan

    def _begin(
        self,
        name: Any,
        arguments: Any,
        context: Any,
        call_id: Any,
        idempotency_key: Any,
        on_progress: ProgressCallback | None,
        started: float,
    ) -> tuple[Call, ToolPlan]:
        try:
            entry = self._tools.get(name) or self._entry(name, call_id)
        except TypeError:
            entry = self._entry(name, call_id)
        next(entry.counter)
        plan = entry.plan or self._plan(entry)
        if idempotency_key is not None:
            plan = plan.keyed or plan
        elif context is None and (call_id is None or type(call_id) is str):
            call = _alloc(Call)  # Call(...) without a frame for __init__: its fields, as __init__ sets them (a test compares)
            call.registry = self
            call.tool = entry.tool
            call.arguments = arguments
            call.context = _EMPTY
            call._id = call_id
            call.started = started
            call.attempt = 1
            call.ran = False
            call._cancelled_through = 0
            call.result = None
            call.decoded = call.timeout = call._failure = None
            if on_progress is not None:
                call._progress = progress_callback(on_progress)
            return call, plan
        return self._new_call(entry, arguments, context, call_id, idempotency_key, on_progress, started), plan

    def _new_call(
        self,
        entry: _Entry,
        arguments: Any,
        context: Any,
        call_id: Any,
        idempotency_key: Any,
        on_progress: ProgressCallback | None,
        started: float,
    ) -> Call:
        try:
            if context is not None and not isinstance(context, Mapping):
                raise _caller_error(entry.tool.name, "context", "a mapping (JSON object)", context)
            if call_id is not None and not isinstance(call_id, str):
                given, call_id = call_id, _text(call_id, str)
                if call_id is None:  # a huge int, a broken __str__
                    raise _caller_error(entry.tool.name, "call_id", "a string", given)
            if idempotency_key is not None:
                _check_key(entry.tool.name, idempotency_key)
        except ToolError as err:
            raise self._refused(entry.tool.name, err, call_id) from None
        return Call(self, entry.tool, arguments, context, call_id, idempotency_key, started, on_progress)

    @_shared
    def call(
        self,
        /,
        name: str,
        arguments: Any = None,
        *,
        context: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        idempotency_key: str | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Call tool ``name`` with ``arguments`` (a dict or a JSON string) and return its result.

        Raises a :class:`ToolError` and nothing else: :class:`ToolNotFound`,
        :class:`ToolArgumentError`, :class:`RateLimitExceeded`, :class:`ToolTimeout`,
        :class:`ToolExecutionError`, ... An async tool runs to completion in a new event
        loop; inside a running loop use :meth:`acall`. ``on_progress(progress, total,
        message)`` receives what the tool reports through :meth:`Call.report_progress`, in the
        thread it reports from (an ``async def`` one is a ``TypeError``, raised before the tool runs).
        """
        try:
            entry = self._tools.get(name) or self._entry(name, call_id)
        except TypeError:
            entry = self._entry(name, call_id)
        except ToolError:
            raise
        except Exception as exc:  # a name whose __eq__ or __hash__ fails: as acall (its _begin) reports it
            raise _internal(exc, name) from exc
        next(entry.counter)
        plan = entry.plan or self._plan(entry)
        if idempotency_key is not None:
            plan = plan.keyed or plan
        elif entry.direct and context is None and on_progress is None and (call_id is None or type(call_id) is str):
            return self._direct(entry.tool, arguments, call_id)  # (another call_id is checked, as try_call does)
        if context is None and idempotency_key is None and (call_id is None or type(call_id) is str):
            call = _alloc(Call)  # as in _begin
            call.registry = self
            call.tool = entry.tool
            call.arguments = arguments
            call.context = _EMPTY
            call._id = call_id
            call.started = _perf()
            call.attempt = 1
            call.ran = False
            call._cancelled_through = 0
            call.result = None
            call.decoded = call.timeout = call._failure = None
            if on_progress is not None:
                call._progress = progress_callback(on_progress)
        else:
            try:
                call = self._new_call(entry, arguments, context, call_id, idempotency_key, on_progress, _perf())
            except (ToolError, _Unreportable):  # (an async def on_progress: the caller's TypeError)
                raise
            except Exception as exc:
                raise _internal(exc, name) from exc
        tool = call.tool
        if tool.is_async:
            self._refuse_running_loop(call)
        try:
            steps = self._attempts(call, plan, None if tool.is_async else tool.fn)
            step = next(steps, _DONE)
            if step is not _DONE:  # a call that goes well is one step, taken here
                self._drive(call, steps, step, tool)
        except ToolError:
            raise
        except Exception as exc:
            raise _internal(exc, name) from exc
        value = call.result
        if value is _FAILED:
            raise _failure(call)
        return value

    @_shared
    async def acall(
        self,
        /,
        name: str,
        arguments: Any = None,
        *,
        context: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        idempotency_key: str | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Like :meth:`call`, awaited: async tools run on the loop, sync tools in a worker thread.

        Cancelling the awaiting task cancels the call: an async tool is cancelled, a sync tool
        sees ``call.cancelled``, and plugins release what the call held. A ``CancelledError``
        while the task is not being cancelled (something another task cancelled)
        is a failure as under :meth:`call`: the tool's
        ``ToolExecutionError``, or, from a hook's :class:`Await`, that hook's ``PluginError``.

        ``ContextVar`` writes of a tool reach the caller only where the tool runs in the
        caller's context: an async tool, or a sync one declared ``blocking=False`` (without a
        timeout), under ``acall``/``atry_call`` (in the awaiting task); a sync tool under
        ``call``/``try_call`` (no timeout, or timeout mode ``none``). Elsewhere the tool runs in
        a copy and its writes stay there: a sync tool under ``acall`` (a worker thread), an
        async one under ``call`` (a new event loop), ``thread``/``process`` timeout mode.
        """
        try:
            call, plan = self._begin(name, arguments, context, call_id, idempotency_key, on_progress, _perf())
            value = await self._adrive(call, plan)
        except (ToolError, _Unreportable):  # as in call
            raise
        except Exception as exc:
            raise _internal(exc, name) from exc
        if value is _FAILED:
            raise _failure(call)
        return value

    @_shared
    def try_call(
        self,
        /,
        name: str,
        arguments: Any = None,
        *,
        context: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        idempotency_key: str | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> CallResult:
        """Like :meth:`call`, but every error comes back in a :class:`CallResult`: it never raises."""
        started = _perf()
        call: Call | None = None
        try:
            call, plan = self._begin(name, arguments, context, call_id, idempotency_key, on_progress, started)
        except ToolError as err:
            return _result(None, None, err, name, call_id, started)
        except _Unreportable:  # the caller's TypeError (an async def on_progress), raised as call raises it
            raise
        except Exception as exc:
            return _result(None, None, _internal(exc, name), name, call_id, started)
        tool = call.tool
        try:
            if tool.is_async:
                self._refuse_running_loop(call)
            steps = self._attempts(call, plan, None if tool.is_async else tool.fn)
            step = next(steps, _DONE)
            if step is not _DONE:  # as in call
                self._drive(call, steps, step, tool)
        except ToolError as err:
            return _result(call, None, err, tool.name, call_id, started)
        except Exception as exc:
            return _result(call, None, _internal(exc, name), tool.name, call_id, started)
        value = call.result
        if value is _FAILED:
            return _result(call, None, _failure(call), tool.name, call_id, started)
        ident = call._id
        if ident is None:  # what Call.call_id does, without the property's way from C into Python
            ident = call._id = new_call_id()
        return _new_result(
            CallResult,
            (
                True,
                value,
                None,
                tool.name,
                ident,
                _perf() - started,
                call.attempt if call.ran else call.attempts,
                call.ran or call.attempt > 1,
            ),  # as _result
        )  # as _result

    @_shared
    async def atry_call(
        self,
        /,
        name: str,
        arguments: Any = None,
        *,
        context: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        idempotency_key: str | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> CallResult:
        """The awaitable :meth:`try_call`: never raises (cancelling the task still cancels it)."""
        started = _perf()
        try:
            call, plan = self._begin(name, arguments, context, call_id, idempotency_key, on_progress, started)
        except ToolError as err:
            return _result(None, None, err, name, call_id, started)
        except _Unreportable:  # the caller's TypeError (an async def on_progress), raised as call raises it
            raise
        except Exception as exc:
            return _result(None, None, _internal(exc, name), name, call_id, started)
        tool = call.tool  # as in try_call: the result names the tool looked up
        try:
            value = await self._adrive(call, plan)
        except ToolError as err:
            return _result(call, None, err, tool.name, call_id, started)
        except Exception as exc:
            return _result(call, None, _internal(exc, name), tool.name, call_id, started)
        if value is _FAILED:
            return _result(call, None, _failure(call), tool.name, call_id, started)
        return _result(call, value, None, tool.name, call_id, started)

    # The pipeline, written once: `_attempts` is the whole call as steps; `_drive` and `_adrive`
    # run the tool and do the waiting, one blocking and one awaiting.

    def _attempts(self, call: Call, plan: ToolPlan, run: Callable[..., Any] | None) -> Generator[Step, None, None]:
        """The whole call as steps, for a driver to carry out.

        ``run`` is the tool's function when the driver would only call it (a sync tool under
        ``call``, a non-blocking one under ``acall``): then, with no timeout set, the tool runs
        here, and a call that goes well is a single step of its driver. Otherwise this yields
        keyword arguments to run the tool with (the driver puts its value in ``call.result``,
        or throws its exception in). It also yields seconds to sleep, an :class:`Await` to
        fetch, and what a tool run here raised that is not an ``Exception`` nor a ``SystemExit``
        (which is the tool's failure) (``KeyboardInterrupt``, ``asyncio.CancelledError``, ...), for the driver to raise as if
        the tool had run there, cancelling the call (``_drive`` throws a ``CancelledError`` back
        in as the tool's failure: nothing cancels a blocking caller). Returns with the
        call's value in ``call.result``, or with its error in ``call._failure`` (which the
        caller raises, or returns in a ``CallResult``; returning it, not raising it through
        every frame, is most of what a refusal would cost).
        """
        tool = call.tool
        try:  # (no cost until raised) an on_error hook's BaseException: the cancel pass, then it is raised
            try:  # decode, pre-validate, check: errors here are translated by on_error, never retried
                if type(call.arguments) is not dict:
                    self._decode(call)
                if plan.pre_validate:
                    for hook in plan.pre_validate:
                        outcome = hook(call)
                        if outcome is not None:  # a refusal is raised: a returned one would let the arguments through
                            call.tool = tool  # (the one looked up: what the error names)
                            raise _bad_answer(call, plan.plugin_of(hook), outcome, _PRE_VALIDATE)
                    if type(call.arguments) is not dict:  # (_refuse names the hook that set it)
                        raise TypeError(f"pre_validate left arguments of type {type(call.arguments).__name__}, not a dict")
                kwargs = call.arguments
                if tool.accepts_any:
                    if not tool.required <= kwargs.keys() or not all(type(k) is str for k in kwargs):
                        check_signature(kwargs, tool.accepted, tool.required, True)
                elif not (
                    tool.accepted.issuperset(kwargs) and (len(kwargs) == len(tool.accepted) or tool.required <= kwargs.keys())
                ):
                    check_signature(kwargs, tool.accepted, tool.required, False)  # unknown or missing names
                if tool.converters or tool.call_param:
                    kwargs = self._convert(call, tool, kwargs)
            except Exception as exc:  # (a sub-generator: every local here makes every call's generator larger)
                call.tool = tool  # what on_error hooks read and errors name: the tool looked up, whatever a hook assigned
                call._failure = yield from self._refuse(call, plan, exc)
                call.result = _FAILED
                return
            pre_call, post_call = plan.pre_call, plan.post_call
            failure: Any  # a ToolError a pre_call hook returned
            while True:
                while True:  # one attempt: a call that goes well returns; a failure leaves (`break`) with on_error's decision
                    try:
                        outcome = None
                        for hook in pre_call:  # the first answer wins
                            outcome = hook(call)
                            if outcome is not None:
                                if type(outcome) is Await:
                                    outcome = yield from _resolve(plan, hook, outcome)
                                    if outcome is None:
                                        continue
                                break
                        if outcome is None:
                            if call._cancelled_through and call.cancelled:  # before its tool started: it never starts
                                raise ToolCancelled.of(call)
                            try:
                                if run is not None and call.timeout is None:
                                    call.ran = True
                                    call.result = run(**kwargs)
                                else:
                                    yield kwargs
                                if type(call.result) is CoroutineType and not tool.is_async:
                                    raise _unawaited(call)
                            except ToolError:
                                raise
                            except (Exception, SystemExit) as exc:  # a tool's sys.exit() (argparse) is its failure
                                raise call_failure(call, exc, tool) from exc
                            except BaseException as stop:  # raised where the driver would have run it; a cancel is thrown in here
                                yield stop
                        elif type(outcome) is Outcome and outcome.error is None:
                            call.result = outcome.value
                        else:  # refused: a ToolError returned (alone or in an Outcome) is taken as if raised here, for less
                            failure = outcome.error if type(outcome) is Outcome else outcome
                            if not isinstance(failure, ToolError):
                                call.tool = tool
                                raise _bad_answer(call, plan.plugin_of(hook), outcome, _PRE_CALL)
                            decision = None  # on_error runs below: no exception is being handled
                            break
                        for hook in post_call:
                            outcome = hook(call)
                            if outcome is not None:  # most answer None: one test
                                if type(outcome) is not Await:  # a refusal is raised: a returned one would let the result out
                                    call.tool = tool
                                    raise _bad_answer(call, plan.plugin_of(hook), outcome, _POST_CALL)
                                if (yield from _resolve(plan, hook, outcome, True)) is not None:  # its answer: None
                                    call.tool = tool
                                    raise _bad_answer(call, plan.plugin_of(hook), outcome.value, _POST_CALL_AWAIT)
                        return
                    except Exception as exc:  # on_error runs in this block: its hooks see the error in sys.exc_info()
                        call.tool = tool  # as above
                        decision = self._failed(call, plan, exc)
                        if type(decision) is _Paused:
                            decision = yield from self._settled(call, plan, decision)
                        break
                    except BaseException:  # a hook's KeyboardInterrupt or SystemExit (the tool's came as a step)
                        if call._closing:  # the core closed the steps (the caller interrupted a cancelled call's unwinding)
                            raise
                        call.tool = tool  # the call is cancelled (a hook's GeneratorExit too): on_error releases what it held
                        failure = yield from self._interrupted(call, plan)
                        if failure is not None:
                            raise failure from None  # an on_error hook's, raised in the cancel pass
                        raise
                if decision is None:
                    call.tool = tool
                    decision = self._failed(call, plan, failure)
                    if type(decision) is _Paused:
                        decision = yield from self._settled(call, plan, decision)
                if isinstance(decision, ToolError):
                    call._failure, call.result = decision, _FAILED  # its cause is set: the caller raises or returns it
                    del outcome, decision  # no frame of its traceback keeps it: no reference cycle
                    return
                if type(decision) is Outcome:
                    call.result = decision.value
                    return
                assert type(decision) is Retry
                # cancel() calls before the wait (an attempt cancelled at its timeout counts before it), kept in
                # `outcome`, done with: one more local would make every call's generator 8 bytes larger
                outcome = call._cancels
                try:
                    yield decision.delay if decision.delay > 0.0 else 0.0  # NaN too: a retry at once
                    if call._cancels != outcome:  # cancelled while it waited: no attempt starts
                        raise ToolCancelled.of(call)
                except ToolCancelled as exc:
                    call.tool = tool
                    decision = self._failed(call, plan, exc)  # the error to raise, unless an on_error hook awaits
                    if isinstance(decision, ToolError):
                        raise decision  # noqa: B904 - its cause is set
                    if isinstance(decision, _Paused):
                        yield from self._resume(call, plan, decision)
                    raise
                _next_attempt(call)
        except _Interrupted as stop:  # (its locals reused: each one more makes every call's generator larger)
            failure = yield from self._interrupted(call, plan, stop.after, stop.decision)
            if failure is None:
                failure = stop.exc
        raise failure  # raised outside the handler: its context stays its own

    def _interrupted(
        self, call: Call, plan: ToolPlan, after: int = -1, decision: Retry | Outcome | None = None
    ) -> Generator[Step, None, BaseException | None]:
        """The cancel pass of a call a hook's ``BaseException`` ends: on_error hooks see :class:`ToolCancelled`
        (those after position ``after``, see ``_Interrupted``; with ``decision``, the one already taken, the
        after-decision hooks run too), their :class:`Await` answers fetched as any (awaited under ``acall``).
        Returns what an on_error hook raised in this pass that is no ``Exception`` (the last), else None."""
        call.cancel()
        err = self._as_tool_error(call, plan, ToolCancelled.of(call))
        raised = None
        while True:
            paused = None if after < 0 and decision is None else _Paused(after, cast(Await, None), decision, None)
            if call.decision is not None:  # no decision stands in a cancel pass: the hooks release what one kept
                call.decision = None
            try:
                verdict = self._on_error(call, plan, err, paused)
                if type(verdict) is _Paused:
                    verdict.err = verdict.exc = err
                    yield from self._resume(call, plan, verdict)
                return raised
            except _Interrupted as again:  # the hooks after it hear of the cancel all the same
                after, decision, raised = again.after, again.decision, again.exc

    def _settled(self, call: Call, plan: ToolPlan, paused: _Paused) -> Generator[Step, None, Retry | Outcome | ToolError]:
        """``paused``'s on-error round carried to its end: the decision to act on, or the error to raise."""
        return self._settle(call, plan, paused.err, paused.exc, (yield from self._resume(call, plan, paused)))

    def _refuse(self, call: Call, plan: ToolPlan, exc: Exception) -> Generator[Step, None, ToolError]:
        """Arguments refused before admission: the error, as on_error hooks translate it (never a retry)."""
        if plan.pre_validate and not isinstance(exc, ToolError):
            if type(call.arguments) is dict:
                exc = _key_error(call, exc)  # a caller's key that is no string, which a pre_validate hook failed on
            else:  # a hook replaced them with no dict, and a later one (or the core) failed on it
                exc = _not_a_dict(call, plan, exc)
        err = self._as_tool_error(call, plan, exc)
        call._refusing = True
        verdict = self._on_error(call, plan, err)
        if type(verdict) is _Paused:
            verdict.err, verdict.exc = err, exc  # (what ``_resume`` reads, as ``_failed`` sets it)
            verdict = yield from self._resume(call, plan, verdict)
        if type(verdict) is Outcome and verdict.error is not None:
            verdict.error.__cause__ = err
            return verdict.error
        if err is not exc:
            err.__cause__ = exc
        return err

    def _decode(self, call: Call) -> None:
        raw = call.arguments
        try:
            call.arguments = decode_arguments(raw, self.limits)
        except ToolArgumentError as err:  # (no cost until raised)
            # invalid JSON text: its excerpt is masked by the validation plugin's redactor (its extra_secret_keys)
            secrets = (
                getattr(self.plugins.get("validation"), "argument_secrets", None) if err.problems[0].keyword == "json" else None
            )
            if secrets is None:
                raise
        else:
            if isinstance(raw, (str, bytes, bytearray, memoryview)) and plain_json(raw, self.limits):
                call.decoded = call.arguments
            return
        decode_arguments(raw, self.limits, secrets)  # refused again (out of the handler: the first refusal is not its context)
        raise AssertionError("unreachable: the same text is refused the same way")  # pragma: no cover

    # `next(steps, _DONE)` instead of `send`: a generator that returns None to `next` with a
    # default raises no StopIteration, which is most of what driving a generator costs.

    def _drive(self, call: Call, steps: Generator[Step, None, None], step: Step, tool: Tool) -> None:
        """Carry out ``step`` and the steps after it (``call`` and ``try_call`` take the first). ``tool``
        is the one looked up: what runs (as in ``_adrive``), whatever a hook does to ``call.tool``."""
        while step is not _DONE:
            try:
                if type(step) is dict:
                    call.ran = True
                    try:
                        call.result = self._invoke(call, tool, step)
                    except (Exception, SystemExit) as exc:  # the tool's: _attempts makes it its failure
                        step = _throw(steps, exc)
                    else:
                        step = next(steps, _DONE)
                elif type(step) is Await:
                    try:
                        step.value = step.sync()
                    except (Exception, asyncio.CancelledError) as exc:  # nothing cancels a blocking caller: the hook's failure
                        step = _throw(steps, exc)
                    else:
                        step = next(steps, _DONE)
                elif isinstance(step, BaseException):
                    raise step
                else:  # a Retry's wait (never on the success path), cut to 1e9 s (31 years): time.sleep fails past ~9.2e9
                    self.clock.sleep(step if not step > 1e9 else 1e9)  # type: ignore[operator,arg-type]
                    step = next(steps, _DONE)
            except asyncio.CancelledError as exc:  # nothing cancels a blocking caller: the tool's own failure
                failure = call_failure(call, exc, tool)
                step = _throw(steps, failure)
            except BaseException:  # KeyboardInterrupt, a hook's SystemExit: the plugins release what the call held
                _cancel(steps, call)
                raise

    async def _adrive(self, call: Call, plan: ToolPlan) -> Any:
        tool = call.tool
        steps = self._attempts(call, plan, None if tool.is_async or tool.blocking else tool.fn)
        direct = tool.fn if tool.is_async else None
        step = next(steps, _DONE)
        while step is not _DONE:
            try:
                if type(step) is dict:
                    call.ran = True
                    try:
                        if direct is not None and call.timeout is None:
                            call.result = await direct(**step)
                        else:
                            call.result = await self._ainvoke(call, tool, step)
                    except (Exception, SystemExit) as exc:  # as in _drive
                        step = _throw(steps, exc)
                    except asyncio.CancelledError as exc:
                        step = _throw(steps, _own_cancel(call, tool, exc))
                    else:
                        step = next(steps, _DONE)
                elif type(step) is Await:
                    try:
                        step.value = await step.aio()
                    except Exception as exc:
                        step = _throw(steps, exc)
                    except asyncio.CancelledError as exc:  # the task's cancellation, or the hook's failure (as in _drive)
                        step = _throw(steps, _not_cancelling(exc))
                    else:
                        step = next(steps, _DONE)
                elif isinstance(step, BaseException):
                    if not isinstance(step, asyncio.CancelledError):
                        raise step
                    step = _throw(steps, _own_cancel(call, tool, step))  # from a tool run in the steps
                else:  # a Retry's wait, cut as in _drive
                    await self.clock.asleep(step if not step > 1e9 else 1e9)  # type: ignore[operator,arg-type]
                    step = next(steps, _DONE)
            except asyncio.CancelledError:
                await _acancel(steps, call)
                raise
            except BaseException:  # KeyboardInterrupt, a hook's SystemExit, the coroutine closed: as in _drive
                _cancel(steps, call)
                raise
        return call.result

    def _direct(self, tool: Tool, arguments: Any, call_id: str | None) -> Any:
        """A tool no hook applies to: check the arguments and call it, with the pipeline's errors."""
        try:
            args = arguments if type(arguments) is dict else decode_arguments(arguments, self.limits)
            accepted = tool.accepted  # a simple tool takes no **kwargs
            if not (accepted.issuperset(args) and (len(args) == len(accepted) or tool.required <= args.keys())):
                check_signature(args, accepted, tool.required, False)
        except ToolArgumentError as err:
            err.with_tool(tool.name)
            if err.call_id is None:
                err.call_id = call_id if call_id is not None else new_call_id()
            raise
        try:
            value = tool.fn(**args)
            if type(value) is CoroutineType:
                raise unawaited(value)
            return value
        except ToolError as err:  # named and numbered as _as_tool_error does
            if isinstance(err, ToolArgumentError):
                err.with_tool(tool.name)
            elif err.tool is None:
                err.tool = tool.name
            if err.call_id is None:
                err.call_id = call_id if call_id is not None else new_call_id()
            raise
        except (Exception, SystemExit) as exc:  # as in _attempts
            raise tool_failure(exc, tool.name, call_id if call_id is not None else new_call_id(), args) from exc
        except asyncio.CancelledError as exc:  # as in _drive: nothing cancels a blocking caller, so it is the tool's
            raise tool_failure(exc, tool.name, call_id if call_id is not None else new_call_id(), args) from exc

    @staticmethod
    def _convert(call: Call, tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
        if tool.call_param is not None and tool.call_param in args:  # a **kwargs tool: the call is not the model's to set
            from ._arguments import call_param_sent

            raise call_param_sent(tool.call_param, tool.name)
        kwargs = dict(args)
        for key, convert in tool.converters.items():
            if key in kwargs:
                try:
                    kwargs[key] = convert(kwargs[key])
                except ToolError:
                    raise
                except Exception as exc:  # its text masked, or only its type under a secret key (as argument errors show values)
                    from ._redact import hidden_from_model

                    shown = type(exc).__name__ if hidden_from_model(key) else exception_text(exc)
                    raise ToolArgumentError(
                        [ArgumentProblem(f"$.{key}", f"cannot be converted: {shown}", "type")],
                        tool=tool.name,
                    ) from exc
        if tool.call_param is not None:
            kwargs[tool.call_param] = call
        return kwargs

    def _failed(self, call: Call, plan: ToolPlan, exc: Exception) -> Retry | Outcome | _Paused | ToolError:
        """Run on_error for a failed attempt: the decision to act on, or the final error (to raise).

        Returns ``_Paused`` when an on_error hook answered with an :class:`Await`: the
        generator resolves it (``_resume``), then ``_settle`` acts on the decision.
        """
        err = self._as_tool_error(call, plan, exc)
        decision = self._on_error(call, plan, err)
        if decision is None:  # the common case: the error stands (what ``_settle`` would answer)
            if err is not exc:
                err.__cause__ = exc
            return err
        if isinstance(decision, _Paused):
            decision.err, decision.exc = err, exc
            return decision
        return self._settle(call, plan, err, exc, decision)

    @staticmethod
    def _settle(
        call: Call, plan: ToolPlan, err: ToolError, exc: BaseException, decision: Retry | Outcome | None
    ) -> Retry | Outcome | ToolError:
        """The decision to act on, or the error to raise (its cause set as ``raise ... from`` would)."""
        if decision is None or isinstance(err, ToolCancelled):
            if err is not exc:
                err.__cause__ = exc
            return err
        if type(decision) is Outcome and decision.error is not None:
            decision.error.__cause__ = err
            return decision.error
        return decision  # a recovery, or a Retry: ``_on_error`` takes no other answer (``_not_an_answer``)

    def _as_tool_error(self, call: Call, plan: ToolPlan, exc: BaseException) -> ToolError:
        if isinstance(exc, ToolError):
            err = exc
        else:
            owner = plan.owner_of(exc)
            who = f"plugin '{owner}'" if owner else "a plugin"
            err = PluginError(f"Internal error in {who} while calling '{call.tool.name}': {exception_text(exc)}", plugin=owner)
            err.__cause__ = exc
        if isinstance(err, ToolArgumentError):
            err.with_tool(call.tool.name)
        elif err.tool is None:
            err.tool = call.tool.name
        if err.call_id is None:
            ident = call._id
            if ident is None:  # as Call.call_id makes it (not through the property: no way from C into Python)
                ident = call._id = new_call_id()
            err.call_id = ident
        return err

    def _on_error(
        self, call: Call, plan: ToolPlan, err: ToolError, paused: _Paused | None = None
    ) -> Retry | Outcome | _Paused | None:
        """Every on_error hook in order (from after ``paused.index`` when resuming); the decision."""
        hooks = plan.on_error
        if paused is None:
            start, decision, broken = 0, None, None
            if call.decision is not None:  # a retried call's last decision (writing None would make a __dict__)
                call.decision = None
        else:
            start, decision, broken = paused.index + 1, paused.decision, paused.broken
            hooks = hooks[start:]
        index = start - 1
        for hook in hooks:  # (not range(): on CPython 3.11 making one costs more than counting here)
            index += 1
            try:
                answer = hook(call, err)
            except Exception as exc:
                if broken is None:
                    broken = _broken_on_error(call, plan.on_error_names[index], exc)
                    decision = _failed_decision(call, err, decision, broken)
                continue
            except BaseException as exc:  # Ctrl-C, a hook's SystemExit: the call is cancelled, and the later hooks release
                # in a cancel pass of their own, which _attempts runs (a decision kept things: all hear, the
                # after-decision hooks too; in a cancel pass, those after this one)
                cancelled = decision is None or isinstance(err, ToolCancelled)
                raise _Interrupted(index if cancelled else -1, decision, exc) from None
            if answer is not None:
                if type(answer) is Await:
                    return _Paused(index, answer, decision, broken)
                if _not_an_answer(answer):
                    if broken is None:
                        broken = _bad_answer(call, plan.on_error_names[index], answer, _ON_ERROR)
                        decision = _failed_decision(call, err, decision, broken)
                elif decision is None:
                    try:
                        taken = not _no_decision(call, answer, err)
                    except PluginError as exc:  # call.total_deadline no number: the fault of the hook that set it
                        broken = broken or exc
                        decision = _failed_decision(call, err, decision, broken)
                        continue
                    if taken:
                        decision = call.decision = answer
        if broken is not None and decision is not None:  # a hook failed: so does the call, whatever was decided
            decision = call.decision = Outcome.failure(broken)
        if decision is not None and plan.on_decision:  # the hooks that act only on a decision, last
            first = len(plan.on_error)  # their positions follow the others' (a cancel pass resumes after one)
            index = start - 1 if start > first else first - 1
            for hook, name in plan.on_decision[index - first + 1 :]:
                index += 1
                try:
                    hook(call, err)
                except Exception as exc:
                    broken = broken or _broken_on_error(call, name, exc)
                except BaseException as exc:  # as above; every hook kept what the decision needs: they all hear of it
                    raise _Interrupted(index if isinstance(err, ToolCancelled) else -1, decision, exc) from None
            if type(decision) is Outcome and type(call.decision) is Outcome:
                decision = call.decision  # (replaced by another Outcome: the output limit bounded a recovered answer)
        if broken is not None:
            return Outcome.failure(broken)
        return decision

    def _resume(self, call: Call, plan: ToolPlan, paused: _Paused) -> Generator[Step, None, Retry | Outcome | None]:
        """Resolve on_error hooks' :class:`Await` answers in turn, running the later hooks after each."""
        err = paused.err
        decision: Retry | Outcome | _Paused | None = paused
        while type(decision) is _Paused:
            paused = decision
            try:
                yield paused.pending
            except ToolCancelled:  # the caller stopped waiting: the later hooks still run
                answer = None
            except (Exception, asyncio.CancelledError) as exc:  # as in _resolve
                if paused.broken is None:
                    paused.broken = _broken_on_error(call, plan.on_error_names[paused.index], exc)
                    paused.decision = _failed_decision(call, err, paused.decision, paused.broken)
                answer = None
            else:
                answer = paused.pending.value
            if answer is not None and _not_an_answer(answer):
                if paused.broken is None:
                    owner = plan.on_error_names[paused.index]
                    paused.broken = _bad_answer(call, owner, answer, _ON_ERROR)
                    paused.decision = _failed_decision(call, err, paused.decision, paused.broken)
            elif answer is not None and paused.decision is None:
                try:
                    if not _no_decision(call, answer, err):
                        paused.decision = call.decision = answer
                except PluginError as exc:  # as in _on_error
                    paused.broken = paused.broken or exc
                    paused.decision = _failed_decision(call, err, paused.decision, paused.broken)
            decision = self._on_error(call, plan, err, paused)
        assert not isinstance(decision, _Paused)
        return decision

    def _invoke(self, call: Call, tool: Tool, kwargs: dict[str, Any]) -> Any:
        if tool.is_async:
            return asyncio.run(self._await_tool(call, tool, kwargs))
        timeout = call.timeout
        if timeout is None:
            return tool.fn(**kwargs)
        if call.runner is None:  # no runner: mode none, the deadline advisory (only the value is checked)
            if type(timeout) is not float or not timeout > 0.0:
                _check_timeout(call, tool, timeout)
            return tool.fn(**kwargs)
        left = _time_left(call, tool)  # the hooks after the timeout plugin's took some
        call.tool = tool  # the runner reads the tool's options (process mode's memory_limit): the one looked up
        try:  # (no cost until raised)
            return call.runner.run(call, tool.fn, kwargs, left)
        except (AttributeError, TypeError) as exc:
            _check_runner(call, tool, "run", exc)
            raise

    async def _ainvoke(self, call: Call, tool: Tool, kwargs: dict[str, Any]) -> Any:
        if tool.is_async:
            return await self._await_tool(call, tool, kwargs)
        timeout = call.timeout
        if timeout is not None:
            if call.runner is not None:
                left = _time_left(call, tool)
                call.tool = tool  # as in _invoke
                try:  # (no cost until raised)
                    pending: Any = call.runner.arun(call, tool.fn, kwargs, left)
                except (AttributeError, TypeError) as exc:
                    _check_runner(call, tool, "arun", exc)
                    raise
                try:
                    return await pending
                except TypeError as exc:  # the tool's (one through a future has no frame of arun), unless not awaitable
                    if not inspect.isawaitable(pending):
                        _check_runner(call, tool, "arun", exc, awaitable=False)
                    raise
            if type(timeout) is not float or not timeout > 0.0:  # mode none: as in _invoke
                _check_timeout(call, tool, timeout)
        if not tool.blocking:  # declared quick: no thread hop
            return tool.fn(**kwargs)
        lingering = Lingering()
        try:
            return await asyncio.to_thread(_in_thread, call, tool, kwargs, lingering)
        except asyncio.CancelledError:
            if lingering.abandon():  # still queued for a worker thread: it never runs, nothing lingers
                call.ran = False
            else:  # the thread runs on: plugins may hold what the call took until it returns
                call.lingering = lingering
            raise

    @staticmethod
    async def _await_tool(call: Call, tool: Tool, kwargs: dict[str, Any]) -> Any:
        """Await an async tool; with a timeout, cancel it at the deadline.

        A tool that swallows the cancellation and returns (or fails) after the deadline has timed
        out all the same: its late outcome is dropped; so has one that blocks the loop past the
        deadline (no ``await`` in it, so no cancellation could reach it) and then ends. One that
        never ends is awaited for ever (cancelling a coroutine needs its cooperation).
        """
        if call.timeout is None:
            return await tool.fn(**kwargs)
        timeout = _time_left(call, tool)
        # (the deadline on the clock the loop reads: a tool that blocks the loop past it keeps its timer from running)
        end = _monotonic() + timeout
        scope = _timeout_cm(timeout)
        try:
            async with scope:
                value = await tool.fn(**kwargs)
        except Exception:  # TimeoutError too: the tool's own one, unless the deadline came
            if not scope.expired() and _monotonic() < end:
                raise
            # the tool swallowed its cancellation (or blocked past it) and failed after the deadline: a timeout all the same
        else:
            if _monotonic() < end and not scope.expired():
                return value
            del value  # the tool returned after the deadline (it swallowed its cancellation, or blocked): too late
        call.cancel()
        raise ToolTimeout(call.timeout, tool=tool.name, call_id=call.call_id) from None

    def __repr__(self) -> str:
        default = " default" if self is ToolRegistry._current else ""
        return f"<ToolRegistry{default} tools={len(self._tools)} plugins={self.plugins.names()}>"


_DONE: Any = object()
#: ``call.result`` of a call that ended in ``call._failure`` (one identity test tells a failure).
_FAILED: Any = object()
#: ``Call(...)`` is ``_alloc(Call)`` then ``Call.__init__``; called from Python, ``__init__`` skips a C frame.
_alloc = object.__new__


#: The methods that act on the default registry when called on the class (a descriptor each,
#: so that ``super().call(...)`` in a subclass binds its instance). A class-level read goes to
#: the property of the same name on :class:`_SharedType`, which wins over the class's own.
_SHARED: dict[str, _shared[Any, Any]] = {n: a for n, a in vars(ToolRegistry).items() if isinstance(a, _shared)}
for _name, _attr in _SHARED.items():
    setattr(_SharedType, _name, property(attrgetter(f"_current.{_name}"), doc=_attr.__doc__))


def _take_default_lock() -> None:
    """The default registry's lock, waited for as long as discovery is (a plugin's import, which
    runs under it while the default registry is set up, may be waiting for this thread)."""
    if not ToolRegistry._default_lock.acquire(timeout=_DISCOVERY_WAIT):
        raise PluginError(
            f"The default registry is being set up in another thread and was not ready within {_DISCOVERY_WAIT:g} s: "
            "its plugins are loading (a plugin's import or factory may be waiting for this thread)."
        )


def _failure(call: Call) -> ToolError:
    """The call's final error, taken off the call (so the error's traceback holds no cycle through it)."""
    err = call._failure
    assert err is not None
    call._failure = call.result = None
    return err


def _throw(steps: Generator[Step, None, None], exc: BaseException) -> Any:
    """The step after a failed run (the generator handles the failure), or ``_DONE``."""
    try:
        return steps.throw(exc)
    except StopIteration:
        return _DONE


def _in_thread(call: Call, tool: Tool, kwargs: dict[str, Any], lingering: Lingering) -> Any:
    """``tool.fn(**kwargs)`` in a worker thread of ``acall``; a ``StopIteration`` comes back as a ``RuntimeError``,
    a ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``, ``GeneratorExit``) as the tool's
    failure: a signal reaches the main thread only, so it is the tool's own, as in a timeout worker.

    An asyncio future cannot carry a ``StopIteration`` (setting it fails in the loop's
    callback), so the ``await`` would never end. ``lingering`` is told when ``fn`` returns, and what it did;
    ``fn`` does not start once ``lingering`` was abandoned (its caller cancelled while it was queued).
    """
    if not lingering.start():  # its caller gave it up while it waited for this thread
        return None
    ok, value = False, None
    try:
        value = tool.fn(**kwargs)
        if type(value) is CoroutineType:  # its failure here: the lingering call's outcome too
            raise unawaited(value)
        ok = True
        return value
    except StopIteration as exc:
        value = RuntimeError("the tool raised StopIteration, which an awaited call cannot carry")
        raise value from exc
    except BaseException as exc:
        value = exc
        if isinstance(exc, Exception):
            raise
        raise call_failure(call, exc, tool) from exc
    finally:
        lingering.finished(ok, value)
        del value, lingering  # an exception's traceback holds this frame: no cycle through it


def _unawaited(call: Call) -> TypeError:
    """:func:`unawaited` for the coroutine a sync tool returned into ``call.result`` (which holds it no more)."""
    value, call.result = call.result, None
    return unawaited(value)


def _time_left(call: Call, tool: Tool) -> float:
    """The attempt's timeout, bounded by what is left of the call's total timeout (``call.total_deadline``,
    on the registry's clock): the hooks after the timeout plugin's may have taken some of it. None left:
    :class:`ToolTimeout`, the tool not started (``call.ran`` False), as for a timeout not above 0 (NaN
    too); one that is no number is the :class:`PluginError` of the hook that set it, not the tool's failure.
    ``tool`` is the one looked up (errors name it, whatever a hook assigned to ``call.tool``)."""
    timeout = call.timeout
    assert timeout is not None
    if type(timeout) is not float or not timeout > 0.0:  # (most are a positive float: two tests)
        timeout = _check_timeout(call, tool, timeout)
    deadline = call.total_deadline
    if deadline is None:
        return timeout
    if type(deadline) is not float:
        try:
            deadline = clock_value(call, "total_deadline", tool)
        except PluginError:
            call.ran = False  # (raised before the tool starts)
            raise
    left = deadline - call.registry.clock.now()
    if left <= 0.0:
        call.ran = False
        raise ToolTimeout(timeout, tool=tool.name, call_id=call.call_id)
    return left if left < timeout else timeout


def _not_a_dict(call: Call, plan: ToolPlan, exc: Exception) -> Exception:
    """The :class:`PluginError` for ``call.arguments`` that a pre_validate hook replaced with no dict (the
    caller's were decoded to one before the hooks), seen only once ``exc`` came of it: a later hook failed on
    it, or the core's check after the last one (no check after each hook: a call that goes well pays for
    none). It names the plugin whose hook set them when only one hook ran before the one that failed, else
    those that may have; ``exc`` is its cause. ``exc`` itself when the first hook failed (its own doing)."""
    names = [name for name in map(plan.plugin_of, plan.pre_validate) if name is not None]
    failed = plan.owner_of(exc)  # None: no hook failed (the core's check after the last)
    if failed is not None:
        if failed not in names:
            return exc
        names = names[: names.index(failed)]
        if not names:
            return exc
    after = "" if failed is None else f" (plugin '{failed}', after it, failed on them: {exception_text(exc)})"
    owner = names[0] if len(names) == 1 else None
    listed = "' or '".join(names)
    who = f"The pre_validate hook of plugin '{owner}'" if owner else f"A pre_validate hook (of plugin '{listed}')"
    err = PluginError(
        f"{who} set call.arguments to {_a(type(call.arguments).__name__)} while calling '{call.tool.name}'; "
        f"expected a dict{after}",
        plugin=owner,
        tool=call.tool.name,
        call_id=call.call_id,
    )
    err.__cause__ = exc
    return err


def _key_error(call: Call, exc: Exception) -> Exception:
    """The caller's error for arguments with a key that is no string (as the signature check words it), which a
    pre_validate hook failed on (they are checked after those hooks, at no cost to a call that goes well); else ``exc``."""
    args, tool = call.arguments, call.tool
    if all(type(key) is str for key in args):
        return exc
    try:
        check_signature(args, tool.accepted, tool.required, tool.accepts_any)
    except ToolArgumentError as err:
        err.__cause__ = exc
        return err
    return exc  # pragma: no cover - a key that is no string is always refused


def _check_timeout(call: Call, tool: Tool, timeout: Any) -> float:
    """A ``call.timeout`` that is not a positive float, as the float of seconds it stands for (written back to
    ``call.timeout``, so a runner and the errors only ever see a float): a positive int (numpy's numbers, a
    ``Fraction`` too) is taken; one not above 0 (NaN too) times out; no number, or one no float holds
    (``10**400``), is the fault of the pre_call hook that set it, the tool not started."""
    seconds: float | None = None
    if not isinstance(timeout, bool) and isinstance(timeout, Real):
        try:
            seconds = float(timeout)
        except Exception:  # past a float's range (OverflowError), or a broken __float__
            with contextlib.suppress(Exception):
                seconds = -math.inf if timeout < 0 else None  # a negative one times out, as every negative one
    if seconds is None:
        call.ran = False
        call.tool = tool
        raise _bad_answer(call, None, _no_float(timeout), _TIMEOUT_SET)
    call.timeout = seconds
    if not seconds > 0.0:
        call.ran = False
        raise ToolTimeout(seconds, tool=tool.name, call_id=call.call_id)
    return seconds


def _check_runner(call: Call, tool: Tool, method: str, exc: BaseException, awaitable: bool = True) -> None:
    """After calling ``call.runner.run`` (``method``) raised ``exc``, an ``AttributeError`` or a ``TypeError``:
    the :class:`PluginError` of the pre_call hook that set a ``call.runner`` that cannot be called so (no such
    method; one the call could not bind, a runner class for an instance: ``exc`` raised by the call expression
    itself, not inside it; an ``arun`` whose result is not ``awaitable``), the tool not started (``call.ran``
    False), not the tool's failure; else returns (the runner's own error stands)."""
    runner = call.runner
    traceback = exc.__traceback__
    if awaitable and callable(getattr(runner, method, None)) and (traceback is None or traceback.tb_next is not None):
        return
    call.ran = False
    call.tool = tool
    raise _bad_answer(call, None, runner, _RUNNER_SET) from None


def _next_attempt(call: Call) -> None:
    if call.ran:
        call.attempt += 1
        call.ran = False
    call.decision = None
    call.deadline = call.timeout = None
    call.runner = call.lingering = None  # the last attempt's tool may run on: its plugins took what they need


def _no_decision(call: Call, answer: Any, err: ToolError) -> bool:
    """Whether ``answer`` is not a decision, whichever plugin gave it, so the hooks after it see the
    error stand (and settle what the call held) as the caller will: any answer to a cancellation; a
    :class:`Retry` or a recovering :class:`Outcome` before admission (arguments refused); a
    :class:`Retry` whose wait would end after the call's total timeout (``call.total_deadline``, on
    the registry's clock)."""
    if isinstance(err, ToolCancelled):
        return True
    kind = type(answer)
    if call._refusing:
        return kind is Retry or (kind is Outcome and answer.error is None)
    if kind is not Retry or not answer.delay > 0.0:  # (NaN: no wait, as at the Retry's wait)
        return False
    left = call.remaining(total=True)  # (the retry plugin asks the same, to count what it gave up)
    return left is not None and answer.delay > left


def clock_value(call: Call, field: str, tool: Tool | None = None) -> float:
    """``call.deadline`` or ``call.total_deadline`` (``field``), a value of the registry's clock, as a float (written
    back): one that is no number, or one no float holds, is a :class:`PluginError` (of the hook that set it, which
    the core cannot tell), the tool not started by it: not the tool's failure, nor an internal error. ``tool``: the
    one looked up, which the error names (else ``call.tool``)."""
    value = getattr(call, field)
    if not isinstance(value, bool) and isinstance(value, Real):
        with contextlib.suppress(Exception):  # past a float's range, a broken __float__
            seconds = float(value)
            setattr(call, field, seconds)
            return seconds
    if tool is not None:
        call.tool = tool
    hooks = "pre_call" if field == "deadline" else "pre_validate, pre_call or on_error"
    expected = "a registry.clock.now() value (a number) or None"
    raise _bad_answer(call, None, _no_float(value), (hooks, expected, f"set call.{field} to"))


def _no_float(value: Any) -> Any:
    """A value a hook set where a float belongs, as its error shows it: a string quoted, an int no float holds by
    its size (not its 400 digits)."""
    if type(value) is str:
        return repr(value)
    if type(value) is int:
        return f"~{'-' if value < 0 else ''}1e{int(value.bit_length() * 0.30103)} (an int no float holds)"
    return value


def _own_cancel(call: Call, tool: Tool, exc: asyncio.CancelledError) -> ToolExecutionError:
    """The tool's failure, for a ``CancelledError`` the tool raised while its task was not being
    cancelled (it awaited something another task cancelled); else ``exc`` is raised again, by
    :func:`_not_cancelling`'s rule: the caller cancels."""
    return call_failure(call, _not_cancelling(exc), tool)


def _not_cancelling(exc: asyncio.CancelledError) -> asyncio.CancelledError:
    """``exc``, raised by what the call awaited while its task was not being cancelled (a hook's
    ``Await`` awaited something another task cancelled): a failure like any other; else ``exc`` is
    raised again: the caller cancels (so does one outside a task in a running loop; with no running loop,
    ``asyncio.current_task`` raises)."""
    task = asyncio.current_task()
    if task is None or task.cancelling():
        raise exc
    return exc


def _cancelled(steps: Generator[Step, None, None], call: Call) -> Step:
    call.cancel()
    return steps.throw(ToolCancelled.of(call))


def _advance(move: Callable[..., Step], *args: Any) -> Step | None:
    """The next step of a cancelled call's generator, or None once it has finished."""
    try:
        return move(*args)
    except (StopIteration, ToolError):
        return None


async def _acancel(steps: Generator[Step, None, None], call: Call) -> None:
    """A cancelled ``acall``: tell the plugins and await what they release.

    Before the tool returned, on_error hooks get ``ToolCancelled``; after (a post-call hook's
    ``Await`` was in flight), the later post-call hooks run, so what the tool did is kept. The
    task's cancellation propagates once this returns. Cancelled again meanwhile (a loop
    shutting down), the answer in flight is unknown: the hook gets ``ToolCancelled`` for it
    (the core never repeats it; a plugin's ``round_trip`` may, for a request safe to repeat),
    and the rest is fetched with ``sync()``.
    """
    step = _unwaited(steps, call, _advance(_cancelled, steps, call))
    try:
        while step is not None:
            try:
                step.value = await step.aio()
            except asyncio.CancelledError:
                _finish_sync(steps, call, _advance(steps.throw, ToolCancelled.of(call)))
                return
            except Exception as exc:
                step = _unwaited(steps, call, _advance(steps.throw, exc))
            else:
                step = _unwaited(steps, call, _advance(next, steps))
    finally:
        _close(steps, call)


def _close(steps: Generator[Step, None, Any], call: Call) -> None:
    """End a cancelled call's steps: a hook interrupted then (a second Ctrl-C) gets no cancel pass of its own."""
    call._closing = True
    steps.close()


def _cancel(steps: Generator[Step, None, None], call: Call) -> None:
    """The caller stopped waiting (Ctrl-C): tell the plugins, end the steps; ``Await`` answers via ``sync()``."""
    _finish_sync(steps, call, _advance(_cancelled, steps, call))


def _finish_sync(steps: Generator[Step, None, Any], call: Call, step: Step | None) -> None:
    """Carry the remaining steps of a cancelled call with ``sync()``."""
    try:
        step = _unwaited(steps, call, step)
        while step is not None:
            try:
                step.value = step.sync()
            except Exception as exc:
                step = _unwaited(steps, call, _advance(steps.throw, exc))
            else:
                step = _unwaited(steps, call, _advance(next, steps))
    finally:
        _close(steps, call)


def _unwaited(steps: Generator[Step, None, Any], call: Call, step: Step | None) -> Await | None:
    """A cancelled call's next ``Await`` to fetch, or None once its steps end. The wait before a
    retry (a hook decided one after the cancellation landed in its on_error round) is not waited:
    the call is cancelled there, so on_error hooks get ``ToolCancelled`` and free what they kept
    for the retry."""
    while step is not None and type(step) is not Await:
        step = _advance(steps.throw, ToolCancelled.of(call))
    return step


class _Interrupted(BaseException):
    """An on_error hook raised ``exc``, no ``Exception``: the call is cancelled. ``_attempts`` runs the cancel pass
    (``_interrupted``) for the hooks after position ``after`` (the on_error hooks, then the after-decision ones;
    -1: all, with ``decision``, the one taken before), then raises ``exc``."""

    def __init__(self, after: int, decision: Retry | Outcome | None, exc: BaseException) -> None:
        super().__init__(after, decision, exc)
        self.after, self.decision, self.exc = after, decision, exc


class _Paused:
    """An on_error pass stopped at hook ``index``, whose answer is ``pending``."""

    __slots__ = ("broken", "decision", "err", "exc", "index", "pending")

    def __init__(self, index: int, pending: Await, decision: Retry | Outcome | None, broken: PluginError | None) -> None:
        self.index, self.pending, self.decision, self.broken = index, pending, decision, broken
        self.err: ToolError
        self.exc: BaseException


def _resolve(plan: ToolPlan, hook: Callable[..., Any], pending: Await, returned: bool = False) -> Generator[Step, None, Any]:
    """Have the driver fetch a pre/post-call hook's :class:`Await`; its exception is the hook's.

    ``returned``: a post-call hook's, the call's value settled. A cancellation arriving then
    (``ToolCancelled``) ends only this fetch (None): the later post-call hooks run (storing, releasing),
    then the caller is cancelled. Else the ``Await``'s answer, which for a post-call hook must be None.
    """
    try:
        yield pending
    except ToolCancelled:
        if not returned:
            raise
        return None
    except ToolError:
        raise
    except (Exception, asyncio.CancelledError) as exc:  # (a CancelledError: the driver found no cancellation of the task)
        owner = plan.plugin_of(hook)
        who = f"plugin '{owner}'" if owner else "a plugin"
        raise PluginError(f"Internal error in {who}: {exception_text(exc)}", plugin=owner) from exc
    return pending.value


#: For :func:`_bad_answer`: the hook, what it may answer, and how its error says it answered otherwise. (One
#: argument: a call with fewer arguments keeps the stack of ``_attempts``, and so every call's generator, smaller.)
_PRE_VALIDATE = ("pre_validate", "None (replace call.arguments, or raise a ToolArgumentError to refuse them)", "returned")
_PRE_CALL = ("pre_call", "an Outcome, a ToolError or None", "returned")
_POST_CALL = ("post_call", "None or an Await (assign call.result, or raise a ToolError to refuse it)", "returned")
_POST_CALL_AWAIT = (
    "post_call",
    "None (assign call.result, or raise a ToolError in sync()/aio() to refuse it)",
    "returned an Await that answered",
)
_ON_ERROR = ("on_error", "a Retry (of a delay in seconds), an Outcome (of a value, or of a ToolError) or None", "returned")
_TIMEOUT_SET = ("pre_call", "a number of seconds (one a float holds) or None", "set call.timeout to")
_RUNNER_SET = ("pre_call", "a Runner (with run and arun methods) or None", "set call.runner to")


def _not_an_answer(answer: Any) -> bool:
    """Whether an on_error hook's ``answer`` (not None, not an ``Await``) is none the core takes: not a
    ``Retry`` of a delay that is an int or float (one a float holds: ``10**400`` is none), nor an ``Outcome``
    of a value or of a ``ToolError`` (``Outcome(error=ValueError())`` slips past ``Outcome.failure``'s check)."""
    kind = type(answer)
    if kind is Retry:
        delay = answer.delay
        if isinstance(delay, float):  # (NaN too: a retry at once)
            return False
        return isinstance(delay, bool) or not isinstance(delay, int) or not -1e308 < delay < 1e308
    return kind is not Outcome or not (answer.error is None or isinstance(answer.error, ToolError))


def _bad_answer(call: Call, owner: str | None, answer: Any, what: tuple[str, str, str]) -> PluginError:
    """The error of a ``what[0]`` hook of plugin ``owner`` that answered (``what[2]``) what the core does not take
    (``what[1]`` it does), calling ``call.tool`` (which the caller set back to the tool looked up). A pre_validate
    or post_call hook's answer is named by its type only: it may hold what the hook was there to keep from the
    model (a redaction hook's original); another's as it is (a string) or by its ``repr``, masked as an exception's
    text is (the values of secret keys, URL user-info) and cut at 200 characters."""
    hook, expected, did = what
    tool = call.tool
    shown: str | None
    if hook in {"pre_validate", "post_call"}:
        shown = _a(type(answer).__name__)
    else:
        shown = _text(answer, repr)
        shown = f"<{type(answer).__name__}>" if shown is None else outside_text(shown)[:200]
    who = f"plugin '{owner}'" if owner else "a plugin"
    return PluginError(
        f"The {hook} hook of {who} {did} {shown} while calling '{tool.name}'; expected {expected}",
        plugin=owner,
        tool=tool.name,
        call_id=call.call_id,
    )


def _a(noun: str) -> str:
    """``noun`` with its indefinite article: "a str", "an int"."""
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


def _failed_decision(call: Call, err: ToolError, decision: Retry | Outcome | None, broken: PluginError) -> Retry | Outcome | None:
    """The decision once an on_error hook failed (``broken``): with none yet, the failure the caller gets (so the
    later hooks, recorders among them, see it as ``call.decision``), but for a cancelled call, which ends
    cancelled whatever the hooks do."""
    if decision is None and not isinstance(err, ToolCancelled):
        decision = call.decision = Outcome.failure(broken)
    return decision


def _broken_on_error(call: Call, owner: str, exc: BaseException) -> PluginError:
    broken = PluginError(
        f"Internal error in plugin '{owner}' while handling an error of '{call.tool.name}': {exception_text(exc)}",
        plugin=owner,
        tool=call.tool.name,
        call_id=call.call_id,
    )
    broken.__cause__ = exc
    return broken


def _result(call: Call | None, value: Any, err: ToolError | None, name: Any, call_id: Any, started: float) -> CallResult:
    if call is not None:  # tuple.__new__ is what CallResult(...) calls, without its Python frame
        # Call.attempts; read as an attribute where it is the attempt's number (a refusal of a first attempt: no frame)
        attempts = call.attempt if call.ran or call.attempt == 1 else call.attempts
        ident = call._id
        if ident is None:  # as Call.call_id makes it (not through the property: no way from C into Python)
            ident = call._id = new_call_id()
        ran = call.ran or call.attempt > 1  # (an attempt that ran is counted when the next begins)
        return _new_result(CallResult, (err is None, value, err, name, ident, _perf() - started, attempts, ran))
    assert err is not None
    cid = err.call_id
    if cid is None:  # (`is None`: a given "" is kept)
        cid = None if call_id is None else _text(call_id, str)
        cid = err.call_id = new_call_id() if cid is None else cid
    return CallResult(False, None, err, err.tool or _named(name), cid, _perf() - started, 0)


_new_result = tuple.__new__


def _text(value: Any, show: Callable[[Any], str]) -> str | None:
    """``value`` itself if a string, else ``show(value)``; None when that raises (an int past
    the int-to-text limit, a broken ``__str__`` or ``__repr__``)."""
    if type(value) is str:
        return value
    try:
        return show(value)
    except Exception:
        return None


def _named(value: Any) -> str:
    """``value`` as a tool name in an error: itself, its repr, or its type in brackets."""
    text = _text(value, repr)
    return f"<{type(value).__name__}>" if text is None else text


def _internal(exc: BaseException, name: Any) -> ToolError:
    """A bug below the pipeline (or in a caller-supplied object) as a ToolError, logged with its traceback."""
    tool, text = _named(name), exception_text(exc)  # masked and cut: logged as the error shows it
    log_event(40, "internal error", tool=tool, error=text)
    err = ToolError(f"Internal error while calling '{tool}': {text}", tool=tool)
    err.__cause__ = exc
    return err


def _caller_error(tool: str, what: str, expected: str, got: Any) -> ToolArgumentError:
    return ToolArgumentError(
        [ArgumentProblem(what, f"expected {expected}, got {type(got).__name__}", "type", expected, type(got).__name__)],
        tool=tool,
    )


def _check_key(tool: str, key: Any) -> None:
    """An idempotency key of tool ``tool``: 1-255 printable characters, else ``ToolArgumentError``."""
    if not isinstance(key, str):
        raise _caller_error(tool, "idempotency_key", "a string", key)
    if not 0 < len(key) <= 255 or not key.isprintable():  # lone surrogates are not printable
        raise ToolArgumentError(
            [ArgumentProblem("idempotency_key", "expected 1-255 printable characters", "format", "1-255 printable characters")],
            tool=tool,
        )


def _stats_problem(plugin: str, data: Any) -> str | None:
    """What is wrong with a plugin's ``harness_stats`` answer (a dict, its ``"tools"`` one of dicts per tool), or None."""
    if not data:
        return None
    if not isinstance(data, dict):
        return f"Plugin '{plugin}' returned a value of type {type(data).__name__} from harness_stats; it must return a dict (or None)."
    tools = data.get("tools")
    if tools and not (isinstance(tools, dict) and all(isinstance(v, dict) for v in tools.values())):
        return f"Plugin '{plugin}' returned a \"tools\" entry from harness_stats that is not a dict of a dict per tool name."
    return None
