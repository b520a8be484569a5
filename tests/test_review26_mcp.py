"""Review 26 (MCP): an over-long stdio line answered on its own id, pydantic aliases in results, the cache and
``_meta``, and ``mcp_client`` namespaces."""

from __future__ import annotations

import asyncio
import datetime
import enum
import io
import json
import os
import sys
import threading
import types
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp_support import serve_command, server_env, serving
from pydantic import BaseModel, ConfigDict, Field, computed_field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from harness_one import Call, ToolRegistry
from harness_one._render import dumps, json_default
from harness_one.mcp import _stdio, create_server, http_app
from harness_one_plugins import CachePlugin

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
OPENING = [
    json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}).encode() + b"\n",
    b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
]
PING = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}).encode() + b"\n"
BIG = "x" * 1_200_000  # past the stdio line limit (1 MiB)
LIMIT = 1 << 20


def _dropped(line: bytes) -> _stdio._TooLong:
    """``line`` (without its newline) as :class:`_stdio._Lines` hands it out when it is over the limit."""
    dropped = _stdio._TooLong()
    for at in range(0, len(line) + 1, 100_000):  # in pieces, as it is read
        dropped.add(line[at : at + 100_000] + (b"\n" if at + 100_000 > len(line) else b""))
    return dropped.end()


def _answer(message: dict[str, Any]) -> list[dict[str, Any]]:
    line = _dropped(json.dumps(message).encode())
    replies = _stdio.reply_to(line, LIMIT, ValueError("dropped"))
    return [json.loads(reply.model_dump_json(by_alias=True, exclude_unset=True)) for reply in replies]


# --------------------------------------------------------------------------- 1. an over-long stdio line


def test_an_over_long_request_is_answered_on_its_own_id_wherever_the_id_is() -> None:
    """It was answered -32700 on id null: the client's call waited for ever. Now -32600 on the request's id,
    written first (Python's SDK) or last (the TypeScript SDK), a string id with an escape too."""
    params = {"name": "wait", "arguments": {"tag": BIG}}
    first = _answer({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
    last = _answer({"method": "tools/call", "params": params, "jsonrpc": "2.0", "id": "call-\u00e9"})
    size = len(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}))
    message = f"Request too large: the line is {size:,} bytes, more than the limit of {LIMIT:,}"
    assert first == [{"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": message}}]
    assert [(a["id"], a["error"]["code"]) for a in last] == [("call-\u00e9", -32600)]


def test_an_id_inside_the_params_is_never_taken_for_the_requests() -> None:
    """Only a top-level ``id`` names the request: one in its arguments (another request's, maybe) does not."""
    inner = {"jsonrpc": "2.0", "method": "tools/call", "params": {"arguments": {"id": 5, "tag": BIG}}, "id": 9}
    assert [a["id"] for a in _answer(inner)] == [9]
    nested_last = {"jsonrpc": "2.0", "method": "tools/call", "params": {"arguments": {"tag": BIG, "id": 5}}}
    assert [(a["id"], a["error"]["code"]) for a in _answer(nested_last)] == [(None, -32600)]
    surrogate = {"jsonrpc": "2.0", "id": "\ud800", "method": "tools/call", "params": {"tag": BIG}}
    assert [a["id"] for a in _answer(surrogate)] == [None]  # an id the client cannot know as its own


def test_an_over_long_response_of_the_clients_is_never_answered() -> None:
    for response in (
        {"jsonrpc": "2.0", "id": 4, "result": {"text": BIG}},
        {"result": {"text": BIG}, "jsonrpc": "2.0", "id": 4},
        {"jsonrpc": "2.0", "id": 4, "error": {"code": 1, "message": BIG}},
    ):
        line = _dropped(json.dumps(response).encode())
        assert _stdio.reply_to(line, LIMIT, ValueError("dropped")) == []
        assert _stdio.dropped(line) == (True, 4)


async def test_both_line_readers_keep_the_start_and_the_end_of_a_dropped_line() -> None:
    long = b'{"id": 7, "method": "x", "params": "' + b"y" * 500 + b'", "end": 1}'
    data = b'{"a": 1}\n' + long + b"\r\n" + b'{"b": 2}\n' + long
    reader = asyncio.StreamReader(limit=64)
    reader.feed_data(data)
    reader.feed_eof()
    for lines in (_stdio._Lines(reader, 64), _stdio._ThreadLines(io.BytesIO(data), 64)):
        assert [line async for line in lines] == ['{"a": 1}\n', "", '{"b": 2}\n', ""]
        handed = list(lines.handed)
        # one ended by \r\n (its \r counted, as the limit counts it), one by the end of stdin
        for dropped, line in ((handed[1], long + b"\r"), (handed[3], long)):
            assert isinstance(dropped, _stdio._TooLong)
            assert (dropped.size, dropped.head, dropped.tail) == (len(line), line[: _stdio._KEEP], line[-_stdio._KEEP :])
            assert _stdio.dropped(dropped) == (False, 7)


def test_an_over_long_request_on_the_wire_is_answered_on_its_id(tmp_path: Any) -> None:
    """``harness-one serve`` on pipes (the event loop's reader): the id-first and the id-last request each get
    their error, and the server reads on."""
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "wait", "arguments": {"tag": BIG}}}
    last = {"method": "tools/call", "params": {"name": "wait", "arguments": {"tag": BIG}}, "jsonrpc": "2.0", "id": "z"}
    with serving(tmp_path) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"".join([*OPENING, json.dumps(call).encode() + b"\n", json.dumps(last).encode() + b"\n", PING]))
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(4)][1:]
        proc.stdin.close()
        assert proc.wait(10) == 0
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [(7, -32600), ("z", -32600), (3, None)]
    assert answers[0]["error"]["message"].startswith("Request too large: the line is 1,200,")


async def test_the_sdk_client_gets_an_error_at_once_for_an_over_long_call(tmp_path: Any) -> None:
    """The reviewer's case: the real SDK client waited for ever; now its call raises and the session goes on."""
    params = StdioServerParameters(
        command=serve_command()[0], args=serve_command()[1:], env={**os.environ, **server_env(tmp_path)}
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            with pytest.raises(
                MCPError, match=r"^Request too large: the line is 1,200,\d{3} bytes, more than the limit of 1,048,576$"
            ):
                await client.call_tool("wait", {"seconds": 0, "tag": BIG})
            done = await client.call_tool("wait", {"seconds": 0, "tag": "after"})
            assert not done.is_error


async def test_an_over_long_response_to_the_servers_request_fails_that_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's answer to a request of the server's, over the limit, was dropped and the server's request
    (and the call waiting on it) waited for ever: now the request gets the error in its place."""
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError as SharedError

    from harness_one.mcp import serve_stdio

    async def call_tool(ctx: Any, params: Any) -> dict[str, Any]:
        try:
            await ctx.session.send_ping()
            text = "pong"
        except SharedError as exc:
            text = f"{exc.error.code}: {exc.error.message}"
        return {"content": [{"type": "text", "text": text}]}

    server: Server[Any] = Server("asks", on_call_tool=call_tool)
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    seen: list[dict[str, Any]] = []
    with (
        open(in_read, "rb", buffering=0) as stdin,
        open(out_write, "w", encoding="utf-8") as stdout,
        open(in_write, "wb", buffering=0) as wire_in,
        open(out_read, "rb") as wire_out,
    ):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin, encoding="utf-8"))  # type: ignore[arg-type]
        monkeypatch.setattr(sys, "stdout", stdout)

        def client() -> None:
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "any", "arguments": {}}}
            wire_in.write(b"".join([*OPENING, json.dumps(call).encode() + b"\n"]))
            while True:
                message = json.loads(wire_out.readline())
                seen.append(message)
                if message.get("method") == "ping":
                    answer = {"result": {"pad": BIG}, "jsonrpc": "2.0", "id": message["id"]}  # its id last
                    wire_in.write(json.dumps(answer).encode() + b"\n")
                if message.get("id") == 2:
                    wire_in.close()
                    return

        thread = threading.Thread(target=client, daemon=True)
        thread.start()
        watchdog = threading.Timer(60, wire_in.close)  # without an answer the ping waits: stdin's end gives it one
        watchdog.start()
        try:
            await serve_stdio(ToolRegistry(autoload=False), server=server, drain_timeout=None)
        finally:
            watchdog.cancel()
            thread.join(10)
    text = next(m for m in seen if m.get("id") == 2)["result"]["content"][0]["text"]
    assert text.startswith("-32600: Response too large: the client's line is 1,200,0") and text.endswith(
        "bytes, more than the limit of 1,048,576"
    )


# --------------------------------------------------------------------------- 2. pydantic aliases in results


class Color(enum.Enum):
    RED = "red"


class User(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    user_id: int = Field(alias="userId")
    full_name: str = Field(serialization_alias="fullName")
    when: datetime.datetime
    color: Color


def _user() -> User:
    return User(userId=3, full_name="Ada", when=datetime.datetime(2024, 1, 2, 3, 4, 5), color=Color.RED)


WIRE_USER = {"userId": 3, "fullName": "Ada", "when": "2024-01-02T03:04:05", "color": "red"}


async def test_a_model_with_aliases_is_served_as_its_output_schema_describes_it() -> None:
    """Its schema named ``userId`` and its value was dumped as ``user_id``: every call was an error result."""
    registry = ToolRegistry(autoload=False)

    def get_user() -> User:
        """A user."""
        return _user()

    def get_many() -> list[User]:
        """Users."""
        return [_user()]

    registry.add(get_user)
    registry.add(get_many)
    async with Client(create_server(registry)) as client:
        one = await client.call_tool("get_user", {})
        many = await client.call_tool("get_many", {})
    assert not one.is_error and one.structured_content == WIRE_USER
    assert json.loads(one.content[0].text) == WIRE_USER  # the model reads what the structured content says
    assert not many.is_error and many.structured_content == {"result": [WIRE_USER]}


def test_model_data_falls_back_for_fields_without_a_json_form_and_other_libraries() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    class Holder(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        thing: Opaque = Field(serialization_alias="Thing")

    class OtherModel:  # another library's model_dump, which takes no pydantic options
        def model_dump(self) -> dict[str, Any]:
            return {"plain": True}

    assert dumps(Holder(thing=Opaque())) == '{"Thing": "opaque"}'  # by alias, the rest through the encoder
    assert json_default(OtherModel()) == {"plain": True}


# --------------------------------------------------------------------------- 3. the cache and _meta


def _counted(registry: ToolRegistry) -> list[str]:
    runs: list[str] = []

    def lookup(key: str, call: Call) -> str:
        """Look a key up for the caller."""
        runs.append(key)
        return f"{key} for {call.context.get('mcp_client')}: run #{len(runs)}"

    registry.add(lookup, read_only=True, cache_ttl=60)
    return runs


def test_the_cache_key_leaves_the_requests_meta_out() -> None:
    registry = ToolRegistry(plugins={"cache": CachePlugin()}, autoload=False)
    runs = _counted(registry)
    for meta in ({"progressToken": 1}, {"progressToken": 2}, {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}):
        registry.call("lookup", {"key": "k"}, context={"mcp_client": "a", "_meta": meta})
    registry.call("lookup", {"key": "k"}, context={"mcp_client": "a"})
    registry.call("lookup", {"key": "k"}, context=types.MappingProxyType({"mcp_client": "a"}))
    assert runs == ["k"]
    registry.call("lookup", {"key": "k"}, context={"mcp_client": "b", "_meta": {"progressToken": 1}})
    assert runs == ["k", "k"]  # who asks is still in the key


async def test_mcp_calls_with_progress_or_a_trace_hit_the_cache() -> None:
    registry = ToolRegistry(plugins={"cache": CachePlugin()}, autoload=False)
    runs = _counted(registry)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pass

    async with Client(create_server(registry)) as client:
        texts = [(await client.call_tool("lookup", {"key": "k"})).content[0].text]
        texts.append((await client.call_tool("lookup", {"key": "k"}, progress_callback=on_progress)).content[0].text)
        for i in range(2):
            trace = {"traceparent": f"00-{i + 1:032x}-{i + 1:016x}-01"}
            texts.append((await client.call_tool("lookup", {"key": "k"}, meta=trace)).content[0].text)
    assert runs == ["k"] and len(set(texts)) == 1 and texts[0].endswith("run #1")


# --------------------------------------------------------------------------- 4. mcp_client namespaces


async def test_mcp_client_kinds_never_share_a_bucket() -> None:
    """A principal named ``http:127.0.0.1`` drained the anonymous callers' bucket from that address."""
    registry = ToolRegistry(autoload=False)

    def once(call: Call) -> str:
        """One call per client."""
        return str(call.context["mcp_client"])

    registry.add(once, rate_limit={"rate": 0.001, "burst": 1, "key": "mcp_client"})
    app = http_app(registry, stateless=True, principal=lambda request: request.headers.get("x-user"))
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    headers["mcp-protocol-version"] = "2025-11-25"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "once", "arguments": {}}}

    def result(response: httpx2.Response) -> dict[str, Any]:
        data = next(line[5:] for line in response.text.splitlines() if line.startswith("data:"))
        return dict(json.loads(data)["result"])

    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:9") as http:
            user = result(await http.post("/mcp", json=body, headers={**headers, "x-user": "http:127.0.0.1"}))
            anonymous = result(await http.post("/mcp", json=body, headers=headers))
            again = result(await http.post("/mcp", json=body, headers=headers))
    assert user["structuredContent"] == {"result": "principal:http:127.0.0.1"}
    assert anonymous["structuredContent"] == {"result": "http:127.0.0.1"}
    assert again["isError"] and again["_meta"]["harness-one/error"]["kind"] == "rate_limited"  # the bucket still holds


# --------------------------------------------------------------------------- review 26, second pass


def _cut_at(member: str, before: str, after: str) -> list[tuple[bool, bytes]]:
    """Lines holding ``before``, ``member`` and ``after``, padded so that the kept head (:data:`_stdio._KEEP`
    bytes) ends at each byte of ``member`` and its ``,`` or ``}``: (whether the head holds them whole, the line)."""
    lines = []
    for keep in range(len(member) + 2):
        pad = _stdio._KEEP - len(before) - keep
        line = (before.replace("PAD", "t" * (pad + 3)) + member + after).encode()
        assert line[: _stdio._KEEP].endswith((member + after)[:keep].encode())
        lines.append((keep > len(member), line))
    return lines


@pytest.mark.parametrize("request_id", [123456789, "call-123456789"])
def test_an_id_cut_by_the_kept_head_is_never_read_as_another_id(request_id: int | str) -> None:
    """``"id":123456789`` cut at byte 4,096 was read as ``12345``, another pending request's id, and answered on it
    (a client's over-long response failed the server's request 12345). A value counts only with a ``,`` or ``}``
    after it in the head: else the id is read from the end of the line, or is null."""
    member = '"id":' + json.dumps(request_id)

    def read(line: bytes) -> Any:  # a string ends with its quote; a number only with what follows it
        head = line[: _stdio._KEEP]
        whole = member.encode() + b"," in head or (type(request_id) is str and head.endswith(member.encode()))
        return request_id if whole else None

    before = '{"jsonrpc":"2.0","method":"tools/call","params":{"tag":"PAD"},'
    for _, line in _cut_at(member, before, ',"_pad":"' + BIG + '"}'):
        assert _stdio.dropped(_dropped(line)) == (False, read(line))
    for _, line in _cut_at(member, before, "}"):  # the last member: the line's end holds it whole
        assert _stdio.dropped(_dropped(line)) == (False, request_id)
    response = '{"jsonrpc":"2.0","result":{"pad":"PAD"},'  # the client's answer: fails no other request
    for _, line in _cut_at(member, response, ',"_pad":"' + BIG + '"}'):
        assert _stdio.dropped(_dropped(line)) == (True, read(line))
    padded = '{"jsonrpc":"2.0","method":"tools/call","params":{},"id":7 ,"_pad":"' + BIG + '"}'
    assert _stdio.dropped(_dropped(padded.encode())) == (False, 7)  # white space after a whole number
    for number in ("12345.5", "1e5", "7E+2", "-12"):  # cut after its point, exponent or sign: no shorter number
        member, whole = '"id":' + number, json.loads(number)  # (a number that is no integer is no id: null)
        for _, line in _cut_at(member, before, ',"_pad":"' + BIG + '"}'):
            read_whole = member.encode() + b"," in line[: _stdio._KEEP] and type(whole) is int
            assert _stdio.dropped(_dropped(line)) == (False, whole if read_whole else None)


def test_a_request_whose_id_is_cut_is_answered_on_id_null() -> None:
    """The reviewer's line: its id 123456789 cut to 12345 at byte 4,096, answered on id null, not 12345."""
    before = '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"wait","arguments":{"tag":"PAD"}},'
    line = _cut_at('"id":123456789', before, ',"_pad":"' + BIG + '"}')[10][1]
    assert line[: _stdio._KEEP].endswith(b'"id":12345')
    (reply,) = _stdio.reply_to(_dropped(line), LIMIT, ValueError("dropped"))
    message = f"Request too large: the line is {len(line):,} bytes, more than the limit of 1,048,576"
    assert json.loads(reply.model_dump_json(by_alias=True, exclude_unset=True)) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": message},
    }


class Secret(BaseModel):
    name: str
    token: str

    def model_dump(self) -> dict[str, Any]:  # type: ignore[override]  # hides the token wherever it is dumped
        return {"name": self.name, "token": "***"}


def test_a_models_own_model_dump_without_options_is_what_is_written() -> None:
    """It took no ``mode``/``by_alias``: the call raised TypeError twice and the model was written as its repr,
    the hidden token in it."""
    assert dumps(Secret(name="ada", token="s3cr3t")) == '{"name": "ada", "token": "***"}'


class Times(BaseModel):
    when: datetime.datetime
    took: datetime.timedelta
    raw: bytes = b"ok"


@pytest.mark.parametrize("raw", [b"ok", b"\xff"])
def test_a_models_values_are_written_as_the_same_values_anywhere_else(raw: bytes) -> None:
    """``mode="json"`` wrote a UTC datetime as ``...Z`` and a timedelta as ``PT1H30M``, unlike the same values
    outside a model, and only when every other field had a JSON form in pydantic (``b"\\xff"`` has none)."""
    when = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    took = datetime.timedelta(minutes=90)
    expected = '{"when": "2024-01-02T03:04:05+00:00", "took": "1:30:00", "raw": "%s"}'
    assert dumps(Times(when=when, took=took, raw=raw)) == expected % raw.decode("utf-8", "replace")
    assert dumps({"when": when, "took": took, "raw": raw}) == expected % raw.decode("utf-8", "replace")


@pydantic_dataclass
class PUser:
    user_id: int = Field(alias="userId")
    when: datetime.datetime = datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC)


async def test_a_pydantic_dataclass_with_aliases_is_served_as_its_output_schema_describes_it() -> None:
    """It was written by field name (``user_id``) while its schema requires ``userId``: every call an error result."""
    registry = ToolRegistry(autoload=False)

    def get_puser() -> PUser:
        """A user."""
        return PUser(userId=3)  # type: ignore[call-arg]

    def get_pusers() -> list[PUser]:
        """Users."""
        return [PUser(userId=4)]  # type: ignore[call-arg]

    registry.add(get_puser)
    registry.add(get_pusers)
    wire = {"userId": 3, "when": "2024-01-02T00:00:00+00:00"}  # the encoder's isoformat(), as outside a model
    async with Client(create_server(registry)) as client:
        one = await client.call_tool("get_puser", {})
        many = await client.call_tool("get_pusers", {})
    assert not one.is_error and one.structured_content == wire
    assert json.loads(one.content[0].text) == wire
    assert not many.is_error and many.structured_content == {"result": [{**wire, "userId": 4}]}


class Admin(PUser):
    """A subclass: no serializer of its own, the fields (and aliases) of its base."""


def test_a_pydantic_dataclass_is_written_as_pydantic_writes_it() -> None:
    """Its subclass was written by field name; a field-by-field writing sent an excluded field and left out a
    computed one (its own output schema then refused every call)."""
    admin = Admin(userId=5)  # type: ignore[call-arg]
    assert json.loads(dumps(admin)) == {"userId": 5, "when": "2024-01-02T00:00:00+00:00"}
    assert json.loads(dumps(Account(name="ann", password="hunter2"))) == {"name": "ann", "upper": "ANN"}


@pydantic_dataclass
class Account:
    name: str
    password: str = Field(exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def upper(self) -> str:
        return self.name.upper()


async def test_a_crlf_line_over_the_limit_names_a_size_over_the_limit() -> None:
    """A request of exactly the limit ended by ``\\r\\n`` was refused as "the line is 64 bytes, more than the limit
    of 64": its ``\\r`` is a byte of the line as the limit counts it, and now of the size too."""
    line = b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {}}'
    exact = line[:-1] + b" " * (64 - len(line)) + b"}"
    assert len(exact) == 64
    data = exact + b"\n" + exact + b"\r\n"
    reader = asyncio.StreamReader(limit=64)
    reader.feed_data(data)
    reader.feed_eof()
    for lines in (_stdio._Lines(reader, 64), _stdio._ThreadLines(io.BytesIO(data), 64)):
        assert [line async for line in lines] == [exact.decode() + "\n", ""]  # the \n line is read, the \r\n one dropped
        dropped = lines.handed[1]
        assert isinstance(dropped, _stdio._TooLong) and dropped.size == 65
        (reply,) = _stdio.reply_to(dropped, 64, ValueError("dropped"))
        assert json.loads(reply.model_dump_json(by_alias=True, exclude_unset=True)) == {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": -32600, "message": "Request too large: the line is 65 bytes, more than the limit of 64"},
        }
