"""Session 35, dispatch and ``harness-one run``: another provider's calls given as a list (or its whole response given
as one call), a call without its arguments field (or with Gemini's streamed ones), and the id an oversized or
cut-short ``run`` line is answered on (the id its whole line would have had)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import ToolUseBlock
from click.testing import CliRunner
from google.genai import types as gt
from openai.types.chat import ChatCompletionMessage
from openai.types.responses import ResponseFunctionToolCall

from harness_one import ArgumentLimits, ToolRegistry
from harness_one._cli import _main, main
from harness_one.dispatch import adispatch, dispatch

PROVIDERS = ("openai", "openai-responses", "anthropic", "gemini")


def _registry() -> tuple[ToolRegistry, list[str]]:
    """A ``delete_files`` tool whose default pattern is ``*``: run with its arguments dropped, it deletes everything."""
    registry, ran = ToolRegistry(autoload=False), []

    def delete_files(pattern: str = "*") -> str:
        ran.append(pattern)
        return f"DELETED {pattern}"

    registry.add(delete_files, name="delete_files")
    return registry, ran


_ARGS: dict[str, object] = {"pattern": "*.tmp"}
#: Each provider's call of ``delete_files("*.tmp")``, as its SDK returns it.
CALLS: dict[str, Any] = {
    "openai": ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "delete_files", "arguments": json.dumps(_ARGS)}}
            ],
        }
    ).tool_calls[0],  # type: ignore[index]
    "openai-responses": ResponseFunctionToolCall(
        type="function_call", call_id="call_1", name="delete_files", arguments=json.dumps(_ARGS)
    ),
    "anthropic": ToolUseBlock(type="tool_use", id="toolu_1", name="delete_files", input=_ARGS),
    "gemini": gt.FunctionCall(id="g1", name="delete_files", args=_ARGS),
}


def _both(registry: ToolRegistry, calls: Any, provider: str) -> list[dict[str, Any]]:
    sync = dispatch(registry, calls, provider=provider)
    assert asyncio.run(adispatch(registry, calls, provider=provider)) == sync
    return list(sync)


@pytest.mark.parametrize("given", PROVIDERS)
@pytest.mark.parametrize("sent", [*PROVIDERS, "gemini-part"])
def test_another_providers_calls_in_a_list_are_a_type_error_naming_it_and_none_runs(sent: str, given: str) -> None:
    """Gemini calls given to the Anthropic dispatcher (and the like) ran with their arguments dropped (``{}``: the
    tool's defaults, ``pattern="*"``), or were dropped with no answer; as the message they came in already was, they
    are refused before any call runs, naming the provider to dispatch them with."""
    call = gt.Part(function_call=CALLS["gemini"]) if sent == "gemini-part" else CALLS[sent]
    sent = sent.removesuffix("-part")
    registry, ran = _registry()
    if sent == given:
        assert _both(registry, [call], given) and ran == ["*.tmp", "*.tmp"]
        return
    own = CALLS[given]
    for calls in ([call], [own, call], [call, own]):
        with pytest.raises(TypeError, match=rf"^the calls include tool calls in the {sent} format, not the {given} format"):
            dispatch(registry, calls, provider=given)
        with pytest.raises(TypeError, match=rf"dispatch them with provider='{sent}'$"):
            asyncio.run(adispatch(registry, calls, provider=given))
    assert ran == []


def test_a_call_of_no_call_at_all_in_the_list_still_says_so_first() -> None:
    registry, ran = _registry()
    with pytest.raises(TypeError, match="a tool call must be a dict or a provider SDK object, not str"):
        dispatch(registry, [CALLS["openai"], "call_1"], provider="anthropic")
    assert ran == []


@pytest.mark.parametrize(
    ("provider", "call", "field", "key"),
    [
        ("anthropic", {"type": "tool_use", "id": "t1", "name": "delete_files"}, "input", "tool_use_id"),
        ("anthropic", {"type": "tool_use", "id": "t1", "name": "delete_files", "input": None}, "input", "tool_use_id"),
        ("anthropic", {"id": "t1", "name": "delete_files", "arguments": _ARGS}, "input", "tool_use_id"),
        ("openai", {"id": "t1", "type": "function", "function": {"name": "delete_files"}}, "function.arguments", "tool_call_id"),
        ("openai-responses", {"type": "function_call", "call_id": "t1", "name": "delete_files"}, "arguments", "call_id"),
        ("gemini", {"id": "t1", "name": "delete_files", "arguments": _ARGS}, "args", "id"),
        ("gemini", {"functionCall": {"id": "t1", "name": "delete_files", "input": _ARGS}}, "args", "id"),
    ],
)
def test_a_call_without_its_arguments_field_is_an_invalid_call_not_run_with_none(
    provider: str, call: dict[str, Any], field: str, key: str
) -> None:
    """An Anthropic ``tool_use`` without ``input`` ran with ``{}`` (every argument its default)."""
    registry, ran = _registry()
    [answer] = _both(registry, [call], provider)
    text = json.dumps(answer)
    assert answer[key] == "t1" and f"Invalid tool call: the call has no '{field}' (its arguments); it was not run" in text
    if provider == "gemini":  # Gemini's answer names the function it answers
        assert answer["name"] == "delete_files" and "error" in answer["response"]
    assert ran == []


@pytest.mark.parametrize(
    ("provider", "call"),
    [
        ("gemini", gt.FunctionCall(id="g1", name="delete_files")),  # a function without parameters: no args at all
        ("gemini", gt.Part(function_call=gt.FunctionCall(name="delete_files"))),
        ("gemini", {"functionCall": {"name": "delete_files"}}),  # the REST API's, args left out
        ("anthropic", ToolUseBlock(type="tool_use", id="toolu_1", name="delete_files", input={})),
        ("openai-responses", ResponseFunctionToolCall(type="function_call", call_id="c1", name="delete_files", arguments="{}")),
        ("openai", {"id": "c1", "type": "function", "function": {"name": "delete_files", "arguments": "{}"}}),
    ],
)
def test_a_call_without_arguments_as_its_provider_sends_one_still_runs(provider: str, call: Any) -> None:
    registry, ran = _registry()
    [answer] = _both(registry, [call], provider)
    assert "DELETED *" in json.dumps(answer) and ran == ["*", "*"]


TOOLS = '''
from harness_one import defineTool

@defineTool
def add(a: str = "") -> str:
    """Echo."""
    return a
'''


def _answers(tmp_path: Path, lines: list[bytes]) -> list[dict[str, Any]]:
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS)
    done = CliRunner().invoke(main, ["--tools", str(tools), "run"], input=b"".join(line + b"\n" for line in lines))
    assert done.exit_code == 0, done.stderr
    return [json.loads(line) for line in done.stdout_bytes.decode().splitlines()]


def _run(tmp_path: Path, lines: list[bytes]) -> list[Any]:
    return [answer["id"] for answer in _answers(tmp_path, lines)]


#: The line limit of ``run`` in the oversized-line tests: twice the registry's ``max_bytes``, at least 64 KiB.
LIMIT = 1 << 16


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run``'s line limit set to :data:`LIMIT` (the registry's ``max_bytes``; no option sets it), whatever the default."""
    build = _main.build_registry

    def built(state: Any) -> ToolRegistry:
        registry = build(state)
        registry.limits = ArgumentLimits(max_bytes=LIMIT // 2)
        return registry

    monkeypatch.setattr(_main, "build_registry", built)


def _oversized(tmp_path: Path, line: bytes) -> Any:
    """The id ``run`` answers ``line`` on, which must be dropped for its length."""
    assert len(line) > LIMIT
    [answer] = _answers(tmp_path, [line])
    assert answer["error"]["message"] == f"line 1: the line is longer than {LIMIT} bytes"
    return answer["id"]


def _item(*order: str, big: int = 2 * LIMIT) -> bytes:
    """A Responses ``function_call`` item with its members in ``order``, its arguments ``big`` characters long."""
    values = {"arguments": json.dumps({"a": "x" * big}), "call_id": "c1", "name": "add", "type": "function_call", "id": "fc_1"}
    return json.dumps({key: values[key] for key in order}).encode()


@pytest.mark.parametrize(
    "order",
    [
        ("arguments", "call_id", "name", "type", "id"),  # the SDK's model_dump_json order
        ("type", "id", "arguments", "call_id", "name"),
        ("id", "arguments", "call_id", "name", "type"),
        ("id", "call_id", "arguments", "name", "type"),
        ("type", "call_id", "arguments", "id", "name"),
    ],
)
@pytest.mark.usefixtures("small_limit")
def test_an_oversized_responses_line_is_answered_on_its_call_id_wherever_it_is(tmp_path: Path, order: tuple[str, ...]) -> None:
    """It was answered on the item's ``id`` (``fc_1``) when ``type`` and ``call_id`` came after the huge arguments."""
    assert _oversized(tmp_path, _item(*order)) == "c1"


@pytest.mark.usefixtures("small_limit")
def test_an_oversized_function_call_without_a_call_id_in_sight_is_answered_on_no_id(tmp_path: Path) -> None:
    line = _item("type", "id", "arguments", "name")
    assert _oversized(tmp_path, line) is None  # never the item's own id, which names no call


_PLAIN_WITH_CALL_ID = [  # plain lines (no Responses 'type'): answered on their 'id' when whole, so when cut too
    ("id", "call_id", "name", "arguments"),
    ("id", "name", "arguments", "call_id"),  # the call_id after the arguments, as the reviewer's line had it
    ("call_id", "arguments", "name", "id"),
]


@pytest.mark.parametrize("order", _PLAIN_WITH_CALL_ID)
@pytest.mark.usefixtures("small_limit")
def test_an_oversized_plain_line_with_a_call_id_is_answered_on_its_id_as_its_whole_line_is(
    tmp_path: Path, order: tuple[str, ...]
) -> None:
    """A ``call_id`` alone made the line a Responses item when cut (answered ``"c1"``), while the whole line is a plain
    request answered on its ``id``."""
    whole = _item(*order, big=3)
    assert _run(tmp_path, [whole]) == ["fc_1"]
    assert _oversized(tmp_path, _item(*order)) == "fc_1"
    assert _run(tmp_path, [whole[:-20]]) == ["fc_1" if order[0] == "id" else None]  # cut short: as far as it shows


@pytest.mark.parametrize(
    ("line", "rid"),
    [
        (b'{"id": "call_7", "name": "add", "arguments": {"a": "1"', "call_7"),  # cut short
        (b'{"id": 7, "name": "add", "arguments": {"a": "1"}} {"id": 8}', 7),  # more after it
        (b'{"id": 12345', None),  # the id itself may be cut: a longer number
        (b'{"id": true, "name": "add", "arguments": {', None),  # no id a whole line could have
        (b'{"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "ad', "c1"),  # a Responses item: its call_id
        (b'{"type": "function_call", "id": "fc_1", "call_id": "c', None),  # never its own id
        (b'{"id": "fc_1", "call_id": "c1", "arguments": "{', "fc_1"),  # no Responses 'type': a plain line's id
        (b'{"call_id": "c2", "name": "add", "arguments": "{}"', None),  # as its whole line, answered on no id
        (_item("arguments", "call_id", "name", "type", "id", big=3) * 2, "c1"),
    ],
)
def test_a_line_cut_short_under_the_limit_is_answered_on_the_id_its_start_shows(tmp_path: Path, line: bytes, rid: Any) -> None:
    """It was answered ``"id": null``, while a cut line longer than the limit kept its id."""
    assert _run(tmp_path, [line]) == [rid]


def test_each_cut_line_is_answered_on_the_id_its_whole_line_has(tmp_path: Path) -> None:
    """The reader of a whole line and of a cut one decide a Responses item by one rule (its ``type``)."""
    wholes = [
        {"id": "p1", "call_id": "c1", "name": "add", "arguments": {"a": "1"}},
        {"call_id": "c2", "name": "add", "arguments": "{}"},
        {"type": "function_call", "id": "fc_3", "call_id": "c3", "name": "add", "arguments": "{}"},
        {"id": "p4", "call_id": "c4", "type": "function_call", "name": "add", "arguments": "{}"},
        {"id": "p5", "type": "tool_use", "call_id": "c5", "name": "add", "input": {}},
    ]
    lines = [json.dumps(whole).encode() for whole in wholes]
    assert _run(tmp_path, lines) == ["p1", None, "c3", "c4", "p5"]
    assert _run(tmp_path, [line[:-2] for line in lines]) == ["p1", None, "c3", "c4", "p5"]
    assert _run(tmp_path, [line + b" {}" for line in lines]) == ["p1", None, "c3", "c4", "p5"]


def test_a_plain_line_with_anthropics_input_is_an_invalid_call_not_run_with_none(tmp_path: Path) -> None:
    """``{"id": 7, "name": "add", "input": {...}}`` ran ``add`` on its defaults, its arguments dropped."""
    answers = _answers(tmp_path, [b'{"id": 7, "name": "add", "input": {"a": "1"}}', b'{"id": 8, "name": "add", "input": {}}'])
    for answer, rid in zip(answers, (7, 8), strict=True):
        assert answer["id"] == rid and answer["ok"] is False
        assert answer["error"]["message"] == f"line {rid - 6}: the call has no 'arguments' (its arguments); it was not run"
    # with its arguments, or as the tool_use block it stands for, it runs
    assert [a.get("result") for a in _answers(tmp_path, [b'{"id": 9, "name": "add", "arguments": {"a": "1"}, "input": 1}'])] == [
        "1"
    ]


_STREAMED = gt.FunctionCall(
    id="g1", name="delete_files", will_continue=True, partial_args=[gt.PartialArg(json_path="$.pattern", string_value="*.tmp")]
)


@pytest.mark.parametrize(
    "call",
    [
        _STREAMED,
        gt.Part(function_call=_STREAMED),
        _STREAMED.model_dump(exclude_none=True),
        gt.FunctionCall(id="g1", name="delete_files", will_continue=True),  # the stream's first piece: no arguments yet
        gt.FunctionCall(id="g1", name="delete_files", partial_args=[gt.PartialArg(json_path="$.pattern", string_value="*")]),
        {"functionCall": {"id": "g1", "name": "delete_files", "willContinue": True}},  # the REST API's spelling
        {"functionCall": {"id": "g1", "name": "delete_files", "partialArgs": [{"jsonPath": "$.pattern", "stringValue": "*"}]}},
        gt.FunctionCall(id="g1", name="delete_files", args={"pattern": "*.tmp"}, will_continue=True),
    ],
)
def test_a_gemini_call_with_streamed_arguments_is_an_invalid_call_not_run_with_none(call: Any) -> None:
    """Gemini's streamed arguments (``stream_function_call_arguments``: ``partial_args``, ``will_continue``) are not in
    ``args``: the call ran on the tool's defaults (``pattern="*"``)."""
    registry, ran = _registry()
    [answer] = _both(registry, [call], "gemini")
    assert answer["id"] == "g1" and answer["name"] == "delete_files"
    assert "assemble the streamed arguments into 'args' first; it was not run" in answer["response"]["error"]
    assert ran == []


def test_a_gemini_call_whose_stream_is_done_runs() -> None:
    registry, ran = _registry()
    done = gt.FunctionCall(id="g1", name="delete_files", args=_ARGS, will_continue=False, partial_args=[])
    assert "DELETED *.tmp" in json.dumps(_both(registry, [done], "gemini")) and ran == ["*.tmp", "*.tmp"]


def test_a_streamed_gemini_run_line_is_an_invalid_call(tmp_path: Path) -> None:
    line = json.dumps({"functionCall": {"id": "g1", "name": "add", "partialArgs": [{"jsonPath": "$.a", "stringValue": "1"}]}})
    [answer] = _answers(tmp_path, [line.encode()])
    assert answer["id"] == "g1" and "assemble the streamed arguments into 'args' first" in answer["error"]["message"]


#: A Gemini Interactions ``FunctionCallStep`` (its model_dump): a ``function_call`` without a ``call_id``.
_STEP = {"type": "function_call", "id": "fc_1", "name": "delete_files", "arguments": _ARGS}


@pytest.mark.parametrize("provider", ["gemini", "anthropic", "openai"])
def test_a_call_of_no_supported_shape_is_not_advised_to_a_provider_that_cannot_run_it(provider: str) -> None:
    """It advised ``provider='openai-responses'``, which answers it as an invalid call (no ``call_id``) either."""
    registry, ran = _registry()
    for calls in ([_STEP], [CALLS[provider], _STEP]):
        with pytest.raises(TypeError, match=r"^the calls include an item of no supported tool call shape") as caught:
            dispatch(registry, calls, provider=provider)
        assert "no 'call_id'" in str(caught.value) and "provider=" not in str(caught.value)
    assert ran == []


#: Each provider's whole response (and Gemini's candidate), holding a call of ``add``.
def _responses() -> dict[str, Any]:
    from anthropic.types import Message
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response

    gemini = gt.GenerateContentResponse.model_validate(
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"function_call": {"id": "g1", "name": "delete_files", "args": _ARGS}}]}}
            ]
        }
    )
    return {
        "anthropic": Message.model_validate(
            {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "x",
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "delete_files", "input": _ARGS}],
            }
        ),
        "openai-responses": Response.model_validate(
            {
                "id": "r",
                "object": "response",
                "created_at": 0,
                "model": "x",
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "output": [
                    {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "call_1",
                        "name": "delete_files",
                        "arguments": json.dumps(_ARGS),
                        "status": "completed",
                    }
                ],
            }
        ),
        "openai": ChatCompletion.model_validate(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "x",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "delete_files", "arguments": json.dumps(_ARGS)},
                                }
                            ],
                        },
                    }
                ],
            }
        ),
        "gemini": gemini,
        "gemini-candidate": gemini.candidates[0],  # type: ignore[index]
    }


@pytest.mark.parametrize("given", PROVIDERS)
@pytest.mark.parametrize("sent", [*PROVIDERS, "gemini-candidate"])
def test_another_providers_whole_response_is_the_type_error_not_one_bogus_call(sent: str, given: str) -> None:
    """A Responses ``Response`` given to the Anthropic dispatcher (a ``ChatCompletion`` to Gemini's, ...) was read as
    one call (its id the response's): answered as an invalid call, the model's calls left unanswered."""
    response = _responses()[sent]
    sent = sent.removesuffix("-candidate")
    registry, ran = _registry()
    if sent == given:
        assert "DELETED *.tmp" in json.dumps(_both(registry, response, given)) and ran == ["*.tmp", "*.tmp"]
        return
    with pytest.raises(TypeError, match=rf"^the message holds tool calls in the {sent} format, not the {given} format"):
        dispatch(registry, response, provider=given)
    with pytest.raises(TypeError, match=rf"dispatch them with provider='{sent}'$"):
        asyncio.run(adispatch(registry, response, provider=given))
    assert ran == []
