"""The tool model: :class:`Tool`, its policies, and the ``defineTool`` decorator."""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, Protocol, TypeVar, overload

from ._errors import ToolDefinitionError
from ._log import log_event
from ._policies import CircuitBreakerPolicy, RateLimit, RetryPolicy, _positive
from ._schema import (
    Converter,
    analyse,
    check_against_signature,
    check_schema,
    find_surrogate,
    unpartial,
    wrap_output,
    wrapped_function,
)

if TYPE_CHECKING:
    from ._registry import ToolRegistry

__all__ = ["KNOWN_OPTIONS", "PLUGIN_OPTIONS", "POLICY_PLUGINS", "Tool", "ToolFunction", "defineTool", "define_tool"]

P = ParamSpec("P")
R = TypeVar("R")

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")


@dataclass(eq=False)
class Tool:
    """A registered tool: the function, its JSON Schema, its policies and its metadata.

    Build one with :func:`defineTool` (or :meth:`Tool.create`). Calling a ``Tool`` directly
    calls the function; agents call it through a :class:`ToolRegistry`.
    """

    name: str
    fn: Callable[..., Any]
    description: str
    parameters: dict[str, Any]
    rate_limit: RateLimit | None = None
    timeout: float | None = None
    idempotent: bool = False
    retry: RetryPolicy | None = None
    timeout_mode: str | None = None
    total_timeout: float | None = None
    max_concurrency: int | None = None
    circuit_breaker: CircuitBreakerPolicy | None = None
    cache_ttl: float | None = None
    tags: frozenset[str] = frozenset()
    read_only: bool = False
    destructive: bool | None = None
    open_world: bool | None = None
    #: A sync tool that may block (I/O, sleeps, long computation): ``acall`` runs it in a worker
    #: thread. ``False`` runs it on the event loop, saving the thread hop; only for quick,
    #: non-blocking functions.
    blocking: bool = True
    #: The schema of the structured result, always an object schema (or None); see ``output_wrapped``.
    output_schema: dict[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: Example calls, ``{"arguments": {...}}`` with an optional expected ``"result"`` (the conformance kit runs them).
    examples: tuple[Mapping[str, Any], ...] = ()
    #: The distribution the tool came from (entry points), or None for tools defined in code.
    source: str | None = None
    is_async: bool = False
    accepted: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()
    accepts_any: bool = True
    call_param: str | None = None
    #: Per parameter, a function from the validated JSON value to the annotated Python type
    #: (datetime, UUID, Enum, dataclass, pydantic model, ...); parameters that need none are absent.
    converters: Mapping[str, Converter] = field(default_factory=dict)
    #: The result is not an object, so ``output_schema`` is ``{"result": <schema>}`` and a structured
    #: result ``v`` is sent as ``{"result": v}`` (as FastMCP does).
    output_wrapped: bool = False
    #: The plugin policies the tool declined (``retry=False``, ``circuit_breaker=False``: ``"retry"``,
    #: ``"circuit_breaker"``): that plugin's ``default`` does not apply to it (a policy of its own would).
    declined: frozenset[str] = frozenset()

    @property
    def parameters_schema(self) -> dict[str, Any]:
        """The seed's name for :attr:`parameters`."""
        return self.parameters

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"

    @classmethod
    def create(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        rate_limit: RateLimit | Mapping[str, Any] | None = None,
        timeout: float | None = None,
        idempotent: bool = False,
        retry: RetryPolicy | Mapping[str, Any] | int | bool | None = None,
        timeout_mode: str | None = None,
        total_timeout: float | None = None,
        max_concurrency: int | None = None,
        circuit_breaker: CircuitBreakerPolicy | Mapping[str, Any] | bool | None = None,
        cache_ttl: float | None = None,
        tags: Iterable[str] = (),
        read_only: bool = False,
        destructive: bool | None = None,
        open_world: bool | None = None,
        blocking: bool = True,
        output_schema: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        source: str | None = None,
        examples: Iterable[Mapping[str, Any]] = (),
        **unknown: NoReturn,
    ) -> Tool:
        """Check everything about a definition and build the tool, or raise :class:`ToolDefinitionError`.

        A keyword not listed here is a ``ToolDefinitionError`` naming it and the closest valid one
        (type checkers refuse it already).
        """
        if unknown:
            raise _unknown_keywords(unknown, _KEYWORDS)
        if not callable(fn):
            raise ToolDefinitionError(f"A tool must be callable, got {type(fn).__name__}: {fn!r}.")
        tool_name = name if name is not None else getattr(unpartial(fn)[0], "__name__", None)
        if not isinstance(tool_name, str) or not NAME_PATTERN.match(tool_name):
            fix = "" if name is not None else f" Pass name=... to name this tool (its function's name is {tool_name!r})."
            raise ToolDefinitionError(
                f"Invalid tool name {tool_name!r}: use 1-64 letters, digits, '_' or '-' (the names OpenAI and Anthropic accept; "
                f"Gemini also needs a letter or '_' first, so its export renames the others).{fix}",
                tool=tool_name if isinstance(tool_name, str) else None,
            )
        kind = _yields(fn)
        if kind:
            raise ToolDefinitionError(
                f"Tool '{tool_name}': {kind} function is not a tool: calling it runs none of its body, and the "
                "call would give the generator object itself; return a list (or one value) instead.",
                tool=tool_name,
            )
        if not isinstance(tags, (str, list, tuple, set, frozenset)) and not isinstance(tags, Iterable):  # (ABC last: slow)
            raise ToolDefinitionError(
                f"Tool '{tool_name}': tags must be a string or an iterable of strings, got {tags!r}.", tool=tool_name
            )
        tag_set = frozenset((tags,) if isinstance(tags, str) else tags)  # a string is one tag, not its letters
        if not all(isinstance(tag, str) for tag in tag_set):
            raise ToolDefinitionError(
                f"Tool '{tool_name}': tags must be strings, got {sorted(map(repr, tag_set))}.", tool=tool_name
            )
        sig = analyse(fn, tool=tool_name, infer=parameters is None, infer_output=output_schema is None)
        if parameters is None:
            schema = check_schema(sig.schema, tool=tool_name) if sig.needs_check else sig.schema
        else:
            schema = check_schema(parameters, tool=tool_name, defaults=True)
            check_against_signature(schema, sig, tool=tool_name)
        if output_schema is None:
            output, output_wrapped = sig.output_schema, sig.output_wrapped
        else:
            output, output_wrapped = wrap_output(
                check_schema(output_schema, tool=tool_name, what="output_schema", object_root=False)
            )
        for what, flag, undeclared in (
            ("idempotent", idempotent, False),
            ("read_only", read_only, False),
            ("blocking", blocking, False),
            ("destructive", destructive, True),
            ("open_world", open_world, True),
        ):
            if not (isinstance(flag, bool) or (undeclared and flag is None)):  # "false" would be true
                either = "True or False, or None (undeclared)" if undeclared else "True or False"
                raise ToolDefinitionError(f"Tool '{tool_name}': {what} must be {either}, got {flag!r}.", tool=tool_name)
        for what, text in (("description", description), ("source", source)):
            if text is not None and not isinstance(text, str):
                raise ToolDefinitionError(f"Tool '{tool_name}': {what} must be a string, got {text!r}.", tool=tool_name)
        if options is not None and not isinstance(options, Mapping):
            raise ToolDefinitionError(f"Tool '{tool_name}': options must be a mapping, got {options!r}.", tool=tool_name)
        if options:
            _check_option_names(tool_name, options)
        for what, seconds in (("timeout", timeout), ("total_timeout", total_timeout), ("cache_ttl", cache_ttl)):
            if seconds is not None:  # NaN and an int past a float's range too; math.inf (as None): no limit
                _positive(seconds, what, tool_name, finite=True, infinite=True, unit=" of seconds")
        if timeout_mode not in (None, "thread", "process", "none"):
            raise ToolDefinitionError(
                f"Tool '{tool_name}': timeout_mode must be 'thread', 'process' or 'none', got {timeout_mode!r}.", tool=tool_name
            )
        if max_concurrency is not None and (
            isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1
        ):
            raise ToolDefinitionError(
                f"Tool '{tool_name}': max_concurrency must be an integer >= 1, got {max_concurrency!r}.", tool=tool_name
            )
        if cache_ttl is not None and not (idempotent or read_only):
            raise ToolDefinitionError(f"Tool '{tool_name}': cache_ttl needs an idempotent or read-only tool.", tool=tool_name)
        if read_only and destructive:
            raise ToolDefinitionError(f"Tool '{tool_name}': a read-only tool cannot be destructive.", tool=tool_name)
        if type(examples) not in (list, tuple) and (not isinstance(examples, Iterable) or isinstance(examples, (str, Mapping))):
            raise ToolDefinitionError(
                f"Tool '{tool_name}': examples must be a list of mappings with an 'arguments' object, got {examples!r}.",
                tool=tool_name,
            )
        examples = tuple(examples)
        for example in examples:
            if not isinstance(example, Mapping) or not isinstance(example.get("arguments"), Mapping):
                raise ToolDefinitionError(
                    f"Tool '{tool_name}': each example must be a mapping with an 'arguments' object, got {example!r}.",
                    tool=tool_name,
                )
        _refuse_surrogates(tool_name, schema, output)
        if description is None and not sig.description:
            log_event(
                logging.INFO,
                "tool has no description",
                tool=tool_name,
                hint="the model chooses tools by their description: give the function a docstring, or description=...",
            )
        # A lone surrogate ("\ud800", from text decoded with errors="surrogateescape") in the words the model
        # reads becomes U+FFFD here, once, so every output (describe(), exports, adapters) encodes them.
        kept = dict(options or {})
        if isinstance(kept.get("title"), str):
            kept["title"] = _utf8(kept["title"])
        return cls(
            name=tool_name,
            fn=fn,
            description=_utf8(description if description is not None else sig.description),
            parameters=schema,
            rate_limit=None if rate_limit is None else RateLimit.parse(rate_limit, tool=tool_name),
            timeout=timeout,
            idempotent=idempotent,
            retry=None if retry is None or retry is False else RetryPolicy.parse(retry, tool=tool_name),
            timeout_mode=timeout_mode,
            total_timeout=total_timeout,
            max_concurrency=max_concurrency,
            circuit_breaker=None
            if circuit_breaker is None or circuit_breaker is False
            else CircuitBreakerPolicy.parse(circuit_breaker, tool=tool_name),
            cache_ttl=cache_ttl,
            tags=tag_set,
            read_only=read_only,
            destructive=destructive,
            open_world=open_world,
            blocking=blocking,
            output_schema=output,
            output_wrapped=output_wrapped,
            options=kept,
            examples=examples,
            source=source,
            is_async=_is_async(fn),
            accepted=sig.accepted if parameters is None else frozenset(schema.get("properties") or ()) | sig.accepted,
            required=sig.required,
            accepts_any=sig.accepts_any,
            call_param=sig.call_param,
            converters=sig.converters,
            declined=frozenset(
                what for what, given in (("retry", retry), ("circuit_breaker", circuit_breaker)) if given is False
            ),
        )

    def definition(self) -> dict[str, Any]:
        """The keywords of :meth:`create` that define this tool again from :attr:`fn`: ``Tool.create(tool.fn,
        **{**tool.definition(), "name": "alias"})`` is this tool under another name, with every setting kept
        (the schemas as given; a declined policy as ``False``)."""
        output = self.output_schema
        if output is not None and self.output_wrapped:  # given back as the result's own schema: create wraps it again
            output = {**output["properties"]["result"], **({"$defs": output["$defs"]} if "$defs" in output else {})}
        return {
            "name": self.name,
            "description": self.description,
            "parameters": copy.deepcopy(self.parameters),
            "rate_limit": self.rate_limit,
            "timeout": self.timeout,
            "idempotent": self.idempotent,
            "retry": False if "retry" in self.declined else self.retry,
            "timeout_mode": self.timeout_mode,
            "total_timeout": self.total_timeout,
            "max_concurrency": self.max_concurrency,
            "circuit_breaker": False if "circuit_breaker" in self.declined else self.circuit_breaker,
            "cache_ttl": self.cache_ttl,
            "tags": self.tags,
            "read_only": self.read_only,
            "destructive": self.destructive,
            "open_world": self.open_world,
            "blocking": self.blocking,
            "output_schema": copy.deepcopy(output),
            "options": dict(self.options),
            "source": self.source,
            "examples": self.examples,
        }

    def describe(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}``: what the model sees of the tool, and nothing else."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class ToolFunction(Protocol[P, R]):
    """What ``@defineTool`` returns: the original function, plus ``.tool`` and ``.fn``."""

    tool: Tool
    fn: Callable[P, R]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT_REGISTRY"


DEFAULT_REGISTRY: Any = _Default()


@overload
def defineTool(fn: Callable[P, R], /) -> ToolFunction[P, R]: ...


@overload
def defineTool(
    fn: None = None,
    /,
    *,
    name: str | None = ...,
    description: str | None = ...,
    parameters: Mapping[str, Any] | None = ...,
    rate_limit: RateLimit | Mapping[str, Any] | None = ...,
    timeout: float | None = ...,
    idempotent: bool = ...,
    retry: RetryPolicy | Mapping[str, Any] | int | bool | None = ...,
    timeout_mode: str | None = ...,
    total_timeout: float | None = ...,
    max_concurrency: int | None = ...,
    circuit_breaker: CircuitBreakerPolicy | Mapping[str, Any] | bool | None = ...,
    cache_ttl: float | None = ...,
    tags: Iterable[str] = ...,
    read_only: bool = ...,
    destructive: bool | None = ...,
    open_world: bool | None = ...,
    blocking: bool = ...,
    output_schema: Mapping[str, Any] | None = ...,
    options: Mapping[str, Any] | None = ...,
    examples: Iterable[Mapping[str, Any]] = ...,
    registry: ToolRegistry | None = ...,
    replace: bool = ...,
) -> Callable[[Callable[P, R]], ToolFunction[P, R]]: ...


def defineTool(  # noqa: N802 - the seed's name
    fn: Callable[..., Any] | None = None,
    /,
    *,
    registry: ToolRegistry | None = DEFAULT_REGISTRY,
    replace: bool = False,
    **definition: Any,
) -> Any:
    """Turn a function into a tool and register it.

    Use bare (``@defineTool``) or with options (``@defineTool(name=..., parameters=...,
    rate_limit={"rate": 5, "burst": 10}, timeout=10, idempotent=True)``). The tool goes into
    the default registry, into ``registry=`` if given, or nowhere with ``registry=None`` (what
    tool packages do: their entry point hands the tools to whichever registry loads them).

    The decorated function still behaves like the original when called directly; the tool
    is at ``.tool`` and the raw function at ``.fn``.
    """

    if not _KEYWORDS.issuperset(definition):
        raise _unknown_keywords({k: v for k, v in definition.items() if k not in _KEYWORDS}, _KEYWORDS | {"registry", "replace"})

    def decorate(func: Callable[..., Any]) -> Any:
        tool = Tool.create(func, **definition)
        wrapper: Any = _wrap(func)
        if isinstance(func, type):
            # A class stays itself (instances, subclasses, isinstance), with .tool and .fn set on it; an
            # attribute by either name (other than a decorated base class's) would be hidden, so that is refused.
            base_tool = isinstance(inspect.getattr_static(func, "tool", None), Tool)
            taken = [attr for attr in ("tool", "fn") if attr in vars(func) or (hasattr(func, attr) and not base_tool)]
            if taken:
                raise ToolDefinitionError(
                    f"Tool '{tool.name}': @defineTool sets .tool and .fn on the class {func.__qualname__}, which has "
                    f"{' and '.join(repr(a) for a in taken)} already; register it with registry.add({func.__name__}) instead.",
                    tool=tool.name,
                )
            try:
                func.tool = tool  # type: ignore[attr-defined]
                func.fn = func  # type: ignore[attr-defined]
                wrapper = func
            except (AttributeError, TypeError):  # a built-in class: a wrapper function, as before
                pass
        if wrapper is not func:
            wrapper.tool = tool
            wrapper.fn = func
        if isinstance(func, staticmethod):  # still a static method of its class (no self from an instance)
            wrapper = staticmethod(wrapper)
            wrapper.tool = tool
            wrapper.fn = func
        target = registry
        if target is DEFAULT_REGISTRY:
            from ._registry import ToolRegistry

            target = ToolRegistry.default()
        if target is not None:
            target.add(tool, replace=replace)
        return wrapper

    if fn is not None:
        return decorate(fn)
    return decorate


define_tool = defineTool

#: The keywords of :meth:`Tool.create` (and so of ``defineTool`` and ``registry.add``, with theirs).
_KEYWORDS = frozenset(
    name for name, p in inspect.signature(Tool.create).parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY
)
#: Options a standard plugin reads from ``options={...}``, and that plugin.
PLUGIN_OPTIONS: Mapping[str, str] = {
    "requires_approval": "approval",
    "max_calls": "budget",
    "max_output": "output_limit",
    "memory_limit": "timeout",
}
#: Every option harness-one itself reads: the standard plugins' (``cache``: the cache plugin's opt-out) and
#: ``title`` (the exports'). A name this alike to one of them (``difflib``'s ratio, case ignored) and not one
#: of them is a misspelling.
KNOWN_OPTIONS = frozenset({*PLUGIN_OPTIONS, "cache", "title"})
_MISSPELT = 0.85
_EXTENDED = tuple(f"{name}_" for name in sorted(KNOWN_OPTIONS))
#: The policies of a definition (attributes of a :class:`Tool`, None when not set) that a standard
#: plugin enforces, and that plugin.
POLICY_PLUGINS: Mapping[str, str] = {
    "rate_limit": "rate_limit",
    "timeout": "timeout",
    "total_timeout": "timeout",
    "retry": "retry",
    "max_concurrency": "concurrency",
    "circuit_breaker": "circuit_breaker",
    "cache_ttl": "cache",
}


def _unknown_keywords(unknown: Mapping[str, Any], valid: Iterable[str]) -> ToolDefinitionError:
    """The error for definition keywords no tool takes: the closest valid one, or where a plugin option goes."""
    from ._suggest import closest

    parts = []
    for keyword, value in unknown.items():
        plugin = PLUGIN_OPTIONS.get(keyword)
        if plugin is not None:
            parts.append(
                f"'{keyword}' is an option of the {plugin} plugin, not a keyword: pass options={{{keyword!r}: {repr(value)[:60]}}}."
            )
            continue
        close = closest(keyword, valid)
        parts.append(f"Unknown keyword '{keyword}'" + (f"; did you mean '{close}'?" if close else "."))
    names = ", ".join(sorted(valid))
    return ToolDefinitionError(
        " ".join(parts) + f" A tool definition takes: {names}; plugins read their own settings from options={{...}}."
    )


def _extends(key: str) -> bool:
    """Whether option ``key`` extends a standard name after ``_`` with a letter or digit (``max_calls_per_user``,
    ``Memory_Limit_MB``: a plugin's own, letter case ignored as in the misspelling check)."""
    folded = key.lower()
    return any(folded.startswith(prefix) and folded[len(prefix) : len(prefix) + 1].isalnum() for prefix in _EXTENDED)


def _check_option_names(tool: str, options: Mapping[str, Any]) -> None:
    """Refuse an option name no plugin would read as meant: a keyword of the definition (``destructive``,
    ``timeout``: the plugins read the tool's own, so ``options={"destructive": True}`` would run without the
    approval it asked for), or a misspelling of one harness-one reads (``requires_aproval``, ``max_call``)."""
    from ._suggest import closest

    for key in options:
        if type(key) is not str:
            continue
        keyword = _as_keyword(key)
        if keyword in _KEYWORDS:
            raise ToolDefinitionError(
                f"Tool '{tool}': {key!r} is a keyword of the tool definition, not an option: pass "
                f"{keyword}={repr(options[key])[:60]}, which harness-one reads; in options it would be ignored.",
                tool=tool,
            )
        if key not in KNOWN_OPTIONS and not _extends(key):
            close = closest(key, KNOWN_OPTIONS, cutoff=_MISSPELT)
            if close is not None:
                raise ToolDefinitionError(
                    f"Tool '{tool}': unknown option {key!r}; did you mean {close!r}? An option this alike to one harness-one "
                    f"reads is taken for a misspelling (a plugin of your own needs a name less alike).",
                    tool=tool,
                )


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _as_keyword(key: str) -> str:
    """``key`` spelt as a definition keyword would be: camelCase and ``-`` as ``_``, lower case, without MCP's
    ``Hint`` (``readOnly``, ``read-only``, ``readOnlyHint``: ``read_only``)."""
    folded = _CAMEL.sub("_", key).replace("-", "_").lower()
    return folded.removesuffix("_hint")


def _utf8(text: str) -> str:
    """``text`` made UTF-8 safe (:func:`~harness_one._render.safe_text`), its module imported only for text that
    is not ASCII (``import harness_one.tools`` stays without it)."""
    if text.isascii():
        return text
    from ._render import safe_text

    return safe_text(text)


def _refuse_surrogates(tool: str, parameters: Any, output: Any) -> None:
    """Refuse a lone surrogate (``"\\ud800"``) in a schema, key or string: no UTF-8 text can hold one, so no
    validation backend compiles it and no request listing the tool encodes. (A description or title
    may hold one: :meth:`Tool.create` stores it as U+FFFD.)"""
    for what, value in (("parameters", parameters), ("output_schema", output)):
        where = find_surrogate(value)
        if where is not None:
            raise ToolDefinitionError(
                f"Tool '{tool}': {what}{where} holds a lone surrogate (a '\\ud800'-like character no UTF-8 text "
                "can carry); decode the text it came from with errors='replace'.",
                tool=tool,
            )


def _is_async(fn: Callable[..., Any], depth: int = 0) -> bool:
    """Whether calling ``fn`` gives a coroutine to await: an ``async def`` function or method, also
    within a ``functools.partial``, under a decorator that keeps ``__wrapped__`` (``functools.wraps``),
    or as the ``__call__`` of a callable object. A class is never async (calling it builds an instance)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    if isinstance(fn, type) or depth > 8:
        return False
    fn = wrapped_function(fn)  # a staticmethod, an lru_cache: their function's kind
    if inspect.iscoroutinefunction(fn):
        return True
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        fn = type(fn).__call__  # a callable object: its class's method
        if not inspect.isfunction(fn):
            return False
        if inspect.iscoroutinefunction(fn):
            return True
    try:
        target = inspect.unwrap(fn)
    except ValueError:  # a cycle of __wrapped__
        return False
    return target is not fn and _is_async(target, depth + 1)


def _yields(fn: Callable[..., Any]) -> str:
    """``"a generator"`` or ``"an async generator"`` when ``fn`` is one of those functions (else ``""``), also within a
    ``functools.partial``, a ``staticmethod``, an ``lru_cache`` (wrapper objects), or as the ``__call__`` of a callable
    object (a class never: calling it builds an instance). A ``def`` wrapper is the function called, whatever it wraps
    (``@functools.wraps`` around a generator, returning ``list(...)``, is a tool)."""
    target: Any = unpartial(fn)[0]
    for _ in range(8):  # through wrapper objects only
        if inspect.isfunction(target) or inspect.ismethod(target) or isinstance(target, type):
            break
        inner = getattr(target, "__func__", None) or getattr(target, "__wrapped__", None)
        if inner is None:
            break
        target = inner
    if isinstance(target, type):
        return ""
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = type(target).__call__  # a callable object: its class's method
    if inspect.isasyncgenfunction(target):
        return "an async generator"
    return "a generator" if inspect.isgeneratorfunction(target) else ""


def _wrap(func: Callable[..., Any]) -> Callable[..., Any]:
    if _is_async(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            return await func(*args, **kwargs)

        return async_wrapper

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper
