"""What the stateful plugins share: lease renewal in one thread, the fail mode when state is unreachable,
the :class:`~harness_one.Await` answer of a hook whose state is a network round trip, and the
tokens and keyword checks of the stores' ownership arguments."""

from __future__ import annotations

import inspect
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._call import Await, new_token
from .._lazy import lazy_module
from .._log import log_event
from ._protocols import StateUnavailable

if TYPE_CHECKING:
    import asyncio
else:  # read only under a running loop: a sync call never imports asyncio
    asyncio = lazy_module("asyncio", __name__)

__all__ = ["FAIL_MODES", "Accepts", "AsyncTwins", "FailMode", "LeaseKeeper", "new_token", "round_trip"]

_T = TypeVar("_T")

#: ``open``: the call goes ahead without the policy; ``closed``: the call fails with :class:`StateUnavailable`.
FAIL_MODES = ("open", "closed")

#: Every lease keeper and fail mode, made fit for a forked child (see :func:`_forked`).
_FORKED: weakref.WeakSet[Any] = weakref.WeakSet()


def _forked() -> None:
    """In a forked child only the forking thread goes on: each keeper forgets the items of the
    parent's calls (renewing, or retaking, them would hold the parent's slots and keys for as long
    as the child lives) and each lock is new (another thread may have held the old one, for ever now)."""
    for owner in list(_FORKED):
        owner._forked()


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_forked)


class FailMode:
    """A plugin's answer to :class:`StateUnavailable`: fail ``open`` (count it, warn at most every
    ``warn_every`` seconds, let the call through) or ``closed`` (raise it, naming the tool)."""

    def __init__(self, plugin: str, mode: str, *, warn_every: float = 5.0) -> None:
        if mode not in FAIL_MODES:
            raise ValueError(f"{plugin}: on_state_error must be 'open' or 'closed', not {mode!r}")
        self.plugin = plugin
        self.mode = mode
        self.warn_every = warn_every
        self.failed_open = 0
        self.failed_closed = 0
        self._warned = -float("inf")
        self._lock = threading.Lock()
        _FORKED.add(self)

    def _forked(self) -> None:
        self._lock = threading.Lock()

    def handle(self, exc: StateUnavailable, tool: str, call_id: str | None, what: str) -> None:
        """Raise ``exc`` for this call (closed), or return after counting it (open)."""
        if self.mode == "closed":
            with self._lock:
                self.failed_closed += 1
            exc.tool, exc.call_id = tool, call_id
            raise exc
        self.note(exc, tool, f"{what}; call admitted")
        with self._lock:
            self.failed_open += 1

    def note(self, exc: BaseException, tool: str, what: str) -> None:
        """Warn (rate-limited) that shared state failed while doing ``what``."""
        now = time.monotonic()
        with self._lock:
            if now - self._warned < self.warn_every:
                return
            self._warned = now
        where = getattr(exc, "where", None)  # (a StateUnavailable names its backend there, not in its message)
        log_event(30, f"{self.plugin}: shared state unavailable", tool=tool, action=what, error=str(exc), where=where)

    def stats(self) -> dict[str, Any]:
        """The counters that are not zero: ``state_failed_open``, ``state_failed_closed``."""
        counts = {"state_failed_open": self.failed_open, "state_failed_closed": self.failed_closed}
        return {name: n for name, n in counts.items() if n}


class LeaseKeeper:
    """One daemon thread that renews every held item each ``period()`` seconds, measured from the
    start of the last pass (on ``clock``), so a slow pass shortens the next wait.

    ``renew(items)`` renews a pass's items (one round trip where the store can batch them) and
    answers, for each, whether it was still held. An item is a tuple whose first element names
    its tool. A lapsed one (False: its lease ended while its call ran) is counted, logged with
    its tool, and given to ``retake(item)``, which takes it again if no one else holds it
    (True) or else it is dropped. Started on the first :meth:`hold`, ended when nothing is
    held. A failing pass is logged, and the next one tries again (the leases may lapse while
    the state is unreachable).
    """

    def __init__(
        self,
        name: str,
        period: Callable[[], float],
        renew: Callable[[list[Any]], Sequence[bool]],
        *,
        retake: Callable[[Any], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._name = name
        self._period = period
        self._renew = renew
        self._retake = retake
        self._clock = clock
        self._held: dict[Hashable, Any] = {}
        self._retaking: set[Hashable] = set()  # handles whose lapsed items wait to be taken again
        self._in_flight: Hashable | None = None  # the handle whose item is being taken again now
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self.lapsed = 0
        self.retaken = 0
        _FORKED.add(self)

    def _forked(self) -> None:
        """In a forked child: the held items are the parent's calls' (which do not run here), and the
        renewing thread is gone. A child's copy of a call the forking thread itself was making is not
        renewed either: the lease is its parent's (whose keeper goes on renewing it)."""
        self._held = {}
        self._retaking = set()
        self._in_flight = None
        self._wake = threading.Condition()
        self._thread = None

    def hold(self, handle: Hashable, item: Any) -> None:
        with self._wake:
            self._held[handle] = item
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=f"harness-one-{self._name}-leases", daemon=True)
                self._thread.start()

    def drop(self, handle: Hashable) -> None:
        """Stop renewing ``handle``'s item. If its lapsed lease is being taken again right now, once
        that round trip ends: the caller then gives the item back, so a retake never comes after."""
        with self._wake:
            while handle is not None and handle == self._in_flight:
                self._wake.wait()
            self._retaking.discard(handle)  # (not retaken now: its call ended)
            self._held.pop(handle, None)

    def stats(self) -> dict[str, Any]:
        """The counters that are not zero: ``leases_lapsed``, ``leases_retaken``."""
        counts = {"leases_lapsed": self.lapsed, "leases_retaken": self.retaken}
        return {name: n for name, n in counts.items() if n}

    def _run(self) -> None:
        started = self._clock()
        while True:
            with self._wake:
                # (at most TIMEOUT_MAX: a lease of 1e15 s made a wait the platform refused, ending the thread)
                self._wake.wait(min(max(0.0, started + self._period() - self._clock()), threading.TIMEOUT_MAX))
                held = list(self._held.items())
                if not held:
                    self._thread = None
                    return
            started = self._clock()
            self._pass(held)

    def _pass(self, held: list[tuple[Hashable, Any]]) -> None:
        """Renew ``held`` (handles and items); a lapsed item is retaken or dropped."""
        try:
            renewed = self._renew([item for _, item in held])
        except Exception as exc:  # the store is unreachable for now: the leases may lapse
            tools = sorted({str(item[0]) for _, item in held})
            log_event(30, f"{self._name}: leases not renewed", tools=tools, held=len(held), error=f"{type(exc).__name__}: {exc}")
            return
        lapsed = [(handle, item) for (handle, item), kept in zip(held, renewed) if not kept]
        if lapsed:
            self._lapse(lapsed)

    def _lapse(self, lapsed: list[tuple[Hashable, Any]]) -> None:
        """Items whose leases ended while their calls ran: each taken again, or dropped. Each round
        trip runs outside the lock (calls hold and drop meanwhile); a call that ends before its
        item's turn is skipped, and one that ends during it waits in :meth:`drop` for it."""
        with self._wake:
            chosen: list[tuple[Hashable, Any]] = [(h, item) for h, item in lapsed if self._held.get(h) is item]  # (not ended)
            self._retaking.update(handle for handle, _ in chosen)
        tools: set[str] = set()
        ended = retaken = 0
        for handle, item in chosen:
            with self._wake:
                if handle not in self._retaking:  # its call ended meanwhile
                    continue
                self._retaking.discard(handle)
                self._in_flight = handle
            tools.add(str(item[0]))
            kept = False
            try:
                kept = self._retaken(item)
            finally:
                with self._wake:
                    self._in_flight = None
                    if not kept and self._held.get(handle) is item:
                        del self._held[handle]
                    self._wake.notify_all()  # a drop that waited for this retake
            ended += 1
            retaken += kept
        with self._wake:
            self.lapsed += ended
            self.retaken += retaken
        if tools:
            log_event(
                30, f"{self._name}: leases lapsed while their calls ran", tools=sorted(tools), lapsed=ended, retaken=retaken
            )

    def _retaken(self, item: Any) -> bool:
        if self._retake is None:
            return False
        try:
            return self._retake(item)
        except Exception as exc:  # the store failed again: the item is dropped
            log_event(30, f"{self._name}: lapsed lease not retaken", tool=str(item[0]), error=f"{type(exc).__name__}: {exc}")
            return False


class AsyncTwins:
    """Whether a backend's operations are round trips with awaitable twins (Redis), as a plugin asks.

    ``twins(store)`` is ``store`` when it has the method ``probe`` names (``"atake"``, ...),
    else None. The last store found without it is kept as ``plain``, so a hot path skips even
    the call: ``if store is not twins.plain: shared = twins(store)``.
    """

    __slots__ = ("plain", "probe")

    def __init__(self, probe: str) -> None:
        self.probe = probe
        self.plain: object = None

    def __call__(self, store: object) -> Any:
        if store is self.plain:
            return None
        if hasattr(store, self.probe):
            return store
        self.plain = store
        return None


class Accepts:
    """Whether a store's methods take the keyword argument ``name``, as a plugin asks.

    Such an argument (an idempotency claim's ``owner``, a budget give-back's ``ticket``) came after
    the protocol's first version: a store written before it is called without it. Every method
    of ``methods`` the store has must take it. The answer for the last store asked is kept, so
    a hot path pays one identity check; :meth:`keywords` builds the arguments of one call.
    """

    __slots__ = ("_last", "methods", "name")

    def __init__(self, name: str, *methods: str) -> None:
        self.name = name
        self.methods = methods
        self._last: tuple[object, bool] | None = None

    def __call__(self, store: object) -> bool:
        last = self._last
        if last is not None and last[0] is store:
            return last[1]
        answer = all(_takes(getattr(store, method), self.name) for method in self.methods if hasattr(store, method))
        self._last = (store, answer)
        return answer

    def keywords(self, store: object, value: Any, **more: Any) -> dict[str, Any]:
        """The keyword arguments of one call of ``store``: ``{name: value, **more}``, or none when
        ``value`` is None or the store was written before ``name`` (``more`` came with it)."""
        if value is None or not self(store):
            return {}
        more[self.name] = value  # ``more`` is this call's own dict
        return more


def _takes(function: Any, name: str) -> bool:
    try:
        found = inspect.signature(function).parameters.get(name)
    except (TypeError, ValueError):  # no signature to read (a builtin, a mock's spec)
        return False
    return found is not None and found.kind in (found.POSITIONAL_OR_KEYWORD, found.KEYWORD_ONLY)


def round_trip(
    sync: Callable[[], _T],
    aio: Callable[[], Awaitable[_T]],
    then: Callable[[_T], Any],
    failed: Callable[[StateUnavailable], Any],
    cancelled: Callable[[], Await] | None = None,
) -> Await:
    """A hook's :class:`~harness_one.Await` answer: the backend's blocking ``sync()`` under ``call``,
    its awaitable ``aio()`` under ``acall``; then ``then(reply)`` is the hook's answer, or
    ``failed(exc)`` when the backend raised :class:`StateUnavailable` (the same on both paths).

    ``cancelled()`` gives the cleanup of an ``aio()`` its caller's cancellation cut short (whether
    the request was sent is not known: one cancelled before its write is not): a release of what
    it may have taken, or the same request again when it is safe to repeat. It is carried out
    (:func:`_clean_up`) before the cancellation goes on.
    """

    def blocking() -> Any:
        try:
            reply = sync()
        except StateUnavailable as exc:
            return failed(exc)
        return then(reply)

    async def awaiting() -> Any:
        try:
            reply = await aio()
        except StateUnavailable as exc:
            return failed(exc)
        except asyncio.CancelledError:
            if cancelled is not None:
                await _clean_up(cancelled())
            raise
        return then(reply)

    return Await(blocking, awaiting)


async def _clean_up(pending: Await) -> None:
    """Carry out a cancelled round trip's cleanup: ``aio()`` awaited (the task's cancellation was
    delivered: it runs), or ``sync()`` if the task is cancelled again meanwhile (a closing loop), as
    the core finishes a cancelled call. Its failure is logged: the cancellation goes on."""
    try:
        try:
            await pending.aio()
        except asyncio.CancelledError:
            pending.sync()
    except Exception as exc:
        log_event(30, "cleanup of a cancelled call failed", error=f"{type(exc).__name__}: {exc}")
