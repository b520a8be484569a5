"""A hostile review of definitions: schema defaults, sets, inline pattern flags, pydantic paths, the Call
parameter of a **kwargs tool, and whitespace that is not JSON's."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

import pytest
from pydantic import AfterValidator, BaseModel, Field

from harness_one import Call, Tool, ToolArgumentError, ToolDefinitionError, ToolRegistry, defineTool
from harness_one_plugins.validation import compile_schema


def _registry() -> ToolRegistry:
    return ToolRegistry(autoload=False)


def _transfer(amount: int, currency: str = "EUR", card: str | None = None, cvv: str | None = None) -> str:
    return f"{amount} {currency} {card} {cvv}"


def _params(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"amount": {"type": "integer"}, **properties}, "required": ["amount"]}


# ---------------------------------------------------------------------------- 1. defaults


@pytest.mark.parametrize(
    ("parameters", "where", "why"),
    [
        (_params(currency={"type": "string", "enum": ["EUR", "USD"], "default": 978}), "#/properties/currency", "978"),
        (_params(currency={"type": "string", "enum": ["EUR", "USD"], "default": "GBP"}), "#/properties/currency", '"GBP"'),
        (  # through a $ref to $defs (checked with the root's $defs)
            _params(currency={"$ref": "#/$defs/Currency", "default": "GBP"})
            | {"$defs": {"Currency": {"type": "string", "enum": ["EUR", "USD"]}}},
            "#/properties/currency",
            '"GBP"',
        ),
        (  # through a $ref to an anchor (checked where it stands, in the registered root)
            _params(currency={"$ref": "#cur", "default": "GBP"})
            | {"$defs": {"Currency": {"$anchor": "cur", "type": "string", "enum": ["EUR", "USD"]}}},
            "#/properties/currency",
            '"GBP"',
        ),
        (  # a name a URI fragment must percent-encode, in a schema with a pointer outside $defs
            _params(**{"a b#%~/é": {"type": "integer", "default": "x"}, "card": {"$ref": "#/properties/amount"}}),
            "#/properties/a b#%~0~1é",
            '"x"',
        ),
        (  # a nested property's default
            _params(card={"type": "object", "properties": {"cvv": {"type": "string", "maxLength": 4, "default": "12345"}}}),
            "#/properties/card/properties/cvv",
            '"12345"',
        ),
        (  # read in the schema's own draft: draft-04's boolean exclusiveMinimum
            _params(card={"type": "integer", "minimum": 5, "exclusiveMinimum": True, "default": 5})
            | {"$schema": "http://json-schema.org/draft-04/schema#"},
            "#/properties/card",
            "5",
        ),
        # booleans are no numbers in JSON, though True == 1 in Python (also deep inside an enum's objects)
        (_params(card={"type": "integer", "default": True}), "#/properties/card", "true"),
        (_params(card={"type": "number", "description": "n", "default": False}), "#/properties/card", "false"),
        (_params(card={"enum": [1, "a"], "default": True}), "#/properties/card", "true"),
        (_params(card={"type": "integer", "minimum": 1, "maximum": 14, "default": 0}), "#/properties/card", "0"),
        (_params(card={"type": "number", "maximum": 1.5, "default": 2}), "#/properties/card", "2"),
        (_params(card={"type": "integer", "minimum": 0, "default": True}), "#/properties/card", "true"),
        (_params(card={"type": "object", "enum": [{"a": 1}], "default": {"a": True}}), "#/properties/card", '{"a":true}'),
        (
            _params(card={"$ref": "#/definitions/Card", "default": 5})
            | {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"Card": {"type": "string"}}},
            "#/properties/card",
            "5",
        ),
    ],
)
def test_a_default_its_own_schema_refuses_is_a_definition_error(parameters: dict[str, Any], where: str, why: str) -> None:
    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(_transfer, name="transfer", parameters=parameters)
    text = str(err.value)
    assert f"at {where}/default, the default does not match the schema that gives it ({why}" in text
    assert "Fix the default or the schema." in text


@pytest.mark.parametrize(
    "parameters",
    [
        _params(currency={"type": "string", "enum": ["EUR", "USD"], "default": "EUR"}),
        _params(card={"type": "integer", "enum": [0, 1], "default": 1.0}),  # JSON's 1.0 is the integer 1
        _params(card={"type": "integer", "minimum": 1, "maximum": 14, "default": 14}),
        _params(card={"type": "string", "minimum": 1, "default": "a"}),  # minimum says nothing of strings
        _params(card={"minimum": 1, "default": True}),  # nor of booleans
        _params(card={"type": "object", "enum": [{"a": 1}], "default": {"a": 1}}),
        _params(card={"type": ["string", "null"], "title": "Card", "default": None}),
        _params(currency={"$ref": "#/$defs/C", "default": "USD"}) | {"$defs": {"C": {"enum": ["EUR", "USD"]}}},
        _params(currency={"$ref": "#c", "default": "USD"}) | {"$defs": {"C": {"$anchor": "c", "enum": ["EUR", "USD"]}}},
        # (nested: a top-level property the function does not take is refused)
        _params(
            card={"type": "object", "properties": {"a b#%~/é": {"type": "integer", "default": 1}}},
            cvv={"$ref": "#/properties/amount"},
        ),
        # `format` is the validation plugin's option, not checked here
        _params(currency={"type": "string", "format": "date", "default": "today"}),
        # a rule across properties is not the default's own schema (documented)
        _params(card={"type": "string", "default": "4111"}, cvv={"type": "string"}) | {"dependentRequired": {"card": ["cvv"]}},
        {"type": "object", "properties": {"amount": {"type": "integer", "default": 1}}, "default": {}},
    ],
)
def test_defaults_that_fit_are_accepted(parameters: dict[str, Any]) -> None:
    assert Tool.create(_transfer, name="transfer", parameters=parameters).parameters == parameters


def test_a_default_that_fits_reaches_the_tool_and_a_bad_one_never_does() -> None:
    reg = _registry()
    reg.add(_transfer, name="transfer", parameters=_params(currency={"type": "string", "enum": ["EUR", "USD"], "default": "USD"}))
    assert reg.call("transfer", {"amount": 5}) == "5 USD None None"
    with pytest.raises(ToolDefinitionError):
        reg.add(
            _transfer,
            name="transfer2",
            parameters=_params(currency={"type": "string", "enum": ["EUR", "USD"], "default": "GBP"}),
        )


def test_defaults_are_checked_without_jsonschema_rs_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_one import _schema

    monkeypatch.setattr(_schema, "_rust", lambda: None)
    with pytest.raises(ToolDefinitionError, match=r"at #/properties/currency/default, the default does not match"):
        Tool.create(
            _transfer,
            name="transfer",
            parameters=_params(currency={"$ref": "#/$defs/C", "default": "GBP"}) | {"$defs": {"C": {"enum": ["EUR"]}}},
        )
    fits = _params(currency={"$ref": "#/$defs/C", "pattern": "^E", "default": "EUR"}) | {"$defs": {"C": {"enum": ["EUR"]}}}
    assert Tool.create(_transfer, name="transfer", parameters=fits).parameters == fits


def test_inferred_defaults_are_the_functions_own_and_not_refused() -> None:
    def f(n: int = None, m: Annotated[int, Field(ge=1)] = 0) -> int:  # type: ignore[assignment]  # noqa: RUF013
        return 0

    reg = _registry()
    reg.add(f)  # the function gets these when the model leaves them out; its schema refuses them, so none is said
    assert "default" not in reg.get("f").parameters["properties"]["n"]
    assert "default" not in reg.get("f").parameters["properties"]["m"]
    assert reg.call("f", {}) == 0


# ---------------------------------------------------------------------------- 2. sets


@dataclasses.dataclass
class _Point:
    x: int


@dataclasses.dataclass(frozen=True)
class _FrozenPoint:
    x: int


@pytest.mark.parametrize(
    ("hint", "words"),
    [
        (set[dict[str, int]], "a set cannot hold dict values, which are unhashable"),
        (frozenset[dict[str, int]], "a set cannot hold dict values"),
        (set[list[int]], "a set cannot hold list values"),
        (set[tuple[int, list[int]]], "a set cannot hold list values"),
        (set[set[int]], "a set cannot hold set values"),
        (set[_Point], "a set cannot hold _Point values"),
        (set[tuple[Any, int]], "a set cannot hold Any (JSON object or array) values"),
        (set[int | bool], "mixes booleans and numbers, which a Python set merges (True == 1, False == 0)"),
        (set[float | bool], "mixes booleans and numbers"),
        (set[Literal[1, True]], "mixes booleans and numbers"),
        (list[set[dict[str, int]]], "a set cannot hold dict values"),
    ],
)
def test_a_set_of_what_a_set_cannot_hold_is_a_definition_error(hint: Any, words: str) -> None:
    def f(items):  # type: ignore[no-untyped-def]
        return items

    f.__annotations__ = {"items": hint}
    with pytest.raises(ToolDefinitionError, match=r"Tool 'f': \$\.items: ") as err:
        Tool.create(f)
    assert words in str(err.value)


@pytest.mark.parametrize("hint", [set, frozenset, set[Any]])
def test_a_bare_set_takes_strings_numbers_and_null(hint: Any) -> None:
    def f(tags):  # type: ignore[no-untyped-def]
        return type(tags).__name__, sorted(map(repr, tags))

    f.__annotations__ = {"tags": hint}
    reg = _registry()
    reg.add(f)
    items = reg.get("f").parameters["properties"]["tags"]
    assert items == {"type": "array", "items": {"type": ["string", "number", "null"]}, "uniqueItems": True}
    kind = "frozenset" if hint is frozenset else "set"
    assert reg.call("f", {"tags": ["a", 1, 2.5, None]}) == (kind, ["'a'", "1", "2.5", "None"])
    for bad in ([{"a": 1}], [[1]], [True]):
        with pytest.raises(ToolArgumentError) as err:
            reg.call("f", {"tags": bad})
        assert err.value.problems[0].path == "$.tags[0]"


def test_sets_of_hashable_items_still_convert() -> None:
    def f(a: set[int], b: frozenset[frozenset[str]], c: set[_FrozenPoint], d: set[str] | None = None) -> str:
        return repr((a, b, c, d))

    reg = _registry()
    reg.add(f)
    out = reg.call("f", {"a": [1, 2], "b": [["x"]], "c": [{"x": 1}], "d": ["y"]})
    assert out == repr(({1, 2}, frozenset({frozenset({"x"})}), {_FrozenPoint(1)}, {"y"}))


def test_an_item_a_set_cannot_hold_under_a_given_schema_is_refused_where_it_stands() -> None:
    def f(tags: set) -> int:  # type: ignore[type-arg]
        return len(tags)

    reg = _registry()
    reg.add(f, parameters={"type": "object", "properties": {"tags": {"type": "array"}}, "required": ["tags"]})
    assert reg.call("f", {"tags": ["a", "b"]}) == 2
    with pytest.raises(ToolArgumentError) as err:
        reg.call("f", {"tags": ["a", {"b": 1}]})
    (problem,) = err.value.problems
    assert (problem.path, problem.expected) == ("$.tags[1]", "a string, number or null (what a set holds)")
    assert "unhashable" not in problem.message


# ---------------------------------------------------------------------------- 3. inline pattern flags

REFUSED_FLAGS = ["(?U)^[A-Z]+", "(?U:a)b", "(?R)^a$", "(?x)^a b$", "(?s)^a.b$", "(?s:a.b)", "(?u)^a$", "(?-m)^a$"]
REFUSED_FLAGS += ["(?m-i)^a$", "(?m:x)|^a$", "b(?m:^a$)"]
ACCEPTED_FLAGS = ["(?i)^ab$", "(?m)^a$", "(?im)^a$", "(?mi)^a$", "(?i:a)b", "(?i)a(?-i:b)", "(?:a)b$"]


@pytest.mark.parametrize("pattern", REFUSED_FLAGS)
def test_inline_flags_the_backends_read_differently_are_refused(pattern: str) -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}
    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(lambda code: code, name="f", parameters=schema)
    assert f"at #/properties/code/pattern, {pattern!r} is not a supported regular expression (the inline flags (?" in str(
        err.value
    )
    assert "both backends read alike only (?i), (?m) or (?im) at the start and (?i:...) or (?-i:...) groups" in str(err.value)


@pytest.mark.parametrize("pattern", ACCEPTED_FLAGS)
@pytest.mark.usefixtures("patient_patterns")
def test_inline_flags_both_backends_read_alike_are_accepted(pattern: str) -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}
    Tool.create(lambda code: code, name="f", parameters=schema)
    rust, python = compile_schema(schema, "rust"), compile_schema(schema, "python")
    for text in ["a", "A", "ab", "AB", "aB", "Ab", "a\n", "a\nb", "b\na", "x\na", "a\r", "bab"]:
        assert rust.is_valid({"code": text}) == python.is_valid({"code": text}), (pattern, text)


# ---------------------------------------------------------------------------- 4. pydantic paths


def _positive(v: int) -> int:
    if v <= 0:
        raise ValueError("must be positive")
    return v


class _Budget(BaseModel):
    limits: dict[str, Annotated[int, AfterValidator(_positive)]]
    rows: list[int] = []


def test_pydantic_problem_paths_are_written_as_every_other_path() -> None:
    reg = _registry()

    @defineTool(registry=reg)
    def set_budget(budget: _Budget) -> str:
        """Set budgets."""
        return "ok"

    def path(args: dict[str, Any]) -> str:
        with pytest.raises(ToolArgumentError) as err:
            reg.call("set_budget", {"budget": args})
        return err.value.problems[0].path

    assert path({"limits": {"a.b": -1}}) == '$.budget.limits["a.b"]'
    assert path({"limits": {"x" * 100_000 + "\n": -1}}) == '$.budget.limits["' + "x" * 57 + '..."]'
    assert path({"limits": {"ok": -1}}) == "$.budget.limits.ok"
    assert path({"limits": {}, "rows": [1, "x"]}) == "$.budget.rows[1]"


# ---------------------------------------------------------------------------- 5. the Call parameter of a **kwargs tool


def test_a_kwargs_tool_refuses_an_argument_named_like_its_call_parameter() -> None:
    reg = _registry()
    seen: list[Any] = []

    @defineTool(registry=reg)
    def tag(call: Call, **labels: str) -> dict[str, Any]:
        """Attach labels."""
        seen.append(call)
        return labels

    assert reg.call("tag", {"env": "prod"}) == {"env": "prod"}
    with pytest.raises(ToolArgumentError) as err:
        reg.call("tag", {"env": "prod", "call": "model-chosen"})
    (problem,) = err.value.problems
    assert (problem.path, problem.keyword, problem.expected) == ("$.call", "additionalProperties", "no such property")
    assert "'call' is the tool's Call parameter" in problem.message
    assert len(seen) == 1 and all(isinstance(c, Call) for c in seen)  # the refused call never ran


def test_a_given_schema_naming_the_call_parameter_is_a_definition_error() -> None:
    def tag(call: Call, **labels: str) -> str:
        return "ok"

    with pytest.raises(ToolDefinitionError, match="the schema has property 'call', but that function parameter receives"):
        Tool.create(tag, parameters={"type": "object", "properties": {"call": {"type": "string"}}})
    reg = _registry()
    reg.add(tag, parameters={"type": "object", "properties": {"env": {"type": "string"}}})
    with pytest.raises(ToolArgumentError, match=r"\$\.call: unexpected argument"):
        reg.call("tag", {"call": "x"})


# ---------------------------------------------------------------------------- 6. whitespace


@pytest.mark.parametrize("text", ["\u3000", "\x1c", "\x85", "\u2028", "\x0b", "\x0c", " \u00a0 "])
def test_text_that_is_only_non_json_whitespace_is_invalid_json(text: str) -> None:
    ran: list[bool] = []

    def purge(dry_run: bool = False) -> str:
        ran.append(dry_run)
        return "purged"

    reg = _registry()
    reg.add(purge)
    for raw in (text, text.encode()):
        with pytest.raises(ToolArgumentError) as err:
            reg.call("purge", raw)
        assert err.value.problems[0].keyword == "json"
        assert err.value.problems[0].message.startswith("arguments are not valid JSON")
    assert ran == []
    assert reg.call("purge", " \t\r\n") == "purged"  # JSON's own whitespace: no arguments


def test_bad_defaults_of_a_schema_written_elsewhere_are_dropped_up_to_a_bound() -> None:
    """What the MCP client does with a remote schema: a few bad defaults go; past 32 (a bound: the
    schema is someone else's) the schema comes back as it was, for the definition check to refuse."""
    from harness_one._schema import without_bad_defaults

    def schema(n: int) -> dict[str, Any]:
        return {"type": "object", "properties": {f"p{i}": {"type": "integer", "default": None} for i in range(n)}}

    few, dropped = without_bad_defaults(schema(3))
    assert dropped == ["#/properties/p0/default", "#/properties/p1/default", "#/properties/p2/default"]
    assert all("default" not in node for node in few["properties"].values())
    many = schema(40)
    assert without_bad_defaults(many) == (many, [])
    fine = schema(0)
    assert without_bad_defaults(fine) == (fine, [])


def test_json_pointer_follows_a_local_ref_as_the_definition_checks_do() -> None:
    from harness_one import json_pointer

    root = {"$defs": {"a/b": {"type": "integer"}, "m~n": [{"x": 1}], "sp ace": True}}
    assert json_pointer(root, "/$defs/a~1b") == {"type": "integer"}
    assert json_pointer(root, "/$defs/m~0n/0/x") == 1
    assert json_pointer(root, "/$defs/sp%20ace") is True
    assert json_pointer(root, "") is root
    for missing in ("/$defs/nope", "/$defs/m~0n/1", "/$defs/m~0n/-1"):
        with pytest.raises(KeyError):
            json_pointer(root, missing)


@pytest.mark.parametrize(
    ("schema", "where", "text"),
    [
        ({"type": "object", "properties": {"x": {"$ref": "http://[x/"}}}, "#/properties/x/$ref", "http://[x/"),
        (
            {"$id": "https://example.com/s", "type": "object", "properties": {"x": {"$ref": "http://[x/"}}},
            "#/properties/x/$ref",
            "http://[x/",
        ),
        ({"$id": "http://[x/", "type": "object", "properties": {"x": {"type": "integer"}}}, "#/$id", "http://[x/"),
        (
            {"$defs": {"a b": {"type": "integer"}}, "type": "object", "properties": {"x": {"$ref": "#/$defs/a b"}}},
            "#/properties/x/$ref",
            "#/$defs/a b",
        ),
        ({"type": "object", "properties": {"x": {"$id": "é", "type": "integer"}}}, "#/properties/x/$id", "é"),
    ],
)
def test_an_id_or_ref_that_is_no_uri_reference_is_a_definition_error(schema: dict[str, Any], where: str, text: str) -> None:
    """urljoin's ValueError ("Invalid IPv6 URL") escaped registry.add, and jsonschema-rs's refusal of
    '#/$defs/a b' came back as the validation plugin's PluginError: the definition check names them."""
    reg = ToolRegistry(autoload=False)

    def f(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError) as err:
        reg.add(f, parameters=schema)
    assert f"at {where}, {text!r} is not a URI reference (RFC 3986)" in str(err.value)
    encoded = {"$defs": {"a b": {"type": "integer"}}, "type": "object", "properties": {"x": {"$ref": "#/$defs/a%20b"}}}
    reg.add(f, parameters=encoded)
    assert reg.call("f", {"x": 2}) == 2
    assert isinstance(reg.try_call("f", {"x": "2"}).error, ToolArgumentError)


def test_a_malformed_reference_under_an_unknown_keyword_is_data() -> None:
    """Not a reference (it is no URI), so neither refused as remote nor a crash of the walk."""
    reg = ToolRegistry(autoload=False)

    def f(x: int) -> int:
        return x

    reg.add(f, parameters={"type": "object", "properties": {"x": {"type": "integer", "x-note": {"$ref": "http://[x/"}}}})
    assert reg.call("f", {"x": 3}) == 3


def test_a_ref_to_the_empty_reference_is_refused_for_the_backends_read_it_otherwise() -> None:
    """``{"$ref": ""}`` is the schema itself; jsonschema-rs took it as any value, so the two backends
    gave different verdicts (``{"x": 5}`` valid on one, invalid on the other). ``#`` says the same."""
    reg = ToolRegistry(autoload=False)

    def f(x: Any) -> Any:
        return x

    def schema(ref: str) -> dict[str, Any]:
        return {"type": "object", "properties": {"x": {"$ref": ref}}}

    with pytest.raises(ToolDefinitionError, match=r"at #/properties/x/\$ref, \$ref '' \(the schema itself\)"):
        reg.add(f, parameters=schema(""))
    reg.add(f, parameters=schema("#"))
    assert reg.call("f", {"x": {"x": {}}}) == {"x": {}}
    assert isinstance(reg.try_call("f", {"x": 5}).error, ToolArgumentError)
