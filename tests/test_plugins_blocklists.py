"""Block-lists and allow-lists: a blocked name stays out, and an empty allow-list is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness_one import PluginError, ToolRegistry, hookimpl
from harness_one._config import ConfigError, load_settings


class Nop:
    @hookimpl
    def harness_pre_call(self, call: object) -> None:
        return None


def test_registering_under_a_blocked_name_is_refused_until_unblocked() -> None:
    reg = ToolRegistry(autoload=False)
    reg.plugins.block("rate_limit")
    with pytest.raises(PluginError, match=r"'rate_limit' is blocked: call registry.plugins.unblock"):
        reg.plugins.register(Nop(), "rate_limit")
    with pytest.raises(PluginError, match="is blocked"):
        reg.plugins.replace("rate_limit", Nop)
    assert reg.plugins.is_blocked("rate_limit") and "rate_limit" not in reg.plugins
    reg.plugins.unblock("rate_limit")
    reg.plugins.register(Nop(), "rate_limit")
    assert type(reg.plugins.get("rate_limit")) is Nop


def test_a_plugin_given_under_a_blocked_name_is_kept_out(monkeypatch: pytest.MonkeyPatch) -> None:
    reg = ToolRegistry(autoload=False, block=["cache"], plugins={"cache": Nop()})
    assert "cache" not in reg.plugins and reg.plugins.is_blocked("cache")
    assert [f.name for f in reg.plugins.failures if "blocked" in f.error] == ["cache"]
    monkeypatch.setenv("HARNESS_ONE_BLOCK_PLUGINS", "rate_limit")
    assert "rate_limit" not in ToolRegistry(autoload=False, plugins={"rate_limit": Nop()}).plugins
    with pytest.raises(PluginError, match="blocked"):
        ToolRegistry(autoload=False, strict=True, plugins={"rate_limit": Nop()})


def test_an_empty_allow_list_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(PluginError, match="allow-list is empty"):
        ToolRegistry(allow=[])
    monkeypatch.setenv("HARNESS_ONE_PLUGINS", "")  # empty in the environment: no allow-list
    assert "validation" in ToolRegistry().plugins
    file = tmp_path / "harness-one.toml"
    file.write_text("[plugins]\nallow = []\n")
    with pytest.raises(ConfigError, match="allow is empty"):
        load_settings(str(file))
