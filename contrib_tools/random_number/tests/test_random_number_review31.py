"""Review 31, random_number: arguments of the wrong type are a ToolArgumentError worded as the validation plugin words
it, also without that plugin (``min`` "1" was a TypeError, ``kind`` "bogus" drew a float labelled "bogus")."""

from __future__ import annotations

from typing import Any

import harness_one_random_number as mod
import pytest

from harness_one import ArgumentProblem, ManualClock, ToolArgumentError, ToolRegistry

_KINDS = 'one of ["integer", "float"]'


def _problems(arguments: dict[str, Any], *, validation: bool = False) -> list[ArgumentProblem]:
    reg = (  # (a ManualClock: the listing's time budget never runs out)
        ToolRegistry(autoload=False, block=["rate_limit"], clock=ManualClock())
        if validation
        else ToolRegistry(standard_plugins=False, autoload=False)
    )
    reg.add(mod.random_number)
    with pytest.raises(ToolArgumentError) as err:
        reg.call("random_number", arguments)
    return list(err.value.problems)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"kind": "bogus"}, [ArgumentProblem("$.kind", f'expected {_KINDS}, got "bogus"', "enum", _KINDS, '"bogus"')]),
        ({"min": "1"}, [ArgumentProblem("$.min", 'expected number, got string "1"', "type", "number", '"1"')]),
        ({"max": None}, [ArgumentProblem("$.max", "expected number, got null", "type", "number", "null")]),
        ({"min": True}, [ArgumentProblem("$.min", "expected number, got boolean true", "type", "number", "true")]),
        (
            {"seed": 1.5},
            [ArgumentProblem("$.seed", "expected integer or null, got number 1.5", "type", "integer or null", "1.5")],
        ),
        (
            {"min": [1], "seed": "x"},
            [
                ArgumentProblem("$.min", "expected number, got array [1]", "type", "number", "[1]"),
                ArgumentProblem("$.seed", 'expected integer or null, got string "x"', "type", "integer or null", '"x"'),
            ],
        ),
    ],
)
def test_a_wrong_type_is_refused_without_the_validation_plugin_as_with_it(
    arguments: dict[str, Any], expected: list[ArgumentProblem]
) -> None:
    assert _problems(arguments) == expected
    assert sorted(_problems(arguments, validation=True), key=str) == sorted(expected, key=str)  # its own order


def test_good_arguments_still_draw_without_the_validation_plugin() -> None:
    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(mod.random_number)
    assert reg.call("random_number", {"min": 1, "max": 6, "seed": 42}) == {"value": 6, "min": 1, "max": 6, "kind": "integer"}
    assert reg.call("random_number", {"min": 0.5, "max": 1, "kind": "float", "seed": None})["kind"] == "float"
