"""The MCP client and a server's lines it cannot read: over stdio a line that answers no request (a banner, a ``print``,
JSON with no reply's ``id``) is skipped with a WARNING showing its start, masked and cut, as the SDK skips it, and a
deadline that passes after one names the first; over HTTP the SDK's ERROR record of an unreadable reply is cut to
its first problem and the server's name, as over stdio."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import mcp.client.stdio as sdk_stdio
import mcp.client.streamable_http as sdk_http
import mcp.types as types
import pytest
from mcp_types import jsonrpc_message_adapter
from test_review32_mcp import _remote

from harness_one import ToolRegistry, ToolTimeout
from harness_one.mcp import McpConnectionError, McpSpec, _client, import_tools

SECRET = "hunter2-correct-horse-9876"

#: A raw stdio server: ``MODE`` (argv[1]) says what it writes besides its replies. ``banner``: a line before it
#: starts and one before each call's reply; ``junk``: a call answered only by a line that is no JSON-RPC message
#: (argv[2]); ``echo``: a call answered only by a line quoting its arguments; ``mute``: the handshake answered only
#: by a usage line; ``values``: calls never answered, and once two are under way a line quoting the values of the
#: arguments of the one that has them, without their keys; ``reply``: a call answered by argv[2] with its id put in
#: for ``ID``; ``chatty``: a call answered after argv[2] lines, each quoting the values of its arguments.
SERVER = textwrap.dedent(
    """
    import json, sys
    mode = sys.argv[1]
    calls = []
    def write(text):
        sys.stdout.write(text + "\\n")
        sys.stdout.flush()
    if mode == "banner":
        write("server starting")
    for line in sys.stdin:
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if method == "initialize":
            if mode == "mute":
                write("usage: server [--token=%s]" % sys.argv[2])
                continue
            info = {"name": "raw", "version": "1"}
            result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": info}
            write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}))
        elif method == "tools/list":
            tools = [{"name": "t", "inputSchema": {"type": "object"}}]
            write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}}))
        elif method == "tools/call":
            if mode == "banner":
                write("handling a call")
                write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "ran"}]}}))
            elif mode == "junk":
                write(sys.argv[2])
            elif mode == "echo":
                write("got " + json.dumps(message["params"]["arguments"]))
            elif mode == "values":
                calls.append(message["params"].get("arguments") or {})
                if len(calls) == 2:
                    write("got " + " ".join(str(v) for args in calls for v in args.values()))
            elif mode == "reply":
                write(sys.argv[2].replace("ID", json.dumps(request_id)))
            elif mode == "chatty":
                values = " ".join(str(v) for v in (message["params"].get("arguments") or {}).values())
                for number in range(int(sys.argv[2])):
                    write("item %d of %s" % (number, values))
                write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "ran"}]}}))
        elif request_id is not None:
            write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {}}))
    """
)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "raw_server.py"
    path.write_text(SERVER)
    return path


def _spec(script: Path, *argv: str) -> McpSpec:
    return McpSpec(name="raw", command=(sys.executable, str(script), *argv))


def _records(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == logger]


# --------------------------------------------------------------------------- 1. stdio: lines that answer no request


def test_banner_lines_are_skipped_with_a_warning_and_the_reply_still_comes(
    script: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK logged each at ERROR with its traceback and pydantic's dump, never saying what the line was."""
    caplog.set_level(logging.DEBUG, logger=sdk_stdio.__name__)
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, _spec(script, "banner"), connect_timeout=30, call_timeout=30)
    try:
        assert registry.call("t") == "ran"
    finally:
        remote.close()
    records = _records(caplog, sdk_stdio.__name__)
    problem = "Invalid JSON: expected value at line 1 column 1"
    assert [r.getMessage() for r in records] == [
        f"MCP server 'raw' wrote a line that is no JSON-RPC message, skipped ({problem}): 'server starting'",
        f"MCP server 'raw' wrote a line that is no JSON-RPC message, skipped ({problem}): 'handling a call'",
    ]
    assert all(r.levelno == logging.WARNING and r.levelname == "WARNING" and r.exc_info is None for r in records)


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("error: bad request password=" + SECRET, "'error: bad request password=[REDACTED]'"),
        ('{"foo": 1}', "'{\"foo\": 1}'"),  # JSON, no JSON-RPC message and no id
        ('{"jsonrpc": "2.0", "result": {"content": [{"ty', '\'{"jsonrpc": "2.0", "result": {"content": [{"ty\''),
        ("x" * 500, "'" + "x" * 80 + "...'"),
        # pydantic's first problem is the "jsonrpc" value: the record quoted '1.0', not the line
        ('{"jsonrpc": "1.0", "note": "hi"}', '\'{"jsonrpc": "1.0", "note": "hi"}\''),
    ],
    ids=["text", "json", "half", "long", "nested-problem"],
)
def test_a_call_answered_only_by_a_skipped_line_says_so_at_its_deadline(
    script: Path, caplog: pytest.LogCaptureFixture, line: str, shown: str
) -> None:
    """The call waited out its deadline with no word of the line that came in place of its reply."""
    caplog.set_level(logging.DEBUG, logger=sdk_stdio.__name__)
    registry = ToolRegistry(autoload=False)
    # The deadline is wall-clock (the SDK's wait): the line is written as soon as the call arrives, well within it.
    remote = import_tools(registry, _spec(script, "junk", line), connect_timeout=30, call_timeout=2)
    try:
        error = registry.try_call("t").error
    finally:
        remote.close()
    assert isinstance(error, ToolTimeout)
    assert error.message == (
        "Tool 't': MCP server 'raw' did not answer within 2 s (the default deadline of remote calls without a timeout "
        f"policy). Meanwhile it wrote a line that answered no request (no JSON-RPC message), skipped; the first: {shown}."
    )
    (record,) = _records(caplog, sdk_stdio.__name__)
    assert record.levelno == logging.WARNING and record.getMessage().endswith(f": {shown}")
    assert SECRET not in caplog.text and "Traceback" not in caplog.text


def test_a_skipped_line_quoting_the_calls_secret_arguments_is_masked(script: Path) -> None:
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, _spec(script, "echo"), connect_timeout=30, call_timeout=2)
    try:
        error = registry.try_call("t", {"api_key": SECRET, "note": SECRET}).error
    finally:
        remote.close()
    assert isinstance(error, ToolTimeout)
    assert error.message.endswith("""skipped; the first: 'got {"api_key": "[REDACTED]", "note": "[REDACTED]"}'.""")


def test_a_handshake_answered_only_by_a_skipped_line_names_it(script: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A command that is no MCP server (it prints its usage) failed the import with ``did not answer within N s.``"""
    caplog.set_level(logging.DEBUG, logger=sdk_stdio.__name__)
    with pytest.raises(McpConnectionError) as raised:
        import_tools(ToolRegistry(autoload=False), _spec(script, "mute", SECRET), connect_timeout=2)
    assert str(raised.value) == (
        "MCP server 'raw' did not answer within 2 s. Meanwhile it wrote a line that answered no request (no JSON-RPC "
        "message), skipped; the first: 'usage: server [--token=[REDACTED]]'."
    )
    assert SECRET not in caplog.text


def test_a_skipped_line_quoting_another_calls_secret_is_masked_in_every_calls_error_and_the_warning(
    script: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The line, written once both calls were under way, quotes the secret of one of them without its key: the other
    call's deadline error named it masked with its own secret values only (none), and the WARNING by key only."""
    caplog.set_level(logging.DEBUG, logger=sdk_stdio.__name__)
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, _spec(script, "values"), connect_timeout=30, call_timeout=5)
    errors: dict[str, Any] = {}

    def call(name: str, arguments: dict[str, Any]) -> None:
        errors[name] = registry.try_call("t", arguments).error

    threads = [
        threading.Thread(target=call, args=("bare", {})),
        threading.Thread(target=call, args=("keyed", {"api_key": SECRET})),
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        remote.close()
    assert not any(thread.is_alive() for thread in threads)
    for error in errors.values():
        assert isinstance(error, ToolTimeout)
        assert error.message.endswith("skipped; the first: 'got [REDACTED]'.")
    (record,) = _records(caplog, sdk_stdio.__name__)
    assert record.levelno == logging.WARNING and record.getMessage().endswith(": 'got [REDACTED]'")
    assert SECRET not in caplog.text


def test_a_skipped_lines_warning_is_dropped_where_the_logger_logs_errors_only(script: Path) -> None:
    """The SDK's record passed the logger's check as an ERROR: lowered to a WARNING, it was still logged."""
    logger = logging.getLogger(sdk_stdio.__name__)
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append  # type: ignore[method-assign]
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR)
    logger.propagate = False
    registry = ToolRegistry(autoload=False)
    try:
        remote = import_tools(registry, _spec(script, "banner"), connect_timeout=30, call_timeout=30)
        try:
            assert registry.call("t") == "ran"
        finally:
            remote.close()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
    assert records == []


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ('{"jsonrpc": "1.0", "id": ID, "result": {"content": []}}', "Input should be '2.0'"),
        ('{"id": ID, "result": {"content": []}}', "Field required"),
    ],
    ids=["jsonrpc-1.0", "no-jsonrpc"],
)
def test_a_reply_with_its_id_and_a_problem_inside_fails_its_call_at_once(
    script: Path, caplog: pytest.LogCaptureFixture, reply: str, problem: str
) -> None:
    """A reply whose first problem was inside it was taken for a skipped line (pydantic's dump quoted only the
    value, ``'1.0'``): the call waited out its deadline, told of a line that "answered no request"."""
    caplog.set_level(logging.DEBUG, logger=sdk_stdio.__name__)
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, _spec(script, "reply", reply), connect_timeout=30, call_timeout=60)
    try:
        error = registry.try_call("t").error
    finally:
        remote.close()
    assert error is not None and not isinstance(error, ToolTimeout)
    assert error.message == f"Tool 't' failed on MCP server 'raw': the reply could not be read ({problem})"
    (record,) = _records(caplog, sdk_stdio.__name__)
    assert record.levelno == logging.ERROR and "skipped" not in record.getMessage()
    assert record.getMessage().startswith("Failed to parse JSONRPC message from server (MCP server 'raw'): ")


@pytest.mark.parametrize("request_id", ["true", "1.5"])
def test_a_line_with_an_id_no_request_has_is_no_skipped_line(
    script: Path, caplog: pytest.LogCaptureFixture, request_id: str
) -> None:
    """An id that answers no request (``true``): it was a skipped line quoting ``'true'``."""
    caplog.set_level(logging.DEBUG, logger=sdk_stdio.__name__)
    registry = ToolRegistry(autoload=False)
    line = '{"jsonrpc": "2.0", "id": ID, "result": {"content": []}}'.replace("ID", request_id)
    remote = import_tools(registry, _spec(script, "junk", line), connect_timeout=30, call_timeout=2)
    try:
        error = registry.try_call("t").error
    finally:
        remote.close()
    assert isinstance(error, ToolTimeout) and "Meanwhile" not in error.message
    (record,) = _records(caplog, sdk_stdio.__name__)
    assert record.levelno == logging.ERROR and "skipped" not in record.getMessage()


def test_each_calls_secret_values_are_walked_once_and_each_skipped_line_masked_once(
    script: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each skipped line walked every call's arguments twice (the WARNING and the kept line each masked it anew): a
    server printing 2,000 lines during a call with 1,000-row arguments took 8 s instead of 0.2 s."""
    caplog.set_level(logging.DEBUG, logger=sdk_stdio.__name__)  # the record's filter masks too
    walks: list[tuple[Any, ...]] = []
    masks: list[str] = []
    secrets_held, shown = _client.secrets_held, _client._shown

    def counted_held(*values: Any) -> list[str]:
        walks.append(values)
        return secrets_held(*values)

    def counted_shown(line: str, held: Any = ()) -> str:
        masks.append(line)
        return shown(line, held)

    monkeypatch.setattr(_client, "secrets_held", counted_held)
    monkeypatch.setattr(_client, "_shown", counted_shown)
    registry = ToolRegistry(autoload=False)
    lines = 20
    remote = import_tools(registry, _spec(script, "chatty", str(lines)), connect_timeout=30, call_timeout=30)
    try:
        assert registry.call("t", {"api_key": SECRET}) == "ran"
        assert registry.call("t", {"token": SECRET + "-2"}) == "ran"
        assert (len(walks), len(masks)) == (2, 2 * lines)  # one walk a call, one mask a line
        walks.clear()
        assert registry.call("t") == "ran"  # no arguments: still one walk, at its first line
        assert len(walks) == 1
    finally:
        remote.close()
    records = _records(caplog, sdk_stdio.__name__)
    assert len(records) == 3 * lines
    assert records[0].getMessage().endswith(": 'item 0 of [REDACTED]'")
    assert records[lines].getMessage().endswith(": 'item 0 of [REDACTED]'")
    assert SECRET not in caplog.text


def test_a_call_with_no_skipped_line_walks_no_arguments(
    script: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger=sdk_stdio.__name__)
    walks: list[tuple[Any, ...]] = []
    monkeypatch.setattr(_client, "secrets_held", lambda *values: walks.append(values) or [])
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, _spec(script, "chatty", "0"), connect_timeout=30, call_timeout=30)
    try:
        assert registry.call("t", {"api_key": SECRET}) == "ran"
    finally:
        remote.close()
    assert walks == [] and _records(caplog, sdk_stdio.__name__) == []


def _unpatched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's stdio client as an SDK the patch of its ``_parse_line`` does not apply to parses."""
    assert _client._sdk_parse_line is not None
    monkeypatch.setattr(sdk_stdio, "_parse_line", _client._sdk_parse_line)


def test_json_without_a_replys_id_is_skipped_where_the_sdks_parse_is_not_patched(
    script: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read from pydantic's quote of an object, ``{"foo": 1}`` was taken for a reply to the id ``None``: an ERROR,
    and the call's deadline error named no line."""
    _unpatched(monkeypatch)
    caplog.set_level(logging.DEBUG, logger=sdk_stdio.__name__)
    registry = ToolRegistry(autoload=False)
    remote = import_tools(registry, _spec(script, "junk", '{"foo": 1}'), connect_timeout=30, call_timeout=2)
    try:
        error = registry.try_call("t").error
    finally:
        remote.close()
    assert isinstance(error, ToolTimeout)
    assert error.message.endswith("""skipped; the first: '{"foo": 1}'.""")
    (record,) = _records(caplog, sdk_stdio.__name__)
    assert record.levelno == logging.WARNING


def _error_of(line: str) -> ValueError:
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    raise AssertionError(f"{line!r} parsed")


@pytest.mark.parametrize(
    ("line", "unread"),
    [
        ('{"foo": 1}', ([], '{"foo": 1}')),
        ("[1,2]", ([], "[1, 2]")),
        ('{"jsonrpc": "2.0", "id": true, "result": 5}', ([], "true")),  # the quote is of the id alone
        ('{"jsonrpc": "2.0", "method": "x", "params": 5}', ([], '{"jsonrpc": "2.0", "method": "x", "params": 5}')),
        ('{"jsonrpc": "2.0", "id": 3, "result": 5}', ([3], None)),
        ('{"jsonrpc": "2.0", "id": "a", "result": 5}', (["a"], None)),
        ("server starting", ([], "server starting")),
    ],
    ids=["no-id", "array", "id-true", "method", "int-id", "str-id", "text"],
)
def test_without_the_line_a_reply_is_an_object_with_a_str_or_int_id(line: str, unread: tuple[Any, ...]) -> None:
    """What pydantic's quote tells where the line itself is not known (an SDK that parses otherwise)."""
    assert _client._parsing.get() is None
    assert _client._unread(_error_of(line)) == unread


def test_the_patched_parse_passes_on_what_the_sdk_parse_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_parse_kept(line)`` raised a TypeError (in every stdio reader) for an SDK whose ``_parse_line`` takes more;
    one given no ``str`` first is read as where the patch does not apply."""
    parse = _client._sdk_parse_line
    assert parse is not None
    given: list[Any] = []

    def keyword(line: str, *, strict: bool = True) -> Any:
        given.append((_client._parsing.get(), strict))
        return parse(line)

    monkeypatch.setattr(_client, "_sdk_parse_line", keyword)
    error = _client._parse_kept("server starting", strict=False)
    assert given == [("server starting", False)]
    assert isinstance(error, ValueError) and _client._unread(error) == ([], "server starting")

    def raw(data: bytes, encoding: str) -> Any:
        given.append(_client._parsing.get())
        return parse(data.decode(encoding))

    given.clear()
    monkeypatch.setattr(_client, "_sdk_parse_line", raw)
    error = _client._parse_kept(b'{"foo": 1}', "utf-8")
    assert given == [None]
    assert isinstance(error, ValueError) and _client._unread(error) == ([], '{"foo": 1}')


# --------------------------------------------------------------------------- 2. HTTP: the SDK's record of an unreadable reply

#: Valid JSON, no JSON-RPC message (no "jsonrpc"): pydantic's dump in the SDK's record quoted the secret's value.
JUNK = json.dumps({"id": 0, "api_key": SECRET, "result": {"note": SECRET}})


@pytest.mark.parametrize("events", [False, True], ids=["json", "event-stream"])
@pytest.mark.parametrize("method", ["tools/call", "tools/list", "initialize"])
def test_the_sdks_record_of_an_unreadable_http_reply_is_cut_to_its_first_problem(
    caplog: pytest.LogCaptureFixture, method: str, events: bool
) -> None:
    """It logged its traceback and pydantic's dump, the secret's value quoted in it."""
    caplog.set_level(logging.DEBUG, logger=sdk_http.__name__)
    junk = JUNK.replace('"id": 0', '"id": ID')  # (the request's id, put in by the server)
    with _remote(**{method.replace("/", "_"): lambda message: [junk] if events else junk}) as (url, _):
        registry = ToolRegistry(autoload=False)
        if method == "tools/call":
            remote = import_tools(registry, url, name="remote", connect_timeout=10, call_timeout=10)
            try:
                assert "the reply could not be read (Field required)" in registry.try_call("t").error.message  # type: ignore[union-attr]
            finally:
                remote.close()
        else:
            with pytest.raises(McpConnectionError):
                import_tools(registry, url, name="remote", connect_timeout=10)
    kind = "SSE message" if events else "JSON response"
    records = [r for r in _records(caplog, sdk_http.__name__) if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in records] == [
        f"Error parsing {kind} (MCP server 'remote'): JSONRPCRequest.jsonrpc: Field required"
    ]
    assert records[0].exc_info is None
    assert SECRET not in caplog.text and "9876" not in caplog.text and "Traceback" not in caplog.text


def test_the_sdks_http_record_outside_a_connection_is_left_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    """An SDK client the application opens itself keeps the SDK's own record (the filter acts in harness-one's
    connections only)."""
    caplog.set_level(logging.DEBUG, logger=sdk_http.__name__)
    try:
        jsonrpc_message_adapter.validate_json(JUNK, by_name=False)
    except ValueError:
        sdk_http.logger.exception("Error parsing JSON response")
    (record,) = _records(caplog, sdk_http.__name__)
    assert record.getMessage() == "Error parsing JSON response" and record.exc_info is not None
