"""Review 33: the retry plugin's refusals bounded and backed off, ``read_only`` tools re-run, no retry once the
total timeout is spent."""

from __future__ import annotations

import threading

from harness_one import Call, CallResult, ManualClock, RetryableError, ToolRegistry, hookimpl
from harness_one_plugins.retry import MAX_REFUSALS, RetryPlugin


class Refuser:
    """A pre-call hook that refuses the first ``times`` attempts with a ``RetryableError(retry_after=0)``."""

    name = "refuser"

    def __init__(self, times: int) -> None:
        self.times, self.calls = times, 0

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.calls += 1
        if self.calls <= self.times:
            raise RetryableError("backend warming up", retry_after=0)


class Top:
    """Jitter that always draws the top of its range."""

    def uniform(self, low: float, high: float) -> float:
        return high


def _bounded(reg: ToolRegistry, tool: str) -> CallResult:
    """The call's result, or a failure (not a hang) when it does not end within 10 s."""
    results: list[CallResult] = []
    worker = threading.Thread(target=lambda: results.append(reg.try_call(tool, {})), daemon=True)
    worker.start()
    worker.join(10)
    assert results, "the call did not end: refusals were retried without bound"
    return results[0]


def test_refusals_with_a_zero_retry_after_are_bounded_on_a_manual_clock() -> None:
    clock = ManualClock()
    reg = ToolRegistry(autoload=False, clock=clock)
    refuser = Refuser(times=10**9)
    reg.plugins.register(refuser)
    runs: list[int] = []
    reg.add(lambda: runs.append(1), name="f", idempotent=True, retry={"attempts": 3, "initial": 0, "total": 2})
    result = _bounded(reg, "f")
    assert isinstance(result.error, RetryableError) and not result.ran and runs == []
    assert refuser.calls == MAX_REFUSALS + 1  # the first, then MAX_REFUSALS waited out
    assert reg.stats()["retry"] == {"retries": MAX_REFUSALS, "gave_up": 1}


def test_refusals_do_not_use_attempts_and_back_off_by_their_count() -> None:
    clock = ManualClock()
    reg = ToolRegistry(autoload=False, clock=clock, plugins={"retry": RetryPlugin(rng=Top())})  # type: ignore[arg-type]
    reg.plugins.register(Refuser(times=3))
    reg.add(lambda: "ran", name="f", retry={"attempts": 1, "initial": 0.1, "multiplier": 2})
    assert _bounded(reg, "f").value == "ran"  # three refusals waited out although attempts=1
    assert clock.sleeps == [0.1, 0.2, 0.4]  # each one step further (they all waited 0.1 s)


def test_a_read_only_tool_is_re_run() -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock())
    runs: list[int] = []

    def search(q: str) -> str:
        runs.append(1)
        raise OSError("connection reset")

    reg.add(search, read_only=True, retry={"attempts": 3, "on": [OSError]})
    result = reg.try_call("search", {"q": "x"})
    assert result.error is not None and result.error.kind == "tool_failed" and result.attempts == 3 and len(runs) == 3


class Low:
    """Jitter that always draws zero."""

    def uniform(self, low: float, high: float) -> float:
        return low


def _spent(advance: float) -> tuple[ToolRegistry, list[int]]:
    clock = ManualClock()
    reg = ToolRegistry(autoload=False, clock=clock, plugins={"retry": RetryPlugin(rng=Low())})  # type: ignore[arg-type]
    runs: list[int] = []

    def f() -> str:
        runs.append(1)
        clock.advance(advance)
        raise RetryableError("upstream 503: service unavailable")

    reg.add(f, idempotent=True, total_timeout=1.0, retry={"attempts": 3})
    return reg, runs


def test_no_zero_wait_retry_once_the_total_timeout_is_spent() -> None:
    for advance in (1.0, 1.5):  # none left, exactly or past it
        reg, runs = _spent(advance)
        result = reg.try_call("f")
        assert isinstance(result.error, RetryableError), advance  # the tool's own error, not "timed out"
        assert runs == [1] and reg.stats()["retry"] == {"retries": 0, "gave_up": 1}


def test_a_zero_wait_retry_goes_ahead_while_time_is_left() -> None:
    reg, runs = _spent(0.4)
    result = reg.try_call("f")
    assert isinstance(result.error, RetryableError) and runs == [1, 1, 1]
    assert reg.stats()["retry"] == {"retries": 2, "gave_up": 1}


def _hinted(hint: float) -> tuple[ToolRegistry, ManualClock, list[int]]:
    clock = ManualClock()
    reg = ToolRegistry(autoload=False, clock=clock, plugins={"retry": RetryPlugin(rng=Low())})  # type: ignore[arg-type]
    runs: list[int] = []

    def f() -> str:
        runs.append(1)
        clock.advance(0.5)
        raise RetryableError("upstream 503", retry_after=hint)

    reg.add(f, idempotent=True, total_timeout=1.0, retry={"attempts": 3})
    return reg, clock, runs


def test_no_retry_whose_wait_ends_at_the_total_timeout() -> None:
    """A retry_after of exactly what was left was granted: the wait spent the total, and the next attempt was refused
    with the total's ToolTimeout in place of the tool's error (a hint a hair longer gave the tool's error)."""
    for hint in (0.5, 0.5000001):
        reg, clock, runs = _hinted(hint)
        result = reg.try_call("f")
        assert isinstance(result.error, RetryableError) and str(result.error) == "upstream 503", hint
        assert runs == [1] and clock.sleeps == [] and reg.stats()["retry"] == {"retries": 0, "gave_up": 1}
