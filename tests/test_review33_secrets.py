"""Review 33, secrets: a call's secret values its tool's exception quotes are masked in the error the model reads
(whole tokens only, before the text is cut); more password forms of command lines and URLs."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness_one import REDACTED, Call, Redactor, ToolExecutionError, ToolRegistry
from harness_one._errors import ERROR_TEXT_LIMIT, outside_text
from harness_one._redact import mask_held, mask_secrets

KEY = "sk-live-9f8e7d6c5b4a"
PASSWORD = "Zq7hunter2"


def login(user: str, password: str, call: Call) -> str:
    """Quotes its password argument and its context's API key (module level: process mode imports it)."""
    raise RuntimeError(f"login failed for {user} with {password} and key {call.context.get('api_key', '-')}")


def login_in_process(user: str, password: str, api_key: str) -> str:
    """As :func:`login`, the key an argument (a process-mode tool takes no Call)."""
    raise RuntimeError(f"login failed for {user} with {password} and key {api_key}")


def login_unsendable(user: str, password: str) -> str:
    """Raises an exception of a class the caller cannot rebuild: process mode sends its description."""

    class Local(Exception):
        pass

    raise Local(f"login failed for {user} with {password}")


SHOWN = f"Tool 'login' failed: RuntimeError: login failed for bob with {REDACTED} and key {REDACTED}"
ARGUMENTS = {"user": "bob", "password": PASSWORD}
CONTEXT = {"api_key": KEY}


@pytest.fixture
def reg() -> Iterator[ToolRegistry]:
    registry = ToolRegistry(autoload=False)
    yield registry
    registry.plugins.get("timeout").processes.shutdown()


# ---------------------------------------------------------------- 1: the secrets a tool's exception quotes


@pytest.mark.parametrize("mode", [None, "thread", "process"])
def test_a_quoted_argument_and_context_secret_is_masked_for_the_model(reg: ToolRegistry, mode: str | None) -> None:
    """The model read 'login failed for bob with Zq7hunter2 and key sk-live-...' (sync, thread and process mode)."""
    arguments, context = (ARGUMENTS, CONTEXT) if mode != "process" else ({**ARGUMENTS, **CONTEXT}, None)
    tool = login if mode != "process" else login_in_process
    reg.add(tool, name="login", **({} if mode is None else {"timeout": 30, "timeout_mode": mode}))
    with pytest.raises(ToolExecutionError) as caught:
        reg.call("login", arguments, context=context)
    err = caught.value
    assert (err.message, err.args, err.cause_type) == (SHOWN, (SHOWN,), "RuntimeError")
    assert PASSWORD in str(err.cause)  # (the cause is the tool's exception, whole)
    result = reg.try_call("login", arguments, context=context)
    assert result.error is not None and result.error.to_dict()["message"] == SHOWN
    assert result.for_model() == f"Error: {SHOWN}"


async def test_acall_masks_them_too(reg: ToolRegistry) -> None:
    reg.add(login, name="login")
    with pytest.raises(ToolExecutionError) as caught:
        await asyncio.wait_for(reg.acall("login", ARGUMENTS, context=CONTEXT), 10)
    assert caught.value.message == SHOWN
    result = await asyncio.wait_for(reg.atry_call("login", ARGUMENTS, context=CONTEXT), 10)
    assert result.error is not None and result.error.message == SHOWN


def test_a_tool_no_hook_applies_to_masks_its_arguments() -> None:
    """The registry's direct path (no plugin, no context) builds the error through the same helper."""

    def plain(user: str, password: str) -> str:
        raise ValueError(f"login failed for {user} with {password}")

    reg = ToolRegistry(autoload=False, standard_plugins=False)
    reg.add(plain)
    with pytest.raises(ToolExecutionError) as caught:
        reg.call("plain", ARGUMENTS)
    assert caught.value.message == f"Tool 'plain' failed: ValueError: login failed for bob with {REDACTED}"


def test_process_mode_masks_an_exception_it_can_only_describe(reg: ToolRegistry) -> None:
    reg.add(login_unsendable, name="login", timeout=30, timeout_mode="process")
    with pytest.raises(ToolExecutionError) as caught:
        reg.call("login", ARGUMENTS)
    message = caught.value.message
    assert message.endswith(f"login failed for bob with {REDACTED}") and PASSWORD not in message


def test_an_idempotent_replay_holds_the_masked_text(reg: ToolRegistry) -> None:
    """The store records the error as masked: another caller replaying the key does not read the secrets."""
    reg.add(login, name="login")
    first = reg.try_call("login", ARGUMENTS, context=CONTEXT, idempotency_key="k1")
    replay = reg.try_call("login", ARGUMENTS, context={"api_key": "other-key"}, idempotency_key="k1")
    assert first.error is not None and replay.error is not None and not replay.ran
    assert first.error.message == replay.error.message == SHOWN


def test_the_mcp_servers_is_error_answer_holds_the_masked_text(reg: ToolRegistry) -> None:
    from harness_one.mcp._server import _Bridge

    reg.add(login, name="login")
    answer = _Bridge(reg, None)._answer(reg.try_call("login", ARGUMENTS, context=CONTEXT), "login")
    assert answer["isError"] is True and answer["content"][0]["text"] == SHOWN
    assert answer["_meta"]["harness-one/error"]["message"] == SHOWN


def test_only_whole_tokens_of_four_characters_or_more_are_masked() -> None:
    """Masking every occurrence rewrote text around it ('port [REDACTED]5', 'web_[REDACTED]'); a short value
    (masking "abc" would blank out any word) and harness-one's own text are left so."""

    def web_search(query: str, password: str) -> str:
        raise OSError(f"no route to port 54325 for web_search ({query}); {password} refused; search-{password}")

    reg = ToolRegistry(autoload=False, standard_plugins=False)
    reg.add(web_search)
    result = reg.try_call("web_search", {"query": "q", "password": "5432"})
    assert result.error is not None
    assert result.error.message == (
        f"Tool 'web_search' failed: OSError: no route to port 54325 for web_search (q); {REDACTED} refused; search-{REDACTED}"
    )
    result = reg.try_call("web_search", {"query": "q", "password": "search"})  # the tool's name: its own text kept
    assert result.error is not None and result.error.message.startswith("Tool 'web_search' failed: ")
    assert result.error.message.endswith(f"web_search (q); {REDACTED} refused; {REDACTED}-{REDACTED}")
    result = reg.try_call("web_search", {"query": "q", "password": "abc"})
    assert result.error is not None and result.error.message.endswith("(q); abc refused; search-abc")


def test_a_long_secret_cut_by_the_bound_shows_no_part_of_it() -> None:
    """A secret across the error's bound (or across the part of the text read) was cut, its start shown."""
    secret = "Q" + "x7" * 300
    reg = ToolRegistry(autoload=False, standard_plugins=False)

    def spill(password: str) -> str:
        raise RuntimeError("y" * (ERROR_TEXT_LIMIT - 100) + f" {password} tail")

    reg.add(spill)
    result = reg.try_call("spill", {"password": secret})
    assert result.error is not None and "Qx7x7" not in result.error.message
    assert f" {REDACTED} tail" in result.error.message and len(result.error.message) <= ERROR_TEXT_LIMIT + 100
    # masking shortens the text: what the shown part takes from past the text first read is masked too
    long = "Q" + "x7" * 7_500
    text = f"{long} {long} {'w' * 100} {long} {long}"
    assert outside_text(text, [long]) == " ".join([REDACTED, REDACTED, "w" * 100, REDACTED, REDACTED])


# ---------------------------------------------------------------- 2: more password forms


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("openssl enc -aes-256-cbc -salt -k Zq7ssl -in a.txt", f"openssl enc -aes-256-cbc -salt -k {REDACTED} -in a.txt"),
        ("openssl enc -d -in a -pass pass:Zq7ssl -out b", f"openssl enc -d -in a -pass pass:{REDACTED} -out b"),
        ("openssl rsa -in k.pem -passin pass:Zq7ssl", f"openssl rsa -in k.pem -passin pass:{REDACTED}"),
        ("openssl pkcs12 -export -passout pass:Zq7ssl", f"openssl pkcs12 -export -passout pass:{REDACTED}"),
        (
            "Command '['openssl', 'enc', '-k', 'Zq7ssl', '-in', 'a']' returned non-zero exit status 1.",
            f"Command '['openssl', 'enc', '-k', '{REDACTED}', '-in', 'a']' returned non-zero exit status 1.",
        ),
        (
            "Command '['openssl', 'rsa', '-passin', 'pass:Zq7ssl']' returned non-zero exit status 1.",
            f"Command '['openssl', 'rsa', '-passin', 'pass:{REDACTED}']' returned non-zero exit status 1.",
        ),
        ("az login -u bob@example.com -p Zq7azp --tenant t", f"az login -u bob@example.com -p {REDACTED} --tenant t"),
        (
            "Command '['az', 'login', '--service-principal', '-u', 'app', '-p', 'Zq7azp']' returned non-zero exit status 1.",
            f"Command '['az', 'login', '--service-principal', '-u', 'app', '-p', '{REDACTED}']' returned non-zero exit status 1.",
        ),
        ("GET https://api.example.com/v1?user=bob&pw=Zq7qry&x=1", f"GET https://api.example.com/v1?user=bob&pw={REDACTED}&x=1"),
    ],
)
def test_openssl_az_login_and_a_pw_query_parameter_hide_their_password(text: str, shown: str) -> None:
    assert mask_secrets(text) == shown
    assert "Zq7" not in Redactor().text(text)  # (logs may mask more: "-pass", "pw" are secret names there)


@pytest.mark.parametrize(
    ("text", "shown"),
    [  # masked already: kept so
        ("az login -u bob --password Zq7azp", f"az login -u bob --password {REDACTED}"),
        ("docker run -e DB_PASSWORD=Zq7dk --env MYSQL_ROOT_PASSWORD=Zq7dk img", None),
        ('["mysql", "-u", "root", "-pZq7my"]', f'["mysql", "-u", "root", "-p{REDACTED}"]'),
        ('["sshpass", "-p", "Zq7ssh", "ssh", "-p", "22", "h"]', f'["sshpass", "-p", "{REDACTED}", "ssh", "-p", "22", "h"]'),
        ("https://x.example/?a=1&passwd=Zq7qry", f"https://x.example/?a=1&passwd={REDACTED}"),
    ],
)
def test_the_other_listed_forms_are_masked(text: str, shown: str | None) -> None:
    assert mask_secrets(text) == (shown or text.replace("Zq7dk", REDACTED))
    assert "Zq7" not in Redactor().text(text)


@pytest.mark.parametrize(
    "text",
    [
        "openssl enc -kfile pw.txt -pass env:PW -passin file:pw.txt -passout stdin",  # where the password is, not it
        "the openssl -k flag is deprecated; openssl failed, retry with -k",
        "ran openssl then curl -k https://example.com",  # curl's -k: insecure, no value
        "az login -u bob --use-device-code; az vm open-port -p 22; az login failed: check -p",
        "see https://example.com/?pwd_reset=1&pwa=2",
    ],
)
def test_the_new_forms_are_not_read_in_prose(text: str) -> None:
    assert mask_secrets(text) == text  # (logs read more names as secret ones: "-pass env:PW", "pwd_reset")


@pytest.mark.parametrize(
    "unit", ["openssl x -a b -c d -e f -g h -i j ", "openssl x -passin ", "az login -a b -c d -e f ", "az login -p "]
)
def test_text_built_against_the_new_forms_is_read_in_bounded_work(unit: str) -> None:
    """Repetitions of the new forms' starts: linear, as the other clients' (~6 ms for the 20,000 characters read)."""
    text = f"password=S3CRET {unit * (20_000 // len(unit))}"
    started = time.thread_time()  # CPU of this thread, not wall time a loaded machine stretches
    assert "S3CRET" not in outside_text(text)
    elapsed = time.thread_time() - started
    assert elapsed < 0.5, f"{elapsed:.3f} s of CPU"


# ---------------------------------------------------------------- 3: review of bd61fc5


def test_held_values_are_searched_for_in_bounded_work_and_no_pattern_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """mask_held compiled one pattern of every held value per failure: 933 ms for a 250,000-character password, and
    re's cache grew ~2 MB a failure. Now each value is searched for (str.find) only where it can be shown."""
    spans: list[int] = []

    class Counted(str):
        def find(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
            spans.append(min(len(self) if end is None else end, len(self)) - (start or 0))
            return super().find(sub, start, end)

    built: list[object] = []
    compile_ = re._compile  # type: ignore[attr-defined]

    def counted_compile(pattern: Any, flags: Any) -> Any:
        built.append(pattern)
        return compile_(pattern, flags)

    big = "Q" + "x7" * 125_000  # 250,001 characters
    small = [f"S3cret-{n:013d}" for n in range(1_000)]  # 1,000 values of 20 characters
    text = Counted("failed: " + "word " * 3_000 + small[7] + " tail")
    cached = len(re._cache)  # type: ignore[attr-defined]
    monkeypatch.setattr(re, "_compile", counted_compile)
    shown = 2 * ERROR_TEXT_LIMIT
    masked = mask_held(text, [big, *small], shown)
    assert masked == "failed: " + "word " * 3_000 + f"{REDACTED} tail"
    assert len(spans) <= 1_001 and sum(spans) <= 1_000 * (shown + 20)  # the 250,000 characters: longer than the text
    assert mask_held(f"x {big} y {big}", [big, *small], shown) == f"x {REDACTED} y {REDACTED}"
    monkeypatch.undo()
    assert built == [] and len(re._cache) == cached  # type: ignore[attr-defined]


@pytest.mark.parametrize("after", ["a", "Z", "_", "7", "\u0663", "\u00e9", "\u0301", "\u4e00", " ", "-", ".", "'", "\u00a0"])
def test_a_held_value_is_a_token_where_re_says_no_word_character_stands_beside_it(after: str) -> None:
    """The hand-made token check reads a word character as \\w does (Unicode letters and digits, _; not a combining mark)."""
    word = re.match(r"\w", after) is not None
    for text, masked in ((f"{after}Zq7hunter2", f"{after}{REDACTED}"), (f"Zq7hunter2{after}", f"{REDACTED}{after}")):
        assert mask_held(text, ["Zq7hunter2"], 100) == (text if word else masked)


def test_the_longest_held_value_standing_whole_is_masked_where_two_start_together() -> None:
    from harness_one._redact import mask_held

    held = ["abcd", "abcd-efgh", "efgh"]
    assert mask_held("x abcd-efgh y", held, 100) == f"x {REDACTED} y"
    assert mask_held("x abcd-efghz y abcd", held, 100) == f"x {REDACTED}-efghz y {REDACTED}"
    assert mask_held("abcd " * 5, held, 12) == f"{REDACTED} {REDACTED} abcd abcd abcd "  # past the shown part: read no further


LEAKY_SERVER = '''
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("leaky")


@server.tool()
def login(user: str, password: str, note: str = "") -> str:
    """Log in."""
    raise ToolError(f"login failed for {user} with {password} ({note})")


server.run("stdio")
'''


def test_a_remote_mcp_tools_failure_masks_the_calls_secret_values(tmp_path: Path) -> None:
    """A remote tool's failure quoted the call's password to the model (a local tool's was masked)."""
    from harness_one.mcp import McpSpec, RemoteToolError, import_tools

    script = tmp_path / "leaky.py"
    script.write_text(LEAKY_SERVER)
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, McpSpec(name="leaky", command=(sys.executable, str(script))))
    try:
        # the note holds the context's API key: masked as the context's secret value
        result = registry.try_call("login", {**ARGUMENTS, "note": KEY}, context=CONTEXT)
    finally:
        remote.close()
    assert isinstance(result.error, ToolExecutionError) and isinstance(result.error.cause, RemoteToolError)
    shown = f"Error executing tool login: login failed for bob with {REDACTED} ({REDACTED})"
    assert result.error.message == f"Tool 'login' failed on MCP server 'leaky': {shown}"
    assert result.error.cause.text == shown and PASSWORD not in result.for_model() and KEY not in result.for_model()
