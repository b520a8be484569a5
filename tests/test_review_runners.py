"""What a hostile review of the runners and the standard plugins found: a result that cannot be
copied, a ``retry_after`` that is no number, a result whose reading raises."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import ManualClock, RetryableError, ToolRegistry, rendered_length


class AttrBag:
    """Attribute access onto a dict (Box/Munch-like): a missing attribute is a KeyError, so
    ``copy.deepcopy``'s look-up of ``__deepcopy__`` raises KeyError."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__["_d"] = fields

    def __getattr__(self, name: str) -> Any:
        return self.__dict__["_d"][name]

    def __str__(self) -> str:
        return str(self.__dict__["_d"])


class NoCopy:
    def __deepcopy__(self, memo: Any) -> Any:
        raise ValueError("I refuse to be copied")

    def __str__(self) -> str:
        return "nocopy"


@pytest.mark.parametrize("make", [lambda: AttrBag(a=1), NoCopy])
def test_a_result_that_cannot_be_copied_is_returned_not_cached(make: Any) -> None:
    """It failed the call as the cache plugin's internal error (the tool had run)."""
    reg = ToolRegistry(clock=ManualClock(), plugin_options={"cache": {"ttl": 60}}, autoload=False)
    runs: list[int] = []

    def read() -> Any:
        runs.append(1)
        return make()

    reg.add(read, read_only=True)
    first, second = reg.try_call("read"), reg.try_call("read")
    assert first.ok and second.ok, first.error
    assert type(first.value) is type(make()) and runs == [1, 1]  # not cached: it ran again


def test_a_keyed_result_that_cannot_be_copied_frees_its_key() -> None:
    """With an idempotency key the call failed as the idempotency plugin's internal error, and the key
    stayed "still running" for its lease."""
    reg = ToolRegistry(clock=ManualClock(), autoload=False)
    runs: list[int] = []

    def charge() -> AttrBag:
        runs.append(1)
        return AttrBag(charged=len(runs))

    reg.add(charge, idempotent=True)
    first = reg.try_call("charge", idempotency_key="k")
    assert first.ok and first.value.charged == 1, first.error
    again = reg.try_call("charge", idempotency_key="k")
    assert again.ok, again.error  # not IdempotencyConflict: an outcome that cannot be kept frees the key


@pytest.mark.parametrize(("hint", "kept"), [("5", None), (True, None), (3, 3.0), (10**400, float("inf"))])
def test_a_retry_after_that_is_no_number_is_no_hint(hint: Any, kept: Any) -> None:
    """``retry_after="5"`` or ``10**400`` made the retry plugin fail the call with a TypeError or an
    OverflowError (a plugin error hiding the tool's)."""
    assert RetryableError("busy", retry_after=hint).retry_after == kept
    clock = ManualClock()
    reg = ToolRegistry(clock=clock, autoload=False)
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        if len(runs) == 1:
            raise RetryableError("503", retry_after=hint)
        return "ok"

    reg.add(flaky, idempotent=True, retry={"attempts": 2, "initial": 0, "total": 60})
    result = reg.try_call("flaky")
    if kept == float("inf"):  # a wait past the retry's total: the tool's error stands
        assert result.error is not None and result.error.kind == "retryable" and runs == [1]
        assert result.error.to_dict()["retry_after"] == "Infinity"
    else:
        assert result.ok and result.value == "ok" and runs == [1, 1]
        assert clock.sleeps == ([kept] if kept else [0.0])


class Unreadable(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        raise ConnectionError("source closed")

    def __iter__(self) -> Any:
        raise ConnectionError("source closed")


def test_a_result_whose_reading_raises_is_named_not_a_plugin_error() -> None:
    """The output limit plugin (on by default) failed the call: rendering a mapping whose items()
    raises escaped the renderer."""
    reg = ToolRegistry(clock=ManualClock(), autoload=False)
    reg.add(lambda: Unreadable(a=1), name="stream")
    reg.add(lambda: [1, Unreadable(a=1)], name="streams")
    result = reg.try_call("stream")
    assert result.ok, result.error
    assert result.for_model() == '"<Unreadable>"'
    assert reg.try_call("streams").for_model() == '[1, "<Unreadable>"]'
    assert rendered_length([1, Unreadable(a=1)]) == len('[1, "<Unreadable>"]')
