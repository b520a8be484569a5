"""Review 27: exports ($ref beside keywords its target also sets, $ref to a boolean definition, Gemini's object
keywords beside a list of types, an empty enum)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness_one import Tool, ToolRegistry
from harness_one.dispatch import dispatch_gemini, dispatch_openai
from harness_one.export import StrictSchemaError, gemini_name, gemini_schema, inline_refs, strict_schema


def _registry(**tools: dict[str, Any]) -> ToolRegistry:
    reg = ToolRegistry(autoload=False)
    for name, schema in tools.items():
        reg.add(Tool.create(lambda **kw: kw, name=name, description="d", parameters=schema))
    return reg


def _openai_call(name: str, arguments: Any) -> dict[str, Any]:
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _order(item: dict[str, Any], n: dict[str, Any] | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {"item": item}
    if n is not None:
        properties["n"] = n
    return {
        "type": "object",
        "$defs": {
            "base": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            "small": {"type": "integer", "maximum": 10},
        },
        "properties": properties,
        "required": list(properties),
    }


# --------------------------------------------------------------------------- 1: $ref and a keyword beside it


_BASE_AND_QTY = {"$ref": "#/$defs/base", "properties": {"qty": {"type": "integer"}}, "required": ["qty"]}


def test_ref_and_sibling_properties_refuse_strict_with_the_reason() -> None:
    reg = _registry(order=_order(_BASE_AND_QTY))
    with pytest.raises(StrictSchemaError) as caught:
        reg.export("openai", strict=True)
    assert caught.value.reasons == [
        "$ref '#/$defs/base' and the keywords beside it cannot be inlined as one schema (both set properties)"
    ]
    auto = reg.export("openai", strict="auto")
    assert "strict" not in auto.tools[0]["function"]
    assert auto.notes == {"order": [f"exported without strict mode: {caught.value.reasons[0]}"]}


def test_ref_and_sibling_pattern_refuse_strict_and_gemini_keeps_the_definition() -> None:
    n = {"$ref": "#/$defs/code", "pattern": "^[0-9]+$"}
    reg = _registry(order={**_order({"type": "object"}, n=n), "$defs": {"code": {"type": "string", "pattern": "^[a-z]+$"}}})
    with pytest.raises(
        StrictSchemaError,
        match=r"\$ref '#/\$defs/code' and the keywords beside it cannot be "
        r"inlined as one schema \(both set pattern\)",
    ):
        reg.export("openai", strict=True)
    exported = reg.export("gemini")
    parameters = exported.tools[0]["parameters"]
    assert parameters["properties"]["n"] == {"ref": "#/defs/code", "pattern": "^[0-9]+$"}
    assert parameters["defs"]["code"] == {"type": "string", "pattern": "^[a-z]+$"}  # the target's pattern still told
    assert exported.notes["order"][0].startswith("$: $ref kept as Gemini's ref to root defs ($ref '#/$defs/code'")


def test_ref_and_sibling_properties_gemini_keeps_the_definitions_required() -> None:
    exported = _registry(order=_order(_BASE_AND_QTY)).export("gemini")
    parameters = exported.tools[0]["parameters"]
    assert parameters["defs"]["base"] == {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    assert parameters["properties"]["item"]["ref"] == "#/defs/base"


def test_ref_siblings_that_agree_are_one_object() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "base": {
                "type": "object",
                "description": "a base",
                "properties": {"name": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["name"],
            }
        },
        "properties": {
            "item": {"$ref": "#/$defs/base", "type": "object", "description": "the item", "required": ["qty", "name"]}
        },
    }
    assert inline_refs(schema)["properties"]["item"] == {
        "type": "object",
        "description": "the item",  # an annotation: the sibling's
        "properties": {"name": {"type": "string"}, "qty": {"type": "integer"}},
        "required": ["name", "qty"],  # both apply: every name
    }


@pytest.mark.parametrize(
    ("target", "beside", "why"),
    [
        (
            {"type": "object", "additionalProperties": False},
            {"properties": {"b": {"type": "string"}}},
            "the target sets additionalProperties and the keywords beside it properties, which read one another",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
            {"patternProperties": {"^b": {"type": "string"}}},
            "the target sets additionalProperties, properties and the keywords beside it patternProperties, "
            "which read one another",
        ),
        (
            {"type": "array", "prefixItems": [{"type": "string"}]},
            {"items": False},
            "the target sets prefixItems and the keywords beside it items, which read one another",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "unevaluatedProperties": False},
            {"required": ["a"]},
            "the target's unevaluatedProperties does not see the keywords beside it",
        ),
        ({"type": "string"}, {"type": ["integer", "null"]}, "both set type"),  # no type both allow
        ({"type": "integer", "maximum": 10}, {"maximum": True}, "both set maximum"),  # a bound that is no number
        ({"type": "integer", "const": 1}, {"const": True}, "both set const"),  # JSON: true is not 1
        ({"enum": [0, 1]}, {"enum": [False, True]}, "both set enum"),
    ],
)
def test_ref_siblings_one_object_cannot_hold_refuse(target: dict[str, Any], beside: dict[str, Any], why: str) -> None:
    schema = {"type": "object", "$defs": {"t": target}, "properties": {"x": {"$ref": "#/$defs/t", **beside}}}
    with pytest.raises(StrictSchemaError) as caught:
        strict_schema(schema, tool="f")
    assert caught.value.reasons == [f"$ref '#/$defs/t' and the keywords beside it cannot be inlined as one schema ({why})"]
    # the public inliner keeps both exactly, as allOf of the target and its siblings
    assert inline_refs(schema, tool="f")["properties"]["x"] == {"allOf": [target, beside]}


def test_draft7_ref_siblings_still_ignored() -> None:
    schema = {**_order(_BASE_AND_QTY), "$schema": "http://json-schema.org/draft-07/schema#"}
    assert inline_refs(schema)["properties"]["item"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }


# --------------------------------------------------------------------------- 2: $ref to a boolean definition


def _anything(target: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "$defs": {"anything": target, "f": False},
        "properties": {
            "x": {"$ref": "#/$defs/anything"},
            "s": {"$ref": "#/$defs/anything", "type": "string"},
            "items": {"type": "array", "items": {"$ref": "#/$defs/f"}},
            "all": {"allOf": [{"$ref": "#/$defs/anything"}]},
            "y": {"type": "string"},
        },
    }


def test_ref_to_true_inlines_as_its_siblings() -> None:
    properties = inline_refs(_anything(True))["properties"]
    assert properties["x"] == {}
    assert properties["s"] == {"type": "string"}  # true and X: X
    assert properties["items"] == {"type": "array", "items": False}
    assert properties["all"] == {"allOf": [{}]}


def test_ref_to_false_inlines_as_false() -> None:
    properties = inline_refs(_anything(False))["properties"]
    assert properties["x"] is False
    assert properties["s"] is False  # false and X: false


def test_ref_to_boolean_definition_exports_and_dispatches() -> None:
    reg = _registry(remote=_anything(True), add={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    gemini = reg.export("gemini")
    assert gemini.tools[0]["parameters"]["properties"]["s"] == {"type": "string"}
    assert gemini.tools[0]["parameters"]["properties"]["items"] == {"type": "array", "maxItems": 0, "items": {}}
    assert gemini.notes["remote"][-1] == "$.all: allOf of one schema merged into the schema holding it"
    auto = reg.export("openai", strict="auto")
    assert auto.notes["remote"][0].startswith("exported without strict mode: $.x: a schema without a type cannot be strict")
    assert auto.tools[1]["function"]["strict"] is True
    replies = dispatch_openai(reg, [_openai_call("add", {"a": 1})], strict="auto")
    assert replies == [{"role": "tool", "tool_call_id": "c", "content": '{"a": 1}'}]
    long = "9" + "a" * 63
    reg.add(Tool.create(lambda **kw: "ok", name=long, description="d", parameters={"type": "object"}))
    shown = gemini_name(long)
    assert dispatch_gemini(reg, [{"functionCall": {"id": "1", "name": shown, "args": {}}}]) == [
        {"name": shown, "response": {"output": "ok"}, "id": "1"}
    ]


def test_ref_to_false_definition_refused_by_strict_with_the_reason() -> None:
    reg = _registry(remote=_anything(False))
    with pytest.raises(StrictSchemaError, match=r"\$\.x: boolean schemas are not supported"):
        reg.export("openai", strict=True)
    gemini = reg.export("gemini")
    assert set(gemini.tools[0]["parameters"]["properties"]) == {"items", "all", "y"}
    assert gemini.notes["remote"][-2:] == [
        "$.x: a property that must be absent (false) dropped",
        "$.s: a property that must be absent (false) dropped",
    ]


def test_strict_optional_boolean_property_is_refused_not_crashed() -> None:
    with pytest.raises(StrictSchemaError) as caught:
        strict_schema({"type": "object", "properties": {"x": False, "y": True}}, tool="f")
    assert caught.value.reasons == ["$.x: boolean schemas are not supported", "$.y: boolean schemas are not supported"]


# --------------------------------------------------------------------------- 4: Gemini object keywords beside a type list


def test_gemini_type_list_object_keywords_go_with_the_object_branch() -> None:
    schema = {
        "type": "object",
        "properties": {
            "filter": {
                "type": ["object", "string"],
                "properties": {"field": {"type": "string"}},
                "required": ["field"],
                "minProperties": 1,
            }
        },
    }
    converted, notes = gemini_schema(schema)
    assert converted["properties"]["filter"] == {
        "anyOf": [
            {"type": "object", "minProperties": 1, "properties": {"field": {"type": "string"}}, "required": ["field"]},
            {"type": "string"},
        ]
    }
    assert notes == ["$.filter: type ['object', 'string'] rewritten as anyOf"]


def test_gemini_type_list_with_object_and_array_splits_both() -> None:
    schema = {
        "type": "object",
        "properties": {
            "v": {"type": ["object", "array", "null"], "properties": {"a": {"type": "string"}}, "items": {"type": "integer"}}
        },
    }
    converted, _ = gemini_schema(schema)
    assert converted["properties"]["v"] == {
        "nullable": True,
        "anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"type": "array", "items": {"type": "integer"}},
        ],
    }


def test_gemini_object_keywords_without_an_object_type_are_dropped_with_a_note() -> None:
    schema = {
        "type": "object",
        "properties": {
            "v": {"type": ["integer", "string"], "properties": {"a": {"type": "string"}}, "required": ["a"]},
            "w": {"type": "string", "properties": {"a": {"type": "string"}}},
        },
    }
    converted, notes = gemini_schema(schema)
    assert converted["properties"] == {
        "v": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "w": {"type": "string"},
    }
    assert notes == [
        "$.v: type ['integer', 'string'] rewritten as anyOf",
        "$.v: properties dropped (type ['integer', 'string']; it applies to objects only)",
        "$.v: required dropped (type ['integer', 'string']; it applies to objects only)",
        "$.w: properties dropped (type 'string'; it applies to objects only)",
    ]


# --------------------------------------------------------------------------- 6: Gemini empty enum


def test_gemini_empty_enum_dropped_with_a_note() -> None:
    converted, notes = gemini_schema({"type": "object", "properties": {"x": {"enum": [], "type": "string"}}})
    assert converted["properties"]["x"] == {"type": "string"}
    assert notes == ["$.x: enum [] dropped (Gemini refuses an empty enum)"]


# --------------------------------------------------------------------------- round 2


def test_ref_sibling_bounds_merge_to_the_tighter() -> None:
    schema = {
        "type": "object",
        "properties": {
            "start": {"type": "integer", "minimum": 0, "maximum": 23},
            "end": {"$ref": "#/properties/start", "minimum": 1},
            "word": {"$ref": "#/$defs/word", "minLength": 1, "maxLength": 80, "exclusiveMaximum": 5},
        },
        "$defs": {"word": {"type": "string", "minLength": 2, "maxLength": 40, "exclusiveMaximum": 9}},
        "required": ["start", "end", "word"],
        "additionalProperties": False,
    }
    inlined = inline_refs(schema)["properties"]
    assert inlined["end"] == {"type": "integer", "minimum": 1, "maximum": 23}
    assert inlined["word"] == {"type": "string", "minLength": 2, "maxLength": 40, "exclusiveMaximum": 5}
    del schema["properties"]["word"]  # (strict mode takes no string lengths)
    schema["required"] = ["start", "end"]
    strict, _ = strict_schema(schema, tool="book")
    assert strict["properties"]["end"] == {"type": "integer", "minimum": 1, "maximum": 23}
    converted, notes = gemini_schema(schema)
    assert converted["properties"]["end"] == {"type": "integer", "minimum": 1, "maximum": 23}
    assert notes == ["$: additionalProperties dropped"]


def test_ref_sibling_types_merge_to_the_types_both_allow() -> None:
    def x(target: Any, beside: Any) -> Any:
        schema = {"type": "object", "$defs": {"t": {"type": target}}, "properties": {"x": {"$ref": "#/$defs/t", "type": beside}}}
        return inline_refs(schema)["properties"]["x"]

    assert x("string", ["string", "null"]) == {"type": "string"}
    assert x(["integer", "boolean", "string"], ["number", "string"]) == {"type": ["integer", "string"]}
    assert x("number", "integer") == {"type": "integer"}  # integer lies within number
    assert x("string", "integer") == {"allOf": [{"type": "string"}, {"type": "integer"}]}  # none left: apart


def test_ref_sibling_annotations_never_conflict() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Color": {"type": "string", "enum": ["red", "blue"], "example": "red", "x-order": 1, "contentMediaType": "a/b"}
        },
        "properties": {"bg": {"$ref": "#/$defs/Color", "example": "blue", "x-order": 2, "contentMediaType": "c/d"}},
        "required": ["bg"],
    }
    assert inline_refs(schema)["properties"]["bg"] == {
        "type": "string",
        "enum": ["red", "blue"],
        "example": "blue",
        "x-order": 2,
        "contentMediaType": "c/d",
    }
    converted, _ = gemini_schema(schema)
    assert converted["properties"]["bg"] == {"type": "string", "enum": ["red", "blue"], "example": "blue"}


def test_ref_sibling_const_true_beside_1_is_refused_not_merged() -> None:
    reg = _registry(
        t={"type": "object", "$defs": {"one": {"const": 1}}, "properties": {"x": {"$ref": "#/$defs/one", "const": True}}}
    )
    with pytest.raises(StrictSchemaError) as caught:
        reg.export("openai", strict=True)
    assert caught.value.reasons == [
        "$ref '#/$defs/one' and the keywords beside it cannot be inlined as one schema (both set const)"
    ]


_NOTHING = {"type": "object", "$ref": "#/$defs/N", "$defs": {"N": False}}


def test_root_ref_to_false_is_refused_with_the_reason_on_every_path() -> None:
    for call in (inline_refs, strict_schema):
        with pytest.raises(StrictSchemaError) as caught:
            call(_NOTHING, tool="t")
        assert caught.value.reasons == ["the schema allows no value"]
    assert gemini_schema(_NOTHING) == (
        {"type": "object"},
        ["$: parameters exported as any object (the schema allows no value: the harness refuses every call)"],
    )
    reg = _registry(
        t=_NOTHING,
        u={"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False},
    )
    with pytest.raises(StrictSchemaError, match="the schema allows no value"):
        reg.export("openai", strict=True)
    auto = reg.export("openai", strict="auto")
    assert auto.notes["t"] == ["exported without strict mode: the schema allows no value"]
    assert auto.tools[1]["function"]["strict"] is True
    assert dispatch_openai(reg, [_openai_call("u", {"a": "x"})], strict="auto") == [
        {"role": "tool", "tool_call_id": "c", "content": '{"a": "x"}'}
    ]
    assert reg.export("gemini").tools[0]["parameters"] == {"type": "object"}


def test_autogen_gets_no_dangling_ref_for_siblings_apart() -> None:
    from harness_one.integrations.autogen import to_autogen

    schema = {
        "type": "object",
        "$defs": {"code": {"type": "string", "pattern": "^[a-z]+$", "description": "n"}},
        "properties": {"n": {"$ref": "#/$defs/code", "pattern": "^.{1,8}$"}},
        "required": ["n"],
    }
    reg = _registry(order=schema, t=_NOTHING)
    parameters = to_autogen("order", reg).schema["parameters"]
    assert parameters == {
        "type": "object",
        "properties": {"n": {"allOf": [{"type": "string", "pattern": "^[a-z]+$", "description": "n"}, {"pattern": "^.{1,8}$"}]}},
        "required": ["n"],
    }
    # a schema that cannot be inlined (here: it allows no value) is sent as it is, not a TypeError
    assert to_autogen("t", reg).schema["parameters"] == {"type": "object", "properties": {}, **_NOTHING}


def test_gemini_type_list_beside_any_of_keeps_the_object_keywords_on_the_parent() -> None:
    schema = {
        "type": "object",
        "properties": {
            "filter": {
                "type": ["object", "string"],
                "properties": {"field": {"type": "string"}},
                "required": ["field"],
                "anyOf": [{"minLength": 1}, {"type": "object"}],
            }
        },
    }
    converted, notes = gemini_schema(schema)
    assert converted["properties"]["filter"] == {
        "anyOf": [{"minLength": 1}, {"type": "object"}],
        "properties": {"field": {"type": "string"}},
        "required": ["field"],
    }
    assert notes == ["$.filter: type ['object', 'string'] dropped (the anyOf beside it is sent)"]


def test_gemini_any_of_that_allows_nothing_dropped_with_a_note() -> None:
    schema = {
        "type": "object",
        "$defs": {"never": False},
        "properties": {"x": {"anyOf": [{"$ref": "#/$defs/never"}]}, "y": {"oneOf": [False], "type": "string"}},
    }
    converted, notes = gemini_schema(schema)
    assert converted["properties"] == {"x": {}, "y": {"type": "string"}}
    assert notes == [
        "$.x: anyOf of no allowed schema dropped (Gemini refuses an empty anyOf)",
        "$.y: oneOf of no allowed schema dropped (Gemini refuses an empty anyOf)",
    ]
