"""The redactor on its own: URL user-info as urlsplit reads it, key/value pairs, secrets after key names in text."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from harness_one import REDACTED, Redactor
from harness_one._redact import mask_secrets


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://cache_user:p@ssS3CRET@cache.internal:6379/0", f"redis://{REDACTED}@cache.internal:6379/0"),
        ("https://a@b:S3CRET@host/x@y?z=a@b#f@g", f"https://{REDACTED}@host/x@y?z=a@b#f@g"),
        ("git+ssh://u:S3@CRET@git.host/repo", f"git+ssh://{REDACTED}@git.host/repo"),
        ("http://alice:correct horse S3CRET@127.0.0.1:8080/loop", f"http://{REDACTED}@127.0.0.1:8080/loop"),
    ],
)
def test_url_userinfo_is_masked_up_to_the_last_at_sign_of_the_authority(url: str, shown: str) -> None:
    password = urlsplit(url).password
    assert password and password.endswith("CRET")
    assert Redactor().text(url) == shown
    assert Redactor().text(f"see {url} and http://h/@me") == f"see {shown} and http://h/@me"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:ab/S3CRET@host/x", f"https://{REDACTED}@host/x"),
        ("postgresql://app:k9/S3+CRET@db.internal/app", f"postgresql://{REDACTED}@db.internal/app"),
        ("s3://AKIA:wJal/r?X#S3CRET@bucket/key", f"s3://{REDACTED}@bucket/key"),
        # a port then a path with an "@" in it is not user-info
        ("https://host:8080/path/@user", "https://host:8080/path/@user"),
        ("https://host:8080/p?e=a@b", "https://host:8080/p?e=a@b"),
        ("https://host/x@y", "https://host/x@y"),
    ],
)
def test_a_password_with_an_unescaped_slash_is_masked_too(url: str, shown: str) -> None:
    # urlsplit reads "/" as the start of the path: such a password is no user-info to it.
    assert Redactor().text(f"connect {url} failed") == f"connect {shown} failed"


def test_a_pair_under_a_secret_key_name_is_masked_like_a_keyed_value() -> None:
    value = {
        "form": [["password", "S3CRET"], ["user", "bob"]],
        "headers": [("Authorization", "Bearer S3CRET"), ("Accept", "text/plain")],
        "api": ("X-API-KEY", {"k": "S3CRET"}),
        "plain": ["token", "password", "pin"],  # three names, not a pair
        "nested": {"deep": [{"Cookie": "S3CRET"}]},  # keyed redaction at any depth still holds
    }
    assert Redactor()(value) == {
        "form": [["password", REDACTED], ["user", "bob"]],
        "headers": [["Authorization", REDACTED], ["Accept", "text/plain"]],
        "api": ["X-API-KEY", REDACTED],
        "plain": ["token", "password", "pin"],
        "nested": {"deep": [{"Cookie": REDACTED}]},
    }


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("cannot reach {'X-API-KEY': 'S3CRET', 'user': 'bob'}", f"cannot reach {{'X-API-KEY': '{REDACTED}', 'user': 'bob'}}"),
        ('bad body {"password": "S3\\"CRET", "n": 1}', f'bad body {{"password": "{REDACTED}", "n": 1}}'),
        ("env API_KEY=S3CRET user=bob", f"env API_KEY={REDACTED} user=bob"),
        ("GET /v1?access_token=S3CRET&page=2", f"GET /v1?access_token={REDACTED}&page=2"),
        ("Authorization: Bearer S3CRET, retrying", f"Authorization: Bearer {REDACTED}, retrying"),
        ("x-api-key:S3CRET; spinner: 3", f"x-api-key:{REDACTED}; spinner: 3"),
        ("[('Authorization', 'Bearer S3CRET')]", f"[('Authorization', '{REDACTED}')]"),
        ("[['password', 'S3CRET'], ['user', 'bob']]", f"[['password', '{REDACTED}'], ['user', 'bob']]"),
        ("{'session-id': 12345, 'pin_code': 'S3CRET", f"{{'session-id': {REDACTED}, 'pin_code': '{REDACTED}"),
        ("topic: cats, author: ann, pwd: S3CRET", f"topic: cats, author: ann, pwd: {REDACTED}"),
    ],
)
def test_values_after_secret_key_names_in_text_are_masked(text: str, shown: str) -> None:
    assert Redactor().text(text) == shown


def test_text_follows_the_configured_key_names() -> None:
    redactor = Redactor(["tenant-code"], values=["S3CRET-V"])
    assert (
        redactor.text("tenant_code=T9 password=visible note=S3CRET-V")
        == f"tenant_code={REDACTED} password=visible note={REDACTED}"
    )


@pytest.mark.parametrize(
    "hostile",
    [
        "a." * 50_000 + "://x",  # a scheme-like run: each dot starts a new candidate scheme
        "x://" + "@" * 100_000,
        "a://b:" * 100_000,  # each a user and a password's start, and no "@" to end it
        "password=" * 100_000,
        "'token': '" * 100_000,
        "['pin', " * 100_000,
        ("k" * 99 + "=") * 10_000,
        '"' + '\\"' * 100_000,
    ],
)
def test_hostile_text_is_scanned_in_bounded_work(hostile: str) -> None:
    """Megabyte inputs built against backtracking regexes: only a bounded prefix is scanned, linearly."""
    text = f"Authorization: Bearer S3CRET {hostile}"
    shown = Redactor().text(text)
    assert shown.startswith(f"Authorization: Bearer {REDACTED} ")
    assert shown.endswith(f"... ({len(text)} characters)") and len(shown) < 2100


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("psql --password=Q9c db --user=bob", "psql --password=[REDACTED] db --user=bob"),
        ("run -token=Q9t now", "run -token=[REDACTED] now"),
        (
            '{"credentials": {"user": "app", "pass": "Q9"}, "api_keys": ["Q9"], "ok": 1}',
            '{"credentials": {[REDACTED]}, "api_keys": [[REDACTED]], "ok": 1}',
        ),
        ("{'secret': {'a': '}', 'b': [1, {'c': 'x'}]}, 'after': 3}", "{'secret': {[REDACTED]}, 'after': 3}"),
        ('{"password":\n"Q9", "b": 2}', '{"password":\n"[REDACTED]", "b": 2}'),
    ],
)
def test_flags_nested_values_and_values_on_the_next_line_are_masked(text: str, shown: str) -> None:
    assert Redactor()(text) == shown


def test_mapping_keys_are_masked_like_text() -> None:
    redactor = Redactor(values=["sk-live-Q9X7ZZ"])
    shown = redactor({"sk-live-Q9X7ZZ": 1, "https://bob:pw-Q9@host/": 2, "plain": 3})
    assert shown == {REDACTED: 1, f"https://{REDACTED}@host/": 2, "plain": 3}


def test_a_string_where_a_list_is_expected_is_one_item() -> None:
    redactor = Redactor("password", extra_keys="ssn", values="Q9hunter")  # was split into letters
    assert redactor({"password": "x", "ssn": "1", "ann": "ann Q9hunter"}) == {
        "password": REDACTED,
        "ssn": REDACTED,
        "ann": f"ann {REDACTED}",
    }


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("password: {hunter2", f"password: {{{REDACTED}"),  # never closed: nothing of it shown
        ('token: [a}, "s3cr3t-value"]', f"token: [{REDACTED}]"),  # a stray } is not the end of an array
        ("credentials: [it's, x] user=bob", f"credentials: [{REDACTED}] user=bob"),  # an apostrophe is text
        (f"token=[{REDACTED}]", f"token=[{REDACTED}]"),  # masking twice changes nothing
        ("token: [" + "\\'" * 3990, f"token: [{REDACTED}... (7988 characters)"),  # escaped quotes: each searched once
    ],
)
def test_bracketed_values_are_masked_whole_and_only_them(text: str, shown: str) -> None:
    assert Redactor()(text) == shown


def test_mask_keeps_the_whole_text_and_text_cuts_it() -> None:
    """``mask`` is what ``text`` does without the 2,000-character cut (errors the model reads are longer)."""
    long = "x" * 5_000 + " url=https://bob:hunter2@db/x password=hunter2 "
    masked = mask_secrets(long)
    assert "hunter2" not in masked and masked.startswith("x" * 5_000)
    assert masked.endswith(" url=https://[REDACTED]@db/x password=[REDACTED] ")
    assert Redactor().text(long) == masked[:2000] + f"... ({len(long)} characters)"
    assert mask_secrets("division by zero") == "division by zero"
    assert Redactor(values=["s3cret"]).mask("no separators s3cret") == "no separators [REDACTED]"
    assert Redactor().is_secret("api_key") and not Redactor().is_secret("spinner")
