"""Options of the validation and approval plugins checked when the plugin is built, not read wrongly later."""

from __future__ import annotations

import pytest

from harness_one import PluginError, ToolRegistry
from harness_one_plugins.approval import ApprovalPlugin
from harness_one_plugins.validation import ValidationPlugin


@pytest.mark.parametrize("backend", ["pyhton", 42, None, "Rust"])
def test_an_unknown_validation_backend_is_refused_naming_the_option_and_the_allowed_values(backend: object) -> None:
    with pytest.raises(ValueError) as raised:
        ValidationPlugin(backend=backend)  # type: ignore[arg-type]
    assert str(raised.value) == f"validation backend must be 'auto', 'rust' or 'python', not {backend!r}"
    with pytest.raises(PluginError) as built:
        ToolRegistry(autoload=False, plugin_options={"validation": {"backend": backend}})
    assert built.value.message.startswith(
        f"Plugin 'validation' cannot be built with its options ['backend']: ValueError: validation backend must be "
        f"'auto', 'rust' or 'python', not {backend!r}"
    )


@pytest.mark.parametrize("backend", ["auto", "rust", "python"])
def test_each_validation_backend_is_taken(backend: str) -> None:
    assert ValidationPlugin(backend=backend).backend == backend  # type: ignore[arg-type]


@pytest.mark.parametrize("formats", ["false", "true", 0, 1, None])
def test_validation_formats_must_be_true_or_false(formats: object) -> None:
    with pytest.raises(ValueError) as raised:
        ValidationPlugin(formats=formats)  # type: ignore[arg-type]
    assert str(raised.value) == f"validation formats must be true or false, not {formats!r}"


def test_validation_formats_false_from_the_environment_is_refused_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_VALIDATION", '{"formats": "false"}')
    with pytest.raises(PluginError) as built:
        ToolRegistry()
    assert built.value.message.startswith(
        "Plugin 'validation' cannot be built with its options ['formats']: ValueError: "
        "validation formats must be true or false, not 'false'"
    )


def test_validation_formats_false_turns_format_checks_off() -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"validation": {"formats": False}})
    reg.add(
        lambda when: when,
        name="t",
        parameters={"type": "object", "properties": {"when": {"type": "string", "format": "date"}}, "required": ["when"]},
    )
    assert reg.try_call("t", {"when": "not a date"}).ok


@pytest.mark.parametrize("destructive", ["false", "true", 1, None])
def test_approval_destructive_must_be_true_or_false(destructive: object) -> None:
    with pytest.raises(ValueError) as raised:
        ApprovalPlugin(destructive=destructive)  # type: ignore[arg-type]
    assert str(raised.value) == f"approval destructive must be true or false, not {destructive!r}"
    with pytest.raises(PluginError) as built:
        ToolRegistry(autoload=False, plugin_options={"approval": {"destructive": destructive}})
    assert "cannot be built with its options ['destructive']" in built.value.message


def test_approval_destructive_false_holds_no_destructive_tool() -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"approval": {"destructive": False}})
    reg.add(lambda: "gone", name="wipe", destructive=True)
    assert reg.try_call("wipe", {}).value == "gone"
