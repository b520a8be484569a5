"""Review 33, fetch_url: ``allow`` given as one string was read a character at a time (``"10.0.0.0/8"`` opened ``"0"``,
which is 0.0.0.0, this machine): it is a ValueError naming ``allow``, in ``FetchPolicy`` and ``make_fetch_url``; the
docs tell the least ``max_chars`` as the policy computes it (268 was accepted where they said 274)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import harness_one_fetch_url as mod
import httpx
import pytest

from harness_one import ToolArgumentError, ToolRegistry

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / "contrib_tools" / "fetch_url" / "README.md", ROOT / "docs" / "limits.md"]


@pytest.mark.parametrize(
    ("allow", "said"),
    [
        ("10.0.0.0/8", "not a single str ('10.0.0.0/8')"),
        (b"10.0.0.0/8", "not a single bytes"),
        (5, "not 5"),
        (("10.0.0.0/8", ""), "non-empty strings (hosts, addresses or networks), not ''"),
        (["10.0.0.0/8", 10], "non-empty strings (hosts, addresses or networks), not 10"),
    ],
)
def test_allow_that_is_no_collection_of_names_is_refused(allow: Any, said: str) -> None:
    with pytest.raises(ValueError, match=r"^allow must ") as policy:
        mod.FetchPolicy(allow=allow)
    with pytest.raises(ValueError, match=r"^allow must ") as tool:
        mod.make_fetch_url(allow=allow)  # when the tool is built, not at its first call
    assert said in str(policy.value) and str(tool.value) == str(policy.value)


def test_a_string_allow_no_longer_opens_this_machine() -> None:
    reached: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        reached.append(str(request.url))
        return httpx.Response(200, text="internal admin")

    inside = httpx.MockTransport(handler)
    policy = mod.FetchPolicy(resolver=lambda host, port: ["0.0.0.0"], transport=inside)  # "0" is 0.0.0.0
    url = {"url": "http://0:18777/internal-admin"}
    reg = ToolRegistry(autoload=False)
    with pytest.raises(ValueError, match=r"^allow must "):
        reg.add(mod.make_fetch_url(policy, allow="10.0.0.0/8"))  # a str is an Iterable[str]: only a check can tell
        reg.try_call("fetch_url", url)  # it was built, and the call reached "0"
    assert reached == []
    reg.add(mod.make_fetch_url(policy, allow=("10.0.0.0/8",)))  # as meant: the network only
    outcome = reg.try_call("fetch_url", url)
    assert isinstance(outcome.error, ToolArgumentError) and reached == []


def test_allow_of_any_collection_is_kept_as_a_tuple() -> None:
    assert mod.FetchPolicy(allow=["a.example", "10.0.0.0/8"]).allow == ("a.example", "10.0.0.0/8")  # type: ignore[arg-type]
    assert mod.FetchPolicy(allow=iter(["a.example"])).allow == ("a.example",)  # type: ignore[arg-type]  # read once
    assert mod.FetchPolicy().allow == ()


def _accepted(max_chars: int) -> bool:
    try:
        mod.FetchPolicy(max_chars=max_chars)
    except ValueError:
        return False
    return True


def test_the_docs_tell_the_least_max_chars_the_policy_accepts() -> None:
    least = next(n for n in range(1, 1000) if _accepted(n))
    assert all(_accepted(n) for n in range(least, 1000))
    assert mod.FetchPolicy().min_chars == 274 and mod.FetchPolicy(max_chars=least).min_chars == least == 268
    for doc in DOCS:
        text = " ".join(doc.read_text(encoding="utf-8").split())
        assert f"the least `max_chars` accepted is {least}" in text and "274 with every default" in text, doc
