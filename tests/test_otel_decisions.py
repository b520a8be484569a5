"""The otel and metrics plugins record what the caller gets: a decision made on error (a recovery, a
translation, the output limit's word on it), a post_call failure after the span ended, a failing propagator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import propagate
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import harness_one_plugins.otel as otel_module
from harness_one import (
    Call,
    ManualClock,
    Outcome,
    Retry,
    RetryableError,
    ToolError,
    ToolRegistry,
    hookimpl,
)
from harness_one_plugins import MetricsPlugin, OTelPlugin

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Open(SpanProcessor):
    """The spans started and not ended."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.open[span.context.span_id] = span.name

    def on_end(self, span: Any) -> None:
        self.open.pop(span.context.span_id, None)


class Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.open = Open()
        self.tracer_provider.add_span_processor(self.open)
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def registry(self, plugins: dict[str, Any] | None = None) -> ToolRegistry:
        otel = OTelPlugin(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, capture_content=True)
        return ToolRegistry(autoload=False, clock=ManualClock(), plugins={"otel": otel, **(plugins or {})})

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        found.extend((dict(p.attributes), getattr(p, "value", None)) for p in m.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    found = Telemetry()
    yield found
    found.tracer_provider.shutdown()
    found.meter_provider.shutdown()


class Fallback:
    """Recovers every failure with a long answer, or translates it."""

    name = "fallback"

    def __init__(self, answer: Outcome) -> None:
        self.answer = answer

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Outcome:
        return self.answer


def _boom() -> None:
    raise ZeroDivisionError("division by zero")


def test_a_recovered_call_is_a_success_with_the_answer_the_caller_gets(otel: Telemetry) -> None:
    """The span's result was "null" (call.result, unset), and the output limit's refusal of the answer was not on it."""
    reg = otel.registry({"fallback": Fallback(Outcome.success("FALLBACK " + "y" * 500))})
    reg.add(_boom, name="refused", options={"max_output": {"limit": 100, "mode": "refuse"}})
    reg.add(_boom, name="truncated", options={"max_output": 100})
    reg.add(_boom, name="plain")
    got = {name: reg.try_call(name, {}) for name in ("refused", "truncated", "plain")}
    spans = {s.attributes["gen_ai.tool.name"]: s for s in otel.spans()}  # type: ignore[index]
    assert len(otel.spans()) == 3 and not otel.open.open
    refused = spans["refused"]
    assert got["refused"].error is not None and got["refused"].error.kind == "output_too_large"
    assert refused.status.status_code is StatusCode.ERROR and refused.attributes["error.type"] == "output_too_large"  # type: ignore[index]
    assert "gen_ai.tool.call.result" not in (refused.attributes or {})
    truncated = spans["truncated"]
    assert truncated.status.status_code is StatusCode.UNSET
    assert truncated.attributes["gen_ai.tool.call.result"] == got["truncated"].value  # type: ignore[index]
    assert "[output truncated" in str(got["truncated"].value)
    assert spans["plain"].attributes["gen_ai.tool.call.result"] == "FALLBACK " + "y" * 500  # type: ignore[index]
    calls = sorted((a["gen_ai.tool.name"], a.get("error.type"), v) for a, v in otel.points("harness_one.tool.calls"))
    assert calls == [("plain", None, 1), ("refused", "output_too_large", 1), ("truncated", None, 1)]


def test_a_translated_error_is_the_spans_error_and_an_ordinary_failure_ends_one_span(otel: Telemetry) -> None:
    reg = otel.registry({"fallback": Fallback(Outcome.failure(ToolError("quota exhausted")))})
    reg.add(_boom, name="translated")
    assert reg.try_call("translated", {}).error.kind == "tool_error"  # type: ignore[union-attr]
    plain = otel.registry()
    plain.add(_boom, name="plain")
    assert plain.try_call("plain", {}).error.kind == "tool_failed"  # type: ignore[union-attr]
    spans = otel.spans()
    assert sorted((s.attributes["gen_ai.tool.name"], s.attributes["error.type"]) for s in spans) == [  # type: ignore[index]
        ("plain", "ZeroDivisionError"),
        ("translated", "tool_error"),
    ]
    assert all(s.status.status_code is StatusCode.ERROR for s in spans) and not otel.open.open


class LatePost:
    """A post_call hook that runs after otel's and fails: the call fails after its span ended."""

    name = "audit"
    order = 99

    @hookimpl(trylast=True)
    def harness_post_call(self, call: Call) -> None:
        raise ToolError("audit store refused the result")


class RetryOnce:
    name = "again"

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
        return Retry(0.0) if call.attempt == 1 else None


@pytest.mark.parametrize("retried", [False, True])
def test_a_post_call_failure_after_the_span_ended_makes_no_second_span_or_count(otel: Telemetry, retried: bool) -> None:
    """The span ended as a success, then on_error started a second span in error and counted the call twice."""
    reg = otel.registry({"audit": LatePost(), **({"again": RetryOnce()} if retried else {})})
    ran = []
    reg.add(lambda: ran.append(1) or 42, name="answer")
    assert reg.try_call("answer", {}).error.kind == "tool_error"  # type: ignore[union-attr]
    assert len(ran) == (2 if retried else 1)
    [span] = otel.spans()
    assert span.status.status_code is StatusCode.UNSET and span.attributes["gen_ai.tool.call.result"] == "42"  # type: ignore[index]
    assert not otel.open.open
    assert otel.points("harness_one.tool.calls") == [({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "answer"}, 1)]
    assert otel.points("harness_one.tool.errors") == []


class BadPropagator(TextMapPropagator):
    def __init__(self, where: str) -> None:
        self.where = where

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        raise RuntimeError("bad propagator")

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        pass

    @property
    def fields(self) -> set[str]:
        if self.where == "fields":
            raise RuntimeError("bad fields")
        return {"traceparent"}


@pytest.mark.parametrize("where", ["extract", "fields"])
def test_a_failing_propagator_never_fails_a_call(otel: Telemetry, where: str) -> None:
    """A propagator raising anything but ValueError or TypeError failed every call carrying _meta.traceparent."""
    reg = otel.registry()
    reg.add(lambda x: x, name="echo")
    configured = propagate.get_global_textmap()
    propagate.set_global_textmap(BadPropagator(where))
    try:
        result = reg.try_call("echo", {"x": 1}, context={"_meta": {"traceparent": TRACEPARENT}})
    finally:
        propagate.set_global_textmap(configured)
    assert result.ok and result.value == 1
    [span] = otel.spans()
    assert span.parent is None  # the current context: none here
    assert reg.stats()["otel"]["sdk_errors"] == 1


def test_stats_say_why_the_plugin_is_inert(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the default enabled=None and no provider set when the registry was built, the plugin stayed inert silently."""
    monkeypatch.setattr(otel_module, "configured", lambda: False)
    reg = ToolRegistry(autoload=False)
    assert reg.stats()["otel"] == {"enabled": False, "reason": "no tracer or meter provider was set when the plugin was built"}


def test_metrics_count_a_recovered_call_as_a_success_and_a_translated_error_by_its_type() -> None:
    from harness_one_plugins.output import OutputTooLarge

    class Quota(ToolError):
        pass

    reg = ToolRegistry(autoload=False, plugins={"fallback": Fallback(Outcome.success("x" * 500))})
    reg.add(_boom, name="recovered")
    reg.add(_boom, name="refused", options={"max_output": {"limit": 100, "mode": "refuse"}})
    translated = ToolRegistry(autoload=False, plugins={"fallback": Fallback(Outcome.failure(Quota("over quota")))})
    translated.add(_boom, name="translated")
    assert reg.try_call("recovered", {}).ok
    assert isinstance(reg.try_call("refused", {}).error, OutputTooLarge)
    assert isinstance(translated.try_call("translated", {}).error, Quota)
    tools = {**reg.stats()["tools"], **translated.stats()["tools"]}
    assert (tools["recovered"]["successes"], tools["recovered"]["errors"]) == (1, {})
    assert (tools["refused"]["successes"], tools["refused"]["errors"]) == (0, {"OutputTooLarge": 1})
    assert (tools["translated"]["successes"], tools["translated"]["errors"]) == (0, {"Quota": 1})
    assert all(tools[name]["finished"] == 1 for name in ("recovered", "refused", "translated"))


class Quota:
    """A pre_validate check that says when to try again: an error before admission, which is never retried."""

    name = "quota"

    @hookimpl
    def harness_pre_validate(self, call: Call) -> None:
        raise RetryableError("quota window full", retry_after=0.05)


def test_a_retry_answered_to_an_error_before_admission_leaves_no_span_open(otel: Telemetry) -> None:
    reg = otel.registry({"quota": Quota(), "metrics": MetricsPlugin()})
    reg.add(lambda x: x, name="echo", retry={"attempts": 3})
    assert reg.try_call("echo", {"x": 1}).error.kind == "retryable"  # type: ignore[union-attr]
    assert not otel.open.open and len(otel.spans()) == 1
    assert reg.stats()["tools"]["echo"]["retries"] == 0


def test_metrics_count_no_retry_that_a_failing_on_error_hook_stopped() -> None:
    """One hook answers Retry, another raises: the call fails with the PluginError, once, and no retry is counted."""
    from harness_one import ManualClock, PluginError, Retry, hookimpl
    from harness_one_plugins import MetricsPlugin

    class Retrier:
        @hookimpl
        def harness_on_error(self) -> Retry:
            return Retry(0.5)

    class Broken:
        @hookimpl
        def harness_on_error(self) -> None:
            raise RuntimeError("release failed")

    reg = ToolRegistry(
        autoload=False, clock=ManualClock(), plugins={"metrics": MetricsPlugin(), "retrier": Retrier(), "broken": Broken()}
    )
    reg.add(lambda: 1 / 0, name="flaky")
    result = reg.try_call("flaky")
    assert isinstance(result.error, PluginError) and result.attempts == 1
    figures = reg.plugins.get("metrics").snapshot()["flaky"]
    assert (figures["retries"], figures["finished"], figures["errors"]) == (0, 1, {"PluginError": 1})
