"""Dispatch keeps the caller's context (trace parents) in its threads, and answers ids it cannot write back unpaired."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness_one import ManualClock, ToolRegistry
from harness_one.dispatch import dispatch
from harness_one_plugins import OTelPlugin

TURN = contextvars.ContextVar("turn", default="none")


def _traced() -> tuple[ToolRegistry, TracerProvider, InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    registry = ToolRegistry(autoload=False, clock=ManualClock(), plugins={"otel": OTelPlugin(tracer_provider=provider)})
    return registry, provider, spans


def _calls(*names: str) -> list[dict[str, object]]:
    return [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}} for i, name in enumerate(names)]


def test_each_of_several_calls_is_a_child_of_the_callers_span() -> None:
    registry, provider, spans = _traced()
    threads: set[int] = set()

    @registry.add
    def first() -> str:
        """First."""
        threads.add(threading.get_ident())
        return TURN.get()

    @registry.add
    def second() -> str:
        """Second."""
        threads.add(threading.get_ident())
        return TURN.get()

    token = TURN.set("turn 1")
    try:
        with provider.get_tracer("app").start_as_current_span("agent turn") as turn:
            answers = dispatch(registry, _calls("first", "second", "first"))
    finally:
        TURN.reset(token)
    assert [a["tool_call_id"] for a in answers] == ["c0", "c1", "c2"]  # in the order of the calls
    assert [a["content"] for a in answers] == ["turn 1"] * 3  # every context variable, not only the span
    assert threading.get_ident() not in threads  # they did run in the pool
    tools = [s for s in spans.get_finished_spans() if s.name.startswith("execute_tool")]
    assert len(tools) == 3
    for span in tools:
        assert span.parent is not None and span.parent.span_id == turn.get_span_context().span_id
        assert span.context is not None and span.context.trace_id == turn.get_span_context().trace_id


def test_one_call_run_in_the_pool_under_a_running_loop_is_a_child_of_the_callers_span() -> None:
    registry, provider, spans = _traced()

    @registry.add
    def only() -> str:
        """Only."""
        return "ok"

    async def handler() -> str:  # sync code called from an async handler: the single call runs in the pool
        with provider.get_tracer("app").start_as_current_span("handler") as span:
            assert dispatch(registry, _calls("only"))[0]["content"] == "ok"
        return format(span.get_span_context().span_id, "016x")

    parent = asyncio.run(handler())
    (tool,) = [s for s in spans.get_finished_spans() if s.name == "execute_tool only"]
    assert tool.parent is not None and format(tool.parent.span_id, "016x") == parent


def test_a_tool_setting_a_context_variable_leaves_the_other_calls_and_the_caller_alone() -> None:
    registry = ToolRegistry(autoload=False, clock=ManualClock())

    @registry.add
    def mark() -> str:
        """Set the turn."""
        before = TURN.get()
        TURN.set("changed")
        return before

    answers = dispatch(registry, _calls("mark", "mark", "mark"), concurrency=1 + 2)
    assert [a["content"] for a in answers] == ["none", "none", "none"]
    assert TURN.get() == "none"


@pytest.mark.parametrize(
    ("provider", "call", "key"),
    [
        ("openai", {"id": "c\ud800", "type": "function", "function": {"name": "ok", "arguments": "{}"}}, "tool_call_id"),
        ("anthropic", {"type": "tool_use", "id": "t\udc00", "name": "ok", "input": {}}, "tool_use_id"),
        ("openai-responses", {"type": "function_call", "call_id": "r\ud800", "name": "ok", "arguments": "{}"}, "call_id"),
        ("gemini", {"functionCall": {"id": "g\ud800", "name": "ok", "args": {}}}, "id"),
        ("openai", {"id": float("nan"), "type": "function", "function": {"name": "ok", "arguments": "{}"}}, "tool_call_id"),
        ("anthropic", {"type": "tool_use", "id": float("inf"), "name": "ok", "input": {}}, "tool_use_id"),
        ("gemini", {"functionCall": {"id": float("-inf"), "name": "ok", "args": {}}}, "id"),
    ],
)
def test_an_id_no_answer_can_carry_is_an_invalid_call_answered_without_it(
    provider: str, call: dict[str, object], key: str
) -> None:
    registry = ToolRegistry(autoload=False, clock=ManualClock())
    ran: list[str] = []

    @registry.add
    def ok() -> str:
        """Ok."""
        ran.append("ok")
        return "fine"

    (answer,) = dispatch(registry, [call], provider=provider)
    assert ran == []  # not run: its answer could not be paired with it
    assert answer.get(key) is None
    text = json.dumps(answer, ensure_ascii=False, allow_nan=False)  # valid JSON ...
    text.encode("utf-8")  # ... and valid UTF-8
    assert "Invalid tool call" in text and "cannot be written back" in text


def test_ids_an_answer_can_carry_are_kept() -> None:
    registry = ToolRegistry(autoload=False, clock=ManualClock())

    @registry.add
    def ok() -> str:
        """Ok."""
        return "fine"

    calls = [
        {"id": "é-\U0001f600", "type": "function", "function": {"name": "ok", "arguments": "{}"}},
        {"id": 1.5, "type": "function", "function": {"name": "ok", "arguments": "{}"}},
    ]
    assert [a["tool_call_id"] for a in dispatch(registry, calls)] == ["é-\U0001f600", 1.5]
