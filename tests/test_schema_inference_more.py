"""Inference and conversion gaps: async callables, bound names under **kwargs, class tools, nested
unions under constraints, TypedDicts under postponed annotations, Decimals, loose hand-written
schemas, references to non-schemas, Enum literals, InitVars, long enum refusals, docstrings."""

import asyncio
import collections.abc
import dataclasses
import datetime as dt
import enum
import functools
import sys
import types
import typing
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import Field

from harness_one import ManualClock, Tool, ToolArgumentError, ToolDefinitionError, ToolRegistry
from harness_one._docstrings import parse_docstring
from harness_one_plugins import ValidationPlugin


@pytest.fixture(params=["python", "rust"])
def reg(request: pytest.FixtureRequest) -> ToolRegistry:
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=request.param)}, autoload=False, clock=ManualClock())


def problems(reg: ToolRegistry, name: str, args: Any) -> dict[str, str]:
    with pytest.raises(ToolArgumentError) as err:
        reg.call(name, args)
    return {p.path: p.message for p in err.value.problems}


# ---------------------------------------------------------------- async tools that are not a plain async def


class Fetch:
    """Fetch a thing."""

    async def __call__(self, url: str) -> str:
        await asyncio.sleep(0)
        return "fetched " + url


def logged(f: Any) -> Any:
    @functools.wraps(f)
    def wrapper(*a: Any, **k: Any) -> Any:
        return f(*a, **k)

    return wrapper


@logged
async def delete_file(path: str) -> str:
    """Delete a file."""
    return "deleted " + path


async def _tagged(prefix: str, text: str) -> str:
    return prefix + text


@pytest.mark.parametrize(
    ("fn", "name", "args", "expected"),
    [
        (Fetch(), "fetch", {"url": "x"}, "fetched x"),
        (delete_file, "delete_file", {"path": "x"}, "deleted x"),
        (functools.partial(logged(_tagged), "re: "), "tagged", {"text": "x"}, "re: x"),
    ],
)
def test_an_async_callable_object_or_wrapped_coroutine_function_is_awaited(
    reg: ToolRegistry, fn: Any, name: str, args: dict[str, Any], expected: str
) -> None:
    tool = Tool.create(fn, name=name)
    assert tool.is_async
    reg.add(tool)
    assert reg.call(name, args) == expected  # the result, not an un-awaited coroutine

    async def main() -> Any:
        return await reg.acall(name, args)

    assert asyncio.run(main()) == expected


def test_a_sync_callable_object_and_a_class_are_not_async() -> None:
    class Add:
        def __call__(self, a: int) -> int:
            return a + 1

    class Box:
        def __init__(self, a: int) -> None:
            self.a = a

    assert not Tool.create(Add(), name="add").is_async
    assert not Tool.create(Box).is_async


# ---------------------------------------------------------------- names bound already, sent to a **kwargs tool


class Shop:
    def tag(self, item: str, **attrs: str) -> dict[str, str]:
        """Tag an item."""
        return {"item": item, **attrs}

    @classmethod
    def note(cls, **fields: str) -> dict[str, str]:
        """Note fields."""
        return fields


def _scoped(tenant: str, **opts: str) -> tuple[str, dict[str, str]]:
    return tenant, opts


@pytest.mark.parametrize(
    ("fn", "name", "field", "sent", "fine", "result"),
    [
        (Shop().tag, "tag", "self", {"item": "a"}, {"item": "a", "x": "1"}, {"item": "a", "x": "1"}),
        (Shop.note, "note", "cls", {}, {"x": "1"}, {"x": "1"}),
        (functools.partial(_scoped, "acme"), "scoped", "tenant", {}, {"x": "1"}, ("acme", {"x": "1"})),
    ],
)
def test_a_kwargs_tool_refuses_a_name_its_function_binds_itself(
    reg: ToolRegistry, fn: Any, name: str, field: str, sent: dict[str, Any], fine: dict[str, Any], result: Any
) -> None:
    reg.add(Tool.create(fn, name=name))
    found = problems(reg, name, {**sent, field: "x"})  # an argument error, not the tool's failure ("got multiple values")
    assert list(found) == [f"$.{field}"]
    assert found[f"$.{field}"].startswith(f"unexpected argument; '{field}' is bound already")
    assert reg.call(name, fine) == result


# ---------------------------------------------------------------- a class as a tool


class Search:
    """Search things."""

    def __init__(self, query: str, limit: int = 5) -> None:
        self.query, self.limit = query, limit


def test_a_class_tool_takes_its_init_parameters_types(reg: ToolRegistry) -> None:
    tool = Tool.create(Search)
    assert tool.parameters["properties"] == {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}}
    reg.add(tool)
    assert problems(reg, "Search", {"query": 5, "limit": "x"}) == {
        "$.query": "expected string, got integer 5",
        "$.limit": 'expected integer, got string "x"',
    }


# ---------------------------------------------------------------- constraints on a union


def test_a_bound_on_an_optional_decimal_reaches_its_number_and_its_strings(reg: ToolRegistry) -> None:
    def refund(amount: Annotated[Optional[Decimal], Field(ge=0)] = None) -> str:  # noqa: UP045
        return repr(amount)

    tool = Tool.create(refund)
    number = tool.parameters["properties"]["amount"]["anyOf"][0]["anyOf"][0]
    assert number == {"type": "number", "minimum": 0}
    reg.add(tool)
    assert problems(reg, "refund", {"amount": "-5.00"}) == {"$.amount": 'expected a number >= 0, got "-5.00"'}
    assert list(problems(reg, "refund", {"amount": -5})) == ["$.amount"]
    assert reg.call("refund", {"amount": "5.00"}) == "Decimal('5.00')"
    assert reg.call("refund", {"amount": None}) == "None"


def test_a_length_on_an_optional_list_applies_and_a_numeric_bound_there_is_refused() -> None:
    def limit(n: Annotated[Optional[list[int]], Field(max_length=2)] = None) -> Any:  # noqa: UP045
        return n

    assert Tool.create(limit).parameters["properties"]["n"]["anyOf"][0] == {
        "type": "array",
        "items": {"type": "integer"},
        "maxItems": 2,
    }

    def items(xs: Annotated[Optional[list[int]], Field(ge=0)] = None) -> Any:  # noqa: UP045
        return xs

    with pytest.raises(ToolDefinitionError, match="a numeric bound needs a number"):
        Tool.create(items)


# ---------------------------------------------------------------- TypedDict under `from __future__ import annotations`

_FUTURE_MODULE = """
from __future__ import annotations
from typing import NotRequired, Required, TypedDict


class Opts(TypedDict):
    a: int
    b: NotRequired[str]


class Loose(TypedDict, total=False):
    a: Required[int]
    b: str


class More(Loose):
    c: int


def f(o: Opts) -> Opts:
    return o


def g(o: More) -> More:
    return o
"""


def test_typeddict_requiredness_under_postponed_annotations(reg: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("harness_test_td_future")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(_FUTURE_MODULE, "<td_future>", "exec"), module.__dict__)
    f, g = Tool.create(module.f), Tool.create(module.g)
    assert f.parameters["properties"]["o"]["required"] == ["a"]
    assert g.parameters["properties"]["o"]["required"] == ["a", "c"]  # b: the total=False base's
    reg.add(f)
    assert reg.call("f", {"o": {"a": 1}}) == {"a": 1}


# ---------------------------------------------------------------- Decimal multipleOf


def test_decimal_multiple_of_is_exact_past_the_context_precision(reg: ToolRegistry) -> None:
    def step(amount: Annotated[Decimal, Field(multiple_of=0.01)]) -> str:
        return str(amount)

    reg.add(Tool.create(step))
    assert reg.call("step", {"amount": "123456789012345678901234567890.01"}) == "123456789012345678901234567890.01"
    assert reg.call("step", {"amount": "1e4000"}) == "1E+4000"
    assert problems(reg, "step", {"amount": "1.005"}) == {"$.amount": 'expected a multiple of 0.01, got "1.005"'}


# ---------------------------------------------------------------- loose hand-written schemas


@dataclasses.dataclass
class P:
    x: int


def test_converters_refuse_a_json_type_a_loose_schema_let_through(reg: ToolRegistry) -> None:
    def dc(p: P) -> Any:
        return p

    def tp(t: tuple[int, dt.date]) -> Any:
        return t

    def ls(d: list[dt.date]) -> Any:
        return d

    def mp(m: dict[str, dt.date]) -> Any:
        return m

    reg.add(Tool.create(dc, parameters={"type": "object", "properties": {"p": {}}, "required": ["p"]}))
    reg.add(Tool.create(tp, parameters={"type": "object", "properties": {"t": {"type": "array"}}, "required": ["t"]}))
    reg.add(Tool.create(ls, parameters={"type": "object", "properties": {"d": {}}, "required": ["d"]}))
    reg.add(Tool.create(mp, parameters={"type": "object", "properties": {"m": {}}, "required": ["m"]}))
    assert problems(reg, "dc", {"p": "hello"}) == {"$.p": 'expected an object, got "hello"'}
    assert problems(reg, "dc", {"p": [1]}) == {"$.p": "expected an object, got array"}
    assert problems(reg, "tp", {"t": [1]}) == {"$.t": "expected an array of 2 items, got array of 1 item"}
    assert problems(reg, "tp", {"t": [1, "2020-01-01", "x"]}) == {"$.t": "expected an array of 2 items, got array of 3 items"}
    assert problems(reg, "ls", {"d": "2020-01-01"}) == {"$.d": 'expected an array, got "2020-01-01"'}
    assert problems(reg, "mp", {"m": [1]}) == {"$.m": "expected an object, got array"}
    assert reg.call("tp", {"t": [1, "2020-01-01"]}) == (1, dt.date(2020, 1, 1))
    assert reg.call("dc", {"p": {"x": 1}}) == P(1)


# ---------------------------------------------------------------- a $ref to a node that is no schema


def test_a_ref_to_a_node_that_is_not_a_schema_is_a_definition_error() -> None:
    def f(x: Any = None, y: Any = None) -> Any:
        return x

    schema = {"type": "object", "properties": {"y": {"type": "integer"}, "x": {"$ref": "#/properties/y/type"}}}
    with pytest.raises(ToolDefinitionError, match=r"at #/properties/x/\$ref, \$ref '#/properties/y/type' points to string"):
        Tool.create(f, name="ptr", parameters=schema)
    fine = {"type": "object", "properties": {"y": {"type": "integer"}, "x": {"$ref": "#/properties/y"}}}
    assert Tool.create(f, name="ptr", parameters=fine).parameters == fine


# ---------------------------------------------------------------- Enum literals, InitVars, long enums


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_a_literal_of_enum_members_gives_the_member(reg: ToolRegistry) -> None:
    def paint(c: Literal[Color.RED, Color.BLUE]) -> Any:
        return c

    reg.add(Tool.create(paint))
    assert reg.call("paint", {"c": "red"}) is Color.RED


@dataclasses.dataclass
class WithInitVar:
    a: int
    scale: dataclasses.InitVar[int]
    k: dataclasses.InitVar[int] = 3

    def __post_init__(self, scale: int, k: int) -> None:
        self.total = self.a * scale + k


def test_a_dataclass_initvar_is_a_property(reg: ToolRegistry) -> None:
    def use(d: WithInitVar) -> int:
        return d.total

    schema = Tool.create(use).parameters["properties"]["d"]
    assert schema["properties"]["scale"] == {"type": "integer"}
    assert schema["properties"]["k"] == {"type": "integer", "default": 3}
    assert schema["required"] == ["a", "scale"]
    reg.add(Tool.create(use))
    assert reg.call("use", {"d": {"a": 2, "scale": 10}}) == 23
    assert reg.call("use", {"d": {"a": 2, "scale": 10, "k": 0}}) == 20


def test_an_enum_refusal_lists_its_first_eight_members(reg: ToolRegistry) -> None:
    many = enum.Enum("Many", {f"M{i}": f"value-{i}" for i in range(3000)})  # type: ignore[misc]

    def en(c: Any) -> Any:
        return c

    en.__annotations__["c"] = many
    reg.add(Tool.create(en, parameters={"type": "object", "properties": {"c": {"type": "string"}}, "required": ["c"]}))
    message = problems(reg, "en", {"c": "nope"})["$.c"]
    assert (
        message
        == 'expected one of ["value-0", "value-1", "value-2", "value-3", "value-4", "value-5", "value-6", "value-7"]..., got "nope"'
    )


# ---------------------------------------------------------------- docstrings, sets, empty tuples, paths


def test_docstring_roles_sphinx_names_and_nested_brackets() -> None:
    rest = parse_docstring(
        "Resize.\n\n:class:`Path` objects are returned.\n\n:arg x: the x\n:parameter y: the y\n:keyword z: the z\n:returns: r"
    )
    assert rest.description == "Resize.\n\n:class:`Path` objects are returned."
    assert rest.params == {"x": "the x", "y": "the y", "z": "the z"}
    google = parse_docstring("Resize.\n\nArgs:\n    size (tuple(int, int)): The new size.\n    mode (str): How.\n")
    assert google.params == {"size": "The new size.", "mode": "How."}


@pytest.mark.parametrize("annotation", [typing.AbstractSet[int], collections.abc.Set[int]])
def test_abstract_sets_are_sets(reg: ToolRegistry, annotation: Any) -> None:
    def s(x: Any) -> Any:
        return x

    s.__annotations__["x"] = annotation
    tool = Tool.create(s)
    assert tool.parameters["properties"]["x"] == {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    reg.add(tool)
    assert reg.call("s", {"x": [1, 2]}) == {1, 2}


def test_the_empty_tuple_takes_no_items(reg: ToolRegistry) -> None:
    def empty(x: tuple[()] = ()) -> Any:
        return x

    tool = Tool.create(empty)
    assert tool.parameters["properties"]["x"] == {"type": "array", "maxItems": 0, "default": []}
    reg.add(tool)
    assert reg.call("empty", {"x": []}) == ()
    assert list(problems(reg, "empty", {"x": [1]})) == ["$.x"]


def test_an_empty_path_is_refused(reg: ToolRegistry) -> None:
    def read(p: Path) -> Any:
        return p

    reg.add(Tool.create(read))
    assert problems(reg, "read", {"p": ""}) == {
        "$.p": "expected a path, got \"\" (an empty path would be '.', the current directory)"
    }
    assert reg.call("read", {"p": "a.txt"}) == Path("a.txt")


class Point2(typing.TypedDict):
    x: int


@dataclasses.dataclass
class Point3:
    x: int
    y: int


def test_a_union_of_objects_picks_the_member_whose_names_fit(reg: ToolRegistry) -> None:
    def place(p: typing.Union[Point2, Point3]) -> Any:  # noqa: UP007
        return p

    reg.add(Tool.create(place))
    assert reg.call("place", {"p": {"x": 1}}) == {"x": 1}
    assert reg.call("place", {"p": {"x": 1, "y": 2}}) == Point3(1, 2)  # not Point2's dict
