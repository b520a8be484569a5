"""Review 31: the edges of a call (the no-hook path, given ids, progress reports, CallResult.to_dict)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import threading
from typing import Any

import pytest

from harness_one import Call, ToolError, ToolExecutionError, ToolRegistry, ToolTimeout


def test_a_cancelled_error_from_a_sync_tool_is_its_failure_on_a_registry_without_plugins() -> None:
    registry = ToolRegistry(standard_plugins=False)

    def cancelled(x: int = 0) -> int:
        """Raises the CancelledError a library cancelling its own request would."""
        raise asyncio.CancelledError

    registry.add(cancelled)
    with pytest.raises(ToolExecutionError) as raised:
        registry.call("cancelled", {}, call_id="c1")  # the no-hook path: called directly
    assert isinstance(raised.value.__cause__, asyncio.CancelledError)
    assert raised.value.call_id == "c1" and raised.value.tool == "cancelled"
    result = registry.try_call("cancelled", {})
    assert isinstance(result.error, ToolExecutionError)  # as try_call already answered


@pytest.mark.parametrize("plugins", [True, False])
def test_an_empty_call_id_is_kept_on_refusals_as_on_calls_that_ran(plugins: bool) -> None:
    registry = ToolRegistry(standard_plugins=plugins)

    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    async def later() -> int:
        """An async tool."""
        return 1

    registry.add(add)
    registry.add(later)
    assert registry.try_call("add", {"a": 1, "b": 2}, call_id="").call_id == ""
    assert registry.try_call("add", {"a": 1}, call_id="").call_id == ""
    refused = registry.try_call("nope", {}, call_id="")
    assert refused.call_id == "" and refused.error is not None and refused.error.call_id == ""
    assert refused.to_dict()["call_id"] == "" and refused.to_dict()["error"]["call_id"] == ""
    with pytest.raises(ToolError) as raised:
        registry.call("nope", {}, call_id="")
    assert raised.value.call_id == ""
    assert asyncio.run(registry.atry_call("nope", {}, call_id="")).call_id == ""

    async def inside_a_loop() -> ToolError | None:
        return registry.try_call("later", {}, call_id="").error  # refused: an event loop runs here

    error = asyncio.run(inside_a_loop())
    assert error is not None and error.call_id == ""
    assert registry.try_call("nope", {}).call_id  # none given: a new one


def _reporting_tool(registry: ToolRegistry, go: threading.Event, gone: threading.Event) -> None:
    def slow(call: Call) -> int:
        """Reports once before its timeout and once after it."""
        call.report_progress(1, 2, "before")
        go.wait(10)
        call.report_progress(2, 2, "after")
        gone.set()
        return 2

    registry.add(slow, timeout=0.05)


def test_no_progress_reaches_the_caller_once_the_call_returned_at_its_timeout() -> None:
    registry = ToolRegistry()
    go, gone = threading.Event(), threading.Event()
    _reporting_tool(registry, go, gone)
    seen: list[Any] = []
    result = registry.try_call("slow", {}, on_progress=lambda *report: seen.append(report))
    assert isinstance(result.error, ToolTimeout)
    go.set()  # the abandoned tool goes on and reports
    assert gone.wait(10)
    assert (2, 2, "after") not in seen and set(seen) <= {(1, 2, "before")}  # (the first may come late: a loaded machine)


def test_no_progress_reaches_the_caller_once_acall_returned_at_its_timeout() -> None:
    registry = ToolRegistry()
    go, gone = threading.Event(), threading.Event()
    _reporting_tool(registry, go, gone)
    seen: list[Any] = []

    async def main() -> None:
        result = await asyncio.wait_for(registry.atry_call("slow", {}, on_progress=lambda *r: seen.append(r)), 10)
        assert isinstance(result.error, ToolTimeout)

    asyncio.run(main())
    go.set()
    assert gone.wait(10)
    assert (2, 2, "after") not in seen and set(seen) <= {(1, 2, "before")}  # (the first may come late: a loaded machine)


def test_no_progress_reaches_the_caller_of_a_cancelled_acall() -> None:
    registry = ToolRegistry()
    started, go, gone = threading.Event(), threading.Event(), threading.Event()

    def worker(call: Call) -> int:
        """Runs in a worker thread under acall."""
        started.set()
        go.wait(10)
        call.report_progress(1, None, "after the cancel")
        gone.set()
        return 1

    registry.add(worker)
    seen: list[Any] = []

    async def main() -> None:
        task = asyncio.ensure_future(registry.acall("worker", {}, on_progress=lambda *r: seen.append(r)))
        while not started.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        go.set()  # the call is over: the tool goes on and reports (asyncio.run waits for its thread)

    asyncio.run(main())
    assert gone.wait(10)
    assert seen == []


def test_an_async_def_on_progress_is_refused_before_the_tool_runs_in_every_calling_style() -> None:
    registry = ToolRegistry()
    ran: list[int] = []

    def reporting(call: Call) -> int:
        """Reports."""
        ran.append(1)
        call.report_progress(1)
        return 1

    registry.add(reporting)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        raise AssertionError("never awaited")

    for context in (None, {"user": "u"}):  # the fast path and the one that checks the context
        with pytest.raises(TypeError, match=r"on_progress .*on_progress.* is an async def"):
            registry.call("reporting", {}, context=context, on_progress=on_progress)
        with pytest.raises(TypeError, match="async def"):
            registry.try_call("reporting", {}, context=context, on_progress=on_progress)
        with pytest.raises(TypeError, match="async def"):
            asyncio.run(registry.acall("reporting", {}, context=context, on_progress=on_progress))
        with pytest.raises(TypeError, match="async def"):
            asyncio.run(registry.atry_call("reporting", {}, context=context, on_progress=on_progress))
    with pytest.raises(TypeError, match="not callable"):
        registry.call("reporting", {}, on_progress=42)  # type: ignore[arg-type]
    assert ran == []
    seen: list[Any] = []
    assert registry.call("reporting", {}, on_progress=lambda *r: seen.append(r)) == 1  # a plain one still works
    assert seen == [(1, None, None)]


@dataclasses.dataclass
class _Point:
    x: float
    when: datetime.date


def test_call_result_to_dict_is_json_for_every_result_for_model_writes() -> None:
    registry = ToolRegistry()
    registry.add(lambda: float("nan"), name="nan")
    registry.add(lambda: datetime.datetime(2024, 1, 1), name="when")
    registry.add(lambda: _Point(float("inf"), datetime.date(2024, 1, 2)), name="point")
    registry.add(lambda: {"a": [1, "b"]}, name="plain")
    for name, expected in (
        ("nan", "NaN"),
        ("when", "2024-01-01T00:00:00"),
        ("point", {"x": "Infinity", "when": "2024-01-02"}),
        ("plain", {"a": [1, "b"]}),
    ):
        result = registry.try_call(name, {})
        answer = result.to_dict()
        assert answer["result"] == expected
        assert json.loads(json.dumps(answer, allow_nan=False))["result"] == json.loads(result.for_model())
    assert isinstance(registry.try_call("when", {}).value, datetime.datetime)  # the value itself is kept
