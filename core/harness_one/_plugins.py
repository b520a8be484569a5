"""The plugins of one registry: loading by name, options, blocking, replacing, and the call plan."""

from __future__ import annotations

import contextvars
import difflib
import functools
import inspect
import itertools
import json
import math
import numbers
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import CodeType, FrameType, MethodType, ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from . import hookspecs
from ._entrypoints import PLUGIN_GROUP, EntryPoint, LoadFailure, entry_points, failure
from ._errors import PluginError, ToolError, capped, exception_text
from ._log import log_event
from ._suggest import closest
from ._tool import PLUGIN_OPTIONS, POLICY_PLUGINS
from .hookspecs import PER_CALL_HOOKS

if TYPE_CHECKING:
    from ._call import Call
    from ._registry import ToolRegistry
    from ._tool import Tool

__all__ = ["Plan", "PluginSet", "ToolPlan", "env_options", "misspelling_of", "missing_guards", "unenforced"]

ENV_BLOCK = "HARNESS_ONE_BLOCK_PLUGINS"
ENV_ALLOW = "HARNESS_ONE_PLUGINS"
ENV_NO_AUTOLOAD = "HARNESS_ONE_DISABLE_PLUGIN_AUTOLOAD"
ENV_STRICT = "HARNESS_ONE_STRICT_PLUGINS"
#: ``HARNESS_ONE_PLUGIN_<NAME>='{"option": value}'``: options for the plugin ``<name>``.
ENV_OPTIONS_PREFIX = "HARNESS_ONE_PLUGIN_"


def _env_names(var: str) -> set[str]:
    return {n.strip() for n in os.environ.get(var, "").split(",") if n.strip()}


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _env_flag(var: str) -> bool:
    """The boolean environment variable ``var`` (unset or empty: ``False``); ``PluginError`` for a value that is
    neither true nor false, which would otherwise turn the setting off (or override the configuration file's) unseen."""
    value = os.environ.get(var, "").strip().lower()
    if value in _TRUE:
        return True
    if not value or value in _FALSE:
        return False
    raise PluginError(f"{var}={os.environ[var]!r} is not a boolean: use 1, true, yes or on, or 0, false, no or off (any case).")


def env_key(name: str) -> str:
    """The environment variable holding options for plugin ``name`` (``rate_limit`` -> ``HARNESS_ONE_PLUGIN_RATE_LIMIT``)."""
    return ENV_OPTIONS_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def env_options(names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Options from ``HARNESS_ONE_PLUGIN_<NAME>`` variables (JSON objects) for the given plugin names."""
    found: dict[str, dict[str, Any]] = {}
    for name in names:
        var = env_key(name)
        raw = os.environ.get(var)
        if raw is None or not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the decoder reads
            raise PluginError(f"{var} must be a JSON object of options for plugin '{name}': {exc}", plugin=name) from None
        if not isinstance(value, dict):
            raise PluginError(f"{var} must be a JSON object of options for plugin '{name}'.", plugin=name)
        found[name] = value
    return found


def _check_options(options: object) -> None:
    """``PluginError`` unless ``options`` (``plugin_options=``) is ``None`` or a mapping of plugin names to
    mappings of options, as a ``HARNESS_ONE_PLUGIN_<NAME>`` variable must hold a JSON object."""
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise PluginError(
            f"plugin_options must be a mapping of plugin names to their options, not a value of type {type(options).__name__}."
        )
    for name, values in options.items():
        if not isinstance(values, Mapping):
            got = "None" if values is None else f"a value of type {type(values).__name__}"
            raise PluginError(
                f"plugin_options[{name!r}] must be a mapping of options for plugin '{name}', not {got}.",
                plugin=name if isinstance(name, str) else None,
            )


def _names(value: object, parameter: str, takes: str = "a list of plugin names") -> set[str]:
    """The plugin names ``value`` (``block=``, ``allow=``) lists; ``PluginError`` for anything but an iterable
    of strings: a string would be read letter by letter (``block="cache"`` blocks ``c``, ``a``, ...)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise PluginError(f"{parameter} must be {takes}, not {capped(repr(value), 200)}.")
    names = list(value)
    for name in names:
        if not isinstance(name, str):
            raise PluginError(f"{parameter} must be {takes}, and it holds {capped(repr(name), 200)}.")
    return set(names)


def _check_flag(value: object, parameter: str, *, optional: bool = True) -> None:
    """``PluginError`` unless ``value``, of the switch ``parameter``, is ``True``, ``False`` or (``optional``) None
    for the environment's setting: ``autoload="false"`` is a true string, and would turn autoload on."""
    if isinstance(value, bool) or (optional and value is None):
        return
    takes = "True, False or None (the environment's setting)" if optional else "True or False"
    raise PluginError(f"{parameter} must be {takes}, not {capped(repr(value), 200)}.")


#: The hooks harness-one calls (every spec in ``hookspecs``).
HOOK_NAMES = frozenset(n for n in dir(hookspecs) if n.startswith("harness_"))
#: How alike (``difflib``'s ratio, of the names after ``harness_``) a name no spec has is to a spec's name for it to
#: be a misspelling of that spec (``harness_post_cal``) rather than a newer harness-one's hook.
MISSPELLED = 0.85
#: Off while the conformance kit registers the plugin under test: its ``test_hooks_match_specs`` reports a
#: hook name the registration would refuse, and its other checks still run the plugin (see :meth:`PluginSet._check_names`).
CHECK_HOOK_NAMES: contextvars.ContextVar[bool] = contextvars.ContextVar("harness_one_check_hook_names", default=True)


def misspelling_of(hook: str) -> str | None:
    """The hook ``hook`` (a name no spec has) misspells, if its name is that close to one (:data:`MISSPELLED`)."""
    specs = {name.removeprefix("harness_"): name for name in HOOK_NAMES}
    close = difflib.get_close_matches(hook.removeprefix("harness_"), list(specs), n=1, cutoff=MISSPELLED)
    return specs[close[0]] if close else None


Hook = Callable[..., Any]
#: One plugin's answer to a hook: its name, its result, and the error it raised (else None).
Answer = tuple[str, Any, "ToolError | None"]

#: Tool options that only a plugin enforces, and that plugin. A tool that sets one (``True`` or a
#: predicate for ``requires_approval``; any value for ``max_calls``) is refused while the plugin
#: is not active in the registry (blocked, removed, failed to load): these guards fail closed.
GUARDED_OPTIONS: Mapping[str, str] = {option: PLUGIN_OPTIONS[option] for option in ("requires_approval", "max_calls")}
#: The plugin that honours idempotency keys: while none of that name is active, a call with a key is refused.
KEY_GUARD = "idempotency"


def missing_guards(options: Mapping[str, Any], active: Collection[str]) -> list[tuple[str, str]]:
    """``(option, plugin)`` for each guarded option that ``options`` asks for (anything but None
    and False: ``max_calls=0`` does) whose plugin is not among ``active``."""
    return [(option, plugin) for option, plugin in GUARDED_OPTIONS.items() if plugin not in active and _set(options.get(option))]


def unenforced(tool: Tool, active: Collection[str]) -> list[tuple[str, str]]:
    """``(policy, plugin)`` for each policy ``tool`` declares (:data:`~harness_one._tool.POLICY_PLUGINS`,
    :data:`~harness_one._tool.PLUGIN_OPTIONS`) whose plugin is not among ``active``: ``doctor`` lists them."""
    declared = [(policy, plugin) for policy, plugin in POLICY_PLUGINS.items() if getattr(tool, policy) is not None]
    declared += [(option, plugin) for option, plugin in PLUGIN_OPTIONS.items() if _set(tool.options.get(option))]
    return [(policy, plugin) for policy, plugin in declared if plugin not in active]


class _NotAHook(Exception):
    """A ``per_tool`` factory's answer that cannot be called as its implementation: ``problem`` says why."""

    def __init__(self, problem: str, argnames: tuple[str, ...]) -> None:
        super().__init__(problem)
        self.problem, self.argnames = problem, argnames


def _checked(fn: Any, argnames: tuple[str, ...]) -> Any:
    """``fn``, a ``per_tool`` factory's answer for an implementation taking ``argnames``: None, or a plain function
    of them; else :class:`_NotAHook` (found when the plan is prepared, not as every call fails)."""
    if fn is None:
        return None
    if not callable(fn):
        raise _NotAHook(
            f"{type(fn).__name__} {capped(repr(fn), 80)}" if isinstance(fn, (int, float, str)) else type(fn).__name__, argnames
        )
    call = inspect.getattr_static(type(fn), "__call__", None)  # an object's: an async def __call__ makes a coroutine too
    if any(inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f) for f in (fn, call)):
        raise _NotAHook("a coroutine function (per-call hooks are synchronous: answer with an Await for I/O)", argnames)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (some built-ins): called as it is
        return fn
    try:
        signature.bind(*(None,) * len(argnames))
    except TypeError:
        raise _NotAHook(f"a function that cannot take ({', '.join(argnames)})", argnames) from None
    return fn


def _set(value: Any) -> bool:
    """Whether a plugin's per-tool option is set: anything but None and False (``max_calls=0`` is)."""
    return value is not None and value is not False


def _refusal(message: str, plugin: str) -> Hook:
    """A pre-validate step refusing every call it sees with ``message``, in the name of ``plugin``.

    Marked ``harness_guard`` (the plugin it stands in for): it is no plugin's own hook.
    """

    def refuse(call: Call) -> None:
        raise PluginError(message, plugin=plugin)

    refuse.harness_guard = plugin  # type: ignore[attr-defined]
    return refuse


def _unkeyed(tool: Tool, why: str) -> Hook:
    """Refuses ``tool``'s calls that carry an idempotency key while no plugin named :data:`KEY_GUARD`
    is active (``why``: :meth:`Plan.inactive`) nor any hook for keyed calls applies (``applies_to(keyed=True)``)."""
    return _refusal(
        f"Tool '{tool.name}' cannot be called with an idempotency key: no plugin in this registry honours one "
        f"(the '{KEY_GUARD}' plugin is {why}), so the key could run twice.",
        KEY_GUARD,
    )


def _unguarded(tool: Tool, option: str, plugin: str, why: str) -> Hook:
    """Refuses every call of ``tool``: its ``option`` has no ``plugin`` to enforce it (``why``: :meth:`Plan.inactive`)."""
    return _refusal(
        f"Tool '{tool.name}' cannot be called: its '{option}' option needs the '{plugin}' plugin, "
        f"which is not active in this registry ({why}).",
        plugin,
    )


@dataclass(frozen=True, slots=True)
class _Step:
    fn: Hook
    plugin: str
    applies: Callable[[Tool], bool] | None
    keyed: bool = False  # only for calls that carry an idempotency key
    #: ``per_tool``: the function to call for a tool (in the spec's argument order), or None.
    prepare: Callable[[Tool], Hook | None] | None = None
    #: (on_error) acts only on another implementation's decision: ``applies_to(after_decision=True)``.
    after_decision: bool = False

    def for_tool(self, tool: Tool) -> _Step | None:
        """This step as it applies to ``tool``: itself, its prepared form, or None."""
        if self.applies is not None and not self.applies(tool):
            return None
        if self.prepare is None:
            return self
        fn = self.prepare(tool)
        return None if fn is None else _Step(fn, self.plugin, None, self.keyed, None, self.after_decision)


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """The hook implementations that apply to one tool, in call order, and their plugins' names."""

    pre_validate: tuple[Hook, ...]
    pre_call: tuple[Hook, ...]
    post_call: tuple[Hook, ...]
    on_error: tuple[Hook, ...]
    on_error_names: tuple[str, ...]
    plan: Plan
    #: The plan for calls that carry an idempotency key, when it has more hooks than this one.
    keyed: ToolPlan | None = None
    #: The on_error implementations that act only on a decision (``applies_to(after_decision=True)``),
    #: with their plugins' names: run after the others, and only when one of those decided.
    on_decision: tuple[tuple[Hook, str], ...] = ()
    #: Each of its functions with its plugin's name: a plugin's own by identity (two instances of one class share code).
    named: tuple[tuple[Hook, str], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.pre_validate or self.pre_call or self.post_call or self.on_error)

    def owner_of(self, exc: BaseException) -> str | None:
        return self.plan.owner_of(exc)

    def plugin_of(self, hook: Hook) -> str | None:
        """The plugin that ``hook`` (one of this plan's functions, or of its keyed plan's) belongs to."""
        for fn, name in (self.keyed or self).named:  # (the keyed plan's steps are this one's and more)
            if fn is hook:
                return name
        code = _code(hook)  # another function: known by its code, unless two plugins' hooks run it
        return None if code is None or code in self.plan.shared else self.plan.owners.get(code)


@dataclass(frozen=True)
class Plan:
    """The per-call hook implementations in call order (see the rule in ``hookspecs``).

    ``for_tool`` narrows them to the implementations that apply to a tool (see
    :func:`harness_one.hookspecs.applies_to`), once per tool and plan.
    """

    steps: Mapping[str, tuple[_Step, ...]]
    #: The plugin of each hook function's code (``per_tool`` functions added as they are made): see :meth:`own`.
    owners: dict[CodeType, str]
    #: For each per-call hook, the plugin names in call order (what ``harness-one doctor`` shows).
    order: Mapping[str, tuple[str, ...]]
    #: The names of the plugins registered (not blocked) when the plan was compiled.
    active: frozenset[str] = frozenset()
    #: The allow-list the entry-point plugins were loaded with (None: none).
    allowed: frozenset[str] | None = None
    #: The codes that hooks of several plugins run (two instances of one class), with those plugins' names.
    shared: dict[CodeType, set[str]] = field(default_factory=dict, compare=False, repr=False)
    #: The plugins registered, by name: which of those sharing a code a frame runs for (:meth:`_running`).
    plugins: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    _per_tool: dict[Any, ToolPlan] = field(default_factory=dict, compare=False, repr=False)

    def for_tool(self, tool: Tool) -> ToolPlan:
        found = self._per_tool.get(tool)
        if found is None:
            steps = {h: self._applying(self.steps[h], tool, h) for h in self.steps}
            guards = tuple(
                _Step(_unguarded(tool, option, plugin, self.inactive(plugin)), plugin, None)
                for option, plugin in missing_guards(tool.options, self.active)
            )
            if guards:
                steps["pre_validate"] = guards + steps["pre_validate"]
            found = keyed = self._tool_plan(steps)
            if any(s.keyed for hook in steps.values() for s in hook):  # a plugin's hooks for keyed calls only
                found = self._tool_plan({h: tuple(s for s in hook if not s.keyed) for h, hook in steps.items()}, keyed)
            elif KEY_GUARD not in self.active:  # a key nothing honours is refused, not ignored (as guards fail closed)
                refuse = (_Step(_unkeyed(tool, self.inactive(KEY_GUARD)), KEY_GUARD, None),)
                found = self._tool_plan(steps, self._tool_plan({**steps, "pre_validate": refuse + steps["pre_validate"]}))
            self._per_tool[tool] = found
        return found

    def inactive(self, plugin: str) -> str:
        """Why ``plugin``, not among :attr:`active`, is not: the allow-list when it leaves the name out."""
        if self.allowed is not None and plugin not in self.allowed:
            return f"not in the allow-list, allow or {ENV_ALLOW}"
        return "blocked, removed or failed to load"

    def _applying(self, given: tuple[_Step, ...], tool: Tool, hook: str) -> tuple[_Step, ...]:
        """The steps of ``hook`` that apply to ``tool``, prepared for it where a hook is ``per_tool``."""
        steps = []
        for step in given:
            try:
                found = step.for_tool(tool)
            except ToolError:
                raise
            except _NotAHook as bad:
                raise PluginError(
                    f"Plugin '{step.plugin}': its per_tool factory of {hook} gave {bad.problem} for '{tool.name}'; it "
                    f"must give a plain function of ({', '.join(bad.argnames)}), or None where it does not apply.",
                    plugin=step.plugin,
                ) from None
            except Exception as exc:  # its applies_to predicate or per_tool factory
                raise PluginError(
                    f"Internal error in plugin '{step.plugin}' while preparing the calls of '{tool.name}': {exception_text(exc)}",
                    plugin=step.plugin,
                ) from exc
            if found is not None and found is not step:
                code = _code(found.fn)
                if code is not None:
                    self.own(code, found.plugin)  # what it raises or awaits is the plugin's
            if found is not None:
                steps.append(found)
        return tuple(steps)

    def _tool_plan(self, steps: Mapping[str, tuple[_Step, ...]], keyed: ToolPlan | None = None) -> ToolPlan:
        on_error = tuple(s for s in steps["on_error"] if not s.after_decision)
        return ToolPlan(
            tuple(s.fn for s in steps["pre_validate"]),
            tuple(s.fn for s in steps["pre_call"]),
            tuple(s.fn for s in steps["post_call"]),
            tuple(s.fn for s in on_error),
            tuple(s.plugin for s in on_error),
            self,
            keyed,
            tuple((s.fn, s.plugin) for s in steps["on_error"] if s.after_decision),
            tuple((s.fn, s.plugin) for hook in steps.values() for s in hook),
        )

    def forget(self, tool: Tool) -> None:
        self._per_tool.pop(tool, None)

    def own(self, code: CodeType, plugin: str) -> None:
        """Note that a hook of ``plugin`` runs ``code`` (and so, when another's does too, that it is :attr:`shared`)."""
        found = self.owners.setdefault(code, plugin)
        if found != plugin:
            self.shared.setdefault(code, {found}).add(plugin)

    def owner_of(self, exc: BaseException) -> str | None:
        """The plugin whose hook raised ``exc`` (innermost hook frame in the traceback)."""
        tb = exc.__traceback__
        name = None
        while tb is not None:
            code = tb.tb_frame.f_code
            found = self.owners.get(code)
            if found is not None:
                shared = self.shared.get(code)
                name = found if shared is None else self._running(tb.tb_frame, shared) or name
            tb = tb.tb_next
        return name

    def _running(self, frame: FrameType, names: Collection[str]) -> str | None:
        """Which of ``names`` (plugins whose hooks run ``frame``'s code: instances of one class, or a helper such as
        :func:`~harness_one.log_gated` that several use) ``frame`` runs for: the one it holds (a method's ``self``
        first, then any local: a ``per_tool`` function's plugin, a bound method of it), else None (an outer frame's
        answer stands)."""
        ids = {id(self.plugins[name]): name for name in names if name in self.plugins}
        code, values = frame.f_code, frame.f_locals  # (an error's path only: reading a frame's locals costs)
        first = [values.get(code.co_varnames[0])] if code.co_argcount else []
        for value in itertools.chain(first, values.values()):
            found = ids.get(id(value)) or (ids.get(id(value.__self__)) if type(value) is MethodType else None)
            if found is not None:
                return found
        return None


def plugin_order(plugin: Any) -> float:
    """A plugin's ``order`` attribute, or 0 (see the ordering rule in ``hookspecs``); registration refuses
    an order that is no finite number, so the 0 is only for one changed after it, or a function."""
    try:
        order = getattr(plugin, "order", 0)
    except Exception:  # a property that broke after registration read it
        return 0
    return order if _order_ok(order) and not callable(order) else 0


def _order_ok(order: Any) -> bool:
    """Whether ``order`` is a finite real number (an int, a float, numpy's: not a bool, a string, None,
    NaN or an infinity), or a function or method that happens to be called ``order`` (not an order: 0)."""
    if callable(order):
        return True
    if isinstance(order, bool) or not isinstance(order, numbers.Real):
        return False
    return isinstance(order, numbers.Integral) or math.isfinite(order)


def _adapt(impl: pluggy.HookImpl, spec_args: tuple[str, ...]) -> Hook:
    """A positional callable for ``impl``, which may accept any subset of the spec's arguments."""
    fn = impl.function
    if tuple(impl.argnames) == spec_args:
        return fn
    index = [spec_args.index(a) for a in impl.argnames]
    return lambda *args: fn(*(args[i] for i in index))


def _prepare(impl: pluggy.HookImpl, spec_args: tuple[str, ...]) -> Callable[[Tool], Hook | None] | None:
    """``per_tool``: a function of the tool giving the positional callable for it, or None."""
    factory = getattr(impl.function, "harness_per_tool", None)
    if factory is None:
        return None
    plugin, argnames = impl.plugin, tuple(impl.argnames)
    if argnames == spec_args:
        return lambda tool: _checked(factory(plugin, tool), argnames)
    index = [spec_args.index(a) for a in impl.argnames]

    def prepare(tool: Tool) -> Hook | None:
        fn = _checked(factory(plugin, tool), argnames)
        if fn is None:
            return None
        adapted = lambda *args: fn(*(args[i] for i in index))  # noqa: E731
        adapted.__wrapped__ = fn  # type: ignore[attr-defined]  # its code names the plugin, not this lambda's
        return adapted

    return prepare


def _code(fn: Any) -> CodeType | None:
    """The code of a hook function, through what wraps it: a ``per_tool`` adapter, a
    ``functools.partial``, a bound method (a few layers at most); of a callable object, its ``__call__``'s."""
    for _ in range(8):
        inner = (
            fn.func if isinstance(fn, functools.partial) else getattr(fn, "__wrapped__", None) or getattr(fn, "__func__", None)
        )
        if inner is None:
            break
        fn = inner
    code = getattr(fn, "__code__", None)
    if code is None:
        code = getattr(inspect.getattr_static(type(fn), "__call__", None), "__code__", None)
    return code


def _applies(impl: pluggy.HookImpl) -> Callable[[Tool], bool] | None:
    predicate = getattr(impl.function, "harness_applies_to", None)
    if predicate is None:
        return None
    plugin = impl.plugin
    return lambda tool: bool(predicate(plugin, tool))


class PluginSet:
    """The plugins of one registry (``registry.plugins``).

    Plugins load by entry-point name from ``harness_one.plugins``; the standard ones (from
    the ``harness-one`` distribution itself) are ordinary entries there. Blocking a name
    keeps its plugin out; registering another plugin under a standard name replaces it.
    An entry point that names a class (or another callable factory) is called with the
    plugin's options (``options={"name": {...}}``, ``[plugins.<name>]`` in the CLI
    configuration, or ``HARNESS_ONE_PLUGIN_<NAME>``). Every change re-compiles the call plan,
    so the per-call path does no lookups.
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
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self._registry = registry
        self.manager = pluggy.PluginManager(hookspecs.PROJECT)
        self.manager.add_hookspecs(hookspecs)
        self.failures: list[LoadFailure] = []
        self.sources: dict[str, str] = {}
        _check_flag(standard, "standard_plugins", optional=False)  # named as ToolRegistry's arguments: it passes them on
        _check_flag(autoload, "autoload")
        _check_flag(strict, "strict")
        self.strict = _env_flag(ENV_STRICT) if strict is None else strict
        self._seq = itertools.count()
        self._registered_at: dict[int, int] = {}
        self._allowed: frozenset[str] | None = None
        self.plan = self._compile()
        _check_options(options)
        items: list[tuple[str | None, Any]] = (
            list(plugins.items()) if isinstance(plugins, Mapping) else [(None, p) for p in plugins]
        )
        given_names: set[str] = set()
        for n in (given or _own_name(plugin) for given, plugin in items):
            if not isinstance(n, str):
                continue
            if n in given_names:  # (a list's; a mapping's keys are unique) the later would silently replace the earlier
                raise PluginError(
                    f"plugins= holds two plugins named '{n}': give one, or give them other names with plugins={{name: plugin}}.",
                    plugin=n,
                )
            given_names.add(n)
        installed = {ep.name for ep in entry_points(PLUGIN_GROUP)} | given_names
        blocked = _names(block, "block") | _env_names(ENV_BLOCK)
        for name in blocked:
            self.manager.set_blocked(name)
        env_allow = _env_names(ENV_ALLOW)
        allowed = (
            _names(allow, "allow", "a list of plugin names, or None for every installed one")
            if allow is not None
            else (env_allow or None)
        )
        if allowed is not None and not allowed:  # (an empty HARNESS_ONE_PLUGINS is no allow-list)
            raise PluginError(
                "The allow-list is empty: it would load no plugin from entry points, validation included. Name the "
                "plugins to load, leave it out (allow=None) to load every installed one, or pass "
                "standard_plugins=False, autoload=False to load none."
            )
        self._allowed = None if allowed is None else frozenset(allowed)
        self._unknown_names(installed, blocked, allowed, "the allow-list" if allow is not None else ENV_ALLOW)
        autoload = (not _env_flag(ENV_NO_AUTOLOAD)) if autoload is None else autoload
        chosen, standard_of = self._choose(standard=standard, third_party=autoload, allowed=allowed)
        #: The options each plugin was built with (argument, then environment).
        self.options: dict[str, dict[str, Any]] = {n: dict(v) for n, v in env_options(chosen.keys() | given_names).items()}
        #: Names whose HARNESS_ONE_PLUGIN_<NAME> was read: another's is read when a class is registered under it.
        self._env_read = chosen.keys() | given_names
        for name, values in (options or {}).items():
            self.options[name] = {**self.options.get(name, {}), **values}
        #: Names given options by the argument (the rest came from HARNESS_ONE_PLUGIN_<NAME> only).
        self._given_options = {name for name, values in (options or {}).items() if values}
        for name, ep in chosen.items():
            if not self._load(name, ep) and name in standard_of:  # a broken replacement does not leave the name empty
                log_event(30, "replacing plugin failed to load: the standard one is used", name=name, failed=ep.distribution)
                self._load(name, standard_of[name])
        for given, plugin in items:
            if given is not None and not isinstance(plugin, type) and (options or {}).get(given):
                # (options from the environment, set for a whole fleet, do not apply to an object: not an error)
                raise PluginError(
                    f"Plugin '{given}': options {sorted(options[given])} were given, but the plugin was given "  # type: ignore[index]
                    "as an object, already built: give its class to build it with them",
                    plugin=given,
                )
            name = given if given is not None else _own_name(plugin)
            if isinstance(name, str) and self.manager.is_blocked(name):  # the block-list keeps it out, given or not
                self._misconfigured(
                    name, f"plugin '{name}' was given in plugins=, but that name is blocked", "given plugin blocked"
                )
                continue
            self._register(plugin, given, replace=True)
        self._unclaimed_options(installed | set(self.names()))
        self.plan = self._compile()

    # ------------------------------------------------------------------ loading

    def _choose(
        self, *, standard: bool, third_party: bool, allowed: set[str] | None
    ) -> tuple[dict[str, EntryPoint], dict[str, EntryPoint]]:
        """The entry point to load for each plugin name, and the standard ones that third-party plugins replace."""
        chosen: dict[str, EntryPoint] = {}
        replaced: dict[str, EntryPoint] = {}
        for ep in entry_points(PLUGIN_GROUP):
            if (ep.is_own and not standard) or (not ep.is_own and not third_party):
                continue
            if allowed is not None and ep.name not in allowed:
                continue
            if self.manager.is_blocked(ep.name):
                continue
            previous = chosen.get(ep.name)
            if previous is not None and ep.is_own:
                replaced[ep.name] = ep
                continue  # a third-party plugin of a standard name came first: it replaces the standard one
            if previous is not None and not previous.is_own:
                reason = f"name conflict: '{ep.name}' is already provided by {previous.distribution}"
                self.failures.append(LoadFailure(PLUGIN_GROUP, ep.name, ep.distribution, reason))
                log_event(30, "plugin name conflict", name=ep.name, kept=previous.distribution, skipped=ep.distribution)
                continue
            if previous is not None:
                replaced[ep.name] = previous
            chosen[ep.name] = ep  # a third-party plugin of a standard name replaces the standard one
        return chosen, replaced

    def _load(self, name: str, ep: EntryPoint) -> bool:
        """Load and register ``ep`` as plugin ``name``; False when it failed (recorded in ``failures``):
        its import, its factory, the contract's checks, its ``harness_configure`` or ``harness_tool_added``
        raising any ``Exception``, a :class:`ToolError` included.

        Options the plugin cannot be built with raise a :class:`PluginError`: the configuration
        is wrong, and a plugin left out for it (a rate limit) would let every call through. So does a
        set-up refusing the registry with a ``PluginError`` whose ``load_failure`` is False: an entry point
        naming one stateful plugin object, which a registry on another state than the first's refuses.
        """
        try:
            plugin = self._built(ep.load(), name, f"'{ep.value}'")
        except _BadOptions as bad:
            raise PluginError(str(bad), plugin=name) from bad.__cause__
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit or anything else at import: a load failure, not an exit
            self._failed(ep, exc)
            return False
        try:
            self._register(plugin, name, replace=False)
        except PluginError as exc:
            if exc.load_failure:
                self._failed(ep, exc)
                return False
            raise PluginError(
                f"Plugin '{name}' from {ep.distribution}: its entry point '{ep.value}' gives one plugin object to every "
                f"registry of the process. {exc} Name the plugin's class (or a factory building a new one) in the entry "
                "point, so each registry builds its own.",
                plugin=name,
            ) from exc
        except Exception as exc:  # its set-up raised (a ToolError too: its own Redis down): as a failed import
            self._failed(ep, exc)
            return False
        self.sources[name] = ep.distribution
        return True

    def _built(self, obj: Any, name: str | None, what: str) -> Any:
        """The plugin ``obj`` makes: a class or factory called with the options for ``name``, else ``obj``.

        Options it refuses (an unknown or misspelt name, a value of the wrong type) raise
        :class:`_BadOptions`, naming the plugin, the options and, for a name, the closest one it takes.
        So does any other ``Exception`` it raises while built with options (an ``AttributeError`` from
        a value of the wrong type it did not check): the options are what the configuration changed,
        and a plugin left out for them (logging, a rate limit) would be missed with only a warning.
        An ``ImportError`` or ``OSError`` (a package, file or server missing) fails for its environment,
        not its options: a load failure, as is any failure of a plugin built without options.
        """
        if name is not None and name not in self._env_read:  # blocked or left out at start-up, registered since
            for env_name, values in env_options([name]).items():  # the argument's options win, as at start-up
                self.options[env_name] = {**values, **self.options.get(env_name, {})}
            self._env_read.add(name)
        options = self.options.get(name, {}) if name is not None else {}
        factory = callable(obj) and not isinstance(obj, ModuleType) and (isinstance(obj, type) or not _is_plugin(obj))
        if not options:
            return obj() if factory else obj
        if not factory:
            raise _BadOptions(
                f"Plugin '{name}': options {sorted(options)} were given, but {what} is not a class or factory that takes them"
            )
        try:
            return obj(**options)
        except Exception as exc:  # an option it does not take, or a value it refuses (or fails on)
            if _environmental(exc):
                raise
            raise _BadOptions(_refused_options(name, obj, options, exc, self._origin(name))) from exc

    def _origin(self, name: str | None) -> str:
        """Where ``name``'s options came from, as far as the registry knows: the variable alone, or the
        argument (which the command line fills from its configuration file and ``-O``) and the variable."""
        env = env_key(name or "")
        if name not in self._given_options:
            return env
        return (
            f"plugin_options={{'{name}': ...}} or the configuration: [plugins.{name}] in harness-one.toml or "
            f"a --config file, -O {name}.<option>, or {env}"
        )

    def _unknown_names(self, known: set[str], blocked: set[str], allowed: set[str] | None, allow_from: str) -> None:
        """Plugin names in the configuration that no installed or given plugin has.

        In the allow-list an error (``validaton`` would leave every call unchecked); in the
        block-list or a ``HARNESS_ONE_PLUGIN_<NAME>`` variable a load failure (a warning, an
        error when strict), as options for an unknown name are: a shared configuration may
        name plugins some set-ups do not install.
        """
        for name in sorted((allowed or set()) - known):
            raise PluginError(f"{allow_from} names plugin '{name}', which is not installed{_hint(name, known)}", plugin=name)
        variables = {env_key(name) for name in known}
        unknown = [(f"{ENV_BLOCK} or the block-list", name) for name in sorted(blocked - known)]
        unknown += [(var, var) for var in sorted(os.environ) if var.startswith(ENV_OPTIONS_PREFIX) and var not in variables]
        for where, name in unknown:
            if where == name:  # HARNESS_ONE_PLUGIN_RATE_LIMT: the closest variable of an installed plugin
                error = f"{name} is set, but no installed plugin has that name{_hint(name, variables)}"
            else:
                error = f"{where} names plugin '{name}', which is not installed{_hint(name, known)}"
            self._misconfigured(name, error, "configuration names an unknown plugin")

    def _unclaimed_options(self, installed: set[str]) -> None:
        """Options for a name no installed or given plugin has (``[plugins.rate_limt]``): a load failure.

        Options for a plugin that is installed but blocked, not allowed or not autoloaded are
        not an error: the configuration may be shared by set-ups that load it.
        """
        for name in sorted(self.options.keys() - installed):
            if self.manager.is_blocked(name):
                continue
            hint = _hint(name, installed)
            error = f"options {sorted(self.options[name])} given for plugin '{name}', but no plugin has that name{hint}"
            self._misconfigured(name, error, "options for an unknown plugin", f"Plugin '{name}': ")

    def _misconfigured(self, name: str, error: str, event: str, prefix: str = "") -> None:
        """A load failure of "the configuration" naming ``name``: logged, and an error when strict."""
        self.failures.append(LoadFailure(PLUGIN_GROUP, name, "the configuration", error))
        log_event(30, event, name=name, error=error)
        if self.strict:
            raise PluginError(prefix + error, plugin=name)

    def _failed(self, ep: EntryPoint, exc: BaseException) -> None:
        self.failures.append(failure(ep, exc))
        if self.strict:
            raise PluginError(
                f"Plugin '{ep.name}' from {ep.distribution} failed to load: {exception_text(exc)}", plugin=ep.name
            ) from exc

    def _register(self, plugin: Any, name: str | None, *, replace: bool) -> str | None:
        if replace and name is not None:
            self._refuse_blocked(name)
        if isinstance(plugin, type):
            try:
                plugin = self._built(plugin, name or _own_name(plugin), plugin.__name__)
            except _BadOptions as bad:
                raise PluginError(str(bad), plugin=name) from bad.__cause__
        if name is None:
            name = _own_name(plugin)
        if plugin is None or isinstance(plugin, (Mapping, str, bytes, int, float, list, tuple)):  # before it replaces anything
            raise PluginError(
                f"Cannot register a {type(plugin).__name__} as plugin {name!r}: a plugin is an object, class or module "
                "with harness_* hooks (options go in plugin_options={name: {...}}, not in plugins=).",
                plugin=name,
            )
        if replace and name is not None:
            self._refuse_blocked(name)
        try:
            order = getattr(plugin, "order", 0)
        except Exception as exc:  # a property that raises: the plugin's fault, named as for a bad order
            raise PluginError(
                f"Plugin {name or type(plugin).__name__!r}: reading its order failed: {exception_text(exc)}.", plugin=name
            ) from exc
        if not _order_ok(order):  # read as 0, an `order = math.inf` meant as "last" ran first
            raise PluginError(
                f"Plugin {name or plugin!r}: order must be an int or a finite float (lower runs first; the standard "
                f"plugins use 10 to 95), got {order!r}.",
                plugin=name,
            )
        # All or nothing: the plugin it replaces leaves pluggy only (its hooks not called, its state
        # kept) until this one is registered, checked and set up; on any failure it is put back as it was.
        old = self.manager.get_plugin(name) if replace and name is not None else None
        if old is plugin:  # the same object again: it is set up and told its tools already, once
            return name
        seq = self._registered_at.get(id(old))
        removed = self._impls(old, "harness_tool_removed")  # while old is in pluggy: what tells it it left
        if old is not None:
            self.manager.unregister(old, name=name)
        registered = None
        try:
            registered = self.manager.register(plugin, name=name)
            if registered is not None:
                self._check(plugin, registered)
                self._registered_at[id(plugin)] = next(self._seq)
                self._call_plugin(plugin, "harness_configure", registry=self._registry)
                for tool in self._registry._tool_list():
                    self._call_plugin(plugin, "harness_tool_added", tool=tool, registry=self._registry)
        except BaseException as exc:  # not set up (its state cannot be opened): not left registered half-configured
            if name is not None and self.manager.get_plugin(name) is plugin:
                self.manager.unregister(plugin, name=name)
            self._registered_at.pop(id(plugin), None)
            if old is not None:
                self.manager.register(old, name=name)
                if seq is not None:
                    self._registered_at[id(old)] = seq
            if isinstance(exc, (ValueError, pluggy.PluginValidationError)):
                raise PluginError(f"Cannot register plugin {name or plugin!r}: {exc}", plugin=name) from exc
            raise
        if old is not None and registered is not None:
            self.sources.pop(registered, None)
            if old is not plugin:
                self._changed()  # the plan without it first: no call runs its hooks after it was told it left
                self._left(removed)
        return registered

    def _refuse_blocked(self, name: str) -> None:
        """A blocked name stays out until :meth:`unblock`: registering a plugin under it is a :class:`PluginError`."""
        if self.manager.is_blocked(name):
            raise PluginError(
                f"Plugin '{name}' is blocked: call registry.plugins.unblock({name!r}) before registering a plugin under it.",
                plugin=name,
            )

    def _left(self, removed: list[pluggy.HookImpl]) -> None:
        """Tell a plugin that left (``removed``: its ``harness_tool_removed`` implementations) that
        each tool left: a failure is logged, never raised, so a plugin can always be removed or blocked."""
        for tool in self._registry._tool_list():
            self._logged(
                "harness_tool_removed", self._outcomes(removed, "harness_tool_removed", tool=tool, registry=self._registry)
            )

    def _check(self, plugin: Any, name: str) -> None:
        """Refuse what the pipeline cannot honour: unknown hooks, hooks that would never run, per-call wrappers
        and coroutines."""
        if CHECK_HOOK_NAMES.get():
            self._check_names(plugin, name)
        self.manager.check_pending()
        for hook in PER_CALL_HOOKS:
            for impl in getattr(self.manager.hook, hook).get_hookimpls():
                if impl.plugin is not plugin:
                    continue
                if impl.hookwrapper or impl.wrapper:
                    raise PluginError(
                        f"Plugin '{name}': {hook} is a wrapper; per-call hooks cannot be wrappers. Use a pre_call "
                        "implementation with post_call/on_error ones (and call.state) to bracket an attempt.",
                        plugin=name,
                    )
                if inspect.iscoroutinefunction(impl.function) or inspect.isasyncgenfunction(impl.function):
                    raise PluginError(
                        f"Plugin '{name}': {hook} is a coroutine; per-call hooks are synchronous. "
                        "Return a decision (Outcome, Retry) and let the core do the waiting.",
                        plugin=name,
                    )

    def _check_names(self, plugin: Any, name: str) -> None:
        """Refuse a hook that would silently never run: a marked implementation of a misspelt hook name
        (``optionalhook=True`` keeps pluggy quiet about it), and, in a plugin that marks hooks, a method named as
        a hook (or a misspelling of one) left unmarked. A plugin that marks none is left as pluggy takes it."""
        callers = self.manager.get_hookcallers(plugin) or []
        for caller in callers:
            meant = misspelling_of(caller.name) if caller.spec is None else None
            if meant is not None:
                fn = next(i.function for i in caller.get_hookimpls() if i.plugin is plugin)
                raise PluginError(
                    f"Plugin '{name}': {getattr(fn, '__name__', caller.name)} implements {caller.name}, which no hook "
                    f"spec names, so it would never be called; did you mean '{meant}'?",
                    plugin=name,
                )
        if not callers:
            return
        for attr in dir(plugin):
            if not attr.startswith("harness_"):
                continue
            try:
                method = getattr(plugin, attr)
            except Exception:  # a property that raises: pluggy skipped it too
                continue
            if not inspect.isroutine(method) or self.manager.parse_hookimpl_opts(plugin, attr) is not None:
                continue
            hook = attr if attr in HOOK_NAMES else misspelling_of(attr)
            if hook is not None:
                raise PluginError(
                    f"Plugin '{name}': {attr} is not marked @hookimpl, as its other hooks are, so it would never be "
                    f"called as the hook '{hook}': mark it, or name it otherwise (set it to None to switch off an "
                    "inherited hook).",
                    plugin=name,
                )

    def _call_plugin(self, plugin: Any, hook: str, **kwargs: Any) -> None:
        spec_args = self._spec_args(hook, kwargs)
        for impl in self._impls(plugin, hook):
            self._guarded(impl, hook, spec_args, kwargs)

    def _spec_args(self, hook: str, kwargs: Mapping[str, Any]) -> tuple[str, ...]:
        """The argument names ``hook``'s spec takes, in order."""
        spec = getattr(self.manager.hook, hook).spec
        return tuple(spec.argnames) if spec else tuple(kwargs)

    def _impls(self, plugin: Any, hook: str) -> list[pluggy.HookImpl]:
        """``plugin``'s implementations of ``hook`` (none for None)."""
        return [impl for impl in getattr(self.manager.hook, hook).get_hookimpls() if plugin is not None and impl.plugin is plugin]

    def _guarded(self, impl: pluggy.HookImpl, hook: str, spec_args: tuple[str, ...], kwargs: Mapping[str, Any]) -> Any:
        try:
            return _adapt(impl, spec_args)(*(kwargs[a] for a in spec_args))
        except ToolError:
            raise
        except Exception as exc:  # its text masked: a set-up's error often holds its DSN or password
            raise PluginError(
                f"Plugin '{impl.plugin_name}' failed in {hook}: {exception_text(exc)}", plugin=impl.plugin_name
            ) from exc

    def _unregister(self, name: str) -> Any:
        """Take the plugin called ``name`` out, re-compile the plan, then tell it each tool left (see :meth:`_left`)."""
        plugin = self.manager.get_plugin(name)
        if plugin is None:
            return None
        removed = self._impls(plugin, "harness_tool_removed")
        self.manager.unregister(plugin, name=name)
        self._registered_at.pop(id(plugin), None)
        self.sources.pop(name, None)
        self._changed()
        self._left(removed)
        return plugin

    # ------------------------------------------------------------------ public API

    def register(self, plugin: Any, name: str | None = None) -> str:
        """Add ``plugin`` (object, module, or class to instantiate) under ``name``, replacing any plugin of that name
        (the same object again under its name changes nothing: it is neither set up nor told its tools again).

        Like every plugin change, under the registry's lock: a tool added meanwhile is told to the
        plugin once (``harness_tool_added``), neither twice nor never.
        """
        with self._registry._lock:
            registered = self._register(plugin, name, replace=True)
            if registered is None:  # pragma: no cover - a blocked name is refused before
                raise PluginError(f"Plugin '{name}' is blocked.", plugin=name)
            self._changed()
            return registered

    def replace(self, name: str, plugin: Any) -> str:
        """Put ``plugin`` in the place of the plugin called ``name`` (standard or not)."""
        return self.register(plugin, name)

    def unregister(self, name: str) -> Any:
        """Remove the plugin called ``name``; returns it (or None if there was none)."""
        with self._registry._lock:
            return self._unregister(name)

    def block(self, name: str) -> None:
        """Remove the plugin called ``name`` and keep it out until :meth:`unblock`."""
        with self._registry._lock:
            self._unregister(name)
            self.manager.set_blocked(name)

    def unblock(self, name: str) -> None:
        """Allow ``name`` again (a blocked standard plugin is not reloaded: register it, which a block refuses)."""
        with self._registry._lock:
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
        """Call ``hook`` on every plugin that implements it, in plan order: ``[(plugin name, result)]``.

        One that raises does not stop the others: once all were called, the first error is raised
        (a non-:class:`ToolError` exception as a :class:`PluginError` naming the plugin), the others logged.
        """
        outcomes = self._results(hook, **kwargs)
        error = self._first_error(hook, outcomes)
        if error is not None:
            raise error
        return [(name, result) for name, result, _ in outcomes]

    def observe(self, hook: str, **kwargs: Any) -> None:
        """Call ``hook`` on every plugin that implements it, in plan order, for what it observes:
        a plugin's failure is logged (naming it) and the next one is called."""
        self._logged(hook, self._results(hook, **kwargs))

    def _results(self, hook: str, **kwargs: Any) -> list[Answer]:
        """``(plugin name, result, error)`` for each plugin that implements ``hook``, in plan order."""
        return self._outcomes(self._sorted(getattr(self.manager.hook, hook)), hook, **kwargs)

    def _outcomes(self, impls: Iterable[pluggy.HookImpl], hook: str, **kwargs: Any) -> list[Answer]:
        """Call each of ``impls`` of ``hook``; one that raises does not stop the others."""
        spec_args = self._spec_args(hook, kwargs)
        outcomes: list[Answer] = []
        for impl in impls:
            try:
                outcomes.append((impl.plugin_name, self._guarded(impl, hook, spec_args, kwargs), None))
            except ToolError as exc:
                outcomes.append((impl.plugin_name, None, exc))
        return outcomes

    @staticmethod
    def _logged(hook: str, outcomes: Iterable[Answer]) -> None:
        for name, _, error in outcomes:
            if error is not None:
                log_event(40, "plugin failed", plugin=name, hook=hook, error=error.message)

    def _first_error(self, hook: str, outcomes: list[Answer]) -> ToolError | None:
        """The first error among ``outcomes``, the others logged."""
        failed = [outcome for outcome in outcomes if outcome[2] is not None]
        self._logged(hook, failed[1:])
        return failed[0][2] if failed else None

    def tool_changed(self, old: Tool | None, new: Tool) -> ToolError | None:
        """Tell the plugins, in plan order, that ``old`` (if any) left, then that ``new`` joined.

        All or nothing: a plugin whose ``harness_tool_added`` raises refuses ``new``, and before
        its error is raised every plugin told of ``new`` (that one too) is told it left, and every
        plugin is told ``old`` is back. A ``harness_tool_removed`` that raises refuses nothing: the
        others are told, and the first such error is returned, for the caller to raise once the change is made.
        """
        registry = self._registry
        removed = self._sorted(self.manager.hook.harness_tool_removed)
        added = self._sorted(self.manager.hook.harness_tool_added)
        joined = {"tool": new, "registry": registry}
        spec_args = self._spec_args("harness_tool_added", joined)
        gone = [] if old is None else self._outcomes(removed, "harness_tool_removed", tool=old, registry=registry)
        for i, impl in enumerate(added):
            try:
                self._guarded(impl, "harness_tool_added", spec_args, joined)
            except BaseException:
                plugins = {id(a.plugin) for a in added[: i + 1]}
                undo = [r for r in removed if id(r.plugin) in plugins]
                self._logged("harness_tool_removed", self._outcomes(undo, "harness_tool_removed", tool=new, registry=registry))
                if old is not None:
                    self._logged("harness_tool_added", self._outcomes(added, "harness_tool_added", tool=old, registry=registry))
                raise
        return self._first_error("harness_tool_removed", gone)

    # ------------------------------------------------------------------ compiling

    def _sorted(self, caller: pluggy.HookCaller) -> list[pluggy.HookImpl]:
        """The ordering rule of ``hookspecs``: tier, then ``order``, then newest first."""

        def key(impl: pluggy.HookImpl) -> tuple[int, float, int]:
            tier = 0 if impl.tryfirst else 2 if impl.trylast else 1
            return tier, plugin_order(impl.plugin), -self._registered_at.get(id(impl.plugin), 0)

        return sorted(caller.get_hookimpls(), key=key)

    def _changed(self) -> None:
        with self._registry._lock:  # compiled and published in one step: two changes at once lose neither
            self.plan = self._compile()
            self._registry._plans_changed()

    def _compile(self) -> Plan:
        steps: dict[str, tuple[_Step, ...]] = {}
        codes: list[tuple[CodeType, str]] = []  # each hook function's code, and its plugin's name
        order: dict[str, tuple[str, ...]] = {}
        for hook_name in PER_CALL_HOOKS:
            short = hook_name.removeprefix("harness_")
            caller = getattr(self.manager.hook, hook_name)
            spec_args = tuple(caller.spec.argnames)
            impls = self._sorted(caller)
            steps[short] = tuple(
                _Step(
                    _adapt(i, spec_args),
                    i.plugin_name,
                    _applies(i),
                    bool(getattr(i.function, "harness_keyed", False)),
                    _prepare(i, spec_args),
                    bool(getattr(i.function, "harness_after_decision", False)),
                )
                for i in impls
            )
            # the order they run in: on_error's after-decision implementations run after the others (see hookspecs)
            late = [bool(getattr(i.function, "harness_after_decision", False)) for i in impls]
            order[short] = tuple(i.plugin_name for i, after in zip(impls, late, strict=True) if not after) + tuple(
                i.plugin_name for i, after in zip(impls, late, strict=True) if after
            )
            codes += [(code, impl.plugin_name) for impl in impls if (code := getattr(impl.function, "__code__", None))]
        plugins = {name: plugin for name, plugin in self.manager.list_name_plugin() if plugin is not None}
        plan = Plan(steps=steps, owners={}, order=order, active=frozenset(plugins), allowed=self._allowed, plugins=plugins)
        for code, name in codes:
            plan.own(code, name)
        return plan


def _own_name(plugin: Any) -> Any:
    """The name a plugin given without one registers under: its ``name``, or a module's own."""
    return getattr(plugin, "name", None) or (plugin.__name__ if isinstance(plugin, ModuleType) else None)


def _hint(name: str, known: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for the name among ``known`` closest to ``name``, or nothing."""
    close = closest(name, known)
    return f"; did you mean '{close}'?" if close else ""


def _environmental(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was raised from, an ``ImportError`` or ``OSError``: a package, file or server
    missing (a client's ``ConnectionError`` that is no ``OSError`` chains the one it met)."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, (ImportError, OSError)):
            return True
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return False


class _BadOptions(Exception):
    """A plugin's options that it cannot be built with: raised as a :class:`PluginError`, never a load failure."""


def _refused_options(name: str | None, factory: Any, options: Mapping[str, Any], exc: BaseException, where: str) -> str:
    """Why ``factory`` refused ``options``: the error, for a name it does not take the closest one and the
    rest, and where the options came from."""
    text = capped(f"Plugin '{name}' cannot be built with its options {sorted(options)}: {exception_text(exc)}", 1000)
    try:
        parameters: list[inspect.Parameter] | None = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):  # a builtin or odd callable: the error says it all
        parameters = None
    if parameters is not None and not any(p.kind is p.VAR_KEYWORD for p in parameters):
        taken = sorted(p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        unknown = [key for key in options if key not in taken]
        if unknown:
            text += f"{_hint(unknown[0], taken)} It takes: {', '.join(taken) or 'no options'}."
    return f"{text} (the options come from {where})"


def _is_plugin(obj: Any) -> bool:
    """Whether ``obj`` already is a plugin instance (has hook implementations), not a factory."""
    return any(callable(getattr(obj, h, None)) for h in (*PER_CALL_HOOKS, "harness_tool_added", "harness_configure"))
