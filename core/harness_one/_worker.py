"""The process-mode worker: a warm child process that runs pickled calls, one at a time.

:class:`harness_one.ProcessRunner` starts this file as a script (``python _worker.py FD``) in
a new session, so the worker leads its own process group. It talks to its parent over the
socket ``FD`` in frames (an 8-byte little-endian length, then a pickle):

1. parent -> worker: ``multiprocessing.spawn`` preparation data (``sys.path``, cwd, the main
   module), applied as a ``spawn`` child would, so tools defined in ``__main__`` resolve;
   worker -> parent: ``(True, pid)`` when ready, or ``(False, reason)``.
2. then, per call: parent -> worker ``(fn, kwargs)``; worker -> parent ``(True, result, None)``
   or ``(False, exception, traceback text)``.

The worker exits when its socket closes. Only the standard library is imported here, so a
worker starts in the time of a bare interpreter plus the main module's imports.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any

__all__ = ["STARTING", "recv", "send"]

#: Set in a worker's environment while it imports the parent's main module.
STARTING = "HARNESS_ONE_WORKER_STARTING"
_HEADER = 8


def send(fd: int, data: bytes) -> None:
    """Write one frame to ``fd``."""
    view = memoryview(len(data).to_bytes(_HEADER, "little") + data)
    while view:
        view = view[os.write(fd, view) :]


def _read(fd: int, size: int) -> bytes:
    chunk = os.read(fd, size)
    if len(chunk) == size:
        return chunk
    chunks = [chunk]
    size -= len(chunk)
    while chunk and size:
        chunk = os.read(fd, min(size, 1 << 20))
        chunks.append(chunk)
        size -= len(chunk)
    if size:
        raise EOFError("the other end closed the socket")
    return b"".join(chunks)


def recv(fd: int) -> bytes:
    """Read one frame from ``fd``; :class:`EOFError` when the other end has closed it."""
    return _read(fd, int.from_bytes(_read(fd, _HEADER), "little"))


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _answer(job: bytes) -> bytes:
    """Run one pickled ``(fn, kwargs)`` and pickle its outcome (an outcome that does not pickle becomes a TypeError)."""
    try:
        fn, kwargs = pickle.loads(job)
    except BaseException as exc:
        answer: tuple[bool, Any, str | None] = (
            False,
            TypeError(f"process mode: the worker cannot load the tool function or its arguments: {type(exc).__name__}: {exc}"),
            None,
        )
    else:
        try:
            result = fn(**kwargs)
            if hasattr(result, "__await__"):
                import asyncio

                result = asyncio.run(_await(result))
            answer = (True, result, None)
        except BaseException as exc:
            import traceback

            answer = (False, exc, traceback.format_exc())
    try:
        data = pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
        if not answer[0]:
            pickle.loads(data)  # an exception class whose __init__ does not match its args would fail in the parent
    except Exception as exc:
        what = "result" if answer[0] else f"exception {type(answer[1]).__name__}"
        data = pickle.dumps((False, TypeError(f"process mode: the tool's {what} cannot be pickled: {exc}"), answer[2]))
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    return data


def main(fd: int) -> None:
    """Prepare like a ``spawn`` child, say ready, then answer calls until the parent closes the socket."""
    os.set_inheritable(fd, False)  # the tool's own subprocesses must not hold the socket open
    os.environ[STARTING] = "1"  # a ProcessRunner started while the main module is imported refuses
    try:
        import multiprocessing.spawn

        multiprocessing.spawn.prepare(pickle.loads(recv(fd)))
    except BaseException as exc:
        send(fd, pickle.dumps((False, f"{type(exc).__name__}: {exc}")))
        raise SystemExit(1) from None
    del os.environ[STARTING]
    send(fd, pickle.dumps((True, os.getpid())))
    while True:
        try:
            job = recv(fd)
        except EOFError:
            return
        send(fd, _answer(job))


if __name__ == "__main__":
    main(int(sys.argv[1]))
