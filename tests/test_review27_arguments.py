"""Review 27: secrets in the excerpt of invalid JSON, and why a dependent schema's or an if/else rule's refusal applies."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import ManualClock, ToolArgumentError, ToolRegistry, defineTool
from harness_one._arguments import ArgumentLimits, decode_arguments

_LIMITS = ArgumentLimits()


def _near(text: str, **kw: Any) -> str:
    """The refusal's excerpt of invalid JSON ``text``: what ``(near '...')`` quotes."""
    with pytest.raises(ToolArgumentError) as err:
        decode_arguments(text, _LIMITS, **kw)
    (problem,) = err.value.problems
    assert problem.keyword == "json" and problem.message.startswith("arguments are not valid JSON: ")
    return problem.message.split(" (near ", 1)[1]


# ---------------------------------------------------------------------------- 3(a) a line break inside a secret


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('{"name": "n", "api_key": "\nsk-live-AbCdEfGhIjKlMnOpQrSt"}', """'{"name": "n", "api_key": "[REDACTED]')"""),
        ('{"name": "n", "api_key": "sk-live-\nAbCdEfGhIjKlMnOpQrSt"}', """'{"name": "n", "api_key": "[REDACTED]')"""),
        ('{"user": "u", "password": "hunter2\nSECRETPART2xyz"}', """'{"user": "u", "password": "[REDACTED]"}')"""),
        # inside an array under a secret key, and a string under a secret key that starts before the window
        ('{"u": 1, "api_key": ["a", "sk-\nSECRETPART2xyz"]}', """'{"u": 1, "api_key": [[REDACTED]]}')"""),
        ('{"api_key": "' + "Z" * 1200 + '\nSECRETPART2xyz"}', """'[REDACTED]"}')"""),
    ],
)
def test_a_raw_line_break_inside_a_secret_does_not_end_its_masking(text: str, shown: str) -> None:
    near = _near(text)
    assert near == shown
    assert "SECRET" not in near and "AbCd" not in near and "hunter" not in near


# ---------------------------------------------------------------------------- 3(b) a name spelt with an escape


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('{"user": "u", "api\\u005fkey": "sk-SECRET1234" x}', """'r": "u", "api\\\\u005fkey": "[REDACTED]" x}')"""),
        ('{"u": "u", "p\\u0061ssword": ["SECRET1", "SECRET2" x]}', """'"u": "u", "p\\\\u0061ssword": [[REDACTED]]}')"""),
        ('{"u": "u", "\\u0074oken": {"v": "SECRET1234" x}}', """'{"u": "u", "\\\\u0074oken": {[REDACTED]}}')"""),
        ('{"u": "u", "api\\u005fkey": 1234567890123 x}', """'{"u": "u", "api\\\\u005fkey": [REDACTED] x}')"""),
    ],
)
def test_a_secret_name_spelt_with_an_escape_is_read_decoded(text: str, shown: str) -> None:
    near = _near(text)
    assert near == shown
    assert "SECRET" not in near and "1234567890123" not in near


def test_a_name_whose_escape_is_invalid_is_read_as_it_stands() -> None:
    """The mistake is in the name itself: its words are read as written (``q_password`` ends in ``password``)."""
    near = _near('{"u": 1, "x\\q_password": "hunter2SECRET"}')
    assert near == """'{"u": 1, "x\\\\q_password": "[REDACTED]')"""


def test_values_of_names_that_are_not_secret_stay_in_view() -> None:
    assert _near('{"us\\u0065r": "alice" x}') == """'{"us\\\\u0065r": "alice" x}')"""
    assert _near('{"note": "a\nb"}') == """'{"note": "a\\nb"}')"""


# ---------------------------------------------------------------------------- 3(c) more secret names


def test_the_excerpt_hides_the_values_of_the_names_it_is_given() -> None:
    text = '{"name": "x", "customer_ssn": "123-45-6789" "z": 1}'
    assert "123-45-6789" in _near(text)  # no secret by default
    near = _near(text, secret=lambda name: name.endswith("ssn"))
    assert near == """'x", "customer_ssn": "[REDACTED]" "z": 1}')"""


def test_the_validation_plugins_extra_secret_keys_reach_the_excerpt() -> None:
    reg = ToolRegistry(plugin_options={"validation": {"extra_secret_keys": ["ssn"]}})

    @defineTool(registry=reg)
    def file(name: str, ssn: str) -> str:
        """File."""
        return "ok"

    text = '{"name": "x", "ssn": "123-45-6789" "z": 1}'
    outcome = reg.try_call("file", text)
    assert isinstance(outcome.error, ToolArgumentError)
    assert "123-45-6789" not in outcome.error.message and '"ssn": "[REDACTED]"' in outcome.error.message
    bare = ToolRegistry()  # without the option the name is no secret: the excerpt shows its value
    bare.add(reg.get("file"))
    shown = bare.try_call("file", text)
    assert shown.error is not None and '"ssn": "123-45-6789"' in shown.error.message


# ---------------------------------------------------------------------------- 5. why a rule applies


def _refusals(schema: dict[str, Any], args: dict[str, Any], backend: str) -> list[tuple[str, str]]:
    """The problems a registry on a manual clock (the listing's time budget never runs out) names."""
    reg = ToolRegistry(clock=ManualClock(), plugin_options={"validation": {"backend": backend}})

    @defineTool(registry=reg, name="t", parameters=schema)
    def t(**kw: Any) -> Any:
        """T."""
        return kw

    outcome = reg.try_call("t", args)
    assert isinstance(outcome.error, ToolArgumentError)
    return [(p.path, p.message) for p in outcome.error.problems]


_PAY = {"type": "object", "properties": {"card": {"type": "string"}, "cvv": {"type": "string"}, "zip": {"type": "string"}}}


@pytest.mark.parametrize("backend", ["rust", "python"])
@pytest.mark.parametrize(
    "rule",
    [
        {"dependentSchemas": {"card": {"required": ["cvv"]}}},
        {"dependencies": {"card": {"required": ["cvv"]}}},
        {"dependentRequired": {"card": ["cvv"]}},
    ],
)
def test_a_property_a_dependent_schema_requires_says_when(rule: dict[str, Any], backend: str) -> None:
    assert _refusals({**_PAY, **rule}, {"card": "4111"}, backend) == [("$.cvv", "required when 'card' is present")]


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_a_dependent_schemas_other_rules_say_when_they_apply(backend: str) -> None:
    schema = {**_PAY, "dependentSchemas": {"card": {"properties": {"zip": {"maxLength": 5}}}}}
    assert _refusals(schema, {"card": "4111", "zip": "1234567"}, backend) == [
        ("$.zip", "expected at most 5 characters, got 7 (required when 'card' is present)")
    ]


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_a_property_named_like_a_keyword_is_no_rule(backend: str) -> None:
    schema = {"type": "object", "properties": {"dependencies": {"type": "object", "required": ["x"]}}}
    assert _refusals(schema, {"dependencies": {}}, backend) == [("$.dependencies.x", "required property is missing")]


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_if_then_and_if_else_rules_are_told_apart(backend: str) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "if": {"properties": {"a": {"const": "x"}}, "required": ["a"]},
        "then": {"required": ["b"]},
        "else": {"properties": {"b": {"maximum": 3}}},
    }
    assert _refusals(schema, {"a": "y", "b": 5}, backend) == [
        ("$.b", "expected a number <= 3, got 5 (required by an if/else rule of the schema)")
    ]
    assert _refusals(schema, {"a": "x"}, backend) == [
        ("$.b", "required property is missing (required by an if/then rule of the schema)")
    ]
