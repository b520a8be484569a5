"""Fuzzing the registry and the agent loop with every standard plugin on, as a hostile model would.

The loop's sessions include a tool that needs approval and decision lines (valid, on unknown
ids, malformed), in both concurrency modes, through the real ``run`` command. Payloads near the
default payload limit (256 KiB) are refused and timed. A fixed seed and a small budget keep CI fast; ``make fuzz``
runs the same properties with ``HARNESS_ONE_FUZZ_EXAMPLES`` (default 20,000) and prints the
figures: calls tried, non-ToolError exceptions, errors naming no field, lines answered of lines
sent per mode, and the slowest refusals with what caused them.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import time
from collections import Counter
from typing import Any, Literal

import pytest
import structlog
from approval_tools import transfer
from click.testing import CliRunner
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from harness_one import ArgumentLimits, ToolArgumentError, ToolError, ToolRegistry, defineTool
from harness_one._cli._main import CliState
from harness_one._cli.loop import run
from harness_one._config import Settings
from harness_one._render import dumps

EXAMPLES = int(os.environ.get("HARNESS_ONE_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
STATS: Counter[str] = Counter({"non-ToolError exceptions": 0, "errors naming no field": 0})
REPEAT = 5 if "HARNESS_ONE_FUZZ_EXAMPLES" in os.environ else 1  # timed refusals of each large payload


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

    reg.add(transfer)  # more than 100 needs approval
    for name, args in [
        ("echo", {}),
        ("order", {"item": "tea", "tags": []}),
        ("notify", {"email": "a@b"}),
        ("transfer", {"to": "a", "amount": 1}),
    ]:
        reg.call(name, args)  # validators compile on first use: time refusals, not compilation
    return reg


REGISTRY = build_registry()
# The slowest refusal of the fuzzed calls and of the large payloads, with what was sent.
SLOWEST: dict[str, dict[str, Any]] = {"fuzzed": {"ms": 0.0, "call": ""}, "large payloads": {"ms": 0.0, "call": ""}}
REFUSALS: list[float] = []  # ms, the fuzzed calls'
PAYLOAD_MS: dict[str, float] = {}  # ms, the slowest of the timed refusals of each large payload
NAMES = ["echo", "order", "notify", "explode", "transfer", "ech", "", "\ud800", "a" * 300]

text = st.text(st.characters(codec=None, categories=None), max_size=40) | st.sampled_from(
    ["\ud800", "a\udfffb", "tea", "coffee", "x@y", "2026-12-03T10:00:00Z", "(a|a)+!" * 3]
)
huge = st.sampled_from([5000, 4400, 400]).map(lambda n: 10**n) | st.just(4400).map(lambda n: -(10**n))
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
        # "$" with keyword "schema" is the fallback when no field could be found ("do not match the schema")
        unnamed = [p for p in exc.problems if not p.path or not p.expected or (p.path == "$" and p.keyword == "schema")]
        STATS["errors naming no field"] += bool(unnamed)
        assert not unnamed, exc.to_dict()


def timed_call(name: str, args: Any, key: Any = None, *, what: str = "") -> ToolError | None:
    """One call that must succeed or raise a readable ToolError (returned); a refusal's time is recorded with ``what`` was sent."""
    STATS["calls tried"] += 1
    started = time.perf_counter()
    try:
        REGISTRY.call(name, args, idempotency_key=key)
    except ToolError as exc:
        took = round((time.perf_counter() - started) * 1000, 3)
        slowest = SLOWEST["large payloads" if what else "fuzzed"]
        if what:
            PAYLOAD_MS[f"{name} {what}"] = max(took, PAYLOAD_MS.get(f"{name} {what}", 0.0))
        else:
            REFUSALS.append(took)
        if took > slowest["ms"]:
            sent = what or ascii(dumps(args))[:120]
            slowest.update(ms=took, call=f"{name!r} {sent} -> {type(exc).__name__} {ascii(str(exc))[:160]}")
        check_error(exc)
        return exc
    except BaseException as exc:
        STATS["non-ToolError exceptions"] += 1
        raise AssertionError(f"{type(exc).__name__} escaped: {exc}") from exc
    return None


@seed(20261203)
@FUZZ
@given(name=st.sampled_from(NAMES), args=arguments, key=st.none() | text | st.integers())
def test_registry_lets_only_tool_errors_out(name: str, args: Any, key: Any) -> None:
    with structlog.testing.capture_logs():
        timed_call(name, args, key)
        result = REGISTRY.try_call(name, args)
    assert result.ok or isinstance(result.error, ToolError)


def test_an_overflowing_number_in_json_text_is_refused_naming_its_field() -> None:
    """``1e400`` reads as infinity: the refusal names the field, as it does for ``float("inf")`` given in a dict."""
    for args in ('{"ratio": 1e400}', {"ratio": float("inf")}):
        with pytest.raises(ToolArgumentError) as caught:
            REGISTRY.call("echo", args)
        assert [(p.path, p.expected) for p in caught.value.problems] == [("$.ratio", "a finite number")]


def test_a_long_integer_in_a_tuple_is_refused_naming_its_field() -> None:
    """As in a list, the refusal names the item and the digit limit."""
    for args in ({"text": [10**5000]}, {"text": (10**5000,)}):
        with pytest.raises(ToolArgumentError) as caught:
            REGISTRY.call("echo", args)
        assert [(p.path, p.keyword) for p in caught.value.problems] == [("$.text[0]", "limits")]


def mixed(n: int) -> list[Any]:
    """``n`` mixed scalars: integers, floats, strings, nulls and booleans in turn."""
    kinds = (lambda i: i, lambda i: i / 7, lambda i: f"s{i}", lambda i: None, lambda i: i % 2 == 0)
    return [kinds[i % 5](i) for i in range(n)]


LIMIT = ArgumentLimits().max_bytes  # the default payload limit, 256 KiB


def under_limit(text: str, limit: int = LIMIT) -> str:
    """The JSON text of an object whose last member is long, cut between items to at most ``limit`` bytes."""
    closing = "]}" if text.endswith("]}") else "}"
    return text[: text.rindex(", ", 0, limit - len(closing))] + closing


def keys_under_limit(limit: int = LIMIT) -> dict[str, Any]:
    """``notify``'s arguments with as many unknown keys (each with an integer) as the size estimate allows."""
    args: dict[str, Any] = {"email": "a@b"}
    size = len("email") + len("a@b")
    for i in itertools.count():
        key = f"k{i}"
        if size + len(key) + 8 > limit:
            return args
        args[key] = i
        size += len(key) + 8
    raise AssertionError  # pragma: no cover


# (tool, what is sent, a builder of the arguments) near the 256 KiB payload limit: each is refused.
PAYLOADS: list[tuple[str, str, Any]] = [
    (
        "order",
        "JSON text just under 256 KiB, tags: mixed scalars",
        lambda: under_limit(json.dumps({"item": "tea", "tags": mixed(50_000)})),
    ),
    ("order", "JSON text, tags: 50,000 mixed scalars (over 256 KiB)", lambda: json.dumps({"item": "tea", "tags": mixed(50_000)})),
    # "item", "tea", "tags" and the list: 13 estimated bytes; None and True: 4 each
    (
        "order",
        "dict, tags: nulls and booleans just under 256 KiB",
        lambda: {"item": "tea", "tags": [None, True] * ((LIMIT - 13) // 8)},
    ),
    ("order", "dict, tags: 200,000 mixed scalars", lambda: {"item": "tea", "tags": mixed(200_000)}),
    ("order", "dict, tags: 200,000 integers", lambda: {"item": "tea", "tags": list(range(200_000))}),
    ("echo", "JSON array of 200,000 mixed scalars", lambda: json.dumps(mixed(200_000))),
    ("echo", "list of 200,000 mixed scalars", lambda: mixed(200_000)),
    (
        "notify",
        "JSON text just under 256 KiB, unknown keys",
        lambda: under_limit(json.dumps({"email": "a@b", **{f"k{i}": i for i in range(30_000)}})),
    ),
    ("notify", "dict, unknown keys just under 256 KiB", keys_under_limit),
    ("notify", "dict, 60,000 unknown keys", lambda: {"email": "a@b", **{f"k{i}": i for i in range(60_000)}}),
    (
        "echo",
        "JSON text, a text of 256 KiB - 40 bytes and a string count",
        lambda: json.dumps({"count": "x", "text": "a" * (LIMIT - 40)}),
    ),
    ("echo", "dict, a text of 256 KiB + 1 byte", lambda: {"text": "a" * (LIMIT + 1)}),
    ("echo", "JSON text, 100,000 nested arrays", lambda: "[" * 100_000 + "]" * 100_000),
    # Many small arrays and objects: each costs the parser and the walk, so their number is bounded too.
    (
        "order",
        "JSON text just under 256 KiB, tags: [0] items",
        lambda: under_limit(json.dumps({"item": "tea", "tags": [[0]] * 60_000})),
    ),
    (
        "order",
        "JSON text just under 256 KiB, tags: [[]] items",
        lambda: under_limit(json.dumps({"item": "tea", "tags": [[[]]] * 50_000})),
    ),
    ("order", "dict, tags: 100,000 empty lists and objects", lambda: {"item": "tea", "tags": [[], {}] * 50_000}),
]


@pytest.mark.parametrize("tool, what, build", PAYLOADS, ids=[what for _, what, _ in PAYLOADS])
def test_payloads_near_the_size_limit_are_refused_readably(tool: str, what: str, build: Any) -> None:
    args = build()
    for _ in range(REPEAT):
        with structlog.testing.capture_logs():
            assert timed_call(tool, args, what=what) is not None


def strict(line: bytes) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    return json.loads(line.decode("utf-8"), parse_constant=refuse)


# Random request lines call every tool but `transfer`, whose held calls the sessions below model.
request_lines = st.builds(
    lambda rid, name, args: as_json({"id": rid, "name": name, "arguments": args}),
    st.none() | st.integers() | text,
    st.sampled_from([name for name in NAMES if name != "transfer"]),
    st.dictionaries(keys, json_values, max_size=4) | json_values,
).map(lambda s: s.encode("utf-8", "surrogatepass"))

# The agent loop. A session mixes random lines with calls of `transfer` (held past 100) and
# decision lines on them. Ids of transfers are drawn from three slots made unique per session
# (a string, one with a lone surrogate, an integer), so that no call held by an earlier session
# is decided: a sequential model then says what each modelled line's answer is.
SESSIONS = itertools.count(1)
HELD_KINDS = {"approval_required", "approval_denied", "approval_not_found"}
slots = st.sampled_from(["s", "u", "i"])


def slot_id(slot: str, session: int) -> Any:
    return {"s": f"c-{session}", "u": f"\udfff-{session}", "i": session}[slot]


def shown(value: Any) -> Any:
    """A value as an answer shows it (the documented rule): a lone surrogate becomes U+FFFD, NaN and infinities strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value).replace("inf", "Infinity").replace("nan", "NaN")
    return re.sub("[\ud800-\udfff]", "\ufffd", value) if isinstance(value, str) else value


def weighted(*choices: tuple[st.SearchStrategy[Any], int]) -> st.SearchStrategy[Any]:
    """One of the strategies, each drawn as often as its weight says."""
    return st.sampled_from([s for s, weight in choices for _ in range(weight)]).flatmap(lambda s: s)


safe_json = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | text,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(text, c, max_size=3),
    max_leaves=8,
)
unknown = st.one_of(text.map(lambda t: "?" + t), st.integers(max_value=-1), st.sampled_from([0.5, float("inf"), float("nan")]))
# "@": the slot of the last transfer before the decision (half the time), else another slot or an unknown id
targets = st.tuples(st.integers(0, 3), slots, unknown).map(lambda t: "@" if t[0] < 2 else t[1] if t[0] == 2 else t[2])
held_amounts = st.sampled_from([500, 100.5, 1e308, 10**20])
transfers = st.tuples(
    st.just("transfer"),
    slots,
    weighted(
        (st.builds(lambda to, amount: ("held", {"to": to, "amount": amount}), text, held_amounts), 3),
        (st.builds(lambda to, amount: ("ok", {"to": to, "amount": amount}), text, st.sampled_from([5, 100, 0, -1e308])), 1),
        (
            st.sampled_from(
                [
                    {"amount": 500},
                    {"to": 5, "amount": 500},
                    {"to": "x", "amount": "500"},
                    {"to": "x", "amount": 500, "extra": 1},
                    {"to": "x", "amount": 10**400},  # the tool's rule fails: a PluginError naming the plugin
                ]
            ).map(lambda args: ("refused", args)),
            1,
        ),
    ),
)
decisions = st.tuples(
    st.just("decide"),
    st.sampled_from(["approve", "deny"]),
    targets,
    st.none() | text,
    st.dictionaries(st.sampled_from(["id", "note", "arguments"]), safe_json, max_size=2),
)
nests = st.sampled_from([200, 1000, 100_000])
malformed = st.tuples(
    st.just("malformed"),
    st.one_of(
        st.builds(lambda a, b: {"approve": a, "deny": b}, targets, targets),
        st.builds(lambda a: {"approve": a, "name": "transfer"}, targets),
        st.builds(lambda a, r: {"deny": a, "reason": r}, targets, safe_json.filter(lambda r: not isinstance(r, str | None))),
        st.builds(lambda t: {"approve": t}, st.sampled_from([None, True, "", [1], {"id": 1}])),
        nests.map(lambda n: '{"deny": "c0", "reason": ' + "[" * n + "]" * n + "}"),
        nests.map(lambda n: '{"approve": ' + '{"a":' * n + "1" + "}" * n + "}"),
        st.sampled_from([b'{"approve": "\xed\xa0\x80"}', b'{"deny": "c0", "reason": "\xff"}', b'["approve", 1]']),
    ),
)
generic = st.tuples(
    st.just("generic"), request_lines | st.binary(max_size=60).filter(lambda b: b"\n" not in b and b"\r" not in b)
)
sessions = st.lists(weighted((transfers, 3), (decisions, 3), (malformed, 1), (generic, 2)), min_size=1, max_size=12)


def render(item: tuple[Any, ...], session: int, last: str) -> tuple[bytes, Any]:
    """The line for one session item, and what the model expects of its answer (``None``: anything).

    ``last`` is the slot of the last transfer before it.
    """
    kind = item[0]
    if kind == "generic":
        request_line: bytes = item[1]
        return request_line, None
    if kind == "malformed":
        body = item[1]
        line = body if isinstance(body, bytes) else as_json(body)
        return line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass"), "invalid"
    if kind == "transfer":
        rid = slot_id(item[1], session)
        outcome, args = item[2]
        return json.dumps({"id": rid, "name": "transfer", "arguments": args}).encode(), (outcome, rid, args)
    verb, target, reason, extra = item[1:]
    target = last if target == "@" else target
    target = slot_id(target, session) if target in ("s", "u", "i") else target
    body = {**extra, verb: target} | ({} if reason is None else {"reason": reason})
    return json.dumps(body).encode(), (verb, target, reason)


def model(expected: list[Any]) -> list[Any]:
    """Per modelled line ``(id, kind)`` of its answer in a sequential run (``kind``: ok, refused, invalid, or an error kind)."""
    held: dict[str, tuple[Any, Any]] = {}  # call id -> the request's id and arguments
    spent: dict[str, Any] = {}  # call id -> the arguments of the call its decision was used for (within ttl), and the verb
    out: list[Any] = []
    for spec in expected:
        if spec is None or spec == "invalid":
            out.append(spec)
        elif spec[0] in ("held", "ok", "refused"):
            outcome, rid, args = spec
            if outcome == "held" and str(rid) in held and held[str(rid)][1] != args:
                STATS["held calls refused: their call id waits with other arguments"] += 1
                outcome = "refused"  # ApprovalConflict: a call id names one waiting call
            elif outcome == "held" and str(rid) in spent and spent[str(rid)][0] != args:
                STATS["held calls refused: their call id was decided for other arguments"] += 1
                outcome = "refused"  # ApprovalConflict: a repeated approve() must not approve another call
            elif outcome == "held" and str(rid) in spent:  # the same call again: its decision was used, not asked twice
                STATS["held calls refused: the same call's decision was used"] += 1
                outcome = "refused" if spent[str(rid)][1] == "approve" else "approval_denied"  # it ran / denied again
            elif outcome == "held":
                held[str(rid)] = (rid, args)
            out.append((shown(rid), "approval_required" if outcome == "held" else outcome))
        else:
            verb, target, _ = spec
            if isinstance(target, float) and not math.isfinite(target):  # no JSON number: no id to answer on
                out.append((None, "invalid"))
            elif str(target) in held:
                STATS["held calls approved" if verb == "approve" else "held calls denied"] += 1
                rid, args = held.pop(str(target))
                spent[str(target)] = (args, verb)
                out.append((shown(rid), "ok" if verb == "approve" else "approval_denied"))
            else:
                out.append((shown(target), "approval_not_found"))
    return out


def kind_of(answer: dict[str, Any]) -> str:
    error = answer.get("error") or {}
    if answer.get("ok"):
        return "ok"
    if error.get("type") == "InvalidRequest":
        return "invalid"
    return str(error.get("kind")) if error.get("kind") in HELD_KINDS else "refused"


RUNNER = CliRunner()
STATE = CliState(Settings(), [], _registry=REGISTRY)


@seed(20261203)
@FUZZ
@given(items=sessions, concurrency=st.sampled_from([1, 8]), fail_on_error=st.booleans())
def test_the_loop_answers_every_line_exactly_once(items: list[tuple[Any, ...]], concurrency: int, fail_on_error: bool) -> None:
    session = next(SESSIONS)
    last = "s"
    rendered = []
    for item in items:
        last = item[1] if item[0] == "transfer" else last
        rendered.append((item, *render(item, session, last)))
    batch = [line for _, line, _ in rendered]
    args = ["--concurrency", str(concurrency), *(["--fail-on-error"] if fail_on_error else [])]
    with structlog.testing.capture_logs():
        result = RUNNER.invoke(run, args, input=b"\n".join(batch) + b"\n", obj=STATE, catch_exceptions=False)
    rendered = [entry for entry in rendered if entry[1].strip()]  # blank lines are skipped
    answers = [strict(line) for line in result.stdout_bytes.splitlines()]
    mode = f"(concurrency {concurrency})"
    STATS[f"lines sent {mode}"] += len(rendered)
    STATS[f"lines answered {mode}"] += len(answers)
    STATS[f"decision lines sent {mode}"] += sum(item[0] in ("decide", "malformed") for item, _, _ in rendered)
    assert len(answers) == len(rendered), result.stderr
    errors = any(not a["ok"] and a["error"].get("kind") != "approval_required" for a in answers)
    assert result.exit_code == (1 if fail_on_error and errors else 0), result.stderr
    assert "NOT ANSWERED" not in result.stderr and "the loop failed" not in result.stderr

    wanted = model([spec for _, _, spec in rendered])
    got = [(a["id"], kind_of(a)) for a in answers]
    STATS.update(f"answers {kind}" for _, kind in got)
    if concurrency == 1:  # answers in order: each modelled line's answer is the model's
        for (item, _, _), want, (rid, kind) in zip(rendered, wanted, got, strict=True):
            if want is None:
                assert kind not in HELD_KINDS, (item, rid, kind)
            elif want == "invalid":
                assert kind == "invalid", (item, rid, kind)
            else:
                assert (rid, kind) == want, (item, rid, kind)
    # In any mode, the same calls are held and decided: the same approval answers, and as many transfers made.
    approvals = Counter(json.dumps(pair) for pair in got if pair[1] in HELD_KINDS)
    assert approvals == Counter(json.dumps(w) for w in wanted if isinstance(w, tuple) and w[1] in HELD_KINDS)
    made = sum(a["ok"] and str(a["result"]).startswith("sent ") for a in answers)
    assert made == sum(isinstance(w, tuple) and w[1] == "ok" for w in wanted)
    assert sum(kind == "invalid" for _, kind in got) >= wanted.count("invalid")


def test_the_loop_answers_lines_near_the_limit() -> None:
    """A line just under the loop's 512 KiB (twice the payload limit) is read and refused by the registry; one just over is an InvalidRequest."""
    call = {"id": 1, "name": "order", "arguments": {"item": "tea", "tags": mixed(50_000)}}
    under = json.dumps(call).encode()
    over = b'{"id": 2, "name": "order", "arguments": "' + b"a" * (2 * LIMIT) + b'"}'
    for line in (under, over):
        started = time.perf_counter()
        with structlog.testing.capture_logs():
            result = RUNNER.invoke(run, [], input=line + b"\n", obj=STATE, catch_exceptions=False)
        PAYLOAD_MS[f"run: a line of {len(line):,} bytes"] = round((time.perf_counter() - started) * 1000, 3)
        [answer] = [strict(out) for out in result.stdout_bytes.splitlines()]
        assert result.exit_code == 0 and answer["ok"] is False
        assert answer["error"]["type"] == ("ToolArgumentError" if line is under else "InvalidRequest"), answer
    assert LIMIT < len(under) < 2 * LIMIT < len(over)


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Any:
    """With ``HARNESS_ONE_FUZZ_EXAMPLES`` set (``make fuzz``), print the figures (shown with ``-s``)."""
    yield
    if os.environ.get("HARNESS_ONE_FUZZ_EXAMPLES"):
        REFUSALS.sort()
        at = [min(len(REFUSALS) - 1, len(REFUSALS) * q // 100) for q in (50, 99, 100)] if REFUSALS else []
        spread = {f"fuzzed refusal p{q} ms": REFUSALS[i] for q, i in zip((50, 99, 100), at, strict=False)}
        figures = {**dict(sorted(STATS.items())), **spread, "slowest refusal": SLOWEST}
        print("\nfuzz figures:", json.dumps({**figures, "large payloads ms": PAYLOAD_MS}, indent=1, ensure_ascii=True))
