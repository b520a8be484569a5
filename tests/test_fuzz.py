"""Fuzzing the registry and the agent loop with every standard plugin on, as a hostile model would.

A fixed seed and a small budget keep CI fast; ``make fuzz`` runs the same properties with
``HARNESS_ONE_FUZZ_EXAMPLES`` (default 20,000) and prints the figures.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
from collections import Counter
from typing import Any, Literal

import pytest
import structlog
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from harness_one import ToolArgumentError, ToolError, ToolRegistry, defineTool
from harness_one._cli.loop import Loop, serve_lines

EXAMPLES = int(os.environ.get("HARNESS_ONE_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
STATS: Counter[str] = Counter()


def build_registry() -> ToolRegistry:
    reg = ToolRegistry(autoload=False, state="memory:", plugin_options={"logging": {"log_arguments": True}})

    @defineTool(registry=reg, idempotent=True)
    def echo(text: str = "", count: int = 0, ratio: float = 0.5) -> dict[str, Any]:
        """Return what it was given.

        Args:
            text: Any text.
            count: Any integer.
            ratio: Any number.
        """
        return {"text": text, "count": count, "ratio": ratio}

    @defineTool(registry=reg)
    def order(item: Literal["tea", "coffee"], tags: list[str], address: dict[str, str] | None = None) -> str:
        """Order a drink.

        Args:
            item: What to order.
            tags: Labels.
            address: Where to send it.
        """
        return f"{item} {len(tags)}"

    @defineTool(
        registry=reg,
        parameters={
            "type": "object",
            "properties": {
                "email": {"type": "string", "format": "email", "pattern": "^[^@]+@[^@]+$"},
                "when": {"type": "string", "format": "date-time"},
                "items": {"type": "array", "maxItems": 3, "items": {"type": "integer", "minimum": 0}},
            },
            "required": ["email"],
            "additionalProperties": False,
        },
    )
    def notify(**kwargs: Any) -> str:
        """Send a notification."""
        return "sent"

    @defineTool(registry=reg)
    def explode(message: str = "") -> str:
        """Always fails.

        Args:
            message: The failure's message.
        """
        raise RuntimeError(message)

    for name, args in [("echo", {}), ("order", {"item": "tea", "tags": []}), ("notify", {"email": "a@b"})]:
        reg.call(name, args)  # validators compile on first use: time refusals, not compilation
    return reg


REGISTRY = build_registry()
SLOWEST: dict[str, Any] = {"us": 0, "call": ""}
REFUSALS: list[int] = []
NAMES = ["echo", "order", "notify", "explode", "ech", "", "\ud800", "a" * 300]

text = st.text(st.characters(codec=None, categories=None), max_size=40) | st.sampled_from(
    ["\ud800", "a\udfffb", "tea", "coffee", "x@y", "2026-12-03T10:00:00Z", "(a|a)+!" * 3]
)
huge = st.sampled_from([5000, 4400]).map(lambda n: 10**n) | st.just(4400).map(lambda n: -(10**n))
numbers = st.integers() | st.floats() | huge | st.sampled_from([2.0, float("nan"), float("inf")])
scalars = st.none() | st.booleans() | numbers | text
json_values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(text, c, max_size=4), max_leaves=20)
odd_values = st.recursive(
    json_values | st.binary(max_size=8) | st.just(object()) | st.just(Ellipsis),
    lambda c: (
        st.lists(c, max_size=3).map(tuple)
        | st.frozensets(st.integers(), max_size=3)
        | st.dictionaries(st.integers() | text, c, max_size=3)
    ),
    max_leaves=10,
)


def as_json(value: Any) -> str:
    """``value`` as JSON text; one holding an integer too long for ``repr`` becomes such an integer's text."""
    try:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, allow_nan=True, default=repr)
    except ValueError:
        return '{"count": ' + "9" * 5000 + "}"


keys = st.sampled_from(["text", "count", "ratio", "item", "tags", "address", "email", "when", "items"]) | text
arguments = (
    st.dictionaries(keys, json_values, max_size=5)
    | st.dictionaries(keys, odd_values, max_size=3)
    | json_values
    | odd_values
    | st.binary(max_size=40)
    | json_values.map(as_json)
)


def check_error(exc: BaseException) -> None:
    """An error the model can read: a ToolError, and an argument error names each field and what was expected."""
    assert isinstance(exc, ToolError), f"{type(exc).__name__}: {exc}"
    json.dumps(exc.to_dict(), allow_nan=False)
    if isinstance(exc, ToolArgumentError):
        unnamed = [p for p in exc.problems if not p.path or not p.expected]
        STATS["errors naming no field"] += bool(unnamed)
        assert not unnamed, exc.to_dict()


@seed(20261203)
@FUZZ
@given(name=st.sampled_from(NAMES), args=arguments, key=st.none() | text | st.integers())
def test_registry_lets_only_tool_errors_out(name: str, args: Any, key: Any) -> None:
    STATS["calls tried"] += 1
    started = time.perf_counter()
    with structlog.testing.capture_logs():
        try:
            REGISTRY.call(name, args, idempotency_key=key)
        except ToolError as exc:
            check_error(exc)
            took = int((time.perf_counter() - started) * 1e6)
            REFUSALS.append(took)
            if took > SLOWEST["us"]:
                SLOWEST.update(us=took, call=f"{name!r} {type(exc).__name__} {str(exc)[:200]!r}")
        except BaseException as exc:
            STATS["non-ToolError exceptions"] += 1
            raise AssertionError(f"{type(exc).__name__} escaped: {exc}") from exc
        result = REGISTRY.try_call(name, args)
    assert result.ok or isinstance(result.error, ToolError)


def strict(line: bytes) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    return json.loads(line.decode("utf-8"), parse_constant=refuse)


request_lines = st.builds(
    lambda rid, name, args: as_json({"id": rid, "name": name, "arguments": args}),
    st.none() | st.integers() | text,
    st.sampled_from(NAMES),
    st.dictionaries(keys, json_values, max_size=4) | json_values,
).map(lambda s: s.encode("utf-8", "surrogatepass"))
lines = st.lists(
    request_lines | st.binary(max_size=60).filter(lambda b: b"\n" not in b and b"\r" not in b), min_size=1, max_size=12
)


@seed(20261203)
@FUZZ
@given(batch=lines, concurrency=st.sampled_from([1, 8]))
def test_the_loop_answers_every_line_exactly_once(batch: list[bytes], concurrency: int) -> None:
    out = io.BytesIO()
    loop = Loop(REGISTRY, out)
    with structlog.testing.capture_logs():
        asyncio.run(serve_lines(loop, io.BytesIO(b"\n".join(batch) + b"\n"), concurrency, 1 << 16))
    sent = sum(1 for line in batch if line.strip())
    answers = [strict(line) for line in out.getvalue().splitlines()]
    STATS[f"lines sent (concurrency {concurrency})"] += sent
    STATS[f"lines answered (concurrency {concurrency})"] += len(answers)
    assert loop.broken is None and len(answers) == sent == loop.requests == loop.answered


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Any:
    yield
    if os.environ.get("HARNESS_ONE_FUZZ_EXAMPLES"):
        REFUSALS.sort()
        spread = (
            {f"refusal p{q} us": REFUSALS[min(len(REFUSALS) - 1, len(REFUSALS) * q // 100)] for q in (50, 99)} if REFUSALS else {}
        )
        print("\nfuzz figures:", json.dumps({**dict(sorted(STATS.items())), **spread, "slowest refusal": SLOWEST}, indent=2))
