"""Private helpers of the standard plugins: options checked when the plugin is built, and the state
a plugin shared by registries keeps.

A wrong option is a ``ValueError`` naming it, so the plugin fails to load (reported by
``harness-one doctor``), rather than every call failing later with an internal error.
"""

from __future__ import annotations

import inspect
import math
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from harness_one import PluginError
from harness_one.state import redis_keys

if TYPE_CHECKING:
    from harness_one import ToolRegistry
    from harness_one.state import State

__all__ = ["StateRefused", "count", "flag", "joins", "own_or_default", "provides", "registry_of", "seconds", "takes_state"]

T = TypeVar("T")


@overload
def seconds(
    value: Any,
    what: str,
    *,
    zero: bool = ...,
    optional: Literal[False] = ...,
    minimum: float | None = ...,
    maximum: float | None = ...,
) -> float: ...
@overload
def seconds(
    value: Any, what: str, *, zero: bool = ..., optional: Literal[True], minimum: float | None = ..., maximum: float | None = ...
) -> float | None: ...
def seconds(
    value: Any,
    what: str,
    *,
    zero: bool = False,
    optional: bool = False,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float | None:
    """``value`` as a finite number of seconds: positive (or, with ``zero``, non-negative), at least
    ``minimum`` when given (a lease or polling interval of 1e-300 s would spin) and at most ``maximum``
    when given (what a store can keep); None if ``optional``.

    Infinity is refused: a wait or lifetime that never ends is ``None`` where an option allows it,
    and an infinite one reached the model as ``retry_after: "Infinity"`` or broke a Redis expiry.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value >= 0 if zero else value > 0):
        kind = "non-negative" if zero else "positive"
        raise ValueError(f"{what} must be a {kind} number of seconds{' or None' if optional else ''}, not {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an int past a float's range
        number = math.inf
    if number == math.inf:
        shown = value if isinstance(value, float) else "an integer past a float's range"
        raise ValueError(f"{what} must be a finite number of seconds{' or None' if optional else ''}, not {shown}")
    if minimum is not None and number < minimum and not (zero and number == 0):
        raise ValueError(f"{what} must be at least {minimum:g} seconds{' (or 0)' if zero else ''}, not {value!r}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{what} must be at most {maximum:g} seconds, not {value!r}")
    return number


@overload
def count(value: Any, what: str, *, optional: Literal[False] = ...) -> int: ...
@overload
def count(value: Any, what: str, *, optional: Literal[True]) -> int | None: ...
def count(value: Any, what: str, *, optional: bool = False) -> int | None:
    """``value`` as a positive integer; None if ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive integer{' or None' if optional else ''}, not {value!r}")
    return value


@overload
def flag(value: Any, what: str, *, optional: Literal[False] = ...) -> bool: ...
@overload
def flag(value: Any, what: str, *, optional: Literal[True]) -> bool | None: ...
def flag(value: Any, what: str, *, optional: bool = False) -> bool | None:
    """``value`` as true or false (not a string: ``"false"`` would read as true); None if ``optional``."""
    if value is None and optional:
        return None
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be true or false{' or None' if optional else ''}, not {value!r}")
    return value


def provides(value: Any, what: str, kind: str, methods: tuple[str, ...], *, optional: bool = False) -> Any:
    """``value`` when it has every method in ``methods`` (an attribute that is callable); None if
    ``optional`` and ``value`` is None.

    An object option (a store, a backend, a clock) of the wrong type, or a class given for an instance
    of it, is refused when the plugin is built, rather than every call failing later with an
    ``AttributeError``; the value is shown masked (a Redis URL's password).
    """
    if value is None and optional:
        return None
    names = ", ".join(f"{name}()" for name in methods)
    if isinstance(value, type) and not all(_static(value, name) for name in methods):  # unbound: every call would fail
        raise ValueError(f"{what} must be {kind}: an instance ({value.__name__}()), not the class {value.__name__}")
    if not all(callable(getattr(value, name, None)) for name in methods):
        from harness_one import Redactor  # (a refusal only: a URL given for a store holds its password)

        raise ValueError(f"{what} must be {kind} (an object with {names}), not {Redactor().mask(repr(value))}")
    return value


def _static(cls: type, name: str) -> bool:
    """Whether ``cls.name`` can be called on the class itself (a static or class method, ``now =
    time.monotonic``, a partial), not a plain function that needs an instance."""
    return not inspect.isfunction(inspect.getattr_static(cls, name, None))


def own_or_default(own: T | None, declined: bool, default: T | None) -> T | None:
    """A tool's policy for a plugin: its own (``own``), else none when the tool declined the plugin's
    ``default`` (``retry=False``, ``circuit_breaker=False``: ``tool.declined``), else that default."""
    if own is not None:
        return own
    return None if declined else default


class StateRefused(PluginError):
    """A registry refused a plugin that keeps another registry's state (:func:`takes_state`).

    Not a load failure (``load_failure``): an entry point that names a plugin object, shared by every
    registry of the process, would leave every registry after the first without the plugin (every call
    let through); the registry's creation fails instead."""

    load_failure = False


#: The attributes of a plugin keeping the state it took its store from, and (weakly, oldest first) the registries
#: that use it.
_TAKEN = "_harness_state_taken"
_USERS = "_harness_state_users"
#: Held while a plugin joining a registry checks and takes a state: two registries on different states built at
#: once in two threads both found no user, and the plugin ended on the second's state (registration only, so one
#: lock for every plugin).
_TAKING = threading.Lock()


def _forked() -> None:
    """A forked child's lock: another thread of the parent may have held it at the fork."""
    global _TAKING
    _TAKING = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_forked)


def takes_state(plugin: Any, registry: ToolRegistry, what: str, *own: str, in_file: bool = False) -> bool:
    """Whether ``plugin``, joining ``registry``, takes its store (its ``what``) from the registry's state:
    True the first time (the state it took them from, noted on the plugin by this function, is None)
    and when no registry that used that state still holds the plugin (each is gone, let the plugin go,
    or failed to be built);
    False when the state holds them too (the same ``State`` object, or Redis where the same keys are:
    :func:`~harness_one.state.redis_keys`; a memory or SQLite state keeps them to itself, unless
    ``in_file``: ``what`` are rows of a SQLite state's file, idempotency records, which every state on
    that file, by its resolved path, holds), so the plugin keeps its store.

    Any other state is a :class:`StateRefused` (the registry refuses the plugin): taking that state's
    store would leave the first registry's ``what`` where none of its calls looks (a budget's counts,
    an open circuit, a claimed idempotency key). ``own`` names the plugin's arguments that give it a
    store of its own, which any registries may share.

    The check and the take are one step (under a lock), and a registry still being built holds the plugin
    (one whose building failed does not, though a reference cycle keeps it alive): of two registries on two
    states built at once in two threads, the second is refused.
    """
    state = registry.state
    with _TAKING:
        taken: State | None = vars(plugin).get(_TAKEN)
        users = _users(plugin)
        if taken is None or not users:
            vars(plugin)[_TAKEN], vars(plugin)[_USERS] = state, [weakref.ref(registry)]
            return True
        if state is taken or (state.redis and redis_keys(state) == redis_keys(taken)) or (in_file and _one_file(state, taken)):
            vars(plugin)[_USERS] = _joined(users, registry)
            if own:  # the store it keeps, under its first own argument's name: this state holds it open too
                state.holds(getattr(plugin, own[0], None))
            return False
    ways = " or ".join(f"{type(plugin).__name__}({name}=...)" for name in own)
    same = "only the same State object, or Redis at the same URL and key prefix, is the same state"
    if in_file:
        same = "only the same State object, Redis at the same URL and key prefix, or SQLite at the same file, is the same state"
    raise StateRefused(
        f"The {plugin.name} plugin keeps its {what} in the state of the registry it was first added to "
        f"({_where(taken)}), and this registry has another state ({_where(state)}; {same}): give the registries one state "
        f"(ToolRegistry(state=first.state)), or give the plugin its own {what} ({ways}) to share it between them.",
        plugin=plugin.name,
    )


def _one_file(state: State, other: State) -> bool:
    """Whether two SQLite states are on one file, by their resolved paths (``:memory:`` is a database per connection)."""
    paths = [os.path.realpath(s.path) for s in (state, other) if s.path is not None and str(s.path) != ":memory:"]
    return len(paths) == 2 and paths[0] == paths[1]


def joins(plugin: Any, registry: ToolRegistry) -> None:
    """Note ``registry`` among those using ``plugin``, which has a store of its own (:func:`takes_state` notes
    the others), for :func:`registry_of`."""
    with _TAKING:
        vars(plugin)[_USERS] = _joined(_users(plugin), registry)


def _users(plugin: Any) -> list[weakref.ref[ToolRegistry]]:
    """The registries noted as using ``plugin`` that still hold it, oldest first."""
    return [ref for ref in vars(plugin).get(_USERS, ()) if _holds(ref(), plugin)]


def _joined(users: list[weakref.ref[ToolRegistry]], registry: ToolRegistry) -> list[weakref.ref[ToolRegistry]]:
    """``users`` with ``registry`` last, noted once (a plugin registered again in one registry noted it each time)."""
    return [*(ref for ref in users if ref() is not registry), weakref.ref(registry)]


def registry_of(plugin: Any) -> ToolRegistry | None:
    """The registry whose clock (and tools) ``plugin`` reads: the last it joined (:func:`takes_state`, :func:`joins`,
    last in their list), while alive, else the newest registry still holding it (one dropped by the application,
    another still used, did not leave it without a clock); None when none does."""
    users: list[weakref.ref[ToolRegistry]] = vars(plugin).get(_USERS, [])  # (replaced, never changed in place)
    last = users[-1]() if users else None
    if last is not None:
        return last
    for ref in reversed(users):
        user = ref()
        if _holds(user, plugin):
            return user
    return None


def _holds(registry: ToolRegistry | None, plugin: Any) -> bool:
    """Whether ``registry`` (None: gone) holds ``plugin``. One without ``plugins`` yet is being built, and holds it
    (in whichever thread), unless its building failed (``_unbuilt``, set then: a reference cycle may keep it alive
    until the garbage collector runs)."""
    if registry is None or getattr(registry, "_unbuilt", False):
        return False
    plugins = getattr(registry, "plugins", None)
    return plugins is None or any(plugins.get(name) is plugin for name in plugins.names())


def _where(state: State) -> str:
    """``state`` as an error shows it: its ``repr`` (a password masked), and a prefix given apart from the URL."""
    return repr(state) if state.prefix is None else f"{state!r} with prefix {state.prefix!r}"
