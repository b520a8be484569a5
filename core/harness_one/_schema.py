"""JSON Schema from Python signatures, and definition-time checks of given schemas."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints
from urllib.parse import urldefrag, urljoin

from jsonschema import exceptions as _js_exceptions
from jsonschema import validators as _js_validators
from jsonschema_specifications import REGISTRY as _KNOWN_SCHEMAS

from ._docstrings import parse_docstring
from ._errors import ToolDefinitionError

__all__ = ["Signature", "analyse", "check_schema", "json_type", "schema_for_type"]

JSONSchema = dict[str, Any]
Converter = Callable[[Any], Any]

_NoneType = type(None)
_SCALARS: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class Signature:
    """What harness-one needs to know about a tool function's parameters."""

    schema: JSONSchema
    description: str
    accepted: frozenset[str]
    required: frozenset[str]
    accepts_any: bool
    call_param: str | None
    converters: Mapping[str, Converter]


def _call_type() -> type:
    from ._call import Call  # deferred: _call imports this module's users

    return Call


def analyse(fn: Callable[..., Any], *, tool: str) -> Signature:
    """Inspect ``fn``: inferred schema, parameter names, injected call parameter, converters."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"Tool '{tool}': cannot read the signature of {fn!r}: {exc}", tool=tool) from exc
    hints = _hints(fn, sig, tool)
    doc = parse_docstring(inspect.getdoc(fn))
    call_type = _call_type()
    properties: dict[str, JSONSchema] = {}
    required: list[str] = []
    converters: dict[str, Converter] = {}
    accepts_any = False
    call_param: str | None = None
    for name, param in sig.parameters.items():
        hint = hints.get(name, Any)
        if hint is call_type:
            call_param = name
            continue
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            accepts_any = True
            continue
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"Tool '{tool}': parameter '{name}' is positional-only; tool arguments are passed by name.",
                tool=tool,
            )
        try:
            prop = schema_for_type(hint)
        except TypeError as exc:
            raise ToolDefinitionError(f"Tool '{tool}': parameter '{name}': {exc}", tool=tool) from exc
        if name in doc.params and doc.params[name] and "description" not in prop:
            prop["description"] = doc.params[name]
        if param.default is inspect.Parameter.empty:
            required.append(name)
        else:
            default = _json_default(param.default)
            if default is not _NO_DEFAULT:
                prop["default"] = default
        properties[name] = prop
        conv = converter_for(hint)
        if conv is not None:
            converters[name] = conv
    schema: JSONSchema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if not accepts_any:
        schema["additionalProperties"] = False
    return Signature(
        schema=schema,
        description=doc.description,
        accepted=frozenset(properties),
        required=frozenset(required),
        accepts_any=accepts_any,
        call_param=call_param,
        converters=converters,
    )


_NO_DEFAULT = object()


def _hints(fn: Callable[..., Any], sig: inspect.Signature, tool: str) -> dict[str, Any]:
    """Resolved annotations of ``fn`` (a function, method or callable object)."""
    target: Any = fn if inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, type) else type(fn).__call__
    try:
        return get_type_hints(target, include_extras=True)
    except Exception:
        pass
    namespace = getattr(inspect.unwrap(target), "__globals__", {})
    hints: dict[str, Any] = {}
    for name, param in sig.parameters.items():
        annotation = param.annotation
        if annotation is inspect.Parameter.empty:
            continue
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, dict(namespace))
            except Exception as exc:
                raise ToolDefinitionError(
                    f"Tool '{tool}': cannot resolve the annotation {param.annotation!r} of parameter '{name}': {exc}", tool=tool
                ) from exc
        hints[name] = annotation
    return hints


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)) and all(v is None or isinstance(v, (str, int, float, bool)) for v in value):
        return list(value)
    return _NO_DEFAULT


def schema_for_type(tp: Any) -> JSONSchema:
    """The JSON Schema for a Python annotation (see docs/writing-tools.md for the mapping)."""
    if tp is Any or tp is inspect.Parameter.empty or tp is object:
        return {}
    if tp is None or tp is _NoneType:
        return {"type": "null"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([m.value for m in tp])
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        schema = schema_for_type(args[0])
        text = next((a for a in args[1:] if isinstance(a, str)), None)
        if text:
            schema["description"] = text
        return schema
    if origin is Literal:
        return _enum_schema(list(args))
    if origin is Union or origin is types.UnionType:
        return _union_schema(args)
    if origin in (list, Sequence, set, frozenset, typing.AbstractSet) or tp in (list, set):
        array: JSONSchema = {"type": "array"}
        if args:
            array["items"] = schema_for_type(args[0])
        if origin in (set, frozenset) or tp is set:
            array["uniqueItems"] = True
        return array
    if origin is tuple or tp is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_for_type(args[0])}
        if not args:
            return {"type": "array"}
        return {
            "type": "array",
            "prefixItems": [schema_for_type(a) for a in args],
            "items": False,
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin in (dict, Mapping) or tp is dict:
        obj: JSONSchema = {"type": "object"}
        if args:
            if args[0] is not str:
                raise TypeError(f"dict keys must be str for JSON, not {args[0]!r}")
            obj["additionalProperties"] = schema_for_type(args[1])
        return obj
    if typing.is_typeddict(tp):
        return _typeddict_schema(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_schema(tp)
    raise TypeError(f"cannot express {tp!r} in JSON Schema; give `parameters` explicitly")


def _enum_schema(values: list[Any]) -> JSONSchema:
    schema: JSONSchema = {"enum": values}
    kinds = {json_type(v) for v in values}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), "enum": values}
    return schema


def json_type(value: Any) -> str:
    """The JSON Schema type name of a Python value (``integer``, ``array``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _union_schema(args: tuple[Any, ...]) -> JSONSchema:
    members = [schema_for_type(a) for a in args]
    simple = all(set(m) == {"type"} and isinstance(m["type"], str) for m in members)
    if simple:
        return {"type": [m["type"] for m in members]}
    return {"anyOf": members}


def _typeddict_schema(tp: Any) -> JSONSchema:
    hints = get_type_hints(tp, include_extras=True)
    props = {k: schema_for_type(v) for k, v in hints.items()}
    required = sorted(getattr(tp, "__required_keys__", set(hints)))
    schema: JSONSchema = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def _dataclass_schema(tp: type) -> JSONSchema:
    hints = get_type_hints(tp, include_extras=True)
    props: dict[str, JSONSchema] = {}
    required: list[str] = []
    doc = parse_docstring(tp.__doc__)
    for f in dataclasses.fields(tp):
        prop = schema_for_type(hints.get(f.name, Any))
        if doc.params.get(f.name):
            prop["description"] = doc.params[f.name]
        if f.default is not dataclasses.MISSING:
            default = _json_default(f.default)
            if default is not _NO_DEFAULT:
                prop["default"] = default
        elif f.default_factory is dataclasses.MISSING:
            required.append(f.name)
        props[f.name] = prop
    schema: JSONSchema = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def converter_for(tp: Any) -> Converter | None:
    """A function turning a JSON value into ``tp`` (Enum, dataclass, lists of them), or None."""
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        return converter_for(args[0])
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        member_type: type[enum.Enum] = tp

        def to_member(v: Any) -> Any:
            return v if isinstance(v, member_type) else member_type(v)

        return to_member
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = get_type_hints(tp, include_extras=True)
        found = {f.name: converter_for(hints.get(f.name, Any)) for f in dataclasses.fields(tp)}
        inner = {k: c for k, c in found.items() if c is not None}
        cls: type = tp

        def build(v: Any) -> Any:
            if not isinstance(v, dict):
                return v
            return cls(**{k: (inner[k](x) if k in inner else x) for k, x in v.items()})

        return build
    if origin is Union or origin is types.UnionType:
        members = [a for a in args if a is not _NoneType]
        inner_conv = converter_for(members[0]) if len(members) == 1 else None
        if inner_conv is None:
            return None
        optional: Converter = inner_conv
        return lambda v: None if v is None else optional(v)
    if origin in (list, Sequence) and args:
        item_conv = converter_for(args[0])
        if item_conv is not None:
            each: Converter = item_conv
            return lambda v: [each(x) for x in v] if isinstance(v, list) else v
    return None


def check_schema(schema: Any, *, tool: str) -> None:
    """Refuse a schema that is not valid JSON Schema, is not an object schema, or refers outside itself."""
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(
            f"Tool '{tool}': parameters must be a JSON Schema object, not {type(schema).__name__}.", tool=tool
        )
    cls = _js_validators.validator_for(schema, default=_js_validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except _js_exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise ToolDefinitionError(
            f"Tool '{tool}': parameters are not valid JSON Schema: at {where}, keyword '{exc.validator}': {exc.message}",
            tool=tool,
        ) from exc
    if schema.get("type") != "object":
        raise ToolDefinitionError(
            f'Tool \'{tool}\': parameters must describe a JSON object ("type": "object" at the root); '
            f"got type {schema.get('type')!r}.",
            tool=tool,
        )
    remote = find_remote_refs(schema)
    if remote:
        raise ToolDefinitionError(
            f"Tool '{tool}': parameters refer to remote schemas, which are never fetched: "
            + ", ".join(remote)
            + ". Inline them under $defs and refer to them with '#/$defs/...'.",
            tool=tool,
        )


def find_remote_refs(schema: Any) -> list[str]:
    """Every ``$ref``/``$dynamicRef``/``$schema`` that points outside the schema and the bundled metaschemas."""
    local: set[str] = {""}
    refs: list[tuple[str, str]] = []
    for base, node in _walk(schema, ""):
        for key in ("$ref", "$dynamicRef", "$recursiveRef", "$schema"):
            value = node.get(key)
            if isinstance(value, str):
                refs.append((base, value))
        if isinstance(node.get("$id"), str):
            local.add(urldefrag(urljoin(base, node["$id"]))[0])
        if isinstance(node.get("id"), str):  # draft 4-style ids
            local.add(urldefrag(urljoin(base, node["id"]))[0])
    remote = []
    for base, ref in refs:
        target = urldefrag(urljoin(base, ref))[0]
        if target in local or target.rstrip("#") in local:
            continue
        try:
            _KNOWN_SCHEMAS.contents(target)
            continue
        except Exception:
            pass
        remote.append(ref)
    return sorted(set(remote))


def _walk(node: Any, base: str) -> Iterator[tuple[str, dict[str, Any]]]:
    stack: list[tuple[str, Any]] = [(base, node)]
    while stack:
        base, node = stack.pop()
        if isinstance(node, dict):
            ident = node.get("$id")
            if isinstance(ident, str):
                base = urldefrag(urljoin(base, ident))[0]
            yield base, node
            for key, value in node.items():
                if key in ("enum", "const", "examples", "default"):
                    continue
                stack.append((base, value))
        elif isinstance(node, list):
            stack.extend((base, v) for v in node)


def check_against_signature(schema: Mapping[str, Any], sig: Signature, *, tool: str) -> None:
    """A given schema and the function must agree on what is required."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    problems = []
    if not sig.accepts_any:
        for name in sorted(required - sig.accepted):
            problems.append(
                f"the schema requires property '{name}' but the function has no parameter '{name}' "
                f"(parameters: {', '.join(sorted(sig.accepted)) or 'none'})"
            )
    for name in sorted(sig.required - set(props)):
        problems.append(f"function parameter '{name}' has no default but is not a property of the schema")
    if problems:
        raise ToolDefinitionError(f"Tool '{tool}': schema and function disagree: " + "; ".join(problems) + ".", tool=tool)
