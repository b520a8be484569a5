"""Exports keep to what each provider accepts: unique names, bounded $ref inlining, per-tool fallbacks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter

from harness_one import Tool, ToolRegistry
from harness_one.dispatch import dispatch_anthropic, dispatch_gemini
from harness_one.export import INLINE_BUDGET, StrictSchemaError, export_tools, gemini_schema, inline_refs, strict_schema


def _tool(name: str, parameters: dict[str, Any]) -> Tool:
    return Tool.create(lambda **kw: kw, name=name, description="d", parameters=parameters)


def _ref_bomb(n: int) -> dict[str, Any]:
    """``n`` definitions, each using the previous one twice: inlined, it doubles ``n`` times."""
    defs: dict[str, Any] = {"d0": {"type": "string"}}
    for i in range(1, n):
        ref = {"$ref": f"#/$defs/d{i - 1}"}
        defs[f"d{i}"] = {"type": "object", "properties": {"a": ref, "b": ref}, "required": ["a", "b"]}
    return {"type": "object", "properties": {"x": {"$ref": f"#/$defs/d{n - 1}"}}, "required": ["x"], "$defs": defs}


TREE = {
    "type": "object",
    "properties": {"node": {"$ref": "#/$defs/N"}},
    "$defs": {"N": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}}}}},
}


def test_a_tool_added_after_a_gemini_export_renames_no_exported_name() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: "old", name="1tool")
    assert [t["name"] for t in reg.export("gemini").tools] == ["_.1tool"]
    reg.add(lambda: "new", name="_1tool")  # the name earlier versions exported "1tool" under
    extended = reg.export("gemini")
    assert [t["name"] for t in extended.tools] == ["_.1tool", "_1tool"]
    assert extended == export_tools(reg.tools(), "gemini")
    out = dispatch_gemini(reg, [{"name": "_1tool", "args": {}}, {"name": "_.1tool", "args": {}}])
    assert [r["response"] for r in out] == [{"output": "new"}, {"output": "old"}]


def test_gemini_names_stay_within_64_characters() -> None:
    reg = ToolRegistry(autoload=False)
    long = "1" + "a" * 63  # the longest tool name, not a Gemini name as it is
    reg.add(lambda: "one", name=long)
    reg.add(lambda: "two", name="_" + long[:63])  # the name the first would take
    names = [t["name"] for t in reg.export("gemini").tools]
    assert all(len(n) <= 64 for n in names) and len(set(names)) == 2
    out = dispatch_gemini(reg, [{"name": n, "args": {}} for n in names])
    assert sorted(r["response"]["output"] for r in out) == ["one", "two"]


def test_gemini_text_and_thought_parts_are_not_calls() -> None:
    from google.genai import types as genai

    reg = ToolRegistry(autoload=False)
    reg.add(lambda a, b: a + b, name="add")
    parts = [
        genai.Part(text="Let me add."),
        genai.Part(thought=True, text="thinking"),
        genai.Part(function_call=genai.FunctionCall(name="add", args={"a": 2, "b": 3}, id="c1")),
    ]
    out = dispatch_gemini(reg, parts)
    assert out == [{"name": "add", "response": {"output": 5}, "id": "c1"}]  # one response per call part
    assert dispatch_gemini(reg, [{"text": "hi"}, {"args": {}}])[0]["response"]["error"].startswith("Invalid tool call")


def test_inlining_refs_stops_at_a_budget() -> None:
    schema = _ref_bomb(20)  # 3 KB; inlined, 2**20 copies of d0
    with pytest.raises(StrictSchemaError, match=f"more than {INLINE_BUDGET} schema nodes"):
        strict_schema(schema, tool="bomb")
    # copies of d_k: its object, properties and required, and twice a $ref object plus d_(k-1): d3 = 43 nodes
    with pytest.raises(StrictSchemaError, match="more than 42 schema nodes"):
        inline_refs(_ref_bomb(4), budget=42)
    assert json.dumps(inline_refs(_ref_bomb(4), budget=43)).count('"string"') == 8


def test_a_schema_too_large_to_inline_exports_in_every_format() -> None:
    from google.genai import types as genai

    schema = _ref_bomb(20)
    size = len(json.dumps(schema))
    auto = export_tools([_tool("bomb", schema)], "openai", strict="auto")
    assert auto.tools[0]["function"]["parameters"] == schema and "strict" not in auto.tools[0]["function"]
    assert "schema nodes" in auto.not_strict["bomb"][0]
    gemini = export_tools([_tool("bomb", schema)], "gemini")
    declaration = gemini.tools[0]
    genai.FunctionDeclaration.model_validate(declaration)
    assert len(json.dumps(declaration)) < 2 * size and len(declaration["parameters"]["defs"]) == 20
    assert declaration["parameters"]["properties"]["x"] == {"ref": "#/defs/d19"}
    assert "ref to root defs" in gemini.notes["bomb"][0]


def test_a_recursive_schema_costs_gemini_only_its_own_inlining() -> None:
    from google.genai import types as genai

    reg = ToolRegistry(autoload=False)
    reg.add(lambda a: a + 1, name="add_one")
    reg.add(_tool("tree", TREE))
    export = reg.export("gemini")
    for declaration in export.tools:
        genai.FunctionDeclaration.model_validate(declaration)
    tree = export.tools[1]["parameters"]
    assert tree["properties"]["node"] == {"ref": "#/defs/N"} and tree["defs"]["N"]["properties"]["kids"]["items"] == {
        "ref": "#/defs/N"
    }
    assert "recursive" in export.notes["tree"][0] and "strict" not in export.notes["tree"][0]
    assert dispatch_gemini(reg, [{"name": "add_one", "args": {"a": 1}}]) == [{"name": "add_one", "response": {"output": 2}}]


def test_a_recursive_ref_gemini_cannot_follow_becomes_any_object() -> None:
    node = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/properties/node"}}}}
    converted, notes = gemini_schema({"type": "object", "properties": {"node": node}}, tool="t")
    assert converted == {"type": "object"}
    assert len(notes) == 1 and "any object" in notes[0] and "recursive" in notes[0] and "strict" not in notes[0]


FIND = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
    "anyOf": [{"required": ["id"]}, {"required": ["name"]}],
    "not": {"required": ["id", "name"]},
}


@pytest.mark.parametrize(
    ("format", "dropped"),
    [("openai", "anyOf, not"), ("openai-responses", "anyOf, not"), ("anthropic", "anyOf")],
)
def test_top_level_combinators_are_dropped_with_a_note(format: str, dropped: str) -> None:
    export = export_tools([_tool("find", FIND)], format)
    definition = export.tools[0]
    schema = definition.get("input_schema") or definition.get("parameters") or definition["function"]["parameters"]
    assert "anyOf" not in schema and schema["properties"] == FIND["properties"]
    assert ("not" in schema) is (format == "anthropic")  # Anthropic names only anyOf, oneOf, allOf
    assert export.notes["find"] == [f"$: {dropped} at the top level dropped (refused there; calls are still validated with it)"]


def test_strict_mode_refuses_a_top_level_any_of() -> None:
    from openai.types.chat import ChatCompletionFunctionToolParam

    schema = {k: v for k, v in FIND.items() if k != "not"}
    with pytest.raises(StrictSchemaError, match="anyOf at the top level"):
        strict_schema(schema, tool="find")
    auto = export_tools([_tool("find", schema)], "openai", strict="auto")
    function = auto.tools[0]["function"]
    assert "strict" not in function and "anyOf" not in function["parameters"]
    assert auto.not_strict["find"][0] == "$: anyOf at the top level is refused by OpenAI"
    TypeAdapter(ChatCompletionFunctionToolParam).validate_python(auto.tools[0])
    reg = ToolRegistry(autoload=False)
    reg.add(_tool("find", schema))
    out = dispatch_anthropic(reg, [{"type": "tool_use", "id": "c1", "name": "find", "input": {}}])
    assert out[0]["is_error"] is True  # the harness still applies the dropped anyOf
