"""The main job on the embedded defaults: define tools, list them, and call them as an agent would.

Run with ``.venv/bin/python examples/quickstart.py`` (``make demo`` or ``make test`` creates
``.venv``; ``make demo`` itself runs the scripted session, ``examples/run-demo.sh``). No network,
no services: the standard plugins (validation, rate limit, logging, metrics) run in process.
"""

from __future__ import annotations

import json

from harness_one.tools import RateLimitExceeded, ToolRegistry, defineTool


@defineTool(
    name="add",
    description="Adds two numbers",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    rate_limit={"rate": 10, "burst": 20},
)
def add(a: float, b: float) -> float:
    return a + b


@defineTool(rate_limit={"rate": 5, "burst": 10})
def web_search(query: str, num_results: int = 5) -> list[dict[str, str]]:
    """Search (offline stand-in) and return a list of links.

    Args:
        query: What to search for.
        num_results: How many results (1-10).
    """
    return [{"title": f"{query} #{i + 1}", "url": f"https://example.org/{i + 1}"} for i in range(num_results)]


def show(label: str, value: object) -> None:
    print(f"{label:<34} {value}")


def main() -> None:
    print("Tools the model sees:")
    print(json.dumps(ToolRegistry.list_tools(), indent=2, ensure_ascii=False))
    print()
    show('call("add", {"a": 5, "b": 3})', ToolRegistry.call("add", {"a": 5, "b": 3}))
    show("add(2, 2) called directly", add(2, 2))
    show("web_search, JSON-string arguments", ToolRegistry.call("web_search", '{"query": "weather", "num_results": 2}'))
    for label, name, args in [
        ("wrong type", "add", {"a": "five", "b": 3}),
        ("missing field", "add", {"a": 1}),
        ("malformed JSON", "add", '{"a": 1,'),
        ("unknown tool", "ad", {}),
    ]:
        result = ToolRegistry.try_call(name, args)
        print(f"\n{label} -> {type(result.error).__name__}:\n{result.for_model()}")
    print()
    passed = 0
    try:
        for _ in range(30):
            ToolRegistry.call("add", {"a": 1, "b": 1})
            passed += 1
    except RateLimitExceeded as exc:
        show("burst past the rate limit", f"{passed} more calls passed, then: {exc} (retry_after={exc.retry_after:.3f})")
    print("\nStats:")
    print(json.dumps(ToolRegistry.stats()["tools"], indent=2))


if __name__ == "__main__":
    main()
