"""Review 31, core: ``ArgumentProblem.mismatch``, the one wording of a tool's own argument checks (the contrib tools
each wrote theirs), as the validation plugin words the same refusal."""

from __future__ import annotations

import math
from typing import Any

import pytest

from harness_one import ArgumentProblem, Redactor, ToolArgumentError, ToolRegistry, define_tool, preview


@pytest.mark.parametrize(
    ("value", "message", "got"),
    [
        (5, "expected string, got integer 5", "5"),
        (None, "expected string, got null", "null"),
        (True, "expected string, got boolean true", "true"),
        ([1, "é"], 'expected string, got array [1, "é"]', '[1, "é"]'),
        ({"a": 1}, 'expected string, got object {"a": 1}', '{"a": 1}'),
        (b"x", 'expected string, got bytes "<bytes>"', '"<bytes>"'),
        (10**5000, 'expected string, got integer "<integer of about 5001 digits>"', '"<integer of about 5001 digits>"'),
        ("\ud800", 'expected string, got string "\\ud800"', '"\\ud800"'),
    ],
    ids=["int", "null", "bool", "array", "object", "bytes", "huge-int", "surrogate"],
)
def test_a_mismatch_shows_the_values_type_and_json_text(value: Any, message: str, got: str) -> None:
    assert ArgumentProblem.mismatch("$.x", "string", value) == ArgumentProblem("$.x", message, "type", "string", got)


def test_a_long_value_is_cut_and_a_cycle_told_by_its_type() -> None:
    long = ArgumentProblem.mismatch("$.x", "integer", "y" * 500)
    assert long.got == '"' + "y" * 56 + "..." and len(long.message) < 100
    cycle: list[Any] = []
    cycle.append(cycle)
    assert ArgumentProblem.mismatch("$.x", "string", cycle).message.startswith("expected string, got array [")


def test_a_secret_names_value_is_not_shown() -> None:
    assert ArgumentProblem.mismatch("$.api_key", "string", 12345).message == "expected string, got integer (redacted)"
    assert ArgumentProblem.mismatch("$.auth.password", "string", ["hunter2"]).got == "(redacted)"
    assert ArgumentProblem.mismatch("$.api_key", "string", None).message == "expected string, got null"  # holds nothing


def test_another_keyword_shows_the_value_alone() -> None:
    problem = ArgumentProblem.mismatch("$.kind", 'one of ["a", "b"]', "c", "enum")
    assert problem == ArgumentProblem("$.kind", 'expected one of ["a", "b"], got "c"', "enum", 'one of ["a", "b"]', '"c"')


@pytest.mark.parametrize("value", [5, None, [1, 2], {"k": "v"}, True, 2.5])
def test_a_tools_own_check_words_a_refusal_as_the_validation_plugin_does(value: Any) -> None:
    @define_tool(
        name="echo",
        registry=None,
        parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    )
    def echo(text: Any) -> str:
        if not isinstance(text, str):
            raise ToolArgumentError([ArgumentProblem.mismatch("$.text", "string", text)])
        return text

    def problems(registry: ToolRegistry) -> list[ArgumentProblem]:
        registry.add(echo)
        with pytest.raises(ToolArgumentError) as err:
            registry.call("echo", {"text": value})
        return list(err.value.problems)

    assert problems(ToolRegistry(standard_plugins=False, autoload=False)) == problems(ToolRegistry(autoload=False))


def test_a_process_workers_module_list_is_taken_whole_while_imports_happen(monkeypatch: pytest.MonkeyPatch) -> None:
    # list(sys.modules.items()) allocated a tuple per module; a collection that allocation started ran Python code
    # that imported (here a gc callback, as a finalizer or another thread could): "the process-mode worker could not
    # be started: RuntimeError: dictionary changed size during iteration"
    import gc
    import sys

    from harness_one import _runners

    modules = dict(sys.modules)
    grown = 0

    def imports(phase: str, info: dict[str, Any]) -> None:
        nonlocal grown
        if phase == "start":
            grown += 1
            modules[f"_imported_meanwhile_{grown}"] = None

    monkeypatch.setattr(sys, "modules", modules)
    threshold = gc.get_threshold()
    gc.callbacks.append(imports)
    gc.set_threshold(1)
    try:
        files = _runners._files(sys.path)
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(imports)
    assert isinstance(files, dict)
    assert grown > 0  # collections did run, and grew the modules, while it worked


@pytest.mark.parametrize(
    ("value", "hidden"),
    [
        ("password=hunter2", "hunter2"),
        ("https://bob:hunter2@x.example/", "hunter2"),
        ({"api_key": "hunter2"}, "hunter2"),
        ([{"password": "hunter2"}], "hunter2"),
        ("Bearer abcdefghijklmnopqrstuvwxyz123456", "abcdefghijklmnop"),
    ],
)
def test_a_mismatch_masks_secrets_as_the_validation_plugin_does(value: Any, hidden: str) -> None:
    # the value was shown in clear where the validation plugin masked it
    @define_tool(name="echo", registry=None, parameters={"type": "object", "properties": {"n": {"type": "number"}}})
    def echo(n: Any = 0) -> Any:
        if not isinstance(n, (int, float)):
            raise ToolArgumentError([ArgumentProblem.mismatch("$.n", "number", n)])
        return n

    def problems(registry: ToolRegistry) -> list[ArgumentProblem]:
        registry.add(echo)
        with pytest.raises(ToolArgumentError) as err:
            registry.call("echo", {"n": value})
        return list(err.value.problems)

    own = problems(ToolRegistry(standard_plugins=False, autoload=False))
    assert hidden not in own[0].message
    assert own == problems(ToolRegistry(autoload=False))


def test_a_non_finite_number_is_shown_alone_and_work_is_bounded() -> None:
    assert ArgumentProblem.mismatch("$.x", "string", math.inf).message == "expected string, got Infinity"
    huge = list(range(10**6))
    assert ArgumentProblem.mismatch("$.x", "string", huge).got == "[0, 1, 2, 3, 4, 5, 6, 7]..."  # cut: said so


def test_a_secret_is_masked_before_the_value_is_cut() -> None:
    # cut to 80 characters first, a URL's password lost the "@" its mask needs and showed in part
    value = "see token=" + "A" * 50 + " https://alice:hunter2hunter2@example.com/"
    assert "hunte" not in ArgumentProblem.mismatch("$.x", "number", value).message
    assert "pa55" not in preview("Authorization: Bearer " + "B" * 60 + " https://bob:pa55word@x.example/", redactor=Redactor())


def test_a_key_too_long_for_text_is_shown_by_its_size() -> None:
    shown = ArgumentProblem.mismatch("$.x", "string", {10**5000: 1})
    assert shown.message == 'expected string, got object {"<integer of about 5001 digits>": 1}'
