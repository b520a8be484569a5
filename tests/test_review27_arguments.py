"""Review 27: secrets in the excerpt of invalid JSON, and why a dependent schema's or an if/else rule's refusal applies."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import MODEL_SECRET_KEYS, ManualClock, Redactor, ToolArgumentError, ToolRegistry, defineTool
from harness_one._arguments import ArgumentLimits, decode_arguments

_LIMITS = ArgumentLimits()


def _near(text: str, **kw: Any) -> str:
    """The refusal's excerpt of invalid JSON ``text``: what ``(near '...')`` quotes."""
    with pytest.raises(ToolArgumentError) as err:
        decode_arguments(text, _LIMITS, **kw)
    (problem,) = err.value.problems
    assert problem.keyword == "json" and problem.message.startswith("arguments are not valid JSON: ")
    return problem.message.split(" (near ", 1)[1]


# ---------------------------------------------------------------------------- 3(a) the mistake inside a secret


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # a raw line break: the mistake is inside the string, masked from its opening quote to the excerpt's end
        ('{"name": "n", "api_key": "\nsk-live-AbCdEfGhIjKlMnOpQrSt"}', """'{"name": "n", "api_key": "[REDACTED]')"""),
        ('{"name": "n", "api_key": "sk-live-\nAbCdEfGhIjKlMnOpQrSt"}', """'{"name": "n", "api_key": "[REDACTED]')"""),
        ('{"user": "u", "password": "hunter2\nSECRETPART2xyz"}', """'{"user": "u", "password": "[REDACTED]')"""),
        # a string under a secret key that starts before the window
        ('{"api_key": "' + "Z" * 1200 + '\nSECRETPART2xyz"}', """'[REDACTED]')"""),
        # an unescaped quote inside it closed it early: masked from the opening quote on
        ('{"password": "pa"ss-SECRETword", "n": 1}', """'{"password": "[REDACTED]')"""),
        ('{"api_key": "sk-AB"CD-SECRET-EFGH"}', """'{"api_key": "[REDACTED]')"""),
        # an unquoted value: masked from where it starts, space or not
        ('{"api_key": sk-live-AB SECRET123456}', """'{"api_key": [REDACTED]')"""),
        # single-quoted with a space (the mistake is where the value starts)
        ("{\"api_key\": 'sk live SECRET123456'}", """'{"api_key": [REDACTED]')"""),
        ("{\"password\": 'correct horse battery'}", """'{"password": [REDACTED]')"""),
        ("{\"authorization\": 'Bearer SECRET12345'}", """'{"authorization": [REDACTED]')"""),
        # a quote inside it closed it early, and what follows is not the next name (space, a line break, a brace)
        ('{"password": "pa" ss-SECRETword", "n": 1}', """'{"password": "[REDACTED]')"""),
        ('{"password": "pa"\nSECRETword"}', """'{"password": "[REDACTED]')"""),
        ('{"password": "pa"}SECRETword"}', """'{"password": "[REDACTED]')"""),
        ('{"a": {"password": "pa"}} SECRETword"}}', """'{"a": {"password": "[REDACTED]')"""),
        ('{"api_key": "sk" "SECRET-AB"}', """'{"api_key": "[REDACTED]')"""),
        # an unquoted value that starts like a number or a literal
        ('{"api_key": 12SECRET34}', """'{"api_key": [REDACTED]')"""),
        ('{"api_key": true1SECRET}', """'{"api_key": [REDACTED]')"""),
        ('{"api_key": -1.5e3SECRET}', """'{"api_key": [REDACTED]')"""),
        # a secret name without its colon
        ('{"api_key" "sk-SECRET-1234"}', """'{"api_key" [REDACTED]')"""),
        ('{"api_key"  sk-SECRET-1234}', """'{"api_key"  [REDACTED]')"""),
        # never closed, or nothing after the colon
        ('{"api_key": "sk-live-SECRET', """'{"api_key": "[REDACTED]')"""),
        ('{"api_key": ', """'{"api_key": [REDACTED]')"""),
    ],
)
def test_a_mistake_inside_a_secret_masks_it_to_the_end_of_the_excerpt(text: str, shown: str) -> None:
    near = _near(text)
    assert near == shown
    for part in ("SECRET", "AbCd", "hunter", "horse", "Bearer", "live"):
        assert part not in near


def test_a_mistake_after_a_secret_string_hides_only_that_string() -> None:
    """Only when the mistake is the next name (a comma left out): a string followed by a colon within the excerpt."""
    assert _near('{"api_key": "sk-SECRET1234" "n": 1}') == """'{"api_key": "[REDACTED]" "n": 1}')"""
    assert _near('{"api_key": "' + "Z" * 1200 + '" "n": 1}') == """'[REDACTED]" "n": 1}')"""
    assert _near('{"a": {"api_key": "sk-SECRET1234"} "b": 1}') == """'{"a": {"api_key": "[REDACTED]"} "b": 1}')"""


# ---------------------------------------------------------------------------- 3(b) a name spelt with an escape


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('{"user": "u", "api\\u005fkey": "sk-SECRET1234" x}', """'"user": "u", "api\\\\u005fkey": "[REDACTED]')"""),
        ('{"u": "u", "api\\u005fkey": "sk-SECRET1234" "x": 1}', """'u", "api\\\\u005fkey": "[REDACTED]" "x": 1}')"""),
        ('{"u": "u", "p\\u0061ssword": "SECRET1234"x}', """'{"u": "u", "p\\\\u0061ssword": "[REDACTED]')"""),
        ('{"u": "u", "\\u0074oken": "SECRET\n1234"}', """'{"u": "u", "\\\\u0074oken": "[REDACTED]')"""),
        ('{"u": "u", "\\u0074oken": SECRET1234}', """'{"u": "u", "\\\\u0074oken": [REDACTED]')"""),
    ],
)
def test_a_secret_name_spelt_with_an_escape_is_read_decoded(text: str, shown: str) -> None:
    near = _near(text)
    assert near == shown
    assert "SECRET" not in near


def test_values_of_names_that_are_not_secret_stay_in_view() -> None:
    assert _near('{"us\\u0065r": "alice" x}') == """'{"us\\\\u0065r": "alice" x}')"""
    assert _near('{"note": "a\nb"}') == """'{"note": "a\\nb"}')"""
    assert _near('{"note": "a"b"}') == """'{"note": "a"b"}')"""
    assert _near('{"note": abc}') == """'{"note": abc}')"""
    assert _near('{"note": "a" b"}') == """'{"note": "a" b"}')"""
    assert _near('{"note": "a"}b"}') == """'{"note": "a"}b"}')"""
    assert _near('{"note": 12ab}') == """'{"note": 12ab}')"""
    assert _near('{"note" "x"}') == """'{"note" "x"}')"""


# ---------------------------------------------------------------------------- 3(c) more secret names


def _file_registry(**options: Any) -> ToolRegistry:
    reg = ToolRegistry(plugin_options={"validation": options})

    @defineTool(registry=reg)
    def file(name: str, ssn: str = "", api_key: str = "") -> str:
        """File."""
        return "ok"

    return reg


def _refused_near(reg: ToolRegistry, text: str) -> str:
    outcome = reg.try_call("file", text)
    assert isinstance(outcome.error, ToolArgumentError)
    (problem,) = outcome.error.problems
    assert problem.keyword == "json"
    return problem.message.split(" (near ", 1)[1]


def test_the_excerpt_hides_the_values_of_the_names_its_redactor_holds() -> None:
    text = '{"name": "x", "customer_ssn": "123-45-6789" "z": 1}'
    assert "123-45-6789" in _near(text)  # no secret by default
    near = _near(text, secrets=Redactor(MODEL_SECRET_KEYS, extra_keys=("ssn",), last_words=True))
    assert near == """'x", "customer_ssn": "[REDACTED]" "z": 1}')"""


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('{"name": "x", "ssn": "123-45-6789" "z": 1}', """'"name": "x", "ssn": "[REDACTED]" "z": 1}')"""),
        # Python-style quoting: the final pass is the plugin's redactor, as for MODEL_SECRET_KEYS
        ("{'ssn': '123-45-6789'}", """"{'ssn': '[REDACTED]'")"""),
        ("{'api_key': 'sk-SECRET-1234'}", """"{'api_key': '[REDACTED]")"""),
        ("{\"ssn\": '123 45 6789'}", """'{"ssn": [REDACTED]')"""),
    ],
)
def test_the_validation_plugins_extra_secret_keys_reach_the_excerpt(text: str, shown: str) -> None:
    assert _refused_near(_file_registry(extra_secret_keys=["ssn"]), text) == shown
    bare = _refused_near(_file_registry(), text)  # without the option the name is no secret
    assert ("123" in bare) is ("ssn" in text)


def test_the_extra_secret_keys_leave_with_the_plugin() -> None:
    reg = _file_registry(extra_secret_keys=["ssn"])
    text = '{"name": "x", "ssn": "123-45-6789" "z": 1}'
    assert "123-45-6789" not in _refused_near(reg, text)
    reg.plugins.unregister("validation")
    assert _refused_near(reg, text) == """'name": "x", "ssn": "123-45-6789" "z": 1}')"""


def test_a_replacement_validation_plugin_without_a_redactor_leaves_the_default() -> None:
    reg = _file_registry(extra_secret_keys=["ssn"])
    reg.plugins.unregister("validation")

    class Other:
        """A plugin registered under the validation plugin's name, without ``argument_secrets``."""

    reg.plugins.register(Other(), name="validation")
    assert _refused_near(reg, "{'ssn': '123-45-6789'}") == """"{'ssn': '123-45-6789'")"""
    assert _refused_near(reg, "{'api_key': 'sk-SECRET-1234'}") == """"{'api_key': '[REDACTED]")"""


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
        ("$.zip", "expected at most 5 characters, got 7 (a rule that applies when 'card' is present)")
    ]
    prohibits = {**_PAY, "dependentSchemas": {"card": {"not": {"required": ["cvv"]}}}}
    assert _refusals(prohibits, {"card": "4111", "cvv": "1"}, backend) == [
        ("$", 'must not match the schema {"required": ["cvv"]} (a rule that applies when \'card\' is present)')
    ]


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_a_dependent_schema_names_its_property_by_path_when_not_beside_the_problem(backend: str) -> None:
    pay = {"type": "object", "properties": {**_PAY["properties"], "billing": {"type": "object"}}}
    schema = {**pay, "dependentSchemas": {"card": {"properties": {"billing": {"required": ["zip"]}}}}}
    assert _refusals(schema, {"card": "4", "billing": {}}, backend) == [("$.billing.zip", "required when '$.card' is present")]
    items = {
        "type": "object",
        "properties": {"x": {"type": "array", "items": {**_PAY, "dependentSchemas": {"card": {"required": ["cvv"]}}}}},
    }
    assert _refusals(items, {"x": [{"card": "4"}]}, backend) == [("$.x[0].cvv", "required when 'card' is present")]
    ref = {**_PAY, "$defs": {"needs": {"required": ["cvv"]}}, "dependentSchemas": {"card": {"$ref": "#/$defs/needs"}}}
    assert _refusals(ref, {"card": "4"}, backend) == [("$.cvv", "required when 'card' is present")]


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_alternatives_and_if_then_rules_inside_or_around_a_dependent_schema_keep_their_own_text(backend: str) -> None:
    pay = {"type": "object", "properties": {**_PAY["properties"], "billing": {"type": "object"}}}
    any_of = {**pay, "dependentSchemas": {"card": {"anyOf": [{"required": ["cvv"]}, {"required": ["billing"]}]}}}
    assert _refusals(any_of, {"card": "4"}, backend) == [
        (
            "$",
            "must match at least one of the alternatives; option 1: $.cvv: required property is missing;"
            " option 2: $.billing: required property is missing",
        )
    ]
    then = " (required by an if/then rule of the schema)"
    inside_then = {**pay, "if": {"required": ["billing"]}, "then": {"dependentSchemas": {"card": {"required": ["cvv"]}}}}
    assert _refusals(inside_then, {"card": "4", "billing": {}}, backend) == [("$.cvv", "required property is missing" + then)]
    then_inside = {**pay, "dependentSchemas": {"card": {"if": {"required": ["billing"]}, "then": {"required": ["cvv"]}}}}
    assert _refusals(then_inside, {"card": "4", "billing": {}}, backend) == [("$.cvv", "required property is missing" + then)]


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
