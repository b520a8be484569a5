"""A ``$ref`` to a boolean definition (valid from draft 6 on, sent by MCP servers) inlined for the exports and
dispatchers: ``{**True}`` raised ``TypeError`` for every tool of a Gemini or strict export."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import ToolRegistry
from harness_one.dispatch import dispatch_gemini, dispatch_openai
from harness_one.export import inline_refs

TO_TRUE = {
    "type": "object",
    "$defs": {"anything": True},
    "properties": {"x": {"$ref": "#/$defs/anything", "description": "any value"}, "y": {"type": "string"}},
    "required": ["y"],
}
TO_FALSE = {
    "type": "object",
    "$defs": {"nothing": False},
    "properties": {"x": {"$ref": "#/$defs/nothing"}, "y": {"type": "string"}},
    "required": ["y"],
}


def _registry(schema: dict[str, Any]) -> ToolRegistry:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda **kw: kw, name="t", description="T.", parameters=schema)
    reg.add(lambda a, b: a + b, name="add", description="Add.", parameters=None)
    return reg


def test_a_ref_to_true_inlines_as_the_keywords_beside_it() -> None:
    assert inline_refs(TO_TRUE)["properties"]["x"] == {"description": "any value"}


def test_a_ref_to_false_inlines_as_a_schema_no_value_meets() -> None:
    assert inline_refs(TO_FALSE)["properties"]["x"] == {"not": {}}


@pytest.mark.parametrize("schema", [TO_TRUE, TO_FALSE], ids=["true", "false"])
def test_the_exports_and_dispatchers_of_a_boolean_definition_raise_nothing(schema: dict[str, Any]) -> None:
    reg = _registry(schema)
    gemini = reg.export("gemini")
    assert gemini.tool_names == ["t", "add"]
    assert "$ref" not in str(gemini.tools[0]["parameters"])
    auto = reg.export("openai", strict="auto")
    assert auto.tool_names == ["t", "add"]
    call = {"id": "c", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
    assert dispatch_openai(reg, [call], strict="auto") == [{"role": "tool", "tool_call_id": "c", "content": "3"}]
    answered = dispatch_gemini(reg, [{"name": "add", "args": {"a": 2, "b": 2}, "id": "g"}])
    assert answered == [{"name": "add", "response": {"output": 4}, "id": "g"}]


def test_strict_mode_refuses_a_false_definition_with_its_reason() -> None:
    auto = _registry(TO_FALSE).export("openai", strict="auto")
    assert auto.not_strict["t"] == ["$.x: not not supported", "$.x: a schema without a type cannot be strict"]
    assert _registry(TO_TRUE).export("gemini").tools[0]["parameters"]["properties"]["x"] == {"description": "any value"}
