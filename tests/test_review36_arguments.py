"""Review 36: converter refusals escape control characters, numbers too small for a float are refused, one wording
for nesting past the limit."""

from __future__ import annotations

import datetime
import enum
import pathlib
import uuid
from typing import Any

import pytest

from harness_one import ArgumentLimits, ManualClock, ToolArgumentError, ToolRegistry
from harness_one_plugins.validation import ValidationPlugin


class Color(enum.Enum):
    RED = "red"


def _registry(kind: str, annotation: Any = float) -> ToolRegistry:
    def tool(v: Any = None) -> Any:
        return v

    tool.__annotations__ = {"v": annotation, "return": Any}
    if kind == "none":
        reg = ToolRegistry(autoload=False, standard_plugins=False, clock=ManualClock())
    else:
        reg = ToolRegistry(autoload=False, plugins={"validation": ValidationPlugin(backend=kind)}, clock=ManualClock())
    reg.add(tool, name="t")
    return reg


def _refused(reg: ToolRegistry, text: str) -> list[tuple[str, str, str, str | None]]:
    with pytest.raises(ToolArgumentError) as err:
        reg.call("t", text)
    return [(p.path, p.keyword, p.message, p.got) for p in err.value.problems]


ESCAPES = '{"v": "\\u001b[2J\\u001b[31mPWNED\\u0007\\u0000"}'
SHOWN = '"\\u001b[2J\\u001b[31mPWNED\\u0007\\u0000"'  # JSON-escaped, as the validation plugin shows it


@pytest.mark.parametrize(
    ("annotation", "keyword", "expected"),
    [
        (datetime.date, "format", "an RFC 3339 date (YYYY-MM-DD)"),
        (uuid.UUID, "format", "a UUID"),
        (Color, "enum", 'one of ["red"]'),
    ],
)
def test_a_converters_refusal_shows_control_characters_escaped(annotation: Any, keyword: str, expected: str) -> None:
    """With no validation plugin the converter's refusal echoed ESC, BEL and NUL raw (terminal escapes in the CLI)."""
    refusal = _refused(_registry("none", annotation), ESCAPES)
    assert refusal == [("$.v", keyword, f"expected {expected}, got {SHOWN}", SHOWN)]


def test_a_paths_refusal_shows_escapes_as_an_integers_does() -> None:
    text = '{"v": "a\\u0000\\u001b[31mb"}'
    path = _refused(_registry("rust", pathlib.Path), text)[0][2]
    number = _refused(_registry("rust", int), text)[0][2]
    assert path == 'expected a path, got "a\\u0000\\u001b[31mb"'
    assert number == 'expected integer, got string "a\\u0000\\u001b[31mb"'
    assert not any(ord(c) < 32 for c in path + number)


def test_a_long_string_in_a_converters_refusal_is_cut_and_quotes_are_escaped() -> None:
    got = _refused(_registry("none", uuid.UUID), '{"v": "\\"' + "x" * 100 + '"}')[0][3]
    assert got == '"\\"' + "x" * 56 + '..."'


@pytest.mark.parametrize("kind", ["none", "rust", "python"])
@pytest.mark.parametrize(
    ("text", "path", "literal"),
    [
        ('{"v": 1e-400}', "$.v", "1e-400"),
        ('{"v": -1e-400}', "$.v", "-1e-400"),
        ('{"v": 2E-324}', "$.v", "2E-324"),
        ('{"v": [1, 0.' + "0" * 330 + "1]}", "$.v[1]", "0." + "0" * 55 + "..."),
    ],
)
def test_a_number_too_small_for_a_float_is_refused_where_it_stands(kind: str, text: str, path: str, literal: str) -> None:
    """``1e-400`` read as 0.0: ``exclusiveMinimum: 0`` refused a positive number, ``multipleOf`` took it."""
    reg = _registry(kind, Any)
    message = f"expected a number a float can hold, got {literal} (too small for a float: it reads as 0.0)"
    assert _refused(reg, text) == [(path, "type", message, literal)]


@pytest.mark.parametrize("kind", ["none", "rust", "python"])
def test_zero_and_small_numbers_a_float_holds_are_taken(kind: str) -> None:
    reg = _registry(kind, Any)
    assert reg.call("t", '{"v": [0e-400, -0.0e-999, 5e-324, 1e-320, 1' + "0" * 300 + 'e-500, "1e-400"]}') == [
        0.0,
        -0.0,
        5e-324,
        1e-320,
        1e-200,
        "1e-400",
    ]


def test_a_number_too_small_for_a_float_under_a_secret_name_is_not_shown() -> None:
    def tool(api_key: float) -> float:
        return api_key

    reg = ToolRegistry(autoload=False, standard_plugins=False, clock=ManualClock())
    reg.add(tool)
    with pytest.raises(ToolArgumentError) as err:
        reg.call("tool", '{"api_key": 1.5e-400}')
    assert err.value.problems[0].got == "(redacted)" and "1.5e-400" not in str(err.value)


@pytest.mark.parametrize("kind", ["none", "rust", "python"])
def test_nesting_past_the_limit_is_worded_alike_however_deep(kind: str) -> None:
    """100 levels (the plugin's walk) and 2,000 (past the JSON decoder's depth) were worded two ways."""
    reg = _registry(kind, Any)
    deep = _refused(reg, '{"v": ' + "[" * 2000 + "]" * 2000 + "}")
    assert deep == [("$", "limits", "arguments are nested more than 64 levels deep", "depth > 64")]
    if kind != "none":  # (no walk without the plugin)
        assert _refused(reg, '{"v": ' + "[" * 100 + "]" * 100 + "}") == deep
    refusal = ArgumentLimits(max_depth=8).too_deep()
    assert [(p.message, p.expected, p.got) for p in refusal.problems] == [
        ("arguments are nested more than 8 levels deep", "depth <= 8", "depth > 8")
    ]


def test_every_reader_of_json_text_refuses_a_number_too_small_for_a_float(tmp_path: Any) -> None:
    """``call --args`` and a ``run`` line read the text themselves and passed the registry a dict holding 0.0."""
    from click.testing import CliRunner

    from harness_one._cli import EXIT_CODES, main

    tools = tmp_path / "tiny.py"
    tools.write_text("from harness_one import define_tool\n\n@define_tool\ndef pos(x: float) -> float:\n    return x\n")
    runner = CliRunner()
    called = runner.invoke(main, ["--tools", str(tools), "call", "pos", "--args", '{"x": 1e-400}'])
    assert called.exit_code == EXIT_CODES["usage"]
    assert "$.x: expected a number a float can hold, got 1e-400 (too small for a float" in called.output
    lines = '{"id": 1, "name": "pos", "arguments": {"x": 1e-400}}\n{"id": 2, "name": "pos", "arguments": {"x": 1e-300}}\n'
    ran = runner.invoke(main, ["--tools", str(tools), "run"], input=lines)
    answers = [line for line in ran.output.splitlines() if line.startswith("{")]
    assert '"ok": false' in answers[0] and "$.arguments.x: expected a number a float can hold, got 1e-400" in answers[0]
    assert answers[1] == '{"id": 2, "ok": true, "result": 1e-300}'


def test_text_past_the_decoder_under_a_max_depth_it_may_not_reach_claims_no_limit_passed() -> None:
    registry = ToolRegistry(autoload=False, standard_plugins=False, limits=ArgumentLimits(max_depth=5000))
    registry.add(lambda a: a, name="t")
    refused = registry.try_call("t", '{"a": ' + "[" * 1200 + "]" * 1200 + "}")
    assert isinstance(refused.error, ToolArgumentError)
    assert refused.error.problems[0].message == "arguments are nested too deeply to read"  # not "more than 5000 levels"


@pytest.mark.parametrize("kind", ["none", "rust", "python"])
@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\\u009b2J", '"\\u009b2J"'),  # C1 CSI: a terminal's ESC [
        ("\\u0085\\u009f", '"\\u0085\\u009f"'),
        ("\\u007fx", '"\\u007fx"'),  # DEL
        ("a\\u2028b\\u2029", '"a\\u2028b\\u2029"'),  # line and paragraph separators
    ],
)
def test_a_refusal_shows_del_c1_and_line_separators_escaped(kind: str, raw: str, shown: str) -> None:
    """``preview`` escaped C0 controls (JSON does) but left DEL, C1 controls and U+2028/U+2029 raw."""
    refusal = _refused(_registry(kind, uuid.UUID), '{"v": "' + raw + '"}')
    assert [(path, got) for path, _, _, got in refusal] == [("$.v", shown)]
    assert refusal[0][2].endswith(f"got {shown}")


def test_preview_keeps_its_cut_quotes_and_surrogate_escapes() -> None:
    from harness_one import preview

    assert preview("\x9b" * 30) == '"' + "\\u009b" * 9 + "\\u..."  # the cap counts the escapes, as before
    shown = '{"k\\u007f": ["\\u2028", "\\ud800", "\\u001b", "q\\"\\\\"]}'
    assert preview({"k\x7f": ["\u2028", "\ud800", "\x1b", 'q"\\']}) == shown
    assert preview("caf\u00e9 \u00a0\u2027") == '"caf\u00e9 \u00a0\u2027"'  # other text as it is
