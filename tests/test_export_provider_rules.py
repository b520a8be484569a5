"""Exports keep to what each provider accepts: unique names, bounded $ref inlining, per-tool fallbacks."""

from __future__ import annotations

import json
import re
from typing import Any, Literal, Optional

import pytest
from pydantic import BaseModel, TypeAdapter

from harness_one import Tool, ToolDefinitionError, ToolRegistry
from harness_one.dispatch import dispatch_anthropic, dispatch_gemini, dispatch_openai
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


# --------------------------------------------------------------------------- $ref to an anchor

POINT = {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0}}, "required": ["x"]}
ANCHORED = {
    "type": "object",
    "$defs": {"point": {"$anchor": "pt", **POINT}},
    "properties": {"p": {"$ref": "#pt"}},
    "required": ["p"],
}


@pytest.mark.parametrize("fmt", ["openai", "openai-responses"])
def test_a_ref_to_an_anchor_is_inlined_for_strict_openai(fmt: str) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda p: p, name="at", parameters=ANCHORED)
    export = reg.export(fmt, strict=True)
    definition = export.tools[0]
    parameters = (definition["function"] if fmt == "openai" else definition)["parameters"]
    assert parameters["properties"]["p"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": ["number", "null"]}},
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert "$defs" not in parameters and export.nullable == {"at": {"properties": {"p": {"absent": ["y"]}}}}
    call = {"id": "c1", "type": "function", "function": {"name": "at", "arguments": '{"p": {"x": 1, "y": null}}'}}
    # The null meant "absent": dropped, then y's default (found through the anchor) filled in.
    assert dispatch_openai(reg, [call], strict=True)[0]["content"] == '{"x": 1, "y": 0}'


def test_a_ref_to_an_anchor_is_inlined_for_gemini() -> None:
    from google.genai import types as genai

    export = export_tools([_tool("at", ANCHORED)], "gemini")
    genai.FunctionDeclaration.model_validate(export.tools[0])
    assert export.tools[0]["parameters"] == {"type": "object", "properties": {"p": POINT}, "required": ["p"]}
    assert export.notes == {}


@pytest.mark.parametrize(("draft", "key"), [("draft-07", "$id"), ("draft-06", "$id"), ("draft-04", "id")])
def test_a_draft_04_to_07_id_anchor_is_inlined(draft: str, key: str) -> None:
    schema = {
        "$schema": f"http://json-schema.org/{draft}/schema#",
        "type": "object",
        "definitions": {"name": {key: "#name", "type": "string"}},
        "properties": {"n": {"$ref": "#name"}},
        "required": ["n"],
    }
    tool = _tool("old", schema)  # the definition checks resolve it
    assert export_tools([tool], "openai", strict=True).tools[0]["function"]["parameters"]["properties"]["n"] == {"type": "string"}
    assert export_tools([tool], "gemini").tools[0]["parameters"]["properties"]["n"] == {"type": "string"}
    assert inline_refs(schema)["properties"]["n"] == {"type": "string"}  # the anchor's id went with the $ref


def test_an_id_anchor_of_another_draft_is_no_anchor() -> None:
    """``id`` is draft-04's keyword: in a 2020-12 schema it names nothing (and ``$id: "#x"`` is refused there)."""
    schema = {"type": "object", "$defs": {"name": {"id": "#name", "type": "string"}}, "properties": {"n": {"$ref": "#name"}}}
    with pytest.raises(ToolDefinitionError, match="points to nothing"):
        _tool("new", schema)
    with pytest.raises(StrictSchemaError, match=re.escape("$ref '#name' points to nothing in the schema")):
        inline_refs(schema)


def test_a_recursive_anchor_becomes_gemini_ref_to_its_definition() -> None:
    from google.genai import types as genai

    tree = {
        "type": "object",
        "$defs": {
            "N": {"$anchor": "node", "type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#node"}}}}
        },
        "properties": {"node": {"$ref": "#node"}},
    }
    export = export_tools([_tool("tree", tree)], "gemini")
    genai.FunctionDeclaration.model_validate(export.tools[0])
    parameters = export.tools[0]["parameters"]
    assert parameters["properties"]["node"] == {"ref": "#/defs/N"}
    assert parameters["defs"]["N"]["properties"]["kids"]["items"] == {"ref": "#/defs/N"}
    assert "recursive" in export.notes["tree"][0]


def test_a_ref_to_a_missing_anchor_is_refused_like_a_missing_pointer() -> None:
    reg = ToolRegistry(autoload=False)
    for ref in ("#/$defs/nowhere", "#nowhere"):
        with pytest.raises(ToolDefinitionError, match=re.escape(f"$ref '{ref}' points to nothing in the schema")):
            reg.add(lambda p=None: p, name="f", parameters={"type": "object", "properties": {"p": {"$ref": ref}}})
    in_data = {"type": "object", "properties": {"p": {"$ref": "#pt"}, "q": {"const": {"$anchor": "pt"}}}}
    elsewhere = {"type": "object", "properties": {"p": {"$ref": "#pt"}, "q": {"$id": "https://example.com/q", "$anchor": "pt"}}}
    for schema in ({"type": "object", "properties": {"p": {"$ref": "#nowhere"}}}, in_data, elsewhere):
        with pytest.raises(StrictSchemaError, match="points to nothing in the schema"):
            inline_refs(schema)


def test_the_gemini_name_rule_is_one_definition_the_kit_keeps() -> None:
    from harness_one.export import GEMINI_NAME, GEMINI_NAME_MAX, gemini_name
    from harness_one.testing import PROVIDER_NAMES

    assert PROVIDER_NAMES["gemini"] is GEMINI_NAME and GEMINI_NAME_MAX == 64
    for good in ("a", "_", "ns:tool.v1-2_x", "a" * 64, "_" + "9" * 63):
        assert GEMINI_NAME.match(good), good
    for bad in ("", "a" * 65, "1tool", "-tool", ".tool", "a b", "a/b", "a\n", "é"):
        assert not GEMINI_NAME.match(bad), bad
    assert all(GEMINI_NAME.match(gemini_name(n)) for n in ("1" + "a" * 63, "-x", "9" * 62, "9" * 63))


# --------------------------------------------------------------------------- Gemini: a tool without arguments


def test_a_tool_without_arguments_has_no_gemini_parameters() -> None:
    """Gemini answers 400 "parameters.properties: should be non-empty for OBJECT type" to an empty object."""
    from google.genai import types as genai

    reg = ToolRegistry(autoload=False)

    @reg.add
    def ping() -> str:
        return "pong"

    for name, schema in [
        ("hand", {"type": "object", "properties": {}}),  # as MCP servers write it
        ("bare", {"type": "object"}),
        ("absent", {"type": "object", "properties": {"x": False}, "additionalProperties": False, "title": "A"}),
    ]:
        reg.add(lambda: "pong", name=name, parameters=schema)
    export = reg.export("gemini")
    for declaration in export.tools:
        genai.FunctionDeclaration.model_validate(declaration)
        assert set(declaration) == {"name", "description"}, declaration
    assert export.notes == {}  # no schema was sent: nothing of one is noted as dropped ("$: additionalProperties dropped")
    calls = [
        {"functionCall": {"id": "a", "name": "ping"}},  # args absent, as the REST API may send it
        {"function_call": {"id": "b", "name": "ping", "args": {}}},
        genai.Part(function_call=genai.FunctionCall(id="c", name="hand")),
    ]
    out = dispatch_gemini(reg, calls)
    assert [(o["id"], o["response"]) for o in out] == [
        ("a", {"output": "pong"}),
        ("b", {"output": "pong"}),
        ("c", {"output": "pong"}),
    ]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},  # def f(**kw: str)
        {"type": "object", "additionalProperties": True},
        {"type": "object", "patternProperties": {"^x_": {"type": "integer"}}},
        {"type": "object", "properties": {}, "required": ["key"]},
        {"type": "object", "properties": {}, "minProperties": 1},
    ],
)
def test_an_object_that_takes_keys_keeps_gemini_parameters_without_empty_properties(schema: dict[str, Any]) -> None:
    """A kwargs-only tool is told it takes an object (its description says which keys), not that it takes nothing."""
    from google.genai import types as genai

    export = export_tools([_tool("kw", schema)], "gemini")
    genai.FunctionDeclaration.model_validate(export.tools[0])
    parameters = export.tools[0]["parameters"]
    assert parameters["type"] == "object" and "properties" not in parameters


def test_a_tool_taking_any_keyword_is_not_exported_as_taking_nothing() -> None:
    """``def f(**kw)`` states ``additionalProperties: true``: Gemini gets parameters (it got none, so the model was
    told the tool takes nothing), the other formats say so, strict mode refuses it as before."""
    from google.genai import types as genai

    def bare(**kw):  # type: ignore[no-untyped-def]
        return sorted(kw)

    def loose(**kw: Any) -> list[str]:
        return sorted(kw)

    reg = ToolRegistry(autoload=False)
    reg.add(bare)
    reg.add(loose)
    gemini = reg.export("gemini")
    for declaration in gemini.tools:
        genai.FunctionDeclaration.model_validate(declaration)
        assert declaration["parameters"] == {"type": "object"}
    assert gemini.notes == {"bare": ["$: additionalProperties dropped"], "loose": ["$: additionalProperties dropped"]}
    assert dispatch_gemini(reg, [{"name": "bare", "args": {"a": 1, "b": "2"}}])[0]["response"] == {"output": ["a", "b"]}
    takes_any = {"type": "object", "properties": {}, "additionalProperties": True}
    assert [t["function"]["parameters"] for t in reg.export("openai").tools] == [takes_any] * 2
    assert [t["parameters"] for t in reg.export("openai-responses").tools] == [takes_any] * 2
    assert [t["input_schema"] for t in reg.export("anthropic").tools] == [takes_any] * 2
    assert [t["inputSchema"] for t in reg.export("mcp").tools] == [takes_any] * 2
    with pytest.raises(StrictSchemaError, match=re.escape("$: an object without declared properties cannot be strict")):
        reg.export("openai", strict=True)
    assert dispatch_anthropic(reg, [{"type": "tool_use", "id": "t", "name": "loose", "input": {"x": 1}}])[0]["content"] == '["x"]'


def test_a_kwargs_only_tool_is_called_with_its_keys_from_gemini() -> None:
    reg = ToolRegistry(autoload=False)

    @reg.add
    def tag(**labels: str) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))

    assert reg.export("gemini").tools[0]["parameters"] == {"type": "object"}
    assert dispatch_gemini(reg, [{"name": "tag", "args": {"a": "1"}}])[0]["response"] == {"output": "a=1"}


class Empty(BaseModel):
    pass


def test_nested_empty_objects_lose_their_empty_properties_for_gemini() -> None:
    from google.genai import types as genai

    reg = ToolRegistry(autoload=False)

    @reg.add
    def use(e: Empty, f: list[Empty]) -> str:
        return "ok"

    export = reg.export("gemini")
    genai.FunctionDeclaration.model_validate(export.tools[0])
    properties = export.tools[0]["parameters"]["properties"]
    assert properties["e"] == {"type": "object", "title": "Empty"} and properties["f"]["items"] == properties["e"]
    assert export.tools[0]["parameters"]["required"] == ["e", "f"]  # the property stays: only the empty map goes
    assert dispatch_gemini(reg, [{"name": "use", "args": {"e": {}, "f": [{}]}}])[0]["response"] == {"output": "ok"}


def test_a_described_schema_without_arguments_notes_the_description_it_drops() -> None:
    export = export_tools([_tool("now", {"type": "object", "properties": {}, "description": "No input."})], "gemini")
    assert "parameters" not in export.tools[0]
    assert export.notes["now"] == ["$: description dropped with the parameters (the tool takes no arguments)"]


def test_a_dynamic_anchor_is_a_name_inlining_consumes() -> None:
    """Inlining dropped $anchor but kept $dynamicAnchor: strict export then refused the tool for it."""
    schema = {
        "type": "object",
        "properties": {"p": {"$ref": "#pt"}},
        "required": ["p"],
        "additionalProperties": False,
        "$defs": {
            "pt": {
                "$dynamicAnchor": "pt",
                "type": "object",
                "properties": {"x": {"type": "number"}},
                "required": ["x"],
                "additionalProperties": False,
            }
        },
    }
    reg = ToolRegistry(autoload=False)
    reg.add(lambda p: p, name="f", parameters=schema)
    tool = reg.export("openai", strict=True).tools[0]["function"]
    assert tool["parameters"]["properties"]["p"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}},
        "required": ["x"],
        "additionalProperties": False,
    }
    assert "$.p: $dynamicAnchor dropped" not in reg.export("gemini").notes.get("f", [])


def test_a_tool_taking_extra_keywords_beside_its_parameters_is_not_strict() -> None:
    """Strict export narrowed ``def f(a, **kw)`` to ``additionalProperties: false``: the model could no longer
    send the keys the tool takes. Said outright, extra keys are refused for strict, as ``**kw: str`` was; a
    schema that only leaves additionalProperties out is narrowed, as before."""
    reg = ToolRegistry(autoload=False)

    def tagged(name: str, **labels: Any) -> str:
        return name

    reg.add(tagged)
    reg.add(lambda a: a, name="plain", parameters={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    export = reg.export("openai", strict="auto")
    assert export.not_strict == {"tagged": ["$: additionalProperties true (keys beyond the properties) cannot be strict"]}
    strict = {t["function"]["name"]: t["function"] for t in export.tools}
    assert "strict" not in strict["tagged"] and strict["plain"]["strict"] is True
    assert strict["plain"]["parameters"]["additionalProperties"] is False


def _arrays_without_items(node: Any, path: str = "$") -> list[str]:
    """Where an array schema (by its ``type``) has no ``items``, in schema positions of an exported schema."""
    if isinstance(node, list):
        return [p for i, sub in enumerate(node) for p in _arrays_without_items(sub, f"{path}[{i}]")]
    if not isinstance(node, dict):
        return []
    kind = node.get("type")
    found = [path] if (kind == "array" or (isinstance(kind, list) and "array" in kind)) and "items" not in node else []
    for key in ("items", "anyOf", "oneOf", "allOf", "properties", "$defs", "defs"):
        value = node.get(key)
        if key in ("properties", "$defs", "defs") and isinstance(value, dict):
            found += [p for name, sub in value.items() for p in _arrays_without_items(sub, f"{path}.{name}")]
        elif value is not None:
            found += _arrays_without_items(value, f"{path}.{key}")
    return found


ITEMLESS = {
    "type": "object",
    "properties": {
        "a": {"type": "array"},
        "b": {"type": "array", "items": {"type": "array"}},
        "c": {"anyOf": [{"type": "array"}, {"type": "string"}]},
        "d": {"type": ["array", "string", "null"]},
    },
    "required": ["a"],
}


def test_an_array_without_items_is_exported_with_any_items_or_not_strict() -> None:
    """OpenAI (strict or not) and Gemini refuse an array schema without ``items``, failing the whole request
    ("array schema missing items", "items: missing field"); ``def tag(tags: list)`` infers one."""
    reg = ToolRegistry(autoload=False)

    @reg.add
    def tag(tags: list, extra: list | str = "") -> int:  # type: ignore[type-arg]
        """Tag things."""
        return len(tags)

    reg.add(_tool("raw", ITEMLESS))
    for fmt in ("openai", "openai-responses"):
        export = reg.export(fmt)
        for tool in export.tools:
            params = tool.get("function", tool)["parameters"]
            assert _arrays_without_items(params) == []
        assert "$.b[]: items {} (any items) added (OpenAI refuses an array without items)" in export.notes["raw"]
        auto = reg.export(fmt, strict="auto")
        assert auto.not_strict["tag"] == [
            "$.tags: an array without items cannot be strict",
            "$.extra: an array without items cannot be strict",
        ]
        assert "$.c.anyOf[0]: an array without items cannot be strict" in auto.not_strict["raw"]
        assert all(_arrays_without_items(t.get("function", t)["parameters"]) == [] for t in auto.tools)
        with pytest.raises(StrictSchemaError, match="an array without items cannot be strict"):
            reg.export(fmt, strict=True, names=["tag"])
    gemini = reg.export("gemini")
    assert all(_arrays_without_items(t["parameters"]) == [] for t in gemini.tools)
    raw = gemini.tools[1]["parameters"]["properties"]
    assert raw["d"] == {"anyOf": [{"type": "array", "items": {}}, {"type": "string"}], "nullable": True}
    assert "$.a: items {} (any items) added (Gemini refuses an array without items)" in gemini.notes["raw"]
    assert ITEMLESS["properties"]["a"] == {"type": "array"}  # the tool's own schema unchanged


def test_a_schema_whose_arrays_have_items_is_exported_as_it_is() -> None:
    tool = _tool("f", {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}})
    assert export_tools([tool], "openai", copy=False).tools[0]["function"]["parameters"] is tool.parameters


def test_items_false_alone_still_sends_gemini_items() -> None:
    schema = {"type": "object", "properties": {"none": {"type": "array", "items": False}}}
    converted, _ = gemini_schema(schema)
    assert converted["properties"]["none"] == {"type": "array", "maxItems": 0, "items": {}}


DRAFT_04 = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "type": "object",
    "properties": {
        "ttl": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
        "top": {"type": "number", "maximum": 1, "exclusiveMaximum": False},
        "point": {"$ref": "#pt", "description": "A point.", "minItems": 5},
    },
    "definitions": {"pt": {"id": "#pt", "type": "array", "items": [{"type": "number"}, {"type": "number"}]}},
    "required": ["ttl"],
}
DRAFT_07 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "pt": {"type": "array", "items": [{"type": "number"}, {"type": "string"}], "additionalItems": False},
        "any": {"type": "array", "items": {"type": "integer"}, "additionalItems": False},
        "named": {"$ref": "#/definitions/name"},
    },
    "definitions": {"name": {"$id": "#name", "type": "string", "minLength": 1}},
    "required": ["pt"],
}


@pytest.mark.parametrize("schema", [DRAFT_04, DRAFT_07], ids=["draft-04", "draft-07"])
def test_an_earlier_draft_is_written_as_2020_12_for_anthropic(schema: dict[str, Any]) -> None:
    """Anthropic refuses an ``input_schema`` that is not valid draft 2020-12; the rewrite validates alike."""
    from jsonschema import Draft202012Validator, validators

    reg = ToolRegistry(autoload=False)
    reg.add(_tool("t", schema))
    export = reg.export("anthropic")
    sent = export.tools[0]["input_schema"]
    assert "$schema" not in sent
    assert list(Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(sent)) == []
    assert export.notes["t"][0].startswith("$: $schema (draft-0")
    before, after = validators.validator_for(schema)(schema), Draft202012Validator(sent)
    samples: list[Any] = [
        {"ttl": 0},
        {"ttl": 1, "top": 1},
        {"ttl": 1, "point": [1, 2]},
        {"ttl": 1, "point": [1, "x"]},
        {"ttl": 1, "point": [1]},
        {"pt": [1, "a"]},
        {"pt": [1, "a", 3]},
        {"pt": ["a"]},
        {"pt": [], "any": [1, 2]},
        {"pt": [], "named": ""},
        {"pt": [], "named": "x"},
    ]
    for instance in samples:
        assert before.is_valid(instance) == after.is_valid(instance), instance


def test_the_anthropic_rewrite_notes_each_change() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(_tool("t", DRAFT_04))
    reg.add(_tool("u", DRAFT_07))
    export = reg.export("anthropic")
    assert export.notes["t"][1:] == [
        "$.ttl: boolean exclusiveMinimum/exclusiveMaximum rewritten as numbers",
        "$.top: boolean exclusiveMinimum/exclusiveMaximum rewritten as numbers",
        "$.point: minItems beside $ref dropped (draft-04 ignores them)",
        "$.definitions.pt: id '#pt' rewritten as $anchor 'pt'",
        "$.definitions.pt: items as an array rewritten as prefixItems",
    ]
    assert export.notes["u"][1:] == [
        "$.pt: items as an array rewritten as prefixItems",
        "$.pt: additionalItems rewritten as items",
        "$.any: additionalItems dropped (without items as an array it applies to nothing)",
        "$.definitions.name: $id '#name' rewritten as $anchor 'name'",
    ]
    assert export.tools[0]["input_schema"]["properties"]["point"] == {"$ref": "#pt", "description": "A point."}


TUPLE_REFS = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "p": {"type": "array", "items": [{"type": "string", "minLength": 2}, {"type": "integer"}], "additionalItems": False},
        "t": {"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "boolean"}},
        "q": {"$ref": "#/properties/p/items/1"},
        "r": {"$ref": "#/properties/t/additionalItems", "description": "R."},
        "s": {"$ref": "#/definitions/a%20pair/items/0"},
    },
    "definitions": {"a pair": {"items": [{"const": 1}, {"const": 2}]}},
    "required": ["p"],
}


def test_a_ref_into_a_rewritten_tuple_names_the_same_schema_for_anthropic() -> None:
    """A JSON pointer through a tuple's ``items`` or ``additionalItems`` follows them to ``prefixItems`` and ``items``."""
    from jsonschema import Draft7Validator, Draft202012Validator

    export = export_tools([_tool("t", TUPLE_REFS)], "anthropic")
    sent = export.tools[0]["input_schema"]
    assert sent["properties"]["q"] == {"$ref": "#/properties/p/prefixItems/1"}
    assert sent["properties"]["r"] == {"$ref": "#/properties/t/items", "description": "R."}
    assert sent["properties"]["s"] == {"$ref": "#/definitions/a%20pair/prefixItems/0"}
    assert (
        "$.q: $ref '#/properties/p/items/1' rewritten as '#/properties/p/prefixItems/1', where the rewrite moved what it names"
        in export.notes["t"]
    )
    before, after = Draft7Validator(TUPLE_REFS), Draft202012Validator(sent)
    samples: list[Any] = [
        {"p": ["ab", 1], "q": 5},
        {"p": ["ab", 1], "q": "x"},
        {"p": ["ab", 1], "t": ["a", True], "r": False},
        {"p": ["ab", 1], "r": "x"},
        {"p": ["ab", 1], "s": 1},
        {"p": ["ab", 1], "s": 2},
    ]
    for instance in samples:
        assert before.is_valid(instance) == after.is_valid(instance), instance


def test_a_ref_to_a_place_the_anthropic_rewrite_drops_is_sent_as_any_value() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "integer"}, "additionalItems": {"type": "string"}},
            "s": {"$ref": "#/properties/a/additionalItems", "title": "S"},
        },
    }
    export = export_tools([_tool("t", schema)], "anthropic")
    assert export.tools[0]["input_schema"]["properties"]["s"] == {"title": "S"}
    assert (
        "$.s: $ref '#/properties/a/additionalItems' names a place the rewrite drops, so it is sent as any value (calls "
        "are still validated with it)" in export.notes["t"]
    )


def test_a_2020_12_schema_goes_to_anthropic_as_it_is() -> None:
    tool = _tool("f", {"type": "object", "properties": {"a": {"type": "array", "prefixItems": [{"type": "string"}]}}})
    export = export_tools([tool], "anthropic", copy=False)
    assert export.tools[0]["input_schema"] is tool.parameters and export.notes == {}


def test_gemini_gets_a_type_for_an_object_given_without_one() -> None:
    schema = {"type": "object", "properties": {"o": {"properties": {"a": {"type": "string"}}, "required": ["a"]}}}
    converted, _ = gemini_schema(schema)
    assert converted["properties"]["o"]["type"] == "object"


def test_gemini_never_gets_an_empty_enum_value() -> None:
    reg = ToolRegistry(autoload=False)

    @reg.add
    def f(op: Literal["", "eq", "neq"] = "eq", only: Literal[""] = "") -> int:
        """F."""
        return 0

    export = reg.export("gemini")
    props = export.tools[0]["parameters"]["properties"]
    assert props["op"]["enum"] == ["eq", "neq"]
    assert "enum" not in props["only"]
    assert "$.op: enum value '' dropped (Gemini refuses an empty enum value)" in export.notes["f"]
    converted, notes = gemini_schema({"type": "object", "properties": {"c": {"const": ""}}})
    assert converted["properties"]["c"] == {} and notes == ["$.c: const '' dropped (Gemini refuses an empty enum value)"]


def test_gemini_gets_optional_as_nullable_as_google_genai_writes_it() -> None:
    reg = ToolRegistry(autoload=False)

    @reg.add
    def f(ids: Optional[list[int]] = None, either: int | str | None = None) -> int:  # noqa: UP045
        """F."""
        return 0

    props = reg.export("gemini").tools[0]["parameters"]["properties"]
    assert props["ids"] == {"type": "array", "items": {"type": "integer"}, "default": None, "nullable": True}
    assert props["either"]["nullable"] is True
    assert {"nullable": True} not in props["either"].get("anyOf", [])


def test_a_gemini_parameter_name_outside_google_genais_rule_is_noted() -> None:
    reg = ToolRegistry(autoload=False)
    props = {"ok_name": {"type": "string"}, "bad-name": {"type": "string"}, "x" * 65: {"type": "string"}}
    reg.add(_tool("t", {"type": "object", "properties": props}))
    export = reg.export("gemini")
    assert set(export.tools[0]["parameters"]["properties"]) == set(props)  # not renamed
    said = [n for n in export.notes["t"] if "parameter name" in n]
    assert len(said) == 2 and said[0].startswith('$["bad-name"]: a parameter name outside')


def _nested(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels - 1):
        node = {"type": "object", "properties": {"n": node}, "required": ["n"]}
    return {"type": "object", "properties": {"n": node}, "required": ["n"]}


def test_strict_mode_keeps_to_openais_documented_limits() -> None:
    many = {f"p{i}": {"type": "integer"} for i in range(5_001)}
    cases = {
        "deep": _nested(11),
        "wide": {"type": "object", "properties": many, "required": list(many)},
        "enums": {
            "type": "object",
            "properties": {f"e{i}": {"type": "string", "enum": [str(j) for j in range(101)]} for i in range(10)},
            "required": [f"e{i}" for i in range(10)],
        },
        "long_enum": {
            "type": "object",
            "properties": {"e": {"type": "string", "enum": [f"{j:060d}" for j in range(251)]}},
            "required": ["e"],
        },
        "chars": {"type": "object", "properties": {"s": {"type": "string", "enum": ["x" * 60_001, "y" * 60_000]}}},
    }
    reg = ToolRegistry(autoload=False)
    for name, schema in cases.items():
        reg.add(_tool(name, schema))
    reg.add(_tool("ten", _nested(10)))
    export = reg.export("openai", strict="auto")
    assert set(export.not_strict) == set(cases)
    assert export.not_strict["deep"] == ["$.n.n.n.n.n.n.n.n.n.n: objects nested 11 levels deep (strict mode allows 10)"]
    assert export.not_strict["wide"] == ["$: 5001 object properties in all (strict mode allows 5000)"]
    assert "$: 1010 enum values in all (strict mode allows 1000)" in export.not_strict["enums"]
    assert export.not_strict["long_enum"][0].startswith("$.e: an enum of 251 values whose text is 15060 characters")
    assert export.not_strict["chars"] == [
        "$: 120002 characters of property names and enum and const values in all (strict mode allows 120000)"
    ]
    with pytest.raises(StrictSchemaError, match="nested 11 levels"):
        strict_schema(_nested(11))
