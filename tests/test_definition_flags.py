"""Definition keywords of the wrong type are refused when the tool is defined, never read by truthiness later."""

from __future__ import annotations

import re
from typing import Any

import pytest

from harness_one import ToolDefinitionError, ToolRegistry, defineTool


def wipe(path: str) -> str:
    """Delete a path."""
    return path


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"idempotent": "false"}, "idempotent must be True or False, got 'false'"),
        ({"read_only": "no"}, "read_only must be True or False, got 'no'"),
        ({"read_only": None}, "read_only must be True or False, got None"),
        ({"blocking": 0}, "blocking must be True or False, got 0"),
        ({"destructive": "no"}, "destructive must be True or False, or None (undeclared), got 'no'"),
        ({"open_world": 0}, "open_world must be True or False, or None (undeclared), got 0"),
        ({"description": 123}, "description must be a string, got 123"),
        ({"source": b"pkg"}, "source must be a string, got b'pkg'"),
        ({"options": [1]}, "options must be a mapping, got [1]"),
    ],
)
def test_a_keyword_of_the_wrong_type_is_a_definition_error_naming_it(keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolDefinitionError, match="^" + re.escape(f"Tool 'wipe': {message}.") + "$"):
        defineTool(registry=ToolRegistry(autoload=False), **keywords)(wipe)


def test_a_string_flag_no_longer_makes_a_side_effecting_tool_retried() -> None:
    """``idempotent="false"`` was truthy: the retry plugin ran a payment three times."""
    reg = ToolRegistry(autoload=False)
    sent = []

    def pay(amount: int) -> None:
        """Send a payment."""
        sent.append(amount)
        raise TimeoutError("gateway timed out")

    with pytest.raises(ToolDefinitionError):
        reg.add(pay, idempotent="false", retry={"attempts": 3})
    reg.add(pay, idempotent=False, retry={"attempts": 3})
    assert not reg.try_call("pay", {"amount": 5}).ok
    assert sent == [5]


@pytest.mark.parametrize("undeclared", ["destructive", "open_world"])
def test_none_stays_undeclared_and_booleans_pass(undeclared: str) -> None:
    reg = ToolRegistry(autoload=False)
    assert getattr(defineTool(registry=reg, name="a", **{undeclared: None})(wipe).tool, undeclared) is None
    assert getattr(defineTool(registry=reg, name="b", **{undeclared: False})(wipe).tool, undeclared) is False
