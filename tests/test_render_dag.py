"""A result that holds the same container many times over (a "billion laughs") is rendered bounded."""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from harness_one import CallResult, ToolRegistry
from harness_one._render import MAX_ITEMS, _repeats_beyond, dumps, json_data, rendered_length
from harness_one_plugins.output import DEFAULT_MAX_OUTPUT


def laughs_yaml(depth: int) -> str:
    """A YAML document whose nested aliases expand to 2**depth strings."""
    lines = ['l0: &l0 ["lol"]']
    lines += [f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, depth + 1)]
    return "\n".join(lines) + f"\nall: *l{depth}\n"


def as_model_reads(value: Any) -> str:
    return CallResult(True, value, None, "", "", 0.0, 1).for_model()


def test_a_billion_laughs_from_yaml_is_cut_through_the_standard_plugins() -> None:
    reg = ToolRegistry(autoload=False)

    def parse_yaml(text: str) -> Any:
        """Parse a YAML document."""
        return yaml.safe_load(text)

    reg.add(parse_yaml)
    document = laughs_yaml(40)
    assert len(document) < 1_000
    result = reg.try_call("parse_yaml", {"text": document})
    assert result.ok and isinstance(result.value, str) and len(result.value) == DEFAULT_MAX_OUTPUT
    found = re.search(r"\[output truncated: ([\d,]+) characters in all", result.value)
    assert found is not None
    assert DEFAULT_MAX_OUTPUT < int(found.group(1).replace(",", "")) < 20 * MAX_ITEMS
    assert result.for_model() == result.value


def test_a_billion_laughs_is_written_bounded_with_repeats_as_markers() -> None:
    value = yaml.safe_load(laughs_yaml(40))
    text = as_model_reads(value)
    assert len(text) < 20 * MAX_ITEMS and '"<repeat>"' in text
    assert json.loads(text)["l0"] == ["lol"]
    assert rendered_length(value) == len(text)
    data = json_data(value)  # the Gemini adapter's form: the same bound
    assert json.dumps(data, ensure_ascii=False) == text


def test_a_shared_small_value_is_written_as_json_dumps_writes_it() -> None:
    shared = {"a": 1, "b": [1, 2], "c": "é"}
    for value in ([shared, shared], {"x": shared, "y": [shared, (shared,)]}):
        assert dumps(value) == json.dumps(value, ensure_ascii=False) == as_model_reads(value)
        assert json_data(value) is value


def test_repeats_are_written_in_full_up_to_the_bound_then_as_markers() -> None:
    row = list(range(999))
    at_bound = [row] * 500  # 500 + 500 * 999 items: MAX_ITEMS
    assert MAX_ITEMS == 500 + 500 * 999
    assert dumps(at_bound) == json.dumps(at_bound)
    beyond = [row] * 501
    assert json.loads(dumps(beyond)) == [row] * 500 + ["<repeat>"]


def test_a_cycle_among_shared_containers_is_still_a_cycle() -> None:
    inner: list[Any] = [1]
    inner.append(inner)
    assert json.loads(dumps([inner, inner])) == [[1, "<cycle>"], [1, "<cycle>"]]


@dataclasses.dataclass
class Pair:
    left: Any
    right: Any


class Items(list[Any]):
    pass


def doubled(leaf: Any, wrap: Callable[[Any], Any], depth: int = 40) -> Any:
    value = leaf
    for _ in range(depth):
        value = wrap(value)
    return value


@pytest.mark.parametrize(
    "value",
    [
        doubled(Pair(1, 2), lambda v: Pair(v, v)),
        doubled(collections.OrderedDict(x=[1]), lambda v: collections.OrderedDict(a=v, b=v)),
        doubled(Items([1]), lambda v: Items([v, v])),
        doubled(frozenset({1}), lambda v: [v, v]),
        doubled([1], lambda v: {"a": Pair(v, v)}),
    ],
    ids=["dataclass", "OrderedDict", "list subclass", "set", "dataclass in a dict"],
)
def test_repeats_of_subclasses_sets_and_dataclasses_are_bounded_too(value: Any) -> None:
    text = dumps(value)  # 2**40 leaves unbounded
    assert len(text) < 20 * MAX_ITEMS and '"<repeat>"' in text
    assert json.dumps(json_data(value), ensure_ascii=False) == text


def test_a_large_value_held_elsewhere_without_repeats_takes_the_encoders_path() -> None:
    rows = [{"id": i, "tags": [i, i + 1]} for i in range(200_000)]  # 800,000 items
    held = list(rows)  # each row also held elsewhere: the bound is counted, and changes nothing
    assert not _repeats_beyond(rows)
    assert _repeats_beyond(rows + rows[:1])  # one row written twice, past the bound
    assert dumps(rows) == json.dumps(held, ensure_ascii=False)


def test_distinct_dataclasses_and_sets_past_the_bound_are_written_not_taken_for_repeats() -> None:
    """What a dataclass or a set becomes is a new dict or list each time: freed, its id could come again,
    and a later distinct one was taken for a repeat."""
    shared = list(range(1000))
    value = {"bomb": [shared] * 600, "rows": [Pair(i, i) for i in range(2000)], "sets": [{i, i + 10_000} for i in range(2000)]}
    out = json.loads(dumps(value))
    assert out["bomb"][-1] == "<repeat>"
    assert out["rows"] == [{"left": i, "right": i} for i in range(2000)]
    assert all(isinstance(item, list) and len(item) == 2 for item in out["sets"])
