"""The ``validation`` plugin: JSON Schema checks compiled once per tool, errors a model can act on."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

import referencing
import referencing.exceptions
import regex
from jsonschema import validators as _validators
from jsonschema.exceptions import ValidationError

from harness_one import ArgumentLimits, ArgumentProblem, Call, Tool, ToolArgumentError, ToolRegistry, hookimpl
from harness_one._schema import json_type

from .formats import strict_format_checker

_rs: Any
try:  # the `fast` extra
    import jsonschema_rs as _rs
except ImportError:  # pragma: no cover - exercised when the extra is absent
    _rs = None

__all__ = ["Backend", "CompiledSchema", "ValidationPlugin", "check_limits", "compile_schema"]

Backend = Literal["auto", "python", "rust"]
FORMATS = ("date-time", "date", "time", "email", "uri", "uuid", "ipv4", "ipv6", "hostname")


def _refuse_remote(uri: str) -> Any:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


_NO_REMOTE = referencing.Registry(retrieve=_refuse_remote)  # type: ignore[call-arg]


def _refuse_remote_rs(uri: str) -> Any:
    raise ValueError(f"remote reference {uri} is never fetched")


def rust_available() -> bool:
    """Whether the ``jsonschema-rs`` backend (extra ``fast``) is installed."""
    return _rs is not None


@functools.lru_cache(maxsize=4096)
def _regex(pattern: str) -> Any:
    return regex.compile(pattern)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _regex(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


@functools.cache
def _python_validator(base: Any) -> Any:
    """``base`` with ECMA-262-style patterns (``\\p{Letter}`` and friends) via the ``regex`` module."""
    return _validators.extend(base, {"pattern": _pattern, "patternProperties": _pattern_properties})


@functools.cache
def _format_checker(base: Any) -> Any:
    return strict_format_checker(base.FORMAT_CHECKER)


class CompiledSchema:
    """A schema compiled once: a fast verdict, a full error list, and the defaults to fill."""

    __slots__ = ("_defaults", "_fast", "_py", "backend", "schema")

    def __init__(self, schema: Mapping[str, Any] | bool, backend: Backend = "auto", *, formats: bool = True) -> None:
        self.schema = schema
        base = _validators.validator_for(
            schema if isinstance(schema, bool) else dict(schema), default=_validators.Draft202012Validator
        )
        checker = _format_checker(base) if formats else None
        self._py = _python_validator(base)(schema, format_checker=checker, registry=_NO_REMOTE)
        use_rust = backend == "rust" or (backend == "auto" and _rs is not None)
        if backend == "rust" and _rs is None:
            raise RuntimeError("backend='rust' needs the jsonschema-rs package (pip install 'harness-one[fast]')")
        self.backend = "rust" if use_rust else "python"
        if use_rust:
            assert _rs is not None
            self._fast = _rs.validator_for(schema, validate_formats=formats, retriever=_refuse_remote_rs).is_valid
        else:
            self._fast = self._py.is_valid
        self._defaults = _default_plan(schema)

    def is_valid(self, instance: Any) -> bool:
        return bool(self._fast(instance))

    def problems(self, instance: Any) -> list[ArgumentProblem]:
        """Every error, each with its JSON path, keyword, what was expected and what came."""
        found: list[ArgumentProblem] = []
        for error in self._py.iter_errors(instance):
            found.extend(_describe(error))
        found.sort(key=lambda p: (p.path, p.keyword))
        if not found:  # the backends disagree: report the fast one's verdict rather than nothing
            found.append(ArgumentProblem("$", "arguments do not match the schema", "schema"))
        return found

    def fill_defaults(self, instance: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``instance`` with schema defaults for missing properties (the original is untouched)."""
        if not self._defaults:
            return instance
        return _fill(instance, self._defaults)


def compile_schema(schema: Mapping[str, Any] | bool, backend: Backend = "auto", *, formats: bool = True) -> CompiledSchema:
    """Compile ``schema`` for repeated validation (remote references are never fetched).

    ``formats`` asserts the ``format`` keyword (harness-one's default; the JSON Schema
    specification's default is annotation only).
    """
    return CompiledSchema(schema, backend, formats=formats)


# ---------------------------------------------------------------------------- defaults

_Plan = dict[str, tuple[Any, "dict[str, Any] | None"]]
_MISSING = object()


def _default_plan(schema: Any) -> _Plan | None:
    if not isinstance(schema, Mapping):
        return None
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return None
    plan: _Plan = {}
    for name, sub in props.items():
        if not isinstance(sub, Mapping):
            continue
        default = sub.get("default", _MISSING)
        nested = _default_plan(sub)
        if default is not _MISSING or nested:
            plan[name] = (default, nested)
    return plan or None


def _fill(instance: dict[str, Any], plan: _Plan) -> dict[str, Any]:
    out = instance
    for name, (default, nested) in plan.items():
        if name not in instance:
            if default is not _MISSING:
                if out is instance:
                    out = dict(instance)
                out[name] = copy.deepcopy(default)
        elif nested and type(instance[name]) is dict:
            filled = _fill(instance[name], nested)
            if filled is not instance[name]:
                if out is instance:
                    out = dict(instance)
                out[name] = filled
    return out


# ---------------------------------------------------------------------------- messages


def _show(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if str(part).isidentifier() else f"[{json.dumps(part)}]")
    return out


def _describe(error: ValidationError) -> list[ArgumentProblem]:
    kw = str(error.validator)
    expect: Any = error.validator_value
    got = error.instance
    path = _path(error.absolute_path)
    why = ""
    if any(p in ("then", "else") for p in error.relative_schema_path):
        why = " (required by an if/then rule of the schema)"
    if kw == "required":
        missing = [name for name in expect if isinstance(got, dict) and name not in got]
        return [
            ArgumentProblem(_path([*error.absolute_path, name]), f"required property is missing{why}", kw, "present", "missing")
            for name in missing
        ] or [ArgumentProblem(path, error.message + why, kw)]
    if kw == "additionalProperties" and isinstance(got, dict):
        known = set((error.schema.get("properties") or {}) if isinstance(error.schema, Mapping) else ())
        extras = [k for k in got if k not in known]
        allowed = ", ".join(sorted(known)) or "none"
        return [
            ArgumentProblem(
                _path([*error.absolute_path, k]),
                f"unexpected property; allowed properties: {allowed}",
                kw,
                "no such property",
                _show(k),
            )
            for k in extras
        ] or [ArgumentProblem(path, error.message, kw)]
    if kw == "dependentRequired" or (kw == "dependencies" and isinstance(got, dict)):
        problems = []
        for trigger, needed in (expect or {}).items():
            if trigger in got and isinstance(needed, list):
                for name in needed:
                    if name not in got:
                        problems.append(
                            ArgumentProblem(
                                _path([*error.absolute_path, name]),
                                f"required when '{trigger}' is present",
                                kw,
                                "present",
                                "missing",
                            )
                        )
        if problems:
            return problems
    return [ArgumentProblem(path, _message(kw, expect, got, error) + why, kw, _expected(kw, expect), _show(got))]


def _expected(kw: str, expect: Any) -> str:
    symbols = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if kw in symbols:
        return f"{symbols[kw]} {expect}"
    if kw == "type":
        return expect if isinstance(expect, str) else " or ".join(map(str, expect))
    if kw == "enum":
        return "one of " + _show(expect, 200)
    if kw in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"):
        return f"{kw} {expect}"
    return _show(expect, 120)


def _message(kw: str, expect: Any, got: Any, error: ValidationError) -> str:
    shown = _show(got)
    if kw == "type":
        return f"expected {_expected(kw, expect)}, got {json_type(got)} {shown}"
    if kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return f"expected a number {_expected(kw, expect)}, got {shown}"
    if kw == "enum":
        return f"expected {_expected(kw, expect)}, got {shown}"
    if kw == "const":
        return f"expected exactly {_show(expect)}, got {shown}"
    if kw == "minLength":
        return f"expected at least {expect} characters, got {len(got)}"
    if kw == "maxLength":
        return f"expected at most {expect} characters, got {len(got)}"
    if kw == "minItems":
        return f"expected at least {expect} items, got {len(got)}"
    if kw == "maxItems":
        return f"expected at most {expect} items, got {len(got)}"
    if kw == "pattern":
        return f"expected a string matching the pattern {expect!r}, got {shown}"
    if kw == "format":
        return f"expected a valid {expect}, got {shown}"
    if kw == "multipleOf":
        return f"expected a multiple of {expect}, got {shown}"
    if kw == "uniqueItems":
        return "expected all items to be unique"
    if kw in ("oneOf", "anyOf"):
        options = []
        for sub in sorted(error.context or [], key=lambda e: e.relative_schema_path[0] if e.relative_schema_path else 0):
            options.append(
                f"option {sub.relative_schema_path[0] + 1 if sub.relative_schema_path else '?'}: {_message(str(sub.validator), sub.validator_value, sub.instance, sub)}"
            )
        if kw == "oneOf" and not error.context:
            return f"matches more than one of the {len(expect)} alternatives; it must match exactly one"
        head = "must match exactly one of the alternatives" if kw == "oneOf" else "must match at least one of the alternatives"
        return head + ("; " + "; ".join(options[:6]) if options else "")
    if kw == "not":
        return f"must not match the schema {_show(expect)}"
    if kw == "dependentSchemas":
        return f"{error.message} (a dependent schema applies)"
    return str(error.message)


# ---------------------------------------------------------------------------- limits


def check_limits(args: Any, limits: ArgumentLimits) -> None:
    """Refuse arguments nested deeper than ``max_depth`` or larger than about ``max_bytes``.

    Iterative and cheap for flat arguments, so nothing downstream can hit a RecursionError.
    """
    size = 0
    max_depth = limits.max_depth
    stack: list[tuple[Any, int]] = [(args, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise ToolArgumentError(
                [
                    ArgumentProblem(
                        "$",
                        f"arguments are nested more than {max_depth} levels deep",
                        "limits",
                        f"depth <= {max_depth}",
                        f"depth > {max_depth}",
                    )
                ]
            )
        if type(node) is dict:
            values: Iterable[Any] = node.values()
            size += sum(len(k) for k in node) if len(node) < 64 else 8 * len(node)
        else:
            values = node
        for value in values:
            kind = type(value)
            if kind is str:
                size += len(value)
            elif kind is dict or kind is list:
                stack.append((value, depth + 1))
            else:
                size += 8
    if size > limits.max_bytes:
        raise ToolArgumentError(
            [
                ArgumentProblem(
                    "$",
                    f"arguments are about {size} bytes; the limit is {limits.max_bytes}",
                    "limits",
                    f"<= {limits.max_bytes} bytes",
                    f"~{size} bytes",
                )
            ]
        )


# ---------------------------------------------------------------------------- the plugin


class ValidationPlugin:
    """Validates every call's arguments against its tool's schema, then fills schema defaults.

    Args:
        backend: ``"auto"`` (jsonschema-rs when installed, else jsonschema), ``"python"`` or ``"rust"``.
            The rich error list always comes from jsonschema.
        formats: assert ``format`` (date-time, email, uri, uuid, ipv4/6, hostname, ...).
    """

    name = "validation"
    order = 80

    def __init__(self, backend: Backend = "auto", *, formats: bool = True) -> None:
        self.backend: Backend = backend
        self.formats = formats
        self._compiled: dict[Tool, CompiledSchema] = {}

    def compiled(self, tool: Tool) -> CompiledSchema:
        """The tool's compiled schema (compiled now if the tool predates this plugin)."""
        found = self._compiled.get(tool)
        if found is None:
            found = self._compiled[tool] = compile_schema(tool.parameters, self.backend, formats=self.formats)
        return found

    @hookimpl
    def harness_tool_added(self, tool: Tool) -> None:
        self._compiled[tool] = compile_schema(tool.parameters, self.backend, formats=self.formats)

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        self._compiled.pop(tool, None)

    @hookimpl(trylast=True)
    def harness_pre_validate(self, call: Call) -> None:
        args = call.arguments
        check_limits(args, call.registry.limits)
        compiled = self._compiled.get(call.tool) or self.compiled(call.tool)
        if not compiled._fast(args):
            raise ToolArgumentError(compiled.problems(args), tool=call.tool.name)
        if compiled._defaults:
            call.arguments = compiled.fill_defaults(args)

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        backends = {c.backend for c in self._compiled.values()}
        return {"backend": ", ".join(sorted(backends)) or self.backend, "compiled": len(self._compiled)}
