"""Defining tools: inference from signatures and docstrings, and definition-time errors."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, TypedDict

import pytest

from harness_one import Call, Tool, ToolDefinitionError, ToolRegistry, define_tool, defineTool
from harness_one_plugins import ValidationPlugin
from harness_one_plugins.validation import rust_available


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(TypedDict):
    x: int
    y: int


@dataclass
class Box:
    """A box.

    Args:
        width: Width in cm.
    """

    width: float
    label: str = "box"


def test_types_map_to_json_schema() -> None:
    def f(
        s: str,
        i: int,
        x: float,
        b: bool,
        n: None,
        o: Optional[int],  # noqa: UP045 - the Optional spelling is part of what is tested
        u: int | str,
        li: list[str],
        d: dict[str, int],
        lit: Literal["a", "b"],
        c: Color,
        p: Point,
        box: Box,
        t: tuple[int, str],
        anything: Any,
        described: Annotated[int, "how many"] = 3,
    ) -> None: ...

    props = Tool.create(f).parameters["properties"]
    assert props["s"] == {"type": "string"}
    assert props["i"] == {"type": "integer"}
    assert props["x"] == {"type": "number"}
    assert props["b"] == {"type": "boolean"}
    assert props["n"] == {"type": "null"}
    assert props["o"] == {"type": ["integer", "null"]}
    assert props["u"] == {"type": ["integer", "string"]}
    assert props["li"] == {"type": "array", "items": {"type": "string"}}
    assert props["d"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["lit"] == {"type": "string", "enum": ["a", "b"]}
    assert props["c"] == {"type": "string", "enum": ["red", "blue"]}
    assert props["p"]["required"] == ["x", "y"] and props["p"]["properties"]["x"] == {"type": "integer"}
    assert props["box"]["required"] == ["width"]
    assert props["box"]["properties"]["width"] == {"type": "number", "description": "Width in cm."}
    assert props["box"]["properties"]["label"] == {"type": "string", "default": "box"}
    assert props["t"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert props["anything"] == {}
    assert props["described"] == {"type": "integer", "description": "how many", "default": 3}


@pytest.mark.parametrize(
    "doc",
    [
        """Find things.

        More detail here.

        Args:
            query: What to look for.
                Continues here.
            limit (int): How many.

        Returns:
            Things.
        """,
        """Find things.

        More detail here.

        Parameters
        ----------
        query : str
            What to look for.
            Continues here.
        limit : int
            How many.

        Returns
        -------
        list
        """,
        """Find things.

        More detail here.

        :param query: What to look for.
            Continues here.
        :param int limit: How many.
        :returns: Things.
        """,
    ],
    ids=["google", "numpy", "rest"],
)
def test_docstring_styles(doc: str) -> None:
    def find(query: str, limit: int = 10) -> list[str]:
        return []

    find.__doc__ = doc
    tool = Tool.create(find)
    assert tool.description == "Find things.\n\nMore detail here."
    props = tool.parameters["properties"]
    assert props["query"]["description"] == "What to look for. Continues here."
    assert props["limit"] == {"type": "integer", "description": "How many.", "default": 10}
    assert tool.parameters["required"] == ["query"]


def test_enum_and_dataclass_arguments_are_converted(registry: ToolRegistry) -> None:
    @define_tool(registry=registry)
    def paint(color: Color, box: Box) -> str:
        assert isinstance(color, Color) and isinstance(box, Box)
        return f"{box.label}:{box.width}:{color.name}"

    assert registry.call("paint", {"color": "red", "box": {"width": 2.5}}) == "box:2.5:RED"


def test_call_parameter_is_injected_not_in_schema(registry: ToolRegistry) -> None:
    @define_tool(registry=registry)
    def whoami(call: Call, greeting: str = "hi") -> str:
        return f"{greeting} {call.context['user']} #{call.attempt} {call.tool.name}"

    assert "call" not in registry.get("whoami").parameters["properties"]
    assert registry.call("whoami", {}, context={"user": "ann"}) == "hi ann #1 whoami"


@pytest.mark.parametrize("name", ["", "has space", "dots.not.allowed", "x" * 65, "ünï"])
def test_bad_names(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match="Invalid tool name"):
        Tool.create(lambda: None, name=name)


def test_not_callable() -> None:
    with pytest.raises(ToolDefinitionError, match="callable"):
        Tool.create(42, name="x")  # type: ignore[arg-type]


def test_invalid_schema_names_the_keyword() -> None:
    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(lambda a: a, name="f", parameters={"type": "object", "properties": {"a": {"type": "strin"}}})
    assert '"type": "strin" is not a JSON Schema type; use "string"' in str(err.value)  # not jsonschema's anyOf text
    assert "properties/a/type" in str(err.value)
    with pytest.raises(ToolDefinitionError, match="minimum"):
        Tool.create(lambda a: a, name="f", parameters={"type": "object", "properties": {"a": {"minimum": "1"}}})


def test_root_must_be_object() -> None:
    with pytest.raises(ToolDefinitionError, match='"type": "object"'):
        Tool.create(lambda: None, name="f", parameters={"type": "array"})


def test_schema_and_signature_must_agree() -> None:
    def f(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(f, parameters={"type": "object", "properties": {"a": {}, "c": {}}, "required": ["a", "c"]})
    text = str(err.value)
    assert "requires property 'c'" in text and "no parameter 'c'" in text
    assert "function parameter 'b'" in text


def test_kwargs_function_accepts_any_required_property() -> None:
    def f(**kwargs: Any) -> Any:
        return kwargs

    tool = Tool.create(f, parameters={"type": "object", "properties": {"z": {}}, "required": ["z"]})
    assert tool.accepts_any


def _bare(**kw):  # type: ignore[no-untyped-def]
    return kw


def _loose(**kw: Any) -> dict[str, Any]:
    return kw


def _named(a: int, **kw: Any) -> dict[str, Any]:
    return {"a": a, **kw}


def _typed(**kw: str) -> dict[str, str]:
    return kw


@pytest.mark.parametrize(
    "backend",
    [None, "python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))],
)
def test_a_kwargs_tool_states_the_keys_it_takes_and_takes_the_same_calls(backend: Any) -> None:
    """``{"properties": {}}`` alone reads as "no arguments" to an export (Gemini sends none): **kwargs says otherwise."""
    plugins = {} if backend is None else {"validation": ValidationPlugin(backend=backend)}
    reg = ToolRegistry(plugins=plugins, autoload=False)
    for fn in (_bare, _loose, _named, _typed):
        reg.add(fn, name=fn.__name__.strip("_"))
    extra = {"x": 1, "y": [None], "z": {"k": "v"}}
    for name in ("bare", "loose"):
        assert reg.get(name).parameters == {"type": "object", "properties": {}, "additionalProperties": True}
        assert reg.call(name, extra) == extra and reg.call(name, {}) == {}
    assert reg.get("named").parameters["additionalProperties"] is True
    assert reg.call("named", {"a": 1, **extra}) == {"a": 1, **extra}
    assert not reg.try_call("named", extra).ok  # a is still required
    assert reg.get("typed").parameters["additionalProperties"] == {"type": "string"}  # as before
    assert reg.call("typed", {"x": "1"}) == {"x": "1"}
    if backend is not None:
        assert not reg.try_call("typed", {"x": 1}).ok


def test_remote_ref_is_refused_at_definition() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "http://example.com/schema.json"}}}
    with pytest.raises(ToolDefinitionError, match="never fetched"):
        Tool.create(lambda a: a, name="f", parameters=schema)


def test_local_refs_and_metaschema_refs_are_fine() -> None:
    schema = {
        "type": "object",
        "$defs": {"pos": {"type": "integer", "minimum": 0}},
        "properties": {"a": {"$ref": "#/$defs/pos"}, "s": {"$ref": "https://json-schema.org/draft/2020-12/schema"}},
    }
    reg = ToolRegistry(autoload=False)
    reg.add(Tool.create(lambda a, s=None: a, name="f", parameters=schema))
    assert reg.call("f", {"a": 3, "s": {"type": "integer"}}) == 3
    with pytest.raises(Exception, match=r"\$\.a: expected a number >= 0"):
        reg.call("f", {"a": -1})
    with pytest.raises(Exception, match=r"\$\.s"):
        reg.call("f", {"a": 1, "s": {"type": 12}})  # validated against the real 2020-12 metaschema, offline


def test_duplicate_names_and_replace(registry: ToolRegistry) -> None:
    @define_tool(name="t", registry=registry)
    def one() -> int:
        return 1

    with pytest.raises(ToolDefinitionError, match="already registered"):

        @define_tool(name="t", registry=registry)
        def two() -> int:
            return 2

    @define_tool(name="t", registry=registry, replace=True)
    def three() -> int:
        return 3

    assert registry.call("t") == 3


def test_positional_only_is_refused() -> None:
    def f(a: int, /) -> int:
        return a

    with pytest.raises(ToolDefinitionError, match="positional-only"):
        Tool.create(f)


def test_bad_policies() -> None:
    with pytest.raises(ToolDefinitionError, match="rate"):
        Tool.create(lambda: None, name="f", rate_limit={"rate": 0, "burst": 1})
    with pytest.raises(ToolDefinitionError, match="unknown rate_limit"):
        Tool.create(lambda: None, name="f", rate_limit={"rate": 1, "burts": 1})
    with pytest.raises(ToolDefinitionError, match="timeout"):
        Tool.create(lambda: None, name="f", timeout=-1)


def test_bare_decorator_and_metadata(registry: ToolRegistry) -> None:
    @defineTool(registry=registry, tags=["math"], read_only=True, open_world=False, output_schema={"type": "integer"})
    def double(x: int) -> int:
        """Double a number."""
        return 2 * x

    tool = registry.get("double")
    assert (tool.tags, tool.read_only, tool.open_world) == (frozenset({"math"}), True, False)
    # not an object, so wrapped as FastMCP does: the result travels as {"result": value}
    assert tool.output_schema == {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}
    assert tool.output_wrapped
    assert tool.description == "Double a number."
    assert double(4) == 8


def test_registry_none_defines_without_registering(registry: ToolRegistry) -> None:
    @defineTool(registry=None)
    def lonely() -> int:
        return 1

    assert "lonely" not in registry
    assert "lonely" not in ToolRegistry.default().names()
    registry.add(lonely)
    assert registry.call("lonely") == 1


@pytest.mark.parametrize("name", ["search\n", "a" * 64 + "\n"])
def test_a_name_with_a_trailing_newline_is_refused(name: str) -> None:
    def search(q: str) -> str:
        return q

    with pytest.raises(ToolDefinitionError, match="Invalid tool name"):
        Tool.create(search, name=name)


def test_star_args_alone_is_refused_but_a_kwargs_wrapper_is_not() -> None:
    def total(*numbers: int) -> int:
        return sum(numbers)

    with pytest.raises(ToolDefinitionError, match=r"parameter '\*numbers' collects positional arguments"):
        Tool.create(total)

    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return kwargs

    reg = ToolRegistry(autoload=False)
    reg.add(wrapper)
    assert reg.call("wrapper", {"x": 1}) == {"x": 1}


def test_numpy_parameters_sharing_one_entry_each_get_its_text() -> None:
    def add(a: int, b: int, c: str = "") -> int:
        """Add two numbers.

        Parameters
        ----------
        a, b : int
            The numbers to add.
        c : str
            A label.
        """
        return a + b

    props = Tool.create(add).parameters["properties"]
    assert [props[k]["description"] for k in ("a", "b", "c")] == ["The numbers to add.", "The numbers to add.", "A label."]


def test_a_partial_hides_what_it_binds_and_keeps_the_functions_types_and_words() -> None:
    import functools

    def query(sql: str, tenant_id: str, limit: int = 10) -> str:
        """Run a query for a tenant.

        Args:
            sql: The query.
            tenant_id: Whose data.
            limit: At most this many rows.
        """
        return f"{sql} for {tenant_id} limit {limit}"

    tool = Tool.create(functools.partial(query, tenant_id="acme"))
    assert tool.name == "query" and tool.description == "Run a query for a tenant."
    assert tool.parameters["properties"] == {
        "sql": {"type": "string", "description": "The query."},
        "limit": {"type": "integer", "description": "At most this many rows.", "default": 10},
    }
    reg = ToolRegistry(autoload=False)
    reg.add(tool)
    refused = reg.try_call("query", {"sql": "s", "tenant_id": "other"})  # was run as tenant "other"
    assert refused.error is not None and "$.tenant_id: unexpected property" in refused.error.message
    assert not reg.try_call("query", {"sql": "s", "limit": "ab"}).ok  # an int, as annotated (was accepted)
    assert reg.call("query", {"sql": "s", "limit": 3}) == "s for acme limit 3"


def test_a_partial_over_kwargs_that_binds_keywords_is_refused() -> None:
    import functools

    def query(sql: str, tenant_id: str, **extra: Any) -> str:
        return f"{sql} for {tenant_id}"

    with pytest.raises(ToolDefinitionError, match=r"binds \['tenant_id'\] over a function taking \*\*kwargs"):
        Tool.create(functools.partial(query, tenant_id="acme"))  # a model could send tenant_id and override it
    assert Tool.create(functools.partial(query, "select 1"), name="q").name == "q"  # bound by position: nothing to override
