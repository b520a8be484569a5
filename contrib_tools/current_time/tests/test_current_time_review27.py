"""A zone name longer than 64 characters gets no suggestion, from any check (an offset padded with spaces too)."""

from __future__ import annotations

import harness_one_current_time as mod
import pytest

from harness_one import ToolArgumentError, ToolRegistry


@pytest.fixture
def reg() -> ToolRegistry:
    registry = ToolRegistry(autoload=False)
    registry.add(mod.current_time)
    return registry


def _problem(reg: ToolRegistry, zone: str) -> str:
    with pytest.raises(ToolArgumentError) as err:
        reg.call("current_time", {"timezone": zone})
    [problem] = err.value.problems
    assert problem.path == "$.timezone"
    return problem.message


def test_an_offset_padded_past_64_characters_gets_no_suggestion(reg: ToolRegistry) -> None:
    zone = "UTC" + " " * 80 + "+3"
    assert _problem(reg, zone) == (
        f"unknown time zone {zone[:64]!r}... (85 characters); use an IANA name such as 'Europe/Berlin'"
    )


def test_an_offset_of_64_characters_still_gets_its_zone(reg: ToolRegistry) -> None:
    zone = "UTC" + " " * 59 + "+3"
    assert len(zone) == 64
    assert _problem(reg, zone).startswith(f"unknown time zone {zone!r}; did you mean Etc/GMT-3? (")
    assert _problem(reg, zone + " ") == (
        f"unknown time zone {zone!r}... (65 characters); use an IANA name such as 'Europe/Berlin'"
    )
