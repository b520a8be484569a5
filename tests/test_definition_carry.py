"""What inference carries from a definition to a call: docstring sections, defaults JSON can write, bounded floats."""

import dataclasses
import json
from typing import Annotated, Any, Literal

import annotated_types as at
import pytest

from harness_one import ManualClock, Tool, ToolArgumentError, ToolDefinitionError, ToolRegistry
from harness_one._docstrings import parse_docstring
from harness_one_plugins import ValidationPlugin

BIG = "1" + "0" * 400  # a JSON integer no float can hold (1e400 written out)
HUGE = 10**5000  # an integer past Python's int-to-text limit: no JSON encoder can write it


@pytest.fixture(params=["python", "rust", "none"])
def reg(request: pytest.FixtureRequest) -> ToolRegistry:
    """With either validation backend, and with no plugin at all (the converter alone)."""
    if request.param == "none":
        return ToolRegistry(standard_plugins=False, autoload=False)
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=request.param)}, autoload=False)


def refusal(reg: ToolRegistry, name: str, raw: str) -> dict[str, str]:
    with pytest.raises(ToolArgumentError) as err:
        reg.call(name, raw)
    return {p.path: p.message for p in err.value.problems}


# ---------------------------------------------------------------------------- docstrings


def test_a_markdown_rule_is_text_not_a_numpy_section() -> None:
    doc = parse_docstring(
        """Search the web.

        Markdown list of rules:
        ---
        Never search for secrets.

        Args:
            query: What to search for.
            limit: How many.
        """
    )
    assert doc.description == "Search the web.\n\nMarkdown list of rules:\n---\nNever search for secrets."
    assert doc.params == {"query": "What to search for.", "limit": "How many."}


def test_numpy_sections_are_known_names_in_any_case() -> None:
    doc = parse_docstring(
        """Add.

        Usage
        -----
        Call it with two numbers.

        PARAMETERS
        ----------
        a, b : int
            The numbers.
        """
    )
    assert doc.description == "Add.\n\nUsage\n-----\nCall it with two numbers."  # no section of NumPy's: text
    assert doc.params == {"a": "The numbers.", "b": "The numbers."}


def test_unindented_google_items() -> None:
    doc = parse_docstring(
        """Search the web.

        Args:
        query: What to search for,
            in any language.
        limit (int): How many.
        Returns:
            The hits.
        """
    )
    assert doc.description == "Search the web."
    assert doc.params == {"query": "What to search for, in any language.", "limit": "How many."}
    flush = parse_docstring("Search.\n\nArgs:\nquery: What.\n\nMore text after a blank line.")
    assert flush.params == {"query": "What."}
    # a header followed by text that is no item: no items, the text stays where it was
    assert parse_docstring("Search.\n\nArgs:\nSee the manual.").description == "Search.\n\nSee the manual."


# ---------------------------------------------------------------------------- values JSON cannot write


def test_a_default_too_long_to_write_is_left_out(reg: ToolRegistry) -> None:
    @dataclasses.dataclass
    class Options:
        n: int = HUGE

    def f(x: int = HUGE, y: list[int] = [1, HUGE], o: Options | None = None) -> bool:  # noqa: B006
        return x == HUGE

    tool = Tool.create(f)
    json.dumps(tool.parameters)  # writable
    props = tool.parameters["properties"]
    assert "default" not in props["x"] and "default" not in props["y"]
    assert "default" not in props["o"]["anyOf"][0]["properties"]["n"]
    reg.add(f)
    assert reg.call("f", {}) is True  # the function's own default applies


@pytest.mark.parametrize(
    "annotation",
    [Literal[HUGE], Annotated[int, at.Gt(HUGE)]],
    ids=["literal", "bound"],
)
def test_a_value_too_long_to_write_in_a_schema_is_a_definition_error(annotation: Any) -> None:
    def f(x: int) -> int:
        return x

    f.__annotations__["x"] = annotation
    with pytest.raises(ToolDefinitionError, match=r"parameter 'x': cannot express the (value|bound) .*over \d+ digits"):
        Tool.create(f)


def test_a_given_schema_with_a_number_too_long_to_write_names_the_place() -> None:
    parameters = {"type": "object", "properties": {"x": {"type": "integer", "maximum": HUGE}}}
    with pytest.raises(ToolDefinitionError, match=r"at #/properties/x/maximum, int\(<an integer of over \d+ digits>\)"):
        Tool.create(lambda x: x, name="f", parameters=parameters)


def test_a_bounded_float_refuses_an_integer_no_float_can_hold() -> None:
    """What writing-tools.md tells a tool to do that must refuse such integers (the core passes them on)."""
    from pydantic import Field

    reg = ToolRegistry(clock=ManualClock(), autoload=False)  # (the listing's time budget never runs out)

    @reg.add
    def half(x: Annotated[float, Field(le=1e308, ge=-1e308)]) -> float:
        """Half."""
        return x / 2

    assert refusal(reg, "half", '{"x": ' + BIG + "}") == {
        "$.x": 'expected a number <= 1e+308, got "<integer of about 401 digits>"'
    }
    assert reg.call("half", '{"x": 4}') == 2.0
