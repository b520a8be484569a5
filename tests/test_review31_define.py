"""Review 31, tool definition: wrapped functions' annotations, re-defining a tool with keywords, defaults
with no converter, generator functions, and classes under ``@defineTool``."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import decimal
import enum
import functools
import inspect
import types
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from harness_one import Tool, ToolDefinitionError, ToolRegistry, defineTool
from harness_one._discovery import tools_of

INTS = {"a": {"type": "integer"}, "b": {"type": "integer"}}


# 1. @defineTool over a staticmethod, functools.lru_cache or functools.cache reads the function's annotations


def test_define_over_staticmethod_keeps_annotations_and_conversion() -> None:
    r = ToolRegistry()

    class Tools:
        @defineTool(registry=r)
        @staticmethod
        def add(a: int, b: int) -> int:
            "Add two integers."
            return a + b

        @defineTool(registry=r)
        @staticmethod
        def days(since: datetime.date) -> int:
            "Days since a date."
            return (datetime.date(2024, 1, 10) - since).days

        @defineTool(registry=r)
        @staticmethod
        async def aadd(a: int, b: int) -> int:
            "Add, async."
            return a + b

    assert r.get("add").parameters["properties"] == INTS
    assert r.get("add").output_schema == {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}
    assert not r.try_call("add", {"a": "1", "b": "2"}).ok  # validated, not concatenated
    assert r.call("days", {"since": "2024-01-01"}) == 9  # converted to a date
    assert r.get("aadd").is_async and asyncio.run(asyncio.wait_for(r.acall("aadd", {"a": 1, "b": 2}), 10)) == 3
    # still a static method of its class: called on an instance, no self is passed
    assert Tools.add(1, 2) == Tools().add(1, 2) == 3
    assert Tools.add.tool is r.get("add")


def test_define_over_lru_cache_and_cache_keeps_annotations() -> None:
    r = ToolRegistry()

    @defineTool(registry=r)
    @functools.lru_cache(maxsize=8)
    def square(n: int) -> int:
        "Square a number."
        return n * n

    @defineTool(registry=r)
    @functools.cache
    def double(s: str) -> str:
        "Double a string."
        return s * 2

    assert r.get("square").parameters["properties"] == {"n": {"type": "integer"}}
    assert r.get("double").parameters["properties"] == {"s": {"type": "string"}}
    assert r.call("square", {"n": 3}) == 9
    assert not r.try_call("double", {"s": 3}).ok


def test_annotations_of_a_signature_are_never_dropped() -> None:
    class Shown:
        """A callable object whose signature is given, not annotated on its __call__."""

        __signature__ = inspect.Signature([inspect.Parameter("x", inspect.Parameter.KEYWORD_ONLY, annotation=int)])

        def __call__(self, **kwargs: Any) -> Any:
            return kwargs["x"]

    assert Tool.create(Shown(), name="shown").parameters["properties"] == {"x": {"type": "integer"}}


# 2. registry.add(tool, **keywords) overrides those keywords and keeps the rest of the tool's definition


def _guarded() -> Any:
    @defineTool(
        registry=None,
        description="Delete files (admin only)",
        parameters={"type": "object", "properties": {"n": {"type": "integer", "maximum": 10}}, "required": ["n"]},
        rate_limit={"rate": 1, "burst": 1},
        destructive=True,
        options={"requires_approval": True},
        tags=["admin"],
        retry=False,
    )
    def delete_files(n: int) -> str:
        return f"deleted {n}"

    return delete_files


@pytest.mark.parametrize("as_tool", [False, True], ids=["decorated", "tool"])
def test_add_with_a_keyword_keeps_the_rest_of_the_definition(as_tool: bool) -> None:
    fn = _guarded()
    original = fn.tool
    r = ToolRegistry()
    alias = r.add(original if as_tool else fn, name="rm")
    assert alias.name == "rm" and original.name == "delete_files"
    assert alias.description == "Delete files (admin only)"
    assert alias.parameters == original.parameters
    assert alias.rate_limit == original.rate_limit and alias.rate_limit is not None
    assert alias.destructive is True and alias.tags == frozenset({"admin"})
    assert dict(alias.options) == {"requires_approval": True}
    assert alias.declined == frozenset({"retry"})
    assert alias.output_schema == original.output_schema and alias.output_wrapped
    refused = r.try_call("rm", {"n": 11})
    assert not refused.ok and "<= 10" in str(refused.error)  # its own schema still applies
    waiting = r.try_call("rm", {"n": 5})
    assert not waiting.ok and "approval" in str(waiting.error)  # and its approval


def test_add_with_keywords_overrides_only_those() -> None:
    fn = _guarded()
    alias = ToolRegistry().add(fn, name="rm2", description="Other words", options={})
    assert alias.description == "Other words" and dict(alias.options) == {}
    assert alias.rate_limit == fn.tool.rate_limit and alias.parameters == fn.tool.parameters


def test_tool_definition_round_trips() -> None:
    def f(a: int, when: datetime.date = datetime.date(2024, 1, 1)) -> list[int]:
        "F."
        return [a]

    tool = Tool.create(f, idempotent=True, cache_ttl=5, circuit_breaker=False, tags="t", examples=[{"arguments": {"a": 1}}])
    again = Tool.create(tool.fn, **tool.definition())
    for each in dataclasses.fields(Tool):
        if each.name != "converters":
            assert getattr(again, each.name) == getattr(tool, each.name), each.name
    assert again.converters.keys() == tool.converters.keys()


# 3. a default with no converter is in the schema only when its JSON form is the default itself


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Pt:
    x: int = 0


ORIGIN = Pt()
UID = uuid.UUID(int=1)


def test_unconverted_defaults_that_are_not_json_stay_the_functions_own() -> None:
    def report(  # type: ignore[no-untyped-def]
        since=datetime.date(2024, 1, 1),
        limit=decimal.Decimal("2.5"),
        tags=frozenset({"a"}),
        origin=ORIGIN,
        shape=(1, 2),
        color=Color.RED,
        uid=UID,
        anything: Any = datetime.date(2024, 1, 1),
        count=3,
        names=["a"],  # noqa: B006 - a JSON default, kept
        opts={"k": 1},  # noqa: B006
    ) -> dict[str, str]:
        "Report."
        got = [since, limit, tags, origin, shape, color, uid, anything]
        names = ["since", "limit", "tags", "origin", "shape", "color", "uid", "anything"]
        return {name: type(value).__name__ for name, value in zip(names, got, strict=True)}

    r = ToolRegistry()
    props = r.add(report).parameters["properties"]
    assert {name for name, prop in props.items() if "default" in prop} == {"count", "names", "opts"}
    assert (props["count"]["default"], props["names"]["default"], props["opts"]["default"]) == (3, ["a"], {"k": 1})
    assert r.call("report", {}) == {
        "since": "date",
        "limit": "Decimal",
        "tags": "frozenset",
        "origin": "Pt",
        "shape": "tuple",
        "color": "Color",
        "uid": "UUID",
        "anything": "date",
    }


def test_converted_defaults_are_still_given() -> None:
    def f(since: datetime.date = datetime.date(2024, 1, 1), color: Color = Color.RED) -> str:
        "F."
        return f"{since!r} {color!r}"

    props = Tool.create(f).parameters["properties"]
    assert props["since"]["default"] == "2024-01-01" and props["color"]["default"] == "red"


# 4. generator functions are no tools


def _gen(n: int) -> Iterator[int]:
    yield n


async def _agen(n: int) -> AsyncIterator[int]:
    yield n


class _Yielding:
    def __call__(self, n: int) -> Iterator[int]:
        yield n


@pytest.mark.parametrize(
    ("fn", "kind"),
    [
        (_gen, "a generator"),
        (_agen, "an async generator"),
        (_Yielding(), "a generator"),
        (functools.partial(_gen, 1), "a generator"),
        (staticmethod(_agen), "an async generator"),
    ],
    ids=["generator", "async-generator", "object", "partial", "staticmethod"],
)
def test_generator_functions_are_refused(fn: Any, kind: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        Tool.create(fn, name="streamer")
    message = str(info.value)
    assert "'streamer'" in message and f"{kind} function is not a tool" in message and "return a list" in message


# 5. @defineTool on a class returns the class itself


def test_define_on_a_class_returns_the_class() -> None:
    r = ToolRegistry()

    @defineTool(registry=r)
    @dataclasses.dataclass
    class Order:
        "Create an order."

        item: str
        qty: int = 1

    assert isinstance(Order, type) and isinstance(Order("tea"), Order)
    assert Order.tool is r.get("Order") and Order.fn is Order  # type: ignore[attr-defined]
    assert r.call("Order", {"item": "tea", "qty": 2}) == Order("tea", 2)

    class Bigger(Order):
        pass

    assert Bigger("tea").qty == 1
    assert defineTool(registry=r)(Bigger).tool.name == "Bigger"  # a decorated base's .tool is no obstacle
    assert Order.tool.name == "Order"  # type: ignore[attr-defined]


def test_define_on_a_class_with_its_own_tool_attribute_is_refused() -> None:
    class Worker:
        "Work."

        def tool(self) -> None:
            pass

    with pytest.raises(ToolDefinitionError, match=r"has 'tool' already"):
        defineTool(registry=None)(Worker)


def test_a_decorated_class_tool_is_not_inherited() -> None:
    r = ToolRegistry()

    @defineTool(registry=None)
    @dataclasses.dataclass
    class Order:
        "Create an order."

        item: str

    @dataclasses.dataclass
    class Rush(Order):
        "A rush order."

        fee: int = 5

    assert r.add(Rush).name == "Rush" and r.call("Rush", {"item": "tea"}) == Rush("tea")
    assert r.add(Order).name == "Order"

    class Counter(Order):
        def __call__(self, n: int) -> int:
            return n

    assert r.add(Counter("x"), name="calls").parameters["properties"] == {"n": {"type": "integer"}}
    module = types.ModuleType("orders")
    module.Order, module.Rush, module.order = Order, Rush, Order("tea")  # type: ignore[attr-defined]
    assert [tool.name for tool in tools_of(module)] == ["Order"]


def test_a_def_wrapper_that_returns_a_generators_items_is_a_tool() -> None:
    # following __wrapped__ through a plain def wrapper refused it as "a generator function"
    from collections.abc import Callable

    def listify(fn: Callable[..., Iterator[int]]) -> Callable[..., list[int]]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> list[int]:
            return list(fn(*args, **kwargs))

        return wrapper

    @listify
    def squares(n: int) -> Iterator[int]:
        yield from (i * i for i in range(n))

    registry = ToolRegistry(autoload=False)
    registry.add(squares, name="squares")
    assert registry.call("squares", {"n": 3}) == [0, 1, 4]


def test_a_str_enum_default_stays_the_member() -> None:
    class Color(str, enum.Enum):
        RED = "red"

    def paint(c=Color.RED):  # type: ignore[no-untyped-def]  # no annotation: no conversion
        return type(c).__name__

    registry = ToolRegistry(autoload=False)
    registry.add(paint)
    assert "default" not in registry.get("paint").parameters["properties"]["c"]
    assert registry.call("paint", {}) == "Color"


def test_a_str_enum_default_inside_a_list_or_dict_stays_the_member() -> None:
    class Color(str, enum.Enum):
        RED = "red"

    def paint(y=[Color.RED], z={"k": Color.RED}):  # type: ignore[no-untyped-def]  # noqa: B006 - no annotation: no conversion
        return [type(y[0]).__name__, type(z["k"]).__name__]

    registry = ToolRegistry(autoload=False)
    registry.add(paint)
    properties = registry.get("paint").parameters["properties"]
    assert "default" not in properties["y"] and "default" not in properties["z"]
    assert registry.call("paint", {}) == ["Color", "Color"]
