"""Definition-time schema checks: every bad definition is a ToolDefinitionError that names the place."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness_one import Tool, ToolArgumentError, ToolDefinitionError, ToolRegistry, rust_pattern
from harness_one._schema import _BUNDLED, check_schema
from harness_one_plugins import ValidationPlugin, compile_schema
from harness_one_plugins.validation import _python_pattern

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ["python", "rust"]


def refused(parameters: Any, fn: Any = None) -> str:
    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(fn or (lambda **kw: kw), name="f", parameters=parameters)
    return str(err.value)


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize("parameters", [["type"], "object", 3, None.__class__])
def test_parameters_that_are_not_a_mapping(parameters: Any) -> None:
    text = refused(parameters)
    assert "parameters must be a JSON Schema object (a mapping)" in text and type(parameters).__name__ in text


@pytest.mark.parametrize(
    ("parameters", "where"),
    [
        ({"type": "object", "properties": {"a": {"enum": {1, 2}}}}, "at #/properties/a/enum, expected a JSON value, got set"),
        (
            {"type": "object", "properties": {"a": {"maximum": float("nan")}}},
            "at #/properties/a/maximum, nan is not a JSON number",
        ),
        ({"type": "object", "properties": {1: {}}}, "at #/properties, keys must be strings"),
        ({"type": "object", "default": object()}, "at #/default, expected a JSON value, got object"),
    ],
)
def test_values_that_are_not_json(parameters: Any, where: str) -> None:
    assert where in refused(parameters)


def test_tuples_and_str_enums_become_plain_json() -> None:
    import enum

    class Kind(str, enum.Enum):
        A = "a"

    tool = Tool.create(
        lambda k: k, name="f", parameters={"type": "object", "properties": {"k": {"enum": (Kind.A, "b")}}, "required": ("k",)}
    )
    assert tool.parameters == {"type": "object", "properties": {"k": {"enum": ["a", "b"]}}, "required": ["k"]}
    assert type(tool.parameters["properties"]["k"]["enum"][0]) is str


def test_a_schema_nested_past_the_limit_is_refused_not_a_recursion_error() -> None:
    deep: dict[str, Any] = {"type": "object"}
    node = deep
    for _ in range(5000):
        node["properties"] = {"x": {"type": "object"}}
        node = node["properties"]["x"]
    assert "nested more than 128 levels deep" in refused(deep)


def test_invalid_under_the_metaschema_names_the_path_and_keyword() -> None:
    text = refused(obj(a={"type": "object", "properties": {"b": {"minLength": -1}}}))
    assert "at #/properties/a/properties/b/minLength, keyword 'minimum'" in text


@pytest.mark.parametrize("name", ["enum", "default", "const", "examples"])
def test_remote_ref_under_a_property_named_like_a_data_keyword(name: str) -> None:
    text = refused(obj(**{name: {"$ref": "https://example.com/evil.json"}}))
    assert "never fetched" in text and f"(at #/properties/{name}/$ref)" in text


@pytest.mark.parametrize(
    "parameters",
    [
        obj(a={"items": [{"$ref": "other.json"}]}),
        obj(a={"x-extension": {"nested": {"$ref": "https://example.com/x.json"}}}),
        obj(a={"$defs": {"b": {"$schema": "https://example.com/my-dialect"}}}),
        {"$schema": "https://example.com/my-dialect", "type": "object"},
        obj(a={"$ref": "http://json-schema.org/draft-07/schema#"}),  # another draft's metaschema is not bundled
    ],
    ids=["relative", "unknown-keyword", "nested-schema", "root-schema", "other-draft"],
)
def test_remote_references_anywhere_are_refused(parameters: dict[str, Any]) -> None:
    text = refused(parameters)
    assert "never fetched" in text


def test_unknown_dialect_is_refused_without_any_network(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: pytest.fail("network used"))
    assert "unknown $schema 'http://example.com/custom'" in refused({"$schema": "http://example.com/custom", "type": "object"})


@pytest.mark.parametrize(
    ("parameters", "where"),
    [
        (obj(a={"$ref": "#/$defs/missing"}), "#/properties/a/$ref"),
        (obj(a={"$ref": "#missing-anchor"}), "#/properties/a/$ref"),
        ({"type": "object", "$defs": {"b": {"$ref": "#/$defs/c/allOf/0"}, "c": {"allOf": [{"type": "integer"}]}}}, None),
        (obj(a={"items": {"$ref": "#/properties/a/items/nope"}}), "#/properties/a/items/$ref"),
    ],
)
def test_dangling_local_refs(parameters: dict[str, Any], where: str | None) -> None:
    if where is None:  # pointers through arrays resolve
        Tool.create(lambda **kw: kw, name="f", parameters=parameters)
        return
    text = refused(parameters)
    assert f"at {where}, $ref" in text and "points to nothing in the schema" in text


def test_local_refs_through_ids_and_anchors_resolve() -> None:
    schema = {
        "type": "object",
        "$id": "https://example.com/root.json",
        "$defs": {
            "pos": {"$anchor": "positive", "type": "integer", "minimum": 1},
            "item": {"$id": "item.json", "$defs": {"name": {"type": "string"}}, "properties": {"n": {"$ref": "#/$defs/name"}}},
        },
        "properties": {
            "a": {"$ref": "#positive"},
            "b": {"$ref": "item.json"},
            "c": {"$ref": "https://example.com/item.json#/$defs/name"},
        },
    }
    tool = Tool.create(lambda **kw: kw, name="f", parameters=schema)
    for backend in BACKENDS:
        compiled = compile_schema(tool.parameters, backend)
        assert compiled.is_valid({"a": 2, "b": {"n": "x"}, "c": "y"})
        assert not compiled.is_valid({"b": {"n": 3}})


@pytest.mark.parametrize(
    "defs",
    [
        {"a": {"$anchor": "x", "type": "string"}, "b": {"$anchor": "x", "type": "integer"}},
        {"a": {"$dynamicAnchor": "x", "type": "string"}, "b": {"anyOf": [{"$anchor": "x", "type": "integer"}]}},
    ],
)
def test_an_anchor_declared_twice_in_one_resource_is_refused(defs: dict[str, Any]) -> None:
    """The backends would each pick one (python jsonschema the first, jsonschema-rs the last), and export a third."""
    second = "#/$defs/b" if "$anchor" in defs["b"] else "#/$defs/b/anyOf/0"
    text = refused({"type": "object", "$defs": defs, "properties": {"p": {"$ref": "#x"}}})
    assert f"at {second}, the anchor 'x' is declared again (first at #/$defs/a)" in text and "ambiguous" in text
    draft_07 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    text = refused({**draft_07, "definitions": {"a": {"$id": "#x"}, "b": {"$id": "#x"}}})
    assert "at #/definitions/b, the anchor 'x' is declared again (first at #/definitions/a)" in text


def test_one_anchor_name_in_two_resources_and_on_one_schema_twice_is_accepted() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "a": {"$anchor": "x", "$dynamicAnchor": "x", "type": "string"},
            "b": {"$id": "https://example.com/b", "$anchor": "x", "type": "integer"},
        },
        "properties": {"p": {"$ref": "#x"}, "q": {"$ref": "https://example.com/b#x"}},
    }
    tool = Tool.create(lambda **kw: kw, name="f", parameters=schema)
    for backend in BACKENDS:
        compiled = compile_schema(tool.parameters, backend)
        assert compiled.is_valid({"p": "s", "q": 1}) and not compiled.is_valid({"p": 1}) and not compiled.is_valid({"q": "s"})


# Refused by jsonschema-rs itself, then what it accepts but ECMA-262 and the `regex` module refuse or read otherwise.
REFUSED_PATTERNS = ["a{,5}", "\\Z", "[\\w-z]", "(?<n>a)\\k<n>", "a{2,1}", "(", "\\"]
REFUSED_PATTERNS += ["a{2}{3}", "a*?+", "a??{2}", "^*", "\\b+", "(?<!{2})", "[]", "[^]a", "\\A", "\\e", "\\N", "(a\\1)", "a(?i)b"]


@pytest.mark.parametrize("pattern", REFUSED_PATTERNS)
@pytest.mark.parametrize("place", ["pattern", "patternProperties", "propertyNames"])
def test_patterns_either_backend_refuses(pattern: str, place: str) -> None:
    if place == "pattern":
        schema, where = obj(a={"type": "string", "pattern": pattern}), "#/properties/a/pattern"
    elif place == "patternProperties":
        schema, where = (
            {"type": "object", "patternProperties": {pattern: {}}},
            "#/patternProperties/" + pattern.replace("~", "~0").replace("/", "~1"),
        )
    else:
        schema, where = {"type": "object", "propertyNames": {"pattern": pattern}}, "#/propertyNames/pattern"
    text = refused(schema)
    assert f"at {where}, {pattern!r} is not a supported regular expression" in text


# Patterns jsonschema-rs accepts, with strings on which ECMA-262 and Python's `re` disagree.
AGREEMENT = [
    ("^\\p{Letter}+$", ["héllo", "h1", "Ωμέγα"]),
    ("^\\p{L}\\p{Nd}$", ["a5", "a٣", "55"]),
    ("^\\d+$", ["123", "١٢٣", "12\n"]),
    ("^\\w+$", ["abc_1", "é", "ab\n"]),
    ("\\s", ["\u00a0", "\ufeff", "\u0085", "\u180e", "x"]),
    ("^\\S+$", ["\u00a0", "ab", "a\u2028b"]),
    ("^[\\D]$", ["5", "x", "٣"]),
    ("^[^\\W]$", ["_", "é", "-"]),
    ("^.$", ["\r", "\n", "\u2028", "x", "\U0001f600"]),
    ("^a$", ["a", "a\n"]),
    ("(?m)^b$", ["a\nb", "b\nc"]),
    ("^\\cJ$", ["\n", "J"]),
    ("^\\u{1F600}$", ["\U0001f600", "u"]),
    ("^[[:alpha:]]$", ["a", "[", ":"]),
    ("^(a)\\1$", ["aa", "ab"]),
    ("(?<=a)b", ["ab", "cb"]),
    ("^\\x41\\u0042$", ["AB", "ab"]),
    ("(?i)^straße$", ["STRASSE", "Straße"]),
]


@pytest.mark.parametrize(("pattern", "strings"), AGREEMENT, ids=[p for p, _ in AGREEMENT])
@pytest.mark.usefixtures("patient_patterns")
def test_both_backends_accept_and_agree_on_supported_patterns(pattern: str, strings: list[str]) -> None:
    schema = obj(a={"type": "string", "pattern": pattern})
    Tool.create(lambda **kw: kw, name="f", parameters=schema)  # accepted at definition
    _python_pattern(pattern)  # and by the pure-Python engine
    rust, python = compile_schema(schema, "rust"), compile_schema(schema, "python")
    for text in strings:
        assert rust.is_valid({"a": text}) == python.is_valid({"a": text}), (pattern, text)


def test_random_patterns_are_accepted_by_both_engines_alike() -> None:
    """A seeded fuzz: a pattern passes the definition check exactly when the pure-Python engine compiles it too."""
    import random

    import jsonschema_rs

    from harness_one._schema import _pattern_problem

    atoms = ["a", ".", "\\d", "\\w", "\\s", "\\W", "[a-z]", "[^a]", "\\b", "^", "$", "(", ")", "|", "*", "+", "?", "{2}", "{1,3}"]
    atoms += [
        "(?:",
        "(?=",
        "(?<!",
        "\\1",
        "(?<n>",
        "\\k<n>",
        "\\p{L}",
        "\\u0041",
        "\\cA",
        "[]",
        "[^]",
        "\\A",
        "\\e",
        "(?i)",
        "{",
        "]",
    ]
    strings = ["", "a", "ab", "A1", " ", "\n", "é", "\U0001f600", "a\n", "-", "{2}"]
    rng = random.Random(20240601)
    accepted = 0
    for _ in range(3000):
        pattern = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 6)))
        if _pattern_problem(pattern) is not None:
            continue
        accepted += 1
        rx = _python_pattern(pattern)  # raises if the engines disagree on acceptance
        # as the plugin gives it: with lookaround, jsonschema-rs would read \d, \w and \s as Unicode classes
        rust = jsonschema_rs.validator_for({"pattern": rust_pattern(pattern)})
        for text in strings:
            assert rust.is_valid(text) == (rx.search(text) is not None), (pattern, text)
    assert accepted > 300


@pytest.mark.usefixtures("patient_patterns")
def test_letter_pattern_from_the_docs_works_on_both_backends() -> None:
    for backend in BACKENDS:
        reg = ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, autoload=False)
        reg.add(
            lambda name: name,
            name="f",
            parameters=obj(name={"type": "string", "pattern": "^\\p{Letter}+$"}) | {"required": ["name"]},
        )
        assert reg.call("f", {"name": "Zoë"}) == "Zoë"
        with pytest.raises(ToolArgumentError, match=r"\$\.name: expected a string matching the pattern"):
            reg.call("f", {"name": "R2D2"})


def test_every_pattern_in_the_test_suite_is_accepted_by_both_engines_alike() -> None:
    suite = ROOT.parent / "shared" / "jsonschema-test-suite" / "tests"
    if not suite.is_dir():
        pytest.skip("JSON-Schema-Test-Suite not found")
    patterns: set[str] = set()

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                patterns.add(node["pattern"])
            if isinstance(node.get("patternProperties"), dict):
                patterns.update(node["patternProperties"])
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    for path in suite.glob("**/*.json"):
        collect([case["schema"] for case in json.loads(path.read_text())])
    assert len(patterns) > 20
    for pattern in patterns:
        check_schema(obj(a={"pattern": pattern}), tool="t")
        _python_pattern(pattern)


@pytest.mark.parametrize("dialect", sorted(_BUNDLED))
def test_bundled_metaschemas_resolve_offline_on_both_backends(dialect: int) -> None:
    uri = {2020: "https://json-schema.org/draft/2020-12/schema", 2019: "https://json-schema.org/draft/2019-09/schema"}.get(
        dialect, f"http://json-schema.org/draft-0{dialect}/schema#"
    )
    for target in _BUNDLED[dialect]:
        schema = {"$schema": uri, "type": "object", "properties": {"s": {"$ref": target}}}
        check_schema(schema, tool="t")
        for backend in BACKENDS:
            assert compile_schema(schema, backend).is_valid({"s": {}}), (target, backend)


def test_output_schema_is_checked_and_names_itself() -> None:
    with pytest.raises(ToolDefinitionError, match=r"output_schema are not valid JSON Schema: at #/type"):
        Tool.create(lambda: 1, name="f", output_schema={"type": "integr"})
    with pytest.raises(ToolDefinitionError, match="output_schema must be a JSON Schema object"):
        Tool.create(lambda: 1, name="f", output_schema=["integer"])  # type: ignore[arg-type]


def test_definition_imports_no_jsonschema() -> None:
    """Importing harness-one and defining tools (explicit schemas included) loads none of the heavy modules."""
    code = """
import sys
import harness_one.tools
heavy = ("jsonschema", "referencing", "jsonschema_specifications", "pydantic", "harness_one_plugins._formats", "regex", "rfc3986_validator")
loaded = sorted(m for m in heavy if m in sys.modules)
assert not loaded, loaded
from harness_one import Tool
import datetime, uuid
def f(a: int, when: datetime.datetime, key: uuid.UUID | None = None) -> list[str]:
    return []
Tool.create(f)
Tool.create(f, parameters={"type": "object", "properties": {"a": {"type": "integer", "pattern": "^x"}, "when": {}, "key": {}},
                           "required": ["a", "when"]})
loaded = sorted(m for m in heavy if m in sys.modules)
assert not loaded, loaded
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
