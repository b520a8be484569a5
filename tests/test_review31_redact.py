"""Review 31, secrets in text: an Authorization header whose parameters are separated by ";" (Akamai's EdgeGrid,
``EG1-HMAC-SHA256 client_token=...;access_token=...;signature=...``) is masked after its scheme, as one with ","."""

from __future__ import annotations

import pytest

from harness_one import Redactor, ToolRegistry, redact
from harness_one._redact import REDACTED, mask_secrets

_EDGEGRID = (
    "EG1-HMAC-SHA256 client_token=akab-ct;access_token=akab-at;timestamp=20261207T09:00:00+0000;"
    "nonce=abc;signature=Zm9vYmFyYmF6c2VjcmV0c2lnbmF0dXJl"
)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"Authorization: {_EDGEGRID}", f"Authorization: EG1-HMAC-SHA256 {REDACTED}"),
        (
            "Authorization: EG1-HMAC-SHA256 client_token=a; access_token=b; signature=S3CRET",
            f"Authorization: EG1-HMAC-SHA256 {REDACTED}",
        ),
        (
            "Authorization: EG1-HMAC-SHA256 client_token=a access_token=b signature=S3CRET",
            f"Authorization: EG1-HMAC-SHA256 {REDACTED}",
        ),
        (
            "Authorization: EG1-HMAC-SHA256 client_token=a;\n  signature=S3CRET\nnext: 1",  # continued on the next line
            f"Authorization: EG1-HMAC-SHA256 {REDACTED}\nnext: 1",
        ),
        (
            f"curl -H 'Authorization: {_EDGEGRID}' https://x",
            f"curl -H 'Authorization: EG1-HMAC-SHA256 {REDACTED}' https://x",
        ),
        # the ";"-separated schemes handled before: a value with ";" in it, a connection string
        (
            "Authorization: HMAC-SHA256 SignedHeaders=x-ms-date;host;x-ms-content-sha256&Signature=S3CRET=",
            f"Authorization: HMAC-SHA256 {REDACTED}",
        ),
        (
            "Authorization: AWS4-HMAC-SHA256 Credential=AKID/x, SignedHeaders=host;x-amz-date, Signature=S3CRET",
            f"Authorization: AWS4-HMAC-SHA256 {REDACTED}",
        ),
    ],
)
def test_an_authorization_header_with_parameters_separated_by_semicolons_is_masked(text: str, shown: str) -> None:
    assert (Redactor().text(text), mask_secrets(text)) == (shown, shown)
    assert "S3CRET" not in shown and "Zm9v" not in shown


def test_an_edgegrid_header_is_masked_in_redacted_values_and_in_errors_the_model_reads() -> None:
    header = f"Authorization: {_EDGEGRID}"
    shown = f"Authorization: EG1-HMAC-SHA256 {REDACTED}"
    assert redact({"Authorization": _EDGEGRID, "message": header}) == {"Authorization": REDACTED, "message": shown}
    registry = ToolRegistry(autoload=False)

    def fails() -> None:
        raise PermissionError(f"401 Unauthorized: {header}")

    registry.add(fails, parameters={"type": "object", "properties": {}})
    assert registry.try_call("fails").for_model() == f"Error: Tool 'fails' failed: PermissionError: 401 Unauthorized: {shown}"


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: EG1-HMAC-SHA256 client_token=a; \n  signature=S3CRET",
        "Authorization: EG1-HMAC-SHA256 client_token=a;\t\n  signature=S3CRET",
        'Authorization: Digest realm="x", \n  response="S3CRET"',
    ],
)
def test_a_header_continued_after_blanks_at_a_lines_end_is_masked(text: str) -> None:
    # the value's end excludes the line's trailing blanks: the next line's parameters were left in clear
    assert "S3CRET" not in mask_secrets(text)
