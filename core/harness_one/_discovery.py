"""Tools from installed packages: the ``harness_one.tools`` entry-point group."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ._entrypoints import TOOL_GROUP, EntryPoint, LoadFailure, entry_points, failure
from ._errors import ToolDefinitionError, ToolError
from ._log import log_event
from ._tool import Tool

if TYPE_CHECKING:
    from ._registry import ToolRegistry

__all__ = ["Conflict", "DiscoveryReport", "as_tool", "load_named_entry_point", "load_tool_entry_points"]


@dataclass(frozen=True)
class Conflict:
    """Two sources offered the same tool name; ``kept`` won, ``skipped`` was not registered."""

    name: str
    kept: str
    skipped: str

    def __str__(self) -> str:
        return f"tool '{self.name}': kept {self.kept}, skipped {self.skipped}"


@dataclass
class DiscoveryReport:
    """What loading tool packages found: tools per distribution, failures and name conflicts."""

    loaded: dict[str, list[str]] = field(default_factory=dict)
    failures: list[LoadFailure] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    #: Entry points already loaded (a listing after a lazy load does not load them twice).
    seen: set[EntryPoint] = field(default_factory=set, repr=False)


def as_tool(obj: Any, definition: Mapping[str, Any] | None = None) -> Tool:
    """A :class:`Tool` from a Tool, a ``@defineTool`` function, or a plain function plus keywords."""
    definition = dict(definition or {})
    if isinstance(obj, Tool) and not definition:
        return obj
    inner = getattr(obj, "tool", None)
    if isinstance(inner, Tool) and not definition:
        return inner
    fn = obj.fn if isinstance(obj, Tool) else getattr(obj, "fn", obj)
    if not callable(fn):
        raise ToolDefinitionError(f"Cannot make a tool from {obj!r}: not callable.")
    return Tool.create(fn, **definition)


def _collect(obj: Any) -> list[Any] | None:
    """Tools named by an entry point: a tool, a list of tools, or a module of tools. None: a hook module."""
    if isinstance(obj, ModuleType):
        if callable(getattr(obj, "harness_register_tools", None)):
            return None
        return [v for v in vars(obj).values() if isinstance(v, Tool) or isinstance(getattr(v, "tool", None), Tool)]
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return [obj]


def _from_hook(module: Any) -> list[Tool]:
    found: list[Tool] = []

    def register(fn: Callable[..., Any] | Tool, **definition: Any) -> None:
        found.append(as_tool(fn, definition))

    module.harness_register_tools(register=register)
    return found


def load_tool_entry_points(registry: ToolRegistry, report: DiscoveryReport) -> None:
    """Load every tool entry point not loaded yet into ``registry``; a broken one is reported and skipped."""
    for ep in entry_points(TOOL_GROUP):
        _load(registry, report, ep)


def load_named_entry_point(registry: ToolRegistry, report: DiscoveryReport, name: str) -> bool:
    """Load the entry points that may provide tool ``name``, in the order a listing loads them.

    Those are the entry points named ``name`` (a package names its entry point after its
    tool) and module entry points. True once a tool called ``name`` is there: the others need
    not be imported to call it.
    """
    for ep in entry_points(TOOL_GROUP):
        # Module entry points may hold any tool: those sorted before load too, as a listing would.
        if ep.name == name or ":" not in ep.value:
            _load(registry, report, ep)
            if name in registry._tools:
                return True
    return False


def _load(registry: ToolRegistry, report: DiscoveryReport, ep: EntryPoint) -> None:
    if ep in report.seen:
        return
    report.seen.add(ep)
    try:
        obj = ep.load()
        items = _collect(obj)
        pending = _from_hook(obj) if items is None else [as_tool(item) for item in items]
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit at import included: a broken package is reported, not fatal
        report.failures.append(failure(ep, exc))
        return
    for tool in pending:
        _add(registry, report, ep, tool)


def _add(registry: ToolRegistry, report: DiscoveryReport, ep: EntryPoint, tool: Tool) -> None:
    existing = registry._tools.get(tool.name)
    if existing is not None and existing.tool is not tool:
        kept = existing.tool.source or "code in this process"
        report.conflicts.append(Conflict(tool.name, kept=kept, skipped=ep.distribution))
        log_event(30, "tool name conflict", tool=tool.name, kept=kept, skipped=ep.distribution)
        return
    tool.source = ep.distribution
    try:
        registry._insert(tool, replace=False)
    except ToolError as exc:
        report.failures.append(failure(ep, exc))
        return
    report.loaded.setdefault(ep.distribution, []).append(tool.name)
