"""Stdout kept for answers alone: fd 1 and ``sys.stdout`` go elsewhere while tools run.

``harness-one serve`` (:mod:`harness_one.mcp._stdio`), ``run`` and ``call`` write their answers
to a private copy of fd 1 and point fd 1 at stderr meanwhile, so what a tool prints (``print``,
a C library's or a child process's writes to fd 1) cannot land between the answers.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import IO

__all__ = ["claim", "flush_stdout", "stdout_for_answers"]


def claim(fd: int, divert: Callable[[], int]) -> tuple[int, Callable[[], None]]:
    """A private copy of ``fd`` for the wire; ``fd`` itself points at ``divert()`` until restored."""
    wire = os.dup(fd)
    keep = os.dup(fd)
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
    try:
        fd = stdout.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation: not a file
        fd = -1
    restore: Callable[[], None] | None = None
    if fd == 1:
        flush_stdout()
        try:
            wire, restore = claim(1, _stderr_fd)
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
