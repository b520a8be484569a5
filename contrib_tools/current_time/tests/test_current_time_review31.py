"""Review 31, current_time: arguments of the wrong type are a ToolArgumentError worded as the validation plugin words
it, also without that plugin (``timezone`` ["UTC"] was a TypeError, ``format`` "bogus" gave the "human" format)."""

from __future__ import annotations

from typing import Any

import harness_one_current_time as mod
import pytest

from harness_one import ArgumentProblem, ManualClock, ToolArgumentError, ToolRegistry

_FORMATS = 'one of ["iso", "rfc2822", "unix", "human"]'


def _problems(arguments: dict[str, Any], *, validation: bool = False) -> list[ArgumentProblem]:
    reg = (
        ToolRegistry(autoload=False, clock=ManualClock()) if validation else ToolRegistry(standard_plugins=False, autoload=False)
    )
    reg.add(mod.current_time)
    with pytest.raises(ToolArgumentError) as err:
        reg.call("current_time", arguments)
    return list(err.value.problems)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"timezone": ["UTC"]},
            [ArgumentProblem("$.timezone", 'expected string, got array ["UTC"]', "type", "string", '["UTC"]')],
        ),
        ({"timezone": 5}, [ArgumentProblem("$.timezone", "expected string, got integer 5", "type", "string", "5")]),
        ({"format": "bogus"}, [ArgumentProblem("$.format", f'expected {_FORMATS}, got "bogus"', "enum", _FORMATS, '"bogus"')]),
        (
            {"timezone": None, "format": 1},
            [
                ArgumentProblem("$.timezone", "expected string, got null", "type", "string", "null"),
                ArgumentProblem("$.format", f"expected {_FORMATS}, got 1", "enum", _FORMATS, "1"),
            ],
        ),
    ],
)
def test_a_wrong_type_is_refused_without_the_validation_plugin_as_with_it(
    arguments: dict[str, Any], expected: list[ArgumentProblem]
) -> None:
    assert _problems(arguments) == expected
    assert sorted(_problems(arguments, validation=True), key=str) == sorted(expected, key=str)  # its own order


def test_good_arguments_still_answer_without_the_validation_plugin() -> None:
    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(mod.current_time)
    assert isinstance(reg.call("current_time", {"timezone": "Asia/Tokyo", "format": "unix"})["time"], float)
