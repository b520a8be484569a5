"""Schemas from the types people write, round-tripped: the schema, a readable refusal, the converted value."""

import dataclasses
import datetime as dt
import enum
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import annotated_types as at
import pytest
from pydantic import BaseModel, Field

from harness_one import ManualClock, Tool, ToolArgumentError, ToolDefinitionError, ToolRegistry
from harness_one_plugins import ValidationPlugin

UTC = dt.UTC


@pytest.fixture(params=["python", "rust"])
def reg(request: pytest.FixtureRequest, patient_patterns: None) -> ToolRegistry:
    """A registry on a manual clock: its refusals list every problem, however busy the machine."""
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=request.param)}, autoload=False, clock=ManualClock())


def refusal(reg: ToolRegistry, name: str, args: Any) -> dict[str, str]:
    with pytest.raises(ToolArgumentError) as err:
        reg.call(name, args)
    return {p.path: p.message for p in err.value.problems}


def received(reg: ToolRegistry, fn: Any, args: Any) -> Any:
    """Register ``fn`` and call it; it returns what it received."""
    reg.add(fn, replace=True)
    return reg.call(fn.__name__, args)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    """Where someone lives."""

    street: str
    zip_code: str = Field(pattern=r"^[0-9]{5}$")


class Person(BaseModel):
    name: str = Field(description="Full name")
    age: int = Field(ge=0, le=150)
    born: dt.date
    address: Address | None = None


@dataclasses.dataclass
class Meeting:
    """A meeting.

    Args:
        title: What it is about.
    """

    title: str
    starts: dt.datetime
    attendees: list[uuid.UUID] = dataclasses.field(default_factory=list)
    room: int = 1


class Options(TypedDict):
    verbose: bool
    level: NotRequired[Level]
    when: NotRequired[dt.time]


def test_pydantic_field_bounds_and_description_are_kept_and_enforced(reg: ToolRegistry) -> None:
    def pick(n: Annotated[int, Field(ge=1, le=10, description="How many")]) -> int:
        return n

    tool = Tool.create(pick)
    assert tool.parameters["properties"]["n"] == {"type": "integer", "minimum": 1, "maximum": 10, "description": "How many"}
    assert tool.converters == {}
    reg.add(pick)
    assert refusal(reg, "pick", {"n": 99}) == {"$.n": "expected a number <= 10, got 99"}
    assert reg.call("pick", {"n": 10}) == 10


@pytest.mark.parametrize(
    ("meta", "schema", "bad", "message"),
    [
        (at.Gt(0), {"type": "integer", "exclusiveMinimum": 0}, 0, "expected a number > 0, got 0"),
        (at.Lt(5), {"type": "integer", "exclusiveMaximum": 5}, 5, "expected a number < 5, got 5"),
        (at.Interval(ge=1, le=3), {"type": "integer", "minimum": 1, "maximum": 3}, 4, "expected a number <= 3, got 4"),
        (at.MultipleOf(3), {"type": "integer", "multipleOf": 3}, 4, "expected a multiple of 3, got 4"),
    ],
)
def test_annotated_types_numbers(reg: ToolRegistry, meta: Any, schema: dict[str, Any], bad: int, message: str) -> None:
    def f(n: Annotated[int, meta]) -> int:
        return n

    assert Tool.create(f).parameters["properties"]["n"] == schema
    reg.add(f)
    assert refusal(reg, "f", {"n": bad}) == {"$.n": message}


def test_annotated_types_lengths(reg: ToolRegistry) -> None:
    def f(
        code: Annotated[str, at.MinLen(2), at.MaxLen(3)],
        tags: Annotated[list[str], at.Len(1, 2)],
        extra: Annotated[dict[str, int], at.MaxLen(1)] | None = None,
    ) -> str:
        return code

    props = Tool.create(f).parameters["properties"]
    assert props["code"] == {"type": "string", "minLength": 2, "maxLength": 3}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}
    assert props["extra"]["anyOf"][0]["maxProperties"] == 1
    reg.add(f)
    assert refusal(reg, "f", {"code": "abcd", "tags": []}) == {
        "$.code": "expected at most 3 characters, got 4",
        "$.tags": "expected at least 1 items, got 0",
    }
    assert reg.call("f", {"code": "ab", "tags": ["x"]}) == "ab"


@pytest.mark.parametrize(
    "meta",
    [at.Predicate(str.isupper), Field(max_digits=3), Field(alias="other"), at.Gt(dt.date(2020, 1, 1))],
    ids=["predicate", "max_digits", "alias", "date-bound"],
)
def test_constraints_json_schema_cannot_say_are_refused_not_dropped(meta: Any) -> None:
    def f(x: Annotated[Any, meta]) -> None: ...

    with pytest.raises(ToolDefinitionError, match=r"parameter 'x': (cannot express|Field\(alias)"):
        Tool.create(f)


def test_unrelated_annotated_metadata_is_ignored() -> None:
    class Marker:
        pass

    def f(x: Annotated[int, Marker(), "the x"]) -> None: ...

    assert Tool.create(f).parameters["properties"]["x"] == {"type": "integer", "description": "the x"}


def test_pydantic_model_round_trip(reg: ToolRegistry) -> None:
    def register(person: Person) -> str:
        assert isinstance(person, Person) and isinstance(person.born, dt.date)
        assert person.address is None or isinstance(person.address, Address)
        return f"{person.name}:{person.age}:{person.born.isoformat()}:{person.address.zip_code if person.address else '-'}"

    tool = Tool.create(register)
    schema = tool.parameters
    assert schema["properties"]["person"]["properties"]["age"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 150,
        "title": "Age",
    }
    assert set(schema["$defs"]) == {"Address"}  # nested models hoisted to the root, refs stay valid
    assert schema["properties"]["person"]["properties"]["address"]["anyOf"][0] == {"$ref": "#/$defs/Address"}
    assert set(tool.converters) == {"person"}
    reg.add(register)
    good = {"person": {"name": "Ann", "age": 30, "born": "1994-05-06", "address": {"street": "Main", "zip_code": "12345"}}}
    assert reg.call("register", good) == "Ann:30:1994-05-06:12345"
    bad = {"person": {"name": "Ann", "age": 200, "born": "1994-02-30", "address": {"street": "Main", "zip_code": "12"}}}
    assert refusal(reg, "register", bad) == {
        "$.person.address.zip_code": 'expected a string matching the pattern "^[0-9]{5}$", got "12"',
        "$.person.age": "expected a number <= 150, got 200",
        "$.person.born": 'expected a valid date, got "1994-02-30": there is no such date',
    }


def test_pydantic_validation_beyond_json_schema_is_a_readable_refusal(reg: ToolRegistry) -> None:
    from pydantic import field_validator

    class Even(BaseModel):
        n: int

        @field_validator("n")
        @classmethod
        def even(cls, value: int) -> int:
            if value % 2:
                raise ValueError("must be even")
            return value

    def f(x: Even) -> int:
        return x.n

    reg.add(f)
    assert reg.call("f", {"x": {"n": 4}}) == 4
    problems = refusal(reg, "f", {"x": {"n": 3}})
    assert list(problems) == ["$.x.n"] and "must be even" in problems["$.x.n"]


def test_dataclass_round_trip(reg: ToolRegistry) -> None:
    def book(meeting: Meeting) -> Meeting:
        return meeting

    schema = Tool.create(book).parameters["properties"]["meeting"]
    assert schema["required"] == ["title", "starts"]
    assert schema["properties"]["starts"] == {"type": "string", "format": "date-time"}
    assert schema["properties"]["attendees"] == {"type": "array", "items": {"type": "string", "format": "uuid"}}
    assert schema["properties"]["title"]["description"] == "What it is about."
    key = "2eb8aa08-aa98-11ea-b4aa-73b441d16380"
    got = received(
        reg, book, {"meeting": {"title": "x", "starts": "2024-03-01T09:30:00.5+01:00", "attendees": [key], "room": 2.0}}
    )
    assert got == Meeting(
        "x", dt.datetime(2024, 3, 1, 9, 30, 0, 500000, tzinfo=dt.timezone(dt.timedelta(hours=1))), [uuid.UUID(key)], 2
    )
    assert type(got.room) is int
    assert refusal(reg, "book", {"meeting": {"title": "x", "starts": "tomorrow"}}) == {
        "$.meeting.starts": 'expected a valid date-time, got "tomorrow" (RFC 3339, with seconds and a UTC offset: '
        "2024-01-31T09:30:00Z or 2024-01-31T09:30:00+02:00)"
    }


def test_typeddict_round_trip(reg: ToolRegistry) -> None:
    def configure(options: Options) -> Options:
        return options

    schema = Tool.create(configure).parameters["properties"]["options"]
    assert schema["required"] == ["verbose"]
    assert schema["properties"]["level"] == {"type": "integer", "enum": [1, 2]}
    got = received(reg, configure, {"options": {"verbose": True, "level": 2, "when": "10:20:30Z"}})
    assert got == {"verbose": True, "level": Level.HIGH, "when": dt.time(10, 20, 30, tzinfo=UTC)}
    assert type(got["level"]) is Level
    assert refusal(reg, "configure", {"options": {"verbose": True, "level": 3}}) == {
        "$.options.level": "expected one of [1, 2], got 3"
    }


def test_enum_and_literal(reg: ToolRegistry) -> None:
    def paint(color: Color, finish: Literal["matte", "gloss"] = "matte") -> str:
        assert isinstance(color, Color)
        return f"{color.name}:{finish}"

    props = Tool.create(paint).parameters["properties"]
    assert props["color"] == {"type": "string", "enum": ["red", "blue"]}
    assert props["finish"] == {"type": "string", "enum": ["matte", "gloss"], "default": "matte"}
    reg.add(paint)
    assert reg.call("paint", {"color": "blue"}) == "BLUE:matte"
    assert refusal(reg, "paint", {"color": "green"}) == {"$.color": 'expected one of ["red", "blue"], got "green"'}


@pytest.mark.parametrize(
    ("annotation", "schema", "good", "value", "bad", "message"),
    [
        (
            dt.datetime,
            {"type": "string", "format": "date-time"},
            "2024-02-29T23:59:59Z",
            dt.datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC),
            "2024-02-30T00:00:00Z",
            'expected a valid date-time, got "2024-02-30T00:00:00Z"',
        ),
        (
            dt.date,
            {"type": "string", "format": "date"},
            "2024-02-29",
            dt.date(2024, 2, 29),
            "2023-02-29",
            'expected a valid date, got "2023-02-29"',
        ),
        (
            dt.time,
            {"type": "string", "format": "time"},
            "08:15:00.25-05:00",
            dt.time(8, 15, 0, 250000, tzinfo=dt.timezone(-dt.timedelta(hours=5))),
            "8:15",
            'expected a valid time, got "8:15"',
        ),
        (
            uuid.UUID,
            {"type": "string", "format": "uuid"},
            "2EB8AA08-AA98-11EA-B4AA-73B441D16380",
            uuid.UUID("2eb8aa08-aa98-11ea-b4aa-73b441d16380"),
            "not-a-uuid",
            'expected a valid uuid, got "not-a-uuid"',
        ),
        (Path, {"type": "string"}, "/tmp/x.txt", Path("/tmp/x.txt"), 3, "expected string, got integer 3"),
        (PurePosixPath, {"type": "string"}, "a/b", PurePosixPath("a/b"), None, "expected string, got null"),
        (
            Decimal,
            {
                "anyOf": [
                    {"type": "number"},
                    {"type": "string", "pattern": r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"},
                ]
            },
            "19.990",
            Decimal("19.990"),
            "NaN",
            'expected a string matching the pattern "^[+-]?',  # the only alternative a string can match
        ),
    ],
    ids=["datetime", "date", "time", "uuid", "path", "purepath", "decimal"],
)
def test_standard_library_types(
    reg: ToolRegistry, annotation: Any, schema: dict[str, Any], good: Any, value: Any, bad: Any, message: str
) -> None:
    def f(x: annotation) -> Any:  # type: ignore[valid-type]
        return x

    assert Tool.create(f).parameters["properties"]["x"] == schema
    got = received(reg, f, {"x": good})
    assert got == value and type(got) is type(value)
    problems = refusal(reg, "f", {"x": bad})
    assert list(problems) == ["$.x"] and problems["$.x"].startswith(message)


def test_decimal_from_a_json_number_keeps_its_digits_and_bounds_hold_for_strings(reg: ToolRegistry) -> None:
    def pay(amount: Annotated[Decimal, at.Ge(0)]) -> Decimal:
        return amount

    reg.add(pay)
    assert reg.call("pay", '{"amount": 0.1}') == Decimal("0.1")
    assert reg.call("pay", {"amount": "12.50"}) == Decimal("12.50")
    assert refusal(reg, "pay", {"amount": -1}) == {"$.amount": "expected a number >= 0, got -1"}
    assert refusal(reg, "pay", {"amount": "-0.01"}) == {"$.amount": 'expected a number >= 0, got "-0.01"'}


def test_containers_of_converted_types(reg: ToolRegistry) -> None:
    def plan(
        days: list[dt.date],
        owners: dict[str, uuid.UUID],
        tags: set[str],
        span: tuple[dt.date, dt.date],
        frozen: frozenset[int] = frozenset(),
        maybe: Optional[dt.datetime] = None,  # noqa: UP045 - the Optional spelling is part of what is tested
        either: int | dt.date = 0,
    ) -> dict[str, Any]:
        return {"days": days, "owners": owners, "tags": tags, "span": span, "frozen": frozen, "maybe": maybe, "either": either}

    key = "2eb8aa08-aa98-11ea-b4aa-73b441d16380"
    got = received(
        reg,
        plan,
        {
            "days": ["2024-01-01"],
            "owners": {"a": key},
            "tags": ["x", "y"],
            "span": ["2024-01-01", "2024-01-02"],
            "frozen": [1, 2.0],
            "maybe": None,
            "either": "2024-05-05",
        },
    )
    assert got == {
        "days": [dt.date(2024, 1, 1)],
        "owners": {"a": uuid.UUID(key)},
        "tags": {"x", "y"},
        "span": (dt.date(2024, 1, 1), dt.date(2024, 1, 2)),
        "frozen": frozenset({1, 2}),
        "maybe": None,
        "either": dt.date(2024, 5, 5),
    }
    assert (
        received(reg, plan, {"days": [], "owners": {}, "tags": [], "span": ["2024-01-01", "2024-01-02"], "either": 7})["either"]
        == 7
    )


def test_int_parameters_receive_ints(reg: ToolRegistry) -> None:
    """JSON Schema counts 2.0 as an integer; an ``int`` parameter gets ``2``, not ``2.0``."""

    def add(a: int, b: int, more: list[int] | None = None, by: dict[str, int] | None = None) -> list[Any]:
        return [a, b, more, by]

    got = received(reg, add, '{"a": 2.0, "b": 3, "more": [1.0, 2], "by": {"x": 4.0}}')
    assert got == [2, 3, [1, 2], {"x": 4}]
    assert [type(v) for v in got[:2]] == [int, int] and type(got[2][0]) is int and type(got[3]["x"]) is int
    assert refusal(reg, "add", {"a": 2.5, "b": 1}) == {"$.a": "expected integer, got number 2.5"}


def test_explicit_schema_integers_are_normalized_too(reg: ToolRegistry) -> None:
    reg.add(
        lambda **kw: kw,
        name="f",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}},
    )
    got = reg.call("f", {"n": 4.0, "x": 4.0})
    assert got == {"n": 4, "x": 4.0} and type(got["n"]) is int and type(got["x"]) is float


def test_integers_are_found_through_refs_and_alternatives(reg: ToolRegistry) -> None:
    schema = {
        "type": "object",
        "$defs": {"count": {"type": "integer"}, "node": {"type": "object", "properties": {"n": {"$ref": "#/$defs/count"}}}},
        "properties": {
            "ref": {"$ref": "#/$defs/count"},
            "all": {"allOf": [{"type": "integer"}, {"minimum": 0}]},
            "maybe": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]},
            "either": {"anyOf": [{"type": "integer"}, {"type": "number"}]},  # int | float: a float stays a float
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        },
    }
    reg.add(lambda **kw: kw, name="f", parameters=schema)
    got = reg.call("f", {"ref": 1.0, "all": 2.0, "maybe": {"n": 3.0}, "either": 4.0, "pair": [5.0, "x"]})
    assert got == {"ref": 1, "all": 2, "maybe": {"n": 3}, "either": 4.0, "pair": [5, "x"]}
    assert [type(got["ref"]), type(got["all"]), type(got["maybe"]["n"]), type(got["either"]), type(got["pair"][0])] == [
        int,
        int,
        int,
        float,
        int,
    ]


def test_a_whole_float_for_an_integer_choice_becomes_that_integer(reg: ToolRegistry) -> None:
    def pick(mode: Literal["auto", 1, 2], level: Literal[1, 2] | float = 1) -> list[Any]:
        return [mode, level]

    reg.add(pick)
    reg.add(lambda **kw: kw, name="f", parameters={"type": "object", "properties": {"c": {"const": 3}, "m": {"enum": [1, 2.5]}}})
    got = reg.call("pick", {"mode": 2.0, "level": 2.0})
    assert got == [2, 2.0] and type(got[0]) is int and type(got[1]) is float  # 2.0 is the choice 2; a float may stay one
    assert reg.call("pick", {"mode": "auto"}) == ["auto", 1]
    got = reg.call("f", {"c": 3.0, "m": 1.0})
    assert type(got["c"]) is int and type(got["m"]) is float  # enum [1, 2.5] takes other numbers: left as sent


def test_a_recursive_schema_is_planned_without_looping(reg: ToolRegistry) -> None:
    tree = {"type": "object", "properties": {"n": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}}}
    reg.add(lambda **kw: kw, name="f", parameters=tree)
    got = reg.call("f", {"n": 1.0, "kids": [{"n": 2.0}]})
    assert got == {"n": 1, "kids": [{"n": 2.0}]} and type(got["n"]) is int  # not followed back into itself


def test_tools_that_need_no_conversion_have_no_converters() -> None:
    def plain(a: int, s: str, f: float = 1.0, items: list[str] | None = None, d: dict[str, Any] | None = None) -> str:
        return s

    assert Tool.create(plain).converters == {}
    assert (
        set(
            Tool.create(
                lambda when, color: None, name="f", parameters={"type": "object", "properties": {"when": {}, "color": {}}}
            ).converters
        )
        == set()
    )

    def typed(when: dt.datetime, color: Color, n: int) -> None: ...

    assert set(Tool.create(typed).converters) == {"when", "color"}


def test_converters_with_an_explicit_schema(reg: ToolRegistry) -> None:
    def f(when: dt.datetime) -> dt.datetime:
        return when

    reg.add(f, parameters={"type": "object", "properties": {"when": {"type": "string"}}, "required": ["when"]})
    assert reg.call("f", {"when": "2024-01-01T00:00:00Z"}) == dt.datetime(2024, 1, 1, tzinfo=UTC)
    problems = refusal(reg, "f", {"when": "soon"})  # the schema lets it through; the conversion refuses it readably
    assert problems == {"$.when": 'expected an RFC 3339 date-time, got "soon"'}


def test_leap_seconds_are_valid_json_but_a_readable_refusal(reg: ToolRegistry) -> None:
    def f(when: dt.datetime) -> dt.datetime:
        return when

    reg.add(f)
    assert refusal(reg, "f", {"when": "2016-12-31T23:59:60Z"}) == {
        "$.when": 'expected a date-time Python can represent, got "2016-12-31T23:59:60Z" (a leap second)'
    }


def test_a_conversion_refusal_hides_a_value_under_a_secret_key(reg: ToolRegistry) -> None:
    """As the validation plugin's refusals do (MODEL_SECRET_KEYS, on a key's last words, at any level of the path)."""

    @dataclasses.dataclass
    class Auth:
        session_id: uuid.UUID

    def f(api_token: dt.datetime | None = None, auth: Auth | None = None, when: dt.datetime | None = None) -> None: ...

    def g(tokens: dict[str, uuid.UUID]) -> None: ...

    reg.add(f)
    reg.add(g, parameters={"type": "object", "properties": {"tokens": {"type": "object"}}})  # no format: the conversion refuses
    leap = "2016-12-31T23:59:60Z"
    assert refusal(reg, "f", {"api_token": leap}) == {
        "$.api_token": "expected a date-time Python can represent, got (redacted) (a leap second)"
    }
    assert refusal(reg, "f", {"when": leap}) == {
        "$.when": f'expected a date-time Python can represent, got "{leap}" (a leap second)'
    }
    assert refusal(reg, "g", {"tokens": {"x-api-key": "sk-SECRET"}}) == {
        '$.tokens["x-api-key"]': "expected a UUID, got (redacted)"
    }
    assert refusal(reg, "g", {"tokens": {"first": "nope"}}) == {"$.tokens.first": 'expected a UUID, got "nope"'}
    bare = ToolRegistry(block=["validation"], autoload=False)  # no plugin: the conversion says every refusal
    bare.add(f)
    assert refusal(bare, "f", {"auth": {"session_id": "sk-SECRET"}}) == {"$.auth.session_id": "expected a UUID, got (redacted)"}
    assert refusal(bare, "f", {"api_token": None, "auth": {"session_id": 7}}) == {
        "$.auth.session_id": "expected a UUID, got (redacted)"
    }


def test_defaults_of_converted_types_become_json_defaults(reg: ToolRegistry) -> None:
    def f(when: dt.date = dt.date(2024, 1, 1), color: Color = Color.RED, amount: Decimal = Decimal("1.5")) -> list[Any]:
        return [when, color, amount]

    props = Tool.create(f).parameters["properties"]
    assert [props[k]["default"] for k in ("when", "color", "amount")] == ["2024-01-01", "red", "1.5"]
    assert received(reg, f, {}) == [dt.date(2024, 1, 1), Color.RED, Decimal("1.5")]


def test_self_referencing_dataclasses_are_refused_clearly() -> None:
    @dataclasses.dataclass
    class Node:
        children: list["Node"]  # a forward reference to a class in a function

    def f(tree: Node) -> None: ...

    with pytest.raises(ToolDefinitionError, match="Node refers to itself; use a pydantic model"):
        Tool.create(f)


def test_recursive_pydantic_models_work(reg: ToolRegistry) -> None:
    class Tree(BaseModel):
        name: str
        children: list["Tree"] = []  # a forward reference to a class in a function

    def count(tree: Tree) -> int:
        return 1 + sum(count(c) for c in tree.children)

    schema = Tool.create(count).parameters
    assert "Tree" in schema["$defs"]
    reg.add(count)
    assert (
        reg.call("count", {"tree": {"name": "a", "children": [{"name": "b"}, {"name": "c", "children": [{"name": "d"}]}]}}) == 4
    )
    assert refusal(reg, "count", {"tree": {"name": "a", "children": [{"nam": "b"}]}}) == {
        "$.tree.children[0].name": "required property is missing",
        "$.tree.children[0].nam": "unexpected property; allowed properties: children, name",  # closed, as a dataclass
    }


@pytest.mark.parametrize(
    ("annotation", "schema", "wrapped"),
    [
        (int, {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}, True),
        (
            list[str],
            {"type": "object", "properties": {"result": {"type": "array", "items": {"type": "string"}}}, "required": ["result"]},
            True,
        ),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}, False),
        (Options, None, False),
        (None, None, False),
        (Any, None, False),
        (object, None, False),
    ],
)
def test_output_schema_from_the_return_annotation(annotation: Any, schema: dict[str, Any] | None, wrapped: bool) -> None:
    def f() -> annotation:  # type: ignore[valid-type]
        ...

    tool = Tool.create(f)
    if annotation is Options:
        assert tool.output_schema is not None and tool.output_schema["properties"]["verbose"] == {"type": "boolean"}
    else:
        assert tool.output_schema == schema
    assert tool.output_wrapped is wrapped


def test_output_schema_of_a_model_keeps_its_defs_at_the_root() -> None:
    def f() -> Person: ...

    def g() -> list[Person]: ...

    tool = Tool.create(f)
    assert tool.output_schema is not None and not tool.output_wrapped
    assert (
        tool.output_schema["properties"]["address"]["anyOf"][0] == {"$ref": "#/$defs/Address"}
        and "Address" in tool.output_schema["$defs"]
    )
    wrapped = Tool.create(g)
    assert wrapped.output_wrapped and wrapped.output_schema is not None
    assert wrapped.output_schema["properties"]["result"]["items"] == {"$ref": "#/$defs/Person"}
    assert set(wrapped.output_schema["$defs"]) == {"Address", "Person"}


def test_an_inexpressible_return_annotation_is_no_error() -> None:
    class Opaque:
        pass

    def f() -> Opaque: ...

    assert Tool.create(f).output_schema is None


def test_explicit_output_schema_is_used_and_wrapped_when_not_an_object() -> None:
    def f() -> int: ...

    tool = Tool.create(f, output_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    assert tool.output_schema == {"type": "object", "properties": {"n": {"type": "integer"}}} and not tool.output_wrapped
    tool = Tool.create(f, output_schema={"type": "string", "$defs": {"x": {}}})
    assert tool.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "string"}},
        "required": ["result"],
        "$defs": {"x": {}},
    }


def test_pydantic_is_only_imported_for_pydantic_types() -> None:
    code = """
import sys, datetime, decimal, uuid, enum, dataclasses, pathlib
from typing import Annotated, TypedDict
import annotated_types as at
from harness_one import Tool
class C(enum.Enum):
    A = "a"
@dataclasses.dataclass
class D:
    when: datetime.datetime
def f(a: Annotated[int, at.Ge(1)], d: D, c: C, u: uuid.UUID, p: pathlib.Path, x: decimal.Decimal) -> D: ...
Tool.create(f)
assert "pydantic" not in sys.modules, "pydantic imported"
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_converters_own_failure_is_masked_and_hidden_under_a_secret_key(reg: ToolRegistry) -> None:
    """A class's own check failing in its conversion (a dataclass's ``__post_init__``): its text masked as
    exception texts the model reads are, and only its type under a secret key name."""

    @dataclasses.dataclass
    class Login:
        user: str

        def __post_init__(self) -> None:
            raise ValueError(f"password=hunter2 refused for {self.user}")

    def f(login: Login | None = None, api_token: Login | None = None) -> None: ...

    reg.add(f)
    assert refusal(reg, "f", {"login": {"user": "bob"}}) == {
        "$.login": "cannot be converted: ValueError: password=[REDACTED] refused for bob"
    }
    assert refusal(reg, "f", {"api_token": {"user": "bob"}}) == {"$.api_token": "cannot be converted: ValueError"}
