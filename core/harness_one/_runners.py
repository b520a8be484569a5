"""How a sync tool runs when its attempt has a timeout: in a worker thread, or in a child process.

The guarantees differ, and the docs say so (``docs/plugins.md``, timeouts):

- :class:`ThreadRunner` *abandons*: the caller gets :class:`ToolTimeout` at the deadline,
  but a Python thread cannot be killed, so the tool runs on in its worker until it returns.
  The pool is bounded; abandoned workers are counted as ``stuck``; when every worker is busy
  a new call fails at once with :class:`ToolBusy` instead of queueing.
- :class:`ProcessRunner` *kills*: the tool runs in a child process that is killed at the
  deadline. Arguments, results and exceptions cross a pipe, so they must pickle, and the
  tool function must be importable by name.
"""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing
import pickle
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._errors import ToolBusy, ToolExecutionError, ToolTimeout

if TYPE_CHECKING:
    from ._call import Call

__all__ = ["ProcessRunner", "Runner", "ThreadRunner"]


@runtime_checkable
class Runner(Protocol):
    """Runs ``fn(**kwargs)`` for ``call`` within ``timeout`` seconds or raises :class:`ToolTimeout`."""

    def run(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any: ...

    async def arun(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any: ...


class ThreadRunner:
    """A bounded pool of worker threads; a timed-out tool is abandoned, not killed."""

    def __init__(self, max_workers: int = 32) -> None:
        self.max_workers = max_workers
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="harness-one-tool")
        self._free = threading.BoundedSemaphore(max_workers)
        self._lock = threading.Lock()
        self._busy = 0
        self._stuck = 0

    def _start(self, call: Call) -> list[bool]:
        if not self._free.acquire(blocking=False):
            raise ToolBusy(
                f"Tool '{call.tool.name}' cannot start: all {self.max_workers} timeout workers are busy "
                f"({self._stuck} still running past their deadline). Try again later.",
                tool=call.tool.name,
                call_id=call.call_id,
            )
        with self._lock:
            self._busy += 1
        return [False]  # set to True when the caller abandons the run

    def _body(self, fn: Callable[..., Any], kwargs: dict[str, Any], abandoned: list[bool]) -> Any:
        try:
            return fn(**kwargs)
        finally:
            with self._lock:
                self._busy -= 1
                if abandoned[0]:
                    self._stuck -= 1
            self._free.release()

    def _abandon(self, call: Call, abandoned: list[bool], timeout: float) -> ToolTimeout:
        with self._lock:
            if self._busy and not abandoned[0]:
                abandoned[0] = True
                self._stuck += 1
        call.cancel()
        return ToolTimeout(timeout, tool=call.tool.name, call_id=call.call_id)

    def run(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
        abandoned = self._start(call)
        future = self._pool.submit(self._body, fn, kwargs, abandoned)
        try:
            return future.result(timeout=max(timeout, 0.0))
        except FuturesTimeout:
            if future.done():  # finished at the deadline: take the result
                return future.result()
            raise self._abandon(call, abandoned, timeout) from None

    async def arun(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
        abandoned = self._start(call)
        future = asyncio.get_running_loop().run_in_executor(self._pool, self._body, fn, kwargs, abandoned)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=max(timeout, 0.0))
        except asyncio.TimeoutError:
            raise self._abandon(call, abandoned, timeout) from None

    def stats(self) -> dict[str, int]:
        """``workers``, ``busy`` (running now) and ``stuck`` (running past a deadline the caller gave up on)."""
        with self._lock:
            return {"workers": self.max_workers, "busy": self._busy, "stuck": self._stuck}

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _child(conn: Any, fn: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    try:
        result = fn(**kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
        message: tuple[bool, Any] = (True, result)
    except BaseException as exc:
        message = (False, exc)
    try:
        conn.send(message)
    except Exception as exc:  # the result or the exception does not pickle
        what = "result" if message[0] else f"exception {type(message[1]).__name__}"
        conn.send((False, TypeError(f"process mode: the tool's {what} cannot be pickled: {exc}")))
    finally:
        conn.close()


async def _await(awaitable: Any) -> Any:
    return await awaitable


class ProcessRunner:
    """One child process per attempt, killed at the deadline; nothing outlives the call.

    Args:
        start_method: the multiprocessing start method (``spawn`` by default: safe with
            threads; ``fork`` starts faster where the process has no threads).
    """

    def __init__(self, start_method: str = "spawn") -> None:
        self._ctx: Any = multiprocessing.get_context(start_method)
        self.killed = 0
        #: The pid of the most recent child (for diagnostics and tests).
        self.last_pid: int | None = None

    def run(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
        try:
            pickle.dumps((fn, kwargs))
        except Exception as exc:
            raise ToolExecutionError(
                TypeError(f"process mode needs a picklable, importable tool function and arguments: {exc}"),
                tool=call.tool.name,
                call_id=call.call_id,
            ) from exc
        receive, send = self._ctx.Pipe(duplex=False)
        process = self._ctx.Process(target=_child, args=(send, fn, kwargs), daemon=True, name=f"harness-one-{call.tool.name}")
        process.start()
        self.last_pid = process.pid
        send.close()
        try:
            if not receive.poll(max(timeout, 0.0)):
                call.cancel()
                raise ToolTimeout(timeout, tool=call.tool.name, call_id=call.call_id)
            try:
                ok, payload = receive.recv()
            except EOFError:
                process.join(5)
                raise ToolExecutionError(
                    RuntimeError(f"the tool's process exited with code {process.exitcode} before answering"),
                    tool=call.tool.name,
                    call_id=call.call_id,
                ) from None
        finally:
            receive.close()
            if process.is_alive():
                process.kill()
                self.killed += 1
            process.join()
        if ok:
            return payload
        raise payload

    async def arun(self, call: Call, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
        return await asyncio.to_thread(self.run, call, fn, kwargs, timeout)
