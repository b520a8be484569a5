"""Run a provider's tool calls through a registry and answer in that provider's shape.

========================  ====================================  ==========================================
provider                  calls in                              results out
========================  ====================================  ==========================================
OpenAI Chat Completions   ``message.tool_calls``                ``{"role": "tool", "tool_call_id", "content"}``
OpenAI Responses          ``function_call`` output items        ``{"type": "function_call_output", "call_id", "output"}``
Anthropic Messages        ``tool_use`` content blocks           ``{"type": "tool_result", "tool_use_id", "content", "is_error"}``
Gemini                    ``function_call`` parts               ``{"id", "name", "response": {"output"} | {"error"}}``
========================  ====================================  ==========================================

Calls and results may be dicts or the providers' SDK objects (anything with ``model_dump``).
Nothing raises out of a dispatcher: invalid ``arguments`` JSON, unknown tools and every
:class:`ToolError` become error results the model can read. Several calls run concurrently
(up to ``concurrency``), and results come back in the order of the calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ._call import CallResult, new_call_id
from ._errors import ToolError
from ._formats import CALL_FORMATS, check_format
from ._requests import BadRequest, Request, parse_call, resolve

if TYPE_CHECKING:
    from ._registry import ToolRegistry

__all__ = [
    "PROVIDERS",
    "adispatch",
    "adispatch_anthropic",
    "adispatch_gemini",
    "adispatch_openai",
    "adispatch_openai_responses",
    "dispatch",
    "dispatch_anthropic",
    "dispatch_gemini",
    "dispatch_openai",
    "dispatch_openai_responses",
]

#: The providers whose tool calls a dispatcher answers.
PROVIDERS = CALL_FORMATS


def _requests(provider: str, calls: Iterable[Any], registry: ToolRegistry, strict: bool) -> list[Request | BadRequest]:
    check_format(provider, calls=True)
    out: list[Request | BadRequest] = []
    for raw in calls:
        try:
            request = parse_call(raw, provider=provider)
        except BadRequest as exc:
            out.append(exc)
            continue
        if request is not None:
            out.append(resolve(request, registry, strict=strict))
    return out


def _settle(provider: str, request: Request | BadRequest, outcome: CallResult | Exception | None) -> dict[str, Any]:
    """The provider-shaped answer for a finished call, a malformed one, or an exception it raised (never re-raised)."""
    if isinstance(request, BadRequest):
        error = ToolError(f"Invalid tool call: {request}. Send a tool name and its arguments.")
        outcome = CallResult(False, None, error, "", new_call_id(), 0.0, 0)
        request = Request(request.request_id, "", {}, provider)
    elif not isinstance(outcome, CallResult):
        message = f"Internal error while calling '{request.name}': {type(outcome).__name__}: {outcome}"
        error = outcome if isinstance(outcome, ToolError) else ToolError(message)
        outcome = CallResult(False, None, error, request.name, new_call_id(), 0.0, 0)
    return _answer(provider, request, outcome)


def _answer(provider: str, request: Request, result: CallResult) -> dict[str, Any]:
    text = result.for_model()
    if provider == "openai":
        return {"role": "tool", "tool_call_id": request.id, "content": text}
    if provider == "openai-responses":
        return {"type": "function_call_output", "call_id": request.id, "output": text}
    if provider == "anthropic":
        return {"type": "tool_result", "tool_use_id": request.id, "content": text, "is_error": not result.ok}
    response = {"output": result.value} if result.ok else {"error": result.error.message if result.error else "error"}
    answer: dict[str, Any] = {"name": request.exported, "response": response}
    if request.id is not None:
        answer["id"] = request.id
    return answer


def dispatch(
    registry: ToolRegistry,
    calls: Iterable[Any],
    *,
    provider: str = "openai",
    strict: bool = False,
    concurrency: int = 8,
    context: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Run ``calls`` (``provider``-shaped) and return the provider-shaped results, in order.

    Several calls run in a thread pool of up to ``concurrency`` workers. ``strict`` must
    match the export the model saw (OpenAI strict mode): nulls it sends for optional
    arguments are dropped so defaults apply.
    """
    requests = _requests(provider, calls, registry, strict)

    def one(request: Request | BadRequest) -> dict[str, Any]:
        if isinstance(request, BadRequest):
            return _settle(provider, request, None)
        return _settle(
            provider, request, registry.try_call(request.name, request.arguments, context=context, call_id=_id(request))
        )

    if len(requests) <= 1 or concurrency <= 1:
        return [one(r) for r in requests]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(requests)), thread_name_prefix="harness-one-dispatch") as pool:
        return list(pool.map(one, requests))


async def adispatch(
    registry: ToolRegistry,
    calls: Iterable[Any],
    *,
    provider: str = "openai",
    strict: bool = False,
    concurrency: int = 8,
    context: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The awaitable :func:`dispatch`: calls run as tasks, at most ``concurrency`` at once."""
    requests = _requests(provider, calls, registry, strict)
    slots = asyncio.Semaphore(max(concurrency, 1))

    async def one(request: Request | BadRequest) -> dict[str, Any]:
        if isinstance(request, BadRequest):
            return _settle(provider, request, None)
        async with slots:
            result = await registry.atry_call(request.name, request.arguments, context=context, call_id=_id(request))
        return _settle(provider, request, result)

    return list(await asyncio.gather(*(one(r) for r in requests)))


def _id(request: Request) -> str | None:
    return None if request.id is None else str(request.id)


def _bind(provider: str) -> tuple[Callable[..., list[dict[str, Any]]], Callable[..., Any]]:
    def sync(registry: ToolRegistry, calls: Sequence[Any], **options: Any) -> list[dict[str, Any]]:
        return dispatch(registry, calls, provider=provider, **options)

    async def run_async(registry: ToolRegistry, calls: Sequence[Any], **options: Any) -> list[dict[str, Any]]:
        return await adispatch(registry, calls, provider=provider, **options)

    sync.__doc__ = f"``dispatch(..., provider={provider!r})``."
    run_async.__doc__ = f"``adispatch(..., provider={provider!r})``."
    return sync, run_async


dispatch_openai, adispatch_openai = _bind("openai")
dispatch_openai_responses, adispatch_openai_responses = _bind("openai-responses")
dispatch_anthropic, adispatch_anthropic = _bind("anthropic")
dispatch_gemini, adispatch_gemini = _bind("gemini")
