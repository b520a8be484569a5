"""The redactor on its own: URL user-info as urlsplit reads it, key/value pairs, secrets after key names in text."""

from __future__ import annotations

import collections
import json
import os
import time
from urllib.parse import urlsplit

import pytest

from harness_one import REDACTED, Redactor
from harness_one._redact import MODEL_SECRET_KEYS, mask_secrets


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://cache_user:p@ssS3CRET@cache.internal:6379/0", f"redis://{REDACTED}@cache.internal:6379/0"),
        ("https://a@b:S3CRET@host/x@y?z=a@b#f@g", f"https://{REDACTED}@host/x@y?z=a@b#f@g"),
        ("git+ssh://u:S3@CRET@git.host/repo", f"git+ssh://{REDACTED}@git.host/repo"),
        ("http://alice:correct horse S3CRET@127.0.0.1:8080/loop", f"http://{REDACTED}@127.0.0.1:8080/loop"),
        ("http://al ice:pw S3CRET@example.com:x/", f"http://{REDACTED}@example.com:x/"),  # a user with a space too
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
        "password=(" + ")" * 100_000,  # a value's trailing closers, each looked at once
        "pw=a&" * 100_000,
        '\\"token\\": \\"' + "\\\\" * 100_000,  # escaped quotes, escaped backslashes
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
    shown = redactor({"sk-live-Q9X7ZZ": 1, "https://bob:hunter-Q9@host/": 2, "plain": 3})
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


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("connect to admin:hunter2@db.internal:5432 failed", f"connect to admin:{REDACTED}@db.internal:5432 failed"),
        ("user:pass@host/path", f"user:{REDACTED}@host/path"),
        ("dsn=app:S3cr3t@10.0.0.5:5432/app", f"dsn=app:{REDACTED}@10.0.0.5:5432/app"),
        ("(admin:pw@[::1]:5432)", f"(admin:{REDACTED}@[::1]:5432)"),
        ("'ops:pw@localhost'", f"'ops:{REDACTED}@localhost'"),
        # an "@" or ":" in the password is the password's: up to the last "@" before the host
        ("admin:p@ss:w0rd@db.internal.", f"admin:{REDACTED}@db.internal."),
        ("a:b@c.d and e:f@g.h", f"a:{REDACTED}@c.d and e:{REDACTED}@g.h"),
    ],
)
def test_user_info_without_a_scheme_has_its_password_masked(text: str, shown: str) -> None:
    assert mask_secrets(text) == shown
    assert Redactor().text(text) == shown
    assert mask_secrets(shown) == shown  # masking twice changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "at 10:30 @alice",
        "a:b@c in prose",
        "bob@example.com",
        "mailto:bob@example.com",
        "ACCT:bob@example.com",
        "listening on [::1]:8080",
        "Error: x@y",
        "Error:x@y",
        "a:b@c:123x",  # a one-label host needs a port or a path
        "admin:pass word@db.internal",  # no whitespace in a password without a scheme
        "image redis:7@sha256:0123abcd",
        "pkg:npm/left-pad@1.3.0",  # no "/" either
        "https://host:8080/path/@user",
        "/srv/a:b@c.d",  # a path, not a user
        "u:" + "p" * 257 + "@db.internal",  # longer than 256 characters: not a password
    ],
)
def test_text_with_a_colon_and_an_at_sign_is_not_user_info(text: str) -> None:
    assert mask_secrets(text) == text


def test_user_info_without_a_scheme_is_masked_in_errors_the_model_reads() -> None:
    from harness_one._errors import exception_text

    shown = exception_text(ConnectionError("connect to admin:hunter2@db.internal:5432 failed"))
    assert shown == f"ConnectionError: connect to admin:{REDACTED}@db.internal:5432 failed"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("GET https://api.example.com/v1?api_key=sk-123&x=1", f"GET https://api.example.com/v1?api_key={REDACTED}&x=1"),
        ("GET /v1?token=ab,cd;ef&x=1", f"GET /v1?token={REDACTED}&x=1"),  # "," and ";" are a query value's
        ("https://h/?x=1&password=a'b(c)!", f"https://h/?x=1&password={REDACTED}"),
        ("POST /login user[password]=hunter2&next=/", f"POST /login user[password]={REDACTED}&next=/"),
        ("GET /v1?api%5Fkey=sk-123&x=1", f"GET /v1?api%5Fkey={REDACTED}&x=1"),  # the name read decoded
        ("GET /cb?access_token=sk-123#state", f"GET /cb?access_token={REDACTED}#state"),  # the fragment is not the value's
        ("GET /v1?max_tokens=5&X-Api-Key=sk-1", f"GET /v1?max_tokens=5&X-Api-Key={REDACTED}"),
        ("GET /v1?password=&x=1", "GET /v1?password=&x=1"),  # nothing to mask
    ],
)
def test_query_parameters_named_as_secrets_have_their_values_masked(text: str, shown: str) -> None:
    assert mask_secrets(text) == shown
    # the log redactor masks the same values (and more names: max_tokens holds "token" for it)
    assert Redactor().text(text) == shown.replace("max_tokens=5", f"max_tokens={REDACTED}")


def test_a_percent_encoded_key_name_is_read_decoded() -> None:
    assert Redactor()({"api%5Fkey": "sk-123", "max%5Ftokens": 5}) == {"api%5Fkey": REDACTED, "max%5Ftokens": REDACTED}
    model = Redactor(MODEL_SECRET_KEYS, last_words=True)
    assert model.is_secret("access%5Ftoken") and not model.is_secret("max%5Ftokens")


@pytest.mark.parametrize(
    "unit",
    [
        "a:a@",
        "?a=&",
        ",a:@",
        ":@a.a",
        "@a:1",
        "@[::1]",
        ",a:a@a.a ",
        "?token=&",
        "k%=",
        "user[password]=&",
        "token=)",
        '\\"pwd\\":',
        "--password ",
        "'--password', ",
        "- ",
    ],
)
def test_hostile_user_info_and_query_text_is_masked_in_bounded_work(unit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """20,000 characters built against the user-info and query rules (each "@" a host's, each
    ":" a user's, each "&" a parameter): a search that scans on from every start took 1.7 s on
    ",a:@"; a linear one takes ~10 ms. Nothing past the 20,000 characters an error reads is read."""
    from harness_one import _redact
    from harness_one._errors import outside_text

    hostile = (unit * (20_000 // len(unit) + 1))[:20_000]
    seen: list[int] = []
    real = _redact.mask_secrets
    monkeypatch.setattr(_redact, "mask_secrets", lambda text: seen.append(len(text)) or real(text))
    # CPU seconds of this thread, not wall time: a loaded machine stretches the ~20 ms of work to
    # hundreds of ms of wall time; the quadratic scan this guards costs seconds of CPU
    started = time.thread_time()
    shown = outside_text(hostile + " admin:S3CRET@db.internal" * 40_000)  # a megabyte past the window
    elapsed = time.thread_time() - started
    assert seen == [20_000] and "S3CRET" not in shown
    assert elapsed < 0.5, f"{elapsed:.3f} s of CPU"
    started = time.thread_time()
    Redactor().mask(hostile)
    elapsed = time.thread_time() - started
    assert elapsed < 0.5, f"{elapsed:.3f} s of CPU"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # an unquoted value runs to the next whitespace: punctuation in a password is the password's
        ("auth failed: user=app password=Xy7,Pq9;Zz host=db", f"auth failed: user=app password={REDACTED} host=db"),
        ("password=k3y;Rest0fSecret", f"password={REDACTED}"),
        ("user=app password=(Rt5%vQ)w host=db", f"user=app password={REDACTED} host=db"),
        ("user=app password=<9aB!x>Q", f"user=app password={REDACTED}"),
        ("password=(Rt5%vQ)", f"password={REDACTED}"),  # a bracket it opened is its own
        # a trailing "," or ";", and a bracket or quote it did not open, are the text's around it
        ("(password=Xy7,Pq9), next", f"(password={REDACTED}), next"),
        ("ConnectionError('password=Xy7(a)b')", f"ConnectionError('password={REDACTED}')"),
        ("POST password=a&b&next=/", f"POST password={REDACTED}&next=/"),  # a form's next parameter
    ],
)
def test_an_unquoted_value_with_punctuation_is_masked_whole(text: str, shown: str) -> None:
    assert mask_secrets(text) == shown
    assert Redactor().text(text) == shown
    assert mask_secrets(shown) == shown  # masking twice changes nothing


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        (json.dumps({"method": "POST", "body": json.dumps({"user": "bob", "password": "S3CRET"})}), "S3CRET"),
        (json.dumps({"body": json.dumps({"password": 'S3"CR\\ET', "n": 1})}), "CR"),  # its escapes too
        (json.dumps({"body": json.dumps({"token": "S3CRET"})}, indent=1), "S3CRET"),
    ],
)
def test_json_text_inside_a_json_string_is_masked(value: str, secret: str) -> None:
    shown = Redactor()({"event": value})["event"]
    assert secret not in shown and REDACTED in shown
    assert secret not in mask_secrets(value)
    assert json.loads(json.loads(shown)["body"])  # still JSON text inside JSON


def test_named_tuples_keep_their_names_and_argv_flags_mask_the_next_item() -> None:
    creds = collections.namedtuple("creds", "user password")
    assert Redactor()(creds("bob", "S3CRET")) == {"user": "bob", "password": REDACTED}
    assert Redactor()([creds("bob", "S3CRET")]) == [{"user": "bob", "password": REDACTED}]
    argv = ["mysql", "-u", "root", "--password", "S3CRET", "-token", "S3", "--port", "3306", "db"]
    assert Redactor()({"argv": argv}) == {
        "argv": ["mysql", "-u", "root", "--password", REDACTED, "-token", REDACTED, "--port", "3306", "db"]
    }
    assert Redactor()(["--password=S3CRET", "x", "y"]) == [f"--password={REDACTED}", "x", "y"]  # the flag's own value
    assert Redactor()(("a", "b")) == ["a", "b"]  # a plain tuple stays a list


def test_what_one_value_shows_is_cut_at_about_16384_characters() -> None:
    rows = [["x" * 2000] * 100 for _ in range(50)]  # 10 MB of text
    started = time.thread_time()  # CPU of this thread: load elsewhere does not count
    shown = Redactor()({"rows": rows, "after": 1})
    elapsed = time.thread_time() - started
    assert 15_000 < len(json.dumps(shown)) < 16_600, len(json.dumps(shown))
    assert list(shown) == ["rows", "..."] and shown["..."] == "1 more entries"
    assert shown["rows"][-1] == f"... {50 - len(shown['rows']) + 1} more items"
    assert elapsed < 0.2, f"{elapsed:.3f} s of CPU"  # what is not shown is not read
    assert len(json.dumps(Redactor()({"k": "x" * 20_000}))) < 2_100  # one string: its own 2,000-character cut
    assert len(Redactor().key("k" * 1_000_000)) < 230  # a mapping key: 200 characters and a marker


def test_default_names_cover_short_password_names_and_query_keys() -> None:
    redactor = Redactor()
    assert redactor({"pass": "S3", "pw": "S3", "passcode": "S3", "sig": "S3", "key": "k1", "spinner": 1}) == {
        "pass": REDACTED,
        "pw": REDACTED,
        "passcode": REDACTED,
        "sig": REDACTED,
        "key": "k1",  # a key is secret in a query only
        "spinner": 1,
    }
    url = "403 for url: https://maps.example.com/geo?address=x&key=AIzaS3&sig=S3 key=k1"
    assert redactor.text(url) == f"403 for url: https://maps.example.com/geo?address=x&key={REDACTED}&sig={REDACTED} key=k1"
    assert Redactor(query_keys=()).text("?key=k1") == "?key=k1"
    assert mask_secrets("?key=k1&pw=x") == f"?key={REDACTED}&pw={REDACTED}"  # a query's password is hidden from the model...
    # ... and a Google API key or a SAS signature in an HTTP client's error URL is not sent to it
    error = "403 Client Error: Forbidden for url: https://maps.googleapis.com/geo?address=x&key=AIzaS3&sig=S3 (key=k1)"
    assert (
        mask_secrets(error)
        == f"403 Client Error: Forbidden for url: https://maps.googleapis.com/geo?address=x&key={REDACTED}&sig={REDACTED} (key=k1)"
    )


@pytest.mark.parametrize("secret", ['Tr0ub"4dor', "C:\\keys\\Zq9", "contraseña-Zq9", "tab\tZq9"])
def test_secret_values_are_masked_json_escaped_too(secret: str) -> None:
    redactor = Redactor(values=[secret])
    for text in (json.dumps({"db": secret}), json.dumps({"db": secret}, ensure_ascii=False), secret):
        assert redactor.text(text).count(REDACTED) == 1, text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "Command '['mysql', '-u', 'root', '--password', 'hunter2', '-h', 'db']' returned non-zero exit status 1.",
            f"Command '['mysql', '-u', 'root', '--password', '{REDACTED}', '-h', 'db']' returned non-zero exit status 1.",
        ),
        (
            "Command 'mysql --password hunter2 -h db' returned non-zero exit status 1.",
            f"Command 'mysql --password {REDACTED} -h db' returned non-zero exit status 1.",
        ),
        ('Command \'["curl", "--token", "abc"]\' failed', f'Command \'["curl", "--token", "{REDACTED}"]\' failed'),
        ("run --password --verbose", "run --password --verbose"),  # the next flag is no value
        ("mysql -u root -h db", "mysql -u root -h db"),
        ("x --max-tokens 5", "x --max-tokens 5"),  # not a secret for the model
    ],
)
def test_a_flag_naming_a_secret_has_its_value_masked(text: str, shown: str) -> None:
    """A failed subprocess shows its command: ``--password hunter2`` reached the model as it was."""
    import subprocess

    assert mask_secrets(text) == shown
    assert "hunter2" not in Redactor().text(text) and "abc" not in Redactor().text(text)
    failed = str(subprocess.CalledProcessError(1, ["mysql", "--password", "hunter2"]))
    assert "hunter2" not in mask_secrets(failed)


def test_lone_surrogates_are_shown_as_escapes_so_the_text_is_valid_utf8() -> None:
    """A model's half emoji (json.loads reads ``"\\ud83d"``), a non-UTF-8 file name from ``os.fsdecode``:
    a log renderer or an OTLP exporter encoding them as UTF-8 would fail."""
    redactor = Redactor()
    name = os.fsdecode(b"report-\xff.txt")
    assert redactor.text(f"no file {name}") == "no file report-\\udcff.txt"
    assert redactor.key(json.loads('"call_\\ud83d"')) == "call_\\ud83d"
    shown = redactor({"k\udc80": ["v\ud83d", ("password", "x\udcff")], "ok": "caf\u00e9 \U0001f600"})
    assert shown == {"k\\udc80": ["v\\ud83d", ["password", REDACTED]], "ok": "caf\u00e9 \U0001f600"}  # valid text as it was
    json.dumps(shown, ensure_ascii=False).encode("utf-8")
    long = redactor.text("x\udcff" * 3000)  # cut at 2,000 characters, then escaped: bounded
    assert long.endswith("... (6000 characters)") and len(long) < 7100 and long.encode("utf-8")


def test_one_function_escapes_lone_surrogates_for_logs_spans_and_argument_errors() -> None:
    """``Redactor.escape_surrogates`` (harness_one._render's, beside ``safe_text``'s U+FFFD for what the model
    reads) is the one rule: no other module of the core or the standard plugins writes the escape itself."""
    from pathlib import Path

    from harness_one._render import safe_text

    half = "get_weather\ud83d"
    assert Redactor.escape_surrogates(half) == Redactor().text(half) == "get_weather\\ud83d"
    assert Redactor.escape_surrogates("caf\u00e9") == "caf\u00e9" and safe_text(half) == "get_weather\ufffd"
    root = Path(__file__).resolve().parents[1]
    sources = [*(root / "core" / "harness_one").rglob("*.py"), *(root / "plugins" / "harness_one_plugins").rglob("*.py")]
    writers = sorted(str(path.relative_to(root)) for path in sources if "backslashreplace" in path.read_text())
    assert writers == ["core/harness_one/_render.py"]


def test_text_with_surrogates_keeps_to_its_limit() -> None:
    """Escaped after the cut, 100 lone surrogates cut at 50 came back as 320 characters."""
    shown = Redactor().text("\udcff" * 100, limit=50)
    assert shown.startswith("\\udcff" * 8) and len(shown) <= 50 + len("... (100 characters)")
    shown.encode("utf-8")  # valid UTF-8


@pytest.mark.parametrize(
    "token",
    [
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_" + "a1" * 18,
        "github_pat_" + "B2" * 20,
        "sk-proj-" + "Q9" * 16,
        "xoxb-1234567890-abcdefghij",
        "sk_live_" + "c3" * 12,
        "AIza" + "D4_" * 11 + "xy",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX2hlcmU",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_a_credential_of_a_known_form_is_masked_in_free_text(token: str) -> None:
    """A tool's exception text with a bare AWS key id, GitHub, OpenAI, Slack, Stripe or Google key, a JWT or a PEM
    private key reached the model, the logs and the spans: no key name stood before it."""
    text = f"upload failed with {token} (retrying)"
    assert mask_secrets(text) == f"upload failed with {REDACTED} (retrying)"
    assert Redactor().text(text) == f"upload failed with {REDACTED} (retrying)"
    assert Redactor()({"note": text}) == {"note": f"upload failed with {REDACTED} (retrying)"}


def test_words_that_only_look_like_a_credential_stay() -> None:
    text = "task-force sk-1 desk-lampshade-and-more-words eyJ AKIA123 ghp_short"
    assert mask_secrets(text) == text
    for plain in (  # slugs, branches and package names (no upper case and digit), a PEM header quoted in an error
        "pod sk-prod-cluster-eu-west-1-node",
        "feature/sk-1234567890-abcdefghij",
        "python -m sk-research-assistant-tools",
        "xoxb-is-the-prefix-for-bots",
        "expected '-----BEGIN PRIVATE KEY-----' but found '-----BEGIN CERTIFICATE-----' in /etc/ssl/app.pem (line 3)",
    ):
        assert mask_secrets(plain) == plain


def test_a_google_key_ending_in_a_dash_is_masked_and_a_pem_block_ends_at_its_end_line() -> None:
    key = "AIza" + "B" * 34 + "-"
    assert mask_secrets(f"key {key} used") == f"key {REDACTED} used"
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAabc\nQQQ=\n-----END RSA PRIVATE KEY-----"
    assert mask_secrets(f"x {pem} then the file and line") == f"x {REDACTED} then the file and line"


def test_a_name_value_pair_of_a_secret_is_masked() -> None:
    """HTTP headers as HAR lists them and a Kubernetes env entry: ``{"name": "Authorization", "value": ...}`` showed its value."""
    shown = Redactor()(
        {
            "headers": [{"name": "Authorization", "value": "Bearer S_HAR"}, {"name": "Accept", "value": "application/json"}],
            "env": [{"name": "DB_PASSWORD", "value": "S_K8S"}],
            "params": {"key": "api_key", "value": "S_KV"},
        }
    )
    assert shown == {
        "headers": [{"name": "Authorization", "value": REDACTED}, {"name": "Accept", "value": "application/json"}],
        "env": [{"name": "DB_PASSWORD", "value": REDACTED}],
        "params": {"key": "api_key", "value": REDACTED},
    }
