"""Observability, session 34: held secrets masked before a captured result is cut, structlog's generic
``BoundLogger`` wrapper class, and JSON-escaped secret names in arguments that are not valid JSON."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs
from test_otel import Telemetry

from harness_one import ManualClock, Redactor, ToolRegistry, log_enabled, log_event
from harness_one_plugins import LoggingPlugin, OTelPlugin
from harness_one_plugins._text import arguments_shown

SECRET = "Tr0ub4dorCorrectHorse99"


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    found = Telemetry()
    yield found
    found.tracer_provider.shutdown()
    found.meter_provider.shutdown()


# ---------------------------------------------------------------- 1. a held secret cut in half in a captured result


@pytest.mark.parametrize("pad", [10, 1956, 1975, 1990])
def test_a_captured_result_masks_a_held_secret_before_it_is_cut(otel: Telemetry, pad: int) -> None:
    """The result was cut at 2,000 characters, then the held values masked: a secret cut in half showed
    all but its last characters."""
    reg = otel.registry(capture_content=True)

    def login(user: str, password: str, pad: int) -> str:
        return "x" * pad + f"logged in as {user} with {password}"

    def login_dict(user: str, password: str, pad: int) -> dict[str, str]:
        return {"log": login(user, password, pad)}

    reg.add(login, name="login", description="d")
    reg.add(login_dict, name="login_dict", description="d")
    for name in ("login", "login_dict"):
        reg.call(name, {"user": "bob", "password": SECRET, "pad": pad})
    spans = otel.finished()
    assert len(spans) == 2
    for span in spans:
        result = str(span.attributes["gen_ai.tool.call.result"])  # type: ignore[index]
        assert SECRET[:3] not in result  # no part of it: a cut that leaves 3 characters shows them
        if pad == 10:
            assert result.endswith("with [REDACTED]") or result.endswith('with [REDACTED]"}')


def test_a_redactor_with_values_masks_them_before_it_cuts() -> None:
    redactor = Redactor(values=["hunter2hunter2"])
    held = redactor.with_values([SECRET])
    text = "y" * 1990 + " " + SECRET
    assert SECRET[:5] not in held.text(text) and SECRET[:5] in redactor.text(text)
    assert held.text("a hunter2hunter2 b") == "a [REDACTED] b"  # its own values kept
    assert held({"token": "t", "note": f"pw {SECRET}"}) == {"token": "[REDACTED]", "note": "pw [REDACTED]"}
    assert redactor.text(f"pw {SECRET}") == f"pw {SECRET}"  # the first redactor is unchanged


# ---------------------------------------------------------------- 2. structlog's generic BoundLogger wrapper class


def test_structlogs_generic_bound_logger_gets_every_event_by_its_levels_method() -> None:
    """``.log(level, ...)`` is no method of the generic BoundLogger: every event was lost (a TypeError), and
    the level check, looked up on the instance, sent an ``{'event': 20}`` event through the processors."""
    seen: list[tuple[str, dict[str, Any]]] = []
    out = io.StringIO()

    def capture(logger: Any, method: str, event_dict: Any) -> Any:
        seen.append((method, dict(event_dict)))
        return event_dict

    structlog.configure(
        wrapper_class=structlog.BoundLogger,
        processors=[capture, structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(out),
    )
    reg = ToolRegistry(autoload=False, clock=ManualClock())
    reg.add(lambda x: x, name="echo", description="d")
    for i in range(3):
        reg.call("echo", {"x": i})
    log_event(logging.WARNING, "a warning", logger="harness_one.s34", detail=1)
    log_event(25, "between info and warning", logger="harness_one.s34")
    assert log_enabled(logging.DEBUG, "harness_one.calls")  # no is_enabled_for: every level is logged
    assert [method for method, _ in seen] == ["info", "info", "info", "warning", "warning"]  # 25: the level above
    assert [fields["event"] for _, fields in seen] == ["tool_call"] * 3 + ["a warning", "between info and warning"]
    assert seen[0][1]["tool"] == "echo" and seen[3][1]["detail"] == 1
    assert len(out.getvalue().splitlines()) == 5


@pytest.mark.parametrize("level", [logging.INFO, logging.WARNING])
def test_the_filtering_bound_logger_still_filters_by_its_level(level: int) -> None:
    out = io.StringIO()
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(level),
        processors=[structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(out),
    )
    reg = ToolRegistry(autoload=False, clock=ManualClock())
    reg.add(lambda x: x, name="echo", description="d")
    reg.call("echo", {"x": 1})
    log_event(logging.ERROR, "an error", logger="harness_one.s34")
    events = [json.loads(line)["event"] for line in out.getvalue().splitlines()]
    assert events == (["tool_call", "an error"] if level == logging.INFO else ["an error"])


def test_the_stdlib_bound_logger_still_gets_the_events_at_their_levels(caplog: pytest.LogCaptureFixture) -> None:
    structlog.configure(
        wrapper_class=structlog.stdlib.BoundLogger,
        logger_factory=structlog.stdlib.LoggerFactory(),
        processors=[structlog.processors.JSONRenderer()],
    )
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugins={"logging": LoggingPlugin(level="WARNING")})
    reg.add(lambda x: x, name="echo", description="d")
    with caplog.at_level(logging.DEBUG, logger="harness_one.calls"):
        reg.call("echo", {"x": 1})
    [record] = [r for r in caplog.records if r.name == "harness_one.calls"]
    assert record.levelno == logging.WARNING and json.loads(record.getMessage())["event"] == "tool_call"


# ---------------------------------------------------------------- 3. JSON-escaped secret names in text arguments


@pytest.mark.parametrize(
    "raw",
    [
        '{"user": "bob", "pass\\u0077ord": "%s",}',  # a trailing comma: the mistake is not next to the name
        '{"pass\\u0077ord": "%s", "x": 1,}',
        '{"pass\\u0077ord": "%s", "x": tru}',
        '{"x": 1, "api\\u005fkey": "%s",}',
        '{"user": "bob\\u0000", "pass\\u0077ord": "%s",}',
        '{"headers": [{"name": "X-Api-K\\u0065y", "value": "%s"}],}',  # a pair's name
        '{"argv": ["--pass\\u0077ord", "%s"],}',  # a flag
        '{"pass\\u0077ord": "%s" x}',  # next to the mistake (as before)
    ],
)
def test_an_escaped_secret_name_is_read_decoded_wherever_the_mistake_is(raw: str) -> None:
    shown = arguments_shown(Redactor(), raw % SECRET)
    assert SECRET not in shown and "[REDACTED]" in shown


def test_an_escaped_secret_name_is_masked_in_logs_and_spans(otel: Telemetry) -> None:
    plugins = {
        "otel": OTelPlugin(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, capture_content=True),
        "logging": LoggingPlugin(log_arguments=True),
    }
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugins=plugins)
    reg.add(lambda user, password: "ok", name="login", description="d")
    with capture_logs() as logs:
        result = reg.try_call("login", '{"user": "b\\u006fb", "pass\\u0077ord": "' + SECRET + '",}')
    assert result.error is not None and result.error.kind == "invalid_arguments"
    [event] = [e for e in logs if e["event"] == "tool_call"]
    [span] = otel.finished()
    expected = '{"user": "b\\u006fb", "password": "[REDACTED]",}'  # (a name that is no secret's keeps its escapes)
    assert event["arguments"] == expected
    assert span.attributes["gen_ai.tool.call.arguments"] == expected  # type: ignore[index]


def test_mask_json_leaves_strings_it_cannot_decode_as_they_are() -> None:
    redactor = Redactor()
    assert redactor.mask_json('{"a\\q": 1, "b\\u00e9": 2,}') == '{"a\\q": 1, "b\\u00e9": 2,}'
    assert redactor.mask_json('{"note": "p\\u0077d ' + "x" * 700 + '",}') == '{"note": "p\\u0077d ' + "x" * 700 + '",}'


def test_the_stdlib_bound_logger_keeps_an_event_between_two_levels_its_logger_keeps() -> None:
    """A stdlib logger at 25 keeps an event of level 25: it is sent by the level above (info's 20 was dropped)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    target = logging.getLogger("harness_one.s34between")
    target.setLevel(25)
    handler = Keep()
    target.addHandler(handler)
    try:
        structlog.configure(
            wrapper_class=structlog.stdlib.BoundLogger,
            processors=[structlog.stdlib.render_to_log_kwargs],
            logger_factory=structlog.stdlib.LoggerFactory(),
        )
        assert log_enabled(25, "harness_one.s34between")
        log_event(25, "between", logger="harness_one.s34between")
        log_event(logging.INFO, "below", logger="harness_one.s34between")
    finally:
        target.removeHandler(handler)
    assert [record.getMessage() for record in records] == ["between"]
