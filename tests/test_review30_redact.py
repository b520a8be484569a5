"""Review 30, secrets in text: a credential sent bare after ``Authorization:`` with a parameter after it, and an
Azure connection string's ``AccountKey`` in an error the model reads."""

from __future__ import annotations

import pytest

from harness_one import Redactor, ToolRegistry


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("authorization: tok123 scope=read", "authorization: [REDACTED] scope=read"),  # docs/safety.md's example
        ("Authorization: abc123secret scope=read", "Authorization: [REDACTED] scope=read"),
        ("Authorization: sk_live_abcdef scope=read", "Authorization: [REDACTED] scope=read"),
        ("Authorization: averylongtokenword scope=read", "Authorization: [REDACTED] scope=read"),
        ("Authorization: prod1-7f3a9b2c4d5e6f7a8b9c scope=read", "Authorization: [REDACTED] scope=read"),
        # schemes that take parameters keep their name, their parameters masked
        ('Authorization: Digest username="a", response="b"', "Authorization: Digest [REDACTED]"),
        ("Authorization: AWS4-HMAC-SHA256 Credential=AKIA/x, Signature=abc", "Authorization: AWS4-HMAC-SHA256 [REDACTED]"),
        ("Authorization: GOOG4-RSA-SHA256 Credential=x, Signature=y", "Authorization: GOOG4-RSA-SHA256 [REDACTED]"),
        ("Authorization: GoogleLogin auth=xyz", "Authorization: GoogleLogin [REDACTED]"),
        ("Authorization: HMAC-SHA256 Signature=abc", "Authorization: HMAC-SHA256 [REDACTED]"),
        (
            "Authorization: TC3-HMAC-SHA256 Credential=AKIDz8/tc3_request, Signature=2230eefd",
            "Authorization: TC3-HMAC-SHA256 [REDACTED]",
        ),
        (
            "Authorization: OSS4-HMAC-SHA256 Credential=LTAI/oss4_request, Signature=abc",
            "Authorization: OSS4-HMAC-SHA256 [REDACTED]",
        ),
        ("Authorization: ACS3-HMAC-SHA256 Credential=LTAI, Signature=abc", "Authorization: ACS3-HMAC-SHA256 [REDACTED]"),
        ("Authorization: SharedAccessSignature sr=x&sig=abc&se=1", "Authorization: SharedAccessSignature [REDACTED]"),
    ],
)
def test_a_bare_credential_after_authorization_is_masked_whatever_follows_it(text: str, shown: str) -> None:
    assert Redactor().text(text) == shown
    registry = ToolRegistry(autoload=False)

    def fails() -> None:
        raise PermissionError(f"401 Unauthorized: {text}")

    registry.add(fails, parameters={"type": "object", "properties": {}})
    assert registry.try_call("fails").for_model() == f"Error: Tool 'fails' failed: PermissionError: 401 Unauthorized: {shown}"


def test_an_azure_account_key_and_subscription_key_are_masked_in_errors_the_model_reads() -> None:
    registry = ToolRegistry(autoload=False)
    text = (
        "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abcd1234;EndpointSuffix=core.windows.net "
        "Ocp-Apim-Subscription-Key: k123 max_tokens=5"
    )

    def fails() -> None:
        raise RuntimeError(text)

    registry.add(fails, parameters={"type": "object", "properties": {}})
    assert registry.try_call("fails").for_model() == (
        "Error: Tool 'fails' failed: RuntimeError: DefaultEndpointsProtocol=https;AccountName=a;AccountKey=[REDACTED];"
        "EndpointSuffix=core.windows.net Ocp-Apim-Subscription-Key: [REDACTED] max_tokens=5"
    )
