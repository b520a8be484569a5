"""Review 30: the concurrency cap's ``max_wait`` is time, not polls; process mode refuses, when a tool is
added, a function no worker could import by its name."""

from __future__ import annotations

import asyncio
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

from harness_one import Call, ManualClock, ToolBusy, ToolDefinitionError, ToolRegistry, hookimpl
from harness_one_plugins import ConcurrencyPlugin, TimeoutPlugin


class _Overrunning(ManualClock):
    """Each sleep lasts half a second longer than asked (an event loop busy with other tasks, threads
    holding the GIL)."""

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds + 0.5)


def _held(registry: ToolRegistry, plugin: ConcurrencyPlugin, clock: ManualClock) -> None:
    """A tool ``work`` capped at one call at once, its slot taken by another holder."""

    def work() -> str:
        """Work."""
        return "ran"

    registry.add(work, max_concurrency=1)
    plugin.slots.acquire("work", "another", cap=1, total=None, now=clock.now(), lease=30.0)


@pytest.mark.parametrize("how", ["call", "acall"])
def test_max_wait_is_timed_not_counted_in_polls(how: str) -> None:
    """Polls of 0.25 s that each last 0.75 s: the wait ends by ``max_wait`` (2 s), after 3 polls
    (it took 8, 6 s, when ``max_wait`` counted polls)."""
    clock = _Overrunning()
    plugin = ConcurrencyPlugin(max_wait=2.0, poll=0.25)
    registry = ToolRegistry(autoload=False, clock=clock, plugins={"concurrency": plugin})
    _held(registry, plugin, clock)
    with pytest.raises(ToolBusy) as err:
        if how == "call":
            registry.call("work")
        else:
            asyncio.run(asyncio.wait_for(registry.acall("work"), 10))
    assert err.value.retry_after is None  # the wait is spent
    assert clock.sleeps == [0.75] * 3 and clock.now() == 2.25


def test_max_wait_uses_the_plugins_own_clock() -> None:
    """The plugin's clock, when given, times the wait (not the registry's)."""
    mine, registry_clock = ManualClock(), ManualClock()
    plugin = ConcurrencyPlugin(max_wait=2.0, poll=0.25, clock=mine)
    registry = ToolRegistry(autoload=False, clock=registry_clock, plugins={"concurrency": plugin})
    _held(registry, plugin, mine)

    class Slow:  # each refusal takes a second of the plugin's clock before the cap's on_error judges it
        name = "slow"

        @hookimpl(tryfirst=True)
        def harness_on_error(self, call: Call, error: BaseException) -> None:
            mine.advance(1.0)

    registry.plugins.register(Slow())
    with pytest.raises(ToolBusy):
        registry.call("work")
    # refused at 1 (the wait runs from there), 2 (1 + 0.25 <= 2: poll), 3 (2 + 0.25 > 2: stands)
    assert registry_clock.sleeps == [0.25, 0.25] and mine.now() == 3.0


def test_max_wait_still_ends_when_the_plugins_clock_does_not_move() -> None:
    """A clock of the plugin's that no sleep moves: the polls slept still end the wait (no endless wait)."""
    frozen, registry_clock = ManualClock(), ManualClock()
    plugin = ConcurrencyPlugin(max_wait=2.0, poll=0.25, clock=frozen)
    registry = ToolRegistry(autoload=False, clock=registry_clock, plugins={"concurrency": plugin})
    _held(registry, plugin, frozen)
    with pytest.raises(ToolBusy):
        registry.call("work")
    assert registry_clock.sleeps == [0.25] * 8 and frozen.now() == 0.0


def _closure() -> Callable[[int], int]:
    def inner(x: int) -> int:
        """Add one."""
        return x + 1

    return inner


def module_level(x: int) -> int:
    """Add one."""
    return x + 1


_PROCESS = "process mode needs a function a worker can import by its module and name, and this is"


@pytest.mark.parametrize(
    ("fn", "what"),
    [(_closure(), r"a function defined inside another \(_closure\.<locals>\.inner\)"), (lambda x: x, "a lambda")],
)
@pytest.mark.parametrize(
    ("plugin", "definition"),
    [
        ({"mode": "process", "default": 2}, {}),  # timed by the plugin's default, in its mode
        ({"mode": "process"}, {"timeout": 2}),  # the tool's own timeout, the plugin's mode
        ({}, {"timeout_mode": "process"}),  # the tool asks for a worker itself, untimed
        ({"mode": "process"}, {"options": {"memory_limit": 2**30}}),  # a memory limit under process mode
    ],
)
def test_process_mode_refuses_a_function_no_worker_can_import(
    fn: Callable[..., Any], what: str, plugin: dict[str, Any], definition: dict[str, Any]
) -> None:
    registry = ToolRegistry(autoload=False, plugins={"timeout": TimeoutPlugin(**plugin)})
    with pytest.raises(ToolDefinitionError, match=f"{_PROCESS} {what}; define it at module level"):
        registry.add(fn, name="t", description="d", **definition)
    assert "t" not in registry


@pytest.mark.parametrize(
    ("plugin", "definition"),
    [
        ({"mode": "process", "default": 2}, {"timeout_mode": "thread"}),  # runs in a thread
        ({"mode": "process", "default": 2}, {"timeout_mode": "none"}),  # in the caller's thread
        ({"mode": "thread", "default": 2}, {}),
        ({"mode": "process"}, {}),  # untimed: in the caller's process
    ],
)
def test_a_closure_outside_a_worker_is_accepted(plugin: dict[str, Any], definition: dict[str, Any]) -> None:
    registry = ToolRegistry(autoload=False, plugins={"timeout": TimeoutPlugin(**plugin)})
    registry.add(_closure(), name="t", **definition)
    assert registry.call("t", {"x": 1}) == 2


def test_async_closures_and_importable_functions_are_accepted() -> None:
    """An async tool never runs in a worker; a module-level function is found by its name, also one
    ``@registry.add`` adds before its module holds it (checked only when called)."""
    registry = ToolRegistry(autoload=False, plugins={"timeout": TimeoutPlugin(mode="process", default=2)})

    async def nested() -> int:
        """One."""
        return 1

    registry.add(nested)
    registry.add(module_level)
    module = types.ModuleType("harness_one_review30_late")
    module.registry = registry  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        exec("@registry.add\ndef late(x: int) -> int:\n    '''Late.'''\n    return x\n", module.__dict__)
    finally:
        del sys.modules[module.__name__]
    assert {"nested", "module_level", "late"} <= set(registry.names())


def test_a_retrys_wait_for_a_slot_is_timed_from_its_own_first_refusal() -> None:
    """The first attempt waited one poll, ran 2 s and failed; its retry, refused by the cap, got no wait at all when
    the wait was timed from the call's first refusal (the run counted as time waited for a slot)."""
    from harness_one_plugins import RetryPlugin
    from harness_one_plugins.retry import set_testing

    plugin = ConcurrencyPlugin(max_wait=1.0, poll=0.25)

    class Clock(ManualClock):
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            if len(self.sleeps) in (1, 3):  # the first poll of each attempt: the other holder is done by then
                plugin.slots.release("work", "another")

    clock = Clock()
    registry = ToolRegistry(autoload=False, clock=clock, plugins={"concurrency": plugin, "retry": RetryPlugin()})
    runs: list[float] = []

    def work() -> str:
        """Work."""
        runs.append(clock.now())
        if len(runs) == 1:
            clock.advance(2.0)  # a slow run, during which another holder takes the slot
            plugin.slots.acquire("work", "another", cap=None, total=None, now=clock.now(), lease=30.0)
            raise RuntimeError("transient")
        return "ran"

    registry.add(work, max_concurrency=1, retry={"attempts": 2, "on": (RuntimeError,), "rerun_non_idempotent": True})
    plugin.slots.acquire("work", "another", cap=1, total=None, now=clock.now(), lease=30.0)
    set_testing(True)  # no backoff: the retry starts at once
    try:
        assert registry.call("work") == "ran"
    finally:
        set_testing(False)
    assert runs == [0.25, 2.5] and clock.sleeps == [0.25, 0.0, 0.25]


def test_a_cache_hit_on_a_later_attempt_does_not_store_the_entry_again() -> None:
    """A miss on attempt 1, then a hit on the retry (another caller filled the cache meanwhile): the hit was stored
    again at its time, its ttl started over, and a result made at t=100 was served at t=115 under ttl=10."""
    from harness_one import RateLimitExceeded
    from harness_one_plugins import CachePlugin, RetryPlugin

    clock = ManualClock(100.0)
    made: list[float] = []

    class Gate:
        """After the cache: refuses A's first attempt, while B fills the cache."""

        order = 80
        armed = True

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            if call.context.get("who") == "A" and self.armed:
                self.armed = False
                registry.call("price", {"sku": "x"}, context={"who": "B"})
                raise RateLimitExceeded("rate limited", retry_after=9, tool=call.tool.name, call_id=call.call_id)

    plugins = {"retry": RetryPlugin(default={"attempts": 3}), "gate": Gate(), "cache": CachePlugin(ttl=10)}
    registry = ToolRegistry(clock=clock, plugins=plugins, autoload=False)

    def price(sku: str) -> str:
        made.append(clock.now())
        return f"made at {clock.now()}"

    registry.add(price, read_only=True)
    assert registry.call("price", {"sku": "x"}, context={"who": "A"}) == "made at 100.0"  # B's, a hit on A's retry
    assert clock.now() == 109.0
    clock.advance(6.0)
    assert registry.call("price", {"sku": "x"}, context={"who": "C"}) == "made at 115.0"  # expired at 110: runs again
    assert made == [100.0, 115.0]


def test_an_idempotency_key_reused_with_other_arguments_that_are_not_json_is_a_mismatch() -> None:
    """Compared by repr, two SecretStr of different cards matched ('**********'): the second card got the first's receipt."""
    from pydantic import SecretStr

    from harness_one import IdempotencyKeyMismatch
    from harness_one_plugins import IdempotencyPlugin

    registry = ToolRegistry(autoload=False, plugins={"idempotency": IdempotencyPlugin()})
    charged: list[str] = []

    def charge(card: Any, amount: int) -> str:
        charged.append(card.get_secret_value()[-4:])
        return f"charged {charged[-1]}"

    registry.add(charge, parameters={"type": "object", "properties": {"card": {}, "amount": {"type": "integer"}}})
    first = {"card": SecretStr("4111111111111111"), "amount": 5}
    assert registry.call("charge", first, idempotency_key="order-7") == "charged 1111"
    assert (
        registry.call("charge", {"card": SecretStr("4111111111111111"), "amount": 5}, idempotency_key="order-7") == "charged 1111"
    )
    with pytest.raises(IdempotencyKeyMismatch):
        registry.call("charge", {"card": SecretStr("5500000000000004"), "amount": 5}, idempotency_key="order-7")
    assert charged == ["1111"]  # replayed once, the other card refused


def test_the_sqlite_idempotency_file_is_its_owners_only(tmp_path: Any) -> None:
    import os
    import stat

    from harness_one_plugins import IdempotencyPlugin

    path = tmp_path / "new" / "idem.db"
    registry = ToolRegistry(autoload=False, plugins={"idempotency": IdempotencyPlugin(path=str(path))})
    registry.add(lambda: {"api_token": "sk-live"}, name="mint", parameters={"type": "object", "properties": {}})
    registry.call("mint", idempotency_key="k")
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    for name in ("idem.db", "idem.db-wal", "idem.db-shm"):
        assert stat.S_IMODE(os.stat(path.parent / name).st_mode) == 0o600, name


class _Jumping:
    """A clock that moves a second at every reading: the listing's budget is spent at once."""

    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        self.time += 1.0
        return self.time


_EXPRESSION = {
    "type": "object",
    "$defs": {
        "e": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"args": {"type": "array", "items": {"$ref": "#/$defs/e"}}, "op": {"const": "add"}},
                },
                {
                    "type": "object",
                    "properties": {"args": {"type": "array", "items": {"$ref": "#/$defs/e"}}, "op": {"const": "mul"}},
                },
                {"type": "integer"},
            ]
        }
    },
    "properties": {"expr": {"$ref": "#/$defs/e"}},
    "required": ["expr"],
}


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_a_refusal_out_of_time_does_not_walk_a_recursive_tree_of_alternatives(backend: str) -> None:
    """Two alternatives per level: the first error's tree doubles with each level (2**14 here, a few seconds and
    growing 2x per level: 64 levels are allowed). Out of time, the refusal says so instead of naming the place."""
    from harness_one_plugins.validation import LISTING_BUDGET, compile_schema

    value: Any = "x"
    for _ in range(14):
        value = {"args": [value], "op": "mul"}
    found = compile_schema(_EXPRESSION, backend).problems({"expr": value}, _Jumping())
    assert [(p.path, p.keyword) for p in found] == [("$", "limits")]
    assert found[0].message.startswith(
        f"arguments do not match the schema; finding where took longer than {LISTING_BUDGET * 1000:g} ms"
    )


def test_a_schema_of_alternatives_that_does_not_recurse_still_names_the_place_out_of_time() -> None:
    from harness_one_plugins.validation import compile_schema

    schema = {
        "type": "object",
        "$defs": {"A": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}},
        "properties": {"a": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}},
    }
    found = [p for p in compile_schema(schema, "rust").problems({"a": {"zip": "1"}}, _Jumping()) if not p.is_listing_cut]
    assert [p.path for p in found] == ["$.a.zip"]


def test_equal_arguments_that_are_not_json_still_replay_whatever_their_order_spelling_or_fields_set() -> None:
    """A digest of the whole pickle (briefly) made equal calls mismatch: key order, 5.0 for 5, a pydantic model with a
    default given or left out (its fields_set), a set's order under another hash seed."""
    import datetime

    from pydantic import BaseModel

    from harness_one_plugins import IdempotencyPlugin

    class Card(BaseModel):
        holder: str
        country: str = "US"

    registry = ToolRegistry(autoload=False, plugins={"idempotency": IdempotencyPlugin()})
    runs: list[Any] = []
    registry.add(lambda **kw: runs.append(kw) or len(runs), name="charge", parameters={"type": "object"})
    day = datetime.date(2026, 1, 1)
    assert registry.call("charge", {"card": Card(holder="A"), "on": day, "amount": 5}, idempotency_key="k") == 1
    assert registry.call("charge", {"amount": 5.0, "on": day, "card": Card(holder="A", country="US")}, idempotency_key="k") == 1
    assert len(runs) == 1


def test_an_approval_is_for_the_secret_it_was_asked_with() -> None:
    from pydantic import SecretStr

    from harness_one_plugins.approval import ApprovalConflict, ApprovalPlugin, ApprovalRequired

    registry = ToolRegistry(autoload=False, plugins={"approval": ApprovalPlugin()})
    charged: list[str] = []
    registry.add(
        lambda card: charged.append(card.get_secret_value()[-4:]) or "ok",
        name="charge",
        parameters={"type": "object", "properties": {"card": {}}},
        options={"requires_approval": True},
    )
    with pytest.raises(ApprovalRequired):
        registry.call("charge", {"card": SecretStr("4111111111111111")}, call_id="c1")
    registry.plugins.get("approval").approve("c1")
    with pytest.raises(ApprovalConflict):
        registry.call("charge", {"card": SecretStr("5500000000000004")}, call_id="c1")
    assert registry.call("charge", {"card": SecretStr("4111111111111111")}, call_id="c1") == "ok"
    assert charged == ["1111"]


def test_a_long_chain_of_refs_under_alternatives_is_refused_as_arguments_not_as_a_broken_plugin() -> None:
    """Telling whether alternatives recurse followed each $ref by recursion: a chain of 1,200 raised RecursionError,
    the plugin's internal error, where the arguments' refusal belongs."""
    from harness_one_plugins.validation import compile_schema

    n = 1200
    defs: dict[str, Any] = {f"d{i}": {"type": "object", "properties": {"n": {"$ref": f"#/$defs/d{i + 1}"}}} for i in range(n)}
    defs[f"d{n}"] = {"type": "integer"}
    schema = {"type": "object", "$defs": defs, "properties": {"x": {"anyOf": [{"$ref": "#/$defs/d0"}, {"type": "null"}]}}}
    for backend in ("rust", "python"):
        found = compile_schema(schema, backend).problems({"x": "str"}, _Jumping())
        assert found and all(p.keyword in ("limits", "anyOf", "type") for p in found), found


def test_fingerprints_tell_apart_what_a_repr_hides_and_agree_on_equal_sets_in_any_process() -> None:
    import dataclasses
    import subprocess
    import sys

    from pydantic import BaseModel, Field, SecretStr

    from harness_one import fingerprint

    @dataclasses.dataclass
    class Card:
        number: SecretStr

    class Client(BaseModel):
        name: str
        api_key: str = Field(exclude=True, repr=False)

    assert fingerprint({"c": Card(SecretStr("4111"))}) != fingerprint({"c": Card(SecretStr("5500"))})
    assert fingerprint({"c": Card(SecretStr("4111"))}) == fingerprint({"c": Card(SecretStr("4111"))})
    assert fingerprint({"c": Client(name="a", api_key="A")}) != fingerprint({"c": Client(name="a", api_key="B")})
    assert fingerprint({1: SecretStr("a"), "k": 1}) != fingerprint({1: SecretStr("b"), "k": 1})  # keys of mixed types
    script = "from harness_one import fingerprint; print(fingerprint({'tags': {'alpha', 'beta', 'gamma', 'delta'}}))"
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(digests) == 1
