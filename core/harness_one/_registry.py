"""ToolRegistry: the catalogue of tools and the one place every call goes through."""

from __future__ import annotations

import asyncio
import difflib
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import MethodType
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, TypeVar, overload

from ._arguments import ArgumentLimits, check_signature, decode_arguments
from ._call import Call, CallResult, Outcome, Retry, new_call_id
from ._clock import SYSTEM_CLOCK, Clock
from ._errors import PluginError, ToolArgumentError, ToolError, ToolExecutionError, ToolNotFound, ToolTimeout
from ._plugins import PluginSet, ToolPlan
from ._tool import Tool

__all__ = ["ToolRegistry"]

P = ParamSpec("P")
R = TypeVar("R")
_perf = time.perf_counter


class _shared(Generic[P, R]):  # noqa: N801 - behaves like a method decorator
    """A method that acts on the default registry when called on the class.

    ``ToolRegistry.call(...)`` is ``ToolRegistry.default().call(...)``, as the seed uses it;
    on an instance it is an ordinary method.
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
            obj = ToolRegistry._default or ToolRegistry.default()
            bound = obj.__dict__.get(self.__name__)  # instances pre-bind their shared methods
            if bound is not None:
                return bound  # type: ignore[no-any-return]
        return MethodType(self.func, obj)


class _Entry:
    """A registered tool and its call counter (``itertools.count``: atomic without a lock)."""

    __slots__ = ("counter", "tool")

    def __init__(self, tool: Tool, calls: int = 0) -> None:
        self.tool = tool
        self.counter = itertools.count(calls + 1)

    @property
    def calls(self) -> int:
        # The next value the counter would give, minus one; read from its repr, ``count(N)``,
        # so that reading does not consume a value.
        return int(repr(self.counter)[6:-1]) - 1


class ToolRegistry:
    """A catalogue of tools and the pipeline that calls them.

    There is one process-wide default registry, which ``@defineTool`` fills and which the
    class-level methods use (``ToolRegistry.call("add", {...})``). Every ``ToolRegistry()``
    is independent of it and of each other: its own tools, plugins (and so its own rate
    limits, idempotency records and metrics) and clock.

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
        discover: load tools from the ``harness_one.tools`` entry points (lazily, on first
            listing or unknown name). The default registry does; new instances do not.
        clock: time source for durations and the waits between attempts.
        limits: size and nesting limits for incoming arguments.
    """

    _default: ClassVar[ToolRegistry | None] = None
    _default_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        *,
        plugins: Iterable[Any] | Mapping[str, Any] = (),
        standard_plugins: bool = True,
        autoload: bool | None = None,
        block: Iterable[str] = (),
        allow: Iterable[str] | None = None,
        strict: bool | None = None,
        discover: bool = False,
        clock: Clock = SYSTEM_CLOCK,
        limits: ArgumentLimits | None = None,
    ) -> None:
        self.clock = clock
        self.limits = limits or ArgumentLimits()
        self._tools: dict[str, _Entry] = {}
        self._lock = threading.RLock()
        for name, attr in vars(ToolRegistry).items():
            if isinstance(attr, _shared):  # bind once: instance calls skip the descriptor
                self.__dict__[name] = MethodType(attr.func, self)
        self._discover = discover
        self._discovered = False
        self._exports: dict[tuple[str, bool], Any] = {}
        from ._discovery import DiscoveryReport

        self.discovery = DiscoveryReport()
        self.plugins = PluginSet(
            self, plugins=plugins, standard=standard_plugins, autoload=autoload, block=block, allow=allow, strict=strict
        )

    # ------------------------------------------------------------------ the default registry

    @classmethod
    def default(cls) -> ToolRegistry:
        """The process-wide registry that ``@defineTool`` and the class-level methods use."""
        registry = cls._default
        if registry is None:
            with cls._default_lock:
                registry = cls._default
                if registry is None:
                    registry = cls._default = ToolRegistry(discover=True)
        return registry

    @classmethod
    def set_default(cls, registry: ToolRegistry | None) -> ToolRegistry | None:
        """Install ``registry`` as the default (``None``: a fresh one on next use); returns the old one."""
        with cls._default_lock:
            old, cls._default = cls._default, registry
        return old

    # ------------------------------------------------------------------ catalogue

    def tools(self) -> list[Tool]:
        """The registered tools, in registration order."""
        self._ensure_discovered()
        return self._tool_list()

    def _tool_list(self) -> list[Tool]:
        return [e.tool for e in self._tools.values()]

    @_shared
    def add(self, /, tool: Tool | Callable[..., Any], *, replace: bool = False, **definition: Any) -> Tool:
        """Register a :class:`Tool`, a ``@defineTool`` function, or a plain function (with ``defineTool``'s keywords).

        A second tool of the same name is a :class:`ToolDefinitionError` unless ``replace=True``.
        Safe while other threads call tools.
        """
        from ._discovery import as_tool

        item = as_tool(tool, definition)
        self._insert(item, replace=replace)
        return item

    register = add

    def _insert(self, tool: Tool, *, replace: bool) -> None:
        from ._errors import ToolDefinitionError

        with self._lock:
            old = self._tools.get(tool.name)
            if old is not None and old.tool is tool:
                return
            if old is not None and not replace:
                where = f" (from {old.tool.source})" if old.tool.source else ""
                raise ToolDefinitionError(
                    f"A tool named '{tool.name}' is already registered{where}; pass replace=True to replace it.", tool=tool.name
                )
            tools = dict(self._tools)
            tools[tool.name] = _Entry(tool, old.calls if old else 0)
            hook = self.plugins.manager.hook
            if old is not None:
                self.plugins.plan.forget(old.tool)
                hook.harness_tool_removed(tool=old.tool, registry=self)
            hook.harness_tool_added(tool=tool, registry=self)
            self._tools = tools
            self._exports = {}

    @_shared
    def remove(self, /, name: str) -> Tool:
        """Unregister the tool called ``name`` and return it; safe while other threads call tools."""
        with self._lock:
            entry = self._tools.get(name)
            if entry is None:
                raise self._not_found(name)
            tools = dict(self._tools)
            del tools[name]
            self._tools = tools
            self._exports = {}
            self.plugins.plan.forget(entry.tool)
            self.plugins.manager.hook.harness_tool_removed(tool=entry.tool, registry=self)
            return entry.tool

    unregister = remove

    @_shared
    def get(self, /, name: str) -> Tool:
        """The tool called ``name``, or :class:`ToolNotFound` with close-name suggestions."""
        entry = self._tools.get(name) or self._lookup_slow(name)
        return entry.tool

    def __contains__(self, name: object) -> bool:
        self._ensure_discovered()
        return isinstance(name, str) and name in self._tools

    def __len__(self) -> int:
        self._ensure_discovered()
        return len(self._tools)

    @_shared
    def names(self) -> list[str]:
        """The tool names, in registration order: the seed's ``["web_search", "calculate", ...]``."""
        self._ensure_discovered()
        return list(self._tools)

    @_shared
    def list_tools(self, /, *, names_only: bool = False) -> Any:
        """What the model sees: ``{name: {"description", "parameters"}}`` (the seed's section 8).

        Iterating it yields the names, so ``list(ToolRegistry.list_tools())`` is the seed's
        section-3 list; ``names_only=True`` returns that list directly.
        """
        self._ensure_discovered()
        if names_only:
            return list(self._tools)
        return {n: {"description": e.tool.description, "parameters": e.tool.parameters} for n, e in self._tools.items()}

    @_shared
    def call_count(self, /, name: str) -> int:
        """How many calls tool ``name`` has received (the seed: "how many times was tool X called?")."""
        entry = self._tools.get(name) or self._lookup_slow(name)
        return entry.calls

    @_shared
    def stats(self) -> dict[str, Any]:
        """``{"tools": {name: {"calls": n, ...}}, <plugin name>: {...}}``: counters plus each plugin's statistics."""
        tools: dict[str, dict[str, Any]] = {n: {"calls": e.calls} for n, e in self._tools.items()}
        out: dict[str, Any] = {"tools": tools}
        for plugin, data in self.plugins.call_each("harness_stats", registry=self):
            if not data:
                continue
            rest = {k: v for k, v in data.items() if k != "tools"}
            if rest:
                out[plugin] = rest
            for tool_name, tool_stats in (data.get("tools") or {}).items():
                tools.setdefault(tool_name, {}).update(tool_stats)
        return out

    @_shared
    def export(self, format: str = "openai", *, strict: bool = False) -> Any:
        """Every tool in a provider's format, as an :class:`~harness_one.export.Export` (cached until tools change).

        Formats: ``openai``, ``openai-responses``, ``anthropic``, ``gemini``, ``mcp``.
        """
        key = (format, strict)
        found = self._exports.get(key)
        if found is None:
            from .export import export_tools

            found = export_tools(self.tools(), format, strict=strict)
            self._exports[key] = found
        return found

    # ------------------------------------------------------------------ discovery

    def load_entry_points(self, *, refresh: bool = False) -> Any:
        """Load tool packages from the ``harness_one.tools`` group now; returns the discovery report."""
        from ._discovery import load_tool_entry_points

        if refresh:
            from ._entrypoints import refresh_entry_points

            refresh_entry_points()
        with self._lock:
            self._discovered = True
            load_tool_entry_points(self, self.discovery)
        return self.discovery

    def _ensure_discovered(self) -> None:
        if self._discover and not self._discovered:
            self.load_entry_points()

    def _lookup_slow(self, name: str) -> _Entry:
        self._ensure_discovered()
        entry = self._tools.get(name)
        if entry is None:
            raise self._not_found(name)
        return entry

    def _not_found(self, name: str) -> ToolNotFound:
        names = list(self._tools)
        close = difflib.get_close_matches(str(name), names, n=3, cutoff=0.6)
        return ToolNotFound(str(name), available=names, suggestions=close)

    # ------------------------------------------------------------------ calling

    def _begin(
        self, name: str, arguments: Any, context: Mapping[str, Any] | None, call_id: str | None, idempotency_key: str | None
    ) -> Call:
        entry = self._tools.get(name) or self._lookup_slow(name)
        next(entry.counter)
        return Call(self, entry.tool, arguments, context, call_id, idempotency_key, _perf())

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
    ) -> Any:
        """Call tool ``name`` with ``arguments`` (a dict or a JSON string) and return its result.

        Raises a :class:`ToolError`: :class:`ToolNotFound`, :class:`ToolArgumentError`,
        :class:`RateLimitExceeded`, :class:`ToolTimeout`, :class:`ToolExecutionError`, ...
        An async tool runs to completion in a new event loop; inside a running loop use
        :meth:`acall`.
        """
        entry = self._tools.get(name) or self._lookup_slow(name)
        next(entry.counter)
        return self._run(Call(self, entry.tool, arguments, context, call_id, idempotency_key, _perf()))

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
    ) -> Any:
        """Like :meth:`call`, awaited: async tools run on the loop, sync tools in a worker thread."""
        return await self._arun(self._begin(name, arguments, context, call_id, idempotency_key))

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
    ) -> CallResult:
        """Like :meth:`call`, but a :class:`ToolError` comes back in a :class:`CallResult` instead of raising."""
        try:
            call = self._begin(name, arguments, context, call_id, idempotency_key)
        except ToolError as err:
            return self._unstarted(err, call_id)
        try:
            value = self._run(call)
        except ToolError as err:
            return self._finish(call, None, err)
        return self._finish(call, value, None)

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
    ) -> CallResult:
        """The awaitable :meth:`try_call`."""
        try:
            call = self._begin(name, arguments, context, call_id, idempotency_key)
        except ToolError as err:
            return self._unstarted(err, call_id)
        try:
            value = await self._arun(call)
        except ToolError as err:
            return self._finish(call, None, err)
        return self._finish(call, value, None)

    def _unstarted(self, err: ToolError, call_id: str | None) -> CallResult:
        cid = call_id or new_call_id()
        err.call_id = err.call_id or cid
        return CallResult(False, None, err, err.tool or "", cid, 0.0, 0)

    def _finish(self, call: Call, value: Any, err: ToolError | None) -> CallResult:
        return CallResult(err is None, value, err, call.tool.name, call.call_id, _perf() - call.started, call.attempt)

    # The pipeline. The sync and async runners differ only in how the tool runs and how they wait.

    def _prepare(self, plan: ToolPlan, call: Call) -> None:
        tool = call.tool
        try:
            if type(call.arguments) is not dict:
                call.arguments = decode_arguments(call.arguments, self.limits)
            for hook in plan.pre_validate:
                hook(call)
            args = call.arguments
            if (not tool.accepts_any and not args.keys() <= tool.accepted) or not tool.required <= args.keys():
                check_signature(args, tool.accepted, tool.required, tool.accepts_any)
        except Exception as exc:
            err = self._as_tool_error(plan, call, exc)
            decision = self._on_error(plan, call, err)
            if type(decision) is Outcome and decision.error is not None:
                raise decision.error from err
            if err is exc:
                raise
            raise err from exc

    def _admit(self, plan: ToolPlan, call: Call) -> Outcome | None:
        for hook in plan.pre_call:
            outcome = hook(call)
            if outcome is not None:
                if outcome.error is not None:
                    raise outcome.error
                return outcome  # type: ignore[no-any-return]
        return None

    def _after(self, plan: ToolPlan, call: Call, value: Any) -> Any:
        call.result = value
        for hook in plan.post_call:
            hook(call)
        return call.result

    def _failed(self, plan: ToolPlan, call: Call, exc: Exception) -> Retry | Outcome:
        err = self._as_tool_error(plan, call, exc)
        decision = self._on_error(plan, call, err)
        if decision is None:
            if err is exc:
                raise err
            raise err from exc
        if type(decision) is Outcome and decision.error is not None:
            raise decision.error from err
        return decision

    def _run(self, call: Call) -> Any:
        plan = self.plugins.plan.for_tool(call.tool)
        if call.tool.is_async:
            _refuse_running_loop(call.tool)
        self._prepare(plan, call)
        while True:
            try:
                outcome = self._admit(plan, call) if plan.pre_call else None
                value = self._invoke(call) if outcome is None else outcome.value
                return self._after(plan, call, value) if plan.post_call else value
            except Exception as exc:
                decision = self._failed(plan, call, exc)
                if type(decision) is Retry:
                    self.clock.sleep(decision.delay)
                    _next_attempt(call)
                    continue
                assert type(decision) is Outcome
                return decision.value

    async def _arun(self, call: Call) -> Any:
        plan = self.plugins.plan.for_tool(call.tool)
        self._prepare(plan, call)
        while True:
            try:
                outcome = self._admit(plan, call) if plan.pre_call else None
                value = (await self._ainvoke(call)) if outcome is None else outcome.value
                return self._after(plan, call, value) if plan.post_call else value
            except Exception as exc:
                decision = self._failed(plan, call, exc)
                if type(decision) is Retry:
                    await self.clock.asleep(decision.delay)
                    _next_attempt(call)
                    continue
                assert type(decision) is Outcome
                return decision.value

    @staticmethod
    def _kwargs(call: Call) -> dict[str, Any]:
        tool = call.tool
        args = call.arguments
        if tool.converters:
            args = {k: (tool.converters[k](v) if k in tool.converters else v) for k, v in args.items()}
        if tool.call_param is not None:
            args = {**args, tool.call_param: call}
        return args  # type: ignore[no-any-return]

    def _invoke(self, call: Call) -> Any:
        tool = call.tool
        kwargs = self._kwargs(call) if tool.converters or tool.call_param else call.arguments
        call.ran = True
        try:
            if tool.is_async:
                return asyncio.run(self._await_tool(call, kwargs))
            if call.timeout is None or call.runner is None:
                return tool.fn(**kwargs)
            return call.runner.run(call, tool.fn, kwargs, call.timeout)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolExecutionError(exc, tool=tool.name, call_id=call.call_id) from exc

    async def _ainvoke(self, call: Call) -> Any:
        tool = call.tool
        kwargs = self._kwargs(call) if tool.converters or tool.call_param else call.arguments
        call.ran = True
        try:
            if tool.is_async:
                return await self._await_tool(call, kwargs)
            if call.timeout is not None and call.runner is not None:
                return await call.runner.arun(call, tool.fn, kwargs, call.timeout)
            return await asyncio.to_thread(tool.fn, **kwargs)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolExecutionError(exc, tool=tool.name, call_id=call.call_id) from exc

    @staticmethod
    async def _await_tool(call: Call, kwargs: dict[str, Any]) -> Any:
        """Await an async tool; with a timeout, cancel it at the deadline."""
        timeout = call.timeout
        if timeout is None:
            return await call.tool.fn(**kwargs)
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            return await asyncio.wait_for(call.tool.fn(**kwargs), timeout)
        except asyncio.TimeoutError:
            if loop.time() - start < timeout * 0.999:
                raise  # the tool's own timeout, not ours
            call.cancel()
            raise ToolTimeout(timeout, tool=call.tool.name, call_id=call.call_id) from None

    def _as_tool_error(self, plan: ToolPlan, call: Call, exc: Exception) -> ToolError:
        if isinstance(exc, ToolError):
            err = exc
        else:
            owner = plan.owner_of(exc)
            who = f"plugin '{owner}'" if owner else "a plugin"
            err = PluginError(
                f"Internal error in {who} while calling '{call.tool.name}': {type(exc).__name__}: {exc}", plugin=owner
            )
        if isinstance(err, ToolArgumentError):
            err.with_tool(call.tool.name)
        elif err.tool is None:
            err.tool = call.tool.name
        if err.call_id is None:
            err.call_id = call.call_id
        call.error = err
        return err

    def _on_error(self, plan: ToolPlan, call: Call, err: ToolError) -> Retry | Outcome | None:
        decision = None
        for hook in plan.on_error:
            answer = hook(call, err)
            if answer is not None and decision is None:
                decision = answer
                call.state["decision"] = answer
        return decision

    def __repr__(self) -> str:
        default = " default" if self is ToolRegistry._default else ""
        return f"<ToolRegistry{default} tools={len(self._tools)} plugins={self.plugins.names()}>"


def _refuse_running_loop(tool: Tool) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"Tool '{tool.name}' is async and an event loop is running here: use 'await registry.acall(...)'.")


def _next_attempt(call: Call) -> None:
    if call.ran:
        call.attempt += 1
        call.ran = False
    if call._state is not None:
        call._state.pop("decision", None)
