"""Review 32, secrets in text: an environment variable naming a password (``PGPASSWORD=``, ``SSHPASS=``) and
``?auth=`` are hidden from the model as from logs; ``repr(McpSpec)`` and the approval hint of ``harness-one call``
mask by the logs' rules; more credentials of a known form (Slack webhooks, Telegram bots, GitLab, npm and Hugging
Face tokens, a client's password flag: ``mysql -p...``, ``redis-cli -a ...``, ``sshpass -p ...``) are masked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness_one import Redactor, ToolRegistry, redact
from harness_one._cli import main
from harness_one._redact import REDACTED, hidden_from_model, mask_secrets
from harness_one.mcp import McpSpec

# --------------------------------------------------------------------------- 1. errors the model reads


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("SSHPASS=S3CRET sshpass -e ssh h", f"SSHPASS={REDACTED} sshpass -e ssh h"),
        ("PGPASSWORD=S3CRET psql -h db failed", f"PGPASSWORD={REDACTED} psql -h db failed"),
        (
            "Command '['env', 'PGPASSWORD=S3CRET', 'psql', '-h', 'db']' returned non-zero exit status 2.",
            f"Command '['env', 'PGPASSWORD={REDACTED}', 'psql', '-h', 'db']' returned non-zero exit status 2.",
        ),
        ("MYSQLPASSWD=S3CRET mysql", f"MYSQLPASSWD={REDACTED} mysql"),
        ("DB_PASS=S3CRET ./migrate", f"DB_PASS={REDACTED} ./migrate"),
        ("SMTPPASS: S3CRET", f"SMTPPASS: {REDACTED}"),
        (
            "HTTPError: 403 for url https://api.example.com/v1?auth=S3CRET&page=2",
            f"HTTPError: 403 for url https://api.example.com/v1?auth={REDACTED}&page=2",
        ),
    ],
)
def test_a_password_variable_and_an_auth_query_key_are_hidden_from_the_model(text: str, shown: str) -> None:
    assert mask_secrets(text) == shown
    assert "S3CRET" not in Redactor().text(text)  # (as logs already hid them)


@pytest.mark.parametrize(
    "text",
    [
        "BYPASS=1 COMPASS=north LOWPASS=3",  # PASS after a word that is no service's nor account's
        "first_pass=3 pgpassword=x Pgpassword=y",  # not an environment variable's name (all capitals)
        "auth: method, pin: 17, oauth=1",  # auth is secret as a query key only
        "https://h/cb?oauth=1&author=ann",
    ],
)
def test_ordinary_words_are_left_alone_in_errors_the_model_reads(text: str) -> None:
    assert mask_secrets(text) == text


def test_hidden_from_model_reads_an_environment_variable_naming_a_password() -> None:
    assert [hidden_from_model(k) for k in ("PGPASSWORD", "SSHPASS", "DB_PASS", "MYSQL_PWD")] == [True] * 4
    assert [hidden_from_model(k) for k in ("BYPASS", "pgpassword", "max_tokens", "auth")] == [False] * 4
    assert Redactor(("token",), last_words=True).is_secret("PGPASSWORD") is False  # (password not among its keys)


def test_a_tools_error_naming_a_password_variable_reaches_the_model_masked() -> None:
    registry = ToolRegistry(autoload=False)

    def psql() -> None:
        raise RuntimeError("Command '['env', 'PGPASSWORD=Zq7pgA', 'psql']' failed; see https://h/x?auth=Zq7authE")

    registry.add(psql)
    result = registry.try_call("psql", {})
    assert "Zq7" not in result.for_model() and "Zq7" not in json.dumps(result.to_dict())


# --------------------------------------------------------------------------- 2. repr(McpSpec): the logs' rules


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ({"command": ("env", "PGPASSWORD=S3CRET", "psql")}, f"command=('env', 'PGPASSWORD={REDACTED}', 'psql')"),
        ({"command": ("srv", "--auth", "S3CRET")}, f"command=('srv', '--auth', '{REDACTED}')"),
        ({"command": ("srv", "--pin", "S3CRET", "-v")}, f"command=('srv', '--pin', '{REDACTED}', '-v')"),
        ({"command": ("srv", "--signature=S3CRET")}, f"command=('srv', '--signature={REDACTED}')"),
        ({"command": ("curl", "-u", "bob:S3CRET", "https://h")}, f"command=('curl', '-u', 'bob:{REDACTED}', 'https://h')"),
        ({"url": "https://h/mcp?auth=S3CRET"}, f"url='https://h/mcp?auth={REDACTED}'"),
        ({"url": "https://h/mcp?sig=S3CRET&db_password=S3CRET"}, f"url='https://h/mcp?sig={REDACTED}&db_password={REDACTED}'"),
        # these are shown: "key" is secret as a query key only (--key names a key file), and an
        # OAuth ?code= is single-use, bound to its client (code is also a status or country code)
        ({"command": ("srv", "--key", "server.key")}, "command=('srv', '--key', 'server.key')"),
        ({"url": "https://h/mcp?code=200"}, "url='https://h/mcp?code=200'"),
    ],
)
def test_the_repr_of_an_mcp_spec_masks_by_the_models_keys_and_pin_auth_signature(given: dict[str, Any], shown: str) -> None:
    spec = McpSpec(name="x", **given)
    assert repr(spec) == f"McpSpec(name='x', {shown}, prefix='')"


# --------------------------------------------------------------------------- 3. the approval hint of `call`

#: A tools file whose ``sign`` always needs approval, and takes names logs mask and the model's errors show.
SIGN = """
from harness_one import defineTool


@defineTool(registry=None, options={"requires_approval": True})
def sign(pin: str, auth: str, signature: str, credential: str) -> str:
    \"\"\"Sign.\"\"\"
    return "signed"
"""


def test_the_approval_hint_masks_the_call_line_by_the_logs_rules(runner: Any, tmp_path: Path) -> None:
    (tmp_path / "sign.py").write_text(SIGN)
    arguments = {"pin": "S3CRET-1", "auth": "S3CRET-2", "signature": "S3CRET-3", "credential": "S3CRET-4"}
    context = {"tenant": "acme", "client_credential": "S3CRET-5"}
    options = ["--tools", "sign.py", "-O", "budget.key=auth=S3CRET-6"]
    done = runner.invoke(main, [*options, "call", "sign", "--args", json.dumps(arguments), "--context", json.dumps(context)])
    assert done.exit_code == 8, done.output
    assert "S3CRET" not in done.stderr
    said = done.stderr.splitlines()
    assert "(put back the secrets masked in its options and in the call)" in said[1]
    request = json.loads(said[2])
    assert request["arguments"] == dict.fromkeys(arguments, REDACTED)
    assert request["context"] == {"tenant": "acme", "client_credential": REDACTED}


# --------------------------------------------------------------------------- 4. credentials of a known form

_SLACK = "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
_TELEGRAM = "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"POST {_SLACK} failed", f"POST https://hooks.slack.com/services/{REDACTED} failed"),
        (f"GET {_TELEGRAM}: 401", f"GET https://api.telegram.org/{REDACTED}/sendMessage: 401"),
        ("glpat-xxxxxxxxxxxxxxxxxxxx1234 rejected", f"{REDACTED} rejected"),
        ("npm token npm_abcdefghijklmnopqrstuvwxyz0123456789 invalid", f"npm token {REDACTED} invalid"),
        ("hf token hf_abcdefghijklmnopqrstuvwxyzABCDEFGH invalid", f"hf token {REDACTED} invalid"),
        (
            "Command '['mysql', '-pZq7myD', '-u', 'root']' returned non-zero exit status 1.",
            f"Command '['mysql', '-p{REDACTED}', '-u', 'root']' returned non-zero exit status 1.",
        ),
        ("(mysqldump -h db -u root -pZq7myD app)", f"(mysqldump -h db -u root -p{REDACTED} app)"),
        (
            "Command '['redis-cli', '-h', 'cache', '-p', '6379', '-a', 'Zq7rdG', 'ping']' returned non-zero exit status 1.",
            f"Command '['redis-cli', '-h', 'cache', '-p', '6379', '-a', '{REDACTED}', 'ping']' returned non-zero exit status 1.",
        ),
        ("redis-cli --pass Zq7rdG ping", f"redis-cli --pass {REDACTED} ping"),
        (
            "Command '['sshpass', '-p', 'Zq7sshC', 'ssh', 'h']' returned non-zero exit status 5.",
            f"Command '['sshpass', '-p', '{REDACTED}', 'ssh', 'h']' returned non-zero exit status 5.",
        ),
        ("sshpass -v -pZq7sshC ssh -p 22 h", f"sshpass -v -p{REDACTED} ssh -p 22 h"),
    ],
)
def test_more_credentials_of_a_known_form_are_masked_in_logs_and_for_the_model(text: str, shown: str) -> None:
    assert mask_secrets(text) == shown
    logged = Redactor().text(text)  # (logs may mask more: ['sshpass', '-p'] reads as a pair too)
    assert logged == shown or not any(secret in logged for secret in ("Zq7", "XXXX", "AAHdq", "xxxx", "abcdefghij"))


@pytest.mark.parametrize(
    "text",
    [
        "import npm_modules; from hf_hub import x; npm_token_path",
        "ssh -p 22 host; docker run -p 8080:80 img; nc -p 8080",  # -p is a port but for mysql's own -p<password>
        "mysql -p 3306; mysql -u root -p; mysql.connector -pX; the mysql server",  # -p alone asks for the password
        "sshpass -f pwfile ssh -p 22 h; redis-cli -p 6379 ping",  # ssh's -p, a port
        "glpat-short T0000/B0000/XX bot12:AAA",
        "at 10:30 the build 123456789:Abc failed",
    ],
)
def test_ordinary_text_is_not_read_as_a_known_credential(text: str) -> None:
    assert (Redactor().text(text), mask_secrets(text)) == (text, text)


def test_a_known_credential_as_a_mapping_key_is_masked() -> None:
    token = "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"
    assert redact({token: 1, "hf_hub_download": 2}) == {REDACTED: 1, "hf_hub_download": 2}


# --------------------------------------------------------------------------- 5. follow-up: what a person reads to
# run (McpSpec's repr, the approval hint) shows ordinary arguments, whole; a client's password flag is not read in
# prose, and is masked when quoted


def test_the_repr_of_an_mcp_spec_shows_ordinary_arguments_and_every_word() -> None:
    spec = McpSpec(name="x", command=("srv", "--max-tokens", "500", "--tokenizer", "gpt2", "--secretary", "Ann"))
    assert spec.shown_command() == spec.command
    long = McpSpec(name="x", command=("srv", *(f"a{i}" for i in range(120)), "--token", "S3CRET"))
    assert long.shown_command() == (*long.command[:-1], REDACTED)


#: A tools file whose ``gen`` always needs approval, and takes names that are no secrets' and a pin.
GEN = """
from harness_one import defineTool


@defineTool(registry=None, options={"requires_approval": True})
def gen(max_tokens: int, tokenizer: str, secretary: str, pin: str) -> str:
    \"\"\"Generate.\"\"\"
    return "done"
"""


def test_the_approval_hint_shows_ordinary_arguments_for_the_reader_to_keep(runner: Any, tmp_path: Path) -> None:
    (tmp_path / "gen.py").write_text(GEN)
    arguments = {"max_tokens": 500, "tokenizer": "gpt2", "secretary": "Ann", "pin": "S3CRET"}
    done = runner.invoke(main, ["--tools", "gen.py", "call", "gen", "--args", json.dumps(arguments)])
    assert done.exit_code == 8, done.output
    said = done.stderr.splitlines()
    assert "(put back the secrets masked in the call)" in said[1]
    assert json.loads(said[2])["arguments"] == {**arguments, "pin": REDACTED}


@pytest.mark.parametrize(
    "text",
    [
        "mysql client failed, rerun it with -protocol=tcp",
        "ran mysql on db1 then postgres with -p5432 and psql",
        "mysql failed. Retry with -pedantic",
        "redis-cli failed, try -a fast",
        "mysql -a 1 -b 2 -c 3 -d 4 -e 5 -f 6 -p3306",  # more than 5 flags before it
    ],
)
def test_a_client_password_flag_is_not_read_in_prose(text: str) -> None:
    assert (Redactor().text(text), mask_secrets(text)) == (text, text)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("mysql -u root -p'Zq7 my' db", f"mysql -u root -p'{REDACTED}' db"),
        ('mysql -u root -p"Zq7my" db', f'mysql -u root -p"{REDACTED}" db'),
        (json.dumps({"c": 'mysql -p"Zq7my" db'}), json.dumps({"c": f'mysql -p"{REDACTED}" db'})),
        (
            "mysql -h db.example.com -P 3306 -u root --ssl -pZq7my app",
            f"mysql -h db.example.com -P 3306 -u root --ssl -p{REDACTED} app",
        ),
        ("['mysql', '-p', 'db']", "['mysql', '-p', 'db']"),  # -p alone, then a database: asks for the password
        ("mysql -p'' db", "mysql -p'' db"),
    ],
)
def test_a_quoted_mysql_password_is_masked_to_its_closing_quote(text: str, shown: str) -> None:
    assert mask_secrets(text) == shown
    assert Redactor().text(text) == shown
