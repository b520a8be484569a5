"""Exports are the caller's: changing one changes no tool and no later export (``copy=False`` shares)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness_one import ToolRegistry
from harness_one.export import FORMATS, export_tools, to_anthropic, to_gemini, to_mcp, to_openai, to_openai_responses


def _registry() -> ToolRegistry:
    reg = ToolRegistry(autoload=False, standard_plugins=False)

    @reg.add
    def add(a: int, b: int = 1) -> int:
        """Add two numbers.

        Args:
            a: the first.
            b: the second.
        """
        return a + b

    return reg


def _every_dict(value: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(value, dict):
        found.append(value)
        for item in value.values():
            found.extend(_every_dict(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_every_dict(item))
    return found


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_export_changed_by_its_caller_changes_nothing_else(fmt: str) -> None:
    reg = _registry()
    tool = reg.get("add")
    schema_before = json.dumps(tool.parameters, sort_keys=True)
    first = reg.export(fmt)
    pristine = json.dumps(first.tools, sort_keys=True)
    first.tools.append({"type": "web_search_20250305", "name": "web_search"})  # a provider's own tool
    for node in _every_dict(first.tools[0]):
        node["cache_control"] = {"type": "ephemeral"}  # a per-request mark, at every depth
    assert json.dumps(reg.export(fmt).tools, sort_keys=True) == pristine
    assert json.dumps(tool.parameters, sort_keys=True) == schema_before
    assert not any(node is tool.parameters for node in _every_dict(reg.export(fmt).tools))


def test_copy_false_is_the_registry_cache_and_the_default_is_a_fresh_copy() -> None:
    reg = _registry()
    shared = reg.export("anthropic", copy=False)
    assert reg.export("anthropic", copy=False) is shared
    mine = reg.export("anthropic")
    assert mine is not shared and mine.tools == shared.tools
    assert mine.tools[0]["input_schema"] is not shared.tools[0]["input_schema"]
    reg.add(lambda x: x, name="echo", description="Echo.")
    assert [t["name"] for t in reg.export("anthropic").tools] == ["add", "echo"]  # the cache still extends


def test_the_per_tool_functions_and_export_tools_hand_out_copies() -> None:
    tool = _registry().get("add")
    made = [
        to_openai(tool)["function"]["parameters"],
        to_openai_responses(tool)["parameters"],
        to_anthropic(tool)["input_schema"],
        to_gemini(tool)[0]["parameters"],
        to_mcp(tool)["inputSchema"],
        export_tools([tool], "mcp").tools[0]["inputSchema"],
    ]
    for schema in made:
        schema["properties"]["a"]["description"] = "changed"
    assert tool.parameters["properties"]["a"]["description"] == "the first."
    assert export_tools([tool], "mcp", copy=False).tools[0]["inputSchema"] is tool.parameters


def test_a_schema_marshal_cannot_hold_is_copied_too() -> None:
    class Text(str):
        pass

    reg = ToolRegistry(autoload=False, standard_plugins=False)
    reg.add(
        lambda a: a,
        name="echo",
        description="Echo.",
        parameters={"type": "object", "properties": {"a": {"description": Text("x")}}},
    )
    export = reg.export("mcp")
    export.tools[0]["inputSchema"]["properties"]["a"]["description"] = "changed"
    assert reg.get("echo").parameters["properties"]["a"]["description"] == "x"


def test_names_given_twice_are_exported_once_and_a_string_is_refused() -> None:
    reg = _registry()
    reg.add(lambda x: x, name="echo", description="Echo.")
    for fmt in FORMATS:
        assert [
            t.get("name") or t.get("function", {}).get("name") for t in reg.export(fmt, names=["echo", "add", "echo"]).tools
        ] == [
            "echo",
            "add",
        ]
    with pytest.raises(TypeError, match=r"not a str: names=\['add'\]"):
        reg.export("openai", names="add")


@pytest.mark.parametrize(
    ("read_only", "destructive", "hint"),
    [(False, None, True), (False, True, True), (False, False, False), (True, None, False), (True, False, False)],
)
def test_mcp_destructive_hint_follows_mcp_default_when_undeclared(read_only: bool, destructive: bool | None, hint: bool) -> None:
    reg = ToolRegistry(autoload=False, standard_plugins=False)
    reg.add(lambda: 1, name="act", description="Act.", read_only=read_only, destructive=destructive)
    assert reg.export("mcp").tools[0]["annotations"]["destructiveHint"] is hint


def test_no_contrib_tool_is_shown_to_mcp_clients_as_destructive() -> None:
    """random_number declares destructive=False, not read_only: a read-only tool's answers may be cached."""
    reg = ToolRegistry(standard_plugins=False)
    reg.load_entry_points()
    contrib = {"calculate", "current_time", "fetch_url", "random_number", "sql_query"}
    shown = {t["name"]: t["annotations"] for t in reg.export("mcp", names=sorted(contrib)).tools}
    assert set(shown) == contrib
    assert {name for name, hints in shown.items() if hints["destructiveHint"]} == set()
    assert {name for name, hints in shown.items() if not hints["readOnlyHint"]} == {"random_number"}  # never cached


def test_dispatch_reads_the_shared_export_and_copies_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dispatch looks names and nulls up in the registry's export: a deep copy there would cost every call."""
    from harness_one.dispatch import dispatch
    from harness_one.export import Export

    reg = _registry()
    copies = []
    original = Export.copy
    monkeypatch.setattr(Export, "copy", lambda self: copies.append(self.format) or original(self))
    gemini = [{"function_call": {"name": "add", "args": {"a": 2}}}]
    openai = [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": null}'}}]
    assert dispatch(reg, gemini, provider="gemini") == [{"name": "add", "response": {"output": 3}}]
    assert dispatch(reg, openai, provider="openai", strict=True)[0]["content"] == "3"
    assert copies == []


def test_a_copy_extended_by_its_caller_shares_nothing_with_the_tool() -> None:
    reg = _registry()
    mine = reg.export("mcp")
    reg.add(
        lambda n: n, name="echo", description="Echo.", parameters={"type": "object", "properties": {"n": {"type": "integer"}}}
    )
    grown = mine.extended(reg.get("echo"))
    grown.tools[-1]["inputSchema"]["properties"]["n"]["description"] = "CHANGED"
    assert reg.get("echo").parameters["properties"]["n"] == {"type": "integer"}
    assert [t["name"] for t in reg.export("mcp").tools] == ["add", "echo"]
