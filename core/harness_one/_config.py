"""Settings for the command line: a TOML file, then the environment, then flags."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["ConfigError", "Settings", "load_settings"]

ENV_CONFIG = "HARNESS_ONE_CONFIG"
ENV_LOG_FORMAT = "HARNESS_ONE_LOG_FORMAT"
ENV_LOG_LEVEL = "HARNESS_ONE_LOG_LEVEL"
ENV_IDEMPOTENCY_DB = "HARNESS_ONE_IDEMPOTENCY_DB"
ENV_TOOLS = "HARNESS_ONE_TOOLS"
DEFAULT_FILE = "harness-one.toml"


class ConfigError(Exception):
    """The configuration file or environment is invalid; the message says where."""


def _state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "harness-one"


@dataclass
class Settings:
    """Everything the CLI builds its registry from. See ``docs/configuration.md``."""

    block: list[str] = field(default_factory=list)
    allow: list[str] | None = None
    autoload: bool | None = None
    strict: bool | None = None
    rate_limit: dict[str, Any] | None = None
    timeout: float | None = None
    max_concurrency: int | None = None
    idempotency_store: str = "sqlite"
    idempotency_path: str = field(default_factory=lambda: str(_state_dir() / "idempotency.sqlite3"))
    log_format: str | None = None
    log_level: str = "warning"
    tools: list[str] = field(default_factory=list)
    source: str | None = None


_KNOWN = {
    "plugins": {"block", "allow", "autoload", "strict"},
    "defaults": {"rate_limit", "timeout", "max_concurrency"},
    "idempotency": {"store", "path"},
    "logging": {"format", "level"},
}


def _check(data: dict[str, Any], where: str) -> None:
    for key, value in data.items():
        if key == "tools":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where}: 'tools' must be a list of module names or file paths")
            continue
        if key not in _KNOWN:
            raise ConfigError(f"{where}: unknown section [{key}]; known: {', '.join(sorted([*_KNOWN, 'tools']))}")
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: [{key}] must be a table")
        unknown = set(value) - _KNOWN[key]
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)} in [{key}]; known: {sorted(_KNOWN[key])}")


def load_settings(path: str | None = None) -> Settings:
    """Read ``path`` (or ``$HARNESS_ONE_CONFIG``, or ``./harness-one.toml`` if present), then the environment."""
    settings = Settings()
    chosen = path or os.environ.get(ENV_CONFIG) or (DEFAULT_FILE if Path(DEFAULT_FILE).is_file() else None)
    if chosen:
        file = Path(chosen).expanduser()
        try:
            data = tomllib.loads(file.read_text())
        except OSError as exc:
            raise ConfigError(f"cannot read the configuration file {chosen!r}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{chosen}: invalid TOML: {exc}") from None
        _check(data, chosen)
        plugins, defaults = data.get("plugins", {}), data.get("defaults", {})
        idem, logs = data.get("idempotency", {}), data.get("logging", {})
        settings.block = list(plugins.get("block", []))
        settings.allow = plugins.get("allow")
        settings.autoload = plugins.get("autoload")
        settings.strict = plugins.get("strict")
        settings.rate_limit = defaults.get("rate_limit")
        settings.timeout = defaults.get("timeout")
        settings.max_concurrency = defaults.get("max_concurrency")
        settings.idempotency_store = idem.get("store", settings.idempotency_store)
        if "path" in idem:
            settings.idempotency_path = str(Path(idem["path"]).expanduser())
        settings.log_format = logs.get("format")
        settings.log_level = logs.get("level", settings.log_level)
        settings.tools = list(data.get("tools", []))
        settings.source = str(file)
    settings.log_format = os.environ.get(ENV_LOG_FORMAT) or settings.log_format
    settings.log_level = os.environ.get(ENV_LOG_LEVEL) or settings.log_level
    settings.idempotency_path = os.environ.get(ENV_IDEMPOTENCY_DB) or settings.idempotency_path
    settings.tools += [t for t in os.environ.get(ENV_TOOLS, "").split(os.pathsep) if t]
    if settings.idempotency_store not in ("sqlite", "memory"):
        raise ConfigError(f"[idempotency] store must be 'sqlite' or 'memory', not {settings.idempotency_store!r}")
    if settings.log_format not in (None, "console", "json"):
        raise ConfigError(f"log format must be 'console' or 'json', not {settings.log_format!r}")
    if settings.log_level.lower() not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"log level must be debug, info, warning or error, not {settings.log_level!r}")
    return settings
