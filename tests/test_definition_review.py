"""A new user's review of defining tools: tags, methods, **kwargs, messages, and rendered dates."""

from __future__ import annotations

import datetime as dt
import enum
import functools
import json
import logging
import uuid
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Any, Literal

import pytest

from harness_one import ManualClock, Tool, ToolArgumentError, ToolDefinitionError, ToolNotFound, ToolRegistry, defineTool
from harness_one._render import dumps, json_data
from harness_one_plugins.validation import compile_schema


def _problems(err: pytest.ExceptionInfo[ToolArgumentError]) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in err.value.problems]


# ---------------------------------------------------------------------------- 1. tags


def test_a_string_of_tags_is_one_tag() -> None:
    @defineTool(tags="search", registry=None)
    def find(q: str) -> str:
        """Find."""
        return q

    assert find.tool.tags == frozenset({"search"})  # was {'s', 'e', 'a', 'r', 'c', 'h'}
    assert Tool.create(find.fn, tags=["search", "web"]).tags == frozenset({"search", "web"})
    with pytest.raises(ToolDefinitionError, match="tags must be strings"):
        Tool.create(find.fn, tags=["search", 3])  # type: ignore[list-item]


# ---------------------------------------------------------------------------- 2. methods


class Shop:
    """A class whose methods become tools."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def price(self, item: str) -> str:
        """The price of an item."""
        return f"{self.prefix}{item}"

    @staticmethod
    def tax(amount: float) -> float:
        """Tax on an amount."""
        return amount * 0.2

    @classmethod
    def currency(cls, country: str) -> str:
        """The currency of a country."""
        return f"{cls.__name__}:{country}"


def test_an_unbound_method_is_refused_with_what_to_register_instead() -> None:
    with pytest.raises(ToolDefinitionError) as err:
        ToolRegistry(autoload=False).add(Shop.price)
    text = str(err.value)
    assert "Shop.price is a method defined in a class body" in text and "'self'" in text
    assert "registry.add(instance.price)" in text and "@staticmethod" in text


def test_define_tool_inside_a_class_body_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="method defined in a class body"):

        class Inventory:
            @defineTool(registry=None)
            def count(self, item: str) -> int:
                """Count an item."""
                return len(item)


def test_bound_methods_static_and_class_methods_and_partials_stay_tools() -> None:
    registry = ToolRegistry(autoload=False)
    shop = Shop("$")
    price = registry.add(shop.price)
    assert price.parameters["properties"] == {"item": {"type": "string"}} and price.required == {"item"}
    assert registry.call("price", {"item": "tea"}) == "$tea"
    assert registry.add(Shop.tax).parameters["properties"] == {"amount": {"type": "number"}}
    registry.add(Shop.currency)  # a classmethod read from its class is bound to it
    assert registry.call("currency", {"country": "fr"}) == "Shop:fr"
    bound = registry.add(functools.partial(Shop.price, shop), name="bound_price")
    assert list(bound.parameters["properties"]) == ["item"]

    def handler(self: str) -> str:  # a parameter called self, in no class: an ordinary tool
        """Echo."""
        return self

    assert registry.add(handler).required == {"self"}


# ---------------------------------------------------------------------------- 3. **kwargs


def test_annotated_kwargs_give_additional_properties() -> None:
    registry = ToolRegistry(clock=ManualClock(), autoload=False)  # (the listing's time budget never runs out)

    def conf(**options: str) -> str:
        """Set options.

        Args:
            options: Option values.
        """
        return ",".join(f"{k}={v}" for k, v in sorted(options.items()))

    tool = registry.add(conf)
    assert tool.parameters == {
        "type": "object",
        "properties": {},
        "additionalProperties": {"type": "string", "description": "Option values."},
    }
    assert registry.call("conf", {"a": "1", "b": "2"}) == "a=1,b=2"
    with pytest.raises(ToolArgumentError) as err:
        registry.call("conf", {"x": 1})  # reached the function before
    assert _problems(err) == [("$.x", "expected string, got integer 1")]


def test_kwargs_without_a_json_type_stay_open_or_are_refused() -> None:
    def loose(**anything: Any) -> int:
        """Count."""
        return len(anything)

    def bare(**anything) -> int:  # type: ignore[no-untyped-def]
        """Count."""
        return len(anything)

    for fn in (loose, bare):
        assert Tool.create(fn).parameters["additionalProperties"] is True  # open, and said so (not read as "no arguments")
    assert Tool.create(loose, parameters={"type": "object"}).accepts_any  # a given schema: no inference
    with pytest.raises(
        ToolDefinitionError,
        match=r"'\*\*when': the values of \*\*when reach the function as JSON values, never converted to datetime",
    ):

        def dates(**when: dt.datetime) -> int:
            """Dates."""
            return len(when)

        Tool.create(dates)


# ---------------------------------------------------------------------------- 4. validation wording


@pytest.mark.parametrize("backend", ["python", "rust"])
def test_a_null_is_got_null_and_an_enum_with_a_type_is_one_problem(backend: str) -> None:
    registry = ToolRegistry(clock=ManualClock(), autoload=False, plugin_options={"validation": {"backend": backend}})

    def pick(name: str, color: Literal["red", "blue"] = "red", shade: Literal["red", "blue"] | None = None) -> str:
        """Pick."""
        return name

    registry.add(pick)
    with pytest.raises(ToolArgumentError) as err:
        registry.call("pick", {"name": None, "color": 5})
    assert _problems(err) == [("$.color", 'expected one of ["red", "blue"], got 5'), ("$.name", "expected string, got null")]
    with pytest.raises(ToolArgumentError) as err:
        registry.call("pick", {"name": "a", "shade": 5})
    [(path, message)] = _problems(err)
    assert path == "$.shade" and message.count("option 1:") == 1 and "got integer 5" in message
    assert "null null" not in str(err.value)


def test_a_type_problem_an_enum_does_not_say_is_kept() -> None:
    # 1 is among the choices but not a string: "one of ['a', 1]" alone would mislead.
    schema = {"type": "object", "properties": {"v": {"type": "string", "enum": ["a", 1]}}}
    problems = {
        (p.path, p.keyword) for p in compile_schema(schema).problems({"v": 2}, ManualClock())
    }  # (a frozen clock: no budget runs out on a loaded machine)
    assert problems == {("$.v", "enum"), ("$.v", "type")}


# ---------------------------------------------------------------------------- 5. dates and times


class Size(enum.Enum):
    SMALL = "s"
    LARGE = "l"


NAIVE = dt.datetime(2024, 1, 1, 12, 0, 0)
AWARE = dt.datetime(2024, 1, 1, 12, 0, 0, 250, tzinfo=dt.timezone(dt.timedelta(hours=2)))


@pytest.mark.parametrize(
    ("annotation", "value", "text"),
    [
        (dt.datetime, NAIVE, '"2024-01-01T12:00:00"'),
        (dt.datetime, AWARE, '"2024-01-01T12:00:00.000250+02:00"'),
        (dt.date, dt.date(2024, 1, 31), '"2024-01-31"'),
        (dt.time, dt.time(8, 15), '"08:15:00"'),
        (dt.time, dt.time(8, 15, tzinfo=dt.UTC), '"08:15:00+00:00"'),
        (Decimal, Decimal("1E+2"), '"1E+2"'),
        (uuid.UUID, uuid.UUID(int=5), '"00000000-0000-0000-0000-000000000005"'),
        (PurePosixPath, PurePosixPath("/a/b"), '"/a/b"'),
        (Size, Size.LARGE, '"l"'),
    ],
)
def test_results_render_as_their_output_schema_says(annotation: Any, value: Any, text: str) -> None:
    def result() -> Any:
        """A value."""
        return value

    result.__annotations__["return"] = annotation
    registry = ToolRegistry(autoload=False)
    tool = registry.add(result)
    rendered = registry.try_call("result").for_model()
    assert rendered == text  # a datetime was str()'s "2024-01-01 12:00:00"
    assert json_data(value) == json.loads(text) and dumps({"v": value}) == '{"v": ' + text + "}"
    assert tool.output_wrapped
    # The validation plugin's format checks (RFC 3339 date-time needs the T and an offset) accept it.
    assert compile_schema(tool.output_schema or {}).is_valid({"result": json.loads(rendered)})


def test_a_returned_datetime_is_described_with_and_without_an_offset() -> None:
    def when() -> dt.datetime:
        """When."""
        return NAIVE

    schema = Tool.create(when).output_schema or {}
    checker = compile_schema(schema)
    assert checker.is_valid({"result": "2024-01-01T12:00:00Z"}) and checker.is_valid({"result": "2024-01-01T12:00:00"})
    assert not checker.is_valid({"result": "2024-01-01 12:00:00"})  # what str() wrote
    assert not compile_schema({"type": "string", "format": "date-time"}).is_valid(NAIVE.isoformat())  # why not only date-time

    def at(moment: dt.datetime) -> str:  # arguments still need the offset: the parameter schema is unchanged
        """At."""
        return moment.isoformat()

    assert Tool.create(at).parameters["properties"]["moment"] == {"type": "string", "format": "date-time"}


# ---------------------------------------------------------------------------- 6. definition errors


def _plain(x: int) -> int:
    """Return x."""
    return x


def test_a_misspelt_keyword_names_the_closest_one() -> None:
    with pytest.raises(ToolDefinitionError) as err:
        defineTool(timout=5, registry=None)
    text = str(err.value)
    assert "Unknown keyword 'timout'; did you mean 'timeout'?" in text and "rate_limit" in text and "registry" in text
    with pytest.raises(ToolDefinitionError, match="did you mean 'timeout'"):
        ToolRegistry(autoload=False).add(_plain, timout=5)
    with pytest.raises(ToolDefinitionError, match="Unknown keyword 'colour'\\."):
        Tool.create(_plain, colour="red")


def test_a_plugin_option_as_a_keyword_says_where_it_goes() -> None:
    with pytest.raises(ToolDefinitionError) as err:
        defineTool(requires_approval=True, registry=None)
    assert "pass options={'requires_approval': True}" in str(err.value) and "approval plugin" in str(err.value)
    registry = ToolRegistry(autoload=False)
    tool = registry.add(_plain, options={"requires_approval": True})  # what the message says works
    assert tool.options == {"requires_approval": True}


@pytest.mark.parametrize(
    ("option", "meant"),
    [
        ("requires_aproval", "requires_approval"),
        ("max_call", "max_calls"),
        ("Max_Output", "max_output"),
        ("memory_limits", "memory_limit"),
        ("tittle", "title"),
        ("cached", "cache"),
        ("max_calls_", "max_calls"),  # an underscore alone extends nothing
        ("requires_approval__", "requires_approval"),
    ],
)
def test_a_misspelt_option_is_refused_naming_the_one_meant(option: str, meant: str) -> None:
    # Taken as given, the plugin would never read it: a tool asking for approval would run without it.
    registry = ToolRegistry(autoload=False)
    with pytest.raises(ToolDefinitionError) as err:
        registry.add(_plain, options={option: True})
    assert f"unknown option {option!r}; did you mean {meant!r}?" in str(err.value) and err.value.tool == "_plain"
    assert registry.names() == []
    with pytest.raises(ToolDefinitionError, match=f"did you mean {meant!r}"):
        defineTool(options={"other": 1, option: 1}, registry=None)(_plain)


def test_options_of_other_plugins_stay_free_form() -> None:
    # Names a plugin of one's own may read, none as alike to a standard option as a misspelling is.
    options = {"max_cost": 1, "requires_review": True, "memory": 2, "output_limit_mode": "x", 3: "a key no string"}
    options |= {"requires_approval_from": "ops", "memory_limit_mb": 64, "max_calls_per_user": 2}  # extensions after "_"
    options |= {"Memory_Limit_MB": 32, "Requires_Approval_From": "ops"}  # letter case ignored, as in the check
    tool = Tool.create(_plain, options={**options, "requires_approval": False, "title": "Plain"})
    assert dict(tool.options) == {**options, "requires_approval": False, "title": "Plain"}


def test_memory_limit_as_a_keyword_says_where_it_goes() -> None:
    with pytest.raises(
        ToolDefinitionError, match=r"'memory_limit' is an option of the timeout plugin.*options=\{'memory_limit': 1024\}"
    ):
        Tool.create(_plain, memory_limit=1024)


@pytest.mark.parametrize(
    ("written", "use"),
    [("int", "integer"), ("str", "string"), ("float", "number"), ("bool", "boolean"), ("dict", "object"), ("list", "array")],
)
def test_a_python_type_name_in_a_schema_says_the_json_one(written: str, use: str) -> None:
    schema = {"type": "object", "properties": {"x": {"type": written}}}
    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(_plain, parameters=schema)
    assert f'at #/properties/x/type, "type": "{written}" is not a JSON Schema type; use "{use}".' in str(err.value)
    with pytest.raises(ToolDefinitionError, match='"type": "int" is not a JSON Schema type; use "integer"'):
        Tool.create(_plain, parameters={"type": "object", "properties": {"x": {"type": ["int", "null"]}}})


def test_a_property_named_type_is_not_taken_for_the_keyword() -> None:
    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(lambda type: type, name="f", parameters={"type": "object", "properties": {"type": "int"}})
    assert "not a JSON Schema type" not in str(err.value)


def test_a_lambda_is_told_to_pass_a_name() -> None:
    with pytest.raises(ToolDefinitionError, match=r"Invalid tool name '<lambda>'.*Pass name=\.\.\. to name this tool"):
        ToolRegistry(autoload=False).add(lambda y: y)
    with pytest.raises(ToolDefinitionError) as err:
        ToolRegistry(autoload=False).add(lambda y: y, name="bad name")
    assert "Pass name=" not in str(err.value)


# ---------------------------------------------------------------------------- 7. unknown tools


def test_an_empty_new_registry_says_it_does_not_load_packages() -> None:
    with pytest.raises(ToolNotFound) as err:
        ToolRegistry(autoload=False).call("current_time", {})
    text = str(err.value)
    assert text == (
        "Unknown tool 'current_time'. No tools are registered: this registry started empty and does not load installed"
        " tool packages. Add tools to it, or use ToolRegistry(discover=True) or the default registry (ToolRegistry.call(...))."
    )


def test_a_registry_that_says_it_does_not_discover_is_named() -> None:
    assert (
        str(ToolNotFound("current_time", available=["echo"], discovers=False))
        == "Unknown tool 'current_time'. Available tools: echo."
    )
    assert "discover=True" in str(ToolNotFound("x", discovers=False))
    assert str(ToolNotFound("x", discovers=True)) == "Unknown tool 'x'. No tools are registered."
    assert str(ToolNotFound("x", available=["echo"])) == "Unknown tool 'x'. Available tools: echo."


# ---------------------------------------------------------------------------- 8. no description


def test_a_tool_without_a_description_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    def documented(x: int) -> int:
        """Documented."""
        return x

    def undocumented(x: int) -> int:
        return x

    with caplog.at_level(logging.INFO, logger="harness_one"):
        Tool.create(documented)
        Tool.create(undocumented, name="described", description="Given here.")
        Tool.create(undocumented, name="chosen_empty", description="")  # an explicit choice
        assert Tool.create(undocumented).description == ""
    found = [r for r in caplog.records if r.getMessage().startswith("tool has no description")]
    assert [r.harness_one["tool"] for r in found] == ["undocumented"]  # type: ignore[attr-defined]
    assert found[0].levelno == logging.INFO
