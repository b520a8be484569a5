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
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._call import CallResult, new_call_id
from ._errors import ToolError

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

PROVIDERS = ("openai", "openai-responses", "anthropic", "gemini")


@dataclass
class _Request:
    id: Any
    name: str
    exported: str
    arguments: Any


def _plain(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=False)
    return obj


def _requests(provider: str, calls: Iterable[Any], registry: ToolRegistry, strict: bool) -> list[_Request]:
    _check(provider)
    names = registry.export("gemini").names if provider == "gemini" else None
    nullable = registry.export(provider, strict=True).nullable if strict and provider.startswith("openai") else {}
    out = []
    for raw in calls:
        call = _plain(raw)
        kind = call.get("type") if isinstance(call, Mapping) else None
        if not isinstance(call, Mapping):
            continue
        if provider == "openai":
            function = call.get("function") or {}
            rid, name, args = call.get("id"), function.get("name"), function.get("arguments")
        elif provider == "openai-responses":
            if kind not in (None, "function_call"):
                continue
            rid, name, args = call.get("call_id"), call.get("name"), call.get("arguments")
        elif provider == "anthropic":
            if kind != "tool_use":
                continue
            rid, name, args = call.get("id"), call.get("name"), call.get("input")
        else:
            inner = call.get("function_call") or call
            rid, name, args = inner.get("id"), inner.get("name"), inner.get("args")
        exported = str(name or "")
        tool_name = names.original(exported) if names is not None else exported
        if tool_name in nullable:
            args = _drop_nulls(args, nullable[tool_name])
        out.append(_Request(rid, tool_name, exported, args if args is not None else {}))
    return out


def _drop_nulls(args: Any, tree: Mapping[str, Any]) -> Any:
    """Strict mode sends ``null`` for optional arguments it made nullable: treat them as absent."""
    if isinstance(args, (str, bytes)):
        try:
            args = json.loads(args)
        except ValueError:
            return args  # the registry reports the bad JSON
    if not isinstance(args, dict):
        return args
    out = {}
    for key, value in args.items():
        sub = tree.get(key)
        if sub is not None and value is None and sub.get("__self__"):
            continue
        out[key] = _drop_nulls(value, sub) if isinstance(sub, Mapping) and isinstance(value, dict) else value
    return out


def _settle(provider: str, request: _Request, outcome: CallResult | Exception) -> dict[str, Any]:
    """The provider-shaped answer for a finished call, or for an exception it raised (never re-raised)."""
    if isinstance(outcome, Exception):
        message = f"Internal error while calling '{request.name}': {type(outcome).__name__}: {outcome}"
        error = outcome if isinstance(outcome, ToolError) else ToolError(message)
        outcome = CallResult(False, None, error, request.name, new_call_id(), 0.0, 0)
    return _answer(provider, request, outcome)


def _answer(provider: str, request: _Request, result: CallResult) -> dict[str, Any]:
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

    def one(request: _Request) -> dict[str, Any]:
        outcome: CallResult | Exception
        try:
            outcome = registry.try_call(request.name, request.arguments, context=context, call_id=_id(request))
        except Exception as exc:
            outcome = exc
        return _settle(provider, request, outcome)

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

    async def one(request: _Request) -> dict[str, Any]:
        outcome: CallResult | Exception
        async with slots:
            try:
                outcome = await registry.atry_call(request.name, request.arguments, context=context, call_id=_id(request))
            except Exception as exc:
                outcome = exc
        return _settle(provider, request, outcome)

    return list(await asyncio.gather(*(one(r) for r in requests)))


def _id(request: _Request) -> str | None:
    return None if request.id is None else str(request.id)


def _check(provider: str) -> None:
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")


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
