"""Exports, session 34: strict mode's nullable properties accept null whatever sits beside their type, and the
one-tool OpenAI functions take a strict that is True or False only."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from harness_one import Tool
from harness_one.export import export_tools, to_openai, to_openai_responses

BRANCHES = [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}]


@pytest.mark.parametrize(
    "optional",
    [
        {"type": "string", "anyOf": BRANCHES},
        {"type": "string", "enum": ["a1", "b1", "zzz"], "anyOf": BRANCHES},
        {"$ref": "#/$defs/AorB"},
    ],
)
def test_every_property_strict_mode_makes_nullable_accepts_null(optional: dict[str, Any]) -> None:
    parameters = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "p": optional},
        "required": ["q"],
        "$defs": {"AorB": {"type": "string", "anyOf": BRANCHES}},
    }
    tool = Tool.create(lambda q, p="a": q, name="t", parameters=parameters)
    made = export_tools([tool], "openai", strict=True)
    schema = made.tools[0]["function"]["parameters"]
    assert made.nullable["t"]["absent"] == ["p"]
    assert set(schema["required"]) == {"q", "p"}
    jsonschema.validate({"q": "x", "p": None}, schema)  # the strict model's "absent"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"q": "x", "p": "zzz"}, schema)  # what the property refused, it still refuses


@pytest.mark.parametrize("one", [to_openai, to_openai_responses])
@pytest.mark.parametrize("strict", ["auto", "yes", 1.0, None])
def test_one_tools_strict_is_true_or_false(one: Any, strict: Any) -> None:
    tool = Tool.create(lambda q: q, name="f", parameters={"type": "object", "properties": {"q": {"type": "string"}}})
    with pytest.raises(ValueError, match="strict must be True or False for one tool"):
        one(tool, strict=strict)
    assert one(tool, strict=True) != one(tool, strict=False)
