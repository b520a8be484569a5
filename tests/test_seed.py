"""The seed's examples (sections 2, 3, 5 and 8), written as the seed writes them."""

from __future__ import annotations

import pytest

from harness_one import ToolRegistry as PublicRegistry


def test_section_2_and_3_define_list_and_call(fresh_default: PublicRegistry) -> None:
    from harness_one.tools import ToolRegistry, defineTool

    @defineTool(
        name="web_search",
        description="Выполняет поиск в Google и возвращает список ссылок",
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Поисковый запрос"},
                "num_results": {
                    "type": "integer",
                    "description": "Количество результатов (1-10)",
                    "minimum": 1,
                    "maximum": 10,
                    "default": 5,
                },
            },
            "required": ["query"],
        },
    )
    def web_search(query: str, num_results: int = 5) -> list[dict[str, str]]:
        return [{"title": "...", "url": "..."} for _ in range(num_results)]

    assert list(ToolRegistry.list_tools()) == ["web_search"]
    assert ToolRegistry.list_tools(names_only=True) == ["web_search"]
    assert ToolRegistry.list_tools()["web_search"]["description"].startswith("Выполняет поиск")
    result = ToolRegistry.call("web_search", {"query": "погода Москва", "num_results": 3})
    assert len(result) == 3
    # The decorated function still works when called directly, and the tool is reachable.
    assert len(web_search("x", 2)) == 2
    assert web_search.tool.name == "web_search"  # type: ignore[attr-defined]
    assert web_search.fn("x", 1) == [{"title": "...", "url": "..."}]  # type: ignore[attr-defined]
    assert ToolRegistry.call_count("web_search") == 1


def test_section_4_validation_errors_name_the_field(fresh_default: PublicRegistry) -> None:
    from harness_one.tools import ToolArgumentError, ToolRegistry, defineTool

    @defineTool(
        name="web_search",
        description="search",
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "num_results": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
            },
            "required": ["query"],
        },
    )
    def web_search(query: str, num_results: int) -> int:  # no default in the function: the schema's applies
        return num_results

    assert ToolRegistry.call("web_search", {"query": "q"}) == 5
    with pytest.raises(ToolArgumentError) as wrong_type:
        ToolRegistry.call("web_search", {"query": 42})
    assert "$.query" in str(wrong_type.value) and "expected string" in str(wrong_type.value)
    with pytest.raises(ToolArgumentError) as out_of_range:
        ToolRegistry.call("web_search", {"query": "q", "num_results": 0})
    assert "$.num_results" in str(out_of_range.value) and ">= 1" in str(out_of_range.value)
    with pytest.raises(ToolArgumentError) as missing:
        ToolRegistry.call("web_search", {})
    assert "$.query" in str(missing.value) and "required" in str(missing.value)
    assert str(missing.value).endswith("Fix the arguments and call 'web_search' again.")


def test_section_5_and_8_rate_limit_and_add(fresh_default: PublicRegistry) -> None:
    from harness_one.tools import RateLimitExceeded, ToolNotFound, ToolRegistry, defineTool

    @defineTool(
        name="add",
        description="Складывает два числа",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        rate_limit={"rate": 10, "burst": 20},
    )
    def add(a: float, b: float) -> float:
        return a + b

    result = ToolRegistry.call("add", {"a": 5, "b": 3})
    assert result == 8
    assert add(2, 2) == 4
    for _ in range(19):
        ToolRegistry.call("add", {"a": 1, "b": 1})
    with pytest.raises(RateLimitExceeded) as refused:
        ToolRegistry.call("add", {"a": 1, "b": 1})
    assert 0.05 < refused.value.retry_after <= 0.1
    with pytest.raises(ToolNotFound):
        ToolRegistry.call("nope", {})


def test_seed_rate_limit_example_in_section_5_without_parameters(fresh_default: PublicRegistry) -> None:
    from harness_one.tools import ToolRegistry, defineTool

    @defineTool(name="web_search", rate_limit={"rate": 5, "burst": 10})
    def web_search(query: str) -> list[str]:
        """Search the web."""
        return [query]

    assert ToolRegistry.list_tools()["web_search"] == {
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
            "additionalProperties": False,
        },
    }
    assert ToolRegistry.call("web_search", '{"query": "x"}') == ["x"]
