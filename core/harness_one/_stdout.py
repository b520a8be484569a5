"""Stdin and stdout kept for the wire: fd 0, fd 1, ``sys.stdin`` and ``sys.stdout`` go elsewhere while tools run.

``harness-one serve`` (:mod:`harness_one.mcp._stdio`), ``run`` and ``call`` write their answers
to a private copy of fd 1 and point fd 1 at stderr meanwhile, so what a tool prints (``print``,
a C library's or a child process's writes to fd 1) cannot land between the answers. ``serve``
and ``run`` read their requests from a private copy of fd 0 and point fd 0 and ``sys.stdin`` at
the null device meanwhile, so a tool that reads stdin (``input()``, ``sys.stdin.read()``, a
child process) reads nothing instead of taking requests.

Embedded in a Python process whose ``sys.stdout`` or ``sys.stdin`` is not fd 1 or fd 0 (a test
runner's capture, ``contextlib.redirect_stdout``), the answers go to that stream and the requests
come from it: through its binary ``buffer``, or as UTF-8 text when it has none (an ``io.StringIO``).

The command line writes to stderr through :func:`guard_stderr`: once stderr cannot be written (its
reader gone: a broken pipe), what follows for it is dropped, as for a closed stderr (``2>&-``),
instead of failing the command after its tool has run. A stderr already broken when the command starts
(``select.poll`` reports it at once) is pointed at the null device before anything copies fd 2.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import select
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Protocol

__all__ = [
    "LineReader",
    "Writer",
    "claim",
    "claim_stdin",
    "claim_stdout",
    "fileno",
    "flush_stdout",
    "guard_stderr",
    "is_closed",
    "stdin_for_requests",
    "stdout_for_answers",
]


class Writer(Protocol):
    """Where answers go: bytes written, then flushed."""

    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...


class LineReader(Protocol):
    """Where requests come from: ``readline(size)`` gives at most ``size`` bytes, through the next newline."""

    def readline(self, size: int = -1, /) -> bytes: ...


class _TextWriter:
    """A :class:`Writer` on a text-only stream (an ``io.StringIO`` as ``sys.stdout``): the bytes' UTF-8 text."""

    def __init__(self, text: IO[str]) -> None:
        self._text = text
        self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode

    def write(self, data: bytes, /) -> int:
        self._text.write(self._decode(data))
        return len(data)

    def flush(self) -> None:
        self._text.flush()


class _TextLines:
    """A :class:`LineReader` on a text-only stream (an ``io.StringIO`` as ``sys.stdin``): its lines in UTF-8.

    A lone surrogate is kept as bytes that are not UTF-8, so its line is refused, not lost.
    """

    def __init__(self, text: IO[str]) -> None:
        self._text = text
        self._rest = b""  # what the last text line left over a byte limit

    def readline(self, size: int = -1, /) -> bytes:
        if not self._rest:  # ``size`` characters are at least ``size`` bytes
            self._rest = self._text.readline(size).encode("utf-8", "surrogatepass")
        cut = len(self._rest) if size < 0 else size
        line, self._rest = self._rest[:cut], self._rest[cut:]
        return line


def claim(fd: int, divert: Callable[[], int]) -> tuple[int, Callable[[], None]]:
    """A private copy of ``fd`` for the wire; ``fd`` itself points at ``divert()`` until restored."""
    wire = os.dup(fd)
    try:
        keep = os.dup(fd)
    except OSError:  # (out of descriptors) the first copy is not kept either
        os.close(wire)
        raise
    try:
        diversion = divert()
        try:
            os.dup2(diversion, fd)
        finally:
            os.close(diversion)
    except OSError:
        os.close(keep)
        keep = -1

    def restore() -> None:
        if keep >= 0:
            with contextlib.suppress(OSError):
                os.dup2(keep, fd)
            os.close(keep)

    return wire, restore


#: How many claims of fd 1 (:func:`claim_stdout`) are in force: fd 1 is stderr's copy, no answer's stream.
_stdout_claims = 0


def claim_stdout() -> tuple[int, Callable[[], None]]:
    """A private copy of fd 1 for answers; fd 1 points at stderr (the null device if stderr is closed) until restored."""
    global _stdout_claims
    wire, restore_fd = claim(1, _stderr_fd)
    _stdout_claims += 1

    def restore() -> None:
        global _stdout_claims
        _stdout_claims -= 1
        restore_fd()

    return wire, restore


def claim_stdin() -> tuple[int, Callable[[], None]]:
    """A private copy of fd 0 for requests; fd 0 and ``sys.stdin`` read the null device until restored."""
    wire, restore_fd = claim(0, _null_input)
    restore_stream = _null_stdin()

    def restore() -> None:
        restore_stream()
        restore_fd()

    return wire, restore


def _null_input() -> int:
    return os.open(os.devnull, os.O_RDONLY)


def _null_stdin() -> Callable[[], None]:
    """Point ``sys.stdin`` at the null device; the function that gives the old one back."""
    stdin = sys.stdin
    try:
        null: IO[str] = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - closed by the function returned
    except OSError:  # no null device: an empty stream reads the same
        null = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    sys.stdin = null

    def restore() -> None:
        sys.stdin = stdin
        null.close()

    return restore


def is_closed(stream: Any) -> bool:
    """Whether ``stream`` is None or closed (its host closed it, or detached its buffer)."""
    if stream is None:
        return True
    try:
        return getattr(stream, "closed", False) is True
    except ValueError:  # a detached text stream
        return True


def fileno(stream: Any) -> int:
    """The stream's descriptor; -1 for none (not a file, or closed)."""
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation: not a file
        return -1


def flush_stdout() -> None:
    """Flush ``sys.stdout`` and ``sys.__stdout__``: what tools printed goes where fd 1 points now."""
    for stream in {id(s): s for s in (sys.stdout, sys.__stdout__) if s is not None}.values():
        with contextlib.suppress(Exception):  # a closed or broken stream: nothing more to write
            stream.flush()


def _stderr_fd() -> int:
    try:
        return os.dup(2)
    except OSError:  # stderr closed too: what tools print is dropped
        return os.open(os.devnull, os.O_WRONLY)


class _GuardedStderr:
    """``sys.stderr`` while the command line runs: the stream it wraps, until writing or flushing it fails
    (its reader is gone: ``EPIPE``; or any other ``OSError``). From then on it writes to the null device,
    and so does fd 2 when the stream was fd 2 (what is still buffered for it, a child process's writes):
    a broken stderr is handled as a closed one, its messages dropped, the command's outcome kept."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            self._drop()
            return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            self._drop()

    def _drop(self) -> None:
        if self.broken:  # (the null device failed: nothing more to do)
            return
        self.broken = True
        if fileno(self._stream) == 2:
            with contextlib.suppress(OSError):
                # fd 1, when claimed (:func:`claim_stdout`), is a copy of the broken stderr: a child's writes to it too
                both = _stdout_claims > 0 and _same_file(1, 2)
                null = os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(null, 2)
                    if both:
                        os.dup2(null, 1)
                finally:
                    os.close(null)
        try:
            self._stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - stderr's sink for the process's life
        except OSError:  # no null device: an in-memory sink drops the same
            self._stream = io.StringIO()

    def __getattr__(self, name: str) -> Any:  # encoding, errors, isatty(), fileno(), closed, buffer: the stream's
        return getattr(self._stream, name)


def _same_file(one: int, other: int) -> bool:
    """Whether descriptors ``one`` and ``other`` are open on the same file (pipe, socket, terminal)."""
    first, second = os.fstat(one), os.fstat(other)
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _reader_gone(fd: int) -> bool:
    """Whether ``fd`` reports, at once, that nothing reads it any more (``POLLERR``: a pipe whose read end is
    closed; ``POLLHUP``: a closed socket, a hung-up terminal). False where ``select.poll`` is missing."""
    if not hasattr(select, "poll"):  # pragma: no cover - Windows
        return False
    poll = select.poll()
    poll.register(fd, 0)  # POLLERR and POLLHUP are always reported
    try:
        ready = poll.poll(0)
    except OSError:  # pragma: no cover
        return False
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in ready)


@contextlib.contextmanager
def guard_stderr() -> Iterator[None]:
    """``sys.stderr`` guarded meanwhile (:class:`_GuardedStderr`): a write to stderr never fails. Nothing is
    done for a closed stderr (None: click drops what goes to it), nor when ``sys.stderr`` is guarded already."""
    stderr = sys.stderr
    if is_closed(stderr) or isinstance(stderr, _GuardedStderr):
        yield
        return
    guarded = _GuardedStderr(stderr)
    if fileno(stderr) == 2 and _reader_gone(2):  # broken already: closed before anything copies fd 2
        guarded._drop()
    sys.stderr = guarded
    try:
        yield
    finally:
        if sys.stderr is guarded:
            sys.stderr = stderr


@contextlib.contextmanager
def stdout_for_answers() -> Iterator[Writer | None]:
    """Stdout for answers alone; meanwhile fd 1 and ``sys.stdout`` go to stderr.

    None when stdout is closed (fd 1, or the ``sys.stdout`` object). When ``sys.stdout`` is not
    fd 1 (a test runner's capture), the answers go to its buffer (its text when it has none) and
    only ``sys.stdout`` is pointed at ``sys.stderr``.
    """
    stdout = sys.stdout
    if is_closed(stdout):
        yield None
        return
    out: Writer
    wire: IO[bytes] | None = None
    restore: Callable[[], None] | None = None
    if fileno(stdout) == 1:
        flush_stdout()
        try:
            fd, restore = claim_stdout()
        except OSError:  # fd 1 is closed
            yield None
            return
        out = wire = os.fdopen(fd, "wb")
    else:
        buffer = getattr(stdout, "buffer", None)
        out = _TextWriter(stdout) if buffer is None else buffer
    sys.stdout = sys.stderr
    try:
        yield out
    finally:
        sys.stdout = stdout
        if restore is not None:
            flush_stdout()  # to stderr, where fd 1 points until restored
            restore()
        if wire is not None:
            with contextlib.suppress(OSError):  # a broken pipe: the caller saw its write fail
                wire.close()


@contextlib.contextmanager
def stdin_for_requests() -> Iterator[LineReader | None]:
    """Stdin for requests alone; meanwhile fd 0 and ``sys.stdin`` read the null device.

    None when stdin is closed (fd 0, or the ``sys.stdin`` object). When ``sys.stdin`` is not fd 0
    (a test runner's input), the requests come from its buffer (its text when it has none) and
    only ``sys.stdin`` is pointed at the null device.
    """
    stdin = sys.stdin
    wire: IO[bytes] | None = None
    source: LineReader | None = None
    if fileno(stdin) == 0:
        try:
            fd, restore = claim_stdin()
        except OSError:  # fd 0 is closed
            restore = _null_stdin()
        else:
            source = wire = os.fdopen(fd, "rb")
    else:
        if not is_closed(stdin):
            buffer = getattr(stdin, "buffer", None)
            source = _TextLines(stdin) if buffer is None else buffer
        restore = _null_stdin()
    try:
        yield source
    finally:
        restore()
        if wire is not None:
            wire.close()
