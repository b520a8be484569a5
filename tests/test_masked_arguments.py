"""A call's arguments in logs and spans mask the secrets the call holds under secret keys wherever they stand, as its
result and error text do; and ``Redactor.with_values`` escapes only the values it adds."""

from __future__ import annotations

import json
import logging
import types
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness_one import ManualClock, Redactor, ToolRegistry, _redact
from harness_one_plugins import LoggingPlugin, OTelPlugin

# The password under a secret key, quoted under an innocent one; a token in the context, quoted too.
ARGUMENTS = {"query": "login as admin with S3cretPw-99", "password": "S3cretPw-99", "note": "S3CRET-CTX-7"}
CONTEXT = {"api_token": "S3CRET-CTX-7"}


@pytest.fixture(autouse=True)
def unconfigured_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


def _login(query: str, password: str, note: str) -> str:
    return f"ran {query} {note}"


def _fail(query: str, password: str, note: str) -> str:
    raise ValueError(f"denied: {query}")


def test_logged_arguments_mask_a_held_secret_under_an_innocent_key(caplog: pytest.LogCaptureFixture) -> None:
    reg = ToolRegistry(
        autoload=False, clock=ManualClock(), plugins={"logging": LoggingPlugin(log_arguments=True, secret_values=["unused1"])}
    )
    reg.add(_login, name="login")
    reg.add(_fail, name="fail")
    with caplog.at_level(logging.INFO, logger="harness_one.calls"):
        reg.call("login", dict(ARGUMENTS), context=dict(CONTEXT))
        assert not reg.try_call("fail", dict(ARGUMENTS), context=dict(CONTEXT)).ok
    ok, failed = [r.harness_one for r in caplog.records if r.name == "harness_one.calls"]  # type: ignore[attr-defined]
    assert ok["arguments"] == {"query": "login as admin with [REDACTED]", "password": "[REDACTED]", "note": "[REDACTED]"}
    assert failed["arguments"] == ok["arguments"]
    assert failed["error"].endswith("denied: login as admin with [REDACTED]")
    assert "S3C" not in repr([ok, failed])


def test_span_arguments_mask_a_held_secret_under_an_innocent_key() -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    plugin = OTelPlugin(tracer_provider=provider, capture_content=True)
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugins={"otel": plugin})
    reg.add(_login, name="login")
    reg.add(_fail, name="fail")
    reg.call("login", dict(ARGUMENTS), context=dict(CONTEXT))
    assert not reg.try_call("fail", dict(ARGUMENTS), context=dict(CONTEXT)).ok
    ok, failed = spans.get_finished_spans()
    provider.shutdown()
    shown = {"query": "login as admin with [REDACTED]", "password": "[REDACTED]", "note": "[REDACTED]"}
    for span in (ok, failed):
        assert json.loads(span.attributes["gen_ai.tool.call.arguments"]) == shown  # type: ignore[index,arg-type]
    assert ok.attributes["gen_ai.tool.call.result"] == "ran login as admin with [REDACTED] [REDACTED]"  # type: ignore[index]
    assert str(failed.status.description).endswith("denied: login as admin with [REDACTED]")


def test_arguments_holding_no_secret_are_shown_as_they_are(caplog: pytest.LogCaptureFixture) -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugins={"logging": LoggingPlugin(log_arguments=True)})
    reg.add(lambda query: query, name="echo")
    with caplog.at_level(logging.INFO, logger="harness_one.calls"):
        reg.call("echo", {"query": "S3cretPw-99"}, context={"user": "S3cretPw-99"})
    (event,) = [r.harness_one for r in caplog.records if r.name == "harness_one.calls"]  # type: ignore[attr-defined]
    assert event["arguments"] == {"query": "S3cretPw-99"}


def test_with_values_escapes_only_the_values_it_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    base = Redactor(values=[f'base-{n}-"quoted"-contraseña' for n in range(50)])
    written: list[str] = []

    def dumps(value: Any, **options: Any) -> str:
        written.append(value)
        return json.dumps(value, **options)

    monkeypatch.setattr(_redact, "json", types.SimpleNamespace(dumps=dumps, loads=json.loads))
    more = base.with_values(['held-"one"', 'base-0-"quoted"-contraseña'])
    assert set(written) == {'held-"one"'}  # the base's values were escaped when it was built, once
    assert base.with_values(['base-1-"quoted"-contraseña', ""]) is base  # nothing added: the redactor itself
    monkeypatch.undo()
    same = Redactor(values=[*(f'base-{n}-"quoted"-contraseña' for n in range(50)), 'held-"one"'])
    text = (
        json.dumps({"a": 'held-"one"', "b": 'base-7-"quoted"-contraseña', "c": "base-8"})
        + ' held-"one" base-9-"quoted"-contraseña'
    )
    assert more.text(text) == same.text(text) and "held" not in more.text(text) and "base-7" not in more.text(text)
    assert base.text(text).count("held") == 2  # the base redactor is unchanged


def test_an_argument_named_as_a_held_secret_is_masked_in_arg_keys_too(caplog: pytest.LogCaptureFixture) -> None:
    """``arg_keys`` are read with the call's held values as ``arguments`` are (a key naming the token showed there)."""
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugins={"logging": LoggingPlugin(log_arguments=True)})
    reg.add(lambda **kwargs: 1, name="loose")
    with caplog.at_level(logging.INFO, logger="harness_one.calls"):
        reg.call("loose", {"token": "usernamez", "usernamez": "bob"})
    [event] = [r.harness_one for r in caplog.records if r.name == "harness_one.calls"]  # type: ignore[attr-defined]
    assert event["arguments"] == {"token": "[REDACTED]", "[REDACTED]": "bob"}
    assert event["arg_keys"] == sorted(["token", "[REDACTED]"])


def test_an_event_showing_neither_arguments_nor_an_error_walks_no_held_values(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A logged success without ``log_arguments`` shows no value a held secret could be in: no walk of the arguments."""
    walks: list[int] = []
    held = Redactor.held
    monkeypatch.setattr(Redactor, "held", lambda self, *values: walks.append(1) or held(self, *values))
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugins={"logging": LoggingPlugin()})
    reg.add(_login, name="login")
    with caplog.at_level(logging.INFO, logger="harness_one.calls"):
        reg.call("login", dict(ARGUMENTS))
    assert [r.harness_one["outcome"] for r in caplog.records if r.name == "harness_one.calls"] == ["ok"]  # type: ignore[attr-defined]
    assert walks == []
