"""Every hook harness-one calls, with its contract. Plugins implement them with :data:`hookimpl`.

A plugin is any object or module with ``harness_*`` functions marked ``@hookimpl``. Register
it on a registry (``registry.plugins.register(obj, name="mine")``) or ship it in the
``harness_one.plugins`` entry-point group; the entry-point name is the plugin's name, which
is what blocking, replacing and configuring (``[plugins.<name>]``) use.

The path of one call (see ``docs/architecture.md``)::

    decode arguments -> pre_validate* -> [ pre_call* -> tool -> post_call* ] -> answer
                                              \\-- on error: on_error* -> Retry? -> again

pluggy cannot await, so hooks never run the tool: the core owns execution (sync, async,
threads, sleeping between attempts) and hooks return *decisions*. Per-call hooks are plain
synchronous functions (coroutines and pluggy wrappers are refused at registration with a
:class:`~harness_one.PluginError`); they run on every call, so keep them fast. A hook that
needs I/O for its answer (a Redis round trip) returns :class:`~harness_one.Await` from
``pre_call``, ``post_call`` or ``on_error``: ``call`` fetches it blocking, ``acall`` awaits it.
Implementations may take any subset of a hook's arguments, as with every pluggy hook.

What crosses between plugins is declared on :class:`~harness_one.Call` (``arguments``,
``deadline``, ``total_deadline``, ``timeout``, ``runner``, ``lingering``, ``result``, ``decision``; ``state`` keys belong to the
plugin that writes them) and on :class:`~harness_one.ToolError` (``kind``, ``retry_after``,
``replayed``). Nothing else is shared.

**The ordering rule.** For each per-call hook, implementations run sorted by

1. tier: ``@hookimpl(tryfirst=True)`` first, unmarked next, ``@hookimpl(trylast=True)`` last;
2. then the plugin's ``order`` attribute, ascending (an int or a finite float; default 0; a function called ``order`` is no order; any other value is a PluginError at registration);
3. then newest registration first.

Standard plugins have orders 10-95 (``docs/plugins.md``), so a third-party plugin with no
``order`` runs before them within its tier. ``registry.plugins.plan.order`` and
``harness-one doctor`` show the resulting order. Set-up hooks are called in the same order.

**Per-tool hooks.** :func:`applies_to` limits an implementation to some tools, for every
per-call hook; an implementation that does not apply to a tool is not called for it at all.
:func:`per_tool` goes further: a factory prepares, once per tool, the function called for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

if TYPE_CHECKING:
    from ._call import Call, Outcome, Retry
    from ._errors import ToolError
    from ._registry import ToolRegistry
    from ._tool import Tool

__all__ = ["PER_CALL_HOOKS", "PROJECT", "applies_to", "hookimpl", "hookspec", "per_tool"]

PROJECT = "harness_one"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: The hooks run for every call, in the order they run.
PER_CALL_HOOKS = ("harness_pre_validate", "harness_pre_call", "harness_post_call", "harness_on_error")

_F = TypeVar("_F", bound=Callable[..., Any])


def applies_to(
    predicate: Callable[[Any, Tool], bool] | None = None, *, keyed: bool = False, after_decision: bool = False
) -> Callable[[_F], _F]:
    """Mark a per-call hook implementation as relevant only to some tools, or some calls.

    ``predicate(plugin, tool)`` is evaluated once per tool when the call plan is prepared
    (when plugins change, or the first time a tool is called), never per call; for other
    tools the implementation is not called at all. The predicate must therefore depend only
    on the tool and on plugin settings fixed at construction::

        @hookimpl
        @applies_to(lambda plugin, tool: tool.rate_limit is not None)
        def harness_pre_call(self, call): ...

    ``keyed=True``: the implementation is called only for calls that carry an idempotency
    key (the registry prepares a plan with it and one without, and picks one per call).

    ``after_decision=True`` (on_error): the implementation acts only on another one's decision
    (``call.decision``), so a tool none of whose other on_error implementations applies runs it
    not at all (a failed call of such a tool pays for no on_error call).
    """

    def mark(fn: _F) -> _F:
        if predicate is not None:
            fn.harness_applies_to = predicate  # type: ignore[attr-defined]
        if keyed:
            fn.harness_keyed = True  # type: ignore[attr-defined]
        if after_decision:
            fn.harness_after_decision = True  # type: ignore[attr-defined]
        return fn

    return mark


def per_tool(factory: Callable[[Any, Tool], Callable[..., Any] | None]) -> Callable[[_F], _F]:
    """Mark a per-call hook implementation as prepared once per tool.

    ``factory(plugin, tool)`` is called when the tool's call plan is prepared (like an
    :func:`applies_to` predicate, never per call) and returns the function the pipeline calls
    for that tool, with the arguments the implementation takes, or ``None`` when the
    implementation does not apply to the tool. What depends only on the tool (its policy,
    its compiled schema, its counters) is then looked up once, not on every call::

        @hookimpl
        @per_tool(lambda plugin, tool: plugin.prepare(tool))
        def harness_pre_call(self, call):
            prepared = self.prepare(call.tool)  # what pluggy itself calls: the same answer
            return None if prepared is None else prepared(call)

    The factory, like a predicate, depends only on the tool and on settings fixed at
    construction. The decorated implementation stays what ``plugins.manager.hook`` calls, and
    must answer as the prepared function does.
    """

    def mark(fn: _F) -> _F:
        fn.harness_per_tool = factory  # type: ignore[attr-defined]
        return fn

    return mark


# --------------------------------------------------------------------------- set-up hooks


@hookspec
def harness_register_tools(register: Callable[..., Any]) -> None:
    """Contribute tools from a tool package.

    Call ``register(fn_or_tool, **definition)`` once per tool; ``definition`` takes the same
    keywords as :func:`~harness_one.defineTool`. The registry names, de-duplicates and
    attributes the tools (``Tool.source`` is the distribution). Used by modules named in the
    ``harness_one.tools`` entry-point group.
    """


@hookspec
def harness_configure(registry: ToolRegistry) -> None:
    """This plugin joined ``registry``: bind to what the registry provides, once.

    Called before any tool hook, with the registry whose ``clock``, ``limits`` and
    ``state`` (shared-state backends: memory, SQLite or Redis, from ``state=`` or the
    configuration) the plugin should use unless it was given its own.
    """


@hookspec
def harness_tool_added(tool: Tool, registry: ToolRegistry) -> None:
    """A tool joined ``registry`` (or this plugin joined a registry that has the tool).

    Prepare per-tool state here, once: compile validators, create buckets. Never per call.
    """


@hookspec
def harness_tool_removed(tool: Tool, registry: ToolRegistry) -> None:
    """A tool left ``registry`` (removed or replaced), or this plugin left: drop its per-tool state."""


@hookspec
def harness_stats(registry: ToolRegistry) -> Mapping[str, Any] | None:
    """Return this plugin's statistics; ``registry.stats()`` files them under the plugin's name.

    A ``"tools"`` entry (``{tool name: {...}}``) is merged into the per-tool statistics.
    """


# --------------------------------------------------------------------------- per-call hooks


@hookspec
def harness_call_refused(registry: ToolRegistry, name: str, error: ToolError) -> None:
    """A request refused before it became a call, so no per-call hook saw it: an unknown tool
    name, a ``context`` that is not a mapping, a bad ``idempotency_key`` or ``call_id``, an async
    tool called without ``await`` inside a running loop, a provider request ``dispatch`` cannot
    read. Observe it (log, count, trace); ``error`` is what the caller gets. ``name`` is the name
    asked for as text (at most 200 characters; empty when the request named none). Every
    implementation is called; one that raises is logged, never raised.
    """


@hookspec
def harness_pre_validate(call: Call) -> None:
    """Normalise or check ``call.arguments`` before the call is admitted. Runs once per call.

    Arguments arrive decoded into a ``dict``: a JSON string is parsed by the core, so its keys are
    strings; a caller's dict is as given, its keys checked after these hooks (a key that is no
    string is the caller's :class:`~harness_one.ToolArgumentError`, also when a hook fails on
    it). Replace ``call.arguments`` to normalise them; raise
    :class:`~harness_one.ToolArgumentError` to refuse them. Return ``None``: any other answer
    (a returned error too) is a :class:`~harness_one.PluginError` naming the plugin. The standard ``validation``
    plugin is ``trylast``, so normalisers without markers run before it and see unvalidated
    input. Errors here go to ``on_error``, which may translate them (``Outcome.failure``)
    but not retry or recover them.
    """


@hookspec(firstresult=True)
def harness_pre_call(call: Call) -> Outcome | ToolError | None:
    """Admit, refuse or answer the call. Runs before every attempt, retries included.

    Return ``None`` to admit; raise a :class:`~harness_one.ToolError` (such as
    :class:`~harness_one.RateLimitExceeded`) to refuse, or return it: the same refusal
    without the cost of raising it (what the rate limit does on every refused call: a new
    error each time, as the core writes the call's id and tool on it); return
    an :class:`~harness_one.Outcome` to answer without running the tool (a replayed
    idempotent result). The first answer wins and later implementations are skipped.
    May set ``call.deadline``, ``call.timeout`` and ``call.runner`` for this attempt (the
    core clears them before each attempt and enforces ``timeout``).
    """


@hookspec
def harness_post_call(call: Call) -> None:
    """Observe or transform a successful result, in ``call.result``. Runs once per success.

    Assign ``call.result`` to transform it. Raising a :class:`~harness_one.ToolError` turns
    the success into that error (and sends it to ``on_error``). Return ``None`` (or an
    :class:`~harness_one.Await` whose ``sync()``/``aio()`` answers ``None``): any other answer (a
    returned ``ToolError`` or ``Outcome``, or one the ``Await`` answers) is a
    :class:`~harness_one.PluginError` naming the plugin and the answer's type (never its value),
    and the result does not go out.
    """


@hookspec
def harness_on_error(call: Call, error: BaseException) -> Retry | Outcome | None:
    """Observe a failed attempt and optionally decide what happens next.

    ``error`` is always a :class:`~harness_one.ToolError` (an exception from the tool
    arrives wrapped in :class:`~harness_one.ToolExecutionError`, the original as
    ``__cause__``; a stored outcome replayed by idempotency has ``error.replayed``; a
    cancelled call arrives as :class:`~harness_one.ToolCancelled`, to which no answer is a
    decision). Return :class:`~harness_one.Retry` to run the attempt again after its delay,
    an :class:`~harness_one.Outcome` to recover with a value or translate the error, or
    ``None`` to let it stand (arguments refused before admission can only be translated: a
    ``Retry`` or a recovering ``Outcome`` there is no decision). Every implementation is called;
    the first non-``None`` decision is taken and set as ``call.decision``, so implementations that run after it
    (observers such as logging and metrics, which are ``trylast``) see whether a retry
    follows. An implementation that raises is reported as a
    :class:`~harness_one.PluginError` naming its plugin, after the others have run. For an
    error that was raised, the hooks run while it is handled (``sys.exc_info()``, so
    ``logging.exception`` reports it); a refusal a pre_call hook returned was never raised.
    """
