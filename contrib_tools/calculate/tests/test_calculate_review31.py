"""Review 31, calculate: an expression that is not a string is a ToolArgumentError worded as the validation plugin
words it, also without that plugin (5 was a ToolExecutionError: TypeError)."""

from __future__ import annotations

import harness_one_calculate as mod
import pytest

from harness_one import ArgumentProblem, ManualClock, ToolArgumentError, ToolRegistry


@pytest.mark.parametrize(
    ("value", "said", "shown"), [(5, "integer 5", "5"), (None, "null", "null"), (["1+1"], 'array ["1+1"]', '["1+1"]')]
)
@pytest.mark.parametrize("validation", [False, True])
def test_an_expression_that_is_not_text_is_refused(value: object, said: str, shown: str, validation: bool) -> None:
    reg = (
        ToolRegistry(autoload=False, clock=ManualClock()) if validation else ToolRegistry(standard_plugins=False, autoload=False)
    )
    reg.add(mod.calculate)
    with pytest.raises(ToolArgumentError) as err:
        reg.call("calculate", {"expression": value})
    assert list(err.value.problems) == [ArgumentProblem("$.expression", f"expected string, got {said}", "type", "string", shown)]


def test_evaluate_refuses_it_too() -> None:
    with pytest.raises(ToolArgumentError) as err:
        mod.evaluate(2)  # type: ignore[arg-type]
    assert [p.message for p in err.value.problems] == ["expected string, got integer 2"]
    assert mod.evaluate("1 + 1") == 2
