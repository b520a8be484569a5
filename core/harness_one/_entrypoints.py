"""Entry-point groups, read once per process and loaded one by one, never fatally."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ._errors import capped, exception_text, outside_text
from ._log import log_event

__all__ = [
    "PLUGIN_GROUP",
    "TOOL_GROUP",
    "EntryPoint",
    "ImportTimeout",
    "LoadFailure",
    "bounded",
    "entry_points",
    "importing",
    "refresh_entry_points",
    "set_import_timeout",
]

PLUGIN_GROUP = "harness_one.plugins"
TOOL_GROUP = "harness_one.tools"
OWN_DISTRIBUTION = "harness-one"
#: harness-one's own tool packages (``contrib_tools/``): loaded before every other tool package, so
#: that a package whose name sorts first does not take over one of their tool names.
OWN_TOOL_DISTRIBUTIONS = frozenset(
    {
        "harness-one-calculate",
        "harness-one-current-time",
        "harness-one-fetch-url",
        "harness-one-random-number",
        "harness-one-sql-query",
    }
)


@dataclass(frozen=True)
class EntryPoint:
    """One entry point: its name, ``module:attr`` value, and the distribution that ships it."""

    group: str
    name: str
    value: str
    distribution: str
    #: The distribution's metadata folder (``name-1.0.dist-info``), when it has one on disk.
    metadata_path: str | None = field(default=None, compare=False, repr=False)

    def load(self) -> Any:
        limit = _import_timeout
        # harness-one's own (its standard plugins) are never given up on: a slow start (a loaded machine, a tiny
        # bound) would drop validation, approval or the timeout plugin from every call, and fail open.
        if limit is None or self.is_own or getattr(_worker, "active", False):
            return _load_as(self)
        return _bounded(self, limit)

    @property
    def is_own(self) -> bool:
        return _canonical(self.distribution) == OWN_DISTRIBUTION


@dataclass(frozen=True)
class LoadFailure:
    """An entry point, plugin or tool that could not be loaded, and why."""

    group: str
    name: str
    distribution: str
    error: str
    traceback: str = ""

    def __str__(self) -> str:
        return f"{self.group}:{self.name} from {self.distribution}: {self.error}"


class ImportTimeout(Exception):
    """An entry point's import ran past :func:`set_import_timeout`'s bound; loading reports it
    as that entry point's failure and goes on with the others."""


#: Seconds an entry point's import may take (None: no bound); see :func:`set_import_timeout`.
_import_timeout: float | None = None
#: Set in the threads that import under a bound: an entry point loaded by that import (a plugin
#: that builds the default registry) is loaded there, under the same bound.
_worker = threading.local()
#: The entry point whose import runs in this thread (``ep``), if any.
_current = threading.local()


def importing() -> EntryPoint | None:
    """The entry point this thread is importing, while its module's code runs (None: none).

    A tool package whose module registers its tools itself (a plain ``@defineTool``, into the
    default registry) is told from code in the process this way: the tool is that package's.
    """
    return getattr(_current, "ep", None)


def _load_as(ep: EntryPoint) -> Any:
    """``ep``'s object, with :func:`importing` naming ``ep`` in this thread meanwhile."""
    outer = getattr(_current, "ep", None)
    _current.ep = ep
    try:
        return _load(ep.group, ep.name, ep.value)
    finally:
        _current.ep = outer


def set_import_timeout(seconds: float | None) -> None:
    """Bound each entry point's import to ``seconds`` (None: no bound, the library's default).

    The command line sets it (``HARNESS_ONE_IMPORT_TIMEOUT``, 30 s by default): a tool package
    whose import never returns is reported as failed instead of hanging ``list``, ``doctor``,
    ``export`` and ``call``. harness-one's own entry points (its standard plugins) are not bounded.
    The bound is the import's: a plugin's constructor, or a package's ``harness_register_tools``
    hook, runs in the caller's thread, unbounded. The import then runs in a helper thread that the caller stops
    waiting for at the bound: the import is abandoned, not stopped (it may finish later, or
    never), and code that must run in the main thread at import (``signal.signal``) fails there.
    """
    global _import_timeout
    _import_timeout = seconds


def _bounded(ep: EntryPoint, seconds: float) -> Any:
    """``ep``'s import in a helper thread, waited for at most ``seconds``."""
    return bounded(functools.partial(_load_as, ep), seconds, ep.name)


_T = TypeVar("_T")


def bounded(run: Callable[[], _T], seconds: float, name: str) -> _T:
    """``run()`` (an import: an entry point's, a ``--tools`` file's) in a helper thread named after ``name``, waited
    for at most ``seconds``: past them, :class:`ImportTimeout`, and ``run`` abandoned (see :func:`set_import_timeout`).
    An entry point that ``run`` loads is loaded in that thread, within the same bound."""
    from concurrent.futures import Future
    from concurrent.futures import TimeoutError as NotYet

    loaded: Future[_T] = Future()

    def work() -> None:
        _worker.active = True
        try:
            loaded.set_result(run())
        except BaseException as exc:  # SystemExit at import too: the caller reports it
            loaded.set_exception(exc)

    threading.Thread(target=work, name=f"harness-one import {name}", daemon=True).start()
    try:
        return loaded.result(seconds)
    except NotYet:
        raise ImportTimeout(f"the import did not finish within {seconds:g} s (HARNESS_ONE_IMPORT_TIMEOUT)") from None


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


@functools.cache
def entry_points(group: str) -> tuple[EntryPoint, ...]:
    """The group's entry points, sorted by distribution then name (so conflicts resolve the same way every time).

    In the tools group, harness-one's own tool packages come first (:data:`OWN_TOOL_DISTRIBUTIONS`).
    """
    import importlib_metadata  # imported when entry points are first read, not at start-up

    found = []
    for ep in importlib_metadata.entry_points(group=group):
        folder = getattr(ep.dist, "_path", None)
        where = str(folder) if folder is not None else None
        found.append(EntryPoint(group=group, name=ep.name, value=ep.value, distribution=_distribution(ep), metadata_path=where))
    # Unique by (distribution, name): a package visible twice on sys.path is listed once.
    unique = {(e.distribution, e.name): e for e in found}
    first = OWN_TOOL_DISTRIBUTIONS if group == TOOL_GROUP else frozenset()
    return tuple(
        sorted(unique.values(), key=lambda e: (_canonical(e.distribution) not in first, _canonical(e.distribution), e.name))
    )


def _distribution(ep: Any) -> str:
    """The name of the distribution that ships ``ep``; a broken one (no METADATA, no ``Name``) is named by its folder."""
    dist = ep.dist
    if dist is None:
        return "?"
    try:
        name = dist.metadata["Name"]
    except Exception:  # MetadataNotFound, KeyError: seen in the wild (a half-removed install)
        name = None
    if isinstance(name, str) and name:
        return name
    folder = getattr(dist, "_path", None)  # ``name-1.0.dist-info``
    named = str(getattr(folder, "name", "")).split("-")[0] or "?"
    log_event(30, "distribution without a name in its metadata", entry_point=ep.name, group=ep.group, folder=str(folder))
    return named


#: How many times :func:`refresh_entry_points` ran (see :func:`refreshes`).
_refreshes = 0


def refresh_entry_points() -> None:
    """Forget the cached entry points, e.g. after installing a package at run time.

    Every registry then finds the packages installed since: its next listing, or lookup of a name it lacks, loads them.
    """
    global _refreshes
    entry_points.cache_clear()
    _load.cache_clear()
    import importlib

    importlib.invalidate_caches()
    _refreshes += 1  # last: a registry that reads the new count reads the new entry points


def refreshes() -> int:
    """How many times :func:`refresh_entry_points` ran: a registry that loaded every package looks again once it changed."""
    return _refreshes


@functools.cache
def _load(group: str, name: str, value: str) -> Any:
    import importlib_metadata

    return importlib_metadata.EntryPoint(name=name, value=value, group=group).load()


def failure(ep: EntryPoint, exc: BaseException) -> LoadFailure:
    """Record and log a failed load (message at WARNING, traceback at DEBUG), secrets masked."""
    import traceback

    # Masked as an error the model reads is (a set-up's DSN or password), and cut, only what is kept
    # read: an option's value may be echoed whole in the error (a 100 KB -O value, or 100 MB).
    tb = outside_text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    item = LoadFailure(ep.group, ep.name, ep.distribution, capped(exception_text(exc), 2000), tb)
    log_event(30, "entry point failed to load", group=ep.group, name=ep.name, distribution=ep.distribution, error=item.error)
    log_event(10, "entry point traceback", group=ep.group, name=ep.name, traceback=tb)
    return item
