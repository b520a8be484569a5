"""Per-call cost of harness-one beside a bare call and the seed's reference implementation.

Run with ``make bench``. Prints microseconds per call (best of several repeats) for:
a bare function call; ``ToolRegistry.call`` with no plugins; with four no-op plugins on all
four hooks; with the standard plugins (validation, a rate limit that never trips, logging
at its default level, metrics) on each validation backend; and the seed's section-8 sketch.
"""

from __future__ import annotations

import argparse
import threading
import time
import timeit
from collections.abc import Callable
from typing import Any, ClassVar

import jsonschema

from harness_one import Call, ToolRegistry, hookimpl
from harness_one_plugins import ValidationPlugin
from harness_one_plugins.validation import rust_available

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}
ARGS = {"a": 5, "b": 3}
NEVER_TRIPS = {"rate": 1e9, "burst": 1e9}


def add(a: float, b: float) -> float:
    return a + b


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


# --- measurement -------------------------------------------------------------------------


def per_call_us(fn: Callable[[], Any], number: int, repeat: int) -> float:
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def registry(**kwargs: Any) -> ToolRegistry:
    reg = ToolRegistry(autoload=False, **kwargs)
    reg.add(add, name="add", description="Adds two numbers", parameters=SCHEMA, rate_limit=NEVER_TRIPS)
    return reg


def policy_rows(n: int, r: int) -> list[tuple[str, float, int]]:
    """What each resilience policy adds when it does not trip (standard plugins, best backend)."""
    import tempfile
    from pathlib import Path

    from harness_one_plugins import IdempotencyPlugin, SQLiteStore

    backend = "rust" if rust_available() else "python"
    policies: list[tuple[str, dict[str, Any]]] = [
        ("timeout=10, thread mode (a thread hop)", {"timeout": 10}),
        ("timeout=10, mode none (advisory deadline)", {"timeout": 10, "timeout_mode": "none"}),
        ("retry policy, no failure", {"retry": 3}),
        ("max_concurrency=8", {"max_concurrency": 8}),
        ("circuit_breaker", {"circuit_breaker": True}),
        ("read_only + cache_ttl, cache hit", {"read_only": True, "cache_ttl": 60}),
    ]
    rows = []
    for label, policy in policies:
        reg = ToolRegistry(autoload=False, plugins={"validation": ValidationPlugin(backend=backend)})
        reg.add(add, name="add", parameters=SCHEMA, rate_limit=NEVER_TRIPS, **policy)
        count = n // 40 if "thread" in label else n // 4
        rows.append((f"  + {label}", per_call_us(lambda reg=reg: reg.call("add", ARGS), count, r), count))
    with tempfile.TemporaryDirectory() as tmp:
        stores = [("memory", None), ("SQLite", SQLiteStore(Path(tmp) / "bench.sqlite3"))]
        for label, store in stores:
            reg = ToolRegistry(
                autoload=False,
                plugins={"validation": ValidationPlugin(backend=backend), "idempotency": IdempotencyPlugin(store=store)},
            )
            reg.add(add, name="add", parameters=SCHEMA, rate_limit=NEVER_TRIPS)
            keys = iter(range(10**9))
            count = n // 40 if store is not None else n // 4
            rows.append(
                (
                    f"  + idempotency key, new key each call, {label}",
                    per_call_us(lambda reg=reg, keys=keys: reg.call("add", ARGS, idempotency_key=str(next(keys))), count, r),
                    count,
                )
            )
            reg.call("add", ARGS, idempotency_key="same")
            rows.append(
                (
                    f"  + idempotency key, replay, {label}",
                    per_call_us(lambda reg=reg: reg.call("add", ARGS, idempotency_key="same"), count, r),
                    count,
                )
            )
    return rows


def peer_rows(n: int, r: int) -> list[tuple[str, float, int]]:
    """Peers measured in the same run, when installed (the dev set-up installs langchain-core)."""
    rows = []
    try:
        from langchain_core.tools import StructuredTool
    except ImportError:
        return rows
    structured = StructuredTool.from_function(add, name="add", description="Adds two numbers")
    rows.append(("peer: langchain-core StructuredTool.invoke", per_call_us(lambda: structured.invoke(ARGS), n // 10, r), n // 10))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    opts = parser.parse_args()
    n, r = opts.number, opts.repeat

    bare = registry(standard_plugins=False)
    noop = registry(standard_plugins=False, plugins={f"noop{i}": NoOp() for i in range(4)})
    std_py = registry(plugins={"validation": ValidationPlugin(backend="python")})
    std_rs = registry(plugins={"validation": ValidationPlugin(backend="rust")}) if rust_available() else None
    ToolRegistry.set_default(bare)
    SeedRegistry._tools["add"] = SeedTool("add", "Adds two numbers", SCHEMA, add, NEVER_TRIPS)

    rows: list[tuple[str, float, int]] = []
    base = per_call_us(lambda: add(a=5, b=3), n * 10, r)
    rows.append(("bare call add(a=5, b=3)", base, n * 10))
    rows.append(("ToolRegistry.call, no plugins (class-level)", per_call_us(lambda: ToolRegistry.call("add", ARGS), n, r), n))
    rows.append(("registry.call, no plugins (instance)", per_call_us(lambda: bare.call("add", ARGS), n, r), n))
    rows.append(("registry.call, 4 no-op plugins x 4 hooks", per_call_us(lambda: noop.call("add", ARGS), n, r), n))
    rows.append(("registry.call, standard plugins, python", per_call_us(lambda: std_py.call("add", ARGS), n // 4, r), n // 4))
    if std_rs is not None:
        rows.append(("registry.call, standard plugins, jsonschema-rs", per_call_us(lambda: std_rs.call("add", ARGS), n, r), n))
    rows.append(
        (
            "registry.try_call, standard plugins, best backend",
            per_call_us(lambda: (std_rs or std_py).try_call("add", ARGS), n // 4, r),
            n // 4,
        )
    )
    rows.extend(policy_rows(n, r))
    rows.extend(peer_rows(n, r))
    seed_n = max(200, n // 100)
    rows.append(("seed reference (section 8)", per_call_us(lambda: SeedRegistry.call("add", ARGS), seed_n, 3), seed_n))

    print(f"{'what':<52} {'us/call':>9} {'overhead':>9} {'calls':>8}")
    for label, us, calls in rows:
        print(f"{label:<52} {us:>9.2f} {us - base:>9.2f} {calls:>8}")


if __name__ == "__main__":
    main()
