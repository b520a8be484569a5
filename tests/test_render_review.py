"""Results and errors that stop no answer: broken ``__str__``, non-text and huge messages, non-finite numbers."""

from __future__ import annotations

import json
import math
import sys
import types
from dataclasses import dataclass
from typing import Any

import pytest

from harness_one import (
    RateLimitExceeded,
    Redactor,
    RetryableError,
    ToolArgumentError,
    ToolError,
    ToolRegistry,
    ToolTimeout,
    hookimpl,
)
from harness_one._errors import ERROR_TEXT_LIMIT, PROBLEMS_LIMIT, ArgumentProblem, ToolExecutionError, capped, outside_text
from harness_one._render import dumps, fingerprint, json_data
from harness_one.dispatch import dispatch


class Broken:
    def __str__(self) -> str:
        raise RuntimeError("broken __str__")

    __repr__ = __str__


class BrokenModel:
    def model_dump(self) -> Any:
        raise ValueError("cannot dump")

    def __str__(self) -> str:
        return "a model"


@dataclass
class Point:
    x: int
    y: int


def _openai(name: str) -> list[dict[str, Any]]:
    return [{"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}]


@pytest.mark.parametrize("limit", [None, 50_000])
def test_a_result_whose_str_raises_is_answered(limit: int | None) -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"output_limit": {"max_output": limit}})
    reg.add(lambda: {"value": Broken()}, name="odd")
    reg.add(lambda: [1, Broken()], name="odd_list")
    result = reg.try_call("odd")
    assert result.ok and result.for_model() == '{"value": "<Broken>"}'  # not a plugin's failure either
    assert dumps(result.to_dict()).startswith('{"ok": true, "result": {"value": "<Broken>"}')  # what `run` writes
    assert dispatch(reg, _openai("odd_list"))[0]["content"] == '[1, "<Broken>"]'
    gemini = dispatch(reg, [{"id": "g", "name": "odd", "args": {}}], provider="gemini")
    assert gemini[0]["response"] == {"output": {"value": "<Broken>"}}


def test_unreadable_values_anywhere_are_written_by_str_or_type() -> None:
    half = Point(1, 2)
    del half.y  # a field that raises when read, and so does the dataclass's repr
    value = {(1, Broken()): Broken(), "model": BrokenModel(), "half": half, "nan": math.nan}
    assert json.loads(dumps(value)) == {"<list>": "<Broken>", "model": "a model", "half": "<Point>", "nan": "NaN"}
    assert json_data({"b": Broken()}) == {"b": "<Broken>"}


def test_a_value_whose_repr_raises_has_a_fingerprint() -> None:
    assert fingerprint({"b": Broken()}) == fingerprint({"b": Broken()})  # a caller's context, for the cache plugin


@pytest.mark.parametrize(
    ("message", "text"),
    [(ConnectionError("upstream reset"), "upstream reset"), ({"code": 42}, "{'code': 42}"), (Broken(), "<Broken>")],
)
def test_a_tool_error_message_that_is_not_text_becomes_text(message: Any, text: str) -> None:
    def flaky() -> None:
        raise RetryableError(message)

    reg = ToolRegistry(autoload=False)
    reg.add(flaky)
    result = reg.try_call("flaky")
    assert result.error is not None and result.error.message == str(result.error) == text
    assert result.for_model() == f"Error: {text}"
    assert json.loads(json.dumps(result.to_dict()))["error"]["message"] == text
    assert dispatch(reg, _openai("flaky"))[0]["content"] == f"Error: {text}"
    assert ToolError(message).args == (text,)
    assert RateLimitExceeded(message, retry_after=1).message == text


def test_a_tools_own_error_text_is_capped() -> None:
    for err in (ToolError("t" * 1_000_000), RetryableError("r" * 1_000_000), RateLimitExceeded("x" * 10**6, retry_after=1)):
        assert len(err.message) == ERROR_TEXT_LIMIT and str(err) == err.message == err.args[0]
        assert err.message.endswith("[error text truncated: 1,000,000 characters in all, the first 9,925 shown]")
    reg = ToolRegistry(autoload=False)

    def loud() -> None:
        raise ToolError("t" * 1_000_000)

    reg.add(loud)
    assert len(dispatch(reg, _openai("loud"))[0]["content"]) == len("Error: ") + ERROR_TEXT_LIMIT


def test_a_tools_argument_error_keeps_a_bounded_listing() -> None:
    problems = [ArgumentProblem(f"$.a{i}", "bad") for i in range(50_000)]
    err = ToolArgumentError(problems)
    assert len(err.problems) == PROBLEMS_LIMIT + 1 and err.problems[-1].keyword == "limits"
    assert err.problems[-1].message == f"only the first {PROBLEMS_LIMIT} of 50,000 problems are listed"
    assert len(err.to_dict()["problems"]) == PROBLEMS_LIMIT + 1 and len(err.message) < 2_000
    huge = ToolArgumentError([ArgumentProblem("$.a", "x" * 1_000_000)])
    assert len(huge.message) <= ERROR_TEXT_LIMIT and len(huge.with_tool("named").message) <= ERROR_TEXT_LIMIT
    assert "1,000,007 characters in all" in huge.message and huge.message.endswith("call 'named' again.")


def test_a_long_listing_ends_by_saying_how_many_more_there_are() -> None:
    """Problems whose lines pass the text limit: the message lists what fits, says how many more, and ends whole."""
    text = "expected a valid e-mail address such as name@example.com, got " + "y" * 60
    err = ToolArgumentError([ArgumentProblem(f"$.rows[{i}].email", text) for i in range(150)]).with_tool("mail")
    assert len(err.message) <= ERROR_TEXT_LIMIT and "[error text truncated" not in err.message
    shown = err.message.count("\n- $.rows[")
    assert 0 < shown < PROBLEMS_LIMIT
    assert err.message.startswith("Invalid arguments for tool 'mail' (150 problems):\n")
    assert err.message.endswith(
        f"- ... and {150 - shown} more, not shown here (the first {PROBLEMS_LIMIT} are in its problems)\nFix the arguments and call 'mail' again."
    )
    few = ToolArgumentError([ArgumentProblem(f"$.rows[{i}].email", text) for i in range(90)]).with_tool("mail")
    assert few.message.startswith("Invalid arguments for tool 'mail' (90 problems):\n")
    assert few.message.endswith(
        f"- ... and {90 - few.message.count(chr(10) + '- $.rows[')} more, not shown here (each is in the error's problems)\nFix the arguments and call 'mail' again."
    )
    huge = ToolArgumentError([ArgumentProblem("$.a", "z" * 50_000), ArgumentProblem("$.b", "bad")])
    assert len(huge.message) <= ERROR_TEXT_LIMIT and "- $.a: zzz" in huge.message and "and 1 more" in huge.message


def test_the_first_line_counts_problems_not_the_note_ending_a_cut_listing() -> None:
    """150 problems said "(101 problems)": the 100 kept and the note saying how many there were."""
    err = ToolArgumentError([ArgumentProblem(f"$.a{i}", "bad") for i in range(150)], tool="t")
    assert err.message.startswith("Invalid arguments for tool 't' (150 problems):\n- $.a0: bad\n")
    assert err.problems[-1].is_listing_cut and not any(p.is_listing_cut for p in err.problems[:-1])
    assert err.with_tool("u").message.startswith("Invalid arguments for tool 'u' (150 problems):")
    # Rebuilt from its dict (the total is not a field) or cut by the validation plugin (which stops counting).
    again = ToolArgumentError.from_dict(err.to_dict()).with_tool("v")
    assert again.message.startswith("Invalid arguments for tool 'v' (at least 100 problems):")
    cut = ToolArgumentError([ArgumentProblem("$.a", "bad"), ArgumentProblem.listing_cut("only the first 1 problems are listed")])
    assert cut.message.startswith("Invalid arguments (at least 1 problem):\n- $.a: bad\n- $: only the first 1")
    assert ToolArgumentError([ArgumentProblem("$.a", "bad")]).message.startswith("Invalid arguments (1 problem):")


def test_from_dict_of_a_subclass_rebuilds_its_fields() -> None:
    class OrderRefused(ToolArgumentError):
        pass

    class Slow(ToolTimeout):
        pass

    problem = ArgumentProblem("$.sku", "unknown SKU", "enum", "a known SKU", "x")
    data = OrderRefused([problem], tool="place").to_dict()
    back = ToolError.from_dict(json.loads(json.dumps(data)))
    assert isinstance(back, OrderRefused) and back.problems == [problem]
    assert back.to_dict() == data and "'other'" in back.with_tool("other").message
    slow = ToolError.from_dict(Slow(2.0, tool="t").to_dict())
    assert isinstance(slow, Slow) and slow.timeout == 2.0


def test_a_module_imported_twice_does_not_make_its_error_classes_ambiguous() -> None:
    """A plugin module imported again (reloaded, or re-imported after sys.modules was cleared) made its
    errors' names ambiguous: a replayed OutputTooLarge came back as a plain ToolError. The class its
    module holds now is meant; another module's class of that name still makes the name ambiguous."""
    source = "from harness_one import ToolError\nclass ReloadedRefusal(ToolError):\n    kind = 'reloaded'\n"

    def load(name: str) -> Any:
        module = types.ModuleType(name)
        sys.modules[name] = module
        exec(compile(source, name, "exec"), module.__dict__)  # what importing the module runs
        return module

    try:
        first = load("plugin_imported_twice")
        data = first.ReloadedRefusal("refused", tool="t").to_dict()
        second = load("plugin_imported_twice")
        assert first.ReloadedRefusal is not second.ReloadedRefusal
        assert type(ToolError.from_dict(data)) is second.ReloadedRefusal  # the module's class now
        sys.modules["plugin_imported_twice"] = first  # the first import put back (as a test fixture restores it)
        back = ToolError.from_dict(data)
        assert type(back) is first.ReloadedRefusal and (back.message, back.tool) == ("refused", "t")
        load("plugin_elsewhere")  # another module's class of that name: which one is meant is unknown
        assert type(ToolError.from_dict(data)) is ToolError
    finally:
        sys.modules.pop("plugin_imported_twice", None)
        sys.modules.pop("plugin_elsewhere", None)


def test_capped_is_never_longer_than_its_limit() -> None:
    for limit in range(200):
        for size in (limit + 1, limit + 5, 10**6):
            out = capped("x" * size, limit)
            assert len(out) <= limit and out[:1] == "x"[:limit]
    assert capped("x" * 10**6, 50) == "x" * 50  # no room for the marker: cut plainly
    assert capped("x" * 75, 74).endswith("the first 9 shown]")  # where the number shown gains a digit


@pytest.mark.parametrize(
    "err",
    [
        ToolTimeout(math.inf, tool="t"),
        ToolTimeout(math.nan),
        RateLimitExceeded(retry_after=math.nan),
        RetryableError("r", retry_after=-math.inf),
    ],
)
def test_to_dict_of_non_finite_numbers_is_json(err: ToolError) -> None:
    data = err.to_dict()
    text = json.dumps(data, allow_nan=False)
    assert dumps(err.to_dict()) == text  # as every answer writes them: "NaN", "Infinity", "-Infinity"
    back = ToolError.from_dict(json.loads(text))
    assert type(back) is type(err) and back.to_dict() == data
    for name in ("timeout", "retry_after"):
        if isinstance(getattr(err, name, None), float):
            assert str(getattr(back, name)) == str(getattr(err, name))


def test_an_exceptions_secrets_are_masked_in_every_error_the_model_reads() -> None:
    """for_model(), dispatch and to_dict() sent a tool's exception text as it was: a database password
    reached the model and its provider. The exception, kept as the cause, is whole."""
    secret = "postgres://app:s3cret@db/x"
    reg = ToolRegistry(autoload=False)

    def connect(big: bool = False) -> str:
        raise RuntimeError(f"cannot connect to {secret}; password=hunter2" + (" x" * 30_000 if big else ""))

    reg.add(connect)
    result = reg.try_call("connect")
    assert result.error is not None and isinstance(result.error.__cause__, RuntimeError)
    assert (
        result.error.message
        == "Tool 'connect' failed: RuntimeError: cannot connect to postgres://[REDACTED]@db/x; password=[REDACTED]"
    )
    assert secret in str(result.error.__cause__)
    sent = [result.for_model(), json.dumps(result.to_dict()), json.dumps(dispatch(reg, _openai("connect")))]
    assert all("s3cret" not in text and "hunter2" not in text and "[REDACTED]" in text for text in sent)
    big = reg.try_call("connect", {"big": True}).error
    assert big is not None and len(big.message) <= ERROR_TEXT_LIMIT + 100 and "hunter2" not in big.message
    assert "60,0" in big.message  # the marker counts the whole text


def test_a_plugins_internal_error_is_masked_too() -> None:
    class Broken:
        name = "broken"

        @hookimpl
        def harness_pre_call(self, call: Any) -> None:
            raise ConnectionError("redis://:topsecret@cache:6379 refused")

    reg = ToolRegistry(plugins=[Broken()], autoload=False)
    reg.add(lambda: 1, name="one")
    err = reg.try_call("one").error
    assert err is not None and err.message == (
        "Internal error in plugin 'broken' while calling 'one': ConnectionError: redis://[REDACTED]@cache:6379 refused"
    )


def test_the_internal_error_log_line_is_masked_and_bounded_like_the_error() -> None:
    """A failure below the pipeline (here the application's clock) was logged with its raw text: the
    password in clear and 50,000 characters; the error the model read was masked."""
    from structlog.testing import capture_logs

    class Clock:
        def now(self) -> float:
            return 0.0

        def sleep(self, seconds: float) -> None:
            raise ConnectionError("clock backend redis://:hunter2@clock:6379 unreachable; password=hunter2 " + "x" * 50_000)

        async def asleep(self, seconds: float) -> None:
            self.sleep(seconds)

    reg = ToolRegistry(autoload=False, clock=Clock())

    def flaky() -> int:
        raise RetryableError("again")

    reg.add(flaky, idempotent=True, retry={"attempts": 3, "initial": 0.01})
    with capture_logs() as logs:
        result = reg.try_call("flaky")
    assert result.error is not None and "hunter2" not in result.for_model()
    (logged,) = [event for event in logs if event["event"] == "internal error"]
    assert "hunter2" not in logged["error"] and "redis://[REDACTED]@clock:6379" in logged["error"]
    assert len(logged["error"]) <= ERROR_TEXT_LIMIT + 100


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens: 200000 > 64000",
        "input_tokens=250000, max_tokens=4096",
        'usage: {"input_tokens": 10, "output_tokens": 5}',
        "Invalid auth: method must be basic",
        "GPIO pin: 17 is busy",
        "signature: mismatch in header",
        "credentials_file: /etc/app/gcp.json does not exist",
        "KeyError: 'password'",
    ],
)
def test_masking_leaves_what_the_model_needs_to_act(text: str) -> None:
    """The log redactor's keys matched inside words (max_tokens) and short names (pin, auth): the model lost numbers."""
    assert outside_text(text) == text


def test_masking_reads_only_what_can_be_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text whose masking shrank it was masked whole: 992 KB of keys on their own lines took 11.8 s."""
    from harness_one import _redact

    seen: list[int] = []
    real = _redact.mask_secrets
    monkeypatch.setattr(_redact, "mask_secrets", lambda text: seen.append(len(text)) or real(text))
    hostile = "password=" + "a" * 20_000 + " " + "token:\n1 " * 108_000
    shown = ToolExecutionError(ValueError(hostile)).message
    assert seen == [2 * ERROR_TEXT_LIMIT] and "aaaa" not in shown and f"{len(hostile):,} characters in all" in shown


def test_a_secret_value_straddling_the_log_cut_is_masked() -> None:
    """Redactor.text cut before replacing secret values: a copy straddling the cut showed 1,095 characters of a key."""
    key = "-----BEGIN PRIVATE KEY-----\n" + "G6Nb" * 420 + "\n-----END PRIVATE KEY-----"
    shown = Redactor(values=[key]).text("loaded keys: " + " ".join([key] * 5))
    assert "G6Nb" not in shown and shown.startswith("loaded keys: [REDACTED] [REDACTED]")


def test_an_exception_given_as_a_tool_errors_message_is_masked() -> None:
    """``raise ToolError(exc)``: the exception's text is another's, as a ToolExecutionError's is."""
    err = ToolError(RuntimeError("connect to postgres://app:s3cret@db/x failed; password=hunter2"))
    assert err.message == "connect to postgres://[REDACTED]@db/x failed; password=[REDACTED]"
    assert ToolError("written by the tool: password=shown").message == "written by the tool: password=shown"


def test_a_lost_mcp_connection_names_its_cause_masked() -> None:
    """The "Lost the connection to MCP server ..." error wrote the transport's exception text as it was."""
    from harness_one.mcp._client import _describe

    class Group(Exception):  # anyio's exception group, as far as _describe reads it
        exceptions = (ConnectionError("cannot reach https://app:s3cret@mcp.example/mcp"),)

    grouped = Group("in a task group")
    assert _describe(grouped) == "ConnectionError: cannot reach https://[REDACTED]@mcp.example/mcp"
    assert _describe(ConnectionError()) == "ConnectionError"


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("broken __str__")


@pytest.mark.parametrize(
    ("raised", "message"),
    [
        (ValueError(), "Tool 'fails' failed: ValueError"),  # no text: the type once, not "ValueError: ValueError"
        (_Unprintable(), "Tool 'fails' failed: _Unprintable"),
        (KeyError("x"), "Tool 'fails' failed: KeyError: 'x'"),
        (ValueError("password=hunter2 rejected"), "Tool 'fails' failed: ValueError: password=[REDACTED] rejected"),
    ],
)
def test_a_tools_failure_names_its_exception_as_every_error_does(raised: Exception, message: str) -> None:
    def fails() -> None:
        raise raised

    reg = ToolRegistry(autoload=False)
    reg.add(fails)
    result = reg.try_call("fails")
    assert isinstance(result.error, ToolExecutionError) and result.error.message == message
    assert result.error.__cause__ is raised


def test_a_long_exception_text_is_cut_once_where_the_model_reads_it() -> None:
    """for_model()/to_dict() cut the message again (its prefix made it 10,032 characters): the
    model was told "10,032 characters in all" for a 50,000-character exception."""

    def boom() -> None:
        raise ValueError("x" * 50_000)

    reg = ToolRegistry(autoload=False)
    reg.add(boom)
    result = reg.try_call("boom")
    marker = "[error text truncated: 50,000 characters in all, the first"
    assert marker in result.for_model() and marker in result.to_dict()["error"]["message"]
    assert result.for_model() == f"Error: {result.error.message}"  # type: ignore[union-attr]
