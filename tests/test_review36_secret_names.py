"""Secret key names a review found shown where their singular, unnumbered names are hidden: a plural
(``passwords``, ``api_keys``) in the model's errors and the approval hint, a numbered one (``password2``,
``api_key_1``) in every export's defaults; and a client's password in a command given as a list."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness_one import ToolRegistry
from harness_one._redact import _DEFAULT, _MODEL, _SHOWN, REDACTED, Redactor, hidden_from_model, mask_secrets
from harness_one.mcp._spec import McpSpec
from harness_one_plugins import ValidationPlugin

# ---------------------------------------------------------------- 1. plural secret names


@pytest.mark.parametrize(
    "name", ["passwords", "api_keys", "apiKeys", "client_secrets", "db_passwords", "DB_PASSWORDS", "session_ids"]
)
def test_a_plural_secret_name_is_secret_to_the_model_and_to_a_person(name: str) -> None:
    assert hidden_from_model(name) and _SHOWN.is_secret(name) and _DEFAULT.is_secret(name)
    assert mask_secrets(f'{{"{name}": "PLURAL-PW"}}') == f'{{"{name}": "{REDACTED}"}}'


@pytest.mark.parametrize("name", ["max_tokens", "tokens", "refresh_tokens", "keys", "num_keys", "status", "address"])
def test_a_plural_that_counts_or_names_no_secret_stays_shown(name: str) -> None:
    assert not hidden_from_model(name) and not _SHOWN.is_secret(name)
    assert mask_secrets(f'{{"{name}": 500}}') == f'{{"{name}": 500}}'


def test_the_models_argument_error_hides_a_value_under_a_plural_secret_name(patient_patterns: None) -> None:
    reg = ToolRegistry(plugins={"validation": ValidationPlugin()}, autoload=False)
    properties = {name: {"type": "integer"} for name in ("passwords", "client_secrets", "max_tokens")}
    reg.add(lambda **kw: kw, name="t", parameters={"type": "object", "properties": {**properties, "api_keys": {"type": "array"}}})
    text = reg.try_call("t", {"passwords": "L2", "client_secrets": "L4", "api_keys": ["L1"], "max_tokens": "lots"}).for_model()
    assert "L1" not in text and "L2" not in text and "L4" not in text, text
    assert "$.passwords: expected integer, got string (redacted)" in text and '"lots"' in text


# ---------------------------------------------------------------- 2. numbered secret names


@pytest.mark.parametrize("name", ["password2", "api_key_1", "token_v2", "apiKey2", "PGPASSWORD2"])
def test_a_numbered_secret_name_is_secret_to_the_model(name: str) -> None:
    assert hidden_from_model(name) and _SHOWN.is_secret(name) and _MODEL.is_secret(name)


def test_a_numbered_secret_names_default_is_not_exported() -> None:
    def deploy(
        host: str, password2: str = "hunter2-PROD", api_key_1: str = "sk-live-123", db_passwords: str = "pw-ABC", port: int = 22
    ) -> None:
        """Deploy."""

    reg = ToolRegistry(autoload=False)
    reg.add(deploy)
    text = json.dumps([reg.export(fmt).tools for fmt in ("openai", "mcp")])
    assert "hunter2-PROD" not in text and "sk-live-123" not in text and "pw-ABC" not in text, text
    assert '"default": 22' in text  # other defaults stay
    assert not hidden_from_model("max_tokens_2") and not hidden_from_model("v2")


# ---------------------------------------------------------------- 3. a command given as a list


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["mysql", "-uroot", "-phunter2", "db"], ["mysql", "-uroot", f"-p{REDACTED}", "db"]),
        (("redis-cli", "-a", "pw-redis"), ["redis-cli", "-a", REDACTED]),
        (
            ["sudo", "sshpass", "-p", "pw-ssh", "ssh", "-p", "22", "h"],
            ["sudo", "sshpass", "-p", REDACTED, "ssh", "-p", "22", "h"],
        ),
        (["mysql", "-p'pass word'"], ["mysql", f"-p'{REDACTED}'"]),
        (["ssh", "-p", "22", "host"], ["ssh", "-p", "22", "host"]),
    ],
)
def test_a_command_list_is_masked_as_its_command_line(command: Any, shown: list[str]) -> None:
    assert Redactor()(command) == shown
    assert _MODEL(command) == shown


def test_a_command_lists_client_password_is_held_and_shown_masked_in_a_spec() -> None:
    assert _DEFAULT.held(["mysql", "-uroot", "-phunter2", "db"]) == ["hunter2"]
    assert _MODEL.held({"cmd": ("redis-cli", "-a", "pw-redis")}) == ["pw-redis"]
    assert _MODEL.held(["ssh", "-p", "2222", "host"]) == []
    spec = McpSpec(name="db", command=("mysql", "-uroot", "-phunter2", "db"))
    assert spec.shown_command() == ("mysql", "-uroot", f"-p{REDACTED}", "db")
    assert "hunter2" not in repr(spec)
    assert McpSpec(name="r", command=("redis-cli", "-a", "pw", "--token", "t")).shown_command() == (
        "redis-cli",
        "-a",
        REDACTED,
        "--token",
        REDACTED,
    )


def test_a_configured_secret_name_with_a_number_hides_its_own_value() -> None:
    """``extra_secret_keys=("license_key_v2",)`` stopped matching itself once a name's number was left out."""
    from harness_one import ToolRegistry
    from harness_one_plugins import ValidationPlugin

    plugin = ValidationPlugin(extra_secret_keys=("license_key_v2", "pin6"))
    registry = ToolRegistry(autoload=False, plugins={"validation": plugin})
    properties = {name: {"type": "integer"} for name in ("license_key_v2", "pin6")}
    registry.add(lambda **kw: kw, name="t", parameters={"type": "object", "properties": properties})
    text = registry.try_call("t", {"license_key_v2": "LK-SECRET-123", "pin6": "987654"}).for_model()
    assert "LK-SECRET-123" not in text and "987654" not in text and text.count("(redacted)") == 2
    assert Redactor(extra_keys=("otp_v1",), last_words=True).is_secret("otp_v1")


@pytest.mark.parametrize("name", ["num_passwords", "max_secrets", "n_api_keys", "total_cookies", "limit_tokens"])
def test_a_name_that_counts_secrets_stays_shown(name: str) -> None:
    assert not hidden_from_model(name)
    assert not _MODEL.is_secret(name)


def test_a_command_word_with_a_line_break_is_one_word_as_in_its_repr() -> None:
    command = ["mysql", "a\nb", "-pfoo1234"]
    assert Redactor()(command) == ["mysql", "a\nb", f"-p{REDACTED}"]
    assert "foo1234" not in _MODEL(repr(command))


def test_a_clients_password_inside_one_word_of_a_command_list_is_held() -> None:
    assert Redactor().held({"cmd": ["sh", "-c", "az login -u app -p Zq7azp"]}) == ["Zq7azp"]
    assert Redactor().held({"cmd": ["sh", "-c", "mysql -uroot -pZq7my db"]}) == ["Zq7my"]
