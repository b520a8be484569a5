"""Definitions a review found accepted though no call could use them: a given schema offering a property the
function does not take, secret defaults shown in every export, an empty enum, a dataclass whose ``__init__``
does not take its fields, and JSON-typed parameters under a given schema wider than their annotation."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any

import pytest
from pydantic import BaseModel

from harness_one import Call, Tool, ToolArgumentError, ToolDefinitionError, ToolRegistry


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


# ---------------------------------------------------------------- 3. an empty enum


class _Region(enum.Enum):
    pass


def test_an_enum_with_no_members_is_a_definition_error() -> None:
    def deploy(region: _Region) -> Any:
        return region

    with pytest.raises(ToolDefinitionError, match=r"parameter 'region': the Enum _Region has no members"):
        Tool.create(deploy)


def test_an_empty_enum_in_a_given_schema_is_a_definition_error() -> None:
    def f(a: Any = None) -> Any:
        return a

    schema = {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"enum": []}]}}}
    with pytest.raises(ToolDefinitionError, match=r"at #/properties/a/anyOf/1/enum, the enum is empty"):
        Tool.create(f, parameters=schema)


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


# ---------------------------------------------------------------- 5. a given schema wider than the annotation


def test_a_value_the_annotation_cannot_hold_is_refused_under_a_wider_given_schema() -> None:
    def delete_all(confirm: bool = False) -> str:
        return "DELETED" if confirm else "kept"

    def price(n: int, xs: list[int] | None = None) -> Any:
        return n * 2, xs

    reg = _registry()
    reg.add(delete_all, parameters={"type": "object", "properties": {"confirm": {"description": "yes/no"}}})
    reg.add(
        price,
        parameters={"type": "object", "properties": {"n": {"type": "number"}, "xs": {"type": "array"}}, "required": ["n"]},
    )
    with pytest.raises(ToolArgumentError, match=r'\$\.confirm: expected boolean, got "false"'):
        reg.call("delete_all", {"confirm": "false"})
    assert reg.call("delete_all", {"confirm": True}) == "DELETED"
    with pytest.raises(ToolArgumentError, match=r"\$\.n: expected integer, got 2\.5"):
        reg.call("price", {"n": 2.5})
    with pytest.raises(ToolArgumentError, match=r"\$\.xs: expected a value of"):
        reg.call("price", {"n": 1, "xs": ["a"]})
    assert reg.call("price", {"n": 2.0, "xs": [1]}) == (4, [1])


def test_a_given_schema_that_holds_the_annotation_adds_no_conversion() -> None:
    def f(n: int, flag: bool, xs: list[int], s: str | None = None, k: str = "a", m: dict[str, int] | None = None) -> Any:
        return n

    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 0},
            "flag": {"type": "boolean"},
            "xs": {"type": "array", "items": {"type": "integer"}},
            "s": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "k": {"enum": ["a", "b"]},
            "m": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "required": ["n", "flag", "xs"],
    }
    assert Tool.create(f, parameters=schema).converters == {}
