"""Review 25: exports and dispatch (a deep $ref chain, strict nulls in unions of objects, the Anthropic rewrite of
anchors and 2019-09 recursion, malformed calls under ids no answer can carry, dispatch options)."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema
import jsonschema_rs
import pytest

from harness_one import Tool, ToolRegistry
from harness_one.dispatch import (
    adispatch_openai,
    dispatch_anthropic,
    dispatch_gemini,
    dispatch_openai,
    dispatch_openai_responses,
)
from harness_one.export import StrictSchemaError, inline_refs


def _registry() -> ToolRegistry:
    return ToolRegistry(autoload=False)


def _chain(n: int) -> dict[str, Any]:
    """A schema whose ``x`` is ``n`` arrays deep, each level a small ``$defs`` entry using the next."""
    defs = {
        f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"} if i + 1 < n else {"type": "string"}} for i in range(n)
    }
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}


def _openai_call(cid: Any, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


# --------------------------------------------------------------------------- 2: a $ref chain nesting past 128 levels

DEEP = "inlining $ref would nest the schema more than 128 levels deep"


def _chained_registry(n: int) -> ToolRegistry:
    reg = _registry()

    @reg.add
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    def nested(**kw: Any) -> str:
        return "ok"

    reg.add(Tool.create(nested, name="nested", description="deep", parameters=_chain(n)))
    return reg


def test_a_ref_chain_nesting_past_128_levels_is_not_inlined_and_affects_only_its_tool() -> None:
    reg = _chained_registry(200)
    gemini = reg.export("gemini")
    assert gemini.notes["nested"] == [f"$: $ref kept as Gemini's ref to root defs ({DEEP})"]
    declaration = next(d for d in gemini.tools if d["name"] == "nested")
    assert declaration["parameters"]["properties"] == {"x": {"ref": "#/defs/d0"}}
    assert declaration["parameters"]["defs"]["d0"] == {"type": "array", "items": {"ref": "#/defs/d1"}}
    assert reg.export("openai", strict="auto").not_strict == {"nested": [DEEP]}
    with pytest.raises(StrictSchemaError) as caught:
        reg.export("openai", strict=True)
    assert str(caught.value) == f"Tool 'nested' cannot be exported in strict mode: {DEEP}."
    with pytest.raises(StrictSchemaError, match="more than 128 levels deep"):
        inline_refs(_chain(200), tool="nested")
    # dispatch of the other tool, strict (reads the strict="auto" export) and by a Gemini dotted name
    assert dispatch_openai(reg, [_openai_call("c1", "add", {"a": 1, "b": 2})], strict=True) == [
        {"role": "tool", "tool_call_id": "c1", "content": "3"}
    ]
    answer = dispatch_gemini(reg, [{"id": "c1", "name": "_.zz.abc", "args": {}}])
    assert answer == [
        {"name": "_.zz.abc", "response": {"error": "Unknown tool '_.zz.abc'. Available tools: add, nested."}, "id": "c1"}
    ]


def test_a_ref_chain_within_128_levels_is_still_inlined() -> None:
    inlined = inline_refs(_chain(100))
    node, levels = inlined["properties"]["x"], 0
    while node.get("type") == "array":
        node, levels = node["items"], levels + 1
    assert (levels, node) == (100, {"type": "string"})
    assert _chained_registry(100).export("openai", strict="auto").not_strict == {}


# --------------------------------------------------------------------------- 3: strict nulls in a union of objects


@dataclass
class Small:
    kind: Literal["small"]
    n: int = 1


@dataclass
class Big:
    kind: Literal["big"]
    n: int = 1
    extra: str = "x"


def test_strict_null_in_a_union_of_objects_is_dropped_for_the_branch_whose_keys_were_sent() -> None:
    reg = _registry()

    @reg.add
    def f(v: Small | Big) -> str:
        """f"""
        return repr(v)

    reg.export("openai", strict=True)
    calls = [
        _openai_call("c1", "f", {"v": {"kind": "small", "n": None}}),
        _openai_call("c2", "f", {"v": {"kind": "big", "n": None, "extra": None}}),
    ]
    assert [a["content"] for a in dispatch_openai(reg, calls, strict=True)] == [
        "Small(kind='small', n=1)",
        "Big(kind='big', n=1, extra='x')",
    ]


@dataclass
class Plain:
    kind: Literal["plain"]
    n: int = 1


@dataclass
class NullValue:
    kind: Literal["nullable"]
    n: int | None
    extra: str = "x"


def test_strict_null_follows_the_branch_whose_properties_are_exactly_the_keys_sent() -> None:
    reg = _registry()

    @reg.add
    def h(v: Plain | NullValue) -> str:
        """h"""
        return repr(v)

    reg.export("openai", strict=True)
    # {kind, n} fits both branches' keys, but only Plain has exactly them (NullValue would have sent extra too):
    # Plain reads n's null as absent, so it goes, though NullValue reads it as a value
    calls = [
        _openai_call("c1", "h", {"v": {"kind": "plain", "n": None}}),
        _openai_call("c2", "h", {"v": {"kind": "nullable", "n": None, "extra": None}}),
    ]
    assert [a["content"] for a in dispatch_openai(reg, calls, strict=True)] == [
        "Plain(kind='plain', n=1)",
        "NullValue(kind='nullable', n=None, extra='x')",
    ]


@dataclass
class WithNone:
    kind: Literal["a"]
    m: int | None
    n: int = 1


@dataclass
class WithDefault:
    kind: Literal["b"]
    m: int = 0
    n: int = 1


@dataclass
class Untagged:
    m: int | None
    n: int = 1


@dataclass
class UntaggedDefault:
    m: int = 0
    n: int = 1


def test_strict_null_is_dropped_where_every_fitting_branch_drops_it_and_kept_where_one_reads_it_as_a_value() -> None:
    reg = _registry()

    @reg.add
    def g(v: WithNone | WithDefault) -> str:
        """g"""
        return repr(v)

    nullable = reg.export("openai", strict=True).nullable["g"]["properties"]["v"]
    assert nullable == {
        "anyOf": [
            ("object", frozenset({"kind", "m", "n"}), {"absent": ["n"]}),
            ("object", frozenset({"kind", "m", "n"}), {"absent": ["m", "n"]}),
        ],
        "tags": [(("kind", "a"),), (("kind", "b"),)],
    }
    # kind "a" is WithNone's tag: only that branch applies (m's null is its value, n's absent)
    out = dispatch_openai(reg, [_openai_call("c1", "g", {"v": {"kind": "a", "m": None, "n": None}})], strict=True)
    assert out[0]["content"] == "WithNone(kind='a', m=None, n=1)"

    @reg.add
    def u(v: Untagged | UntaggedDefault) -> str:
        """u"""
        return repr(v)

    # no tag tells the branches apart: both fit; both drop n's null, only one drops m's (the other reads it as a
    # value): n goes, m stays, for validation to judge
    out = dispatch_openai(reg, [_openai_call("c1", "u", {"v": {"m": None, "n": None}})], strict=True)
    assert out[0]["content"].endswith("Untagged(m=None, n=1)")


# --------------------------------------------------------------------------- 6: the Anthropic rewrite


def _anthropic(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    reg = _registry()

    def f(**kw: Any) -> Any:
        return kw

    reg.add(Tool.create(f, name="f", description="d", parameters=schema))
    export = reg.export("anthropic")
    return export.tools[0]["input_schema"], export.notes["f"]


def _agrees(original: dict[str, Any], exported: dict[str, Any], draft: Any, instances: list[Any]) -> None:
    """The export, read as 2020-12 by both validators, judges each instance as the original under its own draft."""
    jsonschema.Draft202012Validator.check_schema(exported)
    rust = jsonschema_rs.validator_for(exported)
    py = jsonschema.Draft202012Validator(exported)
    for instance in instances:
        expected = draft(original).is_valid(instance)
        assert (py.is_valid(instance), rust.is_valid(instance)) == (expected, expected), instance


@pytest.mark.parametrize("anchor", ["#1abc", "#a:b", "#-x"])
def test_a_ref_to_an_anchor_2020_12_cannot_name_becomes_the_pointer_of_its_schema(anchor: str) -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "definitions": {"zip": {"$id": anchor, "type": "integer"}},
        "properties": {"zip": {"$ref": anchor}},
    }
    exported, notes = _anthropic(schema)
    assert exported["properties"] == {"zip": {"$ref": "#/definitions/zip"}}
    assert exported["definitions"] == {"zip": {"type": "integer"}}
    assert notes[1:] == [
        f"$.definitions.zip: $id {anchor!r} dropped",
        f"$.zip: $ref {anchor!r} rewritten as '#/definitions/zip', as the anchor {anchor[1:]!r} is dropped "
        "(no 2020-12 anchor name)",
    ]
    _agrees(schema, exported, jsonschema.Draft7Validator, [{"zip": "x"}, {"zip": 1}])


def test_a_uri_ref_to_a_dropped_anchor_and_a_2019_anchor_with_a_colon() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "http://example.test/s",
        "type": "object",
        "definitions": {"zip": {"$id": "#1abc", "type": "integer"}, "keep": {"$id": "#ok", "type": "string"}},
        "properties": {"zip": {"$ref": "http://example.test/s#1abc"}, "name": {"$ref": "#ok"}},
    }
    exported, notes = _anthropic(schema)
    assert exported["properties"] == {"zip": {"$ref": "http://example.test/s#/definitions/zip"}, "name": {"$ref": "#ok"}}
    assert exported["definitions"]["keep"] == {"$anchor": "ok", "type": "string"}
    _agrees(schema, exported, jsonschema.Draft7Validator, [{"zip": "x"}, {"zip": 1, "name": "a"}, {"name": 2}])

    schema_2019 = {
        "$schema": "https://json-schema.org/draft/2019-09/schema",
        "type": "object",
        "$defs": {"zip": {"$anchor": "a:b", "type": "integer"}},
        "properties": {"zip": {"$ref": "#a:b"}},
    }
    exported, notes = _anthropic(schema_2019)
    assert exported["$defs"] == {"zip": {"type": "integer"}}
    assert exported["properties"] == {"zip": {"$ref": "#/$defs/zip"}}
    assert "$.$defs.zip: $anchor 'a:b' dropped (no 2020-12 anchor name)" in notes
    _agrees(schema_2019, exported, jsonschema.Draft201909Validator, [{"zip": "x"}, {"zip": 1}])


def test_a_2019_recursive_ref_with_only_the_root_anchored_becomes_a_ref() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2019-09/schema",
        "$recursiveAnchor": True,
        "type": "object",
        "properties": {"name": {"type": "string"}, "child": {"$recursiveRef": "#"}},
        "additionalProperties": False,
    }
    exported, notes = _anthropic(schema)
    assert exported == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "child": {"$ref": "#"}},
        "additionalProperties": False,
    }
    assert notes[1:] == [
        "$: $recursiveAnchor dropped (its $recursiveRef are rewritten as $ref)",
        "$.child: $recursiveRef '#' rewritten as $ref '#'",
    ]
    bad = {"name": "a", "child": {"name": 5, "extra": 1}}
    _agrees(schema, exported, jsonschema.Draft201909Validator, [bad, {"name": "a", "child": {"child": {"name": "b"}}}])


def test_a_2019_recursive_ref_with_several_anchored_resources_becomes_a_dynamic_ref() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2019-09/schema",
        "$id": "http://example.test/root",
        "$recursiveAnchor": True,
        "type": "object",
        "properties": {"name": {"type": "string"}, "child": {"$recursiveRef": "#"}, "e": {"$ref": "ext"}},
        "$defs": {
            "ext": {
                "$id": "ext",
                "$recursiveAnchor": True,
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$recursiveRef": "#"}}},
            },
            "plain": {"$id": "plain", "properties": {"me": {"$recursiveRef": "#"}}},
        },
    }
    exported, notes = _anthropic(schema)
    assert exported["$dynamicAnchor"] == exported["$defs"]["ext"]["$dynamicAnchor"] == "recursive"
    assert exported["properties"]["child"] == {"$dynamicRef": "#recursive"}
    assert exported["$defs"]["ext"]["properties"]["kids"]["items"] == {"$dynamicRef": "#recursive"}
    assert exported["$defs"]["plain"]["properties"]["me"] == {"$ref": "#"}
    assert "$.$defs.ext.kids[]: $recursiveRef '#' rewritten as $dynamicRef '#recursive'" in notes
    # a kid of ext is the outermost anchored resource (the root): its name must be a string
    instances = [
        {"e": {"kids": [{"name": 5}]}},
        {"e": {"kids": [{"name": "a", "e": {"kids": [{"name": 1}]}}]}},
        {"e": {"kids": [{"name": "a"}]}},
        {"child": {"name": 3}},
    ]
    _agrees(schema, exported, jsonschema.Draft201909Validator, instances)


# --------------------------------------------------------------------------- 10: malformed calls under unwritable ids


def _echo_registry() -> ToolRegistry:
    reg = _registry()

    @reg.add
    def echo(s: str) -> str:
        """echo"""
        return s

    return reg


@pytest.mark.parametrize("rid", [math.nan, math.inf, "call_\ud800"], ids=["nan", "inf", "surrogate"])
def test_a_malformed_call_whose_id_cannot_be_written_back_is_answered_under_a_null_id(rid: Any) -> None:
    reg = _echo_registry()
    cases = [
        (dispatch_openai, {"id": rid, "type": "function"}, "tool_call_id", "content"),
        (dispatch_openai, {"id": rid, "type": "function", "function": {"name": 5, "arguments": "{}"}}, "tool_call_id", "content"),
        (dispatch_anthropic, {"type": "tool_use", "id": rid, "name": 7, "input": {}}, "tool_use_id", "content"),
        (dispatch_openai_responses, {"type": "function_call", "call_id": rid, "arguments": "{}"}, "call_id", "output"),
    ]
    for dispatcher, call, key, text in cases:
        out = dispatcher(reg, [call])
        assert out[0][key] is None, call
        assert out[0][text].startswith("Error: Invalid tool call: "), out
        json.dumps(out, allow_nan=False).encode("utf-8")  # sendable


# --------------------------------------------------------------------------- 11: dispatch options


@pytest.mark.parametrize(
    ("concurrency", "error", "message"),
    [
        (None, TypeError, "concurrency must be an int of at least 1, not NoneType: None"),
        ("2", TypeError, "concurrency must be an int of at least 1, not str: '2'"),
        (1.5, TypeError, "concurrency must be an int of at least 1, not float: 1.5"),
        (True, TypeError, "concurrency must be an int of at least 1, not bool: True"),
        (math.inf, TypeError, "concurrency must be an int of at least 1, not float: inf"),
        (0, ValueError, "concurrency must be at least 1, not 0"),
        (-1, ValueError, "concurrency must be at least 1, not -1"),
    ],
)
def test_a_wrong_concurrency_raises_to_the_caller_before_any_call_runs(concurrency: Any, error: type, message: str) -> None:
    runs: list[int] = []
    reg = _registry()
    reg.add(lambda a: runs.append(a) or a, name="add")
    calls = [_openai_call(f"c{i}", "add", {"a": i}) for i in range(3)]
    with pytest.raises(error) as caught:
        dispatch_openai(reg, calls, concurrency=concurrency)
    assert str(caught.value) == message
    with pytest.raises(error) as caught:
        asyncio.run(adispatch_openai(reg, calls, concurrency=concurrency))
    assert str(caught.value) == message
    assert runs == []
    assert [a["content"] for a in dispatch_openai(reg, calls, concurrency=10**20)] == ["0", "1", "2"]


@pytest.mark.parametrize(("context", "kind"), [("x", "str"), (5, "int"), ([1], "list")])
def test_a_context_that_is_no_mapping_raises_to_the_caller(context: Any, kind: str) -> None:
    reg = _echo_registry()
    call = [_openai_call("c1", "echo", {"s": "x"})]
    with pytest.raises(TypeError) as caught:
        dispatch_openai(reg, call, context=context)
    assert str(caught.value) == f"context must be a mapping (or None), not {kind}"
    with pytest.raises(TypeError, match="context must be a mapping"):
        asyncio.run(adispatch_openai(reg, call, context=context))
    assert dispatch_openai(reg, call, context={"run_id": "r"})[0]["content"] == "x"


# --------------------------------------------------------------------------- round 2, 1: a chain of plain aliases

ALIASES = "a $ref chain more than 128 references long cannot be inlined"


def _aliases(n: int, draft: str) -> dict[str, Any]:
    """A schema whose ``x`` is a string behind ``n`` references: ``$defs`` entries that are only ``{"$ref": next}``
    (which nest nothing)."""
    key = "$defs" if draft == "2020" else "definitions"
    defs = {f"a{i}": {"$ref": f"#/{key}/a{i + 1}"} if i + 1 < n else {"type": "string"} for i in range(n)}
    schema: dict[str, Any] = {"type": "object", "properties": {"x": {"$ref": f"#/{key}/a0"}}, key: defs}
    if draft == "7":
        schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    return schema


@pytest.mark.parametrize("draft", ["2020", "7"])
def test_a_chain_of_plain_aliases_past_128_references_is_not_inlined_and_affects_only_its_tool(draft: str) -> None:
    from harness_one.integrations.autogen import as_autogen_tools
    from harness_one.integrations.langchain import as_langchain_tools

    reg = _registry()

    @reg.add
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    schema = _aliases(600, draft)
    reg.add(Tool.create(lambda **kw: "ok", name="nested", description="aliases", parameters=schema))
    assert reg.call("nested", {"x": "s"}) == "ok"
    gemini = reg.export("gemini")
    assert gemini.notes["nested"][-1] == f"$: $ref kept as Gemini's ref to root defs ({ALIASES})"
    assert reg.export("openai", strict="auto").not_strict == {"nested": [ALIASES]}
    with pytest.raises(StrictSchemaError) as caught:
        inline_refs(schema, tool="nested")
    assert str(caught.value) == f"Tool 'nested' cannot be exported in strict mode: {ALIASES}."
    assert dispatch_openai(reg, [_openai_call("c1", "add", {"a": 1, "b": 2})], strict=True) == [
        {"role": "tool", "tool_call_id": "c1", "content": "3"}
    ]
    answer = dispatch_gemini(reg, [{"id": "c1", "name": "_.zz.abc", "args": {}}])
    assert answer[0]["response"] == {"error": "Unknown tool '_.zz.abc'. Available tools: add, nested."}
    # the adapters that inline show the tool as it is, and the registry's other tools
    assert [t.name for t in as_langchain_tools(registry=reg)] == ["add", "nested"]
    assert as_autogen_tools(registry=reg)[1].schema["parameters"]["properties"]["x"] == schema["properties"]["x"]


def test_a_chain_of_128_plain_aliases_is_still_inlined() -> None:
    assert inline_refs(_aliases(128, "2020")) == {"type": "object", "properties": {"x": {"type": "string"}}}
    with pytest.raises(StrictSchemaError) as caught:
        inline_refs(_aliases(129, "2020"))
    assert str(caught.value) == f"Tool '?' cannot be exported in strict mode: {ALIASES}."


# --------------------------------------------------------------------------- round 2, 2: nested unions, each value once


class _Counted(dict[str, Any]):
    """A JSON object that counts how often its members are read."""

    reads = 0

    def items(self) -> Any:
        self.reads += 1
        return super().items()


def _union_levels(depth: int) -> dict[str, Any]:
    """A union of two objects at each of ``depth`` levels, sharing keys; one reads ``m``'s null as a value, the other
    as absent (both fit every level of a value that sends all the keys)."""
    defs: dict[str, Any] = {}
    for k in range(depth):
        child = {"type": "array", "items": {"$ref": f"#/$defs/L{k + 1}"}} if k + 1 < depth else {"type": "integer"}
        common = {"kind": {"type": "string"}, "n": {"type": "integer", "default": 1}, "c": child}
        defs[f"A{k}"] = {
            "type": "object",
            "properties": {**common, "m": {"type": ["integer", "null"]}},
            "required": ["kind", "m", "c"],
            "additionalProperties": False,
        }
        defs[f"B{k}"] = {
            "type": "object",
            "properties": {**common, "m": {"type": "integer", "default": 0}},
            "required": ["kind", "c"],
            "additionalProperties": False,
        }
        defs[f"L{k}"] = {"anyOf": [{"$ref": f"#/$defs/A{k}"}, {"$ref": f"#/$defs/B{k}"}]}
    return {
        "type": "object",
        "properties": {"v": {"$ref": "#/$defs/L0"}},
        "required": ["v"],
        "$defs": defs,
        "additionalProperties": False,
    }


def _untagged(tree: Any, made: dict[int, Any] | None = None) -> Any:
    """``tree`` without its ``tags`` (a tree made by hand; an export's subtree met twice is one object, as there)."""
    made = {} if made is None else made
    if id(tree) in made:
        return made[id(tree)]
    out = made[id(tree)] = {}
    for key, value in tree.items():
        if key == "tags":
            continue
        if key == "anyOf":
            out[key] = [(kind, keys, _untagged(sub, made)) for kind, keys, sub in value]
        elif key == "properties":
            out[key] = {name: _untagged(sub, made) for name, sub in value.items()}
        else:
            out[key] = _untagged(value, made) if key == "items" else value
    return out


def test_strict_nulls_in_nested_unions_are_dropped_reading_each_value_once() -> None:
    from harness_one._requests import drop_nulls

    depth, width = 8, 2
    reg = _registry()
    reg.add(Tool.create(lambda v: "ok", name="f", description="d", parameters=_union_levels(depth)))
    export = reg.export("openai", strict=True)
    tree = export.nullable["f"]
    branches = tree["properties"]["v"]["anyOf"]
    # equal subtrees (copies of one inlined definition) are one object: compared at once
    assert branches[0][2]["properties"]["c"] is branches[1][2]["properties"]["c"]
    assert export.copy().nullable["f"] == tree

    def value(k: int) -> _Counted:
        kids = [value(k + 1) for _ in range(width)] if k + 1 < depth else 1
        return _Counted(kind="a", m=None, n=None, c=kids)

    def expected(k: int) -> dict[str, Any]:  # n's null dropped (both branches), m's kept (A reads it as a value)
        return {"kind": "a", "m": None, "c": [expected(k + 1) for _ in range(width)] if k + 1 < depth else 1}

    def reads(node: Any) -> list[int]:
        if isinstance(node, _Counted):
            return [node.reads, *(n for kid in (node["c"] if isinstance(node["c"], list) else []) for n in reads(kid))]
        return []

    for given in (_untagged(tree), tree):  # (a tree without tags is read as before)
        sent = {"v": value(0)}
        assert drop_nulls(sent, given) == {"v": expected(0)}
        assert reads(sent["v"]) == [1] * (2**depth - 1)
    call = [_openai_call("c1", "f", {"v": expected(0) | {"n": None}})]
    assert dispatch_openai(reg, call, strict=True)[0]["content"] == "ok"


# --------------------------------------------------------------------------- round 2, 3: a tag names the branch


def test_a_strict_null_follows_the_branch_whose_tag_was_sent_among_branches_of_the_same_keys() -> None:
    reg = _registry()

    @reg.add
    def g(v: WithNone | WithDefault) -> str:
        """g"""
        return repr(v)

    reg.export("openai", strict=True)
    sent = [
        {"kind": "b", "m": None, "n": None},
        {"kind": "b", "m": None, "n": 3},
        {"kind": "a", "m": None, "n": None},
    ]
    calls = [_openai_call(f"c{i}", "g", {"v": v}) for i, v in enumerate(sent)]
    assert [a["content"] for a in dispatch_openai(reg, calls, strict=True)] == [
        "WithDefault(kind='b', m=0, n=1)",
        "WithDefault(kind='b', m=0, n=3)",
        "WithNone(kind='a', m=None, n=1)",
    ]


@dataclass
class TaggedA:
    kind: Literal["a"]
    m: int | None


@dataclass
class FreeKind:
    kind: str
    m: int = 0


def test_a_branch_without_a_tag_is_ruled_out_only_by_its_own_tags() -> None:
    reg = _registry()

    @reg.add
    def h(v: TaggedA | FreeKind) -> str:
        """h"""
        return repr(v)

    reg.export("openai", strict=True)
    calls = [
        _openai_call("c1", "h", {"v": {"kind": "z", "m": None}}),  # contradicts TaggedA's tag: FreeKind's null goes
        _openai_call("c2", "h", {"v": {"kind": "a", "m": None}}),  # both may apply: TaggedA reads it as a value
    ]
    assert [a["content"] for a in dispatch_openai(reg, calls, strict=True)] == [
        "FreeKind(kind='z', m=0)",
        "TaggedA(kind='a', m=None)",
    ]


# --------------------------------------------------------------------------- round 2, 4: an int-like concurrency


class _Workers:
    def __init__(self, n: int) -> None:
        self.n = n

    def __index__(self) -> int:
        return self.n


def test_an_int_like_concurrency_is_read_by_its_index() -> None:
    import numpy

    reg = _registry()
    reg.add(lambda a: a, name="add")
    calls = [_openai_call(f"c{i}", "add", {"a": i}) for i in range(3)]
    for concurrency in (numpy.int64(4), _Workers(2), _Workers(1)):
        assert [a["content"] for a in dispatch_openai(reg, calls, concurrency=concurrency)] == ["0", "1", "2"]
        answers = asyncio.run(adispatch_openai(reg, calls, concurrency=concurrency))  # type: ignore[arg-type]
        assert [a["content"] for a in answers] == ["0", "1", "2"]
    with pytest.raises(ValueError) as caught:
        dispatch_openai(reg, calls, concurrency=_Workers(0))  # type: ignore[arg-type]
    assert str(caught.value) == "concurrency must be at least 1, not 0"
    with pytest.raises(TypeError) as raised:
        dispatch_openai(reg, calls, concurrency=numpy.bool_(True))  # type: ignore[arg-type]
    assert str(raised.value) == "concurrency must be an int of at least 1, not bool: np.True_"


# --------------------------------------------------------------------------- round 3: bounded null dropping, ref hops


def _array_unions(width: int, depth: int) -> dict[str, Any]:
    """Arrays ``depth`` deep, each level with its own ``items`` beside an ``anyOf`` of ``width`` array branches (both
    apply), each leaf an object with an optional ``q``."""

    def node(k: int, variant: str) -> dict[str, Any]:
        if k == depth:
            props = {"p": {"type": "integer"}, "q": {"type": "integer"}, f"r{variant}": {"type": "integer"}}
            return {"type": "object", "properties": props, "required": ["p"], "additionalProperties": False}
        branches = [{"type": "array", "items": node(k + 1, f"{variant}_{i}")} for i in range(width)]
        return {"type": "array", "items": node(k + 1, variant), "anyOf": branches}

    return {"type": "object", "properties": {"v": node(0, "r")}, "required": ["v"], "additionalProperties": False}


# (3, 3 and wider: conjunctions, each branch beside its node's own items, whose alternatives would carry 13,122 trees
# or more for one value: past the cap, kept as sent; plain unions are not counted, see the 33-branch test)
@pytest.mark.parametrize(
    ("width", "depth", "dropped"), [(2, 1, True), (2, 2, True), (3, 3, False), (4, 3, False), (2, 5, False), (5, 3, False)]
)
def test_null_dropping_beside_unions_does_bounded_work_and_keeps_the_value_as_sent_past_the_cap(
    monkeypatch: pytest.MonkeyPatch, width: int, depth: int, dropped: bool
) -> None:
    from harness_one import _requests

    resolved = []
    fitting = _requests._fitting
    monkeypatch.setattr(_requests, "_fitting", lambda *args: resolved.append(1) or fitting(*args))
    reg = _registry()

    def f(v: Any) -> str:
        return json.dumps(v)

    reg.add(Tool.create(f, name="f", description="d", parameters=_array_unions(width, depth)))

    def value(k: int) -> Any:
        return {"p": 1, "q": None} if k == depth else [value(k + 1)]

    def expected(k: int) -> Any:
        return {"p": 1} if k == depth else [expected(k + 1)]

    tree = reg.export("openai", strict=True).nullable["f"]
    sent = {"v": value(0)}
    assert _requests._without_nulls(sent, tree) == ({"v": expected(0)} if dropped else sent)
    assert len(resolved) <= 20  # (unbounded, 2, 5 resolved unions millions of times)
    out = dispatch_openai(reg, [_openai_call("c1", "f", sent)], strict=True)[0]["content"]
    if dropped:
        assert out == json.dumps(expected(0))
    else:  # too many alternatives to carry: the null is kept, for validation to judge
        assert out.startswith("Error: Invalid arguments for tool 'f'") and "q: expected integer, got null" in out


def test_the_anyof_entries_of_the_null_tree_keep_three_fields_with_tags_beside_them() -> None:
    from harness_one.export import strict_schema

    branch_a = {"type": "object", "properties": {"kind": {"const": "a"}, "n": {"type": "integer"}}, "required": ["kind"]}
    branch_b = {"type": "array", "items": {"type": "integer"}}
    schema = {"type": "object", "properties": {"v": {"anyOf": [branch_a, branch_b]}}, "required": ["v"]}
    _, tree = strict_schema(schema)
    node = tree["properties"]["v"]
    assert [(kind, sorted(keys), sub) for kind, keys, sub in node["anyOf"]] == [
        ("object", ["kind", "n"], {"absent": ["n"]}),
        ("array", [], {}),
    ]
    assert node["tags"] == [(("kind", "a"),), ()]


@pytest.mark.parametrize("levels", [70, 100, 125])
def test_two_references_per_level_nest_as_deep_as_the_nesting_allows(levels: int) -> None:
    defs: dict[str, Any] = {}
    for k in range(levels):
        defs[f"Alias{k}"] = {"$ref": f"#/$defs/List{k}"}
        inner = {"$ref": f"#/$defs/Alias{k + 1}"} if k + 1 < levels else {"type": "string"}
        defs[f"List{k}"] = {"type": "array", "items": inner}
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/Alias0"}}, "required": ["x"], "$defs": defs}
    node, depth = inline_refs(schema)["properties"]["x"], 0
    while "items" in node:
        node, depth = node["items"], depth + 1
    assert (depth, node) == (levels, {"type": "string"})


def _aliased_levels(levels: int, aliases: int) -> dict[str, Any]:
    """``levels`` arrays deep, each level reached through ``aliases`` references in a row (``{"$ref": next}``)."""
    defs: dict[str, Any] = {}
    for k in range(levels):
        for h in range(aliases):
            defs[f"A{k}_{h}"] = {"$ref": f"#/$defs/A{k}_{h + 1}" if h + 1 < aliases else f"#/$defs/L{k}"}
        inner = {"$ref": f"#/$defs/A{k + 1}_0"} if k + 1 < levels else {"type": "string"}
        defs[f"L{k}"] = {"type": "array", "items": inner}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/A0_0"}}, "required": ["x"], "$defs": defs}


@pytest.mark.parametrize(("levels", "aliases"), [(90, 2), (70, 3)])  # (270 and 280 references on one path)
def test_hundreds_of_references_on_one_path_are_inlined(levels: int, aliases: int) -> None:
    node, depth = inline_refs(_aliased_levels(levels, aliases))["properties"]["x"], 0
    while "items" in node:
        node, depth = node["items"], depth + 1
    assert (depth, node) == (levels, {"type": "string"})


STACK = "inlining $ref nests deeper than the interpreter's stack allows"


def test_references_past_the_interpreters_stack_are_a_strict_schema_error_and_gemini_keeps_defs() -> None:
    schema = _aliased_levels(30, 127)  # (within 128 levels and 128 aliases in a row: 3,840 references on one path)
    with pytest.raises(StrictSchemaError) as caught:
        inline_refs(schema)
    assert str(caught.value) == f"Tool '?' cannot be exported in strict mode: {STACK}."
    reg = _registry()
    reg.add(Tool.create(lambda x: "ok", name="f", description="d", parameters=schema))
    assert reg.export("openai", strict="auto").not_strict == {"f": [STACK]}
    gemini = reg.export("gemini")
    assert gemini.notes["f"][0] == f"$: $ref kept as Gemini's ref to root defs ({STACK})"
    assert gemini.tools[0]["parameters"]["properties"]["x"] == {"ref": "#/defs/A0_0"}


@pytest.mark.parametrize("width", [33, 70])
def test_a_plain_union_of_33_or_more_branches_drops_the_null_of_a_valid_strict_call(width: int) -> None:
    branches = [
        {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "minimum": 10 * i, "maximum": 10 * i + 9},
                "b": {"type": "integer"},
                "c": {
                    "type": "object",
                    "properties": {f"z{j}": {"type": "integer"} for j in range(i + 1)},
                    "additionalProperties": False,
                },
            },
            "required": ["a", "c"],
            "additionalProperties": False,
        }
        for i in range(width)
    ]
    schema = {"type": "object", "properties": {"v": {"anyOf": branches}}, "required": ["v"], "additionalProperties": False}
    reg = _registry()

    def f(v: Any) -> str:
        return json.dumps(v)

    reg.add(Tool.create(f, name="f", description="d", parameters=schema))
    assert reg.export("openai", strict=True).not_strict == {}
    sent = {"v": {"a": 5, "b": None, "c": {"z0": None}}}
    out = dispatch_openai(reg, [_openai_call("c1", "f", sent)], strict=True)[0]["content"]
    assert out == json.dumps({"a": 5, "c": {}})


def test_nested_unions_5_by_7_drop_the_null_of_a_valid_strict_call() -> None:
    def inner(i: int) -> dict[str, Any]:
        return {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "c": {"type": "integer", "minimum": 10 * j, "maximum": 10 * j + 9},
                        "d": {"type": "integer"},
                        "e": {"type": "object", "properties": {f"x{i}_{j}": {"type": "integer"}}, "additionalProperties": False},
                    },
                    "required": ["c", "e"],
                    "additionalProperties": False,
                }
                for j in range(7)
            ]
        }

    branches = [
        {
            "type": "object",
            "properties": {"a": {"type": "integer", "minimum": 10 * i, "maximum": 10 * i + 9}, "p": inner(i)},
            "required": ["a", "p"],
            "additionalProperties": False,
        }
        for i in range(5)
    ]
    schema = {"type": "object", "properties": {"v": {"anyOf": branches}}, "required": ["v"], "additionalProperties": False}
    reg = _registry()

    def f(v: Any) -> str:
        return json.dumps(v)

    reg.add(Tool.create(f, name="f", description="d", parameters=schema))
    sent = {"v": {"a": 5, "p": {"c": 5, "d": None, "e": {"x0_0": 1}}}}
    out = dispatch_openai(reg, [_openai_call("c1", "f", sent)], strict=True)[0]["content"]
    assert out == json.dumps({"a": 5, "p": {"c": 5, "e": {"x0_0": 1}}})
