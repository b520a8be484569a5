"""Patterns read alike by both validation backends and by the definition check of defaults: a ``-`` next to a
class escape in a character class, and ``\\w``/``\\d`` in a lookaround pattern where a ``default`` is checked."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from harness_one import (
    Tool,
    ToolArgumentError,
    ToolDefinitionError,
    ToolRegistry,
    ecma_classes,
    rust_pattern,
    rust_schema,
    schema_objects,
)
from harness_one_plugins import ValidationPlugin, compile_schema

BACKENDS = ["python", "rust"]
STRINGS = ["a-5", "-", "~", "`", "{", "|", "_", ":", ".", "q", "é", "٣", " ", "\u00a0", "+", ","]


def registry(backend: str, parameters: dict[str, Any]) -> ToolRegistry:
    reg = ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, autoload=False)
    reg.add(lambda s="": s, name="f", parameters=parameters)
    return reg


def accepts(reg: ToolRegistry, text: str) -> bool:
    try:
        reg.call("f", {"s": text})
    except ToolArgumentError:
        return False
    return True


def string(pattern: str, **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern, **more}}}


# Accepted by jsonschema-rs: a `-` right after a class escape is a character (then a new class item starts).
# Each pattern and the characters (of STRINGS) it takes.
DASHES = {
    "^[\\w--]+$": "a-5_q",
    "^[^\\w--]+$": "~`{|:. é٣\u00a0+,",
    "^[\\w---a]+$": "a-5_:.`q",  # \w, -, then the range - to a
    "^[\\w--a]+$": "a-5_q",
    "^[\\w--\\d]+$": "a-5_q",
    "^[\\d--]+$": "-",
    "^[\\s--]+$": "- \u00a0",
    "^[\\W--]+$": "-~`{|:. é٣\u00a0+,",
    "^[+--\\w]+$": "a-5_q+,",
    "^[a-z-\\w]+$": "a-5_q",
    "^(?!q)[\\w--]+$": "a-5_",
    "^(?!q)[\\w---a]+$": "a-5_:.`",
    "^(?!q)[^\\w--]+$": "~`{|:. é٣\u00a0+,",
    "^(?!q)[\\s--]+$": "- \u00a0",
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("pattern", list(DASHES))
@pytest.mark.usefixtures("patient_patterns")
def test_a_dash_after_a_class_escape_is_a_character_on_both_backends(pattern: str, backend: str) -> None:
    reg = registry(backend, string(pattern))
    got = {text for text in STRINGS if accepts(reg, text)}
    want = {text for text in STRINGS if set(text) <= set(DASHES[pattern])}
    assert got == want, (pattern, backend)


@pytest.mark.parametrize(
    "pattern",
    ["^[\\w-~]+$", "^[\\d-z]+$", "^[a-\\d]+$", "^[\\s-x]+$", "^[\\W-~]+$", "^[^\\w-~]+$", "^[^\\d-z]+$", "^(?!x)[\\w-~]+$"],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_class_escape_as_a_range_end_is_refused_at_definition_on_both_backends(pattern: str, backend: str) -> None:
    with pytest.raises(ToolDefinitionError, match="is not a supported regular expression"):
        registry(backend, string(pattern))


@pytest.mark.parametrize(
    ("pattern", "refused"),
    [("^[\\w-~]+$", "`{|"), ("^[\\d-z]+$", "abc:"), ("^[a-\\d]+$", "bcd"), ("^[^\\w-~]+$", "-~")],
)
@pytest.mark.usefixtures("patient_patterns")
def test_the_python_backend_never_reads_a_class_escape_as_a_range_end(pattern: str, refused: str) -> None:
    """compile_schema checks no definition: the pure-Python backend reads such a pattern as ECMA-262's Annex B
    does (``\\w``, ``-``, ``~``), never as a range from the last character it writes the class as (``_-~``)."""
    compiled = compile_schema({"type": "string", "pattern": pattern}, "python")
    assert not any(compiled.is_valid(ch) for ch in refused)


LOOKAROUND_DEFAULTS = [
    ("^(?!x)\\w+$", "josé"),
    ("^(?!x)\\d+$", "٣"),
    ("^(?=.)\\s$", "\u0085"),
    ("(?<!x)^[\\w-]+$", "jo-sé"),
]


@pytest.mark.parametrize(("pattern", "default"), LOOKAROUND_DEFAULTS)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.usefixtures("patient_patterns")
def test_a_default_calls_refuse_is_refused_at_definition(pattern: str, default: str, backend: str) -> None:
    parameters = string(pattern)
    assert not accepts(registry(backend, parameters), default)  # what a call reads the pattern as
    with pytest.raises(ToolDefinitionError, match="the default does not match") as refused:
        Tool.create(lambda s="": s, name="f", parameters=string(pattern, default=default))
    assert f'does not match "{pattern}"' in str(refused.value)  # the pattern as written, not as rewritten


@pytest.mark.parametrize(("pattern", "default"), [("^(?!x)\\W+$", "é"), ("^(?!x)\\D$", "٣"), ("^(?=.)\\S$", "\u0085")])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.usefixtures("patient_patterns")
def test_a_default_calls_accept_is_accepted_at_definition_and_filled_in(pattern: str, default: str, backend: str) -> None:
    reg = registry(backend, string(pattern, default=default))
    assert reg.call("f", {}) == default
    assert reg.call("f", {"s": default}) == default


@pytest.mark.parametrize("anchored", [False, True])
def test_defaults_under_rewritten_pattern_property_names_are_checked_there(anchored: bool) -> None:
    """A ``patternProperties`` name is rewritten too; a default under it is found in the rewritten schema
    (with an anchor, through a ``$ref`` to where it is)."""
    name = "^(?!x)\\w+$"
    inner: dict[str, Any] = {"type": "string", "pattern": name, "default": "josé"}
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"m": {"type": "object", "patternProperties": {name: inner}, "default": {"josé": "a"}}},
    }
    if anchored:
        parameters["$defs"] = {"n": {"$anchor": "n", "type": "string"}}
    with pytest.raises(ToolDefinitionError, match=r"#/properties/m/patternProperties/.*/default"):
        Tool.create(lambda m=None: m, name="f", parameters=parameters)
    inner["default"] = "jose"
    parameters["properties"]["m"]["default"] = {"josé": "a"}
    parameters["properties"]["m"]["additionalProperties"] = False
    with pytest.raises(ToolDefinitionError, match="#/properties/m/default"):  # "josé" is no name the pattern takes
        Tool.create(lambda m=None: m, name="f", parameters=parameters)


def test_the_pattern_rewrites_are_public_for_plugins() -> None:
    """What the validation plugin gives each backend, from ``harness_one`` (a plugin imports no private module)."""
    import harness_one

    assert {"ecma_classes", "rust_pattern"} <= set(harness_one.__all__)
    assert ecma_classes("^[\\w-~]+$") == "^[0-9A-Za-z_\\-~]+$"  # \w written out, the - a character
    assert ecma_classes("^\\d$") == "^[0-9]$"
    assert rust_pattern("^\\w+$") == "^\\w+$"  # no lookaround: jsonschema-rs reads \w as ECMA-262 does
    assert rust_pattern("^(?!x)\\w+$") == "^(?!x)[0-9A-Za-z_]+$"
    assert rust_pattern("^(?!x)[\\w-~]+$") == "^(?!x)[\\w-~]+$"  # refused by jsonschema-rs as written: kept


@pytest.mark.parametrize("pattern", ["[\\", "a[^\\", "[\\d\\"])
def test_a_class_left_open_at_a_final_backslash_is_the_regex_modules_error(pattern: str) -> None:
    """compile_schema checks no definition: such a pattern is refused by the ``regex`` module, not an IndexError."""
    import regex

    assert ecma_classes(pattern) == pattern.replace("\\d", "0-9")
    with pytest.raises(regex.error):
        compile_schema({"type": "string", "pattern": pattern}, "python").is_valid("a")


def test_rust_schema_drops_keywords_and_rewrites_patterns_under_unknown_keywords() -> None:
    """The schema the validation plugin gives jsonschema-rs, from ``harness_one``: a pattern in a schema reached by
    ``$ref`` under an unknown keyword is rewritten, the ``drop`` keywords go from every schema object, data stays."""
    lookaround = "^(?!x)\\w+$"
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"s": {"$ref": "#/components/U"}, "c": {"type": "string", "contentEncoding": "base64"}},
        "components": {"U": {"type": "string", "pattern": lookaround, "contentMediaType": "text/plain"}},
        "examples": [{"pattern": lookaround, "contentEncoding": "base64"}],
    }
    original = copy.deepcopy(schema)
    given = rust_schema(schema, drop=frozenset({"contentEncoding", "contentMediaType"}))
    assert schema == original  # a copy: the tool's own schema is untouched
    assert given["components"]["U"] == {"type": "string", "pattern": "^(?!x)[0-9A-Za-z_]+$"}
    assert given["properties"]["c"] == {"type": "string"}
    assert given["examples"] == original["examples"]  # data, no schema
    assert rust_schema(given, drop=frozenset({"contentEncoding"})) is given  # nothing to change: the same object
    assert rust_schema(schema)["properties"]["c"] == original["properties"]["c"]  # nothing dropped unless asked
    paths = [path for _, path in schema_objects(schema)]
    assert ("components", "U") in paths and ("properties", "c") in paths
    assert not any(path[:1] == ("examples",) for path in paths)

    import jsonschema_rs

    assert not jsonschema_rs.validator_for(given).is_valid({"s": "josé"})  # \w as ECMA-262 reads it
    assert jsonschema_rs.validator_for(given).is_valid({"s": "jose", "c": "not base64!"})
