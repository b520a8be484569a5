"""Observability review 4: what the redactor masks in logs and spans, that it never fails a call,
what it costs on hostile keys and collections, and the metrics plugin's retries and waits."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs
from test_otel import Telemetry as OtelTelemetry

import harness_one._redact as redact_module
from harness_one import ManualClock, Redactor, ToolArgumentError, ToolRegistry
from harness_one._redact import mask_secrets
from harness_one_plugins import LoggingPlugin, OTelPlugin

DOCS = Path(__file__).resolve().parents[1] / "docs"
R = Redactor()


@pytest.fixture(autouse=True)
def unconfigured_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


class Telemetry(OtelTelemetry):
    """test_otel's providers, with the logging plugin beside the OTel plugin (content captured)."""

    def registry(self, *, log_arguments: bool = True) -> ToolRegistry:  # type: ignore[override]
        otel = OTelPlugin(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, capture_content=True)
        logging_plugin = LoggingPlugin(log_arguments=log_arguments)
        return ToolRegistry(autoload=False, clock=ManualClock(), plugins={"otel": otel, "logging": logging_plugin})


# ---------------------------------------------------------------- 1. name/value pairs and Bearer in text


def test_truncated_json_arguments_keep_header_secrets_out_of_logs_and_spans() -> None:
    telemetry = Telemetry()
    reg = telemetry.registry()

    def http(url: str, headers: list[Any], body: str = "") -> str:
        return "ok"

    reg.add(http, name="http", description="d")
    args = {
        "url": "https://api.example.com",
        "headers": [{"name": "Authorization", "value": "Bearer SECRETTOKEN1"}, {"Key": "X-Api-Key", "Value": "SECRETTOKEN2"}],
        "body": "hello world",
    }
    raw = json.dumps(args)[:-8]  # a model's answer cut by max_tokens: not valid JSON, logged as text
    with capture_logs() as logs, pytest.raises(ToolArgumentError, match="arguments are not valid JSON"):
        reg.call("http", raw)
    [span] = telemetry.spans.get_finished_spans()
    shown = span.attributes["gen_ai.tool.call.arguments"]
    [event] = [e for e in logs if e["event"] == "tool_call"]
    expected = (
        '{"url": "https://api.example.com", "headers": [{"name": "Authorization", "value": "[REDACTED]"}, '
        '{"Key": "X-Api-Key", "Value": "[REDACTED]"}], "body": "hello'
    )
    assert event["arguments"] == expected
    assert shown == expected  # (a string is put on the span as it is)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"value": "S1", "name": "password"}', '{"value": "[REDACTED]", "name": "password"}'),  # value first
        ("{'Key': 'api_key', 'Value': 'S2'}", "{'Key': 'api_key', 'Value': '[REDACTED]'}"),  # a repr
        (
            '{\\"name\\": \\"Authorization\\", \\"value\\": \\"S3\\"}',
            '{\\"name\\": \\"Authorization\\", \\"value\\": \\"[REDACTED]\\"}',
        ),
        (
            '{"ParameterKey": "DbPassword", "ParameterValue": "S4"}',
            '{"ParameterKey": "DbPassword", "ParameterValue": "[REDACTED]"}',
        ),
        ('{"name": "token", "value": 12345}', '{"name": "token", "value": [REDACTED]}'),
        ('{"name": "secret", "value": {"a": "S5"}}', '{"name": "secret", "value": {[REDACTED]}}'),
        (
            '[{"name":"user","value":"bob"},{"name":"password","value":"S6"}]',
            '[{"name":"user","value":"bob"},{"name":"password","value":"[REDACTED]"}]',
        ),
        # near misses: a pair of no secret, and a secret's name in another object
        ('{"name": "Accept", "value": "json"}', '{"name": "Accept", "value": "json"}'),
        ('{"name": "Accept", "value": "x"}, {"note": "password"}', '{"name": "Accept", "value": "x"}, {"note": "password"}'),
    ],
)
def test_a_name_value_pair_in_text_masks_its_value(text: str, expected: str) -> None:
    assert R.text(text) == expected
    assert R.mask(text) == expected


def test_errors_the_model_reads_mask_pairs_too() -> None:
    text = '{"headers": [{"name": "Authorization", "value": "SECRET6"}'
    assert mask_secrets(text) == '{"headers": [{"name": "Authorization", "value": "[REDACTED]"}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Bearer abcdef12", "Bearer [REDACTED]"),
        ("token was bearer eyJhbGciOi.x-y_z~1+/== sent", "token was bearer [REDACTED] sent"),
        ('["Bearer SECRETTOKEN1"]', '["Bearer [REDACTED]"]'),
        ("Bearer\tabcdefghijklmnopqrstuvwxyz", "Bearer\t[REDACTED]"),
        # words, not tokens
        ("the bearer of bad news", "the bearer of bad news"),
        ("Bearer authentication is used", "Bearer authentication is used"),
        ("bearer tokens expire in 3600 s", "bearer tokens expire in 3600 s"),
        ("the Bearer x1", "the Bearer x1"),
    ],
)
def test_a_bearer_token_standing_alone_is_masked(text: str, expected: str) -> None:
    assert R.text(text) == expected


# ---------------------------------------------------------------- 2. OpenPGP private key blocks

PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\nComment: backup\n\n"
    "lQOYBGSECRETKEYMATERIALxyz0123456789abcdefABCDEF+/\n=ab12\n-----END PGP PRIVATE KEY BLOCK-----"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PGP + "\nafter", "[REDACTED]\nafter"),
        (PGP.replace("Version: GnuPG v2\nComment: backup\n", ""), "[REDACTED]"),
        (PGP.replace("\n", "\r\n"), "[REDACTED]"),
        (json.dumps({"key": PGP})[8:], '"[REDACTED]"}'),  # JSON-escaped, no key name before it
        (
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0B\n-----END ENCRYPTED PRIVATE KEY-----",
            "[REDACTED]",
        ),
    ],
)
def test_a_pgp_private_key_block_is_masked(text: str, expected: str) -> None:
    assert R.text(text) == expected
    assert mask_secrets(text) == expected


def test_a_pgp_public_key_block_is_not_masked() -> None:
    public = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGPUBLICxyz0123456789abcdef\n-----END PGP PUBLIC KEY BLOCK-----"
    assert R.text(public) == public


def test_a_pgp_private_key_in_a_result_stays_out_of_span_and_log() -> None:
    telemetry = Telemetry()
    reg = telemetry.registry()

    def sign(doc: str, material: str) -> str:
        return material

    reg.add(sign, name="sign", description="d")
    with capture_logs() as logs:
        assert reg.call("sign", {"doc": "x", "material": PGP}) == PGP
    [span] = telemetry.spans.get_finished_spans()
    assert span.attributes["gen_ai.tool.call.result"] == "[REDACTED]"
    assert logs[0]["arguments"] == {"doc": "x", "material": "[REDACTED]"}


# ---------------------------------------------------------------- 3. more secret key names


@pytest.mark.parametrize(
    "name",
    [
        "AccountKey",
        "client-key-data",
        "Ocp-Apim-Subscription-Key",
        "encryption_key",
        "signing_key",
        "master_key",
        "hmac_key",
        "client_key",
        "creds",
        "aws_creds",
    ],
)
def test_more_key_names_are_secret(name: str) -> None:
    assert R({name: "S"}) == {name: "[REDACTED]"}
    assert R.text(f"{name}: S") == f"{name}: [REDACTED]"


@pytest.mark.parametrize(
    "name",
    [
        "keyboard",
        "credit",
        "credits",
        "monkey",
        "primary_key",
        "client_id",
        "account_name",
        "subscription_id",
        "encryption",
        "signing_algorithm",
        "master",
    ],
)
def test_near_miss_names_are_not_secret(name: str) -> None:
    assert R({name: "v"}) == {name: "v"}
    assert R.text(f"{name}=v") == f"{name}=v"


def test_an_azure_connection_string_masks_the_account_key_only() -> None:
    text = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Eby8vdM02xNOcqFl==;EndpointSuffix=core.windows.net"
    assert R.text(text) == "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=[REDACTED];EndpointSuffix=core.windows.net"
    # a ";" not followed by a field's name= stays in the value
    assert R.text("password=Xy7,Pq9;Zz host=db") == "password=[REDACTED] host=db"


def test_a_kubeconfig_client_key_is_masked() -> None:
    kube = "users:\n- name: admin\n  user:\n    client-certificate-data: LS0tCERT\n    client-key-data: LS0tLS1SECRET=\n"
    assert (
        R.text(kube) == "users:\n- name: admin\n  user:\n    client-certificate-data: LS0tCERT\n    client-key-data: [REDACTED]\n"
    )


# ---------------------------------------------------------------- 4. identifier-shaped credentials as keys

TOKENS = ["AKIAIOSFODNN7EXAMPLE", "ghp_" + "a1B2" * 9, "github_pat_" + "a1B2" * 6, "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"]


@pytest.mark.parametrize("token", TOKENS)
def test_a_credential_shaped_key_is_masked(token: str) -> None:
    assert token.isidentifier()
    assert R.key(token) == "[REDACTED]"
    assert R({token: {"status": "Active"}}) == {"[REDACTED]": {"status": "Active"}}


def test_plain_names_are_shown_as_they_are() -> None:
    for name in ("city", "include_forecast", "AKIAIOSFODNN7EXAMPL", "a" * 200):
        assert R.key(name) == name


def test_keys_masked_alike_keep_both_entries() -> None:
    assert R({TOKENS[0]: 1, TOKENS[1]: 2}) == {"[REDACTED]": 1, "[REDACTED] (2)": 2}


def test_credential_call_ids_and_tool_names_are_masked_in_logs_and_spans() -> None:
    telemetry = Telemetry()
    reg = telemetry.registry()

    def echo(data: dict[str, Any]) -> str:
        return "ok"

    reg.add(echo, name="echo", description="d")
    with capture_logs() as logs:
        assert reg.call("echo", {"data": {TOKENS[1]: "x"}}, call_id=TOKENS[0]) == "ok"
        assert not reg.try_call(TOKENS[3], {}).ok
    call, refused = (e for e in logs if e["event"] == "tool_call")
    assert (call["call_id"], call["arguments"]) == ("[REDACTED]", {"data": {"[REDACTED]": "x"}})
    assert (refused["tool"], refused["outcome"]) == ("[REDACTED]", "refused")
    span = telemetry.spans.get_finished_spans()[0]
    assert span.attributes["gen_ai.tool.call.id"] == "[REDACTED]"
    assert span.attributes["gen_ai.tool.call.arguments"] == '{"data": {"[REDACTED]": "x"}}'


# ---------------------------------------------------------------- 5. hostile keys and mappings


class BadStr:
    def __str__(self) -> str:
        raise RuntimeError("boom")

    __repr__ = __str__

    def __hash__(self) -> int:
        return 1


class BadLen(Mapping[str, int]):
    def __getitem__(self, key: str) -> int:
        return 1

    def __iter__(self) -> Iterator[str]:
        return iter(["a"])

    def __len__(self) -> int:
        raise TypeError("no len")


class BadItems(dict[str, int]):
    def items(self) -> Any:
        raise RuntimeError("no items")


def test_the_redactor_shows_hostile_keys_and_containers_and_never_raises() -> None:
    assert R({BadStr(): 1}) == {"<BadStr>": 1}
    assert R({10**5000: 1}) == {"<integer of 16610 bits>": 1}
    assert R({"ok": BadLen()}) == {"ok": "<BadLen>"}
    assert R(BadItems(a=1)) == "<BadItems>"
    assert R.key(BadStr()) == "<BadStr>"
    assert R.key(10**5000) == "<integer of 16610 bits>"
    assert R.is_secret(BadStr()) is False


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("badstr", '{"<BadStr>": 1}'), ("hugeint", '{"<integer of 16610 bits>": "x"}'), ("badlen", "<BadLen>")],
)
def test_a_result_with_hostile_keys_never_fails_a_call_whose_tool_ran(kind: str, expected: str) -> None:
    telemetry = Telemetry()
    reg = telemetry.registry()
    runs = []

    def fetch(kind: str) -> Any:
        runs.append(kind)
        return {"badstr": {BadStr(): 1}, "hugeint": {10**5000: "x"}, "badlen": BadLen()}[kind]

    reg.add(fetch, name="fetch", description="d")
    reg.call("fetch", {"kind": kind})
    assert runs == [kind]
    [span] = telemetry.spans.get_finished_spans()
    assert span.attributes["gen_ai.tool.call.result"] == expected


def test_an_argument_with_a_huge_int_key_is_refused_as_arguments_with_one_span_and_one_event() -> None:
    telemetry = Telemetry()
    reg = telemetry.registry()
    runs = []

    def echo(data: dict[str, Any]) -> str:
        runs.append(1)
        return "ok"

    reg.add(echo, name="echo", description="d")
    with capture_logs() as logs, pytest.raises(ToolArgumentError, match="property names must be strings"):
        reg.call("echo", {"data": {10**5000: 1}})
    assert runs == []
    [span] = telemetry.spans.get_finished_spans()
    assert span.attributes["gen_ai.tool.call.arguments"] == '{"data": {"<integer of 16610 bits>": 1}}'
    [event] = [e for e in logs if e["event"] == "tool_call"]
    assert (event["error_type"], event["arguments"]) == ("ToolArgumentError", {"data": {"<integer of 16610 bits>": 1}})


# ---------------------------------------------------------------- 6. Cookie headers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Cookie: theme=dark; connect.sid=s%3AabcSECRET123", "Cookie: [REDACTED]"),
        ("Set-Cookie: session=SECRET123; Path=/; HttpOnly\nnext line", "Set-Cookie: [REDACTED]\nnext line"),
        ('{"headers": "Cookie: a=1; sid=SECRET\\r\\nHost: h"}', '{"headers": "Cookie: [REDACTED]\\r\\nHost: h"}'),
        ("'Cookie: a=1; sid=SECRET'", "'Cookie: [REDACTED]'"),
        ("HTTP_COOKIE=a=1;sid=SECRET", "HTTP_COOKIE=[REDACTED]"),
        ("cookie_name=theme other=x", "cookie_name=[REDACTED] other=x"),  # a name holding "cookie": a word, as before
    ],
)
def test_a_cookie_header_is_masked_to_the_end_of_its_line(text: str, expected: str) -> None:
    assert R.text(text) == expected


# ---------------------------------------------------------------- 8. huge keys are cut before they are escaped


def test_a_huge_key_is_cut_before_its_controls_are_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    controls = redact_module._CONTROLS

    class Spy:
        def sub(self, repl: Any, text: str) -> str:
            seen.append(len(text))
            return controls.sub(repl, text)

    monkeypatch.setattr(redact_module, "_CONTROLS", Spy())
    shown = R.key("\x01" * 4_000_000)
    assert seen == [800]
    assert shown == "\\x01" * 50 + "... (4000000 characters)"
    assert R.key("a\x1bb") == "a\\x1bb"


def test_a_huge_key_names_no_field_its_value_is_masked_and_it_is_not_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    normal = redact_module._normal
    monkeypatch.setattr(redact_module, "_normal", lambda key: seen.append(len(key)) or normal(key))
    key = "x" * 5000
    assert Redactor().is_secret(key) is True
    assert R({key: "v"}) == {"x" * 200 + "... (5000 characters)": "[REDACTED]"}
    assert max(seen, default=0) <= 1024


# ---------------------------------------------------------------- 9. metrics: retries and waits


def test_metrics_count_rate_limit_waits_apart_from_retries() -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock())
    runs = []

    def t(a: int) -> int:
        runs.append(a)
        return a

    reg.add(t, name="t", description="d", rate_limit={"rate": 5, "burst": 1, "max_wait": 2})
    for i in range(4):
        reg.call("t", {"a": i})
    m = reg.stats()["tools"]["t"]
    assert runs == [0, 1, 2, 3]
    assert {k: m[k] for k in ("finished", "successes", "retries", "waits", "rate_limited")} == {
        "finished": 4,
        "successes": 4,
        "retries": 0,
        "waits": 3,
        "rate_limited": 0,
    }


# ---------------------------------------------------------------- 10. other collections are walked, not repr'd


class NoRepr(collections.deque[int]):
    def __repr__(self) -> str:
        raise AssertionError("the whole repr was made")


def test_other_collections_are_walked_as_lists() -> None:
    assert R(NoRepr(range(250))) == [*range(100), "... 150 more items"]
    assert R(dict.fromkeys(range(5)).keys()) == [0, 1, 2, 3, 4]
    assert R({"password": "x", "n": 1}.items()) == [["password", "[REDACTED]"], ["n", 1]]
    assert R(collections.deque(["mysql", "--password", "hunter2"])) == ["mysql", "--password", "[REDACTED]"]
    assert R(range(10**9)) == "range(0, 1000000000)"
    assert R(collections.UserString("password=x")) == "'password=[REDACTED]'"


def test_the_docs_say_a_hanging_repr_holds_the_call() -> None:
    text = (DOCS / "observability.md").read_text()
    assert "so one that is slow or hangs holds the call up" in text


# ---------------------------------------------------------------- 11. => and JSON-escaped URLs


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password => 'SECRET123'", "password => '[REDACTED]'"),
        (':token => "SECRET123"', ':token => "[REDACTED]"'),
        ('{"url":"https:\\/\\/admin:hunter2@db.example.com\\/x"}', '{"url":"https:\\/\\/[REDACTED]@db.example.com\\/x"}'),
        ("user => 'bob'", "user => 'bob'"),
    ],
)
def test_ruby_arrows_and_escaped_urls_are_masked(text: str, expected: str) -> None:
    assert R.text(text) == expected
    assert mask_secrets(text) == expected


# ---------------------------------------------------------------- 12. the docs on refused requests' metric points


def test_refused_requests_points_have_no_tool_name_as_the_docs_say() -> None:
    telemetry = Telemetry()
    reg = telemetry.registry(log_arguments=False)
    assert not reg.try_call("made_up", {}).ok
    [point] = telemetry.points("harness_one.tool.calls")
    assert "gen_ai.tool.name" not in point.attributes
    text = (DOCS / "observability.md").read_text()
    assert "`gen_ai.operation.name`, and `gen_ai.tool.name` except a refused request's" in text


# ---------------------------------------------------------------- 13. name/value pairs: nested objects, keyword reprs, YAML


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # an object between the name and the value: brackets are matched, not cut at the first "}"
        (
            '{"name": "X-Api-Key", "meta": {"src": "env"}, "value": "S1"}',
            '{"name": "X-Api-Key", "meta": {"src": "env"}, "value": "[REDACTED]"}',
        ),
        (
            '{"value": "S2", "meta": {"a": {"b": 1}}, "name": "password"}',
            '{"value": "[REDACTED]", "meta": {"a": {"b": 1}}, "name": "password"}',
        ),
        # a nested object's value field is its own, not the pair's
        (
            '{"name": "X-Api-Key", "meta": {"value": "shown"}, "value": "S3"}',
            '{"name": "X-Api-Key", "meta": {"value": "shown"}, "value": "[REDACTED]"}',
        ),
        (
            '{\\"name\\": \\"Authorization\\", \\"meta\\": {\\"a\\": 1}, \\"value\\": \\"S4\\"}',
            '{\\"name\\": \\"Authorization\\", \\"meta\\": {\\"a\\": 1}, \\"value\\": \\"[REDACTED]\\"}',
        ),
        (
            '{"name": "password", "meta": {"a": "}"}, "value": "S5',
            '{"name": "password", "meta": {"a": "}"}, "value": "[REDACTED]',
        ),
        # a call-like repr with keyword arguments, and HTML attributes
        ("Header(name='X-Api-Key', value='S6')", "Header(name='X-Api-Key', value='[REDACTED]')"),
        (
            "Env(name='DB_PASSWORD', src=Ref(kind='env'), value=S7)",
            "Env(name='DB_PASSWORD', src=Ref(kind='env'), value=[REDACTED])",
        ),
        ('<input name="password" value="S8">', '<input name="password" value="[REDACTED]">'),
        # YAML: a value: line next to its name: line, to the end of the line
        (
            "env:\n- name: DB_PASSWORD\n  value: S9 and more\n- name: HOME\n  value: /root\n",
            "env:\n- name: DB_PASSWORD\n  value: [REDACTED]\n- name: HOME\n  value: /root\n",
        ),
        ("- value: 'S10'\n  name: api_token\n", "- value: '[REDACTED]'\n  name: api_token\n"),
        ("Tags:\n- Key: api_token\n  Value: S11\n", "Tags:\n- Key: api_token\n  Value: [REDACTED]\n"),
        # near misses
        ("Header(name='Accept', value='json')", "Header(name='Accept', value='json')"),
        ('{"name": "password"}, {"name": "user", "value": "bob"}', '{"name": "password"}, {"name": "user", "value": "bob"}'),
        (
            "- name: DB_PASSWORD\n  valueFrom:\n    configMapKeyRef: cfg\n",
            "- name: DB_PASSWORD\n  valueFrom:\n    configMapKeyRef: cfg\n",
        ),
        ("if name == 'password' and value == x:", "if name == 'password' and value == x:"),
    ],
)
def test_a_pair_in_text_masks_its_own_objects_value_field(text: str, expected: str) -> None:
    assert R.text(text) == expected
    assert R.mask(text) == expected


def test_a_pair_in_text_is_masked_as_its_mapping_is() -> None:
    pair = {"name": "X-Api-Key", "meta": {"src": "env"}, "value": "S1"}
    assert R(pair)["value"] == "[REDACTED]"
    assert json.loads(R.text(json.dumps(pair))) == R(pair)


def test_text_and_a_keys_cut_are_one_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, int, int]] = []

    def cut(self: Redactor, value: str, limit: int, size: int) -> str:
        seen.append((value, limit, size))
        return "cut"

    monkeypatch.setattr(redact_module.Redactor, "_cut", cut)
    assert Redactor(values=["hunter2"]).text("pw hunter2", limit=50) == "cut"
    assert seen == [("pw [REDACTED]", 50, 13)]
