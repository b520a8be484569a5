"""Stdin and stdout kept for the wire: fd 0, fd 1, ``sys.stdin`` and ``sys.stdout`` go elsewhere while tools run.

``harness-one serve`` (:mod:`harness_one.mcp._stdio`), ``run`` and ``call`` write their answers
to a private copy of fd 1 and point fd 1 at stderr meanwhile, so what a tool prints (``print``,
a C library's or a child process's writes to fd 1) cannot land between the answers. ``serve``
and ``run`` read their requests from a private copy of fd 0 and point fd 0 and ``sys.stdin`` at
the null device meanwhile, so a tool that reads stdin (``input()``, ``sys.stdin.read()``, a
child process) reads nothing instead of taking requests.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

__all__ = ["claim", "claim_stdin", "claim_stdout", "flush_stdout", "stdin_for_requests", "stdout_for_answers"]


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


def claim_stdout() -> tuple[int, Callable[[], None]]:
    """A private copy of fd 1 for answers; fd 1 points at stderr (the null device if stderr is closed) until restored."""
    return claim(1, _stderr_fd)


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


def _fileno(stream: Any) -> int:
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


@contextlib.contextmanager
def stdout_for_answers() -> Iterator[IO[bytes] | None]:
    """A binary stream on stdout for answers alone; meanwhile fd 1 and ``sys.stdout`` go to stderr.

    None when stdout is closed. When ``sys.stdout`` is not fd 1 (a test runner's capture), the
    answers go to its buffer and only ``sys.stdout`` is pointed at ``sys.stderr``.
    """
    stdout = sys.stdout
    if stdout is None:
        yield None
        return
    fd = _fileno(stdout)
    restore: Callable[[], None] | None = None
    if fd == 1:
        flush_stdout()
        try:
            wire, restore = claim_stdout()
        except OSError:  # fd 1 is closed
            yield None
            return
        out: IO[bytes] = os.fdopen(wire, "wb")
    else:
        out = stdout.buffer
    sys.stdout = sys.stderr
    try:
        yield out
    finally:
        sys.stdout = stdout
        if restore is not None:
            flush_stdout()  # to stderr, where fd 1 points until restored
            restore()
            with contextlib.suppress(OSError):  # a broken pipe: the caller saw its write fail
                out.close()


@contextlib.contextmanager
def stdin_for_requests() -> Iterator[IO[bytes] | None]:
    """A binary stream on stdin for requests alone; meanwhile fd 0 and ``sys.stdin`` read the null device.

    None when stdin is closed. When ``sys.stdin`` is not fd 0 (a test runner's input), the
    requests come from its buffer and only ``sys.stdin`` is pointed at the null device.
    """
    stdin = sys.stdin
    wire: IO[bytes] | None = None
    if _fileno(stdin) == 0:
        try:
            fd, restore = claim_stdin()
        except OSError:  # fd 0 is closed
            restore = _null_stdin()
        else:
            wire = os.fdopen(fd, "rb")
        source = wire
    else:
        source = getattr(stdin, "buffer", None)
        restore = _null_stdin()
    try:
        yield source
    finally:
        restore()
        if wire is not None:
            wire.close()
