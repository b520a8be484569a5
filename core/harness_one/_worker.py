"""The process-mode worker: a warm child process that runs pickled calls, one at a time.

:class:`harness_one.ProcessRunner` starts this file as a script (``python _worker.py FD``) in
a new session, so the worker leads its own process group. It talks to its parent over the
socket ``FD`` in frames (an 8-byte little-endian length, then a pickle):

1. parent -> worker: ``multiprocessing.spawn`` preparation data (``sys.path``, cwd, the main
   module), applied as a ``spawn`` child would, so tools defined in ``__main__`` resolve, and
   under ``"harness_one_files"`` the modules the parent loaded from a file under a name that
   does not find that file (``harness-one --tools FILE.py``): the worker imports each such
   name from its file when a job names it; worker -> parent: ``(True, pid)`` when ready, or
   ``(False, reason)``.
2. then, per call: parent -> worker an 8-byte job id, then ``(fn, attribute, kwargs, memory)``
   (``attribute``: None, or the attribute of ``fn`` that holds the tool function, when ``fn`` is
   the wrapper ``defineTool`` left under the function's name; ``memory``: bytes of address
   space the call may add, or None); worker -> parent the same
   id, then ``(True, result)``, ``(None, reason)`` when the job itself could not be loaded (the
   tool did not start: its module is not importable here, an argument does not unpickle), or
   ``(False, pickled exception or None, description,
   traceback text, pickled (class, args, __dict__) or None)`` where the description is
   ``ToolError.to_dict()`` for harness-one's errors and ``{"type", "name", "message"}`` otherwise
   (``type``: ``module.qualname``, a builtin's bare; ``name``: the class's ``__name__``): when
   the exception itself does not unpickle, the parent rebuilds it from its class, args and
   ``__dict__`` (``__init__`` not called), else a typed error from its description. An answer with another id (a frame the tool
   wrote to the socket itself) tells the parent the worker is out of step: it is killed.

The worker exits when its socket closes; a watchdog thread kills the worker's whole session
(its process group, and on Linux the processes of its session in other groups) the moment
the parent's end closes, so a worker busy with a hung tool does not outlive a parent that
died without cleaning up (SIGKILL, a crash). Only the standard library is imported here, so
a worker starts in the time of a bare interpreter plus the main module's imports.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import sys
import threading
import types
from typing import Any

__all__ = ["STARTING", "exit_reason", "frame", "kill_session", "recv", "send"]

#: Set in a worker's environment while it imports the parent's main module.
STARTING = "HARNESS_ONE_WORKER_STARTING"
_HEADER = 8


def exit_reason(code: int, word: str = "code") -> str:
    """How a process ended, from its return code: ``exited with code 1`` (``word``: ``status`` for MCP servers),
    ``was killed by SIGKILL``, ``was killed by signal 40`` for a signal with no name."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with {word} {code}"


def frame(data: bytes, prefix: bytes = b"") -> bytes:
    """The bytes of one frame: the length of ``prefix`` and ``data`` (8 bytes, little-endian), then both."""
    return b"".join(((len(prefix) + len(data)).to_bytes(_HEADER, "little"), prefix, data))


def send(fd: int, data: bytes, prefix: bytes = b"") -> None:
    """Write one frame (``prefix`` then ``data``) to ``fd``."""
    view = memoryview(frame(data, prefix))
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


def _stats() -> list[tuple[int, bytes, int, int, int]]:
    """``(pid, state, ppid, pgrp, session)`` of every process (Linux: from ``/proc``; elsewhere none)."""
    found: list[tuple[int, bytes, int, int, int]] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:  # os.open and os.read: some 40% less time than open() over every process
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                stat = os.read(fd, 1024)
            finally:
                os.close(fd)
        except OSError:  # exited meanwhile
            continue
        fields = stat.rsplit(b")", 1)[1].split(None, 4)  # the command name may hold spaces and ")"
        found.append((int(name), fields[0], int(fields[1]), int(fields[2]), int(fields[3])))
    return found


def reap_orphans(sid: int) -> bool:
    """Reap the ended processes of session ``sid`` that are this process's children (Linux; elsewhere
    none): those a killed worker (the session's leader, reaped already) left behind, reparented here
    when this process is PID 1 or a child subreaper (a container without an init), which nothing
    else would reap. Returns whether any process of the session is left, for a later call to reap:
    one still ending (a big address space to free), ended but not yet reparented here (its parent
    still ending), or not yet waitable (its tracer has not collected it).

    A process with pid ``sid`` means the session ended: a pid is not reused while a process holds
    it as its session id, so that one is another's (a new worker's); nothing is reaped then.
    """
    stats = _stats()
    if any(pid == sid for pid, _, _, _, _ in stats):
        return False
    me, left = os.getpid(), False
    for pid, state, ppid, _, session in stats:
        if session != sid:
            continue
        if ppid == me and state in (b"Z", b"X"):
            with contextlib.suppress(ChildProcessError, OSError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    continue
        left = True
    return left


def _session_members(sid: int) -> list[int]:
    """The pids of the live processes in session ``sid`` (Linux: from ``/proc``; elsewhere none): of a
    process started in a session of its own (``start_new_session``), its whole process group and more.

    A zombie is left out: it cannot fork, and killing it again would not end it (its parent
    reaps it), so a scan that kept finding it would repeat to its limit.
    """
    return [pid for pid, state, _, _, session in _stats() if session == sid and state not in (b"Z", b"X")]


def kill_session(sid: int, spare: int | None = None) -> None:
    """SIGKILL every process of session ``sid`` but ``spare`` (Linux; elsewhere nothing).

    A worker leads its own session, so this reaches what a tool started in another process
    group of it (``Popen(process_group=0)``, a shell's ``set -m``), which the group kill
    misses. Repeated while it finds any, since a process may fork during the scan. One scan
    reads ``/proc/PID/stat`` of every process on the system (about 10 us each).
    """
    for _ in range(16):
        members = [pid for pid in _session_members(sid) if pid != spare]
        if not members:
            return
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


class _Files:
    """A ``sys.meta_path`` finder for the modules the parent loaded from a file under a name that does
    not find it (``harness-one --tools FILE.py`` imports ``FILE.py`` as ``harness_one_local_<hash>``):
    a job that names one imports it from the same file, under the same name."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        origin = self.files.get(name)
        if origin is None:
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(name, origin)


def _text(exc: BaseException) -> str:
    """``Type: text`` of ``exc``, whatever its ``__str__`` raises (``SystemExit`` included)."""
    try:
        text = str(exc)
    except BaseException:
        text = ""
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def _describe(exc: BaseException) -> dict[str, Any]:
    """What the parent needs to rebuild ``exc`` as a typed error if the exception itself does not cross."""
    errors = sys.modules.get("harness_one._errors")  # imported already if the tool raised one of its errors
    if errors is not None and isinstance(exc, errors.ToolError):
        try:
            described: dict[str, Any] = exc.to_dict()
            # the nearest harness-one class, which from_dict knows (a tool's own subclass it does not)
            described["type"] = next(c.__name__ for c in type(exc).__mro__ if c.__module__ == errors.__name__)
            return described
        except BaseException:  # a broken to_dict (SystemExit included): the worker answers all the same
            pass
    try:
        message = str(exc)
    except BaseException:
        message = ""
    cls = type(exc)  # "type" named as harness_one._errors.type_name names it (not imported here), "name" for the message
    named = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    return {"type": named, "name": cls.__name__, "message": message}


def _pickled(value: object) -> bytes | None:
    try:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    except BaseException:  # a __reduce__ that calls sys.exit: not this worker's exit
        return None


def _failure(exc: BaseException, trace: str | None) -> bytes:
    """The answer for a call that raised ``exc``: the exception pickled; its class, ``args`` and
    ``__dict__`` pickled apart, for the parent to rebuild it without calling ``__init__`` when the
    exception does not unpickle (one whose ``__init__`` takes required keyword-only arguments:
    ``httpx.HTTPStatusError``); and its description, for when neither does."""
    try:
        parts = _pickled((type(exc), exc.args, getattr(exc, "__dict__", None) or {}))
    except BaseException:  # an ``args`` or ``__dict__`` that raises
        parts = None
    return pickle.dumps((False, _pickled(exc), _describe(exc), trace, parts), pickle.HIGHEST_PROTOCOL)


def _limit_memory(extra: int) -> tuple[int, int] | None:
    """Let the call add at most ``extra`` bytes of address space (``RLIMIT_AS``); the limits to restore.

    Linux only (the address space in use is read from ``/proc``); elsewhere None, no limit.
    An existing lower limit stays.
    """
    try:
        import resource

        with open("/proc/self/statm", "rb") as statm:
            used = int(statm.read().split()[0]) * resource.getpagesize()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = used + extra
        for bound in (soft, hard):
            if bound != resource.RLIM_INFINITY:
                cap = min(cap, bound)
        if cap >= 1 << 62:  # past any address space: no limit (setrlimit would overflow)
            return None
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, OSError, ValueError, OverflowError):
        return None
    return soft, hard


def _restore(limits: tuple[int, int] | None) -> None:
    if limits is not None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, limits)


def _answer(job: memoryview) -> bytes:
    """Run one pickled ``(fn, attribute, kwargs, memory)`` and pickle its outcome (a result that does not pickle becomes a TypeError)."""
    try:
        fn, attribute, kwargs, memory = pickle.loads(job)
        if attribute is not None:  # a wrapper named in fn's place (defineTool's): the function it holds
            fn = getattr(fn, attribute)
    except BaseException as exc:  # the tool did not start: the parent refuses the call (call.ran False)
        reason = f"process mode: the worker cannot load the tool function or its arguments: {_text(exc)}"
        return pickle.dumps((None, reason), pickle.HIGHEST_PROTOCOL)
    restore = _limit_memory(memory) if memory is not None else None
    pid = os.getpid()
    failed: BaseException | None = None
    try:  # the limit bounds the call and the pickling of its outcome (a __reduce__ may build a large one)
        try:
            try:
                result = fn(**kwargs)  # another awaitable a sync tool returns is its result, as in every mode
                if type(result) is types.CoroutineType:  # never to be awaited: its failure, worded as in every mode
                    from harness_one._errors import unawaited  # (cold: a worker starts on the standard library alone)

                    raise unawaited(result)
            finally:
                if os.getpid() != pid:  # a child the tool forked returned here: only the worker answers
                    _flush()
                    os._exit(0)
        except BaseException as exc:
            import traceback

            if restore is not None and type(exc) is MemoryError and not exc.args:  # say which limit it was
                exc = MemoryError(f"the call needed more than its memory_limit of {memory} bytes")
            failed = exc  # (its report, built under the limit, is built again past it if it does not fit)
            data = _failure(exc, traceback.format_exc())
        else:
            try:
                data = pickle.dumps((True, result), pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # a __reduce__ that calls sys.exit: the tool's failure, not the worker's exit
                if restore is not None and type(exc) is MemoryError:
                    error: Exception = MemoryError(f"the result needed more than its memory_limit of {memory} bytes")
                else:
                    error = TypeError(f"process mode: the tool's result cannot be pickled: {_text(exc)}")
                del result
                data = _failure(error, None)
    except MemoryError:  # the answer telling its failure did not fit in the limit: built once it is lifted
        if restore is None:
            raise
        _restore(restore)
        restore = None
        if failed is not None:  # the tool's own exception, as it raised it (its type is what retry rules read)
            import traceback

            data = _failure(failed, "".join(traceback.format_exception(failed)))
        else:
            data = _failure(MemoryError(f"the call's outcome needed more than its memory_limit of {memory} bytes"), None)
    finally:
        _restore(restore)
    _flush()
    return data


def _last_resort(exc: BaseException) -> bytes:
    """The answer when building one failed (a hostile exception's ``__str__`` raised in :func:`_failure`)."""
    message = f"process mode: the worker could not report the tool's outcome: {_text(exc)}"
    return pickle.dumps((False, None, {"type": "RuntimeError", "message": message}, None, None), pickle.HIGHEST_PROTOCOL)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):  # a closed or broken stream: the answer still goes out
                stream.flush()


def _die() -> None:
    """Kill this worker's session (the tool's processes in other groups of it), then its group and itself."""
    pid = os.getpid()
    kill_session(pid, spare=pid)  # the worker leads its session and its group (setsid)
    os.killpg(pid, signal.SIGKILL)


def wait_for_hangup(fd: int, stop: int = -1) -> bool:
    """Block until ``fd`` reports its other end gone (``POLLHUP``/``POLLERR``: a closed pipe or socket end, a
    hung-up terminal; ``POLLNVAL``: ``fd`` itself closed): True; or until ``stop`` (a descriptor; -1: none) is
    readable: False. (A writable descriptor is ready at once: no event loop can wait for this alone.)"""
    poller = select.poll()
    poller.register(fd, 0)  # no events asked for: only POLLHUP / POLLERR / POLLNVAL wake it
    if stop >= 0:
        poller.register(stop, select.POLLIN)
    while True:
        ready = poller.poll()
        if any(ready_fd == stop for ready_fd, _ in ready):
            return False
        if ready:
            return True


def _watch(fd: int) -> None:
    """Kill this worker's session (itself, the tool's children) once the parent's end of ``fd`` closes."""
    wait_for_hangup(fd)
    _die()


def main(fd: int) -> None:
    """Prepare like a ``spawn`` child, say ready, then answer calls until the parent's end closes."""
    os.set_inheritable(fd, False)  # the tool's own subprocesses must not hold the socket open
    threading.Thread(target=_watch, args=(fd,), name="harness-one-watchdog", daemon=True).start()
    os.environ[STARTING] = "1"  # a ProcessRunner started while the main module is imported refuses
    try:
        import multiprocessing.spawn

        data = pickle.loads(recv(fd))
        files = data.pop("harness_one_files", None)
        if files:
            sys.meta_path.insert(0, _Files(files))
        multiprocessing.spawn.prepare(data)
    except BaseException as exc:
        send(fd, pickle.dumps((False, f"{type(exc).__name__}: {exc}")))
        raise SystemExit(1) from None
    del os.environ[STARTING]
    send(fd, pickle.dumps((True, os.getpid())))
    while True:
        try:
            job = recv(fd)
        except EOFError:  # the parent closes its end only after killing the group: it died
            _die()
        try:
            answer = _answer(memoryview(job)[_HEADER:])
        except BaseException as exc:  # never the worker's end: a tool's outcome that would not be told
            try:
                answer = _last_resort(exc)
            except BaseException:
                answer = _last_resort(RuntimeError())
        send(fd, answer, job[:_HEADER])  # the answer carries its job's id


if __name__ == "__main__":
    main(int(sys.argv[1]))
