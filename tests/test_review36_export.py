"""Exports of an older draft's schema drop the keywords that draft does not define (review 36)."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from harness_one import ToolRegistry
from harness_one_plugins.validation import ValidationPlugin

D4 = "http://json-schema.org/draft-04/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"


def _registry(schema: dict[str, Any], backend: Literal["python", "rust"] = "python") -> ToolRegistry:
    registry = ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, autoload=False)

    def f(**kwargs: Any) -> Any:
        return kwargs

    registry.add(f, name="t", parameters=schema)
    return registry


def _draft07() -> dict[str, Any]:
    return {
        "$schema": D7,
        "type": "object",
        "properties": {
            "d": {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
            "a": {"type": "object", "properties": {"x": {}}, "unevaluatedProperties": False},
            "c": {"type": "array", "contains": {"type": "integer"}, "minContains": 2},
            "o": {"type": "object", "dependentRequired": {"a": ["b"]}, "if": {"required": ["a"]}},
        },
    }


def test_anthropic_drops_keywords_draft07_does_not_define() -> None:
    export = _registry(_draft07()).export("anthropic")
    properties = export.tools[0]["input_schema"]["properties"]
    assert properties == {
        "d": {"type": "array", "items": {"type": "string"}},
        "a": {"type": "object", "properties": {"x": {}}},
        "c": {"type": "array", "contains": {"type": "integer"}},
        "o": {"type": "object", "if": {"required": ["a"]}},
    }
    notes = export.notes["t"]
    assert "$.d: prefixItems dropped (draft-07 does not define it: calls are not checked against it)" in notes
    assert "$.a: unevaluatedProperties dropped (draft-07 does not define it: calls are not checked against it)" in notes
    assert any(n.startswith("$.c: minContains dropped") for n in notes)
    assert any(n.startswith("$.o: dependentRequired dropped") for n in notes)


def test_gemini_ignores_prefix_items_before_2020() -> None:
    export = _registry(_draft07()).export("gemini")
    properties = export.tools[0]["parameters"]["properties"]
    assert properties["d"] == {"type": "array", "items": {"type": "string"}}
    assert any(n.startswith("$.d: prefixItems dropped (draft-07") for n in export.notes["t"])


def test_2019_keeps_its_keywords_and_drops_prefix_items() -> None:
    schema = {
        "$schema": D2019,
        "type": "object",
        "properties": {
            "d": {"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
            "a": {"type": "object", "dependentRequired": {"a": ["b"]}, "unevaluatedProperties": False},
        },
    }
    export = _registry(schema).export("anthropic")
    properties = export.tools[0]["input_schema"]["properties"]
    assert properties == {
        "d": {"type": "array", "unevaluatedItems": False},
        "a": {"type": "object", "dependentRequired": {"a": ["b"]}, "unevaluatedProperties": False},
    }


def test_draft04_const_dropped_for_both() -> None:
    schema = {"$schema": D4, "type": "object", "properties": {"k": {"type": "string", "const": "x"}}}
    registry = _registry(schema)
    assert registry.call("t", {"k": "y"}) == {"k": "y"}  # draft-04 has no const: not checked
    assert registry.export("anthropic").tools[0]["input_schema"]["properties"] == {"k": {"type": "string"}}
    assert registry.export("gemini").tools[0]["parameters"]["properties"] == {"k": {"type": "string"}}


def test_draft07_recursive_ref_is_dropped_not_rewritten() -> None:
    schema = {"$schema": D7, "type": "object", "properties": {"n": {"$recursiveRef": "#"}}}
    export = _registry(schema).export("anthropic")
    assert export.tools[0]["input_schema"]["properties"] == {"n": {}}


def test_ref_into_a_dropped_keyword_is_sent_as_any_value() -> None:
    schema = {
        "$schema": D7,
        "type": "object",
        "properties": {"d": {"prefixItems": [{"type": "integer"}]}, "e": {"$ref": "#/properties/d/prefixItems/0"}},
    }
    export = _registry(schema).export("anthropic")
    assert export.tools[0]["input_schema"]["properties"] == {"d": {}, "e": {}}
    assert any("names a place the rewrite drops" in n for n in export.notes["t"])


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_the_registry_does_not_check_what_was_dropped(backend: Literal["python", "rust"]) -> None:
    """The premise: both backends ignore these keywords in draft-07, so the export must not tell them."""
    registry = _registry(_draft07(), backend)
    args = {"d": ["s", "s"], "a": {"y": 1}, "c": [1], "o": {"a": 1}}
    assert registry.call("t", args) == args


# A subschema with its own $schema is read in that draft by both backends, so the exports judge it by that draft.

D2020 = "https://json-schema.org/draft/2020-12/schema"


def _embedded(own: dict[str, Any], outer: str | None = D7) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"x": own}}
    return schema if outer is None else {"$schema": outer, **schema}


_REQUIRED_2019 = {"$schema": D2019, "type": "object", "dependentRequired": {"a": ["b"]}}


@pytest.mark.parametrize("own", [_REQUIRED_2019, {**_REQUIRED_2019, "$id": "http://example.com/x"}], ids=["no-id", "id"])
@pytest.mark.parametrize("backend", ["rust", "python"])
def test_embedded_2019_schema_keeps_its_keywords(own: dict[str, Any], backend: Literal["python", "rust"]) -> None:
    registry = _registry(_embedded(own), backend)
    assert not registry.try_call("t", {"x": {"a": 1}}).ok  # checked: the subschema is read as 2019-09
    export = registry.export("anthropic")
    assert export.tools[0]["input_schema"]["properties"]["x"]["dependentRequired"] == {"a": ["b"]}
    for notes in (export.notes.get("t", []), registry.export("gemini").notes["t"]):
        assert not any("does not define" in n for n in notes)


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_embedded_2020_prefix_items_under_draft07_kept(backend: Literal["python", "rust"]) -> None:
    own = {"$schema": D2020, "$id": "http://example.com/x", "prefixItems": [{"type": "integer"}]}
    schema = _embedded(own)
    schema["properties"]["e"] = {"$ref": "#/properties/x/prefixItems/0"}
    registry = _registry(schema, backend)
    assert not registry.try_call("t", {"x": ["s"]}).ok
    assert not registry.try_call("t", {"e": "s"}).ok
    anthropic = registry.export("anthropic").tools[0]["input_schema"]["properties"]
    assert anthropic["x"]["prefixItems"] == [{"type": "integer"}]
    assert anthropic["e"] == {"$ref": "#/properties/x/prefixItems/0"}  # not sent as any value
    gemini = registry.export("gemini").tools[0]["parameters"]["properties"]
    assert gemini == {"x": {"items": {"type": "integer"}}, "e": {"type": "integer"}}


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_embedded_older_draft_drops_what_it_does_not_define(backend: Literal["python", "rust"]) -> None:
    """The other way: a draft-04 subschema of a 2019-09 schema ignores const, a draft-07 one of 2020-12 prefixItems."""
    older = _embedded({"$schema": D4, "id": "http://example.com/x", "const": 1}, D2019)
    registry = _registry(older, backend)
    assert registry.call("t", {"x": 2}) == {"x": 2}
    for fmt, key in (("anthropic", "input_schema"), ("gemini", "parameters")):
        export = registry.export(fmt)
        assert "const" not in export.tools[0][key]["properties"]["x"]
        assert "$.x: const dropped (draft-04 does not define it: calls are not checked against it)" in export.notes["t"]
    newer = _registry(_embedded({"$schema": D7, "prefixItems": [{"type": "integer"}]}, None), backend)
    assert newer.call("t", {"x": ["s"]}) == {"x": ["s"]}
    assert newer.export("gemini").tools[0]["parameters"]["properties"] == {"x": {}}


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_ref_siblings_in_embedded_2019_schema_kept(backend: Literal["python", "rust"]) -> None:
    schema = {
        "$schema": D7,
        "definitions": {"i": {"type": "integer"}},
        **_embedded({"$schema": D2019, "type": "object", "properties": {"y": {"$ref": "#/definitions/i", "minimum": 5}}}, None),
    }
    registry = _registry(schema, backend)
    assert not registry.try_call("t", {"x": {"y": 2}}).ok  # 2019-09 applies what stands beside $ref
    properties = registry.export("anthropic").tools[0]["input_schema"]["properties"]
    assert properties["x"]["properties"]["y"] == {"$ref": "#/definitions/i", "minimum": 5}
