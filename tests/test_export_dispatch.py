"""Provider exports (checked by the providers' own SDK types) and dispatch of their tool calls."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import OrderedDict
from typing import Any

import pytest
from pydantic import TypeAdapter

from harness_one import ArgumentLimits, ToolRegistry, define_tool, defineTool
from harness_one.dispatch import (
    adispatch_anthropic,
    dispatch,
    dispatch_anthropic,
    dispatch_gemini,
    dispatch_openai,
    dispatch_openai_responses,
)
from harness_one.export import StrictSchemaError, export_tools, gemini_schema, strict_schema

GEMINI_KEYWORDS = {
    "type", "format", "description", "nullable", "enum", "properties", "required", "items", "minItems", "maxItems",
    "minimum", "maximum", "minLength", "maxLength", "pattern", "anyOf", "title", "default", "minProperties",
    "maxProperties", "propertyOrdering", "example",
}  # fmt: skip


@pytest.fixture
def contrib() -> ToolRegistry:
    return ToolRegistry(discover=True, autoload=False)


def assert_openai_strict(schema: Any, path: str = "$") -> None:
    """OpenAI's strict-mode rules, applied to a whole schema."""
    assert "$ref" not in schema and "$defs" not in schema, path
    kinds = schema.get("type")
    is_object = kinds == "object" or (isinstance(kinds, list) and "object" in kinds)
    if is_object:
        assert schema.get("additionalProperties") is False, path
        assert sorted(schema.get("required", [])) == sorted(schema.get("properties", {})), path
    for name, sub in schema.get("properties", {}).items():
        assert_openai_strict(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        assert_openai_strict(schema["items"], f"{path}[]")
    for i, sub in enumerate(schema.get("anyOf", [])):
        assert_openai_strict(sub, f"{path}.anyOf[{i}]")
    assert "default" not in schema, path


def gemini_keywords(schema: Any) -> set[str]:
    found = set(schema)
    for sub in schema.get("properties", {}).values():
        found |= gemini_keywords(sub)
    for sub in [schema.get("items"), *schema.get("anyOf", [])]:
        if isinstance(sub, dict):
            found |= gemini_keywords(sub)
    return found


def test_openai_strict_export_of_contrib_tools(contrib: ToolRegistry) -> None:
    from openai.types.chat import ChatCompletionFunctionToolParam
    from openai.types.responses import FunctionToolParam

    chat = contrib.export("openai", strict=True)
    assert {t["function"]["name"] for t in chat.tools} >= {"calculate", "current_time", "fetch_url", "random_number", "sql_query"}
    for tool in chat.tools:
        assert tool["function"]["strict"] is True
        assert_openai_strict(tool["function"]["parameters"])
        TypeAdapter(ChatCompletionFunctionToolParam).validate_python(tool)
    for tool in contrib.export("openai-responses", strict=True).tools:
        assert_openai_strict(tool["parameters"])
        TypeAdapter(FunctionToolParam).validate_python(tool)
    current = next(t for t in chat.tools if t["function"]["name"] == "current_time")["function"]["parameters"]
    assert current["properties"]["timezone"]["type"] == ["string", "null"]  # optional -> nullable


def test_other_exports_round_trip(contrib: ToolRegistry) -> None:
    import mcp.types
    from anthropic.types import ToolParam
    from google.genai import types as genai

    for tool in contrib.export("anthropic").tools:
        TypeAdapter(ToolParam).validate_python(tool)
    gemini = contrib.export("gemini")
    for tool in gemini.tools:
        genai.FunctionDeclaration.model_validate(tool)  # extra="forbid": no keyword outside the SDK
        assert gemini_keywords(tool["parameters"]) <= GEMINI_KEYWORDS
    for descriptor in contrib.export("mcp").tools:
        parsed = mcp.types.Tool.model_validate(descriptor)
        assert parsed.annotations is not None
    sql = next(t for t in contrib.export("mcp").tools if t["name"] == "sql_query")["annotations"]
    assert sql == {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def test_strict_conversion_rules() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0}},
                "required": ["x"],
            }
        },
        "properties": {
            "p": {"$ref": "#/$defs/point"},
            "label": {"type": "string", "default": "a"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["p"],
    }
    converted, nullable = strict_schema(schema)
    assert_openai_strict(converted)
    assert converted["properties"]["p"]["properties"]["y"]["type"] == ["number", "null"]
    assert nullable == {"absent": ["label", "tags"], "properties": {"p": {"absent": ["y"]}}}
    for bad, why in [
        (
            {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "integer"}}}},
            "map of arbitrary keys",
        ),
        ({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}, "oneOf not supported"),
        (
            {
                "type": "object",
                "$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}},
                "properties": {"n": {"$ref": "#/$defs/n"}},
            },
            "recursive",
        ),
    ]:
        with pytest.raises(StrictSchemaError, match=why):
            strict_schema(bad, tool="t")


def test_gemini_conversion_notes() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": ["integer", "null"], "exclusiveMinimum": 0},
            "level": {"enum": [1, 2, 3]},
            "mode": {"const": "fast"},
            "extra": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "additionalProperties": False,
    }
    converted, notes = gemini_schema(schema)
    assert converted["properties"]["n"] == {"type": "integer", "nullable": True, "minimum": 0}
    assert converted["properties"]["mode"] == {"enum": ["fast"], "type": "string"}
    assert "enum" not in converted["properties"]["level"]
    assert any("additionalProperties dropped" in n for n in notes) and any("enum of non-strings" in n for n in notes)


def test_gemini_names_are_mapped_and_reversed() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: "ok", name="2fa-check")
    exported = reg.export("gemini")
    assert exported.tools[0]["name"] == "_.2fa-check" and "exported as" in exported.notes["2fa-check"][0]
    results = dispatch_gemini(reg, [{"name": "_.2fa-check", "args": {}}])
    assert results == [{"name": "_.2fa-check", "response": {"output": "ok"}}]
    # the form earlier versions exported still reaches the tool while no tool has that name
    assert dispatch_gemini(reg, [{"name": "_2fa-check", "args": {}}]) == [{"name": "_2fa-check", "response": {"output": "ok"}}]


def test_exports_are_cached_until_tools_change() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: 1, name="a")
    first = reg.export("anthropic", copy=False)
    assert reg.export("anthropic", copy=False) is first
    reg.add(lambda: 2, name="b")
    assert [t["name"] for t in reg.export("anthropic").tools] == ["a", "b"]
    reg.remove("a")
    assert [t["name"] for t in reg.export("anthropic").tools] == ["b"]


@pytest.mark.parametrize("format", ["openai", "openai-responses", "anthropic", "gemini", "mcp"])
def test_after_a_removal_or_replacement_each_unchanged_tool_is_not_exported_again(format: str) -> None:
    reg = ToolRegistry(autoload=False)
    for name in ("a", "b", "c"):
        reg.add(lambda x: x, name=name, parameters={"type": "object", "properties": {"x": {"type": "integer"}}})
    first = reg.export(format, strict="auto" if format.startswith("openai") else False, copy=False)
    reg.remove("a")
    reg.add(lambda x: x, name="c", parameters={"type": "object", "properties": {"x": {"type": "string"}}}, replace=True)
    second = reg.export(format, strict="auto" if format.startswith("openai") else False, copy=False)
    assert second.tools[0] is first.tools[1]  # b: reused as it was
    assert second.tools[1] is not first.tools[2] and "string" in json.dumps(second.tools[1])  # c: the new definition
    assert len(second.tools) == 2 and second == export_tools(reg.tools(), format, strict=second.strict)


def test_a_gemini_name_does_not_depend_on_the_other_tools() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: 1, name="_2fa")
    reg.add(lambda: 2, name="2fa")
    first = reg.export("gemini", copy=False)
    assert first.names.exported == {"_.2fa": "2fa"} and [t["name"] for t in first.tools] == ["_2fa", "_.2fa"]
    reg.remove("_2fa")
    again = reg.export("gemini", copy=False)
    assert again.names.exported == {"_.2fa": "2fa"} and again.tools[0] is first.tools[1]  # reused as it was
    assert again == export_tools(reg.tools(), "gemini")


@pytest.fixture
def reg() -> ToolRegistry:
    registry = ToolRegistry(autoload=False)

    @define_tool(registry=registry)
    def add(a: float, b: float = 1.0) -> float:
        """Add."""
        return a + b

    @define_tool(registry=registry, rate_limit={"rate": 0.001, "burst": 1})
    def once() -> str:
        return "first"

    return registry


def test_openai_chat_dispatch_with_sdk_objects(reg: ToolRegistry) -> None:
    from openai.types.chat import ChatCompletionMessageFunctionToolCall

    calls = [
        ChatCompletionMessageFunctionToolCall(
            id="c1", type="function", function={"name": "add", "arguments": '{"a": 2, "b": 3}'}
        ),
        {"id": "c2", "type": "function", "function": {"name": "add", "arguments": '{"a": 2,'}},
        {"id": "c3", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
        {"id": "c4", "type": "function", "function": {"name": "once", "arguments": "{}"}},
        {"id": "c5", "type": "function", "function": {"name": "once", "arguments": "{}"}},
    ]
    out = dispatch_openai(reg, calls, concurrency=1)
    assert [m["tool_call_id"] for m in out] == ["c1", "c2", "c3", "c4", "c5"]
    assert all(m["role"] == "tool" for m in out)
    assert out[0]["content"] == "5"
    assert out[1]["content"].startswith("Error: Invalid arguments for tool 'add'") and "not valid JSON" in out[1]["content"]
    assert out[2]["content"].startswith("Error: Unknown tool 'nope'")
    assert out[3]["content"] == "first"
    assert "rate limited" in out[4]["content"]


def test_openai_strict_nulls_mean_absent(reg: ToolRegistry) -> None:
    out = dispatch_openai(
        reg, [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": null}'}}], strict=True
    )
    assert out[0]["content"] == "3.0"  # b's default applied
    plain = dispatch_openai(
        reg, [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": null}'}}]
    )
    assert plain[0]["content"].startswith("Error: Invalid arguments")


def test_responses_and_anthropic_dispatch(reg: ToolRegistry) -> None:
    from anthropic.types import ToolResultBlockParam, ToolUseBlock
    from openai.types.responses import ResponseFunctionToolCall

    items = [
        {"type": "message", "content": "thinking"},
        ResponseFunctionToolCall(type="function_call", call_id="f1", name="add", arguments='{"a": 1}'),
    ]
    assert dispatch_openai_responses(reg, items) == [{"type": "function_call_output", "call_id": "f1", "output": "2.0"}]
    blocks = [
        {"type": "text", "text": "let me add"},
        ToolUseBlock(type="tool_use", id="t1", name="add", input={"a": 1, "b": 1}),
        {"type": "tool_use", "id": "t2", "name": "add", "input": {"a": "x"}},
    ]
    results = dispatch_anthropic(reg, blocks)
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [("t1", False), ("t2", True)]
    for result in results:
        TypeAdapter(ToolResultBlockParam).validate_python(result)
    assert "$.a: expected number" in results[1]["content"]


def test_gemini_dispatch_with_sdk_objects(reg: ToolRegistry) -> None:
    from google.genai import types as genai

    calls = [genai.FunctionCall(id="g1", name="add", args={"a": 4}), genai.FunctionCall(id="g2", name="add", args={"a": "x"})]
    out = dispatch_gemini(reg, calls)
    assert out[0] == {"id": "g1", "name": "add", "response": {"output": 5.0}}
    assert out[1]["response"]["error"].startswith("Invalid arguments for tool 'add'")
    for item in out:
        genai.FunctionResponse.model_validate(item)


def test_parallel_calls_run_concurrently_in_order() -> None:
    reg = ToolRegistry(autoload=False)
    inside = threading.Barrier(3, timeout=5)

    @define_tool(registry=reg)
    def meet(n: int) -> int:
        inside.wait()  # all three must be running at once to get past here
        return n

    reg.add(lambda: 1 / 0, name="boom")
    calls = [{"type": "tool_use", "id": f"t{i}", "name": "meet", "input": {"n": i}} for i in range(3)]
    calls.insert(1, {"type": "tool_use", "id": "bad", "name": "boom", "input": {}})
    out = dispatch_anthropic(reg, calls, concurrency=4)
    assert [r["tool_use_id"] for r in out] == ["t0", "bad", "t1", "t2"]
    assert [r["is_error"] for r in out] == [False, True, False, False]


def test_async_dispatch_concurrency_cap() -> None:
    reg = ToolRegistry(autoload=False)
    running, peak = [0], [0]

    async def slow(n: int) -> int:
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0.01)
        running[0] -= 1
        return n

    reg.add(slow)
    calls = [{"type": "tool_use", "id": f"t{i}", "name": "slow", "input": {"n": i}} for i in range(10)]
    start = time.perf_counter()
    out = asyncio.run(adispatch_anthropic(reg, calls, concurrency=3))
    assert [json.loads(r["content"]) for r in out] == list(range(10))
    assert peak[0] == 3 and time.perf_counter() - start < 5


def test_export_tools_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown export format"):
        export_tools([], "cohere")


def test_strict_export_per_tool_with_names_and_a_reported_fallback() -> None:
    reg = ToolRegistry(autoload=False)

    @defineTool(registry=reg)
    def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: First.
            b: Second.
        """
        return a + b

    @defineTool(registry=reg)
    def tally(counts: dict[str, int]) -> int:
        """Sum counts.

        Args:
            counts: Counts by name.
        """
        return sum(counts.values())

    with pytest.raises(StrictSchemaError) as err:
        reg.export("openai", strict=True)
    assert err.value.tool == "tally"
    auto = reg.export("openai", strict="auto")
    by_name = {t["function"]["name"]: t["function"] for t in auto.tools}
    assert by_name["add"]["strict"] is True and by_name["tally"].get("strict") is not True
    assert list(auto.not_strict) == ["tally"] and auto.not_strict["tally"]
    only = reg.export("openai", strict=True, names=["add"])
    assert [t["function"]["name"] for t in only.tools] == ["add"] and only.tools[0]["function"]["strict"] is True
    with pytest.raises(ValueError):
        reg.export("openai", strict="sometimes")


def _adder() -> ToolRegistry:
    registry = ToolRegistry(autoload=False)

    @registry.add
    def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        return a + b

    return registry


def _openai_call(arguments: Any, call_id: Any = "c1", name: str = "add") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize(
    "arguments",
    [
        '{"a": 1, "b": [' + ",".join(["[0]"] * 70_000) + "]}",  # past the byte limit, before the container count
        '{"a": 2}'.encode("utf-16"),
        b'\xef\xbb\xbf{"a": 2}',
    ],
    ids=["oversized", "utf-16", "bom"],
)
def test_strict_dispatch_reads_arguments_as_every_call_does(arguments: Any) -> None:
    reg = _adder()
    plain = dispatch_openai(reg, [_openai_call(arguments)])[0]["content"]
    assert plain.startswith("Error: Invalid arguments for tool 'add'")
    assert dispatch_openai(reg, [_openai_call(arguments)], strict=True)[0]["content"] == plain


def test_strict_dispatch_decodes_within_the_registrys_limits() -> None:
    reg = ToolRegistry(autoload=False, limits=ArgumentLimits(max_bytes=64))

    @reg.add
    def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        return a + b

    padded = '{"a": 2, "b": null}' + " " * 60
    assert "the limit is 64" in dispatch_openai(reg, [_openai_call(padded)], strict=True)[0]["content"]
    for raw in (b'{"a": 2, "b": null}', bytearray(b'{"a": 2, "b": null}'), memoryview(b'{"a": 2, "b": null}')):
        assert dispatch_openai(reg, [_openai_call(raw)], strict=True)[0]["content"] == "3"


def test_strict_dispatch_applies_per_tool_as_the_auto_export_does() -> None:
    reg = _adder()

    @reg.add
    def count_labels(labels: dict[str, int]) -> int:
        """Count the labels."""
        return len(labels)

    calls = [_openai_call('{"a": 2, "b": null}'), _openai_call('{"labels": {"x": 1}}', "c2", "count_labels")]
    for strict in (True, "auto"):
        assert [m["content"] for m in dispatch_openai(reg, calls, strict=strict)] == ["3", "1"]
    with pytest.raises(ValueError, match="strict must be"):
        dispatch_openai(reg, calls, strict="sometimes")


def test_every_openai_tool_call_with_an_id_is_answered() -> None:
    calls = [
        {"id": "call_1", "type": "function", "function": None},
        {"id": "call_2", "type": "function", "function": '{"name": "add"}'},
        {"id": "call_3", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}},
        {"id": "call_4", "type": "function"},
    ]
    out = dispatch_openai(_adder(), calls)
    assert [m["tool_call_id"] for m in out] == ["call_1", "call_2", "call_3", "call_4"]
    assert out[2]["content"] == "2"
    for answer, got in zip([out[0], out[1], out[3]], ["null", "a string", "null"]):
        assert answer["content"].startswith(
            f"Error: Invalid tool call: 'function' must be an object with the tool's 'name', not {got}"
        )


def test_dispatch_answers_ids_that_do_not_fit_text() -> None:
    long = 10**5000
    out = dispatch_anthropic(
        _adder(),
        [
            {"type": "tool_use", "id": long, "name": "add", "input": {"a": 1}},
            {"type": "tool_use", "id": {"x": long}, "name": "add", "input": {"a": 2}},
        ],
    )
    assert [r["content"] for r in out] == ["2", "3"]
    # past the int-to-text limit: its digits as text (the call id the registry got), which json.dumps can write
    assert out[0]["tool_use_id"] == "1" + "0" * 5000 and out[1]["tool_use_id"].startswith('{"x": 1000')


def test_gemini_results_are_valid_utf8() -> None:
    from google.genai import types as genai

    reg = _adder()

    @reg.add
    def echo(text: str) -> dict[str, Any]:
        """Echo."""
        return {"text": text, "keys": OrderedDict({text: float("nan")})}

    calls = [
        genai.FunctionCall(id="g1", name="ad\ud800", args={"a": 2}),
        genai.FunctionCall(id="g2", name="echo", args={"text": "x\udc80y"}),
    ]
    out = dispatch_gemini(reg, calls)
    assert out[0]["name"] == "ad\ufffd" and out[0]["response"]["error"].startswith("Unknown tool 'ad\ufffd'")
    assert out[1]["response"]["output"] == {"text": "x\ufffdy", "keys": {"x\ufffdy": "NaN"}}
    parts = [genai.Part.from_function_response(name=r["name"], response=r["response"]) for r in out]
    genai.Content(role="user", parts=parts).model_dump_json().encode("utf-8")


@pytest.mark.parametrize("note", ["\x00harness-one-long-int:0", "\x00harness-one-long-int:7", '"\x00harness-one-long-int:0'])
def test_a_string_is_never_taken_for_a_long_integer(note: str) -> None:
    reg = ToolRegistry(autoload=False)

    @reg.add
    def power(base: int, note: str) -> dict[str, Any]:
        """A power and a note."""
        return {"value": base**5000, "note": note, note: [note]}

    [answer] = dispatch_openai(reg, [_openai_call(json.dumps({"base": 10, "note": note}), name="power")])
    assert json.loads(answer["content"], parse_int=str) == {"value": "1" + "0" * 5000, "note": note, note: [note]}


@pytest.mark.parametrize("fmt", ["anthropic", "gemini", "mcp"])
def test_strict_mode_for_a_format_without_one_is_refused(fmt: str) -> None:
    """``export --format anthropic --strict`` printed a non-strict export without a word."""
    from click.testing import CliRunner

    from harness_one._cli import main

    reg = ToolRegistry(autoload=False)
    reg.add(lambda a: a, name="echo")
    for strict in (True, "auto"):
        with pytest.raises(ValueError, match=f"strict mode is OpenAI's: the '{fmt}' format has none"):
            reg.export(fmt, strict=strict)
    assert reg.export(fmt).tools  # without strict mode as before
    result = CliRunner().invoke(main, ["export", "--format", fmt, "--strict"])
    assert result.exit_code == 2 and "strict mode is OpenAI's" in result.output


# --------------------------------------------------------------------------- what dispatch is given


def _counted() -> tuple[ToolRegistry, list[int]]:
    """A registry whose ``add`` counts its runs."""
    runs: list[int] = []
    registry = ToolRegistry(autoload=False)

    @registry.add
    def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        runs.append(a)
        return a + b

    return registry, runs


OPENAI_CALL = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}
OPENAI_MESSAGE = {"role": "assistant", "content": None, "tool_calls": [OPENAI_CALL]}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2}}
ANTHROPIC_MESSAGE = {
    "id": "m", "type": "message", "role": "assistant", "model": "x", "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1}, "content": [{"type": "text", "text": "adding"}, TOOL_USE],
}  # fmt: skip
FUNCTION_CALL = {
    "type": "function_call",
    "call_id": "fc_1",
    "name": "add",
    "arguments": '{"a": 2}',
    "id": "i1",
    "status": "completed",
}
RESPONSE = {
    "id": "resp", "object": "response", "created_at": 0, "model": "m", "parallel_tool_calls": True, "tool_choice": "auto",
    "tools": [], "output": [{"type": "reasoning", "id": "rs_1", "summary": []}, FUNCTION_CALL],
}  # fmt: skip
GEMINI_PART = {"function_call": {"id": "g1", "name": "add", "args": {"a": 2}}}
GEMINI_CONTENT = {"role": "model", "parts": [{"text": "adding"}, GEMINI_PART]}


def _sdk_forms() -> list[tuple[str, Any, str]]:
    """(provider, what the application holds, the answered id): a message or response, or one call, as SDK objects."""
    from anthropic.types import Message, ToolUseBlock
    from google.genai import types as genai
    from openai.types.chat import ChatCompletion, ChatCompletionMessage, ChatCompletionMessageFunctionToolCall
    from openai.types.responses import Response, ResponseFunctionToolCall

    message = ChatCompletionMessage.model_validate(OPENAI_MESSAGE)
    completion = ChatCompletion.model_validate(
        {"id": "r", "object": "chat.completion", "created": 0, "model": "m",
         "choices": [{"index": 0, "finish_reason": "tool_calls", "message": OPENAI_MESSAGE}]}
    )  # fmt: skip
    content = genai.Content.model_validate(GEMINI_CONTENT)
    return [
        ("openai", message, "call_1"),
        ("openai", completion, "call_1"),
        ("openai", ChatCompletionMessageFunctionToolCall.model_validate(OPENAI_CALL), "call_1"),
        ("openai", OPENAI_MESSAGE, "call_1"),
        ("openai", OPENAI_CALL, "call_1"),
        ("openai-responses", Response.model_validate(RESPONSE), "fc_1"),
        ("openai-responses", ResponseFunctionToolCall.model_validate(FUNCTION_CALL), "fc_1"),
        ("openai-responses", FUNCTION_CALL, "fc_1"),
        ("anthropic", Message.model_validate(ANTHROPIC_MESSAGE), "toolu_1"),
        ("anthropic", ToolUseBlock.model_validate(TOOL_USE), "toolu_1"),
        ("anthropic", ANTHROPIC_MESSAGE, "toolu_1"),
        ("anthropic", TOOL_USE, "toolu_1"),
        ("gemini", content, "g1"),
        ("gemini", genai.GenerateContentResponse(candidates=[genai.Candidate(content=content)]), "g1"),
        ("gemini", genai.FunctionCall(id="g1", name="add", args={"a": 2}), "g1"),
        ("gemini", GEMINI_CONTENT, "g1"),
        ("gemini", GEMINI_PART, "g1"),
    ]


_ID_KEY = {"openai": "tool_call_id", "openai-responses": "call_id", "anthropic": "tool_use_id", "gemini": "id"}
#: Where each provider's answer holds the result, and add(2)'s there.
_THREE = {
    "openai": ("content", "3"),
    "openai-responses": ("output", "3"),
    "anthropic": ("content", "3"),
    "gemini": ("response", {"output": 3}),
}


@pytest.mark.parametrize(
    ("provider", "given", "rid"), _sdk_forms(), ids=lambda v: type(v).__name__ if not isinstance(v, str) else v
)
def test_a_whole_message_or_one_call_is_answered(provider: str, given: Any, rid: str) -> None:
    """Given a message, a response or one call instead of the list of calls, dispatch answered nothing."""
    from harness_one.dispatch import adispatch, dispatch

    registry, runs = _counted()
    [answer] = dispatch(registry, given, provider=provider)
    key, three = _THREE[provider]
    assert answer[_ID_KEY[provider]] == rid and answer[key] == three
    [again] = asyncio.run(adispatch(registry, given, provider=provider))
    assert again == answer and runs == [2, 2]


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        ("openai", None),
        ("openai", {"role": "assistant", "content": "hi", "tool_calls": None}),
        ("openai", {"role": "assistant", "content": "hi"}),  # model_dump(exclude_none=True) of a text reply
        ("anthropic", {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}),
        ("openai-responses", {"output": []}),
        ("gemini", {"role": "model", "parts": None}),
    ],
)
def test_a_message_without_calls_is_no_calls(provider: str, message: Any) -> None:
    """``dispatch_openai(registry, reply.tool_calls)`` raised TypeError for a text reply (``tool_calls`` is None)."""
    from harness_one.dispatch import adispatch, dispatch

    registry, runs = _counted()
    assert dispatch(registry, message, provider=provider) == []
    assert asyncio.run(adispatch(registry, message, provider=provider)) == [] and runs == []


def test_openai_text_reply_tool_calls_none_is_no_calls() -> None:
    from openai.types.chat import ChatCompletionMessage

    text_only = ChatCompletionMessage.model_validate({"role": "assistant", "content": "hi"})
    assert dispatch_openai(_adder(), text_only.tool_calls) == [] and dispatch_openai(_adder(), text_only) == []


class _OddCall:
    """A call object the dispatcher cannot read (neither a dict nor a ``model_dump`` object)."""

    def __init__(self, id: Any) -> None:
        self.id = id
        self.call_id = id


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic", "gemini"])
def test_an_unreadable_call_with_an_id_is_answered_as_invalid(provider: str) -> None:
    from harness_one.dispatch import dispatch

    registry, runs = _counted()
    good = {"openai": OPENAI_CALL, "openai-responses": FUNCTION_CALL, "anthropic": TOOL_USE, "gemini": GEMINI_PART}[provider]
    odd, answer = dispatch(registry, [_OddCall("odd_1"), good], provider=provider)
    assert odd[_ID_KEY[provider]] == "odd_1" and "Invalid tool call: cannot read a call from a _OddCall" in json.dumps(odd)
    key, three = _THREE[provider]
    assert answer[key] == three and runs == [2]


@pytest.mark.parametrize(
    ("calls", "message"),
    [
        ("call_1", "calls must be the model's tool calls"),
        (b"{}", "calls must be the model's tool calls"),
        (42, "calls must be the model's tool calls"),
        ([OPENAI_CALL, "call_1"], "a tool call must be a dict or a provider SDK object, not str"),
        ([OPENAI_CALL, None], "a tool call must be a dict or a provider SDK object, not NoneType"),
        ([OPENAI_CALL, ("id", "x")], "a tool call must be a dict or a provider SDK object, not tuple"),
        ([_OddCall(None)], "a tool call must be a dict or a provider SDK object, not _OddCall"),
    ],
)
def test_what_is_no_call_at_all_is_a_type_error_before_any_call_runs(calls: Any, message: str) -> None:
    registry, runs = _counted()
    with pytest.raises(TypeError, match=message):
        dispatch_openai(registry, calls)
    with pytest.raises(TypeError, match=message):
        asyncio.run(adispatch_anthropic(registry, calls))
    assert runs == []


def test_a_provider_call_without_an_id_or_with_a_repeated_one_is_not_run() -> None:
    """A call without its id ran, and its answer carried ``tool_call_id: null`` (the provider refuses the next
    request, after the side effect); a Responses item without ``call_id`` was answered under its item id; two
    calls under one id both ran, their answers impossible to tell apart."""
    registry = ToolRegistry(autoload=False)
    ran: list[int] = []

    def add(a: int) -> int:
        ran.append(a)
        return a

    registry.add(add)
    openai = dispatch(registry, [{"type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}])
    anthropic = dispatch(registry, [{"type": "tool_use", "name": "add", "input": {"a": 2}}], provider="anthropic")
    item = {"type": "function_call", "id": "fc_2", "name": "add", "arguments": '{"a": 3}'}
    responses = dispatch(registry, [item], provider="openai-responses")
    assert ran == []
    assert "has no 'id'" in openai[0]["content"] and anthropic[0]["is_error"] and "has no 'id'" in anthropic[0]["content"]
    assert responses[0]["call_id"] is None and "has no 'call_id'" in responses[0]["output"]
    empty = {"id": "", "type": "function", "function": {"name": "add", "arguments": '{"a": 9}'}}
    assert "has no 'id'" in dispatch(registry, [empty])[0]["content"] and ran == []  # an empty id pairs nothing either
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 4}'}}
    answers = dispatch(registry, [call, call, {**call, "id": "c2"}])
    assert ran == [4, 4] and [a["tool_call_id"] for a in answers] == ["c1", "c1", "c2"]
    assert answers[0]["content"] == "4" and "another call in this turn has the id 'c1'" in answers[1]["content"]
    assert dispatch(registry, [{"name": "add", "args": {"a": 5}}], provider="gemini")[0]["response"] == {"output": 5}  # no ids


def test_gemini_drops_an_anyof_of_required_alternatives_with_a_true_note() -> None:
    """``anyOf: [{required: [a]}, {required: [b]}]`` on an object became ``anyOf: [{required: []}, {required: []}]`` with
    a note that 'a' was no such property; now it is dropped, as for the other providers, and the note says why."""
    registry = ToolRegistry(autoload=False)
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
    }
    registry.add(lambda **kw: kw, name="f", parameters=schema)
    exported = registry.export("gemini")
    assert exported.tools[0]["parameters"] == {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    assert exported.notes == {"f": ["$: anyOf dropped (its alternatives only constrain this object's properties)"]}
    assert registry.try_call("f", {}).error is not None  # the harness still checks it
