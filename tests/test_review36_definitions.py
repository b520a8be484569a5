"""Review 36's definition findings: a memberless Enum a call must send (its inferred schema ``{"enum": []}``
accepted, though every call is then refused), and a pydantic field's ``serialization_alias``, which names no
input, hiding that input's default when the alias is a secret's name."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, TypedDict

import pytest
from pydantic import AliasChoices, BaseModel, Field

from harness_one import ToolDefinitionError, ToolRegistry


def _registry() -> ToolRegistry:
    return ToolRegistry(autoload=False)


# ---------------------------------------------------------------- 1. a memberless Enum a call must send


class _Region(enum.Enum):
    pass


@dataclasses.dataclass
class _Place:
    region: _Region


class _PlaceDict(TypedDict):
    region: _Region


class _PlaceModel(BaseModel):
    region: _Region


class _Outer(BaseModel):
    place: _PlaceModel  # (a nested model: a $ref to $defs)


def test_a_memberless_enum_as_a_required_parameter_is_a_definition_error() -> None:
    def deploy(region: _Region) -> Any:
        return region

    with pytest.raises(ToolDefinitionError, match=r"parameter 'region': at #/properties/region/enum, the enum is empty"):
        _registry().add(deploy)


@pytest.mark.parametrize(
    ("kind", "where"),
    [
        (_Place, "#/properties/p/properties/region/enum"),
        (_PlaceDict, "#/properties/p/properties/region/enum"),
        (_PlaceModel, "#/properties/p/properties/region/enum"),
        (_Outer, "#/\\$defs/_PlaceModel/properties/region/enum"),
    ],
)
def test_a_memberless_enum_as_a_required_field_of_a_required_argument_is_a_definition_error(kind: Any, where: str) -> None:
    def deploy(p: Any) -> Any:
        return p

    deploy.__annotations__ = {"p": kind, "return": Any}
    with pytest.raises(ToolDefinitionError, match=rf"parameter 'p': at {where}, the enum is empty"):
        _registry().add(deploy)


def test_a_memberless_enum_a_call_can_leave_out_keeps_its_tool_callable() -> None:
    """An optional parameter, an optional argument, a list (empty) or a union: a call can still pass."""

    def optional(q: str, region: _Region | None = None) -> Any:
        return q

    def in_optional(q: str, p: _Place | None = None) -> Any:
        return q

    def in_list(q: str, places: list[_PlaceModel]) -> Any:
        return q

    def in_union(q: str, region: _Region | str) -> Any:
        return q

    reg = _registry()
    for fn in (optional, in_optional, in_list, in_union):
        reg.add(fn)
    assert reg.call("optional", {"q": "x"}) == "x"
    assert reg.call("in_optional", {"q": "x"}) == "x"
    assert reg.call("in_list", {"q": "x", "places": []}) == "x"
    assert reg.call("in_union", {"q": "x", "region": "eu"}) == "x"


# ---------------------------------------------------------------- 2. serialization_alias names no input


class _Keys(BaseModel):
    k: str = Field("fast", serialization_alias="api_key")
    v: str = Field("slow", validation_alias=AliasChoices("x", "api_key"))
    w: str = Field("mid", validation_alias="password")


def test_a_serialization_alias_leaves_an_inputs_default_and_a_validation_alias_hides_it() -> None:
    def f(cfg: _Keys) -> _Keys:
        return cfg

    reg = _registry()
    tool = reg.add(f)
    props = tool.parameters["properties"]["cfg"]["properties"]
    assert props["k"]["default"] == "fast"  # input 'k': its output name 'api_key' is never sent
    assert "default" not in props["x"] and "default" not in props["password"]  # input names that are a secret's
    output = tool.output_schema
    assert output is not None
    text = json.dumps(output)
    assert '"default": "fast"' not in text  # the output's 'api_key'
    assert output["properties"]["v"]["default"] == "slow"  # 'v' out: 'api_key' is only an input name
    assert reg.call("f", {"cfg": {}}) == _Keys()
