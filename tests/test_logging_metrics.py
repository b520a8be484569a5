"""The logging and metrics plugins."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from harness_one import Call, Outcome, PluginError, Retry, ToolArgumentError, ToolError, ToolNotFound, ToolRegistry, hookimpl
from harness_one_plugins import LoggingPlugin
from harness_one_plugins.log import redact


@pytest.fixture(autouse=True)
def unconfigured_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


class RetryOnce:
    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
        return Retry(0) if call.attempt == 1 and not isinstance(error, ToolArgumentError) else None


def test_one_event_per_call_with_structlog(registry: ToolRegistry) -> None:
    registry.add(
        lambda a, b: a + b,
        name="add",
        parameters={"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
    )
    with capture_logs() as logs:
        registry.call("add", {"a": 1, "b": 2}, call_id="c1")
        registry.try_call("add", {"a": "x", "b": 2}, call_id="c2")
    assert [e["event"] for e in logs] == ["tool_call", "tool_call"]
    ok, bad = logs
    assert ok["tool"] == "add" and ok["call_id"] == "c1" and ok["outcome"] == "ok" and ok["attempt"] == 1
    assert ok["arg_keys"] == ["a", "b"] and ok["result_size"] == 1 and ok["duration_ms"] >= 0
    assert "arguments" not in ok  # values only when asked
    assert bad["outcome"] == "error" and bad["error_type"] == "ToolArgumentError" and bad["call_id"] == "c2"


def test_retry_attempts_are_logged(registry: ToolRegistry) -> None:
    registry.plugins.register(RetryOnce(), name="retry")
    state = {"n": 0}

    def flaky() -> str:
        state["n"] += 1
        if state["n"] == 1:
            raise OSError("transient")
        return "ok"

    registry.add(flaky)
    with capture_logs() as logs:
        assert registry.call("flaky") == "ok"
    assert [(e["event"], e["outcome"], e["attempt"]) for e in logs] == [("tool_call_retry", "retry", 1), ("tool_call", "ok", 2)]
    assert registry.stats()["tools"]["flaky"]["retries"] == 1


def test_argument_values_redacted(clock: Any) -> None:
    reg = ToolRegistry(plugins={"logging": LoggingPlugin(log_arguments=True)}, autoload=False, clock=clock)
    reg.add(lambda **kw: "ok", name="login", parameters={"type": "object"})
    with capture_logs() as logs:
        reg.call("login", {"user": "ann", "password": "hunter2", "nested": {"API-Key": "k", "Authorization": "Bearer x"}})
    args = logs[0]["arguments"]
    assert args == {"user": "ann", "password": "[REDACTED]", "nested": {"API-Key": "[REDACTED]", "Authorization": "[REDACTED]"}}
    assert "hunter2" not in repr(logs)


def test_redact_covers_lists_and_common_names() -> None:
    assert redact({"items": [{"token": 1, "x": 2}], "session_cookie": "c", "client_secret": "s"}) == {
        "items": [{"token": "[REDACTED]", "x": 2}],
        "session_cookie": "[REDACTED]",
        "client_secret": "[REDACTED]",
    }


def _echo_and_fail(**options: Any) -> ToolRegistry:
    reg = ToolRegistry(plugins={"logging": LoggingPlugin(**options)}, autoload=False)

    @reg.add
    def echo(data: object) -> object:
        """Echo."""
        return data

    @reg.add
    def fail(data: object) -> object:
        """Fail."""
        raise ValueError(f"cannot reach {data}")

    return reg


LEAKY = {
    "pairs": [["password", "S3CRET-A"], ["user", "bob"]],
    "headers": [("Authorization", "Bearer S3CRET-B")],
    "url": "redis://cache_user:p@ssS3CRET-C@cache.internal:6379/0",
    "api": {"X-API-KEY": "S3CRET-D"},
}


@pytest.mark.parametrize("case", sorted(LEAKY))
def test_pairs_urls_and_keyed_text_are_redacted_in_arguments_and_errors(case: str) -> None:
    reg = _echo_and_fail(log_arguments=True)
    with capture_logs() as logs:
        reg.call("echo", {"data": LEAKY[case]}, context={"user_token": "S3CRET-CTX"})
        assert not reg.try_call("fail", {"data": LEAKY[case]}).ok
    ok, failed = logs
    assert ok["outcome"] == "ok" and failed["outcome"] == "error" and "cannot reach" in failed["error"]
    assert "[REDACTED]" in repr(ok["arguments"]) and "[REDACTED]" in failed["error"]
    assert "S3CRET" not in repr(logs)  # the arguments, the error, and never Call.context


def test_the_stdlib_record_carries_the_redacted_error(caplog: pytest.LogCaptureFixture) -> None:
    reg = _echo_and_fail()
    with caplog.at_level(logging.INFO, logger="harness_one"):
        reg.try_call("fail", {"data": {"X-API-KEY": "S3CRET", "user": "bob"}})
    record = next(r for r in caplog.records if r.name == "harness_one.calls")
    fields = record.harness_one  # type: ignore[attr-defined]
    assert fields["error"] == "Tool 'fail' failed: ValueError: cannot reach {'X-API-KEY': '[REDACTED]', 'user': 'bob'}"
    assert "S3CRET" not in record.getMessage()


def test_falls_back_to_stdlib_logging(registry: ToolRegistry, caplog: pytest.LogCaptureFixture) -> None:
    assert not structlog.is_configured()
    registry.add(lambda: 1, name="one")
    with caplog.at_level(logging.INFO, logger="harness_one"):
        registry.call("one", call_id="x9")
    record = next(r for r in caplog.records if r.name == "harness_one.calls")
    assert record.harness_one["tool"] == "one" and record.harness_one["call_id"] == "x9"  # type: ignore[attr-defined]
    assert "tool_call" in record.getMessage()


def test_library_never_configures_structlog(registry: ToolRegistry) -> None:
    registry.add(lambda: 1, name="one")
    registry.call("one")
    assert not structlog.is_configured()


def test_metrics(registry: ToolRegistry, clock: Any) -> None:
    registry.add(
        lambda n: n,
        name="f",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        rate_limit={"rate": 1, "burst": 3},
    )
    registry.call("f", {"n": 1})
    registry.call("f", {"n": 2})
    registry.try_call("f", {"n": "x"})
    registry.call("f", {"n": 3})
    registry.try_call("f", {"n": 4})
    tools = registry.stats()["tools"]["f"]
    assert tools["calls"] == 5 and tools["finished"] == 5 and tools["successes"] == 3
    assert tools["errors"] == {"ToolArgumentError": 1, "RateLimitExceeded": 1}
    assert tools["rate_limited"] == 1
    assert set(tools["latency_ms"]) == {"p50", "p95", "p99"}
    assert 0 <= tools["latency_ms"]["p50"] <= tools["latency_ms"]["p95"] <= tools["latency_ms"]["p99"]


def test_percentiles_nearest_rank() -> None:
    from harness_one_plugins.metrics import _quantile

    data = [float(i) for i in range(1, 101)]
    assert (_quantile(data, 0.5), _quantile(data, 0.95), _quantile(data, 0.99)) == (50.0, 95.0, 99.0)
    assert _quantile([], 0.5) == 0.0


def test_latency_window_is_bounded(clock: Any) -> None:
    from harness_one_plugins import MetricsPlugin

    metrics = MetricsPlugin(window=10)
    reg = ToolRegistry(plugins={"metrics": metrics}, standard_plugins=False, autoload=False)
    reg.add(lambda: 1, name="f")
    for _ in range(100):
        reg.call("f")
    assert len(metrics._tools["f"].latencies) == 10
    assert reg.stats()["tools"]["f"]["successes"] == 100


def test_a_flood_of_arguments_makes_no_flood_of_log(clock: Any) -> None:
    reg = ToolRegistry(plugins={"logging": LoggingPlugin(log_arguments=True)}, autoload=False, clock=clock)
    reg.add(lambda **kw: "ok", name="many", parameters={"type": "object"})
    flood = {f"k{i:05}": [i] * 200 for i in range(100)} | {f"x{i:05}": i for i in range(5000)} | {"token": "t0p"}
    with capture_logs() as logs:
        reg.call("many", flood)
    [event] = logs
    assert len(event["arg_keys"]) == 64 and event["arg_keys_omitted"] == len(flood) - 64
    logged = event["arguments"]
    # about 16,384 characters in all: the entries that fit, then how many more there were
    assert len(json.dumps(logged)) < 17_000 and logged["..."] == f"{len(flood) - (len(logged) - 1)} more entries"
    assert logged["k00000"][-1] == "... 100 more items" and len(logged["k00000"]) == 101
    assert redact({"a": {"token": "x"}, "b": list(range(150))}) == {
        "a": {"token": "[REDACTED]"},
        "b": [*range(100), "... 50 more items"],
    }


def _fails() -> None:
    raise ValueError("no")


@pytest.mark.parametrize("fn", [lambda: 1, _fails], ids=["post_call", "on_error"])
def test_the_logging_check_follows_level_changes_at_once(registry: ToolRegistry, fn: Callable[[], Any]) -> None:
    """The per-call check reads the stdlib's own cached answers, which every level change clears.

    Both of the plugin's per-call hooks (a success's event and a failure's) take the same gate.
    """
    events: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            events.append(record)

    logger = logging.getLogger("harness_one.calls")
    handler, level, propagate = Keep(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    registry.add(fn, name="one")
    try:
        logger.setLevel(logging.WARNING)
        registry.try_call("one")
        assert events == []  # INFO events, a WARNING logger: nothing built
        logger.setLevel(logging.INFO)
        registry.try_call("one")
        assert len(events) == 1
        logging.disable(logging.INFO)
        registry.try_call("one")
        logging.disable(logging.NOTSET)
        logger.disabled = True
        registry.try_call("one")
        logger.disabled = False
        assert len(events) == 1
        registry.try_call("one")
        assert len(events) == 2
        with capture_logs() as seen:  # structlog configured by the application: events go there
            logger.setLevel(logging.WARNING)
            registry.try_call("one")
            registry.try_call("one")  # the stdlib's "no" is cached now: structlog still hears it
        assert [e["event"] for e in seen] == ["tool_call", "tool_call"] and len(events) == 2
        outcome = "ok" if fn is not _fails else "error"
        assert [e["outcome"] for e in seen] == [outcome, outcome]
        assert [r.harness_one["outcome"] for r in events] == [outcome, outcome]  # type: ignore[attr-defined]
    finally:
        logging.disable(logging.NOTSET)
        logger.disabled = False
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def test_a_removed_tools_metrics_go_with_it() -> None:
    reg = ToolRegistry(autoload=False)
    for i in range(50):
        reg.add(lambda: 1, name=f"t{i}")
        reg.call(f"t{i}")
    assert len(reg.plugins.get("metrics").snapshot()) == 50
    for i in range(50):
        reg.remove(f"t{i}")
    assert reg.plugins.get("metrics").snapshot() == {} and reg.stats()["tools"] == {}


def test_a_call_still_running_when_its_tool_is_removed_brings_no_figures_back() -> None:
    reg = ToolRegistry(autoload=False)
    attempts: list[int] = []

    def flaky() -> int:
        attempts.append(1)
        if len(attempts) == 1:
            reg.remove("flaky")  # while its call runs; the retry and the success count where it went
            raise ConnectionError("transient")
        return 1

    reg.add(flaky, name="flaky", idempotent=True, retry={"attempts": 2, "on": [ConnectionError], "initial": 0})
    assert reg.call("flaky") == 1 and len(attempts) == 2
    assert reg.plugins.get("metrics").snapshot() == {}


def test_a_request_refused_before_it_became_a_call_is_logged() -> None:
    """An unknown tool name, a bad context: no call, so no tool_call event (nothing logged at all)."""
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: 1, name="one")
    with capture_logs() as logs:
        assert not reg.try_call("delete_all_users", call_id="c-1").ok
        assert not reg.try_call("one", context=[1]).ok
        with pytest.raises(ToolNotFound):
            reg.get("missing")  # a lookup: no event
    events = [e for e in logs if e["event"] == "tool_call"]
    assert [(e["tool"], e["outcome"], e["error_type"]) for e in events] == [
        ("delete_all_users", "refused", "ToolNotFound"),
        ("one", "refused", "ToolArgumentError"),
    ]
    assert events[0]["call_id"] == "c-1" and "delete_all_users" in events[0]["error"]


class RaisingHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        raise RuntimeError("log shipper down")


class RaisingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        raise RuntimeError("filter down")


@pytest.fixture
def lost_events(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], int]]:
    """The count of log events lost to the application's logging, from zero for this test."""
    import harness_one._log as log_module

    monkeypatch.setattr(log_module, "_failures", 0, raising=False)
    yield lambda: log_module._failures


@pytest.mark.parametrize("broken", ["handler", "filter"])
def test_a_raising_log_handler_or_filter_never_fails_a_call_whose_tool_ran(
    broken: str, lost_events: Callable[[], int], capsys: pytest.CaptureFixture[str]
) -> None:
    logger = logging.getLogger("harness_one.calls")
    handler = RaisingHandler() if broken == "handler" else logging.StreamHandler(io.StringIO())
    if broken == "filter":
        handler.addFilter(RaisingFilter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    charges: list[int] = []

    def charge(amount: int) -> int:
        charges.append(amount)
        return amount

    def fails() -> None:
        raise ValueError("card declined")

    try:
        reg = ToolRegistry(autoload=False)
        reg.add(charge)
        reg.add(fails)
        assert reg.call("charge", {"amount": 5}) == 5 and charges == [5]  # was PluginError: a retry would charge twice
        failed = reg.try_call("fails")
        assert failed.error is not None and failed.error.kind == "tool_failed"  # the tool's error, not the log's
        assert not reg.try_call("missing").ok and lost_events() == 3
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    shown = capsys.readouterr().err
    assert shown.count("--- harness_one: the log event 'tool_call'") == 1 and "RuntimeError" in shown  # the first one only


def test_a_raising_structlog_processor_never_fails_a_call(
    lost_events: Callable[[], int], capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(logger: Any, method: str, event: Any) -> Any:
        raise RuntimeError("processor down")

    structlog.configure(processors=[broken])
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: 1, name="one")
    before = lost_events()  # building the registry may log too
    assert reg.call("one") == 1 and lost_events() == before + 1
    assert "processor down" in capsys.readouterr().err


def test_a_lost_log_event_is_not_shown_when_the_application_turned_logging_errors_off(
    lost_events: Callable[[], int], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness_one import log_event

    monkeypatch.setattr(logging, "raiseExceptions", False)
    logger = logging.getLogger("harness_one.quiet")
    handler = RaisingHandler()
    logger.addHandler(handler)
    try:
        log_event(logging.WARNING, "x", logger="harness_one.quiet", n=1)
    finally:
        logger.removeHandler(handler)
    assert lost_events() == 1 and capsys.readouterr().err == ""


@pytest.mark.parametrize("window", [-1, 0, "10", True, 2.5, None])
def test_the_metrics_window_is_checked_when_the_plugin_is_built(window: Any) -> None:
    from harness_one import PluginError
    from harness_one_plugins import MetricsPlugin

    with pytest.raises(ValueError, match=r"metrics window must be a positive integer, not "):
        MetricsPlugin(window=window)
    with pytest.raises(PluginError, match="metrics window"):  # not every call failing later
        ToolRegistry(autoload=False, plugin_options={"metrics": {"window": window}})
    assert MetricsPlugin(window=1).window == 1


class _Rows(list[int]):
    def __len__(self) -> int:
        raise RuntimeError("len is broken")


def test_a_result_whose_len_raises_is_logged_with_its_size(caplog: pytest.LogCaptureFixture) -> None:
    """The event's ``result_size`` read ``len(result)``: a list subclass whose ``__len__`` raises made
    the call a ``PluginError`` after its tool ran (a retry would run it again)."""
    reg = ToolRegistry(autoload=False)
    runs: list[int] = []

    def rows() -> list[int]:
        runs.append(1)
        return _Rows([1, 2, 3])

    reg.add(rows)
    with caplog.at_level(logging.INFO, logger="harness_one.calls"):
        value = reg.call("rows")
    assert type(value) is _Rows and value[:] == [1, 2, 3] and runs == [1]
    (event,) = [r.harness_one for r in caplog.records if r.name == "harness_one.calls"]  # type: ignore[attr-defined]
    assert event["outcome"] == "ok" and event["result_size"] == 3


class Translates:
    """Turns a tool's failure into another error the caller gets (an earlier ``on_error`` than logging's)."""

    @hookimpl(tryfirst=True)
    def harness_on_error(self, call: Call, error: BaseException) -> Outcome | None:
        return Outcome.failure(ToolError("the backend is down; try later")) if call.tool.name == "down" else None


class BreaksOnError:
    @hookimpl(tryfirst=True)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        raise RuntimeError("on_error broke")


def test_the_event_names_the_error_the_caller_gets(registry: ToolRegistry) -> None:
    registry.plugins.register(Translates(), name="translates")

    def down() -> str:
        raise OSError("connection refused")

    registry.add(down)
    with capture_logs() as logs, pytest.raises(ToolError, match="the backend is down"):
        registry.call("down")
    [event] = logs
    assert (event["outcome"], event["error_type"], event["error"]) == ("error", "ToolError", "the backend is down; try later")


def test_a_broken_on_error_hook_is_logged_as_the_plugin_error_the_caller_gets(registry: ToolRegistry) -> None:
    registry.plugins.register(BreaksOnError(), name="breaks")

    def fails() -> str:
        raise ValueError("tool failed")

    registry.add(fails)
    with capture_logs() as logs, pytest.raises(PluginError) as raised:
        registry.call("fails")
    [event] = logs
    assert event["error_type"] == "PluginError" and raised.value.plugin == "breaks"
    assert event["error"].startswith("Internal error in plugin 'breaks' while handling an error of 'fails'")
