"""JSON Schema from Python annotations, argument converters, and definition-time checks of schemas.

Nothing here imports jsonschema, jsonschema-rs or pydantic until a schema is checked or a
pydantic type is seen, so importing harness-one stays cheap.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import inspect
import itertools
import json
import math
import operator
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from copy import deepcopy
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints
from urllib.parse import quote, unquote, urldefrag, urljoin

from ._docstrings import parse_docstring
from ._errors import ArgumentProblem, ToolArgumentError, ToolDefinitionError, ToolError, outside_text

__all__ = [
    "Converter",
    "Signature",
    "analyse",
    "check_against_signature",
    "check_schema",
    "ecma_classes",
    "find_remote_refs",
    "find_surrogate",
    "json_path",
    "json_pointer",
    "json_type",
    "path_step",
    "rust_pattern",
    "rust_schema",
    "schema_for_type",
    "schema_objects",
    "subschemas",
    "without_bad_defaults",
    "wrap_output",
]

JSONSchema = dict[str, Any]
#: Turns one validated JSON argument into the Python value the tool's annotation asks for.
Converter = Callable[[Any], Any]
_Conv = Callable[[Any, str], Any]  # (value, JSON path) -> converted value

_NoneType = type(None)
_SCALARS: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_DECIMAL_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
#: ``isoformat()`` of a naive datetime and time: RFC 3339 without the offset it requires.
_NAIVE_DATETIME = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?$"
_NAIVE_TIME = r"^[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?$"


def _aware_or_naive(form: str, naive: str) -> JSONSchema:
    """A returned datetime or time: RFC 3339 when it has an offset, else its ``isoformat()`` without one."""
    return {"anyOf": [{"type": "string", "format": form}, {"type": "string", "pattern": naive}]}


@dataclass(frozen=True)
class Signature:
    """What harness-one needs to know about a tool function: parameters, conversions, result."""

    schema: JSONSchema
    description: str
    accepted: frozenset[str]
    required: frozenset[str]
    accepts_any: bool
    call_param: str | None
    converters: Mapping[str, Converter]
    output_schema: JSONSchema | None = None
    output_wrapped: bool = False
    #: The inferred schema holds text from the user (patterns, pydantic schemas) and must be checked.
    needs_check: bool = False
    #: The names the function binds itself (a partial's arguments, a method's ``self``), each with what binds it.
    bound: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _call_type() -> type:
    from ._call import Call  # deferred: _call imports this module's users

    return Call


def unpartial(fn: Callable[..., Any]) -> tuple[Callable[..., Any], frozenset[str]]:
    """The function a ``functools.partial`` wraps (nested ones too), and the names it binds by keyword."""
    bound: frozenset[str] = frozenset()
    while isinstance(fn, functools.partial):
        bound |= fn.keywords.keys()
        fn = fn.func
    return fn, bound


def analyse(fn: Callable[..., Any], *, tool: str, infer: bool = True, infer_output: bool = True) -> Signature:
    """Inspect ``fn``: parameter names, the injected call parameter, converters and, with ``infer``, the schemas.

    Without ``infer`` (the tool gives its own ``parameters``) annotations that cannot be
    expressed are no error; they just get no converter.
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"Tool '{tool}': cannot read the signature of {fn!r}: {exc}", tool=tool) from exc
    # A partial's bound keywords are the application's, not the model's to set (or see); its
    # types and words are the wrapped function's.
    base, bound = unpartial(fn)
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    if bound and takes_kwargs:
        raise ToolDefinitionError(
            f"Tool '{tool}': a partial that binds {sorted(bound)} over a function taking **kwargs would let a model "
            "override them (a **kwargs tool takes any name); bind them in a wrapper function instead.",
            tool=tool,
        )
    first = next(iter(sig.parameters.values()), None)
    if first is not None and first.name in ("self", "cls") and first.name not in bound and _in_class_body(base):
        raise ToolDefinitionError(_method_advice(base, first.name, tool), tool=tool)
    hints = _hints(base, sig, tool)
    doc = parse_docstring(inspect.getdoc(base))
    call_type = _call_type()
    inference = _Inference(tool)
    properties: dict[str, JSONSchema] = {}
    required: list[str] = []
    converters: dict[str, Converter] = {}
    accepted: list[str] = []
    accepts_any = False
    extra: JSONSchema = {}  # the schema of the values of **kwargs ({}: any)
    call_param: str | None = None
    for name, param in sig.parameters.items():
        if name in bound:
            continue
        hint = hints.get(name, Any)
        if hint is call_type:
            call_param = name
            continue
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            accepts_any = True
            if infer:
                extra = _kwargs_schema(inference, hint, name, doc.params.get(name))
            continue
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            if takes_kwargs:
                continue  # a (*args, **kwargs) wrapper: its arguments come by name
            raise ToolDefinitionError(
                f"Tool '{tool}': parameter '*{name}' collects positional arguments, which a tool never gets "
                f"(arguments are passed by name); take a list instead ('{name}: list[...]').",
                tool=tool,
            )
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"Tool '{tool}': parameter '{name}' is positional-only; tool arguments are passed by name.",
                tool=tool,
            )
        accepted.append(name)
        default = param.default
        if _is_field_info(default):  # `name: T = Field(...)`: read as `name: Annotated[T, Field(...)]`
            hint = _field_default(hint, default, name, tool)
            default = inspect.Parameter.empty
        if default is inspect.Parameter.empty:
            required.append(name)
        prop = inference.schema(hint, f"parameter '{name}'") if infer else {}
        conv = inference.converter(hint, f"$.{name}", strict=infer)
        if infer:
            if doc.params.get(name) and "description" not in prop:
                prop["description"] = doc.params[name]
            if default is not inspect.Parameter.empty:
                inference.give_default(prop, conv, default, f"$.{name}")
            properties[name] = prop
        if conv is not None:
            converters[name] = _bind(conv, f"$.{name}")
    binds = dict.fromkeys(bound, "a functools.partial's argument") | _bound_names(fn, sig)
    if accepts_any:  # a name the function binds itself would reach it twice ("got multiple values"): refused
        for name, why in binds.items():
            converters[name] = _refuse_bound(name, why)
    schema: JSONSchema = {}
    if infer:
        schema = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        # **kwargs: the keys it takes are said (true: any value), so no export reads it as a tool taking nothing
        schema["additionalProperties"] = (extra or True) if accepts_any else False
        if inference.defs:
            schema["$defs"] = inference.defs
        if inference.defaulted:
            _drop_refused_defaults(schema, inference.defaulted)
        for name in required:  # a memberless Enum the call must send (a left-out optional one leaves the tool callable)
            where = _empty_enum({**schema, "required": [name]}, built=True)
            if where is not None:
                field = " (or that field of it)" if "properties" in where[2:] or "$defs" in where else ""
                raise ToolDefinitionError(
                    f"Tool '{tool}': parameter '{name}': at {_pointer(where)}, the enum is empty (an Enum with no "
                    "members), so no value could ever match it and every call would be refused. Give the Enum its "
                    f"members, or make '{name}'{field} optional with a default.",
                    tool=tool,
                )
    output: JSONSchema | None = None
    wrapped = False
    if infer_output:
        output = _output_schema(hints.get("return", inspect.Signature.empty), tool)
        if output is not None:
            output, wrapped = wrap_output(output)
    return Signature(
        schema=schema,
        description=doc.description,
        accepted=frozenset(accepted),
        required=frozenset(required),
        accepts_any=accepts_any,
        call_param=call_param,
        converters=converters,
        output_schema=output,
        output_wrapped=wrapped,
        needs_check=inference.needs_check,
        bound=binds,
    )


def _field_default(hint: Any, info: Any, name: str, tool: str) -> Any:
    """``hint`` with the pydantic ``Field(...)`` given as parameter ``name``'s signature default, as
    ``Annotated[hint, Field(...)]``: one path with ``Annotated`` (its settings kept or refused alike), and
    the parameter required. A ``Field`` holding a default is refused: the harness calls the function
    itself, so an argument the model leaves out would reach it as the ``Field`` object."""
    if not info.is_required():
        given = "default_factory" if info.default_factory is not None else "default"
        raise ToolDefinitionError(
            f"Tool '{tool}': parameter '{name}': its default is a pydantic Field({given}=...), which the function "
            f"would receive itself when the model leaves '{name}' out; give the default in the signature and the "
            f"settings in Annotated: '{name}: Annotated[type, Field(...)] = value'.",
            tool=tool,
        )
    return typing.Annotated[hint, info]


def _bound_names(fn: Callable[..., Any], sig: inspect.Signature) -> dict[str, str]:
    """The names the function behind ``fn`` takes by keyword but ``sig`` hides, since a value is bound to
    them already (a bound method's ``self`` or ``cls``, a callable object's or a class's ``self``, a
    partial's positional arguments), each with what binds it."""
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    target = wrapped_function(target)
    if inspect.ismethod(target):
        raw, why = target.__func__, "the method's instance or class"
    elif isinstance(target, type):
        raw, why = target.__init__, "the instance being built"  # type: ignore[misc]
    elif not inspect.isfunction(target):
        raw, why = type(target).__call__, "the callable object"
    else:
        raw, why = target, ""
    try:
        full = inspect.signature(raw)
    except (TypeError, ValueError):
        return {}
    found: dict[str, str] = {}
    for position, (name, param) in enumerate(full.parameters.items()):
        if name in sig.parameters or param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            continue
        found[name] = why if why and position == 0 else "a functools.partial's argument"
    return found


def _refuse_bound(name: str, why: str) -> Converter:
    """The converter of a name the function binds itself: it refuses the argument, as an unknown one."""

    def refuse(value: Any) -> Any:
        got = _short(name)
        raise ToolArgumentError(
            [
                ArgumentProblem(
                    json_path((name,)),
                    f"unexpected argument; '{name}' is bound already ({why}), not an argument to send",
                    "additionalProperties",
                    "no such property",
                    got,
                )
            ]
        )

    return refuse


def _in_class_body(fn: Callable[..., Any]) -> bool:
    """``fn`` is a plain function defined in a class body (``C.m``, not ``f.<locals>.g``): an unbound method."""
    if not inspect.isfunction(fn):
        return False
    owner, _, _ = getattr(fn, "__qualname__", "").rpartition(".")
    return bool(owner) and not owner.endswith("<locals>")


def _method_advice(fn: Callable[..., Any], first: str, tool: str) -> str:
    owner, _, method = fn.__qualname__.rpartition(".")
    cls = owner.rpartition(".")[2]
    return (
        f"Tool '{tool}': {fn.__qualname__} is a method defined in a class body, so '{first}' would be an argument "
        f"the model has to send. Register the bound method instead, once there is an instance "
        f"(registry.add(instance.{method}); @defineTool on a method in the class body sees no instance), "
        f"or make it a @staticmethod (or a @classmethod, registered as registry.add({cls}.{method}))."
    )


def _kwargs_schema(inference: _Inference, hint: Any, name: str, described: str | None) -> JSONSchema:
    """The schema of the values of ``**name: hint`` (``{}``: any); refused when they would need converting."""
    where = f"parameter '**{name}'"
    schema = inference.schema(hint, where)
    if inference.converter(hint, where) is not None:  # converters are per named parameter
        shown = hint.__qualname__ if isinstance(hint, type) else repr(hint)
        raise ToolDefinitionError(
            f"Tool '{inference.tool}': {where}: the values of **{name} reach the function as JSON values, never "
            f"converted to {shown}; annotate it with a JSON type (str, int, float, bool, list[...], dict[str, ...]), "
            f"or take a parameter '{name}: dict[str, ...]' instead, whose values are converted.",
            tool=inference.tool,
        )
    if schema and described and "description" not in schema:
        schema["description"] = described
    return schema


def _bind(conv: _Conv, path: str) -> Converter:
    def convert(value: Any) -> Any:
        return conv(value, path)

    return convert


def _output_schema(hint: Any, tool: str) -> JSONSchema | None:
    """The schema of what the function returns, or None when there is none to give."""
    if hint in (inspect.Signature.empty, None, _NoneType, Any, object):
        return None
    inference = _Inference(tool, output=True)
    try:
        schema = inference.schema(hint, "the return annotation")
    except ToolDefinitionError:
        return None
    if inference.defs:
        schema["$defs"] = inference.defs
    if inference.defaulted:
        _drop_refused_defaults(schema, inference.defaulted)
    return schema


def wrap_output(schema: JSONSchema) -> tuple[JSONSchema, bool]:
    """An object schema for a tool's structured result, and whether results must be wrapped.

    A schema that does not describe an object becomes ``{"result": <schema>}`` (as FastMCP
    does); ``True`` then means a result ``v`` is sent as ``{"result": v}``.
    """
    if schema.get("type") == "object":
        return schema, False
    inner = dict(schema)
    defs = inner.pop("$defs", None)
    wrapped: JSONSchema = {"type": "object", "properties": {"result": inner}, "required": ["result"]}
    if defs:
        wrapped["$defs"] = defs
    return wrapped, True


_NO_DEFAULT = object()


def _hints(fn: Callable[..., Any], sig: inspect.Signature, tool: str) -> dict[str, Any]:
    """Resolved annotations of ``fn`` (a function, method or callable object), ``return`` included.

    Every annotation ``sig`` shows is resolved (an annotation no hint gives is read from ``sig``
    itself), or a ``ToolDefinitionError``: a parameter never loses its type silently."""
    fn = wrapped_function(fn)
    target: Any = fn if inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, type) else type(fn).__call__
    targets = [target]
    if isinstance(fn, type) and inspect.isfunction(getattr(fn, "__init__", None)):
        # A class: its parameters are __init__'s, whose annotations win over the class's own (a
        # dataclass's or pydantic model's fields, which __init__ may not annotate itself).
        target = fn.__init__  # type: ignore[misc]
        targets.append(target)
    hints: dict[str, Any] = {}
    try:
        for each in targets:
            hints.update(get_type_hints(each, include_extras=True))
    except Exception:
        hints = {}
    namespace = getattr(inspect.unwrap(target), "__globals__", {})
    annotations = [(name, param.annotation) for name, param in sig.parameters.items()]
    for name, written in [*annotations, ("return", sig.return_annotation)]:
        if written is inspect.Parameter.empty or name in hints:
            continue
        annotation = written
        if isinstance(written, str):
            try:
                annotation = eval(written, dict(namespace))
            except Exception as exc:
                if name == "return":
                    continue
                raise ToolDefinitionError(
                    f"Tool '{tool}': cannot resolve the annotation {written!r} of parameter '{name}': {exc}", tool=tool
                ) from exc
        hints[name] = annotation
    return hints


def wrapped_function(fn: Any) -> Any:
    """The function that a callable object wrapping one stands for (a ``staticmethod``, a ``functools.lru_cache``
    or ``cache``, any wrapper object keeping ``__wrapped__``), as ``inspect.signature`` reads it; else ``fn``
    itself. Its annotations and kind (async, generator) are the tool's."""
    if inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, type):
        return fn
    try:
        inner = inspect.unwrap(fn, stop=lambda f: hasattr(f, "__signature__"))
    except ValueError:  # a cycle of __wrapped__
        return fn
    return inner if inspect.isfunction(inner) or inspect.ismethod(inner) else fn


def _same_json(form: Any, value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is its JSON ``form`` itself: equal, and of the same types all through (a ``str`` Enum member,
    a tuple or an ``IntEnum`` equals its JSON form but is not it). Past 32 levels: not."""
    if type(form) is not type(value) or depth > 32:
        return False
    if type(value) is list:
        return len(form) == len(value) and all(_same_json(f, v, depth + 1) for f, v in zip(form, value))
    if type(value) is dict:
        return form.keys() == value.keys() and all(_same_json(form[k], value[k], depth + 1) for k in value)
    return bool(form == value)


def _json_default(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON for a schema's ``default``, or ``_NO_DEFAULT`` when it has no JSON form.

    A dict with string keys is an object; a list, tuple, set or frozenset an array (a set's
    items in the order of their JSON text, so the schema is the same from run to run)."""
    if depth > 32:
        return _NO_DEFAULT
    if isinstance(value, enum.Enum):
        value = value.value
    if _json_scalar(value):
        return value
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if _is_class(type(value), "uuid", "UUID") or _is_class(type(value), "decimal", "Decimal") or _is_path(type(value)):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # as its converter takes it: by init field
        hints = {f.name: f for f in dataclasses.fields(value)}
        if any(not f.init for f in hints.values()):
            return _NO_DEFAULT
        return _json_default({name: getattr(value, name) for name in hints}, depth + 1)
    if isinstance(value, dict):
        if not all(type(key) is str for key in value):
            return _NO_DEFAULT
        members = {key: _json_default(v, depth + 1) for key, v in value.items()}
        return _NO_DEFAULT if any(v is _NO_DEFAULT for v in members.values()) else members
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_json_default(v, depth + 1) for v in value]
        if any(v is _NO_DEFAULT for v in items):
            return _NO_DEFAULT
        if isinstance(value, (set, frozenset)):
            items.sort(key=lambda v: json.dumps(v, sort_keys=True))
        return items
    return _NO_DEFAULT


def _holds_secret(form: Any, depth: int = 0) -> bool:
    """Whether a default's JSON ``form`` holds a value under a name the errors the model reads hide
    (:data:`~harness_one.MODEL_SECRET_KEYS`): a schema shows it to the model in every export, so it is not
    given there (as the default of a parameter or field of such a name is not); the function's own applies."""
    from ._redact import hidden_from_model

    if depth > 32:
        return True
    if type(form) is dict:  # (a JSON form: its keys are strings)
        return any(hidden_from_model(key) or _holds_secret(value, depth + 1) for key, value in form.items())
    return type(form) is list and any(_holds_secret(item, depth + 1) for item in form)


def _drop_refused_defaults(schema: JSONSchema, given: list[JSONSchema]) -> None:
    """Drop from the inferred ``schema`` each ``default`` the inference gave (``given``: the schemas holding
    one) that the schema giving it refuses, its ``format`` too (as the validation plugin asserts formats):
    a default the model is told of and the plugin fills in must be one a call could send. One walk and
    one check for the tool, the way the definition check finds bad defaults (:func:`_bad_defaults`)."""
    if all(_plainly_valid(node, node["default"], None) for node in given):
        return  # (most defaults: None, a number or a string its plain type takes; no walk needed)
    found = _walk(schema, 2020)
    try:
        bad = _bad_defaults(schema, found, len(found.defaults), formats=True)
    except Exception:  # a schema the definition check refuses (a pattern no backend compiles): it says so
        return
    mine = {id(node) for node in given}
    for path, _ in bad:
        node = functools.reduce(operator.getitem, path, schema)
        if id(node) in mine:
            node.pop("default", None)


def _json_scalar(value: Any) -> bool:
    """Whether ``value`` is a JSON scalar JSON text can hold: no NaN or infinity, and no integer
    past Python's int-to-text limit (4,300 digits by default), which no JSON encoder can write."""
    kind = type(value)
    if kind is int:
        try:
            str(value)
        except ValueError:
            return False
        return True
    return value is None or kind is str or kind is bool or (kind is float and math.isfinite(value))


def _is_class(tp: Any, module: str, name: str) -> bool:
    """``tp`` is ``module.name`` (or a subclass), without importing ``module``."""
    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return cls is not None and isinstance(tp, type) and issubclass(tp, cls)


def _is_path(tp: Any) -> bool:
    return _is_class(tp, "pathlib", "PurePath")


def _pydantic_type(tp: Any) -> bool:
    """A pydantic model or pydantic dataclass (pydantic is imported already if one exists)."""
    if not isinstance(tp, type) or "pydantic" not in sys.modules:
        return False
    return _is_class(tp, "pydantic", "BaseModel") or hasattr(tp, "__pydantic_validator__")


def schema_for_type(tp: Any) -> JSONSchema:
    """The JSON Schema for a Python annotation (see docs/writing-tools.md); ``TypeError`` if there is none."""
    inference = _Inference("?")
    schema = inference._schema(tp)
    if inference.defs:
        schema["$defs"] = inference.defs
    if inference.defaulted:
        _drop_refused_defaults(schema, inference.defaulted)
    return schema


# ---------------------------------------------------------------------------- inference


class _Inference:
    """Schemas and converters for the annotations of one function; pydantic ``$defs`` collect here."""

    def __init__(self, tool: str, *, output: bool = False) -> None:
        self.tool = tool
        self.output = output
        self.defs: dict[str, JSONSchema] = {}
        self.needs_check = False  # set when a schema holds the user's text (a pattern, a pydantic schema)
        self.defaulted: list[JSONSchema] = []  # the schemas given a default (:meth:`give_default`)
        self._open: set[int] = set()  # dataclasses and TypedDicts being expanded (recursion guard)
        self._nesting = 0  # > 0 inside a container or a field: pydantic models go to $defs there

    def _nested(self, tp: Any) -> JSONSchema:
        """The schema of ``tp`` as an item, value or field of another type."""
        self._nesting += 1
        try:
            return self._schema(tp)
        finally:
            self._nesting -= 1

    def schema(self, tp: Any, where: str) -> JSONSchema:
        try:
            return self._schema(tp)
        except TypeError as exc:
            raise ToolDefinitionError(f"Tool '{self.tool}': {where}: {exc}", tool=self.tool) from None

    def give_default(self, schema: JSONSchema, conv: _Conv | None, value: Any, path: str) -> None:
        """Give ``schema`` ``value`` as its ``default``, unless it has no JSON form or the converter refuses that
        form (a default the validation plugin fills in must be one a call could send). Left out, the function's
        own default applies. Defaults ``schema`` itself refuses are dropped once the tool's schema is whole
        (:func:`_drop_refused_defaults`). A secret's is never given (:func:`_holds_secret`). Without a converter,
        the filled-in form reaches the function as it is: it is given only when it equals the default itself (not
        a ``date``'s string, a ``set``'s or ``tuple``'s list), so an unannotated or ``Any`` parameter gets its own default, not its JSON text."""
        form = _json_default(value)
        if form is _NO_DEFAULT:
            return
        if conv is None:
            try:
                if not _same_json(form, value):  # (a str Enum's member equals its value, in a list too)
                    return
            except Exception:  # an odd __eq__: the function's own default is the safe one
                return
        else:
            try:
                conv(form, path)
            except Exception:
                return
        if (_hidden(path) and _telling(form)) or _holds_secret(form):
            return
        schema["default"] = form
        self.defaulted.append(schema)

    def _schema(self, tp: Any) -> JSONSchema:
        if tp is Any or tp is inspect.Parameter.empty or tp is object:
            return {}
        if tp is None or tp is _NoneType:
            return {"type": "null"}
        origin = get_origin(tp)
        args = get_args(tp)
        if origin is typing.Annotated:
            return self._annotated(args[0], args[1:])
        if isinstance(tp, type):
            found = self._class_schema(tp)
            if found is not None:
                return found
        if hasattr(tp, "__supertype__"):  # typing.NewType
            return self._schema(tp.__supertype__)
        if type(tp).__name__ == "TypeAliasType":  # `type X = ...` (3.12)
            return self._schema(tp.__value__)
        if origin is Literal:
            return _enum_schema([_literal_value(a) for a in args])
        if origin is Union or origin is types.UnionType:
            return self._union(args)
        if origin in (list, Sequence, *_SET_ORIGINS) or tp in (list, set, frozenset):
            array: JSONSchema = {"type": "array"}
            is_set = origin in _SET_ORIGINS or tp in (set, frozenset)
            if is_set and not self.output and (not args or args[0] in (Any, object)):
                array["items"] = dict(_SET_ITEM)  # what a set can hold (a JSON value may be an object or array)
            elif args:
                array["items"] = self._nested(args[0])
            if is_set:
                array["uniqueItems"] = True
            return array
        if origin is tuple or tp is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self._nested(args[0])}
            if _empty_tuple(tp):
                return {"type": "array", "maxItems": 0}
            if not args:
                return {"type": "array"}
            return {
                "type": "array",
                "prefixItems": [self._nested(a) for a in args],
                "items": False,
                "minItems": len(args),
                "maxItems": len(args),
            }
        if origin in (dict, Mapping) or tp is dict:
            obj: JSONSchema = {"type": "object"}
            if args:
                if args[0] is not str:
                    raise TypeError(f"dict keys must be str for JSON, not {args[0]!r}")
                obj["additionalProperties"] = self._nested(args[1])
            return obj
        raise TypeError(f"cannot express {tp!r} in JSON Schema; give `parameters` explicitly")

    def _class_schema(self, tp: type) -> JSONSchema | None:
        if issubclass(tp, enum.Enum):
            return _enum_schema([_literal_value(m.value) for m in tp])
        if tp in _SCALARS:
            return {"type": _SCALARS[tp]}
        if issubclass(tp, dt.datetime):
            return _aware_or_naive("date-time", _NAIVE_DATETIME) if self.output else {"type": "string", "format": "date-time"}
        if issubclass(tp, dt.date):
            return {"type": "string", "format": "date"}
        if issubclass(tp, dt.time):
            return _aware_or_naive("time", _NAIVE_TIME) if self.output else {"type": "string", "format": "time"}
        if _is_class(tp, "uuid", "UUID"):
            return {"type": "string", "format": "uuid"}
        if _is_path(tp):
            return {"type": "string"}
        if _is_class(tp, "decimal", "Decimal"):
            return {"anyOf": [{"type": "number"}, {"type": "string", "pattern": _DECIMAL_PATTERN}]}
        if _pydantic_type(tp):
            return self._pydantic(tp)
        if typing.is_typeddict(tp):
            return self._expand(tp, self._typeddict)
        if dataclasses.is_dataclass(tp):
            return self._expand(tp, self._dataclass)
        return None

    def _expand(self, tp: type, build: Callable[[type], JSONSchema]) -> JSONSchema:
        if id(tp) in self._open:
            raise TypeError(f"{tp.__name__} refers to itself; use a pydantic model or give `parameters` explicitly")
        self._open.add(id(tp))
        try:
            return build(tp)
        finally:
            self._open.discard(id(tp))

    def _annotated(self, base: Any, metadata: tuple[Any, ...]) -> JSONSchema:
        schema = self._schema(base)
        described = False
        for meta in metadata:
            if isinstance(meta, str):
                if not described:
                    schema["description"] = meta
                    described = True
                continue
            self.needs_check = True
            if _is_field_info(meta):
                self._field_info(schema, meta)
            else:
                _constrain(schema, meta)
        return schema

    def _field_info(self, schema: JSONSchema, info: Any) -> None:
        """Apply a pydantic ``Field(...)``: constraints, description, title, examples, extra schema; refuse the rest."""
        for attr in ("alias", "validation_alias", "discriminator"):
            if getattr(info, attr, None) is not None:
                raise TypeError(f"Field({attr}=...) cannot be used on a tool parameter")
        given = getattr(info, "_attributes_set", None) or {}
        for attr in ("default", "default_factory"):
            if attr in given:
                raise TypeError(
                    f"Field({attr}=...) cannot be used on a tool parameter; give the default in the signature "
                    "(name: Annotated[type, Field(...)] = value)"
                )
        unkept = sorted(set(given) - _FIELD_KEPT)
        if unkept:
            raise TypeError(
                f"Field({unkept[0]}=...) cannot be used on a tool parameter (only its constraints, "
                "description, title, examples, deprecated and json_schema_extra apply)"
            )
        for meta in info.metadata:
            _constrain(schema, meta)
        if info.description:
            schema["description"] = info.description
        if info.title:
            schema["title"] = info.title
        if info.examples:
            schema["examples"] = list(info.examples)
        if getattr(info, "deprecated", None):
            schema["deprecated"] = True
        extra = info.json_schema_extra
        if isinstance(extra, Mapping):
            schema.update(extra)
        elif callable(extra):
            extra(schema)

    def _union(self, args: tuple[Any, ...]) -> JSONSchema:
        members = [self._schema(a) for a in args]
        if all(set(m) == {"type"} and isinstance(m["type"], str) for m in members):
            return {"type": [m["type"] for m in members]}
        return {"anyOf": members}

    def _typeddict(self, tp: Any) -> JSONSchema:
        hints = _field_hints(tp)
        props = {k: self._nested(_strip_required(v)) for k, v in hints.items()}
        required = sorted(k for k, v in hints.items() if _required_key(tp, k, v))
        schema: JSONSchema = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            schema["required"] = required
        return schema

    def _dataclass(self, tp: type) -> JSONSchema:
        hints = _field_hints(tp)
        props: dict[str, JSONSchema] = {}
        required: list[str] = []
        doc = parse_docstring(tp.__doc__)
        for f, hint in _init_fields(tp, hints):
            prop = self._nested(hint)
            if doc.params.get(f.name) and "description" not in prop:
                prop["description"] = doc.params[f.name]
            if f.default is not dataclasses.MISSING:
                try:
                    conv = self._conv(hint)
                except TypeError:  # (the dataclass's own converter says so)
                    conv = None
                self.give_default(prop, conv, f.default, f"$.{f.name}")
            elif f.default_factory is dataclasses.MISSING:
                required.append(f.name)
            props[f.name] = prop
        schema: JSONSchema = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            schema["required"] = required
        return schema

    def _pydantic(self, tp: type) -> JSONSchema:
        from pydantic import TypeAdapter

        self.needs_check = True
        nested = self._nesting > 0  # as an item or a field: a reference to the model under $defs
        try:
            schema: JSONSchema = TypeAdapter(list[tp] if nested else tp).json_schema(  # type: ignore[valid-type]
                ref_template="#/$defs/{model}",
                mode="serialization" if self.output else "validation",
                schema_generator=_no_secret_defaults(output=True) if self.output else _real_defaults(),
            )
        except Exception as exc:
            raise TypeError(f"pydantic cannot express {tp!r} in JSON Schema: {exc}") from None
        if nested:
            schema = {"$defs": schema.get("$defs", {}), **schema["items"]}
        if not self.output:  # extra="ignore" (pydantic's default) would drop a misspelt field unsaid: refused, as a dataclass's
            for model in (schema, *schema.get("$defs", {}).values()):
                _closed(model)
        # pydantic checks no default (`limit: int = None`): one the field's schema refuses is dropped, as a
        # signature's is, so the validation plugin never fills in what pydantic then refuses (None for an int)
        from ._redact import hidden_from_model

        for path in _walk(schema, 2020).defaults:
            node = functools.reduce(operator.getitem, path, schema)
            if (
                _telling(node["default"]) and any(p == "properties" and hidden_from_model(n) for p, n in itertools.pairwise(path))
            ) or _holds_secret(node["default"]):
                del node["default"]  # a secret's, as a signature's (give_default); an output schema is exported too
            elif not self.output:
                self.defaulted.append(node)
        for name, definition in schema.pop("$defs", {}).items():
            if name in self.defs and self.defs[name] != definition:
                raise TypeError(f"two different types are named '{name}'; rename one of them")
            self.defs[name] = definition
        return schema

    # ------------------------------------------------------------------ converters

    def converter(self, tp: Any, path: str, *, strict: bool = True) -> _Conv | None:
        """A converter from validated JSON to ``tp``, or None when the JSON value already is one."""
        try:
            return self._conv(tp)
        except TypeError as exc:
            if strict:
                raise ToolDefinitionError(f"Tool '{self.tool}': {path}: {exc}", tool=self.tool) from None
            return None

    def _conv(self, tp: Any) -> _Conv | None:
        origin = get_origin(tp)
        args = get_args(tp)
        if origin is typing.Annotated:
            return self._annotated_conv(args[0], args[1:])
        if isinstance(tp, type):
            return self._class_conv(tp)
        if hasattr(tp, "__supertype__"):
            return self._conv(tp.__supertype__)
        if type(tp).__name__ == "TypeAliasType":
            return self._conv(tp.__value__)
        if origin is Union or origin is types.UnionType:
            return self._union_conv(args)
        if origin is Literal and any(isinstance(a, enum.Enum) for a in args):
            return _to_literal(args)
        if origin in (list, Sequence) and args:
            return _each(self._conv(args[0]), list)
        if origin in _SET_ORIGINS:
            problem = _set_item_problem(args[0]) if args and args[0] not in (Any, object) else None
            if problem is not None:
                raise TypeError(problem)
            return _set_of(self._conv(args[0]) if args else None, frozenset if origin is frozenset else set)
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return _each(self._conv(args[0]), tuple, always=True)
            if args or _empty_tuple(tp):
                return _fixed_tuple([self._conv(a) for a in args])
            return _each(None, tuple, always=True)
        if origin in (dict, Mapping) and len(args) == 2:
            return _values(self._conv(args[1]))
        return None

    def _class_conv(self, tp: type) -> _Conv | None:
        if issubclass(tp, enum.Enum):
            return _to_enum(tp)
        if tp in _SCALARS:
            return None
        if issubclass(tp, dt.datetime):
            return _to_datetime
        if issubclass(tp, dt.date):
            return _to_date
        if issubclass(tp, dt.time):
            return _to_time
        if _is_class(tp, "uuid", "UUID"):
            return _to_uuid
        if _is_path(tp):
            return _to_path(tp)
        if _is_class(tp, "decimal", "Decimal"):
            return _to_decimal
        if _pydantic_type(tp):
            return _to_pydantic(tp)
        if typing.is_typeddict(tp):
            hints = _field_hints(tp)
            return self._guarded(tp, lambda: _fields({k: self._conv(_strip_required(v)) for k, v in hints.items()}, None))
        if dataclasses.is_dataclass(tp):
            hints = _field_hints(tp)
            fields = _init_fields(tp, hints)
            problem = _init_problem(tp, [f.name for f, _ in fields])
            if problem is not None:
                raise TypeError(problem)
            return self._guarded(tp, lambda: _fields({f.name: self._conv(hint) for f, hint in fields}, tp))
        if tp in (set, frozenset):
            return _set_of(None, tp)
        if tp is tuple:
            return _each(None, tp, always=True)
        return None

    def _guarded(self, tp: type, build: Callable[[], _Conv | None]) -> _Conv | None:
        if id(tp) in self._open:
            raise TypeError(f"{tp.__name__} refers to itself; use a pydantic model or give `parameters` explicitly")
        self._open.add(id(tp))
        try:
            return build()
        finally:
            self._open.discard(id(tp))

    def _annotated_conv(self, base: Any, metadata: tuple[Any, ...]) -> _Conv | None:
        inner = self._conv(base)
        if inner is not None and any(_is_class(m, "decimal", "Decimal") for m in _members(base)):  # Optional too
            bounds = _numeric_bounds(metadata)
            if bounds:
                return _bounded(inner, bounds)
        return inner

    def _union_conv(self, args: tuple[Any, ...]) -> _Conv | None:
        members = [a for a in args if a is not _NoneType]
        convs = [self._conv(a) for a in members]
        if all(c is None for c in convs):
            return None
        if len(members) == 1:
            only = convs[0]
            assert only is not None

            def optional(value: Any, path: str) -> Any:
                return None if value is None else only(value, path)

            return optional
        kinds = [self._schema(a) for a in members]
        return _first_fitting(list(zip(kinds, convs)), self.defs)


def _field_hints(tp: Any) -> dict[str, Any]:
    """The resolved field annotations of a dataclass or TypedDict (its own name resolves, for self-references)."""
    try:
        return get_type_hints(tp, localns={tp.__name__: tp}, include_extras=True)
    except Exception as exc:
        raise TypeError(f"cannot resolve the annotations of {tp.__name__}: {exc}") from None


def _required_key(tp: Any, key: str, hint: Any) -> bool:
    """Whether the TypedDict ``tp`` requires ``key`` (its resolved ``hint`` kept ``Required``/``NotRequired``).

    ``Required``/``NotRequired`` decide, else ``__required_keys__`` (the ``total`` of the class that
    declares the key). Under ``from __future__ import annotations`` Python 3.11 builds
    ``__required_keys__`` from the annotations' text, missing ``Required`` and ``NotRequired`` there.
    """
    while True:
        name = getattr(get_origin(hint), "_name", None)
        if name in ("Required", "NotRequired"):
            return bool(name == "Required")
        if name != "ReadOnly" and get_origin(hint) is not typing.Annotated:
            break
        hint = get_args(hint)[0]
    return bool(key in getattr(tp, "__required_keys__", (key,)))


def _init_fields(tp: Any, hints: Mapping[str, Any]) -> list[tuple[dataclasses.Field[Any], Any]]:
    """The fields a dataclass's ``__init__`` takes, in its order, each with its annotation: the fields with
    ``init``, and the ``InitVar`` pseudo-fields (``dataclasses.fields`` leaves them out), as the type they hold."""
    taken = {f.name for f in dataclasses.fields(tp) if f.init}
    found = []
    for name, f in getattr(tp, "__dataclass_fields__", {}).items():
        hint = hints.get(name, Any)
        if isinstance(hint, dataclasses.InitVar):
            found.append((f, hint.type))
        elif hint is dataclasses.InitVar:  # a bare InitVar: any value
            found.append((f, Any))
        elif name in taken:
            found.append((f, hint))
    return found


def _init_problem(tp: type, names: list[str]) -> str | None:
    """Why a dataclass's ``__init__`` cannot be called with its fields by name (``names``: the schema's properties),
    as its converter calls it: a custom ``__init__`` requiring a parameter that is no field, or not taking one that is."""
    try:
        params = inspect.signature(tp).parameters
    except (TypeError, ValueError):  # (no signature to read: the call says it)
        return None
    by_name = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    missing = [
        name
        for name, p in params.items()
        if p.default is p.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and (name not in names or p.kind not in by_name)
    ]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    unknown = [] if takes_any else [name for name in names if name not in params or params[name].kind not in by_name]
    if not missing and not unknown:
        return None
    said = [f"requires {', '.join(map(repr, missing))}, not fields it is built from by name"] if missing else []
    said += [f"does not take the fields {', '.join(map(repr, unknown))} by name"] if unknown else []
    return (
        f"the dataclass {tp.__qualname__}'s __init__ {' and '.join(said)} (fields: {', '.join(names) or 'none'}), so no "
        "call could build it; make its __init__ take exactly its fields, or give `parameters` explicitly"
    )


def _strip_required(tp: Any) -> Any:
    origin = get_origin(tp)
    if getattr(origin, "_name", None) in ("Required", "NotRequired", "ReadOnly"):
        return get_args(tp)[0]
    return tp


#: What ``get_origin`` gives for the set annotations: ``set[T]``, ``frozenset[T]``, ``typing.AbstractSet[T]``
#: and ``collections.abc.Set[T]`` (these two alike).
_SET_ORIGINS: tuple[Any, ...] = (set, frozenset, AbstractSet)


def _empty_tuple(tp: Any) -> bool:
    """``tuple[()]`` (or ``typing.Tuple[()]``): the empty tuple, which ``get_args`` tells from a bare ``Tuple`` by nothing."""
    try:
        return bool(tp == tuple[()] or tp == typing.Tuple[()])  # noqa: UP006
    except Exception:
        return False


#: The items of a bare ``set`` (or ``set[Any]``): JSON values a Python set can hold, booleans
#: aside (``True == 1`` in a set, though JSON tells them apart).
_SET_ITEM: JSONSchema = {"type": ["string", "number", "null"]}


def _set_item_problem(tp: Any) -> str | None:
    """Why the converted values of ``tp`` cannot be the items of a Python set, or None."""
    unhashable = _unhashable(tp)
    if unhashable is not None:
        return (
            f"a set cannot hold {unhashable} values, which are unhashable (every call would fail); "
            f"take a list (list[{_shown_type(tp)}]) instead"
        )
    kinds = _value_classes(tp)
    if bool in kinds and any(
        (k is not bool and issubclass(k, (int, float))) or _is_class(k, "decimal", "Decimal") for k in kinds
    ):
        return (
            f"set[{_shown_type(tp)}] mixes booleans and numbers, which a Python set merges (True == 1, False == 0) "
            "though JSON tells them apart; take a list, or a set of one of them"
        )
    return None


def _shown_type(tp: Any) -> str:
    return tp.__qualname__ if isinstance(tp, type) else repr(tp).replace("typing.", "")


def _members(tp: Any) -> list[Any]:
    """``tp`` as the types its values may have: unions split, ``Annotated``, ``NewType`` and aliases unwrapped."""
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return _members(get_args(tp)[0])
    if hasattr(tp, "__supertype__"):
        return _members(tp.__supertype__)
    if type(tp).__name__ == "TypeAliasType":
        return _members(tp.__value__)
    if origin is Union or origin is types.UnionType:
        return [m for arg in get_args(tp) for m in _members(arg)]
    return [tp]


def _value_classes(tp: Any) -> set[type]:
    """The classes of the Python values ``tp`` converts to, as far as sets care (a ``Literal``'s values' classes)."""
    classes: set[type] = set()
    for member in _members(tp):
        if get_origin(member) is Literal:
            classes.update(type(v.value if isinstance(v, enum.Enum) else v) for v in get_args(member))
        elif isinstance(member, type):
            classes.add(member)
    return classes


def _unhashable(tp: Any) -> str | None:
    """The name of a type within ``tp`` whose converted values are unhashable (``dict``, ``list``, ...), or None."""
    for member in _members(tp):
        origin = get_origin(member) or member
        args = get_args(member)
        if member in (Any, object):
            return "Any (JSON object or array)"
        if origin is tuple or origin is frozenset:
            found = next((u for a in args if a is not Ellipsis and (u := _unhashable(a)) is not None), None)
            if found is not None:
                return found
        elif origin in (list, dict, Sequence, Mapping, *_SET_ORIGINS) or typing.is_typeddict(origin):
            return _shown_type(origin if origin in (list, dict, set) else member)
        elif isinstance(origin, type) and getattr(origin, "__hash__", None) is None:  # a dataclass or model not frozen
            return origin.__qualname__
    return None


def _literal_value(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        value = value.value
    if _json_scalar(value):
        return value
    raise TypeError(f"cannot express the value {_shown_value(value)} in JSON Schema")


def _shown_value(value: Any) -> str:
    """``repr(value)``; for an integer too long to write as text (or a value holding one), its type and a note."""
    try:
        return repr(value)
    except ValueError:
        return f"{type(value).__name__}(<an integer of over {sys.get_int_max_str_digits()} digits>)"


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


def path_step(part: Any) -> str:
    """One step of a JSON path: ``[2]``, ``.name``, or ``["odd name"]`` (JSON-quoted, surrogates
    escaped); a name over 60 characters is cut to its first 57 and ``...`` (problems repeat it)."""
    if type(part) is str and len(part) <= 60 and part.isidentifier():
        return "." + part
    if isinstance(part, int) and not isinstance(part, bool):
        return f"[{part}]"
    name = part if isinstance(part, str) else str(part)
    if len(name) > 60:
        name = name[:57] + "..."
    return f".{name}" if name.isidentifier() else f"[{json.dumps(name)}]"


def json_path(parts: Iterable[Any]) -> str:
    """The JSON path of ``parts`` (names and indices from the root), as every problem names its field.

    ``json_path(["rows", 2, "a.b"])`` is ``'$.rows[2]["a.b"]'``: a plugin writing an
    :class:`~harness_one.ArgumentProblem` uses it to name fields as validation does.
    """
    return "$" + "".join(map(path_step, parts))


def listed_names(names: Iterable[str], limit: int = 20) -> str:
    """``names`` sorted, the first ``limit`` of them and how many more (``"a, b, ... (2,980 more)"``), or
    ``"none"``: how an argument error lists the names a tool takes, bounded however many there are."""
    ordered = sorted(names)
    shown = ordered[:limit] + ([f"... ({len(ordered) - limit:,} more)"] if len(ordered) > limit else [])
    return ", ".join(shown) or "none"


def json_pointer(root: Any, pointer: str) -> Any:
    """The node the JSON pointer ``pointer`` names in ``root`` (``"/$defs/point"``, as in a
    ``$ref``'s fragment, percent-encoded or not), else ``KeyError``: how a plugin follows a local
    ``$ref`` as the definition checks do."""
    node = root
    for escaped in unquote(pointer).split("/")[1:]:
        token = escaped.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise KeyError(pointer)
    return node


def subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema object in ``schema``, itself first, found by keyword as the definition checks walk it: a
    property named ``$schema``, or an ``enum``, ``const``, ``default`` or ``examples`` value, is no schema (``$ref``
    is not followed). How a plugin finds a keyword where it is one."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node
        for key, value in node.items():
            if key in _SUBSCHEMA:
                if isinstance(value, list):  # items as an array (drafts before 2020-12)
                    stack.extend(value)
                else:
                    stack.append(value)
            elif key in _SUBSCHEMA_ARRAYS and isinstance(value, list):
                stack.extend(value)
            elif (key in _SUBSCHEMA_MAPS or key == "dependencies") and isinstance(value, dict):
                stack.extend(value.values())  # (a dependencies list of names is no dict: passed over above)


# ---------------------------------------------------------------------------- constraints


def _is_field_info(meta: Any) -> bool:
    return _is_class(type(meta), "pydantic.fields", "FieldInfo")


_NUMERIC = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum", "multiple_of": "multipleOf"}
_LENGTHS = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}


def _constrain(schema: JSONSchema, meta: Any) -> None:
    """Apply one annotated-types / pydantic constraint to ``schema``; refuse what JSON Schema cannot say."""
    module = type(meta).__module__.split(".")[0]
    at = sys.modules.get("annotated_types")
    if at is not None and isinstance(meta, at.GroupedMetadata):  # Interval, Len, pydantic's StringConstraints
        for part in meta:
            _constrain(schema, part)
        return
    if at is not None and isinstance(meta, (at.Gt, at.Ge, at.Lt, at.Le, at.MultipleOf)):
        attr = next(a for a in _NUMERIC if hasattr(meta, a))
        value = getattr(meta, attr)
        if type(value) not in (int, float) or not _json_scalar(value):
            raise TypeError(f"cannot express the bound {_shown_value(meta)} in JSON Schema")
        _numeric(schema, _NUMERIC[attr], value)
        return
    if at is not None and isinstance(meta, (at.MinLen, at.MaxLen)):
        _length(
            schema, 0 if isinstance(meta, at.MinLen) else 1, meta.min_length if isinstance(meta, at.MinLen) else meta.max_length
        )
        return
    if type(meta).__name__ == "_PydanticGeneralMetadata":
        for key, value in vars(meta).items():
            if key == "pattern" and isinstance(value, str):
                schema["pattern"] = value
            elif key not in ("strict", "allow_inf_nan"):
                raise TypeError(f"cannot express the constraint {key}={value!r} in JSON Schema")
        return
    if module == "pydantic" and type(meta).__name__ == "Strict":
        if meta.strict and any("integer" in _kinds(m) for m in _alternatives(schema)):
            raise TypeError(
                "strict=True cannot be kept for an integer: JSON does not tell 1.0 from 1, so 1.0 would be taken as 1"
            )
        return
    if module in ("annotated_types", "pydantic", "pydantic_core"):
        raise TypeError(f"cannot express {meta!r} in JSON Schema")
    # anything else in Annotated[...] belongs to someone else (FastAPI markers, user tags)


#: The ``Field(...)`` settings a tool parameter honours (constraints reach ``metadata``; ``repr`` does no harm).
_FIELD_KEPT = frozenset({"description", "title", "examples", "deprecated", "json_schema_extra", "repr"})


def _closed(schema: Any) -> None:
    """Give a pydantic model's object schema ``additionalProperties: false`` when it says nothing of other
    names (``extra`` unset or ``"ignore"``; ``"allow"`` and ``"forbid"`` say true or false)."""
    if (
        isinstance(schema, dict)
        and schema.get("type") == "object"
        and isinstance(schema.get("properties"), dict)
        and not {"additionalProperties", "patternProperties", "unevaluatedProperties"} & schema.keys()
    ):
        schema["additionalProperties"] = False


def _alternatives(schema: JSONSchema) -> list[JSONSchema]:
    """The schemas a value under ``schema`` meets: ``schema`` itself, or every member of its ``anyOf``
    (nested ones too: ``Optional[Decimal]`` is an ``anyOf`` holding the ``anyOf`` of a ``Decimal``)."""
    if isinstance(schema.get("anyOf"), list):
        return [m for member in schema["anyOf"] if isinstance(member, dict) for m in _alternatives(member)]
    return [schema]


def _kinds(schema: JSONSchema) -> list[str]:
    kinds = schema.get("type")
    return [kinds] if isinstance(kinds, str) else list(kinds or [])


def _numeric(schema: JSONSchema, keyword: str, value: float) -> None:
    """Put a numeric bound on each alternative that may hold a number (one that says no type may too)."""
    targets = [m for m in _alternatives(schema) if "type" not in m or {"number", "integer"} & set(_kinds(m))]
    if not targets:
        raise TypeError(f"a numeric bound needs a number, not {schema!r}")
    for target in targets:
        target[keyword] = value


def _length(schema: JSONSchema, which: int, value: int) -> None:
    """Put a length bound on each alternative that is a string, array or object."""
    applied = False
    for target in _alternatives(schema):
        for kind in _kinds(target):
            if kind in _LENGTHS:
                target[_LENGTHS[kind][which]] = value
                applied = True
    if not applied:
        raise TypeError(f"a length constraint needs a string, array or object, not {schema!r}")


def _numeric_bounds(metadata: tuple[Any, ...]) -> list[tuple[str, Any]]:
    """The numeric bounds in ``metadata`` (for Decimal strings, which the schema's bounds do not reach)."""
    found: JSONSchema = {}
    for meta in metadata:
        if _is_field_info(meta):
            for inner in meta.metadata:
                try:
                    _constrain(found, inner)
                except (TypeError, KeyError):
                    continue
        else:
            try:
                _constrain(found, meta)
            except (TypeError, KeyError):
                continue
    return [(k, v) for k, v in found.items() if k in _NUMERIC.values()]


# ---------------------------------------------------------------------------- converters


def _refuse(path: str, expected: str, value: Any, keyword: str = "format", why: str = "") -> ToolArgumentError:
    got = _short(value, path)
    return ToolArgumentError([ArgumentProblem(path, f"expected {expected}, got {got}{why}", keyword, expected, got)])


# A name in a JSON path path_step wrote: ``.name`` or ``["odd name"]`` (JSON-quoted).
_PATH_NAME = re.compile(r'\.([^\W\d]\w*)|\[("(?:[^"\\]|\\.)*")\]')


def _short(value: Any, path: str = "") -> str:
    """``value``, found at ``path``, as a converter's refusal shows it (and an argument's name, without a
    ``path``): a string's first 57 characters as JSON text, as the validation plugin shows a string
    (:func:`~harness_one.preview`: control characters and lone surrogates escaped, so none reaches a
    terminal or a log raw), a number or null as written, anything else by its JSON type; ``(redacted)``
    but for null and booleans when a name in ``path`` is one whose value the errors the model reads hide
    (:data:`~harness_one.MODEL_SECRET_KEYS`, as the validation plugin hides it)."""
    from ._render import preview

    if not (value is None or isinstance(value, bool)) and _hidden(path):
        return "(redacted)"
    if isinstance(value, str):
        quoted = preview(value[:57], 6 * 57 + 2)  # (never cut: a character's escape is at most 6 characters)
        return quoted if len(value) <= 57 else quoted[:-1] + '..."'
    if isinstance(value, (bool, int, float)) or value is None:
        return json_type(value) if isinstance(value, int) and abs(value) > 10**50 else repr(value)
    return json_type(value)


def shown_at(value: Any, path: str) -> str:
    """``value``, found at ``path``, as :meth:`ArgumentProblem.mismatch` shows it, as the validation plugin shows a
    refused value: :func:`~harness_one.preview` masked as the errors the model reads mask (``password=...``, a URL's
    user-info, values under secret keys), ``(redacted)`` but for null, booleans and non-finite numbers when a name in
    ``path`` is one whose value they hide."""
    plain = value is None or isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value))
    if not plain and _hidden(path):
        return "(redacted)"
    from ._redact import _MODEL
    from ._render import preview

    return preview(value, redactor=_MODEL)


def _telling(default: Any) -> bool:
    """Whether a default under a secret's name could tell the model something: not None, ``""`` nor a bool (a
    pagination cursor's ``None``, a flag's ``False`` are kept)."""
    return not (default is None or type(default) is bool or (type(default) is str and not default))


def _hidden(path: str) -> bool:
    """Whether a name in ``path`` is one whose value the errors the model reads hide (:data:`~harness_one.MODEL_SECRET_KEYS`)."""
    from ._redact import hidden_from_model

    return any(hidden_from_model(found.group(1) or json.loads(found.group(2))) for found in _PATH_NAME.finditer(path))


_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))?", re.ASCII
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))?", re.ASCII)


def _zone(z: str | None, sign: str | None, hours: str | None, minutes: str | None) -> dt.tzinfo | None:
    if z:
        return dt.UTC
    if sign and hours and minutes:
        delta = dt.timedelta(hours=int(hours), minutes=int(minutes))
        return dt.timezone(-delta if sign == "-" else delta)
    return None


def _micro(fraction: str | None) -> int:
    return int((fraction or "0")[:6].ljust(6, "0"))


def _to_datetime(value: Any, path: str) -> Any:
    if isinstance(value, dt.datetime):
        return value
    m = _DATETIME.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise _refuse(path, "an RFC 3339 date-time", value)
    g = m.groups()
    if g[5] == "60":
        raise _refuse(path, "a date-time Python can represent", value, why=" (a leap second)")
    try:
        year, month, day, hour, minute, second = (int(part) for part in g[:6])
        return dt.datetime(year, month, day, hour, minute, second, _micro(g[6]), tzinfo=_zone(*g[7:]))
    except ValueError as exc:
        raise _refuse(path, "an RFC 3339 date-time", value, why=f" ({exc})") from None


def _to_date(value: Any, path: str) -> Any:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if not (isinstance(value, str) and _DATE.fullmatch(value)):
        raise _refuse(path, "an RFC 3339 date (YYYY-MM-DD)", value)
    try:
        return dt.date(int(value[:4]), int(value[5:7]), int(value[8:]))
    except ValueError as exc:  # the reason, as _to_datetime gives it: "year 0 is out of range", a February 30th
        raise _refuse(path, "an RFC 3339 date (YYYY-MM-DD)", value, why=f" ({exc})") from None


def _to_time(value: Any, path: str) -> Any:
    if isinstance(value, dt.time):
        return value
    m = _TIME.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise _refuse(path, "an RFC 3339 time", value)
    g = m.groups()
    if g[2] == "60":
        raise _refuse(path, "a time Python can represent", value, why=" (a leap second)")
    try:
        return dt.time(int(g[0]), int(g[1]), int(g[2]), _micro(g[3]), tzinfo=_zone(*g[4:]))
    except ValueError as exc:
        raise _refuse(path, "an RFC 3339 time", value, why=f" ({exc})") from None


def _to_uuid(value: Any, path: str) -> Any:
    import uuid

    if isinstance(value, uuid.UUID):
        return value
    try:
        if isinstance(value, str):
            return uuid.UUID(value)
    except ValueError:
        pass
    raise _refuse(path, "a UUID", value)


def _to_path(cls: type) -> _Conv:
    def to_path(value: Any, path: str) -> Any:
        if isinstance(value, cls):
            return value
        if value == "":  # Path("") is Path("."): the current directory, which no one sent
            raise _refuse(path, "a path", value, "minLength", " (an empty path would be '.', the current directory)")
        if isinstance(value, str) and "\x00" not in value:
            return cls(value)
        raise _refuse(path, "a path", value, "type")

    return to_path


def _to_decimal(value: Any, path: str) -> Any:
    import decimal

    if isinstance(value, decimal.Decimal):
        return value
    try:
        if type(value) is int:
            return decimal.Decimal(value)
        if type(value) is float and math.isfinite(value):
            return decimal.Decimal(repr(value))
        if isinstance(value, str) and re.fullmatch(_DECIMAL_PATTERN, value):
            number = decimal.Decimal(value)
            limit = sys.get_int_max_str_digits() or 4300
            if len(number.as_tuple().digits) > limit or abs(number.adjusted()) > limit:  # 1e300000: int() of it took seconds
                raise _refuse(path, f"a decimal number of at most {limit} digits and exponent", value, "type")
            return number
    except (ArithmeticError, ValueError):
        pass
    raise _refuse(path, "a decimal number", value, "type")


def _multiple(value: Any, step: Any) -> bool:
    """Whether the Decimal ``value`` is a whole multiple of ``step``, exactly: ``%`` in the decimal context
    (28 digits) cannot divide ``123456789012345678901234567890.01`` by ``0.01`` (``DivisionImpossible``)."""
    n1, d1 = value.as_integer_ratio()
    n2, d2 = step.as_integer_ratio()
    return bool((n1 * d2) % (d1 * n2) == 0)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": lambda v, b: v >= b,
    "maximum": lambda v, b: v <= b,
    "exclusiveMinimum": lambda v, b: v > b,
    "exclusiveMaximum": lambda v, b: v < b,
    "multipleOf": _multiple,
}
_SYMBOL = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<", "multipleOf": "a multiple of"}


def _bounded(inner: _Conv, bounds: list[tuple[str, Any]]) -> _Conv:
    import decimal

    def check(value: Any, path: str) -> Any:
        number = inner(value, path)
        if not isinstance(number, decimal.Decimal):  # None, or another member of a union (its schema bounds it)
            return number
        for keyword, bound in bounds:
            if not _COMPARE[keyword](number, decimal.Decimal(repr(bound) if type(bound) is float else bound)):
                expected, got = f"{_SYMBOL[keyword]} {bound}", _short(value, path)
                said = expected if keyword == "multipleOf" else f"a number {expected}"
                raise ToolArgumentError([ArgumentProblem(path, f"expected {said}, got {got}", keyword, expected, got)])
        return number

    return check


def _choices(values: list[Any]) -> str:
    """``one of`` the first 8 ``values`` as JSON text (at most 200 characters), ``...`` for the rest, as the
    validation plugin lists an ``enum``: an Enum of 3,000 members is no 10,000-character refusal."""
    from ._render import escape_controls

    text = escape_controls(json.dumps(values[:8], ensure_ascii=False, default=repr))
    if len(text) > 200:
        return "one of " + text[:197] + "..."
    return "one of " + text + ("..." if len(values) > 8 else "")


def _to_enum(cls: type[enum.Enum]) -> _Conv:
    expected = _choices([m.value for m in cls])

    def to_member(value: Any, path: str) -> Any:
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except (ValueError, TypeError):
            raise _refuse(path, expected, value, "enum") from None

    return to_member


def _to_literal(args: tuple[Any, ...]) -> _Conv:
    """A ``Literal`` holding Enum members (``Literal[Color.RED, Color.BLUE]``): the member whose value was sent."""
    choices = [(a.value if isinstance(a, enum.Enum) else a, a) for a in args]
    expected = _choices([value for value, _ in choices])

    def to_choice(value: Any, path: str) -> Any:
        for written, choice in choices:
            if written == value and (type(written) is bool) == (type(value) is bool):  # (True == 1, JSON tells them apart)
                return choice
        raise _refuse(path, expected, value, "enum")

    return to_choice


def _strict(core: Any) -> bool:
    """Whether a pydantic core schema (its nested models and fields too) asks for strict mode anywhere: a schema's
    or a config's ``strict``, not one in a node's ``metadata`` (``json_schema_extra``) or in a ``default`` node's
    value. (Those keys are skipped on schema nodes only, which have a ``type``: a field named ``default`` or
    ``metadata`` in a ``fields`` or ``choices`` mapping is walked.)"""
    seen: set[int] = set()
    stack = [core]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            if node.get("strict") is True:
                return True
            kind = node.get("type")
            skip = ("metadata", "default") if kind == "default" else ("metadata",) if isinstance(kind, str) else ()
            stack.extend(value for key, value in node.items() if key not in skip)
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _to_pydantic(tp: type) -> _Conv:
    from pydantic import TypeAdapter, ValidationError

    adapter: TypeAdapter[Any] = TypeAdapter(tp)
    # Strict mode in Python mode wants a datetime, UUID, Enum member or tuple, never the string or array JSON sends
    # (and the schema asks for): a strict model validates as the JSON text it came as, as pydantic's strict mode
    # reads JSON. Others stay in Python mode (no JSON text to write per call, pydantic's lax messages unchanged).
    strict = _strict(adapter.core_schema)

    def validate(value: Any) -> Any:
        if strict:
            try:
                text = json.dumps(value, allow_nan=True, ensure_ascii=False)
            except (TypeError, ValueError):  # no JSON value (a caller's own objects): as Python
                pass
            else:
                # pydantic reads no lone surrogate from JSON text, escaped or not (and reads an escaped pair as the
                # one character): the verdict is on a copy with U+FFFD for each, then the model is built of the
                # original strings in lax Python mode, which takes what strict JSON took alike (validators run twice).
                mended, surrogates = _SURROGATE.subn("\ufffd", text)
                try:
                    model = adapter.validate_json(mended)
                except ValidationError as exc:
                    if all(err.get("type") != "json_invalid" for err in exc.errors()):
                        raise
                    # Text pydantic's JSON reader refuses (nested past its recursion limit, ~200 levels, which
                    # ArgumentLimits may allow): judged in Python mode, the model's own strictness.
                    return adapter.validate_python(value)
                return model if not surrogates else adapter.validate_python(value, strict=False)
        return adapter.validate_python(value)

    def to_model(value: Any, path: str) -> Any:
        if isinstance(value, tp):
            return value
        try:
            return validate(value)
        except ValidationError as exc:
            from ._errors import outside_text

            problems = []
            for err in exc.errors()[:20]:
                loc = tuple(err.get("loc", ()))
                kind = str(err.get("type", "pydantic"))
                key = ""
                # A dict's key refused (pydantic's loc: the key, then "[key]"): the problem is at the dict. (A value
                # under a key named "[key]" has the value as its input.)
                if loc[-1:] == ("[key]",) and len(loc) >= 2 and err.get("input") == loc[-2]:
                    loc, key = loc[:-2], f"key {_short(str(loc[-2]))}: "
                where = path + "".join(map(path_step, loc))
                # A validator's text may quote the value: masked, or only its kind under a secret key (as _convert shows).
                text = f"invalid ({kind})" if _hidden(where) else key + outside_text(str(err.get("msg", "invalid")))
                problems.append(ArgumentProblem(where, text, kind))
            raise ToolArgumentError(problems or [ArgumentProblem(path, "invalid value", "pydantic")]) from None

    return to_model


def _alias_names(alias: Any) -> list[str]:
    """The names in a pydantic field's ``alias``, ``validation_alias`` or ``serialization_alias`` (a string, an
    ``AliasPath`` or ``AliasChoices``)."""
    if isinstance(alias, str):
        return [alias]
    path, choices = getattr(alias, "path", None), getattr(alias, "choices", None)
    if isinstance(path, list):
        return [name for name in path if isinstance(name, str)]
    return [name for choice in choices for name in _alias_names(choice)] if isinstance(choices, list) else []


@functools.cache
def _no_secret_defaults(*, output: bool) -> Any:
    """pydantic's JSON Schema generator, giving no ``default`` to a model's or pydantic dataclass's field whose
    Python name or an alias of the schema's side is a secret's (:data:`~harness_one.MODEL_SECRET_KEYS`): the
    schema's property is named by the alias alone (``password: str = Field("...", alias="pw")`` as ``pw``), and
    every export shows it. An input schema's side is ``alias`` and ``validation_alias``; an ``output`` one's
    ``alias`` and ``serialization_alias`` (``k: str = Field("x", serialization_alias="api_key")`` names no input)."""
    from pydantic.json_schema import GenerateJsonSchema

    from ._redact import hidden_from_model

    def drop(cls: Any, found: Any) -> Any:
        props = found.get("properties") if isinstance(found, dict) else None
        for name, field in (getattr(cls, "__pydantic_fields__", None) or {}).items():
            side = field.serialization_alias if output else field.validation_alias
            names = [name, *(n for a in (field.alias, side) for n in _alias_names(a))]
            if isinstance(props, dict) and any(map(hidden_from_model, names)):
                for key in set(names) & props.keys():
                    if isinstance(props[key], dict) and _telling(props[key].get("default")):
                        props[key].pop("default", None)
        return found

    class NoSecretDefaults(GenerateJsonSchema):
        def model_schema(self, schema: Any) -> Any:
            return drop(schema["cls"], super().model_schema(schema))

        def dataclass_schema(self, schema: Any) -> Any:
            return drop(schema["cls"], super().dataclass_schema(schema))

    return NoSecretDefaults


@functools.cache
def _real_defaults() -> Any:
    """pydantic's JSON Schema generator, leaving out each ``default`` that does not read back as the field's own,
    and a secret's (:func:`_no_secret_defaults`).

    The validation plugin fills a schema's defaults in: one pydantic writes masked (``SecretStr("key")``
    as ``"**********"``, also within a list or a model) would reach the tool in place of the real
    one; left out, pydantic gives the field its own default.
    """
    from pydantic import TypeAdapter

    def reads_back(value: Any, written: Any) -> bool:
        if type(value) in (str, int, float, bool, type(None)):
            return True
        try:
            return bool(TypeAdapter(type(value)).validate_python(written) == value)
        except Exception:
            return False

    class RealDefaults(_no_secret_defaults(output=False)):  # type: ignore[misc]
        def default_schema(self, schema: Any) -> Any:
            found = super().default_schema(schema)
            if "default" in found and not reads_back(schema.get("default"), found["default"]):
                found = {key: value for key, value in found.items() if key != "default"}
            return found

    return RealDefaults


def _each(item: _Conv | None, kind: type, *, always: bool = False) -> _Conv | None:
    """Convert each item of a JSON array (and make it a ``kind``: list, tuple, set or frozenset)."""
    if item is None and not always:
        return None

    def convert(value: Any, path: str) -> Any:
        if not isinstance(value, (list, tuple)):  # a hand-written schema let another JSON type through
            raise _refuse(path, "an array", value, "type")
        if item is None:
            return kind(value)
        return kind(item(v, f"{path}[{i}]") for i, v in enumerate(value))

    return convert


def _set_of(item: _Conv | None, kind: type) -> _Conv:
    """Convert each item of a JSON array and make them a ``kind`` (set or frozenset); an item a set cannot hold
    (under a schema that lets objects or arrays through) is refused where it stands."""
    each = _each(item, list, always=True)
    assert each is not None

    def convert(value: Any, path: str) -> Any:
        items = each(value, path)
        try:
            return kind(items)
        except TypeError:
            index = next(i for i, v in enumerate(items) if not _hashable(v))
            raise _refuse(f"{path}[{index}]", "a string, number or null (what a set holds)", items[index], "type") from None

    return convert


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _fixed_tuple(items: list[_Conv | None]) -> _Conv:
    expected = f"an array of {len(items)} item" + ("" if len(items) == 1 else "s")

    def convert(value: Any, path: str) -> Any:
        if not isinstance(value, (list, tuple)):  # a hand-written schema let another JSON type through
            raise _refuse(path, expected, value, "type")
        if len(value) != len(items):  # (zip would cut it short, or the tuple be short of an item)
            raise _refuse(path, expected, value, "maxItems" if len(value) > len(items) else "minItems", _of(value))
        return tuple(c(v, f"{path}[{i}]") if c is not None else v for i, (c, v) in enumerate(zip(items, value)))

    return convert


def _of(value: list[Any] | tuple[Any, ...]) -> str:
    return f" of {len(value)} item" + ("" if len(value) == 1 else "s")


def _values(item: _Conv | None) -> _Conv | None:
    if item is None:
        return None

    def convert(value: Any, path: str) -> Any:
        if not isinstance(value, dict):  # a hand-written schema let another JSON type through
            raise _refuse(path, "an object", value, "type")
        return {k: item(v, path + path_step(k)) for k, v in value.items()}

    return convert


def _fields(convs: dict[str, _Conv | None], cls: type | None) -> _Conv | None:
    """Convert the fields of a JSON object, then build ``cls`` from them (a dataclass), or keep the dict."""
    inner = {k: c for k, c in convs.items() if c is not None}
    if not inner and cls is None:
        return None

    def convert(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            if cls is not None and isinstance(value, cls):
                return value
            raise _refuse(path, "an object", value, "type")  # a hand-written schema let another JSON type through
        fields = {k: (inner[k](v, path + path_step(k)) if k in inner else v) for k, v in value.items()}
        if cls is None:
            return fields
        try:
            return cls(**fields)
        except ToolError:
            raise
        except Exception as exc:  # __init__ or __post_init__: refused where the object stands, as _convert shows it
            from ._errors import exception_text

            shown = type(exc).__name__ if _hidden(path) else exception_text(exc)
            if type(exc) is TypeError:  # the fields do not fit its __init__
                said = f"cannot build {cls.__name__}: " + (shown if _hidden(path) else outside_text(str(exc)))
            else:
                said = f"cannot be converted: {shown}"
            raise ToolArgumentError([ArgumentProblem(path, said, "type", cls.__name__)]) from None

    return convert


_JSON_KINDS = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", tuple: "array", dict: "object"}


def _fits(schema: JSONSchema, value: Any, names_too: bool = True) -> bool:
    """Whether ``value``'s JSON type is one ``schema`` declares (for picking a union member); for an object
    with ``names_too``, also its required names and, under ``additionalProperties: false``, no other names
    (so of ``Union[A, B]``, two dataclasses or TypedDicts, the one the fields sent fit is picked)."""
    kind = "null" if value is None else _JSON_KINDS.get(type(value))
    declared = schema.get("type")
    if "anyOf" in schema:
        return any(_fits(s, value, names_too) for s in schema["anyOf"])
    if declared is None:
        return True
    names = [declared] if isinstance(declared, str) else list(declared)
    if names_too and kind == "object" and names == ["object"]:
        properties = schema.get("properties")
        if not set(schema.get("required") or ()) <= value.keys():
            return False
        if schema.get("additionalProperties") is False and isinstance(properties, dict):
            return bool(value.keys() <= properties.keys())
        return True
    return kind in names or (kind == "integer" and "number" in names)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``True`` is not ``1`` (nor ``"1"``), ``1`` is ``1.0``; arrays and objects item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)  # (what is not JSON, the conformance kit compares as it is)


def _matches(schema: Any, value: Any, defs: Mapping[str, Any], memo: dict[tuple[int, int], bool], depth: int = 0) -> bool:
    """Whether ``value`` meets ``schema`` as far as its types, ``enum``, ``const``, properties, items and
    ``$defs`` references tell (for picking a union member: formats, patterns and bounds are the converters'
    to refuse). Each property sent is checked against its own schema, so of ``Union[Refund, Charge]`` told
    apart by a ``Literal`` tag, or of ``Union[A, B]`` by a field's type, the member the value meets is picked.

    ``memo`` (one per conversion) keeps each verdict on an object or array by the identities of schema and
    value, so a value nested in unions of unions is walked once per schema, not once per path to it; and an
    object's scalar properties are checked before its nested ones, which a wrong member's tag refuses first."""
    if not isinstance(schema, Mapping):
        return schema is not False
    if depth > 64:
        return True
    if not isinstance(value, (dict, list, tuple)):
        return _meets(schema, value, defs, memo, depth)
    key = (id(schema), id(value))
    found = memo.get(key)
    if found is None:
        found = memo[key] = _meets(schema, value, defs, memo, depth)
    return found


def _meets(schema: Mapping[str, Any], value: Any, defs: Mapping[str, Any], memo: dict[tuple[int, int], bool], depth: int) -> bool:
    """:func:`_matches` of a schema object, unmemoised."""
    ref = schema.get("$ref")
    if (
        isinstance(ref, str)
        and ref.startswith("#/$defs/")
        and not _matches(defs.get(ref[8:], True), value, defs, memo, depth + 1)
    ):
        return False
    declared = schema.get("type")
    if declared is not None:
        kind = "null" if value is None else _JSON_KINDS.get(type(value))
        names = [declared] if isinstance(declared, str) else list(declared)
        if not (kind in names or (kind == "integer" and "number" in names)):  # (1.0 fits a number, as _fits says)
            return False
    if "enum" in schema and not any(_same(choice, value) for choice in schema["enum"] or ()):
        return False
    if "const" in schema and not _same(schema["const"], value):
        return False
    if isinstance(value, dict):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        if not set(schema.get("required") or ()) <= value.keys():
            return False
        extra = schema.get("additionalProperties", True)
        open_names = "patternProperties" in schema
        items = sorted(value.items(), key=lambda pair: isinstance(pair[1], (dict, list, tuple)))  # scalars first
        for name, item in items:
            if name in properties:
                if not _matches(properties[name], item, defs, memo, depth + 1):
                    return False
            elif not open_names and not _matches(extra, item, defs, memo, depth + 1):
                return False
    elif isinstance(value, (list, tuple)):
        low, high = schema.get("minItems"), schema.get("maxItems")
        if (type(low) is int and len(value) < low) or (type(high) is int and len(value) > high):
            return False
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        for index, item in enumerate(value):
            rule = prefix[index] if index < len(prefix) else schema.get("items", True)
            if not _matches(rule, item, defs, memo, depth + 1):
                return False
    for keyword, every in (("anyOf", False), ("oneOf", False), ("allOf", True)):
        members = schema.get(keyword)
        if isinstance(members, list) and members:
            verdicts = (_matches(m, value, defs, memo, depth + 1) for m in members)
            if not (all(verdicts) if every else any(verdicts)):
                return False
    return True


def _first_fitting(members: list[tuple[JSONSchema, _Conv | None]], defs: Mapping[str, Any]) -> _Conv:
    """Left to right: the first member the value meets (:func:`_matches`) whose conversion succeeds; when none
    meets one (no validation ran), the first whose object names fit, then the first whose JSON type fits."""

    def convert(value: Any, path: str) -> Any:
        last: ToolArgumentError | None = None
        memo: dict[tuple[int, int], bool] = {}  # (one per conversion: the ids are of objects alive throughout)
        for strict, names_too in ((True, True), (False, True), (False, False)):
            fitted = False
            for schema, conv in members:
                if not (_matches(schema, value, defs, memo) if strict else _fits(schema, value, names_too)):
                    continue
                fitted = True
                if conv is None:
                    return value
                try:
                    return conv(value, path)
                except ToolArgumentError as exc:
                    last = exc
            if fitted:
                break
        if last is not None:
            raise last
        return value

    return convert


# ---------------------------------------------------------------------------- checking given schemas

_MAX_SCHEMA_DEPTH = 128
_DIALECTS = {
    "https://json-schema.org/draft/2020-12/schema": 2020,
    "https://json-schema.org/draft/2019-09/schema": 2019,
    "http://json-schema.org/draft-07/schema": 7,
    "http://json-schema.org/draft-06/schema": 6,
    "http://json-schema.org/draft-04/schema": 4,
}
# Keywords whose value is a schema, an array of schemas, or an object of schemas.
_SUBSCHEMA = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
_SUBSCHEMA_ARRAYS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUBSCHEMA_MAPS = frozenset({"$defs", "definitions", "dependentSchemas", "patternProperties", "properties"})
_DATA = frozenset({"const", "default", "enum", "examples"})


def check_schema(
    schema: Any, *, tool: str, what: str = "parameters", object_root: bool = True, defaults: bool = False
) -> JSONSchema:
    """A plain-JSON copy of ``schema`` once it passes every check, else a ``ToolDefinitionError`` naming the place.

    Checked: a JSON object made of JSON values; a known ``$schema``; no reference outside the
    schema (never fetched; the bundled metaschemas are fine); valid under its metaschema;
    ``"type": "object"`` at the root (``object_root``); every local ``$ref`` resolves; every
    ``pattern`` and ``patternProperties`` key is a regular expression both backends accept;
    with ``defaults``, every ``default`` is valid under the schema that gives it.
    """
    prefix = f"Tool '{tool}': {what}"
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(f"{prefix} must be a JSON Schema object (a mapping), not {type(schema).__name__}.", tool=tool)
    copy = _copy_json(schema, prefix, tool)
    dialect = _dialect(copy.get("$schema"))
    if dialect is None:
        raise ToolDefinitionError(
            f"{prefix}: unknown $schema {copy['$schema']!r}; remote metaschemas are never fetched. "
            f"Use one of: {', '.join(_DIALECTS)} (or leave $schema out for 2020-12).",
            tool=tool,
        )
    found = _walk(copy, dialect)
    if found.malformed:
        path, text = found.malformed[0]
        raise ToolDefinitionError(
            f"{prefix}: at {_pointer(path)}, {text[:200]!r} is not a URI reference (RFC 3986); "
            "percent-encode spaces, non-ASCII letters and other characters a URI cannot hold ('#/$defs/a%20b').",
            tool=tool,
        )
    if found.remote:
        raise ToolDefinitionError(
            f"{prefix} refer to remote schemas, which are never fetched: "
            + ", ".join(f"{ref} (at {_pointer(path)})" for path, ref in found.remote)
            + ". Inline them under $defs and refer to them with '#/$defs/...'.",
            tool=tool,
        )
    _check_metaschema(copy, prefix, tool)
    if object_root and copy.get("type") != "object":
        raise ToolDefinitionError(
            f'{prefix} must describe a JSON object ("type": "object" at the root); got type {copy.get("type")!r}.', tool=tool
        )
    if found.doubled:
        path, name, first = found.doubled[0]
        raise ToolDefinitionError(
            f"{prefix}: at {_pointer(path)}, the anchor {name!r} is declared again (first at {_pointer(first)}), "
            f"so a $ref to '#{name}' would be ambiguous. Give each anchor one schema.",
            tool=tool,
        )
    for path, ref, target in found.refs:
        if ref == "" and path[-1] == "$ref":
            raise ToolDefinitionError(
                f"{prefix}: at {_pointer(path)}, $ref '' (the schema itself) is read otherwise by the validation "
                "backends (jsonschema-rs takes it as any value); write '#'.",
                tool=tool,
            )
        if not found.resolves(target):
            raise ToolDefinitionError(f"{prefix}: at {_pointer(path)}, $ref {ref!r} points to nothing in the schema.", tool=tool)
        node = found.target(target)
        if not isinstance(node, (dict, bool)):  # ("#/properties/y/type": a string, no schema)
            what = "an array" if isinstance(node, list) else f"{json_type(node)} {_short(node)}"
            raise ToolDefinitionError(
                f"{prefix}: at {_pointer(path)}, $ref {ref!r} points to {what}, not a schema (an object or a boolean).",
                tool=tool,
            )
    loop = _ref_loop(copy, found)
    if loop is not None:
        raise ToolDefinitionError(
            f"{prefix}: at {_pointer(loop[0])}, $ref {loop[1]!r} leads back to itself through references alone, so no "
            "value could ever be checked against it (the validation backends would disagree, or recurse without end). "
            "Point it to a schema that says what the value is.",
            tool=tool,
        )
    empty = _empty_enum(copy)
    if empty is not None:  # valid JSON Schema that no value matches: as a $ref loop, refused while it can be fixed
        raise ToolDefinitionError(
            f"{prefix}: at {_pointer(empty)}, the enum is empty, so no value could ever match it. "
            "List the values it allows (or drop the enum).",
            tool=tool,
        )
    for path, pattern in found.patterns:
        problem = _pattern_problem(pattern)
        if problem is not None:
            raise ToolDefinitionError(
                f"{prefix}: at {_pointer(path)}, {pattern!r} is not a supported regular expression ({problem}). "
                "Patterns are ECMA-262 as jsonschema-rs reads them; both validation backends accept exactly those.",
                tool=tool,
            )
    bad = _bad_defaults(copy, found, 1) if defaults and found.defaults else []
    if bad:
        path, why = bad[0]
        raise ToolDefinitionError(
            f"{prefix}: at {_pointer((*path, 'default'))}, the default does not match the schema that gives it ({why}). "
            "A default must be a value its schema accepts: the validation plugin fills defaults in for properties a "
            "model leaves out, and the tool receives them. Fix the default or the schema.",
            tool=tool,
        )
    return copy


def _empty_enum(schema: Mapping[str, Any], *, built: bool = False) -> tuple[Any, ...] | None:
    """Where an empty ``enum`` makes every call impossible: at the root or a required property's schema, or an
    ``allOf`` member of one. One under ``not``, ``anyOf``, ``oneOf`` or ``if`` may leave other values
    (``{"not": {"enum": []}}`` takes any), and an optional property may be left out, so neither is an error; nor is
    one behind a ``$ref``. With ``built`` (a schema inferred from a signature, whose objects say ``"type": "object"``
    and whose ``$ref``s are ``#/$defs/Name``), also a required property of a required object, through those
    ``$ref``s: a memberless Enum as a required field of a dataclass, TypedDict or pydantic model argument."""
    defs = schema.get("$defs")

    def at(node: Any, path: tuple[Any, ...], seen: frozenset[str]) -> tuple[Any, ...] | None:
        if not isinstance(node, Mapping):
            return None
        if node.get("enum") == []:
            return (*path, "enum")
        members = node.get("allOf")
        places = [((*path, "allOf", i), m) for i, m in enumerate(members)] if isinstance(members, list) else []
        if not path or (built and node.get("type") == "object"):
            props, required = node.get("properties"), node.get("required")
            needed = [name for name in required if isinstance(name, str)] if isinstance(required, list) else []
            places += [((*path, "properties", n), props[n]) for n in needed if isinstance(props, Mapping) and n in props]
        ref = node.get("$ref")
        if built and isinstance(ref, str) and ref.startswith("#/$defs/") and ref not in seen and isinstance(defs, Mapping):
            places.append((("$defs", ref[8:]), defs.get(ref[8:])))
            seen |= {ref}  # (a model that holds itself: each definition is followed once per chain)
        return next((where for p, sub in places if (where := at(sub, p, seen)) is not None), None)

    return at(schema, (), frozenset())


def _ref_loop(schema: JSONSchema, found: _Found) -> tuple[tuple[Any, ...], str] | None:
    """The first ``$ref`` (its path and text) from which ``$ref``s alone lead back to a schema met on the way
    (``{"$ref": "#/properties/x"}`` at ``properties.x``; ``$defs`` that point to each other; ``"$ref": "#"`` at
    the root): each applies to the same value, so checking it never ends. None when every chain ends."""
    holding: dict[int, tuple[tuple[Any, ...], str, str]] = {}  # the schema holding a $ref -> (its path, ref, target)
    for path, ref, target in found.refs:
        if path and path[-1] == "$ref":
            try:
                node = functools.reduce(operator.getitem, path[:-1], schema)
            except (KeyError, IndexError, TypeError):
                continue
            holding[id(node)] = (path, ref, target)
    ends: set[int] = set()  # schemas whose chain of $refs is known to end (each chain is followed once: linear)
    for start in holding:
        chain: set[int] = set()
        at: int | None = start
        while at is not None and at not in ends:
            if at in chain:
                return holding[at][0], holding[at][1]
            chain.add(at)
            step = holding.get(at)
            pointed = None if step is None else found.target(step[2])
            at = id(pointed) if isinstance(pointed, dict) else None
        ends.update(chain)
    return None


def without_bad_defaults(schema: Any) -> tuple[Any, list[str]]:
    """A copy of ``schema`` without the ``default``s the schemas that give them refuse, and where each was.

    For a schema written elsewhere (an MCP server's tool): the tool is kept, and no default its
    own schema refuses is filled in (the remote applies its own when the argument is absent).
    What the definition checks refuse anyway (not JSON, an unknown or remote reference), and a
    schema with more than 32 such defaults, come back unchanged, for them to say so.

    One walk and one check find them all: a ``default`` is an annotation, so dropping one
    changes no other's verdict (a ``$ref`` into a default's value, which dropping it would
    break, is refused by the definition check either way).
    """
    if not isinstance(schema, Mapping):
        return schema, []
    try:
        copy = _copy_json(schema, "parameters", "")
    except ToolDefinitionError:
        return schema, []
    dialect = _dialect(copy.get("$schema"))
    if dialect is None:
        return schema, []
    found = _walk(copy, dialect)
    if found.remote or found.malformed or not found.defaults:
        return schema, []
    bad = _bad_defaults(copy, found, _MAX_DROPPED + 1)
    if not bad or len(bad) > _MAX_DROPPED:  # past the bound the definition check refuses it, naming the first
        return schema, []
    for path, _ in bad:
        del functools.reduce(operator.getitem, path, copy)["default"]
    return copy, [_pointer((*path, "default")) for path, _ in bad]


#: The most defaults :func:`without_bad_defaults` drops from one schema.
_MAX_DROPPED = 32


#: The URI the checks of defaults give a schema that has references (relative ``$id``s resolve against it).
_DEFAULTS_BASE = "json-schema:///harness-one/parameters"
#: References that resolve alike in the root and in a schema holding only the root's ``$defs`` (and ``definitions``).
_DEFS_REFS = ("#/$defs/", "#/definitions/")
#: What a JSON pointer keeps as it is in a URI fragment (the rest is percent-encoded: ``#``, ``%``, spaces, ...).
_POINTER_SAFE = "/~!$&'()*+,;=:@"
_PLAIN_POINTER = re.compile(r"[A-Za-z0-9/~!$&'()*+,;=:@._-]*")


def _fragment(path: tuple[Any, ...]) -> str:
    """The URI fragment naming the schema at ``path`` (``#/properties/a%20b``)."""
    pointer = _pointer(path)[1:]
    return "#" + (pointer if _PLAIN_POINTER.fullmatch(pointer) else quote(pointer, safe=_POINTER_SAFE))


def _bad_defaults(schema: JSONSchema, found: _Found, most: int, *, formats: bool = False) -> list[tuple[tuple[Any, ...], str]]:
    """The first ``most`` ``default``s (in walk order) the schemas that give them refuse (``format`` asserted
    only with ``formats``), and why.

    The one way both the definition check (which names the first) and :func:`without_bad_defaults`
    (which drops them) find bad defaults. Past those :func:`_plainly_valid` vouches for, one
    validator checks them all, each schema under its index in ``properties``: the schema itself,
    with the root's ``$defs`` when its references all point there, else a ``$ref`` to where it is
    in the registered root (anchors, ids and other references resolve as they do there).
    """
    located = [(path, functools.reduce(operator.getitem, path, schema)) for path in found.defaults]
    unsure = [(path, node) for path, node in located if not _plainly_valid(node, node["default"], found)]
    if not unsure:
        return []
    paths = [path for path, _ in unsure]
    nodes = [node for _, node in unsure]
    rs = _rust()
    if rs is None:  # the fallback without jsonschema-rs
        from jsonschema import exceptions, validators

        cls = validators.validator_for(schema, default=validators.Draft202012Validator)
        root = cls(schema, format_checker=cls.FORMAT_CHECKER if formats else None)
        bad: list[tuple[tuple[Any, ...], str]] = []
        for path, node in zip(paths, nodes):
            error = exceptions.best_match(root.evolve(schema=node).iter_errors(node["default"]))
            if error is not None:
                bad.append((path, error.message[:200]))
                if len(bad) == most:
                    break
        return bad
    # The patterns as calls are checked (in a pattern with lookaround, \w is ASCII there, not Unicode).
    rewritten, moved = _rust_rewrite(schema, frozenset())
    where = paths
    written: dict[str, str] = {}  # each rewritten pattern's original: what a refusal quotes (the author wrote it)
    if rewritten is not schema:
        written = {
            rust_pattern(node["pattern"]): node["pattern"]
            for node, _ in schema_objects(schema)
            if isinstance(node.get("pattern"), str)
        }
        schema, where = rewritten, [moved(path) for path in paths]
        nodes = [functools.reduce(operator.getitem, path, schema) for path in where]
    instance = {str(i): node["default"] for i, node in enumerate(nodes)}
    registry = None
    members: list[Any] = nodes
    wrapper: JSONSchema = {key: schema[key] for key in ("$schema", "$defs", "definitions") if key in schema}
    if found.anchors or len(found.resources) > 1 or not all(ref.startswith(_DEFS_REFS) for _, ref, _ in found.refs):
        registry = rs.Registry([(_DEFAULTS_BASE, schema)])
        members = [{"$ref": _DEFAULTS_BASE + _fragment(path)} for path in where]
        wrapper = {}
    wrapper["properties"] = {str(i): member for i, member in enumerate(members)}
    try:
        validator = rs.validator_for(wrapper, registry=registry, validate_formats=formats)
    except Exception:  # pragma: no cover - what jsonschema-rs cannot compile, validation reports
        return []
    if validator.is_valid(instance):
        return []
    why: dict[int, str] = {}  # the index of each refused default: its first error's message
    for error in validator.iter_errors(instance):
        message, pattern = error.message, getattr(error.kind, "pattern", None)
        if type(pattern) is str and pattern in written:
            message = message.replace(pattern, written[pattern])
        why.setdefault(int(error.instance_path[0]), message[:200])
    return [(paths[i], why[i]) for i in sorted(why)[:most]]


#: Keywords that never refuse a value.
_ANNOTATIONS = frozenset(
    {"default", "description", "title", "examples", "deprecated", "readOnly", "writeOnly", "$comment", "$anchor"}
)
#: The Python classes of the JSON values of each type, as every draft reads them (2.0 aside).
_TYPE_CLASSES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (_NoneType,),
    "object": (dict,),
    "array": (list,),
}
_SCALAR_CLASSES = (str, int, float, bool, _NoneType)
#: Keywords that apply to one kind of value only (every draft), each with the Python classes of that kind.
_KIND_KEYWORDS: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(
        (
            "items",
            "prefixItems",
            "additionalItems",
            "minItems",
            "maxItems",
            "uniqueItems",
            "contains",
            "minContains",
            "maxContains",
            "unevaluatedItems",
        ),
        (list,),
    ),
    **dict.fromkeys(
        (
            "properties",
            "required",
            "additionalProperties",
            "patternProperties",
            "minProperties",
            "maxProperties",
            "propertyNames",
            "dependentRequired",
            "dependentSchemas",
            "dependencies",
            "unevaluatedProperties",
        ),
        (dict,),
    ),
    **dict.fromkeys(("minLength", "maxLength", "pattern", "format"), (str,)),
}


def _plainly_valid(node: Any, value: Any, found: _Found | None, depth: int = 0) -> bool:
    """Whether ``node`` surely accepts ``value`` without a validator: it says no more than a ``type`` (or
    a list of them), an ``enum`` of scalars, a ``minimum``, a ``maximum``, an ``anyOf`` one of whose
    members does, keywords of another kind of value than ``value`` (``items`` of a ``null``) and a
    ``$ref`` within the schema (``found``, None for none) to one that does, and ``value`` fits them all.
    False is "not sure" (a validator decides)."""
    if not isinstance(node, dict):
        return node is True
    kind = type(value)
    for key, expected in node.items():
        if key == "type":
            if type(expected) is str:
                classes = _TYPE_CLASSES.get(expected)
                if classes is None or kind not in classes:  # (bool is no int here: type() is exact)
                    return False
            elif not isinstance(expected, list) or not any(
                type(name) is str and kind in _TYPE_CLASSES.get(name, ()) for name in expected
            ):
                return False
        elif key == "anyOf":
            if not isinstance(expected, list) or not any(_plainly_valid(m, value, found, depth + 1) for m in expected):
                return False
        elif key in _KIND_KEYWORDS:
            if kind in _KIND_KEYWORDS[key]:  # (a keyword of this kind of value: a validator decides)
                return False
        elif key == "enum":
            if kind not in _SCALAR_CLASSES or not isinstance(expected, list):
                return False
            if not any(type(e) is kind and e == value for e in expected):
                return False
        elif key in ("minimum", "maximum"):  # (>= and <= in every draft)
            if kind not in (int, float) or type(expected) not in (int, float):
                return False
            if value < expected if key == "minimum" else value > expected:
                return False
        elif key == "$ref":  # a pointer or an anchor in a schema with no ids: what the walk resolves
            if (
                found is None
                or not isinstance(expected, str)
                or not expected.startswith("#")
                or len(found.resources) > 1
                or depth > 8
            ):
                return False
            try:
                target = found.node("", expected[1:])
            except KeyError:
                return False
            if not _plainly_valid(target, value, found, depth + 1):
                return False
        elif key not in _ANNOTATIONS:
            return False
    return True


def _surrogate_at(node: Any, depth: int) -> list[Any] | None:
    """Where in JSON data ``node`` a lone surrogate stands, as the path's steps in reverse (``[]``: ``node``
    itself), or None. ASCII text is passed at once, and a path is built only on the way back from one found."""
    if isinstance(node, str):
        return None if node.isascii() or _SURROGATE.search(node) is None else []
    if depth > 256:  # deeper than a schema check takes: the definition check refuses it
        return None
    if isinstance(node, (list, tuple)):
        for index, item in enumerate(node):
            if not isinstance(item, _LEAVES) and (found := _surrogate_at(item, depth + 1)) is not None:
                found.append(index)
                return found
    elif isinstance(node, dict) or (not isinstance(node, _LEAVES) and isinstance(node, Mapping)):
        for key, item in node.items():
            if isinstance(key, str) and not key.isascii() and _SURROGATE.search(key):
                return [key]
            if not isinstance(item, _LEAVES) and (found := _surrogate_at(item, depth + 1)) is not None:
                found.append(key)
                return found
    return None


_LEAVES = (int, float, type(None))  # JSON values that hold no text (bool is an int)


def find_surrogate(value: Any) -> str | None:
    """Where a lone surrogate is in ``value`` (a string, or JSON data: its keys and strings): ``""`` for the
    string itself, a JSON pointer (`` at /properties/a``) within data, or None when it holds none."""
    found = _surrogate_at(value, 0)
    if found is None:
        return None
    if isinstance(value, str):
        return ""
    from ._render import escape_surrogates

    return f" at {escape_surrogates(_pointer(tuple(reversed(found))))}"


_SURROGATE = re.compile("[\ud800-\udfff]")


def find_remote_refs(schema: Any) -> list[str]:
    """Every ``$ref``/``$dynamicRef``/``$schema`` that points outside the schema and its draft's metaschemas."""
    if not isinstance(schema, (dict, bool)):
        return []
    if isinstance(schema, bool):
        return []
    dialect = _dialect(schema.get("$schema"))
    found = _walk(schema, dialect or 2020)
    remote = [ref for _, ref in found.remote]
    if dialect is None:
        remote.append(str(schema["$schema"]))
    return sorted(set(remote))


def _pointer(path: tuple[Any, ...]) -> str:
    return "#" + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _copy_json(schema: Mapping[str, Any], prefix: str, tool: str) -> JSONSchema:
    def copy(value: Any, path: tuple[Any, ...]) -> Any:
        kind = type(value)
        if kind is str or kind is bool or value is None:
            return value
        if kind is int or kind is float:
            if not _json_scalar(value):
                shown = _shown_value(value)
                raise ToolDefinitionError(f"{prefix}: at {_pointer(path)}, {shown} is not a JSON number.", tool=tool)
            return value
        if len(path) >= _MAX_SCHEMA_DEPTH:
            raise ToolDefinitionError(
                f"{prefix}: nested more than {_MAX_SCHEMA_DEPTH} levels deep (at {_pointer(path[:8])}/...).", tool=tool
            )
        if isinstance(value, Mapping):
            out = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ToolDefinitionError(
                        f"{prefix}: at {_pointer(path)}, keys must be strings, not {type(key).__name__} {key!r}.", tool=tool
                    )
                out[str(key)] = copy(item, (*path, key))
            return out
        if isinstance(value, (list, tuple)):
            return [copy(item, (*path, i)) for i, item in enumerate(value)]
        if isinstance(value, str):  # subclasses, such as members of a str Enum
            return "" + value
        if isinstance(value, (int, float)):
            return copy(float(value) if isinstance(value, float) else int(value), path)
        raise ToolDefinitionError(f"{prefix}: at {_pointer(path)}, expected a JSON value, got {type(value).__name__}.", tool=tool)

    result: JSONSchema = copy(schema, ())
    return result


def _dialect(uri: Any) -> int | None:
    """The draft a ``$schema`` names (2020-12 when absent), or None for anything else."""
    if uri is None:
        return 2020
    if not isinstance(uri, str):
        return None
    return _DIALECTS.get(uri.rstrip("#"))


@dataclass
class _Found:
    """What one walk over a schema found: resources, anchors, references and patterns."""

    resources: dict[str, Any]
    #: (resource URI, anchor name) -> where the first schema declaring it is.
    anchors: dict[tuple[str, str], tuple[Any, ...]]
    refs: list[tuple[tuple[Any, ...], str, str]]
    remote: list[tuple[tuple[Any, ...], str]]
    patterns: list[tuple[tuple[Any, ...], str]]
    #: An anchor declared again in its resource: (where, name, where it was first declared).
    doubled: list[tuple[tuple[Any, ...], str, tuple[Any, ...]]] = dataclasses.field(default_factory=list)
    #: Where the schemas that give a ``default`` are.
    defaults: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)
    #: A ``$id`` or reference that is no URI reference (RFC 3986): (where, the text).
    malformed: list[tuple[tuple[Any, ...], str]] = dataclasses.field(default_factory=list)

    def anchor(self, uri: str, name: str, path: tuple[Any, ...]) -> None:
        first = self.anchors.setdefault((uri, name), path)
        if first != path:
            self.doubled.append((path, name, first))

    def resolves(self, target: str) -> bool:
        uri, fragment = urldefrag(target)
        if uri not in self.resources:
            return True  # a bundled metaschema (anything else was refused as remote)
        try:
            self.node(uri, fragment)
        except KeyError:
            return False
        return True

    def target(self, target: str) -> Any:
        """The node a reference that :meth:`resolves` names; ``True`` for a bundled metaschema."""
        uri, fragment = urldefrag(target)
        return self.node(uri, fragment) if uri in self.resources else True

    def node(self, uri: str, fragment: str) -> Any:
        """The schema ``fragment`` (a JSON pointer or an anchor) names in the resource ``uri``, else ``KeyError``."""
        if fragment and not fragment.startswith("/"):
            return functools.reduce(operator.getitem, self.anchors[(uri, fragment)], self.resources[""])
        return json_pointer(self.resources[uri], fragment)


def _join(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (a URI without a fragment)."""
    if ref.startswith("#"):
        return base + ref
    return urljoin(base, ref)


#: The keywords :func:`_walk` reads in a schema besides its subschemas.
_MARKS = frozenset(
    {"id", "$id", "$anchor", "$dynamicAnchor", "$schema", "$ref", "$dynamicRef", "$recursiveRef", "pattern", "default"}
)


def _uri_reference(text: str) -> bool:
    """Whether ``text`` is a URI reference (RFC 3986): what jsonschema-rs reads in ``$id`` and ``$ref``
    (a space, a non-ASCII letter, ``%zz`` or ``http://[x/`` is not; percent-encode them)."""
    from rfc3986_validator import validate_rfc3986  # type: ignore[import-untyped]

    return bool(validate_rfc3986(text, rule="URI_reference"))


def _id_key(dialect: int) -> str:
    """The keyword that gives a schema its URI (or, as ``"#name"``, an anchor): draft-04's ``id``, later ``$id``."""
    return "id" if dialect == 4 else "$id"


def _walk(schema: Any, dialect: int) -> _Found:
    """Walk ``schema`` by keyword: property names are names (a property may be called ``enum``), data is data."""
    found = _Found(resources={"": schema}, anchors={}, refs=[], remote=[], patterns=[])
    id_key = _id_key(dialect)
    bundled = _BUNDLED[dialect]

    def known(uri: str) -> bool:
        return uri.rstrip("#") in bundled

    def visit(node: Any, path: tuple[Any, ...], base: str) -> None:
        if not isinstance(node, dict):
            return
        if not _MARKS.isdisjoint(node):  # most schemas have no id, anchor, reference, pattern or default: no look-ups
            ident = node.get(id_key)
            if isinstance(ident, str) and not _uri_reference(ident):
                found.malformed.append(((*path, id_key), ident))
            elif isinstance(ident, str) and not (dialect <= 7 and "$ref" in node):  # drafts 4-7 ignore $ref's siblings
                uri, fragment = urldefrag(_join(base, ident))
                if uri != base:  # an embedded resource (base: a URI without a fragment)
                    base = uri
                    found.resources.setdefault(uri, node)
                if fragment:  # "#name" as an id: a plain-name anchor (drafts 4-7)
                    found.anchor(uri, fragment, path)
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(key), str):
                    found.anchor(base, node[key], path)
            if path and isinstance(node.get("$schema"), str) and _dialect(node["$schema"]) is None:
                found.remote.append(((*path, "$schema"), node["$schema"]))
            for key in ("$ref", "$dynamicRef", "$recursiveRef"):
                ref = node.get(key)
                if isinstance(ref, str):
                    uri_reference = _uri_reference(ref)
                    if not uri_reference:
                        found.malformed.append(((*path, key), ref))
                    if uri_reference or ref.startswith("#"):  # ('#/$defs/a b' still names a place, for export)
                        pending.append(((*path, key), ref, _join(base, ref)))
            if isinstance(node.get("pattern"), str):
                found.patterns.append(((*path, "pattern"), node["pattern"]))
            if "default" in node:
                found.defaults.append(path)
        for key, value in node.items():
            if key in _SUBSCHEMA:
                if isinstance(value, list):  # items as an array (drafts before 2020-12)
                    for i, sub in enumerate(value):
                        visit(sub, (*path, key, i), base)
                else:
                    visit(value, (*path, key), base)
            elif key in _SUBSCHEMA_ARRAYS and isinstance(value, list):
                for i, sub in enumerate(value):
                    visit(sub, (*path, key, i), base)
            elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
                for name, sub in value.items():
                    if key == "patternProperties":
                        found.patterns.append(((*path, key, name), name))
                    visit(sub, (*path, key, name), base)
            elif key == "dependencies" and isinstance(value, dict):
                for name, sub in value.items():
                    visit(sub, (*path, key, name), base)
            elif key not in _DATA and isinstance(value, (dict, list)):
                unknown(value, (*path, key), base)

    def unknown(node: Any, path: tuple[Any, ...], base: str) -> None:
        """Values of unknown keywords are not schemas, but a remote ``$ref`` in one is still refused."""
        if isinstance(node, list):
            for i, item in enumerate(node):
                unknown(item, (*path, i), base)
        elif isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and _uri_reference(ref):  # (one that is no URI is no reference: data)
                outside.append(((*path, "$ref"), ref, _join(base, ref)))
            for key, value in node.items():
                unknown(value, (*path, key), base)

    pending: list[tuple[tuple[Any, ...], str, str]] = []
    outside: list[tuple[tuple[Any, ...], str, str]] = []
    visit(schema, (), "")
    for path, ref, target in pending:  # resources found anywhere in the walk count as local
        uri = urldefrag(target)[0]
        if uri in found.resources:
            found.refs.append((path, ref, target))
        elif not known(uri):
            found.remote.append((path, ref))
    for path, ref, target in outside:
        uri = urldefrag(target)[0]
        if uri not in found.resources and not known(uri):
            found.remote.append((path, ref))
    return found


# The metaschemas both backends resolve offline: those of the schema's own draft (jsonschema-rs
# bundles no other draft's; a reference to one is refused like any remote reference).
_BUNDLED = {
    2020: frozenset(
        ["https://json-schema.org/draft/2020-12/schema"]
        + [
            f"https://json-schema.org/draft/2020-12/meta/{name}"
            for name in (
                "applicator",
                "content",
                "core",
                "format-annotation",
                "format-assertion",
                "meta-data",
                "unevaluated",
                "validation",
            )
        ]
    ),
    2019: frozenset(
        ["https://json-schema.org/draft/2019-09/schema"]
        + [
            f"https://json-schema.org/draft/2019-09/meta/{name}"
            for name in ("applicator", "content", "core", "format", "meta-data", "validation")
        ]
    ),
    7: frozenset(["http://json-schema.org/draft-07/schema"]),
    6: frozenset(["http://json-schema.org/draft-06/schema"]),
    4: frozenset(["http://json-schema.org/draft-04/schema"]),
}


def _rust() -> Any:
    """The jsonschema-rs module, or None where it cannot be imported (the pure-Python fallback)."""
    try:
        import jsonschema_rs
    except ImportError:  # pragma: no cover - jsonschema-rs is a dependency
        return None
    return jsonschema_rs


def _check_metaschema(schema: JSONSchema, prefix: str, tool: str) -> None:
    rs = _rust()
    if rs is not None:
        try:
            rs.meta.validate(schema)
            return
        except rs.ValidationError as exc:
            where = _pointer(tuple(exc.instance_path))
            advice = _type_advice(tuple(exc.instance_path), exc.instance)
            raise ToolDefinitionError(
                f"{prefix} are not valid JSON Schema: at {where}, " + (advice or f"keyword '{exc.kind.name}': {exc.message}"),
                tool=tool,
            ) from None
        except Exception:  # pragma: no cover - a metaschema jsonschema-rs cannot load; let jsonschema decide
            pass
    from jsonschema import exceptions

    error = exceptions.best_match(_metaschema_validator(_dialect(schema.get("$schema")) or 2020).iter_errors(schema))
    if error is not None:
        where = _pointer(tuple(error.absolute_path))
        advice = _type_advice(tuple(error.absolute_path), error.instance)
        raise ToolDefinitionError(
            f"{prefix} are not valid JSON Schema: at {where}, " + (advice or f"keyword '{error.validator}': {error.message}"),
            tool=tool,
        )


_JSON_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
#: Python's names (and a few other languages') for the JSON Schema types.
_TYPE_ALIASES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "dict": "object",
    "list": "array",
    "tuple": "array",
    "None": "null",
    "NoneType": "null",
    "double": "number",
    "long": "integer",
}
#: Keywords whose values are maps of names to schemas: a "type" there is a name, not the keyword.
_NAMED_SCHEMAS = frozenset(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"))


def _type_advice(path: tuple[Any, ...], instance: Any) -> str | None:
    """What to write instead of a ``"type"`` that names no JSON Schema type (``"int"``), else None."""
    if not path or path[-1] != "type" or (len(path) > 1 and path[-2] in _NAMED_SCHEMAS):
        return None
    names = instance if isinstance(instance, list) else [instance]
    for name in names:
        if isinstance(name, str) and name not in _JSON_TYPES:
            from ._suggest import closest

            lower = name.lower()
            use = _TYPE_ALIASES.get(name) or _TYPE_ALIASES.get(lower) or (lower if lower in _JSON_TYPES else None)
            if use is None:  # a typo ("strin")
                use = closest(lower, _JSON_TYPES)
            hint = f'use "{use}"' if use else "use one of " + ", ".join(f'"{t}"' for t in _JSON_TYPES)
            return f'"type": {json.dumps(name)} is not a JSON Schema type; {hint}.'
    return None


@functools.cache
def _metaschema_validator(dialect: int) -> Any:
    from jsonschema import validators

    uri = next(u for u, d in _DIALECTS.items() if d == dialect)
    cls = validators.validator_for({"$schema": uri})
    return cls(cls.META_SCHEMA)


@functools.lru_cache(maxsize=4096)
def _pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is refused (as jsonschema-rs reads ECMA-262), or None."""
    rs = _rust()
    if rs is None:  # pragma: no cover - fallback without jsonschema-rs
        import regex

        try:
            regex.compile(pattern)
        except regex.error as exc:
            return str(exc)
        return None
    try:
        rs.validator_for({"pattern": pattern})
    except Exception as exc:
        return str(exc).splitlines()[0]
    return _ecma_problem(pattern)


# Letter escapes ECMA-262 defines; jsonschema-rs also reads others (\A, \e, \N, \h, ...) its own way.
_ECMA_LETTERS = frozenset("dDwWsSbBfnrtvcxupPk")
_QUANTIFIER = re.compile(r"[*+?]|\{[0-9]+(?:,[0-9]*)?\}")
_GROUP_NAME = re.compile(r"P?<[A-Za-z_$][A-Za-z0-9_$]*>")
_DIGITS = re.compile(r"[1-9][0-9]*")
_FLAGS_ONLY = re.compile(r"([A-Za-z-]*)\)")
_GROUP_PREFIX = re.compile(r"<[=!]|[=!]|([A-Za-z-]*):")
#: The inline flags both backends read alike: ``i`` and ``m`` for the whole pattern, ``i`` in a group.
#: (jsonschema-rs reads ``(?s)`` as nothing, ``(?U)``, ``(?R)``, ``(?x)`` and ``(?u)`` its own way; the
#: ``regex`` module refuses ``(?U)`` and reads ``(?R)`` as recursion; a group's ``m`` changes how
#: the Python backend reads every ``$``.)
_WHOLE_FLAGS = re.compile(r"[im]+")
_GROUP_FLAGS = frozenset({"", "i", "-i"})


def _ecma_problem(pattern: str) -> str | None:
    """What jsonschema-rs accepts but ECMA-262 (and the ``regex`` module) refuses or reads otherwise, or None.

    Refused: a quantifier right after another (``a{2}{3}``, ``a*?+``) or with nothing to repeat
    (``^*``, ``\\b+``, ``(?<!{2})``), the empty classes ``[]`` and ``[^]``, letter escapes
    ECMA-262 does not define (``\\A``, ``\\e``, ``\\N``, ...), a backreference inside the
    group it refers to, inline flags anywhere but at the start, and inline flags other than
    ``(?i)``, ``(?m)``, ``(?im)`` at the start and ``(?i:...)``, ``(?-i:...)`` groups.
    """
    i, n = 0, len(pattern)
    last = "none"  # the previous token: "atom", "quantifier" or "none" (start, group start, |, assertion)
    groups = 0  # capturing groups opened so far
    open_groups: list[int] = []  # the number of each group not yet closed (0: not capturing)
    while i < n:
        c = pattern[i]
        quantifier = _QUANTIFIER.match(pattern, i)
        if quantifier is not None:
            if last != "atom":
                return (
                    "a quantifier right after another quantifier"
                    if last == "quantifier"
                    else "a quantifier with nothing to repeat"
                )
            i = quantifier.end()
            if pattern.startswith("?", i):  # lazy
                i += 1
            last = "quantifier"
            continue
        last = "atom"
        if c == "\\":
            letter = pattern[i + 1 : i + 2]
            if letter.isascii() and letter.isalpha() and letter not in _ECMA_LETTERS:
                return f"\\{letter} is not an ECMA-262 escape"
            digits = _DIGITS.match(pattern, i + 1)
            if digits is not None and int(digits.group()) in open_groups:
                return f"the backreference \\{digits.group()} inside the group it refers to"
            if letter in ("b", "B"):
                last = "none"
            i += 2
            if letter in ("p", "P", "u") and pattern.startswith("{", i):
                end = pattern.find("}", i)
                i = n if end < 0 else end + 1
        elif c == "[":
            if pattern.startswith(("[]", "[^]"), i):
                return "the empty class [] or [^] (write [\\s\\S] for any character)"
            i = _class_end(pattern, i)
        elif c == "(":
            last = "none"
            if not pattern.startswith("(?", i):
                groups += 1
                open_groups.append(groups)
                i += 1
            elif (flags := _FLAGS_ONLY.match(pattern, i + 2)) is not None:  # (?i)
                if i > 0:  # jsonschema-rs applies it from here on, the regex module to the whole pattern
                    return "inline flags such as (?i) anywhere but at the start"
                if not _WHOLE_FLAGS.fullmatch(flags.group(1)):
                    return _flags_problem(f"(?{flags.group()}")
                i = flags.end()
            elif (name := _GROUP_NAME.match(pattern, i + 2)) is not None:
                groups += 1
                open_groups.append(groups)
                i = name.end()
            else:
                prefix = _GROUP_PREFIX.match(pattern, i + 2)
                if prefix is not None and prefix.group(1) is not None and prefix.group(1) not in _GROUP_FLAGS:
                    return _flags_problem(f"(?{prefix.group()}...)")
                open_groups.append(0)
                i = prefix.end() if prefix else i + 2
        else:
            if c == ")" and open_groups:
                open_groups.pop()
            elif c in "|^$":
                last = "none"
            i += 1
    return None


def _flags_problem(written: str) -> str:
    hint = "; '.' never matches a line break: write [\\s\\S] for any character" if "s" in written else ""
    return (
        f"the inline flags {written}: both backends read alike only (?i), (?m) or (?im) at the start "
        f"and (?i:...) or (?-i:...) groups{hint}"
    )


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class that starts at ``start`` (the end of ``pattern`` for one left open)."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i + 1
        i += 1
    return min(i, len(pattern))  # (past a final backslash: ``[\\``)


# ECMA-262's \d, \w, \s and their negations as the contents of a character class, as jsonschema-rs reads them
# (\u{...} for a code point past U+FFFF). \s is ECMA's WhiteSpace and LineTerminator; a negation is the
# complement over every code point.
_ECMA_CLASSES = {
    "d": "0-9",
    "D": "\\x00-\\x2f\\x3a-\\u{10ffff}",
    "w": "0-9A-Za-z_",
    "W": "\\x00-\\x2f\\x3a-\\x40\\x5b-\\x5e\\x60\\x7b-\\u{10ffff}",
    "s": "\\t\\n\\v\\f\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff",
    "S": (
        "\\x00-\\x08\\x0e-\\x1f\\x21-\\x9f\\xa1-\\u167f\\u1681-\\u1fff\\u200b-\\u2027\\u202a-\\u202e"
        "\\u2030-\\u205e\\u2060-\\u2fff\\u3001-\\ufefe\\uff00-\\u{10ffff}"
    ),
}
# What makes jsonschema-rs match with fancy-regex, which reads \d, \w, \s as Unicode classes: a backreference
# (numbered or named) or lookaround. (A false hit, such as an escaped backslash before a digit, only rewrites.)
_FANCY = re.compile(r"\\[1-9]|\\k<|\(\?<?[=!]")
# One item of a character class: an escape (\p{...}, \u{...}, \xhh, \uhhhh, \cX or \ and a character) or a character.
_CLASS_ITEM = re.compile(r"\\[pPu]\{[^}]*\}|\\x[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\c[A-Za-z]|\\.|.", re.DOTALL)


def ecma_classes(pattern: str) -> str:
    """The JSON Schema (ECMA-262) ``pattern`` with ``\\d``, ``\\w``, ``\\s`` and their negations written out as
    the classes ECMA-262 defines (``\\w`` is ``[0-9A-Za-z_]``, ``\\s`` ECMA's white space and line terminators; a
    code point past U+FFFF as ``\\u{...}``), and each ``-`` a character class holds as a character as ``\\-``, so
    a written-out class never becomes a range's end (``[\\w-~]``: ``\\w``, ``-``, ``~``). The same strings match:
    the form to give an engine whose ``\\d``, ``\\w``, ``\\s`` are Unicode classes (jsonschema-rs under lookaround;
    Python's ``regex`` once the rest of ECMA-262's syntax is translated), as the validation plugin does."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            chars = _ECMA_CLASSES.get(pattern[i + 1 : i + 2])
            out.append(pattern[i : i + 2] if chars is None else f"[{chars}]")
            i += 2
        elif c == "[":
            start = i + 2 if pattern.startswith("[^", i) else i + 1
            end = _class_end(pattern, i)
            closed = end > start and pattern[end - 1] == "]"
            out.append(pattern[i:start] + _class_items(pattern[start : end - 1 if closed else end]) + "]" * closed)
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _class_items(body: str) -> str:
    """A class's contents as :func:`ecma_classes` writes them. As jsonschema-rs reads them, a ``-`` right after
    a class escape is a character (``[\\w--a]``: ``\\w``, ``-``, ``-``, ``a``), and so is one with no range to
    make (first, last, or next to a class escape)."""
    items = _CLASS_ITEM.findall(body)
    out: list[str] = []
    i = 0
    while i < len(items):
        item = items[i]
        chars = _ECMA_CLASSES.get(item[1:]) if len(item) == 2 and item[0] == "\\" else None
        if chars is not None or item.startswith(("\\p", "\\P")):
            out.append(item if chars is None else chars)
            i += 1
            if i < len(items) and items[i] == "-":
                out.append("\\-")
                i += 1
        elif i + 2 < len(items) and items[i + 1] == "-" and not _is_class_escape(items[i + 2]):
            out.append(f"{_as_character(item)}-{_as_character(items[i + 2])}")
            i += 3
        else:
            out.append(_as_character(item))
            i += 1
    return "".join(out)


def _is_class_escape(item: str) -> bool:
    return item[:1] == "\\" and (item[1:] in _ECMA_CLASSES or item[1:2] in ("p", "P"))


def _as_character(item: str) -> str:
    return "\\-" if item == "-" else item


def rust_pattern(pattern: str) -> str:
    """The JSON Schema ``pattern`` to give jsonschema-rs so that it matches what ECMA-262 does, as the validation
    plugin gives it and the definition check of defaults reads it: with a backreference or lookaround jsonschema-rs
    reads ``\\d``, ``\\w``, ``\\s`` as Unicode classes, so such a pattern comes back as :func:`ecma_classes`
    writes it; any other, one jsonschema-rs refuses as written or rewritten (its verdict on a pattern stands), or
    any where jsonschema-rs is not installed, comes back as given."""
    rs = _rust()
    return pattern if rs is None or _FANCY.search(pattern) is None else _rewritten_for(pattern, rs)


@functools.lru_cache(maxsize=4096)
def _rewritten_for(pattern: str, rs: Any) -> str:
    """:func:`rust_pattern` of a pattern with a backreference or lookaround (``rs``: jsonschema-rs, a key of the cache)."""
    rewritten = ecma_classes(pattern)
    if rewritten != pattern:
        try:
            for candidate in (pattern, rewritten):
                rs.validator_for({"pattern": candidate})
        except Exception:
            return pattern
    return rewritten


#: Keywords whose value is an object of schemas by name (the names are no keywords; a ``dependencies`` list is none).
_SCHEMA_MAPS = _SUBSCHEMA_MAPS | {"dependencies"}

#: Where a path is in the copy :func:`_rust_rewrite` makes (a ``patternProperties`` name may be rewritten).
_Moved = Callable[[tuple[Any, ...]], tuple[Any, ...]]


def schema_objects(schema: Any) -> Iterator[tuple[dict[str, Any], tuple[Any, ...]]]:
    """Every object in ``schema`` a ``$ref`` can name as a schema, with its path (keys and indexes): those
    :func:`subschemas` finds and those under unknown keywords (``"$ref": "#/components/U"``), never the data of
    ``const``, ``default``, ``enum`` or ``examples``. Where a plugin finds every ``pattern`` a validator compiles."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(schema, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, list):
            stack.extend((sub, (*path, i)) for i, sub in enumerate(node))
        elif isinstance(node, dict):
            yield node, path
            for key, value in node.items():
                if key in _SCHEMA_MAPS:  # (the object holds names, not keywords: only its values are schemas)
                    if isinstance(value, dict):
                        stack.extend((sub, (*path, key, name)) for name, sub in value.items())
                elif key not in _DATA:
                    stack.append((value, (*path, key)))


def rust_schema(schema: Any, *, drop: AbstractSet[str] = frozenset()) -> Any:
    """The schema to give jsonschema-rs for ``schema``, as the validation plugin gives it: every ``pattern`` and
    ``patternProperties`` name (of the objects :func:`schema_objects` finds) as :func:`rust_pattern` gives it,
    and the keywords in ``drop`` removed from each of those objects. ``schema`` itself when nothing changes,
    else a deep copy."""
    return _rust_rewrite(schema, drop)[0]


def _rewrites(node: dict[str, Any], drop: AbstractSet[str]) -> bool:
    pattern, names = node.get("pattern"), node.get("patternProperties")
    return (
        not drop.isdisjoint(node)
        or (isinstance(pattern, str) and rust_pattern(pattern) != pattern)
        or (isinstance(names, dict) and any(rust_pattern(name) != name for name in names))
    )


def _rust_rewrite(schema: Any, drop: AbstractSet[str]) -> tuple[Any, _Moved]:
    """:func:`rust_schema`, and what a path in ``schema`` is in it (for the definition check of defaults)."""
    if not any(_rewrites(node, drop) for node, _ in schema_objects(schema)):
        return schema, lambda path: path
    copied = deepcopy(schema)
    renamed: set[tuple[Any, ...]] = set()  # where the patternProperties with rewritten names are
    for node, path in list(schema_objects(copied)):
        for key in drop:
            node.pop(key, None)
        if isinstance(node.get("pattern"), str):
            node["pattern"] = rust_pattern(node["pattern"])
        names = node.get("patternProperties")
        if isinstance(names, dict) and any(rust_pattern(name) != name for name in names):
            given = {rust_pattern(name): sub for name, sub in names.items()}
            if len(given) == len(names):  # (else two became one: both kept as written)
                node["patternProperties"] = given
                renamed.add((*path, "patternProperties"))
    return copied, lambda path: tuple(rust_pattern(k) if path[:i] in renamed else k for i, k in enumerate(path))


def _not_taken(name: str, says: str, sig: Signature) -> str | None:
    """The problem of a schema property ``name`` the function binds itself (a partial's argument): it has the
    parameter, but its value is set already."""
    if name not in sig.bound:
        return None
    return (
        f"the schema {says} property '{name}', which is bound already ({sig.bound[name]}): its value is the "
        "application's, not the model's to send (drop it from the schema)"
    )


def check_against_signature(schema: Mapping[str, Any], sig: Signature, *, tool: str) -> None:
    """A given schema and the function must agree on what is required, and the schema offer no property the
    function cannot take: a model sending it would make every such call fail, counted against the tool."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    problems = []
    if not sig.accepts_any:
        parameters = f"(parameters: {', '.join(sorted(sig.accepted)) or 'none'})"
        for name in sorted(required - sig.accepted):
            problems.append(
                _not_taken(name, "requires", sig)
                or f"the schema requires property '{name}' but the function has no parameter '{name}' {parameters}"
            )
        for name in sorted(set(props) - required - sig.accepted - {sig.call_param}):
            if props[name] is False:  # a property no value can be given for
                continue
            problems.append(
                _not_taken(name, "offers", sig)
                or f"the schema offers property '{name}' but the function has no parameter '{name}' {parameters}; "
                f"a call that gives it would fail (drop it from the schema, or add the parameter or **kwargs)"
            )
    for name in sorted(sig.required - set(props)):
        problems.append(f"function parameter '{name}' has no default but is not a property of the schema")
    if sig.call_param is not None and sig.call_param in props:
        problems.append(
            f"the schema has property '{sig.call_param}', but that function parameter receives the call itself "
            "(a Call), never an argument; rename one of them"
        )
    if problems:
        raise ToolDefinitionError(f"Tool '{tool}': schema and function disagree: " + "; ".join(problems) + ".", tool=tool)
