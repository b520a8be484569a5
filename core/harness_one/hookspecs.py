"""Every hook harness-one calls, with its contract. Plugins implement them with :data:`hookimpl`.

A plugin is any object or module with ``harness_*`` functions marked ``@hookimpl``. Register
it on a registry (``registry.plugins.register(obj, name="mine")``) or ship it in the
``harness_one.plugins`` entry-point group; the entry-point name is the plugin's name, which
is what blocking and replacing use.

The path of one call (see ``docs/architecture.md``)::

    decode arguments -> pre_validate* -> [ pre_call* -> tool -> post_call* ] -> answer
                                              \\-- on error: on_error* -> Retry? -> again

pluggy cannot await, so hooks never run the tool: the core owns execution (sync, async,
threads, sleeping between attempts) and hooks return *decisions*. All per-call hooks are
synchronous and should be fast: they run on every call. Implementations may take any subset
of a hook's arguments, as with every pluggy hook.

Ordering follows pluggy: later-registered implementations run first; ``tryfirst=True`` and
``trylast=True`` move an implementation to the front or the back. The standard plugins use
these markers so that third-party plugins land in sensible places by default (see each hook).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

if TYPE_CHECKING:
    from ._call import Call, Outcome, Retry
    from ._registry import ToolRegistry
    from ._tool import Tool

__all__ = ["PROJECT", "applies_to", "hookimpl", "hookspec"]

PROJECT = "harness_one"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

_F = TypeVar("_F", bound=Callable[..., Any])


def applies_to(predicate: Callable[[Any, Tool], bool]) -> Callable[[_F], _F]:
    """Mark a per-call hook implementation as relevant only to some tools.

    ``predicate(plugin, tool)`` is evaluated once per tool when the call plan is prepared
    (when plugins change, or the first time a tool is called), never per call; for other
    tools the implementation is not called at all. The predicate must therefore depend only
    on the tool and on plugin settings fixed at construction::

        @hookimpl
        @applies_to(lambda plugin, tool: tool.rate_limit is not None)
        def harness_pre_call(self, call): ...
    """

    def mark(fn: _F) -> _F:
        fn.harness_applies_to = predicate  # type: ignore[attr-defined]
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
def harness_tool_added(tool: Tool, registry: ToolRegistry) -> None:
    """A tool joined ``registry`` (or this plugin joined a registry that has the tool).

    Prepare per-tool state here, once: compile validators, create buckets. Never per call.
    """


@hookspec
def harness_tool_removed(tool: Tool, registry: ToolRegistry) -> None:
    """A tool left ``registry`` (removed or replaced): drop its per-tool state."""


@hookspec
def harness_stats(registry: ToolRegistry) -> Mapping[str, Any] | None:
    """Return this plugin's statistics; ``registry.stats()`` files them under the plugin's name."""


# --------------------------------------------------------------------------- per-call hooks


@hookspec
def harness_pre_validate(call: Call) -> None:
    """Normalise or check ``call.arguments`` before the call is admitted. Runs once per call.

    Arguments arrive already decoded into a ``dict`` (a JSON string is parsed by the core).
    Replace ``call.arguments`` to normalise them; raise
    :class:`~harness_one.ToolArgumentError` to refuse them. The standard ``validation``
    plugin runs ``trylast``, so normalisers registered without markers run before it and
    see unvalidated input. Errors here go to ``on_error``, which may translate them
    (``Outcome.failure``) but not retry or recover them.
    """


@hookspec(firstresult=True)
def harness_pre_call(call: Call) -> Outcome | None:
    """Admit, refuse or answer the call. Runs before every attempt, retries included.

    Return ``None`` to admit; raise a :class:`~harness_one.ToolError` (such as
    :class:`~harness_one.RateLimitExceeded`) to refuse; return an
    :class:`~harness_one.Outcome` to answer without running the tool (a replayed
    idempotent result). The first ``Outcome`` wins and later implementations are skipped.
    Implementations may set ``call.deadline`` (a ``clock.now()`` value) to bound the attempt.
    """


@hookspec
def harness_post_call(call: Call) -> None:
    """Observe or transform a successful result, in ``call.result``. Runs once per success.

    Assign ``call.result`` to transform it. Raising a :class:`~harness_one.ToolError` turns
    the success into that error (and sends it to ``on_error``).
    """


@hookspec
def harness_on_error(call: Call, error: BaseException) -> Retry | Outcome | None:
    """Observe a failed attempt and optionally decide what happens next.

    ``error`` is always a :class:`~harness_one.ToolError` (an exception from the tool
    arrives wrapped in :class:`~harness_one.ToolExecutionError`, the original as
    ``__cause__``). Return :class:`~harness_one.Retry` to run the attempt again after its
    delay, an :class:`~harness_one.Outcome` to recover with a value or translate the error,
    or ``None`` to let it stand. Every implementation is called; the first non-``None``
    decision is taken and stored in ``call.state["decision"]``, so implementations marked
    ``trylast`` (logging, metrics) can see whether a retry follows.
    """
