"""Trace context over MCP: ``_meta`` reaches ``Call.context``, the otel span continues ``_meta.traceparent``,
and an imported tool sends the caller's trace as ``_meta.traceparent``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp_support import Session, http_server
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness_one import Call, ToolRegistry
from harness_one.mcp import create_server, http_app, import_tools
from harness_one_plugins import OTelPlugin

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def traced(provider: TracerProvider) -> tuple[ToolRegistry, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    registry = ToolRegistry(autoload=False, plugins={"otel": OTelPlugin(tracer_provider=provider)})

    async def look(call: Call) -> str:
        """Record the call context."""
        seen.append(dict(call.context))
        return "ok"

    registry.add(look)
    return registry, seen


def the_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    [span] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool look"]
    return span


def assert_continues(span: ReadableSpan) -> None:
    assert span.context is not None and format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT_ID and span.parent.is_remote


async def test_a_clients_traceparent_is_the_parent_of_the_servers_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    registry, seen = traced(provider)
    for mode in ("auto", "legacy"):  # 2026-07-28 and 2025-11-25
        exporter.clear()
        async with Session(create_server(registry), mode=mode) as client:
            result = await client.call_tool("look", {}, meta={"traceparent": TRACEPARENT, "tracestate": "v=1", "app": 7})
        assert not result.is_error
        assert seen[-1]["_meta"]["traceparent"] == TRACEPARENT and seen[-1]["_meta"]["app"] == 7
        span = the_span(exporter)
        assert_continues(span)
        assert span.context.trace_state.get("v") == "1"


async def test_over_streamable_http_with_a_progress_token(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    registry, seen = traced(provider)
    app = http_app(registry, stateless=True)
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:9") as http:
            for mode in ("auto", "legacy"):
                target = streamable_http_client("http://127.0.0.1:9/mcp", http_client=http)
                async with Session(target, mode=mode) as client:
                    await client.call_tool("look", {}, meta={"traceparent": TRACEPARENT})
                    assert_continues(the_span(exporter))
                    exporter.clear()
                    await client.call_tool("look", {}, progress_callback=on_progress)
                if mode == "legacy":  # 2026-07-28 carries progress another way
                    assert "progressToken" in seen[-1]["_meta"]
                assert the_span(exporter).parent is None  # no traceparent: a new trace
                exporter.clear()


def test_an_imported_tool_sends_the_callers_trace(spans: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path) -> None:
    """A real ``harness-one serve`` echoes the ``_meta`` it received: the importing side's span is its parent."""
    provider, exporter = spans
    registry = ToolRegistry(autoload=False, plugins={"otel": OTelPlugin(tracer_provider=provider)})
    with http_server(tmp_path) as url:
        remote = import_tools(registry, url, name="up", prefix="up")
        try:
            meta = registry.call("up_meta")
            [span] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool up_meta"]
            assert span.context is not None
            _version, trace_id, parent_id, _flags = meta["traceparent"].split("-")
            assert trace_id == format(span.context.trace_id, "032x")
            assert parent_id == format(span.context.span_id, "016x")  # no SDK client span here: the tool span itself
            plain = ToolRegistry(autoload=False)  # no otel plugin, no current span: nothing sent
            other = import_tools(plain, url, name="up", prefix="up")
            try:
                assert "traceparent" not in plain.call("up_meta")
            finally:
                other.close()
        finally:
            remote.close()
