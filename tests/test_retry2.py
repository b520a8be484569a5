"""Retry of a failure before the tool started (``call.ran`` False): only one that says when to try again."""

from __future__ import annotations

import pytest

from harness_one import Call, RetryableError, ToolExecutionError, ToolRegistry, hookimpl


class Refuser:
    """A pre-call hook after the retry plugin's that refuses the first ``times`` attempts."""

    name, order = "refuser", 45

    def __init__(self, times: int, retry_after: float | None, error: str = "retryable") -> None:
        self.times, self.retry_after, self.error, self.calls = times, retry_after, error, 0

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.calls += 1
        if self.calls > self.times:
            return
        if self.error == "retryable":
            raise RetryableError("backend down", tool=call.tool.name, call_id=call.call_id, retry_after=self.retry_after)
        raise ToolExecutionError(RuntimeError("the backend did not start"), tool=call.tool.name, call_id=call.call_id)


def ran() -> str:
    return "ran"


@pytest.mark.parametrize("error", ["retryable", "runtime"])
def test_a_refusal_before_the_tool_started_without_retry_after_stands(error: str) -> None:
    reg = ToolRegistry(autoload=False)
    refuser = Refuser(times=1000, retry_after=None, error=error)
    reg.plugins.register(refuser)
    reg.add(ran, idempotent=True, retry={"attempts": 3, "initial": 0.001, "total": 0.5, "on": [RuntimeError]})
    result = reg.try_call("ran")
    assert not result.ok and not result.ran and refuser.calls == 1
    assert reg.stats()["retry"] == {"retries": 0, "gave_up": 0}


def test_a_refusal_before_the_tool_started_with_retry_after_is_waited_out() -> None:
    reg = ToolRegistry(autoload=False)
    refuser = Refuser(times=2, retry_after=0.001)
    reg.plugins.register(refuser)
    reg.add(ran, retry={"attempts": 1, "initial": 0})  # attempts count runs of the tool: refusals do not use them
    assert reg.call("ran") == "ran"
    assert refuser.calls == 3 and reg.stats()["retry"]["retries"] == 2
