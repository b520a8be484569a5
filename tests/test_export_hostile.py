"""Exports and dispatch against a hostile review: names a model sees map back to the tool it was
shown, strict nulls are dropped at any depth, schemas are read at schema positions only, and
what a provider refuses is refused, rewritten or noted instead of sent."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Literal

import jsonschema
import pytest

from harness_one import Tool, ToolDefinitionError, ToolRegistry, define_tool
from harness_one.dispatch import dispatch_gemini, dispatch_openai
from harness_one.export import StrictSchemaError, export_tools, gemini_name, gemini_schema, inline_refs, strict_schema


def _tool(name: str, parameters: dict[str, Any], description: str = "d") -> Tool:
    return Tool.create(lambda **kw: json.dumps(kw, sort_keys=True), name=name, description=description, parameters=parameters)


def _openai_call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _booleans(node: Any) -> list[bool]:
    """Every boolean schema in a Gemini schema."""
    if isinstance(node, bool):
        return [node]
    if not isinstance(node, dict):
        return []
    subs = [*(node.get("properties") or {}).values(), *(node.get("anyOf") or []), *([node["items"]] if "items" in node else [])]
    return [found for sub in subs for found in _booleans(sub)]


# --------------------------------------------------------------------------- 1. Gemini names


def test_a_gemini_name_maps_back_to_the_tool_it_was_shown_for_in_any_export() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: "lookup", name="1tool", parameters={"type": "object", "properties": {}})
    reg.add(lambda: "delete", name="_1tool", parameters={"type": "object", "properties": {}})
    subset = reg.export("gemini", names=["1tool"])  # what the model is shown this turn
    shown = subset.tools[0]["name"]
    assert shown != "_1tool" and shown == gemini_name("1tool")
    out = dispatch_gemini(reg, [{"function_call": {"id": "g1", "name": shown, "args": {}}}])
    assert out == [{"name": shown, "response": {"output": "lookup"}, "id": "g1"}]
    full = reg.export("gemini")
    assert {t["name"] for t in full.tools} == {shown, "_1tool"}  # the same name in every export
    assert dispatch_gemini(reg, [{"name": "_1tool", "args": {}}])[0]["response"] == {"output": "delete"}


def test_a_tool_added_mid_conversation_renames_no_gemini_name() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: "first", name="2fa")
    before = [t["name"] for t in reg.export("gemini").tools]
    reg.add(lambda: "second", name="_2fa")  # the name earlier versions showed for "2fa"
    after = [t["name"] for t in reg.export("gemini").tools]
    assert after[: len(before)] == before
    assert dispatch_gemini(reg, [{"name": before[0], "args": {}}])[0]["response"] == {"output": "first"}


def test_long_gemini_names_stay_distinct_and_map_back() -> None:
    reg = ToolRegistry(autoload=False)
    stem = "1" + "a" * 60
    names = [stem + "bb", stem + "cc", stem + "b", "9" * 64]
    for i, name in enumerate(names):
        reg.add(lambda i=i: i, name=name)
    exported = [t["name"] for t in reg.export("gemini").tools]
    assert len(set(exported)) == 4 and all(len(n) <= 64 and n.startswith("_.") for n in exported)
    assert exported == [gemini_name(n) for n in names]  # the same in a subset: it depends on the name alone
    out = dispatch_gemini(reg, [{"name": n, "args": {}} for n in exported])
    assert [r["response"]["output"] for r in out] == [0, 1, 2, 3]


# --------------------------------------------------------------------------- 2. nested nulls


@dataclasses.dataclass
class Item:
    name: str
    qty: int = 1


@dataclasses.dataclass
class Options:
    verbose: bool = False


def test_strict_nulls_are_dropped_inside_arrays_and_any_of_branches() -> None:
    reg = ToolRegistry(autoload=False)

    @define_tool(registry=reg)
    def order(items: list[Item], options: Options | None = None) -> str:
        """Place an order."""
        return f"{[(i.name, i.qty) for i in items]} {options and options.verbose}"

    args = {"items": [{"name": "tea", "qty": None}, {"name": "jam", "qty": 2}], "options": {"verbose": None}}
    out = dispatch_openai(reg, [_openai_call("order", args)], strict=True)
    assert out[0]["content"] == "[('tea', 1), ('jam', 2)] False"


def test_branches_that_disagree_on_a_null_keep_it() -> None:
    schema = {
        "type": "object",
        "properties": {
            "v": {
                "anyOf": [
                    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": []},
                    {"type": "object", "properties": {"a": {"type": ["integer", "null"]}}, "required": ["a"]},
                ]
            }
        },
        "required": ["v"],
    }
    reg = ToolRegistry(autoload=False)
    reg.add(_tool("t", schema))
    out = dispatch_openai(reg, [_openai_call("t", {"v": {"a": None}})], strict=True)
    assert out[0]["content"] == '{"v": {"a": null}}'  # a null the second branch allows as a value is not dropped


# --------------------------------------------------------------------------- 3. schema positions only


def test_a_property_named_definitions_survives_every_export() -> None:
    schema = {
        "type": "object",
        "properties": {"word": {"type": "string"}, "definitions": {"type": "array", "items": {"type": "string"}}},
        "required": ["word", "definitions"],
    }
    converted, _ = strict_schema(schema)
    assert list(converted["properties"]) == ["word", "definitions"]
    gemini, _ = gemini_schema(schema)
    assert list(gemini["properties"]) == ["word", "definitions"] and gemini["required"] == ["word", "definitions"]


def test_a_ref_inside_const_is_data() -> None:
    schema = {"type": "object", "properties": {"node": {"const": {"$ref": "#/nowhere"}}}, "required": ["node"]}
    export = export_tools([_tool("ref_data", schema)], "openai", strict="auto")
    assert export.not_strict == {}
    assert export.tools[0]["function"]["parameters"]["properties"]["node"]["const"] == {"$ref": "#/nowhere"}


def test_a_required_name_without_a_property_is_a_strict_error() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "token"]}
    with pytest.raises(StrictSchemaError, match="required 'token' has no property"):
        strict_schema(schema, tool="r")
    gemini, notes = gemini_schema(schema)
    assert gemini["required"] == ["a"] and any("'token'" in n for n in notes)


# --------------------------------------------------------------------------- 4. Gemini booleans


def test_a_tuple_exports_for_gemini_as_items_that_google_genai_accepts() -> None:
    from google.genai import types

    reg = ToolRegistry(autoload=False)

    @define_tool(registry=reg)
    def move(to: tuple[int, int], pair: tuple[int, str], empty: tuple[()] = ()) -> str:
        """Move."""
        return repr(to)

    export = reg.export("gemini")
    declaration = export.tools[0]
    types.Tool(function_declarations=[declaration])  # one refused declaration would break the whole list
    props = declaration["parameters"]["properties"]
    assert props["to"]["items"] == {"type": "integer"}
    assert props["pair"]["items"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert _booleans(declaration["parameters"]) == []
    assert any("prefixItems rewritten" in n for n in export.notes["move"])


# --------------------------------------------------------------------------- 5. strict typeless, formats


def test_strict_refuses_typeless_values_and_formats_openai_does_not_know() -> None:
    schema = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri"},
            "extra": {},
            "tags": {"type": "array", "items": {}},
            "day": {"type": "string", "format": "date"},
        },
        "required": ["url", "extra", "tags", "day"],
    }
    with pytest.raises(StrictSchemaError) as caught:
        strict_schema(schema, tool="fetch")
    reasons = caught.value.reasons
    assert len(reasons) == 3 and "$.url: format 'uri'" in reasons[0]
    assert reasons[1:] == [
        "$.extra: a schema without a type cannot be strict",
        "$.tags[]: a schema without a type cannot be strict",
    ]
    day_only = {"type": "object", "properties": {"day": {"type": "string", "format": "date"}}, "required": ["day"]}
    export = export_tools([_tool("fetch", schema), _tool("day", day_only)], "openai", strict="auto")
    assert list(export.not_strict) == ["fetch"] and export.tools[1]["function"]["strict"] is True


# --------------------------------------------------------------------------- 6. Gemini formats, enums


def test_gemini_gets_only_the_formats_it_accepts_and_typed_enums() -> None:
    schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "when": {"type": "string", "format": "date-time"},
            "n": {"type": "integer", "format": "int64"},
            "kind": {"enum": ["x", "y"]},
            "mode": {"const": "fast"},
        },
    }
    converted, notes = gemini_schema(schema)
    props = converted["properties"]
    assert props["email"] == {"type": "string"} and "$.email: format 'email' dropped (Gemini refuses it)" in notes
    assert props["when"]["format"] == "date-time" and props["n"]["format"] == "int64"
    assert props["kind"] == {"type": "string", "enum": ["x", "y"]} and props["mode"] == {"type": "string", "enum": ["fast"]}


# --------------------------------------------------------------------------- 7. **kwargs under strict


def test_additional_properties_as_a_schema_beside_properties_is_a_strict_error() -> None:
    reg = ToolRegistry(autoload=False)

    @define_tool(registry=reg)
    def tag(item: str, **labels: str) -> str:
        """Tag an item."""
        return item

    with pytest.raises(StrictSchemaError, match=r"\$: additionalProperties as a schema"):
        reg.export("openai", strict=True)
    assert "tag" in reg.export("openai", strict="auto").not_strict


# --------------------------------------------------------------------------- 8. REST-shaped Gemini parts


def test_rest_shaped_function_call_parts_are_answered() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda a: a, name="echo", parameters={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    parts = [{"text": "Let me call it"}, {"functionCall": {"name": "echo", "args": {"a": 1}, "id": "fc_1"}}]
    assert dispatch_gemini(reg, parts) == [{"name": "echo", "response": {"output": 1}, "id": "fc_1"}]


# --------------------------------------------------------------------------- 9. null versus default


def test_a_nullable_optional_with_another_default_is_not_strict() -> None:
    reg = ToolRegistry(autoload=False)

    @define_tool(registry=reg)
    def search(query: str, max_results: int | None = 10, page: int | None = None) -> str:
        """Search."""
        return f"{max_results!r} {page!r}"

    with pytest.raises(StrictSchemaError, match=r"\$\.max_results: null is a value and the default is 10"):
        reg.export("openai", strict=True)
    auto = reg.export("openai", strict="auto")
    assert "strict" not in auto.tools[0]["function"] and list(auto.not_strict) == ["search"]
    out = dispatch_openai(reg, [_openai_call("search", {"query": "q", "max_results": None})], strict=True)
    assert out[0]["content"] == "None None"  # the explicit null is kept: the tool was exported without strict mode


# --------------------------------------------------------------------------- 10. the rest


def test_a_draft_07_tuple_is_refused_under_strict() -> None:
    schema = {
        "type": "object",
        "properties": {"pair": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]}},
        "required": ["pair"],
    }
    with pytest.raises(StrictSchemaError, match="draft-07 tuple"):
        strict_schema(schema)


def test_optional_const_and_enum_accept_null_under_strict() -> None:
    reg = ToolRegistry(autoload=False)

    @define_tool(
        registry=reg,
        parameters={
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "mode": {"type": "string", "const": "fast"},
                "level": {"type": ["string", "integer"], "enum": ["low", 1, 2]},
            },
            "required": ["text"],
        },
    )
    def run(text: str, mode: str = "slow", level: str | int = "low") -> str:
        """Run."""
        return f"{mode} {level}"

    @define_tool(registry=reg)
    def lit(mode: Literal["fast"] | None = None) -> str:
        """Literal."""
        return str(mode)

    for tool in reg.export("openai", strict=True).tools:
        properties = tool["function"]["parameters"]["properties"]
        for name in ("mode", "level"):
            if name in properties:
                jsonschema.validate(None, properties[name])  # the model's null for "absent" is allowed
    out = dispatch_openai(reg, [_openai_call("run", {"text": "t", "mode": None, "level": None})], strict=True)
    assert out[0]["content"] == "slow low"


def test_openai_limits_are_noted() -> None:
    tools = [_tool(f"t{i}", {"type": "object", "properties": {}}, "d" * (2000 if i == 0 else 10)) for i in range(130)]
    notes = export_tools(tools, "openai").notes
    assert notes["t0"] == ["description of 2000 characters: OpenAI refuses more than 1024"]
    assert notes["t128"] == ["tool 129 of this export: OpenAI refuses more than 128 tools in one request"]
    assert set(notes) == {"t0", "t128"}


def test_a_percent_encoded_ref_is_inlined() -> None:
    schema = {
        "type": "object",
        "$defs": {"my def": {"type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/my%20def"}},
        "required": ["a"],
    }
    assert strict_schema(schema)[0]["properties"]["a"] == {"type": "string"}
    assert gemini_schema(schema)[0]["properties"]["a"] == {"type": "string"}


# --------------------------------------------------------------------------- 11. embedded resources, anchors, dependencies

#: ``q`` is an embedded resource (its own ``$id``): its ``#/$defs/x`` is its own integer, not the root's string.
EMBEDDED = {
    "type": "object",
    "$defs": {"x": {"type": "string"}},
    "properties": {
        "s": {"$ref": "#/$defs/x"},
        "q": {
            "$id": "https://example.com/q",
            "$defs": {"x": {"type": "integer"}},
            "type": "object",
            "properties": {"n": {"$ref": "#/$defs/x"}},
        },
    },
}
EMBEDDED_ANCHOR = {
    "type": "object",
    "properties": {"q": {"$id": "https://example.com/q", "$defs": {"a": {"$anchor": "pt", "type": "integer"}}, "$ref": "#pt"}},
}


@pytest.mark.parametrize(
    ("schema", "where", "ref"),
    [(EMBEDDED, "#/properties/q/properties/n", "#/$defs/x"), (EMBEDDED_ANCHOR, "#/properties/q", "#pt")],
)
def test_a_ref_in_an_embedded_resource_is_refused_not_resolved_against_the_root(
    schema: dict[str, Any], where: str, ref: str
) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda **kw: json.dumps(kw), name="emb", parameters=schema)  # the definition check resolves it against q
    assert reg.try_call("emb", {"q": {"n": 1}} if schema is EMBEDDED else {"q": 1}).ok
    why = f"at {where}, $ref {ref!r} is in the embedded resource 'https://example.com/q' (its own $id)"
    with pytest.raises(StrictSchemaError, match=re.escape(why)):
        reg.export("openai", strict=True)
    assert why in reg.export("openai", strict="auto").not_strict["emb"][0]
    gemini = reg.export("gemini")
    assert gemini.tools[0]["parameters"] == {"type": "object"} and why in gemini.notes["emb"][0]


def test_a_recursive_schema_with_a_ref_in_an_embedded_resource_gets_no_gemini_ref_to_a_root_definition() -> None:
    tree = {
        "type": "object",
        "$defs": {"N": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}}}}},
        "properties": {
            "node": {"$ref": "#/$defs/N"},
            "q": {"$id": "https://example.com/q", "$defs": {"N": {"type": "integer"}}, "items": {"$ref": "#/$defs/N"}},
        },
    }
    gemini, notes = gemini_schema(tree)
    assert gemini == {"type": "object"} and "embedded resource" in notes[0]


def test_an_anchor_declared_twice_is_ambiguous_to_export() -> None:
    """Past the definition check (which refuses it) with a schema made by hand: neither schema is picked."""
    schema = {
        "type": "object",
        "$defs": {"a": {"$anchor": "x", "type": "string"}, "b": {"$anchor": "x", "type": "integer"}},
        "properties": {"p": {"$ref": "#x"}},
    }
    with pytest.raises(StrictSchemaError, match=re.escape("$ref '#x' is ambiguous: 2 schemas declare the anchor 'x'")):
        inline_refs(schema)
    recursive = {**schema, "$defs": {**schema["$defs"], "b": {"$anchor": "x", "items": {"$ref": "#x"}}}}
    assert gemini_schema(recursive)[0] == {"type": "object"}  # not a Gemini ref to either definition
    draft_04 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "definitions": {"a": {"id": "#x", "type": "string"}, "b": {"id": "#x", "type": "integer"}},
        "properties": {"p": {"$ref": "#x"}},
    }
    with pytest.raises(StrictSchemaError, match=re.escape("$ref '#x' is ambiguous: 2 schemas declare the anchor 'x'")):
        inline_refs(draft_04)


@pytest.mark.parametrize(("draft", "key"), [("draft-07", "$id"), ("draft-06", "$id"), ("draft-04", "id")])
def test_an_id_beside_a_ref_names_no_embedded_resource_in_drafts_4_to_7(draft: str, key: str) -> None:
    """Drafts 4-7 ignore what stands beside ``$ref``: the definition resolves the ``$ref`` against the root, and so
    does the export (it refused the ``$ref`` as one in the embedded resource the ``$id`` would name), which sends the
    target alone (the ignored ``$id`` goes with the ``$ref``)."""
    schema = {
        "$schema": f"http://json-schema.org/{draft}/schema#",
        "type": "object",
        "definitions": {"bar": {"type": "string"}},
        "properties": {"a": {key: "https://example.com/a.json", "$ref": "#/definitions/bar"}},
        "required": ["a"],
    }
    reg = ToolRegistry(autoload=False)
    reg.add(lambda a: a, name="t", parameters=schema)
    assert reg.try_call("t", {"a": "x"}).ok and not reg.try_call("t", {"a": 1}).ok  # the root's bar
    assert inline_refs(schema)["properties"]["a"] == {"type": "string"}
    gemini = reg.export("gemini")
    assert gemini.tools[0]["parameters"]["properties"] == {"a": {"type": "string"}}
    assert gemini.notes == {}


@pytest.mark.parametrize("ident", ["https://example.com/s.json", "s.json"])
def test_an_id_naming_the_root_again_is_no_embedded_resource(ident: str) -> None:
    """An ``$id`` that resolves to the root's own URI stays in the root resource, as the definition reads it."""
    schema = {
        "$id": "https://example.com/s.json",
        "type": "object",
        "$defs": {"x": {"type": "string"}},
        "properties": {"a": {"$id": ident, "type": "object", "properties": {"b": {"$ref": "#/$defs/x"}}}},
    }
    reg = ToolRegistry(autoload=False)
    reg.add(lambda **kw: json.dumps(kw), name="t", parameters=schema)
    assert not reg.try_call("t", {"a": {"b": 1}}).ok
    assert inline_refs(schema)["properties"]["a"]["properties"] == {"b": {"type": "string"}}
    assert gemini_schema(schema)[0]["properties"]["a"]["properties"] == {"b": {"type": "string"}}


@pytest.mark.parametrize("ref", ["#/$defs/x/", "#/allOf/-1", "#%2F$defs%2Fx"])
def test_export_reads_a_json_pointer_as_the_definition_does(ref: str) -> None:
    """A pointer the definition finds nothing at (a trailing ``/``, a negative index, ``%2F`` read as an anchor's name)
    points to nothing for inlining either (it was read leniently: stripped, indexed from the end, decoded first)."""
    schema = {"type": "object", "allOf": [{}], "$defs": {"x": {"type": "string"}}, "properties": {"a": {"$ref": ref}}}
    with pytest.raises(ToolDefinitionError, match=re.escape(f"$ref {ref!r} points to nothing in the schema")):
        _tool("t", schema)
    with pytest.raises(StrictSchemaError, match=re.escape(f"$ref {ref!r} points to nothing in the schema")):
        inline_refs(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "": {"type": "string"}, "properties": {"a": {"$ref": "#/"}}},
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "object",
            "definitions": {"s": {"id": "#a%20b", "type": "string"}},
            "properties": {"a": {"$ref": "#a%20b"}},
        },
    ],
    ids=["empty-key", "escaped-anchor"],
)
def test_a_ref_reads_as_the_definition_reads_it(schema: dict[str, Any]) -> None:
    """``#/`` names the root's key ``""`` (RFC 6901), not the root; an anchor's name is matched as written, not
    decoded first: inlining read both otherwise (the root, recursively; a name no schema declares)."""
    reg = ToolRegistry(autoload=False)
    reg.add(lambda **kw: json.dumps(kw), name="t", parameters=schema)
    assert not reg.try_call("t", {"a": 1}).ok
    assert inline_refs(schema)["properties"]["a"] == {"type": "string"}


def test_inlining_builds_its_result_anew_and_leaves_the_schema_alone() -> None:
    schema = {
        "type": "object",
        "$defs": {"p": {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": [["a"]]}}}}},
        "properties": {"p": {"$ref": "#/$defs/p"}, "q": {"default": {"k": [1]}}},
    }
    before = json.dumps(schema)
    inlined = inline_refs(schema)
    containers = {id(node) for node in _containers(schema)}
    assert not any(id(node) in containers for node in _containers(inlined))
    inlined["properties"]["p"]["properties"]["tags"]["items"]["enum"][0].append("b")
    assert json.dumps(schema) == before


def _containers(node: Any) -> list[Any]:
    """``node`` and every object and array inside it."""
    if isinstance(node, dict):
        return [node, *(found for value in node.values() for found in _containers(value))]
    if isinstance(node, list):
        return [node, *(found for value in node for found in _containers(value))]
    return []


def test_a_ref_in_a_draft_07_dependency_schema_is_inlined() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "definitions": {"billing": {"required": ["address"]}},
        "properties": {"card": {"type": "string"}, "address": {"$ref": "#street"}, "a": {}, "b": {}},
        "dependencies": {"card": {"$ref": "#/definitions/billing"}, "a": ["b"], "b": {"$id": "#street", "type": "string"}},
    }
    tool = _tool("pay", schema)  # the definition check reads the dependencies as it does
    inlined = inline_refs(tool.parameters)
    assert inlined["dependencies"] == {"card": {"required": ["address"]}, "a": ["b"], "b": {"type": "string"}}
    assert inlined["properties"]["address"] == {"type": "string"}
    validator = jsonschema.Draft7Validator(inlined)
    assert not validator.is_valid({"card": "4111"}) and validator.is_valid({"card": "4111", "address": "Main St"})


# --------------------------------------------------------------------------- 12. numeric bounds

DRAFT_04 = "http://json-schema.org/draft-04/schema#"


def test_draft_04_exclusive_flags_keep_their_bound_and_never_become_one() -> None:
    """Draft-04's ``exclusiveMinimum: true`` is a flag on ``minimum``: it became ``minimum: True`` for Gemini (a bool
    is an int in Python), overwriting the bound, and reached strict mode as a boolean where OpenAI wants a number."""
    from google.genai import types as genai

    schema = {
        "$schema": DRAFT_04,
        "type": "object",
        "properties": {
            "n": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 10, "exclusiveMaximum": False},
            "m": {"type": "integer", "maximum": 5, "exclusiveMaximum": True},
        },
        "required": ["n", "m"],
    }
    tool = _tool("d4", schema)  # the definition checks accept it
    export = export_tools([tool], "gemini")
    genai.FunctionDeclaration.model_validate(export.tools[0])
    assert export.tools[0]["parameters"]["properties"] == {
        "n": {"type": "number", "minimum": 0, "maximum": 10},
        "m": {"type": "integer", "maximum": 5},
    }
    assert export.notes["d4"] == [
        "$.n: exclusiveMinimum rewritten as an inclusive bound",
        "$.m: exclusiveMaximum rewritten as an inclusive bound",
    ]
    strict = export_tools([tool], "openai", strict=True).tools[0]["function"]["parameters"]
    assert strict["properties"] == {
        "n": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
        "m": {"type": "integer", "exclusiveMaximum": 5},
    }
    validator = jsonschema.Draft202012Validator(strict)  # strict mode drops $schema: the later drafts' reading
    assert validator.is_valid({"n": 0.5, "m": 4}) and validator.is_valid({"n": 10, "m": -1})
    assert not validator.is_valid({"n": 0, "m": 4}) and not validator.is_valid({"n": 1, "m": 5})
    alone = {"$schema": DRAFT_04, "type": "object", "properties": {"k": {"type": "integer", "exclusiveMinimum": True}}}
    assert gemini_schema(alone) == ({"type": "object", "properties": {"k": {"type": "integer"}}}, [])  # says nothing
    assert strict_schema(alone)[0]["properties"]["k"] == {"type": ["integer", "null"]}


@pytest.mark.parametrize(
    ("bounds", "gemini", "noted"),
    [
        ({"minimum": 5, "exclusiveMinimum": 0}, {"minimum": 5}, False),  # the inclusive bound is the tighter
        ({"exclusiveMinimum": 0, "minimum": 5}, {"minimum": 5}, False),
        ({"exclusiveMinimum": 3, "minimum": 1}, {"minimum": 3}, True),
        ({"exclusiveMinimum": 3, "minimum": 3}, {"minimum": 3}, True),
        ({"maximum": 1, "exclusiveMaximum": 9}, {"maximum": 1}, False),
        ({"exclusiveMaximum": 2.5, "maximum": 7}, {"maximum": 2.5}, True),
    ],
)
def test_gemini_takes_the_tighter_of_an_inclusive_and_an_exclusive_bound(
    bounds: dict[str, Any], gemini: dict[str, Any], noted: bool
) -> None:
    """Both given: whichever came last in the schema was kept, even the looser one."""
    converted, notes = gemini_schema({"type": "object", "properties": {"n": {"type": "number", **bounds}}})
    assert converted["properties"]["n"] == {"type": "number", **gemini}
    assert bool(notes) is noted and all("rewritten as an inclusive bound" in note for note in notes)
