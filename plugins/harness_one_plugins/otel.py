"""The ``otel`` plugin: one OpenTelemetry span per tool call, and call metrics (extra ``harness-one[otel]``).

Spans follow the OpenTelemetry GenAI semantic conventions for tool execution: name
``execute_tool {gen_ai.tool.name}``, kind INTERNAL, ``gen_ai.operation.name``,
``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.description``,
``gen_ai.tool.type``, ``error.type`` on failure; arguments and result only when opted in,
redacted. One span covers the whole call, retries and waits included, each of which is an
event on it. The plugin goes through the OpenTelemetry API only; the application chooses
the SDK and exporters. Without ``opentelemetry-api`` installed the plugin is inert: nothing
is imported and no call pays anything.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import harness_one
from harness_one import (
    SECRET_KEYS,
    Call,
    Outcome,
    RateLimitExceeded,
    Redactor,
    Retry,
    Tool,
    ToolCancelled,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    __version__,
    applies_to,
    hookimpl,
    log_event,
)

from ._options import flag
from ._text import arguments_shown, holding, rendered

__all__ = [
    "DESCRIPTION_LIMIT",
    "DURATION_BUCKETS",
    "INSTRUMENTATION_SCOPE",
    "METRICS",
    "TRACE_CONTEXT_KEY",
    "OTelPlugin",
    "available",
    "error_type",
]

#: The tracer and meter name.
INSTRUMENTATION_SCOPE = "harness_one"
#: The characters of a tool's description a span shows (``gen_ai.tool.description``), as OpenAI's limit.
DESCRIPTION_LIMIT = 1024
#: ``Call.context[TRACE_CONTEXT_KEY]`` may hold W3C ``traceparent``/``tracestate`` strings (an MCP request's ``_meta``).
TRACE_CONTEXT_KEY = "_meta"
#: The instruments: name -> (kind, unit, description).
METRICS = {
    "harness_one.tool.calls": ("counter", "{call}", "Finished tool calls"),
    "harness_one.tool.errors": ("counter", "{call}", "Tool calls that ended in an error, by error.type"),
    "harness_one.tool.duration": ("histogram", "s", "Duration of tool calls, retries and waits included"),
    "harness_one.tool.rate_limited": ("counter", "{refusal}", "Rate-limit refusals (waited out or final)"),
}
#: Histogram boundaries in seconds: the GenAI conventions' durations, with two below 10 ms for fast tools.
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)

_SPAN = "otel.span"
_TOKEN = "otel.token"
#: In ``call.state[_SPAN]`` once the span has ended with the call's success (post_call): a later post_call
#: hook's failure, or a retry it leads to, starts no second span and counts the call no second time.
_ENDED = object()
_NOT_INSTALLED = "opentelemetry-api is not installed"


#: Where harness-one's own code is: an exception raised there is a fault of the plugin's, reported as one.
_OWN_CODE = tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in (harness_one.__file__ or "", __file__))


def _foreign(exc: BaseException) -> bool:
    """Whether ``exc`` was raised outside harness-one's own code: in the OpenTelemetry SDK, or in a span
    processor, view, meter or propagator of the application (where it was raised: its traceback's last frame).

    Every ``try`` here holds only calls of the SDK, their arguments worked out before it, so what the
    plugin's own code raises is never caught as the SDK's; a fault raised on the plugin's own line (a
    conformance kit's injected one) is reported as the plugin's.
    """
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_OWN_CODE)


def available() -> bool:
    """Whether an ``opentelemetry`` package can be imported (found without importing it)."""
    try:
        return importlib.util.find_spec("opentelemetry") is not None
    except (ImportError, ValueError):
        return False


def configured() -> bool:
    """Whether the application has set a global tracer or meter provider (imports nothing new)."""
    trace, metrics = sys.modules.get("opentelemetry.trace"), sys.modules.get("opentelemetry.metrics")
    tracer = getattr(trace, "get_tracer_provider", None)
    meter = getattr(metrics, "get_meter_provider", None)
    return bool(
        (tracer is not None and "Proxy" not in type(tracer()).__name__)
        or (meter is not None and "Proxy" not in type(meter()).__name__)
    )


def error_type(error: ToolError) -> str:
    """The ``error.type`` of a failed call: the tool's exception class, else the error's ``kind``; valid
    UTF-8, as an OTLP exporter encodes it (a lone surrogate in a name replayed from a store as its escape)."""
    if isinstance(error, ToolExecutionError):  # its class as module.qualname, as a store keeps it for a replay
        return Redactor.escape_surrogates(error.cause_type)
    return error.kind


class OTelPlugin:
    """Emits a span per tool call and records call metrics through the OpenTelemetry API.

    When ``call.context["_meta"]`` carries a W3C ``traceparent`` (and ``tracestate``), as an
    MCP ``tools/call`` does, the span continues that trace; otherwise its parent is the current
    span (a direct call inside an instrumented application). The span is current while the tool runs, so
    spans the tool makes are its children. Events: ``harness_one.retry`` (an attempt failed and
    another follows), ``harness_one.wait`` (a refusal waited out: rate limit, busy, open circuit,
    idempotency conflict), ``harness_one.replay`` (the outcome came from a store: an idempotency
    replay or a cache hit).

    Args:
        enabled: ``None`` (default): on when ``opentelemetry-api`` is installed and the
            application has set a global tracer or meter provider before the registry is
            created (or providers are passed here); otherwise inert, at no cost per call.
            ``False``: inert; ``True``: on, and a load failure when the API is missing.
        tracer_provider: a ``TracerProvider`` (default: the global one, as configured when calls run).
        meter_provider: a ``MeterProvider`` (default: the global one).
        capture_content: add ``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result``
            (JSON, redacted, each string cut at 2,000 characters, each value at about 16,384).
        secret_keys: the key names that mark a secret, as in the ``logging`` plugin (redaction
            also applies to the error text in the span status).
        extra_secret_keys: key names added to ``secret_keys``.
        secret_values: exact strings to mask in any recorded text.
    """

    name = "otel"
    order = 85  # post_call/on_error, trylast: after every decider and transform, before metrics and logging

    def __init__(
        self,
        *,
        enabled: bool | None = None,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        capture_content: bool = False,
        secret_keys: Iterable[str] = SECRET_KEYS,
        extra_secret_keys: Iterable[str] = (),
        secret_values: Iterable[str] = (),
    ) -> None:
        enabled = flag(enabled, "otel enabled", optional=True)
        for provider, what, method in (
            (tracer_provider, "tracer_provider", "get_tracer"),
            (meter_provider, "meter_provider", "get_meter"),
        ):
            if provider is not None and not callable(getattr(provider, method, None)):  # an AttributeError per call, else
                raise TypeError(
                    f"otel {what} must be None or an object with {method}(), not {type(provider).__name__} {provider!r}"
                )
        self.enabled = False
        self._inert = ""  # why the plugin is inert (registry.stats()["otel"]["reason"])
        self._attrs: dict[str, dict[str, str]] = {}  # the metric attributes of each tool, made once
        self._sdk_errors = 0  # exceptions of the SDK's span and metric calls (a span processor's, say), caught
        self._sdk_lock = threading.Lock()
        self.capture_content = flag(capture_content, "otel capture_content")
        self.redactor = Redactor(secret_keys, extra_keys=extra_secret_keys, values=secret_values)
        #: Each tool's description and how spans show it (masked, cut at DESCRIPTION_LIMIT characters): made once.
        self._descriptions: dict[str, tuple[str, str]] = {}
        if enabled is False:
            self._inert = "enabled=False"
            return
        if enabled is None and not available():
            self._inert = _NOT_INSTALLED
            return
        if enabled is None and tracer_provider is None and meter_provider is None and not configured():
            self._inert = "no tracer or meter provider was set when the plugin was built"
            return  # nothing would record the spans: pay nothing per call
        try:
            from opentelemetry import context, metrics, propagate, trace
        except ImportError as exc:
            if enabled:
                raise ImportError("The otel plugin needs opentelemetry-api: pip install 'harness-one[otel]'.") from exc
            self._inert = _NOT_INSTALLED
            return
        self.enabled = True
        self._context = context
        self._trace = trace
        self._propagate = propagate
        self._internal = trace.SpanKind.INTERNAL
        self._error = trace.StatusCode.ERROR
        self._status = trace.Status
        self._no_span = trace.INVALID_SPAN  # when the SDK fails to start one: the call goes on without it
        self.tracer = trace.get_tracer(INSTRUMENTATION_SCOPE, __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_SCOPE, __version__, meter_provider=meter_provider)

        def counter(name: str) -> Any:
            _, unit, text = METRICS[name]
            return meter.create_counter(name, unit=unit, description=text)

        self._calls = counter("harness_one.tool.calls")
        self._errors = counter("harness_one.tool.errors")
        self._rate_limited = counter("harness_one.tool.rate_limited")
        _, unit, text = METRICS["harness_one.tool.duration"]
        self._duration = meter.create_histogram(
            "harness_one.tool.duration", unit=unit, description=text, explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS)
        )

    # ------------------------------------------------------------------ spans

    def _description(self, name: str, text: str) -> str:
        """A tool's description on its spans (an MCP server's, say: it may be megabytes, and hold
        credentials): masked as texts are, cut at :data:`DESCRIPTION_LIMIT` characters, valid UTF-8."""
        found = self._descriptions.get(name)
        if found is not None and found[0] is text:
            return found[1]
        shown = self.redactor.text(text, DESCRIPTION_LIMIT)
        self._descriptions[name] = (text, shown)  # by tool name: dropped as the tool is removed
        return shown

    def _parent(self, call: Call) -> Any:
        """The context to start the span in: None (the current one), or the caller's trace from ``_meta``.

        ``call.context["_meta"]`` (an MCP request's ``_meta``) goes through the global propagator
        (W3C trace context unless the application set another). The current span stays the
        parent when it already belongs to that trace (the MCP SDK's server span for the request).
        """
        meta = call.context.get(TRACE_CONTEXT_KEY)
        if not isinstance(meta, Mapping):
            return None
        try:
            fields = tuple(self._propagate.get_global_textmap().fields)
        except Exception as exc:  # the application's propagator: the call goes on in the current context
            self._sdk_failed(exc)
            return None
        carrier = {key: value for key in fields if isinstance(value := meta.get(key), str)}
        if not carrier:
            return None
        try:
            found = self._propagate.extract(carrier)
            remote = self._trace.get_current_span(found).get_span_context()
        except (ValueError, TypeError):  # a propagator that does not tolerate a malformed carrier
            return None
        except Exception as exc:  # any other failure of the propagator: counted, never the call's
            self._sdk_failed(exc)
            return None
        if not remote.is_valid:
            return None  # a malformed traceparent: the current context
        current = self._trace.get_current_span().get_span_context()
        if current.is_valid and current.trace_id == remote.trace_id:
            return None
        return found

    def _start(self, call: Call) -> Any:
        tool = call.tool
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.name,
            "gen_ai.tool.call.id": self.redactor.key(call.call_id),  # masked and cut at 200 characters
            "gen_ai.tool.type": "function",
        }
        if tool.description:
            attributes["gen_ai.tool.description"] = self._description(tool.name, tool.description)
        started = time.time_ns() - int((time.perf_counter() - call.started) * 1e9)  # the call began before this hook
        name, parent = f"execute_tool {tool.name}", self._parent(call)
        try:
            span = self.tracer.start_span(name, context=parent, kind=self._internal, attributes=attributes, start_time=started)
        except Exception as exc:  # the SDK's (a span processor's on_start, say): the call goes on without a span
            self._sdk_failed(exc)
            span = self._no_span
        if self.capture_content and self._recording(span):
            try:
                # a secret the arguments hold under a secret key, masked under any other too (as in the result)
                text = rendered(arguments_shown(holding(self.redactor, call.arguments, call.context), call.arguments))
            except BaseException:  # the plugin's own fault, reported as one: the span is ended all the same
                self._end(span)
                raise
            try:
                span.set_attribute("gen_ai.tool.call.arguments", text)
            except Exception as exc:
                self._sdk_failed(exc)
        call.state[_SPAN] = span
        return span

    def _recording(self, span: Any) -> bool:
        try:
            return bool(span.is_recording())
        except Exception as exc:
            self._sdk_failed(exc)
            return False

    def _detach(self, call: Call) -> None:
        token = call.take(_TOKEN)
        if token is not None:
            self._context.detach(token)

    def _metric_attrs(self, name: str) -> dict[str, str]:
        found = self._attrs.get(name)
        if found is None:
            found = self._attrs[name] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        return found

    def _finish(self, call: Call, span: Any, error: ToolError | None, value: Any, *, replayed: bool = False) -> None:
        """End ``span`` and record the call's metrics (``value``: the result the caller gets, when ``error`` is None).
        What the SDK raises is counted, never the call's failure:
        the tool has run, and its outcome stands (a failing span processor or view must not make a retry run it again).
        (Each ``try`` holds only the SDK's calls, their arguments worked out before it: see :func:`_foreign`.)"""
        attrs = self._metric_attrs(call.tool.name)
        kind = status = ""
        result: str | None = None
        try:
            if error is not None:
                kind, status = error_type(error), self._status_text(error, call.arguments, call.context)
                attrs = {**attrs, "error.type": kind}
            elif self.capture_content and self._recording(span):
                # the values masked in the arguments, masked in the result too: each text before it is cut
                result = self._result_text(value, holding(self.redactor, call.arguments, call.context))
        except BaseException:  # the plugin's own fault, reported as one: the span is ended all the same
            self._end(span)
            raise
        attempts, duration = call.attempts, time.perf_counter() - call.started
        try:
            try:
                if replayed:
                    span.add_event("harness_one.replay", {"harness_one.attempt": call.attempt})
                span.set_attribute("harness_one.attempts", attempts)
                if error is not None:
                    span.set_attribute("error.type", kind)
                    span.set_status(self._status(self._error, status))
                elif result is not None:
                    span.set_attribute("gen_ai.tool.call.result", result)
            finally:
                span.end()
        except Exception as exc:
            self._sdk_failed(exc)
        self._record(attrs, duration, None if error is None else error.kind)

    def _result_text(self, value: Any, redactor: Redactor) -> str:
        """``gen_ai.tool.call.result``: the JSON the model reads for ``value``, masked by ``redactor``. A value JSON cannot write
        as it is (a dataclass, a date, an enum, a UUID) is read back from that JSON: its fields, ``isoformat()``,
        value, text, not its ``repr``; any other goes to the redactor as it is (its hostile parts shown by its rule)."""
        try:
            json.dumps(value, allow_nan=False)
        except TypeError:
            try:
                data = json.loads(rendered(value))
            except (ValueError, RecursionError):  # an int past Python's int-to-text limit, nesting past its depth
                pass
            else:
                if not (isinstance(data, str) and isinstance(value, Mapping)):  # (a hostile mapping: the redactor walks it)
                    shown = redactor(data)  # (read back as one string, an enum's: the model reads it quoted)
                    return json.dumps(shown, ensure_ascii=False) if isinstance(shown, str) else rendered(shown)
        except Exception:  # a huge int, NaN, a cycle, a value whose reading raises: the redactor's rule
            pass
        return rendered(redactor(value))

    def _end(self, span: Any) -> None:
        try:
            span.end()
        except Exception as exc:
            self._sdk_failed(exc)

    def _status_text(self, error: ToolError, arguments: Any = None, context: Any = None) -> str:
        """The span status of ``error``: its first line, masked (or its type); with the call's ``arguments`` and
        ``context``, the values they hold under secret keys masked too (as in its ``gen_ai.tool.call.arguments``)."""
        if not error.message:
            return self.redactor.text(error_type(error))
        return holding(self.redactor, arguments, context).text(error.message.splitlines()[0])

    def _record(self, attrs: dict[str, Any], duration: float | None, error_kind: str | None) -> None:
        """Count a call (its ``duration``, if it has one) and, with ``error_kind``, its error (``attrs``: with its type)."""
        errors = None if error_kind is None else {**attrs, "harness_one.error.kind": error_kind}
        try:
            if errors is not None:
                self._errors.add(1, errors)
            self._calls.add(1, attrs)
            if duration is not None:
                self._duration.record(duration, attrs)
        except Exception as exc:
            self._sdk_failed(exc)

    def _sdk_failed(self, exc: Exception) -> None:
        """Count an exception of the SDK (shown in ``registry.stats()["otel"]["sdk_errors"]``) and log the first
        one; raise ``exc`` again when harness-one's own code raised it (a fault that is the plugin's, reported)."""
        if not _foreign(exc):
            raise exc
        with self._sdk_lock:
            self._sdk_errors += 1
            first = self._sdk_errors == 1
        if first:
            try:
                text = self.redactor.text(f"{type(exc).__name__}: {exc}")
            except Exception:
                text = type(exc).__name__
            log_event(
                30, "otel: an OpenTelemetry call failed; the tool call goes on, later failures are only counted", error=text
            )

    def _rate_limited_add(self, call: Call, waited: bool) -> None:
        attrs = {**self._metric_attrs(call.tool.name), "harness_one.waited": waited}
        try:
            self._rate_limited.add(1, attrs)
        except Exception as exc:
            self._sdk_failed(exc)

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        self._attrs.pop(tool.name, None)
        self._descriptions.pop(tool.name, None)

    @hookimpl(tryfirst=True)
    @applies_to(lambda plugin, tool: plugin.enabled)
    def harness_pre_validate(self, call: Call) -> None:
        self._start(call)

    @hookimpl(trylast=True)
    @applies_to(lambda plugin, tool: plugin.enabled)
    def harness_pre_call(self, call: Call) -> None:
        span = call.peek(_SPAN) or self._start(call)
        if span is not self._no_span and span is not _ENDED:  # else the caller's span stays current
            call.state[_TOKEN] = self._context.attach(self._trace.set_span_in_context(span))

    @hookimpl(trylast=True)
    @applies_to(lambda plugin, tool: plugin.enabled)
    def harness_post_call(self, call: Call) -> None:
        self._detach(call)
        state = call.state
        span = state.get(_SPAN) or self._start(call)
        if span is _ENDED:  # a retry after a later post_call hook failed: the span has ended
            return
        state[_SPAN] = _ENDED
        self._finish(call, span, None, call.result, replayed=not call.ran)

    @hookimpl(trylast=True)
    @applies_to(lambda plugin, tool: plugin.enabled)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        """The error stands (no decision): end the span with it. A decision is settled by :meth:`_decided`,
        which runs after every on_error hook that may still replace it (the output limit's)."""
        self._detach(call)
        assert isinstance(error, ToolError)
        span = call.peek(_SPAN) or self._start(call)
        if span is _ENDED:  # a post_call hook after this plugin's failed: the span ended as a success
            return
        if call.decision is not None and not isinstance(error, ToolCancelled):
            return
        call.take(_SPAN)
        if isinstance(error, RateLimitExceeded):
            self._rate_limited_add(call, False)
        self._finish(call, span, error, None, replayed=error.replayed)

    @hookimpl(trylast=True, specname="harness_on_error")
    @applies_to(lambda plugin, tool: plugin.enabled, after_decision=True)
    def _decided(self, call: Call, error: BaseException) -> None:
        """A decision, final (run last, only when there is one): a retry or wait is an event on the span;
        an ``Outcome`` ends it, with the recovered value or the translated error."""
        assert isinstance(error, ToolError)
        span = call.peek(_SPAN)
        decision = call.decision
        if span is None or span is _ENDED or decision is None:  # ended already (by harness_on_error)
            return
        limited = isinstance(error, RateLimitExceeded)
        if type(decision) is Retry:
            event = {"harness_one.attempt": call.attempt, "error.type": error_type(error), "harness_one.delay": decision.delay}
            try:
                span.add_event("harness_one.retry" if call.ran else "harness_one.wait", event)
            except Exception as exc:
                self._sdk_failed(exc)
            if limited:
                self._rate_limited_add(call, True)
            return
        call.take(_SPAN)
        if limited:
            self._rate_limited_add(call, False)
        if type(decision) is Outcome:  # translated, or recovered (its value is the call's result)
            self._finish(call, span, decision.error, decision.value, replayed=error.replayed)
        else:  # not a decision the core takes: the error stands
            self._finish(call, span, error, None, replayed=error.replayed)

    @hookimpl(trylast=True)
    def harness_call_refused(self, name: str, error: ToolError) -> None:
        """A request refused before it became a call: a span that ends at once with its error, and the
        call and error counts without a tool name (a model's made-up names would be unbounded metric series)."""
        if not self.enabled:
            return
        shown = self.redactor.key(name)
        kind, status = error_type(error), self._status_text(error)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": shown,
            "gen_ai.tool.call.id": self.redactor.key(error.call_id or ""),
            "gen_ai.tool.type": "function",
            "harness_one.attempts": 0,
        }
        try:  # named without the tool: a model's made-up names would be unbounded span names
            span = self.tracer.start_span("execute_tool", kind=self._internal, attributes=attributes)
            try:
                span.set_attribute("error.type", kind)
                span.set_status(self._status(self._error, status))
            finally:
                span.end()
        except Exception as exc:
            self._sdk_failed(exc)
        self._record({"gen_ai.operation.name": "execute_tool", "error.type": kind}, None, error.kind)

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        if not self.enabled:
            return {"enabled": False, "reason": self._inert}
        return {"enabled": True, **({"sdk_errors": self._sdk_errors} if self._sdk_errors else {})}
