"""Review 31: the logging, metrics and otel plugins agree with what the caller gets, and leak no argument secret."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from structlog.testing import capture_logs
from test_otel_decisions import RetryOnce

from harness_one import Call, ManualClock, Outcome, Retry, ToolError, ToolRegistry, hookimpl
from harness_one_plugins import LoggingPlugin, MetricsPlugin, OTelPlugin


@pytest.fixture(autouse=True)
def unconfigured_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


class Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def registry(self, plugins: dict[str, Any] | None = None, **options: Any) -> ToolRegistry:
        otel = OTelPlugin(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, capture_content=True)
        observers = {"otel": otel, "metrics": MetricsPlugin(), "logging": LoggingPlugin(log_arguments=True)}
        return ToolRegistry(autoload=False, clock=ManualClock(), plugins={**observers, **(plugins or {})}, **options)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        data = self.reader.get_metrics_data()
        found: list[tuple[dict[str, Any], Any]] = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        found.extend((dict(p.attributes or {}), getattr(p, "value", None)) for p in m.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    found = Telemetry()
    yield found
    found.tracer_provider.shutdown()


# ---------------------------------------------------------------- 1: argument secrets in the error text


def _connect(user: str, password: str, nested: Any = None) -> None:
    raise PermissionError(f"access denied for {user}/{password} with key {nested['opts'][0]['api_key']}")


def test_values_under_secret_keys_are_masked_in_the_error_and_the_span_status(otel: Telemetry) -> None:
    """The error quoted a password the event's arguments masked: access denied for admin/Tr0ub4dor&3."""
    reg = otel.registry()
    reg.add(_connect, name="connect")
    nested = {"opts": [{"api_key": "live_8f3a9c2e71d04b6a"}], "note": "plain"}
    with capture_logs() as logs:
        result = reg.try_call("connect", {"user": "admin", "password": "Tr0ub4dor&3", "nested": nested})
    assert not result.ok
    [event] = logs
    assert event["arguments"]["password"] == "[REDACTED]"
    shown = "Tool 'connect' failed: PermissionError: access denied for admin/[REDACTED] with key [REDACTED]"
    assert event["error"] == shown
    [span] = otel.spans()
    assert span.status.description == shown
    assert "Tr0ub4dor" not in repr(dict(span.attributes or {}))


# ---------------------------------------------------------------- 2: a decision is logged as the caller gets it


class Recover:
    name = "recover"
    order = 50

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Outcome | None:
        if call.tool.name == "translated":
            return Outcome.failure(ToolError("quota exhausted"))
        return Outcome.success("fallback " + "z" * 300)


def _boom() -> None:
    raise ValueError("bad")


def test_a_recovered_call_is_logged_as_a_success_and_a_refused_recovery_as_the_output_limits_error(otel: Telemetry) -> None:
    """The log said outcome='error' ToolExecutionError while the caller got the fallback (or OutputTooLarge)."""
    reg = otel.registry({"recover": Recover()})
    reg.add(_boom, name="recovered")
    reg.add(_boom, name="refused", options={"max_output": {"limit": 100, "mode": "refuse"}})
    reg.add(_boom, name="translated")
    with capture_logs() as logs:
        assert reg.try_call("recovered").ok
        assert reg.try_call("refused").error.kind == "output_too_large"  # type: ignore[union-attr]
        assert reg.try_call("translated").error.kind == "tool_error"  # type: ignore[union-attr]
    seen = [(e["tool"], e["outcome"], e.get("error_type"), e.get("result_size")) for e in logs]
    assert seen == [
        ("recovered", "ok", None, 309),
        ("refused", "error", "OutputTooLarge", None),
        ("translated", "error", "ToolError", None),
    ]
    stats = reg.stats()["tools"]
    assert (stats["recovered"]["successes"], stats["refused"]["errors"]) == (1, {"OutputTooLarge": 1})


# ---------------------------------------------------------------- 3: a post_call failure after the records


class LatePost:
    """A post_call hook that runs after every observer's and fails."""

    name = "audit"
    order = 99

    @hookimpl(trylast=True)
    def harness_post_call(self, call: Call) -> None:
        raise RuntimeError("audit store is down")


@pytest.mark.parametrize("retried", [False, True])
def test_a_post_call_failure_after_the_records_leaves_one_record_in_each(otel: Telemetry, retried: bool) -> None:
    """Logging emitted ok then error for one call id; it logs the call once now (metrics still counts what it sees)."""
    reg = otel.registry({"audit": LatePost(), **({"again": RetryOnce()} if retried else {})})
    reg.add(lambda: 1, name="t")
    with capture_logs() as logs:
        assert reg.try_call("t").error.kind == "plugin_error"  # type: ignore[union-attr]
    assert [(e["event"], e["outcome"]) for e in logs] == [("tool_call", "ok")]
    stats = reg.stats()["tools"]["t"]
    # the metrics plugin keeps nothing per call (a mark would cost every call a dict): a success, then the failure
    assert (stats["successes"], stats["errors"]) == (2 if retried else 1, {"PluginError": 1})
    [span] = otel.spans()
    assert span.status.status_code is StatusCode.UNSET
    assert [v for _, v in otel.points("harness_one.tool.calls")] == [1] and otel.points("harness_one.tool.errors") == []


# ---------------------------------------------------------------- 4: a rate limit's wait is no retry


def test_a_rate_limit_waited_out_is_logged_as_a_wait(otel: Telemetry) -> None:
    """The log called it outcome='retry' while the span had a harness_one.wait event and stats waits: 1."""
    reg = otel.registry()
    reg.add(lambda: "x", name="lim", idempotent=True, retry=3, rate_limit={"rate": 20, "burst": 1})
    with capture_logs() as logs:
        assert reg.try_call("lim").ok and reg.try_call("lim").ok
    assert [(e["event"], e["outcome"]) for e in logs] == [("tool_call", "ok"), ("tool_call_retry", "wait"), ("tool_call", "ok")]
    assert logs[1]["error_type"] == "RateLimitExceeded"
    assert reg.stats()["tools"]["lim"]["waits"] == 1
    assert [e.name for s in otel.spans() for e in s.events] == ["harness_one.wait"]


# ---------------------------------------------------------------- 5: the captured result is the model's JSON


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_the_captured_result_is_the_json_the_model_reads(otel: Telemetry) -> None:
    """A dataclass was Point(x=1, y=2) on the span, a datetime, an Enum and a UUID their reprs."""
    reg = otel.registry()
    reg.add(lambda: {"when": datetime.datetime(2024, 1, 1), "c": Color.RED, "id": uuid.UUID(int=1), "token": "S3CRET"}, name="d")
    reg.add(lambda: Point(1, 2), name="p")
    reg.add(lambda: Color.RED, name="e")
    models = {name: reg.try_call(name).for_model() for name in ("d", "p", "e")}
    shown = {s.attributes["gen_ai.tool.call.result"] for s in otel.spans()}  # type: ignore[index]
    assert shown == {
        models["d"].replace("S3CRET", "[REDACTED]"),
        models["p"],
        models["e"],
    }
    assert models["p"] == '{"x": 1, "y": 2}' and models["e"] == '"red"' and "S3CRET" in models["d"]


class LateRecovery:
    """Recovers every failure from an on_error hook that runs after the logging plugin's."""

    name = "late_recovery"
    order = 99

    @hookimpl(trylast=True)
    def harness_on_error(self, call: Call, error: BaseException) -> Outcome:
        return Outcome.success("fallback")


def test_a_decision_after_the_logging_plugins_turn_is_not_logged_a_second_time(otel: Telemetry) -> None:
    """A later hook's decision made the after-decision hook log the call again: error, then ok."""
    reg = otel.registry({"late": LateRecovery()})

    def boom() -> None:
        raise ValueError("bad")

    reg.add(boom)
    with capture_logs() as logs:
        assert reg.try_call("boom").value == "fallback"
    assert [(e["event"], e["outcome"]) for e in logs] == [("tool_call", "error")]


def test_a_short_secret_value_does_not_blank_out_the_error_line(otel: Telemetry) -> None:
    """A one-character password from the model masked every "a" of the logged error."""
    reg = otel.registry()

    def login(password: str) -> None:
        raise PermissionError("account alice is locked after 3 attempts")

    reg.add(login)
    with capture_logs() as logs:
        reg.try_call("login", {"password": "a"})
    assert logs[-1]["error"] == "Tool 'login' failed: PermissionError: account alice is locked after 3 attempts"


class LateRetry:
    """Retries the first failure from an on_error hook that runs after the logging plugin's."""

    name = "late_retry"
    order = 99

    @hookimpl(trylast=True)
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
        return Retry(0.0) if call.attempt == 1 else None


def test_the_attempts_after_a_late_retry_are_logged(otel: Telemetry) -> None:
    """The mark of attempt 1's logged error hid attempt 2's success."""
    reg = otel.registry({"late": LateRetry()})
    attempts = iter([ValueError("bad"), None])

    def flaky() -> str:
        failure = next(attempts)
        if failure is not None:
            raise failure
        return "fine"

    reg.add(flaky)
    with capture_logs() as logs:
        assert reg.try_call("flaky").value == "fine"
    assert [(e["event"], e["outcome"], e["attempt"]) for e in logs] == [("tool_call", "error", 1), ("tool_call", "ok", 2)]
