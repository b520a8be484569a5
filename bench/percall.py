"""harness-one's per-call cost beside its peers, its start-up and registration at scale, in one run.

Run with ``make bench`` (which installs the peers of ``bench/requirements.txt`` first). Every
per-call row calls the same ``add(a, b)`` tool with ``{"a": 5, "b": 3}``; the rows are measured
interleaved, round after round over all of them, so load on the machine hits all alike, and
each figure is the median of its rounds. A row with a target shows whether it is met; a target
missed is printed, never an error. ``--markdown FILE`` also writes the table as Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import jsonschema
from peers import ARGS, add, close, peers
from scale import AT, scale_rows
from startup import startup_rows
from table import Row, render

from harness_one import Call, RateLimitExceeded, ToolRegistry, hookimpl
from harness_one_plugins import ApprovalPlugin, BudgetPlugin, IdempotencyPlugin, OTelPlugin, SQLiteStore, ValidationPlugin
from harness_one_plugins.validation import rust_available

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}
NEVER_TRIPS = {"rate": 1e9, "burst": 1e9}
TIMEOUT = 10.0


async def aadd(a: float, b: float) -> float:
    return a + b


def echo(text: str) -> str:
    return text


class NoOp:
    @hookimpl
    def harness_pre_validate(self, call: Call) -> None:
        return None

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        return None

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        return None

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        return None


# --- the seed's section 8, re-created as written ---------------------------------------


class SeedRateLimitExceeded(Exception):
    pass


class SeedTool:
    def __init__(
        self, name: str, description: str, parameters_schema: dict[str, Any], fn: Callable[..., Any], rate_limit: dict[str, float]
    ):
        self.name = name
        self.description = description
        self.parameters_schema = parameters_schema
        self.fn = fn
        self.rate_limit = rate_limit
        self._bucket = rate_limit["burst"]
        self._last_refill = time.time()
        self._lock = threading.Lock()

    def _acquire_token(self) -> bool:
        with self._lock:
            now = time.time()
            elapsed = now - self._last_refill
            self._bucket = min(self.rate_limit["burst"], self._bucket + elapsed * self.rate_limit["rate"])
            self._last_refill = now
            if self._bucket >= 1:
                self._bucket -= 1
                return True
            return False

    def call(self, args: dict[str, Any]) -> Any:
        if not self._acquire_token():
            raise SeedRateLimitExceeded(f"Tool {self.name} limit exceeded")
        jsonschema.validate(instance=args, schema=self.parameters_schema)
        return self.fn(**args)


class SeedRegistry:
    _tools: ClassVar[dict[str, SeedTool]] = {}

    @classmethod
    def call(cls, name: str, args: dict[str, Any]) -> Any:
        tool = cls._tools.get(name)
        if not tool:
            raise KeyError(name)
        return tool.call(args)


# --- the rows ----------------------------------------------------------------------------


@dataclass
class Case:
    """One per-call row: ``fn()`` makes one call (returns an awaitable when ``is_async``)."""

    label: str
    fn: Callable[[], Any]
    share: float = 1.0  # calls per round, as a share of --number (slow rows make fewer)
    target: float | None = None
    is_async: bool = False


BACKEND = "rust" if rust_available() else "python"


def registry(
    tool: Callable[..., Any] = add, *, backend: str = BACKEND, plugins: dict[str, Any] | None = None, **kw: Any
) -> ToolRegistry:
    """A registry with the standard plugins (validation on ``backend``) and ``tool`` as ``name``."""
    options = {k: kw.pop(k) for k in ("block", "standard_plugins") if k in kw}
    standard = options.get("standard_plugins", True)  # "no plugins" means no validation either
    own = {"validation": ValidationPlugin(backend=backend)} if standard else {}
    reg = ToolRegistry(autoload=False, plugins={**own, **(plugins or {})}, **options)
    params = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]} if tool is echo else SCHEMA
    reg.add(tool, name=kw.pop("name", "add"), parameters=params, rate_limit=kw.pop("rate_limit", NEVER_TRIPS), **kw)
    return reg


def hostile_cases() -> list[Case]:
    """The slowest refusals (the 10 ms bound): a backtracking pattern, payloads near the size limit (256 KiB by default)."""
    reg = registry(name="add")
    reg.add(
        lambda s: s, name="match", parameters={"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|a)+$"}}}
    )
    reg.add(
        lambda a: a,
        name="ints",
        parameters={"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}},
    )
    limit = reg.limits.max_bytes

    def under(text: str, closing: str) -> str:  # cut between two items to at most the limit
        return text[: text.rindex(", ", 0, limit - len(closing))] + closing

    text = under(json.dumps({"a": [1, "x"] * (limit // 8)}), "]}")  # every other value wrong
    # estimated sizes: "a" and the list 3 bytes, 1 and "x" 11; a key its length, its integer 8
    values = {"a": [1, "x"] * ((limit - 3) // 11)}
    keys = under(json.dumps({f"key{i}": i for i in range(limit // 8)}), "}")  # unknown properties
    named: dict[str, int] = {}
    size = 0
    while size + len(f"key{len(named)}") + 8 <= limit:
        size += len(f"key{len(named)}") + 8
        named[f"key{len(named)}"] = len(named)
    count = len(named)
    small = under(json.dumps({"a": [[0]] * (limit // 5)}), "]}")  # many small arrays, each one wrong
    return [
        Case(
            "refused: pattern ^(a|a)+$ on 24 a's and '!'", lambda: reg.try_call("match", {"s": "a" * 24 + "!"}), 0.005, 10_000.0
        ),
        Case(
            f"refused: JSON text just under {limit >> 10} KiB, mixed values", lambda: reg.try_call("ints", text), 0.0005, 10_000.0
        ),
        Case(
            f"refused: a dict of mixed values just under {limit >> 10} KiB",
            lambda: reg.try_call("ints", values),
            0.0005,
            10_000.0,
        ),
        Case(
            f"refused: JSON text just under {limit >> 10} KiB, unknown keys", lambda: reg.try_call("ints", keys), 0.0005, 10_000.0
        ),
        Case(
            f"refused: a dict of {count:,} unknown keys (under {limit >> 10} KiB)",
            lambda: reg.try_call("ints", named),
            0.0005,
            10_000.0,
        ),
        Case(
            f"refused: JSON text just under {limit >> 10} KiB of [0] items",
            lambda: reg.try_call("ints", small),
            0.0005,
            10_000.0,
        ),
    ]


def refused_call(reg: ToolRegistry) -> Callable[[], Any]:
    def call() -> Any:
        try:
            return reg.call("add", ARGS)
        except RateLimitExceeded as err:
            return err

    return call


def new_keys(reg: ToolRegistry) -> Callable[[], Any]:
    """A call with a new idempotency key each time."""
    keys = iter(range(10**12))
    return lambda: reg.call("add", ARGS, idempotency_key=str(next(keys)))


def plugin_cases() -> list[Case]:
    """Each optional plugin on (doing its work on every call) and off (blocked), standard path."""
    cases = []
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider

        otel = OTelPlugin(enabled=True, tracer_provider=TracerProvider(), meter_provider=MeterProvider())
        on = registry(plugins={"otel": otel})
        cases.append(Case("plugin otel on (SDK providers, no exporter)", lambda: on.call("add", ARGS), 0.25))
    except ImportError:
        print("note: opentelemetry-sdk is not installed; the otel-on row is skipped")
    off = registry(block=["otel"])
    cases.append(Case("plugin otel off (blocked)", lambda: off.call("add", ARGS), 0.25))
    text = {"text": "hello"}
    on_out, off_out = registry(echo), registry(echo, block=["output_limit"])
    cases.append(Case("plugin output_limit on (a str result)", lambda: on_out.call("add", text), 0.25))
    cases.append(Case("plugin output_limit off (blocked, same tool)", lambda: off_out.call("add", text), 0.25))
    run = {"run_id": "run-1"}
    on_budget = registry(plugins={"budget": BudgetPlugin(total=10**15)})
    off_budget = registry(block=["budget"])
    cases.append(Case("plugin budget on (context run_id)", lambda: on_budget.call("add", ARGS, context=run), 0.25))
    cases.append(Case("plugin budget off (blocked, same context)", lambda: off_budget.call("add", ARGS, context=run), 0.25))
    on_approval = registry(plugins={"approval": ApprovalPlugin(require=lambda call: False)})
    off_approval = registry(block=["approval"])
    cases.append(Case("plugin approval on (a rule that approves)", lambda: on_approval.call("add", ARGS), 0.25))
    cases.append(Case("plugin approval off (blocked)", lambda: off_approval.call("add", ARGS), 0.25))
    return cases


def policy_cases(tmp: Path) -> list[Case]:
    """What each resilience policy adds when it does not trip (standard plugins)."""
    cases = []
    policies: list[tuple[str, dict[str, Any]]] = [
        ("retry=3, no failure", {"retry": 3}),
        ("max_concurrency=8", {"max_concurrency": 8}),
        ("circuit_breaker", {"circuit_breaker": True}),
        ("read_only + cache_ttl, a cache hit", {"read_only": True, "cache_ttl": 60}),
    ]
    for label, policy in policies:
        cases.append(Case(f"policy {label}", partial(registry(**policy).call, "add", ARGS), 0.25))
    for store_label, store, share in [("memory", None, 0.25), ("SQLite", SQLiteStore(tmp / "bench.sqlite3"), 0.02)]:
        reg = registry(plugins={"idempotency": IdempotencyPlugin(store=store)})
        cases.append(Case(f"policy idempotency key, a new key each call, {store_label}", new_keys(reg), share))
        reg.call("add", ARGS, idempotency_key="same")
        replay = partial(reg.call, "add", ARGS, idempotency_key="same")
        cases.append(Case(f"policy idempotency key, a replay, {store_label}", replay, share))
    return cases


def cases(loop: asyncio.AbstractEventLoop, tmp: Path, pool: ThreadPoolExecutor) -> tuple[list[Case], list[ToolRegistry]]:
    """Every per-call row, and the registries whose worker processes must be shut down at the end."""
    bare = registry(standard_plugins=False)
    noop = registry(standard_plugins=False, plugins={f"noop{i}": NoOp() for i in range(4)})
    std_rs = registry(backend="rust") if rust_available() else None
    std_py = registry(backend="python")
    std = std_rs or std_py
    async_tool = registry(aadd)
    refused = registry(rate_limit={"rate": 1e-9, "burst": 1})
    refused.call("add", ARGS)  # the one token: every later call is refused
    thread_mode = registry(timeout=TIMEOUT)
    process_mode = registry(timeout=TIMEOUT, timeout_mode="process")
    async_mode = registry(aadd, timeout=TIMEOUT)
    none_mode = registry(timeout=TIMEOUT, timeout_mode="none")
    ToolRegistry.set_default(bare)
    SeedRegistry._tools["add"] = SeedTool("add", "Adds two numbers", SCHEMA, add, NEVER_TRIPS)
    rows = [
        Case("bare call add(a=5, b=3)", lambda: add(a=5, b=3), 10),
        Case("ToolRegistry.call, no plugins (class-level)", lambda: ToolRegistry.call("add", ARGS), 1, 0.8),
        Case("registry.call, no plugins (instance)", lambda: bare.call("add", ARGS), 1, 0.8),
        Case("registry.call, 4 no-op plugins x 4 hooks", lambda: noop.call("add", ARGS)),
    ]
    if std_rs is not None:
        rows.append(Case("registry.call, standard plugins, rust backend", lambda: std_rs.call("add", ARGS), 1, 2.5))
    else:
        print("note: jsonschema-rs is not installed; the rust-backend row is skipped")
    rows += [
        Case("registry.call, standard plugins, python backend", lambda: std_py.call("add", ARGS), 0.25),
        Case("registry.try_call, standard plugins", lambda: std.try_call("add", ARGS), 0.25),
        Case("registry.acall of an async tool, standard plugins", lambda: async_tool.acall("add", ARGS), 0.25, 2.5, True),
        Case("registry.acall of a sync tool (a thread hop)", lambda: std.acall("add", ARGS), 0.02, None, True),
        Case("refused (rate limit): try_call", lambda: refused.try_call("add", ARGS), 0.25, 2.0),
        Case("refused (rate limit): call + except", refused_call(refused), 0.25, 2.0),
        Case("raw ThreadPoolExecutor submit(fn).result(10)", lambda: pool.submit(add, 5, 3).result(TIMEOUT), 0.02),
        Case("timeout=10, thread mode", lambda: thread_mode.call("add", ARGS), 0.02),
        Case("timeout=10, process mode (warm worker)", lambda: process_mode.call("add", ARGS), 0.005, 2000.0),
        Case("timeout=10, async tool under acall", lambda: async_mode.acall("add", ARGS), 0.25, None, True),
        Case("timeout=10, mode none (advisory deadline)", lambda: none_mode.call("add", ARGS), 0.25),
        *plugin_cases(),
        *policy_cases(tmp),
        *hostile_cases(),
        Case("seed reference (section 8)", lambda: SeedRegistry.call("add", ARGS), 0.005),
    ]
    for label, fn, is_async in peers(loop):
        share = 1.0 if "Pydantic" in label else 0.005 if "FastMCP" in label else 0.02
        rows.append(Case(label, fn, share, None, is_async))
    return rows, [process_mode]


async def _atimed(fn: Callable[[], Awaitable[Any]], count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        await fn()
    return time.perf_counter() - start


def _timed(fn: Callable[[], Any], count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        fn()
    return time.perf_counter() - start


def measure(all_cases: list[Case], number: int, repeat: int, loop: asyncio.AbstractEventLoop) -> list[Row]:
    """Median us per call of each case over ``repeat`` rounds, each round over every case in turn."""
    counts = [max(20, int(number * case.share)) for case in all_cases]
    samples: list[list[float]] = [[] for _ in all_cases]
    for case in all_cases:  # warm: caches, lazy imports, worker processes and threads started
        loop.run_until_complete(_atimed(case.fn, 3)) if case.is_async else _timed(case.fn, 3)
    for _ in range(repeat):
        for case, count, out in zip(all_cases, counts, samples):
            seconds = loop.run_until_complete(_atimed(case.fn, count)) if case.is_async else _timed(case.fn, count)
            out.append(seconds / count * 1e6)
    return [Row(c.label, statistics.median(s), "us", c.target) for c, s in zip(all_cases, samples)]


def peak_bytes_per_call(fn: Callable[[], Any], calls: int = 200) -> float:
    """Median over ``calls`` of the tracemalloc peak one call adds above what was allocated before it."""
    tracemalloc.start()
    try:
        fn()
        peaks = []
        for _ in range(calls):
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            fn()
            peaks.append(tracemalloc.get_traced_memory()[1] - before)
    finally:
        tracemalloc.stop()
    return statistics.median(peaks)


def ratios(rows: list[Row]) -> list[Row]:
    """Ratios between rows of this run, the standard path's against the references."""
    by = {row.label: row.value for row in rows}
    std = next((v for k, v in by.items() if k.startswith("registry.call, standard plugins, ")), None)
    out = []

    def ratio(label: str, num: str, den: str, target: float | None, *, at_least: bool = False) -> None:
        a, b = (std if x == "std" else by.get(x) for x in (num, den))
        if a is None or b is None:
            return
        out.append(Row(label, a / b, "x", target, higher_is_better=at_least))

    ratio("ratio: seed reference / standard (rust)", "seed reference (section 8)", "std", 250.0, at_least=True)
    ratio("ratio: StructuredTool.invoke / standard", "peer: langchain-core StructuredTool.invoke", "std", 70.0, at_least=True)
    ratio("ratio: standard / Pydantic AI validate-and-call", "std", "peer: Pydantic AI validate-and-call", 4.0)
    ratio(
        "ratio: thread mode / raw ThreadPoolExecutor",
        "timeout=10, thread mode",
        "raw ThreadPoolExecutor submit(fn).result(10)",
        1.2,
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--number", type=int, default=20_000, help="calls per round of the fastest rows (slow rows make fewer)")
    parser.add_argument("--repeat", type=int, default=7, help="rounds; each figure is the median of its rounds")
    parser.add_argument("--tools", type=int, help=f"tools of the scale rows (default {AT:,}; 10,000 when --number < 20000)")
    parser.add_argument("--startup-runs", type=int, default=10, help="fresh processes per start-up row")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file as Markdown")
    opts = parser.parse_args()
    tools = opts.tools or (AT if opts.number >= 20_000 else 10_000)
    # bench/mcp.py and bench/redis.py must not shadow the SDKs the peers import.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != here] + [here]

    began = time.perf_counter()
    loop = asyncio.new_event_loop()
    pool = ThreadPoolExecutor(max_workers=32)
    with tempfile.TemporaryDirectory() as tmp:
        all_cases, to_close = cases(loop, Path(tmp), pool)
        rows = measure(all_cases, opts.number, opts.repeat, loop)
        for reg in to_close:
            reg.plugins.get("timeout").processes.shutdown()
    pool.shutdown()
    std = registry(backend=BACKEND)
    rows.append(
        Row("memory: tracemalloc peak per call, standard plugins", peak_bytes_per_call(lambda: std.call("add", ARGS)), "B", 724)
    )
    rows += startup_rows(opts.startup_runs)
    rows += scale_rows(tools)
    rows += ratios(rows)
    close(loop)
    loop.close()

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    header = (
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, load {load:.2f}; --number {opts.number} --repeat {opts.repeat}, "
        f"{tools:,} tools; {time.perf_counter() - began:.0f} s"
    )
    print(header)
    print(render(rows))
    if opts.markdown:
        opts.markdown.write_text(f"{header}\n\n{render(rows, markdown=True)}\n")


if __name__ == "__main__":
    main()
