"""Validation carry-over: in-process subclasses judged by jsonschema-rs, integers only where no other number
is taken, integer defaults, and the verdict budget on a clock that does not move by itself."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from harness_one import ArgumentLimits, ManualClock, ToolArgumentError, ToolRegistry
from harness_one_plugins import ValidationPlugin
from harness_one_plugins.validation import _ODD, VERDICT_BUDGET, compile_schema, rust_available

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]
RUST_ONLY = pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing")
NUMBER = {"type": "number"}
INTEGER = {"type": "integer"}
TOO_SLOW = f"arguments could not be checked within {VERDICT_BUDGET * 1000:g} ms, so send smaller or simpler arguments"


class Jumping:
    """A clock that moves ``step`` seconds at every reading (a budget on it runs out after a few readings)."""

    def __init__(self, step: float) -> None:
        self.step, self.time = step, 0.0

    def now(self) -> float:
        self.time += self.step
        return self.time

    def sleep(self, seconds: float) -> None:
        self.time += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


def registry(backend: str = "auto", clock: Any = None) -> ToolRegistry:
    extra = {} if clock is None else {"clock": clock}
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, autoload=False, **extra)


def echo(reg: ToolRegistry, schema: dict[str, Any], args: dict[str, Any]) -> Any:
    reg.add(lambda **kw: kw, name="t", parameters=schema)
    return reg.call("t", args)


# -- 1. in-process subclasses of str, int and float are judged by jsonschema-rs, as the JSON they are sent as ----


class Color(str, enum.Enum):  # what enum.StrEnum is (Python 3.11+)
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Text(str):
    pass


class Real(float):
    pass


ROWS = {
    "type": "object",
    "properties": {
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "color": {"enum": ["red", "green", "blue"]},
                    "note": {"type": "string", "maxLength": 10},
                    "level": {"type": "integer", "maximum": 2},
                },
                "required": ["color"],
            },
        }
    },
}


@RUST_ONLY
def test_strenum_rows_are_judged_by_jsonschema_rs_not_the_budgeted_python_verdict() -> None:
    """1,000 rows of StrEnum values went to the pure-Python verdict, refused past 20 ms where plain strings passed."""
    rows = [{"color": Color.RED, "note": Text("n"), "level": Level.HIGH} for _ in range(1000)]
    reg = registry("rust", Jumping(1.0))  # a second per reading: a verdict that reads the clock runs out at once
    reg.add(lambda rows: rows, name="t", parameters=ROWS)
    got = reg.call("t", {"rows": rows})
    assert got is rows and got[0]["color"] is Color.RED  # the tool receives what was sent
    with pytest.raises(ToolArgumentError) as err:  # a wrong value is still refused, at its path
        reg.call("t", {"rows": [*rows[:5], {"color": Text("pink")}]})
    assert [(p.path, p.keyword) for p in err.value.problems if not p.is_listing_cut] == [("$.rows[5].color", "enum")]


@RUST_ONLY
@pytest.mark.parametrize(
    ("value", "valid"),
    [(Real(2.5), True), (Real(3.5), False), (Level.HIGH, True), (Text("abc"), False), (Color.RED, False)],
)
def test_a_number_or_string_subclass_is_judged_as_its_plain_value(value: Any, valid: bool) -> None:
    """jsonschema-rs refused a float subclass outright (and raised on a str or int subclass)."""
    compiled = compile_schema({"type": "number", "maximum": 3}, "rust")
    assert compiled.is_valid(value) is valid
    assert compiled._rust_verdict(value, _ODD) is valid  # decided by jsonschema-rs, not left to jsonschema


@RUST_ONLY
def test_what_jsonschema_rs_still_cannot_read_keeps_the_verdict_budget() -> None:
    compiled = compile_schema({"type": "object", "properties": {"xs": {"type": "array", "items": {"not": INTEGER}}}}, "rust")
    args = {"xs": [b"x"] * 200}  # bytes: no JSON text holds them
    with pytest.raises(ToolArgumentError) as err:
        compiled.check(args, ArgumentLimits(), Jumping(0.001))
    assert [(p.path, p.message) for p in err.value.problems] == [("$", TOO_SLOW)]
    assert compiled.check(args, ArgumentLimits(), Jumping(0.0)) == args  # in time: valid


class Twin(str):
    """A key kept apart from the plain key of the same text by its own equality."""

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


@RUST_ONLY
def test_two_keys_of_one_text_are_judged_by_jsonschema_as_the_dict_holds_them() -> None:
    """Read back from JSON text the two keys would be one, the last value winning (a string where an integer goes)."""
    compiled = compile_schema({"type": "object", "properties": {"a": {"type": "integer"}}}, "rust")
    assert compiled.is_valid({"a": 1, Twin("a"): "x"})


# -- 2. a whole float becomes an int only where every schema that may apply takes no other numbers ---------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("schema", "args"),
    [
        # dependentSchemas applies only when its key is there
        ({"properties": {"n": NUMBER}, "dependentSchemas": {"flag": {"properties": {"n": INTEGER}}}}, {"n": 2.0}),
        # an else that $refs a number schema
        (
            {
                "$defs": {"num": NUMBER},
                "properties": {"n": {"if": {"minimum": 10}, "then": INTEGER, "else": {"$ref": "#/$defs/num"}}},
            },
            {"n": 2.0},
        ),
        # what then and else say of a property: either may apply
        (
            {
                "properties": {"kind": {}, "n": {}},
                "if": {"properties": {"kind": {"const": "i"}}, "required": ["kind"]},
                "then": {"properties": {"n": INTEGER}},
                "else": {"properties": {"n": NUMBER}},
            },
            {"kind": "f", "n": 2.0},
        ),
        ({"properties": {"n": {"anyOf": [INTEGER, {"$ref": "#/$defs/num"}]}}, "$defs": {"num": NUMBER}}, {"n": 2.0}),
        ({"properties": {"n": {"anyOf": [INTEGER, {"allOf": [NUMBER]}]}}}, {"n": 2.0}),
        ({"anyOf": [{"properties": {"n": INTEGER}}, {"properties": {"n": NUMBER}}]}, {"n": 2.0}),
        # a property's own schema, not additionalProperties, applies to it; prefix items likewise
        ({"properties": {"n": NUMBER}, "additionalProperties": INTEGER}, {"n": 2.0}),
        ({"patternProperties": {"^n": NUMBER}, "additionalProperties": INTEGER}, {"n": 2.0}),
        ({"properties": {"n": {"type": "array", "prefixItems": [NUMBER], "items": INTEGER}}}, {"n": [2.0]}),
    ],
)
def test_a_number_the_schema_may_take_as_a_fraction_stays_a_float(backend: str, schema: dict[str, Any], args: Any) -> None:
    got = echo(registry(backend), {"type": "object", **schema}, args)
    assert got == args
    value = got["n"][0] if isinstance(got["n"], list) else got["n"]
    assert type(value) is float


@pytest.mark.parametrize("backend", BACKENDS)
def test_integers_are_still_found_where_every_schema_that_may_apply_says_integer(backend: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "opt": {"anyOf": [INTEGER, {"type": "null"}]},
            "either": {"oneOf": [INTEGER, {"type": "string"}]},
            "maybe": {"anyOf": [{"type": "object", "properties": {"n": INTEGER}}, {"type": "null"}]},
            "extra": {"properties": {"x": NUMBER}, "additionalProperties": INTEGER},
            "pair": {"prefixItems": [NUMBER], "items": INTEGER},
            "both": {"if": {"minimum": 10}, "then": INTEGER, "else": {"$ref": "#/$defs/int"}},
            "c": {},
            "d": {},
        },
        "$defs": {"int": INTEGER},
        "if": {"required": ["c"]},  # whenever c is there, then applies to it
        "then": {"properties": {"c": INTEGER}},
        "dependentSchemas": {"d": {"properties": {"d": INTEGER}}},  # whenever d is there, this applies to it
    }
    args = {
        "opt": 1.0,
        "either": 2.0,
        "maybe": {"n": 3.0},
        "extra": {"x": 4.0, "y": 5.0},
        "pair": [6.0, 7.0],
        "both": 8.0,
        "c": 9.0,
        "d": 10.0,
    }
    got = echo(registry(backend), schema, args)
    assert got == args
    found = [got["opt"], got["either"], got["maybe"]["n"], got["extra"]["y"], got["pair"][1], got["both"], got["c"], got["d"]]
    assert [type(v) for v in found] == [int] * 8
    assert type(got["extra"]["x"]) is float and type(got["pair"][0]) is float


# -- 3. a default is filled in as a value sent in its place becomes -----------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_whole_float_default_of_an_integer_reaches_the_tool_as_an_int(backend: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "default": 2.0},
            "x": {"type": "number", "default": 2.0},
            "o": {
                "type": "object",
                "properties": {"k": INTEGER, "m": {"type": "integer", "default": 3.0}},
                "default": {"k": 4.0},
            },
        },
    }
    got = echo(registry(backend), schema, {})
    assert got == {"n": 2, "x": 2.0, "o": {"k": 4}}
    assert [type(got["n"]), type(got["x"]), type(got["o"]["k"])] == [int, float, int]
    nested = echo(registry(backend), schema, {"o": {}})["o"]
    assert nested == {"m": 3} and type(nested["m"]) is int
    assert schema["properties"]["o"]["default"] == {"k": 4.0}  # the schema's own default is left as it is


# -- 4. on a clock that does not move by itself the verdict budget never runs out: an exact verdict ---------------


@RUST_ONLY
def test_on_a_manual_clock_the_verdict_of_what_jsonschema_rs_cannot_read_is_exact() -> None:
    """Tests get jsonschema's whole verdict (a budget on a clock that only moves when told never runs out)."""
    reg = registry("rust", ManualClock())
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"not": INTEGER}}}}
    reg.add(lambda xs: f"{len(xs)} items", name="t", parameters=schema)
    xs: list[Any] = [b"x"] * 2000  # bytes: jsonschema judges, reading the clock at every keyword
    assert reg.call("t", {"xs": xs}) == "2000 items"
    with pytest.raises(ToolArgumentError) as err:
        reg.call("t", {"xs": [*xs, 1]})
    assert [(p.path, p.keyword) for p in err.value.problems] == [("$.xs[2000]", "not")]
