"""Tools from installed packages: the ``harness_one.tools`` entry-point group."""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FunctionType, MethodType, ModuleType
from typing import TYPE_CHECKING, Any

from ._entrypoints import TOOL_GROUP, EntryPoint, ImportTimeout, LoadFailure, entry_points, failure, importing
from ._errors import ToolDefinitionError, ToolError
from ._log import log_event
from ._tool import Tool

if TYPE_CHECKING:
    from ._registry import ToolRegistry

__all__ = [
    "Conflict",
    "DiscoveryReport",
    "ToolIndex",
    "as_tool",
    "load_named_entry_point",
    "load_tool_entry_points",
    "reset_tool_index",
    "tool_index",
]


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
    #: Those that failed to load, and their failures: tried again only by :meth:`retry`.
    failed: dict[EntryPoint, LoadFailure] = field(default_factory=dict, repr=False)
    #: Module entry points that a lookup of one tool passed over: the :class:`ToolIndex` says they
    #: failed to load with their files as they are now. A listing imports them again.
    known_failed: dict[EntryPoint, LoadFailure] = field(default_factory=dict, repr=False)

    def retry(self) -> None:
        """Forget the entry points that failed to load, and their failures: the next loading tries them again."""
        for ep, item in self.failed.items():
            self.seen.discard(ep)
            if item in self.failures:
                self.failures.remove(item)
        self.failed.clear()
        self.known_failed.clear()

    def failure_of(self, name: str) -> LoadFailure | None:
        """The failure of the tool entry point called ``name``, if it failed to load (here, or as the index knows)."""
        for failures in (self.failed, self.known_failed):
            for ep, item in list(failures.items()):
                if ep.name == name:
                    return item
        return None


def not_loaded_note(report: DiscoveryReport, name: str) -> str:
    """For a ``ToolNotFound`` of ``name``: that its package failed to load, and why (masked, cut), or nothing."""
    item = report.failure_of(name)
    if item is None:
        return ""
    from ._errors import capped

    return f" Its tool package {item.distribution} failed to load: {capped(item.error, 300)}"


def as_tool(obj: Any, definition: Mapping[str, Any] | None = None) -> Tool:
    """A :class:`Tool` from a Tool, a ``@defineTool`` function, or a plain function plus keywords.

    Keywords given with a tool (or a ``@defineTool`` function) override its own definition and keep the
    rest (:meth:`Tool.definition`): ``registry.add(tool, name="alias")`` keeps its schema, description,
    policies, tags and options."""
    definition = dict(definition or {})
    fn = obj
    if isinstance(obj, Tool):
        inner: Any = obj
    elif isinstance(obj, type):  # a class's own .tool (@defineTool on it), not a decorated base class's
        inner = vars(obj).get("tool")
    elif _of_decorated_class(obj):  # an instance of a decorated class: not that class's tool
        inner = None
    else:
        inner = getattr(obj, "tool", None)
        fn = getattr(obj, "fn", obj)
    if isinstance(inner, Tool):
        if not definition:
            return inner
        return Tool.create(inner.fn, **{**inner.definition(), **definition})
    if not callable(fn):
        raise ToolDefinitionError(f"Cannot make a tool from {obj!r}: not callable.")
    return Tool.create(fn, **definition)


def _collect(obj: Any) -> list[Any] | None:
    """Tools named by an entry point: a tool, a list of tools, or a module of tools. None: a hook module."""
    if isinstance(obj, ModuleType):
        if callable(getattr(obj, "harness_register_tools", None)):
            return None
        return [v for v in list(vars(obj).values()) if _is_tool(v)]
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return [obj]


def _is_tool(value: Any) -> bool:
    """Whether a module global is a tool or a ``@defineTool`` function, read without running its code.

    A global's ``.tool`` is read statically: a proxy (``flask.current_app``) whose attribute access
    raises, or a lazy module whose attribute access imports it, is passed over, not run.
    """
    kind = type(value)  # not isinstance: it reads ``__class__``, which a proxy forwards
    if issubclass(kind, Tool):
        return True
    if issubclass(kind, ModuleType):
        return False
    try:
        if issubclass(kind, type):  # a class's own .tool, not a decorated base class's
            inner = vars(value).get("tool")
        elif _of_decorated_class(value):
            return False
        else:
            inner = inspect.getattr_static(value, "tool", None)
    except Exception:  # an object whose __dict__ lookup raises: not a tool
        return False
    return issubclass(type(inner), Tool)


def _of_decorated_class(value: Any) -> bool:
    """Whether ``value`` (not a class) is an instance of a ``@defineTool`` class, whose ``.tool`` it reads
    through its class (read statically)."""
    return issubclass(type(inspect.getattr_static(type(value), "tool", None)), Tool)


def tools_of(obj: Any) -> list[Tool]:
    """The tools an entry point or a ``--tools`` module names: see :func:`_collect`, or its hook's registrations."""
    items = _collect(obj)
    return _from_hook(obj) if items is None else [as_tool(item) for item in items]


def _from_hook(module: Any) -> list[Tool]:
    found: list[Tool] = []

    def register(fn: Callable[..., Any] | Tool, **definition: Any) -> None:
        found.append(as_tool(fn, definition))

    module.harness_register_tools(register=register)
    return found


#: What each tool package's import under way (:func:`_load`) registered itself (:func:`imported_tool`): its tools, and
#: its skipped tools with the conflicts they made, each with the registry it went to (the default registry, whichever
#: registry loads the package). An entry leaves when its import ends; one given up at its time bound runs on and
#: keeps recording, until the entry point's next load ends (one per entry point at most).
_imports: dict[EntryPoint, list[tuple[ToolRegistry, Tool, Conflict | None]]] = {}
_imports_lock = threading.Lock()
#: The tools each entry point's import registered itself (:data:`_imports`), skipped ones too, kept once it loaded, or
#: once it failed for those of its modules that stay imported (:func:`_undo_import`): Python runs a module once, so a
#: registry that loads the package later (``ToolRegistry(discover=True)``, the command line's, a retry) finds them
#: here. They are its tools wherever its module made them (in a loop, in a function).
_provided: dict[EntryPoint, list[Tool]] = {}


def imported_tool(registry: ToolRegistry, tool: Tool, old: Tool | None) -> bool:
    """For ``registry._insert`` of a tool without a source: while this thread imports a tool
    package (a plain ``@defineTool`` registering into the default registry at import), the
    tool is that package's, and it follows the packages' rule: a name already taken (by the
    first package, or by code) is kept, the conflict recorded (True: not registered). Both are
    recorded for the entry point: if its import fails, those of the modules Python forgot are taken out
    (:func:`_undo_import`)."""
    ep = importing()
    if ep is None or ep.group != TOOL_GROUP:
        return False
    with _imports_lock:
        made = _imports.get(ep, [])  # (an import not under _load records nothing)
        tool.source = ep.distribution
        if tool.name in registry._removed:  # removed from this registry: not loaded in its place, still the package's
            made.append((registry, tool, None))
            return True
        if old is None:
            made.append((registry, tool, None))
            return False
        report = registry.discovery
        kept = old.source or "code in this process"
        conflict = Conflict(tool.name, kept=kept, skipped=ep.distribution)
        if conflict in report.conflicts:
            return True
        report.conflicts.append(conflict)
        made.append((registry, tool, conflict))
    log_event(30, "tool name conflict", tool=tool.name, kept=kept, skipped=ep.distribution)
    return True


def _undo_import(ep: EntryPoint, *, ended: bool = True) -> None:
    """After the failed import of ``ep``: take out each tool it registered itself (:func:`imported_tool`) whose
    defining module Python forgot (:func:`_forgotten`), from the registry it went to and only while that registry
    still holds that very tool, and forget the conflicts those tools met. As in a process where that module never
    imported, another package's tool of the same name is then loaded in its place, and a retry runs the module's
    current code again. A tool of a module that stays imported (a submodule that imported fine) stays registered,
    as Python keeps that module: a retry, which does not run it again, finds its tools there, and they stay the
    package's (:data:`_provided`).

    Not ``ended``: before a retry of an import given up at its time bound, which ran on (and may have failed
    since): its record stays, less what was taken out."""
    with _imports_lock:
        made = list(_imports.get(ep) or [])
    gone = [item for item in made if _forgotten(item[1])]
    with _imports_lock:
        if ended:
            _imports.pop(ep, None)
            _keep(ep, made)  # a retry does not run the modules that stay: their tools stay its (the forgotten ones go)
        elif gone and ep in _imports:
            _imports[ep][:] = [item for item in _imports[ep] if not any(item is g for g in gone)]
    for registry, tool, conflict in reversed(gone):
        if conflict is not None:
            with contextlib.suppress(ValueError):
                registry.discovery.conflicts.remove(conflict)
            continue
        with registry._lock, contextlib.suppress(Exception):  # best effort: a plugin's hook may object
            entry = registry._tools.get(tool.name)
            if entry is not None and entry.tool is tool:
                try:
                    registry.remove(tool.name)
                finally:  # taken out, not removed: another package's tool of that name may take its place
                    registry._removed.discard(tool.name)


def _forgotten(tool: Tool) -> bool:
    """Whether the module that defines ``tool``'s function is gone from ``sys.modules`` (a failed import's module,
    which Python forgets), or cannot be told. A plain function (``functools.partial`` and ``__wrapped__`` unwrapped,
    a bound method's function) is its module's while ``sys.modules`` holds a module whose namespace is the
    function's globals; another callable, while ``sys.modules`` holds the module its class (or itself) names."""
    try:
        fn: Any = tool.fn
        for _ in range(100):  # (a cycle of wrappers is not followed for ever)
            if isinstance(fn, functools.partial):
                fn = fn.func
            elif isinstance(fn, MethodType):
                fn = fn.__func__
            elif callable(getattr(fn, "__wrapped__", None)):
                fn = fn.__wrapped__
            else:
                break
        if isinstance(fn, FunctionType):
            module = sys.modules.get(fn.__module__)
            return module is None or module.__dict__ is not fn.__globals__
        name = fn.__module__ if isinstance(fn, type) else type(fn).__module__
        return not isinstance(name, str) or sys.modules.get(name) is None
    except Exception:  # an object whose attribute access raises: its module cannot be told
        return True


def load_tool_entry_points(registry: ToolRegistry, report: DiscoveryReport) -> None:
    """Load every tool entry point not loaded yet into ``registry``; a broken one is reported and skipped.

    The caller holds ``registry._discovery_lock`` (one thread loads at a time), not ``registry._lock``:
    a package's import may start a thread that changes the registry, and wait for it.
    """
    index = tool_index()
    try:
        for ep in entry_points(TOOL_GROUP):
            _load(registry, report, ep, index)
    finally:
        index.save()


def _entry_key(group: str, ep: EntryPoint) -> str:
    """The index's key of ``ep`` in environment ``group`` (:func:`_group_of_environment`)."""
    return f"{group}|{ep.distribution}|{ep.name}|{ep.value}"


class ToolIndex:
    """Which tools each module entry point provides, or that it failed to load, kept in a JSON file between processes.

    An entry is valid while its stamp is unchanged: an installed distribution's version and
    ``RECORD`` (see :func:`_installed_stamp`); for an editable install or a distribution without
    a ``RECORD``, the count, sizes and modification times of its source files (the top-level
    module, or every file of its package, data files too), so an editable install whose code
    changed is loaded again. The tools an entry point provided hold, besides, while the files of
    the modules they came from and of the entry point's own module keep their sizes and
    modification times (a module of another top-level package or distribution, e.g. a
    dependency's module named by the entry point, or a sibling module of an editable project).

    Entries are kept per environment (:func:`_environment`): the interpreter prefix, and the
    folders on ``sys.path`` with their modification times (an install, an upgrade or a removal
    changes one). Programs of one virtual environment with different ``sys.path`` folders (an app
    and its tests, another ``PYTHONPATH``) keep their entries side by side; several virtual
    environments can share the file. Each environment has a last-used mark (written again at
    most every :attr:`USED_GRAIN` seconds); when the file is written, environments whose
    interpreter no longer exists are dropped, and so are those a newer one of the same prefix
    and ``sys.path`` folders superseded (something was installed since), and past the
    :attr:`PER_PREFIX` most recently used of a prefix and :attr:`ENVIRONMENTS` in all, the
    least recently used. The file lives in
    ``HARNESS_ONE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/harness-one`` or
    ``~/.cache/harness-one``); an empty ``HARNESS_ONE_CACHE_DIR`` keeps it in memory only.
    """

    VERSION = 2
    #: Environments kept per interpreter prefix, and in all.
    PER_PREFIX = 4
    ENVIRONMENTS = 32
    #: Seconds after which a use of an environment is written again.
    USED_GRAIN = 3600
    _env: int | None = None

    def __init__(self, path: Path | None, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._clock = clock
        self._stamps: dict[tuple[str | None, str], list[int] | None] = {}
        self._dirty = False
        self._group: str | None = None  # this discovery's environment: ``prefix|env``
        self._used: set[str] = set()  # the environments this process looked up or recorded in
        self._changed: set[str] = set()  # the entries it recorded
        self._lock = threading.Lock()  # registries of other threads share the index
        self._entries, self._envs = self._read()

    def _read(self) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        """The file's entries and environments; nothing from a file that is missing, unreadable or of another version."""
        if self.path is None:
            return {}, {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested past the parser
            return {}, {}
        if not isinstance(data, dict) or data.get("version") != self.VERSION:
            return {}, {}  # an older format's entries are dropped with it
        entries, envs = data.get("entries"), data.get("environments")
        if not isinstance(entries, dict) or not isinstance(envs, dict):
            return {}, {}
        # a cache: an entry of another shape is dropped, never trusted
        return (
            {key: entry for key, entry in entries.items() if _well_formed(entry)},
            {group: meta for group, meta in envs.items() if _well_formed_environment(group, meta)},
        )

    @staticmethod
    def key(ep: EntryPoint, env: int | None = None) -> str:
        """The entry of ``ep`` in this interpreter's environment ``env`` (default: :func:`_environment` now)."""
        return _entry_key(_group_of_environment(_environment() if env is None else env), ep)

    def _key(self, ep: EntryPoint) -> str:
        return _entry_key(self._current_group(), ep)

    def _current_group(self) -> str:
        group = self._group
        if group is None:
            group = self._group = _group_of_environment(self._environment())
            self._use(group)
        return group

    def _use(self, group: str) -> None:
        """Renew the last-used mark of ``group`` if it is older than :attr:`USED_GRAIN` (once per process)."""
        with self._lock:
            if group in self._used:
                return
            self._used.add(group)
            meta = self._envs.get(group)
            if meta is not None and int(self._clock()) - meta["used"] >= self.USED_GRAIN:
                self._envs[group] = self._environment_meta()
                self._dirty = True

    def _environment_meta(self) -> dict[str, Any]:
        return {"prefix": sys.prefix, "executable": sys.executable or "", "paths": _paths(), "used": int(self._clock())}

    def tools(self, ep: EntryPoint) -> set[str] | None:
        """The tool names ``ep`` provided when its files and the environment were as they are now, or None if not known.

        None for an entry point recorded as failed: a failure does not say which tools it provides.
        """
        entry = self._entries.get(self._key(ep))
        if entry is None or "failed" in entry or entry.get("env") != self._environment():
            return None
        stamp = self._stamp(ep)
        if stamp is None or entry.get("stamp") != stamp:
            return None
        for path, size, mtime in entry.get("files") or ():
            try:
                st = os.stat(path)
            except OSError:
                return None
            if st.st_size != size or st.st_mtime_ns != mtime:
                return None
        return set(entry.get("tools") or ())

    def failure(self, ep: EntryPoint) -> str | None:
        """Why ``ep`` failed to load when its files were as they are now, or None (it loaded, or is not known)."""
        entry = self._entries.get(self._key(ep))
        if entry is None or "failed" not in entry or entry.get("env") != self._environment():
            return None  # a failure seen in another environment, or before something was installed, is tried again
        stamp = self._stamp(ep)
        if stamp is None or entry.get("stamp") != stamp:
            return None
        return str(entry["failed"])

    def record(self, ep: EntryPoint, names: list[str], failed: str | None = None, files: Sequence[str] = ()) -> None:
        """Note the tools ``ep`` provides (and the ``files`` they came from), or (``failed``: why) that it
        failed to load, against its stamp and the environment."""
        stamp = self._stamp(ep)
        if stamp is None:
            return
        entry: dict[str, Any] = {"stamp": stamp, "tools": sorted(names), "env": self._environment()}
        if failed is not None:
            entry["failed"] = failed[:500]
        else:
            entry["files"] = _file_stamps(files)
        group = self._current_group()
        key = _entry_key(group, ep)
        with self._lock:
            if group not in self._envs:
                self._envs[group] = self._environment_meta()
                self._dirty = True
            if self._entries.get(key) != entry:
                self._entries[key] = entry
                self._changed.add(key)
                self._dirty = True

    def save(self) -> None:
        """Write the file if anything changed; a cache that cannot be written is skipped.

        What other processes wrote meanwhile is kept (the file is read again): this process writes
        only the entries it recorded and the marks of the environments it used; then the file is
        bounded (see the class)."""
        if not self._dirty or self.path is None:
            return
        with self._lock:
            self._dirty = False
            entries, envs = self._read()
            for group in self._used:
                mine, theirs = self._envs.get(group), envs.get(group)
                if mine is not None and (theirs is None or theirs["used"] <= mine["used"]):
                    envs[group] = mine
            for key in self._changed:
                entries[key] = self._entries[key]
            self._changed.clear()
            self._entries, self._envs = self._bounded(entries, envs)
            content = json.dumps({"version": self.VERSION, "environments": self._envs, "entries": self._entries})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(content, encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            log_event(10, "tool index not written", path=str(self.path), error=str(exc))

    def _bounded(
        self, entries: dict[str, dict[str, Any]], envs: dict[str, dict[str, Any]]
    ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        """The environments to keep (see the class), and the entries of those."""
        mine = {(envs[g]["prefix"], envs[g]["paths"]): g for g in self._used if g in envs}
        ranked = sorted(envs, key=lambda g: (g in self._used, envs[g]["used"]), reverse=True)
        kept: dict[str, dict[str, Any]] = {}
        per_prefix: dict[str, int] = {}
        for group in ranked:
            meta = envs[group]
            if group not in self._used:
                newer = mine.get((meta["prefix"], meta["paths"]))
                if newer is not None and envs[newer]["used"] >= meta["used"]:
                    continue  # superseded: the same folders, since changed (something was installed)
                if per_prefix.get(meta["prefix"], 0) >= self.PER_PREFIX or len(kept) >= self.ENVIRONMENTS:
                    continue
                if meta["executable"] and not os.path.exists(meta["executable"]):
                    continue  # a removed virtual environment
            kept[group] = meta
            per_prefix[meta["prefix"]] = per_prefix.get(meta["prefix"], 0) + 1
        return {key: entry for key, entry in entries.items() if _entry_group(key, kept) is not None}, kept

    def forget_stamps(self) -> None:
        self._stamps.clear()
        self._env = None
        self._group = None

    def _environment(self) -> int:
        """:func:`_environment`, read once per discovery."""
        if self._env is None:
            self._env = _environment()
        return self._env

    def _stamp(self, ep: EntryPoint) -> list[int] | None:
        key = (ep.metadata_path, _top(ep))
        if key not in self._stamps:
            installed = _installed_stamp(ep.metadata_path) if ep.metadata_path else None
            self._stamps[key] = installed or _source_stamp(key[1])
        return self._stamps[key]


def _folders() -> list[str]:
    """The folders on ``sys.path`` that packages are installed into: the running script's left out (see :func:`_environment`)."""
    script = _script_folders()
    return [folder for folder in sys.path if folder not in script]


def _environment() -> int:
    """A 64-bit checksum of this interpreter's version and the folders on ``sys.path`` with their
    modification times: what a failure to import, and the tools a package defines, hold for
    (installing, upgrading or removing a distribution, or the missing dependency, changes the
    folder it goes to). The interpreter prefix is not part of it: entries are kept per prefix.

    The folder of the running script (``sys.path[0]`` as Python put it there: the current directory
    for ``-c`` and ``-m``, a console script's ``bin`` folder) is left out: a program that writes files
    next to itself changes it at every run, and a console script and a program would see different
    environments. Packages are installed into the other folders."""
    times = []
    for folder in _folders():
        try:
            times.append((folder, os.stat(folder or ".").st_mtime_ns))
        except OSError:
            times.append((folder, -1))
    data = repr((sys.version, times)).encode("utf-8", "surrogatepass")
    return zlib.crc32(data) << 32 | zlib.adler32(data)


def _paths() -> int:
    """A checksum of the interpreter's version and the folders of :func:`_environment` without their times:
    an environment of the same prefix and paths with other times is an older state of this one."""
    return zlib.crc32(repr((sys.version, _folders())).encode("utf-8", "surrogatepass"))


def _group_of_environment(env: int) -> str:
    return f"{sys.prefix}|{env:016x}"


def _entry_group(key: str, groups: Mapping[str, Any]) -> str | None:
    """The environment (of ``groups``) that the entry ``key`` belongs to, or None."""
    head = key.rsplit("|", 3)[0]
    if head in groups:
        return head
    return max((group for group in groups if key.startswith(group + "|")), key=len, default=None)


def _well_formed_environment(group: str, meta: Any) -> bool:
    """An environment as :meth:`ToolIndex.save` writes it, under its ``prefix|env`` name."""
    return (
        isinstance(meta, dict)
        and isinstance(meta.get("prefix"), str)
        and group.rpartition("|")[0] == meta["prefix"]
        and isinstance(meta.get("executable"), str)
        and type(meta.get("paths")) is int
        and type(meta.get("used")) is int
    )


def _script_folders() -> set[str]:
    """The values that ``sys.path[0]`` takes for the running script: ``""``, the current directory
    (``-c``, ``-m``, the interactive prompt), the folder of ``sys.argv[0]`` (a script, a console script)."""
    if getattr(sys.flags, "safe_path", False):  # ``-P``: Python put no such folder on sys.path
        return set()
    found = {""}
    with contextlib.suppress(OSError):  # the current directory was removed
        found.add(os.getcwd())
    main = sys.argv[0] if sys.argv else ""
    if main and main not in ("-c", "-m") and os.path.isfile(main):
        found.add(os.path.dirname(os.path.abspath(main)))
        found.add(os.path.dirname(os.path.realpath(main)))
    return found


def _module_files(ep: EntryPoint, tools: list[Tool]) -> list[str]:
    """The files of ``ep``'s own module and of the modules its tools' functions were defined in.

    Read as plain attributes: an object whose attribute access raises (a proxy in ``sys.modules``,
    an odd callable) adds no file, and does not fail the package's loading."""
    names = [ep.value.split(":")[0].strip()]
    for tool in tools:
        fn: Any = tool.fn
        while isinstance(fn, functools.partial):
            fn = fn.func
        try:
            module = getattr(fn, "__module__", None)
        except Exception:
            continue
        if isinstance(module, str) and module not in names:
            names.append(module)
    files = []
    for name in names:
        try:
            path = getattr(sys.modules.get(name), "__file__", None)
        except Exception:
            continue
        if isinstance(path, str) and path not in files:
            files.append(path)
    return files


def _file_stamps(files: Sequence[str]) -> list[list[Any]]:
    """``[path, size, mtime_ns]`` of each file that exists (one in a zip archive has no stamp of its own)."""
    stamps: list[list[Any]] = []
    for path in files:
        try:
            st = os.stat(path)
        except OSError:
            continue
        stamps.append([path, st.st_size, st.st_mtime_ns])
    return stamps


def _defines(ep: EntryPoint, tool: Tool) -> bool:
    """Whether ``tool``'s function comes from ``ep``'s own top-level package (not imported from another)."""
    module = getattr(tool.fn, "__module__", None)
    return not isinstance(module, str) or module.split(".")[0] == _top(ep)


def _top(ep: EntryPoint) -> str:
    """The top-level package of ``ep``'s module (``my_tools`` of ``my_tools.text:shout``)."""
    return ep.value.split(":")[0].strip().split(".")[0]


def _well_formed(entry: Any) -> bool:
    """An index entry as :meth:`ToolIndex.record` writes it: a stamp of three or four ints, a list of
    names, and ``[path, size, mtime_ns]`` file stamps."""
    if not isinstance(entry, dict):
        return False
    stamp, tools, files = entry.get("stamp"), entry.get("tools"), entry.get("files", [])
    return (
        isinstance(stamp, list)
        and len(stamp) in (3, 4)
        and all(type(n) is int for n in stamp)
        and isinstance(tools, list)
        and all(isinstance(t, str) for t in tools)
        and isinstance(entry.get("failed", ""), str)
        and type(entry.get("env", 0)) is int
        and isinstance(files, list)
        and all(
            isinstance(f, list) and len(f) == 3 and isinstance(f[0], str) and type(f[1]) is int and type(f[2]) is int
            for f in files
        )
    )


def _installed_stamp(folder: str) -> list[int] | None:
    """``[-1, version's CRC-32, RECORD's size, RECORD's mtime_ns]`` of an installed distribution's
    ``.dist-info`` folder; None for an editable install (its source is walked) or a folder without RECORD.

    Installing, upgrading or reinstalling a distribution rewrites its RECORD: its files need not be read.
    """
    import zlib

    path = Path(folder)
    if not path.name.endswith(".dist-info"):
        return None
    try:
        direct = json.loads((path / "direct_url.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        direct = None
    except (OSError, ValueError, RecursionError):
        return None
    if isinstance(direct, dict) and isinstance(direct.get("dir_info"), dict) and direct["dir_info"].get("editable"):
        return None
    try:
        st = os.stat(path / "RECORD")
    except OSError:
        return None
    version = path.name.removesuffix(".dist-info").partition("-")[2]
    return [-1, zlib.crc32(version.encode("utf-8", "replace")), st.st_size, st.st_mtime_ns]


def _source_stamp(top: str) -> list[int] | None:
    """``[files, total size, newest mtime_ns]`` of module ``top``'s source, found without importing it.

    Found as an import would find it (``sys.meta_path``): an editable install's import-hook finder too.
    """
    from importlib.util import find_spec

    try:
        spec = find_spec(top)  # a top-level name: its finders are asked, nothing is imported
    except Exception:  # ImportError, ValueError (a module without __spec__), a finder's own failure
        return None
    if spec is None:
        return None
    files: list[str] = []
    if spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            for root, dirs, names in os.walk(location):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                files.extend(os.path.join(root, n) for n in names if not n.endswith((".pyc", ".pyo")))
    elif spec.origin and spec.has_location:
        files.append(spec.origin)
    else:
        return None
    size = newest = 0
    for file in files:
        try:
            st = os.stat(file)
        except OSError:
            return None
        size += st.st_size
        newest = max(newest, st.st_mtime_ns)
    return [len(files), size, newest]


_index: ToolIndex | None = None


def tool_index() -> ToolIndex:
    """The process's :class:`ToolIndex` (its file read once; source stamps read once per discovery)."""
    global _index
    if _index is None:
        _index = ToolIndex(_index_path())
    _index.forget_stamps()
    return _index


def reset_tool_index() -> None:
    """Forget the in-memory index, e.g. after ``HARNESS_ONE_CACHE_DIR`` changed."""
    global _index
    _index = None


def _index_path() -> Path | None:
    where = os.environ.get("HARNESS_ONE_CACHE_DIR")
    if where is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = os.path.join(base, "harness-one")
    elif not where.strip():
        return None
    return Path(where.strip()).expanduser().absolute() / "tool-index.json"


def load_named_entry_point(registry: ToolRegistry, report: DiscoveryReport, name: str) -> bool:
    """Load the entry points that may provide tool ``name``, in the order a listing loads them.

    Those are the entry points named ``name`` (a package names its entry point after its
    tool) and the others that may hold it: the :class:`ToolIndex` knows which tools an entry
    point provided last time its files were as they are now. A module entry point it does not
    know is loaded; a ``module:attribute`` one is taken to provide the tool it is named after.
    True once a tool called ``name`` is there: the others need not be imported to call it.
    """
    index = tool_index()
    try:
        for ep in entry_points(TOOL_GROUP):
            if ep not in report.seen:
                failed = index.failure(ep)
                if failed is not None:  # it failed with its files as they are: a listing tries it again
                    if ep not in report.known_failed:
                        report.known_failed[ep] = LoadFailure(ep.group, ep.name, ep.distribution, failed)
                    continue
            if ep.name != name:
                known = index.tools(ep)
                if known is None:
                    if ":" in ep.value:
                        continue  # ``name = module:attribute`` provides the tool it is named after
                elif name not in known:
                    continue
            _load(registry, report, ep, index)
            if name in registry._tools:
                return True
        return False
    finally:
        index.save()


def _load(registry: ToolRegistry, report: DiscoveryReport, ep: EntryPoint, index: ToolIndex | None = None) -> None:
    if ep in report.seen:
        return
    report.seen.add(ep)
    report.known_failed.pop(ep, None)
    with _imports_lock:
        earlier = _imports.setdefault(ep, [])  # (an import given up at its time bound, running on, records into it)
    if earlier:  # given up: what it registered of a module Python forgot since (it failed after) is taken out
        _undo_import(ep, ended=False)
    try:
        pending = tools_of(ep.load())
    except KeyboardInterrupt:
        report.seen.discard(ep)  # not loaded: the next discovery tries it again
        _undo_import(ep)
        raise
    except BaseException as exc:  # SystemExit at import included: a broken package is reported, not fatal
        report.failed[ep] = failure(ep, exc)  # not tried again on each lookup: load_entry_points(refresh=True) does
        if not isinstance(exc, ImportTimeout):  # given up, it runs on with its modules: nothing is taken out
            _undo_import(ep)
        report.failures.append(report.failed[ep])
        if index is not None:  # nor by another process's lookups while its files are unchanged: a listing does
            index.record(ep, [], failed=report.failed[ep].error)
        return
    named = [tool.name for tool in pending]
    pending += [tool for tool in _registered(ep) if not any(tool is other for other in pending)]
    if index is not None:  # (a call of one of them then imports only this package)
        index.record(ep, [tool.name for tool in pending], files=_module_files(ep, pending))
    if ":" in ep.value and named != [ep.name]:  # a call of its tool before a listing may not find it first
        log_event(30, "tool entry point not named after its tool", entry_point=ep.name, tools=named, distribution=ep.distribution)
    with registry._lock:  # the import ran without it; the package's tools appear in one step
        for tool in pending:
            _add(registry, report, ep, tool)


def _registered(ep: EntryPoint) -> list[Tool]:
    """After ``ep`` loaded: the tools its import registered itself (:func:`imported_tool`), this time or when a
    registry loaded it before, or a failed import of it left in a module that stays imported (less those of a module
    imported again since), in order: they are its tools too."""
    with _imports_lock:
        return _keep(ep, _imports.pop(ep, []))


def _keep(ep: EntryPoint, made: list[tuple[ToolRegistry, Tool, Conflict | None]]) -> list[Tool]:
    """Note the tools of ``made`` (records of :data:`_imports`) among ``ep``'s in :data:`_provided`, each once, in
    order, less those of a module Python forgot: ``ep``'s tools now (called under :data:`_imports_lock`)."""
    kept = [tool for tool in _provided.get(ep, []) if not _forgotten(tool)]
    known = {id(tool) for tool in kept}
    for _, tool, _ in made:
        if id(tool) not in known and not _forgotten(tool):
            known.add(id(tool))
            kept.append(tool)
    _provided[ep] = kept
    return list(kept)


def _add(registry: ToolRegistry, report: DiscoveryReport, ep: EntryPoint, tool: Tool) -> None:
    existing = registry._tools.get(tool.name)
    if existing is not None:
        if existing.tool is tool:  # one tool that two packages offer (one imports it): registered once
            if tool.source != ep.distribution and _defines(ep, tool):  # credited to the package that defines it
                listed = report.loaded.get(tool.source or "", [])
                if tool.name in listed:
                    listed.remove(tool.name)
                tool.source = ep.distribution
                report.loaded.setdefault(ep.distribution, []).append(tool.name)
            elif tool.source == ep.distribution and tool.name not in report.loaded.get(ep.distribution, ()):
                report.loaded.setdefault(ep.distribution, []).append(tool.name)  # its import registered it
            return
        kept = existing.tool.source or "code in this process"
        conflict = Conflict(tool.name, kept=kept, skipped=ep.distribution)
        if conflict not in report.conflicts:  # (its import may have recorded it: see imported_tool)
            report.conflicts.append(conflict)
            log_event(30, "tool name conflict", tool=tool.name, kept=kept, skipped=ep.distribution)
        return
    if tool.name in registry._removed:  # removed from this registry (ToolRegistry.remove): not loaded again
        return
    tool.source = tool.source or ep.distribution  # the first package that provided it (one Tool, many registries)
    try:
        registry._insert(tool, replace=False)
    except ToolError as exc:
        report.failures.append(failure(ep, exc))
        return
    report.loaded.setdefault(ep.distribution, []).append(tool.name)
