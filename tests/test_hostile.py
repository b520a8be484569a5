"""A hostile model's worst output: every line answered once, only typed errors, secrets kept out of logs."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

from harness_one import (
    REDACTED,
    ArgumentLimits,
    ManualClock,
    PluginError,
    Redactor,
    ToolArgumentError,
    ToolError,
    ToolNotFound,
    ToolRegistry,
    defineTool,
    hookimpl,
)
from harness_one._arguments import plain_json
from harness_one_plugins import IdempotencyPlugin, LoggingPlugin

ROOT = Path(__file__).resolve().parents[1]
TOOLS = str(ROOT / "tests" / "hostile_tools.py")
BIN = Path(sys.executable).parent


def strict_json(line: bytes) -> Any:
    """Parse one answer as a strict JSON peer would: UTF-8 only, no NaN/Infinity, no lone surrogates."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    text = line.decode("utf-8")  # raises on invalid UTF-8
    text.encode("utf-8")  # raises on a lone surrogate
    return json.loads(text, parse_constant=refuse)


DEEP = "[" * 1000 + "]" * 1000
HOSTILE_LINES: list[bytes] = [
    b'\xff\xfe{"id": 1, "name": "echo", "arguments": {}}',  # not UTF-8
    b'{"id": "\\ud800", "name": "echo", "arguments": {"text": "\\ud800"}}',  # lone surrogates, echoed back
    b'{"id": 3, "name": "\\udfff", "arguments": {}}',  # a surrogate as the tool name
    ('{"id": 4, "name": "echo", "arguments": {"text": ' + DEEP + "}}").encode(),  # too deep inside the arguments
    DEEP.encode(),  # too deep as the whole line
    b"[1, 2]",
    b"42",
    b'"a string"',
    b"null",
    b'{"id": 10, "name": "echo", "arguments": {"count": 1e400}}',  # Infinity once parsed
    b'{"id": 11, "name": "echo", "arguments": {"count": NaN}}',
    ('{"id": 12, "name": "echo", "arguments": {"count": ' + "9" * 5000 + "}}").encode(),  # past int's 4300 digits
    *[
        f'{{"id": "{k}", "name": "awkward", "arguments": {{"kind": "{k}"}}}}'.encode()
        for k in ("surrogate", "nan", "inf", "bytes", "set", "object", "huge")
    ],
    b'{"id": 20, "name": "explode", "arguments": {"message": "\\ud800 inside"}}',
    b'{"id": 21, "name": "ech", "arguments": {}}',
    b'{"id": 22, "name": "echo", "arguments": "{\\"text\\": "}',
    b'{"id": 23, "name": "echo", "arguments": {"text": 5}}',
    b"\x00\x01\x02",
    b'{"id": 25, "name": "echo", "arguments": {"text": "ok"}}',
]


def run_loop(payload: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(BIN / "harness-one"), "--tools", TOOLS, "run", *args],
        check=False,
        input=payload,
        capture_output=True,
        timeout=120,
        env={"PATH": f"{BIN}:/usr/bin:/bin", "HARNESS_ONE_STATE": "memory:", "HARNESS_ONE_LOG_LEVEL": "error"},
    )


@pytest.fixture
def long_ints() -> Any:
    """Parse integers past 4,300 digits, as a JSON peer that follows the JSON grammar does."""
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    yield
    sys.set_int_max_str_digits(old)


@pytest.mark.usefixtures("long_ints")
@pytest.mark.parametrize("concurrency", ["1", "8"])
def test_the_loop_answers_every_hostile_line_exactly_once(concurrency: str) -> None:
    oversized = b'{"id": 99, "name": "echo", "arguments": {"text": "' + b"x" * (3 << 20) + b'"}}'
    lines = [*HOSTILE_LINES, oversized, b'{"id": 100, "name": "echo", "arguments": {"count": 7}}']
    proc = run_loop(b"\n".join(lines) + b"\n", "--concurrency", concurrency)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    answers = [strict_json(line) for line in proc.stdout.splitlines()]
    assert len(answers) == len(lines)  # one answer per request line, none lost, none doubled
    assert f"{len(lines)} requests".encode() in proc.stderr and b"NOT ANSWERED" not in proc.stderr
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    assert by_id[25] == {"id": 25, "ok": True, "result": {"text": "ok", "count": 0}}
    assert by_id[100]["result"]["count"] == 7
    assert by_id["\ufffd"]["result"]["text"] == "\ufffd"  # surrogates become U+FFFD, the documented rule
    assert by_id["nan"]["result"] == "NaN" and by_id["inf"]["result"] == "Infinity"
    assert by_id["surrogate"]["result"] == "a\ufffdb"
    assert by_id["huge"]["result"] == int("1" + "0" * 5000)  # written in full, still a JSON number
    assert by_id[12]["error"]["message"] == "line 12: $.arguments.count: a number of 5000 digits is too long to read"
    assert by_id[20]["error"]["type"] == "ToolExecutionError"
    assert by_id[21]["error"]["type"] == "ToolNotFound" and "echo" in by_id[21]["error"]["message"]
    assert by_id[23]["error"]["type"] == "ToolArgumentError" and "text" in by_id[23]["error"]["message"]
    invalid = [a for a in answers if a["ok"] is False and a["error"]["type"] == "InvalidRequest"]
    messages = " | ".join(a["error"]["message"] for a in invalid)
    assert "UTF-8" in messages and "longer than" in messages and "nested" in messages


def test_the_loop_exit_code_when_answers_cannot_be_written() -> None:
    proc = subprocess.run(
        f"{BIN / 'harness-one'} --tools {TOOLS} run >&-",
        check=False,
        shell=True,
        input=b'{"id": 1, "name": "echo", "arguments": {}}\n',
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 70 and b"cannot write answers" in proc.stderr


def test_fail_on_error_gives_exit_one() -> None:
    proc = run_loop(b'{"id": 1, "name": "explode", "arguments": {}}\n', "--fail-on-error")
    assert proc.returncode == 1 and strict_json(proc.stdout.splitlines()[0])["ok"] is False


def _deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


DEEP_LIST = _deep(5000)


class Opaque:
    def __repr__(self) -> str:
        raise RuntimeError("repr fails")


PYTHON_VALUES: list[Any] = [
    {"text": b"bytes"},
    {"text": {1, 2}},
    {"text": ("a", "b")},
    {1: "non-string key"},
    {(1, 2): "tuple key"},
    {"text": Opaque()},
    {"count": math.nan},
    {"count": math.inf},
    {"count": 10**5000},
    {"text": "\ud800"},
    {"\ud800": 1},
    {"count": 2.5},
    {"count": True},
    None,
    [],
    "not an object",
    b'{"text": "\xff"}',
    '{"text": "\\ud800"}',
    "{" * 10_000,
    {"text": DEEP_LIST},
]


@pytest.fixture
def loud() -> ToolRegistry:
    """Every standard plugin on, arguments logged (the riskiest set-up for odd values)."""
    reg = ToolRegistry(autoload=False, state="memory:", plugin_options={"logging": {"log_arguments": True}})

    @defineTool(registry=reg)
    def echo(text: str = "", count: int = 0) -> dict[str, Any]:
        """Return what it was given.

        Args:
            text: Any text.
            count: Any integer.
        """
        return {"text": text, "count": count}

    return reg


@pytest.mark.parametrize("args", PYTHON_VALUES, ids=range(len(PYTHON_VALUES)))
def test_only_tool_errors_come_out_for_any_python_value(loud: ToolRegistry, args: Any) -> None:
    with structlog.testing.capture_logs():
        try:
            loud.call("echo", args)
        except ToolError as exc:
            if isinstance(exc, ToolArgumentError):
                assert exc.problems and all(p.path and p.expected for p in exc.problems), exc.to_dict()
            json.dumps(exc.to_dict())  # the model-readable form is always writable
        result = loud.try_call("echo", args)
        assert result.ok or isinstance(result.error, ToolError)


async def test_async_calls_too(loud: ToolRegistry) -> None:
    for args in PYTHON_VALUES:
        result = await loud.atry_call("echo", args)
        assert result.ok or isinstance(result.error, ToolError)


class RaisingOnError:
    name = "raises-on-error"

    @hookimpl
    def harness_on_error(self, call: Any, error: Any) -> None:
        raise ValueError("on_error broke")


def test_a_raising_on_error_hook_becomes_a_plugin_error_naming_it() -> None:
    reg = ToolRegistry(autoload=False, plugins=[RaisingOnError()])

    @defineTool(registry=reg)
    def fails() -> None:
        """Always fails."""
        raise RuntimeError("tool failed")

    with pytest.raises(PluginError) as err:
        reg.call("fails", {})
    assert "raises-on-error" in str(err.value)
    assert not reg.try_call("fails", {}).ok


# -- redaction -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "privateKey",
        "PRIVATE-KEY",
        "private_key",
        "pwd",
        "user_pin",
        "jwt",
        "bearer",
        "passphrase",
        "sessionId",
        "session_id",
        "ssh_key",
        "otp",
        "cvv",
        "X-Api-Key",
        "accessToken",
        "Authorization",
    ],
)
def test_secret_keys_whatever_their_spelling(key: str) -> None:
    assert Redactor()({key: "s3cr3t"}) == {key: REDACTED}


@pytest.mark.parametrize("key", ["spinner", "pinned_note", "topic", "author_name", "options"])
def test_ordinary_keys_stay(key: str) -> None:
    assert Redactor()({key: "visible"}) == {key: "visible"}


def test_nested_values_url_userinfo_and_added_keys_and_values() -> None:
    redactor = Redactor(extra_keys=["tenant_code"], values=["sk-live-123456"])
    value = {
        "rows": ({"password": "p"}, [{"inner": {"token": "t"}}]),
        "url": "https://alice:hunter2@example.com/x?q=1",
        "tenant_code": "T-9",
        "note": "the key is sk-live-123456, keep it",
        "big": 10**5000,
    }
    assert redactor(value) == {
        "rows": [{"password": REDACTED}, [{"inner": {"token": REDACTED}}]],
        "url": f"https://{REDACTED}@example.com/x?q=1",
        "tenant_code": REDACTED,
        "note": f"the key is {REDACTED}, keep it",
        "big": "<integer of 16610 bits>",
    }


def test_the_logging_plugin_redacts_arguments_it_logs() -> None:
    reg = ToolRegistry(
        autoload=False,
        plugins=[LoggingPlugin(log_arguments=True, extra_secret_keys=["tenant_code"], secret_values=["hunter2"])],
        standard_plugins=False,
    )

    @defineTool(registry=reg)
    def login(options: dict[str, Any]) -> str:
        """Log in.

        Args:
            options: Anything.
        """
        return "ok"

    args = {"options": {"privateKey": "k", "creds": ("x", {"apiKey": "a"}), "tenant_code": "T", "note": "pw hunter2"}}
    with structlog.testing.capture_logs() as logs:
        reg.call("login", args)
    text = json.dumps(logs, default=str)
    assert logs and "arguments" in logs[-1]
    for secret in ('"k"', '"a"', '"T"', "hunter2"):
        assert secret not in text


# -- idempotency leases -----------------------------------------------------------------------------------------


def test_a_call_longer_than_its_lease_still_runs_once_per_key() -> None:
    runs: list[int] = []
    started, release = threading.Event(), threading.Event()
    reg = ToolRegistry(autoload=False, standard_plugins=False, plugins=[IdempotencyPlugin(lease=0.3, wait=0)])

    @defineTool(registry=reg, idempotent=True)
    def slow(n: int) -> int:
        """Runs until released.

        Args:
            n: A number.
        """
        runs.append(n)
        started.set()
        release.wait(10)
        return n

    first = threading.Thread(target=reg.try_call, args=("slow", {"n": 1}), kwargs={"idempotency_key": "k"})
    first.start()
    assert started.wait(10)
    time.sleep(1.0)  # more than three leases: only renewal keeps the key held (real time: the renewal thread's own)
    second = reg.try_call("slow", {"n": 1}, idempotency_key="k")
    release.set()
    first.join(10)
    assert runs == [1]
    assert not second.ok and second.error.kind in {"idempotency_conflict"}, second.error.to_dict()


def test_a_flood_of_unknown_arguments_is_refused_with_a_bounded_listing() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda a: a, name="one", parameters={"type": "object", "properties": {"a": {"type": "integer"}}})
    flood = {f"k{i:05}": i for i in range(15_000)}  # under the default payload limit, as JSON text and as estimated
    for args in (flood, json.dumps(flood)):
        result = reg.try_call("one", args)
        assert isinstance(result.error, ToolArgumentError)
        problems = result.error.problems
        assert len(problems) == 22 and problems[0].path == "$.k00000"  # 20 names, how many more, and the missing `a`
        assert problems[20].message == "and 14980 more unexpected arguments" and problems[21].path == "$.a"


# -- JSON text near the limits ---------------------------------------------------------------------------------

OPEN = '{"text": "' + "[" * 10_001  # a string of brackets, not yet closed
NEAR_THE_LIMIT = [
    (OPEN + '"' + '\\"' * 125_000, "not valid JSON"),  # closed, then escaped quotes outside any string
    (OPEN + '\\"' * 125_000, "not valid JSON"),  # never closed: escaped quotes to the end
    (OPEN + '\\"' * 10, "not valid JSON"),  # the same, short
    ('{"text": ' + "[" * 10_001 + '""' * 125_000, "more than 10000 arrays and objects"),  # brackets outside strings
    (OPEN + "\\\\" * 125_000 + '"}', None),  # escaped backslashes, then the closing quote
    ('{"text": "' + '\\\\\\"[' * 50_000 + '"}', None),  # an escaped backslash, an escaped quote, a bracket
]


@pytest.mark.parametrize(("text", "refusal"), NEAR_THE_LIMIT, ids=range(len(NEAR_THE_LIMIT)))
def test_brackets_in_strings_never_closed_are_not_counted_and_the_text_is_refused_as_invalid(
    text: str, refusal: str | None
) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda text: "ran", name="echo", parameters={"type": "object", "properties": {"text": {}}})
    assert len(text) <= reg.limits.max_bytes
    for raw in (text, text.encode()):
        result = reg.try_call("echo", raw)
        if refusal is None:
            assert result.ok, result.error
        else:
            assert isinstance(result.error, ToolArgumentError)
            (problem,) = result.error.problems
            assert problem.path == "$" and refusal in problem.message


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ('{"a": "\\\\", "b": [[], {}, []]}', True),  # the string ends with an escaped backslash: 4 arrays and objects
        ('{"a": "\\"[[[", "b": [[], {}]}', False),  # an escaped quote keeps the string open over the brackets: 3
    ],
)
def test_escapes_decide_where_a_string_ends_when_brackets_are_counted(text: str, refused: bool) -> None:
    reg = ToolRegistry(autoload=False, limits=ArgumentLimits(max_containers=3))
    reg.add(lambda **kw: "ran", name="f", parameters={"type": "object"})
    result = reg.try_call("f", text)
    assert result.ok is not refused and json.loads(text)


@pytest.fixture
def floats() -> ToolRegistry:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda data: data, name="store", parameters={"type": "object", "properties": {"data": {"type": "object"}}})
    reg.add(lambda **kw: kw, name="anything", parameters={"type": "object"})
    return reg


HUGE = [  # named as the listing names a NaN or an infinity where a string goes (JSON-ish, not Python's "inf")
    ("store", '{"data": {"k": 1e400}}', "$.data.k", "Infinity"),
    ("store", '{"data": {"k": [1, -1E+400]}}', "$.data.k[1]", "-Infinity"),
    ("store", '{"data": {"k": ' + "1" * 310 + ".0}}", "$.data.k", "Infinity"),  # no exponent, 310 digits
    ("store", '{"data": {"k": ' + "1" * 250 + "e90}}", "$.data.k", "Infinity"),  # a small exponent on 250 digits
    ("anything", '{"a": 1e400}', "$.a", "Infinity"),
    ("anything", '{"a": -1e400, "b": "x"}', "$.a", "-Infinity"),
    ("anything", '{"a": NaN}', "$.a", "NaN"),
]


@pytest.mark.parametrize("as_bytes", [False, True])
@pytest.mark.parametrize(("tool", "text", "path", "got"), HUGE)
def test_a_number_too_large_for_a_float_is_refused_as_not_finite(
    floats: ToolRegistry, tool: str, text: str, path: str, got: str, as_bytes: bool
) -> None:
    result = floats.try_call(tool, text.encode() if as_bytes else text)
    assert isinstance(result.error, ToolArgumentError), result.value
    (problem,) = result.error.problems
    assert (problem.path, problem.message, problem.got) == (path, f"expected a finite number, got {got}", got)
    assert not plain_json(text, ArgumentLimits())


def test_one_refusal_spells_nan_and_the_infinities_one_way() -> None:
    """The finite-number check said ``got nan`` (Python's text) beside the listing's ``got NaN``."""
    reg = ToolRegistry(clock=ManualClock(), autoload=False)  # (the listing's time budget never runs out)
    reg.add(lambda **kw: "ran", name="t", parameters={"type": "object", "properties": {"s": {"type": "string"}}})
    result = reg.try_call("t", {"s": math.nan, "n": math.nan, "i": math.inf, "j": -math.inf})
    assert isinstance(result.error, ToolArgumentError)
    assert [(p.path, p.message, p.got) for p in result.error.problems] == [
        ("$.i", "expected a finite number, got Infinity", "Infinity"),
        ("$.j", "expected a finite number, got -Infinity", "-Infinity"),
        ("$.n", "expected a finite number, got NaN", "NaN"),
        ("$.s", "expected string, got NaN", "NaN"),
    ]


@pytest.mark.parametrize("as_bytes", [False, True])
def test_ordinary_exponents_and_numbers_in_strings_are_accepted(floats: ToolRegistry, as_bytes: bool) -> None:
    data = {"a": 1e10, "b": 2.5e-3, "c": -1e-300, "d": 1.5e308, "s": "1e400", "t": "E-999 and " + "7" * 300}
    text = '{"data": {"a": 1e10, "b": 2.5E-3, "c": -1e-300, "d": 1.5e308, "s": "1e400", "t": "E-999 and ' + "7" * 300 + '"}}'
    assert floats.call("store", text.encode() if as_bytes else text) == data
    assert floats.call("anything", '{"a": 1e10, "b": 2.5E-3, "s": "1e400"}') == {"a": 1e10, "b": 2.5e-3, "s": "1e400"}
    assert plain_json('{"a": 1e10, "b": 2.5E-3, "c": -1E+99, "s": "1.5e30"}', ArgumentLimits())  # vouched for, not walked


def test_an_integer_past_the_digit_limit_the_application_set_is_refused_where_it_stands() -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda a, b=1: "ran", name="add", parameters={"type": "object", "properties": {"a": {}, "b": {}}})
    old = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(1000)
        lowered = reg.try_call("add", '{"a": ' + "9" * 2000 + "}")
        sys.set_int_max_str_digits(4300)
        signed = reg.try_call("add", '{"b": -' + "9" * 4300 + ', "a": ' + "9" * 5000 + "}")  # b fits: its sign is no digit
    finally:
        sys.set_int_max_str_digits(old)
    for result, digits, limit in ((lowered, 2000, 1000), (signed, 5000, 4300)):
        assert isinstance(result.error, ToolArgumentError), result.error
        (problem,) = result.error.problems
        assert problem.path == "$.a" and problem.message == f"a number of {digits} digits is too long to read"
        assert problem.expected == f"a number of at most {limit} digits"


def test_an_integer_in_a_dict_past_the_digit_limit_the_application_set_is_refused() -> None:
    """Given as a dict, as in JSON text: the limit in force decides (the validation plugin's walk)."""
    reg = ToolRegistry(autoload=False)
    reg.add(lambda a: "ran", name="take", parameters={"type": "object", "properties": {"a": {"type": "integer"}}})
    old = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(1000)
        lowered = reg.try_call("take", {"a": 10**1500})
        sys.set_int_max_str_digits(4300)
        default = reg.try_call("take", {"a": 10**1500})
    finally:
        sys.set_int_max_str_digits(old)
    assert isinstance(lowered.error, ToolArgumentError)
    (problem,) = lowered.error.problems
    assert problem.path == "$.a" and problem.expected == "at most 1000 digits"
    assert default.ok and default.value == "ran"


def test_a_result_with_integers_past_a_lowered_digit_limit_is_still_written_in_full() -> None:
    """Answers are JSON whatever int-to-text limit the application set after harness-one was imported."""
    reg = ToolRegistry(autoload=False)
    big = 7 * 10**1500 + 1
    reg.add(lambda: {"n": big, "k": {big: -big}}, name="big")
    old = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(640)  # the lowest Python allows
        text = reg.try_call("big").for_model()
    finally:
        sys.set_int_max_str_digits(old)
    assert json.loads(text) == {"n": big, "k": {str(big): -big}}


class _Unprintable:
    """A name or call id whose ``str`` and ``repr`` raise (and which hashes, so a lookup gets that far)."""

    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__

    def __hash__(self) -> int:
        return 1


@pytest.mark.parametrize("name", [10**5000, _Unprintable()], ids=["int past the int-to-text limit", "unprintable"])
def test_a_name_that_has_no_text_is_an_unknown_tool(name: Any) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda text: text, name="echo")
    shown = f"<{type(name).__name__}>"
    result = reg.try_call(name, {})
    assert isinstance(result.error, ToolNotFound) and result.tool == shown and result.call_id
    assert isinstance(asyncio.run(reg.atry_call(name, {})).error, ToolNotFound)
    with pytest.raises(ToolNotFound, match=f"Unknown tool '{shown}'"):
        reg.call(name, {})


@pytest.mark.parametrize("call_id", [10**5000, _Unprintable()], ids=["int past the int-to-text limit", "unprintable"])
def test_a_call_id_that_has_no_text_is_refused_by_name(call_id: Any) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(lambda text: text, name="echo")
    result = reg.try_call("echo", {"text": "x"}, call_id=call_id)
    assert isinstance(result.error, ToolArgumentError) and result.call_id
    assert result.error.problems[0].path == "call_id" and "expected a string" in result.error.message
    with pytest.raises(ToolArgumentError, match="call_id: expected a string"):
        reg.call("echo", {"text": "x"}, call_id=call_id)
    assert isinstance(reg.try_call("nope", {}, call_id=call_id).error, ToolNotFound)  # the id is not needed to say so
