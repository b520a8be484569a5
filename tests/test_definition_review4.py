"""A review of definitions and conversion: unions of objects, mutable and refused defaults, pydantic models'
unknown names, nested build errors, pydantic ``Field`` settings, bad definition keywords, lone surrogates."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import threading
from typing import Annotated, Any, Literal, Optional, TypedDict

import pytest
from pydantic import BaseModel, ConfigDict, Field

from harness_one import ManualClock, Tool, ToolArgumentError, ToolDefinitionError, ToolRegistry
from harness_one_plugins.validation import ValidationPlugin

BACKENDS = ["rust", "python"]


def _registry(backend: str | None) -> ToolRegistry:
    """A registry with only the validation plugin of ``backend``, or (None) with no plugin at all; on a manual
    clock, so the listing's time budget never runs out on a loaded machine."""
    if backend is None:
        return ToolRegistry(standard_plugins=False, clock=ManualClock(), autoload=False)
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, clock=ManualClock(), autoload=False)


def _problems(reg: ToolRegistry, name: str, args: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ToolArgumentError) as err:
        reg.call(name, args)
    return [(p.path, p.message) for p in err.value.problems]


# ---------------------------------------------------------------------------- 1. unions of objects


@dataclasses.dataclass
class Refund:
    kind: Literal["refund"]
    amount: int


@dataclasses.dataclass
class Charge:
    kind: Literal["charge"]
    amount: int


@dataclasses.dataclass
class IntX:
    x: int


@dataclasses.dataclass
class StrX:
    x: str


@dataclasses.dataclass
class OneTag:
    tag: Literal[1]


@dataclasses.dataclass
class TrueTag:
    tag: Literal[True]


class DateWhen(TypedDict):
    kind: Literal["a"]
    when: dt.date


class TextWhen(TypedDict):
    kind: Literal["b"]
    when: str


def pay(op: Refund | Charge) -> str:
    return repr(op)


def pick(v: IntX | StrX) -> str:
    return repr(v)


def many(v: list[IntX] | list[StrX]) -> str:
    return repr(v)


def keyed(v: dict[str, IntX] | dict[str, StrX]) -> str:
    return repr(v)


def tagged(v: OneTag | TrueTag) -> str:
    return repr(v)


def typed(v: DateWhen | TextWhen) -> str:
    return repr(v)


@pytest.mark.parametrize("backend", [*BACKENDS, None])
def test_a_union_of_objects_converts_to_the_member_whose_field_values_the_value_meets(backend: str | None) -> None:
    reg = _registry(backend)
    for fn in (pay, pick, many, keyed, tagged, typed):
        reg.add(fn)
    assert reg.call("pay", {"op": {"kind": "charge", "amount": 5}}) == "Charge(kind='charge', amount=5)"
    assert reg.call("pay", {"op": {"kind": "refund", "amount": 5}}) == "Refund(kind='refund', amount=5)"
    assert reg.call("pick", {"v": {"x": "s"}}) == "StrX(x='s')"
    assert reg.call("pick", {"v": {"x": 1}}) == "IntX(x=1)"
    assert reg.call("many", {"v": [{"x": "s"}]}) == "[StrX(x='s')]"
    assert reg.call("keyed", {"v": {"k": {"x": "s"}}}) == "{'k': StrX(x='s')}"
    assert reg.call("tagged", {"v": {"tag": True}}) == "TrueTag(tag=True)"  # true is not 1
    assert reg.call("tagged", {"v": {"tag": 1}}) == "OneTag(tag=1)"
    # TextWhen's when is a string: it stays one, not DateWhen's date
    assert reg.call("typed", {"v": {"kind": "b", "when": "2024-01-01"}}) == "{'kind': 'b', 'when': '2024-01-01'}"
    assert reg.call("typed", {"v": {"kind": "a", "when": "2024-01-01"}}) == "{'kind': 'a', 'when': datetime.date(2024, 1, 1)}"


class TreeA(BaseModel):
    child: TreeA | TreeB | None = None
    a: int = 0


class TreeB(BaseModel):
    child: TreeA | TreeB | None = None
    b: int = 0


TreeA.model_rebuild()
TreeB.model_rebuild()


def depth_of(node: TreeA | TreeB) -> int:
    n = 0
    current: Any = node
    while current is not None:
        n, current = n + 1, current.child
    return n


def test_picking_a_union_member_of_a_deep_value_walks_each_node_once_per_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_one import _schema

    real = _schema._matches
    calls = [0]

    def counting(*args: Any) -> bool:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(_schema, "_matches", counting)
    reg = _registry(None)
    reg.add(depth_of)
    counts = []
    for depth in (4, 8, 12):
        fits: Any = None
        for _ in range(depth):
            fits = {"child": fits, "b": 1}
        calls[0] = 0
        assert reg.call("depth_of", {"node": fits}) == depth
        counts.append(calls[0])
    # the work grows with the depth, not doubling with each level (each (schema, node) pair is judged once)
    assert counts[2] - counts[1] == counts[1] - counts[0] and counts[2] < 200
    # a leaf neither member takes ({"c": 1}) refutes both at every level: still judged once per pair
    deep: Any = {"c": 1}
    for _ in range(16):
        deep = {"child": deep}
    calls[0] = 0
    reg.try_call("depth_of", {"node": deep})  # (whatever pydantic then makes of it)
    assert calls[0] < 20 * 16  # (without the memo: over a million)


# ---------------------------------------------------------------------------- 2. mutable defaults


def keeper(
    query: str,
    filters: dict[str, str] = {},  # noqa: B006 - what the test is about
    seen: set[str] = set(),  # noqa: B006
    opts: list[dict[str, int]] = [{}],  # noqa: B006
) -> dict[str, Any]:
    filters.setdefault("user", query)
    seen.add(query)
    opts[0][query] = 1
    return {"filters": dict(filters), "seen": sorted(seen), "opts": dict(opts[0])}


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_set_and_nested_defaults_are_said_and_each_call_gets_its_own(backend: str) -> None:
    tool = Tool.create(keeper)
    props = tool.parameters["properties"]
    assert (props["filters"]["default"], props["seen"]["default"], props["opts"]["default"]) == ({}, [], [{}])
    reg = _registry(backend)
    reg.add(tool)
    assert reg.call("keeper", {"query": "alice"}) == {"filters": {"user": "alice"}, "seen": ["alice"], "opts": {"alice": 1}}
    assert reg.call("keeper", {"query": "bob"}) == {"filters": {"user": "bob"}, "seen": ["bob"], "opts": {"bob": 1}}
    assert keeper.__defaults__ == ({}, set(), [{}])  # the function's own never reached a call


def test_a_set_default_is_said_in_the_order_of_its_items_json() -> None:
    def f(s: frozenset[str] = frozenset({"b", "c", "a"}), n: dict[str, set[int]] = {"k": {3, 1, 2}}) -> None: ...  # noqa: B006

    props = Tool.create(f).parameters["properties"]
    assert props["s"]["default"] == ["a", "b", "c"]
    assert props["n"]["default"] == {"k": [1, 2, 3]}


@pytest.mark.parametrize("backend", [*BACKENDS, None])
def test_a_mutable_default_with_no_json_form_is_the_functions_own_shared_as_python_shares_it(backend: str | None) -> None:
    def counts(key: int, seen: Any = {0: []}) -> Any:  # noqa: B006 - int keys: no JSON form
        seen.setdefault(key, []).append(key)
        return dict(seen)

    tool = Tool.create(counts)
    assert "default" not in tool.parameters["properties"]["seen"]
    assert not hasattr(tool, "fresh_defaults")
    reg = _registry(backend)
    reg.add(tool)
    assert reg.call("counts", {"key": 1}) == {0: [], 1: [1]}
    assert reg.call("counts", {"key": 2}) == {0: [], 1: [1], 2: [2]}  # the one object, as a direct call shares it
    assert counts.__defaults__ == ({0: [], 1: [1], 2: [2]},)


class _Client:
    """A client holding a lock: no deep copy (nor pickle) of it can be made."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = 0


_CLIENT = _Client()


def notify(msg: str, sinks: list = [_CLIENT]) -> bool:  # type: ignore[type-arg]  # noqa: B006 - what the test is about
    sinks[0].sent += 1
    return sinks[0] is _CLIENT


@pytest.mark.parametrize("backend", [*BACKENDS, None])
def test_an_object_inside_a_list_default_is_passed_as_it_is(backend: str | None) -> None:
    tool = Tool.create(notify)
    assert "default" not in tool.parameters["properties"]["sinks"]
    reg = ToolRegistry(autoload=False) if backend == "rust" else _registry(backend)  # (rust: every standard plugin)
    reg.add(tool)
    before = _CLIENT.sent
    assert [reg.call("notify", {"msg": "hi"}) for _ in range(2)] == [True, True]
    assert _CLIENT.sent == before + 2


class Named(BaseModel):
    name: str


def test_a_default_holding_a_pydantic_model_or_a_value_its_converter_refuses_defines_and_is_not_said() -> None:
    def f(when: list[dt.datetime] = [dt.datetime(2024, 1, 1)]) -> None: ...  # noqa: B006 - naive: refused

    def g(x: list[decimal.Decimal] = [decimal.Decimal("NaN")]) -> None: ...  # noqa: B006

    own = [Named(name="default")]

    def h(items: list[Named] = own) -> bool:
        return items is own

    for fn, name in ((f, "when"), (g, "x"), (h, "items")):
        assert "default" not in Tool.create(fn).parameters["properties"][name], fn.__name__
    reg = _registry(None)
    reg.add(h)
    assert reg.call("h", {}) is True


# ---------------------------------------------------------------------------- 3. defaults the schema refuses


@dataclasses.dataclass
class Opts:
    n: Annotated[int, Field(ge=1)] = 0
    m: int = 2


def price(
    amount: int,
    cap: decimal.Decimal = decimal.Decimal("Infinity"),
    nan: decimal.Decimal = decimal.Decimal("NaN"),
    huge: decimal.Decimal = decimal.Decimal("1e5000"),
    low: Annotated[decimal.Decimal, Field(ge=1)] = decimal.Decimal("0"),
    when: dt.datetime = dt.datetime(2024, 1, 1),  # naive: not the RFC 3339 date-time its format asks for
    aware: dt.datetime = dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
    fine: decimal.Decimal = decimal.Decimal("1.5"),
) -> str:
    return f"{cap} {nan} {huge} {low} {when.isoformat()} {fine}"


@pytest.mark.parametrize("backend", [*BACKENDS, None])
def test_a_default_the_schema_or_converter_refuses_is_not_said_and_the_functions_own_applies(backend: str | None) -> None:
    props = Tool.create(price).parameters["properties"]
    assert [name for name, prop in props.items() if "default" in prop] == ["aware", "fine"]
    assert props["aware"]["default"] == "2024-01-01T00:00:00+00:00"
    assert props["fine"]["default"] == "1.5"
    reg = _registry(backend)
    reg.add(price)
    assert reg.call("price", {"amount": 1}) == "Infinity NaN 1E+5000 0 2024-01-01T00:00:00 1.5"


def test_a_dataclass_field_default_its_schema_refuses_is_not_said() -> None:
    def f(o: Opts) -> list[Opts]:
        return [o]

    tool = Tool.create(f)
    for props in (
        tool.parameters["properties"]["o"]["properties"],
        tool.output_schema["properties"]["result"]["items"]["properties"],
    ):  # type: ignore[index]
        assert "default" not in props["n"]
        assert props["m"]["default"] == 2


def test_a_tools_defaults_are_checked_with_at_most_one_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    import jsonschema_rs

    from harness_one import _schema

    compiled: list[Any] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(jsonschema_rs, name)

        def validator_for(self, *args: Any, **kwargs: Any) -> Any:
            compiled.append(args[0])
            return jsonschema_rs.validator_for(*args, **kwargs)

    monkeypatch.setattr(_schema, "_rust", Counting)
    params = ", ".join(f"p{i}: Optional[list[int]] = None" for i in range(20))
    namespace: dict[str, Any] = {"Optional": Optional}
    exec(f"def plain(q: str, {params}) -> str:\n    return q\n", namespace)
    Tool.create(namespace["plain"])
    assert compiled == []  # None fits each plainly: no validator
    props = Tool.create(price).parameters["properties"]
    assert len(compiled) == 1  # the formats and bounds of every default: one validator for the tool
    assert [name for name, prop in props.items() if "default" in prop] == ["aware", "fine"]


# ---------------------------------------------------------------------------- 4. pydantic models' unknown names


class Query(BaseModel):
    text: str
    limit: int = 10


class Wrapper(BaseModel):
    inner: list[Query]


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    text: str


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pydantic_model_parameter_refuses_an_unknown_name_as_a_dataclass_does(backend: str) -> None:
    def search(q: Query, w: Wrapper | None = None) -> int:
        return q.limit

    def wrap(w: Wrapper) -> int:
        return len(w.inner)

    tool = Tool.create(search)
    assert tool.parameters["properties"]["q"]["additionalProperties"] is False
    assert tool.parameters["$defs"]["Query"]["additionalProperties"] is False
    assert tool.parameters["properties"]["w"]["anyOf"][0]["additionalProperties"] is False
    reg = _registry(backend)
    reg.add(tool)
    reg.add(wrap)
    assert _problems(reg, "search", {"q": {"text": "x", "limt": 1000}}) == [
        ("$.q.limt", "unexpected property; allowed properties: limit, text")
    ]
    assert _problems(reg, "wrap", {"w": {"inner": [{"text": "y", "lmit": 1}]}}) == [
        ("$.w.inner[0].lmit", "unexpected property; allowed properties: limit, text")
    ]
    assert reg.call("search", {"q": {"text": "x", "limit": 3}}) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pydantic_model_that_allows_extra_names_stays_open(backend: str) -> None:
    def keep(o: Open) -> Any:
        return o.model_extra

    assert Tool.create(keep).parameters["properties"]["o"]["additionalProperties"] is True
    reg = _registry(backend)
    reg.add(keep)
    assert reg.call("keep", {"o": {"text": "x", "more": 1}}) == {"more": 1}


# ---------------------------------------------------------------------------- 5. build errors of nested objects


@dataclasses.dataclass
class Small:
    n: int

    def __post_init__(self) -> None:
        if self.n > 10:
            raise ValueError("too big for Small")


@dataclasses.dataclass
class Big:
    n: int


@dataclasses.dataclass
class Outer:
    inner: list[Small]


@pytest.mark.parametrize("backend", [*BACKENDS, None])
def test_a_nested_objects_build_error_names_where_it_is_and_a_union_tries_its_next_member(backend: str | None) -> None:
    def either(v: Small | Big) -> str:
        return repr(v)

    def nested(o: Outer, api_token: Outer | None = None) -> str:
        return repr(o)

    reg = _registry(backend)
    reg.add(either)
    reg.add(nested)
    assert reg.call("either", {"v": {"n": 5}}) == "Small(n=5)"
    assert reg.call("either", {"v": {"n": 50}}) == "Big(n=50)"
    assert _problems(reg, "nested", {"o": {"inner": [{"n": 1}, {"n": 50}]}}) == [
        ("$.o.inner[1]", "cannot be converted: ValueError: too big for Small")
    ]
    assert _problems(reg, "nested", {"o": {"inner": []}, "api_token": {"inner": [{"n": 50}]}}) == [
        ("$.api_token.inner[0]", "cannot be converted: ValueError")  # under a secret name: only its type
    ]


# ---------------------------------------------------------------------------- 6. pydantic Field settings


@pytest.mark.parametrize(
    ("hint", "said"),
    [
        (Annotated[int, Field(default=3)], "Field(default=...) cannot be used on a tool parameter; give the default"),
        (Annotated[list[int], Field(default_factory=list)], "Field(default_factory=...) cannot be used on a tool parameter"),
        (Annotated[int, Field(frozen=True)], "Field(frozen=...) cannot be used on a tool parameter (only its constraints"),
        (Annotated[int, Field(exclude=True)], "Field(exclude=...) cannot be used on a tool parameter"),
        (Annotated[int, Field(serialization_alias="b")], "Field(serialization_alias=...) cannot be used on a tool parameter"),
        (Annotated[int, Field(strict=True)], "strict=True cannot be kept for an integer: JSON does not tell 1.0 from 1"),
    ],
)
def test_a_field_setting_a_tool_parameter_cannot_honour_is_refused(hint: Any, said: str) -> None:
    def f(x: Any) -> None: ...

    f.__annotations__["x"] = hint

    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(f)
    assert str(err.value).startswith(f"Tool 'f': parameter 'x': {said}")


def test_the_field_settings_a_tool_parameter_honours_are_kept() -> None:
    def f(
        x: Annotated[int, Field(ge=1, description="d", title="T", examples=[2], json_schema_extra={"x-k": 1})] = 5,
        s: Annotated[str, Field(strict=True)] = "a",
    ) -> None: ...

    props = Tool.create(f).parameters["properties"]
    assert props["x"] == {
        "type": "integer",
        "minimum": 1,
        "description": "d",
        "title": "T",
        "examples": [2],
        "x-k": 1,
        "default": 5,
    }
    assert props["s"] == {"type": "string", "default": "a"}


# ---------------------------------------------------------------------------- 7. definition keywords


@pytest.mark.parametrize(
    ("keywords", "said"),
    [
        ({"tags": 5}, "Tool 'f': tags must be a string or an iterable of strings, got 5."),
        ({"tags": None}, "Tool 'f': tags must be a string or an iterable of strings, got None."),
        ({"examples": 5}, "Tool 'f': examples must be a list of mappings with an 'arguments' object, got 5."),
        ({"examples": None}, "Tool 'f': examples must be a list of mappings with an 'arguments' object, got None."),
        (
            {"examples": {"arguments": {}}},
            "Tool 'f': examples must be a list of mappings with an 'arguments' object, got {'arguments': {}}.",
        ),
    ],
)
def test_a_bad_tags_or_examples_keyword_is_a_definition_error(keywords: dict[str, Any], said: str) -> None:
    def f(a: int) -> int:
        return a

    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(f, **keywords)
    assert str(err.value) == said
    assert Tool.create(f, tags="one", examples=[{"arguments": {"a": 1}}]).tags == frozenset({"one"})


# ---------------------------------------------------------------------------- 8. lone surrogates

_TAIL = " holds a lone surrogate (a '\\ud800'-like character no UTF-8 text can carry); decode the text it came from with errors='replace'."


@pytest.mark.parametrize(
    ("keywords", "where"),
    [
        (
            {"parameters": {"type": "object", "properties": {"a\udc00": {"type": "string"}}}},
            "parameters at #/properties/a\\udc00",
        ),
        (
            {"parameters": {"type": "object", "properties": {"a": {"type": "string", "enum": ["x\ud800"]}}}},
            "parameters at #/properties/a/enum/0",
        ),
        ({"output_schema": {"type": "object", "description": "o\ud800"}}, "output_schema at #/description"),
    ],
)
def test_a_lone_surrogate_in_a_schema_is_refused_where_it_is(keywords: dict[str, Any], where: str) -> None:
    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(lambda **kw: kw, name="t", **keywords)
    assert str(err.value) == f"Tool 't': {where}{_TAIL}"
    json.dumps(str(err.value), ensure_ascii=False).encode("utf-8")  # the error itself is printable


def test_a_description_or_title_holding_a_lone_surrogate_is_stored_as_u_fffd() -> None:
    reg = ToolRegistry(standard_plugins=False, autoload=False)
    tool = Tool.create(lambda **kw: kw, name="t", description="Look up a r\ud800sum\u00e9", options={"title": "T\udfff"})
    reg.add(tool)
    assert tool.description == "Look up a r\ufffdsum\u00e9"
    assert tool.options["title"] == "T\ufffd"
    json.dumps(tool.describe(), ensure_ascii=False).encode("utf-8")  # each output encodes
    assert reg.export("openai").tools[0]["function"]["description"] == "Look up a r\ufffdsum\u00e9"


def test_a_lone_surrogate_in_a_parameters_description_from_the_docstring_is_refused() -> None:
    def f(a: int) -> None:
        """Do it.

        Args:
            a: an \ud800 number.
        """

    with pytest.raises(ToolDefinitionError) as err:
        Tool.create(f)
    assert str(err.value) == f"Tool 'f': parameters at #/properties/a/description{_TAIL}"
