"""Review 25: redaction of bytes headers, numbers, more text shapes and key names; metrics reads."""

from __future__ import annotations

import sys
import threading
import time
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from structlog.testing import capture_logs

from harness_one import REDACTED, ManualClock, Redactor, ToolError, ToolRegistry
from harness_one._redact import hidden_from_model, mask_secrets
from harness_one_plugins import LoggingPlugin, MetricsPlugin, OTelPlugin
from harness_one_plugins.metrics import ToolMetrics

RAW_HEADERS = [
    (b"host", b"api.internal"),
    (b"authorization", b"Basic YWxpY2U6aHVudGVyMlNFQ1JFVA=="),
    (b"x-api-key", b"S3CRETapikey"),
]


@pytest.fixture(autouse=True)
def unconfigured_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


# 1. request headers shown as bytes


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            repr(RAW_HEADERS),
            f"[(b'host', b'api.internal'), (b'authorization', b'{REDACTED}'), (b'x-api-key', b'{REDACTED}')]",
        ),
        (
            repr([(k.decode(), v.decode()) for k, v in RAW_HEADERS]),
            f"[('host', 'api.internal'), ('authorization', '{REDACTED}'), ('x-api-key', '{REDACTED}')]",
        ),
        (
            repr({b"password": b"hunter2S3CRET", b"user": b"bob"}),
            f"{{b'password': b'{REDACTED}', b'user': b'bob'}}",
        ),
        (repr({"password": "hunter2S3CRET", "user": "bob"}), f"{{'password': '{REDACTED}', 'user': 'bob'}}"),
        # an ASGI scope's headers: a cookie's bytes value masked as a quoted value, not to the end of the line
        (
            "scope={'headers': [(b'cookie', b'theme=dark; sid=S3CRET'), (b'accept', b'*/*')]}",
            f"scope={{'headers': [(b'cookie', b'{REDACTED}'), (b'accept', b'*/*')]}}",
        ),
        ("argv=[b'--password', b'S3CRET', b'db']", f"argv=[b'--password', b'{REDACTED}', b'db']"),
    ],
)
def test_headers_and_mappings_shown_as_bytes_are_masked(text: str, shown: str) -> None:
    assert Redactor().text(text) == shown
    assert "S3CRET" not in mask_secrets(text) and "YWxp" not in mask_secrets(text)


def test_bytes_headers_in_a_tool_error_are_masked_for_the_model_the_log_and_the_span() -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    registry = ToolRegistry(
        plugins={"logging": LoggingPlugin(), "otel": OTelPlugin(tracer_provider=provider)}, autoload=False, clock=ManualClock()
    )

    def fetch(url: str) -> str:
        raise RuntimeError(f"upstream 502 for {url}, request headers {RAW_HEADERS!r}")

    registry.add(fetch)
    expected = (
        "Tool 'fetch' failed: RuntimeError: upstream 502 for https://api.internal/v1, request headers "
        f"[(b'host', b'api.internal'), (b'authorization', b'{REDACTED}'), (b'x-api-key', b'{REDACTED}')]"
    )
    with capture_logs() as logs, pytest.raises(ToolError) as raised:
        registry.call("fetch", {"url": "https://api.internal/v1"})
    provider.shutdown()
    assert str(raised.value) == expected
    assert logs[-1]["error"] == expected
    assert spans.get_finished_spans()[-1].status.description == expected


# 5. numbers among the secret values


def test_numbers_holding_a_secret_value_are_masked() -> None:
    redactor = Redactor(values=["4921730058"])
    assert redactor({"account": 4921730058, "balance": 4921730058.5, "memo": "to 4921730058", "n": 7, "ok": True}) == {
        "account": REDACTED,
        "balance": REDACTED,
        "memo": f"to {REDACTED}",
        "n": 7,
        "ok": True,
    }
    assert redactor([14921730058, -4921730058]) == [REDACTED, REDACTED]  # the value in its text, as text is masked
    assert Redactor()({"account": 4921730058}) == {"account": 4921730058}  # no values set: numbers as they are


def test_a_numeric_secret_value_is_not_logged() -> None:
    registry = ToolRegistry(
        plugins={"logging": LoggingPlugin(log_arguments=True, secret_values=["4921730058"])}, autoload=False, clock=ManualClock()
    )

    def transfer(account: int, memo: str) -> str:
        return "ok"

    registry.add(transfer)
    with capture_logs() as logs:
        registry.call("transfer", {"account": 4921730058, "memo": "to 4921730058"})
    assert logs[-1]["arguments"] == {"account": REDACTED, "memo": f"to {REDACTED}"}


# 7. more text shapes


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("<password>hunter2S3CRET</password>", f"<password>{REDACTED}</password>"),
        (
            "<cfg><db:Password>S3CRET</db:Password><host>db</host></cfg>",
            f"<cfg><db:Password>{REDACTED}</db:Password><host>db</host></cfg>",
        ),
        ('<entry name="password">S3CRET</entry>', f'<entry name="password">{REDACTED}</entry>'),
        ("<entry key='ApiToken' type=\"s\">S3CRET</entry>", f"<entry key='ApiToken' type=\"s\">{REDACTED}</entry>"),
        ("<secret><![CDATA[S3<CR]ET]]></secret>", f"<secret>{REDACTED}</secret>"),
        ('{"xml": "<token>S3CRET<\\/token>"}', f'{{"xml": "<token>{REDACTED}<\\/token>"}}'),
        # Authorization schemes with parameters: the scheme stays, the rest of the header goes
        (
            'authorization: Digest username="bob", realm="x", response="S3CRETdeadbeef"',
            f"authorization: Digest {REDACTED}",
        ),
        (
            "Authorization: AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=S3CRET\nnext",
            f"Authorization: AWS4-HMAC-SHA256 {REDACTED}\nnext",
        ),
        (
            """curl -H 'Authorization: Digest username="bob", response="S3CRET"' https://x""",
            f"curl -H 'Authorization: Digest {REDACTED}' https://x",
        ),
        ("Authorization: Basic dXNlcjpTM0NSRVQ= next", f"Authorization: Basic {REDACTED} next"),  # a token68: as before
        # a client's -u user:password
        ("curl -u bob:hunter2S3CRET https://x", f"curl -u bob:{REDACTED} https://x"),
        ("curl --user=bob:S3CRET https://x", f"curl --user=bob:{REDACTED} https://x"),
        ("curl -u 'bob:correct horse S3CRET' https://x", f"curl -u 'bob:{REDACTED}' https://x"),
        ("['curl', '-u', 'bob:S3CRET', 'https://x']", f"['curl', '-u', 'bob:{REDACTED}', 'https://x']"),
        ("(run: curl -u bob:S3CRET)", f"(run: curl -u bob:{REDACTED})"),
        # SQL's doubled quote inside a quoted value
        ("password='it''s hunter2S3CRET' AND x=1", f"password='{REDACTED}' AND x=1"),
        ("{'password': '', 'user': 'bob'}", f"{{'password': '{REDACTED}', 'user': 'bob'}}"),
    ],
)
def test_more_text_shapes_are_masked(text: str, shown: str) -> None:
    assert Redactor().text(text) == shown
    assert "S3CR" not in mask_secrets(text)


@pytest.mark.parametrize(
    "text",
    [
        "<name>bob</name><host>db.internal</host>",
        '<entry name="user">bob</entry>',
        "<password></password>",
        "mysql -u root -p db",
        "ps -u root",
        "a <b> c </b> <password> and then prose",
        'WWW-Authenticate: Digest realm="x", nonce="abc"',  # a challenge: no credential in it
    ],
)
def test_text_without_a_secret_in_those_shapes_is_unchanged(text: str) -> None:
    assert Redactor().text(text) == text


@pytest.mark.parametrize(
    "hostile",
    [
        "<password>" * 20_000,
        "<a " + "x" * 50_000,
        "<password>" + "<![CDATA[" * 10_000,
        "<password>" + "]" * 50_000 + "</",
        "-u 'a:" * 20_000,
        "-u a:" * 20_000,
        "--user=" + "a" * 50_000,
        "Authorization: Digest a=" * 10_000,
        "password='" + "''" * 50_000,
        "</ " + "<a><![CDATA[x" * 4_000,  # each tag's unclosed CDATA section: read to the text's end from every one
        "</ " + "<password><![CDATA[x" * 3_000,
        "<x><![CDATA[" + "<password><![CDATA[" * 3_000 + "]]>" + "z" * 50_000,  # every element reaches the same tail
        "Authorization: Digest a=1,\n " * 5_000,
        "-ubob:" * 10_000,
        "<key>password</key><password><![CDATA[" * 3_000,
        '<password value="x"/>' * 5_000,
    ],
)
def test_hostile_text_against_the_new_shapes_is_masked_whole(hostile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built against the new rules (each "<" a tag, each -u a user): masked as a whole, in linear work, bounded as
    tests/test_redact.py bounds its hostile texts. The unclosed CDATA sections took 1.3 s in the 20,000 characters
    an error reads, and 4.3 s in 40,000 characters masked whole, when every tag read them to the end; ~20 ms linearly."""
    from harness_one import _redact
    from harness_one._errors import outside_text

    text = f"password=S3CRET {hostile}"
    shown = Redactor().text(text)
    assert shown.startswith(f"password={REDACTED} ") and shown.endswith(f"... ({len(text)} characters)")
    seen: list[int] = []
    real = _redact.mask_secrets
    monkeypatch.setattr(_redact, "mask_secrets", lambda text: seen.append(len(text)) or real(text))
    started = time.thread_time()  # CPU of this thread, not wall time a loaded machine stretches
    assert "S3CRET" not in outside_text(text)
    elapsed = time.thread_time() - started
    assert seen == [20_000] and elapsed < 0.5, f"{elapsed:.3f} s of CPU"
    started = time.thread_time()
    assert "S3CRET" not in Redactor().mask(text[:40_000])
    elapsed = time.thread_time() - started
    assert elapsed < 0.5, f"{elapsed:.3f} s of CPU"


# 8. key names


@pytest.mark.parametrize(
    "key",
    [
        "DBPASS",
        "dbpass",
        "SMTPPASS",
        "rootpass",
        "storepass",
        "userpwd",
        "DBPWD",
        "authkey",
        "AUTHKEY",
        "auth_key",
        "passkey",
        "privkey",
        "PRIVKEY",
        "priv_key",
        "totp",
        "TOTP",
        "hotp",
        "smsotp",
        "mfaCode",
        "mfa_code",
        "\uff30\uff21\uff33\uff33\uff37\uff2f\uff32\uff24",  # full-width PASSWORD
        "\uff50\uff57\uff44",  # full-width pwd
    ],
)
def test_more_secret_key_names_are_masked(key: str) -> None:
    assert Redactor()({key: "S3CRET"}) == {key: REDACTED}
    assert Redactor().text(f"{key}=S3CRET") == f"{key}={REDACTED}"


@pytest.mark.parametrize(
    "key",
    [
        "bypass",
        "compass",
        "trespass",
        "overpass",
        "underpass",
        "encompass",
        "surpass",
        "lowpass",
        "bandpass",
        "subpass",
        "passage",
        "passenger",
        "spinner",
        "hotspot",
        "author",
        "authority",
        "keyboard",
        "primary_key",
        "despot",
        "jackpot",
    ],
)
def test_common_words_are_still_not_secret_names(key: str) -> None:
    assert Redactor()({key: "visible"}) == {key: "visible"}
    assert Redactor().text(f"{key}=visible") == f"{key}=visible"


# 9. metrics read while other threads read and count


def test_reading_tool_metrics_from_many_threads_changes_no_count() -> None:
    metrics = ToolMetrics(16)
    for _ in range(10):
        next(metrics.counter("ok"))
    next(metrics.counter(ValueError))
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # (threads switch as often as they can: every read races the others)
    try:
        readers = [
            threading.Thread(target=lambda: [(metrics.successes, metrics.errors) for _ in range(20_000)]) for _ in range(4)
        ]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
    finally:
        sys.setswitchinterval(interval)
    assert (metrics.successes, metrics.failed, metrics.calls, metrics.errors) == (10, 1, 11, {"ValueError": 1})
    assert metrics.snapshot()["finished"] == 11


def test_stats_read_while_calls_are_counted_end_exact() -> None:
    registry = ToolRegistry(plugins={"metrics": MetricsPlugin()}, autoload=False, clock=ManualClock())
    registry.add(lambda: "ok", name="ping", parameters={"type": "object"})
    done = threading.Event()
    seen: list[int] = []

    def read() -> None:
        while not done.is_set():
            seen.append(registry.stats()["tools"]["ping"].get("successes", 0))  # (none before the first call ends)

    def calls() -> None:
        for _ in range(500):
            registry.call("ping")

    reader = threading.Thread(target=read)
    reader.start()
    workers = [threading.Thread(target=calls) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done.set()
    reader.join()
    stats: dict[str, Any] = registry.stats()["tools"]["ping"]
    assert (stats["successes"], stats["finished"]) == (2000, 2000)
    assert seen == sorted(seen) and all(0 <= n <= 2000 for n in seen)


def test_errors_the_model_reads_hide_a_pwd_ending_a_name_too() -> None:
    assert (hidden_from_model("userpwd"), hidden_from_model("DB_USERPWD"), hidden_from_model("userpwd_hint")) == (
        True,
        True,
        False,
    )
    assert mask_secrets("login failed: userpwd=S3CRET") == f"login failed: userpwd={REDACTED}"


def test_a_user_flag_in_a_logged_command_list_masks_the_password() -> None:
    argv = ["curl", "-u", "bob:S3CRET", "--user", "ann:S3", "-u", "root", "https://x"]
    assert Redactor()({"argv": argv}) == {
        "argv": ["curl", "-u", f"bob:{REDACTED}", "--user", f"ann:{REDACTED}", "-u", "root", "https://x"]
    }
    assert Redactor()(["sqlmap", "-u", "http://target/x?id=1"]) == ["sqlmap", "-u", "http://target/x?id=1"]  # a URL
    assert Redactor().text("sqlmap -u http://target/x?id=1") == "sqlmap -u http://target/x?id=1"


# Review 25, round 2


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("<password><![CDATA[a<b]]>c</password>", f"<password>{REDACTED}</password>"),
        ("<password>x<\\/password>", f"<password>{REDACTED}<\\/password>"),
        ("<ns:Password a='1'>x</ns:Password>", f"<ns:Password a='1'>{REDACTED}</ns:Password>"),
        ("<Password>x</password>", f"<Password>{REDACTED}</password>"),  # HTML's tags: any case
        ("<a><password>x</password></a>", f"<a><password>{REDACTED}</password></a>"),
        ("<password>x</passwd> <b>y</b>", f"<password>{REDACTED}</passwd> <b>y</b>"),  # any end tag ends it (round 3)
        ("<password>x</", f"<password>{REDACTED}</"),  # cut short (review 25 round 3)
    ],
)
def test_an_xml_element_runs_to_its_own_end_tag(text: str, shown: str) -> None:
    assert (Redactor().text(text), mask_secrets(text)) == (shown, shown)


def test_code_with_angle_brackets_and_a_stray_end_tag_is_masked_as_a_cut_element() -> None:
    # review 25 round 3: "</" after a secret's start tag may be its end tag cut short; the code loses its tail
    text = "List<Token> tokens = new ArrayList<Token>(); return tokens; // </"
    assert mask_secrets(text) == f"List<Token> tokens = new ArrayList<Token>{REDACTED}</"
    assert mask_secrets("List<Token> tokens = new ArrayList<Token>();") == "List<Token> tokens = new ArrayList<Token>();"


class _Clause:
    """An item whose "==" gives no bool (an SQL expression's, a numpy array's)."""

    def __eq__(self, other: object) -> Any:
        return self

    def __bool__(self) -> bool:
        raise TypeError("Boolean value of this clause is not defined")

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "Clause(users.id = :id)"


def test_a_list_of_items_with_their_own_equality_is_shown_item_by_item() -> None:
    assert Redactor()({"filters": [_Clause(), "-u", _Clause(), "limit 10"]}) == {
        "filters": ["Clause(users.id = :id)", "-u", "Clause(users.id = :id)", "limit 10"]
    }
    np = pytest.importorskip("numpy")
    assert Redactor()({"vectors": [np.array([1.0, 2.0]), np.array([3.0, 4.0])]}) == {
        "vectors": ["array([1., 2.])", "array([3., 4.])"]
    }


class _Money(float):
    def __repr__(self) -> str:
        raise ValueError("no repr without a currency")


class _Id(int):
    def __repr__(self) -> str:
        raise RuntimeError("lazy id not loaded")


def test_a_number_is_read_as_its_type_reads_it_and_only_for_a_secret_a_number_can_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    value = {"amount": _Money(12.5), "memo": "rent", "ids": [_Id(5), 6]}
    assert Redactor(values=["125"])(value) == value  # a subclass's failing __repr__ is not called
    assert Redactor(values=["12.5"])(value) == {"amount": REDACTED, "memo": "rent", "ids": [5, 6]}
    assert Redactor(values=["inf"])({"x": float("-inf"), "y": 1}) == {"x": REDACTED, "y": 1}
    calls: list[float] = []
    monkeypatch.setattr(Redactor, "_holds_value", lambda self, number: calls.append(number) or False)
    assert Redactor(values=["hunter2", "S3CRET-12"])({"xs": [1, 2.5, 3]}) == {"xs": [1, 2.5, 3]}
    assert calls == []  # no secret value a number's text can hold: no number read
    assert Redactor(values=["hunter2", "4921"])({"xs": [1, 2.5]}) == {"xs": [1, 2.5]} and calls == [1, 2.5]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("curl -ubob:S3CRET1 https://x", f"curl -ubob:{REDACTED} https://x"),
        ("curl -u 'bob smith:S3CRET2' https://x", f"curl -u 'bob smith:{REDACTED}' https://x"),
        ("curl -U proxyuser:S3CRET4 https://x", f"curl -U proxyuser:{REDACTED} https://x"),
        ("curl --proxy-user pu:S3CRET5 https://x", f"curl --proxy-user pu:{REDACTED} https://x"),
        ("curl --proxy-user=pu:S3CRET5 https://x", f"curl --proxy-user=pu:{REDACTED} https://x"),
        ("['curl', '-ubob:S3CRET6']", f"['curl', '-ubob:{REDACTED}']"),
    ],
)
def test_every_form_of_a_user_flag_masks_the_password(text: str, shown: str) -> None:
    assert (Redactor().text(text), mask_secrets(text)) == (shown, shown)


def test_a_proxy_user_flag_in_a_logged_command_list_masks_the_password() -> None:
    argv = ["curl", "-U", "pu:S3CRET", "--proxy-user", "ann:S3", "-ubob:S4", "-u", "+%H:%M", "https://x"]
    assert Redactor()(argv) == [
        "curl",
        "-U",
        f"pu:{REDACTED}",
        "--proxy-user",
        f"ann:{REDACTED}",
        f"-ubob:{REDACTED}",
        "-u",
        "+%H:%M",
        "https://x",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "date -u +%Y-%m-%dT%H:%M:%SZ",
        "TZ=UTC date -u +%H:%M",
        "git diff -u HEAD:src/a.py",
        "git diff -u ORIG_HEAD~2:src/a.py",
        "Authorization failed; contact=admin",
    ],
)
def test_commands_and_messages_that_only_look_like_the_new_shapes_are_unchanged(text: str) -> None:
    assert (mask_secrets(text), Redactor().text(text)) == (text, text)


def test_an_authorization_message_loses_its_first_word_only() -> None:
    """Its parameters are masked to the end of the header for a scheme that takes them only: a message's first word
    is read as a token (as before), the rest of its line stays."""
    text = "authorization: missing scope=read for alice, contact admin"
    shown = f"authorization: {REDACTED} scope=read for alice, contact admin"
    assert (mask_secrets(text), Redactor().text(text)) == (shown, shown)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('Authorization: Digest realm="x",\n  response="S3CRET"', f"Authorization: Digest {REDACTED}"),
        (
            'Authorization: Digest realm="x",\r\n\tnonce="n", response="S3CRET"\nnext: 1',
            f"Authorization: Digest {REDACTED}\nnext: 1",
        ),
        ('Authorization: Digest realm="x"\n  note=kept', f"Authorization: Digest {REDACTED}\n  note=kept"),
        ("Authorization: OAuth oauth_signature=S3CRET", f"Authorization: OAuth {REDACTED}"),
        ("Authorization: AWS4-HMAC-SHA256 Credential=AKID/x, Signature=S3CRET", f"Authorization: AWS4-HMAC-SHA256 {REDACTED}"),
    ],
)
def test_an_authorization_header_with_parameters_is_masked_over_its_continued_lines(text: str, shown: str) -> None:
    assert (Redactor().text(text), mask_secrets(text)) == (shown, shown)


def test_a_key_name_is_normalised_once_and_at_most_to_the_longest_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_one import _redact

    made: list[int] = []
    real = unicodedata.normalize

    def normalize(form: Any, text: str) -> str:
        made.append(len(real(form, text)))
        return real(form, text)

    monkeypatch.setattr(_redact.unicodedata, "normalize", normalize)
    keys = {"\ufdfa" * 1020 + f"{i:04d}": i for i in range(50)}  # each 18,360 characters normalised
    assert list(Redactor()(keys).values()) == [REDACTED] * 50  # a name longer than any once normalised: masked
    assert max(made) <= 64 * 18 and sum(made) <= 50 * (1024 + 64 * 18), (max(made), sum(made))
    normals: list[str] = []
    monkeypatch.setattr(_redact, "_normal", lambda name: normals.append(name) or real("NFKC", name).lower())
    name = "password" + "\ufdfa" * 30
    shown = Redactor().text(f"{name}=S3CRET " * 200)
    assert "S3CRET" not in shown and normals.count(name) == 1  # once, not twice a match
    assert Redactor().text("\ufdfa" * 99 + "=S3CRET") == "\ufdfa" * 99 + f"={REDACTED}"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("<key>password</key><string>S3CRET</string>", f"<key>password</key><string>{REDACTED}</string>"),  # a plist
        (
            "<key>password</key>\n  <string>S3CRET</string> <string>kept</string>",
            f"<key>password</key>\n  <string>{REDACTED}</string> <string>kept</string>",
        ),
        (
            "<entry><key>password</key><value>S3CRET</value></entry>",
            f"<entry><key>password</key><value>{REDACTED}</value></entry>",
        ),
        ("<Password><string>S3CRET</string></Password>", f"<Password><string>{REDACTED}</string></Password>"),
        ('<password value="S3CRET"/>', f'<password value="{REDACTED}"/>'),
        ('<password value="S3CRET" a="x">t</password>', f'<password value="{REDACTED}" a="x">{REDACTED}</password>'),
        ("<key>user</key><string>bob</string>", "<key>user</key><string>bob</string>"),
        ("<password></password><next>kept</next>", "<password></password><next>kept</next>"),
    ],
)
def test_a_secret_named_by_its_xml_key_or_held_in_its_element_is_masked(text: str, shown: str) -> None:
    assert (Redactor().text(text), mask_secrets(text)) == (shown, shown)


# Review 25, round 3


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("<body><host>svc</host><password>S3CRETX1</p", f"<body><host>svc</host><password>{REDACTED}</p"),
        ("<password>S3CRETX1</pass", f"<password>{REDACTED}</pass"),
        ("<password>S3CRETX1</password", f"<password>{REDACTED}</password"),
        ("<password>S3CRETX1</", f"<password>{REDACTED}</"),
        ("<ns:password>S3CRETX2</password>", f"<ns:password>{REDACTED}</password>"),
        ("<Password>S3CRETX4<\\/ Password>", f"<Password>{REDACTED}<\\/ Password>"),
        ("<password>S3CRETX6</passwd>", f"<password>{REDACTED}</passwd>"),
    ],
)
def test_a_secret_element_cut_short_or_closed_by_another_end_tag_is_masked(text: str, shown: str) -> None:
    assert (Redactor().text(text), mask_secrets(text)) == (shown, shown)


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["curl", "-u", "bob smith:S3CRETL1"], ["curl", "-u", f"bob smith:{REDACTED}"]),
        (["curl", "-u", ":S3CRETL2"], ["curl", "-u", f":{REDACTED}"]),
        (["curl", "--user", "$USER:S3CRETL3"], ["curl", "--user", f"$USER:{REDACTED}"]),
        (["curl", "-u", "@bob:S3CRETL4"], ["curl", "-u", f"@bob:{REDACTED}"]),
        (["curl", "-u", "x" * 300 + ":S3CRETL5"], ["curl", "-u", "x" * 300 + f":{REDACTED}"]),
        (["curl", "-u", "HEAD:S3CRETL6"], ["curl", "-u", f"HEAD:{REDACTED}"]),
        (["date", "-u", "+%H:%M"], ["date", "-u", "+%H:%M"]),
    ],
)
def test_any_user_and_password_after_a_user_flag_in_a_list_is_masked(argv: list[str], shown: list[str]) -> None:
    assert Redactor()(argv) == shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('curl -u "$USER:S3CRETU1" https://x', f'curl -u "$USER:{REDACTED}" https://x'),
        ("curl -u ${USER}:S3CRETU2 https://x", f"curl -u ${{USER}}:{REDACTED} https://x"),
        ("curl -u %USERNAME%:S3CRETU3 https://x", f"curl -u %USERNAME%:{REDACTED} https://x"),
        ("curl -u ~bob:S3CRETU4 https://x", f"curl -u ~bob:{REDACTED} https://x"),
        ("curl -u @bob:S3CRETU5 https://x", f"curl -u @bob:{REDACTED} https://x"),
        ("curl -u :S3CRETU6 https://x", f"curl -u :{REDACTED} https://x"),
        ("date -u +%H:%M", "date -u +%H:%M"),
        ("git diff -u HEAD:src/a.py", "git diff -u HEAD:src/a.py"),
    ],
)
def test_a_user_flag_with_a_variable_or_empty_user_masks_the_password(text: str, shown: str) -> None:
    assert (Redactor().text(text), mask_secrets(text)) == (shown, shown)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "Authorization: AWS4-ECDSA-P256-SHA256 Credential=AKID/20150830/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;x-amz-date, Signature=S3CRETSIG3",
            f"Authorization: AWS4-ECDSA-P256-SHA256 {REDACTED}",
        ),
        (
            "Authorization: GOOG4-RSA-SHA256 Credential=svc@p.iam.gserviceaccount.com/20200101/auto/storage/goog4_request, "
            "SignedHeaders=host, Signature=S3CRETSIG4",
            f"Authorization: GOOG4-RSA-SHA256 {REDACTED}",
        ),
        (
            "Authorization: HMAC-SHA256 SignedHeaders=x-ms-date;host;x-ms-content-sha256&Signature=S3CRETSIG2=",
            f"Authorization: HMAC-SHA256 {REDACTED}",
        ),
        ("Authorization: GoogleLogin auth=S3CRETSIG5", f"Authorization: GoogleLogin {REDACTED}"),
        ('Authorization: AuthSub token="S3CRETSIG6"', f"Authorization: AuthSub {REDACTED}"),
        ("Authorization: ApiKey key=S3CRETSIGA", f"Authorization: ApiKey {REDACTED}"),
        ("Authorization: PayPal-Auth key=S3CRETSIG9\nnext", f"Authorization: PayPal-Auth {REDACTED}\nnext"),
        (
            "authorization: missing scope=read for alice, contact admin",
            f"authorization: {REDACTED} scope=read for alice, contact admin",
        ),
        ("Authorization: Basic dXNlcjpTM0NSRVQ= next", f"Authorization: Basic {REDACTED} next"),
    ],
)
def test_an_authorization_header_of_any_scheme_with_parameters_is_masked(text: str, shown: str) -> None:
    assert (Redactor().text(text), mask_secrets(text)) == (shown, shown)


@pytest.mark.parametrize(
    "text",
    [
        '<input name="password" type="password"/><p>Error 401: the user bob has no access to project foo</p>',
        '<input name="password" type="password"><p>Error 401</p>',
        '<head><meta name="csrf-token" content="abc"/>\n<title>500 Internal Server Error</title></head>',
        '<form><input type="password" name="password" id="password"/>\n<div><button type="submit">Sign in</button></div></form>',
        '<xs:element name="password" type="xs:string"/>\n<xs:element name="username" type="xs:string">'
        "<xs:annotation><xs:documentation>The login name of the user</xs:documentation></xs:annotation></xs:element>",
        '<param name="token"/><result><status>failed</status><detail>upstream 502</detail></result>',
        "<PasswordPolicy/><Description>Minimum length 12, one digit</Description>",
    ],
)
def test_a_self_closing_or_void_secret_element_does_not_mask_the_next_element(text: str) -> None:
    assert (Redactor().text(text), mask_secrets(text)) == (text, text)


def test_a_held_value_is_masked_one_level_deep_only() -> None:
    text = "<Password><string>S3CRET</string></Password>"
    assert mask_secrets(text) == f"<Password><string>{REDACTED}</string></Password>"
    nested = "<Password><a><b>shown</b></a></Password>"
    assert mask_secrets(nested) == nested
    assert mask_secrets('<input name="password" value="S3CRET"/>') == f'<input name="password" value="{REDACTED}"/>'


def test_a_slash_inside_an_unclosed_attribute_value_is_not_a_self_closing_tag() -> None:
    text = '<password value="/>S3CRET</password>'
    assert mask_secrets(text) == f'<password value="/>{REDACTED}</password>'
