"""The plugins of one registry: loading by name, blocking, replacing, and the compiled call plan."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import CodeType, ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from . import hookspecs
from ._entrypoints import PLUGIN_GROUP, LoadFailure, entry_points, failure
from ._errors import PluginError
from ._log import emit

if TYPE_CHECKING:
    from ._registry import ToolRegistry

__all__ = ["Plan", "PluginSet", "ToolPlan"]

ENV_BLOCK = "HARNESS_ONE_BLOCK_PLUGINS"
ENV_ALLOW = "HARNESS_ONE_PLUGINS"
ENV_NO_AUTOLOAD = "HARNESS_ONE_DISABLE_PLUGIN_AUTOLOAD"
ENV_STRICT = "HARNESS_ONE_STRICT_PLUGINS"

PER_CALL_HOOKS = ("harness_pre_validate", "harness_pre_call", "harness_post_call", "harness_on_error")


def _env_names(var: str) -> set[str]:
    return {n.strip() for n in os.environ.get(var, "").split(",") if n.strip()}


def _env_flag(var: str) -> bool:
    return os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}


Hook = Callable[..., Any]
Step = tuple[Hook, Callable[[Any], bool] | None]


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """The hook implementations that apply to one tool, in call order."""

    pre_validate: tuple[Hook, ...]
    pre_call: tuple[Hook, ...]
    post_call: tuple[Hook, ...]
    on_error: tuple[Hook, ...]
    plan: Plan

    def owner_of(self, exc: BaseException) -> str | None:
        return self.plan.owner_of(exc)


@dataclass(frozen=True)
class Plan:
    """The per-call hook implementations, in call order, prepared when plugins change.

    ``for_tool`` narrows them to the implementations that apply to a tool (see
    :func:`harness_one.hookspecs.applies_to`), once per tool and plan.
    """

    steps: Mapping[str, tuple[Step, ...]]
    owners: Mapping[CodeType, str]
    #: For each per-call hook, the plugin names in call order (what ``harness-one doctor`` shows).
    order: Mapping[str, tuple[str, ...]]
    _per_tool: dict[Any, ToolPlan] = field(default_factory=dict, compare=False, repr=False)

    def for_tool(self, tool: Any) -> ToolPlan:
        found = self._per_tool.get(tool)
        if found is None:

            def pick(hook: str) -> tuple[Hook, ...]:
                return tuple(fn for fn, applies in self.steps[hook] if applies is None or applies(tool))

            found = ToolPlan(pick("pre_validate"), pick("pre_call"), pick("post_call"), pick("on_error"), self)
            self._per_tool[tool] = found
        return found

    def forget(self, tool: Any) -> None:
        self._per_tool.pop(tool, None)

    def owner_of(self, exc: BaseException) -> str | None:
        """The plugin whose hook raised ``exc`` (innermost plan frame in the traceback)."""
        tb = exc.__traceback__
        name = None
        while tb is not None:
            name = self.owners.get(tb.tb_frame.f_code, name)
            tb = tb.tb_next
        return name


def plugin_order(plugin: Any) -> int:
    """A plugin's place in the pipeline: its ``order`` attribute, or 0 (see docs/hooks.md)."""
    order = getattr(plugin, "order", 0)
    return order if isinstance(order, int) else 0


def _adapt(impl: pluggy.HookImpl, spec_args: tuple[str, ...]) -> Callable[..., Any]:
    """A positional callable for ``impl``, which may accept any subset of the spec's arguments."""
    fn = impl.function
    if impl.argnames == spec_args:
        return fn
    index = [spec_args.index(a) for a in impl.argnames]
    return lambda *args: fn(*(args[i] for i in index))


class PluginSet:
    """The plugins of one registry (``registry.plugins``).

    Plugins load by entry-point name from ``harness_one.plugins``; the standard ones (from
    the ``harness-one`` distribution itself) are ordinary entries there. Blocking a name
    keeps its plugin out; registering another plugin under a standard name replaces it.
    Every change re-compiles the registry's call plan, so the per-call path does no lookups.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        plugins: Iterable[Any] | Mapping[str, Any] = (),
        standard: bool = True,
        autoload: bool | None = None,
        block: Iterable[str] = (),
        allow: Iterable[str] | None = None,
        strict: bool | None = None,
    ) -> None:
        self._registry = registry
        self.manager = pluggy.PluginManager(hookspecs.PROJECT)
        self.manager.add_hookspecs(hookspecs)
        self.failures: list[LoadFailure] = []
        self.sources: dict[str, str] = {}
        self.strict = _env_flag(ENV_STRICT) if strict is None else strict
        for name in set(block) | _env_names(ENV_BLOCK):
            self.manager.set_blocked(name)
        env_allow = _env_names(ENV_ALLOW)
        allowed = set(allow) if allow is not None else (env_allow or None)
        autoload = (not _env_flag(ENV_NO_AUTOLOAD)) if autoload is None else autoload
        self._load_entry_points(standard=standard, third_party=autoload, allowed=allowed)
        items: Iterable[tuple[str | None, Any]] = (
            plugins.items() if isinstance(plugins, Mapping) else ((None, p) for p in plugins)
        )
        for given, plugin in items:
            self._register(plugin, given, replace=True)
        self._reorder()
        self.plan = self._compile()

    # ------------------------------------------------------------------ loading

    def _load_entry_points(self, *, standard: bool, third_party: bool, allowed: set[str] | None) -> None:
        chosen: dict[str, Any] = {}
        for ep in entry_points(PLUGIN_GROUP):
            if (ep.is_own and not standard) or (not ep.is_own and not third_party):
                continue
            if allowed is not None and ep.name not in allowed:
                continue
            if self.manager.is_blocked(ep.name):
                continue
            previous = chosen.get(ep.name)
            if previous is not None and not previous.is_own:
                self.failures.append(
                    LoadFailure(
                        PLUGIN_GROUP,
                        ep.name,
                        ep.distribution,
                        f"name conflict: '{ep.name}' is already provided by {previous.distribution}",
                    )
                )
                emit(30, "plugin name conflict", name=ep.name, kept=previous.distribution, skipped=ep.distribution)
                continue
            chosen[ep.name] = ep  # a third-party plugin of a standard name replaces the standard one
        for name, ep in chosen.items():
            try:
                obj = ep.load()
                plugin = obj() if isinstance(obj, type) else obj
            except Exception as exc:
                self.failures.append(failure(ep, exc))
                if self.strict:
                    raise PluginError(f"Plugin '{name}' from {ep.distribution} failed to load: {exc}", plugin=name) from exc
                continue
            self._register(plugin, name, replace=False)
            self.sources[name] = ep.distribution

    def _register(self, plugin: Any, name: str | None, *, replace: bool) -> str | None:
        if isinstance(plugin, type):
            plugin = plugin()
        if name is None:
            name = getattr(plugin, "name", None) or (plugin.__name__ if isinstance(plugin, ModuleType) else None)
        if replace and name is not None and self.manager.has_plugin(name):
            self._unregister(name)
        if replace and name is not None and self.manager.is_blocked(name):
            self.manager.unblock(name)
        try:
            registered = self.manager.register(plugin, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise PluginError(f"Cannot register plugin {name or plugin!r}: {exc}", plugin=name) from exc
        if registered is not None:
            self._replay(self.manager.hook.harness_tool_added, plugin)
        return registered

    def _replay(self, caller: pluggy.HookCaller, plugin: Any) -> None:
        """Call ``plugin``'s implementation of a tool hook for every tool the registry has."""
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin:
                for tool in self._registry._tool_list():
                    _adapt(impl, ("tool", "registry"))(tool, self._registry)

    def _unregister(self, name: str) -> Any:
        plugin = self.manager.get_plugin(name)
        if plugin is None:
            return None
        self._replay(self.manager.hook.harness_tool_removed, plugin)
        self.manager.unregister(plugin, name=name)
        self.sources.pop(name, None)
        return plugin

    # ------------------------------------------------------------------ public API

    def register(self, plugin: Any, name: str | None = None) -> str:
        """Add ``plugin`` (object, module, or class to instantiate) under ``name``, replacing any plugin of that name."""
        registered = self._register(plugin, name, replace=True)
        if registered is None:  # pragma: no cover - replace=True unblocks
            raise PluginError(f"Plugin '{name}' is blocked.", plugin=name)
        self._reorder()
        self.plan = self._compile()
        return registered

    def replace(self, name: str, plugin: Any) -> str:
        """Put ``plugin`` in the place of the plugin called ``name`` (standard or not)."""
        return self.register(plugin, name)

    def unregister(self, name: str) -> Any:
        """Remove the plugin called ``name``; returns it (or None if there was none)."""
        plugin = self._unregister(name)
        self.plan = self._compile()
        return plugin

    def block(self, name: str) -> None:
        """Remove the plugin called ``name`` and keep it out until :meth:`unblock`."""
        self._unregister(name)
        self.manager.set_blocked(name)
        self.plan = self._compile()

    def unblock(self, name: str) -> None:
        """Allow ``name`` again (a blocked standard plugin is not reloaded: register it)."""
        self.manager.unblock(name)

    def is_blocked(self, name: str) -> bool:
        return self.manager.is_blocked(name)

    def get(self, name: str) -> Any:
        """The plugin registered as ``name``, or None."""
        return self.manager.get_plugin(name)

    def names(self) -> list[str]:
        """Names of the registered plugins, in registration order."""
        return [name for name, plugin in self.manager.list_name_plugin() if plugin is not None]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.manager.has_plugin(name)

    def call_each(self, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call ``hook`` on every plugin that implements it, returning ``(plugin name, result)``."""
        caller = getattr(self.manager.hook, hook)
        spec_args = tuple(caller.spec.argnames) if caller.spec else tuple(kwargs)
        out = []
        for impl in reversed(caller.get_hookimpls()):
            out.append((impl.plugin_name, _adapt(impl, spec_args)(*(kwargs[a] for a in spec_args))))
        return out

    # ------------------------------------------------------------------ compiling

    def _reorder(self) -> None:
        """Re-register so hooks run in ascending ``order`` (plugin attribute, default 0); ties: later first.

        pluggy calls the last-registered implementation first, so registering in descending
        ``order`` gives ascending call order; the stable sort keeps pluggy's LIFO among equals.
        """
        current = [(n, p) for n, p in self.manager.list_name_plugin() if p is not None]
        wanted = sorted(current, key=lambda item: -plugin_order(item[1]))
        if [p for _, p in wanted] == [p for _, p in current]:
            return
        for name, plugin in current:
            self.manager.unregister(plugin, name=name)
        for name, plugin in wanted:
            self.manager.register(plugin, name=name)

    def _compile(self) -> Plan:
        steps: dict[str, tuple[Step, ...]] = {}
        owners: dict[CodeType, str] = {}
        order: dict[str, tuple[str, ...]] = {}
        for hook_name in PER_CALL_HOOKS:
            short = hook_name.removeprefix("harness_")
            caller = getattr(self.manager.hook, hook_name)
            impls = caller.get_hookimpls()
            assert caller.spec is not None
            spec_args = tuple(caller.spec.argnames)
            if any(i.hookwrapper or i.wrapper for i in impls):
                # Wrappers need pluggy's own calling loop; keep full semantics for this hook.
                steps[short] = ((_through_pluggy(caller, spec_args), None),)
            else:
                steps[short] = tuple((_adapt(i, spec_args), _applies(i)) for i in reversed(impls))
            order[short] = tuple(i.plugin_name for i in reversed(impls))
            for impl in impls:
                code = getattr(impl.function, "__code__", None)
                if code is not None:
                    owners[code] = impl.plugin_name
        return Plan(steps=steps, owners=owners, order=order)


def _applies(impl: pluggy.HookImpl) -> Callable[[Any], bool] | None:
    predicate = getattr(impl.function, "harness_applies_to", None)
    if predicate is None:
        return None
    plugin = impl.plugin
    return lambda tool: bool(predicate(plugin, tool))


def _through_pluggy(caller: pluggy.HookCaller, spec_args: tuple[str, ...]) -> Callable[..., Any]:
    if caller.spec is not None and caller.spec.opts.get("firstresult"):
        return lambda *args: caller(**dict(zip(spec_args, args)))

    def call_all(*args: Any) -> Any:
        results = caller(**dict(zip(spec_args, args)))
        return next((r for r in results or () if r is not None), None)

    return call_all
