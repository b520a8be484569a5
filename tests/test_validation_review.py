"""Review fixes: refusals that never repr the value, inexact whole floats, oversized text, paths, messages."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from harness_one import ArgumentLimits, ManualClock, ToolArgumentError, ToolRegistry
from harness_one._arguments import check_signature, decode_arguments
from harness_one_plugins import ValidationPlugin
from harness_one_plugins.validation import compile_schema, rust_available

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]
DRAFT7 = "http://json-schema.org/draft-07/schema#"


def registry(backend: str = "python") -> ToolRegistry:
    """On a manual clock: the listing's time budget (5 ms) never runs out, as it did on a loaded machine."""
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, clock=ManualClock(), autoload=False)


def refused(reg: ToolRegistry, name: str, args: Any) -> list[Any]:
    with pytest.raises(ToolArgumentError) as err:
        reg.call(name, args)
    return err.value.problems


# -- a refusal never builds the repr of the value (jsonschema's texts took 33 ms for a large one) ----------------

REPRS = [0]


class Loud(list):  # type: ignore[type-arg]
    def __repr__(self) -> str:
        REPRS[0] += 1
        return "[...]"


class LoudStr(str):
    def __repr__(self) -> str:
        REPRS[0] += 1
        return "'...'"


class LoudDict(dict):  # type: ignore[type-arg]
    def __repr__(self) -> str:
        REPRS[0] += 1
        return "{...}"


ITEMS = Loud(map(LoudStr, "abc"))
QUIET = [
    ({"type": "string"}, ITEMS, "expected string, got array"),
    ({"enum": ["x", "y"]}, ITEMS, 'expected one of ["x", "y"], got ['),
    ({"not": {"type": "array"}}, ITEMS, 'must not match the schema {"type": "array"}'),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, ITEMS, "must match at least one of the alternatives"),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, ITEMS, "must match exactly one of the alternatives"),
    ({"oneOf": [{"type": "array"}, {"minItems": 1}]}, ITEMS, "matches more than one of the 2 alternatives"),
    ({"minItems": 5}, ITEMS, "expected at least 5 items, got 3"),
    ({"maxItems": 2}, ITEMS, "expected at most 2 items, got 3"),
    ({"minProperties": 2}, LoudDict(a=LoudStr("x")), "expected at least 2 properties, got 1"),
    ({"maxProperties": 0}, LoudDict(a=LoudStr("x")), "expected at most 0 properties, got 1"),
    ({"contains": {"type": "integer"}}, ITEMS, 'expected at least one item matching {"type": "integer"}'),
    ({"prefixItems": [{"type": "string"}], "items": False}, ITEMS, "expected at most 1 items, got 3"),
    (False, ITEMS, "no value is allowed here"),  # jsonschema: "False schema does not allow <repr>", at the path "$"
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("field", "value", "message"), QUIET, ids=[str(sorted(f)) if isinstance(f, dict) else str(f) for f, _, _ in QUIET]
)
def test_a_refusal_never_builds_the_repr_of_the_value(backend: str, field: dict[str, Any], value: Any, message: str) -> None:
    reg = registry(backend)
    reg.add(lambda **kw: kw, name="t", parameters={"type": "object", "properties": {"v": field}})
    REPRS[0] = 0
    problems = refused(reg, "t", {"v": value})
    assert problems[0].path == "$.v" and problems[0].message.startswith(message), problems
    assert REPRS[0] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_draft7_contains_and_additional_items_never_build_the_repr_either(backend: str) -> None:
    reg = registry(backend)
    fields = {"c": {"contains": {"type": "integer"}}, "t": {"items": [{"type": "string"}], "additionalItems": False}}
    reg.add(lambda **kw: kw, name="t", parameters={"$schema": DRAFT7, "type": "object", "properties": fields})
    REPRS[0] = 0
    problems = refused(reg, "t", {"c": ITEMS, "t": ITEMS})
    assert [(p.path, p.message, p.expected) for p in problems] == [
        ("$.c", 'expected at least one item matching {"type": "integer"}', '{"type": "integer"}'),
        ("$.t", "expected at most 1 items, got 3", "at most 1 items"),
    ]
    assert REPRS[0] == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("draft", [None, DRAFT7])
def test_a_false_subschema_names_the_value_it_refuses(backend: str, draft: str | None) -> None:
    """``properties: {x: false}`` (a way to forbid a property) named ``$``: jsonschema's false schema has no path."""
    defs = "$defs" if draft is None else "definitions"
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "x": False,
            "r": {"$ref": f"#/{defs}/never"},
            "n": {"type": "object", "properties": {"deep": {"allOf": [False]}}},
            "t": {"type": "array", "items": {"type": "object", "properties": {"k": False}}},
        },
        defs: {"never": False},
    }
    if draft is not None:
        schema["$schema"] = draft
    reg = registry(backend)
    reg.add(lambda **kw: kw, name="t", parameters=schema)
    REPRS[0] = 0
    problems = refused(reg, "t", {"x": ITEMS, "r": 1, "n": {"deep": "y"}, "t": [{}, {"k": LoudDict()}]})
    assert [(p.path, p.message) for p in problems] == [
        ("$.n.deep", "no value is allowed here"),
        ("$.r", "no value is allowed here"),
        ("$.t[1].k", "no value is allowed here"),
        ("$.x", "no value is allowed here"),
    ]
    assert REPRS[0] == 0
    assert reg.call("t", {"n": {}, "t": [{}]}) == {"n": {}, "t": [{}]}


# -- a whole float at or past 2**53 is refused where an integer is expected, not rounded -------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_whole_float_past_2_53_is_refused_where_an_integer_is_expected(backend: str) -> None:
    reg = registry(backend)
    seen: list[Any] = []
    fields = {
        "user_id": {"type": "integer", "maximum": 2**53},
        "rows": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        "by_name": {"type": "object", "additionalProperties": {"type": "integer"}},
    }
    reg.add(lambda **kw: seen.append(kw), name="t", parameters={"type": "object", "properties": fields})
    cases = [
        ('{"user_id": 9007199254740993.0}', "$.user_id", "9007199254740992.0"),
        ({"user_id": 9.007199254740993e15}, "$.user_id", "9007199254740992.0"),
        ({"user_id": -1e308}, "$.user_id", "-1e+308"),
        ('{"rows": [{"n": 1.0}, {"n": 2.0}, {"n": 1234567890123456789.0}]}', "$.rows[2].n", "1.2345678901234568e+18"),
        ({"by_name": {"a.b": 1e17}}, '$.by_name["a.b"]', "1e+17"),
    ]
    for args, path, got in cases:
        (problem,) = refused(reg, "t", args)
        assert (problem.path, problem.keyword, problem.got) == (path, "type", got)
        assert problem.message.startswith(f"expected an integer without a fraction or exponent, got {got}")
    assert not seen
    reg.call("t", '{"user_id": 9007199254740991.0, "rows": [{"n": -9007199254740991.0}], "by_name": {"x": 2.0}}')
    assert seen == [{"user_id": 2**53 - 1, "rows": [{"n": 1 - 2**53}], "by_name": {"x": 2}}]
    assert type(seen[0]["user_id"]) is int


# -- oversized text is refused by its length before it is encoded ------------------------------------------------


class Unencodable(str):
    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise AssertionError("encoded")


def test_text_with_more_characters_than_the_limit_is_refused_without_encoding_it() -> None:
    with pytest.raises(ToolArgumentError) as err:
        decode_arguments(Unencodable('{"text": "' + "€" * 200 + '"}'), ArgumentLimits(max_bytes=100))
    (problem,) = err.value.problems
    assert problem.message == "arguments are at least 212 bytes; the limit is 100"
    assert (problem.keyword, problem.got) == ("limits", "at least 212 bytes")
    with pytest.raises(ToolArgumentError, match="arguments are 212 bytes"):  # ASCII: its length is its size
        decode_arguments(Unencodable('{"text": "' + "e" * 200 + '"}'), ArgumentLimits(max_bytes=100))
    with pytest.raises(ToolArgumentError, match="arguments are 612 bytes"):  # fewer characters: measured exactly
        decode_arguments('{"text": "' + "€" * 200 + '"}', ArgumentLimits(max_bytes=300))


# -- every path is written by the one path builder ---------------------------------------------------------------


def encodable(err: ToolArgumentError) -> bool:
    return bool(json.dumps(err.to_dict(), ensure_ascii=False).encode("utf-8"))


def test_the_path_builder_quotes_cuts_and_escapes() -> None:
    from harness_one import json_path

    parts = ["a.b", 0, "c", "k" * 100, "\ud800", "é", "k" * 60, 'y"z', True, 7]
    assert json_path(parts) == '$["a.b"][0].c["' + "k" * 57 + '..."]["\\ud800"].é.' + "k" * 60 + '["y\\"z"].True[7]'


def test_the_path_of_an_integer_too_long_to_read_is_quoted_and_cut() -> None:
    reg = ToolRegistry(clock=ManualClock(), autoload=False)  # (the listing's time budget never runs out)
    reg.add(lambda **kw: 0, name="t", parameters={"type": "object"})
    number = "9" * 4301
    cases = [
        ('{"a.b": {"c": ' + number + "}}", '$["a.b"].c'),
        ('{"items[0]": [1, ' + number + "]}", '$["items[0]"][1]'),
        ('{"' + "k" * 200_000 + '": ' + number + "}", '$["' + "k" * 57 + '..."]'),
        ('{"\\ud800": ' + number + "}", '$["\\ud800"]'),
    ]
    for text, path in cases:
        result = reg.try_call("t", text)
        assert isinstance(result.error, ToolArgumentError)
        assert result.error.problems[0].path == path and encodable(result.error)


def test_unknown_and_missing_arguments_are_named_by_their_json_paths() -> None:
    with pytest.raises(ToolArgumentError) as err:
        check_signature({"a.b": 1, "\ud800": 2, "k" * 100: 3}, frozenset({"x", "a b"}), frozenset({"a b"}), False)
    problems = [(p.path, p.got) for p in err.value.problems]
    assert problems == [
        ('$["a.b"]', '"a.b"'),
        ('$["' + "k" * 57 + '..."]', '"' + "k" * 57 + '..."'),
        ('$["\\ud800"]', '"\\ud800"'),
        ('$["a b"]', "missing"),
    ]
    assert encodable(err.value)


def test_a_conversion_error_has_the_path_validation_would_give() -> None:
    reg = ToolRegistry(clock=ManualClock(), autoload=False)  # (the listing's time budget never runs out)

    def plan(days: dict[str, datetime.date]) -> int:
        return len(days)

    parameters = {"type": "object", "properties": {"days": {"type": "object", "additionalProperties": {"type": "string"}}}}
    reg.add(plan, name="plan", parameters=parameters)
    (problem,) = refused(reg, "plan", {"days": {"a.b": "soon"}})
    assert problem.path == '$.days["a.b"]'


# -- messages name the part at fault ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bad_property_name_is_named(backend: str) -> None:
    reg = registry(backend)
    names = {"m": {"type": "object", "propertyNames": {"maxLength": 3}}, "p": {"propertyNames": {"pattern": "^[a-z]+$"}}}
    reg.add(lambda **kw: kw, name="t", parameters={"type": "object", "properties": names})
    problems = refused(reg, "t", {"m": {"ok": 1, "toolong": 2}, "p": {"BAD": 1}})
    assert [(p.path, p.message) for p in problems] == [
        ("$.m", 'expected at most 3 characters, got 7 (in the property name "toolong")'),
        ("$.p", 'expected a string matching the pattern "^[a-z]+$", got "BAD" (in the property name "BAD")'),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_items_past_a_closed_tuple_say_how_many_are_allowed(backend: str) -> None:
    reg = registry(backend)
    tuple_ = {"type": "array", "prefixItems": [{"type": "integer"}], "items": False}
    reg.add(lambda **kw: kw, name="t", parameters={"type": "object", "properties": {"t": tuple_}})
    (problem,) = refused(reg, "t", '{"t": [1, 2, 3]}')
    assert (problem.path, problem.message, problem.expected) == ("$.t", "expected at most 1 items, got 3", "at most 1 items")


# -- jsonschema-rs judges what it reads exactly; what is left to Python has a time budget --------------------------

RUST_ONLY = pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing")


class _Jumping:
    """A clock that moves ``step`` seconds at every reading (a budget runs out after a few readings)."""

    def __init__(self, step: float) -> None:
        self.step, self.time = step, 0.0

    def now(self) -> float:
        self.time += self.step
        return self.time


@RUST_ONLY
def test_integers_past_64_bits_and_lone_surrogates_are_judged_by_jsonschema_rs() -> None:
    """A 250-digit integer or one lone surrogate sent the whole call to pure Python (~1 s for 160 KB)."""
    fields = {
        "n": {"type": "integer", "maximum": 10**30},
        "ids": {"type": "array", "uniqueItems": True},
        "s": {"type": "string", "maxLength": 2},
        "k": {"enum": ["a", "b"]},
    }
    compiled = compile_schema({"type": "object", "properties": fields}, "rust")
    good = {"n": 10**30 - 1, "ids": [10**20, 10**20 + 1, int("9" * 250)], "s": "\ud800a", "k": "b", "\udfff": 1}
    assert compiled.check(good, ArgumentLimits(), ManualClock()) == good  # (no time budget runs out)
    assert compiled._py is None and compiled._lister is None  # no Python verdict was needed
    for args, path, message in [
        ({"n": 10**30 + 1}, "$.n", f"expected a number <= {10**30}, got {10**30 + 1}"),
        ({"ids": [10**20, 10**20]}, "$.ids", "expected all items to be unique"),
        ({"s": "\ud800ab"}, "$.s", "expected at most 2 characters, got 3"),
        ({"k": "\udfff"}, "$.k", 'expected one of ["a", "b"], got "\\udfff"'),
    ]:
        with pytest.raises(ToolArgumentError) as err:
            compiled.check(args, ArgumentLimits(), ManualClock())
        assert [(p.path, p.message) for p in err.value.problems] == [(path, message)]


@RUST_ONLY
@pytest.mark.usefixtures("patient_patterns")  # the 5 ms pattern budget is wall time
def test_a_pattern_that_tells_a_surrogate_from_its_stand_in_is_left_to_python() -> None:
    for pattern, valid in [("^\\p{Cs}$", True), ("^\\p{Co}$", False), ("^[\\u0000-\\uffff]$", True)]:
        compiled = compile_schema({"type": "string", "pattern": pattern}, "rust")
        assert compiled.is_valid("\ud800") is valid, pattern
        assert compile_schema({"type": "string", "pattern": pattern}, "python").is_valid("\ud800") is valid


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("schema", "instance", "valid"),
    [
        # a lone surrogate beside the very character that would stand in for it: two keys, not one
        ({"type": "object", "additionalProperties": {"type": "integer"}}, {"\ud800": "not an int", "\U0010f800": 1}, False),
        ({"type": "array", "uniqueItems": True}, ["\ud800", "\U0010f800"], True),
        # a schema naming the stand-in's character tells the two apart
        ({"type": "object", "properties": {"\U0010f800": {"type": "integer"}}}, {"\ud800": "x"}, True),
        ({"type": "object", "required": ["\U0010f800"]}, {"\ud800": 1}, False),
        ({"type": "object", "dependentRequired": {"a": ["\U0010f800"]}}, {"a": 1, "\ud800": 2}, False),
    ],
)
def test_a_surrogate_and_its_would_be_stand_in_are_never_one(backend: str, schema: Any, instance: Any, valid: bool) -> None:
    assert compile_schema(schema, backend).is_valid(instance) is valid


@pytest.mark.parametrize("backend", BACKENDS)
def test_what_python_must_judge_has_a_time_budget_unless_python_is_the_backend(backend: str) -> None:
    """A value jsonschema-rs cannot read (bytes: no JSON holds it) went to an unbounded pure-Python verdict."""
    from harness_one_plugins.validation import VERDICT_BUDGET

    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"not": {"type": "integer"}}}}}
    compiled = compile_schema(schema, backend)
    args = {"xs": [b"x"] * 200}
    clock = _Jumping(0.001)  # 1 ms per reading: each keyword the verdict checks costs one
    if backend == "python":  # the chosen backend: its verdict takes what it takes
        assert compiled.check(args, ArgumentLimits(), clock) == args
        return
    with pytest.raises(ToolArgumentError) as err:
        compiled.check(args, ArgumentLimits(), clock)
    (problem,) = err.value.problems
    assert (problem.path, problem.keyword) == ("$", "limits")
    assert (
        problem.message
        == f"arguments could not be checked within {VERDICT_BUDGET * 1000:g} ms, so send smaller or simpler arguments"
    )
    assert compiled.check(args, ArgumentLimits(), _Jumping(0.0)) == args  # in time: valid


@pytest.mark.parametrize(
    ("fmt", "value"),
    [
        ("duration", "banana"),
        ("uri-template", "{a,,b}"),
        ("iri", "not an iri"),
        ("iri-reference", "\\\\x"),
        ("hostname", "XN--BCHER-KVA.CH"),
        ("hostname", "xn--bcher-8va.ch"),
        ("email", "a@xn--bcher-8va.ch"),
        ("idn-hostname", "a.b."),
        ("idn-email", "@ü.ch"),
        ("relative-json-pointer", "801"),
        ("regex", "a{"),
        ("regex", "(?i)a"),
    ],
)
def test_both_backends_decide_every_format_alike(fmt: str, value: str) -> None:
    """jsonschema-rs asserted formats the Python backend does not, and read IDNA labels its own way."""
    if not rust_available():
        pytest.skip("jsonschema-rs missing")
    schema = {"type": "string", "format": fmt}
    assert compile_schema(schema, "rust").is_valid(value) == compile_schema(schema, "python").is_valid(value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dependencies_holds_in_every_draft_as_jsonschema_rs_reads_it(backend: str) -> None:
    reg = registry(backend)
    schema = {"type": "object", "properties": {"value": {}, "times": {}}, "dependencies": {"times": ["other"]}}
    reg.add(lambda **kw: kw, name="t", parameters=schema)
    assert [(p.path, p.message) for p in refused(reg, "t", {"value": "x", "times": 2})] == [
        ("$.other", "required when 'times' is present")
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tuple_is_an_array(backend: str) -> None:
    """A tuple from a Python caller was refused as "expected array, got array [1, 2]"."""
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}
    compiled = compile_schema(schema, backend)
    got = compiled.check({"items": (1.0, 2)}, ArgumentLimits(), ManualClock())
    assert got == {"items": (1, 2)} and type(got["items"]) is tuple and type(got["items"][0]) is int
    assert [(p.path, p.message) for p in compiled.problems({"items": (1, "x")}, ManualClock())] == [
        ("$.items[1]", 'expected integer, got string "x"')
    ]


@RUST_ONLY
def test_a_pattern_jsonschema_rs_gave_up_on_is_not_called_a_mismatch() -> None:
    """Past its backtracking limit jsonschema-rs says "invalid": the value may well match."""
    reg = registry("rust")
    reg.add(lambda body: body, name="t", parameters={"type": "object", "properties": {"body": {"pattern": "(\\w)\\1"}}})
    problems = refused(reg, "t", {"body": "lorem ipsum " * 3000 + "all"})  # matches, near its end
    assert problems[0].path == "$.body"
    assert problems[0].message.startswith("could not be matched against the pattern '(\\\\w)\\\\1' within the time limit")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refusal_names_the_field_when_the_listing_has_no_time(backend: str) -> None:
    """Out of listing time before the first problem: "$: arguments do not match the schema" named nothing."""
    schema = {"type": "object", "properties": {"rows": {"type": "array", "items": {"properties": {"qty": {"type": "integer"}}}}}}
    compiled = compile_schema(schema, backend)
    with pytest.raises(ToolArgumentError) as err:
        compiled.check({"rows": [{"qty": 1}, {"qty": "two"}]}, ArgumentLimits(), _Jumping(1.0))
    assert [(p.path, p.message) for p in err.value.problems] == [
        ("$.rows[1].qty", 'expected integer, got string "two"'),
        ("$", "more problems may follow; fix these first"),
    ]


D7 = {"$schema": DRAFT7}
NAMED = [
    ({"a": {"type": "integer"}}, {"a": "x"}),
    ({"a": {"type": "string", "enum": ["r", "g"]}}, {"a": 5}),
    ({"a": {"const": "r"}}, {"a": 5}),
    ({"a": {"type": "object", "required": ["b", "c"]}}, {"a": {}}),
    ({"a": {"dependentRequired": {"card": ["cvv", "zip"]}}}, {"a": {"card": 1}}),
    ({"a": {"if": {"properties": {"m": {"const": "bank"}}}, "then": {"required": ["iban"]}}}, {"a": {"m": "bank"}}),
    ({"a": {"properties": {"b": {}}, "additionalProperties": False}}, {"a": {"b": 1, "zz": 2, "\ud800": 3}}),
    ({"a": {"allOf": [{"properties": {"b": {}}}], "unevaluatedProperties": False}}, {"a": {"b": 1, "zz": 2}}),
    ({"a": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}}, {"a": {"zip": "1"}}),
    ({"a": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}}, {"a": 3}),
    ({"a": {"oneOf": [{"type": "integer"}, {"minimum": 0}]}}, {"a": 5}),
    ({"a": {"oneOf": [{"type": "integer"}, {"type": "string", "pattern": "^[0-9]+$"}]}}, {"a": 1.5}),
    ({"a": {"type": "string", "format": "email"}}, {"a": "nope"}),
    ({"a": {"type": "string", "minLength": 3}}, {"a": "\ud800b"}),
    ({"a": {"exclusiveMinimum": 0}}, {"a": 0}),
    ({"a": {"multipleOf": 0.01}}, {"a": 0.30000000000000004}),
    ({"a": {"type": "object", "propertyNames": {"maxLength": 3}}}, {"a": {"toolong": 1}}),
    ({"a": {"propertyNames": {"pattern": "^[a-z]+$"}}}, {"a": {"BAD": 1}}),
    ({"a": {"type": "array", "prefixItems": [{"type": "integer"}], "items": False}}, {"a": [1, 2, 3]}),
    ({"a": {"contains": {"type": "integer"}, "minContains": 2}}, {"a": [1, "a"]}),
    ({"a": False}, {"a": 1}),
    ({"a": {"not": {"type": "array"}}}, {"a": [1]}),
    ({"a": {"uniqueItems": True}}, {"a": [1, 1]}),
    ({"a": {"$ref": "#I"}}, {"a": 7}),
    ({"a": {"pattern": "(\\w)\\1"}}, {"a": "lorem ipsum " * 3000}),
]


@RUST_ONLY
@pytest.mark.parametrize(("field", "args"), NAMED, ids=[str(i) for i in range(len(NAMED))])
def test_jsonschema_rs_names_a_problem_as_the_listing_does(field: dict[str, Any], args: dict[str, Any]) -> None:
    defs = {"A": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}}
    defs["I"] = {"$anchor": "I", "type": "integer", "maximum": 3}
    compiled = compile_schema({"$id": "https://example.com/t", "type": "object", "properties": field, "$defs": defs}, "rust")
    listed = [p for p in compiled.problems(args, ManualClock()) if not p.is_listing_cut]
    named = [p for p in compiled.problems(args, _Jumping(1.0)) if not p.is_listing_cut]  # the listing has no time
    assert named and set(named) <= set(listed), (named, listed)


@RUST_ONLY
@pytest.mark.parametrize("args", [{"t": ["a", "b"]}, {"c": ["a"]}, {"d": {"times": 1}}])
def test_jsonschema_rs_names_draft7_problems_as_the_listing_does(args: dict[str, Any]) -> None:
    fields = {
        "t": {"items": [{"type": "string"}], "additionalItems": False},
        "c": {"contains": {"type": "integer"}},
        "d": {"dependencies": {"times": ["other"]}},
    }
    compiled = compile_schema({**D7, "type": "object", "properties": fields}, "rust")
    listed = [p for p in compiled.problems(args, ManualClock()) if not p.is_listing_cut]
    named = [p for p in compiled.problems(args, _Jumping(1.0)) if not p.is_listing_cut]
    assert named and set(named) <= set(listed), (named, listed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integers_are_found_through_anchors_patterns_conditions_and_dependent_schemas(backend: str) -> None:
    integer = {"type": "integer"}
    schema = {
        "$id": "https://example.com/t",
        "type": "object",
        "$defs": {"I": {"$anchor": "I", **integer}, "O": {"$anchor": "O", "properties": {"mode": {"default": "fast"}}}},
        "properties": {"a": {"$ref": "#I"}, "p": {"type": "object", "patternProperties": {"^n": integer}}, "c": {}, "d": {}},
        "if": {"required": ["c"]},
        "then": {"properties": {"c": integer}},
        "dependentSchemas": {"d": {"properties": {"d": integer}}},
        "patternProperties": {"^o": {"$ref": "#O"}},
    }
    compiled = compile_schema({**schema, "properties": {**schema["properties"], "opts": {"$ref": "#O"}}}, backend)
    got = compiled.check({"a": 2.0, "p": {"n1": 3.0, "x": 4.0}, "c": 5.0, "d": 6.0, "opts": {}}, ArgumentLimits(), ManualClock())
    assert got == {"a": 2, "p": {"n1": 3, "x": 4.0}, "c": 5, "d": 6, "opts": {"mode": "fast"}}
    assert [type(got["a"]), type(got["p"]["n1"]), type(got["p"]["x"]), type(got["c"]), type(got["d"])] == [
        int,
        int,
        float,
        int,
        int,
    ]
