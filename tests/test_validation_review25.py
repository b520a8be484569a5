"""Review 25 fixes: plugin keywords below a ``$ref`` to a schema with ``$schema``, backend agreement, defaults, messages."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import ArgumentLimits, ToolArgumentError
from harness_one_plugins.validation import compile_schema, rust_available

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]
DIALECTS = [
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-04/schema#",
]


class _Jumping:
    """A clock that moves ``step`` seconds at every reading (a budget is spent at its second reading)."""

    def __init__(self, step: float) -> None:
        self.step, self.time = step, 0.0

    def now(self) -> float:
        self.time += self.step
        return self.time


def refusal(compiled: Any, args: Any, clock: Any = None) -> list[tuple[str, str]]:
    """The problems ``check`` names; by default on a clock that stands still (no budget runs out on a busy machine)."""
    with pytest.raises(ToolArgumentError) as err:
        compiled.check(args, ArgumentLimits(), clock or _Jumping(0.0))
    return [(p.path, p.message) for p in err.value.problems]


# -- 1. a `$ref` to a schema holding `$schema` keeps the plugin's keywords (pattern time budget, exact multipleOf) ---

FIELDS = {"name": {"type": "string", "pattern": "^(a|a)+$"}, "x": {"type": "number", "multipleOf": 0.01}}
NO_TIME = "could not be matched against the pattern '^(a|a)+$' within the time limit; send a shorter or simpler value"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_ref_to_the_root_with_schema_keeps_the_pattern_budget_and_exact_multiple_of(dialect: str) -> None:
    """jsonschema's evolve() took the stock class of the `$schema` it landed on: 10 s for 26 characters, 19.99 refused."""
    schema = {"$schema": dialect, "type": "object", "properties": {**FIELDS, "child": {"$ref": "#"}}}
    compiled = compile_schema(schema, "python")
    args = {"child": {"child": {"name": "a" * 12 + "!"}}}
    assert refusal(compiled, args, _Jumping(1.0))[0] == ("$.child.child.name", NO_TIME)
    ok = {"child": {"x": 19.99, "child": {"x": 0.07}}}
    assert compiled.check(ok, ArgumentLimits()) == ok


def test_a_recursive_ref_keeps_the_plugin_keywords() -> None:
    schema = {
        "$schema": DIALECTS[1],
        "$recursiveAnchor": True,
        "type": "object",
        "properties": {**FIELDS, "child": {"$recursiveRef": "#"}},
    }
    compiled = compile_schema(schema, "python")
    assert refusal(compiled, {"child": {"name": "a" * 12 + "!"}}, _Jumping(1.0))[0] == ("$.child.name", NO_TIME)
    assert compiled.check({"child": {"x": 19.99}}, ArgumentLimits()) == {"child": {"x": 19.99}}


def test_a_subschema_of_another_dialect_is_read_in_that_dialect_with_the_plugin_keywords() -> None:
    """A nested `$schema` of draft-04 still switches dialect (boolean exclusiveMaximum), and keeps the plugin's keywords."""
    inner = {"$schema": DIALECTS[3], "type": "object", "properties": {**FIELDS, "n": {"maximum": 5, "exclusiveMaximum": True}}}
    compiled = compile_schema({"$schema": DIALECTS[0], "type": "object", "properties": {"in": inner}}, "python")
    assert refusal(compiled, {"in": {"name": "a" * 12 + "!"}}, _Jumping(1.0))[0] == ("$.in.name", NO_TIME)
    assert compiled.check({"in": {"x": 19.99, "n": 4}}, ArgumentLimits()) == {"in": {"x": 19.99, "n": 4}}
    assert [path for path, _ in refusal(compiled, {"in": {"n": 5}})] == ["$.in.n"]


# -- 9. draft-04's boolean exclusiveMaximum/exclusiveMinimum: the message names the strict bound -----------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_draft4_boolean_exclusive_bound_is_worded_strictly(backend: str) -> None:
    fields = {"n": {"maximum": 5, "exclusiveMaximum": True}, "m": {"minimum": 1, "exclusiveMinimum": True}, "k": {"maximum": 5}}
    compiled = compile_schema({"$schema": DIALECTS[3], "type": "object", "properties": fields}, backend)
    with pytest.raises(ToolArgumentError) as err:
        compiled.check({"n": 5, "m": 1, "k": 6}, ArgumentLimits(), _Jumping(0.0))
    assert sorted((p.path, p.message, p.expected) for p in err.value.problems) == [
        ("$.k", "expected a number <= 5, got 6", "<= 5"),
        ("$.m", "expected a number > 1, got 1", "> 1"),
        ("$.n", "expected a number < 5, got 5", "< 5"),
    ]


# -- 4. both backends agree on draft-04/06/07 schemas: uuid asserted, content keywords annotations --------------

DRAFT6, DRAFT7 = "http://json-schema.org/draft-06/schema#", DIALECTS[2]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dialect", [DIALECTS[3], DRAFT6, DRAFT7, DIALECTS[0]])
def test_uuid_is_asserted_in_every_draft_on_both_backends(backend: str, dialect: str) -> None:
    """jsonschema-rs knows no uuid before 2019-09: it passed "not-a-uuid" where the Python backend refused it."""
    compiled = compile_schema({"$schema": dialect, "type": "object", "properties": {"id": {"format": "uuid"}}}, backend)
    assert refusal(compiled, {"id": "not-a-uuid"}) == [("$.id", 'expected a valid uuid, got "not-a-uuid"')]
    good = {"id": "2eb8aa08-aa98-11ea-b4aa-73b441d16380"}
    assert compiled.check(good, ArgumentLimits()) == good


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_draft4_subschema_inside_a_2020_schema_still_asserts_uuid(backend: str) -> None:
    inner = {"$schema": DIALECTS[3], "type": "object", "properties": {"id": {"format": "uuid"}}}
    compiled = compile_schema({"$schema": DIALECTS[0], "type": "object", "properties": {"in": inner}}, backend)
    assert refusal(compiled, {"in": {"id": "x"}}) == [("$.in.id", 'expected a valid uuid, got "x"')]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dialect", [DRAFT6, DRAFT7, DIALECTS[0]])
def test_content_keywords_are_annotations_on_both_backends(backend: str, dialect: str) -> None:
    """jsonschema-rs asserted contentMediaType/contentEncoding in drafts 6 and 7; jsonschema never does."""
    fields = {
        "doc": {"type": "string", "contentMediaType": "application/json"},
        "b": {"type": "string", "contentEncoding": "base64"},
    }
    compiled = compile_schema({"$schema": dialect, "type": "object", "properties": fields}, backend)
    args = {"doc": "{not json", "b": "%%%"}
    assert compiled.check(args, ArgumentLimits()) == args
    assert refusal(compiled, {"doc": 5}) == [("$.doc", "expected string, got integer 5")]


# -- 7. a whole float for an integer is an int at any depth of a recursive $ref ------------------------------------

TREE = {
    "type": "object",
    "required": ["root"],
    "properties": {"root": {"$ref": "#/$defs/node"}},
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        }
    },
}


def _chain(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"value": 2.0}
    for _ in range(depth):
        node = {"value": 2.0, "children": [node]}
    return {"root": node}


def _values(node: dict[str, Any]) -> list[Any]:
    out = [node["value"]]
    for child in node.get("children", ()):
        out += _values(child)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "schema", [TREE, {**TREE, "$schema": DRAFT7}, {**TREE, "properties": {"root": {"$ref": "#/$defs/node", "type": "object"}}}]
)
def test_integers_are_ints_at_every_depth_of_a_recursive_ref(backend: str, schema: dict[str, Any]) -> None:
    """Past the first level of a recursive $ref the plan ended: depth 1 and below reached the tool as 2.0."""
    out = compile_schema(schema, backend).check(_chain(25), ArgumentLimits())
    values = _values(out["root"])
    assert len(values) == 26 and all(type(v) is int and v == 2 for v in values)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_ref_to_the_root_converts_integers_at_every_depth(backend: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}, "child": {"$ref": "#"}}}
    args = {"n": 1.0, "x": 1.0, "child": {"n": 2.0, "x": 2.0, "child": {"n": 3.0, "x": 3.0, "child": {"n": 4.0}}}}
    out = compile_schema(schema, backend).check(args, ArgumentLimits())
    assert out == args
    assert [type(out["n"]), type(out["child"]["child"]["child"]["n"]), type(out["child"]["child"]["x"])] == [int, int, float]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_recursive_ref_under_any_of_still_takes_floats_where_an_alternative_does(backend: str) -> None:
    """A recursive node met again inside a join is left loose: 2.0 stays a float where one alternative takes numbers."""
    schema = {
        "$defs": {
            "n": {
                "type": "object",
                "properties": {"v": {"type": "integer"}, "c": {"anyOf": [{"$ref": "#/$defs/n"}, {"$ref": "#/$defs/f"}]}},
            },
            "f": {"type": "object", "properties": {"v": {"type": "number"}}},
        },
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/n"}},
    }
    out = compile_schema(schema, backend).check({"root": {"v": 2.0, "c": {"v": 3.0}}}, ArgumentLimits())
    assert type(out["root"]["v"]) is int and type(out["root"]["c"]["v"]) is float


# -- 5. defaults are annotations filled in after the verdict (documented in docs/plugins.md) ---------------------------


def test_a_default_rules_across_properties_refuse_is_filled_after_the_verdict_as_documented() -> None:
    """A default is judged at definition only under the node that gives it: one a rule across properties (here a
    ``dependentRequired``) refuses once filled still defines, and reaches the tool as filled, at any depth."""
    from harness_one import Tool

    opts = {
        "type": "object",
        "properties": {"a": {"type": "integer", "default": 1}, "b": {"type": "integer"}},
        "dependentRequired": {"a": ["b"]},
    }
    assert Tool.create(lambda **kw: kw, name="t", parameters=opts).parameters == opts
    compiled = compile_schema({"type": "object", "properties": {"opts": opts}}, "python")
    assert compiled.check({}, ArgumentLimits()) == {}
    assert compiled.check({"opts": {"b": 2}}, ArgumentLimits()) == {"opts": {"a": 1, "b": 2}}
    assert compiled.check({"opts": {}}, ArgumentLimits()) == {"opts": {"a": 1}}


def test_a_default_its_own_node_refuses_is_still_refused_at_definition() -> None:
    from harness_one import Tool, ToolDefinitionError

    with pytest.raises(ToolDefinitionError, match=r"at #/properties/c/default, the default does not match the schema"):
        Tool.create(
            lambda **kw: kw, name="t", parameters={"type": "object", "properties": {"c": {"enum": ["EUR"], "default": "GBP"}}}
        )


# -- 8. an anyOf/oneOf of object alternatives: the tagged alternative's problems at their paths, options worded ---

ADDR = {
    "type": "object",
    "properties": {"street": {"type": "string"}, "zip": {"type": "integer"}},
    "required": ["street", "zip"],
    "additionalProperties": False,
}
CARD = {
    "type": "object",
    "properties": {"kind": {"const": "card"}, "number": {"type": "string"}, "billing": ADDR},
    "required": ["kind", "number", "billing"],
    "additionalProperties": False,
}
BANK = {
    "type": "object",
    "properties": {"kind": {"enum": ["bank"]}, "iban": {"type": "string"}},
    "required": ["kind", "iban"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key", ["anyOf", "oneOf"])
@pytest.mark.parametrize(
    ("method", "expected"),
    [
        (
            {"kind": "card", "number": "4111", "billing": {"street": "x", "zip": "12345"}},
            ("$.method.billing.zip", 'expected integer, got string "12345"'),
        ),
        (
            {"kind": "card", "number": "4111", "billing": {"street": "x", "zip": 1, "city": "y"}},
            ("$.method.billing.city", "unexpected property; allowed properties: street, zip"),
        ),
        ({"kind": "bank", "iban": "DE1", "bic": "X"}, ("$.method.bic", "unexpected property; allowed properties: iban, kind")),
    ],
)
def test_the_alternative_whose_tag_matches_is_reported_at_its_paths(
    backend: str, key: str, method: Any, expected: tuple[str, str]
) -> None:
    """`Card | Bank` given a card: "option 1: expected integer ...; option 2: unexpected properties; ..." named no field."""
    compiled = compile_schema({"type": "object", "properties": {"method": {key: [CARD, BANK]}}}, backend)
    assert refusal(compiled, {"method": method}) == [expected]


@pytest.mark.parametrize("backend", BACKENDS)
def test_untagged_alternatives_are_each_worded_with_their_paths_and_names(backend: str) -> None:
    first = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    second = {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"], "additionalProperties": False}
    compiled = compile_schema({"type": "object", "properties": {"m": {"anyOf": [first, second]}}}, backend)
    assert refusal(compiled, {"m": {"a": "x"}}) == [
        (
            "$.m",
            'must match at least one of the alternatives; option 1: $.m.a: expected integer, got string "x"; '
            "option 2: $.m.b: required property is missing; option 2: $.m.a: unexpected property; allowed properties: b",
        )
    ]
    assert refusal(compiled, {"m": 5}) == [
        (
            "$.m",
            "must match at least one of the alternatives; option 1: expected object, got integer 5; option 2: expected object, got integer 5",
        )
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_literal_field_is_no_tag_so_its_own_alternative_is_reported(backend: str) -> None:
    """`Circle{radius, units: Literal["cm", "in"]} | Square{side}` given units "mm" reported Square's problems only."""
    circle = {
        "type": "object",
        "properties": {"radius": {"type": "number"}, "units": {"enum": ["cm", "in"]}},
        "required": ["radius", "units"],
    }
    square = {"type": "object", "properties": {"side": {"type": "number"}}, "required": ["side"]}
    compiled = compile_schema({"type": "object", "properties": {"shape": {"anyOf": [circle, square]}}}, backend)
    assert refusal(compiled, {"shape": {"radius": 2, "units": "mm"}}) == [
        (
            "$.shape",
            'must match at least one of the alternatives; option 1: $.shape.units: expected one of ["cm", "in"], got "mm"; '
            "option 2: $.shape.side: required property is missing",
        )
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_two_alternatives_share_make_no_tag(backend: str) -> None:
    one = {"type": "object", "properties": {"k": {"enum": ["a", "b"]}, "x": {"type": "integer"}}, "required": ["k", "x"]}
    two = {"type": "object", "properties": {"k": {"enum": ["b", "c"]}, "y": {"type": "integer"}}, "required": ["k", "y"]}
    compiled = compile_schema({"type": "object", "properties": {"m": {"anyOf": [one, two]}}}, backend)
    assert refusal(compiled, {"m": {"k": "a", "y": "z"}}) == [
        (
            "$.m",
            "must match at least one of the alternatives; option 1: $.m.x: required property is missing; "
            'option 2: $.m.k: expected one of ["b", "c"], got "a"; option 2: $.m.y: expected integer, got string "z"',
        )
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tag_is_read_through_refs_as_pydantic_writes_unions(backend: str) -> None:
    schema = {
        "type": "object",
        "properties": {"method": {"anyOf": [{"$ref": "#/$defs/Card"}, {"$ref": "#/$defs/Bank"}]}},
        "$defs": {"Card": CARD, "Bank": BANK},
    }
    compiled = compile_schema(schema, backend)
    assert refusal(compiled, {"method": {"kind": "bank", "iban": "DE1", "bic": "X"}}) == [
        ("$.method.bic", "unexpected property; allowed properties: iban, kind")
    ]


REC_NO_INT = {
    "type": "object",
    "properties": {"s": {"type": "string"}, "x": {"type": "number"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
}


def test_a_recursive_schema_without_integers_has_no_integer_plan() -> None:
    """It held a plan of itself that changed nothing: every JSON-decoded call walked the whole argument tree."""
    assert compile_schema(REC_NO_INT, "python")._integers is None
    mutual = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/a"}},
        "$defs": {
            "a": {"type": "object", "properties": {"s": {"type": "string"}, "b": {"$ref": "#/$defs/b"}}},
            "b": {"type": "object", "properties": {"x": {"type": "number"}, "a": {"$ref": "#/$defs/a"}}},
        },
    }
    assert compile_schema(mutual, "python")._integers is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_recursive_schema_with_an_integer_deep_down_still_converts_it(backend: str) -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"type": "number"}, "kids": {"type": "array", "items": {"$ref": "#"}}, "leaf": {"$ref": "#/$defs/l"}},
        "$defs": {"l": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    }
    out = compile_schema(schema, backend).check(
        {"x": 1.0, "kids": [{"x": 2.0, "kids": [{"leaf": {"n": 3.0}}]}]}, ArgumentLimits()
    )
    assert type(out["x"]) is float and type(out["kids"][0]["x"]) is float
    assert type(out["kids"][0]["kids"][0]["leaf"]["n"]) is int


def _v_chain(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"v": 2.0}
    for _ in range(depth):
        node = {"v": 2.0, "kids": [node]}
    return node


def _kinds_of_v(node: Any, out: list[str]) -> list[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            out.append(type(value).__name__) if key == "v" else _kinds_of_v(value, out)
    elif isinstance(node, list):
        for value in node:
            _kinds_of_v(value, out)
    return out


def _node(ref: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": ref}}}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("schema", "wrapped"),
    [
        (
            {
                "$id": "https://example.com/t",
                "type": "object",
                "properties": {"root": {"$ref": "#/$defs/n"}},
                "$defs": {"n": {"$dynamicAnchor": "node", **_node({"$dynamicRef": "#node"})}},
            },
            True,
        ),
        ({"$schema": DIALECTS[1], "$recursiveAnchor": True, **_node({"$recursiveRef": "#"})}, False),
    ],
)
def test_integers_are_ints_at_every_depth_of_a_dynamic_or_recursive_ref(backend: str, schema: Any, wrapped: bool) -> None:
    args = {"root": _v_chain(4)} if wrapped else _v_chain(4)
    assert _kinds_of_v(compile_schema(schema, backend).check(args, ArgumentLimits()), []) == ["int"] * 5


def test_content_keywords_and_a_property_named_schema_keep_the_schema_given_to_jsonschema_rs() -> None:
    from harness_one_plugins import validation

    draft7 = {"$schema": DRAFT7, "type": "object", "properties": {"b": {"type": "string", "contentEncoding": "base64"}}}
    given = validation._rust_schema(draft7, validation._older_draft(draft7, 7))
    assert given["properties"]["b"] == {"type": "string"} and draft7["properties"]["b"]["contentEncoding"] == "base64"
    named = {"type": "object", "properties": {"$schema": {"type": "string"}, "u": {"type": "string", "contentMediaType": "x/y"}}}
    assert validation._older_draft(named, 20) is False
    assert validation._rust_schema(named, False) is named
    assert validation._rust_keywords(draft7) is None  # (no Python keyword on every call)
    data = {"type": "object", "properties": {"e": {"enum": [{"$schema": DRAFT7}]}}}
    assert validation._older_draft(data, 20) is False
    nested = {"type": "object", "properties": {"o": {"$schema": DRAFT7, "type": "string"}}}
    assert validation._older_draft(nested, 20) is True


def test_subschemas_finds_schemas_by_keyword_only() -> None:
    """The public walker the plugin finds ``$schema`` and the content keywords with: schemas under keywords, not
    property names, ``enum``/``const``/``default`` values or a ``dependencies`` list of names."""
    from harness_one import subschemas

    inner = {"type": "string", "contentMediaType": "application/json"}
    tuple_item = {"type": "integer"}
    dependent = {"required": ["b"]}
    schema = {
        "properties": {"$schema": inner, "n": {"enum": [{"type": "x"}], "default": {"type": "y"}}},
        "items": [tuple_item],
        "dependencies": {"a": dependent, "c": ["d"]},
    }
    found = list(subschemas(schema))
    assert found[0] is schema
    assert {id(node) for node in found} == {
        id(schema),
        id(inner),
        id(schema["properties"]["n"]),
        id(tuple_item),
        id(dependent),
    }
