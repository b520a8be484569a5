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


# -- 5. arguments with defaults filled in are judged again: the tool never receives what its schema refuses ------

NOTE = " (with the schema's defaults filled in; send the property yourself)"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"properties": {"n": {"type": "integer", "allOf": [{"default": "x"}]}}}, ("$.n", 'expected integer, got string "x"')),
        (
            {"properties": {"d": {"type": "string", "format": "date", "default": "2020-13-01"}}},
            ("$.d", 'expected a valid date, got "2020-13-01": there is no such date'),
        ),
        (
            {"properties": {"a": {"type": "integer", "default": 1}, "b": {"type": "integer"}}, "dependentRequired": {"a": ["b"]}},
            ("$.b", "required when 'a' is present"),
        ),
        (
            {
                "properties": {"a": {"type": "string", "default": "x"}, "b": {"type": "integer"}},
                "if": {"properties": {"a": {"const": "x"}}, "required": ["a"]},
                "then": {"required": ["b"]},
            },
            ("$.b", "required property is missing (required by an if/then rule of the schema)"),
        ),
    ],
)
def test_defaults_that_make_the_arguments_invalid_are_refused(
    backend: str, schema: dict[str, Any], problem: tuple[str, str]
) -> None:
    """Defaults were filled in after the verdict: the tool received {'n': 'x'}, a date that is none, a missing b."""
    compiled = compile_schema({"type": "object", **schema}, backend)
    assert refusal(compiled, {}) == [(problem[0], problem[1] + NOTE)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nested_default_is_judged_where_the_arguments_hold_its_object(backend: str) -> None:
    """Which nested defaults are filled depends on the arguments: judged per call, not only when the tool is defined."""
    opts = {
        "type": "object",
        "properties": {"a": {"type": "integer", "default": 1}, "b": {"type": "integer"}},
        "dependentRequired": {"a": ["b"]},
    }
    compiled = compile_schema({"type": "object", "properties": {"opts": opts}}, backend)
    assert compiled.check({}, ArgumentLimits()) == {}
    assert compiled.check({"opts": {"b": 2}}, ArgumentLimits()) == {"opts": {"a": 1, "b": 2}}
    assert refusal(compiled, {"opts": {}}) == [("$.opts.b", "required when 'a' is present" + NOTE)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_registry_call_with_a_bad_default_never_reaches_the_tool(backend: str) -> None:
    from harness_one import ToolRegistry
    from harness_one_plugins import ValidationPlugin

    received: list[Any] = []
    reg = ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, autoload=False)
    schema = {"type": "object", "properties": {"n": {"type": "integer", "allOf": [{"default": "x"}]}, "k": {"type": "integer"}}}
    reg.add(lambda **kw: received.append(kw), name="t", parameters=schema)
    with pytest.raises(ToolArgumentError) as err:
        reg.call("t", {"k": 1})  # the fast path of a flat object of scalars
    assert [(p.path, p.message) for p in err.value.problems] == [("$.n", 'expected integer, got string "x"' + NOTE)]
    reg.call("t", {"k": 1, "n": 2})
    assert received == [{"k": 1, "n": 2}]


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
