"""The base of every kit class: the override guard and capability flags."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import math
import os
import sys
import sysconfig
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Coroutine, Mapping
from types import FrameType
from typing import Any, ClassVar, NoReturn, TypeVar

import pytest

from .._clock import ManualClock

__all__ = [
    "GUARD",
    "BoundedClock",
    "Overran",
    "Progress",
    "Stopped",
    "Suite",
    "bounded",
    "added_marks",
    "kit_functions",
    "kit_marks",
    "progress",
    "run_async",
    "tuning_changes",
    "xfail_reason",
]

_T = TypeVar("_T")

#: The guard's name: like langchain-tests', it says what it is in every report.
GUARD = "test_no_overrides_DO_NOT_OVERRIDE"
_KIT = "harness_one.testing"


def xfail_reason(fn: Any) -> str | None:
    """The non-empty ``reason=`` of an ``@pytest.mark.xfail`` on ``fn``, or None."""
    for mark in getattr(fn, "pytestmark", ()):
        reason = mark.kwargs.get("reason") if mark.name == "xfail" else None
        if isinstance(reason, str) and reason.strip():
            return reason
    return None


#: The attribute under which a kit function records how many marks the kit itself gave it (a ``parametrize``).
_OWN_MARKS = "_harness_own_marks"


def _marks(fn: Any) -> list[Any]:
    """The marks ``fn`` itself carries (``pytest.mark.x(fn)`` stores them on ``fn``)."""
    found = vars(fn).get("pytestmark", ()) if hasattr(fn, "__dict__") else ()
    return list(found) if isinstance(found, (list, tuple)) else [found]


def added_marks(fn: Any) -> list[Any]:
    """The marks put on kit function ``fn`` after the kit defined it (``pytest.mark.x(fn)`` appends to its list)."""
    return _marks(fn)[getattr(fn, _OWN_MARKS, 0) :]


def kit_marks(fn: Any) -> list[Any]:
    """The marks the kit itself gave its function ``fn`` (a ``parametrize``)."""
    return _marks(fn)[: getattr(fn, _OWN_MARKS, 0)]


def _mark_names(fn: Any) -> list[str]:
    return [getattr(m, "name", "?") for m in _marks(fn)]


def kit_functions(cls: type) -> dict[int, tuple[str, Any]]:
    """The standard tests of every kit class ``cls`` inherits from, by ``id``: their names and functions."""
    found: dict[int, tuple[str, Any]] = {}
    for kit in cls.__mro__:
        if kit.__dict__.get("_harness_is_standard"):
            for name, fn in kit.__dict__["_harness_standard"].items():
                found[id(fn)] = (name, fn)
    return found


def tuning_changes(cls: type) -> list[str]:
    """The tuning attributes of kit class ``cls`` (a subclass of a kit class) that differ from the kit's values."""
    found = []
    for kit in cls.__mro__:
        for name in kit.__dict__.get("_harness_tuning", {}) if kit.__dict__.get("_harness_is_standard") else ():
            if getattr(cls, name) != getattr(kit, name):
                found.append(f"{name} = {getattr(cls, name)!r} (the kit's: {getattr(kit, name)!r})")
    return found


def _dir(path: str) -> str:
    return os.path.normcase(os.path.abspath(path)) + os.sep


#: Where the frames of harness-one itself and of the standard library are (but for the packages installed in it: a
#: plugin or tool package under test may be one): not the code under test.
_HARNESS_ONE = _dir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_LIBRARY = (_HARNESS_ONE, _dir(sysconfig.get_path("stdlib")))
_INSTALLED = tuple({_dir(sysconfig.get_path(k)) for k in ("purelib", "platlib")})
#: The files of a worker thread's own first frames: not shown.
_PLUMBING = frozenset(os.path.abspath(f) for f in (threading.__file__, __file__))
#: Frames of a stuck thread's stack a report shows (the innermost ones).
_SHOWN_FRAMES = 12


def _own_code(frame: FrameType, *, library: bool = True) -> bool:
    """Whether ``frame`` runs code under test: not harness-one's, nor (``library``) the standard library's."""
    path = os.path.normcase(os.path.abspath(frame.f_code.co_filename))
    if path.startswith(_HARNESS_ONE):
        return False
    return not library or path.startswith(_INSTALLED) or not path.startswith(_LIBRARY)


def _where(frame: FrameType) -> str:
    return f"{frame.f_code.co_name} ({os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno})"


class Progress:
    """How many calls the running check has made (``done``, of ``total`` when it says), so that a check past its
    deadline that was still making calls is reported as slow, not stuck; and, once ``stop`` says why, the check's loop
    ends at its next call (:meth:`made` raises :class:`Stopped`)."""

    def __init__(self) -> None:
        self.done = 0
        self.total = 0
        self.stop: str | None = None
        #: Whether the kit traces the calls now (``tracemalloc``, which makes them dearer): a slow report says so.
        self.traced = False

    def made(self) -> None:
        """One more call made; raises :class:`Stopped` once ``stop`` is set."""
        self.done += 1
        if self.stop is not None:
            raise Stopped(self.stop)


class Stopped(Exception):
    """The end of a check's loop that its :class:`Progress` stopped (its deadline passed, or the kit's clock)."""


#: The running check's progress (set in the check's worker thread, where :func:`progress` finds it).
_PROGRESS: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("harness_one_kit_progress", default=None)


def progress(total: int) -> Progress:
    """The running check's :class:`Progress`, which will make ``total`` calls (a new one, run outside a check)."""
    found = _PROGRESS.get() or Progress()
    found.total = total
    return found


#: Seconds between the looks :func:`bounded` takes at a check's progress (at most: a shorter deadline, that).
_SAMPLE = 1.0


class Overran(Exception):
    """Work :func:`bounded` ran did not end in time: ``where`` it is stuck, the stuck thread's ``stack``, and the
    ``worker`` thread left running it. ``slow``: it was still making calls, ``(done, total, seconds, traced)``, so it is
    slow, not stuck (its loop is then stopped; ``traced``: the kit was tracing the calls then)."""

    def __init__(
        self,
        seconds: float,
        where: str,
        stack: str,
        worker: threading.Thread | None = None,
        slow: tuple[int, int, float, bool] | None = None,
    ) -> None:
        super().__init__(f"did not return within {seconds:g} s: stuck in {where}")
        self.seconds, self.where, self.stack, self.worker, self.slow = seconds, where, stack, worker, slow


def _stuck(threads: list[threading.Thread], locate: Callable[[FrameType], str | None]) -> tuple[str, str]:
    """Where ``threads`` (the worker first) are stuck, and the stack of the most telling one: the first frame
    ``locate`` names, from the innermost out, else the innermost frame of the code under test."""
    frames = sys._current_frames()
    found: list[tuple[int, str, threading.Thread, FrameType]] = []
    for thread in threads:
        top = frames.get(thread.ident) if thread.ident is not None else None
        if top is None:
            continue
        frame: FrameType | None = top
        rank, where = 2, _where(top)
        while frame is not None:
            named = locate(frame)
            if named is not None:
                rank, where = 0, named
                break
            if rank == 2 and _own_code(frame):
                rank, where = 1, _where(frame)
            frame = frame.f_back
        found.append((rank, where, thread, top))
    if not found:
        return "a thread that has ended", ""
    rank, where, thread, top = min(found, key=lambda f: f[0])
    others = sum(1 for f in found if f[1] == where and f[2] is not thread)
    summary = traceback.extract_stack(top)
    while summary and os.path.abspath(summary[0].filename) in _PLUMBING:  # the thread's start and this runner
        summary.pop(0)
    lines = summary.format()[-_SHOWN_FRAMES:]
    head = f"thread {thread.name!r}" + (f" (and {others} other thread(s) stuck there too)" if others else "")
    return where, f"{head}, most recent call last:\n" + "".join(lines).rstrip()


def bounded(
    seconds: float,
    work: Callable[[], Any],
    *,
    locate: Callable[[FrameType], str | None] = lambda f: None,
    made: Progress | None = None,
) -> Any:
    """What ``work`` returns, run in a daemon thread (in a copy of this context) given ``seconds``; what it raises is
    raised here. Past ``seconds``, :class:`Overran` is raised, naming where the worker, or a thread it started, is
    stuck (the frame ``locate`` names, or else the innermost frame of the code under test) with that thread's stack;
    the stuck thread is left behind (a daemon: it cannot keep the process alive), and Ctrl-C still stops the run.
    With ``made`` (the work's :class:`Progress`): when its count moved over the last look (each ``_SAMPLE`` seconds),
    and moves again within a grace of ``max(_SAMPLE, 20 x`` its mean time per call``)`` past ``seconds`` (a call that
    got stuck a moment before the deadline is not counted as progress), the work is slow, not stuck: the
    :class:`Overran` says so, and ``made`` is stopped."""
    before = {t.ident for t in threading.enumerate()}
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # raised again in the caller's thread (a skip, a failure too)
            outcome["error"] = exc

    context = contextvars.copy_context()
    worker = threading.Thread(target=context.run, args=(run,), daemon=True, name="harness-one-conformance-check")
    began = time.monotonic()
    worker.start()
    if seconds == math.inf:
        worker.join()  # (join refuses an infinite timeout: no deadline then)
    looks = [(began, 0), (began, 0)]  # the count at the last two looks, each at least _SAMPLE seconds after the one before
    while worker.is_alive() and (left := began + seconds - time.monotonic()) > 0:
        worker.join(min(left, _SAMPLE))
        now = time.monotonic()
        if made is not None and now - looks[1][0] >= _SAMPLE:
            looks = [looks[1], (now, made.done)]
    if worker.is_alive():
        started = [t for t in threading.enumerate() if t.ident not in before and t is not worker]
        if made is not None and made.done > looks[0][1] and _moves_again(made, worker, began):  # slow, not stuck
            elapsed, traced = time.monotonic() - began, made.traced
            made.stop = f"stopped after {elapsed:.1f} s, past the check's deadline"
            raise Overran(seconds, "a loop of calls", "", worker=worker, slow=(made.done, made.total, elapsed, traced))
        raise Overran(seconds, *_stuck([worker, *started], locate), worker=worker)
    if "error" in outcome:
        error = outcome.pop("error")
        raise error
    return outcome.get("value")


def _moves_again(made: Progress, worker: threading.Thread, began: float) -> bool:
    """Whether ``made`` counts one more call (or ``worker`` ends) within ``max(_SAMPLE, 20 x`` the mean time per call so
    far``)``: calls that ended over the last look before the deadline do not tell a slow loop from one stuck since."""
    done, now = made.done, time.monotonic()
    until = now + max(_SAMPLE, 20 * (now - began) / max(done, 1))
    while made.done == done and worker.is_alive() and (left := until - time.monotonic()) > 0:
        worker.join(min(left, 0.01))
    return made.done != done or not worker.is_alive()


class _DaemonThreads(concurrent.futures.ThreadPoolExecutor):
    """An event loop's default executor that runs each job in a new daemon thread, which nothing joins: a
    ``ThreadPoolExecutor``'s workers are joined at interpreter exit, so one job stuck in a check left behind by
    :func:`bounded` would keep the run from ending after its report. Shutting it down waits for nothing."""

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[_T]:
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # the awaiting coroutine raises it
                future.set_exception(exc)

        threading.Thread(target=run, daemon=True, name="harness-one-conformance-worker").start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None


def run_async(coro: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(coro)``, with the loop's worker threads (``asyncio.to_thread``, ``run_in_executor(None, ...)``,
    where ``acall`` runs a blocking tool) daemons that nothing joins: a call stuck in one cannot keep the process
    alive once its check has failed, and the run ends without waiting for it."""

    async def main() -> _T:
        asyncio.get_running_loop().set_default_executor(_DaemonThreads())
        return await coro

    return asyncio.run(main())


#: The kit's clocks made while the running check runs (a list the check sets): checked when it ends.
_CLOCKS: contextvars.ContextVar[list[BoundedClock] | None] = contextvars.ContextVar("harness_one_kit_clocks", default=None)


class BoundedClock(ManualClock):
    """The kit's manual clock: every wait is instant, so a check ends its waits by counting them.

    Past ``max_waits`` waits (``sleep`` or ``asleep``), each wait raises an ``AssertionError``, which ends the
    call (the core reports it as an internal error), and ``exceeded`` says so: a check that made the clock fails
    with it when it ends, whatever the calls ended in, so a plugin that retries or waits without end fails the
    check instead of hanging it or passing it.
    """

    max_waits: ClassVar[int] = 100_000

    def __init__(self, start: float = 0.0) -> None:
        super().__init__(start)
        self.waits = 0
        #: What went wrong once the waits passed ``max_waits`` (None before).
        self.exceeded: str | None = None
        made = _CLOCKS.get()
        if made is not None:
            made.append(self)
        #: The progress of the check that made the clock: stopped once the waits pass ``max_waits``, so its loop of
        #: calls ends instead of logging an internal error for each call left.
        self._progress = _PROGRESS.get()

    def sleep(self, seconds: float) -> None:  # ``asleep`` waits through ``sleep``
        super().sleep(seconds)
        with self._lock:
            self.waits += 1
            waits = self.waits
        if waits > self.max_waits:
            message = (
                f"the calls waited {waits} times: a plugin that retries or waits without end? "
                f"(the kit's clock makes each wait instant and stops after {self.max_waits:,} waits)"
            )
            if self.exceeded is None:
                self.exceeded = message
                if self._progress is not None:
                    self._progress.stop = "the kit's clock stopped the calls"
            raise AssertionError(message)


def _fail_if_overran(clocks: list[BoundedClock], ended: BaseException | None) -> None:
    """Fail the check when one of the kit's ``clocks`` it made passed its waits, naming what the check ended in."""
    exceeded = next((c.exceeded for c in clocks if c.exceeded is not None), None)
    if exceeded is None or isinstance(ended, (KeyboardInterrupt, SystemExit)):
        return
    then = (
        ""
        if ended is None or isinstance(ended, Stopped)
        else f"\n(the check then ended in {type(ended).__name__}: {str(ended)[:300]})"
    )
    pytest.fail(f"the kit's clock stopped the calls: {exceeded}{then}", pytrace=False)


#: Per suite class, the check left stuck past its deadline, and how: while its thread runs, the suite's later checks
#: fail at once (what the stuck code holds, a lock shared by every instance, would stall each of them in turn).
_STUCK: weakref.WeakKeyDictionary[type, tuple[str, Overran]] = weakref.WeakKeyDictionary()


def _bounded_check(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Check ``fn``, run in a daemon thread given ``check_deadline`` seconds: past them it fails, naming where it is
    stuck (what the suite's ``_harness_locate`` names: a plugin's hook, a store's method) and showing its thread's
    stack; the suite's later checks then fail at once, naming it, for as long as it stays stuck. ``functools.wraps``
    keeps ``fn``'s signature, so pytest passes the check its fixtures (by name)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def check(self: Suite, *args: Any, **kwargs: Any) -> Any:
        what, how = self._harness_stuck
        first = _STUCK.get(type(self))
        if first is not None and first[1].worker is not None and first[1].worker.is_alive():
            pytest.fail(
                f"not run: {first[0]}, before it, is still stuck in {first[1].where}, and this check would wait on what "
                f"that {what} holds (a lock, a slot, a connection) until its own deadline: make that {what} return (see the "
                f"failure of {first[0]}), and every check runs again",
                pytrace=False,
            )
        given = signature.bind_partial(self, *args, **kwargs).arguments
        clocks: list[BoundedClock] = []
        made = Progress()

        def work() -> Any:
            _CLOCKS.set(clocks)  # (in the worker's own copy of the context)
            _PROGRESS.set(made)
            return fn(self, *args, **kwargs)

        stuck: Overran | None = None
        try:
            value = bounded(self.check_deadline, work, locate=self._harness_locate(given), made=made)
        except Overran as overran:
            stuck = overran  # failed below, outside the handler: the report is the whole story
        except Stopped:  # the kit's clock stopped the check's loop: failed below, outside the handler
            pass
        except BaseException as ended:  # a failure, a skip: a clock that stopped the calls is the cause
            _fail_if_overran(clocks, ended)
            raise
        else:
            _fail_if_overran(clocks, None)
            return value
        if stuck is None:
            _fail_if_overran(clocks, None)
            pytest.fail(f"{fn.__name__}: its calls were stopped: {made.stop}", pytrace=False)
        if stuck.slow is not None:  # still making calls: its loop stops at the next one, and the later checks run
            done, total, elapsed, traced = stuck.slow
            of = f" of {total:,}" if total else ""
            included = "hooks and the kit's tracing included" if traced else "hooks included"
            why = (
                "raise check_deadline for a plugin this slow, or make its hooks faster"
                if not traced
                else "the kit traces the last calls with tracemalloc, which makes them dearer: raise check_deadline for "
                "a plugin this slow, or make its hooks faster"
            )
            pytest.fail(
                f"{fn.__name__} did not end within check_deadline = {self.check_deadline:g} s, but it was not stuck: "
                f"{done:,}{of} calls in {elapsed:.1f} s ({1000 * elapsed / max(done, 1):.2f} ms per call, {included}): "
                f"too slow for check_deadline ({why})",
                pytrace=False,
            )
        _STUCK[type(self)] = (fn.__name__, stuck)
        pytest.fail(
            f"{fn.__name__} did not end within check_deadline = {self.check_deadline:g} s: stuck in {stuck.where}, "
            f"which never returned ({how}; raise check_deadline if the check only needs longer)\n{stuck.stack}",
            pytrace=False,
        )

    return check


def _methods(kind: type) -> dict[Any, type]:
    """The code of each function defined in ``kind`` and its bases (but for the built-in ones), and the class that
    defines it."""
    found: dict[Any, type] = {}
    for klass in kind.__mro__:
        if klass.__module__ == "builtins":
            continue
        for value in vars(klass).values():
            fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            code = getattr(inspect.unwrap(fn), "__code__", None) if callable(fn) else None
            if code is not None:
                found.setdefault(code, klass)
    return found


class Suite:
    """What every kit class shares. Subclass a kit class (never this one) in your tests.

    Each kit class records, when it is defined, its standard tests and the helpers its checks rely
    on (its other public callables, but for those it names as ``provided``: what an implementer
    fills in). The guard compares the subclass against that record: a test overridden, set to
    ``None`` or deleted is found, and allowed only under ``@pytest.mark.xfail(reason=...)`` (a
    known failure, said out loud); a helper overridden is never allowed. Checks that do not apply
    are switched off with the suite's capability flags, which skip them with the flag's name as
    the reason. ``standard=True`` is for the kit's own classes only.

    Each check runs in a daemon thread given ``check_deadline`` seconds (30; ``math.inf``: no deadline): one that
    does not end fails, naming where it is stuck and showing the stuck thread's stack, instead of hanging the run;
    while it stays stuck, the suite's later checks fail at once, naming it.
    """

    #: Seconds each check may run before it fails as stuck (``math.inf``: no deadline).
    check_deadline: ClassVar[float] = 30.0
    #: What a stuck check's failure calls the code it waits in, and how such code gets stuck (per kit class).
    _harness_stuck: ClassVar[tuple[str, str]] = (
        "method",
        "a method that waits for what only another call gives, or no one: a lock never released, a connection or "
        "a reply waited for without a timeout",
    )

    #: Lets the pytest plugin tell kit tests apart without importing the kit.
    __harness_one_suite__: ClassVar[bool] = True
    _harness_standard: ClassVar[dict[str, Callable[..., Any]]] = {}
    #: The helpers the checks rely on, and what implementers provide or override (set per kit class).
    _harness_helpers: ClassVar[dict[str, Any]] = {}
    _harness_provided: ClassVar[tuple[str, ...]] = ()
    #: The kit class's tuning attributes, and whether its value is a floor (a lower one weakens a check).
    _harness_tuning: ClassVar[Mapping[str, bool]] = {"check_deadline": False}

    def __init_subclass__(cls, *, standard: bool = False, provided: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if standard:
            if not cls.__module__.startswith(_KIT + "."):
                raise TypeError(
                    f"{cls.__qualname__} passes standard=True, which only the conformance kit's own suites "
                    f"(modules under {_KIT}) may: subclass the suite without it."
                )
            names = [n for n in dir(cls) if not n.startswith("_")]
            for n, value in list(cls.__dict__.items()):  # the kit class's own checks, as it runs them
                if n.startswith("test_") and callable(value):
                    setattr(cls, n, cls._harness_check(value))
            cls._harness_tuning = {**Suite._harness_tuning, **cls.__dict__.get("_harness_tuning", {})}
            cls._harness_standard = {n: inspect.getattr_static(cls, n) for n in names if n.startswith("test_")}
            for fn in cls._harness_standard.values():
                if not hasattr(fn, _OWN_MARKS):  # the marks the kit gives its own check (a parametrize), which it keeps
                    setattr(fn, _OWN_MARKS, len(_marks(fn)))
            found = {n: inspect.getattr_static(cls, n) for n in names if not n.startswith("test_") and n not in provided}
            cls._harness_helpers = {n: v for n, v in found.items() if callable(v) or isinstance(v, (classmethod, property))}
            cls._harness_provided = provided
            cls._harness_is_standard = True  # type: ignore[attr-defined]
        elif GUARD in cls.__dict__:
            raise TypeError(f"{cls.__qualname__} overrides {GUARD}; the guard of the conformance kit cannot be overridden.")
        else:
            cls._harness_is_standard = False  # type: ignore[attr-defined]

    #: How a kit class runs each of its own checks: bounded by ``check_deadline``.
    _harness_check = staticmethod(_bounded_check)

    def _harness_locate(self, given: Mapping[str, Any]) -> Callable[[FrameType], str | None]:
        """What names the frame a stuck check waits in, given the check's arguments: a method of what the suite's
        subclass provides (a contract's ``store``, ``peer``, ``backend``...), as ``the store's Class.method``."""
        provided = {n for kit in type(self).__mro__ for n in kit.__dict__.get("_harness_provided", ())}
        named: dict[Any, str] = {}
        for name, value in given.items():
            if name in provided:
                for code, klass in _methods(type(value)).items():
                    named.setdefault(code, f"the {name}'s {klass.__name__}.")

        def locate(frame: FrameType) -> str | None:
            owner = named.get(frame.f_code)
            return owner + _where(frame) if owner is not None else None

        return locate

    def test_no_overrides_DO_NOT_OVERRIDE(self) -> None:  # noqa: N802 - the name is the message
        """No standard test is overridden or deleted without ``@pytest.mark.xfail(reason=...)``, and no helper the
        checks rely on is overridden."""
        cls = type(self)
        problems = []
        for kit in cls.__mro__:
            if not kit.__dict__.get("_harness_is_standard"):
                continue
            for name, original in kit.__dict__["_harness_standard"].items():
                current = inspect.getattr_static(cls, name, None)
                if current is original:
                    marks = [getattr(m, "name", "?") for m in added_marks(original)]
                    own = any(
                        name in k.__dict__
                        for k in cls.__mro__
                        if k not in (object, Suite) and not k.__dict__.get("_harness_is_standard")
                    )
                    if marks and own:
                        problems.append(
                            f"{name} is the kit's own function with {', '.join('@pytest.mark.' + m for m in marks)} put on "
                            "it: the mark lands on the function every suite in the session shares (and would switch the "
                            f"check in each of them), so the kit ignores it; write def {name}(self, ...): super().{name}(...) "
                            "under the mark instead"
                        )
                    continue
                if not callable(current):
                    problems.append(f"{name} is deleted (now {current!r})")
                elif skipped := [m for m in _mark_names(current) if m in ("skip", "skipif")]:
                    problems.append(
                        f"{name} is overridden with @pytest.mark.{skipped[0]}, which hides whether it passes: mark a known "
                        "failure with @pytest.mark.xfail(reason=...), or switch the check off with its capability flag"
                    )
                elif xfail_reason(current) is None:
                    problems.append(f"{name} is overridden without @pytest.mark.xfail(reason=...)")
                elif any(m.name == "xfail" and not m.kwargs.get("run", True) for m in _marks(current)):
                    problems.append(
                        f"{name} is overridden under @pytest.mark.xfail(run=False), which never runs it: neither a failure "
                        "nor a pass is seen"
                    )
            for name, floor in kit.__dict__.get("_harness_tuning", {}).items():
                if floor and getattr(cls, name) < getattr(kit, name):
                    problems.append(
                        f"{name} = {getattr(cls, name)!r} is below the kit's {getattr(kit, name)!r}, which it may only raise"
                    )
            provided = ", ".join(kit.__dict__["_harness_provided"]) or "nothing"
            for name, original in kit.__dict__["_harness_helpers"].items():
                if inspect.getattr_static(cls, name, None) is not original:
                    problems.append(
                        f"{name} is overridden, but the checks rely on it (a {kit.__name__} subclass overrides only: {provided})"
                    )
        assert not problems, (
            f"{cls.__qualname__} changes the conformance kit's standard tests or the helpers they rely on: "
            + "; ".join(sorted(problems))
            + ". Mark a known failure with @pytest.mark.xfail(reason='why'), switch a check off with its capability flag, "
            "and override only what the suite asks you to provide."
        )

    def switched_off(self, flag: str, meaning: str) -> NoReturn:
        """Skip the running check: capability ``flag`` says it does not apply."""
        pytest.skip(f"switched off: {type(self).__name__}.{flag} = {getattr(self, flag)!r} ({meaning})")

    def nothing_to_check(self, why: str) -> NoReturn:
        """Skip the running check: what it checks is not there (listed in the summary as switched off are)."""
        pytest.skip(f"nothing to check: {why}")
