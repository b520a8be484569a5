"""Review fixes: refusals that never repr the value, inexact whole floats, oversized text, paths, messages."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from harness_one import ArgumentLimits, ToolArgumentError, ToolRegistry
from harness_one._arguments import check_signature, decode_arguments
from harness_one_plugins import ValidationPlugin
from harness_one_plugins.validation import rust_available

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]
DRAFT7 = "http://json-schema.org/draft-07/schema#"


def registry(backend: str = "python") -> ToolRegistry:
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, autoload=False)


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
    reg = ToolRegistry(autoload=False)
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
    reg = ToolRegistry(autoload=False)

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
