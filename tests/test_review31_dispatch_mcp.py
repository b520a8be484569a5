"""Gemini's unknown-tool answers suggest the names Gemini was shown; the MCP server decides each output schema's
check in one walk of it (review 31)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness_one import ToolNotFound, ToolRegistry
from harness_one.dispatch import adispatch_gemini, dispatch_gemini, dispatch_openai
from harness_one.mcp import _server


def _gemini_call(name: str, cid: str = "g1") -> dict[str, Any]:
    return {"function_call": {"id": cid, "name": name, "args": {}}}


@pytest.fixture
def reg() -> ToolRegistry:
    """``2fa``, which Gemini is shown as ``_.2fa``, and ``wipe``, shown as it is."""
    registry = ToolRegistry(autoload=False)
    registry.add(lambda: "code sent", name="2fa", description="Send a code.")
    registry.add(lambda: "wiped", name="wipe", description="Wipe.")
    return registry


def test_gemini_is_told_the_names_it_was_shown_without_names(reg: ToolRegistry) -> None:
    for sent in ("_.2f", "2f"):  # a near miss of the exported name, and of the registry's
        [answer] = dispatch_gemini(reg, [_gemini_call(sent)])
        assert answer["response"] == {"error": f"Unknown tool '{sent}'. Did you mean: '_.2fa'?"}
        assert answer["name"] == sent
    # as with names=: the same words either way
    assert dispatch_gemini(reg, [_gemini_call("_.2f")]) == dispatch_gemini(reg, [_gemini_call("_.2f")], names=["2fa"])
    [answer] = asyncio.run(asyncio.wait_for(adispatch_gemini(reg, [_gemini_call("_.2f")]), 10))
    assert answer["response"] == {"error": "Unknown tool '_.2f'. Did you mean: '_.2fa'?"}
    # the suggested name is one Gemini takes, and it runs the tool
    assert dispatch_gemini(reg, [_gemini_call("_.2fa")])[0]["response"] == {"output": "code sent"}


def test_gemini_is_listed_the_names_it_was_shown_when_none_is_close(reg: ToolRegistry) -> None:
    [answer] = dispatch_gemini(reg, [_gemini_call("zzzzzz")])
    assert answer["response"] == {"error": "Unknown tool 'zzzzzz'. Available tools: _.2fa, wipe."}


def test_other_providers_and_the_registry_keep_the_registrys_names(reg: ToolRegistry) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "2f", "arguments": "{}"}}
    assert dispatch_openai(reg, [call])[0]["content"] == "Error: Unknown tool '2f'. Did you mean: '2fa'?"
    with pytest.raises(ToolNotFound, match="Did you mean: '2fa'"):
        reg.get("2f")


def test_the_registrys_notes_after_the_names_are_kept(reg: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    """A note the registry adds after its suggestions (a tool package that failed to load) stays in the answer."""
    refuse = reg._not_found

    def with_note(name: Any, *, loading: bool = False) -> ToolNotFound:
        error = refuse(name, loading=loading)
        error.message += " Its tool package codes failed to load: boom"
        error.args = (error.message,)
        return error

    monkeypatch.setattr(reg, "_not_found", with_note)
    [answer] = dispatch_gemini(reg, [_gemini_call("_.2f")])
    assert answer["response"] == {
        "error": "Unknown tool '_.2f'. Did you mean: '_.2fa'? Its tool package codes failed to load: boom"
    }


class _Counted(dict[str, Any]):
    """A schema node that counts the walks over it (each reads its values once)."""

    walks = 0

    def values(self) -> Any:
        type(self).walks += 1
        return super().values()


@pytest.mark.parametrize(
    ("properties", "fits", "misfits", "problem"),
    [
        ({"n": {"type": "integer"}}, {"n": 2}, {"n": "2"}, "at $.n: '2' is not of type 'integer'"),  # jsonschema-rs first
        ({"n": {"type": "integer", "multipleOf": 2}}, {"n": 2}, {"n": 3}, "at $.n: 3 is not a multiple of 2"),  # Python
        ({"s": {"type": "string", "pattern": "^a+$"}}, {"s": "aa"}, {"s": "b"}, 'at $.s: "b" does not match "^a+$"'),
        ({"s": {"type": "string", "pattern": "a\\Z"}}, {"s": "a"}, {"s": "b"}, "at $.s: 'b' does not match 'a\\\\Z'"),
    ],
    ids=["fast", "python", "bounded", "pattern-python-only"],
)
def test_an_output_schema_is_walked_once_and_checks_as_before(
    properties: dict[str, Any], fits: Any, misfits: Any, problem: str
) -> None:
    _Counted.walks = 0
    check = _server._output_check({"type": "object", "properties": _Counted(properties)})
    assert _Counted.walks == 1
    assert check(fits) is None
    assert check(misfits) == problem
    assert _Counted.walks == 1  # (decided once: no result walks the schema again)


def test_the_serving_decision_is_made_once_per_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[Any] = []
    reading = _server._reading

    def counted(schema: dict[str, Any]) -> Any:
        walked.append(schema)
        return reading(schema)

    monkeypatch.setattr(_server, "_reading", counted)
    check = _server._output_check({"type": "object", "properties": {"n": {"type": "integer"}}})
    assert [check({"n": 1}), check({"n": 2})] == [None, None]
    assert len(walked) == 1
