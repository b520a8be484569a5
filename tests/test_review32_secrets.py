"""Review 32: a secret a failed call holds by value (in its context, its arguments, its invalid JSON text) shows
nowhere: not in the error the model reads, nor in logs, spans, the idempotency store or another caller's replay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from structlog.testing import capture_logs

from harness_one import MODEL_SECRET_KEYS, Call, ManualClock, Redactor, ToolRegistry
from harness_one_plugins import LoggingPlugin, OTelPlugin

SECRET = "Zq7ctxSecret99"


@pytest.fixture(autouse=True)
def unconfigured_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


class Observed:
    """A registry whose calls are logged (arguments too) and traced (content too), in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def registry(self, **options: Any) -> ToolRegistry:
        plugins = {
            "otel": OTelPlugin(tracer_provider=self.provider, capture_content=True),
            "logging": LoggingPlugin(log_arguments=True),
        }
        return ToolRegistry(autoload=False, clock=ManualClock(), plugins=plugins, **options)

    def spans(self) -> str:
        return "".join(span.to_json() for span in self.exporter.get_finished_spans())


@pytest.fixture
def observed() -> Iterator[Observed]:
    found = Observed()
    yield found
    found.provider.shutdown()


def _charge(amount: int, call: Call) -> str:
    raise RuntimeError(f"gateway refused api key {call.context['api_key']} for {amount}")


# ---------------------------------------------------------------- 1: a context secret the tool's exception quotes


def test_a_context_secret_in_the_tools_exception_is_masked_in_the_logged_error_and_the_span(observed: Observed) -> None:
    """RuntimeError(f"gateway refused api key {call.context['api_key']}") showed the key in the log's error and the
    span status (the logs and spans walked the arguments only); the model's error masks it too (whole tokens)."""
    reg = observed.registry()
    reg.add(_charge, name="charge")
    with capture_logs() as logs:
        first = reg.try_call("charge", {"amount": 5}, context={"api_key": SECRET})
    assert first.error is not None and SECRET not in first.error.message
    assert [event["error"] for event in logs] == ["Tool 'charge' failed: RuntimeError: gateway refused api key [REDACTED] for 5"]
    assert SECRET not in observed.spans()


# ---------------------------------------------------------------- 2: pairs, name/value objects and numbers


class Header(NamedTuple):
    name: str
    token: str


def test_the_walk_follows_the_shapes_the_redactor_masks() -> None:
    def secrets_held(redactor: Redactor, *values: Any) -> list[str]:  # the core's walk, public for observers
        return redactor.held(*values)

    redactor = Redactor()
    found = secrets_held(
        redactor,
        {
            "headers": [["Authorization", "Bearer-aaa111"], {"name": "X-Api-Key", "value": "kkk-222"}],
            "pin": 918273645,
            "password": [4921.5, True, "abc"],
            "argv": ["mysql", "--password", "ppp-333", "-u", "bob:uuu-444", "-h", "db"],
            "named": Header("n", "ttt-555"),
            "user": "bob",
            "count": 123456,
        },
        {"api_key": "ctx-666", "pair": ("token", "ctx-777")},
    )
    expected = ["Bearer-aaa111", "kkk-222", "918273645", "4921.5", "ppp-333", "uuu-444", "ttt-555", "ctx-666", "ctx-777"]
    assert sorted(found) == sorted(expected)
    assert secrets_held(Redactor(MODEL_SECRET_KEYS, last_words=True), {"pin": 918273645, "token": 1234567}) == ["1234567"]


class _BadMapping(dict[str, Any]):
    def __len__(self) -> int:
        raise RuntimeError("hostile")


def test_the_walk_never_raises() -> None:
    from collections.abc import Mapping

    def secrets_held(redactor: Redactor, *values: Any) -> list[str]:  # the core's walk, public for observers
        return redactor.held(*values)

    class Hostile(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            raise RuntimeError("hostile")

        def __iter__(self) -> Iterator[str]:
            raise RuntimeError("hostile")

        def __len__(self) -> int:
            return 1

    assert secrets_held(Redactor(), {"token": "tok-123"}, Hostile()) == ["tok-123"]
    assert secrets_held(Redactor(), _BadMapping(token="tok-123")) == ["tok-123"]


@pytest.mark.parametrize(
    ("arguments", "quoted"),
    [
        ({"headers": [["X-Auth", SECRET]]}, lambda a: a["headers"][0][1]),
        ({"headers": [{"name": "X-Signature", "value": SECRET}]}, lambda a: a["headers"][0]["value"]),
        ({"pin": 918273645}, lambda a: a["pin"]),
        ({"passcode": [918273645]}, lambda a: a["passcode"]),
    ],
    ids=["pair", "name-value", "number", "number-in-list"],
)
def test_pairs_name_value_objects_and_numbers_are_masked_in_the_logged_error_and_span_status(
    observed: Observed, arguments: dict[str, Any], quoted: Any
) -> None:
    """{"headers": [["Authorization", S]]}, a name/value object and {"pin": 918273645} leaked into both (keys the
    logs' list holds and the model's does not: the model reads them, its errors showing what it needs)."""
    secret = str(quoted(arguments)).strip("[]")

    def tool(**kwargs: Any) -> None:
        raise ValueError(f"rejected {quoted(kwargs)}")

    reg = observed.registry()
    reg.add(tool, name="tool")
    with capture_logs() as logs:
        result = reg.try_call("tool", arguments)
    assert result.error is not None
    [event] = logs
    assert secret not in event["error"] and "[REDACTED]" in event["error"]
    assert secret not in json.dumps(event, default=str)
    assert secret not in observed.spans()
    assert secret in result.error.message


# ---------------------------------------------------------------- 3: invalid JSON arguments, logged and traced


@pytest.mark.parametrize(
    "raw",
    [
        '{"user": "bob", "passwd" "%s"}',  # a colon left out
        '{"user": "bob", "pass\\u0077ord": "%s" x}',  # the name escaped
        '{"user": "bob", "api_key" "%s", "x": 1}',
    ],
    ids=["no-colon", "escaped-name", "no-colon-more"],
)
def test_invalid_json_arguments_are_logged_and_traced_masked_as_the_models_excerpt(observed: Observed, raw: str) -> None:
    """The model's excerpt masked them; the log's and span's arguments showed the raw text."""
    reg = observed.registry()

    def login(user: str, password: str) -> str:
        return "ok"

    reg.add(login, name="login")
    with capture_logs() as logs:
        result = reg.try_call("login", raw % SECRET)
    assert result.error is not None and result.error.kind == "invalid_arguments"
    [event] = logs
    assert SECRET not in json.dumps(event) and "[REDACTED]" in event["arguments"]
    assert event["arguments"].startswith('{"user": "bob"')
    assert SECRET not in observed.spans()


def test_masked_json_reads_a_long_text_up_to_its_limit() -> None:
    def masked_json(text: str, redactor: Redactor, limit: int) -> str:
        return redactor.mask_json(text, limit)

    redactor = Redactor()
    text = '{"note": "' + "n" * 9000 + '", "passwd" "' + SECRET + '"}'
    assert masked_json(text, redactor, 8000) == text[:8000]  # (all of it a string, the note's)
    cut = '{"passwd" "' + SECRET + '", ' + '"x": 1, ' * 2000
    assert masked_json(cut, redactor, 8000) == '{"passwd" [REDACTED]'
    assert masked_json('{"password": "' + "s" * 9000 + '"}', redactor, 8000) == '{"password": "[REDACTED]'


# ---------------------------------------------------------------- 4: a captured result quoting an argument secret


def test_a_captured_result_masks_an_argument_secret_as_the_arguments_attribute_does(observed: Observed) -> None:
    reg = observed.registry()

    def echo(user: str, password: str) -> dict[str, str]:
        return {"greeting": f"ok {user} {password}"}

    reg.add(echo, name="echo")
    assert reg.call("echo", {"user": "bob", "password": SECRET}) == {"greeting": f"ok bob {SECRET}"}  # the caller's own
    [span] = observed.exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert json.loads(str(attributes["gen_ai.tool.call.arguments"]))["password"] == "[REDACTED]"
    assert json.loads(str(attributes["gen_ai.tool.call.result"])) == {"greeting": "ok bob [REDACTED]"}
