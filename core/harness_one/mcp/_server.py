"""A ToolRegistry as an MCP server, on the official SDK's low-level ``Server``.

Every ``tools/call`` goes through ``registry.atry_call``, so validation, rate limits,
timeouts, retries and the other policies apply; a :class:`~harness_one.ToolError` becomes a
result with ``isError`` and the model-readable text (an unknown tool name is the spec's
protocol error, ``-32602``); a call the harness holds for approval is refused as not run,
since nothing here can approve it. The SDK speaks every protocol revision it supports: the
2025 handshake era and the stateless 2026-07-28 revision.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import importlib.util
import ipaddress
import json
import math
import os
import re
import signal
import socket
import sys
import threading
import uuid
import weakref
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import anyio.abc
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, CallToolRequestParams, ErrorData, JSONRPCError, PaginatedRequestParams
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from pydantic_core import from_json
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from harness_one import CallResult, ToolError, ToolExecutionError, ToolNotFound, ToolRegistry, __version__, hookimpl
from harness_one._approval import not_asked
from harness_one._clock import Clock
from harness_one._errors import exception_text, model_message
from harness_one._render import json_data, safe_text
from harness_one._schema import path_step

from ._spec import ERROR_META_KEY

__all__ = ["Principal", "create_server", "default_principal", "http_app", "serve", "serve_http", "serve_stdio"]

#: Finds the authenticated principal of an HTTP request (None: anonymous).
Principal = Callable[[Request], "str | None"]
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
_EXPORT_KEY = ("mcp", False)
_HEADER_KEYWORD = '"x-mcp-header"'


def default_principal(request: Request) -> str | None:
    """The user an authentication middleware put on the request (Starlette's ``request.user``), if any.

    For the SDK's bearer-token user, whose ``display_name`` is the OAuth client (shared by every
    user of one app), the token's subject, ``subject@issuer`` when it names an issuer; the
    client id only for a token without a subject (a machine client).
    """
    user = request.scope.get("user")
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    token = getattr(user, "access_token", None)
    if token is not None and getattr(token, "client_id", None) is not None:
        from mcp.server.auth.provider import principal_components

        client, issuer, subject = principal_components(token)
        if subject:
            return f"{subject}@{issuer}" if issuer else subject
        return client or None
    return str(getattr(user, "display_name", "") or "") or None


class _Watcher:
    """A plugin that only observes: tools added to or removed from the registry mean ``listChanged``."""

    def __init__(self, bridge: _Bridge) -> None:
        self.bridge = bridge
        self.armed = False

    @hookimpl
    def harness_tool_added(self, registry: ToolRegistry) -> None:
        if self.armed and registry is self.bridge.registry:
            self.bridge.changed()

    @hookimpl
    def harness_tool_removed(self, registry: ToolRegistry) -> None:
        if self.armed and registry is self.bridge.registry:
            self.bridge.changed()


#: Nesting levels (objects and arrays) a structured result may have. The SDK's client parses a message with a
#: parser that refuses about 200 (the answer's own envelope takes 3 more), and the SDK's server fails to write
#: one past 255: 128 leaves every client room.
MAX_DEPTH = 128
#: Digits an int in a structured result may have: Python's default int-to-text limit, past which the SDK's
#: client (and any reader on Python's limit) refuses the whole message.
MAX_INT_DIGITS = 4300
_INT_LIMIT = 10**MAX_INT_DIGITS
_INT_BITS = _INT_LIMIT.bit_length() - 1  # an int with fewer bits has fewer digits than the limit


def _uncarried(data: Any) -> tuple[str | None, bool]:
    """Why JSON data ``data`` cannot reach an MCP client (None: it can), and whether it holds a tuple or a
    key that is not a string (which JSON carries as an array, a string: the client reads a list, a text key)."""
    reshaped = False
    stack: list[tuple[Any, int]] = [([data], 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            if not reshaped and any(type(k) is not str for k in value):
                reshaped = True
            items: Any = value.values()
        else:
            reshaped = reshaped or isinstance(value, tuple)
            items = value
        for item in items:
            if isinstance(item, (dict, list, tuple)):
                if depth >= MAX_DEPTH:
                    return f"is nested more than {MAX_DEPTH} levels deep (objects and arrays)", reshaped
                stack.append((item, depth + 1))
            elif type(item) is not bool and isinstance(item, int) and item.bit_length() >= _INT_BITS and abs(item) >= _INT_LIMIT:
                return f"holds an integer of more than {MAX_INT_DIGITS:,} digits, which JSON readers refuse", reshaped
    return None, reshaped


#: Keywords the two validators may read differently (regular expression dialects, float division, formats)
#: or that could name another document: a schema holding one is checked by Python ``jsonschema`` alone.
_PYTHON_ONLY = frozenset(
    {"pattern", "patternProperties", "multipleOf", "format", "$id", "$anchor", "$dynamicRef", "$recursiveRef"}
)
#: Which check a schema's results get (:func:`_reading`).
_Reading = Literal["bounded", "python", "fast"]


def _reading(schema: dict[str, Any]) -> _Reading:
    """How results are checked against ``schema``, from one walk of it: ``"bounded"`` when it holds a ``pattern``
    (or ``patternProperties``; a key of that name among a schema's properties counts too: the bounded check is as
    right), ``"python"`` when it holds another of :data:`_PYTHON_ONLY` or a ``$ref`` to another document, else
    ``"fast"`` (see :func:`_bounded_check`, :func:`_fast_check`)."""
    reading: _Reading = "fast"
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "pattern" in node or "patternProperties" in node:
                return "bounded"
            if reading == "fast" and (not _PYTHON_ONLY.isdisjoint(node) or not str(node.get("$ref", "#")).startswith("#")):
                reading = "python"  # (walked on all the same: a pattern further on makes it bounded)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return reading


def _fast_check(schema: dict[str, Any], draft: str, reading: _Reading | None = None) -> Callable[[Any], bool] | None:
    """jsonschema-rs's ``is_valid`` for ``schema`` in ``draft`` (the Python validator class's name), when the
    schema uses none of :data:`_PYTHON_ONLY` and only local ``$ref``s: a result it accepts, the client's
    check accepts too; one it refuses goes to the Python check, which words the problem. None otherwise.
    ``reading``: the schema's :func:`_reading`, when the caller made it (else it is made here)."""
    if (reading or _reading(schema)) != "fast":
        return None
    try:
        import jsonschema_rs

        return getattr(jsonschema_rs, draft)(schema).is_valid  # type: ignore[no-any-return]
    except Exception:  # not installed, another draft, a schema it reads otherwise: the Python check alone
        return None


#: The backtracking bound of a ``pattern`` in an output schema (jsonschema-rs's fancy-regex): a pattern that needs
#: more to decide gives up, and the result is refused, in about a millisecond.
_BACKTRACK_LIMIT = 20_000


def _no_remote_ref(uri: str) -> Any:
    """jsonschema-rs's retriever: no document is fetched from anywhere."""
    raise ValueError(f"a $ref to another document ({uri[:200]}) is not fetched")


def _bounded_check(schema: dict[str, Any], reading: _Reading | None = None) -> Callable[[Any], str | None] | None:
    """For a schema holding a ``pattern`` (or ``patternProperties``): its check by jsonschema-rs, whose regular
    expressions run in linear time (backtracking only for look-around and back-references, and then at most
    :data:`_BACKTRACK_LIMIT` steps); Python's ``re`` has no bound, and a pattern of a remote's choosing
    (``^(a+)+$``) would hold the process for minutes. None when jsonschema-rs cannot read the schema (its
    regular expression dialect is not Python's): the Python check then, as for any other schema.
    ``reading``: the schema's :func:`_reading`, when the caller made it (else it is made here)."""
    if (reading or _reading(schema)) != "bounded":
        return None
    try:
        import jsonschema_rs

        options = jsonschema_rs.FancyRegexOptions(backtrack_limit=_BACKTRACK_LIMIT)
        # format not asserted, as by the client; a $ref elsewhere is never fetched (the Python check then says so)
        validator = jsonschema_rs.validator_for(schema, pattern_options=options, validate_formats=False, retriever=_no_remote_ref)
    except Exception:
        return None

    def check(data: Any) -> str | None:
        try:
            if validator.is_valid(data):
                return None
            error = next(iter(validator.iter_errors(data)), None)
        except Exception as exc:  # no JSON data (a key that is no string): it does not fit
            return safe_text(f"at $: {exception_text(exc)[:300]}")
        if error is None:  # pragma: no cover - a refusal has an error
            return None
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.instance_path)
        return safe_text(f"at ${path}: {str(error.message)[:300]}")

    return check


def _output_check(schema: Mapping[str, Any] | None) -> Callable[[Any], str | None]:
    """A check of results against ``schema`` as the SDK's client checks them (Python ``jsonschema``: the
    schema's draft, checked against its metaschema with the ``format`` checker, results without it; only
    local ``$ref``; the best-matching error): None when a result fits, else the problem. A result ``NaN``
    where the schema says ``number`` is ``"NaN"`` in JSON, and does not fit. A schema the client cannot use
    (invalid, a remote ``$ref``, a ``pattern`` Python's ``re`` cannot compile) is the problem of every
    result, as the client refuses every result it cannot check. A schema with a ``pattern`` is checked by
    jsonschema-rs, bounded (:func:`_bounded_check`), where it reads the schema (``format`` not asserted, as
    by the client): its dialect of regular expressions is ECMA 262's, which the JSON Schema specification
    names, and its ``multipleOf`` exact where Python's float remainder is not (0.3 is a multiple of 0.1)."""
    if schema is None:
        return lambda data: None
    from jsonschema import SchemaError
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for
    from referencing import Registry

    def unusable(reason: str) -> Callable[[Any], str]:
        text = safe_text(f"its output schema cannot be used: {reason[:300]}")
        return lambda data: text

    document = dict(schema)
    try:
        kind = validator_for(document)
        kind.check_schema(document)
        validator = kind(document, registry=Registry())
    except SchemaError as exc:
        return unusable(str(exc.message))
    except Exception as exc:
        return unusable(exception_text(exc))

    reading = _reading(document)  # one walk of the schema decides which check it gets, for every result
    bounded = _bounded_check(document, reading)
    if bounded is not None:
        return bounded
    fast = _fast_check(document, kind.__name__, reading)

    def check(data: Any) -> str | None:
        if fast is not None and fast(data):  # what the Python check would accept too, at a 20th of its cost
            return None
        try:
            error = best_match(validator.iter_errors(data))
        except Exception as exc:  # a $ref that does not resolve, a pattern re cannot compile: the client fails too
            return unusable(str(exc))(data)
        if error is None:
            return None
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        return safe_text(f"at ${path}: {str(error.message)[:300]}")

    return check


def _in_session(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request came on a handshake-era session the SDK keeps (it checked the
    ``Mcp-Session-Id``); a stateless or 2026-07-28 request's header is only the client's word.
    The session's connection is SDK-private: without it, no session is trusted."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return False
    connection = getattr(ctx.session, "_connection", None)
    return connection is not None and bool(getattr(connection, "has_standalone_channel", False))


#: Seconds (by the registry's clock) a handshake-era connection has to take a ``listChanged`` notification; past
#: them its client is taken to have stopped reading, and is told of no more changes until it lists the tools again.
LIST_CHANGED_TIMEOUT = 10.0


class _Bridge:
    """The handlers: MCP requests in, registry calls out."""

    list_changed_timeout = LIST_CHANGED_TIMEOUT

    def __init__(self, registry: ToolRegistry, principal: Principal | None) -> None:
        self.registry = registry
        self.principal = principal or default_principal
        self.bus = InMemorySubscriptionBus()
        self._lock = threading.RLock()
        self._loops: Counter[asyncio.AbstractEventLoop] = Counter()
        #: The serving loops with a notification scheduled and not started yet: changes until it starts share it.
        self._due: set[asyncio.AbstractEventLoop] = set()
        #: The handshake-era connections that listed the tools, each with the loop serving it (weakly: gone when closed).
        self._legacy: weakref.WeakKeyDictionary[Any, asyncio.AbstractEventLoop] = weakref.WeakKeyDictionary()
        #: The connections with a ``listChanged`` being sent, each with whether a change came since it started.
        self._sending: dict[Any, bool] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._export: Any = None
        self._listing: dict[str, Any] = {}
        self._schemas: dict[str, dict[str, Any]] = {}
        self._shapes: dict[str, bool | None] = {}
        self._checks: dict[str, Callable[[Any], str | None]] = {}
        self._watcher = _Watcher(self)
        self._plugin = f"harness_one.mcp.server-{id(self):x}"

    # ------------------------------------------------------------------ catalogue

    def _refresh(self) -> None:
        # The registry's cached export (a dict lookup, twice a call), replaced when its tools change.
        export = self.registry._exports.get(_EXPORT_KEY) or self.registry.export("mcp", copy=False)
        if export is self._export:
            return
        tools = sorted(export.tools, key=lambda t: str(t["name"]))
        # Per tool: None (no structured result), or whether a result travels as {"result": value}.
        shapes = {t.name: None if t.output_schema is None else t.output_wrapped for t in self.registry.tools()}
        self._listing = {"tools": tools, "ttlMs": 0, "cacheScope": "private", "resultType": "complete"}
        # Only schemas that declare Mcp-Param headers (2026-07-28) need the SDK's header check.
        self._schemas = {t["name"]: t["inputSchema"] for t in tools if _HEADER_KEYWORD in json.dumps(t["inputSchema"])}
        self._shapes = shapes
        self._checks = {}
        self._export = export

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """For the SDK's ``Mcp-Param-*`` header check (2026-07-28 HTTP), without a full ``tools/list``.

        None (nothing to check) for a tool whose schema has no ``x-mcp-header``: the SDK
        compares only the arguments a schema marks, so such a tool has none to compare.
        """
        self._refresh()
        return self._schemas.get(name)

    async def list_tools(self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> dict[str, Any]:
        if params is not None and params.cursor is not None:  # never issued (no nextCursor): the spec's -32602
            raise MCPError(code=INVALID_PARAMS, message="Invalid cursor: this server sends every tool on one page")
        self._track(ctx)
        self._refresh()
        return self._listing

    # ------------------------------------------------------------------ calls

    async def call_tool(self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> dict[str, Any]:
        context = self._context(ctx)
        meta = params.meta
        if meta:
            context["_meta"] = _wire_meta(meta)
        arguments = params.arguments or {}
        if meta and meta.get("progress_token") is not None:
            result = await self._call_with_progress(ctx, params.name, arguments, context)
        else:
            result = await self.registry.atry_call(params.name, arguments, context=context)
        # MCP has no approval step, and a later result has no way back: a held call is withdrawn, and said so
        return self._answer(not_asked(result, "mcp_server"), params.name)

    async def _call_with_progress(
        self, ctx: ServerRequestContext[Any, Any], name: str, arguments: dict[str, Any], context: dict[str, Any]
    ) -> CallResult:
        """Run the call while a :class:`_Progress` sends what the tool reports as ``notifications/progress``."""
        progress = _Progress(ctx.session.report_progress, self.registry.clock)
        pump = asyncio.create_task(progress.pump())
        try:
            result = await self.registry.atry_call(name, arguments, context=context, on_progress=progress.report)
        except BaseException:
            pump.cancel()
            raise
        await progress.finish(pump)  # the last report goes out before the result
        return result

    def _answer(self, result: CallResult, name: str) -> dict[str, Any]:
        if result.ok:
            out: dict[str, Any] = {"content": [{"type": "text", "text": result.for_model()}], "resultType": "complete"}
            self._refresh()
            wrap = self._shapes.get(result.tool)
            if wrap is None:
                return out
            try:  # data made valid UTF-8, as for_model() makes the text; a dataclass as a dict
                data = {"result": json_data(result.value)} if wrap else json_data(result.value)
                problem, reshaped = _uncarried(data)
                if problem is None:
                    if reshaped:  # as the client will read it: a tuple as a list, a key as text
                        data = json.loads(json.dumps(data, ensure_ascii=False, allow_nan=False))
                    if (mismatch := self._output_problem(result.tool, data)) is None:
                        out["structuredContent"] = data
                        return out
                    problem = f"does not match its output schema: {mismatch}"
            except Exception as exc:  # a value the checks cannot read
                problem = f"cannot be written as JSON: {exception_text(exc)}"
            message = f"The tool '{result.tool}' returned a result that {problem}. This is a fault of the tool, not of the call."
            return self._error(ToolError(message, tool=result.tool, call_id=result.call_id), name)
        err = result.error
        assert err is not None
        return self._error(err, name)

    def _output_problem(self, name: str, data: Any) -> str | None:
        """Why ``data`` does not fit tool ``name``'s output schema (None: it fits), as the MCP client checks it."""
        check = self._checks.get(name)
        if check is None:
            tool = self.registry._tools.get(name)
            check = self._checks[name] = _output_check(None if tool is None else tool.tool.output_schema)
        return check(data)

    def _error(self, err: ToolError, name: str) -> dict[str, Any]:
        """The answer for ``err`` from a call of tool ``name``: the spec's protocol error for a name the registry
        does not have, else an ``isError`` result. A ``ToolNotFound`` a tool raised (a router calling another
        registry) is the tool's failure, its message masked as any exception's."""
        if isinstance(err, ToolNotFound):
            if name not in self.registry._tools:
                raise MCPError(code=INVALID_PARAMS, message=model_message(err))
            err = ToolExecutionError(err, tool=name, call_id=err.call_id)
        # An exception's text in the message has its secrets masked already (ToolExecutionError, internal errors).
        meta = json_data(err.to_dict())
        if _uncarried(meta)[0] is not None:  # a plugin's error whose own fields JSON cannot carry: the common ones
            meta = {k: meta[k] for k in ("type", "kind", "message", "tool", "call_id", "retry_after") if k in meta}
        return {
            "content": [{"type": "text", "text": model_message(err)}],
            "isError": True,
            "_meta": {ERROR_META_KEY: meta},
            "resultType": "complete",
        }

    def _context(self, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        """Who is calling, for ``Call.context``: key per-client limits on ``mcp_client`` (``principal:<name>``,
        ``session:<id>``, ``http:<address>`` or ``stdio:<connection id>``)."""
        request = ctx.request
        session = principal = None
        if isinstance(request, Request):
            transport = "http"
            session = request.headers.get("mcp-session-id") if _in_session(ctx) else None
            principal = self.principal(request)
            host = request.client.host if request.client else "unknown"
            # One namespace per kind: a principal named "http:127.0.0.1" is not the anonymous callers from there.
            client = f"principal:{principal}" if principal else f"session:{session}" if session else f"http:{host}"
        else:
            transport = "stdio"
            lifespan = ctx.lifespan_context
            client = f"stdio:{lifespan.get('connection', '?')}" if isinstance(lifespan, dict) else "stdio"
        info = ctx.session.client_params
        return {
            "mcp_client": client,
            "mcp_session": session,
            "mcp_principal": principal,
            "mcp_transport": transport,
            "mcp_client_name": info.client_info.name if info is not None else None,
            "mcp_protocol": ctx.protocol_version,
        }  # and "_meta": the request's _meta (progressToken, traceparent, ...), when it has one

    # ------------------------------------------------------------------ listChanged

    def _track(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Remember a handshake-era connection that listed the tools, to tell it when they change.

        (2026-07-28 clients subscribe with ``subscriptions/listen`` instead.) The connection
        is the session's (SDK-private) ``_connection``; kept weakly, so it goes when it closes.
        """
        if _in_session(ctx):
            self._legacy[ctx.session._connection] = asyncio.get_running_loop()

    def changed(self) -> None:
        """Called from any thread when the registry's tools change: notify on each serving loop, once for
        every change made before that notification starts (a refresh of an imported server's tools adds many)."""
        with self._lock:
            loops = [loop for loop in self._loops if loop not in self._due]
            self._due.update(loops)
        for loop in loops:
            try:
                loop.call_soon_threadsafe(self._spawn_notify, loop)
            except RuntimeError:  # a closed loop
                with self._lock:
                    self._due.discard(loop)

    def _spawn_notify(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            self._due.discard(loop)  # a change from now on gets a notification of its own
        self._spawn(self._notify(loop))

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify(self, loop: asyncio.AbstractEventLoop) -> None:
        await self.bus.publish(ToolsListChanged())
        for connection, home in list(self._legacy.items()):
            if home is loop:
                self._tell(connection)

    def _tell(self, connection: Any) -> None:
        """Send ``connection`` a ``listChanged`` on a task of its own, so a client that stops reading holds up no
        other: one send under way per connection, and the changes made while it is are one more send after it."""
        if connection in self._sending:
            self._sending[connection] = True
            return
        self._sending[connection] = False
        self._spawn(self._send_changed(connection))

    async def _send_changed(self, connection: Any) -> None:
        """Send until no change came during the last send. A send not taken within :data:`LIST_CHANGED_TIMEOUT`
        seconds (by the registry's clock: the client stopped reading its stream) is given up, and the connection
        is told of no more changes until it lists the tools again; a closed connection is forgotten."""
        try:
            while True:
                if not await self._within(connection.send_tool_list_changed(), self.list_changed_timeout):
                    self._legacy.pop(connection, None)
                    return
                if not self._sending.get(connection):
                    return
                self._sending[connection] = False
        except Exception:  # a closed connection: forget it
            self._legacy.pop(connection, None)
        finally:
            self._sending.pop(connection, None)

    async def _within(self, work: Awaitable[None], seconds: float) -> bool:
        """Await ``work``, for at most ``seconds`` of the registry's clock: whether it finished."""
        finished = False
        async with anyio.create_task_group() as group:

            async def expire() -> None:
                await self.registry.clock.asleep(seconds)
                group.cancel_scope.cancel()

            group.start_soon(expire)
            await work
            finished = True
            group.cancel_scope.cancel()
        return finished

    @asynccontextmanager
    async def lifespan(self, server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        """Watch the registry while at least one transport serves; each run gets a connection id."""
        loop = asyncio.get_running_loop()
        self._refresh()  # tool packages load now, not on the first tools/list: their adding is no change to announce
        with self._lock:
            first = not self._loops
            self._loops[loop] += 1
            if first:
                self._watcher.armed = False
                self.registry.plugins.register(self._watcher, name=self._plugin)
                self._watcher.armed = True
        try:
            yield {"connection": uuid.uuid4().hex[:12]}
        finally:
            with self._lock:
                self._loops[loop] -= 1
                if self._loops[loop] <= 0:
                    del self._loops[loop]
                if not self._loops:
                    self._watcher.armed = False
                    self.registry.plugins.unregister(self._plugin)


#: Seconds at least between two ``notifications/progress`` of one call (by the registry's clock); the reports
#: made meanwhile are merged: only the latest is sent.
PROGRESS_INTERVAL = 0.05
#: Characters of a progress message sent; the rest is cut.
PROGRESS_MESSAGE_CHARS = 1000

_Report = tuple[float, float | None, str | None]


class _Progress:
    """A call's progress reports (from any thread) as ``notifications/progress``: one slot holds the latest
    report not sent yet, sent at most every :data:`PROGRESS_INTERVAL` seconds, and the last one before the
    result. A tool reporting in a tight loop costs a slot write per report, not a notification. The spec has
    the progress value increase with each notification: a report whose progress is not greater than the one
    before it (sent or waiting in the slot) is dropped."""

    def __init__(self, send: Callable[..., Awaitable[None]], clock: Clock) -> None:
        self.send = send
        self.clock = clock
        self.loop = asyncio.get_running_loop()
        self.owner = threading.get_ident()
        self.lock = threading.Lock()
        self.latest: _Report | None = None
        #: The progress of the last report kept (sent, or waiting in the slot): the next must be greater.
        self.floor = -math.inf
        self.ready = asyncio.Event()
        self.over = self.pausing = False

    def report(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        text = None if message is None else safe_text(str(message)[:PROGRESS_MESSAGE_CHARS])
        with self.lock:
            kept = _progress_kept(self.floor, progress, total)
            if kept is None:
                return
            self.floor = kept[0]
            waking = self.latest is None  # else a wake-up is on its way already
            self.latest = (*kept, text)
        if not waking:
            return
        if threading.get_ident() == self.owner:
            self.ready.set()
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is listening any more
            self.loop.call_soon_threadsafe(self.ready.set)

    def take(self) -> _Report | None:
        with self.lock:
            item, self.latest = self.latest, None
        return item

    async def pump(self) -> None:
        while True:
            await self.ready.wait()
            self.ready.clear()
            item = self.take()
            if item is not None:
                await self.send(*item)
            if self.over:
                return
            if item is not None:
                self.pausing = True
                try:
                    await self.clock.asleep(PROGRESS_INTERVAL)
                finally:
                    self.pausing = False

    async def finish(self, pump: asyncio.Task[None]) -> None:
        """Stop ``pump`` (at once if it is pausing) once it has sent the report it holds, then send the last one."""
        self.over = True
        if self.pausing:
            pump.cancel()
        else:
            self.ready.set()
        try:
            await asyncio.wait((pump,))
        except BaseException:
            pump.cancel()
            raise
        if not pump.cancelled() and pump.exception() is not None:  # the client is gone: so is the result
            return
        if (item := self.take()) is not None:
            await self.send(*item)


def _progress_kept(floor: float, progress: float, total: float | None) -> tuple[float, float | None] | None:
    """A progress report that follows one of progress ``floor``, as passed on: ``(progress, total)`` as floats, a total
    that is not finite left out; None (dropped) when ``progress`` is not finite (JSON would carry it as null) or not
    greater than ``floor`` (the spec's progress only increases). Served calls' reports and a remote's alike."""
    done, whole = float(progress), None if total is None else float(total)
    if not math.isfinite(done) or done <= floor:
        return None
    return done, whole if whole is None or math.isfinite(whole) else None


def _wire_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A request's ``_meta`` as sent (the SDK names the progress token ``progress_token``)."""
    out = dict(meta)
    if "progress_token" in out:
        out["progressToken"] = out.pop("progress_token")
    return out


class _Server(Server[dict[str, Any]]):
    """The SDK's low-level server, advertising ``tools.listChanged`` to handshake-era clients by default
    (not when ``list_changed`` is false: ``http_app(stateless=True)`` has no connection to send it on)."""

    #: How it finds a request's principal (``create_server(principal=)``): ``http_app`` binds sessions with it.
    harness_principal: Principal = default_principal
    list_changed = True

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=self.list_changed), experimental_capabilities, extensions
        )


def create_server(
    registry: ToolRegistry,
    *,
    name: str = "harness-one",
    version: str = __version__,
    instructions: str | None = None,
    principal: Principal | None = None,
    tracing: bool | None = None,
) -> Server[dict[str, Any]]:
    """The low-level MCP server (``mcp.server.lowlevel.Server``) serving every tool of ``registry``.

    ``tools/list`` is ``registry.export("mcp")`` sorted by name, on one page (a ``cursor``, which it
    never issues, is ``-32602``); tools added or removed
    while serving send ``listChanged`` (handshake era) or a ``subscriptions/listen`` event
    (2026-07-28). ``principal`` finds the authenticated user of an HTTP request (default:
    Starlette's ``request.user`` when an authentication middleware set one). ``tracing``
    keeps the SDK's OpenTelemetry span per MCP message (about 100 us per call even with no
    exporter); by default it is kept only when an OpenTelemetry tracer provider is installed.
    """
    bridge = _Bridge(registry, principal)
    server = _Server(
        name,
        version=version,
        instructions=instructions,
        lifespan=bridge.lifespan,
        get_tool_input_schema=bridge.input_schema,
        on_list_tools=bridge.list_tools,  # type: ignore[arg-type]  # a dict result is what the runner serialises
        on_call_tool=bridge.call_tool,  # type: ignore[arg-type]
        on_subscriptions_listen=ListenHandler(bridge.bus),
    )
    server.harness_principal = bridge.principal
    if tracing is None:
        from opentelemetry import trace

        tracing = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    if not tracing:
        server.middleware = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    server.middleware.append(_naming_invalid_params)  # innermost: a span records the named error too
    return server


async def _naming_invalid_params(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """The SDK's ``-32602`` for parameters its models refuse, ``Invalid request parameters`` naming no field, made to
    name the first failing one (:func:`invalid_params_message`): on every transport, each request goes through here."""
    try:
        return await call_next(ctx)
    except ValidationError as exc:
        message = invalid_params_message(exc, ctx.params)
        if message is None:
            raise
        raise MCPError(code=INVALID_PARAMS, message=message, data="") from None


def invalid_params_message(exc: ValidationError, params: Mapping[str, Any] | None) -> str | None:
    """``Invalid request parameters: params._meta.progressToken: Input should be ...``: the first problem of ``exc``,
    the SDK's refusal of a request (its model's, ``...Request``) or of its ``params`` (``...Params``), at the path
    into ``params`` it has (a union's member names cut off: pydantic adds them to the path), with what each member
    said there; without the input, which may hold secrets. None for a refusal of anything else (a result)."""
    if exc.title.endswith("Request"):
        start: tuple[str, ...] = ()
    elif exc.title.endswith("Params"):
        start = ("params",)
    else:
        return None
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return None
    loc = (*start, *errors[0]["loc"])
    value: Any = {"params": params}
    where: list[str | int] = []
    for part in loc:
        held = (isinstance(value, Mapping) and part in value) or (
            isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value)
        )
        if not held:
            if isinstance(value, Mapping) and errors[0]["type"] == "missing" and len(where) == len(loc) - 1:
                where.append(part)  # the member that is missing
            break  # (else a union's member name, or a missing member of one: the union's place is named)
        value = value[part]
        where.append(part)
    size = len(where)
    said = [e["msg"] for e in errors if (*start, *e["loc"])[:size] == tuple(where)] if size < len(loc) else [errors[0]["msg"]]
    path = "".join(map(path_step, where)).removeprefix(".")  # (a key with a dot in it quoted: ["io.mcp/clientInfo"])
    text = f"Invalid request parameters: {path}: {'; '.join(dict.fromkeys(said))}"
    return safe_text(text[:500])


def _security(host: str, allowed_hosts: Sequence[str], allowed_origins: Sequence[str]) -> TransportSecuritySettings:
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if host not in (*_LOCAL_HOSTS, "0.0.0.0", "::"):  # a name or address to bind, also the Host to accept
        name = f"[{host}]" if ":" in host else host
        hosts.append(f"{name}:*")
        origins += [f"http://{name}:*", f"https://{name}:*"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=_any_port([*hosts, *allowed_hosts]),
        allowed_origins=_any_port([*origins, *allowed_origins]),
    )


def _any_port(patterns: list[str]) -> list[str]:
    """``name:*`` also as ``name``: the SDK matches the pattern only with a port in the header, and a
    client leaves out the default one (``Host: tools.example.com``, ``Origin: https://tools.example.com``)."""
    return [*patterns, *(p[:-2] for p in patterns if p.endswith(":*"))]


_WS = rb"[ \t\r\n]*"
# An "id" member whose value is not, by its first bytes, a string or an integer: one search of the body, in C.
_ODD_ID = re.compile(rb'"id"' + _WS + rb":(?!" + _WS + rb'(?:"|-?[0-9]+' + _WS + rb"[,}]))")
_SESSION_HEADER = MCP_SESSION_ID_HEADER.encode("latin-1")
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.encode("latin-1")
_HANDSHAKE_VERSIONS = frozenset(v.encode("latin-1") for v in HANDSHAKE_PROTOCOL_VERSIONS)


def _bad_id(body: bytes) -> bool:
    """Whether ``body`` is a request whose ``id`` is neither a string nor an integer (``1.5``, ``true``,
    ``null``), which the SDK takes for a notification: 202, and no answer ever. Parsed only when some
    ``"id"`` member may be one (its value not read as a string or an integer from the bytes), or when a
    member name may spell ``id`` with escapes (``"\\u0069d"``)."""
    if _ODD_ID.search(body) is None and b"\\u006" not in body:
        return False
    try:
        message = from_json(body)  # the SDK's parser: what it refuses (a BOM, "\ud800") it answers -32700 itself
    except ValueError:
        return False
    if type(message) is not dict or "id" not in message or "method" not in message:
        return False
    given = message["id"]
    return not (type(given) is str or type(given) is int)


def _answering_invalid(send: Send, body: bytes) -> Send:
    """``send`` with the SDK's answer to a ``body`` that is JSON but no JSON-RPC message (a batch, a ``method``
    that is not a string) replaced by stdio's: ``-32600`` on the request's ``id`` when it has one, what is wrong
    without the input (the SDK answers ``-32602``, ``id`` null, a pydantic dump that echoes the input). The SDK
    answers so only after its ``Host``, ``Origin``, ``Accept`` and ``Content-Type`` checks; its answer is read
    only when it is a 400."""
    held: Message | None = None

    async def answering(message: Message) -> None:
        nonlocal held
        if held is not None:
            start, held = held, None
            reply = _invalid_reply(body, message.get("body", b"")) if message["type"] == "http.response.body" else None
            if reply is not None:
                headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() != b"content-length"]
                start = {**start, "headers": [*headers, (b"content-length", str(len(reply)).encode())]}
                message = {"type": "http.response.body", "body": reply}
            await send(start)
        elif message["type"] == "http.response.start" and message["status"] == 400:
            held = message
            return
        await send(message)

    return answering


def _invalid_reply(body: bytes, answer: bytes) -> bytes | None:
    """stdio's answer to ``body`` when it is JSON but no JSON-RPC message and the SDK's ``answer`` (a 400) is the
    ``-32602`` it gives such a body; else None. A malformed response (``result`` or ``error``, no ``method``),
    which stdio leaves unanswered, is answered on a null ``id``: its ``id`` is one of the server's requests."""
    try:
        if from_json(answer).get("error", {}).get("code") != INVALID_PARAMS:
            return None
        message = from_json(body)
    except (ValueError, AttributeError):
        return None
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    from ._stdio import invalid_message

    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError as exc:
        reply = invalid_message(message, exc)
        if type(message) is dict and "method" not in message and ("result" in message or "error" in message):
            reply = JSONRPCError(jsonrpc="2.0", id=None, error=reply.error)
        return reply.model_dump_json(by_alias=True, exclude_unset=True).encode()
    return None


def _error_body(message: str) -> bytes:
    """A JSON-RPC ``-32600`` error with ``"id": null``, as JSON."""
    error = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=message))
    return error.model_dump_json(by_alias=True, exclude_unset=True).encode()


def _refusal(status: int, message: str) -> Response:
    return Response(_error_body(message), status_code=status, media_type="application/json")


#: The sessions :class:`_Guard` remembers before it first looks for those the SDK has ended.
_SWEEP_SIZE = 64


class _Owner:
    """Who opened a session, and when it was last in use (for forgetting it once the SDK has closed it)."""

    __slots__ = ("busy", "last", "principal")

    def __init__(self, principal: str | None, now: float) -> None:
        self.principal = principal
        self.busy = 0  # requests in flight (an open GET stream is one)
        self.last = now


class _Guard:
    """Checks in front of the SDK's handler for handshake-era requests (a 2026-07-28 request goes straight on:
    it has no session, and the SDK answers its malformed ``id`` itself).

    A session is used only by the principal that opened it: another's request (or one for a session this
    app did not see opened) gets the 404 of a session that does not exist, as the SDK answers a bearer
    token other than the opener's. A POST whose ``id`` is neither a string nor an integer gets ``-32600``
    (HTTP 400) with ``"id": null``, as over stdio, after the SDK's ``Host``/``Origin`` checks; one that is
    JSON but no JSON-RPC message (a batch, a ``method`` that is not a string) gets stdio's ``-32600`` with the
    request's ``id``, in place of the SDK's ``-32602`` dump (see :func:`_answering_invalid`).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        principal: Principal,
        stateless: bool,
        max_body_size: int,
        security: TransportSecuritySettings,
        idle_timeout: float | None,
        clock: Clock,
        manager: Any = None,
    ) -> None:
        self.app = app
        self.principal = principal
        self.sessions: dict[str, _Owner] | None = None if stateless else {}
        self.max_body_size = max_body_size
        self.security = TransportSecurityMiddleware(security)
        self.idle_timeout = idle_timeout
        self.clock = clock
        self.manager = manager  # the SDK's session manager: which sessions it still keeps
        self._next_sweep = -math.inf
        self._sweep_size = _SWEEP_SIZE

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session = version = None
        for name, value in scope["headers"]:  # the first of each, as the SDK reads them
            if name == _SESSION_HEADER and session is None:
                session = value.decode("latin-1")
            elif name == _VERSION_HEADER and version is None:
                version = value
        if version is not None and version not in _HANDSHAKE_VERSIONS:
            await self.app(scope, receive, send)
            return
        sessions = self.sessions
        owner = None
        if sessions is not None and session is not None:
            owner = sessions.get(session)
            if owner is None or owner.principal != self.principal(Request(scope)):
                await _refusal(404, "Session not found")(scope, receive, send)
                return
        method = scope["method"]
        if method == "POST":
            checked = await self._checked(scope, receive, send)
            if checked is None:
                return
            receive, send = checked
            if sessions is not None and session is None:  # it may open a session
                send = self._opening(send, self.principal(Request(scope)))
        if owner is None:
            await self.app(scope, receive, send)
            return
        if method == "DELETE" and session is not None:
            send = self._closing(send, session)
        owner.busy += 1
        try:
            await self.app(scope, receive, send)
        finally:
            owner.busy -= 1
            owner.last = self.clock.now()

    async def _checked(self, scope: Scope, receive: Receive, send: Send) -> tuple[Receive, Send] | None:
        """``receive`` and ``send`` for the SDK once the body (up to the size limit: the SDK refuses a larger one)
        is read and its ``id`` checked (``send`` answering a body that is no JSON-RPC message as stdio does, see
        :func:`_answering_invalid`); None when a bad ``id`` was answered here."""
        messages = [await receive()]
        size = 0
        while (last := messages[-1])["type"] == "http.request":
            size += len(last.get("body", b""))
            if not last.get("more_body"):
                whole = last.get("body", b"") if len(messages) == 1 else b"".join(m.get("body", b"") for m in messages)
                if size <= self.max_body_size:
                    if _bad_id(whole):
                        refused = await self.security.validate_request(Request(scope), is_post=True)
                        await (refused or _refusal(400, "Invalid request: id must be a string or an integer"))(
                            scope, receive, send
                        )
                        return None
                    send = _answering_invalid(send, whole)
                break
            if size > self.max_body_size:
                break
            messages.append(await receive())
        pending = deque(messages)

        async def replay() -> Message:
            return pending.popleft() if pending else await receive()

        return replay, send

    def _opening(self, send: Send, principal: str | None) -> Send:
        """``send`` noting the session a request without one opened, with its principal."""

        async def opening(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers", ()):
                    if name.lower() == _SESSION_HEADER:
                        self._opened(value.decode("latin-1"), principal)
                        break
            await send(message)

        return opening

    def _closing(self, send: Send, session: str) -> Send:
        """``send`` forgetting ``session`` when the SDK accepts its ``DELETE``."""

        async def closing(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400 and self.sessions is not None:
                self.sessions.pop(session, None)
            await send(message)

        return closing

    def _opened(self, session: str, principal: str | None) -> None:
        assert self.sessions is not None
        now = self.clock.now()
        if len(self.sessions) >= self._sweep_size or (self.idle_timeout is not None and now >= self._next_sweep):
            self._sweep(now)
        self.sessions[session] = _Owner(principal, now)

    def _sweep(self, now: float) -> None:
        """Forget the sessions the SDK no longer keeps (deleted, crashed, idle by its timer), and those idle past
        the timeout by the registry's clock (a session forgotten too early only answers 404, and its client opens
        a new one, as after any expiry); the next sweep comes when twice as many are remembered, or a quarter
        of the timeout later: a sweep costs O(1) per session opened."""
        assert self.sessions is not None
        idle = self.idle_timeout
        kept = getattr(self.manager, "_server_instances", None)  # SDK-private: without it, the timeout alone
        live = kept if isinstance(kept, dict) else None
        if idle is not None:
            self._next_sweep = now + idle / 4
        for name in [
            n
            for n, o in self.sessions.items()
            if not o.busy and ((live is not None and n not in live) or (idle is not None and now - o.last >= idle))
        ]:
            del self.sessions[name]
        self._sweep_size = max(_SWEEP_SIZE, 2 * len(self.sessions))


def http_app(
    registry: ToolRegistry,
    *,
    path: str = "/mcp",
    stateless: bool = False,
    json_response: bool = False,
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    max_body_size: int | None = None,
    server: Server[Any] | None = None,
    principal: Principal | None = None,
    max_sessions: int | None = 10_000,
    session_idle_timeout: float | None = 1800.0,
) -> Starlette:
    """A Starlette (ASGI) app serving ``registry`` over streamable HTTP at ``path``.

    ``stateless=True`` keeps no session between requests (2026-07-28 requests never have
    one), so any worker can answer any request. DNS-rebinding protection is always on: the
    ``Host`` must be a localhost form or ``host`` (any port), or be listed in
    ``allowed_hosts`` (``"api.example.com:*"``); likewise ``Origin`` and ``allowed_origins``.
    Request bodies over ``max_body_size`` bytes (default: the registry's argument limit plus
    64 KiB) get 413. At most ``max_sessions`` sessions are open at once (then 503), each closed
    after ``session_idle_timeout`` seconds without a request: an unauthenticated caller can fill
    them (about 37 KB each), so a server others can reach wants authentication in front or lower
    figures. A session answers only the principal that opened it (``principal``, by default
    :func:`default_principal`; another gets 404), and a handshake-era request whose ``id`` is
    neither a string nor an integer gets ``-32600`` (see :class:`_Guard`). To mount it in another
    app, run its lifespan from the host app's::

        app = Starlette(routes=[Mount("/tools", mcp)], lifespan=lambda _: mcp.router.lifespan_context(mcp))
    """
    _check_host(host)
    server = server or create_server(registry, principal=principal)
    if stateless and isinstance(server, _Server):  # no handshake-era connection outlives its request
        server.list_changed = False
    limit = max_body_size or registry.limits.max_bytes + 65536
    security = _security(host, allowed_hosts, allowed_origins)
    app = server.streamable_http_app(
        streamable_http_path=path,
        json_response=json_response,
        stateless_http=stateless,
        max_request_body_size=limit,
        transport_security=security,
        host=host,
        max_sessions=max_sessions,
        session_idle_timeout=session_idle_timeout,
    )
    guard = Middleware(
        _Guard,
        principal=principal if principal is not None else getattr(server, "harness_principal", default_principal),
        stateless=stateless,
        max_body_size=limit,
        security=security,
        idle_timeout=session_idle_timeout,
        clock=registry.clock,
        manager=server.session_manager,  # the one streamable_http_app just made
    )
    app.user_middleware.append(guard)  # innermost: after any authentication middleware the app has
    return app


#: Seconds :func:`serve_stdio` waits at the end of stdin for the requests still unanswered (as long as the
#: default bound on a call of an imported MCP server's tool), then cancels them.
DRAIN_TIMEOUT = 300.0


async def serve_stdio(
    registry: ToolRegistry, *, server: Server[Any] | None = None, drain_timeout: float | None = DRAIN_TIMEOUT
) -> None:
    """Serve ``registry`` on this process's stdin and stdout until stdin ends and every request is answered.

    At most ``drain_timeout`` seconds (by ``registry.clock``; None: no bound) after the end of stdin,
    the requests still unanswered are cancelled (each answered ``Connection closed``), how many goes
    to stderr, and it returns.
    """
    from mcp.server.stdio import stdio_server

    from ._stdio import Answering, _known, stdio_streams

    _check_seconds("drain_timeout", drain_timeout)
    # A call answered here names a tool the served registry may lack: asked of ``registry`` when it is the one served
    # (a ``server`` given may serve another, which decides its unknown tools itself).
    unknown = _known if server is not None else functools.partial(_unknown_tool, registry)
    server = server or create_server(registry)
    async with (
        stdio_streams(registry.limits.max_bytes + 65536) as (stdin, stdout),
        stdio_server(stdin, stdout) as (sdk_read, write),
    ):
        # Lines the SDK cannot read get an answer, and the end of stdin waits for every request's (see harness_one.mcp._stdio).
        read = Answering(
            sdk_read, write, stdin, clock=registry.clock, drain_timeout=drain_timeout, out_fd=stdout.fd, unknown=unknown
        )
        await server.run(read, read.answers, server.create_initialization_options())


def _unknown_tool(registry: ToolRegistry, name: str) -> str | None:
    """The message of the spec's ``-32602`` for a call of tool ``name`` that ``registry`` does not have (None: it has
    it), as :meth:`_Bridge._error` gives it: the registry's ``ToolNotFound``, observed by its plugins as a refused call."""
    try:
        registry._entry(name, None)  # (loads a tool package that provides it, as a call does)
    except ToolNotFound as err:
        return model_message(err)
    return None


def _check_seconds(what: str, seconds: float | None) -> None:
    """A ValueError unless ``seconds`` is None or a positive, finite number."""
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{what} must be a positive number of seconds or None, not {seconds!r}")


#: :func:`serve_http`'s bounds on connections: no bound on connections at once by default (uvicorn counts idle
#: ones and every session's open event stream: 512 idle sockets answered every other client 503) ...
LIMIT_CONCURRENCY: int | None = None
#: ... an idle keep-alive connection closed after this many seconds (uvicorn's default) ...
TIMEOUT_KEEP_ALIVE = 5
#: ... one that has not sent a request's headers this many seconds after it opened (or after its last
#: response, when that is longer than the keep-alive timeout) ...
HEADER_TIMEOUT = 10.0
#: ... and a request whose body has not all come this many seconds after its headers (408).
BODY_TIMEOUT = 30.0


class _HeaderDeadline(asyncio.Protocol):
    """Mixed into uvicorn's HTTP protocol class by :func:`_http_protocol`: uvicorn has no header-read timeout,
    so a client sending its headers a byte at a time (or nothing) held its connection for as long as it liked.

    The deadline is armed when the connection opens and when a response is complete; when it passes, a
    connection with no request under way since (``cycle``, the request being answered, is still the one of
    that moment, and answered) is closed. After a response the bound is at least ``keep_alive`` (uvicorn's
    own keep-alive timeout closes an idle one then): a longer ``--timeout-keep-alive`` is not cut short.
    """

    header_timeout: float = HEADER_TIMEOUT
    keep_alive: float = TIMEOUT_KEEP_ALIVE
    cycle: Any
    transport: Any
    _deadline: asyncio.TimerHandle | None = None
    _armed_for: Any = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]  # uvicorn's protocol, after this class in the MRO
        self._arm(max(self.header_timeout, self.keep_alive + 1.0))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def _arm(self, seconds: float | None = None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._armed_for = self.cycle
        self._deadline = asyncio.get_running_loop().call_later(seconds or self.header_timeout, self._expire)

    def _expire(self) -> None:
        self._deadline = None
        cycle, transport = self.cycle, self.transport
        if transport.is_closing() or transport.get_protocol() is not self:  # closed, or handed to a WebSocket
            return
        if cycle is self._armed_for and (cycle is None or cycle.response_complete):
            transport.close()


class _BodyDeadline(asyncio.Protocol):
    """Mixed into uvicorn's HTTP protocol class by :func:`_http_protocol`: uvicorn has no body-read timeout,
    so a client sending its headers at once and its body a byte at a time (or a ``Content-Length`` it never
    sends) held its connection and the request's handler for as long as it liked.

    The deadline is armed when a request's headers have come and its body has not (never for a request
    whose body comes with them: an ordinary call, a GET stream), and cancelled when the body is complete.
    When it passes, the request gets 408 and the connection is closed, so the handler, waiting for the body,
    sees the client gone and ends; after a response already sent (the app answered without the body) the
    connection is only closed. While uvicorn has stopped reading because the app has not taken what came
    (flow control), the client is not the one behind: the deadline starts again.
    """

    body_timeout: float = BODY_TIMEOUT
    timed_out: bytes = b""
    cycle: Any
    transport: Any
    flow: Any
    _body_deadline: asyncio.TimerHandle | None = None
    _body_cycle: Any = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        cycle = self.cycle
        if self._body_deadline is not None or (cycle is not None and cycle.more_body):  # rare: a body still to come
            self._watch_body()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]  # uvicorn's protocol, after this class in the MRO
        cycle = self.cycle  # h11 starts a pipelined request here, not in data_received
        if self._body_deadline is not None or (cycle is not None and cycle.more_body):
            self._watch_body()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._body_deadline is not None:
            self._body_deadline.cancel()
            self._body_deadline = None
        super().connection_lost(exc)

    def _watch_body(self) -> None:
        cycle = self.cycle
        if self._body_deadline is not None:
            if cycle is self._body_cycle and cycle.more_body:
                return
            self._body_deadline.cancel()
            self._body_deadline = self._body_cycle = None
        if cycle is not None and cycle.more_body:
            self._body_cycle = cycle
            self._body_deadline = asyncio.get_running_loop().call_later(self.body_timeout, self._body_expired)

    def _body_expired(self) -> None:
        self._body_deadline = None
        cycle, transport = self._body_cycle, self.transport
        if transport.is_closing() or transport.get_protocol() is not self or cycle is not self.cycle or not cycle.more_body:
            return
        if self.flow.read_paused:
            self._body_deadline = asyncio.get_running_loop().call_later(self.body_timeout, self._body_expired)
        elif not cycle.response_started:
            transport.write(self.timed_out)
            transport.close()
        elif cycle.response_complete:
            transport.close()
        else:  # a response under way to a client that may not read it: close() would wait for its buffer
            transport.abort()


def _http_protocol(header_timeout: float | None, keep_alive: float, body_timeout: float | None = BODY_TIMEOUT) -> Any:
    """uvicorn's ``http`` setting: its own choice (httptools when installed, else h11), with the header and
    body deadlines (each None: none)."""
    _check_seconds("header_timeout", header_timeout)
    _check_seconds("body_timeout", body_timeout)
    if header_timeout is None and body_timeout is None:
        return "auto"
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    mixins: list[type[asyncio.Protocol]] = []
    settings: dict[str, Any] = {"keep_alive": keep_alive}
    if header_timeout is not None:
        mixins.append(_HeaderDeadline)
        settings["header_timeout"] = header_timeout
    if body_timeout is not None:
        mixins.append(_BodyDeadline)
        body = _error_body(f"Request Timeout: the request body did not all arrive within {body_timeout:g} s")
        head = f"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        settings |= {"body_timeout": body_timeout, "timed_out": head.encode() + b"connection: close\r\n\r\n" + body}
    return type("DeadlineProtocol", (*mixins, AutoHTTPProtocol), settings)


async def serve_http(
    registry: ToolRegistry,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    limit_concurrency: int | None = LIMIT_CONCURRENCY,
    timeout_keep_alive: int = TIMEOUT_KEEP_ALIVE,
    header_timeout: float | None = HEADER_TIMEOUT,
    body_timeout: float | None = BODY_TIMEOUT,
    **options: Any,
) -> None:
    """Serve ``http_app(registry, **options)`` with uvicorn; the URL (real port for ``port=0``) goes to stderr.

    At most ``limit_concurrency`` connections or requests at once (then 503; None, the default: no bound; uvicorn
    counts idle connections and each session's open event stream, so a bound lets idle sockets lock others out); an idle
    keep-alive connection is closed after ``timeout_keep_alive`` seconds, and one that has not sent a
    request's headers ``header_timeout`` seconds after it opened or after its last response (None: never); a
    request whose body has not all come ``body_timeout`` seconds after its headers gets 408 and its connection
    is closed (None: never; it bounds receiving the body only, not a call or an event stream).
    uvicorn parses HTTP with httptools when it is installed (the ``mcp`` extra installs it), else h11.
    """
    import uvicorn

    app = http_app(registry, path=path, host=host, **options)
    sock = _listen(host, port)
    bound = sock.getsockname()[1]
    # No proxy headers: uvicorn trusts X-Forwarded-For from 127.0.0.1 by default, and a local caller
    # would choose its own address, so the mcp_client of per-client rate limits. Behind a proxy,
    # serve http_app with a server configured for that proxy.
    config = uvicorn.Config(
        app,
        log_config=None,  # uvicorn's records go to the application's logging (the CLI's: its format, level, masking)
        log_level="warning",
        lifespan="on",
        access_log=False,
        proxy_headers=False,
        limit_concurrency=limit_concurrency,
        timeout_keep_alive=timeout_keep_alive,
        http=_http_protocol(header_timeout, timeout_keep_alive, body_timeout),
    )
    shown = f"[{host}]" if ":" in host else host
    print(f"harness-one: serving MCP on http://{shown}:{bound}{path}", file=sys.stderr, flush=True)
    if not _loopback(sock.getsockname()[0]):  # the address bound: `127.1`, a name for 127.0.0.1, are loopback too
        print(
            f"harness-one: warning: {host} is not a loopback address; every tool is reachable from the network "
            "with no authentication (put an authenticating proxy in front, or mount http_app behind your own)",
            file=sys.stderr,
            flush=True,
        )
    await _uvicorn_server(config).serve(sockets=[sock])


def host_problem(host: Any) -> str | None:
    """What is wrong with a ``host`` to bind that is not a string or is blank (binding ``""`` would listen on
    every address), or None: what ``serve --host`` and :func:`http_app` say alike."""
    if isinstance(host, str) and host.strip():
        return None
    return f"must be the address to bind ('127.0.0.1'; '0.0.0.0' for every IPv4 address), not {host!r}"


def _check_host(host: str) -> None:
    problem = host_problem(host)
    if problem is not None:
        raise ValueError(f"host {problem}")


class _ListenError(OSError):
    """:func:`serve_http` cannot listen on its host and port (``cannot listen on HOST:PORT: why``); its
    ``__cause__`` is the socket's error (a ``socket.gaierror`` for a name that does not resolve)."""


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port``, or :class:`_ListenError`."""
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as exc:
        raise _ListenError(_cannot_listen(host, port, exc)) from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it: no 40 ms Nagle stalls
        sock.bind((host, port))
        sock.listen(2048)  # listening before the URL is announced: a client that reads it at once is queued, not refused
    except OSError as exc:
        sock.close()
        raise _ListenError(_cannot_listen(host, port, exc)) from exc
    return sock


def _cannot_listen(host: str, port: int, exc: OSError) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"cannot listen on {shown}:{port}: {exc.strerror or exc}"


def _loopback(host: str) -> bool:
    """One of :data:`_LOCAL_HOSTS`, or any other loopback address (``127.0.0.2``)."""
    if host in _LOCAL_HOSTS:
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1, as an IPv6 socket may bind 127.0.0.1
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


#: Threads for sync tools without a timeout while :func:`serve` runs (tools with one use the timeout plugin's pool).
SYNC_TOOL_THREADS = 64


def serve(registry: ToolRegistry, transport: str = "stdio", **options: Any) -> None:
    """Serve until stopped: ``transport`` is ``"stdio"`` or ``"http"`` (options as for :func:`serve_stdio` or
    :func:`serve_http`).

    The event loop is uvloop's when it is installed (the ``mcp`` extra installs it, except on
    Windows), a faster loop than asyncio's. Called in the main thread while SIGTERM has its default
    handler, SIGTERM stops the server (stdio: the requests still running are cancelled; HTTP:
    uvicorn's graceful shutdown) and, once the event loop has ended, raises ``SystemExit(143)``, so
    ``finally`` blocks and exit hooks run (an imported stdio server's process group is stopped). The
    default handler is back as soon as the first SIGTERM is taken: a second one ends the process at
    once (a sync tool without a timeout still running holds up the exit until it returns).
    """
    run: Callable[..., Awaitable[None]]
    if transport == "stdio":
        run = serve_stdio
    elif transport == "http":
        run = serve_http
    else:
        raise ValueError(f"transport must be 'stdio' or 'http', got {transport!r}")
    uvloop = sys.platform != "win32" and importlib.util.find_spec("uvloop") is not None
    sigterm = _Sigterm() if _sigterm_default() else None

    async def main() -> None:
        # Sync tools without a timeout run in the loop's default executor (asyncio's is
        # min(32, CPUs + 4) threads: 6 on 2 cores, so a few slow calls held up every other).
        from concurrent.futures import ThreadPoolExecutor

        executor = ThreadPoolExecutor(SYNC_TOOL_THREADS, thread_name_prefix="harness-one-tool")
        asyncio.get_running_loop().set_default_executor(executor)
        if sigterm is None:
            await run(registry, **options)
            return
        _sigterm.set(sigterm)
        failure: Exception | None = None
        try:
            async with anyio.create_task_group() as group:
                await group.start(_watch_sigterm, sigterm, group.cancel_scope)
                try:
                    await run(registry, **options)
                except Exception as exc:  # raised as it is below, not in the task group's ExceptionGroup
                    failure = exc
                group.cancel_scope.cancel()  # the watcher
        finally:
            if sigterm.received:  # uvicorn put back the handler it found, the loop's own: the default again
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if failure is not None:
            raise failure

    if uvloop:
        _fill_closed_std_fds()
    try:
        anyio.run(main, backend_options={"use_uvloop": uvloop})
    finally:
        if sigterm is not None:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sigterm is not None and sigterm.received:  # outside the loop and any tool: nothing turns it into a result
        raise SystemExit(128 + signal.SIGTERM)


class _Sigterm:
    """SIGTERM while :func:`serve` runs: whether it came, and how to stop (None: cancel the serving; over HTTP,
    uvicorn's graceful shutdown, set by :func:`_uvicorn_server`)."""

    def __init__(self) -> None:
        self.received = False
        self.stop: Callable[[], None] | None = None


#: The :class:`_Sigterm` of the :func:`serve` running in this context, if it watches SIGTERM.
_sigterm: contextvars.ContextVar[_Sigterm | None] = contextvars.ContextVar("harness_one_mcp_sigterm", default=None)


def _sigterm_default() -> bool:
    """Whether this is the main thread and SIGTERM has its default handler (a host's own is left as it is)."""
    return threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


async def _watch_sigterm(
    sigterm: _Sigterm, scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Wait for SIGTERM on the event loop (never raised into the code it lands in: a tool would take it for its
    own failure), then note it and stop the serving; leaving the receiver puts the default handler back, so a
    second SIGTERM ends the process at once."""
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            break
    sigterm.received = True
    (sigterm.stop or scope.cancel)()


def _uvicorn_server(config: Any) -> Any:
    """uvicorn's server for ``config``; under a :func:`serve` watching SIGTERM, one that leaves SIGTERM to it
    (uvicorn's own handler would start a second shutdown, and raise the signal again once it has ended): SIGTERM
    sets ``should_exit``, as uvicorn does (its graceful shutdown)."""
    import uvicorn

    sigterm = _sigterm.get()
    if sigterm is None:
        return uvicorn.Server(config)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if sig != signal.SIGTERM:
                super().handle_exit(sig, frame)

    server = Server(config)

    def stop() -> None:
        server.should_exit = True

    sigterm.stop = stop
    return server


def _fill_closed_std_fds() -> None:
    """Put the null device on a closed fd 0, 1 or 2 (``serve <&-``): a descriptor of uvloop's own would land
    there, and libuv aborts the process when it closes one (``Assertion `fd > STDERR_FILENO' failed``).
    ``sys.stdin`` or ``sys.stdout`` stays None: no requests, or nowhere to answer."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
