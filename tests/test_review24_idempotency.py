"""Idempotency keys of retried calls: a refused retry keeps what an earlier attempt's tool did,
and attempts whose tools run on past their timeouts settle the key together."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness_one import (
    Call,
    IdempotencyConflict,
    RetryableError,
    ToolBusy,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    hookimpl,
)
from harness_one.state import new_token
from harness_one_plugins import IdempotencyPlugin, MemoryStore, SQLiteStore
from harness_one_plugins.idempotency import fingerprint

RETRY_TIMEOUTS = {"attempts": 3, "initial": 0, "timeouts": True}


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "redis":  # a store with awaitable twins: acall settles the key through them
        from harness_one.state import RedisLink, RedisStore

        return RedisStore(RedisLink(request.getfixturevalue("redis_url")))
    return MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "idem.sqlite3")


def registry(store: Any, **options: Any) -> ToolRegistry:
    return ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=store)}, autoload=False, **options)


class Runs:
    """A sync tool whose n-th run waits at its own gate (10 s at most), then returns or raises what
    ``ends[n]`` says (``"declined ..."`` raises that as an OSError)."""

    def __init__(self, *ends: str) -> None:
        self.ends = ends
        self.gates = [threading.Event() for _ in ends]
        self.entered = [threading.Event() for _ in ends]
        self.runs: list[int] = []
        self.lock = threading.Lock()

    def __call__(self) -> str:
        with self.lock:
            n = len(self.runs)
            self.runs.append(n + 1)
        self.entered[n].set()
        self.gates[n].wait(10)
        if self.ends[n].startswith("declined"):
            raise OSError(self.ends[n])
        return self.ends[n]


def replayed(reg: ToolRegistry, key: str) -> Any:
    """The key's outcome once a tool's thread has stored it (a conflict until then)."""
    for _ in range(2000):
        found = reg.try_call("charge", idempotency_key=key)
        if not isinstance(found.error, IdempotencyConflict):
            assert found.error is None or found.error.replayed, found.error
            return found.value if found.ok else found.error
        time.sleep(0.005)
    raise AssertionError("the key was never finished")


def held(store: Any, key: str) -> bool:
    """Whether ``key`` is claimed by a call still running, nothing stored for it yet (asked of the
    store: a keyed call would wait its conflict out through the tool's retry policy)."""
    found = store.begin("charge", key, fingerprint({}), time.time(), 60.0, owner=new_token())
    assert found is not None, "the key was free (and is now claimed by this check)"
    return found.state != "done"


@pytest.mark.parametrize("ends", ["charged", "declined"])
@pytest.mark.parametrize("limit", ["max_workers", "max_concurrency", "max_concurrency_acall"])
def test_a_retry_refused_while_the_first_attempt_runs_on_keeps_what_that_attempt_did(store: Any, limit: str, ends: str) -> None:
    """Attempt 1 timed out in its thread and ran on; the retry was refused (its one worker or slot
    still held by attempt 1), and that refusal was stored for the key: replayed for 24 h though the
    tool went on to charge."""
    if limit == "max_workers":
        reg = registry(store, plugin_options={"timeout": {"max_workers": 1}})
        options: dict[str, Any] = {}
        refusal = "Tool 'charge' cannot start: all 1 timeout workers are busy"
    else:
        reg = registry(store)
        options = {"max_concurrency": 1}
        refusal = "Tool 'charge' is busy (1 running, its limit at once). Try again shortly."
    charge = Runs("charged" if ends == "charged" else "declined: card")
    reg.add(charge, name="charge", idempotent=True, timeout=0.05, retry=RETRY_TIMEOUTS, **options)

    if limit == "max_concurrency_acall":
        first = asyncio.run(reg.atry_call("charge", idempotency_key="pay-1"))
    else:
        first = reg.try_call("charge", idempotency_key="pay-1")
    assert isinstance(first.error, ToolBusy) and first.error.message.startswith(refusal), first.error
    assert charge.runs == [1]
    assert held(store, "pay-1")  # attempt 1 still runs: its key is still held
    charge.gates[0].set()
    kept = replayed(reg, "pay-1")
    if ends == "charged":
        assert kept == "charged"
    else:
        assert isinstance(kept, ToolExecutionError) and kept.message == "Tool 'charge' failed: OSError: declined: card"
    assert charge.runs == [1]


class Settled:
    """Sets ``returned[n]`` once attempt n's tool, run on past its timeout, has returned and the hooks'
    callbacks for it (the idempotency plugin's, registered before this one's) have run."""

    name = "settled"
    order = 1000  # after every standard plugin

    def __init__(self) -> None:
        self.returned: dict[int, threading.Event] = {}

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        lingering = call.lingering
        if lingering is not None:
            returned = self.returned.setdefault(call.attempt, threading.Event())
            lingering.then(returned.set)


@pytest.mark.parametrize(
    ("ends", "order", "kept"),
    [
        # a success of either attempt is what the tool did, whichever returned first
        (("charged 1", "declined 2"), (1, 0), "charged 1"),
        (("declined 1", "charged 2"), (0, 1), "charged 2"),
        # no success: the last attempt that ran is the key's outcome, whichever returned last
        (("declined 1", "declined 2"), (1, 0), "declined 2"),
        (("declined 1", "declined 2"), (0, 1), "declined 2"),
    ],
)
def test_attempts_that_all_run_on_settle_the_key_together(
    store: Any, ends: tuple[str, str], order: tuple[int, int], kept: str
) -> None:
    """Attempts 1 and 2 both timed out and ran on: the key kept attempt 2's outcome alone, stored
    as soon as it returned, so attempt 1's later charge was lost (attempt 2's error replayed for it)."""
    settled = Settled()
    reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=store), "settled": settled}, autoload=False)
    charge = Runs(*ends)
    reg.add(charge, name="charge", idempotent=True, timeout=0.05, retry={**RETRY_TIMEOUTS, "attempts": 2})

    first = reg.try_call("charge", idempotency_key="pay-2")
    assert isinstance(first.error, ToolTimeout) and first.attempts == 2 and charge.runs == [1, 2]
    charge.gates[order[0]].set()
    assert settled.returned[order[0] + 1].wait(10)
    if ends[order[0]].startswith("declined"):  # no success yet, and the other attempt's tool still runs
        assert held(store, "pay-2")
    charge.gates[order[1]].set()
    found = replayed(reg, "pay-2")
    if kept.startswith("charged"):
        assert found == kept
    else:
        assert isinstance(found, ToolExecutionError) and found.message == f"Tool 'charge' failed: OSError: {kept}"
    assert charge.runs == [1, 2]


def test_a_refused_retry_after_a_failed_attempt_keeps_the_tools_error(store: Any) -> None:
    """Attempt 1 ran and failed, attempt 2 was refused by the rate limit: the key replayed the
    rate limit's refusal ("retry after ...") for 24 h, not what the tool did."""
    reg = registry(store)
    runs: list[int] = []

    def charge() -> str:
        runs.append(1)
        raise RetryableError("card network blip")

    reg.add(
        charge,
        rate_limit={"rate": 0.001, "burst": 1},
        retry={"attempts": 3, "initial": 0, "total": 5, "rerun_non_idempotent": True},
    )
    first = reg.try_call("charge", idempotency_key="pay-3")
    assert type(first.error).__name__ == "RateLimitExceeded" and len(runs) == 1
    again = reg.try_call("charge", idempotency_key="pay-3")
    assert isinstance(again.error, ToolError) and again.error.replayed
    assert type(again.error) is RetryableError and again.error.message == "card network blip"
    assert len(runs) == 1


class WaitCut:
    """A clock whose first retry wait is cut short: ``sleep`` raises KeyboardInterrupt (Ctrl-C during
    the wait), ``asleep`` sets ``waiting`` and blocks until the task is cancelled."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.sleeps: list[float] = []

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if len(self.sleeps) == 1:
            raise KeyboardInterrupt

    async def asleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if len(self.sleeps) == 1:
            self.waiting.set()
            await asyncio.Event().wait()


@pytest.mark.parametrize("mode", ["acall", "call"])
def test_a_cancel_during_the_retry_wait_keeps_the_error_the_tool_returned(store: Any, mode: str) -> None:
    """Attempt 1 charged, then failed with a RetryableError; the caller was cancelled (Ctrl-C under
    call) during the retry's wait: that round's cancellation replaced the attempt's error, so the
    key was freed and the same key charged again."""
    clock = WaitCut()
    reg = registry(store, clock=clock)
    charges: list[int] = []

    def charge(amount: int) -> str:
        charges.append(amount)
        raise RetryableError("gateway 502 after capture")

    reg.add(charge, idempotent=True, retry={"attempts": 3, "initial": 2.0, "max_delay": 2.0, "multiplier": 1})
    if mode == "acall":

        async def cancelled_in_the_wait() -> None:
            task = asyncio.create_task(reg.atry_call("charge", {"amount": 5}, idempotency_key="pay-4"))
            await clock.waiting.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancelled_in_the_wait())
    else:
        with pytest.raises(KeyboardInterrupt):
            reg.try_call("charge", {"amount": 5}, idempotency_key="pay-4")
    assert len(clock.sleeps) == 1 and 0 <= clock.sleeps[0] <= 2.0 and charges == [5]  # (full jitter)
    again = reg.try_call("charge", {"amount": 5}, idempotency_key="pay-4")
    assert isinstance(again.error, RetryableError) and again.error.replayed
    assert again.error.message == "gateway 502 after capture"
    assert charges == [5]


def test_a_cancel_while_a_retry_runs_keeps_the_error_an_earlier_attempt_returned(store: Any) -> None:
    """Attempt 1 charged, then failed with a RetryableError; the caller was cancelled while attempt 2's
    tool ran: the key kept the last attempt's nothing and was freed, so the same key charged again."""
    reg = registry(store)
    charges: list[int] = []
    second = asyncio.Event()

    async def charge(amount: int) -> str:
        charges.append(amount)
        if len(charges) == 2:  # attempt 2 runs until cancelled
            second.set()
            await asyncio.Event().wait()
        raise RetryableError("gateway 502 after capture")

    reg.add(charge, idempotent=True, retry={"attempts": 3, "initial": 0})

    async def main() -> Any:
        task = asyncio.create_task(reg.atry_call("charge", {"amount": 5}, idempotency_key="pay-5"))
        await second.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert charges == [5, 5]
        return await reg.atry_call("charge", {"amount": 5}, idempotency_key="pay-5")

    again = asyncio.run(main())
    assert isinstance(again.error, RetryableError) and again.error.replayed
    assert again.error.message == "gateway 502 after capture"
    assert charges == [5, 5]


def test_an_earlier_attempt_still_running_holds_the_key_past_a_later_attempts_error(store: Any) -> None:
    """Attempt 1 timed out and runs on; attempt 2 ran and failed at once. The key is held (not given
    attempt 2's error) until attempt 1's tool returns, because its success, when it comes, is what the
    key keeps: a stored error could not be replaced by it."""
    settled = Settled()
    reg = ToolRegistry(plugins={"idempotency": IdempotencyPlugin(store=store), "settled": settled}, autoload=False)
    charge = Runs("charged 1", "declined 2")
    charge.gates[1].set()  # attempt 2 returns at once
    reg.add(charge, name="charge", idempotent=True, timeout=0.05, retry={**RETRY_TIMEOUTS, "attempts": 2})

    first = reg.try_call("charge", idempotency_key="pay-6")
    assert isinstance(first.error, ToolExecutionError) and first.error.message == "Tool 'charge' failed: OSError: declined 2"
    assert charge.runs == [1, 2]
    assert held(store, "pay-6")
    charge.gates[0].set()
    assert settled.returned[1].wait(10)
    assert replayed(reg, "pay-6") == "charged 1"
    assert charge.runs == [1, 2]
