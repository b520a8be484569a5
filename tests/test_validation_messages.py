"""What the model reads when the validation plugin refuses its arguments: the field, and what it takes.

A NaN where the schema takes no number is told what the schema takes there (not "a finite number",
which would have the model send a number, refused again); one problem said twice at one place is
listed once; a format refusal says what the value lacks (an RFC 3339 date-time's UTC offset).
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

from harness_one import ManualClock, PluginError, ToolRegistry
from harness_one_plugins import ValidationPlugin
from harness_one_plugins.validation import Backend, rust_available

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]
NAN, INF = float("nan"), float("inf")


@pytest.fixture(params=BACKENDS)
def reg(request: pytest.FixtureRequest, patient_patterns: None) -> ToolRegistry:
    """A registry on a manual clock (its refusals list every problem, however busy the machine)."""
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=request.param)}, autoload=False, clock=ManualClock())


def read(reg: ToolRegistry, name: str, args: Any) -> list[str]:
    """The problem lines of the refusal the model reads (its head says how many there are)."""
    result = reg.try_call(name, args)
    assert not result.ok, result.value
    lines = result.for_model().splitlines()
    count = len(lines) - 2
    assert lines[0].endswith(f"({count} problem{'s' if count != 1 else ''}):"), lines
    return lines[1:-1]


def add_schema(reg: ToolRegistry, properties: dict[str, Any], **extra: Any) -> None:
    reg.add(lambda **kw: kw, name="t", parameters={"type": "object", "properties": properties, **extra})


# -- a NaN or an infinity where the schema takes no number -----------------------------------------------------


@pytest.mark.parametrize("args", ['{"text": NaN}', {"text": NAN}])
def test_a_nan_for_a_string_is_told_a_string_is_expected(reg: ToolRegistry, args: Any) -> None:
    add_schema(reg, {"text": {"type": "string"}}, required=["text"])
    assert read(reg, "t", args) == ["- $.text: expected string, got NaN"]


def test_a_non_finite_number_is_told_what_the_schema_takes_at_its_place(reg: ToolRegistry) -> None:
    def f(s: str | None, color: Literal["red", "blue"], pair: tuple[int, str], tags: list[str]) -> str:
        return "ran"

    reg.add(f)
    good = {"s": "x", "color": "red", "pair": [1, "a"], "tags": ["a"]}
    assert reg.call("f", good) == "ran"
    assert read(reg, "f", {**good, "s": NAN}) == ["- $.s: expected string or null, got NaN"]
    assert read(reg, "f", {**good, "color": INF}) == ['- $.color: expected one of ["red", "blue"], got Infinity']
    assert read(reg, "f", {**good, "pair": [1, -INF]}) == ["- $.pair[1]: expected string, got -Infinity"]
    assert read(reg, "f", {**good, "tags": ["a", NAN]}) == ["- $.tags[1]: expected string, got NaN"]
    assert read(reg, "f", {**good, "extra": NAN}) == ["- $.extra: unexpected property; allowed properties: color, pair, s, tags"]


def test_where_the_schema_takes_a_number_a_finite_one_is_expected_and_that_alone_is_said(reg: ToolRegistry) -> None:
    add_schema(
        reg,
        {
            "n": {"type": "integer"},
            "most": {"type": "number", "maximum": 10},
            "third": {"type": "number", "multipleOf": 3},
            "s": {"type": "string"},
        },
    )
    assert read(reg, "t", {"n": NAN}) == ["- $.n: expected a finite number, got NaN"]
    assert read(reg, "t", {"most": INF, "third": NAN, "s": NAN, "n": "1"}) == [
        "- $.most: expected a finite number, got Infinity",
        '- $.n: expected integer, got string "1"',  # the listing runs: other problems are named too
        "- $.s: expected string, got NaN",
        "- $.third: expected a finite number, got NaN",
    ]


# -- one problem said twice at one place ------------------------------------------------------------------------


@pytest.mark.parametrize("args", [{"pair": [1, "a", 3]}, '{"pair": [1, "a", 3]}'])
def test_a_pair_given_three_items_is_told_so_once(reg: ToolRegistry, args: Any) -> None:
    def f(pair: tuple[int, str]) -> str:
        return "ran"

    reg.add(f)
    assert read(reg, "f", args) == ["- $.pair: expected at most 2 items, got 3"]


# -- formats ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "value", "said"),
    [
        ("date-time", "2024-01-01T10:00:00", "the UTC offset RFC 3339 requires is missing (Z or +hh:mm)"),
        ("date-time", "2024-01-01T10:00Z", "the seconds RFC 3339 requires are missing (hh:mm:ss)"),
        ("date-time", "2024-01-01", "the time and the UTC offset RFC 3339 requires are missing (T09:30:00, then Z or +hh:mm)"),
        (
            "date-time",
            "2024-01-01 10:00:00",
            "the date and the time are joined by T, not a space; the UTC offset RFC 3339 requires is missing (Z or +hh:mm)",
        ),
        ("date-time", "2024-02-30T10:00:00Z", "there is no such date"),
        ("date-time", "2024-01-01T24:00:00Z", "an hour, minute, second or offset is out of range"),
        ("time", "10:00:00", "the UTC offset RFC 3339 requires is missing (Z or +hh:mm)"),
        ("time", "10:00", "the seconds and the UTC offset RFC 3339 requires are missing (hh:mm:ss, then Z or +hh:mm)"),
        ("date", "2023-02-29", "there is no such date"),
        ("uri", "example.com/page", "the scheme (such as https:) is missing"),
        ("uri", "https://example.com/a b", "spaces and control characters are percent-encoded (a space as %20)"),
    ],
)
def test_a_format_refusal_says_what_the_value_lacks(reg: ToolRegistry, fmt: str, value: str, said: str) -> None:
    add_schema(reg, {"v": {"type": "string", "format": fmt}})
    assert read(reg, "t", {"v": value}) == [f'- $.v: expected a valid {fmt}, got "{value}": {said}']


@pytest.mark.parametrize(
    ("fmt", "value", "shape"),
    [
        ("date-time", "tomorrow", "RFC 3339, with seconds and a UTC offset: 2024-01-31T09:30:00Z or 2024-01-31T09:30:00+02:00"),
        ("time", "8:15", "RFC 3339, with seconds and a UTC offset: 09:30:00Z or 09:30:00+02:00"),
        ("date", "01/31/2024", "YYYY-MM-DD, such as 2024-01-31"),
    ],
)
def test_a_date_or_time_refused_for_no_one_fault_is_shown_the_form(reg: ToolRegistry, fmt: str, value: str, shape: str) -> None:
    add_schema(reg, {"v": {"type": "string", "format": fmt}})
    assert read(reg, "t", {"v": value}) == [f'- $.v: expected a valid {fmt}, got "{value}" ({shape})']


# -- secret values are not repeated ------------------------------------------------------------------------------

SECRET = "sk-SECRET-abc123"


def refusal(reg: ToolRegistry, name: str, args: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """The problem lines the model reads, and the problems a program reads (``error.to_dict()``)."""
    result = reg.try_call(name, args)
    assert result.error is not None
    lines, problems = read(reg, name, args), result.error.to_dict()["problems"]
    assert SECRET not in result.for_model() and SECRET not in repr(problems)
    return lines, problems


def test_a_value_under_a_secret_key_is_not_shown(reg: ToolRegistry) -> None:
    add_schema(
        reg,
        {
            "user": {"type": "string"},
            "api_key": {"type": "integer"},
            "auth_token": {"type": "object", "properties": {"id": {"type": "integer"}}},
            "max_tokens": {"type": "integer"},
            "password": {"type": "string", "enum": ["a", "b"]},
            "refresh_token": {"type": "array", "items": {"type": "integer"}},
        },
    )
    lines, problems = refusal(reg, "t", {"api_key": SECRET})
    assert lines == ["- $.api_key: expected integer, got string (redacted)"] and problems[0]["got"] == "(redacted)"
    assert refusal(reg, "t", {"auth_token": {"id": SECRET}})[0] == ["- $.auth_token.id: expected integer, got string (redacted)"]
    assert refusal(reg, "t", {"password": SECRET})[0] == ['- $.password: expected one of ["a", "b"], got (redacted)']
    assert refusal(reg, "t", {"refresh_token": [1, SECRET]})[0] == [
        "- $.refresh_token[1]: expected integer, got string (redacted)"
    ]
    # Nothing to hide in null or a boolean; values under other keys are shown as before, also under a
    # name the logs would mask but the model needs (the exception texts' rules: MODEL_SECRET_KEYS).
    assert refusal(reg, "t", {"api_key": None})[0] == ["- $.api_key: expected integer, got null"]
    assert refusal(reg, "t", {"max_tokens": "lots"})[0] == ['- $.max_tokens: expected integer, got string "lots"']
    assert refusal(reg, "t", {"user": 5})[0] == ["- $.user: expected string, got integer 5"]


def test_secrets_inside_a_value_shown_are_masked(reg: ToolRegistry) -> None:
    add_schema(reg, {"user": {"type": "string"}, "dsn": {"type": "integer"}})
    lines, problems = refusal(reg, "t", {"user": {"password": SECRET, "name": "bob"}})
    assert lines == ['- $.user: expected string, got object {"password": "[REDACTED]", "name": "bob"}']
    assert problems[0]["got"] == '{"password": "[REDACTED]", "name": "bob"}'
    assert refusal(reg, "t", {"user": ["api_key", SECRET]})[0] == [
        '- $.user: expected string, got array ["api_key", "[REDACTED]"]'
    ]
    assert refusal(reg, "t", {"dsn": f"postgres://admin:{SECRET}@db/x"})[0] == [
        '- $.dsn: expected integer, got string "postgres://[REDACTED]@db/x"'
    ]


def test_a_secret_refused_by_another_keyword_is_not_shown(reg: ToolRegistry) -> None:
    either = {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "string", "pattern": "^a"}]}
    add_schema(reg, {"client_secret": {"type": "string", "pattern": "^[a-z]+$"}, "token": either, "note": either})
    assert refusal(reg, "t", {"client_secret": SECRET})[0] == [
        '- $.client_secret: expected a string matching the pattern "^[a-z]+$", got (redacted)'
    ]
    alternatives = "must match at least one of the alternatives; option 1: expected at most 2 characters, got {}; "
    alternatives += 'option 2: expected a string matching the pattern "^a", got {}'
    assert refusal(reg, "t", {"token": SECRET})[0] == ["- $.token: " + alternatives.format(16, "(redacted)")]
    assert refusal(reg, "t", {"note": f"password={SECRET}"})[0] == [
        "- $.note: " + alternatives.format(25, '"password=[REDACTED]"')
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_extra_secret_keys_are_hidden_too(backend: Backend, patient_patterns: None) -> None:
    """Key names the application adds (``extra_secret_keys``) hide their values as MODEL_SECRET_KEYS do."""
    plugin = ValidationPlugin(backend=backend, extra_secret_keys=["ssn", "accountNumber"])
    reg = ToolRegistry(plugins={"validation": plugin}, autoload=False, clock=ManualClock())
    add_schema(
        reg,
        {
            "ssn": {"type": "integer"},
            "customer_ssn": {"type": "string", "pattern": "^[0-9]+$"},
            "ssn_format": {"type": "integer"},
            "account_number": {"type": "integer"},
            "user": {"type": "string"},
        },
    )
    assert refusal(reg, "t", {"ssn": SECRET})[0] == ["- $.ssn: expected integer, got string (redacted)"]
    assert refusal(reg, "t", {"customer_ssn": SECRET})[0] == [
        '- $.customer_ssn: expected a string matching the pattern "^[0-9]+$", got (redacted)'
    ]
    assert refusal(reg, "t", {"account_number": SECRET})[0] == ["- $.account_number: expected integer, got string (redacted)"]
    assert refusal(reg, "t", {"user": {"ssn": SECRET}})[0] == ['- $.user: expected string, got object {"ssn": "[REDACTED]"}']
    assert refusal(reg, "t", {"ssn_format": f"ssn={SECRET}"})[0] == [
        '- $.ssn_format: expected integer, got string "ssn=[REDACTED]"'  # a name on its last words only
    ]
    assert refusal(reg, "t", {"ssn": None})[0] == ["- $.ssn: expected integer, got null"]
    # Without them, as before; set as an option (harness-one.toml's [plugins.validation]) they apply alike.
    plain = ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, autoload=False, clock=ManualClock())
    add_schema(plain, {"ssn": {"type": "integer"}})
    assert read(plain, "t", {"ssn": "x"}) == ['- $.ssn: expected integer, got string "x"']
    options = {"validation": {"backend": backend, "extra_secret_keys": "ssn"}}  # one string is one name
    configured = ToolRegistry(
        plugins={"validation": ValidationPlugin}, plugin_options=options, autoload=False, clock=ManualClock()
    )
    add_schema(configured, {"ssn": {"type": "integer"}})
    assert refusal(configured, "t", {"ssn": SECRET})[0] == ["- $.ssn: expected integer, got string (redacted)"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_float_past_2_53_under_a_secret_key_is_not_shown(backend: Backend, patient_patterns: None) -> None:
    """An integer given as a whole float too large to be exact is refused; under a secret key (the
    defaults or ``extra_secret_keys``) without its value, on the quick path and the whole way alike."""
    plugin = ValidationPlugin(backend=backend, extra_secret_keys=["ssn"])
    reg = ToolRegistry(plugins={"validation": plugin}, autoload=False, clock=ManualClock())
    add_schema(
        reg, {"api_key": {"type": "integer"}, "ssn": {"type": "integer"}, "n": {"type": "integer"}, "s": {"type": "string"}}
    )
    why = "expected an integer without a fraction or exponent, got {} (past 2**53 such a number is rounded)"
    assert refusal(reg, "t", {"api_key": 1e300})[0] == ["- $.api_key: " + why.format("(redacted)")]
    assert refusal(reg, "t", {"ssn": 2.0**60})[0] == ["- $.ssn: " + why.format("(redacted)")]
    assert refusal(reg, "t", {"n": 2.0**60})[0] == ["- $.n: " + why.format("1.152921504606847e+18")]
    long_text = "x" * 5000  # past the quick path's bounds: the whole way converts
    assert refusal(reg, "t", {"ssn": 2.0**60, "s": long_text})[0] == ["- $.ssn: " + why.format("(redacted)")]


def test_extra_secret_keys_must_be_names() -> None:
    with pytest.raises(PluginError, match=r"extra_secret_keys takes key names \(strings\), got int 1"):
        ToolRegistry(
            plugins={"validation": ValidationPlugin},
            plugin_options={"validation": {"extra_secret_keys": ["ssn", 1]}},
            autoload=False,
        )
