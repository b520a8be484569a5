"""Hostile review, second round: ``format: "regex"`` values, pydantic messages and defaults, secret-marked fields,
refusals of unknown keys among thousands of properties."""

from __future__ import annotations

import json
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr, field_validator

from harness_one import ManualClock, ToolArgumentError, ToolRegistry
from harness_one_plugins import ValidationPlugin
from harness_one_plugins.validation import (
    MAX_NAMES,
    MAX_REGEX_DEPTH,
    MAX_REGEX_LENGTH,
    Backend,
    _regex_fault,
    compile_schema,
    rust_available,
)

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]
REGEX = {"type": "object", "properties": {"expr": {"type": "string", "format": "regex"}}}
SUITE = Path(os.environ.get("JSON_SCHEMA_TEST_SUITE", Path(__file__).resolve().parents[2] / "shared" / "jsonschema-test-suite"))


@pytest.fixture(params=BACKENDS)
def reg(request: pytest.FixtureRequest, patient_patterns: None) -> ToolRegistry:
    """A registry on a manual clock: its refusals list every problem, however busy the machine."""
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=request.param)}, autoload=False, clock=ManualClock())


def refusal(reg: ToolRegistry, name: str, args: Any) -> dict[str, str]:
    with pytest.raises(ToolArgumentError) as err:
        reg.call(name, args)
    return {p.path: p.message for p in err.value.problems}


def with_regex(reg: ToolRegistry) -> ToolRegistry:
    reg.add(lambda **kw: kw, name="s", parameters=REGEX)
    return reg


# -- format: "regex" ------------------------------------------------------------------------------------------------


def test_a_regex_value_is_read_never_compiled(reg: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiling ``(?i)`` and a thousand wide ranges took 6 s (accepted; under acall, the event loop stood still)."""
    compiler = sys.modules["re._compiler"]

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a format: regex value was compiled")

    monkeypatch.setattr(compiler, "compile", never)
    value = "(?i)" + "".join(f"[\\u0100-\\u{0xFF00 + i % 255:04x}]" for i in range(60)) + f"{id(reg)}"  # not in re's cache
    assert with_regex(reg).call("s", {"expr": value}) == {"expr": value}
    assert refusal(reg, "s", {"expr": "(?<=a|bb)c"}) == {
        "$.expr": 'expected a valid regex, got "(?<=a|bb)c": look-behind requires fixed-width pattern'
    }


def test_a_regex_value_past_the_length_limit_is_refused_before_it_is_read(reg: ToolRegistry) -> None:
    """``"|" * 200000`` took 944 ms; a valid regex just past the limit is refused, saying the limit."""
    long = "a|" * (MAX_REGEX_LENGTH // 2) + "b"
    assert refusal(with_regex(reg), "s", {"expr": long}) == {
        "$.expr": f'expected a valid regex, got "{long[:56]}...: {len(long)} characters; a regex here may have at most 1000'
    }
    fits = long[: MAX_REGEX_LENGTH - 1]
    assert reg.call("s", {"expr": fits}) == {"expr": fits}


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("(" * 500 + ")" * 500, f"parentheses nested more than {MAX_REGEX_DEPTH} levels deep"),
        ("(?:" * 200 + ")" * 200, f"parentheses nested more than {MAX_REGEX_DEPTH} levels deep"),
        ("a{4294967296}", "the repetition number is too large"),
        ("(?a)(?u)a", "ASCII and UNICODE flags are incompatible"),
    ],
)
def test_a_regex_value_that_broke_the_check_is_refused_where_it_stands(reg: ToolRegistry, value: str, why: str) -> None:
    """RecursionError, OverflowError and ValueError escaped re.compile: an internal error on jsonschema-rs, and
    ``$: arguments could not be checked completely`` on the Python backend."""
    (message,) = refusal(with_regex(reg), "s", {"expr": value}).values()
    assert list(refusal(reg, "s", {"expr": value})) == ["$.expr"]
    assert message.startswith("expected a valid regex, got ") and message.endswith(": " + why)


def test_parentheses_in_classes_and_escapes_nest_nothing(reg: ToolRegistry) -> None:
    for value in ("[" + "(" * 200 + "]", "\\(" * 200, "(a)" * 200, "(" * MAX_REGEX_DEPTH + ")" * MAX_REGEX_DEPTH):
        assert with_regex(reg).call("s", {"expr": value}) == {"expr": value}
        reg.remove("s")


def test_reading_a_regex_value_prints_no_warning(reg: ToolRegistry) -> None:
    """``"[" * 20000`` printed ``FutureWarning: Possible nested set`` to stderr (and any value: once per position)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = f"[[a]--b]{id(reg)}"  # not in re's cache
        assert with_regex(reg).call("s", {"expr": value}) == {"expr": value}
    assert caught == []


@pytest.mark.parametrize(
    "value",
    [
        "(?<=ab)c",
        "(?<!a|b)c",
        "(?<=a|bb)c",
        "(?<=(?<=a)b*)c",
        "(?<=a{2})b",
        "(?<=a{1,2})b",
        "(a)(?<=\\1)",
        "(?<=(a)|b)c",
        "(?(1)a|b)",
        "(a)(?(1)a|b)",
        "(?P<n>a)(?P=n)",
        "(?P<n>a)(?P<n>b)",
        "[z-a]",
        "a**",
        "\\N{LATIN SMALL LETTER A}",
        "\\N{NO SUCH NAME}",
        "(?i)(?s)a",
        "a(?i)b",
        "(?>a+)+",
        "a++",
        "(?#a comment (with parentheses)",
        "[[a]]",
        "\\q",
        "(?x) a # (",
        "(?L)a",
        "(?a)(?u)a",
        "a{4294967296}",
    ],
)
def test_a_regex_value_is_valid_exactly_when_re_compiles_it(value: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            re.compile(value)
            compiles = True
        except (re.error, OverflowError, ValueError):
            compiles = False
    assert (_regex_fault(value) is None) == compiles


@pytest.mark.skipif(not SUITE.is_dir(), reason=f"JSON-Schema-Test-Suite not found at {SUITE}")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("draft", ["draft2020-12", "draft7"])
def test_the_suite_s_regex_format_tests_pass(draft: str, backend: Backend) -> None:
    cases = json.loads((SUITE / "tests" / draft / "optional" / "format" / "regex.json").read_text())
    verdicts = [
        (compile_schema(case["schema"], backend).is_valid(test["data"]), test["valid"])
        for case in cases
        for test in case["tests"]
    ]
    assert len(verdicts) == 8 and all(got == expected for got, expected in verdicts)


# -- pydantic: validator messages, defaults ---------------------------------------------------------------------------


class Dsn(BaseModel):
    url: str

    @field_validator("url")
    @classmethod
    def remote(cls, value: str) -> str:
        raise ValueError(f"cannot reach {value}")


class Login(BaseModel):
    user: str
    password: str

    @field_validator("password")
    @classmethod
    def strong(cls, value: str) -> str:
        raise ValueError(f"{value} is too weak")


def test_a_pydantic_validator_s_text_is_masked_as_an_exception_s(reg: ToolRegistry) -> None:
    """It was shown as written: ``postgres://bob:hunter2SECRET@db/x``, and a password itself."""

    def connect(dsn: Dsn) -> str:
        return dsn.url

    def login(login: Login) -> str:
        return login.user

    reg.add(connect)
    reg.add(login)
    assert refusal(reg, "connect", {"dsn": {"url": "postgres://bob:hunter2SECRET@db/x"}}) == {
        "$.dsn.url": "Value error, cannot reach postgres://[REDACTED]@db/x"
    }
    assert refusal(reg, "connect", {"dsn": {"url": "token=hunter2SECRET"}}) == {
        "$.dsn.url": "Value error, cannot reach token=[REDACTED]"
    }
    assert refusal(reg, "login", {"login": {"user": "ann", "password": "hunter2SECRET"}}) == {
        "$.login.password": "invalid (value_error)"
    }


class Inner(BaseModel):
    key: SecretStr = SecretStr("inner-key")


class Settings(BaseModel):
    user: str
    api: SecretStr = SecretStr("real-default-key")
    spare: SecretStr | None = SecretStr("spare-key")
    keys: list[SecretStr] = [SecretStr("listed-key")]
    inner: Inner = Inner()
    retries: int = 3


def test_a_default_pydantic_masks_in_its_schema_is_not_filled_in(reg: ToolRegistry) -> None:
    """``SecretStr("real-default-key")`` reached the tool as ``"**********"`` (the validation plugin filled in
    the schema's default, which pydantic writes masked); without the plugin, the real one."""

    def use(settings: Settings) -> list[str]:
        secrets = [settings.api, settings.spare, *settings.keys, settings.inner.key]
        return [s.get_secret_value() for s in secrets if s is not None] + [str(settings.retries)]

    reg.add(use)
    assert reg.call("use", {"settings": {"user": "ann"}}) == ["real-default-key", "spare-key", "listed-key", "inner-key", "3"]
    assert "**********" not in json.dumps(reg.get("use").parameters)
    assert reg.get("use").parameters["properties"]["settings"]["properties"]["retries"]["default"] == 3  # the others stay


# -- secret-marked fields, long lists of allowed names ------------------------------------------------------------------


def test_a_value_its_schema_marks_secret_is_not_shown(reg: ToolRegistry) -> None:
    """Masking went by key name only: ``$.creds.pw: expected string, got array ["hunter2SECRET"]``."""
    pw = {"type": "string", "writeOnly": True}
    props = {"pw": pw, "code": {"type": "string", "format": "password"}, "spare": {"anyOf": [pw, {"type": "null"}]}}
    schema = {"type": "object", "properties": {"creds": {"type": "object", "properties": props}}}
    reg.add(lambda **kw: kw, name="s", parameters=schema)
    args = {"creds": {"pw": ["hunter2SECRET"], "code": 123456789, "spare": {"x": "hunter2SECRET"}}}
    assert refusal(reg, "s", args) == {
        "$.creds.code": "expected string, got integer (redacted)",
        "$.creds.pw": "expected string, got array (redacted)",
        "$.creds.spare": "must match at least one of the alternatives; option 1: expected string, got object (redacted); "
        "option 2: expected null, got object (redacted)",
    }


def test_an_unexpected_property_s_refusal_names_a_few_allowed_ones(reg: ToolRegistry) -> None:
    """With 3,000 properties, 50 unknown keys made a refusal of 3.4 MB: every problem named all 3,000."""
    props = {f"p{i:04d}": {"type": "string"} for i in range(3000)}
    reg.add(lambda **kw: kw, name="s", parameters={"type": "object", "properties": props, "additionalProperties": False})
    with pytest.raises(ToolArgumentError) as err:
        reg.call("s", {f"x{i}": 1 for i in range(50)})
    names = ", ".join(f"p{i:04d}" for i in range(MAX_NAMES))
    unexpected = [p.message for p in err.value.problems if p.keyword == "additionalProperties"]
    assert unexpected and all(m == f"unexpected property; allowed properties: {names}, ... (2,980 more)" for m in unexpected)
    assert len(json.dumps(err.value.to_dict())) < 20_000


def test_a_property_name_that_is_not_a_string_is_named_once(reg: ToolRegistry) -> None:
    """An in-process caller's dict with a key that is not a string: "got null", not "got null null"."""

    def nested(a: dict[str, int]) -> str:
        return "ran"

    reg.add(nested, parameters={"type": "object", "properties": {"a": {"type": "object"}}})
    error = reg.try_call("nested", {"a": {None: 1, 3: 2}}).error
    assert isinstance(error, ToolArgumentError)
    assert [p.message for p in error.problems] == [
        "property names must be strings, got null",
        "property names must be strings, got integer 3",
    ]


def test_parentheses_in_a_regex_comment_nest_nothing() -> None:
    """``(?#`` and 101 "(" then ")x" compiles (a comment ends at its first ")"): it was refused as nested too deeply."""
    commented = "(?#" + "(" * 101 + ")x"
    re.compile(commented)
    assert _regex_fault(commented) is None
    assert _regex_fault("(" * 101 + "x" + ")" * 101) == "parentheses nested more than 100 levels deep"
