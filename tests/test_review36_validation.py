"""Review 36, validation: a ``Decimal`` NaN or infinity passed in a ``dict`` is refused as a float's is, a ``complex``
is no number (refused naming its field, with or without bounds), and problems are listed with array indexes in
numeric order (``$.a[2]`` before ``$.a[10]``).
"""

from __future__ import annotations

import numbers
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from harness_one import ArgumentLimits, ManualClock, ToolArgumentError, ToolRegistry
from harness_one_plugins import ValidationPlugin
from harness_one_plugins.validation import Backend, compile_schema, rust_available

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]

NUMBER = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
BOUNDED = {"type": "object", "properties": {"x": {"type": "number", "maximum": 5}}, "required": ["x"]}


def refusal(backend: Backend, schema: dict[str, Any], args: dict[str, Any]) -> list[str]:
    """The problems of ``args`` as the model reads them (``path: message``), through a registry's call."""
    reg = ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, autoload=False, clock=ManualClock())

    def tool(**kwargs: Any) -> str:
        return repr(kwargs)

    reg.add(tool, name="t", parameters=schema)
    with pytest.raises(ToolArgumentError) as caught:
        reg.call("t", args)
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("value", "got"),
    [
        (Decimal("NaN"), "NaN"),
        (Decimal("sNaN"), "NaN"),
        (Decimal("Infinity"), "Infinity"),
        (Decimal("-Infinity"), "-Infinity"),
        (float("nan"), "NaN"),
    ],
)
@pytest.mark.parametrize("schema", [NUMBER, BOUNDED], ids=["number", "maximum"])
def test_non_finite_decimal_is_refused_as_a_float_is(backend: Backend, value: Any, got: str, schema: dict[str, Any]) -> None:
    assert refusal(backend, schema, {"x": value}) == [f"$.x: expected a finite number, got {got}"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_finite_decimal_in_an_array_is_named_at_its_index(backend: Backend) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "number"}}}}
    assert refusal(backend, schema, {"x": [1, Decimal("NaN"), 2.5, float("inf")]}) == [
        "$.x[1]: expected a finite number, got NaN",
        "$.x[3]: expected a finite number, got Infinity",
    ]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("schema", [NUMBER, BOUNDED], ids=["number", "maximum"])
def test_complex_is_no_number(backend: Backend, schema: dict[str, Any]) -> None:
    assert refusal(backend, schema, {"x": complex(1, 2)}) == ['$.x: expected number, got complex "<complex>"']


@pytest.mark.parametrize("backend", BACKENDS)
def test_real_non_json_numbers_still_pass(backend: Backend) -> None:
    """``Decimal`` and ``Fraction`` are real numbers: a finite one is judged by its value, as before."""
    compiled = compile_schema(BOUNDED, backend)
    for value in (Decimal("1.5"), Fraction(1, 3), 4):
        assert compiled.check({"x": value}, ArgumentLimits()) == {"x": value}
    with pytest.raises(ToolArgumentError) as caught:
        compiled.check({"x": Decimal(7)}, ArgumentLimits())
    assert [(p.path, p.keyword) for p in caught.value.problems] == [("$.x", "maximum")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_array_indexes_are_listed_in_numeric_order(backend: Backend) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}, "required": ["a"]}
    compiled = compile_schema(schema, backend)
    with pytest.raises(ToolArgumentError) as caught:
        compiled.check({"a": ["x"] * 12}, ArgumentLimits())
    assert [p.path for p in caught.value.problems] == [f"$.a[{i}]" for i in range(12)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_finite_values_are_listed_in_numeric_order(backend: Backend) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}}}
    compiled = compile_schema(schema, backend)
    with pytest.raises(ToolArgumentError) as caught:
        compiled.check({"a": [float("nan")] * 12}, ArgumentLimits())
    assert [p.path for p in caught.value.problems] == [f"$.a[{i}]" for i in range(12)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_other_orders_are_kept(backend: Backend) -> None:
    """Only a run of index digits sorts as a number: names still sort as text, and a name whose text sorts before
    ``[`` (``aB``) still comes before ``a``'s items; one place's problems still sort by keyword."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "integer"}},
            "aB": {"type": "integer"},
            "b": {"type": "string", "minLength": 5, "pattern": "^z"},
        },
    }
    compiled = compile_schema(schema, backend)
    with pytest.raises(ToolArgumentError) as caught:
        compiled.check({"a": ["x"] * 11, "aB": "x", "b": "y"}, ArgumentLimits())
    listed = [(p.path, p.keyword) for p in caught.value.problems]
    assert listed == [
        ("$.aB", "type"),
        *[(f"$.a[{i}]", "type") for i in range(11)],
        ("$.b", "minLength"),
        ("$.b", "pattern"),
    ]


class _Real:
    """A real number of no numeric library (registered as one, as numpy's ``float32`` is): ``float()`` reads it."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __float__(self) -> float:
        return self.value

    def __eq__(self, other: object) -> bool:
        return self.value == (other.value if isinstance(other, _Real) else other)

    def __hash__(self) -> int:
        return hash(self.value)


numbers.Real.register(_Real)

NON_FINITE_REALS = [(float("nan"), "NaN"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("value", "got"), NON_FINITE_REALS)
@pytest.mark.parametrize("schema", [NUMBER, BOUNDED], ids=["number", "maximum"])
def test_non_finite_other_real_is_refused_as_a_float_is(backend: Backend, value: float, got: str, schema: dict[str, Any]) -> None:
    """Only a float or ``Decimal`` was looked at: any other real NaN reached the tool, an infinity met only the bounds."""
    assert refusal(backend, schema, {"x": _Real(value)}) == [f"$.x: expected a finite number, got {got}"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["float32", "float16", "longdouble"])
@pytest.mark.parametrize(("value", "got"), NON_FINITE_REALS)
def test_non_finite_numpy_floats_are_refused_as_a_float_is(backend: Backend, kind: str, value: float, got: str) -> None:
    np = pytest.importorskip("numpy")
    schema = {"type": "object", "properties": {"x": {"type": "number", "minimum": 0, "maximum": 10}}}
    assert refusal(backend, schema, {"x": getattr(np, kind)(value)}) == [f"$.x: expected a finite number, got {got}"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_finite_reals_a_float_cannot_hold_are_judged_by_their_value(backend: Backend) -> None:
    """``float()`` of these overflows (raises, or reads as infinity): still finite, so not refused as infinite."""
    np = pytest.importorskip("numpy")
    huge = [Fraction(10**400), np.longdouble("1e4000")] if np.finfo(np.longdouble).maxexp > 1024 else [Fraction(10**400)]
    compiled = compile_schema(NUMBER, backend)
    for value in [*huge, _Real(2.5), np.float32(1.5)]:
        assert compiled.check({"x": value}, ArgumentLimits()) == {"x": value}
    assert refusal(backend, BOUNDED, {"x": huge[0]})[0].startswith("$.x: expected a number <= 5")
