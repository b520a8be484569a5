"""Review 30, the core: a call's deadlines that a hook set to no number are that hook's fault, not the tool's."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from pydantic import BaseModel

from harness_one import Call, PluginError, ToolArgumentError, ToolExecutionError, ToolRegistry, hookimpl
from harness_one.hookspecs import per_tool
from harness_one_plugins import TimeoutPlugin


class SetDeadline:
    """Sets ``call.<field>`` to ``value`` in pre_call, after every other plugin (the timeout plugin's total too)."""

    def __init__(self, field: str, value: Any) -> None:
        self.field, self.value = field, value

    @hookimpl(trylast=True)
    def harness_pre_call(self, call: Call) -> None:
        setattr(call, self.field, self.value)


def _registry(field: str, value: Any, **tool: Any) -> tuple[ToolRegistry, list[int]]:
    ran: list[int] = []
    reg = ToolRegistry(plugins={"dl": SetDeadline(field, value)}, autoload=False)
    if tool.pop("is_async", False):

        async def work(a: int) -> int:
            ran.append(a)
            return a

    else:

        def work(a: int) -> int:  # type: ignore[misc]
            ran.append(a)
            return a

    reg.add(work, name="work", **tool)
    return reg, ran


@pytest.mark.parametrize("is_async", [False, True])
def test_a_total_deadline_that_is_no_number_is_a_plugin_error_and_the_tool_never_starts(is_async: bool) -> None:
    reg, ran = _registry("total_deadline", "soon", timeout=5.0, is_async=is_async)
    for result in (reg.try_call("work", {"a": 1}), asyncio.run(reg.atry_call("work", {"a": 1}))):
        assert type(result.error) is PluginError
        assert str(result.error) == (
            "The pre_validate, pre_call or on_error hook of a plugin set call.total_deadline to 'soon' while calling 'work'; "
            "expected a registry.clock.now() value (a number) or None"
        )
        assert result.error.tool == "work" and result.error.plugin is None
        assert result.ran is False  # it never started (not the tool's failure)
    assert ran == []


def test_a_total_deadline_that_is_no_number_fails_a_retry_decision_as_the_plugins_fault() -> None:
    reg, _ = _registry("total_deadline", ["soon"], retry={"attempts": 3, "on": (ConnectionError,)}, idempotent=True)
    runs: list[int] = []

    def flaky(a: int) -> int:
        runs.append(a)
        raise ConnectionError("down")

    reg.add(flaky, name="flaky", retry={"attempts": 3, "on": (ConnectionError,)}, idempotent=True)
    for result in (reg.try_call("flaky", {"a": 1}), asyncio.run(reg.atry_call("flaky", {"a": 2}))):
        assert type(result.error) is PluginError
        assert str(result.error).startswith(
            "The pre_validate, pre_call or on_error hook of a plugin set call.total_deadline to ['soon'] "
        )
        assert isinstance(result.error.__cause__, ToolExecutionError)  # the tool's failure, kept as its cause
        assert isinstance(result.error.__cause__.__cause__, ConnectionError)
    assert runs == [1, 2]  # no retry on a deadline no one can read
    assert reg.stats()["tools"]["flaky"]["errors"] == {"PluginError": 2}  # the later on_error hooks (metrics) saw both calls fail


@pytest.mark.parametrize("is_async", [False, True])
def test_a_total_deadline_that_is_an_int_is_a_number(is_async: bool) -> None:
    reg, ran = _registry("total_deadline", 10**12, timeout=5.0, is_async=is_async)
    assert reg.call("work", {"a": 3}) == 3
    assert ran == [3]


def test_call_remaining_with_a_deadline_of_no_number_names_the_plugin_not_the_tool() -> None:
    reg = ToolRegistry(plugins={"dl": SetDeadline("deadline", "soon")}, standard_plugins=False, autoload=False)

    def left(call: Call) -> float | None:
        return call.remaining()

    reg.add(left, name="left")
    with pytest.raises(PluginError, match=r"^The pre_call hook of a plugin set call.deadline to 'soon' while calling 'left'; "):
        reg.call("left")
    reg = ToolRegistry(plugins={"dl": SetDeadline("deadline", 10**12)}, standard_plugins=False, autoload=False)
    reg.add(left, name="left")
    value = reg.call("left")
    assert type(value) is float and 0 < value <= 10**12


class _Check:
    """A callable object a per_tool factory gives as the hook of a tool."""

    def __call__(self, call: Call) -> None:
        raise ValueError("boom")


class _PerToolObject:
    @hookimpl
    @per_tool(lambda plugin, tool: _Check())
    def harness_pre_call(self, call: Call) -> None:
        raise AssertionError("the prepared object runs instead")


def test_a_callable_object_a_per_tool_factory_gives_is_named_by_its_plugin_when_it_fails() -> None:
    reg = ToolRegistry(plugins={"mine": _PerToolObject()}, standard_plugins=False, autoload=False)
    reg.add(lambda a: a, name="t")
    for result in (reg.try_call("t", {"a": 1}), asyncio.run(reg.atry_call("t", {"a": 1}))):
        assert type(result.error) is PluginError
        assert str(result.error) == "Internal error in plugin 'mine' while calling 't': ValueError: boom"
        assert result.error.plugin == "mine"


class _Query(BaseModel):
    q: str
    limit: int = None  # type: ignore[assignment]  # pydantic checks no default: a common way to write "optional"
    tags: list[str] = None  # type: ignore[assignment]
    size: int = 10


def test_a_pydantic_default_its_field_refuses_is_left_out_of_the_schema_and_pydantic_gives_it() -> None:
    reg = ToolRegistry(autoload=False)

    def search(query: _Query) -> str:
        return f"{query.q}:{query.limit}:{query.tags}:{query.size}"

    tool = reg.add(search)
    fields = tool.parameters["properties"]["query"]["properties"]
    assert "default" not in fields["limit"] and "default" not in fields["tags"]
    assert fields["size"]["default"] == 10  # one the field takes stays (the validation plugin fills it in)
    assert reg.call("search", {"query": {"q": "x"}}) == "x:None:None:10"
    assert reg.call("search", {"query": {"q": "x", "limit": 3, "tags": ["a"]}}) == "x:3:['a']:10"


def test_from_langchain_takes_a_tool_whose_optional_parameter_defaults_to_none() -> None:
    from langchain_core.tools import tool as lc_tool

    from harness_one.integrations.langchain import from_langchain

    @lc_tool
    def search(query: str, limit: int = None, tags: list[str] = None) -> str:  # type: ignore[assignment]  # noqa: RUF013
        """Search."""
        return f"{query}:{limit}:{tags}"

    reg = ToolRegistry(autoload=False)
    added = from_langchain(search, registry=reg)
    assert "default" not in added.parameters["properties"]["limit"]
    assert reg.call("search", {"query": "q"}) == "q:None:None"
    assert reg.call("search", {"query": "q", "limit": 2}) == "q:2:None"
    with pytest.raises(ToolArgumentError, match=r"\$\.limit: "):
        reg.call("search", {"query": "q", "limit": "two"})


class _Reassigning:
    """Sets ``call.total_deadline`` (and ``call.tool`` to another tool, which errors never name)."""

    def __init__(self, value: Any, other: Any) -> None:
        self.value, self.other = value, other

    @hookimpl(trylast=True)
    def harness_pre_call(self, call: Call) -> None:
        call.total_deadline = self.value
        call.tool = self.other


def test_a_total_deadline_no_float_holds_is_shown_by_its_size_and_the_error_names_the_tool_looked_up() -> None:
    reg = ToolRegistry(autoload=False, standard_plugins=False)
    other = reg.add(lambda: 0, name="other")
    reg.plugins.register(_Reassigning(10**400, other), "dl")
    reg.add(lambda a: a, name="work", timeout=5.0, parameters={"type": "object", "properties": {"a": {"type": "integer"}}})
    reg.plugins.register(TimeoutPlugin(), "timeout")
    result = reg.try_call("work", {"a": 1})
    assert type(result.error) is PluginError
    assert str(result.error).startswith(
        "The pre_validate, pre_call or on_error hook of a plugin set call.total_deadline to ~1e400 (an int no float holds) "
        "while calling 'work'; "
    )


@pytest.mark.parametrize(
    ("schema", "where", "ref"),
    [
        ({"type": "object", "properties": {"x": {"$ref": "#/properties/x"}}}, "#/properties/x/$ref", "#/properties/x"),
        (
            {
                "type": "object",
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                "properties": {"x": {"$ref": "#/$defs/a"}},
            },
            "#/$defs/a/$ref",
            "#/$defs/b",
        ),
        ({"type": "object", "$ref": "#"}, "#/$ref", "#"),
    ],
)
def test_a_ref_that_leads_back_to_itself_through_refs_alone_is_refused_when_defined(schema: Any, where: str, ref: str) -> None:
    """Such a schema was accepted; then jsonschema-rs took any value for it and the Python backend refused every one
    ("send smaller or simpler arguments"), or recursed without end."""
    from harness_one import ToolDefinitionError

    with pytest.raises(
        ToolDefinitionError, match=rf"^Tool 't': parameters: at {re.escape(where)}, \$ref '{re.escape(ref)}' leads back to itself"
    ):
        ToolRegistry(autoload=False).add(lambda **kw: kw, name="t", parameters=schema)


def test_a_ref_that_recurses_through_a_property_or_an_alternative_is_a_schema() -> None:
    registry = ToolRegistry(autoload=False)
    tree = {"type": "object", "properties": {"child": {"$ref": "#"}, "n": {"type": "integer"}}}
    registry.add(lambda **kw: kw, name="tree", parameters=tree)
    assert registry.call("tree", {"child": {"child": {"n": 1}}}) == {"child": {"child": {"n": 1}}}


def test_a_loop_of_refs_at_the_end_of_a_long_chain_is_found_and_a_long_chain_that_ends_is_a_schema() -> None:
    from harness_one import ToolDefinitionError

    n = 3000
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "integer"}
    ends = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}
    registry = ToolRegistry(autoload=False)
    registry.add(lambda x: x, name="ends", parameters=ends)
    assert registry.call("ends", {"x": 5}) == 5
    loops = {**ends, "$defs": {**defs, f"d{n}": {"$ref": "#/$defs/d1"}}}
    with pytest.raises(ToolDefinitionError, match=r"leads back to itself through references alone"):
        registry.add(lambda x: x, name="loops", parameters=loops)


def test_a_negative_int_no_float_holds_keeps_its_sign_in_the_error() -> None:
    reg, _ = _registry("total_deadline", -(10**400), timeout=5.0)
    error = reg.try_call("work", {"a": 1}).error
    assert error is not None and "set call.total_deadline to ~-1e400 (an int no float holds)" in str(error)
