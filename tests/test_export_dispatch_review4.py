"""Dispatch scoped to the tools the model was shown, Gemini's answers as its API stores them, and Gemini schemas
that keep what Gemini can say (review 4)."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, Literal

import pydantic
import pytest
from google.genai import types as genai
from google.protobuf import json_format, struct_pb2
from openai.types.chat import ChatCompletion

from harness_one import ToolError, ToolNotFound, ToolRegistry, hookimpl
from harness_one.dispatch import (
    adispatch_gemini,
    adispatch_openai,
    dispatch,
    dispatch_anthropic,
    dispatch_gemini,
    dispatch_openai,
)
from harness_one.export import gemini_schema


def _openai_call(name: str, arguments: str = "{}", cid: str = "c1") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def _gemini_call(name: str, args: dict[str, Any] | None = None, cid: str = "g1") -> dict[str, Any]:
    return {"function_call": {"id": cid, "name": name, "args": args or {}}}


class _Refusals:
    """Records the refused calls the plugins are told of."""

    name = "refusals"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    @hookimpl
    def harness_call_refused(self, registry: Any, name: str, error: ToolError) -> None:
        self.seen.append((name, error.kind))


@pytest.fixture
def shop() -> tuple[ToolRegistry, list[str]]:
    """A registry with a read-only tool and two destructive ones; the list records what the destructive ones did."""
    reg = ToolRegistry(autoload=False)
    done: list[str] = []

    def search(q: str = "") -> str:
        "Search (read-only)."
        return f"results for {q}"

    def delete_account(user: str) -> str:
        "Delete a user's account."
        done.append(f"account {user}")
        return "deleted"

    def delete_file(path: str) -> str:
        "Delete a file."
        done.append(f"file {path}")
        return "deleted"

    for tool in (search, delete_account, delete_file):
        reg.add(tool)
    return reg, done


# --------------------------------------------------------------------------- 1: names=


def test_a_tool_the_model_was_not_shown_is_not_run_and_no_other_is_named(shop: tuple[ToolRegistry, list[str]]) -> None:
    reg, done = shop
    shown = reg.export("openai", names=["search"])
    out = dispatch_openai(reg, [_openai_call("delete_account", '{"user": "alice"}')], names=shown)
    assert out == [
        {"role": "tool", "tool_call_id": "c1", "content": "Error: Unknown tool 'delete_account'. Available tools: search."}
    ]
    assert done == []


def test_suggestions_come_only_from_the_tools_shown(shop: tuple[ToolRegistry, list[str]]) -> None:
    reg, _ = shop
    call = {"type": "tool_use", "id": "t1", "name": "delete", "input": {}}
    out = dispatch_anthropic(reg, [call], names=["search", "delete_file"])
    assert out[0]["content"] == "Error: Unknown tool 'delete'. Did you mean: 'delete_file'?"
    assert out[0]["is_error"] is True
    # without names=, as before: every tool of the registry may run, and is suggested
    assert (
        dispatch_anthropic(reg, [call])[0]["content"]
        == "Error: Unknown tool 'delete'. Did you mean: 'delete_file', 'delete_account'?"
    )


def test_a_shown_tool_runs_and_an_unshown_one_is_observed_as_refused(shop: tuple[ToolRegistry, list[str]]) -> None:
    reg, done = shop
    refusals = _Refusals()
    reg.plugins.register(refusals)
    out = dispatch(
        reg,
        [_openai_call("search", '{"q": "x"}', "a"), _openai_call("delete_file", '{"path": "/"}', "b")],
        names=("search",),
    )
    assert [answer["content"] for answer in out] == [
        "results for x",
        "Error: Unknown tool 'delete_file'. Available tools: search.",
    ]
    assert done == []
    assert refusals.seen == [("delete_file", "not_found")]


def test_no_tool_shown_names_none() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: "x", name="secret", description="s")
    out = dispatch_openai(reg, [_openai_call("secret")], names=[])
    assert out[0]["content"] == "Error: Unknown tool 'secret'."


def test_a_shown_tool_removed_since_is_refused_as_the_adapters_refuse_it(shop: tuple[ToolRegistry, list[str]]) -> None:
    reg, _ = shop
    shown = reg.export("openai", names=["search"])
    reg.remove("search")
    out = asyncio.run(adispatch_openai(reg, [_openai_call("search")], names=shown))
    assert out[0]["content"] == "Error: Tool 'search' is no longer available; continue without it."


def test_gemini_names_are_mapped_back_before_the_check() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: "code sent", name="2fa", description="Send a code.")
    reg.add(lambda: "wiped", name="wipe", description="Wipe.")
    shown = reg.export("gemini", names=["2fa"])
    assert shown.tool_names == ["2fa"]
    exported = shown.tools[0]["name"]
    assert exported == "_.2fa"
    out = asyncio.run(adispatch_gemini(reg, [_gemini_call(exported, cid="a"), _gemini_call("wipe", cid="b")], names=shown))
    assert out == [
        {"name": "_.2fa", "response": {"output": "code sent"}, "id": "a"},
        {"name": "wipe", "response": {"error": "Unknown tool 'wipe'. Available tools: _.2fa."}, "id": "b"},
    ]


def test_an_unshown_call_still_claims_its_id(shop: tuple[ToolRegistry, list[str]]) -> None:
    reg, done = shop
    calls = [_openai_call("delete_file", '{"path": "/"}', "same"), _openai_call("search", "{}", "same")]
    out = dispatch_openai(reg, calls, names=["search"])
    assert out[1]["content"] == (
        "Error: Invalid tool call: another call in this turn has the id 'same'; it was not run. Send a tool name and its arguments."
    )
    assert done == []


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("search", "names must be an iterable of tool names or an Export, not str"),
        (42, "names must be an iterable of tool names or an Export, not int"),
        (["search", 1], "names must be tool names (strings), not int: 1"),
    ],
)
def test_names_of_the_wrong_kind_raise_before_any_call_runs(
    shop: tuple[ToolRegistry, list[str]], names: Any, message: str
) -> None:
    reg, done = shop
    with pytest.raises(TypeError) as caught:
        dispatch_openai(reg, [_openai_call("delete_file", '{"path": "/"}')], names=names)
    assert str(caught.value) == message
    assert done == []


# --------------------------------------------------------------------------- 3: Gemini data as a Struct holds it


def _stored(answer: dict[str, Any]) -> Any:
    """The response as Gemini's API stores it: the SDK's wire JSON read into a protobuf Struct (doubles, string keys)."""
    wire = json.loads(genai.FunctionResponse.model_validate(answer).model_dump_json(exclude_none=True))
    struct = struct_pb2.Struct()
    json_format.Parse(json.dumps(wire["response"]), struct)
    return json_format.MessageToDict(struct)


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        (1234567890123456789, "1234567890123456789"),
        (-(2**53) - 1, "-9007199254740993"),
        (2**53, 2**53),
        (-(2**53), -(2**53)),
        (10**400, "1" + "0" * 400),
        ([1, 2**64, {"n": 2**63}], [1, "18446744073709551616", {"n": "9223372036854775808"}]),
        (dict(zip((1, "1", True), (5, 7, 9), strict=True)), {"1": 7}),  # 1 and True are one key in Python; "1" comes last
        ({None: 1, 1.5: 2, False: 3}, {"null": 1, "1.5": 2, "false": 3}),
        ({"a\ud800": 2**60}, {"a\ufffd": "1152921504606846976"}),  # (the path for text JSON cannot carry)
        ({(1, 2): float("nan")}, {"[1, 2]": "NaN"}),  # (the path for what json.dumps refuses)
    ],
)
def test_gemini_output_is_what_a_struct_holds_exactly(value: Any, sent: Any) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: value, name="get", description="g")
    answer = dispatch_gemini(reg, [_gemini_call("get")])[0]
    assert answer["response"] == {"output": sent}
    assert _stored(answer) == {"output": sent}
    if isinstance(value, dict) and "a\ud800" not in value:  # keys: as the text the other providers get reads
        assert json.loads(dispatch_openai(reg, [_openai_call("get")])[0]["content"]) == sent


def test_gemini_output_past_the_int_to_text_limit_is_its_digits() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: {"n": 10**5000}, name="get", description="g")
    assert dispatch_gemini(reg, [_gemini_call("get")])[0]["response"] == {"output": {"n": "1" + "0" * 5000}}
    assert dispatch_openai(reg, [_openai_call("get")])[0]["content"] == '{"n": 1' + "0" * 5000 + "}"  # text: as before


# --------------------------------------------------------------------------- 4: the error text's cap


def test_gemini_error_text_is_capped_as_the_others_are() -> None:
    class LateMessageError(ToolError):
        def __init__(self) -> None:
            super().__init__("quota")
            self.message = "quota exceeded for rows: " + ",".join(map(str, range(200_000)))  # written late

    def bulk() -> str:
        "b"
        raise LateMessageError()

    reg = ToolRegistry(autoload=False)
    reg.add(bulk)
    text = dispatch_openai(reg, [_openai_call("bulk")])[0]["content"]
    error = dispatch_gemini(reg, [_gemini_call("bulk")])[0]["response"]["error"]
    assert text.endswith("[error text truncated: 1,288,914 characters in all, the first 9,925 shown]")
    assert error == text.removeprefix("Error: ")


# --------------------------------------------------------------------------- 5: a completion without choices


def test_a_completion_with_no_choices_holds_no_calls(shop: tuple[ToolRegistry, list[str]]) -> None:
    reg, _ = shop
    completion = {"id": "chatcmpl-abc", "object": "chat.completion", "created": 0, "model": "gpt-4.1", "choices": []}
    assert dispatch_openai(reg, ChatCompletion.model_validate(completion)) == []
    assert dispatch_openai(reg, completion) == []
    candidate_without_parts = {"candidates": [{"content": {"role": "model"}, "finish_reason": "STOP"}]}
    assert dispatch_gemini(reg, genai.GenerateContentResponse.model_validate(candidate_without_parts)) == []


# --------------------------------------------------------------------------- 6: Gemini refusals name the call's tool


def test_gemini_refusals_of_a_read_call_carry_its_name() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda a: a, name="add", description="Add.")
    duplicate = dispatch_gemini(reg, [_gemini_call("add", {"a": 1}, "x"), _gemini_call("add", {"a": 2}, "x")])[1]
    assert duplicate == {
        "name": "add",
        "response": {
            "error": "Invalid tool call: another call in this turn has the id 'x'; it was not run. Send a tool name and its arguments."
        },
        "id": "x",
    }
    unwritable = dispatch_gemini(reg, [_gemini_call("add", {"a": 1}, "id\ud800")])[0]
    assert unwritable["name"] == "add" and "id" not in unwritable
    for answer in (duplicate, unwritable):
        assert genai.FunctionResponse.model_validate(answer).name == "add"


# --------------------------------------------------------------------------- 7: Gemini schemas keep what Gemini can say


class Cat(pydantic.BaseModel):
    kind: Literal["cat"]
    meows: int


class Dog(pydantic.BaseModel):
    kind: Literal["dog"]
    barks: bool


class Req(pydantic.BaseModel):
    pet: Annotated[Cat | Dog, pydantic.Field(discriminator="kind")]


def test_a_discriminated_union_and_a_nullable_literal_keep_their_types() -> None:
    def adopt(req: Req, size: Literal["s", "m", None] = "m") -> str:
        "Adopt a pet."
        return "ok"

    reg = ToolRegistry(autoload=False)
    reg.add(adopt)
    exported = reg.export("gemini")
    parameters = exported.tools[0]["parameters"]
    pet = parameters["properties"]["req"]["properties"]["pet"]
    assert [branch["title"] for branch in pet["anyOf"]] == ["Cat", "Dog"]
    assert pet["anyOf"][0]["properties"]["kind"] == {"type": "string", "enum": ["cat"], "title": "Kind"}
    assert parameters["properties"]["size"] == {"nullable": True, "enum": ["s", "m"], "default": "m", "type": "string"}
    assert "$.req.pet: oneOf rewritten as anyOf" in exported.notes["adopt"]
    assert not any(note.startswith("$.size") for note in exported.notes["adopt"])  # nothing lost: null is nullable
    genai.FunctionDeclaration.model_validate(exported.tools[0])


@pytest.mark.parametrize(
    ("schema", "converted", "notes"),
    [
        ({"type": "string", "enum": ["a", "b", None]}, {"type": "string", "nullable": True, "enum": ["a", "b"]}, []),
        ({"enum": [None]}, {"nullable": True}, ["$.x: enum [null] rewritten as nullable (any value allowed)"]),
        ({"type": ["null"]}, {"nullable": True}, ["$.x: type ['null'] rewritten as nullable (any value allowed)"]),
        (
            {"oneOf": [{"type": "string"}, {"type": "null"}]},
            {"type": "string", "nullable": True},
            ["$.x: oneOf rewritten as anyOf"],
        ),
        (
            {"allOf": [{"type": "string", "enum": ["a"]}], "description": "d"},
            {"type": "string", "enum": ["a"], "description": "d"},
            ["$.x: allOf of one schema merged into the schema holding it"],
        ),
        (
            {"allOf": [{"type": "string"}], "type": "integer"},
            {"type": "integer"},
            ["$.x: allOf dropped (it and the schema holding it both set type)"],
        ),
        ({"allOf": [{"type": "string"}, {"minLength": 1}]}, {}, ["$.x: allOf dropped"]),
    ],
)
def test_gemini_schema_keeps_nullability_and_single_alternatives(
    schema: dict[str, Any], converted: dict[str, Any], notes: list[str]
) -> None:
    out, said = gemini_schema({"type": "object", "properties": {"x": schema}})
    assert out["properties"]["x"] == converted
    assert said == notes
    genai.Schema.model_validate(out)


# --------------------------------------------------------------------------- 8: a repeated id after a malformed call


def test_a_call_repeating_the_id_of_a_malformed_one_is_not_run() -> None:
    reg = ToolRegistry(autoload=False)
    paid: list[str] = []

    def pay(to: str) -> str:
        "Pay."
        paid.append(to)
        return f"paid {to}"

    reg.add(pay)
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": None, "arguments": "{}"}},
        _openai_call("pay", '{"to": "bob"}', "call_1"),
    ]
    out = dispatch_openai(reg, calls)
    assert [answer["content"] for answer in out] == [
        "Error: Invalid tool call: the request has no tool 'name'. Send a tool name and its arguments.",
        "Error: Invalid tool call: another call in this turn has the id 'call_1'; it was not run. Send a tool name and its arguments.",
    ]
    assert paid == []


def test_not_found_errors_stay_the_registrys_type() -> None:
    """The refusal of an unshown tool is the registry's ToolNotFound, so code matching on ``kind`` keeps working."""
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: "x", name="a", description="a")
    reg.add(lambda: "y", name="b", description="b")
    refusals = _Refusals()
    reg.plugins.register(refusals)
    dispatch_openai(reg, [_openai_call("b")], names=["a"])
    assert refusals.seen == [("b", ToolNotFound.kind)]


def test_gemini_is_told_the_names_it_was_shown() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: "code sent", name="2fa", description="Send a code.")
    reg.add(lambda: "wiped", name="wipe", description="Wipe.")
    out = dispatch_gemini(reg, [_gemini_call("_.2f")], names=["2fa"])
    assert out[0]["response"] == {"error": "Unknown tool '_.2f'. Did you mean: '_.2fa'?"}


def test_a_held_call_resumed_after_its_tool_was_removed_names_no_other_tool() -> None:
    from harness_one.dispatch import resume
    from harness_one_plugins.approval import ApprovalPlugin

    reg = ToolRegistry(autoload=False)
    reg.add(lambda to: f"sent to {to}", name="transfer", description="t", options={"requires_approval": True})
    reg.add(lambda: "wiped", name="wipe", description="w")
    out = dispatch_openai(reg, [_openai_call("transfer", '{"to": "ann"}', "big")], names=["transfer"])
    [held] = out.pending
    plugin = reg.plugins.get("approval")
    assert isinstance(plugin, ApprovalPlugin)
    plugin.approve(held.call_id)
    reg.remove("transfer")
    assert resume(reg, held) == {
        "role": "tool",
        "tool_call_id": "big",
        "content": "Error: Tool 'transfer' is no longer available; continue without it.",
    }


@pytest.mark.parametrize("fmt", ["openai", "openai-responses", "anthropic", "gemini", "mcp"])
def test_a_description_or_title_holding_a_lone_surrogate_exports_as_utf8(fmt: str) -> None:
    reg = ToolRegistry(standard_plugins=False, autoload=False)

    def lookup(q: str) -> str:
        return q

    reg.add(lookup, description="Find \ud800 things.", options={"title": "Look \udcff up"})
    [tool] = reg.export(fmt).tools
    text = json.dumps(tool, ensure_ascii=False)
    text.encode("utf-8")  # a lone surrogate left in would raise UnicodeEncodeError here
    assert "Find \ufffd things." in text
    if fmt == "mcp":
        assert tool["title"] == "Look \ufffd up"


def _two_tools() -> ToolRegistry:
    reg = ToolRegistry(autoload=False)

    def check(code: str) -> str:
        """Check a 2FA code."""
        return "ok " + code

    reg.register(check, name="2fa-check")
    reg.add(lambda: "wiped", name="wipe", description="Wipe.")
    return reg


def test_gemini_names_may_be_the_names_the_declarations_show() -> None:
    reg = _two_tools()
    shown = [d["name"] for d in reg.export("gemini", names=["2fa-check"]).tools]
    assert shown == ["_.2fa-check"]
    calls = [_gemini_call("_.2fa-check", {"code": "123"}), _gemini_call("wipe", cid="g2")]
    expected = [
        {"name": "_.2fa-check", "response": {"output": "ok 123"}, "id": "g1"},
        {"name": "wipe", "response": {"error": "Unknown tool 'wipe'. Available tools: _.2fa-check."}, "id": "g2"},
    ]
    assert dispatch_gemini(reg, calls, names=shown) == expected
    assert asyncio.run(adispatch_gemini(reg, calls, names=shown)) == expected
    # both spellings of one tool: it runs, and is listed once
    assert dispatch_gemini(reg, calls, names=["2fa-check", "_.2fa-check"]) == expected
    # the registry's name sent for a tool listed as shown runs it too
    assert dispatch_gemini(reg, [_gemini_call("2fa-check", {"code": "7"})], names=shown) == [
        {"name": "2fa-check", "response": {"output": "ok 7"}, "id": "g1"}
    ]


def test_an_unknown_tool_never_suggests_the_name_sent() -> None:
    from harness_one.dispatch import _Shown

    error = _Shown(["2fa"]).not_found("_.2fa", "gemini")
    assert error.message == "Unknown tool '_.2fa'. Available tools: _.2fa."


@pytest.mark.parametrize(
    ("node", "note"),
    [
        ({"enum": [None]}, "$.x: enum [null] rewritten as nullable (any value allowed)"),
        ({"const": None}, "$.x: const null rewritten as nullable (any value allowed)"),
    ],
)
def test_gemini_notes_a_null_only_enum_or_const_made_nullable(node: dict[str, Any], note: str) -> None:
    schema, notes = gemini_schema({"type": "object", "properties": {"x": node}}, tool="t")
    assert schema == {"type": "object", "properties": {"x": {"nullable": True}}}
    assert notes == [note]
