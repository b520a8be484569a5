"""The listing's time budget running out with its last problem: no "more problems may follow" after it.

The time is a :class:`ManualClock` that jumps past :data:`LISTING_BUDGET` once the first problem is described
(as a loaded machine or a first call did by chance: 4 refusals of ``{"min": true}`` in 200 said "at least 1 problem").
"""

from __future__ import annotations

from typing import Any

import pytest

from harness_one import ArgumentLimits, ArgumentProblem, ManualClock, ToolArgumentError
from harness_one_plugins import validation
from harness_one_plugins.validation import compile_schema, rust_available

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]
MAY_FOLLOW = "more problems may follow; fix these first"


@pytest.fixture
def late(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    """A clock that moves past the listing budget as soon as the listing has described a problem."""
    clock = ManualClock()
    describe = validation._describe

    def describe_then_jump(error: Any, *args: Any, **kwargs: Any) -> list[ArgumentProblem]:
        described = describe(error, *args, **kwargs)
        clock.advance(validation.LISTING_BUDGET * 10)
        return described

    monkeypatch.setattr(validation, "_describe", describe_then_jump)
    return clock


def _listed(schema: dict[str, Any], args: dict[str, Any], backend: str, clock: ManualClock) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in compile_schema(schema, backend).problems(args, clock)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_only_problem_found_as_the_time_ran_out_is_not_followed_by_more(backend: str, late: ManualClock) -> None:
    schema = {"type": "object", "properties": {"min": {"type": "number"}, "max": {"type": "number"}}}
    assert _listed(schema, {"min": True}, backend, late) == [("$.min", "expected number, got boolean true")]
    with pytest.raises(ToolArgumentError) as err:
        compile_schema(schema, backend).check({"min": True}, ArgumentLimits(), late)
    assert err.value.message.startswith("Invalid arguments (1 problem):\n"), err.value.message
    assert MAY_FOLLOW not in err.value.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_problem_coming_after_the_time_ran_out_stops_the_listing(backend: str, late: ManualClock) -> None:
    """Two ``false`` subschemas refuse ``x`` and ``y`` in one walk of ``properties``: ``y`` is not described."""
    schema = {"type": "object", "properties": {"x": False, "y": False}}
    assert _listed(schema, {"x": 1}, backend, late) == [("$.x", "no value is allowed here")]
    found = _listed(schema, {"x": 1, "y": 1}, backend, ManualClock())
    assert found == [("$.x", "no value is allowed here"), ("$.y", "no value is allowed here")]  # in time: both
    assert _listed(schema, {"x": 1, "y": 1}, backend, late) == [("$.x", "no value is allowed here"), ("$", MAY_FOLLOW)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_walk_after_the_time_ran_out_goes_on_to_tell_whether_another_follows(backend: str, late: ManualClock) -> None:
    """A tool's schema checks ``additionalProperties`` after ``properties``: once the time ran out with ``$.min``, the
    rest of the walk gets one more budget, so ``{"min": true}`` is one problem, and an extra property stops it."""
    schema = {"type": "object", "properties": {"min": {"type": "number"}}, "additionalProperties": False}
    assert _listed(schema, {"min": True}, backend, late) == [("$.min", "expected number, got boolean true")]
    assert _listed(schema, {"min": True, "extra": 1}, backend, late) == [
        ("$.min", "expected number, got boolean true"),
        ("$", MAY_FOLLOW),
    ]


class _Crawling(ManualClock):
    """A clock that, once told, moves past the listing budget at every reading: a walk that never finds time."""

    crawling = False

    def now(self) -> float:
        if self.crawling:
            self.advance(validation.LISTING_BUDGET * 10)
        return super().now()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_walk_cut_off_by_the_time_may_have_more(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The extra budget runs out too before ``additionalProperties`` is checked: more may follow (here: ``extra``)."""
    clock = _Crawling()
    describe = validation._describe

    def describe_then_crawl(error: Any, *args: Any, **kwargs: Any) -> list[ArgumentProblem]:
        clock.crawling = True
        return describe(error, *args, **kwargs)

    monkeypatch.setattr(validation, "_describe", describe_then_crawl)
    schema = {"type": "object", "properties": {"min": {"type": "number"}}, "additionalProperties": False}
    for args in ({"min": True}, {"min": True, "extra": 1}):
        clock.crawling = False
        assert _listed(schema, args, backend, clock) == [("$.min", "expected number, got boolean true"), ("$", MAY_FOLLOW)]
