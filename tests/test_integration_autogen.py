"""AutoGen: harness tools in real ``AssistantAgent`` runs driven by ``ReplayChatCompletionClient``.

Shown: two users' assistants sharing one registry in one team run, each with its own
``context=``, so a per-user rate limit keeps separate buckets; AutoGen's call ids becoming
harness call ids; a context function receiving the ``FunctionCall``; errors as error results.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

import approval_support
import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import ToolCallExecutionEvent
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import EVENT_LOGGER_NAME, CancellationToken, FunctionCall
from autogen_core.logging import ToolCallEvent
from autogen_core.models import CreateResult, RequestUsage
from autogen_ext.models.replay import ReplayChatCompletionClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness_one import ApprovalUnavailable, ToolError, ToolExecutionError, ToolRegistry, define_tool
from harness_one.integrations.autogen import HarnessAutoGenTool, as_autogen_tools, to_autogen

MODEL_INFO: Any = {
    "function_calling": True,
    "vision": False,
    "json_output": False,
    "family": "unknown",
    "structured_output": False,
}


if TYPE_CHECKING:
    from conftest import PerUserAdd


def replay(*turns: list[tuple[str, dict[str, Any]]]) -> ReplayChatCompletionClient:
    """A client whose every turn is the given (call id, arguments) calls of ``add``."""
    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    results = [
        CreateResult(
            finish_reason="function_calls",
            content=[FunctionCall(id=call_id, name="add", arguments=json.dumps(args)) for call_id, args in calls],
            usage=usage,
            cached=False,
        )
        for calls in turns
    ]
    return ReplayChatCompletionClient(results, model_info=MODEL_INFO)


def results(messages: Any) -> dict[str, tuple[str, bool]]:
    return {r.call_id: (r.content, r.is_error) for m in messages if isinstance(m, ToolCallExecutionEvent) for r in m.content}


def test_two_users_in_one_team_run(per_user_add: PerUserAdd) -> None:
    registry, add, seen = per_user_add
    alice = AssistantAgent(
        "alice_assistant",
        model_client=replay([("a0", {"a": "two", "b": 3})], [("a1", {"a": 2, "b": 3})], [("a2", {"a": 1, "b": 1})]),
        tools=as_autogen_tools([add], registry, context={"user": "alice"}),
    )
    bob = AssistantAgent(
        "bob_assistant",
        model_client=replay([("b0", {"a": 1, "b": 1})], [("b1", {"a": 1, "b": 1})]),
        tools=[to_autogen(add, registry, context={"user": "bob"})],
    )
    # Turns: alice a0, bob b0, alice a1, bob b1, alice a2. Bob's token is spent before a1, alice's is not.
    team = RoundRobinGroupChat([alice, bob], max_turns=5)
    out = results(asyncio.run(team.run(task="add things")).messages)
    assert out["a0"][1] and "$.a: expected number, got string" in out["a0"][0]
    assert out["b0"] == ("2", False)
    assert out["a1"] == ("5", False)
    for refused in ("b1", "a2"):
        assert out[refused][1] and "rate limited" in out[refused][0] and "Retry after" in out[refused][0]
    assert seen == [("b0", "bob"), ("a1", "alice")]  # AutoGen's call ids are the harness call ids


def test_context_function_gets_the_function_call(per_user_add: PerUserAdd) -> None:
    registry, _add, seen = per_user_add
    received: list[FunctionCall] = []

    def context(call: FunctionCall) -> dict[str, Any]:
        received.append(call)
        return {"user": "carol"}

    tool = to_autogen("add", registry, context=context)
    assert isinstance(tool, HarnessAutoGenTool) and tool.schema["parameters"]["required"] == ["a", "b"]
    agent = AssistantAgent("assistant", model_client=replay([("c0", {"a": 1, "b": 2})]), tools=[tool])
    out = results(asyncio.run(agent.run(task="add")).messages)
    assert out == {"c0": ("3", False)} and seen == [("c0", "carol")]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in received] == [("c0", "add", {"a": 1, "b": 2})]


@pytest.mark.parametrize("context", [lambda call: {"user": call.user}, lambda call: "alice"])
def test_a_failing_context_function_is_an_error_result(per_user_add: PerUserAdd, context: Any) -> None:
    registry, add, seen = per_user_add
    agent = AssistantAgent(
        "assistant", model_client=replay([("c0", {"a": 1, "b": 2})]), tools=[to_autogen(add, registry, context=context)]
    )
    content, is_error = results(asyncio.run(agent.run(task="add")).messages)["c0"]
    # It used to be the exception's own text ("'FunctionCall' object has no attribute 'user'").
    assert is_error and content.startswith("Tool 'add' was not called: the application's context= function")
    assert "alice" not in content and "user" not in content and seen == []


def test_calls_are_traced_and_logged_as_autogens_own_tools(
    per_user_add: PerUserAdd, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # run_json replaced BaseTool's, dropping its ToolCallEvent and its trace span.
    registry, add, _ = per_user_add
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    monkeypatch.setattr(trace, "get_tracer", provider.get_tracer)  # AutoGen's spans go to the global tracer
    tool = to_autogen(add, registry, context={"user": "ann"})
    with caplog.at_level(logging.INFO, logger=EVENT_LOGGER_NAME):
        assert asyncio.run(tool.run_json({"a": 1, "b": 2}, CancellationToken(), call_id="e0")) == 3
    [event] = [r.msg for r in caplog.records if isinstance(r.msg, ToolCallEvent)]
    assert {k: event.kwargs[k] for k in ("tool_name", "arguments", "result")} == {
        "tool_name": "add",
        "arguments": {"a": 1, "b": 2},
        "result": "3",
    }
    [span] = [s for s in spans.get_finished_spans() if s.name == "execute_tool add"]
    assert span.attributes is not None and span.attributes["gen_ai.tool.call.id"] == "e0"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """The spans AutoGen's runtime ends (it traces to the global tracer)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer", provider.get_tracer)
    return exporter


def tool_span(spans: InMemorySpanExporter, name: str) -> Any:
    [span] = [s for s in spans.get_finished_spans() if s.name == f"execute_tool {name}"]
    return span


def test_a_call_needing_approval_keeps_its_class(spans: InMemorySpanExporter) -> None:
    """A held call is ``ApprovalUnavailable`` (kind ``approval_unavailable``) as in the other adapters.

    It was a bare ``ToolError`` (``tool_error``): the tool span's ``error.type`` and a direct
    ``run_json`` showed the application a tool error, not a call refused for want of approval.
    """
    bank = approval_support.Bank()
    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    call = FunctionCall(id="t-1", name="transfer", arguments=json.dumps({"to": "bob", "amount": 500}))
    client = ReplayChatCompletionClient(
        [CreateResult(finish_reason="function_calls", content=[call], usage=usage, cached=False)], model_info=MODEL_INFO
    )
    [tool] = as_autogen_tools(["transfer"], bank.registry)
    text, is_error = results(
        asyncio.run(AssistantAgent("assistant", model_client=client, tools=[tool]).run(task="pay")).messages
    )["t-1"]
    assert is_error and text.startswith("The call of 'transfer' was not run: it needs a person's approval")
    span = tool_span(spans, "transfer")
    assert span.attributes["error.type"] == "ApprovalUnavailable" and span.status.description.endswith(text)
    with pytest.raises(ApprovalUnavailable) as raised:
        asyncio.run(tool.run_json({"to": "bob", "amount": 500}, CancellationToken(), call_id="t-2"))
    assert (raised.value.kind, raised.value.tool, raised.value.call_id) == ("approval_unavailable", "transfer", "t-2")
    assert bank.sent == []


def test_a_failing_tool_keeps_its_class_and_its_unmasked_exception_stays_out_of_the_span(
    spans: InMemorySpanExporter,
) -> None:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def connect() -> str:
        """Connect."""
        raise ConnectionError("cannot reach postgres://app:hunter2-pw@db.internal/app")

    tool = to_autogen(connect, registry)
    with pytest.raises(ToolExecutionError) as raised:
        asyncio.run(tool.run_json({}, CancellationToken(), call_id="f-1"))
    assert raised.value.kind == "tool_failed" and raised.value.__cause__ is None
    assert isinstance(raised.value.cause, ConnectionError)  # the application still has the tool's exception
    span = tool_span(spans, "connect")
    assert span.attributes["error.type"] == "ToolExecutionError"
    recorded = json.dumps([dict(event.attributes or {}) for event in span.events])
    assert "ConnectionError" in recorded or "ToolExecutionError" in recorded
    assert "hunter2-pw" not in recorded and "hunter2-pw" not in str(raised.value)


def test_a_failing_context_function_s_exception_stays_out_of_the_span(spans: InMemorySpanExporter) -> None:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    def context(call: Any) -> dict[str, Any]:
        raise KeyError("cannot reach postgres://app:hunter2-pw@db.internal/app")

    tool = to_autogen(add, registry, context=context)
    with pytest.raises(ToolError) as raised:
        asyncio.run(tool.run_json({"a": 1, "b": 2}, CancellationToken(), call_id="c-1"))
    assert raised.value.__cause__ is None and raised.value.__context__ is None
    assert "was not called" in str(raised.value) and "hunter2-pw" not in str(raised.value)
    recorded = json.dumps([dict(event.attributes or {}) for event in tool_span(spans, "add").events])
    assert "ToolError" in recorded and "hunter2-pw" not in recorded


def test_a_call_needing_approval_is_refused_not_promised() -> None:
    # AutoGen has no approval step: the model read "Do not call it again: its result comes once it is
    # approved", a result nothing would ever bring to this run.
    bank = approval_support.Bank()
    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    call = FunctionCall(id="t-1", name="transfer", arguments=json.dumps({"to": "bob", "amount": 500}))
    client = ReplayChatCompletionClient(
        [CreateResult(finish_reason="function_calls", content=[call], usage=usage, cached=False)], model_info=MODEL_INFO
    )
    agent = AssistantAgent("assistant", model_client=client, tools=as_autogen_tools(["transfer"], bank.registry))
    text, is_error = results(asyncio.run(agent.run(task="pay bob 500")).messages)["t-1"]
    assert is_error and bank.sent == []
    assert "was not run: it needs a person's approval, and no one was asked" in text and "result comes" not in text


def test_a_cancellation_token_cancels_a_call_made_without_the_workbench() -> None:
    """``ToolAgent`` and other services' assistants call ``run_json`` directly, with their token: a token cancelled
    before runs nothing, one cancelled meanwhile cancels the call (its async tool sees ``CancelledError``)."""
    registry = ToolRegistry(autoload=False)
    log: list[str] = []

    async def wait(n: int) -> str:
        log.append(f"started {n}")
        try:
            await asyncio.Event().wait()  # until cancelled
        except asyncio.CancelledError:
            log.append(f"cancelled {n}")
            raise
        return "never"

    async def quick(n: int) -> int:
        return n * 2

    define_tool(wait, registry=registry)
    define_tool(quick, registry=registry)
    tool, fast = to_autogen("wait", registry), to_autogen("quick", registry)

    async def main() -> None:
        token = CancellationToken()
        token.cancel()
        with pytest.raises(asyncio.CancelledError):  # (not TimeoutError: a bound, should the call run after all)
            await asyncio.wait_for(tool.run_json({"n": 1}, token, call_id="c1"), 10)
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(tool.run(tool.args_type()(n=1), token), 10)  # type: ignore[call-arg]
        assert log == []  # nothing ran
        token = CancellationToken()
        running = asyncio.ensure_future(tool.run_json({"n": 2}, token, call_id="c2"))
        while not log:
            await asyncio.sleep(0)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(running, 10)
        assert log == ["started 2", "cancelled 2"]
        assert await fast.run_json({"n": 4}, CancellationToken(), call_id="c3") == 8  # a live token: the call as ever

    asyncio.run(main())


def test_a_schema_that_cannot_be_inlined_is_kept_as_it_is_and_a_warning_names_the_tool(caplog: pytest.LogCaptureFixture) -> None:
    registry = ToolRegistry(autoload=False)
    node: dict[str, Any] = {"type": "object", "properties": {"v": {"type": "integer"}}, "additionalProperties": False}
    defs = {"L0": node}
    for i in range(1, 13):  # each level two fields of the one below: inlined, 2**12 copies of L0 and more
        defs[f"L{i}"] = {"type": "object", "properties": {"a": {"$ref": f"#/$defs/L{i - 1}"}, "b": {"$ref": f"#/$defs/L{i - 1}"}}}
    parameters = {"type": "object", "properties": {"x": {"$ref": "#/$defs/L12"}}, "required": ["x"], "$defs": defs}
    registry.add(lambda x: "ok", name="wide", parameters=parameters)
    registry.add(lambda a: a, name="flat", parameters={"type": "object", "properties": {"a": {"type": "integer"}}})
    with caplog.at_level(logging.WARNING, logger="harness_one.integrations"):
        tools = as_autogen_tools(registry=registry)
    warned = [r for r in caplog.records if r.name == "harness_one.integrations" and r.levelno == logging.WARNING]
    assert [r.harness_one["tool"] for r in warned] == ["wide"]  # type: ignore[attr-defined]
    assert warned[0].harness_one["adapter"] == "to_autogen"  # type: ignore[attr-defined]
    assert "more than 20000 schema nodes" in warned[0].harness_one["reasons"][0]  # type: ignore[attr-defined]
    wide = next(t for t in tools if t.name == "wide")
    assert wide.schema["parameters"]["$defs"] == defs  # as it is (a copy)
