"""The output_limit plugin: per-tool max_output in characters or bytes, truncation with a marker, or refusal."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness_one import Call, Outcome, PluginError, ToolDefinitionError, ToolError, ToolRegistry, applies_to, hookimpl
from harness_one._errors import ERROR_TEXT_LIMIT
from harness_one.dispatch import dispatch
from harness_one_plugins import OutputLimitPlugin
from harness_one_plugins.output import DEFAULT_MAX_OUTPUT, OutputTooLarge

MARKER = re.compile(r"\n\[output truncated: ([\d,]+) (characters|bytes) in all, the first ([\d,]+) shown\]$")


def registry(**options: object) -> ToolRegistry:
    return ToolRegistry(autoload=False, plugin_options={"output_limit": options} if options else None)


def test_the_registry_wide_default_is_a_million_characters_and_truncates() -> None:
    reg = registry()
    reg.add(lambda n: "a" * n, name="text")
    assert reg.call("text", {"n": DEFAULT_MAX_OUTPUT}) == "a" * DEFAULT_MAX_OUTPUT  # at the limit: untouched
    cut = reg.call("text", {"n": DEFAULT_MAX_OUTPUT + 1})
    assert len(cut) == DEFAULT_MAX_OUTPUT
    found = MARKER.search(cut)
    assert found is not None and found.group(1) == "1,000,001" and found.group(2) == "characters"
    assert cut.startswith("a" * int(found.group(3).replace(",", ""))) and found.start() == int(found.group(3).replace(",", ""))
    assert reg.stats()["output_limit"] == {"truncated": 1, "refused": 0}


def test_a_tool_sets_its_own_limit_and_small_results_are_the_same_object() -> None:
    reg = registry()
    reg.add(lambda text: text, name="echo", options={"max_output": 120})
    reg.add(lambda: 10**50, name="number", options={"max_output": 120})
    small = "x" * 120
    assert reg.call("echo", {"text": small}) is small
    assert reg.call("number") == 10**50  # numbers are never limited
    cut = reg.call("echo", {"text": "y" * 1000})
    assert len(cut) == 120 and MARKER.search(cut) and "1,000 characters in all" in cut


def test_bytes_are_counted_in_utf8_and_never_half_a_character() -> None:
    reg = registry()
    reg.add(lambda text: text, name="echo", options={"max_output": {"limit": 150, "unit": "bytes"}})
    assert reg.call("echo", {"text": "é" * 75}) == "é" * 75  # 150 bytes
    cut = reg.call("echo", {"text": "é" * 76})
    assert len(cut.encode()) <= 150 and "152 bytes in all" in cut
    head = cut[: MARKER.search(cut).start()]  # type: ignore[union-attr]
    assert set(head) == {"é"} and len(head.encode()) == int(MARKER.search(cut).group(3))  # type: ignore[union-attr]


def test_refusal_is_a_readable_typed_error_that_is_not_retried() -> None:
    reg = registry(max_output=200, mode="refuse")
    runs: list[int] = []

    def dump() -> str:
        runs.append(1)
        return "z" * 500

    reg.add(dump, idempotent=True, retry={"attempts": 3, "on": [ValueError], "initial": 0})
    result = reg.try_call("dump")
    assert isinstance(result.error, OutputTooLarge) and result.error.kind == "output_too_large"
    assert result.for_model() == (
        "Error: Tool 'dump' returned 500 characters, more than the 200 it may return. "
        "Call it again asking for less: a narrower query, fewer items, or one page of the results."
    )
    assert result.error.to_dict()["size"] == 500 and result.error.to_dict()["limit"] == 200
    assert runs == [1]
    assert reg.stats()["output_limit"] == {"truncated": 0, "refused": 1}


def test_structured_results_are_measured_as_the_model_reads_them() -> None:
    reg = registry(max_output=300)
    rows = [{"id": i, "name": f"row {i}"} for i in range(100)]
    reg.add(lambda: rows, name="rows")
    cut = reg.call("rows")
    assert isinstance(cut, str) and len(cut) == 300 and cut.startswith('[{"id": 0, "name": "row 0"}')
    assert f"{len(json.dumps(rows, ensure_ascii=False)):,} characters in all" in cut

    def table() -> dict[str, list[int]]:
        return {"values": list(range(1000))}

    reg.add(table)  # an output schema: a cut could not be valid, so it is refused
    assert reg.get("table").output_schema is not None
    assert reg.try_call("table").error.kind == "output_too_large"  # type: ignore[union-attr]


def test_the_model_sees_the_cut_result_through_dispatch() -> None:
    reg = registry(max_output=100)
    reg.add(lambda: "w" * 5000, name="long")
    [answer] = dispatch(reg, [{"id": "c1", "type": "function", "function": {"name": "long", "arguments": "{}"}}])
    assert answer["tool_call_id"] == "c1" and len(answer["content"]) == 100 and "5,000 characters in all" in answer["content"]


def test_an_idempotent_replay_returns_the_same_cut_result() -> None:
    reg = registry(max_output=100)
    reg.add(lambda n: "v" * n, name="gen", idempotent=True)
    first = reg.call("gen", {"n": 400}, idempotency_key="k")
    assert reg.call("gen", {"n": 400}, idempotency_key="k") == first and len(first) == 100


def test_opting_out_and_a_plugin_without_default() -> None:
    reg = registry(max_output=100)
    reg.add(lambda: "u" * 1000, name="free", options={"max_output": None})
    assert len(reg.call("free")) == 1000
    only_declared = registry(max_output=None)
    only_declared.add(lambda: "u" * 1000, name="free")
    only_declared.add(lambda: "u" * 1000, name="capped", options={"max_output": 100})
    assert len(only_declared.call("free")) == 1000 and len(only_declared.call("capped")) == 100
    assert "output_limit" not in only_declared.plugins.plan.for_tool(only_declared.get("free")).on_error_names


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (0, "positive integer"),
        ("big", "positive integer"),
        ({"limit": 500, "unit": "tokens"}, "unit must be one of"),
        ({"limit": 500, "mode": "drop"}, "mode must be one of"),
        ({"limit": 500, "size": 1}, "unknown max_output keys"),
        (50, "at least 100"),
    ],
)
def test_bad_options_are_definition_errors(option: object, message: str) -> None:
    reg = registry()
    with pytest.raises(ToolDefinitionError, match=message):
        reg.add(lambda: "x", name="bad", options={"max_output": option})
    assert "bad" not in reg


def test_plugin_options_are_checked_when_the_plugin_is_built() -> None:
    with pytest.raises(ToolDefinitionError, match="unit must be one of"):
        OutputLimitPlugin(unit="tokens")
    with pytest.raises(PluginError, match="'output_limit'"):
        ToolRegistry(autoload=False, plugin_options={"output_limit": {"mode": "truncate", "max_output": 10}})


def test_a_tool_replaced_while_its_call_runs_is_still_limited() -> None:
    reg = registry(max_output=100)

    def refresh() -> str:
        reg.add(lambda: "new", name="refresh", replace=True)  # e.g. a remote listing refreshed mid-call
        return "r" * 1000

    reg.add(refresh)
    assert len(reg.call("refresh")) == 100 and reg.call("refresh") == "new"


def test_a_str_subclass_from_a_str_tool_is_truncated_like_str() -> None:
    class Text(str):
        pass

    reg = ToolRegistry(autoload=False)

    def text() -> str:
        return Text("y" * 5000)

    reg.add(text, options={"max_output": 1000})  # its output schema says string: a refusal was for structured results
    out = reg.call("text")
    assert type(out) is str and len(out) == 1000 and out.endswith("the first 935 shown]")


def _in_itself() -> list[object]:
    a: list[object] = []
    a.append(a)  # was 200 levels of nested lists, cut at the fallback's depth
    return a


@dataclass
class _Node:
    kids: list[object] = field(default_factory=list)


def _node_in_itself() -> _Node:
    node = _Node()
    node.kids.append(node)  # dataclasses.asdict raised RecursionError
    return node


@pytest.mark.parametrize(("fn", "shown"), [(_in_itself, '["<cycle>"]'), (_node_in_itself, '{"kids": ["<cycle>"]}')])
def test_a_result_inside_itself_is_rendered_with_its_cycles_cut(fn: Any, shown: str) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(fn, name="cyclic", options={"max_output": 1000})
    assert reg.try_call("cyclic").for_model() == shown


def test_a_result_twice_inside_itself_renders_at_once() -> None:
    """Followed, ``a = []; a += [a, a]`` has 2**200 paths to the fallback's depth: it hung the call
    (run apart, so a regression fails at the timeout instead of hanging the suite)."""
    code = (
        "from harness_one import ToolRegistry\n"
        "def twice() -> list:\n    a = []\n    a.extend([a, a])\n    return a\n"
        "reg = ToolRegistry(autoload=False)\nreg.add(twice, options={'max_output': 1000})\n"
        "print(reg.try_call('twice').for_model())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout == '["<cycle>", "<cycle>"]\n'


def test_a_huge_int_result_is_measured() -> None:
    """An int was never measured: 7**200000 reached the model as 169,020 digits under a limit of 1,000."""
    reg = ToolRegistry(plugins={"output_limit": OutputLimitPlugin(max_output=1000)}, autoload=False)
    reg.add(lambda: 7**200000, name="power")
    reg.add(lambda: -(10**17), name="small")
    assert len(reg.try_call("power").for_model()) == 1000
    assert reg.call("small") == -(10**17)  # an int that cannot be long is not measured: unchanged


def test_an_error_message_written_after_init_is_cut_for_the_model() -> None:
    """``err.message = ...`` after __init__ skipped the cut: 5,000,000 characters reached the model."""
    reg = ToolRegistry(autoload=False)

    def loud() -> None:
        err = ToolError("short")
        err.message = "A" * 5_000_000
        raise err

    reg.add(loud)
    result = reg.try_call("loud")
    assert len(result.for_model()) == len("Error: ") + ERROR_TEXT_LIMIT
    assert len(result.to_dict()["error"]["message"]) == ERROR_TEXT_LIMIT


class Fallback:
    """An on-error hook that recovers every failure with ``answer`` (a "serve stale data" plugin)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Outcome:
        return Outcome.success(self.answer)


def failing() -> str:
    raise ConnectionError("down")


@pytest.mark.parametrize("aio", [False, True], ids=["call", "acall"])
def test_an_answer_an_on_error_hook_recovers_with_is_bounded_as_a_result_is(aio: bool) -> None:
    """A recovered ``Outcome.success`` reaches no post-call hook: the output limit bounds it from on_error (before,
    5,000,011 characters reached the model past a 10,000 limit)."""
    reg = ToolRegistry(
        autoload=False,
        plugins={"fallback": Fallback("stale " + "x" * 50_000)},
        plugin_options={"output_limit": {"max_output": 10_000}},
    )
    reg.add(failing, name="fetch")
    result = asyncio.run(reg.atry_call("fetch")) if aio else reg.try_call("fetch")
    assert result.ok and len(result.value) <= 10_000 and MARKER.search(result.value), len(result.value)
    assert result.value.startswith("stale xxx") and reg.stats()["output_limit"]["truncated"] == 1

    small = ToolRegistry(autoload=False, plugins={"fallback": Fallback({"rows": [1, 2]})})
    small.add(failing, name="fetch")
    assert small.call("fetch") == {"rows": [1, 2]}  # within the limit: the same answer


def test_a_recovered_answer_over_a_refusing_limit_is_refused() -> None:
    reg = ToolRegistry(
        autoload=False,
        plugins={"fallback": Fallback(["y" * 100] * 100)},
        plugin_options={"output_limit": {"max_output": 1_000, "mode": "refuse"}},
    )
    reg.add(failing, name="fetch")
    result = reg.try_call("fetch")
    assert isinstance(result.error, OutputTooLarge) and reg.stats()["output_limit"]["refused"] == 1


def test_an_after_decision_on_error_hook_runs_last_and_only_when_another_decided() -> None:
    seen: list[str] = []

    class Observer:
        @hookimpl(tryfirst=True)
        @applies_to(after_decision=True)
        def harness_on_error(self, call: Call, error: BaseException) -> None:
            seen.append(f"observer saw {call.decision!r}")

    class Decider:
        @hookimpl
        def harness_on_error(self, call: Call, error: BaseException) -> Outcome | None:
            seen.append("decider")
            return Outcome.success("recovered") if call.tool.name == "recovered" else None

    reg = ToolRegistry(autoload=False, standard_plugins=False, plugins={"observer": Observer(), "decider": Decider()})
    reg.add(failing, name="recovered")
    reg.add(failing, name="failed")
    assert reg.call("recovered") == "recovered"  # (tryfirst, yet after the decider)
    assert seen == ["decider", "observer saw Outcome(value='recovered', error=None)"]
    seen.clear()
    assert not reg.try_call("failed").ok
    assert seen == ["decider"]  # nothing decided: not called
