"""Entry-point groups, read once per process and loaded one by one, never fatally."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ._errors import capped
from ._log import log_event

__all__ = ["PLUGIN_GROUP", "TOOL_GROUP", "EntryPoint", "LoadFailure", "entry_points", "refresh_entry_points"]

PLUGIN_GROUP = "harness_one.plugins"
TOOL_GROUP = "harness_one.tools"
OWN_DISTRIBUTION = "harness-one"


@dataclass(frozen=True)
class EntryPoint:
    """One entry point: its name, ``module:attr`` value, and the distribution that ships it."""

    group: str
    name: str
    value: str
    distribution: str

    def load(self) -> Any:
        return _load(self.group, self.name, self.value)

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


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


@functools.cache
def entry_points(group: str) -> tuple[EntryPoint, ...]:
    """The group's entry points, sorted by distribution then name (so conflicts resolve the same way every time)."""
    import importlib_metadata  # imported when entry points are first read, not at start-up

    found = []
    for ep in importlib_metadata.entry_points(group=group):
        dist = ep.dist.metadata["Name"] if ep.dist is not None else "?"
        found.append(EntryPoint(group=group, name=ep.name, value=ep.value, distribution=dist))
    # Unique by (distribution, name): a package visible twice on sys.path is listed once.
    unique = {(e.distribution, e.name): e for e in found}
    return tuple(sorted(unique.values(), key=lambda e: (_canonical(e.distribution), e.name)))


def refresh_entry_points() -> None:
    """Forget the cached entry points, e.g. after installing a package at run time."""
    entry_points.cache_clear()
    _load.cache_clear()
    import importlib

    importlib.invalidate_caches()


@functools.cache
def _load(group: str, name: str, value: str) -> Any:
    import importlib_metadata

    return importlib_metadata.EntryPoint(name=name, value=value, group=group).load()


def failure(ep: EntryPoint, exc: BaseException) -> LoadFailure:
    """Record and log a failed load (message at WARNING, traceback at DEBUG)."""
    import traceback

    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    # Cut: an option's value may be echoed whole in the error (a 100 KB -O value).
    item = LoadFailure(ep.group, ep.name, ep.distribution, capped(f"{type(exc).__name__}: {exc}", 2000), tb)
    log_event(30, "entry point failed to load", group=ep.group, name=ep.name, distribution=ep.distribution, error=item.error)
    log_event(10, "entry point traceback", group=ep.group, name=ep.name, traceback=tb)
    return item
