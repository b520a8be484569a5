"""Redaction of secrets in values that go to logs and traces."""

from __future__ import annotations

import bisect
import copy
import heapq
import itertools
import json
import re
import unicodedata
from collections import UserString
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, Sequence, Set, ValuesView
from typing import Any
from urllib.parse import unquote

from ._render import escape_surrogates

__all__ = [
    "MODEL_SECRET_KEYS",
    "QUERY_SECRET_KEYS",
    "REDACTED",
    "SECRET_KEYS",
    "Redactor",
    "hidden_from_model",
    "mask_secrets",
    "redact",
    "without_userinfo",
]

REDACTED = "[REDACTED]"

#: Key names whose values are secret. Matching ignores case and separators (``private_key``,
#: ``privateKey``, ``PRIVATE-KEY`` are one key) and reads a name NFKC-normalised (full-width
#: ``PASSWORD``, U+FF30 U+FF21 ..., is ``PASSWORD``); names of five letters or more also match inside longer
#: keys (``access_token``), shorter ones only as a whole word (``user_pin``, not ``spinner``),
#: but ``pwd`` and ``otp`` also end a word (``userpwd``, ``totp``), and ``pass`` ends one after a
#: known service or account word only (``dbpass``, ``SMTPPASS``, ``storepass``; not ``bypass``,
#: ``compass``, ``lowpass``: see ``_PASS_PREFIXES``); a trailing number and a plural ``s`` are left out of a
#: name's words (``pw2``, ``pins``: see _key_words).
SECRET_KEYS = (
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "pass",
    "pwd",
    "pw",
    "pin",
    "token",
    "api_key",
    "apikey",
    "access_key",
    "authorization",
    "auth",
    "bearer",
    "jwt",
    "secret",
    "cookie",
    "credential",
    "private_key",
    "privkey",
    "auth_key",
    "passkey",
    "ssh_key",
    "session_id",
    "sessionid",
    "otp",
    "totp",
    "mfa_code",
    "cvv",
    "cvc",
    "card_number",
    "signature",
    "sig",
    "account_key",
    "subscription_key",
    "encryption_key",
    "signing_key",
    "master_key",
    "hmac_key",
    "client_key",
    "creds",
)

# Short key names that also match at the end of a longer word: with any word before them (no English
# word ends in "pwd" or "otp"), or with one of the given words before them ("pass" ends "bypass",
# "compass", "trespass", "overpass", "lowpass", "subpass": only a service's or an account's word
# before it names a password: dbpass, smtppass, rootpass, keytool's storepass and keypass).
_PASS_PREFIXES = frozenset(
    [
        "db",
        "sql",
        "mysql",
        "pg",
        "postgres",
        "mongo",
        "redis",
        "ldap",
        "smtp",
        "imap",
        "pop",
        "mail",
        "ftp",
        "sftp",
        "ssh",
        "vnc",
        "rdp",
        "wifi",
        "proxy",
        "amqp",
        "mq",
        "kafka",
        "user",
        "usr",
        "admin",
        "root",
        "login",
        "sudo",
        "master",
        "store",
        "key",
        "keystore",
        "truststore",
        "app",
        "api",
        "svc",
        "service",
        "account",
        "acct",
        "bind",
        "basic",
        "http",
        "web",
        "registry",
        "docker",
        "git",
        "npm",
        "pypi",
        "bot",
        "sa",
        "sys",
    ]
)
_SUFFIXES: dict[str, frozenset[str] | None] = {"pwd": None, "otp": None, "pass": _PASS_PREFIXES}


def _names_password(word: str) -> bool:
    """Whether the last word of an environment variable's name (all capitals, here lower case) names a
    password with no separator before it: ``pgpassword``, ``mysqlpasswd``, ``sshpass`` (``pass`` after a word
    of _PASS_PREFIXES, or alone: ``DB_PASS``; not ``bypass``); see ``Redactor(last_words=True)``."""
    return word.endswith(("password", "passwd", "pwd")) or (
        word.endswith("pass") and (word == "pass" or word[:-4] in _PASS_PREFIXES)
    )


#: Names that are secret as query parameters only (``?key=`` holds a Google API key; a mapping's
#: or a text's ``key`` is usually not a secret): matched whole, any case.
QUERY_SECRET_KEYS = ("key",)

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _key_words(name: str) -> tuple[tuple[str, ...], ...]:
    """The words of a key's name, lower case (see _WORD), in the forms secret names are matched on: a trailing
    number, with a version's ``v`` before it, left out (``password2``, ``api_key_1``, ``token_v2`` read as
    ``password``, ``api_key``, ``token``), and a last word's plural ``s`` read both as it is and left out
    (``passwords``, ``client_secrets``, ``api_keys``; not ``ss``, ``pass``), but for ``tokens``, which counts text
    (``max_tokens``, ``refresh_tokens`` are shown). One rule for every redactor (see :meth:`Redactor.is_secret`)."""
    words = [word.lower() for word in _WORD.findall(name)]
    if words and words[-1].isdigit():
        while words and words[-1].isdigit():
            words.pop()
        if len(words) > 1 and words[-1] == "v":
            words.pop()
    form = tuple(words)
    last = form[-1] if form else ""
    if len(last) > 2 and last[-1] == "s" and last[-2] != "s" and last != "tokens" and form[0] not in _COUNTING:
        return form, (*form[:-1], last[:-1])
    return (form,)


#: First words of a name that counts or bounds what its last word names (``num_passwords``, ``max_secrets``): a
#: number, not the secrets, so its plural is not read as the secret's name.
_COUNTING = frozenset({"n", "num", "number", "count", "max", "min", "total", "limit"})


# URL user-info: as urlsplit reads it, everything up to the last "@" before the path, query or
# fragment; else "user:" then a password with an unescaped "/", "?" or "#" in it, up to the last
# "@" of the next 256 characters (not "host:port/"; a later "@" in a path shows less, never more);
# else "user:" then a password with spaces in it (httpx sends "alice:correct horse@"), on one line;
# the user may have spaces too (up to 64 characters), the password not start with one (prose: "x: y@z").
# The scheme's "://" may be JSON-escaped, ":\\/\\/" (PHP's and Java's encoders escape every "/").
_USERINFO = re.compile(
    r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]{0,31}:(?://|\\/\\/))"
    r"(?:[^/?#\s]*|[^/?#@:\r\n]{0,64}:(?![0-9]*(?:[/?#\s]|$))(?:\S{0,256}|[^/?#@\r\n]{1,256}))@"
)


def without_userinfo(text: str, mask: str = REDACTED) -> str:
    """``text`` with the user-info of every URL in it (``user:password@``, up to the last ``@``
    before the host's path, as ``urlsplit`` reads it, or past a ``/`` in the password) replaced by ``mask``."""
    return _USERINFO.sub(rf"\1{mask}@", text) if "://" in text or ":\\/\\/" in text else text


# User-info without a scheme (``admin:hunter2@db.internal:5432``), found from each "@" before a host
# (see _without_bare_userinfo): the host is [an IPv6 address], a name or IPv4 address with a dot, or
# localhost, each with an optional :port; a one-label name only with a :port or a "/" after it
# ("a:b@c" is prose); then no more of a name (a full stop ending a sentence is not part of it).
_AT_HOST = re.compile(
    r"@(?=(?:(?:\[[0-9A-Fa-f:.]{2,45}(?:%[\w.~-]{1,32})?\]|[\w-]{1,63}(?:\.[\w-]{1,63}){1,126}|localhost)(?::\d{1,5})?"
    r"|[\w-]{1,63}(?=/)|[\w-]{1,63}:\d{1,5})(?![\w-]|\.[\w-]))"
)
#: Words before ":" that start an address, not a user: ``mailto:bob@example.com`` has no password.
_ADDRESS_SCHEMES = ("mailto", "acct", "sip", "sips", "xmpp", "im", "pres", "cid", "mid", "news", "email", "e-mail", "mail")
# A user then its ":": 1-64 of [A-Za-z0-9_.~%+-] starting a token (none of them, nor ":", "/", "@"
# or a backslash, just before it: not inside a word, a path or a URL), not an address scheme.
_USER_COLON = re.compile(
    r"(?<![\w.~%+:/@\\-])"
    rf"(?!(?i:{'|'.join(re.escape(word) for word in _ADDRESS_SCHEMES)}):)"
    r"[\w.~%+-]{1,64}+:"
)
_PASSWORD_END = re.compile(r"[\s/]")  # a password holds neither
_MAX_PASSWORD = 256


def _without_bare_userinfo(text: str) -> str:
    """``text`` with the password of each ``user:password@host`` without a scheme masked.

    The password runs from the first ":" after a user to an "@" before a host: 1-256 characters,
    neither whitespace nor "/"; an "@" in it is the password's (the "@"s are taken from the last, as
    urlsplit reads user-info up to the last "@"). Each "@", user and character is found once, in
    linear passes; pairing them costs a binary search an "@".
    """
    if "@" not in text or ":" not in text:
        return text
    ats = [found.start() for found in _AT_HOST.finditer(text)]
    users = [(found.start(), found.end() - 1) for found in _USER_COLON.finditer(text)] if ats else []
    if not users:
        return text
    colons = [colon for _, colon in users]
    ends = [found.start() for found in _PASSWORD_END.finditer(text)]
    parts: list[str] = []
    done = floor = len(text)  # text[done:] is in parts; an "@" at or after floor is inside a password
    for at in reversed(ats):
        if at >= floor:
            continue
        before = bisect.bisect_left(ends, at)  # the last whitespace or "/" before the "@" bounds the password
        low = max(at - _MAX_PASSWORD - 2, ends[before - 1] if before else -1)
        index = bisect.bisect_right(colons, low)  # the first user's ":" in reach: after low
        if index == len(colons) or colons[index] >= at - 1:
            continue
        user, colon = users[index]
        parts += (text[at:done], REDACTED)
        done, floor = colon + 1, user
    return text[:done] + "".join(reversed(parts)) if parts else text


# A key name in text, then its separator: key=, key:, key => (Ruby, Perl, PHP), 'key':, "key":, \"key\": (JSON text inside a
# JSON string) and ('key', / ["key", (a pair), each quoted name as bytes too (b'key': b'...', (b'key', b'...'): raw HTTP
# headers, an ASGI scope's); a command-line flag's name too (-key=, --key=), and
# a flag followed by its value, in a command line (--password VALUE) or a list's repr ('--password',
# 'VALUE', as a failed subprocess shows its command). A name may hold brackets and "%" (a query's
# or a form's user[password]=, api%5Fkey=).
_TEXT_KEY = re.compile(
    r"""(?:(?<=[\[(])(?:b(?=['"]))?(['"])([^\W\d][\w.-]{0,99})\1[ \t]*,"""
    r"""|(?:(?<![\w.-])|(?<=(?<![\w.-])-)|(?<=(?<![\w.-])--))(?:b(?=['"]))?((?:\\?['"])?)([^\W\d][\w.%\[\]-]{0,99})\3[ \t]*(?:=>|[:=])"""
    r"""|(?<![\w.-])(?:b(?=['"]))?(['"]?)--?([^\W\d][\w.-]{0,99})\5,?[ \t]+(?=[^\s-]))[ \t]*"""
)
# A query parameter's value: to the next "&", "#", whitespace, or a character a URL cannot hold
# (what a URL can hold is the value's: "?password=a'b(c),d" is masked whole).
_QUERY_VALUE = re.compile(r"""[^\s&#"<>\\^`{|}]+""")
# The value after a key: quoted (escapes and doubled quotes allowed, SQL's 'it''s'; closing quote optional); quoted with escaped quotes
# (\"...\", a JSON string inside a JSON string: \\\" and \\\\ are its escaped quote and
# backslash, \\x its other escapes); or up to the next whitespace, "&name=" (a form's next
# parameter) or ";name=" (a connection string's next field), with an optional auth scheme.
_TEXT_VALUE = re.compile(
    r"""b?(['"])(?:[^'"\\\n]|\\.|(?!\1)['"]|\1\1)*(\1)?"""
    r"""|(\\")(?:\\\\\\.|\\\\[^\\]|\\[^"\\]|[^\\"\n])*(\\")?"""
    r"""|((?:bearer|basic|token|digest|negotiate)[ \t]+)?(?:[^\s&;]|[&;](?![\w.%\[\]-]{1,100}=))+""",
    re.IGNORECASE,
)
# An Authorization header's scheme that takes parameters (RFC 7235 auth-params: Digest, AWS4-HMAC-SHA256,
# AWS4-ECDSA-P256-SHA256, GOOG4-RSA-SHA256, TC3-/OSS4-/ACS3-HMAC-SHA256, HMAC-SHA256, OAuth, GoogleLogin,
# SharedAccessSignature: a word of at most 12 letters, or letters and a version before "-HMAC-", "-RSA-" or "-ECDSA-",
# then "-" segments; not a token68's, Basic, Bearer: its "=" padding ends it; another word, one with "_" or a digit,
# or longer, is a credential sent bare, "Authorization: sk_live_x scope=read", masked), followed by one: its
# parameters are masked to the end of the header, over the lines that continue it (a line ending in "," or ";" then an indented "name=": Digest realm="x",\n  response=...). A parameter is
# one when its value is quoted, or is followed by ",", ";" (Akamai's EG1-HMAC-SHA256 client_token=...;signature=...) or "&" or another
# name=value, or ends the header (GoogleLogin auth=...): in "authorization: missing scope=read for alice, contact admin"
# no parameter follows "missing", which is masked as a bare credential and the rest kept; "missing scope=read; contact
# admin" reads as a scheme and its parameters, masked after its first word (both on the safe side).
_AUTH_PARAMS = re.compile(
    r"""(?:[A-Za-z]{1,8}[0-9]{1,2}(?=-(?i:HMAC|RSA|ECDSA)-)|(?i:SharedAccessSignature)|[A-Za-z]{1,12})"""
    r"""(?:-[A-Za-z0-9]{1,20}){0,4}[ \t]+"""
    r"""(?=[\w.-]{1,100}[ \t]*=(?:[ \t]*"|[^\s=,;&"'\\]+=*"""
    r"""(?:[ \t]*[,;&]|[ \t]+[\w.-]{1,100}[ \t]*=|[ \t]*(?:$|[\r\n'"\\]))))"""
)
_AUTH_MORE = re.compile(r"""[ \t]*\r?\n[ \t]+[\w.-]{1,100}[ \t]*=[^\r\n]*(?<![ \t])""")  # (after blanks ending the line too)
# The rest of a header quoted whole ('Authorization: ...' in a command line): to its closing quote, on its line.
_QUOTED_REST = {
    "'": re.compile(r"""(?:[^'\\\r\n]|\\.)*"""),
    '"': re.compile(r"""(?:[^"\\\r\n]|\\.)*"""),
}
# An XML element's start tag: <password>, <ns:Password attr="x">, <entry name="password">. The element's text (a
# CDATA section in it too) runs to its end tag, the same name's (</password>, "<\/password>" with JSON's escaped
# "/"); it is masked when the tag or its name or key attribute (_XML_NAME) names a secret (Redactor._xml_elements).
_XML_START = re.compile(
    r"""<(?P<tag>(?:[A-Za-z_][\w.-]{0,63}:)?(?P<name>[^\W\d][\w.-]{0,99}))(?P<attributes>\s[^<>]{0,1000})?>"""
)
_XML_END = re.compile(r"""<\\?/(?P<tag>(?:[A-Za-z_][\w.-]{0,63}:)?[^\W\d][\w.-]{0,99})\s*>""")
# HTML's void elements: no end tag, no text, nothing in them (<input name="password" type="password">)
_VOID = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"))
_CDATA_CLOSE = re.compile(r"\]\]>")
_XML_VALUE = re.compile(r"""(?i)(?<![\w.:-])value[ \t]*=[ \t]*(['"])((?:(?!\1)[^<>])*)\1""")
_XML_NAME = re.compile(r"""(?i)(?<![\w.:-])(?:name|key)[ \t]*=[ \t]*(['"])((?:(?!\1)[^<>]){1,100})\1""")
# A user and password after a client's user flag: curl's -u, --user, -U and --proxy-user (curl -u bob:hunter2,
# -ubob:pw, --user=bob:pw, -u 'bob smith:pw', '-u', 'bob:pw' in a list's repr): the password masked, to the next
# whitespace or the closing quote. The user may be empty or a variable ($USER, ${USER}, %USERNAME%, ~bob, @bob); it
# does not start with "+" (date -u +%H:%M) and is no git revision (git diff -u HEAD:src/a.py), and the password is
# not a URL's "//..." (sqlmap -u http://...).
_USER_FLAG = re.compile(
    r"""(?<![\w.-])(['"]?)(?:(?:-[uU]|--user|--proxy-user)\1(?:,?[ \t]+|=)|-[uU](?=[\w\\]))"""
    r"""(?:(['"])(?![+]|[A-Z_]*HEAD[~^0-9]*:)[^'"\r\n:]{0,256}:(?!//)(?P<quoted>(?:(?!\2)[^\\\r\n]|\\.)+)"""
    r"""|(?![+]|[A-Z_]*HEAD[~^0-9]*:)[^'"\s:]{0,256}:(?!//)(?P<plain>\S+))"""
)
_USER_FLAGS = frozenset(("-u", "--user", "-U", "--proxy-user"))


def _user_flag(found: re.Match[str]) -> str:
    """A ``-u user:password`` flag as shown: its password masked (an unquoted one without the text's
    closing bracket or quote after it, see _word_end)."""
    text, start = found.string, found.start()
    if found.group("quoted") is not None:
        low, high = found.span("quoted")
    else:
        low, high = found.start("plain"), _word_end(found.string, found.start("plain"), found.end("plain"))
    return f"{text[start:low]}{REDACTED}{text[high : found.end()]}"


# Characters that end an unquoted value's run but may be the text's around it: "a=x, b", "(key=x)", "'key=x'".
_TRAILING = frozenset(",;)]}>'\"")
_OPENER = {")": "(", "]": "[", "}": "{", ">": "<"}
_BLANK = re.compile(r"\s*")
# A Cookie or Set-Cookie header's value in text: to the end of its line, or of the JSON string or
# quoted text it stands in (no cookie holds a '"' nor a backslash).
_COOKIE_VALUE = re.compile(r"""[^\r\n"\\]*(?<![ \t])""")


def _starting(form: str, token: str = "A-Za-z0-9_-") -> str:
    """``form`` found only where a run of ``token`` characters starts: its first character, then a look
    back past it (every form starts with a character of its own, which the search looks for first)."""
    return f"{form[0]}(?<![{token}].){form[1:]}"


# Between two arguments of a command line or of a list's repr ("mysql -u", "'mysql', '-u'": a comma only after a
# quote), one argument (not ending in prose's punctuation: "failed," "done." end the search), and a flag with its
# value if it has one ("-u root", "--port=3306"): disjoint, and possessive, so that a client's name is followed over
# its next arguments in one way only.
_ARG = r"""(?:['"],?+)?+[ \t]++['"]?+"""
_ARGUMENT = r"""[^\s'",;|&]++(?<![.:!?])"""  # (not past a shell's ";", "|" or "&": the next command's)
_FLAG = rf"{_ARG}-{_ARGUMENT}(?:{_ARG}(?!-){_ARGUMENT})?+"
# A password given on a client's command line by a flag that is no secret's name: mysql's (and its tools')
# attached -p<password> (``-p 3306`` is no password: it asks for one), quoted to its closing quote
# (``-p'pass word'``, ``-p\\"...\\"`` in JSON), redis-cli's -a <password> (or --pass), sshpass's -p <password> among its own flags, before
# the command it runs (``ssh -p 22`` stays), openssl's -k <password> and -pass, -passin or -passout pass:<password>
# after its command (``openssl enc``; ``env:VAR`` and ``file:path`` name where it is), and az login's -p <password>.
# The client's name and its arguments up to the password are kept (group ``flag``), up to 5 flags on (a word that
# is no flag, "mysql on db1 with -p5432", ends the search); mysql's may have one such word among them, its database
# ("mysqldump shop -uroot -p...", "mysql -u root shop -p..."), with up to 5 flags more after it.
_CLIENT_PASSWORD = (
    r"(?P<flag>"
    + _starting(
        r"m(?:ysql(?:dump|admin|import|check|show|pump|slap)?|ariadb(?:-dump|-admin|-import|-check|-show)?)"
        rf"""(?:{_FLAG}){{0,5}}?(?:{_ARG}(?!-){_ARGUMENT}(?:{_FLAG}){{0,5}}?)??{_ARG}-p(?:(?P<sq>')(?=[^\s',])|(?P<dq>\\?")(?=[^\s",\\]))?+""",
        r"\w.-",
    )
    + "|"
    + _starting(rf"redis-cli(?:{_FLAG}){{0,5}}?{_ARG}(?:-a{_ARG}|--pass(?:{_ARG}|=))", r"\w.-")
    + "|"
    + _starting(rf"sshpass(?:{_ARG}-{_ARGUMENT}){{0,4}}?{_ARG}-p(?:{_ARG})?+", r"\w.-")
    + "|"
    + _starting(rf"openssl{_ARG}{_ARGUMENT}(?:{_FLAG}){{0,5}}?{_ARG}(?:-k{_ARG}|-pass(?:in|out)?+{_ARG}pass:)", r"\w.-")
    + "|"
    + _starting(rf"az{_ARG}login(?:{_FLAG}){{0,5}}?{_ARG}-p{_ARG}", r"\w.-")
    + r""")(?(sq)[^'\r\n]++(?=')|(?(dq)(?:[^"\\\r\n]|\\[^"\r\n])++(?=\\?")|(?=[^\s'";|&<>()-])[^\s'"]++))"""
)
#: Credentials recognised by their own form wherever they stand (free text, a plain key, a
#: traceback): an AWS access key id, GitHub, GitLab (``glpat-...``), npm (``npm_...``), Hugging Face
#: (``hf_...``), OpenAI/Anthropic (``sk-...``, mixed case and digits: not a slug such as
#: ``sk-prod-cluster``), Slack, Stripe and Google API keys, a Slack webhook's path
#: (``T.../B.../...``), a Telegram bot's token (``bot123456789:AA...``), a JWT, a private key's PEM or
#: OpenPGP armoured block (``-----BEGIN RSA PRIVATE KEY-----``, ``-----BEGIN PGP PRIVATE KEY
#: BLOCK-----``: its armour headers, ``Version: ...``, and base64 body, to its END line), and the
#: password a client takes on its command line by a flag of its own (group ``flag``, kept: see
#: _CLIENT_PASSWORD). Each starts with a character of its own and only where a run of token characters
#: starts (see _starting), so a long run is scanned once: linear in the text's length.
_KNOWN_TOKENS = re.compile(
    "|".join(
        (
            _starting(r"A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9_-])"),
            _starting(r"gh[pousr]_[A-Za-z0-9]{36,255}(?![A-Za-z0-9_])"),
            _starting(r"github_pat_[A-Za-z0-9_]{22,255}"),
            _starting(r"glpat-[A-Za-z0-9_-]{20,255}(?:\.[A-Za-z0-9_-]{1,255}){0,4}"),
            _starting(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])"),
            _starting(r"hf_[A-Za-z]{34}(?![A-Za-z0-9_])"),
            _starting(r"sk-(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{32,}"),
            _starting(r"xox[abposr]-[0-9]+-[A-Za-z0-9-]{10,}"),
            _starting(r"sk_(?:live|test)_[A-Za-z0-9]{16,}"),
            _starting(r"rk_(?:live|test)_[A-Za-z0-9]{16,}"),
            _starting(r"T[A-Z0-9]{8,12}/B[A-Z0-9]{8,12}/[A-Za-z0-9]{24}(?![A-Za-z0-9_-])"),  # a Slack webhook's path
            _starting(r"bot[0-9]{5,16}:A[A-Za-z0-9_-]{30,40}(?![A-Za-z0-9_-])"),  # a Telegram bot's, in its API's URL
            _starting(r"AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
            _starting(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[ \t]*(?:\r?\n|(?:\\r)?\\n)[A-Za-z][A-Za-z0-9-]{0,63}:[ \t][^\r\n\\]{0,256})*"  # armour headers, as lines or escaped
            r"[A-Za-z0-9+/=\s\\]{16,}(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----)?",
            _CLIENT_PASSWORD,
        )
    )
)


def _known_token(found: re.Match[str]) -> str:
    """A credential of a known form as shown: masked, a client's name and flag before its password kept
    (``mysql -u root -p[REDACTED]``, see _client_password)."""
    flag = found.group("flag")
    if flag is None:
        return REDACTED
    end = _client_password(found)[1]
    return f"{flag}{REDACTED}{found.string[end : found.end()]}"


def _client_password(found: re.Match[str]) -> tuple[int, int]:
    """Where the password of a client's flag found by _CLIENT_PASSWORD stands: a quoted one to its closing quote
    (kept), an unquoted one without the text's closing bracket or quote after it (see _word_end)."""
    start = found.end("flag")
    if found.group("sq") or found.group("dq"):
        return start, found.end()
    return start, _word_end(found.string, start, found.end())


_CLIENT = re.compile(_CLIENT_PASSWORD)
#: The clients _CLIENT_PASSWORD names, looked for first (in any word: ``sh -c "az login ..."`` is one).
_CLIENTS = ("mysql", "mariadb", "redis-cli", "sshpass", "openssl", "az")
_LINE_BREAKS = str.maketrans("\r\n", "__")


def _command_passwords(items: Iterable[Any]) -> dict[int, list[tuple[int, int]]]:
    """Where the passwords of a client's own flags stand in a command given as a list of its words (the first
    100: ``["mysql", "-uroot", "-phunter2"]``, ``["redis-cli", "-a", "..."]``), by item: the words (strings; the
    first 8,000 characters of each, as text is read) joined by spaces are read as a command line in text is
    (_CLIENT_PASSWORD), so that a list is masked as its command line and its repr are. Only a list with a flag is read."""
    words = [
        str.__str__(item)[: _SCAN * _MAX_TEXT] if isinstance(item, str) else "" for item in itertools.islice(items, _MAX_ITEMS)
    ]
    if len(words) < 2 or not any(word[:1] == "-" for word in words):
        return {}
    if not any(any(client in word for client in _CLIENTS) for word in words):
        return {}  # (no client named: the pattern is not run over what may be 800 KB of words)
    line = " ".join(words).translate(_LINE_BREAKS)  # (a word with a line break is one word, as in its repr: "a\\nb")
    starts = list(itertools.accumulate((len(word) + 1 for word in words[:-1]), initial=0))
    found: dict[int, list[tuple[int, int]]] = {}
    for match in _CLIENT.finditer(line):
        low, high = _client_password(match)
        index = bisect.bisect_right(starts, low) - 1
        while index < len(words) and starts[index] < high:  # (a quoted password may span words: -p'a b')
            start = starts[index]
            span = (max(low, start) - start, min(high, start + len(words[index])) - start)
            if span[0] < span[1]:
                found.setdefault(index, []).append(span)
            index += 1
    return found


def _command_masked(items: Iterable[Any]) -> list[Any] | None:
    """The first 100 ``items`` with the passwords :func:`_command_passwords` finds masked (``"-p[REDACTED]"``), or
    None when there are none."""
    found = _command_passwords(items)
    if not found:
        return None
    masked = list(itertools.islice(items, _MAX_ITEMS))
    for index, spans in found.items():
        word, done = str.__str__(masked[index]), 0
        parts: list[str] = []
        for low, high in spans:
            parts += (word[done:low], REDACTED)
            done = high
        masked[index] = "".join(parts) + word[done:]
    return masked


# The shortest credential _KNOWN_TOKENS finds that is a plain identifier (an AWS access key id, 20
# characters): a shorter name is shown as it is without a search.
_SHORTEST_NAME_TOKEN = 20
# A bearer token standing alone (``Bearer eyJ...`` in a header's value, a curl command, prose), its
# scheme kept: a token68 of 8 characters or more with a digit in it, or of 20 or more ("the bearer
# of the note", "bearer authentication" are words).
_BEARER = re.compile(r"(?i)(?<![A-Za-z0-9_-])(bearer[ \t]+)(?:(?=[\w.~+/-]*\d)[\w.~+/-]{8,}|[\w.~+/-]{20,})=*(?![\w.~+/=-])")
# A name/value pair's name field, then a secret's name as its value, in text (a JSON or repr
# object the model sent cut short, a logged structure): "name": "Authorization", 'Key': 'X-Api-Key',
# name='X-Api-Key' (a keyword argument, in a call-like repr: Header(name='X-Api-Key', value=...));
# its object's value field (_PAIR_VALUE), before or after it, is masked.
_PAIR_NAME = re.compile(  # (the lookahead first: a quick test at each character)
    r"""(?i)(?=[\\'"nkp])(?:(\\?['"])(?:name|key|parameter[_-]?key)\1[ \t]*(?:=>|[:=])|(?<![\w.-])(?:name|key|parameter[_-]?key)=)"""
    r"""[ \t]*(\\?['"])([^'"\\\r\n]{1,100})\2"""
)
_PAIR_VALUE = re.compile(
    r"""(?i)(?=[\\'"vp])(?:(\\?['"])(?:value|parameter[_-]?value)\1[ \t]*(?:=>|[:=])|(?<![\w.-])(?:value|parameter[_-]?value)=(?![=>]))[ \t]*"""
)
# A YAML name/value pair: "name: DB_PASSWORD" then "value: ..." on the next line, or the reverse (a list
# item's "- " before the first); the name plain or quoted, the value (group "value" starts it) to the end of its line.
_YAML_NAME = r"""(?:name|key|parameter[_-]?key):[ \t]+(['"]?)(?P<name{0}>[^'"\r\n]{{1,100}}?)\{1}[ \t]*"""
_YAML_VALUE = r"""(?:value|parameter[_-]?value):[ \t]*(?P<value{0}>)"""
_YAML_PAIR = re.compile(
    r"""(?im)^[ \t]*(?:-[ \t]+)?"""
    rf"""(?:{_YAML_NAME.format(1, 1)}\r?\n[ \t]*{_YAML_VALUE.format(1)}|{_YAML_VALUE.format(2)}[^\r\n]*\r?\n[ \t]*{_YAML_NAME.format(2, 5)}$)"""
)
_LINE_VALUE = re.compile(r"[^\r\n]*(?<![ \t])")
# A JSON string, to its closing quote (group 2) if it has one on its line: each is read once, its escapes whole.
_JSON_STRING = re.compile(r'"((?:[^"\\\r\n]++|\\.)*+)("?)')
# The next "{", "}", "(" or ")" outside a quoted string (a quote without its closing one on its line is
# text; a string with a backslash is read as text, so that JSON escaped in a string shows its braces):
# each character is read at most twice, each string once.
_BRACKET = re.compile(r"""(?:[^{}()"']++|"[^"\\\n]*+"|'[^'\\\n]*+'|["'])*+(?:([{(])|([})])|\Z)""")
_PAIR_REACH = 512  # characters searched either side of a pair's name for its object's value field
_MAX_TEXT = 2000
_SCAN = 4  # text searched for user-info and keys: what is shown (times this) as a margin, whatever came
_MAX_ITEMS = 100  # entries shown per container: what is logged stays small whatever came
_MAX_SHOWN = 16_384  # characters shown of one value, containers and all (about its JSON size)
_MAX_NAME = 200  # characters shown of a mapping key, an argument name or a call id
# The characters of a number's text (repr of an int or a float: -12, 1.5e-07, inf, nan): a secret value of others is in none
_NUMBER_TEXT = re.compile(r"[0-9.e+-]+|[-+]?(?:in|inf|nf|n|na|nan|an|i|a|f)", re.IGNORECASE)
_LONGEST_NAME = 1024  # a longer key names no field: its value is masked (see Redactor.is_secret)
_NFKC_GROWTH = 18  # the most characters NFKC makes of one (U+FDFA)
_MAX_PAIR = 8  # keys of a mapping read as a name/value pair: {"name": "API_TOKEN", "value": ..., "masked": true, ...}
# (the name's field, the value's field), lower case without separators: HAR headers and Kubernetes env
# entries, AWS tags and SSM parameters ("Key"/"Name", "Value"), CloudFormation parameters
_PAIR_FIELDS = (("name", "value"), ("key", "value"), ("parameterkey", "parametervalue"))
# Terminal controls (C0, DEL, C1) and the Unicode line and paragraph separators: escaped in a shown name
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Those but line feeds and tabs (a text keeps its lines): escaped in every text shown
_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _word_end(text: str, start: int, end: int) -> int:
    """The end of the unquoted value ``text[start:end]`` (a run without whitespace): without a
    trailing "," or ";", nor a closing bracket or quote it did not open. Linear: one count of each
    kind met (an opener is never cut: counted when its closer is first met, it is as many as at first)."""
    if text[end - 1] not in _TRAILING:
        return end
    count: dict[str, int] = {}
    while end - 1 > start and (char := text[end - 1]) in _TRAILING:
        opener = _OPENER.get(char)
        if char not in count and char not in ",;":
            count[char] = text.count(char, start, end)
            if opener is not None:
                count[opener] = text.count(opener, start, end)
        if opener is not None:
            if count[char] <= count[opener]:
                break
            count[char] -= 1
        elif char in "'\"":
            if count[char] % 2 == 0:
                break
            count[char] -= 1
        end -= 1
    return end


def _items(given: Iterable[str], what: str) -> tuple[str, ...]:
    """A string is one item (``secret_values="hunter2"``), not its characters; anything but strings is a
    ``TypeError`` naming ``what`` (a number among the keys failed later, as an ``AttributeError``)."""
    if isinstance(given, str):
        return (given,)
    try:
        items = tuple(given)
    except TypeError:
        raise TypeError(f"{what} must be a string or an iterable of strings, not {type(given).__name__} {given!r}") from None
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{what} must be strings, not {type(item).__name__} {item!r}")
    return items


_CLOSER = {"{": "}", "[": "]"}


def _closing(text: str, start: int) -> int | None:
    """The end of the JSON-like object or array opening at ``start``, or None when it never closes.

    Brackets match by kind (a stray ``}`` in an array is text); a quote starts a string only when
    it closes later on (an apostrophe in ``it's`` is text). Linear in what it reads.
    """
    expected: list[str] = []
    unclosed = ""  # quote characters with no closing one left: text from here on
    i, size = start, len(text)
    while i < size:
        char = text[i]
        if char in _CLOSER:
            expected.append(_CLOSER[char])
        elif expected and char == expected[-1]:
            expected.pop()
            if not expected:
                return i + 1
        elif char in "'\"" and char not in unclosed:
            end = text.find(char, i + 1)
            while end != -1 and text[end - 1] == "\\":  # an escaped quote (an escaped backslash before it is rare)
                end = text.find(char, end + 1)
            if end == -1:
                unclosed += char  # (searched to the end once: the scan stays linear)
            else:
                i = end
        i += 1
    return None


def _owners(text: str, points: list[int], low: int, high: int, owners: dict[int, int], closes: dict[int, int]) -> None:
    """For each of the ascending ``points`` in ``text[low:high]``, where the innermost object or call
    around it opens (its ``{`` or ``(``; ``low - 1`` for none in reach) into ``owners``, and where each
    object that closes does (its ``}`` or ``)``) into ``closes``.

    Brackets match by kind; a closing one that matches none open is text, and one that matches an
    outer one closes those inside it too (an unclosed ``(`` in a JSON object). Brackets in a quoted
    string are its own (see _BRACKET). One pass: linear in the length read.
    """
    stack: list[int] = []
    braces = parens = 0  # of each kind, how many are open
    index, count = bisect.bisect_left(points, low), bisect.bisect_left(points, high)
    for found in _BRACKET.finditer(text, low, high):
        kind = found.lastindex
        if kind is None:
            break
        at = found.end() - 1
        while index < count and points[index] < at:
            owners[points[index]] = stack[-1] if stack else low - 1
            index += 1
        if kind == 1:
            stack.append(at)
            if text[at] == "{":
                braces += 1
            else:
                parens += 1
        elif braces if text[at] == "}" else parens:
            opener = "{" if text[at] == "}" else "("
            while True:  # (each bracket is pushed once and popped once)
                inner = stack.pop()
                if text[inner] == "{":
                    braces -= 1
                else:
                    parens -= 1
                if text[inner] == opener:
                    closes[inner] = at
                    break
    for point in points[index:count]:
        owners[point] = stack[-1] if stack else low - 1


def _normal(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", _nfkc(key).lower())


def _nfkc(name: str) -> str:
    """``name`` NFKC-normalised (a full-width ``PASSWORD``, U+FF30 U+FF21 ..., is ``PASSWORD``); ASCII as it is.

    A name whose normal form is longer than ``_LONGEST_NAME`` characters (a character may become 18: U+FDFA)
    is normalised only until it is, 64 characters at a time: what comes back is longer than that bound,
    and names no field (``Redactor.is_secret``). The work is bounded by the bound, not by the expansion.
    """
    if name.isascii() or unicodedata.is_normalized("NFKC", name):
        return name
    if len(name) * _NFKC_GROWTH > _LONGEST_NAME:
        pieces: list[str] = []
        size = 0
        for low in range(0, len(name), 64):
            pieces.append(unicodedata.normalize("NFKC", name[low : low + 64]))
            size += len(pieces[-1])
            if size > _LONGEST_NAME:
                return "".join(pieces)
    return unicodedata.normalize("NFKC", name)


def _field(key: str) -> str:
    """A field name lower case, without the usual separators (``Parameter_Key`` is ``parameterkey``)."""
    return key.lower().replace("_", "").replace("-", "")


def _name_of(key: Any) -> str:
    """A mapping key that is not a string as text: an integer of 3000 bits or more by its size (``str``
    refuses past 4300 digits, and is slow well before), a key whose ``__str__`` fails by its type."""
    if isinstance(key, int) and key.bit_length() >= 3000:
        return f"<integer of {key.bit_length()} bits>"
    try:
        return str(key)
    except Exception:
        return _placeholder(key)


def _placeholder(value: Any) -> str:
    """What shows for a value that cannot be shown: its type's name, ``<BadMapping>``."""
    return f"<{type(value).__name__}>"


# Collections walked as lists (the first items shown): sequences and sets of any type, a deque, dict
# views; not text, bytes, a range (its repr is short) nor a memoryview.
_WALKED = (Sequence, Set, KeysView, ValuesView, ItemsView)
_NOT_WALKED = (str, bytes, bytearray, memoryview, range, UserString)


def _escaped(found: re.Match[str]) -> str:
    """A control character as its escape: ``\\x1b``, ``\\u2028``."""
    return ascii(found.group())[1:-1]


_MAX_WALK = 1000  # values looked at for secrets per call (a model's huge arguments: bounded work)
#: The shortest text under a secret key masked where a failure's text quotes it: the values come from the model,
#: and masking "a" or "3" would let it blank out any letter or number of that text.
_SHORTEST_SECRET = 4
_LISTS = (list, tuple, set, frozenset)
_ITERS: tuple[tuple[type[Any], Callable[[Any], Iterator[Any]]], ...] = tuple((kind, kind.__iter__) for kind in _LISTS)
#: The types of a value that holds no other: one that is no secret is not looked at again.
_PLAIN = frozenset((str, int, float, bool, type(None)))


def _held(redactor: Redactor, *values: Any) -> list[str]:
    """The texts ``values`` (a call's arguments, its context) hold where ``redactor`` masks them in a structure
    (see :meth:`Redactor.__call__`): under a secret key, at any depth; the second item of a ``(name, value)`` pair
    naming one, the ``value`` of a ``{"name": ..., "value": ...}`` pair naming one; a list's item after a flag
    naming one (``["--password", ...]``) and the password of one after ``-u``. Strings and numbers (their text),
    of at least :data:`_SHORTEST_SECRET` characters; the first 1,000 values. Never raises: a mapping whose reading fails ends the walk (what was found is kept)."""
    found: list[str] = []
    stack: list[tuple[Any, bool]] = [(value, False) for value in reversed(values)]
    budget = _MAX_WALK
    try:
        while stack and budget:
            value, secret = stack.pop()
            budget -= 1
            if isinstance(value, str):  # (below the top, only a secret one is put on the stack)
                if secret and str.__len__(value) >= _SHORTEST_SECRET:
                    found.append(str.__str__(value))  # (a plain str: a subclass's own methods are not called)
                continue
            if isinstance(value, int | float) and not isinstance(value, bool):
                if secret and not (isinstance(value, int) and value.bit_length() >= 3000):  # (no text past 4,300 digits)
                    text = int.__repr__(value) if isinstance(value, int) else float.__repr__(value)
                    if len(text) >= _SHORTEST_SECRET:
                        found.append(text)
                continue
            if isinstance(value, tuple) and isinstance(fields := getattr(value, "_fields", None), tuple):
                value = dict(zip(fields, tuple.__iter__(value), strict=False))  # a named tuple: its names say what is secret
            if isinstance(value, dict) or (not isinstance(value, _LISTS) and isinstance(value, Mapping)):
                items = dict.items(value) if isinstance(value, dict) else value.items()  # (a dict subclass's items() not called)
                named = None if secret else redactor._named_secret(value)  # {"name": "X-Api-Key", "value": ...}
                for key, item in itertools.islice(items, budget):
                    hidden = (
                        secret or redactor.is_secret(key) or (named is not None and isinstance(key, str) and _field(key) == named)
                    )
                    if hidden or type(item) not in _PLAIN:  # (a value that is no secret and holds none: not put there)
                        stack.append((item, hidden))
            elif isinstance(value, _LISTS):
                walk = next(walk for kind, walk in _ITERS if isinstance(value, kind))  # (a subclass's own __iter__ not called)
                listed = list(itertools.islice(walk(value), budget))
                pair = isinstance(value, list | tuple) and len(listed) == 2 and isinstance(listed[0], str)
                if not secret and pair and redactor.is_secret(listed[0]):
                    stack.append((listed[1], True))  # a pair: [("Authorization", "Bearer ...")]
                    continue
                if not secret and isinstance(value, list | tuple):  # a command: ["mysql", "-uroot", "-p..."]
                    for index, spans in _command_passwords(listed).items():
                        stack += ((str.__str__(listed[index])[low:high], True) for low, high in spans)
                flag = user = False  # the item before names a secret (["--password", ...]), or is ["-u", "bob:pw"]
                for item in listed:
                    if user and isinstance(item, str) and ":" in item and item[:1] != "+":
                        password = item.partition(":")[2]
                        if password[:2] != "//":  # (a URL, whose user-info text masking finds)
                            stack.append((password, True))
                    hidden = secret or (flag and isinstance(item, str))
                    if hidden or type(item) not in _PLAIN:
                        stack.append((item, hidden))
                    flag = isinstance(item, str) and item[:1] == "-" and "=" not in item and redactor._flag(item)
                    user = isinstance(item, str) and item in _USER_FLAGS
    except Exception:  # a mapping whose items(), a named pair's fields or a hostile key's text fail: what was found
        pass
    return found


#: A word character as ``\w`` reads one (a Unicode letter or digit, ``_``): what a held text's token has not beside it.
_WORD_CHARACTER = re.compile(r"\w")


def _token_at(text: str, value: str, start: int, stop: int) -> int:
    """Where ``value`` first stands in ``text`` as a whole token (no word character either side), starting at
    ``start`` or after and before ``stop``; -1 where it does not."""
    end = stop + len(value) - 1  # (an occurrence that starts before ``stop`` ends before it)
    while (at := text.find(value, start, end)) >= 0:
        after = at + len(value)
        if not (at and _WORD_CHARACTER.match(text, at - 1, at)) and not _WORD_CHARACTER.match(text, after, after + 1):
            return at
        start = at + 1
    return -1


def mask_held(text: str, held: Sequence[str], shown: int) -> str:
    """``text`` with each ``held`` text (a failed call's secret values, :meth:`Redactor.held`) masked where it
    stands as a whole token (no word character either side: ``port 54321`` keeps its digits for a held
    ``5432``, ``web_search`` its ``search``), as far as the first ``shown`` characters of the result are
    concerned: an occurrence starting within them is masked whole (the longest where two start there), so a
    cut there leaves no part of one. Each held text is searched for (``str.find``, no pattern built) only where
    such an occurrence can stand: the work is bounded by the number of held texts times ``shown`` (and the
    length of what is masked), not by their sizes; one longer than ``text`` is not searched for."""
    values = sorted({value for value in held if 0 < len(value) <= len(text)}, key=len, reverse=True)
    found: list[tuple[int, int]] = []  # a heap of (start, index): where a value next stands (the longest first)
    waiting = list(range(len(values)))  # the values standing nowhere from ``done`` up to ``read``
    read = 0
    parts: list[str] = []
    done = size = 0  # text[done:] is not in parts; size: the characters in parts
    while size < shown:
        limit = min(done + shown - size, len(text))  # an occurrence starting before it is shown
        if limit > read:  # (at first; then as masking shortens the text) search on, a quarter of ``shown`` ahead
            start, read = max(read, done), min(max(limit, read + shown // 4), len(text))
            searched, waiting = waiting, []
            for i in searched:
                if (at := _token_at(text, values[i], start, read)) < 0:
                    waiting.append(i)
                else:
                    heapq.heappush(found, (at, i))
        while found and found[0][0] < done:  # masked over (within a longer one, or its own): search on from there
            i = heapq.heappop(found)[1]
            if (at := _token_at(text, values[i], done, read)) < 0:
                waiting.append(i)
            else:
                heapq.heappush(found, (at, i))
        if not found or found[0][0] >= limit:
            break
        first, i = found[0]
        parts += (text[done:first], REDACTED)
        size += first - done + len(REDACTED)
        done = first + len(values[i])
    return "".join(parts) + text[done:] if parts else text


class Redactor:
    """Replaces secrets in a value: values under secret keys (in mappings, in ``(key, value)`` pairs
    and after key names in text), URL user-info, and given secret values.

    Args:
        keys: secret key names (default :data:`SECRET_KEYS`).
        extra_keys: more key names, added to ``keys``.
        values: exact secret strings (API keys, passwords) masked wherever they appear in text,
            as given and JSON-escaped (``Tr0ub\\"4dor``, ``contrase\\u00f1a``).
        query_keys: names secret as query parameters only (default :data:`QUERY_SECRET_KEYS`).
    """

    def __init__(
        self,
        keys: Iterable[str] = SECRET_KEYS,
        *,
        extra_keys: Iterable[str] = (),
        values: Iterable[str] = (),
        last_words: bool = False,
        query_keys: Iterable[str] = QUERY_SECRET_KEYS,
    ) -> None:
        keys, extra_keys = _items(keys, "secret keys"), _items(extra_keys, "extra secret keys")
        values = _items(values, "secret values")
        self._query = frozenset(_normal(k) for k in _items(query_keys, "query secret keys"))
        words = {_normal(k) for k in (*keys, *extra_keys) if _normal(k)}
        self._long = tuple(sorted(w for w in words if len(w) >= 5))
        self._short = frozenset(w for w in words if len(w) < 5)
        #: The short names that also end a word (``dbpass``, ``userpwd``), each with the words allowed before it (None: any).
        self._suffixes = tuple((w, before) for w, before in _SUFFIXES.items() if w in self._short)
        #: With ``last_words``, a key is secret when its last words are a secret key's words
        #: (``db_password``, ``X-API-Key``, ``access_token``; not ``max_tokens`` nor ``password_file``).
        self._last: tuple[tuple[str, ...], ...] | None = None
        if last_words:
            # (each key in the forms a name is read in: a configured ``license_key_v2`` matches itself)
            self._last = tuple({form for k in (*keys, *extra_keys) for form in _key_words(k)} - {()})
        #: With ``last_words`` and ``password`` among the keys, an environment variable's name (all capitals) is secret
        #: too when its last word ends in a password's name (``PGPASSWORD``, ``SSHPASS``: see _names_password).
        self._env = last_words and "password" in words
        self._given: frozenset[str] = frozenset()
        self._values: tuple[str, ...] = ()
        self._set_values(values)
        self._cache: dict[str, bool] = {}
        self._normals: dict[str, str] = {}  # a secret key name in text, normalised (see _normal)

    def _set_values(self, values: Iterable[str]) -> None:
        """Mask ``values`` too, as given and JSON-escaped: added to those set already (escaped once: :meth:`with_values`)."""
        plain = {v for v in values if v}
        escaped = {json.dumps(v, ensure_ascii=ascii)[1:-1] for v in plain for ascii in (True, False)}
        self._given = self._given | plain  # (for with_values)
        self._values = tuple(sorted({*self._values, *plain, *escaped}, key=len, reverse=True))
        #: The secret values a number's text can hold (digits, a sign, ".", "e", "inf", "nan"): none, and numbers are not read.
        self._numeric = tuple(v for v in self._values if _NUMBER_TEXT.fullmatch(v))

    def with_values(self, values: Iterable[str]) -> Redactor:
        """This redactor with ``values`` masked too, as its own ``values`` are (wherever they appear in text, before
        a text is cut): for a call's held secrets (:meth:`held`) in what logs and spans show of it (its arguments,
        their names, its error, its result). Its key rules and its own
        values are this one's (nothing of them is worked out again); itself when ``values`` adds nothing."""
        added = [v for v in _items(values, "secret values") if v and v not in self._given]
        if not added:
            return self
        other = copy.copy(self)  # (the caches are shared: they depend on the keys only)
        other._set_values(added)
        return other

    def is_secret(self, key: Any) -> bool:
        """Whether a mapping key names a secret (see :data:`SECRET_KEYS` for the matching rule; a
        percent-encoded name is read decoded: ``api%5Fkey`` is ``api_key``)."""
        text = key if isinstance(key, str) else _name_of(key)
        found = self._cache.get(text)
        if found is None:
            if len(text) > _LONGEST_NAME:  # no name: its value is masked, and the key not searched (a model's 4 MB key)
                return True
            name = _nfkc(unquote(text) if "%" in text else text)
            if len(name) > _LONGEST_NAME:  # as long once normalised (U+FDFA is 18 characters): no name either
                found = True
            elif self._last is not None:
                found = any(
                    any(words[-len(last) :] == last for last in self._last)
                    or bool(words and self._ends_word(words[-1]))
                    or bool(self._env and words and name.isupper() and _names_password(words[-1]))
                    for words in _key_words(name)
                )
            else:  # (a long name matches inside longer keys: passwords, password2; a short one as a word: pins, pw2)
                joined = _normal(name)
                tokens = set(itertools.chain.from_iterable(_key_words(name)))
                found = (
                    any(w in joined for w in self._long)
                    or bool(tokens & self._short)
                    or joined in self._short
                    or any(self._ends_word(token) for token in tokens)
                )
            if len(self._cache) < 4096:
                self._cache[text] = found
        return found

    def _normal(self, name: str) -> str:
        """A secret key name met in text (at most 100 characters), normalised once: lower case, its letters and
        digits only (``Proxy-Authorization`` is ``proxyauthorization``)."""
        normal = self._normals.get(name)
        if normal is None:
            normal = _normal(name)
            if len(self._normals) < 4096:
                self._normals[name] = normal
        return normal

    def _ends_word(self, token: str) -> bool:
        """Whether a word of a key's name ends in a short secret name that may end one: ``dbpass``, ``userpwd``, ``totp``."""
        for short, before in self._suffixes:
            if len(token) > len(short) and token.endswith(short) and (before is None or token[: -len(short)] in before):
                return True
        return False

    def text(self, value: str, limit: int = _MAX_TEXT) -> str:
        """``value`` masked as :meth:`mask` masks it, cut to ``limit`` characters (and a marker), its
        terminal control characters but line feeds and tabs as escapes (``\\x1b``, ``\\r``), and
        valid UTF-8: a lone surrogate (``os.fsdecode`` of a non-UTF-8 name, a model's half emoji
        ``"\\ud83d"`` read by ``json.loads``) is shown as its escape, ``\\ud83d``, so that a log
        renderer or a trace exporter encoding the text does not fail (:meth:`escape_surrogates`)."""
        value = self._without_values(value)  # whole: a cut could leave part of a secret value to show
        return self._cut(value, limit, len(value))

    def _cut(self, value: str, limit: int, size: int) -> str:
        """:meth:`text` of ``value`` (its secret values masked), ``size`` characters long as given."""
        scan = _SCAN * limit
        value = escape_surrogates(
            self._mask_structure(value[:scan] if len(value) > scan else value)
        )  # escaped, then cut: within limit
        if not value.isprintable():  # terminal controls: a console renderer would run them (ESC, CR, BS)
            value = _TERMINAL.sub(_escaped, value)
        if size > limit or len(value) > limit:
            value = f"{value[:limit]}... ({size} characters)"
        return value

    #: ``Redactor.escape_surrogates(text)``: ``text`` with each lone surrogate as its backslash escape
    #: (``\\ud83d``), valid UTF-8, masked in no other way: for a text shown without redaction (an
    #: error's type name) by the one rule of logs and traces.
    escape_surrogates = staticmethod(escape_surrogates)

    def mask(self, value: str) -> str:
        """``value`` with secret values, URL user-info and values after secret key names masked
        (``key=v``, ``key: v``, ``'key': 'v'``, ``('key', 'v')``, ``Authorization: Bearer v``), whole.

        Linear in the text's length, but about 0.2 us a character: bound what is given.
        """
        return self._mask_structure(self._without_values(value))

    def held(self, *values: Any) -> list[str]:
        """The texts ``values`` (a call's arguments, its context) hold where this redactor masks them in a
        structure: under a secret key, in a pair or a name/value object naming one, after a flag naming one; at
        least 4 characters, the first 1,000 values; never raises. For a failure's text or a result, which may quote
        them where the arguments show them masked: what the ``logging`` and ``otel`` plugins mask by value (the
        error the model reads masks the model's where its tool's exception quotes them whole: :func:`mask_held`)."""
        return _held(self, *values)

    def mask_json(self, text: str, limit: int = _SCAN * _MAX_TEXT) -> str:
        """Arguments refused as no valid JSON, ``text``, as logs and traces show them: the first ``limit``
        characters (by default all :meth:`text` reads of a value) masked by this redactor's keys as the refusal's excerpt is (a secret name with its colon left
        out, ``{"passwd" "..."}``, which the text rules do not read), every JSON-escaped string that decodes to a
        secret's name shown decoded first (``"pass\\u0077ord"`` as ``"password"``), for every rule to read it."""
        from ._arguments import masked_json  # (it imports this module)

        head = text[:limit]
        return masked_json(self._decoded_names(head) if "\\" in head else head, self, limit)

    def _decoded_names(self, text: str) -> str:
        """``text`` with each closed JSON string holding an escape (of at most 600 characters) that decodes to a
        secret key's name (:meth:`is_secret`, at most 100 characters, printable, without a quote or a backslash)
        as that name; any other as it is. Linear: each string is read once."""
        parts: list[str] = []
        done = 0
        for found in _JSON_STRING.finditer(text):
            body = found.group(1)
            if not found.group(2) or "\\" not in body or len(body) > 600:
                continue
            try:
                name = json.loads(f'"{body}"')
            except ValueError:  # an escape JSON has not (\q): as it is
                continue
            if len(name) <= 100 and name.isprintable() and '"' not in name and "\\" not in name and self.is_secret(name):
                parts += (text[done : found.start()], f'"{name}"')
                done = found.end()
        return "".join(parts) + text[done:] if parts else text

    def _holds_value(self, number: float) -> bool:
        """Whether a number's text (``repr`` of an integer of under 3,000 bits or of a float, the type's own:
        a subclass's ``__repr__`` is not called) holds a secret value, as that text would be masked."""
        shown = int.__repr__(number) if isinstance(number, int) else float.__repr__(number)
        return any(secret in shown for secret in self._numeric)

    def _without_values(self, value: str) -> str:
        for secret in self._values:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def _mask_structure(self, value: str) -> str:
        """Credentials of a known form, URL user-info and the values after secret key names masked."""
        value = _KNOWN_TOKENS.sub(_known_token, value)
        if "earer" in value or "EARER" in value:
            value = _BEARER.sub(rf"\1{REDACTED}", value)
        if "</" in value or "<\\/" in value or "/>" in value:
            value = self._xml_elements(value)
        if "-u" in value or "-U" in value:
            value = _USER_FLAG.sub(_user_flag, value)
        if (
            ":" in value or "=" in value or "," in value or "-" in value
        ):  # every user-info and key separator holds one (a flag's "-")
            if "alue" in value or "ALUE" in value:  # (a pair's value field, any case)
                value = self._mask_pairs(value)
            value = _without_bare_userinfo(self._mask_keyed(without_userinfo(value)))
        return value

    def _xml_elements(self, text: str) -> str:
        """``text`` with the text of each XML element naming a secret masked: its tag (``<password>``,
        ``<ns:Password>``) or its ``name`` or ``key`` attribute (``<entry name="password">``, ``<add
        key="ApiToken">``) names one; its text runs to the first "<" not opening a CDATA section, which
        must start an end tag (``</password>``, ``<\\/password>``, ``</ns:password>``, one cut short with
        the text, ``</pass``: any, as a secret's text is masked whatever ends it). The value a secret's element holds
        otherwise is masked too: its ``value`` attribute (``<password value="...">``), the text of the
        element it holds first (``<Password><string>...</string></Password>``), and the text of the
        element after a ``<key>`` or ``<name>`` element naming a secret (a plist's
        ``<key>password</key><string>...</string>``).

        Linear: a start tag is read once; an element's text is read from its start tag to the first "<"
        (the texts of two elements never overlap there), a CDATA section's end is found by a binary search
        over the text's "]]>"s, found once, and where the text after a CDATA section ends is remembered, so
        that the rest of the text is read once whatever number of elements reach it.
        """
        parts: list[str] = []
        done = 0
        closes: list[int] | None = None  # where each "]]>" starts, found when a CDATA section is first met
        after: dict[int, int] = {}  # the end of an element's text from just after a CDATA section: its "<", or -1
        held = -1  # where the start tag of an element holding a secret's value stands (after <key>password</key>)
        for start in _XML_START.finditer(text):
            if start.start() < done:
                continue
            attributes = start.group("attributes")
            named = self.is_secret(start.group("name")) or (
                attributes is not None and any(self.is_secret(name.group(2)) for name in _XML_NAME.finditer(attributes))
            )
            if start.start() != held and not named:
                first = text.find("<", start.end(), start.end() + 101)
                if first >= 0 and start.group("name").lower() in ("key", "name"):
                    closing = _XML_END.match(text, first)  # <key>password</key>: the next element holds its value
                    key = text[start.end() : first].strip()
                    if closing is not None and closing.group("tag") == start.group("tag") and key and self.is_secret(key):
                        held = _BLANK.match(text, closing.end()).end()  # type: ignore[union-attr]  # (always matches)
                continue
            if attributes is not None and "alue" in attributes:  # <password value="...">
                value = _XML_VALUE.search(attributes)
                if value is not None:
                    low = start.start("attributes") + value.start(2)
                    parts += (text[done:low], REDACTED)
                    done = start.start("attributes") + value.end(2)
            if start.group("name").lower() in _VOID or (
                text[start.end() - 2] == "/"
                and not (attributes is not None and (attributes.count('"') % 2 or attributes.count("'") % 2))
            ):
                continue  # <password/>, <input name="password">: no text, and the next element is not its (not value="/>...)
            first = text.find("<", start.end())
            position, passed, end = start.end(), [], first
            while end >= 0 and text.startswith("<![CDATA[", end):
                if closes is None:
                    closes = [close.start() for close in _CDATA_CLOSE.finditer(text)]
                index = bisect.bisect_left(closes, end + 9)
                if index == len(closes):
                    end = -1
                    break
                position = closes[index] + 3
                if position in after:
                    end = after[position]
                    break
                passed.append(position)
                end = text.find("<", position)
            for position in passed:
                after[position] = end
            if end < 0:
                continue
            if end == first and not text[start.end() : end].strip():  # no text: its value is the first element in it
                if named and text[end + 1 : end + 2] not in ("/", "\\", "!", "?"):
                    held = end  # (one level: the element held holds none)
                continue
            if not text.startswith(("</", "<\\/"), end):  # an end tag: its own, another's, or one cut short (</pass)
                continue
            parts += (text[done : start.end()], REDACTED)
            done = end
        return "".join(parts) + text[done:] if parts else text

    def _mask_pairs(self, text: str) -> str:
        """``text`` with the value field of each name/value pair of a secret masked: ``{"name":
        "Authorization", "value": "..."}`` as text (JSON cut short, a repr, ``Header(name='X-Api-Key',
        value='...')``), as :meth:`_named_secret` masks it in a mapping, and a YAML pair on two lines
        (``- name: DB_PASSWORD`` then ``value: ...``, its value to the end of its line). The pair's value
        field is the first after the name, else the last before it, in the object around the name (the
        innermost ``{...}`` or ``(...)``, brackets matched, a nested object's fields not its), within 512
        characters of the name. Each field and bracket is found once, in one pass, and paired by a
        binary search: linear in the text's length."""
        starts: dict[int, bool] = {}  # where a value to mask starts: True for a YAML value, to the end of its line
        for found in _YAML_PAIR.finditer(text) if "\n" in text else ():
            if self.is_secret(found.group("name1") or found.group("name2")):
                starts[found.end("value1") if found.group("name1") else found.end("value2")] = True
        names = [found for found in _PAIR_NAME.finditer(text) if self.is_secret(found.group(3))]
        fields = list(_PAIR_VALUE.finditer(text)) if names else []
        if fields:
            owners: dict[int, int] = {}
            closes: dict[int, int] = {}
            points = sorted([name.start() for name in names] + [field.start() for field in fields])
            begin = stop = 0  # brackets are read within reach of a name only: each part of the text once
            for name in names:
                if name.start() - _PAIR_REACH > stop:
                    _owners(text, points, begin, stop, owners, closes)  # (the points outside are no name's)
                    begin = name.start() - _PAIR_REACH
                stop = min(name.end() + _PAIR_REACH, len(text))
            _owners(text, points, begin, stop, owners, closes)
            siblings: dict[int, list[int]] = {}  # the value fields of each object (by its opening bracket): where each starts
            for field in fields:
                if (owner := owners.get(field.start())) is not None:  # (none: no name's in reach)
                    siblings.setdefault(owner, []).append(field.start())
            ends = {field.start(): field.end() for field in fields}  # where each field's value starts
            for name in names:
                owner = owners[name.start()]
                low = max(owner, name.start() - _PAIR_REACH)
                high = min(closes.get(owner, len(text)), name.end() + _PAIR_REACH)
                near = siblings.get(owner, [])
                after = bisect.bisect_left(near, name.end())
                if after < len(near) and near[after] < high:
                    starts.setdefault(ends[near[after]], False)
                elif after > 0 and near[after - 1] > low:
                    starts.setdefault(ends[near[after - 1]], False)
        parts: list[str] = []
        done = 0
        for start in sorted(starts):
            if start < done:
                continue
            if starts[start] and text[start : start + 1] not in ("'", '"', "{", "["):
                line = _LINE_VALUE.match(text, start)
                value = None if line is None or line.end() == start else (line.end(), REDACTED)
            else:
                value = self._value_at(text, start)
            if value is not None:
                parts += (text[done:start], value[1])
                done = value[0]
        return "".join(parts) + text[done:] if parts else text

    @staticmethod
    def _value_at(text: str, start: int) -> tuple[int, str] | None:
        """The end of the value at ``text[start:]``, and what shows instead: quoted, an object or array
        (all of it), or a word (see _TEXT_VALUE)."""
        if text[start : start + 1] in ("{", "[") and not text.startswith(REDACTED, start):
            end = _closing(text, start)
            return (len(text), text[start] + REDACTED) if end is None else (end, text[start] + REDACTED + text[end - 1])
        found = _TEXT_VALUE.match(text, start)
        if found is None:
            return None
        quote, closing, escaped, escaped_closing, scheme = found.group(1, 2, 3, 4, 5)
        if quote:  # (bytes keep their b: b'[REDACTED]')
            return found.end(), f"{text[start] if text[start] == 'b' else ''}{quote}{REDACTED}{closing or ''}"
        if escaped:
            return found.end(), f"{escaped}{REDACTED}{escaped_closing or ''}"
        return _word_end(text, found.end(5) if scheme else start, found.end()), f"{scheme or ''}{REDACTED}"

    def _mask_keyed(self, text: str) -> str:
        """``text`` with the value after each secret key name masked (linear: values never overlap)."""
        parts: list[str] = []
        done = 0
        for key in _TEXT_KEY.finditer(text):
            name = key.group(2) or key.group(4) or key.group(6)
            if key.start() < done:
                continue
            # a query parameter: after "?" or "&", then "=" and nothing between
            query = text[key.start() - 1 : key.start()] in ("?", "&") and text[key.end() - 1] == "="
            if not self.is_secret(name) and not (query and self._query and _normal(unquote(name)) in self._query):
                continue
            start = key.end()
            if text[start : start + 1] in ("\n", "\r"):  # a quoted, bracketed value on the next line (JSON)
                ahead = _BLANK.match(text, start).end()  # type: ignore[union-attr]  # (always matches; no copy of the rest)
                start = ahead if text[ahead : ahead + 1] in ("'", '"', "{", "[") else start
            if query and text[start : start + 1] not in ("'", '"'):
                found = _QUERY_VALUE.match(text, start)
                if found is not None:
                    parts += (text[done:start], REDACTED)
                    done = found.end()
                continue
            opening = text[start + 1 : start + 2] if text[start : start + 1] == "b" else text[start : start + 1]  # (b'...')
            normal = self._normal(name) if opening not in ("'", '"', "\\", "{", "[") else ""
            if normal.endswith("authorization"):
                # an Authorization header's scheme with parameters (Digest username="bob", response="...",
                # AWS4-HMAC-SHA256 Credential=..., Signature=...): the scheme stays, the rest of the header goes
                found = _AUTH_PARAMS.match(text, start)
                if found is not None:
                    quote = text[key.start() - 1 : key.start()]  # the header quoted whole: -H 'Authorization: ...'
                    rest = _QUOTED_REST.get(quote, _LINE_VALUE).match(text, found.end())
                    parts += (text[done : found.end()], REDACTED)
                    done = rest.end()  # type: ignore[union-attr]  # (always matches)
                    while text[done - 1] in ",;" and (more := _AUTH_MORE.match(text, done)) is not None:
                        done = more.end()  # the header continued on the next line
                    continue
            if normal.endswith("cookie"):
                # a Cookie header's value: every cookie in it, "a=1; sid=...", to the end of the line
                found = _COOKIE_VALUE.match(text, start)
                if found is not None and found.end() > start:
                    parts += (text[done:start], REDACTED)
                    done = _word_end(text, start, found.end())
                continue
            value = self._value_at(text, start)  # an object or array all of it, a quoted value, a word
            if value is not None:
                parts += (text[done:start], value[1])
                done = value[0]
        return "".join(parts) + text[done:] if parts else text

    def key(self, key: Any) -> str:
        """A mapping key (an argument name, a call id, a tool name) as shown: masked like text (cut at 200
        characters, the marker giving its whole length), its terminal control characters and line
        separators as escapes (``\\x1b``, ``\\u2028``: a console renderer shows them raw), unless it is
        a plain name of at most 200 characters, no secret value is set and it is no credential of a
        known form (an ``AKIA...`` key id, a ``ghp_...`` token). A key that is not a string is shown
        as ``str`` shows it, a huge integer by its size and one whose ``__str__`` fails by its type
        (``<BadKey>``): this never raises."""
        text = key if isinstance(key, str) else _name_of(key)
        size = len(text)
        if (
            size <= _MAX_NAME
            and text.isidentifier()
            and not self._values
            and (size < _SHORTEST_NAME_TOKEN or _KNOWN_TOKENS.search(text) is None)
        ):
            return text
        if self._values:
            text = self._without_values(text)
        text = text[: _SCAN * _MAX_NAME]  # cut before it is escaped: the escapes of a 4 MB key are not worked out
        return self._cut(text if text.isprintable() else _CONTROLS.sub(_escaped, text), _MAX_NAME, size)

    def __call__(self, value: Any) -> Any:
        """A copy of ``value`` safe to log: secrets masked, containers walked (the first 100 entries
        of each, the rest counted; a 2-item list or tuple whose first item is a secret key name is a
        pair, its second item masked; in a list, the item after a flag naming a secret key,
        ``["--password", "..."]``; a named tuple's items by their field names), long text cut, odd
        values shown briefly, and the whole cut at about 16,384 characters (the rest counted).

        Never raises an ``Exception``: a container whose ``len``, iteration or keys fail is shown by
        its type (``<BadMapping>``); only an object's own ``__repr__`` is called, and one that hangs
        holds the call up (nothing stops it in-thread)."""
        try:
            return self._shown(value, 0, [_MAX_SHOWN])
        except Exception:  # (each container catches its own: this is the last word)
            return _placeholder(value)

    def _named_secret(self, value: Mapping[Any, Any]) -> str | None:
        """The field of the secret value (``"value"``, compared as :func:`_field` writes a key: every key
        that reads so is masked) if ``value`` is a name/value pair of a secret, else None:
        ``{"name": "Authorization", "value": ...}`` (HTTP headers as HAR and many APIs list them, a
        Kubernetes ``env`` entry, a CI variable with more fields), ``Key``/``Value`` (AWS tags, SSM
        parameters as ``Name``/``Value``), ``ParameterKey``/``ParameterValue`` (CloudFormation). Field
        names match in any case and without separators; a mapping of more than 8 keys is not a pair."""
        try:
            if len(value) > _MAX_PAIR:
                return None
        except Exception:  # (a hostile mapping's __len__)
            return None
        fields: dict[str, list[str]] = {}  # (a list: "value" and "Value" are both the value)
        for k in value:
            if isinstance(k, str):
                fields.setdefault(_field(k), []).append(k)
        for name_field, value_field in _PAIR_FIELDS:
            if value_field in fields and name_field in fields:
                for name in (value[k] for k in fields[name_field]):
                    if isinstance(name, str) and self.is_secret(name):
                        return value_field
        return None

    def _shown(self, value: Any, depth: int, budget: list[int]) -> Any:
        """``value`` as :meth:`__call__` shows it; ``budget[0]``: the characters left to show."""
        if depth > 32:
            return "..."
        if isinstance(value, str):
            text = self.text(value)
            if len(text) > budget[0]:  # the last text shown: cut at what is left (masked first: a cut shows less)
                text = f"{text[: max(budget[0], 0)]}... ({len(value)} characters)"
            budget[0] -= len(text) + 4
            return text
        if value is None or isinstance(value, (int, float)):  # (bool too)
            budget[0] -= 8
            if isinstance(value, int):
                bits = value.bit_length()
                budget[0] -= bits // 3
                if bits >= 3000:
                    return f"<integer of {bits} bits>"
            if self._numeric and value is not None and not isinstance(value, bool):
                try:
                    if self._holds_value(value):
                        return REDACTED  # a secret value given as text, here a number: an account's, a PIN
                except Exception:  # (a subclass of int or float whose value cannot be read)
                    return _placeholder(value)
            return value
        try:  # containers walked, the rest shown briefly; a hostile container (its len, iteration or items fail) by its type
            fields = getattr(value, "_fields", None) if isinstance(value, tuple) else None
            if isinstance(fields, tuple):
                value = dict(zip(fields, value, strict=False))  # a named tuple: its names say what is secret
            if isinstance(value, Mapping):
                shown: dict[str, Any] = {}
                budget[0] -= 4  # its braces, and the separator before it
                named = self._named_secret(value)  # {"name": "Authorization", "value": "..."}: its value is the secret
                for count, (k, v) in enumerate(itertools.islice(value.items(), _MAX_ITEMS)):
                    if budget[0] <= 0:
                        shown["..."] = f"{len(value) - count} more entries"
                        return shown
                    name = self.key(k)
                    if name in shown:  # two keys shown alike (both masked, cut or of one text): neither entry lost
                        name = f"{name} ({count + 1})"
                    budget[0] -= len(name) + 4
                    secret = self.is_secret(k) or (named is not None and isinstance(k, str) and _field(k) == named)
                    shown[name] = REDACTED if secret else self._shown(v, depth + 1, budget)
                if len(value) > _MAX_ITEMS:
                    shown["..."] = f"{len(value) - _MAX_ITEMS} more entries"
                return shown
            if isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], str) and self.is_secret(value[0]):
                budget[0] -= len(value[0]) + len(REDACTED)
                return [self.text(value[0]), REDACTED]  # a key/value pair, as in [("Authorization", "Bearer ...")]
            if isinstance(value, (list, tuple, set, frozenset)) or (
                isinstance(value, _WALKED) and not isinstance(value, _NOT_WALKED)
            ):  # and a deque, dict views, any sequence or set: their first items, never their whole repr
                budget[0] -= 4  # its brackets, and the separator before it
                items: list[Any] = []
                masked = _command_masked(value) if isinstance(value, (list, tuple)) else None  # ["mysql", "-p..."]
                flag = False  # the previous item is a flag naming a secret: ["mysql", "--password", "..."]
                user = False  # the previous item is a client's user flag: ["curl", "-u", "bob:..."]
                for count, item in enumerate(itertools.islice(value, _MAX_ITEMS)):
                    if budget[0] <= 0:
                        items.append(f"... {len(value) - count} more items")
                        return items
                    if user and isinstance(item, str) and ":" in item and item[:1] != "+" and item.partition(":")[2][:2] != "//":
                        items.append(self._shown(f"{item.partition(':')[0]}:{REDACTED}", depth + 1, budget))
                    else:
                        shown_item = item if masked is None else masked[count]
                        items.append(REDACTED if flag and isinstance(item, str) else self._shown(shown_item, depth + 1, budget))
                    flag = isinstance(item, str) and item[:1] == "-" and "=" not in item and self._flag(item)
                    user = isinstance(item, str) and item in _USER_FLAGS  # (no item's own "==": a numpy array's)
                if len(value) > _MAX_ITEMS:
                    items.append(f"... {len(value) - _MAX_ITEMS} more items")
                return items
            budget[0] -= 8
            if isinstance(value, (bytes, bytearray)):
                return f"<{len(value)} bytes>"
            try:
                text = self.text(repr(value))  # (cut after it is made: an object's repr is its own to bound)
            except Exception:
                return _placeholder(value)
            budget[0] -= len(text)
            return text
        except Exception:
            return _placeholder(value)

    def _flag(self, item: str) -> bool:
        """Whether ``item`` is a command-line flag naming a secret key (``--password``, ``-token``)."""
        name = item.lstrip("-")
        return 0 < len(name) <= 100 and item[: len(item) - len(name)] in ("-", "--") and self.is_secret(name)


_DEFAULT = Redactor()


#: The keys whose values are masked in errors the model reads: unambiguous secret names only,
#: matched on a key's last words (``pin``, ``auth``, ``signature`` and ``max_tokens`` would
#: hide numbers and words the model needs to act on the error), and an environment variable's
#: name ending in a password's (``PGPASSWORD``, ``SSHPASS``, ``DB_PASS``: see _names_password); a trailing number
#: and a plural ``s`` are left out (``password2``, ``api_key_1``, ``passwords``, ``api_keys``; not ``tokens``: see
#: _key_words).
MODEL_SECRET_KEYS = (
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "access_key",
    "account_key",
    "subscription_key",
    "private_key",
    "ssh_key",
    "authorization",
    "bearer",
    "jwt",
    "cookie",
    "credentials",
    "session_id",
    "sessionid",
)
#: Secret as query parameters in errors the model reads: a Google API key (``?key=``, in the URL
#: of an HTTP client's error), an Azure SAS signature (``&sig=``), an API's credential (``?auth=``) and a password
#: (``?pw=``; ``?passwd=`` and ``?password=`` by the key names).
MODEL_QUERY_SECRET_KEYS = ("key", "sig", "auth", "pw")
_MODEL = Redactor(MODEL_SECRET_KEYS, last_words=True, query_keys=MODEL_QUERY_SECRET_KEYS)
#: The redactor of what a person reads to run or check (the CLI's approval hint, McpSpec's repr): the model's keys
#: and rules (last words: ``max_tokens``, ``tokenizer``, ``secretary`` are shown, for the reader to put back only the
#: secrets), and ``pin``, ``auth``, ``signature``, ``credential`` (``client_credential``), which an error the model
#: reads shows.
_SHOWN = Redactor(
    (*MODEL_SECRET_KEYS, "pin", "auth", "signature", "credential"), last_words=True, query_keys=MODEL_QUERY_SECRET_KEYS
)


def hidden_from_model(key: str) -> bool:
    """Whether an argument error the model reads hides the value under ``key`` (a name of
    :data:`MODEL_SECRET_KEYS`, matched on its last words)."""
    return _MODEL.is_secret(key)


def mask_secrets(text: str) -> str:
    """``text`` as an error the model reads shows it: URL user-info and the values of
    :data:`MODEL_SECRET_KEYS` masked (:meth:`Redactor.mask`), not cut."""
    return _MODEL.mask(text)


def redact(value: Any, secret_keys: Iterable[str] | None = None) -> Any:
    """A copy of ``value`` with secrets masked (see :class:`Redactor`), using ``secret_keys`` or the defaults."""
    return (_DEFAULT if secret_keys is None else Redactor(secret_keys))(value)
