"""How a sync tool runs when its attempt has a timeout (or is in process mode): in a worker thread, or in a worker process.

The guarantees differ, and the docs say so (``docs/plugins.md``, timeouts):

- :class:`ThreadRunner` *abandons*: the caller gets :class:`ToolTimeout` at the deadline,
  but a Python thread cannot be killed, so the tool runs on in its worker until it returns.
  The pool is bounded; abandoned workers are counted as ``stuck``; when every worker is busy
  a new call fails at once with :class:`ToolBusy` instead of queueing.
- :class:`ProcessRunner` *kills*: the tool runs in a warm worker process that leads its own
  session and process group; at the deadline, or when the call is cancelled, the whole group
  and (Linux) the rest of the session are killed (SIGKILL) and reaped (under ``arun``, in a
  thread of its own, never one of the loop's executor, which sync tools may hold), and the worker is replaced; a call cancelled before its tool started gets
  :class:`ToolCancelled`, its job not sent. Answers are read within the call's deadline and
  must echo their job's id. Arguments, results and exceptions cross a socket, so they must
  pickle, and the tool function must be importable by name (a ``defineTool`` function is sent
  as the wrapper left under its name; a module loaded from a file under a name that does not
  find it is imported in the worker from that file); a job the worker cannot load is refused
  (``call.ran`` False), as is a call whose worker could not be started; an exception that does not unpickle is rebuilt without
  its ``__init__``, else comes back as a :class:`ToolError` rebuilt from its description.
  POSIX only. A tool's ``options["memory_limit"]`` (bytes) bounds the address space its call
  may add in the worker (``RLIMIT_AS``, Linux only). The timeout plugin runs a ``process``-mode
  tool here with no timeout too (``math.inf``: no deadline).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from . import _worker
from ._call import Lingering
from ._errors import (
    ToolBusy,
    ToolCancelled,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolTimeout,
    call_failure,
    exception_text,
    outside_text,
    secrets_held,
    text_ahead,
    tool_failure,
    unawaited,
)
from ._lazy import lazy_module
from ._policies import _as_seconds, _shown
from ._worker import _HEADER, exit_reason

if TYPE_CHECKING:
    import asyncio

    from ._call import Call
    from ._tool import Tool
else:  # imported on first use, as in the registry: thread-mode calls of sync tools never need it
    asyncio = lazy_module("asyncio", __name__)

__all__ = ["ProcessRunner", "Runner", "ThreadRunner"]

T = TypeVar("T")


@runtime_checkable
class Runner(Protocol):
    """Runs ``fn(**kwargs)`` for ``call`` within ``timeout`` seconds or raises :class:`ToolTimeout`.

    A runner that gives up on a tool still running sets ``call.lingering`` (a
    :class:`~harness_one.Lingering`, told when the tool returns) before it raises.
    """

    def run(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any: ...

    async def arun(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any: ...


def _seconds(timeout: float) -> float:
    """``timeout`` clamped to what a lock wait accepts (0 .. ``threading.TIMEOUT_MAX``): 0 (no wait) for one
    not > 0, NaN too (a plugin's ``call.timeout``), in every mode."""
    return timeout if 0.0 < timeout < threading.TIMEOUT_MAX else (threading.TIMEOUT_MAX if timeout > 0.0 else 0.0)


def _timed_out(call: Call, timeout: float) -> ToolTimeout:
    call.cancel()
    return _timeout_error(call, timeout)


def _timeout_error(call: Call, timeout: float) -> ToolTimeout:
    """The :class:`ToolTimeout` of ``call``: it names the attempt's timeout (``call.timeout``) when the
    core waited less (what was left of the call's total timeout), else ``timeout``."""
    limit = call.timeout
    return ToolTimeout(timeout if limit is None else limit, tool=call.tool.name, call_id=call.call_id)


def _could_not_start(call: Call, what: str, exc: Exception) -> ToolExecutionError:
    """The error of a call whose worker could not be started (``exc``: no file descriptor, no memory for
    a thread): a ``RuntimeError`` saying so, ``exc`` its cause, for the caller to refuse the call with."""
    reason = RuntimeError(f"{what} could not be started: {exception_text(exc)}")
    reason.__cause__ = exc
    return tool_failure(reason, call.tool.name, call.call_id)  # (no text of the call's in it)


def _stop_iteration() -> RuntimeError:
    """What an awaited call raises for a tool's ``StopIteration`` (as ``acall`` without a runner does):
    a coroutine that raised it would end in ``RuntimeError("coroutine raised StopIteration")``."""
    return RuntimeError("the tool raised StopIteration, which an awaited call cannot carry")


def _workers(value: Any, what: str, *, optional: bool = False) -> None:
    """Refuse ``value`` (a runner's option) unless it is an integer >= 1 (not a bool), or None if ``optional``."""
    if (value is None and optional) or (type(value) is int and value >= 1):
        return
    raise ValueError(f"{what} must be an integer >= 1{' or None' if optional else ''}, not {value!r}")


def _span(value: Any, what: str, *, optional: bool = False) -> float:
    """``value`` (a runner's option) as a float of seconds: positive and finite (:func:`_as_seconds`: an int
    past a float's range is not); else a ValueError naming ``what`` (``optional``: the option may be None, said so)."""
    found = _as_seconds(value)
    if found is None:
        raise ValueError(
            f"{what} must be a finite positive number of seconds{' or None' if optional else ''}, not {_shown(value)}"
        )
    return found


def _resolve(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)


def _tick(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[bool], call: Call, end: float, timer: list[asyncio.TimerHandle]
) -> None:
    """A thread-mode ``arun``'s timer: resolve ``future`` False at ``end`` (on the loop's clock) or once ``call``
    is cancelled, else fire again within ``_CANCEL_POLL`` (``timer[0]``: the pending handle, which ``arun`` cancels)."""
    if future.done():
        return
    left = end - loop.time()
    if not left > 0.0 or call.cancelled:  # (NaN: at once, as _seconds says)
        future.set_result(False)
    else:
        timer[0] = loop.call_later(min(left, _CANCEL_POLL), _tick, loop, future, call, end, timer)


def _given_up(call: Call, timeout: float) -> ToolError:
    """The error of a thread-mode call its caller stopped waiting for (the tool runs on): ToolCancelled when
    ``call`` was cancelled (from another thread, a hook), else ToolTimeout at its deadline."""
    if call.cancelled:
        return ToolCancelled.of(call)
    return _timed_out(call, timeout)


# --- thread mode ---------------------------------------------------------------------------


def _said(exc: BaseException, awaited: bool) -> str | None:
    """``str(exc)`` (the tool's exception), built in the worker thread for the caller's error to read
    (:func:`text_ahead` keeps it on the exception): a slow ``__str__`` holds the worker, not the caller past its deadline (nor an event
    loop). None for a :class:`ToolError` (its message is made already) and an awaited ``StopIteration``
    (said as a ``RuntimeError``)."""
    if isinstance(exc, ToolError) or (awaited and isinstance(exc, StopIteration)):
        return None
    try:
        return str(exc)
    except BaseException:  # a broken __str__: exception_text names its type alone
        return ""


_THREAD_POOLS: weakref.WeakSet[_ThreadPool] = weakref.WeakSet()


def _thread_pools_forked() -> None:
    for pool in list(_THREAD_POOLS):
        pool.forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_thread_pools_forked)

_RUNNING, _FINISHED, _ABANDONED = 0, 1, 2


class _Slot:
    """One worker thread and the call it is running: the caller owns it from take to give-back."""

    __slots__ = (
        "context",
        "done",
        "fn",
        "future",
        "go",
        "kwargs",
        "lingering",
        "lock",
        "loop",
        "ok",
        "state",
        "value",
    )

    def __init__(self) -> None:
        self.go = threading.Lock()  # released by the caller to start a call (or to stop the thread)
        self.go.acquire()
        self.done = threading.Lock()  # released by the worker when a sync caller's call finished
        self.done.acquire()
        self.lock = threading.Lock()  # guards state: the worker finishing vs the caller giving up
        self.state = _RUNNING
        self.fn: Callable[..., Any] | None = None
        self.kwargs: dict[str, Any] | None = None
        self.context: contextvars.Context | None = None  # the caller's, so its span and context variables hold
        self.ok = False
        self.value: Any = None
        self.future: asyncio.Future[bool] | None = None  # set for an async caller
        self.loop: asyncio.AbstractEventLoop | None = None
        self.lingering: Lingering | None = None  # set when the caller gives up on the call


class _ThreadPool:
    """The threads of a :class:`ThreadRunner` (kept apart from it, so the runner can be collected)."""

    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers
        self.idle: deque[_Slot] = deque()
        self.lock = threading.Lock()
        self.threads = 0
        self.stuck = 0
        self.closed = False
        _THREAD_POOLS.add(self)

    def forked(self) -> None:
        """In a child forked from this process: only the forking thread survived, so the pool has no
        threads; the child's calls start threads of their own (a slot's lock may be held forever)."""
        self.lock = threading.Lock()  # another thread may have held it at the fork
        self.idle = deque()
        self.threads = self.stuck = 0

    def grow(self) -> _Slot | None:
        """A new worker thread, or an idle one that came back meanwhile; None when the pool is full."""
        with self.lock:
            if self.idle:
                return self.idle.pop()
            if self.closed:
                raise RuntimeError("the ThreadRunner is shut down")
            if self.threads >= self.max_workers:
                return None
            self.threads += 1
            number = self.threads
        slot = _Slot()
        try:
            threading.Thread(target=self.work, args=(slot,), name=f"harness-one-tool-{number}", daemon=True).start()
        except BaseException:  # e.g. "can't start new thread"
            with self.lock:
                self.threads -= 1
            raise
        return slot

    def work(self, slot: _Slot) -> None:
        go = slot.go
        while True:
            go.acquire()
            fn = slot.fn
            if fn is None:
                with self.lock:
                    self.threads -= 1
                return
            try:
                slot.value = slot.context.run(fn, **slot.kwargs)  # type: ignore[arg-type, union-attr]
                if type(slot.value) is CoroutineType:
                    raise unawaited(slot.value)
                slot.ok = True
            except BaseException as exc:
                slot.value = exc
                slot.ok = False
                # its text read here, in the tool's context (a message may read a ContextVar), for the caller's error
                said = slot.context.run(_said, exc, slot.future is not None)  # type: ignore[union-attr]
                if said is not None:
                    text_ahead(exc, said)
            slot.fn = slot.kwargs = slot.context = None
            with slot.lock:
                abandoned = slot.state == _ABANDONED
                future, loop = slot.future, slot.loop
                if not abandoned:
                    slot.state = _FINISHED
                    if future is None:
                        slot.done.release()
            if abandoned:  # nobody waits for this result: the worker is free again
                ok, value, slot.value = slot.ok, slot.value, None
                lingering, slot.lingering = slot.lingering, None
                if lingering is not None:
                    lingering.finished(ok, value)  # what the tool did: the idempotency plugin keeps it for the key
                del value
                self.give_back(slot)
                with self.lock:
                    self.stuck -= 1
            elif future is not None and loop is not None:
                try:
                    loop.call_soon_threadsafe(_resolve, future, True)
                except RuntimeError:  # a closed loop: its caller never collects the result
                    self.orphaned(slot, future)

    def orphaned(self, slot: _Slot, future: asyncio.Future[bool]) -> None:
        """Give back the slot of a finished call whose caller's event loop closed before it collected
        it (its task left pending), unless the caller claimed it meanwhile (:meth:`finished_late`)."""
        with slot.lock:
            if slot.future is not future:
                return
            slot.future = None
        slot.value = None
        self.give_back(slot)

    def finished_late(self, slot: _Slot, call: Call, future: asyncio.Future[bool] | None = None) -> bool:
        """After the caller's wait ended: True if the call finished after all, else mark it
        abandoned (stuck), with ``call.lingering`` saying when its tool returns. False too for an
        async caller (``future``) whose slot its worker gave back (:meth:`orphaned`)."""
        with slot.lock:
            if slot.future is not future:
                return False
            if slot.state == _FINISHED:
                if future is None:
                    slot.done.acquire(False)  # the worker released it
                slot.future = None  # claimed: the worker's closed-loop branch leaves it alone
                return True
            slot.state = _ABANDONED
            call.lingering = slot.lingering = Lingering()
            with self.lock:
                self.stuck += 1
            return False

    def settled(self, slot: _Slot, call: Call, awaited: bool = False) -> None:
        """Give back the slot of a call whose tool returned before its caller gave up (Ctrl-C, a cancelled
        task): what the tool did is kept as ``call.lingering``, a :class:`Lingering` finished already,
        so the plugins settle the call as the tool ended (the idempotency plugin keeps the outcome)."""
        ok, value, slot.value = slot.ok, slot.value, None
        self.give_back(slot)
        if awaited and not ok and isinstance(value, StopIteration):  # said as an awaited call says it
            error = _stop_iteration()
            error.__cause__ = value
            value = error
        call.lingering = lingering = Lingering()
        lingering.start()
        lingering.finished(ok, value)

    def give_back(self, slot: _Slot) -> None:
        slot.future = slot.loop = None
        self.idle.append(slot)
        if self.closed:
            self.close()

    def close(self) -> None:
        """Stop idle threads now and busy ones when they finish (called on shutdown and when the runner is collected)."""
        self.closed = True
        while True:
            try:
                slot = self.idle.pop()
            except IndexError:
                return
            slot.fn = None
            slot.go.release()


class ThreadRunner:
    """A bounded pool of worker threads; a timed-out tool is abandoned, not killed.

    Threads start on demand, up to ``max_workers``, and stay for the next call. They are
    daemon threads: an abandoned tool still running does not hold up interpreter exit. The
    tool runs in a copy of the caller's ``contextvars`` context (as ``asyncio.to_thread``
    does), so the current span, request-scoped variables and the like are visible to it.
    """

    def __init__(self, max_workers: int = 32) -> None:
        _workers(max_workers, "max_workers")
        self.max_workers = max_workers
        self._pool = _ThreadPool(max_workers)
        weakref.finalize(self, self._pool.close)

    def _busy(self, call: Call) -> ToolBusy:
        return ToolBusy(
            f"Tool '{call.tool.name}' cannot start: all {self.max_workers} timeout workers are busy "
            f"({self._pool.stuck} still running past their deadline). Try again later.",
            tool=call.tool.name,
            call_id=call.call_id,
        )

    def _take(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any]) -> _Slot:
        pool = self._pool
        try:
            slot = pool.idle.pop()
        except IndexError:
            try:
                got = pool.grow()
            except Exception as exc:  # "can't start new thread", or shut down: the tool did not start
                err = _could_not_start(call, "a timeout worker thread", exc)
                raise _refused(call, err) from err.__cause__
            if got is None:
                raise _refused(call, self._busy(call)) from None
            slot = got
        slot.fn = fn
        slot.kwargs = kwargs
        slot.context = contextvars.copy_context()
        call._bind_attempt(slot.context)  # the tool reads `cancelled` for its own attempt, after retries too
        slot.state = _RUNNING
        return slot

    def _collect(self, slot: _Slot, call: Call) -> Any:
        ok, value = slot.ok, slot.value
        slot.value = None
        self._pool.give_back(slot)
        if ok:
            return value
        if isinstance(value, Exception):
            raise value
        # KeyboardInterrupt, GeneratorExit, ...: the tool's own (a signal reaches the main thread only), so its
        # failure, as in process mode (SystemExit is one already), not an interrupt of the caller
        raise call_failure(call, value) from value

    def run(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
        slot = self._take(call, fn, kwargs)
        slot.go.release()
        try:
            finished = self._wait(slot, call, time.monotonic() + timeout, timeout)
        except BaseException:  # Ctrl-C in the wait: give up on the call as at a timeout (the tool runs on)
            if self._pool.finished_late(slot, call):  # it returned meanwhile: its outcome is kept
                self._pool.settled(slot, call)
            else:
                call.cancel()
            raise
        if finished or self._pool.finished_late(slot, call):
            return self._collect(slot, call)
        raise _given_up(call, timeout)

    @staticmethod
    def _wait(slot: _Slot, call: Call, end: float, timeout: float) -> bool:
        """Wait for the call's end until ``end`` (``timeout`` from now: a call that ends within ``_CANCEL_POLL``
        waits once), seeing a cancel of ``call`` within ``_CANCEL_POLL``: False then, and at ``end``."""
        wait = min(timeout, _CANCEL_POLL)
        while not slot.done.acquire(True, _seconds(wait)):
            left = end - time.monotonic()
            if call.cancelled or not left > 0.0:  # (NaN: at once, as _seconds says)
                return False
            wait = min(left, _CANCEL_POLL)
        return True

    async def arun(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        slot = self._take(call, fn, kwargs)
        slot.future, slot.loop = future, loop
        slot.go.release()
        # A timer that resolves the future, rather than asyncio.timeout/wait_for: there is no
        # task to cancel (the work is in a thread), and it is the cheapest wait on every version.
        # It first fires after _CANCEL_POLL at most, then again every _CANCEL_POLL, to see a cancel of the call.
        end = loop.time() + timeout
        timer: list[asyncio.TimerHandle] = []  # the pending handle: each tick schedules the next in its place
        timer.append(loop.call_later(_seconds(min(timeout, _CANCEL_POLL)), _tick, loop, future, call, end, timer))
        try:
            finished = await future
        except BaseException:  # the caller's task was cancelled: give up on the call like at a timeout
            timer[0].cancel()
            if self._pool.finished_late(slot, call, future):  # it returned before the loop saw it: kept
                self._pool.settled(slot, call, awaited=True)
            else:
                call.cancel()
            raise
        timer[0].cancel()
        if finished or self._pool.finished_late(slot, call, future):
            try:
                return self._collect(slot, call)
            except StopIteration as exc:  # a coroutine cannot raise it: said as acall's thread hop says it
                raise _stop_iteration() from exc
        raise _given_up(call, timeout)

    def stats(self) -> dict[str, int]:
        """``workers`` (the pool's size), ``busy`` (running now) and ``stuck`` (running past a deadline the caller gave up on)."""
        pool = self._pool
        return {"workers": self.max_workers, "busy": pool.threads - len(pool.idle), "stuck": pool.stuck}

    def shutdown(self) -> None:
        """Stop the idle threads; busy ones stop when their tool returns. Later calls fail."""
        self._pool.close()


# --- process mode --------------------------------------------------------------------------


class _RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process (set as its ``__cause__``)."""

    def __str__(self) -> str:
        return str(self.args[0])


class _WorkerGone(Exception):
    """The worker process exited (or its socket broke) while it owed an answer."""


class _Stale(Exception):
    """A worker could not load a job, and one started now would be prepared otherwise (:func:`_preparation`:
    ``sys.path`` changed, a module was loaded from a file since): the job is tried once in a new worker."""

    def __init__(self, error: ToolError) -> None:
        super().__init__(error)
        self.error = error  # the refusal, if the new worker cannot be had


_CHUNK = 1 << 20  # the most read at once: a forged frame header cannot make the parent allocate more


#: Directories a worker puts first (last) on its ``sys.path``: those the parent had there only while it
#: imported tools (a ``harness-one --tools`` file's own directory; the command's current directory, last,
#: when a ``--tools`` module's package was found there).
WORKER_PATH: list[str] = []
WORKER_PATH_LAST: list[str] = []


def worker_path(directory: str, *, last: bool = False) -> None:
    """Put ``directory`` first (or ``last``) on the ``sys.path`` of the process-mode workers started
    from now on (where the parent had it while it imported tools, then took it off its own ``sys.path``)."""
    listed = WORKER_PATH_LAST if last else WORKER_PATH
    if directory not in listed:
        listed.append(directory)


def _files(sys_path: list[str]) -> dict[str, str]:
    """The top-level modules loaded from a ``.py`` file that ``sys_path`` does not find under their
    name (``harness_one_local_<hash>`` of ``harness-one --tools FILE.py``, a module the caller loaded
    with ``spec_from_file_location``): a worker imports each from that file when a job names it."""
    found: dict[str, str] = {}
    where: set[str] | None = None
    # a copy taken at once: list(sys.modules.items()) makes a tuple per module, and a collection the allocation starts
    # can run Python code (a finalizer, a weakref callback) that imports, or lets another thread import
    for name, module in sys.modules.copy().items():
        if "." in name or name == "__main__":
            continue
        spec = getattr(module, "__spec__", None)
        origin = getattr(spec, "origin", None)
        if not (isinstance(origin, str) and origin.endswith(".py") and getattr(spec, "has_location", False)):
            continue
        if getattr(spec, "submodule_search_locations", None) is not None:  # a package: found through sys.path
            continue
        folder, base = os.path.split(origin)
        if base == f"{name}.py":
            if where is None:
                where = {os.path.normcase(os.path.abspath(entry)) for entry in sys_path if isinstance(entry, str)}
            if os.path.normcase(folder) in where:
                continue
        found[name] = origin
    return found


def _preparation() -> dict[str, Any]:
    """What a ``spawn`` child gets from its parent: ``sys.path``, ``sys.argv``, the cwd and the main module;
    and the modules it must import from a file (:func:`_files`).

    Built here rather than with ``multiprocessing.spawn.get_preparation_data``, which would
    also fix the parent's default start method as a side effect.
    """
    from multiprocessing import process

    origin: str = getattr(process, "ORIGINAL_DIR", None) or os.getcwd()  # the cwd at start-up
    sys_path = [origin if entry == "" else entry for entry in sys.path]
    sys_path[:0] = [entry for entry in WORKER_PATH if entry not in sys_path]
    sys_path += [entry for entry in WORKER_PATH_LAST if entry not in sys_path]
    data: dict[str, Any] = {"sys_path": sys_path, "sys_argv": sys.argv, "dir": os.getcwd(), "orig_dir": origin}
    files = _files(sys_path)
    if files:
        data["harness_one_files"] = files
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    path = getattr(main, "__file__", None)
    if name is not None:
        data["init_main_from_name"] = name
    elif path is not None:
        path = os.path.normpath(os.path.join(origin, path))
        if os.path.isfile(path):  # not a program read from stdin (`python -`: "<stdin>"), which no worker can import
            data["init_main_from_path"] = path
    return data


def _command() -> list[str]:
    from multiprocessing import spawn

    flags: Callable[[], list[str]] = getattr(subprocess, "_args_from_interpreter_flags", list)
    return [spawn.get_executable(), *flags(), _worker.__file__]


class _Worker:
    """One worker process (the leader of its own process group) and the parent's end of its socket."""

    __slots__ = (
        "body",
        "born",
        "calls",
        "checked",
        "code",
        "fd",
        "idle_since",
        "job",
        "lock",
        "need",
        "parts",
        "poll",
        "prepared",
        "process",
        "ready",
        "sock",
        "tag",
        "unsent",
    )

    def __init__(self) -> None:
        if os.name != "posix":
            raise NotImplementedError("process timeout mode needs a POSIX system (process groups)")
        if _worker.STARTING in os.environ:
            raise RuntimeError(
                "process mode: a worker is importing the main module, which starts another worker; "
                "guard the program's entry point with `if __name__ == '__main__':`"
            )
        self.sock, theirs = socket.socketpair()
        try:
            child_fd = theirs.fileno()
            self.process = subprocess.Popen(
                [*_command(), str(child_fd)],
                pass_fds=(child_fd,),
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # setsid(): the worker leads a new process group
            )
        except BaseException:
            self.sock.close()
            raise
        finally:
            theirs.close()
        self.born = time.monotonic()
        self.fd = self.sock.fileno()
        self.poll = select.poll()
        self.poll.register(self.fd, select.POLLIN)
        self.ready = False
        self.calls = 0
        self.idle_since = 0.0
        self.code: int | None = None  # set once killed and reaped
        self.lock = threading.Lock()  # one kill: never signal a pid after it was reaped (and maybe reused)
        self.job = int.from_bytes(os.urandom(6), "little")  # the last job's id (random start: not guessable)
        self.tag = b""  # the id the answer to the current job must carry
        self.parts: list[bytes] = []  # what came of a frame not yet whole
        self.body = False  # reading a frame's body (after its header)
        self.checked = False  # the body's start was found to be the job's id (:func:`_take`)
        self.need = _HEADER  # bytes missing from the frame's header or body
        self.unsent: bytes | memoryview | None = None  # what the socket has not yet taken of the job
        self.prepared = _preparation()  # compared with the parent's then when a job does not load (_Stale)
        with contextlib.suppress(OSError):  # it died at once: waiting for its ready message reports how
            _worker.send(self.fd, pickle.dumps(self.prepared, pickle.HIGHEST_PROTOCOL))
        os.set_blocking(self.fd, False)  # reads and writes wait in poll() or the event loop, bounded by the deadline

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait(self, timeout: float) -> bool:
        """True when the socket is ready within ``timeout`` seconds: for writing while part of the
        job is :attr:`unsent`, else for reading (an answer, or EOF)."""
        if self.unsent is None:
            return bool(self.poll.poll(_milliseconds(timeout)))
        writable = select.poll()
        writable.register(self.fd, select.POLLOUT)
        return bool(writable.poll(_milliseconds(timeout)))

    async def await_ready(self, timeout: float) -> bool:
        """:meth:`wait` on the event loop, which runs on meanwhile."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        if self.unsent is None:
            add, remove = loop.add_reader, loop.remove_reader
        else:
            add, remove = loop.add_writer, loop.remove_writer
        add(self.fd, _resolve, future, True)
        timer = loop.call_later(_seconds(timeout), _resolve, future, False)
        try:
            return await future
        finally:
            timer.cancel()
            remove(self.fd)

    def take(self) -> bytes | None:
        """The next frame if all of it has come, else None (what came is kept for the next try); never blocks.

        ``_WorkerGone`` when the worker's end closed. An exception midway (MemoryError) leaves
        the worker out of step: the caller discards it.
        """
        return _take(self)

    def exited(self) -> bool:
        """Whether the worker process has exited; it is left unreaped, so its pid (its group's and
        its session's id) cannot be reused before :meth:`kill`."""
        try:
            return os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:  # reaped already
            return True
        except AttributeError:  # no waitid (macOS): reap it
            return self.process.poll() is not None

    def submit(self, job: bytes) -> None:
        """Send ``job`` with a new id, as much of it as the socket takes now; the rest is left
        :attr:`unsent`, for the wait for the answer to send as room comes (never blocks)."""
        self.job += 1
        self.tag = tag = self.job.to_bytes(_HEADER, "little")
        self.push(_worker.frame(job, tag))

    def push(self, data: bytes | memoryview) -> None:
        """Write what the socket takes now of ``data``; the rest is :attr:`unsent` (None: all of it went)."""
        try:
            sent = os.write(self.fd, data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            raise _WorkerGone from exc
        self.unsent = None if sent == len(data) else memoryview(data)[sent:]

    def signal(self) -> None:
        """SIGKILL the whole process group now, leaving the rest to :meth:`kill` (it may take a while to
        reap a big worker: an event loop hands that to a thread)."""
        with self.lock:
            if self.code is None:
                self._signal()

    def _signal(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # pgid == sid == pid (setsid); unreaped, so not reused

    def kill(self) -> int:
        """SIGKILL the whole process group and (on Linux) the rest of the worker's session, reap
        the worker, close the socket; returns the exit code."""
        with self.lock:
            if self.code is None:
                self._signal()
                _worker.kill_session(self.process.pid, spare=self.process.pid)  # what left the group, not the session
                self.code = self.process.wait()
                if _reaps_orphans():  # the killed tool's processes were reparented here: nothing else reaps them
                    if _LEFTOVERS.sessions:  # those of earlier kills not all reaped yet
                        _LEFTOVERS.sweep()
                    if _worker.reap_orphans(self.process.pid):  # some still ending: reaped later
                        _LEFTOVERS.add(self.process.pid)
                self.sock.close()
            return self.code


class _Leftovers:
    """The sessions of killed workers whose processes were not all reaped at the kill, where this
    process reaps orphans (PID 1, a child subreaper): a killed tool's child that takes a while to
    end (a big address space to free, a loaded machine) becomes a zombie after the kill's scan.

    A daemon thread scans them again, the pause between scans growing from 10 ms to 1 s, for up
    to :attr:`FOLLOW` seconds after the last kill that left any; what is left after that is
    scanned at the next kill, at a worker's take (at most once a second) and at shutdown.
    """

    FOLLOW = 30.0

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sessions: set[int] = set()
        self.thread: threading.Thread | None = None
        self.until = 0.0  # the thread stops scanning then
        self.due = 0.0  # the next scan at a take, once the thread stopped

    def add(self, sid: int) -> None:
        with self.lock:
            self.sessions.add(sid)
            self.until = time.monotonic() + self.FOLLOW
            if self.thread is not None:
                return
            self.thread = thread = threading.Thread(target=self.follow, name="harness-one-orphans", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: the next kill, take or shutdown scans
            with self.lock:
                self.thread = None

    def sweep(self) -> bool:
        """Reap what ended of the sessions; whether any process of them is left."""
        with self.lock:
            sessions = list(self.sessions)
        done = [sid for sid in sessions if not _worker.reap_orphans(sid)]
        with self.lock:
            self.sessions.difference_update(done)
            return bool(self.sessions)

    def follow(self) -> None:
        pause = 0.01
        while True:
            time.sleep(pause)
            self.sweep()
            with self.lock:
                if not self.sessions or time.monotonic() >= self.until:
                    self.thread = None
                    return
            pause = min(pause * 2, 1.0)

    def later(self) -> None:
        """At a take: scan what the thread left, at most once a second."""
        now = time.monotonic()
        if self.thread is None and now >= self.due:
            self.due = now + 1.0
            self.sweep()

    def forked(self) -> None:
        """In a forked child: the sessions' processes are the parent's to reap."""
        self.lock = threading.Lock()
        self.sessions, self.thread = set(), None


_LEFTOVERS = _Leftovers()
_libc: Any = None


async def _off_loop(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` awaited in a thread of its own, as ``asyncio.to_thread`` would run it but not in the loop's
    default executor: the caller's sync tools under ``acall`` may hold all of its threads (for as long as they
    run), and a process-mode timeout would wait for one of them to kill the rest of the tool's session and
    answer (seconds late, or never). ``RuntimeError`` when no thread can start."""
    import concurrent.futures  # (only once a worker is killed under acall: not imported at start-up)

    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if done.set_running_or_notify_cancel():
            try:
                done.set_result(fn(*args))
            except BaseException as exc:
                done.set_exception(exc)

    threading.Thread(target=run, name="harness-one-kill", daemon=True).start()
    # (awaiting it in a task cancelled meanwhile leaves the work done; a loop closed meanwhile is not told)
    return await asyncio.wrap_future(done)


def _reaps_orphans() -> bool:
    """Whether orphaned processes are reparented to this one: it is PID 1 (a container started
    without an init) or a child subreaper (``PR_SET_CHILD_SUBREAPER``, Linux)."""
    if os.getpid() == 1:
        return True
    if not sys.platform.startswith("linux"):
        return False
    global _libc
    try:
        import ctypes

        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        flag = ctypes.c_int(0)
        return bool(_libc.prctl(37, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value)  # PR_GET_CHILD_SUBREAPER
    except Exception:  # no prctl: not one
        return False


def _refused(call: Call, error: ToolError) -> ToolError:
    """``error`` for a call refused before its tool started: ``call.ran`` back to False.

    The core sets it before it calls the runner; plugins read it as "the tool may have run"
    (idempotency stores the outcome, retry counts an attempt), which a refusal is not.
    """
    call.ran = False
    return error


def _milliseconds(timeout: float) -> int:
    """``timeout`` seconds as ``poll()`` takes it (rounded up, 0 when past)."""
    return int(min(_seconds(timeout) * 1000 + 0.999, 2**31 - 1))


def _take(worker: _Worker) -> bytes | None:
    """:meth:`_Worker.take` (a function, so a test can make a read fail halfway)."""
    fd = worker.fd
    while True:
        need = worker.need
        try:
            chunk = os.read(fd, need if need < _CHUNK else _CHUNK)
        except BlockingIOError:
            return None
        except OSError as exc:
            raise _WorkerGone from exc
        if not chunk:
            raise _WorkerGone
        if worker.body and not worker.checked and worker.tag:  # an answer's first bytes: is it its job's?
            head = b"".join((*worker.parts, chunk)) if worker.parts else chunk  # (the parts: under 8 bytes)
            if len(head) >= _HEADER:
                if head[:_HEADER] != worker.tag:  # a frame the tool wrote: its length is no answer's, never waited for
                    worker.body, worker.need, worker.parts = False, _HEADER, []
                    return head  # not in step: the caller discards the worker (see ProcessRunner._check)
                worker.checked = True
        if len(chunk) < need:  # more to come
            worker.parts.append(chunk)
            worker.need = need - len(chunk)
            continue
        if worker.parts:
            worker.parts.append(chunk)
            chunk = b"".join(worker.parts)
            worker.parts = []
        if worker.body:
            worker.body, worker.need = False, _HEADER
            return chunk
        size = int.from_bytes(chunk, "little")
        if not size or (size < _HEADER and worker.tag):  # too short for the job's id: not in step (see above)
            return b""
        worker.body, worker.need, worker.checked = True, size, False


_CANCEL_POLL = 0.05  # seconds between checks of ``call.cancelled`` while a worker runs a call


def _by_name(fn: Callable[..., Any]) -> tuple[Any, str | None]:
    """How a job names ``fn``: ``(fn, None)``, pickled by its module and qualified name; or, when that
    name holds a wrapper of ``fn`` at its ``.fn`` (``defineTool`` leaves one), ``(wrapper, "fn")``:
    the wrapper pickles by that name, and the worker unwraps it."""
    holder: Any = sys.modules.get(getattr(fn, "__module__", None) or "")
    qualname = getattr(fn, "__qualname__", None)
    if holder is None or not isinstance(qualname, str):
        return fn, None
    for part in qualname.split("."):
        holder = getattr(holder, part, None)
    if holder is not fn and getattr(holder, "__qualname__", None) == qualname and getattr(holder, "fn", None) is fn:
        return holder, "fn"
    return fn, None


def _loads(data: bytes | memoryview) -> Any:
    """``pickle.loads`` whose ``BaseException`` that is not an ``Exception`` (a ``__reduce__`` raising
    ``SystemExit``, ``KeyboardInterrupt`` or a class of its own) is an error like any other: what a
    worker sent cannot exit or interrupt the caller."""
    try:
        return pickle.loads(data)
    except Exception:
        raise
    except BaseException as exc:
        raise RuntimeError(f"unpickling raised {exception_text(exc)}") from None


def _rebuilt(parts: bytes) -> BaseException | None:
    """An exception rebuilt from its pickled ``(class, args, __dict__)`` without calling its ``__init__``
    (which may take required keyword-only arguments, as ``httpx.HTTPStatusError`` does); None if
    that fails (a class not importable here)."""
    try:
        kind, args, state = _loads(parts)
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            return None
        exc: BaseException = kind.__new__(kind, *args)
        exc.args = args
        exc.__dict__.update(state)
    except BaseException:  # a class's __new__ or __dict__ of its own may raise anything: not rebuilt
        return None
    return exc


def _remote_error(
    call: Call, pickled: bytes | None, described: dict[str, Any], trace: str | None, parts: bytes | None = None
) -> BaseException:
    """The exception a worker sent, to raise here: itself when it unpickles, or when it is rebuilt from its
    class, args and ``__dict__`` (:func:`_rebuilt`), else a ToolError rebuilt from its description.

    A :class:`ToolError` comes back through ``ToolError.from_dict``; any other exception as a
    :class:`ToolExecutionError` naming its type and message (``cause`` is the type's ``module.qualname``,
    as for a replayed idempotent outcome). ``SystemExit`` and the like become a ToolExecutionError
    too, so nothing raised in a worker can exit or interrupt the caller.
    """
    exc: Any = None
    if pickled is not None:
        with contextlib.suppress(Exception):  # (_loads turns any BaseException into one)
            exc = _loads(pickled)
    if not isinstance(exc, BaseException) and parts is not None:
        exc = _rebuilt(parts)
    if not isinstance(exc, BaseException):
        if "kind" in described:  # ToolError.to_dict()
            exc = ToolError.from_dict(described)
        else:
            kind, message = str(described.get("type")), str(described.get("message") or "")
            name = str(described.get("name") or kind)  # the message names the class as a live exception's does
            held = secrets_held(call.arguments, call.context)  # as tool_failure masks a live exception's text
            exc = ToolError.from_dict(
                {
                    "type": "ToolExecutionError",
                    "message": f"Tool '{call.tool.name}' failed: {name}: {outside_text(message, held) or name}",
                    "cause": kind,
                    "tool": call.tool.name,
                    "call_id": call.call_id,
                }
            )
    if trace is not None:
        exc.__cause__ = _RemoteTraceback(trace)
    if isinstance(exc, Exception):
        return exc
    return call_failure(call, exc)


def _warmest(idle: list[_Worker]) -> int:
    """The index of the idle worker to take: the most recently used of those started, else the last one
    still starting (a worker parked, or a replacement, is taken only when no started one is idle)."""
    for index in range(len(idle) - 1, -1, -1):
        if idle[index].ready:
            return index
    return len(idle) - 1


_POOLS: weakref.WeakSet[_ProcessPool] = weakref.WeakSet()


def _forked() -> None:
    """In a child forked from a process with workers: they are its parent's, never this process's.

    The child forgets them without a kill (its exit would otherwise kill the parent's workers)
    and closes its copies of their sockets (a worker watches for its parent's end to close);
    a call in the child starts workers of its own.
    """
    _LEFTOVERS.forked()
    for pool in list(_POOLS):
        pool.lock = threading.Lock()  # another thread may have held it at the fork
        pool.reaper, pool.wake, pool.starting = None, threading.Event(), 0  # threads do not survive a fork
        workers, pool.workers, pool.idle = list(pool.workers), set(), []
        for worker in workers:
            worker.code = -1
            with contextlib.suppress(OSError):
                worker.sock.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class _ProcessPool:
    """The worker processes of a :class:`ProcessRunner` (kept apart from it, so the runner can be collected)."""

    def __init__(self, max_workers: int, idle_timeout: float | None, clock: Callable[[], float]) -> None:
        self.max_workers = max_workers
        self.idle_timeout = idle_timeout
        self.clock = clock
        self.lock = threading.Lock()
        self.workers: set[_Worker] = set()  # every live worker, idle or busy
        self.idle: list[_Worker] = []  # the most recently used last
        self.starting = 0  # places taken by workers being started
        self.start_seconds: float | None = None  # the quickest start seen (a ready message read late says more)
        self.counts = {"killed": 0, "died": 0, "replaced": 0}
        self.closed = False
        self.reaper: threading.Thread | None = None
        self.wake = threading.Event()
        _POOLS.add(self)

    def take(self, *, warm: bool = True) -> _Worker | None:
        """An idle worker (``warm``), or a new one; None when all ``max_workers`` are busy."""
        if _LEFTOVERS.sessions:  # a killed tool's processes not all reaped yet
            _LEFTOVERS.later()
        with self.lock:
            if self.closed:
                raise RuntimeError("the ProcessRunner is shut down")
            idle = self.idle if warm else []
            while idle:
                worker = idle.pop(_warmest(idle))
                if worker.process.poll() is None:
                    return worker
                self.workers.discard(worker)  # died while idle (killed from outside)
                worker.kill()
            if len(self.workers) + self.starting >= self.max_workers:
                return None
            self.starting += 1
        return self.spawn()

    def retire(self, worker: _Worker) -> bool:
        """Take ``worker`` out of the pool, unkilled, if it is idle (another call may have taken it since it was
        given back); whether it was."""
        with self.lock:
            if worker not in self.idle:
                return False
            self.idle.remove(worker)
            self.workers.discard(worker)
        return True

    def spawn(self) -> _Worker:
        """Start a worker in a place reserved with ``starting``; it joins ``workers`` (and the reaper starts)."""
        try:
            worker = _Worker()
        finally:
            with self.lock:
                self.starting -= 1
        with self.lock:
            self.workers.add(worker)
            closed = self.closed
            if self.idle_timeout is not None and self.reaper is None and not closed:
                self.reaper = threading.Thread(target=self.reap_loop, name="harness-one-reaper", daemon=True)
                self.reaper.start()
        if closed:  # shut down while it started
            self.remove(worker)
        return worker

    def remove(self, worker: _Worker) -> int:
        with self.lock:
            self.workers.discard(worker)
        return worker.kill()

    def give_back(self, worker: _Worker, max_calls: int | None) -> None:
        if not self.keep(worker, max_calls):
            self.remove(worker)

    def keep(self, worker: _Worker, max_calls: int | None) -> bool:
        """Count a call ``worker`` answered and make it idle; False if it is retired instead (``max_calls``,
        shut down): the caller then removes it."""
        worker.calls += 1
        worker.idle_since = self.clock()
        with self.lock:
            keep = not self.closed and worker.code is None and (max_calls is None or worker.calls < max_calls)
            if keep:
                self.idle.append(worker)
        return keep

    def park(self, worker: _Worker) -> None:
        """Give back a worker its call did not use (its deadline came, or it was cancelled, while the
        worker started): the next call takes it."""
        worker.idle_since = self.clock()
        with self.lock:
            keep = not self.closed and worker.code is None
            if keep:
                self.idle.append(worker)
        if not keep:
            self.remove(worker)

    def discard(self, worker: _Worker, why: str | None = None) -> int:
        """Kill a busy worker and its group; with ``why`` (killed or died), count it and start a replacement."""
        if worker.code is not None:
            return worker.code  # discarded already (or killed by close())
        code = self.remove(worker)
        if why is None:
            return code
        with self.lock:
            self.counts[why] += 1
            if self.closed or len(self.workers) + self.starting >= self.max_workers:
                return code
            self.starting += 1
            self.counts["replaced"] += 1
        try:
            replacement = self.spawn()  # starts booting now; the next call waits only for what is left
        except Exception:
            return code
        replacement.idle_since = self.clock()
        with self.lock:
            if replacement in self.workers:
                self.idle.insert(0, replacement)
        return code

    def reap(self) -> int:
        """Stop the workers idle for longer than ``idle_timeout``; returns how many."""
        if self.idle_timeout is None:
            return 0
        cutoff = self.clock() - self.idle_timeout
        with self.lock:
            stale = [w for w in self.idle if w.idle_since <= cutoff]
            self.idle = [w for w in self.idle if w.idle_since > cutoff]
        for worker in stale:
            self.remove(worker)
        return len(stale)

    def reap_loop(self) -> None:
        assert self.idle_timeout is not None
        while not self.wake.wait(max(self.idle_timeout / 4, 0.05)):
            self.reap()
            with self.lock:
                if not self.workers and not self.starting:
                    self.reaper = None
                    return

    def close(self) -> None:
        """Kill every worker's process group, idle and busy (on shutdown, collection and interpreter exit)."""
        with self.lock:
            self.closed = True
            workers, self.workers, self.idle = list(self.workers), set(), []
        self.wake.set()
        for worker in workers:
            worker.kill()  # a busy worker's caller then sees it die
        if _LEFTOVERS.sessions:
            _LEFTOVERS.sweep()


class ProcessRunner:
    """Warm worker processes, one call at a time each; a worker whose call misses its deadline or is
    cancelled is killed with its whole process group, and replaced.

    Args:
        max_workers: at most this many worker processes; started on demand. When all are busy
            a new call fails at once with :class:`ToolBusy`.
        idle_timeout: seconds a worker may sit idle before it is stopped (None: never).
        start_timeout: seconds a new worker may take to start. The start also counts against the
            timeout of the call waiting for it: at that deadline the call gets ToolTimeout (the tool
            not started, with a ``retry_after`` for when the worker should be ready) and the
            worker goes on starting for the next call.
        max_calls: retire a worker after this many calls (1: a fresh process per call; None: never).
        start_method: kept for compatibility; workers are always fresh interpreters (``"spawn"``).
        clock: monotonic time source for idle times.
    """

    def __init__(
        self,
        start_method: str = "spawn",
        *,
        max_workers: int = 4,
        idle_timeout: float | None = 300.0,
        start_timeout: float = 30.0,
        max_calls: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if start_method != "spawn":
            raise ValueError(f"start_method must be 'spawn' (warm workers are fresh interpreters), not {start_method!r}")
        _workers(max_workers, "max_workers")
        _workers(max_calls, "max_calls", optional=True)
        start_timeout = _span(start_timeout, "start_timeout")
        idle_timeout = None if idle_timeout is None else _span(idle_timeout, "idle_timeout", optional=True)
        self.max_workers = max_workers
        self.start_timeout = start_timeout
        self.max_calls = max_calls
        self._pool = _ProcessPool(max_workers, idle_timeout, clock)
        #: The pid of the worker that took the most recent call (for diagnostics and tests).
        self.last_pid: int | None = None
        weakref.finalize(self, self._pool.close)

    @property
    def killed(self) -> int:
        """Workers killed because their call missed its deadline or its caller was cancelled."""
        return self._pool.counts["killed"]

    @staticmethod
    def memory_limit(tool: Tool) -> int | None:
        """``tool.options["memory_limit"]``: bytes of address space a call may add in its worker (None: no limit).

        Enforced with ``RLIMIT_AS`` on Linux (elsewhere not enforced): an allocation past it
        fails in the tool (``MemoryError``), and the worker lives on. A bad value is a
        :class:`ToolDefinitionError` (the timeout plugin checks it when the tool is added).
        """
        value = tool.options.get("memory_limit")
        if value is None:
            return None
        if type(value) is not int or value <= 0:
            raise ToolDefinitionError(
                f"Tool '{tool.name}': memory_limit must be a positive number of bytes, got {value!r}.", tool=tool.name
            )
        return value

    def _job(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any]) -> bytes:
        try:
            return pickle.dumps((*_by_name(fn), kwargs, self.memory_limit(call.tool)), pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise _refused(
                call,
                call_failure(
                    call,
                    TypeError(f"process mode needs a picklable, importable tool function and arguments: {exc}"),
                ),
            ) from exc

    def _take(self, call: Call) -> _Worker:
        try:
            worker = self._pool.take()
        except Exception as exc:  # no socket or process for a worker (EMFILE, ENOMEM), or shut down: the tool did not start
            err = _could_not_start(call, "the process-mode worker", exc)
            raise _refused(call, err) from err.__cause__
        if worker is None:
            raise _refused(
                call,
                ToolBusy(
                    f"Tool '{call.tool.name}' cannot start: all {self.max_workers} process workers are busy. Try again later.",
                    tool=call.tool.name,
                    call_id=call.call_id,
                ),
            )
        self.last_pid = worker.pid
        return worker

    def _failed(self, call: Call, message: str) -> ToolExecutionError:
        return tool_failure(RuntimeError(message), call.tool.name, call.call_id)  # (the worker's text, no tool's)

    def _started(self, call: Call, worker: _Worker, frame: bytes | None, timeout: float) -> None:
        """Check a new worker's ready message (None: it did not come by the call's deadline or ``start_timeout``).

        The tool has not started: whatever fails here leaves ``call.ran`` False, and a call
        cancelled meanwhile gets ToolCancelled, its job not sent (the worker kept for the next call).
        """
        if frame is None:
            now = time.monotonic()
            if now < worker.born + self.start_timeout:  # the call's deadline came first
                self._pool.park(worker)  # it goes on starting, for the next call
                raise _refused(call, self._not_started(call, worker, timeout, now))
            self._pool.discard(worker)
            raise _refused(call, self._failed(call, f"the process-mode worker did not start within {self.start_timeout:g} s"))
        ok, info = pickle.loads(frame)
        if not ok:
            self._pool.discard(worker)
            raise _refused(call, self._failed(call, f"the process-mode worker failed to start: {info}"))
        worker.ready = True
        took, quickest = time.monotonic() - worker.born, self._pool.start_seconds
        if quickest is None or took < quickest:  # (a parked worker's ready message may be read long after it came)
            self._pool.start_seconds = took
        if call.cancelled:  # in the wait its ready message ended: no quiet wait saw it
            raise self._cancelled(call, worker, sent=False)

    def _not_started(self, call: Call, worker: _Worker, timeout: float, now: float) -> ToolTimeout:
        """The timeout of a call whose deadline came while its worker was starting: the tool did not
        start (the call is not cancelled: nothing of it runs), and ``retry_after`` is about when the
        worker will be ready (the quickest start seen, less what this one took so far; at least 50 ms),
        so a retry policy that retries timeouts waits for it and runs the tool once."""
        err = _timeout_error(call, timeout)
        took = self._pool.start_seconds
        err.retry_after = after = round(max(_CANCEL_POLL, 0.0 if took is None else took - (now - worker.born)), 3)
        err.message = (
            f"Tool '{call.tool.name}' did not start within {err.timeout:g} s: its worker process is still starting, "
            f"and the tool did not run. Try the same call again in about {after:g} s."
        )
        err.args = (err.message,)
        return err

    def _start_end(self, worker: _Worker, end: float) -> float:
        return min(end, worker.born + self.start_timeout)

    def _died_starting(self, call: Call, worker: _Worker) -> ToolError:
        """The error for a new worker that exited before its ready message (it is discarded)."""
        code = self._pool.discard(worker)
        return _refused(call, self._failed(call, f"the process-mode worker {exit_reason(code)} while starting"))

    def _start(self, call: Call, worker: _Worker, end: float, timeout: float) -> None:
        """Wait for a new worker's ready message, within the call's deadline and ``start_timeout``."""
        try:
            frame = self._read(call, worker, self._start_end(worker, end))
        except _WorkerGone:
            raise self._died_starting(call, worker) from None
        self._started(call, worker, frame, timeout)

    async def _astart(self, call: Call, worker: _Worker, end: float, timeout: float) -> None:
        """:meth:`_start` on the event loop."""
        try:
            frame = await self._aread(call, worker, self._start_end(worker, end))
        except _WorkerGone:
            raise self._died_starting(call, worker) from None
        self._started(call, worker, frame, timeout)

    def _unreadable(self, call: Call, worker: _Worker, exc: BaseException) -> BaseException:
        """The error for an answer that could not be read: the worker is gone or out of step, discarded."""
        if isinstance(exc, _WorkerGone):
            code = self._pool.discard(worker, "died")
            err = self._failed(call, f"the tool's worker process {exit_reason(code)} before answering")
            err.__cause__, err.__suppress_context__ = None, True
            return err
        self._pool.discard(worker, "killed")  # a frame half read (MemoryError, Ctrl-C): the worker is out of step
        if not isinstance(exc, Exception):
            return exc
        err = self._failed(call, f"the tool's answer could not be read: {type(exc).__name__}: {exc}")
        err.__cause__ = exc
        return err

    def _answer(self, call: Call, worker: _Worker, frame: bytes | None, timeout: float) -> Any:
        """The call's outcome from the worker's answer (None: none came by the deadline)."""
        self._check(call, worker, frame, timeout)
        assert frame is not None
        self._pool.give_back(worker, self.max_calls)  # its answer read whole and in step: ready for the next call
        return self._decode(call, frame, worker)

    def _check(self, call: Call, worker: _Worker, frame: bytes | None, timeout: float) -> None:
        """Raise for no answer by the deadline (``frame`` None) or one not in step (the worker discarded)."""
        if frame is None:
            self._pool.discard(worker, "killed")
            raise _timed_out(call, timeout)
        if frame[:_HEADER] != worker.tag:  # a frame the tool wrote itself: the real answer is still to come
            self._pool.discard(worker, "killed")
            raise self._failed(
                call, "the worker's answer was not in step with its call (the tool wrote to the worker's socket); worker replaced"
            )

    def _decode(self, call: Call, frame: bytes, worker: _Worker | None = None) -> Any:
        """The outcome an answer in step carries: its value, or the exception to raise (rebuilt here, in
        the caller, outside the call's deadline); ``_Stale`` when ``worker`` (given) could not load the job
        and was started before what a worker gets from here changed."""
        try:
            answer = _loads(memoryview(frame)[_HEADER:])
        except Exception as exc:  # the result does not unpickle here
            raise call_failure(
                call,
                TypeError(f"process mode: the tool's result cannot be unpickled: {type(exc).__name__}: {exc}"),
            ) from exc
        if answer[0]:
            return answer[1]
        if answer[0] is None:  # the worker could not load the job: the tool did not start (the worker is kept)
            err = self._failed(call, f"{answer[1]} (the tool did not run)")
            # (only here, never per call: _preparation reads every module; a tool's module imported, a sys.path
            # entry added after the worker started reach a worker started now)
            if worker is not None and worker.prepared != _preparation():
                raise _Stale(err)
            raise _refused(call, err)
        raise _remote_error(call, *answer[1:])

    def _kept(self, call: Call, frame: bytes) -> None:
        """For a call cancelled once its worker's answer was read: what the tool did, as ``call.lingering``
        (a :class:`Lingering` finished already), so the plugins settle the call as the tool ended."""
        try:
            ok, value = True, self._decode(call, frame)
        except StopIteration as exc:  # said as an awaited call says it
            ok, value = False, _stop_iteration()
            value.__cause__ = exc
        except Exception as exc:
            ok, value = False, exc
        if not call.ran:  # the worker could not load the job: the tool did not run, nothing to keep
            return
        call.lingering = lingering = Lingering()
        lingering.start()
        lingering.finished(ok, value)

    def _late(self, worker: _Worker) -> bytes | None:
        """At a cancel once the job was sent whole: the answer if all of it came already (read without
        blocking), else None. The worker is out of step if the read fails: None, and it is killed."""
        if worker.unsent is not None:
            return None
        try:
            frame = _take(worker)
        except Exception:
            return None
        return frame if frame is not None and frame[:_HEADER] == worker.tag else None

    async def _agive_back(self, call: Call, worker: _Worker, frame: bytes) -> None:
        """:meth:`_ProcessPool.give_back` on the event loop: a worker retired (``max_calls``, shut down) is
        killed here and reaped in a thread, as :meth:`_akill` does; a cancel meanwhile keeps the outcome."""
        pool = self._pool
        if pool.keep(worker, self.max_calls):
            return
        worker.signal()
        try:
            await _off_loop(pool.remove, worker)
        except asyncio.CancelledError:  # the thread reaps it all the same; the answer is read
            self._kept(call, frame)
            raise
        except RuntimeError:  # no thread can start (the interpreter is shutting down): here, then
            pool.remove(worker)

    def _cancelled(self, call: Call, worker: _Worker, sent: bool) -> ToolError:
        """The error of ``call``, cancelled while it holds ``worker``: once its job was ``sent``, the
        worker is killed with its group, as at a timeout; before, the tool did not start
        (``call.ran`` False) and the worker is kept (going on starting) for the next call."""
        if sent:
            self._pool.discard(worker, "killed")
            return ToolCancelled.of(call)
        self._pool.park(worker)
        return _refused(call, ToolCancelled.of(call))

    def _turn(self, call: Call, worker: _Worker, end: float, quiet: float) -> bytes | float | None:
        """One turn of :meth:`_read` and :meth:`_aread`, which wait on the socket between turns.

        It sends more of what is :attr:`~_Worker.unsent` of the job, else reads, and returns the
        next frame once whole, None at ``end``, or else the seconds left, for the caller to wait
        at most ``_CANCEL_POLL`` of them. It tries before it waits: the worker often answers while
        the job is written. ``quiet`` is the seconds that were left before a wait in which the
        socket was not ready (0.0: none): :meth:`_quiet` then checks ``call`` and the worker, and
        a wait that reached ``end`` ends the read (past ``end`` nothing more is read, however much
        keeps coming).
        """
        if quiet:
            frame = self._quiet(call, worker)
            if frame is not None or quiet <= _CANCEL_POLL:
                return frame
        unsent = worker.unsent
        if unsent is not None:
            worker.push(unsent)
        else:
            frame = _take(worker)
            if frame is not None:
                return frame
        left = end - time.monotonic()
        return left if left > 0.0 else None

    def _read(self, call: Call, worker: _Worker, end: float) -> bytes | None:
        """The worker's next frame, the job's :attr:`~_Worker.unsent` part sent first; None at ``end``.

        A cancel of ``call`` is seen within ``_CANCEL_POLL``: ToolCancelled (see :meth:`_cancelled`).
        """
        step = self._turn(call, worker, end, 0.0)
        while isinstance(step, float):
            step = self._turn(call, worker, end, 0.0 if worker.wait(min(step, _CANCEL_POLL)) else step)
        return step

    async def _aread(self, call: Call, worker: _Worker, end: float) -> bytes | None:
        """:meth:`_read` on the event loop; a worker killed for a cancel is reaped off it (:meth:`_akill`)."""
        step = self._turn(call, worker, end, 0.0)
        while isinstance(step, float):
            quiet = 0.0 if await worker.await_ready(min(step, _CANCEL_POLL)) else step
            if quiet and call.cancelled and worker.ready:
                await self._akill(worker)  # then _quiet raises ToolCancelled
            step = self._turn(call, worker, end, quiet)
        return step

    async def _akill(self, worker: _Worker) -> None:
        """Discard a busy worker (killed) from the event loop: its group is killed here, and the rest of its
        session, the reaping (up to 0.1 s a GiB the worker held) and the replacement's start are left to a
        thread of their own (:func:`_off_loop`)."""
        worker.signal()
        try:
            await _off_loop(self._pool.discard, worker, "killed")
        except RuntimeError:  # no thread can start (the interpreter is shutting down): here, then
            self._pool.discard(worker, "killed")

    def _fresh(self, call: Call, error: ToolError) -> _Worker:
        """A worker started now for a job a stale worker could not load (that one retired already); when none
        can be had (every place taken, shut down, no process to start), the refusal ``error`` stands."""
        try:
            worker = self._pool.take(warm=False)  # (shut down: a RuntimeError, below)
        except Exception as exc:
            raise _refused(call, error) from exc
        if worker is None:
            raise _refused(call, error)
        self.last_pid = worker.pid
        return worker

    def _quiet(self, call: Call, worker: _Worker) -> bytes | None:
        """After a wait in which the socket was not ready: ToolCancelled when ``call`` was cancelled;
        a frame that came just now; else ``_WorkerGone`` if the worker exited (a process the tool
        forked may hold its socket open)."""
        if call.cancelled:
            raise self._cancelled(call, worker, sent=worker.ready)  # not ready: waiting for its start
        frame = worker.take() if worker.unsent is None else None
        if frame is None and worker.exited():
            raise _WorkerGone
        return frame

    def run(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
        if call.cancelled:  # before the runner (a pre-call hook, another thread): the tool never starts
            raise _refused(call, ToolCancelled.of(call))
        job = self._job(call, fn, kwargs)
        worker = self._take(call)
        end = time.monotonic() + timeout  # a worker's start counts: the call's time is the caller's
        try:
            return self._run(call, worker, job, end, timeout)
        except _Stale as stale:  # once, in a worker started now (this one retired, not counted as killed)
            if self._pool.retire(worker):
                worker.kill()
            worker = self._fresh(call, stale.error)
        try:
            return self._run(call, worker, job, end, timeout)
        except _Stale as stale:  # changed again meanwhile: refused
            raise _refused(call, stale.error) from None

    def _run(self, call: Call, worker: _Worker, job: bytes, end: float, timeout: float) -> Any:
        """:meth:`run` with ``worker`` taken; ``_Stale`` (see :meth:`_decode`)."""
        try:
            if not worker.ready:
                self._start(call, worker, end, timeout)
        except ToolError:  # a failed or cancelled start (the worker is discarded, or parked to go on starting)
            raise
        except BaseException:  # e.g. KeyboardInterrupt while it starts
            self._pool.discard(worker, "killed")
            raise
        try:
            worker.submit(job)
            frame = self._read(call, worker, end)
        except ToolError:  # a cancelled call (the worker is discarded already)
            raise
        except BaseException as exc:  # gone, or e.g. KeyboardInterrupt while waiting: kill the tool now
            late = None if isinstance(exc, Exception) else self._late(worker)
            if late is not None:  # the answer came whole before the interrupt: the tool ended, kept
                self._pool.give_back(worker, self.max_calls)
                self._kept(call, late)
                raise
            raise self._unreadable(call, worker, exc)  # noqa: B904 - its cause is set
        return self._answer(call, worker, frame, timeout)

    async def arun(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
        if call.cancelled:
            raise _refused(call, ToolCancelled.of(call))
        job = self._job(call, fn, kwargs)
        worker = self._take(call)
        end = time.monotonic() + timeout
        try:
            return await self._arun(call, worker, job, end, timeout)
        except _Stale as stale:  # as in run(); the retired worker reaped off the loop, as _akill does
            if self._pool.retire(worker):
                worker.signal()
                try:
                    await _off_loop(worker.kill)
                except asyncio.CancelledError:  # the thread reaps it all the same; the tool did not run
                    call.ran = False
                    raise
                except RuntimeError:  # no thread can start (the interpreter is shutting down): here, then
                    worker.kill()
            worker = self._fresh(call, stale.error)
        try:
            return await self._arun(call, worker, job, end, timeout)
        except _Stale as stale:
            raise _refused(call, stale.error) from None

    async def _arun(self, call: Call, worker: _Worker, job: bytes, end: float, timeout: float) -> Any:
        """:meth:`arun` with ``worker`` taken; ``_Stale`` (see :meth:`_decode`)."""
        try:
            if not worker.ready:
                await self._astart(call, worker, end, timeout)
        except ToolError:
            raise
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError):
                self._pool.discard(worker)
                raise
            call.ran = False  # the caller's task was cancelled: the tool did not start, and its worker goes on starting
            self._pool.park(worker)
            raise
        try:
            worker.submit(job)
            frame = await self._aread(call, worker, end)
        except ToolError:
            raise
        except BaseException as exc:
            if isinstance(exc, Exception):  # gone, or an answer half read (MemoryError)
                raise self._unreadable(call, worker, exc)  # noqa: B904 - its cause is set
            if isinstance(exc, asyncio.CancelledError):  # the caller's task was cancelled
                late = self._late(worker)
                if late is not None:  # the answer came whole before the cancel: the tool ended, kept
                    await self._agive_back(call, worker, late)
                    self._kept(call, late)
                    raise
                call.cancel()
                await self._akill(worker)  # kill the tool now
            else:  # the coroutine closed (it cannot await any more), KeyboardInterrupt
                call.cancel()
                self._pool.discard(worker, "killed")
            raise
        if frame is None or frame[:_HEADER] != worker.tag:  # to be killed: see _check
            await self._akill(worker)
        self._check(call, worker, frame, timeout)
        assert frame is not None
        await self._agive_back(call, worker, frame)  # its answer read whole and in step
        try:
            return self._decode(call, frame, worker)
        except StopIteration as exc:  # a coroutine cannot raise it (see ThreadRunner.arun)
            raise _stop_iteration() from exc

    def stats(self) -> dict[str, int]:
        """``workers`` (the pool's size), ``alive``, ``busy``, and how many were ``killed`` (deadline or
        cancellation), ``died`` (exited during a call) and ``replaced``."""
        pool = self._pool
        with pool.lock:
            alive = len(pool.workers)
            return {"workers": self.max_workers, "alive": alive, "busy": alive - len(pool.idle), **pool.counts}

    def reap_idle(self) -> int:
        """Stop workers idle for longer than ``idle_timeout`` now (a background thread also does this)."""
        return self._pool.reap()

    def shutdown(self) -> None:
        """Kill every worker's process group now. Later calls fail."""
        self._pool.close()
