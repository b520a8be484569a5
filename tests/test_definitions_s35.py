"""Definitions a review found accepted though no call could use them: a given schema offering a property the
function does not take, secret defaults shown in every export, an empty enum, a dataclass whose ``__init__``
does not take its fields; and a given schema's JSON-typed parameters, whose annotations add no check to it."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
from typing import Any

import pytest
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from harness_one import Call, Tool, ToolDefinitionError, ToolRegistry


def _registry() -> ToolRegistry:
    return ToolRegistry(autoload=False)


# ---------------------------------------------------------------- 1. a given schema's property the function does not take


def test_an_optional_property_the_function_does_not_take_is_a_definition_error() -> None:
    def f(a: int) -> int:
        return a

    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]}
    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(f, parameters=schema)
    assert "Tool 'f': schema and function disagree: the schema offers property 'b'" in str(err.value)
    assert "the function has no parameter 'b' (parameters: a)" in str(err.value)


def test_a_property_a_kwargs_function_or_a_false_schema_takes_is_accepted() -> None:
    def f(a: int, **rest: Any) -> Any:
        return a, rest

    def g(a: int, call: Call) -> int:
        return a

    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]}
    reg = _registry()
    reg.add(f, parameters=schema)
    assert reg.call("f", {"a": 1, "b": "x"}) == (1, {"b": "x"})
    reg.add(g, parameters={"type": "object", "properties": {"a": {"type": "integer"}, "b": False}})  # no value fits b
    assert reg.call("g", {"a": 1}) == 1


def test_a_property_a_partial_binds_is_refused_as_bound() -> None:
    def f(a: int, b: int, c: int = 0) -> int:
        return a + b + c

    def schema(*required: str) -> dict[str, Any]:
        props = {name: {"type": "integer"} for name in "abc"}
        return {"type": "object", "properties": props, "required": ["a", *required]}

    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(functools.partial(f, b=2), name="p", parameters=schema())
    assert "the schema offers property 'b', which is bound already (a functools.partial's argument)" in str(err.value)
    assert "the application's, not the model's to send" in str(err.value) and "has no parameter" not in str(err.value)
    with pytest.raises(ToolDefinitionError, match=r"the schema requires property 'a', which is bound already"):
        Tool.create(functools.partial(f, 1), name="q", parameters=schema())


# ---------------------------------------------------------------- 2. secret defaults


def test_a_secret_parameters_default_is_not_in_the_schema_and_still_applies() -> None:
    def f(query: str, password: str = "hunter2-pw", api_token: str = "ghp_x", creds: dict[str, str] | None = None) -> Any:
        return query, password, api_token

    def g(query: str, options: dict[str, str] = {"password": "pw1", "mode": "x"}, limit: int = 5) -> Any:  # noqa: B006
        return options["password"], limit

    reg = _registry()
    reg.add(f)
    reg.add(g)
    text = json.dumps([reg.export(fmt).tools for fmt in ("openai", "anthropic", "gemini")])
    assert "hunter2" not in text and "ghp_x" not in text and "pw1" not in text
    props = reg.get("g").parameters["properties"]
    assert "default" not in props["options"] and props["limit"]["default"] == 5  # other defaults stay
    assert reg.call("f", {"query": "q"}) == ("q", "hunter2-pw", "ghp_x")
    assert reg.call("g", {"query": "q"}) == ("pw1", 5)


@dataclasses.dataclass
class _Login:
    user: str = "bob"
    password: str = "dc-secret"


class _Cfg(BaseModel):
    host: str = "db"
    password: str = "model-secret"


def test_a_secret_fields_default_is_not_in_the_schema() -> None:
    def f(login: _Login, cfg: _Cfg) -> Any:
        return login.password, cfg.password

    reg = _registry()
    tool = reg.add(f)
    text = json.dumps(tool.parameters)
    assert "dc-secret" not in text and "model-secret" not in text
    assert '"default": "bob"' in text and '"default": "db"' in text
    assert reg.call("f", {"login": {}, "cfg": {}}) == ("dc-secret", "model-secret")


class _Aliased(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    password: str = Field("alias-secret", alias="pw")
    token: str = Field("choice-secret", validation_alias=AliasChoices("tk", "t"))
    mode: str = Field("fast", alias="m")


class _Out(BaseModel):
    password: str = "output-secret"
    host: str = "db"


def test_a_secret_fields_default_is_not_exported_under_an_alias_nor_in_an_output_schema() -> None:
    """A field named as a secret but exported under a plain alias, and an output model's field, kept their
    defaults in every export (the MCP export shows the output schema)."""

    def f(cfg: _Aliased, items: list[_Aliased] | None = None) -> _Out:
        return _Out()

    reg = _registry()
    tool = reg.add(f)
    text = json.dumps([tool.parameters, tool.output_schema, [reg.export(fmt).tools for fmt in ("openai", "mcp")]])
    assert "alias-secret" not in text and "choice-secret" not in text and "output-secret" not in text
    assert '"default": "fast"' in text and '"default": "db"' in text  # other defaults stay
    assert reg.call("f", {"cfg": {}}) == _Out()


# ---------------------------------------------------------------- 3. an empty enum


class _Region(enum.Enum):
    pass


def test_an_enum_with_no_members_leaves_an_optional_parameter_callable() -> None:
    """An optional parameter of a memberless Enum is ``{"enum": []}``: the tool is still called without it (a review
    found a refusal at definition too broad: ``region: Region | None = None`` is a tool that works)."""

    def deploy(q: str, region: _Region | None = None) -> Any:
        return q

    reg = _registry()
    reg.add(deploy)
    assert reg.call("deploy", {"q": "x"}) == "x"


@pytest.mark.parametrize(
    ("prop", "where"),
    [
        ({"enum": []}, "#/properties/a/enum"),
        ({"type": "string", "allOf": [{"minLength": 1}, {"allOf": [{"enum": []}]}]}, "#/properties/a/allOf/1/allOf/0/enum"),
    ],
)
def test_an_empty_enum_that_makes_a_required_property_impossible_is_a_definition_error(prop: dict[str, Any], where: str) -> None:
    def f(a: Any = None) -> Any:
        return a

    with pytest.raises(ToolDefinitionError, match=rf"at {where}, the enum is empty"):
        Tool.create(f, parameters={"type": "object", "properties": {"a": prop}, "required": ["a"]})
    with pytest.raises(ToolDefinitionError, match=r"at #/allOf/0/enum, the enum is empty"):
        Tool.create(f, parameters={"type": "object", "allOf": [{"enum": []}]})
    reg = _registry()  # optional, it may be left out: the tool works without it
    reg.add(f, name="optional", parameters={"type": "object", "properties": {"a": prop}})
    assert reg.call("optional", {}) is None


def test_an_empty_enum_that_leaves_other_values_is_accepted() -> None:
    """``not``, ``anyOf``, ``oneOf`` and ``if`` may leave values an empty enum refuses: such schemas are satisfiable
    (a review found them refused, and an MCP server's tool using one failing to import)."""

    def f(a: Any = None) -> Any:
        return a

    reg = _registry()
    for name, prop in [
        ("not_", {"not": {"enum": []}}),
        ("any_", {"anyOf": [{"type": "string"}, {"enum": []}]}),
        ("one_", {"oneOf": [{"type": "string"}, {"enum": []}]}),
        ("if_", {"if": {"enum": []}, "then": {"type": "integer"}}),
        ("defs_", {"$ref": "#/$defs/Never"}),
    ]:
        reg.add(f, name=name, parameters={"type": "object", "properties": {"a": prop}, "$defs": {"Never": {"enum": []}}})
    assert [reg.call(name, {"a": "x"}) for name in ("not_", "any_", "one_", "if_")] == ["x"] * 4


# ---------------------------------------------------------------- 4. a dataclass whose __init__ does not take its fields


@dataclasses.dataclass
class _Odd:
    a: int

    def __init__(self, a: int, extra: int) -> None:
        self.a = a + extra


@dataclasses.dataclass(init=False)
class _NoInit:
    a: int


def test_a_dataclass_whose_init_does_not_take_its_fields_is_a_definition_error() -> None:
    def f(d: _Odd) -> Any:
        return d

    def g(d: list[_NoInit]) -> Any:
        return d

    with pytest.raises(ToolDefinitionError, match=r"\$\.d: the dataclass _Odd's __init__ requires 'extra'"):
        Tool.create(f)
    with pytest.raises(ToolDefinitionError, match=r"the dataclass _NoInit's __init__ does not take the fields 'a'"):
        Tool.create(g)


# ---------------------------------------------------------------- 5. a given schema's annotations are not checked


def test_a_given_schema_decides_what_a_json_typed_parameter_receives() -> None:
    """The schema is the contract: a JSON-typed annotation adds no check of its own (a review found one refusing
    the null a nullable schema allows, and every call of an ``int`` parameter given a string schema)."""

    def q(q: str = None) -> Any:  # type: ignore[assignment]  # noqa: RUF013 (as the review found it)
        return q

    def n(n: int) -> Any:
        return int(n) + 1

    def charge(amount: int) -> Any:
        return amount

    reg = _registry()
    reg.add(q, parameters={"type": "object", "properties": {"q": {"type": ["string", "null"]}}})
    reg.add(n, parameters={"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]})
    reg.add(charge, parameters={"type": "object", "properties": {"amount": {"type": "number"}}})
    assert [tool.converters for tool in map(reg.get, ("q", "n", "charge"))] == [{}, {}, {}]
    assert reg.call("q", {"q": None}) is None
    assert reg.call("n", {"n": "41"}) == 42
    assert reg.call("charge", {"amount": 2.5}) == 2.5 and reg.call("charge", {"amount": 2.0}) == 2.0


def test_a_default_that_tells_nothing_is_kept_under_a_secret_name() -> None:
    """``None``, ``""`` and a bool tell the model nothing: a pagination cursor's and a flag's defaults stay."""

    def page(q: str, page_token: str | None = None, next_token: str = "", is_secret: bool = False) -> Any:
        return q

    props = Tool.create(page).parameters["properties"]
    assert [props[name].get("default", "absent") for name in ("page_token", "next_token", "is_secret")] == [None, "", False]
