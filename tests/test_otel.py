"""The otel plugin: GenAI tool spans, one per call across retries, trace context, metrics, and zero cost when off."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.propagate import extract as otel_extract
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from harness_one import ManualClock, PluginError, RetryableError, ToolExecutionError, ToolRegistry
from harness_one_plugins import OTelPlugin
from harness_one_plugins.otel import DESCRIPTION_LIMIT, METRICS, error_type

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class Telemetry:
    """An SDK tracer and meter provider that keep everything in memory."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if name is None or s.name == name]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        found.extend(m.data.data_points)
        return found

    def registry(self, **options: Any) -> ToolRegistry:
        plugin = OTelPlugin(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options)
        return ToolRegistry(autoload=False, clock=ManualClock(), plugins={"otel": plugin})


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    found = Telemetry()
    yield found
    found.tracer_provider.shutdown()
    found.meter_provider.shutdown()


def test_a_call_is_one_execute_tool_span_with_the_genai_attributes(otel: Telemetry) -> None:
    reg = otel.registry()
    reg.add(lambda query, api_key="": f"found {query}", name="search", description="Search the web.")
    assert reg.call("search", {"query": "otel", "api_key": "sk-1"}, call_id="call-7") == "found otel"
    [span] = otel.finished()
    assert span.name == "execute_tool search" and span.kind is SpanKind.INTERNAL
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.call.id": "call-7",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Search the web.",
        "harness_one.attempts": 1,
    }  # no arguments, no result: they are opt-in
    assert span.status.status_code is StatusCode.UNSET and span.parent is None
    assert span.instrumentation_scope is not None and span.instrumentation_scope.name == "harness_one"


def test_a_tools_description_on_a_span_is_masked_and_bounded(otel: Telemetry) -> None:
    """A description (an MCP server's, say) went onto every span whole: 5,000,070 characters, credentials and all."""
    reg = otel.registry()
    text = "Use api_key=sk-live-SECRETDESC at https://admin:S_PW@internal/ . " + "D" * 5_000_000
    reg.add(lambda: "ok", name="f", description=text)
    for _ in range(2):
        reg.call("f")
    shown = [str((span.attributes or {})["gen_ai.tool.description"]) for span in otel.finished()]
    assert shown[0] == shown[1] and shown[0].startswith("Use api_key=[REDACTED] at https://[REDACTED]@internal/")
    assert "SECRETDESC" not in shown[0] and "S_PW" not in shown[0] and shown[0].endswith("... (5000065 characters)")
    plugin = reg.plugins.get("otel")
    assert list(plugin._descriptions) == ["f"]  # made once, kept by the tool's name...
    reg.remove("f")
    assert plugin._descriptions == {}  # ...and dropped with the tool (a cache by text kept 1,024 of them)
    assert len(shown[0]) <= DESCRIPTION_LIMIT + len("... (5000065 characters)")


def test_a_failure_sets_error_type_and_an_error_status(otel: Telemetry) -> None:
    class QuotaError(Exception):
        pass

    reg = otel.registry()
    reg.add(lambda: 1 / 0, name="divide")

    def over() -> None:
        raise QuotaError("quota used, token=abc")

    reg.add(over, name="over")
    reg.add(lambda n: n, name="typed", parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    assert not reg.try_call("divide").ok and not reg.try_call("over").ok and not reg.try_call("typed", {"n": "x"}).ok
    spans = {s.name: s for s in otel.finished()}
    assert spans["execute_tool divide"].attributes["error.type"] == "ZeroDivisionError"  # type: ignore[index]
    assert spans["execute_tool over"].attributes["error.type"] == f"{__name__}.{QuotaError.__qualname__}"  # type: ignore[index]
    assert spans["execute_tool typed"].attributes["error.type"] == "invalid_arguments"  # type: ignore[index]
    status = spans["execute_tool divide"].status
    assert status.status_code is StatusCode.ERROR and "ZeroDivisionError" in (status.description or "")


def test_one_span_covers_every_attempt_with_an_event_per_retry(otel: Telemetry) -> None:
    reg = otel.registry()
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        if len(runs) < 3:
            raise RetryableError("the upstream is busy")
        return "ok"

    reg.add(flaky, idempotent=True, retry={"attempts": 3, "initial": 0.5})
    assert reg.call("flaky") == "ok"
    [span] = otel.finished()
    assert [e.name for e in span.events] == ["harness_one.retry", "harness_one.retry"]
    assert [e.attributes["harness_one.attempt"] for e in span.events] == [1, 2]  # type: ignore[index]
    assert {e.attributes["error.type"] for e in span.events} == {"retryable"}  # type: ignore[index]
    assert span.attributes["harness_one.attempts"] == 3 and "error.type" not in span.attributes  # type: ignore[index,operator]
    assert span.status.status_code is StatusCode.UNSET


def test_a_retried_call_that_gives_up_ends_its_one_span_in_error(otel: Telemetry) -> None:
    reg = otel.registry()

    def down() -> None:
        raise RetryableError("still down")

    reg.add(down, idempotent=True, retry={"attempts": 2, "initial": 0})
    assert reg.try_call("down").attempts == 2
    [span] = otel.finished()
    assert [e.name for e in span.events] == ["harness_one.retry"]
    assert span.attributes["error.type"] == "retryable" and span.status.status_code is StatusCode.ERROR  # type: ignore[index]


def test_waits_and_replays_are_events_and_refusals_are_counted(otel: Telemetry) -> None:
    reg = otel.registry()
    reg.add(lambda: "pong", name="ping", rate_limit={"rate": 1, "burst": 1, "max_wait": 5})
    reg.add(lambda: "pung", name="once", rate_limit={"rate": 1, "burst": 1})
    reg.call("ping")
    reg.call("ping")  # waits one second for a token (the manual clock makes it instant)
    waited = otel.finished()[-1]
    assert [e.name for e in waited.events] == ["harness_one.wait"]
    assert waited.events[0].attributes["error.type"] == "rate_limited"  # type: ignore[index]
    assert waited.events[0].attributes["harness_one.delay"] == pytest.approx(1.0)  # type: ignore[index]
    reg.call("once")
    assert reg.try_call("once").error.kind == "rate_limited"  # type: ignore[union-attr]
    refusals = {p.attributes["harness_one.waited"]: p.value for p in otel.points("harness_one.tool.rate_limited")}
    assert refusals == {True: 1, False: 1}

    reg.add(lambda n: n * 2, name="double", idempotent=True)
    assert reg.call("double", {"n": 2}, idempotency_key="k") == 4
    assert reg.call("double", {"n": 2}, idempotency_key="k") == 4
    first, replay = otel.finished("execute_tool double")
    assert list(first.events) == []
    assert [e.name for e in replay.events] == ["harness_one.replay"]


def test_arguments_and_results_are_opt_in_and_redacted(otel: Telemetry) -> None:
    reg = otel.registry(capture_content=True, secret_values=["hunter2"])
    reg.add(lambda query, api_key: {"query": query, "password": "p4ss", "note": "pw is hunter2"}, name="login")
    reg.call("login", {"query": "q", "api_key": "sk-live-1"})
    [span] = otel.finished()
    arguments = span.attributes["gen_ai.tool.call.arguments"]  # type: ignore[index]
    result = span.attributes["gen_ai.tool.call.result"]  # type: ignore[index]
    assert arguments == '{"query": "q", "api_key": "[REDACTED]"}'
    assert "p4ss" not in result and "hunter2" not in result and '"query": "q"' in result  # type: ignore[operator]


@pytest.mark.parametrize(
    "data",
    [
        [["password", "S3CRET-A"], ["user", "bob"]],
        [("Authorization", "Bearer S3CRET-B")],
        "redis://cache_user:p@ssS3CRET-C@cache.internal:6379/0",
        {"X-API-KEY": "S3CRET-D"},
    ],
    ids=["pairs", "headers", "url", "api"],
)
def test_pairs_urls_and_keyed_text_are_redacted_in_content_and_status(otel: Telemetry, data: Any) -> None:
    reg = otel.registry(capture_content=True)
    reg.add(lambda data: data, name="echo")

    def fail(data: Any) -> None:
        raise ValueError(f"cannot reach {data}")

    reg.add(fail)
    reg.call("echo", {"data": data})
    assert not reg.try_call("fail", {"data": data}).ok
    echo, failed = otel.finished()
    recorded = [
        echo.attributes["gen_ai.tool.call.arguments"],  # type: ignore[index]
        echo.attributes["gen_ai.tool.call.result"],  # type: ignore[index]
        failed.attributes["gen_ai.tool.call.arguments"],  # type: ignore[index]
        failed.status.description,
    ]
    assert failed.status.status_code is StatusCode.ERROR and "cannot reach" in str(failed.status.description)
    assert all("[REDACTED]" in str(text) and "S3CRET" not in str(text) for text in recorded), recorded


def test_the_span_continues_the_current_trace_and_is_current_while_the_tool_runs(otel: Telemetry) -> None:
    reg = otel.registry()
    app = otel.tracer_provider.get_tracer("app")

    def fetch() -> str:
        with app.start_as_current_span("http GET"):
            return "page"

    async def afetch() -> str:
        await asyncio.sleep(0)
        with app.start_as_current_span("http GET async"):
            return "page"

    reg.add(fetch)
    reg.add(afetch)
    with app.start_as_current_span("agent turn") as turn:
        reg.call("fetch")
        asyncio.run(reg.acall("afetch"))
    spans = {s.name: s for s in otel.finished()}
    tool, inner = spans["execute_tool fetch"], spans["http GET"]
    assert tool.parent is not None and tool.parent.span_id == turn.get_span_context().span_id
    assert inner.parent is not None and inner.parent.span_id == tool.context.span_id  # type: ignore[union-attr]
    async_inner = spans["http GET async"]
    assert async_inner.parent is not None and async_inner.parent.span_id == spans["execute_tool afetch"].context.span_id  # type: ignore[union-attr]
    reg.call("fetch")  # outside the turn: nothing left attached by the plugin
    assert otel.finished()[-1].parent is None


def test_a_traceparent_in_the_context_meta_continues_the_callers_trace(otel: Telemetry) -> None:
    reg = otel.registry()
    reg.add(lambda: "ok", name="remote")
    meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "vendor=1"}
    reg.call("remote", context={"_meta": meta})
    [span] = otel.finished()
    assert span.context is not None and format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT_ID and span.parent.is_remote
    assert span.context.trace_state.get("vendor") == "1"
    reg.call("remote", context={"_meta": {"traceparent": "not a traceparent"}})
    assert otel.finished()[-1].parent is None  # a bad header starts a new trace
    with otel.tracer_provider.get_tracer("app").start_as_current_span("local") as local:
        reg.call("remote", context={"_meta": meta})  # the caller's header wins over an unrelated current span
        assert otel.finished()[-1].parent.span_id == int(PARENT_ID, 16)  # type: ignore[union-attr]
        reg.call("remote", context={"_meta": {"traceparent": "not a traceparent"}})
        assert otel.finished()[-1].parent.span_id == local.get_span_context().span_id  # type: ignore[union-attr]
    with otel.tracer_provider.get_tracer("app").start_as_current_span("server", context=otel_extract(meta)) as server:
        reg.call("remote", context={"_meta": meta})  # a current span of that trace (the MCP SDK's) stays the parent
    assert otel.finished()[-2].parent.span_id == server.get_span_context().span_id  # type: ignore[union-attr]


def test_metrics_count_calls_errors_by_type_and_durations(otel: Telemetry) -> None:
    reg = otel.registry()
    reg.add(lambda: "ok", name="fine")
    reg.add(lambda: 1 / 0, name="broken")
    for _ in range(3):
        reg.call("fine")
    reg.try_call("broken")
    calls = {
        (p.attributes["gen_ai.tool.name"], p.attributes.get("error.type")): p.value for p in otel.points("harness_one.tool.calls")
    }
    assert calls == {("fine", None): 3, ("broken", "ZeroDivisionError"): 1}
    [error] = otel.points("harness_one.tool.errors")
    assert error.value == 1 and error.attributes["harness_one.error.kind"] == "tool_failed"
    durations = {p.attributes["gen_ai.tool.name"]: p for p in otel.points("harness_one.tool.duration")}
    assert durations["fine"].count == 3 and durations["broken"].count == 1
    assert durations["fine"].explicit_bounds[:3] == (0.001, 0.005, 0.01)


def test_options_by_name_and_blocking(otel: Telemetry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_OTEL", '{"capture_content": true, "enabled": true}')
    configured = ToolRegistry(autoload=False)
    plugin = configured.plugins.get("otel")
    assert isinstance(plugin, OTelPlugin) and plugin.enabled and plugin.capture_content
    blocked = ToolRegistry(autoload=False, block=["otel"])
    assert "otel" not in blocked.plugins.names()
    inert = ToolRegistry(autoload=False, plugin_options={"otel": {"enabled": False}})
    inert.add(lambda: 1, name="f")
    assert inert.stats()["otel"] == {"enabled": False, "reason": "enabled=False"}
    assert "otel" in inert.plugins.names() and "otel" not in inert.plugins.plan.for_tool(inert.get("f")).on_error_names


NO_IMPORT = """
import sys
{setup}
import harness_one
registry = harness_one.ToolRegistry({options})
registry.add(lambda a, b: a + b, name="add")
assert registry.call("add", {{"a": 1, "b": 2}}) == 3
print(sorted({{m.split(".")[0] for m, mod in list(sys.modules.items()) if m.startswith("opentelemetry") and mod is not None}}))
print([f.name for f in registry.plugins.failures])
print("otel" in registry.plugins.names() and registry.plugins.get("otel").enabled)
"""


def _run(setup: str, options: str) -> list[str]:
    code = textwrap.dedent(NO_IMPORT.format(setup=setup, options=options))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.splitlines()


@pytest.mark.parametrize("options", ["block=['otel']", "standard_plugins=False", "plugin_options={'otel': {'enabled': False}}"])
def test_nothing_of_opentelemetry_is_imported_when_the_plugin_is_off(options: str) -> None:
    assert _run("", options) == ["[]", "[]", "False"]


def test_without_opentelemetry_installed_the_plugin_is_inert_and_no_failure() -> None:
    hide = "sys.modules['opentelemetry'] = None  # as if not installed"
    assert _run(hide, "") == ["[]", "[]", "False"]
    with pytest.raises(subprocess.CalledProcessError):
        _run(hide, "strict=True, plugin_options={'otel': {'enabled': True}}")  # asked for: a load failure


def test_installed_but_unconfigured_opentelemetry_costs_nothing() -> None:
    assert _run("", "") == ["[]", "[]", "False"]  # no provider set: nothing imported, no hook in the plan


def test_an_application_that_configured_opentelemetry_gets_spans_by_default() -> None:
    setup = "from opentelemetry import trace\nfrom opentelemetry.sdk.trace import TracerProvider\ntrace.set_tracer_provider(TracerProvider())"
    assert _run(setup, "") == ["['opentelemetry']", "[]", "True"]


def test_a_request_refused_before_it_became_a_call_is_a_span_and_counted_without_its_name(otel: Telemetry) -> None:
    """An unknown tool name made no span and no metric point: a model probing for tools left no trace."""
    reg = otel.registry()
    reg.add(lambda: 1, name="one")
    assert not reg.try_call("delete_all_users", call_id="c-9").ok
    assert not reg.try_call("one", context=["not", "a", "mapping"]).ok
    spans = {s.attributes["gen_ai.tool.name"]: s for s in otel.finished()}  # type: ignore[index]
    assert {s.name for s in spans.values()} == {"execute_tool"}  # made-up names make no span names either
    probe = spans["delete_all_users"]
    assert probe.status.status_code is StatusCode.ERROR and "delete_all_users" in (probe.status.description or "")
    attributes = dict(probe.attributes or {})
    assert attributes["gen_ai.tool.call.id"] == "c-9" and attributes["harness_one.attempts"] == 0
    assert spans["one"].attributes["error.type"] == "invalid_arguments"  # type: ignore[index]
    calls = otel.points("harness_one.tool.calls")
    assert sorted(p.attributes["error.type"] for p in calls) == sorted([attributes["error.type"], "invalid_arguments"])
    assert all("gen_ai.tool.name" not in p.attributes for p in calls)  # made-up names make no metric series


def test_a_tool_run_in_a_timeout_worker_thread_makes_its_spans_children_of_the_tool_span(otel: Telemetry) -> None:
    """The docs said a sync tool in the timeout plugin's worker threads does not inherit the context;
    the thread runner copies the caller's context, so it does: pinned here, and the docs say so."""
    import threading

    from harness_one_plugins import TimeoutPlugin

    plugin = OTelPlugin(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    reg = ToolRegistry(autoload=False, plugins={"otel": plugin, "timeout": TimeoutPlugin()})
    app = otel.tracer_provider.get_tracer("app")
    ran_in: list[str] = []

    def fetch() -> str:
        ran_in.append(threading.current_thread().name)
        with app.start_as_current_span("http GET"):
            return "page"

    reg.add(fetch, timeout=30, timeout_mode="thread")
    assert reg.call("fetch") == "page"
    assert ran_in != [threading.current_thread().name]  # a worker thread ran it
    spans = {s.name: s for s in otel.finished()}
    inner, tool = spans["http GET"], spans["execute_tool fetch"]
    assert inner.parent is not None and inner.parent.span_id == tool.context.span_id  # type: ignore[union-attr]


class BrokenProcessor:
    """A span processor of the application that raises where it is told to."""

    def __init__(self, where: str) -> None:
        self.where = where

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.where == "on_start":
            raise RuntimeError("processor down")

    def _on_ending(self, span: Any) -> None:
        pass

    def on_end(self, span: Any) -> None:
        if self.where == "on_end":
            raise RuntimeError("processor down")

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class BrokenMeterProvider:
    """A meter provider whose instruments raise on every record."""

    def get_meter(self, *args: Any, **kwargs: Any) -> BrokenMeterProvider:
        return self

    def create_counter(self, *args: Any, **kwargs: Any) -> BrokenMeterProvider:
        return self

    create_histogram = create_counter

    def add(self, *args: Any) -> None:
        raise RuntimeError("meter down")

    record = add


@pytest.mark.parametrize("where", ["on_start", "on_end", "meter"])
def test_a_failing_span_processor_or_meter_never_fails_a_call_whose_tool_ran(
    otel: Telemetry, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    if where == "meter":
        plugin = OTelPlugin(tracer_provider=otel.tracer_provider, meter_provider=BrokenMeterProvider())
    else:
        otel.tracer_provider.add_span_processor(BrokenProcessor(where))  # type: ignore[arg-type]
        plugin = OTelPlugin(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, capture_content=True)
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugins={"otel": plugin})
    charges: list[int] = []

    def charge(amount: int) -> int:
        charges.append(amount)
        return amount

    reg.add(charge, rate_limit={"rate": 1, "burst": 1})
    reg.add(lambda: 1 / 0, name="broken")
    with caplog.at_level(logging.WARNING, logger="harness_one"):
        assert reg.call("charge", {"amount": 5}) == 5 and charges == [5]  # was PluginError: a retry would charge twice
        assert reg.try_call("broken").error.kind == "tool_failed"  # type: ignore[union-attr]
        assert reg.try_call("charge", {"amount": 5}).error.kind == "rate_limited"  # type: ignore[union-attr]
        assert reg.try_call("missing").error.kind == "not_found"  # type: ignore[union-attr]
    assert charges == [5] and reg.stats()["otel"]["sdk_errors"] >= 4
    assert [r.getMessage().split(";")[0] for r in caplog.records] == ["otel: an OpenTelemetry call failed"]  # once
    if where == "on_end":  # what else the SDK does still happens: the other processors' spans, the metrics
        assert len(otel.finished()) == 4 and len(otel.points("harness_one.tool.calls")) == 4
    if where == "meter":
        assert len(otel.finished()) == 4


def test_a_fault_of_the_plugins_own_code_is_not_taken_for_the_sdks(otel: Telemetry, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rendering the result ran inside the ``try`` around the SDK's calls: a fault of it that ended in the
    stdlib (``json``) was counted as an SDK error and swallowed. The plugin's values are worked out first."""
    import harness_one_plugins.otel as module

    def broken(value: Any) -> str:
        return str(json.loads("{not json"))  # the plugin's own helper failing inside the stdlib

    monkeypatch.setattr(module, "rendered", broken)
    plugin = OTelPlugin(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, capture_content=True)
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugins={"otel": plugin})
    reg.add(lambda: {"a": 1}, name="t")
    error = reg.try_call("t").error
    assert isinstance(error, PluginError) and error.plugin == "otel" and "JSONDecodeError" in error.message
    assert "sdk_errors" not in reg.stats()["otel"]
    assert all(span.end_time is not None for span in otel.finished()) and len(otel.finished()) == 2  # the call's span ended


def _texts(value: Any) -> Iterator[str]:
    """Every string in a span or metric point's name, attributes, status and events."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)
    elif value is not None and hasattr(value, "items"):
        for key, item in value.items():
            yield from _texts(key)
            yield from _texts(item)


def test_lone_surrogates_from_the_model_or_a_tool_leave_valid_utf8_spans_and_metrics(otel: Telemetry) -> None:
    """An OTLP exporter encodes a batch as UTF-8: one lone surrogate lost every span of the batch."""
    reg = otel.registry(capture_content=True)
    name = os.fsdecode(b"/srv/report-\xff.txt")  # a file name that is not UTF-8, as os.listdir gives it

    def report(path: str) -> str:
        raise FileNotFoundError(f"no report named {name}")

    reg.add(report, description=f"Reads a report ({name}).")
    reg.add(lambda **kw: f"read {name}", name="listing", parameters={"type": "object"})
    model = json.loads('{"name": "get_weather\\ud83d", "call_id": "call_\\udc00x", "arg": "\\udfff"}')  # a broken emoji
    assert reg.try_call(model["name"], {}).error.kind == "not_found"  # type: ignore[union-attr]
    assert reg.call("listing", {model["arg"]: model["arg"]}, call_id=model["call_id"]) == f"read {name}"
    assert reg.try_call("report", {"path": "x"}).error.kind == "tool_failed"  # type: ignore[union-attr]
    spans = otel.finished()
    texts = [
        text
        for span in spans
        for text in _texts(
            [span.name, dict(span.attributes or {}), span.status.description, [dict(e.attributes or {}) for e in span.events]]
        )
    ]
    texts += [t for metric in METRICS for point in otel.points(metric) for t in _texts(dict(point.attributes))]
    assert len(texts) > 30
    for text in texts:
        text.encode("utf-8")  # raised UnicodeEncodeError: surrogates not allowed
    by_name = {s.name: s for s in spans}
    assert by_name["execute_tool"].attributes["gen_ai.tool.name"] == "get_weather\\ud83d"  # type: ignore[index]
    listing = by_name["execute_tool listing"].attributes or {}
    assert listing["gen_ai.tool.call.id"] == "call_\\udc00x" and "\\udfff" in str(listing["gen_ai.tool.call.arguments"])
    assert "report-\\udcff.txt" in str(listing["gen_ai.tool.call.result"])
    failed = by_name["execute_tool report"]
    assert (failed.status.description or "").endswith("no report named /srv/report-\\udcff.txt")
    # (Tool.create stores a description's lone surrogate as U+FFFD)
    assert (failed.attributes or {})["gen_ai.tool.description"] == "Reads a report (/srv/report-\ufffd.txt)."
    replayed = ToolExecutionError(ValueError("over"), tool="report")
    replayed.cause = "Quota\udcffError"  # a type name replayed from a shared store
    assert error_type(replayed) == "Quota\\udcffError"
