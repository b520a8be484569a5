"""Redaction of secrets in values that go to logs and traces."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["REDACTED", "SECRET_KEYS", "Redactor", "redact"]

REDACTED = "[REDACTED]"

#: Key names whose values are secret. Matching ignores case and separators (``private_key``,
#: ``privateKey``, ``PRIVATE-KEY`` are one key); names of five letters or more also match
#: inside longer keys (``access_token``), shorter ones only as a whole word (``user_pin``,
#: not ``spinner``).
SECRET_KEYS = (
    "password",
    "passwd",
    "passphrase",
    "pwd",
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
    "ssh_key",
    "session_id",
    "sessionid",
    "otp",
    "cvv",
    "cvc",
    "card_number",
    "signature",
)

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]+@")
_MAX_TEXT = 2000
_MAX_ITEMS = 100  # entries shown per container: what is logged stays small whatever came


def _normal(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


class Redactor:
    """Replaces secrets in a value: values under secret keys, URL user-info, and given secret values.

    Args:
        keys: secret key names (default :data:`SECRET_KEYS`).
        extra_keys: more key names, added to ``keys``.
        values: exact secret strings (API keys, passwords) masked wherever they appear in text.
    """

    def __init__(self, keys: Iterable[str] = SECRET_KEYS, *, extra_keys: Iterable[str] = (), values: Iterable[str] = ()) -> None:
        words = {_normal(k) for k in (*keys, *extra_keys) if _normal(k)}
        self._long = tuple(sorted(w for w in words if len(w) >= 5))
        self._short = frozenset(w for w in words if len(w) < 5)
        self._values = tuple(sorted({v for v in values if v}, key=len, reverse=True))
        self._cache: dict[str, bool] = {}

    def is_secret(self, key: Any) -> bool:
        """Whether a mapping key names a secret (see :data:`SECRET_KEYS` for the matching rule)."""
        text = str(key) if not isinstance(key, str) else key
        found = self._cache.get(text)
        if found is None:
            joined = _normal(text)
            tokens = {t.lower() for t in _WORD.findall(text)}
            found = any(w in joined for w in self._long) or bool(tokens & self._short) or joined in self._short
            if len(self._cache) < 4096:
                self._cache[text] = found
        return found

    def text(self, value: str) -> str:
        """``value`` with URL user-info and secret values masked (and cut to 2,000 characters)."""
        if "://" in value:
            value = _USERINFO.sub(rf"\1{REDACTED}@", value)
        for secret in self._values:
            if secret in value:
                value = value.replace(secret, REDACTED)
        if len(value) > _MAX_TEXT:
            value = f"{value[:_MAX_TEXT]}... ({len(value)} characters)"
        return value

    def __call__(self, value: Any, _depth: int = 0) -> Any:
        """A copy of ``value`` safe to log: secrets masked, containers walked (the first 100 entries
        of each, the rest counted), long text cut, odd values shown briefly."""
        if _depth > 32:
            return "..."
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            shown = {
                (k if isinstance(k, str) else str(k)): REDACTED if self.is_secret(k) else self(v, _depth + 1)
                for k, v in itertools.islice(value.items(), _MAX_ITEMS)
            }
            if len(value) > _MAX_ITEMS:
                shown["..."] = f"{len(value) - _MAX_ITEMS} more entries"
            return shown
        if isinstance(value, (list, tuple, set, frozenset)):
            items = [self(v, _depth + 1) for v in itertools.islice(value, _MAX_ITEMS)]
            if len(value) > _MAX_ITEMS:
                items.append(f"... {len(value) - _MAX_ITEMS} more items")
            return items
        if isinstance(value, bool) or value is None or isinstance(value, float):
            return value
        if isinstance(value, int):
            return value if value.bit_length() < 3000 else f"<integer of {value.bit_length()} bits>"
        if isinstance(value, (bytes, bytearray)):
            return f"<{len(value)} bytes>"
        try:
            return self.text(repr(value))
        except Exception:
            return f"<{type(value).__name__}>"


_DEFAULT = Redactor()


def redact(value: Any, secret_keys: Iterable[str] | None = None) -> Any:
    """A copy of ``value`` with secrets masked (see :class:`Redactor`), using ``secret_keys`` or the defaults."""
    return (_DEFAULT if secret_keys is None else Redactor(secret_keys))(value)
