"""Bad defaults of a schema written elsewhere: one walk and one check find them all (and the definition
check names the first of the same list)."""

from __future__ import annotations

import copy
import functools
import logging
import operator
from typing import Any

import pytest

from harness_one import Tool, ToolDefinitionError, _schema
from harness_one._schema import without_bad_defaults


def _takes_any(**kwargs: Any) -> None:
    """Takes anything."""


def _integers(bad: int, good: int = 0) -> dict[str, Any]:
    properties: dict[str, Any] = {f"p{i}": {"type": "integer", "default": None} for i in range(bad)}
    properties.update({f"g{i}": {"type": "string", "minLength": 1, "default": "x"} for i in range(good)})
    return {"type": "object", "properties": properties}


def _mixed(anchor: bool) -> dict[str, Any]:
    """Bad defaults in $defs, behind a $ref, nested under a good default, holding a good one, under items."""
    count: dict[str, Any] = {"type": "integer", "minimum": 0, "default": -1}  # bad
    if anchor:  # an anchor: each default is checked through a $ref into the registered root
        count["$anchor"] = "count"
    return {
        "type": "object",
        "$defs": {"Count": count, "Name": {"type": "string", "minLength": 2, "default": "ok"}},
        "properties": {
            "n": {"$ref": "#/$defs/Count", "default": "x"},  # bad: the $ref'd schema refuses it
            "m": {"$ref": "#count" if anchor else "#/$defs/Count", "default": 3},
            "opts": {  # good, though the default of its property is bad
                "type": "object",
                "properties": {"depth": {"type": "integer", "default": None}},
                "default": {"depth": 2},
            },
            "box": {  # bad, though the default of its property is good
                "type": "object",
                "properties": {"k": {"type": "integer", "default": 1}},
                "default": {"k": "no"},
            },
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$", "default": "UP"}, "default": ["ab"]},
            "label": {"$ref": "#/$defs/Name"},
        },
    }


_MIXED_BAD = [
    ("$defs", "Count"),
    ("properties", "n"),
    ("properties", "opts", "properties", "depth"),
    ("properties", "box"),
    ("properties", "tags", "items"),
]


@pytest.fixture(params=["rust", "python"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setattr(_schema, "_rust", lambda: None)
    return str(request.param)


def test_one_walk_and_one_check_drop_every_bad_default(monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[int] = []
    compiled: list[int] = []
    walk, rs = _schema._walk, _schema._rust()
    assert rs is not None

    def counted_walk(*args: Any) -> Any:
        walks.append(1)
        return walk(*args)

    class CountedRust:  # jsonschema-rs, counting the validators built
        def __getattr__(self, name: str) -> Any:
            return getattr(rs, name)

        def validator_for(self, *args: Any, **kwargs: Any) -> Any:
            compiled.append(1)
            return rs.validator_for(*args, **kwargs)

    monkeypatch.setattr(_schema, "_walk", counted_walk)
    monkeypatch.setattr(_schema, "_rust", CountedRust)
    schema = _integers(10, good=5)
    kept, dropped = without_bad_defaults(schema)
    assert dropped == [f"#/properties/p{i}/default" for i in range(10)]
    assert (len(walks), len(compiled)) == (1, 1)
    assert all(kept["properties"][f"g{i}"]["default"] == "x" for i in range(5))
    assert schema == _integers(10, good=5)  # the caller's schema is left as it was


@pytest.mark.parametrize("anchor", [False, True], ids=["defs", "anchor"])
def test_nested_and_referenced_bad_defaults_all_go_and_good_ones_stay(backend: str, anchor: bool) -> None:
    schema = _mixed(anchor)
    kept, dropped = without_bad_defaults(schema)
    assert dropped == [_schema._pointer((*path, "default")) for path in _MIXED_BAD]
    expected = copy.deepcopy(schema)
    for path in _MIXED_BAD:
        del functools.reduce(operator.getitem, path, expected)["default"]
    assert kept == expected  # the good defaults (in $defs, behind a $ref, nested either way) stay
    Tool.create(_takes_any, name="mixed", parameters=kept)  # what is left passes the definition check
    with pytest.raises(ToolDefinitionError, match="at #/\\$defs/Count/default, the default does not match"):
        Tool.create(_takes_any, name="mixed", parameters=schema)  # refused as given: the first of the same list


def test_the_definition_check_names_the_first_bad_default_and_asks_for_one(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    bad_defaults = _schema._bad_defaults

    def counted(schema: Any, found: Any, most: int) -> Any:
        asked.append(most)
        return bad_defaults(schema, found, most)

    monkeypatch.setattr(_schema, "_bad_defaults", counted)
    schema = _integers(5)
    schema["properties"]["p3"] = {"type": "string", "default": 3}
    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(_takes_any, name="refused", parameters=schema)
    assert "at #/properties/p0/default, the default does not match the schema that gives it (" in str(err.value)
    assert asked == [1]
    plain = _schema._copy_json(schema, "", "")
    first_two = bad_defaults(plain, _schema._walk(plain, 2020), 2)  # in walk order, however many there are
    assert [path for path, _ in first_two] == [("properties", "p0"), ("properties", "p1")]


def test_at_most_32_are_dropped(backend: str) -> None:
    kept, dropped = without_bad_defaults(_integers(32, good=3))
    assert len(dropped) == 32 and all("default" not in kept["properties"][f"p{i}"] for i in range(32))
    many = _integers(33, good=3)
    assert without_bad_defaults(many) == (many, [])  # unchanged, for the definition check to refuse
    with pytest.raises(ToolDefinitionError, match="at #/properties/p0/default"):
        Tool.create(_takes_any, name="many", parameters=many)


def test_a_remote_tool_logs_every_dropped_default_in_one_event(caplog: pytest.LogCaptureFixture) -> None:
    from mcp import types

    from harness_one.mcp import McpSpec, RemoteServer

    server = RemoteServer(McpSpec(name="s", command=("unused",)))
    listing = [
        types.Tool(name="mixed", input_schema=_mixed(anchor=False)),
        types.Tool(name="many", input_schema=_integers(33)),
    ]
    with caplog.at_level(logging.INFO, logger="harness_one"):
        tools = server._tools(listing, {})
    assert [t.name for t in tools] == ["mixed"]
    assert len(server.failures) == 1 and server.failures[0].startswith("many: ")
    assert "at #/properties/p0/default, the default does not match" in server.failures[0]
    events = [r for r in caplog.records if r.getMessage().startswith("mcp defaults dropped")]
    assert [r.harness_one for r in events] == [  # type: ignore[attr-defined]
        {"server": "s", "tool": "mixed", "at": [_schema._pointer((*path, "default")) for path in _MIXED_BAD]}
    ]
    assert events[0].levelno == logging.INFO


def test_a_ref_into_a_dropped_default_leaves_the_tool_refused_either_way(backend: str) -> None:
    """The one case where dropping a default changes another schema: a ``$ref`` into the default's value.
    Kept, the default is refused; dropped, the ``$ref`` points to nothing: refused either way."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "default": {"type": "string"}},
            "b": {"$ref": "#/properties/a/default", "default": "fine"},
        },
    }
    with pytest.raises(ToolDefinitionError, match="at #/properties/a/default, the default does not match"):
        Tool.create(_takes_any, name="t", parameters=schema)
    kept, dropped = without_bad_defaults(schema)
    assert dropped == ["#/properties/a/default"]
    with pytest.raises(ToolDefinitionError, match="at #/properties/b/\\$ref, \\$ref '#/properties/a/default' points to nothing"):
        Tool.create(_takes_any, name="t", parameters=kept)
