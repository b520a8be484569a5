"""Review 32, validation and schemas: strict pydantic models take JSON values, both backends read \\d, \\w, \\s in a
pattern with a backreference or lookaround as ASCII/ECMA classes, no default comes from a metaschema or (in drafts
4-7) from a ``$ref``'s siblings, a dict key pydantic refuses is named at the dict, a date Python cannot hold says why.
Follow-up: patterns a ``$ref`` reaches under unknown keywords, a strict model given a lone surrogate, a pattern
jsonschema-rs refuses as written, a value under a key named ``[key]``, ``strict`` in pydantic metadata; a
strict field named ``default`` or ``metadata``, a strict model's value nested past pydantic's JSON recursion limit.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import uuid
from typing import Annotated, Any, Literal

import pytest
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter
from typing_extensions import TypedDict  # (pydantic takes typing's on Python 3.12+ only)

from harness_one import ArgumentLimits, ManualClock, ToolArgumentError, ToolRegistry
from harness_one._schema import _strict, _to_pydantic
from harness_one_plugins import ValidationPlugin
from harness_one_plugins.validation import Backend, compile_schema, rust_available

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]
RUST_ONLY = pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing")


def registry(backend: Backend = "auto") -> ToolRegistry:
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, autoload=False, clock=ManualClock())


def problems(reg: ToolRegistry, name: str, args: Any) -> list[str]:
    result = reg.try_call(name, args)
    assert not result.ok, result.value
    return result.for_model().splitlines()[1:-1]


class Color(enum.Enum):
    RED = "red"


class Booking(BaseModel):
    model_config = ConfigDict(strict=True)
    when: dt.datetime
    ref: uuid.UUID
    color: Color
    seats: tuple[int, int]
    n: int = 0


class Event(BaseModel):  # strict in one field only
    at: dt.datetime = Field(strict=True)


BOOKING = {"when": "2024-05-01T10:00:00Z", "ref": "123e4567-e89b-12d3-a456-426614174000", "color": "red", "seats": [1, 2]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_strict_pydantic_model_takes_the_json_values_its_schema_asks_for(backend: Backend) -> None:
    reg = registry(backend)

    def book(b: Booking) -> Booking:
        """Book."""
        return b

    def event(e: Event) -> Event:
        """An event."""
        return e

    reg.add(book)
    reg.add(event)
    got = reg.call("book", {"b": BOOKING})
    assert got == Booking(
        when=dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC),
        ref=uuid.UUID("123e4567-e89b-12d3-a456-426614174000"),
        color=Color.RED,
        seats=(1, 2),
    )
    assert reg.call("book", json.dumps({"b": BOOKING})) == got  # from JSON text too
    assert reg.call("event", {"e": {"at": "2024-05-01T10:00:00Z"}}).at == dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)
    # still strict: pydantic itself refuses a string for an int (lax mode took "5")
    with pytest.raises(ToolArgumentError) as caught:
        _to_pydantic(Booking)({**BOOKING, "n": "5"}, "$.b")
    assert [(p.path, p.message) for p in caught.value.problems] == [("$.b.n", "Input should be a valid integer")]


class M(BaseModel):
    d: dict[int, str] = {}


def test_a_dict_key_pydantic_refuses_is_named_at_the_dict() -> None:
    reg = registry()

    def p(m: M) -> M:
        """x"""
        return m

    reg.add(p)
    assert reg.call("p", {"m": {"d": {"1": "a"}}}) == M(d={1: "a"})
    [line] = problems(reg, "p", {"m": {"d": {"a": "a"}}})
    assert line == '- $.m.d: key "a": Input should be a valid integer, unable to parse string as an integer'


def test_a_date_python_cannot_hold_says_why() -> None:
    reg = ToolRegistry(plugins={}, autoload=False)

    def on(d: dt.date) -> dt.date:
        """x"""
        return d

    reg.add(on)
    [line] = problems(reg, "on", {"d": "0000-01-01"})
    assert line == '- $.d: expected an RFC 3339 date (YYYY-MM-DD), got "0000-01-01" (year 0 is out of range)'


FANCY = [
    r"^(.)\1\w$",
    r"^(.)\1\W$",
    r"^(.)\1\d$",
    r"^(.)\1\D$",
    r"^(.)\1\s$",
    r"^(.)\1\S$",
    r"^(.)\1[\w!]$",
    r"^(.)\1[^\w]$",
    r"^(.)\1[\W]$",
    r"^(.)\1[\S]$",
    r"^(?!x)\w{1,3}$",
    r"^(?<=)\s+\d$",
    r"^(?!admin$)\w{3,16}$",
]
VALUES = [
    "é",
    "aaé",
    "aa!",
    "aaa",
    "aa\u00a0",
    "aa\u0085",
    "aa\u0661",
    "aa\u2028",
    "aa\ufeff",
    "aa ",
    "aa_",
    "aa9",
    "josé",
    "\u0430dmin",
    " \u0661",  # \s then \d: Unicode classes (fancy-regex) took both
    "\u0085 5",
]


@RUST_ONLY
@pytest.mark.parametrize("pattern", FANCY)
def test_backends_agree_on_classes_in_patterns_with_backreferences_or_lookaround(pattern: str) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
    rust, python = compile_schema(schema, "rust"), compile_schema(schema, "python")
    assert [v for v in VALUES if rust.is_valid({"x": v}) != python.is_valid({"x": v})] == []
    names = {"type": "object", "patternProperties": {pattern: {"type": "integer"}}, "additionalProperties": False}
    rust, python = compile_schema(names, "rust"), compile_schema(names, "python")
    assert [v for v in VALUES if rust.is_valid({v: 1}) != python.is_valid({v: 1})] == []


@RUST_ONLY
def test_the_classes_are_ascii_on_the_default_backend() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": r"^(.)\1\w$"}}}
    assert not compile_schema(schema, "rust").is_valid({"x": "aaé"})
    assert compile_schema(schema, "rust").is_valid({"x": "aa_"})
    # defaults follow a pattern's verdict too: an integer plan under patternProperties
    plan = {"type": "object", "patternProperties": {r"^(?=.)\w+$": {"type": "integer"}}}
    got = compile_schema(plan, "rust").check({"é": 2.0, "ab": 2.0}, ArgumentLimits())
    assert type(got["é"]) is float and type(got["ab"]) is int


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_lookahead_username_refuses_non_ascii_letters(backend: Backend) -> None:
    reg = registry(backend)

    def create_user(username: Annotated[str, Field(pattern=r"^(?!admin$)\w{3,16}$")]) -> str:
        """Create a user."""
        return username

    reg.add(create_user)
    assert reg.call("create_user", {"username": "bob"}) == "bob"
    for name in ["admin", "\u0430dmin", "jos\u00e9"]:
        assert not reg.try_call("create_user", {"username": name}).ok, name


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_defaults_come_from_a_metaschema(backend: Backend) -> None:
    reg = registry(backend)

    def check_schema(schema: dict[str, Any]) -> dict[str, Any]:
        """Return the schema."""
        return schema

    ref = {"$ref": "https://json-schema.org/draft/2020-12/schema"}
    reg.add(check_schema, parameters={"type": "object", "properties": {"schema": ref}, "required": ["schema"]})
    assert reg.call("check_schema", {"schema": {"type": "string"}}) == {"type": "string"}
    assert reg.call("check_schema", '{"schema": {"type": "string"}}') == {"type": "string"}
    d7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"schema": {"$ref": "http://json-schema.org/draft-07/schema#"}},
    }
    reg.add(check_schema, name="c7", parameters=d7)
    assert reg.call("c7", {"schema": {"type": "string"}}) == {"type": "string"}
    # a $ref within the schema still gives its defaults
    own = {
        "type": "object",
        "properties": {"o": {"$ref": "#/$defs/O"}},
        "$defs": {"O": {"type": "object", "properties": {"a": {"default": 1}}}},
    }
    reg.add(lambda **kw: kw, name="own", parameters=own)
    assert reg.call("own", {"o": {}}) == {"o": {"a": 1}}


@pytest.mark.parametrize("backend", BACKENDS)
def test_draft7_ref_siblings_give_no_defaults(backend: Backend) -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "o": {"$ref": "#/definitions/O", "properties": {"a": {"default": "sibling"}}},
            "p": {"$ref": "#/definitions/O", "default": {"x": 1}},
        },
        "definitions": {"O": {"type": "object", "properties": {"b": {"default": "target"}}}},
    }
    reg = registry(backend)
    reg.add(lambda **kw: kw, name="f", parameters=schema)
    assert reg.call("f", {"o": {}}) == {"o": {"b": "target"}}
    # in 2020-12 a $ref's siblings apply with it
    later = {**schema, "$schema": "https://json-schema.org/draft/2020-12/schema"}
    reg.add(lambda **kw: kw, name="g", parameters=later)
    assert reg.call("g", {"o": {}}) == {"o": {"a": "sibling", "b": "target"}, "p": {"x": 1}}


# ---------------------------------------------------------------------------- follow-up of the review of 014176b

USERNAME = r"^(?!admin$)\w{3,16}$"


@RUST_ONLY
def test_a_pattern_a_ref_reaches_under_an_unknown_keyword_is_given_to_rust_rewritten() -> None:
    schema = {
        "type": "object",
        "properties": {"u": {"$ref": "#/components/U"}},
        "components": {"U": {"type": "string", "pattern": USERNAME}},
    }
    rust, python = compile_schema(schema, "rust"), compile_schema(schema, "python")
    for name, ok in [("bob", True), ("jos\u00e9", False), ("\u0430dmin", False), ("admin", False)]:
        assert (rust.is_valid({"u": name}), python.is_valid({"u": name})) == (ok, ok), name
    names = {
        "type": "object",
        "properties": {"o": {"$ref": "#/x-shapes/0"}},
        "x-shapes": [{"type": "object", "patternProperties": {USERNAME: {}}, "additionalProperties": False}],
    }
    rust, python = compile_schema(names, "rust"), compile_schema(names, "python")
    assert [rust.is_valid({"o": {"jos\u00e9": 1}}), python.is_valid({"o": {"jos\u00e9": 1}})] == [False, False]
    # the same walk finds what draft 7 asserts on rust alone: contentMediaType, read as an annotation
    d7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"u": {"$ref": "#/components/U"}},
        "components": {"U": {"type": "string", "contentMediaType": "application/json"}},
    }
    assert compile_schema(d7, "rust").is_valid({"u": "not json {"}) and compile_schema(d7, "python").is_valid({"u": "not json {"})


@RUST_ONLY
def test_rust_refuses_a_pattern_it_refuses_however_it_would_be_rewritten() -> None:
    for pattern in [r"^[\w-~]+$", r"^(?!x)[\w-~]+$"]:  # (written out, \w-~ would be the range _-~)
        with pytest.raises(ValueError, match='is not a "regex"'):
            compile_schema({"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}, "rust")


class Visit(BaseModel):
    when: dt.datetime
    name: str = ""


class StrictVisit(Visit):
    model_config = ConfigDict(strict=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_strict_model_takes_a_lone_surrogate_as_the_lax_one_does(backend: Backend) -> None:
    reg = registry(backend)

    def lax(v: Visit) -> str:
        """x"""
        return v.name

    def strict(v: StrictVisit) -> StrictVisit:
        """x"""
        return v

    reg.add(lax)
    reg.add(strict)
    when = dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)
    for name in ["a\ud800", "\udc00b\ud800"]:
        args = {"v": {"when": "2024-05-01T10:00:00Z", "name": name}}
        assert reg.call("lax", args) == name
        assert reg.call("strict", args) == StrictVisit(when=when, name=name)
        assert reg.call("strict", json.dumps(args)) == StrictVisit(when=when, name=name)  # escaped in JSON text
    # two surrogate code points in a dict stay two (JSON text would read their escapes as one character)
    pair = {"v": {"when": "2024-05-01T10:00:00Z", "name": "\ud83d\ude00"}}
    assert reg.call("strict", pair).name == "\ud83d\ude00" == reg.call("lax", pair)
    # still strict, and a refusal is at its own path
    assert problems(reg, "strict", {"v": {"when": "2024-05-01", "name": "a\ud800"}})[0].startswith("- $.v.when: ")
    with pytest.raises(ToolArgumentError) as caught:
        _to_pydantic(StrictVisit)({"when": "2024-05-01T10:00:00Z", "name": 5, "x": "\ud800"}, "$.v")
    assert [p.path for p in caught.value.problems] == ["$.v.name"]


def no_x(v: str) -> str:
    if v == "x":
        raise ValueError("x is not allowed")
    return v


class Checked(BaseModel):
    d: dict[str, Annotated[str, AfterValidator(no_x)]] = {}


def test_a_value_under_a_key_named_key_is_refused_at_its_own_path() -> None:
    reg = registry()

    def p(m: Checked) -> Checked:
        """x"""
        return m

    reg.add(p)
    assert problems(reg, "p", {"m": {"d": {"[key]": "x"}}}) == ['- $.m.d["[key]"]: Value error, x is not allowed']
    assert problems(reg, "p", {"m": {"d": {"ok": "x"}}}) == ["- $.m.d.ok: Value error, x is not allowed"]


class Tagged(BaseModel):  # not strict: "strict" only in json_schema_extra and in a default value
    t: tuple[int, int] = Field((0, 0), json_schema_extra={"strict": True})
    extra: dict[str, Any] = {"strict": True}
    n: int = 0


def test_strict_in_metadata_or_a_default_is_no_strict_mode() -> None:
    assert not _strict(TypeAdapter(Tagged).core_schema)
    assert _to_pydantic(Tagged)({"n": "5"}, "$.t").n == 5  # lax, as pydantic validates the model
    assert _strict(TypeAdapter(Booking).core_schema) and _strict(TypeAdapter(Event).core_schema)


class NamedDefault(BaseModel):  # strict fields named as core schema keywords (in the core schema's name mappings)
    default: dt.datetime = Field(strict=True)


class NamedMetadata(BaseModel):
    metadata: dt.datetime = Field(strict=True)


class DictNamed(TypedDict):
    default: Annotated[dt.datetime, Field(strict=True)]


class HoldsDict(BaseModel):  # (a TypedDict alone is converted field by field, not by pydantic)
    d: DictNamed


@dataclasses.dataclass
class DataNamed:
    metadata: Annotated[dt.datetime, Field(strict=True)]


class Dog(BaseModel):
    kind: Literal["default"]
    at: dt.datetime = Field(strict=True)


class Cat(BaseModel):
    kind: Literal["metadata"]


class Pet(BaseModel):  # a tagged union's choices, keyed "default" and "metadata"
    pet: Annotated[Dog | Cat, Field(discriminator="kind")]


WHEN = "2020-01-02T03:04:05Z"


@pytest.mark.parametrize(
    ("model", "value"),
    [
        (NamedDefault, {"default": WHEN}),
        (NamedMetadata, {"metadata": WHEN}),
        (HoldsDict, {"d": {"default": WHEN}}),
        (DataNamed, {"metadata": WHEN}),
        (Pet, {"pet": {"kind": "default", "at": WHEN}}),
    ],
)
def test_a_strict_field_named_default_or_metadata_is_strict_mode(model: Any, value: dict[str, Any]) -> None:
    assert _strict(TypeAdapter(model).core_schema)
    assert _to_pydantic(model)(value, "$.m")  # the JSON string a strict datetime takes from JSON text


class Nested(BaseModel):
    model_config = ConfigDict(strict=True)
    data: Any
    n: int = 0


@pytest.mark.parametrize("depth", [100, 250, 600])
def test_a_strict_model_takes_a_value_nested_past_pydantics_json_recursion_limit(depth: int) -> None:
    reg = ToolRegistry(limits=ArgumentLimits(max_depth=10_000), autoload=False, clock=ManualClock())

    def t(m: Nested) -> Any:
        """x"""
        return m.data

    reg.add(t)
    value: Any = 1
    for _ in range(depth):
        value = [value]
    assert reg.call("t", {"m": {"data": value}}) == value
    # still strict (a string for an int is refused), at its own path
    assert problems(reg, "t", {"m": {"data": value, "n": "5"}})[0].startswith("- $.m.n: ")
