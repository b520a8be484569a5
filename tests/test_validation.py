"""The validation plugin: messages, defaults, limits, formats, and both backends."""

from __future__ import annotations

import datetime
import decimal
import gc
import json
from typing import Any

import pytest

from harness_one import ArgumentLimits, ManualClock, ToolArgumentError, ToolRegistry
from harness_one_plugins import ValidationPlugin, compile_schema
from harness_one_plugins.validation import rust_available

BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]


@pytest.fixture(params=BACKENDS)
def vreg(request: pytest.FixtureRequest, patient_patterns: None) -> ToolRegistry:
    """A registry on a manual clock: its refusals list every problem, however busy the machine."""
    return ToolRegistry(plugins={"validation": ValidationPlugin(backend=request.param)}, autoload=False, clock=ManualClock())


def problems(reg: ToolRegistry, name: str, args: Any) -> list[dict[str, Any]]:
    with pytest.raises(ToolArgumentError) as err:
        reg.call(name, args)
    return [p.to_dict() for p in err.value.problems]


def test_all_errors_reported_with_paths(vreg: ToolRegistry) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2},
            "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "kind": {"enum": ["a", "b"]},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    vreg.add(lambda **kw: kw, name="person", parameters=schema)
    found = problems(vreg, "person", {"name": "x", "tags": ["ok", 3, "z"], "kind": "c", "extra": 1})
    by_path = {p["path"]: p for p in found}
    assert by_path["$.age"]["message"] == "required property is missing"
    assert by_path["$.name"]["expected"] == "minLength 2" and by_path["$.name"]["got"] == '"x"'
    assert by_path["$.tags[1]"]["message"] == "expected string, got integer 3"
    assert by_path["$.kind"]["message"] == 'expected one of ["a", "b"], got "c"'
    assert "unexpected property" in by_path["$.extra"]["message"]
    assert any(p["keyword"] == "maxItems" for p in found)


def test_cross_field_messages(vreg: ToolRegistry) -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"enum": ["card", "bank"]},
            "card": {"type": "string"},
            "iban": {"type": "string"},
            "amount": {"oneOf": [{"type": "integer"}, {"type": "string", "pattern": "^[0-9]+$"}]},
        },
        "dependentRequired": {"card": ["cvv"]},
        "if": {"properties": {"mode": {"const": "bank"}}},
        "then": {"required": ["iban"]},
    }
    vreg.add(lambda **kw: kw, name="pay", parameters=schema)
    found = problems(vreg, "pay", {"mode": "bank", "card": "1", "amount": "x"})
    text = {p["path"]: p["message"] for p in found}
    assert text["$.cvv"] == "required when 'card' is present"
    assert text["$.iban"] == "required property is missing (required by an if/then rule of the schema)"
    assert text["$.amount"] == 'expected a string matching the pattern "^[0-9]+$", got "x"'  # the one alternative a string fits
    text = {p["path"]: p["message"] for p in problems(vreg, "pay", {"amount": 1.5})}
    assert text["$.amount"].startswith("must match exactly one of the alternatives; option 1: expected integer")


def test_an_alternative_that_fits_the_type_is_reported_at_its_own_field(vreg: ToolRegistry) -> None:
    address = {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}
    schema = {
        "type": "object",
        "properties": {"home": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}},
        "$defs": {"A": address},
    }
    vreg.add(lambda **kw: kw, name="f", parameters=schema)
    assert [(p["path"], p["keyword"]) for p in problems(vreg, "f", {"home": {"zip": "1"}})] == [("$.home.zip", "pattern")]
    assert problems(vreg, "f", {"home": 3})[0]["message"].startswith("must match at least one of the alternatives")


def test_message_ends_with_instruction(vreg: ToolRegistry) -> None:
    vreg.add(lambda n: n, name="f", parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    with pytest.raises(ToolArgumentError) as err:
        vreg.call("f", {"n": 1.5})
    assert str(err.value) == (
        "Invalid arguments for tool 'f' (1 problem):\n- $.n: expected integer, got number 1.5\nFix the arguments and call 'f' again."
    )


def test_defaults_filled_without_touching_input(vreg: ToolRegistry) -> None:
    schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "n": {"type": "integer", "default": 5},
            "opts": {"type": "object", "properties": {"deep": {"type": "boolean", "default": True}}},
            "tags": {"type": "array", "default": []},
        },
    }
    vreg.add(lambda **kw: kw, name="f", parameters=schema)
    given = {"q": "x", "opts": {}}
    out = vreg.call("f", given)
    assert out == {"q": "x", "n": 5, "opts": {"deep": True}, "tags": []}
    assert given == {"q": "x", "opts": {}}
    out["tags"].append(1)
    assert vreg.call("f", {})["tags"] == []  # a mutable default is copied per call


def test_defaults_are_filled_through_refs_and_the_one_object_alternative(vreg: ToolRegistry) -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"country": {"type": "string", "default": "FR"}, "kind": {"$ref": "#/$defs/Kind"}},
            },
            "Kind": {"type": "string", "default": "home"},
            "Node": {"type": "object", "properties": {"v": {"default": 0}, "next": {"$ref": "#/$defs/Node"}}},
        },
        "properties": {
            "ship": {"$ref": "#/$defs/Address"},
            "bill": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
            "both": {"allOf": [{"$ref": "#/$defs/Address"}, {"properties": {"zip": {"default": "75001"}}}]},
            # two alternatives that can be objects: which one a value matched is not known, nothing is filled
            "either": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "object", "properties": {"id": {"type": "integer"}}}]},
            "node": {"$ref": "#/$defs/Node"},
        },
    }
    vreg.add(lambda **kw: kw, name="f", parameters=schema)
    address = {"country": "FR", "kind": "home"}
    assert vreg.call("f", {"ship": {}, "bill": {}, "both": {}, "either": {"id": 1}, "node": {"next": {"next": {}}}}) == {
        "ship": address,
        "bill": address,
        "both": {**address, "zip": "75001"},
        "either": {"id": 1},
        "node": {"v": 0, "next": {"next": {}}},  # a recursive $ref is followed once
    }
    assert vreg.call("f", {"bill": None}) == {"bill": None}
    assert vreg.call("f", {}) == {"bill": None}


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "2024-01-02T03:04:05Z", "2024-01-02 nope"),
        ("date", "2024-02-29", "2024-02-30"),
        ("time", "10:20:30Z", "25:00:00Z"),
        ("email", "a@example.org", "not-an-email"),
        ("email", "a" * 64 + "@example.org", "a" * 65 + "@example.org"),  # the python backend accepted 65
        ("uri", "https://example.org/x", "not a uri"),
        ("uri", "https://example.org/x", "https://example.org/x\n"),  # a final newline passed the python backend
        ("uri", "a:b", "a:\n"),
        ("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d16380", "2eb8aa08-aa98-11ea-b4aa"),
        ("ipv4", "192.168.0.1", "256.1.1.1"),
        ("ipv6", "::1", "12345::"),
        ("hostname", "example.org", "-bad-.org"),
    ],
)
def test_formats_are_asserted(vreg: ToolRegistry, fmt: str, good: str, bad: str) -> None:
    vreg.add(lambda v: v, name="f", parameters={"type": "object", "properties": {"v": {"type": "string", "format": fmt}}})
    assert vreg.call("f", {"v": good}) == good
    found = problems(vreg, "f", {"v": bad})
    assert found[0]["message"].startswith(f"expected a valid {fmt}")


def test_limits_refuse_deep_and_huge_dicts_cheaply(vreg: ToolRegistry) -> None:
    vreg.limits = ArgumentLimits(max_bytes=1000, max_depth=8)
    vreg.add(lambda **kw: "ran", name="f", parameters={"type": "object"})
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100_000):  # far past the recursion limit
        node["x"] = {}
        node = node["x"]
    assert "nested more than 8 levels" in problems(vreg, "f", deep)[0]["message"]
    assert "the limit is 1000" in problems(vreg, "f", {"s": "y" * 2000})[0]["message"]
    assert vreg.call("f", {"ok": [1, 2, {"a": "b"}]}) == "ran"


def test_remote_refs_never_fetched_even_when_compiled_directly() -> None:
    compiled = compile_schema({"$ref": "http://localhost:1/never.json"}, backend="python")
    with pytest.raises(Exception, match=r"never\.json"):
        compiled.is_valid(1)


def test_compiled_once_per_tool(vreg: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin_globals = ValidationPlugin.harness_tool_added.__globals__  # the module the plugin in use came from
    compiled: list[Any] = []
    real = plugin_globals["compile_schema"]
    monkeypatch.setitem(plugin_globals, "compile_schema", lambda s, b="auto", **kw: compiled.append(s) or real(s, b, **kw))
    vreg.add(lambda a: a, name="f", parameters={"type": "object", "properties": {"a": {"type": "integer"}}})
    for i in range(50):
        vreg.call("f", {"a": i})
    assert len(compiled) == 1


def test_backends_agree_on_verdicts() -> None:
    if not rust_available():
        pytest.skip("jsonschema-rs missing")
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"type": "string", "format": "email"}},
        "required": ["a"],
    }
    py, rs = compile_schema(schema, "python"), compile_schema(schema, "rust")
    for instance in [{"a": 1}, {"a": -1}, {}, {"a": 1, "b": "x"}, {"a": 1, "b": "a@b.co"}, {"a": "1"}, {"a": 1.0}]:
        assert py.is_valid(instance) == rs.is_valid(instance), instance


HOSTILE_PATTERNS = ["^(a|a)+$", "^(a+)+$", "^(a|aa)+$", "^(\\w+\\s?)*$", "^(a|a)+\\1$"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("pattern", HOSTILE_PATTERNS)
def test_a_catastrophic_pattern_is_refused_in_bounded_time(backend: str, pattern: str) -> None:
    """Backtracking patterns on hostile input: the verdict, the listing and its matching stay bounded.

    The bound checked here (1 s, against 6.5 s before the budget) holds on a busy machine; the
    10 ms figure is a row of ``make bench`` ("refused: pattern ..."). The registry is on the
    system clock (not :func:`vreg`'s manual one): the budgets on real time are what bound it.
    """
    import gc
    import time

    reg = ToolRegistry(plugins={"validation": ValidationPlugin(backend=backend)}, autoload=False)
    reg.add(lambda s: s, name="f", parameters={"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}})
    for text in ("a" * 24 + "!", "a" * 20_000 + "!"):
        timings = []
        gc.disable()  # a full collection due here (tens of ms) would eat the 5 ms listing budget
        try:
            for _ in range(5):  # the best of five, so a busy machine does not decide
                start = time.perf_counter()
                found = problems(reg, "f", {"s": text})
                timings.append(time.perf_counter() - start)
                assert [p["path"] for p in found[:1]] == ["$.s"] and found[0]["keyword"] == "pattern", found
                # A busy machine may spend the 5 ms listing budget: then the listing says it stopped.
                assert [p["message"] for p in found[1:]] in ([], ["more problems may follow; fix these first"]), found
        finally:
            gc.enable()
        assert min(timings) < 1.0, (pattern, len(text), min(timings))


class _TickingClock:
    """Every reading is 0.1 ms later than the one before."""

    def __init__(self) -> None:
        self.readings = 0

    def now(self) -> float:
        self.readings += 1
        return self.readings / 10_000


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_error_listing_stops_when_its_time_is_up(backend: str) -> None:
    from harness_one_plugins import validation

    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer", "minimum": 0}}}}
    compiled = compile_schema(schema, backend)
    clock = _TickingClock()
    found = compiled.problems({"xs": [1] * 10_000 + [-1]}, clock)  # the bad item comes after the budget is spent
    budget_ms = validation.LISTING_BUDGET * 1000
    assert clock.readings < budget_ms * 10 + 20  # it stopped, it did not walk 10,000 items
    if backend == "rust":  # jsonschema-rs's own first error names the place the listing had no time to reach
        assert [(p.path, p.keyword) for p in found] == [("$.xs[10000]", "minimum"), ("$", "limits")]
        assert found[0].message == "expected a number >= 0, got -1" and found[1].is_listing_cut
    else:
        assert [(p.path, p.keyword) for p in found] == [("$", "limits")]
        assert f"took longer than {budget_ms:g} ms" in found[0].message
    found = compiled.problems({"xs": [-1] * 10_000}, _TickingClock())
    assert found[0].path == "$.xs[0]" and found[-1].message == "more problems may follow; fix these first"


def test_very_many_missing_properties_list_a_bounded_number(vreg: ToolRegistry) -> None:
    from harness_one_plugins.validation import MAX_PROBLEMS

    vreg.add(lambda **kw: kw, name="f", parameters={"type": "object", "required": [f"r{i}" for i in range(5000)]})
    found = problems(vreg, "f", {})
    assert len(found) == MAX_PROBLEMS + 1 and found[-1]["message"] == f"only the first {MAX_PROBLEMS} problems are listed"
    with pytest.raises(ToolArgumentError) as err:
        vreg.call("f", {})
    assert err.value.message.startswith(f"Invalid arguments for tool 'f' (at least {MAX_PROBLEMS} problems):\n")


@pytest.mark.parametrize("backend", BACKENDS)
def test_unique_items_and_unevaluated_properties_list_fast(backend: str) -> None:
    clock = _TickingClock()
    unique = compile_schema({"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}, backend)
    assert [p.keyword for p in unique.problems({"xs": [{"a": [i]} for i in range(3000)] + [{"a": [0]}]}, clock)] == [
        "uniqueItems"
    ]
    schema = {"type": "object", "allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False}
    found = compile_schema(schema, backend).problems({f"k{i}": i for i in range(3000)}, clock)
    assert found[0].keyword == "unevaluatedProperties" and len(found) == 21


def test_json_text_within_limits_is_not_walked_again_and_what_it_cannot_vouch_for_is(
    vreg: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    vreg.limits = ArgumentLimits(max_depth=8)
    vreg.add(
        lambda **kw: "ran",
        name="g",
        parameters={"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}},
    )
    walked: list[int] = []
    # The module the registry's plugin runs in (other tests re-import plugin modules).
    namespace = type(vreg.plugins.get("validation")).harness_pre_validate.__globals__
    real = namespace["_scan_nested"]
    monkeypatch.setitem(namespace, "_scan_nested", lambda root, limits: walked.append(1) or real(root, limits))
    big = json.dumps({"a": [1, "x"] * 5_000})
    assert "$.a[1]" in {p["path"] for p in problems(vreg, "g", big)} and walked == []  # the text vouches for itself
    assert vreg.call("g", '{"a": [1, 2.0, 3]}') == "ran" and walked == []
    assert "nested more than 8 levels" in problems(vreg, "g", '{"a": ' + "[" * 20 + "]" * 20 + "}")[0]["message"]
    assert walked  # more brackets than the depth limit: walked
    walked.clear()
    nan = problems(vreg, "g", '{"a": [NaN]}')
    walked_for_nan = bool(walked)
    walked.clear()
    assert nan[0]["path"] == "$.a[0]" and walked_for_nan  # NaN is not JSON: found where it stands
    assert "$.a[1]" in {p["path"] for p in problems(vreg, "g", {"a": [1, "x"] * 100})}
    assert walked  # a dict is always walked


def test_long_runs_of_one_scalar_type_are_measured_and_flagged_like_the_loop_does(vreg: ToolRegistry) -> None:
    vreg.limits = ArgumentLimits(max_bytes=10_000)
    vreg.add(lambda **kw: "ran", name="h", parameters={"type": "object"})
    assert "the limit is 10000" in problems(vreg, "h", {"s": ["y" * 100] * 200})[0]["message"]
    assert "the limit is 10000" in problems(vreg, "h", {f"k{i:05}": None for i in range(2_000)})[0]["message"]
    assert vreg.call("h", {"n": list(range(500))}) == "ran"
    assert problems(vreg, "h", {"n": [1] * 100 + [10**5000]})  # a huge int past the run's first and last
    assert problems(vreg, "h", {"n": [1.0] * 100 + [float("nan")] + [2.0]})[0]["path"] == "$.n[100]"


def test_arguments_holding_too_many_arrays_and_objects_are_refused(vreg: ToolRegistry) -> None:
    vreg.limits = ArgumentLimits(max_containers=100)

    def count(rows: list[Any]) -> int:
        return len(rows)

    vreg.add(count, name="rows", parameters={"type": "object", "properties": {"rows": {"type": "array"}}})
    assert vreg.call("rows", {"rows": [[]] * 99}) == 99  # the outer list is one of the 100
    assert vreg.call("rows", json.dumps({"rows": [{"a": 1}] * 99})) == 99
    for args in ({"rows": [[]] * 100}, json.dumps({"rows": [[0]] * 100}), {"rows": [[[]]] * 50}):
        (problem,) = problems(vreg, "rows", args)
        assert problem["path"] == "$" and problem["keyword"] == "limits"
        assert problem["message"] == "arguments hold more than 100 arrays and objects"
        assert problem["expected"] == "<= 100 arrays and objects"
    assert ArgumentLimits().max_containers == 10_000


def test_long_json_text_is_parsed_with_the_collector_paused_and_resumed(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_one import _arguments
    from harness_one._arguments import load_json

    seen: list[bool] = []
    real_decode = _arguments._decode

    def decode(text: str) -> Any:
        seen.append(gc.isenabled())
        return real_decode(text)

    monkeypatch.setattr(_arguments, "_decode", decode)
    long = json.dumps({"a": [[0]] * 10_000})
    assert load_json('{"a": 1}') == {"a": 1} and load_json(long)["a"][0] == [0]
    assert seen == [True, False] and gc.isenabled()
    with pytest.raises(json.JSONDecodeError):
        load_json(long[:-1])
    assert gc.isenabled()  # resumed after a failed parse too
    gc.disable()
    try:
        load_json(long)
        assert not gc.isenabled()  # a collector switched off by the application stays off
    finally:
        gc.enable()


def test_a_long_list_without_floats_is_left_as_it_is_and_one_with_a_float_is_converted(vreg: ToolRegistry) -> None:
    vreg.add(
        lambda n: n,
        name="ints",
        parameters={"type": "object", "properties": {"n": {"type": "array", "items": {"type": "integer"}}}},
    )
    values = list(range(1000))
    assert vreg.call("ints", {"n": values}) is values  # nothing to convert: not copied
    got = vreg.call("ints", json.dumps({"n": [*range(999), 2.0]}))
    assert got[-1] == 2 and type(got[-1]) is int


def test_a_container_limit_below_the_depth_limit_holds_for_json_text_too(vreg: ToolRegistry) -> None:
    vreg.limits = ArgumentLimits(max_containers=3)
    vreg.add(lambda **kw: "ran", name="f", parameters={"type": "object"})
    assert vreg.call("f", '{"a": [[], {}]}') == "ran"
    assert problems(vreg, "f", '{"a": [[], {}, []]}')[0]["expected"] == "<= 3 arrays and objects"


def test_json_text_with_too_many_arrays_is_refused_before_it_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_one import _arguments

    reg = ToolRegistry(autoload=False, limits=ArgumentLimits(max_containers=100))
    reg.add(lambda **kw: "ran", name="f", parameters={"type": "object"})
    parsed: list[int] = []
    real = _arguments.load_json
    monkeypatch.setattr(_arguments, "load_json", lambda text: parsed.append(len(text)) or real(text))
    with pytest.raises(ToolArgumentError) as err:
        reg.call("f", json.dumps({"a": [[0]] * 200}))
    assert err.value.problems[0].expected == "<= 100 arrays and objects" and parsed == []
    # Brackets inside strings (code, say) are not arrays: such text is parsed and runs.
    assert reg.call("f", json.dumps({"code": "x = [[1], {2: [3]}]; " * 50, "rows": [[1], [2]]})) == "ran"
    assert len(parsed) == 1


def test_empty_strings_count_their_quotes_in_the_size_estimate(vreg: ToolRegistry) -> None:
    vreg.limits = ArgumentLimits(max_bytes=10_000)
    vreg.add(lambda **kw: "ran", name="f", parameters={"type": "object"})
    for strings in ([""] * 6_000, [""] * 5_999 + [None]):  # a run of one type, and a mixed one
        assert "the limit is 10000" in problems(vreg, "f", {"s": strings})[0]["message"]
    assert vreg.call("f", {"s": [""] * 4_000}) == "ran"


@pytest.mark.parametrize("backend", BACKENDS)
def test_limits_count_what_a_given_dict_holds(backend: str) -> None:
    """Keys of a **kwargs tool, tuples and bytes count against max_bytes and max_depth (they reached the tool)."""
    reg = ToolRegistry(
        plugins={"validation": ValidationPlugin(backend=backend)},
        autoload=False,
        limits=ArgumentLimits(max_bytes=1000, max_depth=8),
    )

    def anything(**kwargs: Any) -> int:
        return len(kwargs)

    def keep(x: Any = None) -> str:
        return "ran"

    reg.add(anything)
    reg.add(keep)
    nested: Any = 1
    for _ in range(100):
        nested = (nested,)
    for name, args in [
        ("anything", {"k" + "x" * 2000: 1}),
        ("keep", {"x": ("a" * 2000,)}),
        ("keep", {"x": b"a" * 2000}),
        ("keep", {"x": nested}),
    ]:
        found = problems(reg, name, args)
        assert [p["path"] for p in found] == ["$"] and found[0]["keyword"] == "limits", (name, found)
    assert reg.call("keep", {"x": ("a", b"b")}) == "ran"  # within the limits: as before


def test_a_huge_property_name_is_not_echoed_in_full(vreg: ToolRegistry) -> None:
    """A 200,000-character unknown name made a 200 KB message (1.5 MB with a few problems)."""
    vreg.add(
        lambda a=0: a,
        name="f",
        parameters={"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    )
    vreg.add(lambda a=0: a, name="g")
    for name in ("f", "g"):
        error = vreg.try_call(name, {"n" * 200_000: 1, "a": "x"}).error
        assert isinstance(error, ToolArgumentError) and len(error.message) < 1000 and "nnn..." in error.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_dates_and_decimals_the_type_cannot_hold_are_refused(backend: str, patient_patterns: None) -> None:
    """'2024x01x01' became date(2024, 1, 1) under a plain string schema; '1e300000' a Decimal int() chewed on for seconds."""
    plugin = ValidationPlugin(backend=backend, formats=False)
    reg = ToolRegistry(plugins={"validation": plugin}, autoload=False, clock=ManualClock())

    def when(day: datetime.date) -> str:
        return day.isoformat()

    def total(amount: decimal.Decimal) -> str:
        return str(amount)

    reg.add(when)
    reg.add(total)
    for text in ("2024x01x01", "+202-01-01", "\uff12\uff10\uff12\uff14-01-01"):  # full-width digits last
        assert "expected an RFC 3339 date" in reg.try_call("when", {"day": text}).for_model(), text
    assert reg.call("when", {"day": "2024-01-01"}) == "2024-01-01"
    assert "at most 4300 digits" in reg.try_call("total", {"amount": "1e300000"}).for_model()
    assert reg.call("total", {"amount": "12.50"}) == "12.50"


def test_multiple_of_a_fraction_is_decided_alike_by_both_backends(vreg: ToolRegistry) -> None:
    """On the decimal numbers JSON spells: 19.99 is a multiple of 0.01 (the python backend refused it)."""
    vreg.add(
        lambda amount: amount,
        name="price",
        parameters={"type": "object", "properties": {"amount": {"type": "number", "multipleOf": 0.01}}},
    )
    for good in (19.99, 0.07, 4.35, 3, 0.3):
        assert vreg.call("price", {"amount": good}) == good
    found = problems(vreg, "price", {"amount": 0.30000000000000004})
    assert [(p["path"], p["keyword"]) for p in found] == [("$.amount", "multipleOf")]


def test_text_is_measured_in_utf8_bytes_like_bytes() -> None:
    """999 characters of 4-byte emoji passed a 1,000-byte limit as text and failed it as bytes."""
    reg = ToolRegistry(autoload=False, limits=ArgumentLimits(max_bytes=1000))
    reg.add(lambda s="": len(s), name="f")
    text = json.dumps({"s": "\U0001f600" * 240}, ensure_ascii=False)  # 249 characters, 969 bytes: within
    assert reg.call("f", text) == 240
    over = json.dumps({"s": "\U0001f600" * 990}, ensure_ascii=False)
    for given in (over, over.encode()):
        assert "arguments are 3969 bytes; the limit is 1000" in reg.try_call("f", given).for_model()
