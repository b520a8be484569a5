"""Validation and numbers: whole float subclasses become ints as floats do, integers through draft-7
``dependencies``, and ``multipleOf`` decided alike by both backends (on the decimal numbers the JSON spells)."""

from __future__ import annotations

import collections
import json
from typing import Any

import pytest

from harness_one import ArgumentLimits, ManualClock, ToolArgumentError, ToolRegistry
from harness_one_plugins import ValidationPlugin
from harness_one_plugins import validation as v
from harness_one_plugins.validation import compile_schema, rust_available

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]
RUST_ONLY = pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing")
DRAFT7 = "http://json-schema.org/draft-07/schema#"
NUMBER = {"type": "number"}
INTEGER = {"type": "integer"}


def echo(backend: str, schema: dict[str, Any], args: Any) -> Any:
    """On a manual clock: the listing's time budget never runs out on a loaded machine."""
    reg = ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, clock=ManualClock(), autoload=False)
    reg.add(lambda **kw: kw, name="t", parameters={"type": "object", **schema})
    return reg.call("t", args)


class Real(float):
    """A float subclass (what numpy's ``float64`` is)."""


class Shown(float):
    """A float subclass with its own repr, as numpy 2's ``float64`` has (``np.float64(2.0)``)."""

    def __repr__(self) -> str:
        return f"Shown({float(self)!r})"


class Record(dict):  # type: ignore[type-arg]
    pass


class Row(list):  # type: ignore[type-arg]
    pass


# -- 1. a whole float subclass where the schema says integer reaches the tool as an int, as a float does -------

NESTED = {
    "properties": {
        "n": INTEGER,
        "x": NUMBER,
        "o": {"type": "object", "properties": {"k": INTEGER, "m": {"type": "integer", "default": 7}}},
        "xs": {"type": "array", "items": INTEGER},
    }
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", [Real, Shown])
def test_a_whole_float_subclass_where_an_integer_goes_becomes_an_int(backend: str, kind: type[float]) -> None:
    """It stayed a float subclass, where a plain ``2.0`` became ``2``."""
    x = kind(2.0)
    got = echo(backend, NESTED, {"n": kind(2.0), "x": x, "xs": [kind(3.0), 4]})
    assert got == {"n": 2, "x": 2.0, "xs": [3, 4]}
    assert type(got["n"]) is int and type(got["xs"][0]) is int
    assert got["x"] is x  # where any number goes, the tool receives what was passed


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("container", [collections.OrderedDict, Record])
def test_a_dict_subclass_holding_whole_floats_reaches_the_tool_with_ints(backend: str, container: type[dict[str, Any]]) -> None:
    """A dict subclass was passed on as it was, its whole floats (plain or not) left floats."""
    got = echo(backend, NESTED, {"o": container(k=Real(5.0)), "xs": Row([2.0, Real(3.0)])})
    assert got == {"o": {"k": 5, "m": 7}, "xs": [2, 3]}  # and the default filled in, as in a plain dict
    assert type(got["o"]["k"]) is int and [type(i) for i in got["xs"]] == [int, int]
    plain = echo(backend, NESTED, {"o": container(k=5.0)})["o"]
    assert plain == {"k": 5, "m": 7} and type(plain["k"]) is int
    given = container(k=5)
    assert echo(backend, NESTED, {"o": given})["o"] == {"k": 5, "m": 7} and given == {"k": 5}  # defaults, in a copy


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subclass_is_passed_on_as_it_is_where_nothing_in_it_changes(backend: str) -> None:
    record, row = Record(k=5, m=1), Row([1, 2])
    got = echo(backend, NESTED, {"o": record, "xs": row, "x": 1.5})
    assert got["o"] is record and got["xs"] is row


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_float_subclass_with_a_fraction_or_past_2_53_is_refused_as_a_float_is(backend: str) -> None:
    for value, keyword in ((Real(2.5), "type"), (Real(2.0**60), "type")):
        with pytest.raises(ToolArgumentError) as err:
            echo(backend, NESTED, {"o": Record(k=value)})
        assert [(p.path, p.keyword) for p in err.value.problems] == [("$.o.k", keyword)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_whole_floats_become_ints_and_are_judged_by_multiple_of(backend: str) -> None:
    np = pytest.importorskip("numpy")
    got = echo(backend, NESTED, {"n": np.float64(2.0), "o": {"k": np.float64(3.0)}})
    assert got == {"n": 2, "o": {"k": 3, "m": 7}} and type(got["n"]) is int and type(got["o"]["k"]) is int
    # the Python backend read repr() ("np.float64(2.5)") as the number: "could not be checked completely"
    assert echo(backend, {"properties": {"a": {"multipleOf": 0.5}}}, {"a": np.float64(2.5)}) == {"a": 2.5}


@pytest.mark.parametrize("backend", BACKENDS)
def test_multiple_of_reads_a_float_subclass_as_the_number_it_holds_not_its_repr(backend: str) -> None:
    compiled = compile_schema({"multipleOf": 0.5}, backend)
    assert compiled.is_valid(Shown(2.5)) and not compiled.is_valid(Shown(2.25))


# -- 2. integers are found through draft-7 `dependencies`, as through `dependentSchemas` --------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("draft", [{"$schema": DRAFT7}, {}])
def test_integers_are_found_through_dependencies_schemas(backend: str, draft: dict[str, str]) -> None:
    """``dependencies: {"d": {<schema>}}`` was not followed: ``2.0`` reached the tool as a float."""
    schema = {
        **draft,
        "properties": {"d": {}, "e": {}, "n": NUMBER},
        "dependencies": {
            "d": {"properties": {"d": INTEGER}},  # whenever d is there, this applies to it
            "e": ["d"],  # the array form names no schema
            "flag": {"properties": {"n": INTEGER}},  # applies only when flag is there: n stays a number
        },
    }
    got = echo(backend, schema, {"d": 2.0, "e": 1.0, "n": 3.0})
    assert got == {"d": 2, "e": 1.0, "n": 3.0}
    assert [type(got[k]) for k in "den"] == [int, float, float]


@pytest.mark.parametrize("backend", BACKENDS)
def test_integers_are_found_through_a_dependencies_ref_in_draft_7(backend: Any) -> None:
    schema = {
        "$schema": DRAFT7,
        "type": "object",
        "definitions": {"I": {"properties": {"d": INTEGER}}},
        "properties": {"d": {}},
        "dependencies": {"d": {"$ref": "#/definitions/I"}},
    }
    got = compile_schema(schema, backend).check({"d": 4.0}, ArgumentLimits())
    assert got == {"d": 4} and type(got["d"]) is int


# -- 3. multipleOf: one rule on both backends, exact on the decimal numbers the JSON spells ----------------------

MULTIPLES = [
    # (value, divisor, a multiple?): jsonschema-rs judged these on the binary float, the Python backend on its decimal
    (9e22, 3, True),
    (1e24, 3, False),
    (7e22, 1.1, False),
    (9.999e21, 0.3, True),
    (4.001555263968051e16, 2.5, True),
    (3e307, 1e307, True),
    (1e308, 1e307, True),
    (5e22, 10, True),
    # both agreed on these already
    (1e308, 0.1, True),
    (9007199254740993.0, 3, False),  # the float is 2**53
    (1e20, 1e-5, True),
    (19.99, 0.01, True),
    (0.30000000000000004, 0.01, False),
    (2**70, 3, False),
    (3 * 10**40, 3, True),
    (10**30, 0.1, True),
    (1e308, 0.123456789, False),
    (12391239123, 1e-8, True),
    (4.5, 1.5, True),
    (-7.5, 2.5, True),
    (0, 0.7, True),
]


@RUST_ONLY
@pytest.mark.parametrize(("value", "divisor", "multiple"), MULTIPLES)
def test_multiple_of_has_one_verdict_on_both_backends(value: float, divisor: float, multiple: bool) -> None:
    for backend in ("python", "rust"):
        compiled = compile_schema({"multipleOf": divisor}, backend)
        assert compiled.is_valid(value) is multiple, backend
        assert compiled.is_valid({"a": [value]}) is True  # not a number: no verdict
        assert compile_schema({"multipleOf": divisor, "type": "number"}, backend).is_valid(True) is False


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_is_judged_by_the_same_rule_and_told_what_was_expected(backend: str) -> None:
    reg = ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, clock=ManualClock(), autoload=False)
    reg.add(lambda **kw: kw, name="t", parameters={"type": "object", "properties": {"a": {"multipleOf": 3}}})
    assert reg.call("t", {"a": 9e22}) == {"a": 9e22}
    assert reg.call("t", json.dumps({"a": 9e22})) == {"a": 9e22}  # JSON text, vouched for: the same verdict
    for args in ({"a": 1e24}, json.dumps({"a": 1e24})):
        with pytest.raises(ToolArgumentError) as err:
            reg.call("t", args)
        assert [(p.path, p.message) for p in err.value.problems] == [("$.a", "expected a multiple of 3, got 1e+24")]


class _NoTime:
    """A clock that moves a second at every reading: the listing has no time, jsonschema-rs's first error is named."""

    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        self.time += 1.0
        return self.time


@RUST_ONLY
def test_jsonschema_rs_names_a_multiple_of_problem_as_the_listing_does() -> None:
    compiled = compile_schema({"type": "object", "properties": {"a": {"type": "array", "items": {"multipleOf": 0.01}}}}, "rust")
    args = {"a": [19.99, 4.001555263968051e16, 0.125]}
    listed = [(p.path, p.message) for p in compiled.problems(args, ManualClock()) if not p.is_listing_cut]
    named = [(p.path, p.message) for p in compiled.problems(args, _NoTime()) if not p.is_listing_cut]  # type: ignore[arg-type]
    assert listed == named == [("$.a[2]", "expected a multiple of 0.01, got 0.125")]


@RUST_ONLY
def test_a_schema_without_multiple_of_gives_jsonschema_rs_nothing_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python check of multipleOf runs only where a schema has one: no other call does more work."""
    calls: list[Any] = []
    real = v._is_multiple

    def counted(number: Any, divisor: tuple[int, int]) -> bool:
        calls.append(number)
        return real(number, divisor)

    monkeypatch.setattr(v, "_is_multiple", counted)
    assert compile_schema({"type": "object", "properties": {"a": NUMBER}}, "rust").is_valid({"a": 1e24})
    assert calls == []
    assert compile_schema({"type": "object", "properties": {"a": {"multipleOf": 3}}}, "rust").is_valid({"a": 9e22, "b": 1e24})
    assert calls == [9e22]
