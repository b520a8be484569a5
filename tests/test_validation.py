"""The validation plugin: messages, defaults, limits, formats, and both backends."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import ArgumentLimits, ToolArgumentError, ToolRegistry
from harness_one_plugins import ValidationPlugin, compile_schema
from harness_one_plugins.validation import rust_available

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]


@pytest.fixture(params=BACKENDS)
def vreg(request: pytest.FixtureRequest) -> ToolRegistry:
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=request.param)}, autoload=False)


def problems(reg: ToolRegistry, name: str, args: Any) -> list[dict[str, Any]]:
    with pytest.raises(ToolArgumentError) as err:
        reg.call(name, args)
    return [p.to_dict() for p in err.value.problems]


def test_all_errors_reported_with_paths(vreg: ToolRegistry) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2},
            "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "kind": {"enum": ["a", "b"]},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    vreg.add(lambda **kw: kw, name="person", parameters=schema)
    found = problems(vreg, "person", {"name": "x", "tags": ["ok", 3, "z"], "kind": "c", "extra": 1})
    by_path = {p["path"]: p for p in found}
    assert by_path["$.age"]["message"] == "required property is missing"
    assert by_path["$.name"]["expected"] == "minLength 2" and by_path["$.name"]["got"] == '"x"'
    assert by_path["$.tags[1]"]["message"] == "expected string, got integer 3"
    assert by_path["$.kind"]["message"] == 'expected one of ["a", "b"], got "c"'
    assert "unexpected property" in by_path["$.extra"]["message"]
    assert any(p["keyword"] == "maxItems" for p in found)


def test_cross_field_messages(vreg: ToolRegistry) -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"enum": ["card", "bank"]},
            "card": {"type": "string"},
            "iban": {"type": "string"},
            "amount": {"oneOf": [{"type": "integer"}, {"type": "string", "pattern": "^[0-9]+$"}]},
        },
        "dependentRequired": {"card": ["cvv"]},
        "if": {"properties": {"mode": {"const": "bank"}}},
        "then": {"required": ["iban"]},
    }
    vreg.add(lambda **kw: kw, name="pay", parameters=schema)
    found = problems(vreg, "pay", {"mode": "bank", "card": "1", "amount": "x"})
    text = {p["path"]: p["message"] for p in found}
    assert text["$.cvv"] == "required when 'card' is present"
    assert text["$.iban"] == "required property is missing (required by an if/then rule of the schema)"
    assert text["$.amount"].startswith("must match exactly one of the alternatives; option 1: expected integer")


def test_message_ends_with_instruction(vreg: ToolRegistry) -> None:
    vreg.add(lambda n: n, name="f", parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    with pytest.raises(ToolArgumentError) as err:
        vreg.call("f", {"n": 1.5})
    assert str(err.value) == (
        "Invalid arguments for tool 'f' (1 problem):\n- $.n: expected integer, got number 1.5\nFix the arguments and call 'f' again."
    )


def test_defaults_filled_without_touching_input(vreg: ToolRegistry) -> None:
    schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "n": {"type": "integer", "default": 5},
            "opts": {"type": "object", "properties": {"deep": {"type": "boolean", "default": True}}},
            "tags": {"type": "array", "default": []},
        },
    }
    vreg.add(lambda **kw: kw, name="f", parameters=schema)
    given = {"q": "x", "opts": {}}
    out = vreg.call("f", given)
    assert out == {"q": "x", "n": 5, "opts": {"deep": True}, "tags": []}
    assert given == {"q": "x", "opts": {}}
    out["tags"].append(1)
    assert vreg.call("f", {})["tags"] == []  # a mutable default is copied per call


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "2024-01-02T03:04:05Z", "2024-01-02 nope"),
        ("date", "2024-02-29", "2024-02-30"),
        ("time", "10:20:30Z", "25:00:00Z"),
        ("email", "a@example.org", "not-an-email"),
        ("uri", "https://example.org/x", "not a uri"),
        ("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d16380", "2eb8aa08-aa98-11ea-b4aa"),
        ("ipv4", "192.168.0.1", "256.1.1.1"),
        ("ipv6", "::1", "12345::"),
        ("hostname", "example.org", "-bad-.org"),
    ],
)
def test_formats_are_asserted(vreg: ToolRegistry, fmt: str, good: str, bad: str) -> None:
    vreg.add(lambda v: v, name="f", parameters={"type": "object", "properties": {"v": {"type": "string", "format": fmt}}})
    assert vreg.call("f", {"v": good}) == good
    found = problems(vreg, "f", {"v": bad})
    assert found[0]["message"].startswith(f"expected a valid {fmt}")


def test_limits_refuse_deep_and_huge_dicts_cheaply(vreg: ToolRegistry) -> None:
    vreg.limits = ArgumentLimits(max_bytes=1000, max_depth=8)
    vreg.add(lambda **kw: "ran", name="f", parameters={"type": "object"})
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100_000):  # far past the recursion limit
        node["x"] = {}
        node = node["x"]
    assert "nested more than 8 levels" in problems(vreg, "f", deep)[0]["message"]
    assert "the limit is 1000" in problems(vreg, "f", {"s": "y" * 2000})[0]["message"]
    assert vreg.call("f", {"ok": [1, 2, {"a": "b"}]}) == "ran"


def test_remote_refs_never_fetched_even_when_compiled_directly() -> None:
    compiled = compile_schema({"$ref": "http://localhost:1/never.json"}, backend="python")
    with pytest.raises(Exception, match=r"never\.json"):
        compiled.is_valid(1)


def test_compiled_once_per_tool(vreg: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin_globals = ValidationPlugin.harness_tool_added.__globals__  # the module the plugin in use came from
    compiled: list[Any] = []
    real = plugin_globals["compile_schema"]
    monkeypatch.setitem(plugin_globals, "compile_schema", lambda s, b="auto", **kw: compiled.append(s) or real(s, b, **kw))
    vreg.add(lambda a: a, name="f", parameters={"type": "object", "properties": {"a": {"type": "integer"}}})
    for i in range(50):
        vreg.call("f", {"a": i})
    assert len(compiled) == 1


def test_backends_agree_on_verdicts() -> None:
    if not rust_available():
        pytest.skip("jsonschema-rs missing")
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"type": "string", "format": "email"}},
        "required": ["a"],
    }
    py, rs = compile_schema(schema, "python"), compile_schema(schema, "rust")
    for instance in [{"a": 1}, {"a": -1}, {}, {"a": 1, "b": "x"}, {"a": 1, "b": "a@b.co"}, {"a": "1"}, {"a": 1.0}]:
        assert py.is_valid(instance) == rs.is_valid(instance), instance
