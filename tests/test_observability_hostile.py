"""Secrets and sizes in what harness-one logs and traces, end to end: load failures, call ids, error texts, arguments."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness_one import REDACTED, PluginError, ToolRegistry, hookimpl
from harness_one._entrypoints import PLUGIN_GROUP, TOOL_GROUP
from harness_one._errors import ERROR_TEXT_LIMIT
from harness_one_plugins import LoggingPlugin, OTelPlugin

SECRET = "hunter2S3CRET"
FAILING_PLUGIN = f"""
from harness_one import hookimpl

class Audit:
    name = "audit"

    @hookimpl
    def harness_configure(self, registry):
        raise ConnectionError('connection failed: "postgresql://audit:{SECRET}@db.internal/audit"; password={SECRET}')
"""
FAILING_TOOLS = f"raise ConnectionError('could not connect to \"postgresql://app:{SECRET}@db.internal:5432/app\": timeout')\n"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def text(self) -> str:
        return "\n".join(f"{r.getMessage()} {getattr(r, 'harness_one', '')}" for r in self.records)


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    logger = logging.getLogger("harness_one")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)


@pytest.fixture
def spans() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider
    provider.shutdown()


def traced(provider: TracerProvider, **options: Any) -> ToolRegistry:
    """A registry with the otel plugin (content captured) and the logging plugin (arguments logged)."""
    otel = OTelPlugin(tracer_provider=provider, capture_content=True, **options.pop("otel", {}))
    logging_plugin = LoggingPlugin(log_arguments=True, level=logging.DEBUG, **options.pop("logging", {}))
    return ToolRegistry(autoload=False, plugins={"otel": otel, "logging": logging_plugin})


# ---------------------------------------------------------------------------- load failures


def test_a_plugin_failing_at_set_up_is_reported_and_logged_without_its_password(dists: Any, records: Records) -> None:
    dists.make("hx-audit", {"hx_audit": FAILING_PLUGIN}, {PLUGIN_GROUP: {"audit": "hx_audit:Audit"}})
    registry = ToolRegistry()
    [failed] = registry.plugins.failures
    assert failed.name == "audit" and "ConnectionError" in failed.error and "db.internal/audit" in failed.error
    assert f"postgresql://{REDACTED}@db.internal/audit" in failed.error and f"password={REDACTED}" in failed.error
    assert "Traceback" in failed.traceback and "harness_configure" in failed.traceback
    logged = records.text()
    assert "entry point failed to load" in logged and "entry point traceback" in logged
    assert SECRET not in f"{failed} {failed.traceback} {logged}"
    with pytest.raises(PluginError) as err:
        ToolRegistry(strict=True)
    assert "db.internal/audit" in err.value.message and SECRET not in err.value.message


def test_a_plugin_registered_directly_fails_without_its_password() -> None:
    class Audit:
        @hookimpl
        def harness_configure(self, registry: ToolRegistry) -> None:
            raise ConnectionError(f"connect to admin:{SECRET}@db.internal:5432 failed; token={SECRET}")

    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False, plugins={"audit": Audit()})
    assert err.value.message == (
        f"Plugin 'audit' failed in harness_configure: ConnectionError: connect to admin:{REDACTED}@db.internal:5432 "
        f"failed; token={REDACTED}"
    )


def test_a_tool_package_failing_at_import_is_reported_without_its_password(dists: Any, records: Records) -> None:
    dists.make("hx-dbtools", {"hx_dbtools": FAILING_TOOLS}, {TOOL_GROUP: {"query_orders": "hx_dbtools"}})
    registry = ToolRegistry(discover=True, autoload=False)
    assert "query_orders" not in registry.names()  # (discovery runs on the first look-up)
    [failed] = registry.discovery.failures
    assert failed.error == f'ConnectionError: could not connect to "postgresql://{REDACTED}@db.internal:5432/app": timeout'
    assert SECRET not in f"{failed.traceback} {records.text()}" and "hx_dbtools" in failed.traceback


def test_a_huge_load_failure_keeps_a_bounded_traceback(dists: Any, records: Records) -> None:
    """A package whose import error echoes 5 MB kept (and logged) a 5 MB traceback, masked character by character."""
    huge = "import os\nraise RuntimeError('token=S_HUGE ' + 'x' * 5_000_000)\n"
    dists.make("hx-huge", {"hx_huge": huge}, {TOOL_GROUP: {"huge_tool": "hx_huge"}})
    registry = ToolRegistry(discover=True, autoload=False)
    assert "huge_tool" not in registry.names()
    [failed] = registry.discovery.failures
    assert len(failed.traceback) <= ERROR_TEXT_LIMIT and "hx_huge" in failed.traceback and "S_HUGE" not in failed.traceback
    assert len(records.text()) < 5 * ERROR_TEXT_LIMIT


def test_doctor_shows_a_load_failure_without_its_password(runner: Any, dists: Any) -> None:
    from harness_one._cli import main

    dists.make("hx-audit", {"hx_audit": FAILING_PLUGIN}, {PLUGIN_GROUP: {"audit": "hx_audit:Audit"}})
    dists.make("hx-dbtools", {"hx_dbtools": FAILING_TOOLS}, {TOOL_GROUP: {"query_orders": "hx_dbtools"}})
    result = runner.invoke(main, ["doctor"])
    assert result.exit_code == 1 and "hx-audit" in result.output and "hx-dbtools" in result.output, result.output
    assert f"postgresql://{REDACTED}@db.internal" in result.output and SECRET not in result.output


# ---------------------------------------------------------------------------- calls


@pytest.mark.parametrize("password", ["Xy7,Pq9;Zz", "k3y;Rest0fSecret", "(Rt5%vQ)w", "<9aB!x>Q"])
def test_a_password_with_punctuation_is_masked_whole_for_the_model_the_log_and_the_span(
    password: str, spans: tuple[InMemorySpanExporter, TracerProvider], records: Records
) -> None:
    exporter, provider = spans
    registry = traced(provider)

    def connect(n: int) -> str:
        raise ConnectionError(f"authentication failed: user=app password={password} host=db")

    registry.add(connect, description="Connect.")
    result = registry.try_call("connect", {"n": 1})
    expected = f"authentication failed: user=app password={REDACTED} host=db"
    assert result.error is not None and result.error.message.endswith(expected)
    [record] = [r for r in records.records if r.getMessage().startswith("tool_call")]
    assert record.harness_one["error"].endswith(expected)  # type: ignore[attr-defined]
    [span] = exporter.get_finished_spans()
    assert span.status.description is not None and span.status.description.endswith(expected)


def test_a_call_id_is_masked_and_cut_in_the_log_and_the_span(
    spans: tuple[InMemorySpanExporter, TracerProvider], records: Records
) -> None:
    exporter, provider = spans
    registry = traced(provider, logging={"secret_values": ["Zq9-plain"]}, otel={"secret_values": ["Zq9-plain"]})
    registry.add(lambda x: x, name="echo", description="Echo.")
    registry.call("echo", {"x": 1}, call_id=f"https://bot:{SECRET}@hooks.example/cb?token={SECRET}&n=Zq9-plain")
    registry.call("echo", {"x": 1}, call_id="A" * 1_000_000)
    registry.call("echo", {"x": 1}, call_id="call_abc123")
    ids = [r.harness_one["call_id"] for r in records.records if r.getMessage().startswith("tool_call")]  # type: ignore[attr-defined]
    traced_ids = [s.attributes["gen_ai.tool.call.id"] for s in exporter.get_finished_spans() if s.attributes]
    for shown in (ids, traced_ids):
        assert shown[0] == f"https://{REDACTED}@hooks.example/cb?token={REDACTED}&n={REDACTED}"
        assert str(shown[1]).startswith("A" * 200) and str(shown[1]).endswith("... (1000000 characters)")
        assert len(str(shown[1])) < 230 and shown[2] == "call_abc123"


def test_a_large_refused_argument_makes_a_bounded_log_field_and_span_attribute(
    spans: tuple[InMemorySpanExporter, TracerProvider], records: Records
) -> None:
    exporter, provider = spans
    registry = traced(provider)
    registry.add(lambda rows: 0, name="ingest", description="Ingest.")
    rows = [["x" * 2000] * 100 for _ in range(50)]  # 10 MB of text: refused by the 256 KiB limit
    result = registry.try_call("ingest", {"rows": rows})
    assert result.error is not None and result.error.kind == "invalid_arguments"
    registry.add(lambda **kw: 1, name="anykw", description="Any keywords.", parameters={"type": "object"})
    registry.try_call("anykw", {f"k{i:02}" + "-" * 5000: 1 for i in range(64)})
    first, second = [r.harness_one for r in records.records if r.getMessage().startswith("tool_call")]  # type: ignore[attr-defined]
    assert len(json.dumps(first["arguments"])) < 16_600 and "more items" in json.dumps(first["arguments"])
    assert len(json.dumps(second["arg_keys"])) < 64 * 240  # was 64 keys of 2,000 characters
    assert len(exporter.get_finished_spans()[0].attributes["gen_ai.tool.call.arguments"]) < 16_600  # type: ignore[index, arg-type]


def test_a_lone_surrogate_from_the_model_or_a_tool_leaves_valid_utf8_in_the_log_and_the_span(
    spans: tuple[InMemorySpanExporter, TracerProvider], records: Records
) -> None:
    """A half emoji the model sent (``json.loads`` reads ``"\\ud83d"``), a non-UTF-8 file name in a tool's
    error: a JSON log renderer or an OTLP exporter encoding them as UTF-8 failed (the whole batch, for OTLP)."""
    exporter, provider = spans
    registry = traced(provider)
    name = os.fsdecode(b"report-\xff.txt")

    def read(path: str) -> str:
        raise FileNotFoundError(f"no file {name}")

    registry.add(read, description="Read a file.")
    model = json.loads('{"name": "get_weather\\ud83d", "call_id": "call_\\udc00x", "path": "a\\ud83d"}')
    assert registry.try_call(model["name"], {}, call_id=model["call_id"]).error.kind == "not_found"  # type: ignore[union-attr]
    assert registry.try_call("read", {"path": model["path"]}, call_id=model["call_id"]).error.kind == "tool_failed"  # type: ignore[union-attr]
    logged = [r.harness_one for r in records.records if r.getMessage().startswith("tool_call")]  # type: ignore[attr-defined]
    assert [(e["tool"], e["call_id"]) for e in logged] == [("get_weather\\ud83d", "call_\\udc00x"), ("read", "call_\\udc00x")]
    assert logged[1]["error"].endswith("no file report-\\udcff.txt") and logged[1]["arguments"] == {"path": "a\\ud83d"}
    json.dumps(logged, ensure_ascii=False).encode("utf-8")  # what a JSON renderer writes
    for span in exporter.get_finished_spans():
        json.dumps([span.name, dict(span.attributes or {}), span.status.description], ensure_ascii=False).encode("utf-8")
