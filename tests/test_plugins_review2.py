"""Review fixes of the cache, approval and logging plugins: what each fix stops, reproduced."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from harness_one import ManualClock, Redactor, ToolRegistry, log_enabled
from harness_one_plugins.approval import ApprovalConflict, ApprovalDenied, ApprovalNotFound, ApprovalPlugin
from harness_one_plugins.cache import CachePlugin


def approval(reg: ToolRegistry) -> ApprovalPlugin:
    plugin = reg.plugins.get("approval")
    assert isinstance(plugin, ApprovalPlugin)
    return plugin


# ------------------------------------------------------------------ cache


def test_the_plugin_wide_ttl_caches_read_only_tools_not_idempotent_writes() -> None:
    """A thermostat set to 21, 25, then 21 again: the third call was answered from the cache, unrun."""
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugin_options={"cache": {"ttl": 300}})
    state = {"temp": 18}

    def set_temperature(celsius: int) -> str:
        """Set the thermostat."""
        state["temp"] = celsius
        return f"set to {celsius}"

    reads: list[str] = []

    def get_weather(city: str) -> str:
        """Read the weather."""
        reads.append(city)
        return "sunny"

    reg.add(set_temperature, idempotent=True)
    reg.add(get_weather, read_only=True)
    ran = [reg.try_call("set_temperature", {"celsius": c}).ran for c in (21, 25, 21)]
    assert ran == [True, True, True] and state["temp"] == 21
    assert [reg.try_call("get_weather", {"city": "Oslo"}).ran for _ in range(2)] == [True, False] and reads == ["Oslo"]
    assert reg.stats()["cache"] == {"hits": 1, "misses": 1, "uncached": 0, "entries": 1}


def test_an_idempotent_tools_own_cache_ttl_is_its_authors_opt_in() -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock())
    runs: list[str] = []
    reg.add(lambda sku: runs.append(sku) or 7, name="price", description="A price.", idempotent=True, cache_ttl=60)
    assert [reg.try_call("price", {"sku": "a"}).ran for _ in range(2)] == [True, False] and runs == ["a"]


def test_a_destructive_tool_is_never_cached_even_approved_or_with_its_own_cache_ttl() -> None:
    """A delete after a re-create was answered from the cache: the file stayed, the model was told it was deleted."""
    reg = ToolRegistry(
        autoload=False, clock=ManualClock(), plugin_options={"cache": {"ttl": 300}, "approval": {"destructive": True}}
    )
    files: set[str] = set()

    def write_file(path: str) -> str:
        """Create a file."""
        files.add(path)
        return f"wrote {path}"

    def delete_file(path: str) -> str:
        """Delete a file."""
        files.discard(path)
        return f"deleted {path}"

    reg.add(write_file)
    reg.add(delete_file, idempotent=True, destructive=True, cache_ttl=300)
    cache = reg.plugins.get("cache")
    assert isinstance(cache, CachePlugin) and cache.ttl_for(reg.get("delete_file")) is None
    for i in range(2):
        reg.call("write_file", {"path": "x"})
        assert reg.try_call("delete_file", {"path": "x"}, call_id=f"d{i}").error is not None  # held
        approval(reg).approve(f"d{i}")
        resumed = approval(reg).resume(f"d{i}")
        assert resumed.ran and resumed.value == "deleted x" and files == set()
    assert reg.stats()["cache"]["entries"] == 0


class Matrix:
    """A result whose repr is short and whose memory is not (a numpy array renders as ``array([0., ...])``)."""

    def __init__(self) -> None:
        self.data = bytearray(1_000_000)

    def __repr__(self) -> str:
        return "Matrix(...)"

    def __deepcopy__(self, memo: dict[int, Any]) -> Matrix:
        return Matrix()


@pytest.mark.parametrize(
    "result",
    [Matrix(), (1, 2), {1: "a"}, ["ok", {"inner": b"raw"}], {"nested": [Matrix()]}],
    ids=["object", "tuple", "int key", "bytes inside", "object inside"],
)
def test_only_plain_json_results_are_cached(result: Any) -> None:
    """The bound counts rendered characters: 40 arrays of 16 MB, 25 characters each, were kept (670 MB)."""
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugin_options={"cache": {"ttl": 600}})
    runs: list[int] = []
    reg.add(lambda n: runs.append(n) or result, name="load", description="Load.", read_only=True)
    reg.add(lambda n: runs.append(n) or {"rows": [n, 1.5, None, True, "x"]}, name="rows", description="Rows.", read_only=True)
    for _ in range(2):
        reg.try_call("load", {"n": 1})
        reg.try_call("rows", {"n": 2})
    assert runs == [1, 2, 1]  # the plain result was served from the cache, the other ran again
    assert reg.stats()["cache"] == {"hits": 1, "misses": 1, "uncached": 2, "entries": 1}


def test_a_cyclic_result_is_not_cached() -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugin_options={"cache": {"ttl": 600}})
    loop: list[Any] = []
    loop.append(loop)
    reg.add(lambda: loop, name="loop", description="A cycle.", read_only=True)
    assert reg.try_call("loop").ran and reg.try_call("loop").ran and reg.stats()["cache"]["entries"] == 0


# ------------------------------------------------------------------ approval


def test_a_repeated_approve_of_a_call_that_ran_does_not_run_it_again() -> None:
    """Hold, approve, resume (paid); the same call re-sent under its id was held again, and a second approve paid twice."""
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugin_options={"approval": {"ttl": 100}})
    paid: list[float] = []

    def pay(to: str, amount: float) -> str:
        """Pay."""
        paid.append(amount)
        return f"paid {amount}"

    reg.add(pay, options={"requires_approval": True})
    args = {"to": "bob", "amount": 500}
    assert reg.try_call("pay", args, call_id="call_7").error.kind == "approval_required"  # type: ignore[union-attr]
    approval(reg).approve("call_7")
    assert approval(reg).resume("call_7").value == "paid 500"
    again = reg.try_call("pay", args, call_id="call_7")  # the agent loop re-sends the same turn
    assert isinstance(again.error, ApprovalConflict) and not again.ran
    assert "already ran under call id call_7" in again.error.message and "new call id" in again.error.message
    assert approval(reg).pending() == []
    with pytest.raises(ApprovalNotFound):  # the replayed webhook, the double click
        approval(reg).approve("call_7")
    with pytest.raises(ApprovalNotFound):
        approval(reg).resume("call_7")
    assert paid == [500]
    reg.clock.advance(101)  # type: ignore[attr-defined]  # after ttl the id is forgotten: the call waits again
    assert reg.try_call("pay", args, call_id="call_7").error.kind == "approval_required"  # type: ignore[union-attr]
    assert reg.try_call("pay", args, call_id="call_8").error.kind == "approval_required"  # type: ignore[union-attr]


def test_the_same_call_after_its_denial_was_used_is_denied_again_not_held() -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock())
    reg.add(lambda amount: amount, name="pay", description="Pay.", options={"requires_approval": True})
    reg.try_call("pay", {"amount": 5}, call_id="c1")
    approval(reg).deny("c1", "over budget")
    assert isinstance(approval(reg).resume("c1").error, ApprovalDenied)
    again = reg.try_call("pay", {"amount": 5}, call_id="c1")
    assert isinstance(again.error, ApprovalDenied) and again.error.reason == "over budget"
    assert approval(reg).pending() == []


def test_the_held_call_keeps_its_own_copy_of_nested_arguments() -> None:
    """A UI masking a nested value of the error's arguments for display changed the held call: it could not run."""
    reg = ToolRegistry(autoload=False, clock=ManualClock())
    ran: list[dict[str, Any]] = []

    def deploy(service: str, config: dict[str, Any]) -> str:
        """Deploy a service."""
        ran.append(config)
        return "deployed"

    reg.add(deploy, options={"requires_approval": True})
    config = {"replicas": 3, "token": "s3cr3t"}
    held = reg.try_call("deploy", {"service": "api", "config": config}, call_id="c1")
    held.error.arguments["config"]["token"] = "***"  # type: ignore[union-attr]  # masked for display
    config["replicas"] = 99  # the caller reuses its dict
    assert approval(reg).pending()[0].arguments["config"] == {"replicas": 3, "token": "s3cr3t"}
    approval(reg).approve("c1")
    resumed = approval(reg).resume("c1")
    assert resumed.ok and ran == [{"replicas": 3, "token": "s3cr3t"}]


# ------------------------------------------------------------------ logging and redaction


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    found: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            found.append(record)

    logger = logging.getLogger("harness_one.calls")
    handler, level, propagate = Keep(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield found
    logger.removeHandler(handler)
    logger.setLevel(level)
    logger.propagate = propagate


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (
            {"Name": "/prod/db_password", "Value": "h1", "Type": "SecureString"},
            {"Name": "/prod/db_password", "Type": "SecureString"},
        ),
        ({"Tags": [{"Key": "api_token", "Value": "h2"}]}, {"Tags": [{"Key": "api_token"}]}),
        (
            {"Parameters": [{"ParameterKey": "DbPassword", "ParameterValue": "h3"}]},
            {"Parameters": [{"ParameterKey": "DbPassword"}]},
        ),
        (
            {"v": [{"name": "API_TOKEN", "value": "h4", "masked": True, "protected": True, "environment_scope": "*"}]},
            {"v": [{"name": "API_TOKEN", "masked": True, "protected": True, "environment_scope": "*"}]},
        ),
        ({"env": [{"NAME": "DB_PASSWORD", "VALUE": "h5"}]}, {"env": [{"NAME": "DB_PASSWORD"}]}),
    ],
    ids=["ssm", "aws tags", "cloudformation", "ci variable of 5 keys", "upper case"],
)
def test_name_value_pairs_of_secrets_are_masked_in_any_case(value: dict[str, Any], shown: dict[str, Any]) -> None:
    masked = Redactor()(value)
    assert "h" + "1" not in json.dumps(masked) and redacted_count(masked) == 1
    assert without_redacted(masked) == shown


def test_a_pair_whose_name_is_not_secret_is_shown() -> None:
    value = {"Tags": [{"Key": "team", "Value": "search"}], "env": [{"name": "REGION", "value": "eu"}]}
    assert Redactor()(value) == value


def redacted_count(value: Any) -> int:
    return json.dumps(value).count("[REDACTED]")


def without_redacted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_redacted(v) for k, v in value.items() if v != "[REDACTED]"}
    if isinstance(value, list):
        return [without_redacted(v) for v in value]
    return value


def test_logged_ssm_arguments_hide_the_value(records: list[logging.LogRecord]) -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"logging": {"log_arguments": True}})
    reg.add(lambda Name, Value: "ok", name="put_parameter", description="SSM PutParameter.")  # noqa: N803
    reg.call("put_parameter", {"Name": "/prod/db_password", "Value": "hunter2"})
    assert records[-1].harness_one["arguments"] == {"Name": "/prod/db_password", "Value": "[REDACTED]"}  # type: ignore[attr-defined]


class Spied:
    """An argument whose redaction is seen: a logged value that is not JSON is shown by its repr."""

    shown = 0

    def __repr__(self) -> str:
        Spied.shown += 1
        return "Spied()"


def test_structlogs_level_filter_keeps_events_unbuilt() -> None:
    """With structlog configured, every event was built and redacted, whatever its level filter dropped."""
    out = io.StringIO()

    def configure(level: int) -> None:
        structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(level),
            processors=[structlog.processors.JSONRenderer()],
            logger_factory=structlog.PrintLoggerFactory(out),
        )

    configure(logging.WARNING)
    reg = ToolRegistry(autoload=False, plugin_options={"logging": {"log_arguments": True}})
    reg.add(lambda doc: 1, name="store", description="Store.")
    Spied.shown = 0
    reg.call("store", {"doc": Spied()})
    assert Spied.shown == 0 and out.getvalue() == "" and not log_enabled(logging.INFO, "harness_one.calls")
    configure(logging.INFO)  # a new configuration is asked again
    reg.call("store", {"doc": Spied()})
    assert Spied.shown == 1 and json.loads(out.getvalue())["arguments"] == {"doc": "Spied()"}
    assert log_enabled(logging.INFO, "harness_one.calls")


def test_structlogs_stdlib_bound_logger_asks_the_stdlib_level() -> None:
    structlog.configure(
        wrapper_class=structlog.stdlib.BoundLogger,
        logger_factory=structlog.stdlib.LoggerFactory(),
        processors=[structlog.processors.JSONRenderer()],
    )
    logger = logging.getLogger("harness_one.review2")
    logger.setLevel(logging.ERROR)
    try:
        assert not log_enabled(logging.INFO, "harness_one.review2") and log_enabled(logging.ERROR, "harness_one.review2")
        logger.setLevel(logging.DEBUG)  # the stdlib's level, read live
        assert log_enabled(logging.INFO, "harness_one.review2")
    finally:
        logger.setLevel(logging.NOTSET)


def test_terminal_controls_in_names_are_escaped() -> None:
    redactor = Redactor()
    assert redactor.key("id\x1b[2J\x85\u2028x\u2029\x07\x7f") == "id\\x1b[2J\\x85\\u2028x\\u2029\\x07\\x7f"
    assert redactor.key("plain_name") == "plain_name" and redactor.key("call-1 é") == "call-1 é"


def test_a_refused_tool_names_controls_reach_the_console_escaped() -> None:
    out = io.StringIO()
    structlog.configure(
        processors=[structlog.dev.ConsoleRenderer(colors=False)], logger_factory=structlog.PrintLoggerFactory(out)
    )
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: "ok", name="ping", description="Ping.")
    reg.try_call("delete_all\x1b[2K\x1b]0;pwned\x07", {})
    reg.try_call("ping", {}, call_id="id\x1b[2J\x85\u2028x")
    text = out.getvalue()
    assert "tool=delete_all\\x1b[2K\\x1b]0;pwned\\x07" in text and "call_id=id\\x1b[2J\\x85\\u2028x" in text
    assert not any(char in text for char in "\x1b\x07\x85\u2028")


def test_terminal_controls_in_logged_values_and_errors_reach_the_console_escaped() -> None:
    """A model's argument or a tool's error text with ESC, CR or BEL is shown escaped: a console would
    run them (recolour, clear, overwrite the line); line feeds and tabs keep their lines."""
    assert Redactor().text("a\x1b[2Jb\rc\x07\x9b\nd\te") == "a\\x1b[2Jb\\rc\\x07\\x9b\nd\te"
    out = io.StringIO()
    structlog.configure(
        processors=[structlog.dev.ConsoleRenderer(colors=False)], logger_factory=structlog.PrintLoggerFactory(out)
    )
    reg = ToolRegistry(autoload=False, plugin_options={"logging": {"log_arguments": True}})

    def echo(text: str) -> str:
        """Echo."""
        raise ValueError(text)

    reg.add(echo)
    reg.try_call("echo", {"text": "x\x1b]0;pwned\x07\ry"})
    text = out.getvalue()
    assert "pwned" in text and not any(char in text for char in "\x1b\x07\r")


def test_logged_arguments_stay_within_the_bound_with_many_empty_containers(records: list[logging.LogRecord]) -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"logging": {"log_arguments": True}})

    def ingest(rows: list[Any]) -> int:
        """Ingest rows."""
        return len(rows)

    reg.add(ingest)
    rows = [[[] for _ in range(100)] for _ in range(98)]
    reg.call("ingest", {"rows": rows})
    logged = json.dumps(records[-1].harness_one["arguments"])  # type: ignore[attr-defined]
    assert 10_000 < len(logged) <= 16_384 + 200  # about 16,384 characters, the rest counted
    assert len(json.dumps(Redactor()({"rows": [{} for _ in range(5000)]}))) <= 16_384 + 200


def test_every_spelling_of_a_pairs_value_field_is_masked() -> None:
    """A second value field in another case (``"Value": ""`` added by a model) unmasked the real one: each
    key that reads as the value field is masked, and a secret name under any spelling of the name field counts."""
    masked = Redactor()({"name": "API_TOKEN", "value": "s3cr3t-live-token", "Value": ""})
    assert "s3cr3t" not in json.dumps(masked) and redacted_count(masked) == 2
    masked = Redactor()({"Name": "API_TOKEN", "name": "region", "value": "s3cr3t-live-token"})
    assert "s3cr3t" not in json.dumps(masked) and redacted_count(masked) == 1
