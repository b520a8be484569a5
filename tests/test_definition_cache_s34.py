"""A tool's own setting put in ``options`` is refused; cache keys hold only plain JSON arguments and context."""

from __future__ import annotations

import enum
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness_one import Call, Tool, ToolDefinitionError, ToolRegistry, define_tool, defineTool
from harness_one._tool import _KEYWORDS
from harness_one_plugins import CachePlugin

# --------------------------------------------------------------------------- a setting in options


def rm(path: str) -> str:
    """Delete a path."""
    return f"deleted {path}"


SETTINGS: dict[str, Any] = {
    "destructive": True,
    "read_only": True,
    "idempotent": True,
    "timeout": 3,
    "total_timeout": 3,
    "retry": 3,
    "rate_limit": {"rate": 1},
    "circuit_breaker": {"min_calls": 1},
    "cache_ttl": 5,
    "max_concurrency": 1,
    "timeout_mode": "thread",
}


@pytest.mark.parametrize("key", sorted(SETTINGS))
def test_a_setting_in_options_is_refused_saying_to_pass_it_as_a_keyword(key: str) -> None:
    value = SETTINGS[key]
    with pytest.raises(ToolDefinitionError) as raised:
        ToolRegistry(autoload=False).add(rm, options={key: value})
    assert f"'{key}' is a keyword of the tool definition, not an option: pass {key}={value!r}" in str(raised.value)


def test_every_keyword_of_a_definition_is_refused_in_options_in_any_letter_case() -> None:
    assert {"destructive", "timeout", "rate_limit", "cache_ttl", "options"} <= _KEYWORDS
    for key in _KEYWORDS:
        for spelt in (key, key.upper()):
            with pytest.raises(ToolDefinitionError, match=f"pass {key}="):
                Tool.create(rm, options={spelt: 1})


@pytest.mark.parametrize(
    ("spelt", "keyword"),
    [
        ("readOnly", "read_only"),
        ("read-only", "read_only"),
        ("rateLimit", "rate_limit"),
        ("cacheTtl", "cache_ttl"),
        ("destructiveHint", "destructive"),
        ("readOnlyHint", "read_only"),
        ("openWorldHint", "open_world"),
    ],
)
def test_a_keyword_spelt_in_camel_case_or_as_an_mcp_hint_is_refused_too(spelt: str, keyword: str) -> None:
    with pytest.raises(ToolDefinitionError, match=f"pass {keyword}="):
        Tool.create(rm, options={spelt: True})


def test_destructive_in_options_no_longer_escapes_the_approval_rule() -> None:
    reg = ToolRegistry(plugin_options={"approval": {"destructive": True}})
    with pytest.raises(ToolDefinitionError, match="pass destructive=True"):
        reg.add(rm, name="rm", options={"destructive": True})
    assert "rm" not in reg
    reg.add(rm, name="rm", destructive=True)
    outcome = reg.try_call("rm", {"path": "/"})
    assert not outcome.ok and "approval" in outcome.for_model()


@pytest.mark.parametrize(
    "build",
    [
        lambda: define_tool(registry=None, options={"timeout": 3})(rm),
        lambda: defineTool(registry=ToolRegistry(autoload=False), options={"retry": 3})(rm),
        lambda: ToolRegistry(autoload=False).add(Tool.create(rm), name="alias", options={"read_only": True}),
    ],
    ids=["define_tool", "defineTool", "registry.add over a tool"],
)
def test_every_way_of_defining_a_tool_refuses_it(build: Callable[[], Any]) -> None:
    with pytest.raises(ToolDefinitionError, match="is a keyword of the tool definition, not an option"):
        build()


def test_from_langchain_refuses_it() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.tools import tool as lc_tool

    from harness_one.integrations.langchain import from_langchain

    @lc_tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    with pytest.raises(ToolDefinitionError, match="pass rate_limit="):
        from_langchain(multiply, options={"rate_limit": {"rate": 1}})


def test_mcp_import_refuses_it(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from harness_one.mcp import McpSpec, import_tools

    script = tmp_path / "server.py"
    script.write_text(
        textwrap.dedent(
            """
            from mcp.server.mcpserver import MCPServer

            server = MCPServer("s34")

            @server.tool()
            def ping() -> str:
                return "pong"

            server.run("stdio")
            """
        )
    )
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, McpSpec(name="s34", command=(sys.executable, str(script))), options={"destructive": True})
    try:  # a tool the import cannot define is left out and listed in its failures
        assert "ping" not in registry
        assert any("pass destructive=True" in failure for failure in remote.failures), remote.failures
    finally:
        remote.close()


def test_plugin_options_and_names_of_ones_own_stay_free() -> None:
    tool = Tool.create(rm, options={"requires_approval": True, "cache": False, "team": "ops", "timeout_ms": 5})
    assert dict(tool.options) == {"requires_approval": True, "cache": False, "team": "ops", "timeout_ms": 5}


# --------------------------------------------------------------------------- cache keys


class Color(str, enum.Enum):
    RED = "red"


class Name(str):
    pass


def describe(x: Any) -> str:
    """The type and value of x."""
    return f"{type(x).__name__}:{x!r}"


def cached_registry() -> tuple[ToolRegistry, CachePlugin]:
    cache = CachePlugin()
    reg = ToolRegistry(autoload=False, plugins={"cache": cache})
    reg.add(describe, read_only=True, cache_ttl=60)
    return reg, cache


@pytest.mark.parametrize(
    ("odd", "plain"),
    [(("a",), ["a"]), (Color.RED, "red"), (Name("red"), "red")],
    ids=["tuple-list", "str-enum", "str-subclass"],
)
def test_arguments_not_plain_json_are_neither_answered_from_the_cache_nor_cached(odd: Any, plain: Any) -> None:
    for first, second in ((odd, plain), (plain, odd)):
        reg, cache = cached_registry()
        assert reg.call("describe", {"x": first}) == describe(first)
        assert reg.call("describe", {"x": second}) == describe(second)  # not the other's cached result
        assert cache.uncached == 1 and cache.hits == 0
    assert reg.call("describe", {"x": odd}) == describe(odd)
    assert cache.uncached == 2 and cache.hits == 0  # never stored


def test_plain_json_arguments_are_still_cached() -> None:
    reg, cache = cached_registry()
    assert reg.call("describe", {"x": ["a", {"b": 1}]}) == reg.call("describe", {"x": ["a", {"b": 1}]})
    assert (cache.hits, cache.misses, cache.uncached) == (1, 1, 0)


def test_a_context_not_plain_json_is_not_a_cache_key() -> None:
    cache = CachePlugin()
    reg = ToolRegistry(autoload=False, plugins={"cache": cache})
    seen: list[Any] = []

    def who(call: Call) -> str:
        """Who asks."""
        seen.append(call.context["user"])
        return repr(call.context["user"])

    reg.add(who, read_only=True, cache_ttl=60)
    assert reg.call("who", context={"user": Color.RED}) == repr(Color.RED)
    assert reg.call("who", context={"user": "red"}) == "'red'"  # not the enum caller's answer
    assert reg.call("who", context={"user": "red"}) == "'red'"
    assert len(seen) == 2 and (cache.hits, cache.uncached) == (1, 1)
