"""Findings of the twenty-ninth review: exports, contrib tools and shared state, each as a user or a model meets it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness_one import ToolError, ToolRegistry
from harness_one._cli import main
from harness_one.dispatch import adispatch_openai, dispatch_openai
from harness_one.export import StrictSchemaError

# ---------------------------------------------------------------- a property whose schema is false


def _with_false_property(*, nested: bool = False) -> ToolRegistry:
    registry = ToolRegistry(autoload=False)

    @registry.add
    def add(a: float, b: float = 1.0) -> float:
        """Add."""
        return a + b

    never: Any = {"type": "object", "properties": {"b": False}} if nested else False
    registry.add(
        lambda **kw: kw,
        name="legacy",
        description="An imported tool with a property no value may have.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}, "old": never}},
    )
    return registry


@pytest.mark.parametrize("nested", [False, True])
def test_a_false_property_makes_its_tool_not_strict_and_no_other(nested: bool) -> None:
    registry = _with_false_property(nested=nested)
    where = "$.old.b" if nested else "$.old"
    auto = registry.export("openai", strict="auto")
    assert auto.not_strict == {"legacy": [f"{where}: boolean schemas are not supported"]}
    strict_add = next(t for t in auto.tools if t["function"]["name"] == "add")
    assert strict_add["function"]["strict"] is True
    with pytest.raises(StrictSchemaError, match=r"Tool 'legacy' cannot be exported in strict mode: \$\.old"):
        registry.export("openai", strict=True)
    call = [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": null}'}}]
    assert dispatch_openai(registry, call, strict=True) == [{"role": "tool", "tool_call_id": "c1", "content": "3.0"}]


async def test_a_false_property_leaves_the_async_strict_dispatch_working() -> None:
    call = [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}]
    answers = await adispatch_openai(_with_false_property(), call, strict="auto")
    assert answers == [{"role": "tool", "tool_call_id": "c1", "content": "3.0"}]


def test_run_answers_a_line_that_failed_after_it_was_read_on_its_id(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import harness_one._requests as requests

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("resolve broke")

    monkeypatch.setattr(requests, "resolve", broken)
    tools = tmp_path / "echo_tools.py"
    tools.write_text(
        'from harness_one import define_tool\n\n@define_tool\ndef echo(text: str) -> str:\n    """Echo."""\n    return text\n'
    )
    lines = '{"id": "call_9", "name": "echo", "arguments": {"text": "hi"}}\n'
    done = CliRunner().invoke(main, ["--tools", str(tools), "run"], input=lines)
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == "call_9" and answer["ok"] is False
    assert answer["error"]["message"] == "line 1: internal error: RuntimeError: resolve broke"


# ---------------------------------------------------------------- property names Anthropic refuses


def test_the_anthropic_export_notes_each_property_name_anthropic_refuses() -> None:
    registry = ToolRegistry(autoload=False)
    names = ["filter[bundleId]", "$top", "x" * 65, "", "ok.name-1", "x" * 64]
    registry.add(
        lambda **kw: kw,
        name="remote",
        description="As an MCP server writes its schema.",
        parameters={"type": "object", "properties": {name: {"type": "string"} for name in names}},
    )
    exported = registry.export("anthropic")
    assert list(exported.tools[0]["input_schema"]["properties"]) == names  # exported as it is
    notes = exported.notes["remote"]
    assert len(notes) == 4 and all("outside Anthropic's rule" in note for note in notes)
    assert notes[0].startswith('$["filter[bundleId]"]: ') and notes[3].startswith('$[""]: ')
    assert registry.export("openai").notes.get("remote") is None  # OpenAI takes them


# ---------------------------------------------------------------- an idempotent replay reads as the first answer


class _Dup(ToolError):
    """An error whose dict has keys 1 and "1" (one key in JSON)."""

    kind = "dup_keys"

    def __init__(self) -> None:
        super().__init__("out of quota")

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), 1: "a", "1": "b"}  # type: ignore[dict-item]


@pytest.mark.parametrize("state", ["memory:", "sqlite", "redis"])
def test_a_replay_shows_the_model_the_text_of_the_first_answer(
    state: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Read back from JSON, bytes were shown without their quotes and keys 1 and "1" became one.
    url = {"sqlite": f"sqlite:///{tmp_path / 'state.sqlite3'}", "redis": None}.get(state, state)
    registry = ToolRegistry(state=url or request.getfixturevalue("redis_url"), autoload=False)
    registry.add(lambda: {1: "a", "1": "b"}, name="dup", description="Keys one in JSON.", idempotent=True)
    registry.add(lambda: {3, 1}, name="aset", description="A set, read back a list.", idempotent=True)
    registry.add(lambda: b"ok", name="raw", description="Bytes: a string read back.", idempotent=True)
    registry.add(lambda: (_ for _ in ()).throw(_Dup()), name="fails", description="A failure.", idempotent=True)
    for name, text in (("dup", '{"1": "a", "1": "b"}'), ("aset", "[1, 3]")):
        first = registry.try_call(name, {}, idempotency_key="k")
        again = registry.try_call(name, {}, idempotency_key="k")
        assert first.ok and again.ok and first.ran and not again.ran, (name, again)
        assert first.for_model() == again.for_model() == text, name
    assert registry.try_call("aset", {}, idempotency_key="k").value == ({1, 3} if state == "memory:" else [1, 3])
    assert registry.try_call("raw", {}, idempotency_key="k").value == b"ok"
    assert registry.try_call("raw", {}, idempotency_key="k").value == (b"ok" if state == "memory:" else "ok")
    first_error = registry.try_call("fails", {}, idempotency_key="k").error
    replayed = registry.try_call("fails", {}, idempotency_key="k").error  # an error's dict is read back as data
    assert first_error is not None and replayed is not None and replayed.replayed and not first_error.replayed
    assert replayed.message == first_error.message == "out of quota"


# ---------------------------------------------------------------- the group's --mcp servers closed as a command ends


def test_the_group_s_mcp_servers_close_holding_sigterm_unless_one_was_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    # serve's SystemExit(143) on its way out: a second SIGTERM during the close takes the default action
    import harness_one.mcp._command as command
    from harness_one._cli._main import _close_servers

    held: list[bool] = []
    monkeypatch.setattr(command, "close_servers", lambda servers, *, hold_sigterm=True: held.append(hold_sigterm))
    _close_servers([object()])
    try:
        raise SystemExit(143)
    except SystemExit:
        _close_servers([object()])
    assert held == [True, False]


# ---------------------------------------------------------------- a hook's wrong answer, shown masked


def test_a_wrong_answer_of_a_pre_call_or_on_error_hook_is_shown_masked() -> None:
    from harness_one import Outcome, hookimpl

    creds = {"api_key": "sk-live-abcdefghijklmnop1234", "password": "hunter2"}

    class Returns:
        @hookimpl
        def harness_pre_call(self, call: Any) -> Any:
            return creds

    class Recovers:
        @hookimpl
        def harness_on_error(self, call: Any, error: Any) -> Any:
            return Outcome(error=ValueError(f"password=hunter2 {creds}"))  # type: ignore[arg-type]

    def tool(x: int = 0) -> int:
        """Fails when x is set."""
        if x:
            raise RuntimeError("down")
        return x

    for plugin, x in ((Returns, 0), (Recovers, 1)):
        registry = ToolRegistry(autoload=False, standard_plugins=False, plugins={"p": plugin})
        registry.add(tool, name="t")
        result = registry.try_call("t", {"x": x})
        assert result.error is not None and result.error.kind == "plugin_error" and result.error.plugin == "p"
        text = json.dumps(result.to_dict())
        assert "hook of plugin 'p' returned" in text and "[REDACTED]" in text
        assert "sk-live" not in text and "hunter2" not in text


# ---------------------------------------------------------------- what a per_tool factory gives is checked


@pytest.mark.parametrize(
    ("prepared", "said"),
    [
        (42, "gave int 42"),
        (lambda call, extra: None, "gave a function that cannot take (call)"),
        ("a string", "gave str 'a string'"),
    ],
)
def test_a_per_tool_factory_giving_no_hook_function_is_a_plugin_error_naming_it(prepared: Any, said: str) -> None:
    from harness_one import hookimpl, per_tool

    class Prepares:
        @hookimpl
        @per_tool(lambda plugin, tool: prepared)
        def harness_pre_call(self, call: Any) -> None:
            return None

    registry = ToolRegistry(autoload=False, standard_plugins=False, plugins={"prep": Prepares})
    registry.add(lambda: "ran", name="t", description="A tool.")
    result = registry.try_call("t", {})
    assert not result.ok and not result.ran and result.error is not None and result.error.plugin == "prep"
    assert result.error.message.startswith(f"Plugin 'prep': its per_tool factory of pre_call {said} for 't'")


class _AsyncCallable:
    async def __call__(self, call: Any, error: Any) -> None:
        return None


async def _later(call: Any, error: Any) -> None:
    return None


@pytest.mark.parametrize("prepared", [_later, _AsyncCallable()], ids=["async def", "async __call__"])
def test_a_per_tool_factory_giving_a_coroutine_function_is_refused_not_left_unawaited(prepared: Any) -> None:
    from harness_one import hookimpl, per_tool

    class Prepares:
        @hookimpl
        @per_tool(lambda plugin, tool: prepared)
        def harness_on_error(self, call: Any, error: Any) -> None:
            return None

    registry = ToolRegistry(autoload=False, standard_plugins=False, plugins={"prep": Prepares})
    registry.add(lambda: "ran", name="t", description="A tool.")
    result = registry.try_call("t", {})
    assert result.error is not None and "gave a coroutine function" in result.error.message and result.error.plugin == "prep"


# ---------------------------------------------------------------- an approval is for the tool as it was shown


def test_an_approval_given_before_the_tool_was_replaced_does_not_run_its_replacement() -> None:
    from harness_one import ManualClock

    registry = ToolRegistry(autoload=False, clock=ManualClock())
    ran: list[str] = []

    def transfer(to: str, amount: float) -> str:
        """Send money (sandbox)."""
        ran.append("sandbox")
        return "sandbox"

    def transfer_live(to: str, amount: float) -> str:
        """Send money."""
        ran.append("live")
        return "live"

    registry.add(transfer, name="transfer", options={"requires_approval": True})
    arguments = {"to": "bob", "amount": 5}
    held = registry.try_call("transfer", arguments, call_id="c1")
    assert held.error is not None and held.error.kind == "approval_required"
    registry.plugins.get("approval").approve("c1")
    registry.add(transfer_live, name="transfer", replace=True, options={"requires_approval": True})
    again = registry.try_call("transfer", arguments, call_id="c1")
    assert again.error is not None and again.error.kind == "approval_conflict" and "its tool as registered" in again.error.message
    fresh = registry.try_call("transfer", arguments, call_id="c2")  # the replacement is asked for anew
    assert fresh.error is not None and fresh.error.kind == "approval_required" and ran == []
    registry.plugins.get("approval").approve("c2")
    assert registry.call("transfer", arguments, call_id="c2") == "live" and ran == ["live"]


def test_the_concurrency_plugin_forgets_a_removed_tool() -> None:
    registry = ToolRegistry(autoload=False)
    for n in range(50):
        registry.add(lambda: "ran", name=f"t{n}", description="A capped tool.", max_concurrency=1)
        registry.call(f"t{n}", {})
        registry.remove(f"t{n}")
    registry.add(lambda: "ran", name="kept", description="A capped tool.", max_concurrency=1)
    registry.call("kept", {})
    assert registry.stats()["concurrency"]["running"] == {"kept": 0}
