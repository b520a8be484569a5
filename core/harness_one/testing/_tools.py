"""``ToolPackageTests``: what a tool package owes every registry and every provider."""

from __future__ import annotations

import builtins
import copy
import dataclasses
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar, NoReturn

import jsonschema
import pytest

from .._clock import ManualClock
from .._discovery import DiscoveryReport, as_tool, tools_of
from .._discovery import _load as _load_entry_point
from .._entrypoints import TOOL_GROUP, EntryPoint, _canonical, entry_points
from .._errors import ToolArgumentError, ToolDefinitionError, ToolError, ToolExecutionError
from .._formats import FORMATS
from .._registry import ToolRegistry
from .._render import render_value
from .._schema import _same, analyse
from .._tool import Tool
from .._worker import _session_members
from ..export import ANTHROPIC_PROPERTY, GEMINI_NAME, StrictSchemaError, anthropic_refused, export_tools
from . import _audit
from ._suite import BoundedClock, Overran, Suite, _where, bounded, run_async

__all__ = ["EXAMPLE_KEYS", "PROVIDER_NAMES", "ToolPackageTests"]

#: A call of an example (or one built from the schema) that has not returned after this many times
#: ``example_budget`` is given up on: it fails as stuck, and the check goes on without it.
STUCK_AFTER = 3
#: What :meth:`ToolPackageTests.run_offline` returns in the place of a value when the call did not return.
_STUCK = object()

#: Each provider's rule for a tool name, as its documentation states it (Gemini's: the one the export keeps to).
PROVIDER_NAMES: Mapping[str, re.Pattern[str]] = {
    "openai": re.compile(r"^[A-Za-z0-9_-]{1,64}\Z"),
    "openai-responses": re.compile(r"^[A-Za-z0-9_-]{1,64}\Z"),
    "anthropic": re.compile(r"^[A-Za-z0-9_-]{1,64}\Z"),
    "gemini": GEMINI_NAME,
    "mcp": re.compile(r"^[A-Za-z0-9_.-]{1,128}\Z"),
}

# A value of each JSON type, for arguments of the wrong type.
_WRONG_VALUES: tuple[tuple[frozenset[str], Any], ...] = (
    (frozenset({"string"}), "not a number"),
    (frozenset({"integer", "number"}), 12345),
    (frozenset({"boolean"}), True),
    (frozenset({"array"}), [1]),
    (frozenset({"object"}), {"k": 1}),
    (frozenset({"null"}), None),
)

# Run in a fresh interpreter: import the distribution's entry points with the network refused
# (``_audit.offline``'s audit hook, the module loaded from its file so that neither the kit nor
# pytest is imported before the package), and report what the import did. What it writes (to
# sys.stdout or sys.stderr, to fd 1 or 2, or through logging's last-resort handler) lands between
# the two _MARK lines of each stream.
# Then load every installed entry point into a fresh registry, as discovery would, for the name
# conflicts; each import is given `per_import` seconds, so a package that hangs is passed over (and listed).
# Before that scan it notes the processes running in its session (where /proc says): those the package's own import
# left, not those another package's import starts.
# The interpreter ends itself (os._exit): an import still blocked in a thread cannot keep it. It writes its
# answer to a file (its last argument), and its output goes to files: a helper process the import leaves running
# inherits them, and nothing waits for it to close them.
_MARK = "\n--- harness-one conformance: import ---\n"
_PROBE = r"""
import importlib.util, json, logging, os, sys, threading, time
spec = importlib.util.spec_from_file_location("harness_one_conformance_audit", sys.argv[5])
audit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(audit)
network = audit.offline(every_thread=True)  # kept until the interpreter ends: refused to every thread
attempts = network.__enter__()
from harness_one import ToolRegistry
from harness_one._discovery import DiscoveryReport, _load
from harness_one._entrypoints import TOOL_GROUP, _canonical, entry_points
from harness_one._worker import _session_members
quiet = logging.getLogger("harness_one")  # a failure to load is reported on its own, not as printing
quiet.addHandler(logging.NullHandler())
quiet.propagate = False
dist, mark, own_bound, per_import = sys.argv[1], sys.argv[2].encode(), float(sys.argv[3]), float(sys.argv[4])
def marks():
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(1, mark)
    os.write(2, mark)
def bounded(seconds, work):
    worker = threading.Thread(target=work, daemon=True, name="harness-one-conformance-import")
    worker.start()
    worker.join(seconds)
    return not worker.is_alive()
def cpu():  # the probe's threads and the child processes the import waited for (os.times: 0 where not kept)
    times = os.times()
    return time.process_time() + times.children_user + times.children_system
def answer(found):
    sys.stdout.flush()
    sys.stderr.flush()
    with open(sys.argv[6], "w", encoding="utf-8") as out:
        out.write(json.dumps(found))
    os._exit(0)
before = set(threading.enumerate())
registry = ToolRegistry(standard_plugins=False, autoload=False)
report = DiscoveryReport()
own = [ep for ep in entry_points(TOOL_GROUP) if _canonical(ep.distribution) == _canonical(dist)]
started, cpu_started = time.perf_counter(), cpu()
marks()
finished = bounded(own_bound, lambda: [_load(registry, report, ep) for ep in own])
marks()
seconds, cpu_used = time.perf_counter() - started, cpu() - cpu_started
own_processes = [p for p in _session_members(os.getpid()) if p != os.getpid()] if os.path.isdir("/proc") else None
if not finished:
    answer({"hung": own_bound})
default = ToolRegistry._current if isinstance(ToolRegistry._current, ToolRegistry) else None
found = {
    "seconds": seconds,
    "cpu": cpu_used,  # the probe's threads and waited-for children: the import's work, which load does not stretch
    "network": list(attempts),  # what this package tried, not the other packages imported below
    "threads": sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive()),
    "default_registry": sorted(default._tools) if default is not None else [],
    "failures": [str(f) for f in report.failures],
    "own_processes": own_processes,  # left by this package's import (None: unknown), not by those imported below
}
everything, scan = ToolRegistry(standard_plugins=False, autoload=False), DiscoveryReport()
unchecked = []
for ep in entry_points(TOOL_GROUP):
    if ep.distribution not in unchecked and not bounded(per_import, lambda: _load(everything, scan, ep)):
        unchecked.append(ep.distribution)  # its other entry points are passed over at once
found["conflicts"] = [[str(c), c.kept, c.skipped] for c in scan.conflicts]
found["unchecked"] = unchecked
answer(found)
"""


def _printed(output: str) -> str:
    """What the probe's import wrote to one stream (between its two marks)."""
    parts = output.split(_MARK)
    return parts[1] if len(parts) > 2 else ""


@dataclass
class _Loaded:
    registry: ToolRegistry
    tools: list[Tool] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # installed packages the name-conflict scan passed over


def _types(schema: Any) -> frozenset[str] | None:
    """The JSON types a property schema allows, when it says (``type`` or an ``anyOf`` of typed options)."""
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list):
        return frozenset(kind)
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        found = [_types(o) for o in options]
        if all(f is not None for f in found):
            return frozenset().union(*found)  # type: ignore[arg-type]
    return None


def _wrong_value(allowed: frozenset[str]) -> tuple[bool, Any]:
    if "number" in allowed:
        allowed = allowed | {"integer"}
    for kinds, value in _WRONG_VALUES:
        if not kinds & allowed:
            return True, value
    return False, None


def _names_field(err: ToolArgumentError, name: str) -> bool:
    paths = {f"$.{name}", f"$['{name}']", f'$["{name}"]'}
    return any(p.path in paths for p in err.problems) and name in str(err)


def _remote_refs(node: Any, path: str = "$") -> Iterator[str]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str) and not value.startswith("#"):
                yield f"{path}.{key} = {value!r}"
            else:
                yield from _remote_refs(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _remote_refs(value, f"{path}[{i}]")


def _schema_errors(schema: Mapping[str, Any], instance: Any) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return [f"{e.json_path}: {e.message}" for e in sorted(validator.iter_errors(instance), key=lambda e: e.json_path)][:5]


def _exported_name(format: str, definition: Mapping[str, Any]) -> str:
    return str(definition["function"]["name"] if format == "openai" else definition["name"])


#: Error names an example may not expect: a crash of the tool (a ``ToolExecutionError``) is one of them too.
_VAGUE_ERRORS = frozenset({"ToolError", "ToolExecutionError"})


def _raised_is(raised: ToolError, name: str) -> bool:
    """``raised`` is an instance of a ``ToolError`` subclass called ``name`` (but for the vague ones)."""
    return any(
        k.__name__ == name and issubclass(k, ToolError) and k not in (ToolError, ToolExecutionError) for k in type(raised).__mro__
    )


def _widened(types: frozenset[str]) -> frozenset[str]:
    """JSON types, with ``number`` standing for ``integer`` too."""
    return types | {"integer"} if "number" in types else types


def _signature_problems(tool: Tool) -> list[str]:
    """Where ``tool``'s parameters schema and its function disagree: a property the function does not take, or
    a property the schema lets be of a JSON type the parameter's annotation cannot hold (``number`` for an ``int``)."""
    try:
        sig = analyse(tool.fn, tool=tool.name, infer_output=False)
    except ToolDefinitionError:  # an annotation with no schema: the names can still be compared
        sig = analyse(tool.fn, tool=tool.name, infer=False, infer_output=False)
    inferred = sig.schema.get("properties") or {}
    problems = []
    for name, declared in (tool.parameters.get("properties") or {}).items():
        if name not in sig.accepted and not sig.accepts_any:
            problems.append(
                f"tool {tool.name!r}: the schema offers {name!r}, which the function does not take "
                f"(its parameters: {', '.join(sorted(sig.accepted)) or 'none'}): a call that gives it fails"
            )
            continue
        said, annotated = _types(declared), _types(inferred.get(name))
        if said is not None and annotated is not None and said - _widened(annotated):
            problems.append(
                f"tool {tool.name!r}: the schema says {name!r} is {' or '.join(sorted(said))}, the function's annotation "
                f"{' or '.join(sorted(annotated))} (a call with a {' or '.join(sorted(said - _widened(annotated)))} "
                "passes validation, and the function gets what it does not take)"
            )
    return problems


def _minimal(schema: Any) -> tuple[bool, Any]:
    """A simple value ``schema`` allows: its ``const``, ``default``, first example or first ``enum`` value, else
    the least value of its type (an object of its required properties); ``(False, None)`` when there is none."""
    if not isinstance(schema, Mapping):
        return schema is True, None
    if "const" in schema:
        return True, schema["const"]
    if "default" in schema:
        return True, schema["default"]
    for key in ("examples", "enum"):
        values = schema.get(key)
        if isinstance(values, list) and values:
            return True, values[0]
    for option in schema.get("anyOf") or schema.get("oneOf") or ():
        found, value = _minimal(option)
        if found:
            return found, value
    kinds = _types(schema) or frozenset()
    kind = next((k for k in ("object", "string", "integer", "number", "boolean", "array", "null") if k in kinds), None)
    if kind == "object":
        built = {}
        properties = schema.get("properties") or {}
        for name in schema.get("required") or ():
            found, built[name] = _minimal(properties.get(name, True))
            if not found:
                return False, None
        return True, built
    if kind == "array":
        found, item = _minimal(schema.get("items", True))
        return found, [item] * int(schema.get("minItems", 0))
    if kind in ("integer", "number"):
        low = schema["minimum"] if "minimum" in schema else schema["exclusiveMinimum"] + 1 if "exclusiveMinimum" in schema else 1
        return True, min(low, schema.get("maximum", low))
    simple = {"string": "a" * max(1, int(schema.get("minLength", 1))), "boolean": False, "null": None}
    return (True, simple[kind]) if kind in simple else (False, None)


def _built_call(tool: Tool) -> dict[str, Any] | None:
    """Arguments built from ``tool``'s schema that it validates, or None."""
    found, arguments = _minimal(tool.parameters)
    if found and isinstance(arguments, dict) and not _schema_errors(tool.parameters, arguments):
        return arguments
    return None


#: The keys of a tool example, and what each holds.
EXAMPLE_KEYS: Mapping[str, str] = {
    "arguments": "the call's arguments (an object)",
    "result": "the value the call returns (optional)",
    "error": "the name of the ToolError subclass the call raises instead, such as ToolArgumentError (optional)",
    "description": "what the example shows (optional)",
}


def _example_problems(tool: Tool, example: Mapping[str, Any]) -> list[str]:
    """What is wrong with an example before it runs: unknown keys, both outcomes, arguments the schema refuses."""
    problems = [f"unknown key {key!r} (an example holds {', '.join(EXAMPLE_KEYS)})" for key in example if key not in EXAMPLE_KEYS]
    error = example.get("error")
    if "result" in example and error is not None:
        problems.append("gives both a 'result' and an 'error'")
    if error is not None and not (isinstance(error, str) and error.isidentifier()):
        problems.append(f"'error' is {error!r}, not the name of a ToolError class such as 'ToolArgumentError'")
    elif error in _VAGUE_ERRORS or isinstance(getattr(builtins, str(error), None), type):
        problems.append(
            f"'error' is {error!r}, which a crash of the tool matches too: name the ToolError subclass the refusal "
            "raises (such as 'ToolArgumentError', or one of your own)"
        )
    if not isinstance(example.get("description", ""), str):
        problems.append("'description' is not a string")
    if error is None:  # an example of a refusal may break the schema on purpose
        errors = _schema_errors(tool.parameters, example.get("arguments"))
        if errors:
            problems.append(f"the arguments do not match the parameters: {'; '.join(errors)}")
    return problems


class _WouldRun(Exception):
    """Raised by the stand-in of a tool with side effects: the call got as far as running the tool."""


@contextmanager
def _stand_in(registry: ToolRegistry, tool: Tool, *, active: bool) -> Iterator[list[str]]:
    """With ``active``, put a stand-in for ``tool`` in ``registry`` while the block runs: a copy whose function
    raises :class:`_WouldRun` instead of acting on the world. Yield a list that holds the tool's name once a call
    reached the stand-in."""
    reached: list[str] = []
    if not active:
        yield reached
        return

    def stand_in(*args: Any, **kwargs: Any) -> NoReturn:
        reached.append(tool.name)
        raise _WouldRun(f"the conformance kit's stand-in for {tool.name!r}: a tool with side effects is not run")

    async def astand_in(*args: Any, **kwargs: Any) -> NoReturn:
        stand_in(*args, **kwargs)

    original = registry.get(tool.name)
    registry.add(dataclasses.replace(original, fn=astand_in if original.is_async else stand_in), replace=True)
    try:
        yield reached
    finally:
        registry.add(original, replace=True)


#: What the import probe found, per distribution, budget, entry points and sys.path (once per process).
_PROBED: dict[tuple[Any, ...], dict[str, Any]] = {}


#: An import may wait (the disk, a loaded machine) up to this many times ``load_budget`` in all, while its CPU time
#: stays within ``load_budget``: importing httpx took 6 to 10 s on a machine loaded with I/O, for 0.2 s of CPU.
_WAIT_FACTOR = 10.0


def _bound(load_budget: float) -> float:
    """Seconds an import of the distribution's entry points may take before the kit calls it hung."""
    return 3.0 + 10.0 * load_budget


def _neighbour_bound(load_budget: float) -> float:
    """Seconds the name-conflict scan gives each installed entry point's import (the patience of :func:`_bound`: an
    import may wait ``_WAIT_FACTOR`` times ``load_budget``) before it passes the package over, and lists it."""
    return 1.0 + _WAIT_FACTOR * load_budget


def _group_left(group: int) -> dict[int, str]:
    """The processes still running in process group ``group`` (the probe's own session), by pid: their command lines
    where ``/proc`` says (ended ones not yet reaped are not running); without ``/proc``, one of pid 0 when any runs."""
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return {}
    if not os.path.isdir("/proc"):
        return {0: "a process (its command line unknown)"}
    found = {}
    for pid in _session_members(group):
        with suppress(OSError):
            with open(f"/proc/{pid}/cmdline", "rb") as cmd:
                line = cmd.read().replace(b"\0", b" ").decode(errors="replace").strip()
            found[pid] = f"pid {pid}: {line[:120]}"
    return found


def _run_probe(dist: str, load_budget: float, group: int) -> dict[str, Any]:
    """What the import probe found for ``dist``, run in a new session (its own process group): its answer read from a
    file, its output from files (a helper process the import started cannot hold them open for the kit to wait on),
    and the processes the package's own import left running (those the name-conflict scan's imports started are not
    its own), all of which are then killed with the whole group."""
    bound, per_import = _bound(load_budget), _neighbour_bound(load_budget)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    with tempfile.TemporaryDirectory(prefix="harness-one-probe-") as scratch:
        answer = os.path.join(scratch, "answer.json")
        paths = {stream: os.path.join(scratch, stream) for stream in ("stdout", "stderr")}
        with open(paths["stdout"], "wb") as out, open(paths["stderr"], "wb") as err:
            process = subprocess.Popen(
                [sys.executable, "-c", _PROBE, dist, _MARK, str(bound), str(per_import), _audit.__file__, answer],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
                start_new_session=hasattr(os, "killpg"),
            )
        left: dict[int, str] = {}
        try:
            process.wait(timeout=bound + per_import * group + 60)  # the probe ends itself sooner: a last resort
        except subprocess.TimeoutExpired:
            return {"crashed": f"the import probe did not end within {bound + per_import * group + 60:.0f} s"}
        finally:
            if hasattr(os, "killpg"):
                left = _group_left(process.pid)
                with suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
            if process.poll() is None:
                process.kill()
                process.wait()
        output = {stream: Path(path).read_text(encoding="utf-8", errors="replace") for stream, path in paths.items()}
        if process.returncode != 0 or not os.path.exists(answer):
            return {"crashed": f"importing the entry points crashed the interpreter:\n{output['stderr'][-2000:]}"}
        with open(answer, encoding="utf-8") as file:
            found: dict[str, Any] = json.load(file)
    found["printed"] = {stream: _printed(text) for stream, text in output.items()}
    own = found.pop("own_processes", None)
    found["processes"] = [line for pid, line in left.items() if own is None or pid in own]
    return found


def _import_probe(dist: str, load_budget: float) -> dict[str, Any]:
    """Run the import probe for ``dist`` in a fresh interpreter (once per process for the same entry points, a
    failure too): what importing its entry points did, and the name conflicts of all installed entry points."""
    group = tuple((ep.name, ep.value, ep.distribution) for ep in entry_points(TOOL_GROUP))
    key = (_canonical(dist), load_budget, group, tuple(sys.path))
    if key not in _PROBED:
        _PROBED[key] = _run_probe(dist, load_budget, len(group))
    found = _PROBED[key]
    if "crashed" in found:
        pytest.fail(found["crashed"], pytrace=False)
    return found


def _misnamed(found: Sequence[EntryPoint], report: DiscoveryReport) -> list[str]:
    """The ``module:attribute`` entry points of ``found`` (loaded into ``report``) that provide another tool than the
    one they are named after: a call of a tool in a fresh cache takes such an entry point to provide only the tool of
    its name, so it may not find the tool, or find another package's first (writing-tools.md: name each entry point
    after its tool). A module entry point (no ``:``) may provide any tools."""
    problems = []
    for ep in found:
        if ":" not in ep.value or ep in report.failed:
            continue
        try:
            names = [tool.name for tool in tools_of(ep.load())]  # imported already: the module's attribute
        except Exception:  # pragma: no cover - it loaded a moment ago
            continue
        if names != [ep.name]:
            problems.append(
                f"entry point {ep.name!r} ({ep.value}) provides {', '.join(map(repr, names)) or 'no tool'}, not the one "
                f"tool it is named after: a call of a tool in a fresh cache takes an entry point to provide the tool of its "
                f"name, so name each entry point after its tool ({', '.join(f'{n} = ...' for n in names[:3])}), or point "
                "it at the module (a module entry point may provide any tools)"
            )
    return problems


def _load_own(registry: ToolRegistry, report: DiscoveryReport, found: Sequence[EntryPoint], bound: float) -> bool:
    """Load ``found`` into ``registry`` in this process, given ``bound`` seconds; False: the import did not end."""

    def load() -> None:
        for ep in found:
            _load_entry_point(registry, report, ep)

    worker = threading.Thread(target=load, daemon=True, name="harness-one-conformance-load")
    worker.start()
    worker.join(bound)
    return not worker.is_alive()


def _example_outcome(tool: Tool, example: Mapping[str, Any], value: Any, raised: ToolError | None) -> list[str]:
    """How a call that returned ``value`` or raised ``raised`` differs from ``example``."""
    expected = example.get("error")
    if expected is not None:
        if raised is None:
            return [f"returned {value!r}, the example expects {expected}"]
        if not _raised_is(raised, expected):
            return [f"raised {type(raised).__name__} ({raised}), the example expects {expected}"]
        return []
    if raised is not None:
        return [f"the call failed: {type(raised).__name__}: {raised}"]
    problems = _output_problems(tool, value)
    if "result" in example and not _same(_as_json(value), _as_json(example["result"])):
        shown = repr(value) if isinstance(value, str) else f"{value!r} (the model reads {render_value(value)})"
        problems.append(f"returned {shown}, the example says {example['result']!r}")
    return problems


def _as_json(value: Any) -> Any:
    """``value`` as the model reads it: a string as is, anything else as the JSON harness-one renders it to (a
    tuple is a list, a dataclass an object)."""
    if isinstance(value, str):
        return value
    try:
        return json.loads(render_value(value))
    except (TypeError, ValueError):  # nothing JSON can say: compared as it is
        return value


def _output_problems(tool: Tool, value: Any) -> list[str]:
    """How ``value``, returned by ``tool``, breaks its output schema (checked as the JSON the model reads)."""
    if tool.output_schema is None:
        return []
    seen = _as_json(value)
    errors = _schema_errors(tool.output_schema, {"result": seen} if tool.output_wrapped else seen)
    return [f"the result {value!r} does not match the output schema: {'; '.join(errors)}"] if errors else []


def _tool_frame(*tools: Tool) -> Callable[[FrameType], str | None]:
    """What names a stuck frame of one of ``tools``' own functions, for :func:`bounded`."""
    codes = {getattr(inspect.unwrap(t.fn), "__code__", None): t for t in tools if callable(t.fn)}
    codes.pop(None, None)

    def locate(frame: FrameType) -> str | None:
        tool = codes.get(frame.f_code)
        return f"the tool {tool.name!r}, {_where(frame)}" if tool is not None else None

    return locate


def _fail(what: str, problems: Sequence[str]) -> None:
    if problems:
        pytest.fail(f"{what}:\n" + "\n".join(f"  - {p}" for p in problems), pytrace=False)


class ToolPackageTests(Suite, standard=True, provided=("make_registry",)):
    """The checks every tool package passes. Subclass it and name your tools::

        from harness_one.testing import ToolPackageTests

        class TestMyTools(ToolPackageTests):
            distribution = "my-tools"      # its harness_one.tools entry points
            # or: tools = [my_tool, other_tool]

    Capability flags switch checks off explicitly (the skip names the flag):

    - ``has_side_effects`` (False): the tools change the world (or need the network), so
      their examples are validated, and only those that expect an ``error`` are run, with the
      tool replaced by a stand-in that raises (bad arguments are refused the same way).
    - ``supports_strict`` (True): every tool exports in OpenAI strict mode. False: strict
      export must fail with its documented reasons for at least one tool.

    ``load_budget`` (seconds) bounds importing the entry points in a fresh interpreter (the import's CPU time, and
    ten times it of time in all), and ``example_budget`` running one example.
    Override :meth:`make_registry` to run the checks in a registry of your own.
    """

    distribution: ClassVar[str | None] = None
    tools: ClassVar[Sequence[Any] | None] = None
    has_side_effects: ClassVar[bool] = False
    supports_strict: ClassVar[bool] = True
    load_budget: ClassVar[float] = 2.0
    example_budget: ClassVar[float] = 2.0
    _harness_tuning: ClassVar[Mapping[str, bool]] = {"load_budget": False, "example_budget": False}
    _harness_stuck: ClassVar[tuple[str, str]] = (
        "call",
        "a tool or plugin that waits for what only another call gives, or no one: a lock never released, a "
        "connection or a reply waited for without a timeout",
    )

    def _harness_locate(self, given: Mapping[str, Any]) -> Callable[[FrameType], str | None]:
        """A stuck check names the package's tool it waits in (else the innermost frame of the code under test)."""
        loaded = given.get("loaded")
        return _tool_frame(*loaded.tools) if isinstance(loaded, _Loaded) else _tool_frame()

    def make_registry(self) -> ToolRegistry:
        """The registry the checks call tools in: the standard plugins, a manual clock, no third-party plugins."""
        return ToolRegistry(autoload=False, clock=BoundedClock())

    @pytest.fixture
    def loaded(self) -> _Loaded:
        """The package's tools, registered in a fresh :meth:`make_registry`, and what went wrong on the way."""
        if (self.distribution is None) == (self.tools is None):
            pytest.fail(f"{type(self).__name__}: set exactly one of distribution = 'my-dist' or tools = [...]", pytrace=False)
        out = _Loaded(self.make_registry())
        if self.tools is not None:
            for item in self.tools:
                try:
                    tool = as_tool(item)
                    out.registry.add(tool)
                except ToolError as exc:
                    out.problems.append(f"{item!r}: {exc}")
                    continue
                out.tools.append(tool)
            return out
        dist = self.distribution
        assert dist is not None
        probed = _import_probe(dist, self.load_budget)  # in a fresh interpreter first: an import that hangs fails here
        if "hung" in probed:
            pytest.fail(f"importing the entry points of {dist!r} did not end within {probed['hung']:.0f} s", pytrace=False)
        report = DiscoveryReport()
        found = [ep for ep in entry_points(TOOL_GROUP) if _canonical(ep.distribution) == _canonical(dist)]
        if not found:
            out.problems.append(f"no entry points of {dist!r} in the {TOOL_GROUP!r} group: is it installed (pip install -e .)?")
        if not _load_own(out.registry, report, found, _bound(self.load_budget)):
            pytest.fail(
                f"loading the entry points of {dist!r} did not end within {_bound(self.load_budget):.0f} s", pytrace=False
            )
        out.problems += [str(f) for f in report.failures] + [f"name conflict: {c}" for c in report.conflicts]
        out.problems += _misnamed(found, report)
        for name in report.loaded.get(found[0].distribution if found else dist, []):
            tool = out.registry.get(name)
            out.tools.append(tool)
            if tool.source != (found[0].distribution if found else dist):
                out.problems.append(f"tool '{name}' is attributed to {tool.source!r}")
        out.problems += [
            f"name conflict with another installed package: {text} (wherever harness-one discovers tools, this "
            f"distribution's tool is the one skipped: rename it)"
            for text, kept, skipped in probed["conflicts"]
            if _canonical(skipped) == _canonical(dist) and _canonical(kept) != _canonical(dist)
        ]
        out.unchecked = [d for d in probed.get("unchecked", []) if _canonical(d) != _canonical(dist)]
        return out

    def checked_tools(self, loaded: _Loaded) -> list[Tool]:
        if not loaded.tools:
            pytest.fail("the package provides no tools: " + ("; ".join(loaded.problems) or "nothing loaded"), pytrace=False)
        return loaded.tools

    # ------------------------------------------------------------------ loading

    def test_entry_points_load(self, loaded: _Loaded) -> None:
        """Every entry point (or listed tool) loads into a fresh registry, attributed and without conflicts."""
        if loaded.unchecked:  # another package's import that did not end: nothing of this one's to fail on
            warnings.warn(
                f"not checked for conflicts: {', '.join(loaded.unchecked)} (its import did not end within "
                f"{_neighbour_bound(self.load_budget):g} s)",
                pytest.PytestWarning,
                stacklevel=2,
            )
        _fail("the tools did not all load", loaded.problems)
        self.checked_tools(loaded)

    def test_import_has_no_side_effects(self) -> None:
        """Importing the entry points in a fresh interpreter is quick, offline, prints nothing (to stdout or stderr,
        logging included), starts no thread, registers nothing."""
        if self.distribution is None:
            self.nothing_to_check("tools = [...] given: there are no entry points to import")
        seen = _import_probe(self.distribution, self.load_budget)
        if "hung" in seen:
            pytest.fail(f"importing the entry points did not end within {seen['hung']:.0f} s", pytrace=False)
        failed = [f"failed to load: {f}" for f in seen["failures"]]
        problems: list[str] = []
        if seen["network"]:
            problems.append(f"tried the network at import: {', '.join(seen['network'][:3])}")
        if seen["threads"]:
            problems.append(f"left threads running after import: {', '.join(seen['threads'])}")
        if seen.get("processes"):
            problems.append(f"left processes running after import (the kit killed them): {'; '.join(seen['processes'][:3])}")
        if seen["default_registry"]:
            problems.append(
                f"registered tools in the default registry at import (define them with registry=None): {', '.join(seen['default_registry'])}"
            )
        for stream, printed in seen["printed"].items():
            if printed:
                problems.append(f"printed at import (to {stream}): {printed[:200]!r}")
        wall, cpu = seen["seconds"], seen["cpu"]
        if cpu > self.load_budget:  # work at import: CPU time, which load elsewhere does not stretch
            problems.append(f"took {cpu:.2f} s of CPU ({wall:.2f} s in all) to import (load_budget = {self.load_budget} s)")
        elif wall > _WAIT_FACTOR * self.load_budget:  # waiting at import (a sleep, a lock): wall time, within reason
            problems.append(
                f"took {wall:.2f} s ({cpu:.2f} s of CPU) to import (load_budget = {self.load_budget} s of CPU,"
                f" {_WAIT_FACTOR * self.load_budget:g} s in all)"
            )
        if failed:  # not a side effect: say so first
            _fail("import failed" + (", and importing had side effects" if problems else ""), failed + problems)
        _fail("importing the package has side effects", problems)

    # ------------------------------------------------------------------ what the model sees

    def test_names_valid_for_every_provider(self, loaded: _Loaded) -> None:
        """Every exported name obeys each provider's rule, and a changed name maps back to the tool."""
        tools = self.checked_tools(loaded)
        problems = [f"no name rule for export format {f!r}" for f in FORMATS if f not in PROVIDER_NAMES]
        for fmt in (f for f in FORMATS if f in PROVIDER_NAMES):
            try:
                export = export_tools(tools, fmt)
            except ToolError as exc:
                problems.append(f"{fmt}: export failed: {exc}")
                continue
            names = [_exported_name(fmt, d) for d in export.tools]
            for tool, name in zip(tools, names):
                if not PROVIDER_NAMES[fmt].match(name):
                    problems.append(f"{fmt}: {name!r} (tool {tool.name!r}) breaks the rule {PROVIDER_NAMES[fmt].pattern}")
                if export.names.original(name) != tool.name:
                    problems.append(f"{fmt}: {name!r} does not map back to tool {tool.name!r}")
            problems += [f"{fmt}: {n!r} is exported twice" for n in sorted({n for n in names if names.count(n) > 1})]
        for tool in tools:  # one property name Anthropic refuses fails every request that offers the tool
            problems += [
                f"anthropic: parameter {key!r} of tool {tool.name!r} breaks the rule {ANTHROPIC_PROPERTY.pattern}"
                for key in anthropic_refused(tool.parameters)
            ]
        _fail("tool and parameter names a provider would refuse", problems)

    def test_descriptions(self, loaded: _Loaded) -> None:
        """Every tool has a description: the model chooses tools by it."""
        problems = [
            f"tool {t.name!r} has no description (give the function a docstring, or description=...)"
            for t in self.checked_tools(loaded)
            if not isinstance(t.description, str) or not t.description.strip()
        ]
        _fail("tools without a description", problems)

    def test_parameters_are_object_schemas(self, loaded: _Loaded) -> None:
        """``parameters`` is a valid draft 2020-12 schema of an object, with no remote ``$ref``."""
        problems = []
        for tool in self.checked_tools(loaded):
            schema: Any = tool.parameters  # checked: a tool built by hand may hold anything
            if not isinstance(schema, Mapping):
                problems.append(f"tool {tool.name!r}: parameters is a {type(schema).__name__}, not a JSON object")
                continue
            try:
                jsonschema.Draft202012Validator.check_schema(schema)
            except jsonschema.SchemaError as exc:
                problems.append(f"tool {tool.name!r}: not a valid draft 2020-12 schema: {exc.message} at {exc.json_path}")
            if schema.get("type") != "object":
                problems.append(f"tool {tool.name!r}: the root is not 'type': 'object' but {schema.get('type')!r}")
            declared = schema.get("$schema")
            if declared is not None and "2020-12" not in str(declared):
                problems.append(f"tool {tool.name!r}: declares $schema {declared!r}, not draft 2020-12")
            problems += [f"tool {tool.name!r}: remote reference {ref}" for ref in _remote_refs(schema)]
        _fail("parameter schemas providers cannot use", problems)

    def test_examples(self, loaded: _Loaded) -> None:
        """Each example is well formed; its arguments validate; run offline within ``example_budget``, it
        returns its ``result`` (a value matching ``output_schema``) or raises its ``error``.

        With ``has_side_effects``, only the examples that expect an ``error`` run, with the tool replaced
        by a stand-in that raises: an example whose error only the tool itself raises is not run.
        """
        tools = self.checked_tools(loaded)
        if not any(t.examples for t in tools):
            self.nothing_to_check("no tool declares examples (defineTool(examples=[{'arguments': {...}}]))")
        problems: list[str] = []
        ran = not_run = 0
        for tool in tools:
            for i, example in enumerate(tool.examples):
                where = f"tool {tool.name!r}, example {i}"
                found = _example_problems(tool, example)
                if found:
                    problems += [f"{where}: {p}" for p in found]
                    continue
                if self.has_side_effects and "error" not in example:
                    continue
                with _stand_in(loaded.registry, tool, active=self.has_side_effects) as reached:
                    found = self.run_example(loaded.registry, tool, example)
                if reached:
                    not_run += 1  # only the tool itself raises this error: running it would act on the world
                    continue
                ran += 1
                problems += [f"{where}: {p}" for p in found]
        if self.has_side_effects:
            _fail("examples that do not match their tool", problems)
            self.switched_off(
                "has_side_effects",
                f"examples validated; of the {ran + not_run} that expect an error, {ran} ran with the tool replaced by a "
                f"stand-in, {not_run} not run (only the tool itself raises their error)",
            )
        _fail("examples that do not match their tool", problems)

    def run_example(self, registry: ToolRegistry, tool: Tool, example: Mapping[str, Any]) -> list[str]:
        """Call ``tool`` with the example's arguments, offline, through ``call`` and through ``acall``, and say how
        each outcome differs from the example."""
        problems: list[str] = []
        for asynchronous in (False, True):
            value, raised, found = self.run_offline(registry, tool, example["arguments"], asynchronous=asynchronous)
            if value is _STUCK:  # once is enough: the stuck call may hold what the next one needs
                problems += [p if not asynchronous else f"through acall: {p}" for p in found]
                break
            found += _example_outcome(tool, example, value, raised)
            problems += [p if not asynchronous else f"through acall: {p}" for p in found if p not in problems]
        return problems

    def run_offline(
        self, registry: ToolRegistry, tool: Tool, arguments: Mapping[str, Any], *, asynchronous: bool = False
    ) -> tuple[Any, ToolError | None, list[str]]:
        """Call ``tool`` with ``arguments``, offline, within ``example_budget``, through ``call`` or ``acall``: what
        it returned or raised, and what went wrong on the way (the network tried, the budget overrun, the event
        loop blocked, the arguments changed in place: each call gets its own deep copy of them). The call runs in a daemon thread: one that has not returned after ``STUCK_AFTER`` times
        ``example_budget`` is left there, reported with its stack, and returns a stand-in for no value."""
        if isinstance(registry.clock, ManualClock):
            registry.clock.advance(3600.0)  # rate limits refill between calls
        sent, held = copy.deepcopy(dict(arguments)), copy.deepcopy(dict(arguments))

        def run() -> tuple[Any, ToolError | None, list[str], list[str], float]:
            started = time.perf_counter()
            with _audit.offline() as attempts, _audit.blocking_calls() as blocked:
                try:
                    if asynchronous:
                        value = run_async(registry.acall(tool.name, sent))
                    else:
                        value = registry.call(tool.name, sent)
                    raised: ToolError | None = None
                except ToolError as exc:
                    value, raised = None, exc
            return value, raised, attempts, blocked, time.perf_counter() - started

        deadline = STUCK_AFTER * self.example_budget
        try:
            value, raised, attempts, blocked, seconds = bounded(deadline, run, locate=_tool_frame(tool))
        except Overran as stuck:
            shown = stuck.stack.replace("\n", "\n    ")
            return (
                _STUCK,
                None,
                [
                    f"did not return within {deadline:g} s ({STUCK_AFTER} x example_budget = {self.example_budget} s): "
                    f"stuck in {stuck.where}\n    {shown}"
                ],
            )
        problems = []
        if sent != held:
            problems.append(
                f"the tool changed its arguments in place ({repr(held)[:200]} became {repr(sent)[:200]}): they are the "
                "caller's (the model's request, kept in its conversation): copy what the tool changes (sorted(items), "
                "not items.sort())"
            )
        if attempts:
            problems.append(f"tried the network ({', '.join(attempts[:3])}): examples run offline")
        if seconds > self.example_budget:
            problems.append(f"took {seconds:.2f} s (example_budget = {self.example_budget} s)")
        if asynchronous and blocked:
            problems.append(
                f"blocked the event loop under acall ({'; '.join(sorted(set(blocked))[:3])}): an async tool awaits, a tool "
                "that blocks keeps blocking=True (it then runs in a worker thread)"
            )
        return value, raised, problems

    def test_schema_matches_the_function(self, loaded: _Loaded) -> None:
        """Every property of a tool's parameters is a parameter of its function (a ``**kwargs`` function takes
        any), of a JSON type its annotation allows."""
        _fail("schemas that do not match their function", [p for t in self.checked_tools(loaded) for p in _signature_problems(t)])

    def test_a_call_built_from_the_schema_runs(self, loaded: _Loaded) -> None:
        """A tool no example shows returning runs once with arguments built from its schema (defaults, examples,
        the least value of each required property), offline: it returns a value matching its output schema, or
        refuses with a ``ToolError``; it does not crash. With ``has_side_effects`` the call reaches the stand-in."""
        problems, ran, unbuilt = [], 0, []
        for tool in self.checked_tools(loaded):
            if not self.has_side_effects and any("error" not in e for e in tool.examples):
                continue  # test_examples runs it
            arguments = _built_call(tool)
            if arguments is None:
                unbuilt.append(tool.name)
                continue
            ran += 1
            where = f"tool {tool.name!r} called with {arguments!r}"
            with _stand_in(loaded.registry, tool, active=self.has_side_effects) as reached:
                value, raised, found = self.run_offline(loaded.registry, tool, arguments)
            problems += [f"{where}: {p}" for p in found]
            if reached or value is _STUCK:
                continue
            if isinstance(raised, ToolExecutionError):
                problems.append(f"{where}: the tool crashed: {raised}")
            elif raised is None:
                problems += [f"{where}: {p}" for p in _output_problems(tool, value)]
        _fail("calls the schema allows that the tool does not serve", problems)
        if unbuilt and not ran:
            self.nothing_to_check(f"no simple valid arguments for {', '.join(map(repr, unbuilt))}: give them an example")

    # ------------------------------------------------------------------ providers

    def test_export_every_format(self, loaded: _Loaded) -> None:
        """Export to every provider format succeeds and is plain JSON."""
        tools = self.checked_tools(loaded)
        problems = []
        for fmt in FORMATS:
            try:
                json.dumps(export_tools(tools, fmt).tools, allow_nan=False)
            except (ToolError, TypeError, ValueError) as exc:
                problems.append(f"{fmt}: {type(exc).__name__}: {exc}")
        _fail("exports that fail", problems)

    def test_strict_openai_export(self, loaded: _Loaded) -> None:
        """OpenAI strict mode: every tool exports (``supports_strict``), or the export names its reasons."""
        tools = self.checked_tools(loaded)
        refused = export_tools(tools, "openai", strict="auto").not_strict
        if self.supports_strict:
            _fail(
                "tools OpenAI strict mode refuses (set supports_strict = False if the schema cannot be strict)",
                [f"tool {name!r}: {'; '.join(reasons)}" for name, reasons in refused.items()],
            )
            return
        if not refused:
            pytest.fail(
                "supports_strict = False, but every tool exports in strict mode: set supports_strict = True", pytrace=False
            )
        problems = []
        for tool in (t for t in tools if t.name in refused):
            try:
                export_tools([tool], "openai", strict=True)
                problems.append(f"tool {tool.name!r}: listed as not strict, yet strict=True exports it")
            except StrictSchemaError as exc:
                if not exc.reasons:
                    problems.append(f"tool {tool.name!r}: refused without a reason")
        _fail("strict-mode refusals without their documented reason", problems)

    def test_annotations_consistent(self, loaded: _Loaded) -> None:
        """The behaviour hints agree: a read-only tool is not destructive; only idempotent or read-only tools are cached."""
        problems = []
        for tool in self.checked_tools(loaded):
            if tool.read_only and tool.destructive:
                problems.append(f"tool {tool.name!r} is read_only and destructive")
            if tool.cache_ttl is not None and not (tool.idempotent or tool.read_only):
                problems.append(f"tool {tool.name!r} has cache_ttl but is neither idempotent nor read_only")
            for flag in ("read_only", "idempotent"):
                if not isinstance(getattr(tool, flag), bool):
                    problems.append(f"tool {tool.name!r}: {flag} is {getattr(tool, flag)!r}, not a bool")
        _fail("contradictory annotations", problems)

    def test_argument_errors_name_the_field(self, loaded: _Loaded) -> None:
        """Arguments generated from the schema (a required field missing, a wrong type) are refused with a
        ``ToolArgumentError`` that names the field, before the tool runs (with ``has_side_effects``, a stand-in
        that raises takes the tool's place)."""
        registry = loaded.registry
        problems = []
        for tool in self.checked_tools(loaded):
            properties = tool.parameters.get("properties") or {}
            cases: list[tuple[str, str, dict[str, Any]]] = []
            required = [r for r in tool.parameters.get("required") or () if isinstance(r, str)]
            if required:
                cases += [(name, "missing", {}) for name in required]
            for name, schema in properties.items():
                allowed = _types(schema)
                found, value = _wrong_value(allowed) if allowed is not None else (False, None)
                if found:
                    cases.append((name, f"given {json.dumps(value)}", {name: value}))
            for name, what, arguments in cases:
                where = f"tool {tool.name!r}, {name!r} {what}"
                returned: Any = None
                raised: ToolError | None = None
                with _stand_in(registry, tool, active=self.has_side_effects) as reached:
                    try:
                        returned = registry.call(tool.name, arguments)
                    except ToolError as exc:
                        raised = exc
                if reached:
                    problems.append(f"{where}: accepted: the tool would have run (has_side_effects: a stand-in ran instead)")
                elif isinstance(raised, ToolArgumentError):
                    if not _names_field(raised, name):
                        problems.append(f"{where}: the error does not name the field: {raised}")
                elif raised is not None:
                    problems.append(f"{where}: {type(raised).__name__} instead of ToolArgumentError: {raised}")
                else:
                    problems.append(f"{where}: accepted, and the tool ran (returned {returned!r})")
        _fail("bad arguments not refused as ToolArgumentError naming the field", problems)
