"""Tool definitions in the shapes providers expect: OpenAI (Chat Completions and Responses,
strict or not), Anthropic, Gemini and MCP.

``registry.export(format, strict=...)`` caches the result until the registry's tools change.
Where a provider's rules differ from harness-one's, the export says so: OpenAI's strict mode
raises :class:`StrictSchemaError` for a schema it cannot express, Gemini's conversion lists
every keyword it dropped or rewrote, keywords a provider refuses at the top of a schema are
dropped with a note, and tool names a provider would reject are mapped (the :class:`NameMap`
reverses them when calls come back).
"""

from __future__ import annotations

import base64
import functools
import gc
import hashlib
import marshal
import operator
import re
from collections.abc import Iterable, Mapping
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import quote, unquote, urldefrag

from ._errors import ToolDefinitionError
from ._formats import FORMATS, check_format
from ._schema import (
    _MAX_SCHEMA_DEPTH,
    _SUBSCHEMA,
    _SUBSCHEMA_ARRAYS,
    _SUBSCHEMA_MAPS,
    _dialect,
    _Found,
    _id_key,
    _join,
    _pointer,
    _walk,
    path_step,
)
from ._tool import NAME_PATTERN, Tool

__all__ = [
    "ANTHROPIC_PROPERTY",
    "FORMATS",
    "GEMINI_FORMATS",
    "GEMINI_NAME",
    "GEMINI_NAME_MAX",
    "GEMINI_PARAMETER",
    "GEMINI_PARAMETER_MAX",
    "INLINE_BUDGET",
    "Export",
    "NameMap",
    "OPENAI_FORMATS",
    "OPENAI_MAX_DESCRIPTION",
    "OPENAI_MAX_TOOLS",
    "OPENAI_STRICT_LIMITS",
    "StrictSchemaError",
    "anthropic_refused",
    "export_tools",
    "gemini_name",
    "gemini_schema",
    "inline_refs",
    "strict_schema",
    "to_anthropic",
    "to_gemini",
    "to_mcp",
    "to_openai",
    "to_openai_responses",
]

#: Gemini's rule for a function name: a letter or ``_``, then letters, digits, ``_ . : -``; at most 64 characters, as
#: the API's INVALID_ARGUMENT message says (quoted in 2025-26 reports) while google-genai 3.6's FunctionDeclaration
#: docstring says 128: a name within 64 passes both. The conformance kit checks exports against this same rule.
GEMINI_NAME_MAX = 64
GEMINI_NAME = re.compile(rf"^[A-Za-z_][A-Za-z0-9_.:-]{{0,{GEMINI_NAME_MAX - 1}}}\Z")
#: google-genai's documented rule for a parameter name (``FunctionDeclaration.parameters``): a letter or ``_``, then
#: letters, digits and ``_``, at most 64 characters. A name outside it is exported as it is, with a note.
GEMINI_PARAMETER_MAX = 64
GEMINI_PARAMETER = re.compile(rf"^[A-Za-z_][A-Za-z0-9_]{{0,{GEMINI_PARAMETER_MAX - 1}}}\Z")
#: Anthropic's rule for the keys of ``input_schema.properties`` (its 400 error quotes it): letters, digits, ``_ . -``,
#: 1 to 64 characters. One key outside it fails the whole request (an MCP server's ``filter[id]``, ``$top``): such a
#: tool is exported as it is, with a note per key.
ANTHROPIC_PROPERTY = re.compile(r"^[a-zA-Z0-9_.-]{1,64}\Z")
#: OpenAI's limits on one request: more tools, or a longer description, fail the whole request.
OPENAI_MAX_TOOLS, OPENAI_MAX_DESCRIPTION = 128, 1024


class StrictSchemaError(ToolDefinitionError):
    """A schema cannot be expressed in OpenAI's strict mode; ``reasons`` lists where and why."""

    def __init__(self, tool: str, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__(f"Tool '{tool}' cannot be exported in strict mode: " + "; ".join(reasons) + ".", tool=tool)


@dataclass
class NameMap:
    """Exported name -> tool name, for the names a provider's rules forced to change."""

    exported: dict[str, str] = field(default_factory=dict)

    def original(self, name: str) -> str:
        return self.exported.get(name, name)


@dataclass
class Export:
    """An export: the definitions, the name map, per-tool notes, and (strict) the nulls to drop.

    ``not_strict`` lists, for ``strict="auto"``, the tools exported without strict mode and why.
    """

    format: str
    strict: bool | str
    tools: list[dict[str, Any]]
    names: NameMap
    notes: dict[str, list[str]] = field(default_factory=dict)
    nullable: dict[str, Any] = field(default_factory=dict)
    not_strict: dict[str, list[str]] = field(default_factory=dict)
    #: Each tool's share of this export, so a later export of mostly the same tools reuses it.
    _pieces: dict[Tool, _Piece] = field(default_factory=dict, repr=False, compare=False)

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools this export holds, in its order: the registry's names, whatever
        name a provider was shown (what ``dispatch(..., names=export)`` runs)."""
        return [tool.name for tool in self._pieces]

    def copy(self) -> Export:
        """A deep copy: definitions the caller may change without changing any other export or tool."""
        return Export(
            self.format,
            self.strict,
            _copied(self.tools),
            NameMap(dict(self.names.exported)),
            {name: list(notes) for name, notes in self.notes.items()},
            _copied(self.nullable),
            {name: list(reasons) for name, reasons in self.not_strict.items()},
            self._pieces,  # the cached shares, never handed out
        )

    def extended(self, tool: Tool, *, copy: bool = True) -> Export:
        """This export plus ``tool`` (what a registry does when one tool is added): one tool's work.

        An exported name depends on the tool's own name only, so no earlier name changes. The
        added definition is a copy, as :func:`export_tools` makes (``copy=False``: shared).
        """
        out = Export(
            self.format,
            self.strict,
            list(self.tools),
            NameMap(dict(self.names.exported)),
            dict(self.notes),
            dict(self.nullable),
            dict(self.not_strict),
            dict(self._pieces),
        )
        out._add(tool)
        if copy:
            out.tools[-1] = _copied(out.tools[-1])
            if tool.name in out.nullable:
                out.nullable[tool.name] = _copied(out.nullable[tool.name])
        return out

    def _add(self, tool: Tool, reuse: Mapping[Tool, _Piece] | None = None) -> None:
        name = gemini_name(tool.name) if self.format == "gemini" else tool.name
        piece = reuse.get(tool) if reuse else None
        if piece is None or piece.name != name:
            piece = self._piece(tool, name)
        if name != tool.name and self.names.exported.setdefault(name, tool.name) != tool.name:  # a 50-bit hash collision
            raise ToolDefinitionError(
                f"Tools '{self.names.exported[name]}' and '{tool.name}' would both be exported as '{name}'", tool=tool.name
            )
        self._pieces[tool] = piece
        notes = list(piece.notes)
        if self.format.startswith("openai") and len(self.tools) == OPENAI_MAX_TOOLS:
            notes.append(
                f"tool {OPENAI_MAX_TOOLS + 1} of this export: OpenAI refuses more than {OPENAI_MAX_TOOLS} tools in one request"
            )
        self.tools.append(piece.definition)
        if notes:
            self.notes[tool.name] = notes
        if piece.nullable:
            self.nullable[tool.name] = piece.nullable
        if piece.not_strict is not None:
            self.not_strict[tool.name] = piece.not_strict

    def _piece(self, tool: Tool, name: str) -> _Piece:
        if self.format == "gemini":
            definition, said = _gemini(tool, name)
            if name != tool.name:
                said.insert(0, f"name {tool.name!r} exported as {name!r} (Gemini names start with a letter or '_')")
            return _Piece(name, definition, tuple(said))
        if self.format.startswith("openai"):
            strict = bool(self.strict)
            not_strict: list[str] | None = None
            try:
                parameters, nullable, notes = _parameters(tool, strict)
            except StrictSchemaError as exc:
                if self.strict != "auto":
                    raise
                strict, (parameters, nullable, notes) = False, _parameters(tool, False)
                not_strict = exc.reasons
                notes.insert(0, "exported without strict mode: " + "; ".join(not_strict))
            definition = (_chat if self.format == "openai" else _responses)(tool, parameters, strict)
            if len(tool.description) > OPENAI_MAX_DESCRIPTION:
                notes.append(
                    f"description of {len(tool.description)} characters: OpenAI refuses more than {OPENAI_MAX_DESCRIPTION}"
                )
            return _Piece(name, definition, tuple(notes), nullable, not_strict)
        if self.format == "anthropic":
            definition, notes = _anthropic(tool)
            return _Piece(name, definition, tuple(notes))
        return _Piece(name, _mcp(tool))


@dataclass(frozen=True, slots=True)
class _Piece:
    """One tool's share of an export: its (exported) name, definition and what is said about it."""

    name: str
    definition: dict[str, Any]
    notes: tuple[str, ...] = ()
    nullable: Any = None
    not_strict: list[str] | None = None


_Data = TypeVar("_Data")


def _copied(value: _Data) -> _Data:
    """A deep copy of JSON data: by ``marshal`` (C speed) for the plain types, else by ``copy.deepcopy``."""
    collecting = gc.isenabled()
    gc.disable()  # the copy makes many containers and no garbage: collections meanwhile only cost
    try:
        return marshal.loads(marshal.dumps(value))  # type: ignore[arg-type, no-any-return]
    except ValueError:  # a str/dict subclass, an object no JSON holds (in a schema written by hand)
        return deepcopy(value)
    finally:
        if collecting:
            gc.enable()


# --------------------------------------------------------------------------- $ref inlining


#: The most objects and arrays that inlining ``$ref`` may copy into one schema: without a bound,
#: twenty ``$defs`` that each use the previous one twice (3 KB) would inline to 2**20 copies.
INLINE_BUDGET = 20_000

_Position = Literal["one", "list", "map", "data"]
#: What a keyword's value holds: one schema, a list or a map of schemas (the keywords the definition checks walk);
#: every other keyword's value is data (``const``, ``enum``, ``default``, ``examples``, unknown keywords).
#: Draft-07 ``dependencies`` is a map whose schema values are schemas and whose arrays (of names) are data, as the
#: definition checks read it: walking a map's values reads a dict as a schema and copies anything else as data.
_POSITIONS: Mapping[str, _Position] = {
    **dict.fromkeys(_SUBSCHEMA, "one"),
    **dict.fromkeys(_SUBSCHEMA_ARRAYS, "list"),
    **dict.fromkeys(_SUBSCHEMA_MAPS, "map"),
    "dependencies": "map",
}
_DEFS = ("$defs", "definitions")


class _NotInlinable(ValueError):
    """A schema's ``$ref`` cannot be inlined; the message says why."""


def _position(key: str, value: Any) -> _Position:
    """What ``value``, the value of the keyword ``key`` in a schema, holds: a ``list`` or ``map`` only if it is one."""
    if key == "items" and isinstance(value, list):
        return "list"  # a draft-07 tuple
    kind = _POSITIONS.get(key, "data")
    if (kind == "list" and not isinstance(value, list)) or (kind == "map" and not isinstance(value, dict)):
        return "data"
    return kind


class _Document:
    """A schema to inline: its root, its draft, and the definition checks' walk over it (:func:`._schema._walk`:
    resources, anchors, references), made on first need (a schema without ``$ref`` needs none) and once (the Gemini
    fallback reads the walk inlining made)."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.root = dict(schema)
        self.dialect = _dialect(self.root.get("$schema")) or 2020

    def walked(self) -> tuple[_Found, str]:
        """The walk and the root resource's URI (``""``, or the root's own ``$id``); :class:`_NotInlinable` if a
        ``$ref`` lies in an embedded resource (a subschema with its own ``$id``) that resolves it otherwise than the
        root does: inlining resolves every reference against the root."""
        found, uri, embedded = self._walked
        if embedded is not None:
            raise _NotInlinable(embedded)
        return found, uri

    @functools.cached_property
    def _walked(self) -> tuple[_Found, str, str | None]:
        found = _walk(self.root, self.dialect)
        uri = next(uri for uri, node in reversed(found.resources.items()) if node is self.root)
        return found, uri, self._embedded(found, uri)

    def reads(self, path: tuple[Any, ...]) -> bool:
        """Whether the reference the walk found at ``path`` is a ``$ref`` that inlining and the Gemini converter read:
        one reached through schema keywords only (see :func:`_position`), and in drafts 4-7 not through a sibling of
        a ``$ref``. The walk also records those under unknown keywords, in a list under a one-schema keyword
        (``not: [...]``) and under the siblings drafts 4-7 ignore: here they are data, copied or dropped with it."""
        if path[-1] != "$ref":
            return False
        node, at = self.root, 0
        while at < len(path) - 1:
            key = path[at]
            if self.dialect <= 7 and "$ref" in node:
                return False
            kind = _position(key, node[key])
            if kind == "data":
                return False
            node, at = (node[key], at + 1) if kind == "one" else (node[key][path[at + 1]], at + 2)
        return True

    def _embedded(self, found: _Found, uri: str) -> str | None:
        """Where a ``$ref`` read (see :meth:`reads`) lies in an embedded resource that resolves it otherwise than the
        root (``uri``) does: to another target, or, for one remote there, to one in the schema; else ``None``."""
        for path, ref, target in found.refs:
            if _join(uri, ref) != target and self.reads(path):
                return self._in_embedded(found, path, ref)
        for path, ref in found.remote:
            if path[-1] == "$ref" and urldefrag(_join(uri, ref))[0] in found.resources and self.reads(path):
                return self._in_embedded(found, path, ref)
        return None

    def _in_embedded(self, found: _Found, path: tuple[Any, ...], ref: str) -> str:
        """Why inlining refuses the ``$ref`` at ``path``: it lies in the embedded resource the message names (the
        innermost resource the walk found on the way to it)."""
        uris = {id(node): uri for uri, node in found.resources.items()}
        node, resource = self.root, uris[id(self.root)]
        for step in path[:-1]:
            node = node[step]
            resource = uris.get(id(node), resource)
        return (
            f"at {_pointer(path[:-1])}, $ref {ref!r} is in the embedded resource {resource!r} "
            f"(its own {_id_key(self.dialect)}), which inlining does not resolve against"
        )


def _local(found: _Found, uri: str, ref: Any) -> tuple[str, str]:
    """The resource and the fragment (a JSON pointer or an anchor's name) ``ref`` names, resolved against the root
    resource's URI ``uri`` as RFC 3986 resolves a reference (``#...``; ``""``, the root; a path relative to the root's
    ``$id``; an absolute URI), if that resource is in the schema (the root, or a subschema with its own ``$id``); else
    :class:`_NotInlinable` (a reference elsewhere is never fetched)."""
    if isinstance(ref, str):
        if ref.startswith("#"):
            return uri, ref[1:]
        resource, fragment = urldefrag(_join(uri, ref))
        if resource in found.resources:
            return resource, fragment
    raise _NotInlinable(f"$ref {ref!r} is not local")


def _anchor(found: _Found, at: tuple[str, str], ref: str) -> tuple[Any, ...] | None:
    """The path of the schema that ``at``, the resource and fragment ``ref`` names (see :func:`_local`), names when
    the fragment is an anchor's name; ``None`` for a JSON pointer; :class:`_NotInlinable` if no schema, or several,
    declare the anchor in that resource."""
    resource, name = at
    if name[:1] in ("", "/"):
        return None
    first = found.anchors.get((resource, name))
    if first is None:
        raise _NotInlinable(f"$ref {ref!r} points to nothing in the schema")
    declared = 1 + sum(again == name and where == first for _, again, where in found.doubled)
    if declared > 1:
        raise _NotInlinable(f"$ref {ref!r} is ambiguous: {declared} schemas declare the anchor {name!r}")
    return first


def _target(found: _Found, at: tuple[str, str], ref: str) -> Any:
    """The schema ``at``, the resource and fragment ``ref`` names (see :func:`_local`), points to (a JSON pointer or an
    anchor), else :class:`_NotInlinable`."""
    _anchor(found, at, ref)
    try:
        return found.node(*at)
    except KeyError:
        raise _NotInlinable(f"$ref {ref!r} points to nothing in the schema") from None


def _kept(key: str, value: Any, id_key: str) -> bool:
    """Whether inlining keeps the keyword: not ``$ref`` or ``$defs``, nor a name for a ``$ref`` (``$anchor``,
    ``$dynamicAnchor``, an id ``"#x"``; ``id_key``: ``$id``, or draft-04's ``id``)."""
    if key in ("$defs", "definitions", "$ref", "$anchor", "$dynamicAnchor"):
        return False
    return not (key == id_key and isinstance(value, str) and value.startswith("#"))


def _inline(doc: _Document, budget: int) -> dict[str, Any]:
    """The document's schema with every local ``$ref`` replaced by its target and ``$defs`` removed, or
    :class:`_NotInlinable`.

    A ``$ref`` is a JSON pointer (``#/$defs/x``) or a plain name (``#x``: a ``$anchor``, or a
    draft-06/07 ``$id: "#x"``, draft-04 ``id: "#x"``), or either after the root's own ``$id``. In drafts 4-7, which
    ignore what stands beside ``$ref``, the target alone replaces it; later drafts keep the siblings too. Only schema
    positions are read: a property named ``definitions`` stays, and a ``$ref`` (or ``$anchor``) inside ``const``,
    ``enum`` or ``default`` is data. The result is built anew (each object and array a copy), so the schema is read,
    never copied first nor changed.
    """
    id_key = _id_key(doc.dialect)
    siblings = doc.dialect > 7  # whether what stands beside $ref applies
    left = budget

    def deeper(depth: int) -> int:
        """``depth`` + 1: the result's nesting (objects and arrays) at the next level; :class:`_NotInlinable` past the
        nesting a definition's schema may have (a chain of shallow ``$defs`` can nest deeper than any one of them)."""
        if depth >= _MAX_SCHEMA_DEPTH:
            raise _NotInlinable(f"inlining $ref would nest the schema more than {_MAX_SCHEMA_DEPTH} levels deep")
        return depth + 1

    def count(seen: tuple[Any, ...]) -> None:
        nonlocal left
        if seen:  # a copy made by inlining: counted
            left -= 1
            if left < 0:
                raise _NotInlinable(f"inlining $ref would copy more than {budget} schema nodes")

    def data(value: Any, seen: tuple[Any, ...], depth: int) -> Any:
        if isinstance(value, dict):
            count(seen)
            depth = deeper(depth)
            return {k: data(v, seen, depth) for k, v in value.items()}
        if isinstance(value, list):
            count(seen)
            depth = deeper(depth)
            return [data(v, seen, depth) for v in value]
        return value

    def keyword(key: str, value: Any, seen: tuple[Any, ...], depth: int) -> Any:
        kind = _position(key, value)
        if kind == "one":
            return walk(value, seen, depth)
        if kind == "data":
            return data(value, seen, depth)
        count(seen)
        depth = deeper(depth)
        if kind == "list":
            return [walk(v, seen, depth) for v in value]
        return {k: walk(v, seen, depth) for k, v in value.items()}

    def follow(ref: Any, seen: tuple[Any, ...], depth: int, hops: int) -> Any:
        """The target of ``ref`` inlined, reached through ``hops`` references in a row that nest nothing (a chain of
        plain aliases, ``{"$ref": next}``: the nesting depth does not bound it, so it is counted here)."""
        found, uri = doc.walked()
        at = _local(found, uri, ref)
        if at in seen:
            raise _NotInlinable(f"$ref {ref!r} is recursive and cannot be inlined")
        if hops > _MAX_SCHEMA_DEPTH:
            raise _NotInlinable(f"a $ref chain more than {_MAX_SCHEMA_DEPTH} references long cannot be inlined")
        return walk(_target(found, at, ref), (*seen, at), depth, hops)

    def walk(node: Any, seen: tuple[Any, ...], depth: int, hops: int = 0) -> Any:
        """``node`` inlined, where the result nests ``depth`` levels deep (the target of a ``$ref`` stands where the
        ``$ref`` stood: at its depth), reached through ``hops`` references since the last level of nesting."""
        if not isinstance(node, dict):
            return data(node, seen, depth)
        count(seen)
        if "$ref" in node and not siblings:
            return follow(node["$ref"], seen, depth, hops + 1)
        inner = deeper(depth)
        rest = {k: keyword(k, v, seen, inner) for k, v in node.items() if _kept(k, v, id_key)}
        if "$ref" not in node:
            return rest
        target = follow(node["$ref"], seen, depth, hops + 1)
        if isinstance(target, bool):  # true: the keywords beside it alone apply; false: no value is valid
            target = {} if target else {"not": {}}
        return {**target, **rest}

    try:
        return walk(doc.root, (), 0)  # type: ignore[no-any-return]
    except RecursionError:  # (references on one path are bounded only by the stack: each nests or ends a chain)
        raise _NotInlinable("inlining $ref nests deeper than the interpreter's stack allows") from None


def inline_refs(schema: Mapping[str, Any], *, tool: str = "?", budget: int = INLINE_BUDGET) -> dict[str, Any]:
    """``schema`` with every local ``$ref`` replaced by its target and ``$defs`` removed.

    A recursive reference, or one whose inlining would copy more than ``budget`` objects
    and arrays, nest the schema more than 128 levels deep, follow more than 128 references in a
    row that nest nothing (a chain of aliases) or need more stack than the interpreter has, cannot be inlined and
    raises :class:`StrictSchemaError`.
    """
    return _inlined(_Document(schema), tool, budget)


def _inlined(doc: _Document, tool: str, budget: int = INLINE_BUDGET) -> dict[str, Any]:
    """:func:`inline_refs` of a document."""
    try:
        return _inline(doc, budget)
    except _NotInlinable as exc:  # (a RecursionError in :func:`_inline` among them)
        raise StrictSchemaError(tool, [str(exc)]) from None


# --------------------------------------------------------------------------- numeric bounds

#: Each exclusive bound and its inclusive keyword.
_EXCLUSIVE = {"exclusiveMinimum": "minimum", "exclusiveMaximum": "maximum"}


def _is_number(value: Any) -> bool:
    """A JSON number: an int or a float, not a bool (an int in Python)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numeric_exclusive(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with draft-04's boolean ``exclusiveMinimum``/``exclusiveMaximum`` in the numeric form of later drafts:
    ``true`` makes the ``minimum``/``maximum`` beside it exclusive (``{"minimum": 0, "exclusiveMinimum": true}`` is
    ``{"exclusiveMinimum": 0}``); ``false``, or ``true`` without a bound, says nothing and goes."""
    if not any(isinstance(node.get(flag), bool) for flag in _EXCLUSIVE):
        return node
    out = dict(node)
    for flag, bound in _EXCLUSIVE.items():
        if isinstance(out.get(flag), bool) and out.pop(flag) and _is_number(out.get(bound)):
            out[flag] = out.pop(bound)
    return out


# --------------------------------------------------------------------------- OpenAI strict

_STRICT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
    "description", "title", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "$schema", "default",
}  # fmt: skip

#: The string formats OpenAI's strict mode accepts; any other fails the whole request.
OPENAI_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})


def _admits_null(schema: Any) -> bool:
    """Whether ``schema`` lets ``null`` through by its ``type``, ``enum``, ``const`` or an ``anyOf`` branch."""
    if not isinstance(schema, dict):
        return schema is True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if ("const" in schema and schema["const"] is None) or (isinstance(schema.get("enum"), list) and None in schema["enum"]):
        return True
    return any(_admits_null(branch) for branch in schema.get("anyOf") or ())


def _nullable(schema: Any) -> Any:
    """``schema`` that also admits ``null`` (a strict model sends null for an absent value); a boolean schema
    as it is (``convert`` gave its reason: the tool is not strict)."""
    if not isinstance(schema, dict) or _admits_null(schema):
        return schema
    kind = schema.get("type")
    if "const" in schema or ("enum" in schema and not isinstance(kind, str)) or (kind is not None and "anyOf" in schema):
        return {"anyOf": [schema, {"type": "null"}]}  # null added to the type alone (or as a branch) stays refused
    if isinstance(kind, str):
        out = {**schema, "type": [kind, "null"]}
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    if isinstance(kind, list):
        return {**schema, "type": [*kind, "null"]}
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _branch(schema: Any, tree: dict[str, Any]) -> tuple[str, frozenset[str], dict[str, Any]]:
    """An ``anyOf`` branch as the null tree keeps it: its kind, its property names (objects) and its tree."""
    if isinstance(schema, dict) and "properties" in schema:
        return "object", frozenset(schema["properties"]), tree
    return ("array" if isinstance(schema, dict) and "items" in schema else "other"), frozenset(), tree


def _tags(original: Any) -> tuple[tuple[str, Any], ...]:
    """The tags of an ``anyOf`` branch (``original``: before conversion): the properties it allows one value of, by
    ``const`` or an ``enum`` of one, as ``((name, value), ...)``; a strict model following the branch sends that
    value."""
    properties = original.get("properties") if isinstance(original, dict) else None
    return tuple(
        (name, sub["const"] if "const" in sub else sub["enum"][0])
        for name, sub in (properties.items() if isinstance(properties, dict) else ())
        if isinstance(sub, dict) and ("const" in sub or (isinstance(sub.get("enum"), list) and len(sub["enum"]) == 1))
    )


def strict_schema(schema: Mapping[str, Any], *, tool: str = "?") -> tuple[dict[str, Any], dict[str, Any]]:
    """OpenAI strict-mode form of ``schema`` and the tree of properties made nullable.

    Every object gets ``additionalProperties: false`` and lists every property in
    ``required``; a property that was optional becomes nullable (its ``null`` means
    "absent", and :mod:`harness_one.dispatch` drops it so defaults apply, in objects inside
    arrays and ``anyOf`` branches too); ``$ref`` is inlined; ``default``, ``$schema`` and ``$id``
    (draft-04's ``id``: once inlined, no reference reads it) are removed (draft-04's boolean
    ``exclusiveMinimum``/``exclusiveMaximum`` made numeric). Raises
    :class:`StrictSchemaError` for what strict mode cannot express: free-form maps,
    ``additionalProperties`` as a schema, an object or value without a type,
    ``patternProperties``, ``allOf``/``oneOf``/``not``, a top-level ``anyOf``/``enum``,
    conditionals, tuples, a format outside :data:`OPENAI_FORMATS`, a ``required`` name without
    a property, an optional property whose ``null`` is a value and whose default is not,
    recursion, inlining past :data:`INLINE_BUDGET`, past 128 levels of nesting, 128 references in a row that nest
    nothing or the interpreter's stack.

    The tree: ``{"absent": [optional names], "properties": {name: tree}, "items": tree,
    "anyOf": [(kind, property names, tree), ...], "tags": [tags, ...]}``, each key only where there is a null to
    drop; an ``anyOf`` entry's ``kind`` is ``"object"``, ``"array"`` or ``"other"``; ``tags``, beside an ``anyOf``
    where a branch has one, holds each branch's, in order: ``((property name, value), ...)``, for each property the
    branch allows one value of (``const``, or an ``enum`` of one: a tagged union's tag). Equal subtrees are one
    object.
    """
    reasons: list[str] = []
    interned: dict[Any, dict[str, Any]] = {}

    def intern(tree: dict[str, Any]) -> dict[str, Any]:
        """``tree``, or the equal tree met before (its subtrees are already interned: compared by identity), so
        that equal subtrees (copies of one inlined definition) are one object, which the dispatcher compares fast."""
        if not tree:
            return tree
        key = (
            tuple(tree.get("absent", ())),
            tuple((name, id(sub)) for name, sub in tree.get("properties", {}).items()),
            id(tree.get("items")),
            tuple((kind, keys, id(sub)) for kind, keys, sub in tree.get("anyOf", ())),
            repr(tree.get("tags")),
        )
        return interned.setdefault(key, tree)

    def convert(node: Any, path: str) -> tuple[Any, dict[str, Any]]:
        if not isinstance(node, dict):
            if node is True or node is False:
                reasons.append(f"{path}: boolean schemas are not supported")
            return node, {}
        node = _numeric_exclusive(node)
        if isinstance(node.get(id_key), str):  # a URI no reference reads: inlining resolved every $ref
            node = {k: v for k, v in node.items() if k != id_key}
        unsupported = sorted(set(node) - _STRICT_KEYWORDS)
        if unsupported:
            reasons.append(f"{path}: {', '.join(unsupported)} not supported")
        if not {"type", "anyOf", "enum", "const", "properties"} & set(node):
            reasons.append(f"{path}: a schema without a type cannot be strict")
        if "format" in node and node["format"] not in OPENAI_FORMATS:
            reasons.append(
                f"{path}: format {node['format']!r} is not one strict mode accepts ({', '.join(sorted(OPENAI_FORMATS))})"
            )
        out = {k: v for k, v in node.items() if k in _STRICT_KEYWORDS and k not in ("default", "$schema")}
        tree: dict[str, Any] = {}
        if "anyOf" in out:
            branches = [convert(s, f"{path}.anyOf[{i}]") for i, s in enumerate(out["anyOf"])]
            out["anyOf"] = [b for b, _ in branches]
            if any(t for _, t in branches):
                tree["anyOf"] = [_branch(b, t) for b, t in branches]
                tags = [_tags(s) for s in node["anyOf"]]
                if any(tags):
                    tree["tags"] = tags
        if _is_array(node.get("type")) and "items" not in node:
            reasons.append(f"{path}: an array without items cannot be strict")
        if isinstance(out.get("items"), list):
            reasons.append(f"{path}: items as an array (a draft-07 tuple) cannot be strict")
        elif "items" in out:
            out["items"], items = convert(out["items"], f"{path}[]")
            if items:
                tree["items"] = items
        kind = node.get("type")
        if kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node:
            extra = node.get("additionalProperties", True)
            props = node.get("properties") or {}
            if extra not in (False, None) and not props and extra is not True:
                reasons.append(f"{path}: a map of arbitrary keys (additionalProperties) cannot be strict")
            elif extra is True and not props:
                reasons.append(f"{path}: an object without declared properties cannot be strict")
            elif props and isinstance(extra, dict) and extra:
                reasons.append(f"{path}: additionalProperties as a schema (keys beyond the properties) cannot be strict")
            elif props and node.get("additionalProperties") is True:  # said outright (a **kwargs tool): not narrowed away
                reasons.append(f"{path}: additionalProperties true (keys beyond the properties) cannot be strict")
            required = node.get("required") or []
            reasons.extend(f"{path}: required {name!r} has no property" for name in required if name not in props)
            new_props, absent, children = {}, [], {}
            for name, sub in props.items():
                converted, child = convert(sub, path + path_step(name))
                if name not in required:
                    if isinstance(sub, dict) and sub.get("default") is not None and _admits_null(sub):
                        reasons.append(
                            f"{path}{path_step(name)}: null is a value and the default is {sub['default']!r}, "
                            "so an absent value cannot be sent"
                        )
                    converted = _nullable(converted)
                    absent.append(name)
                if child:
                    children[name] = child
                new_props[name] = converted
            out["properties"] = new_props
            out["required"] = list(props)
            out["additionalProperties"] = False
            out.setdefault("type", "object")
            if absent:
                tree["absent"] = absent
            if children:
                tree["properties"] = children
        return out, intern(tree)

    doc = _Document(schema)
    id_key = _id_key(doc.dialect)
    inlined = _inlined(doc, tool)
    reasons += [f"$: {key} at the top level is refused by OpenAI" for key in ("anyOf", "enum") if key in inlined]
    result, nullable = convert(inlined, "$")
    if not reasons:  # (counted on a schema strict mode can take)
        reasons += _past_strict_limits(result)
    if reasons:
        raise StrictSchemaError(tool, reasons)
    return result, nullable


#: OpenAI's documented limits on a strict schema (Structured Outputs, "supported schemas"): objects nested at most
#: ``depth`` levels, ``properties`` object properties in all, ``enum_values`` enum values in all, ``enum_chars``
#: characters of string values in one enum of more than ``long_enum`` values, and ``chars`` characters of property
#: names and enum and const values in all. A schema past one is refused, failing the whole request.
OPENAI_STRICT_LIMITS: Mapping[str, int] = {
    "depth": 10,
    "properties": 5_000,
    "enum_values": 1_000,
    "long_enum": 250,
    "enum_chars": 15_000,
    "chars": 120_000,
}


def _past_strict_limits(schema: dict[str, Any]) -> list[str]:
    """Why a strict schema (as :func:`strict_schema` makes it) is past :data:`OPENAI_STRICT_LIMITS`, if it is."""
    limits = OPENAI_STRICT_LIMITS
    reasons: list[str] = []
    deepest: tuple[int, str] = (0, "$")
    properties = enum_values = chars = 0

    def walk(node: Any, path: str, depth: int) -> None:
        nonlocal deepest, properties, enum_values, chars
        if not isinstance(node, dict):
            return
        if isinstance(node.get("properties"), dict):
            depth += 1
            if depth > deepest[0]:
                deepest = (depth, path)
            properties += len(node["properties"])
            chars += sum(len(name) for name in node["properties"])
            for name, sub in node["properties"].items():
                walk(sub, path + path_step(name), depth)
        if isinstance(node.get("enum"), list):
            values = node["enum"]
            text = sum(len(v) for v in values if isinstance(v, str))
            enum_values += len(values)
            chars += text
            if len(values) > limits["long_enum"] and text > limits["enum_chars"]:
                reasons.append(
                    f"{path}: an enum of {len(values)} values whose text is {text} characters (strict mode allows "
                    f"{limits['enum_chars']} past {limits['long_enum']} values)"
                )
        if isinstance(node.get("const"), str):
            chars += len(node["const"])
        walk(node.get("items"), f"{path}[]", depth)
        for i, branch in enumerate(node.get("anyOf") or ()):
            walk(branch, f"{path}.anyOf[{i}]", depth)

    walk(schema, "$", 0)
    if deepest[0] > limits["depth"]:
        reasons.append(f"{deepest[1]}: objects nested {deepest[0]} levels deep (strict mode allows {limits['depth']})")
    for count, limit, what in (
        (properties, "properties", "object properties"),
        (enum_values, "enum_values", "enum values"),
        (chars, "chars", "characters of property names and enum and const values"),
    ):
        if count > limits[limit]:
            reasons.append(f"$: {count} {what} in all (strict mode allows {limits[limit]})")
    return reasons


def _is_array(kind: Any) -> bool:
    """Whether a ``type`` lets arrays through: ``"array"``, or a list of types holding it."""
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def _lacks_items(node: dict[str, Any]) -> bool:
    """Whether an array schema in ``node`` has no ``items``: a look without paths (most schemas have none)."""
    if "type" in node and _is_array(node["type"]) and "items" not in node:
        return True
    for key, value in node.items():
        kind = _POSITIONS.get(key)
        if kind is None:
            continue
        if kind == "map" and isinstance(value, dict):
            subs: Iterable[Any] = value.values()
        elif isinstance(value, dict):
            if _lacks_items(value):
                return True
            continue
        elif isinstance(value, list):
            subs = value
        else:
            continue
        for sub in subs:
            if isinstance(sub, dict) and _lacks_items(sub):
                return True
    return False


def _with_items(schema: dict[str, Any], provider: str) -> tuple[dict[str, Any], list[str]]:
    """``schema`` with ``items: {}`` (any items: what a missing ``items`` means) added to every array schema without
    ``items``, which ``provider`` refuses, failing the whole request; a note for each. ``schema`` itself when none
    lacks them (no copy)."""
    notes: list[str] = []
    if not _lacks_items(schema):
        return schema, notes

    def walk(node: Any, path: str) -> Any:
        if not isinstance(node, dict):
            return node
        changed: dict[str, Any] = {}
        for key, value in node.items():
            kind = _position(key, value)
            if kind == "one":
                new = walk(value, f"{path}[]" if key == "items" else f"{path}.{key}")
            elif kind == "list":
                new = [walk(sub, f"{path}.{key}[{i}]") for i, sub in enumerate(value)]
                new = value if all(a is b for a, b in zip(new, value, strict=True)) else new
            elif kind == "map":
                at = path if key == "properties" else f"{path}.{key}"
                new = {name: walk(sub, at + path_step(name)) for name, sub in value.items()}
                new = value if all(new[name] is sub for name, sub in value.items()) else new
            else:
                continue
            if new is not value:
                changed[key] = new
        if _is_array(node.get("type")) and "items" not in node:
            changed["items"] = {}
            notes.append(f"{path}: items {{}} (any items) added ({provider} refuses an array without items)")
        return {**node, **changed} if changed else node

    return walk(schema, "$"), notes


# --------------------------------------------------------------------------- Gemini

_GEMINI_KEYWORDS = {
    "type", "format", "description", "nullable", "enum", "properties", "required", "items", "minItems",
    "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern", "anyOf", "title", "default",
    "minProperties", "maxProperties", "propertyOrdering", "example",
}  # fmt: skip

#: The keywords :func:`gemini_schema` converts before reading the rest (items and bounds), or leaves out (``$schema``).
_CONVERTED_APART = frozenset({"type", "items", "prefixItems", "additionalItems", "$schema", *_EXCLUSIVE, *_EXCLUSIVE.values()})

#: The formats Gemini accepts, per type; it refuses the whole request for any other.
GEMINI_FORMATS: Mapping[str, tuple[str, ...]] = {
    "string": ("enum", "date-time"),
    "number": ("float", "double"),
    "integer": ("int32", "int64"),
}


def gemini_schema(schema: Mapping[str, Any], *, tool: str = "?") -> tuple[dict[str, Any], list[str]]:
    """The OpenAPI 3.0 subset Gemini accepts, and a list of what was dropped or rewritten.

    ``$ref`` is inlined; where it cannot be (recursion, past :data:`INLINE_BUDGET`, 128 levels of nesting or 128
    references in a chain), the
    definitions go to Gemini's root ``defs`` and each ``$ref`` becomes its ``ref``, or, if a
    reference points elsewhere, the parameters become any object. No boolean schema is
    emitted (a tuple's ``prefixItems`` become ``items`` of any of their schemas; keywords the draft a subschema is read
    in (:func:`_dialect_in`) does not define, such as draft-07's ``prefixItems``, are dropped), formats
    outside :data:`GEMINI_FORMATS` are dropped, and an enum gets ``type: string``. A ``null``
    allowed (in a type list, an enum, an ``anyOf`` branch) becomes ``nullable`` (an enum of ``null``
    alone or a ``const`` of ``null``: just ``nullable``, noted); ``oneOf`` is
    sent as ``anyOf``, and an ``allOf`` of one schema merged into the schema holding it where
    the two set no keyword but annotations apart (else dropped). Validation
    still uses the full schema in the harness pipeline, so what Gemini cannot express is
    enforced anyway; the notes say where the model was told less.
    """
    notes: list[str] = []
    refs: dict[str, str] = {}  # each $ref kept -> its root definition (where inlining cannot be done)
    doc = _Document(schema)
    dialect = doc.dialect  # the draft of the schema :func:`convert` is in (a subschema's own $schema switches it)

    def items_of(node: dict[str, Any], path: str, out: dict[str, Any]) -> None:
        items, prefix = node.get("items"), node.get("prefixItems")
        if isinstance(items, list):  # a draft-07 tuple
            prefix, items = items, node.get("additionalItems")
        if isinstance(prefix, list):
            shown: list[Any] = []
            for i, sub in enumerate([*prefix, items] if isinstance(items, dict) or items is True else prefix):
                if sub is not False and (converted := convert(sub, f"{path}[{i}]")) not in shown:
                    shown.append(converted)
            if shown:
                out["items"] = shown[0] if len(shown) == 1 else {"anyOf": shown}
            notes.append(f"{path}: prefixItems rewritten as items of any of their schemas")
        elif items is False:
            out["maxItems"] = 0
            notes.append(f"{path}: items false rewritten as maxItems 0")
        elif items is not None:
            out["items"] = convert(items, f"{path}[]")

    def bounds(node: dict[str, Any], path: str, out: dict[str, Any]) -> None:
        """Gemini's ``minimum``/``maximum``: the tighter of the inclusive and the exclusive bound (Gemini has no
        exclusive one, so an exclusive bound that counts is told as inclusive, with a note)."""
        for flag, bound, tighter in (("exclusiveMinimum", "minimum", max), ("exclusiveMaximum", "maximum", min)):
            numbers = [node[k] for k in (bound, flag) if _is_number(node.get(k))]
            notes.extend(
                f"{path}: {k} {node[k]!r} dropped (not a number)" for k in (bound, flag) if k in node and not _is_number(node[k])
            )
            if numbers:
                out[bound] = tighter(numbers)
                if flag in node and out[bound] == node[flag]:  # a tie: the exclusive bound is the tighter
                    notes.append(f"{path}: {flag} rewritten as an inclusive bound")

    def merged_all_of(out: dict[str, Any], whole: dict[str, Any], path: str) -> dict[str, Any]:
        """``out`` with the one schema of its ``allOf`` merged in, where the two set no keyword but annotations
        apart (``out``'s kept); else ``out``, the ``allOf`` dropped (and what converting it noted)."""
        said = len(notes)
        try:
            merged = convert(whole, f"{path}.allOf[0]")
        except _NotInlinable:  # a $ref that is no string: never a Gemini ref
            merged = None
        clash = (
            []
            if merged is None
            else sorted(k for k in merged.keys() & out.keys() if k not in _ANNOTATIONS and merged[k] != out[k])
        )
        if merged is None or clash:
            del notes[said:]
            notes.append(
                f"{path}: allOf dropped" + (f" (it and the schema holding it both set {', '.join(clash)})" if clash else "")
            )
            return out
        notes.append(f"{path}: allOf of one schema merged into the schema holding it")
        return {**merged, **out}

    def convert(node: Any, path: str) -> Any:
        """``node`` converted, in the draft its own ``$schema`` names (:func:`_dialect_in`), else the one around it."""
        nonlocal dialect
        outer = dialect
        if isinstance(node, dict):
            dialect = _dialect_in(node, outer)
        try:
            return converted(node, path)
        finally:
            dialect = outer

    def converted(node: Any, path: str) -> Any:
        if not isinstance(node, dict):
            return {}  # true (false is left out where it stands)
        if "$ref" in node and dialect <= 7:  # (kept where inlining cannot be done) drafts 4-7 ignore its siblings
            node = {"$ref": node["$ref"]}
        node = _numeric_exclusive(_defined(node, dialect, path, notes))
        out: dict[str, Any] = {}
        kind = node.get("type")
        split: list[dict[str, Any]] = []  # the branches a list of types became
        whole: dict[str, Any] | None = None  # the one schema of an allOf
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            if "null" in kind:
                out["nullable"] = True
            if len(others) == 1:
                out["type"] = others[0]
            elif others or "null" not in kind:
                out["anyOf"] = split = [{"type": k} for k in others]
                notes.append(f"{path}: type {kind} rewritten as anyOf")
            else:  # ["null"] alone: nullable, which says nothing of other values
                notes.append(f"{path}: type {kind} rewritten as nullable (any value allowed)")
        elif kind is not None:
            out["type"] = kind
        items_of(node, path, out)
        bounds(node, path, out)
        for key, value in node.items():
            if key in _CONVERTED_APART:
                continue
            if key == "const":
                if value is None:  # null only: Gemini's nullable, which says nothing of other values
                    out["nullable"] = True
                    notes.append(f"{path}: const null rewritten as nullable (any value allowed)")
                elif value == "":
                    notes.append(f"{path}: const '' dropped (Gemini refuses an empty enum value)")
                elif isinstance(value, str):
                    out["enum"] = [value]
                    notes.append(f"{path}: const rewritten as enum")
                else:
                    notes.append(f"{path}: const {value!r} dropped (Gemini enums are strings)")
                continue
            if key == "enum":
                values = value
                if isinstance(value, list) and None in value:  # null allowed: Gemini's nullable, beside the strings
                    out["nullable"] = True
                    values = [v for v in value if v is not None]
                    if not values:  # null only: nullable says nothing of other values
                        notes.append(f"{path}: enum [null] rewritten as nullable (any value allowed)")
                        continue
                if not all(isinstance(v, str) for v in values):
                    notes.append(f"{path}: enum of non-strings dropped (Gemini enums are strings)")
                elif "" not in values:
                    out["enum"] = list(values)
                elif any(values):
                    out["enum"] = [v for v in values if v]
                    notes.append(f"{path}: enum value '' dropped (Gemini refuses an empty enum value)")
                else:
                    notes.append(f"{path}: enum [''] dropped (Gemini refuses an empty enum value)")
                continue
            if key == "properties":
                out["properties"] = {k: convert(v, path + path_step(k)) for k, v in value.items() if v is not False}
                notes.extend(
                    f"{path}{path_step(k)}: a property that must be absent (false) dropped"
                    for k, v in value.items()
                    if v is False
                )
                continue
            if key == "anyOf" or (key == "oneOf" and "anyOf" not in node and isinstance(value, list)):
                if "properties" in node and _constraints_only(value):  # ({"required": ["a"]} names the object's a)
                    notes.append(f"{path}: {key} dropped (its alternatives only constrain this object's properties)")
                    continue
                out["anyOf"] = [convert(v, f"{path}.{key}[{i}]") for i, v in enumerate(value) if v is not False]
                if key == "oneOf":  # Gemini has no oneOf: the model is told any of them, the harness checks exactly one
                    notes.append(f"{path}: oneOf rewritten as anyOf")
                continue
            if key == "allOf" and isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
                whole = value[0]  # one schema: merged into this one after the loop, where they do not disagree
                continue
            if key == "$ref":  # only where inlining cannot be done: refs holds every string $ref read
                if not (isinstance(value, str) and value in refs):  # no string (the walk records none)
                    raise _NotInlinable(f"$ref {value!r} is to no root definition")
                out["ref"] = f"#/defs/{refs[value]}"
                continue
            if key in _GEMINI_KEYWORDS:
                out[key] = value
            else:
                notes.append(f"{path}: {key} dropped")
        if whole is not None:
            out = merged_all_of(out, whole, path)
        if "required" in out:
            known = out.get("properties", {})
            notes.extend(f"{path}: required {name!r} dropped (no such property)" for name in out["required"] if name not in known)
            out["required"] = [name for name in out["required"] if name in known]
        if out.get("properties") == {}:  # Gemini: "properties: should be non-empty for OBJECT type"
            del out["properties"]
        if "format" in out and out["format"] not in GEMINI_FORMATS.get(out.get("type"), ()):  # type: ignore[arg-type]
            notes.append(f"{path}: format {out.pop('format')!r} dropped (Gemini refuses it)")
        if "enum" in out and "type" not in out:
            out["type"] = "string"
        if "type" not in out and not split and _OBJECT_ONLY & set(out):  # Gemini: "only allowed for OBJECT type"
            out["type"] = "object"
        for branch in split:  # a list of types: the items (or any) go with the array
            if branch["type"] == "array":
                branch["items"] = out.pop("items", {})
        if out.get("type") == "array" and "items" not in out:  # Gemini: "items: missing field"
            out["items"] = {}
            notes.append(f"{path}: items {{}} (any items) added (Gemini refuses an array without items)")
        elif any(branch.get("items") == {} and "items" not in node for branch in split):
            notes.append(f"{path}: items {{}} (any items) added to its array (Gemini refuses an array without items)")
        if out.get("type") == "null":
            out = {"nullable": True, **{k: v for k, v in out.items() if k != "type"}}
        if "anyOf" in out:
            out = _null_branch_as_nullable(out)
        return out

    try:
        return convert(_inline(doc, INLINE_BUDGET), "$"), notes
    except _NotInlinable as exc:
        why = str(exc)
    found = _root_defs(doc)
    if found is not None:
        defs, refs = found
        try:
            out = convert({k: v for k, v in doc.root.items() if k not in _DEFS}, "$")
            out["defs"] = {name: convert(sub, "$defs" + path_step(name)) for name, sub in defs.items()}
            return out, [f"$: $ref kept as Gemini's ref to root defs ({why})", *notes]
        except _NotInlinable:  # a $ref that is no string
            pass
    return {"type": "object"}, [f"$: parameters exported as any object ({why}, and not every $ref is to root $defs)"]


#: The keywords Gemini takes on an object schema only: an object given without ``type`` gets ``type: object``.
_OBJECT_ONLY = frozenset({"properties", "required", "minProperties", "maxProperties", "propertyOrdering"})
#: What a null ``anyOf`` branch becomes once converted; and the keywords a branch merged into its parent may share
#: with the parent (the parent's kept).
_NULL_BRANCH: Mapping[str, Any] = {"nullable": True}
_ANNOTATIONS = frozenset({"description", "title", "default", "example"})


def _null_branch_as_nullable(out: dict[str, Any]) -> dict[str, Any]:
    """A converted schema whose ``anyOf`` has a null branch (``{"nullable": true}``, from ``{"type": "null"}``)
    beside others, as google-genai's own converter writes it: ``nullable: true`` and the others, a lone other
    merged into the schema (``Optional[X]``: ``X`` and ``nullable``) when they share no keyword but annotations."""
    branches = out["anyOf"]
    others = [b for b in branches if b != _NULL_BRANCH]
    if not others or len(others) == len(branches):
        return out
    rest = {k: v for k, v in out.items() if k != "anyOf"}
    rest["nullable"] = True
    if len(others) == 1 and isinstance(others[0], dict) and not (set(others[0]) & set(rest)) - _ANNOTATIONS:
        return {**others[0], **rest}
    return {**rest, "anyOf": others}


def _constraints_only(branches: Any) -> bool:
    """Whether every alternative of an object's ``anyOf`` only constrains the object's own properties
    (``{"required": ["a"]}``): Gemini reads each alternative as a schema of its own, whose required
    names would name no property of it."""
    return isinstance(branches, list) and all(
        isinstance(b, dict)
        and b
        and "properties" not in b
        and "type" not in b
        and set(b) <= {"required", "minProperties", "maxProperties", "not"}
        for b in branches
    )


#: A definition name Gemini's ``ref`` (``#/defs/NAME``) can give as it is: no ``/``, ``~`` or ``%`` to escape.
_GEMINI_DEF_NAME = re.compile(r"[^/~%]+")


def _root_defs(doc: _Document) -> tuple[dict[str, Any], dict[str, str]] | None:
    """The root ``$defs`` and ``definitions`` as one map, and each ``$ref`` -> the definition it names (by
    pointer, by an anchor on it, or by its own ``$id``), if every ``$ref`` is to one of them (else ``None``).

    The ``$ref``s are those the definition checks' walk finds, local or remote, where the converter reads them (see
    :meth:`_Document.reads`); any other is dropped with the keyword it is in."""
    groups = [doc.root.get("$defs") or {}, doc.root.get("definitions") or {}]
    if set(groups[0]) & set(groups[1]):
        return None
    defs = {**groups[0], **groups[1]}
    names = {id(sub): name for name, sub in defs.items() if _GEMINI_DEF_NAME.fullmatch(name)}
    refs: dict[str, str] = {}
    try:
        found, uri = doc.walked()
        for path, ref, _ in found.refs:
            if ref not in refs and doc.reads(path):
                refs[ref] = _def_of(found, uri, ref, names)
    except _NotInlinable:
        return None
    if any(doc.reads(path) for path, _ in found.remote):
        return None
    return defs, refs


def _def_of(found: _Found, uri: str, ref: str, names: Mapping[int, str]) -> str:
    """The name of the root definition ``ref`` points to (``names``: each one's ``id()`` -> its name, for those Gemini
    can name); else :class:`_NotInlinable` (``ref`` is not local, points elsewhere, or to an anchor no schema or
    several declare)."""
    name = names.get(id(_target(found, _local(found, uri, ref), ref)))
    if name is None:
        raise _NotInlinable(f"$ref {ref!r} is to no root definition")
    return name


# --------------------------------------------------------------------------- per format


#: Keywords a provider refuses at the top of a tool's schema, failing the whole request (their error messages).
_TOP_REFUSED = {"openai": ("allOf", "anyOf", "enum", "not", "oneOf"), "anthropic": ("allOf", "anyOf", "oneOf")}


def _top_allowed(schema: dict[str, Any], provider: str) -> tuple[dict[str, Any], list[str]]:
    """``schema`` without the top-level keywords ``provider`` refuses, and a note if any were dropped."""
    dropped = [key for key in _TOP_REFUSED[provider] if key in schema]
    if not dropped:
        return schema, []
    kept = {k: v for k, v in schema.items() if k not in dropped}
    return kept, [f"$: {', '.join(dropped)} at the top level dropped (refused there; calls are still validated with it)"]


def _parameters(tool: Tool, strict: bool) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The OpenAI parameters, the properties made nullable (strict), and the notes."""
    if strict:
        return (*strict_schema(tool.parameters, tool=tool.name), [])
    parameters, notes = _top_allowed(tool.parameters, "openai")
    parameters, added = _with_items(parameters, "OpenAI")
    return parameters, {}, notes + added


def _chat(tool: Tool, parameters: dict[str, Any], strict: bool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": parameters}
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _responses(tool: Tool, parameters: dict[str, Any], strict: bool) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": parameters,
        "strict": strict,
    }


def _one_strict(strict: Any) -> bool:
    """``strict`` of one tool's export: True or False (``"auto"``, which may fall back per tool, is
    :func:`export_tools`' and ``registry.export``'s), else a ``ValueError``."""
    if strict is not True and strict is not False:
        raise ValueError(
            f"strict must be True or False for one tool, not {strict!r} (export_tools and registry.export take 'auto')"
        )
    return strict


def to_openai(tool: Tool, *, strict: bool = False) -> dict[str, Any]:
    """Chat Completions: ``{"type": "function", "function": {...}}``."""
    strict = _one_strict(strict)
    return _copied(_chat(tool, _parameters(tool, strict)[0], strict))


def to_openai_responses(tool: Tool, *, strict: bool = False) -> dict[str, Any]:
    """Responses API: the flat ``{"type": "function", "name", "description", "parameters", "strict"}``."""
    strict = _one_strict(strict)
    return _copied(_responses(tool, _parameters(tool, strict)[0], strict))


def _anthropic(tool: Tool) -> tuple[dict[str, Any], list[str]]:
    schema, rewritten = _draft_2020(tool.parameters)
    schema, notes = _top_allowed(schema, "anthropic")
    notes.extend(
        f"${path_step(name)}: a property name outside Anthropic's rule (letters, digits, '_', '.', '-', 1 to 64 "
        "characters), which fails the whole request"
        for name in anthropic_refused(schema)
    )
    return {"name": tool.name, "description": tool.description, "input_schema": schema}, rewritten + notes


def anthropic_refused(schema: Mapping[str, Any]) -> list[Any]:
    """The top-level property names of ``schema`` outside Anthropic's rule (:data:`ANTHROPIC_PROPERTY`)."""
    properties = schema.get("properties")
    return [
        name
        for name in (properties if isinstance(properties, dict) else ())
        if not (isinstance(name, str) and ANTHROPIC_PROPERTY.match(name))
    ]


#: What stands beside a ``$ref`` in drafts 4-7 and is kept when they are rewritten as 2020-12: annotations, which
#: tell the model without changing what is valid (every other keyword there is ignored by those drafts).
_REF_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment"})
#: A 2020-12 ``$anchor`` name.
_ANCHOR = re.compile(r"[A-Za-z_][-A-Za-z0-9._]*")
_DRAFT_NAMES = {4: "draft-04", 6: "draft-06", 7: "draft-07", 2019: "2019-09"}
#: The keywords that change what is valid (in 2020-12, or in the 2019-09 the rewrite reads ``$recursiveRef`` as) and
#: that not every draft defines, each with the first draft that does. An earlier draft ignores them (both validation
#: backends do), so the exports of its schemas drop them rather than tell the model a rule no call is checked against.
_DEFINED_SINCE: Mapping[str, int] = {
    **dict.fromkeys(("const", "contains", "propertyNames"), 6),
    **dict.fromkeys(("if", "then", "else"), 7),
    **dict.fromkeys(
        (
            "dependentRequired",
            "dependentSchemas",
            "unevaluatedItems",
            "unevaluatedProperties",
            "minContains",
            "maxContains",
            "$recursiveRef",
            "$recursiveAnchor",
        ),
        2019,
    ),
    **dict.fromkeys(("prefixItems", "$dynamicRef"), 2020),
}


def _defined(node: dict[str, Any], dialect: int, path: str, notes: list[str]) -> dict[str, Any]:
    """``node`` without the keywords draft ``dialect`` does not define (:data:`_DEFINED_SINCE`), with a note if any."""
    dropped = [key for key in node if _DEFINED_SINCE.get(key, 0) > dialect]
    if not dropped:
        return node
    them = "it" if len(dropped) == 1 else "them"
    notes.append(
        f"{path}: {', '.join(dropped)} dropped ({_DRAFT_NAMES[dialect]} does not define {them}: calls are not checked against {them})"
    )
    return {k: v for k, v in node.items() if k not in dropped}


def _dialect_in(node: Mapping[str, Any], dialect: int) -> int:
    """The draft ``node`` is read in, in a schema read in ``dialect`` where it stands: the one its own ``$schema``
    names, as both validation backends switch there (in an embedded resource or any subschema), but beside a
    ``$ref`` in drafts 4-7, which ignore it there; else ``dialect``."""
    own = node.get("$schema")
    named = _dialect(own) if isinstance(own, str) and not (dialect <= 7 and "$ref" in node) else None
    return dialect if named is None else named


def _dialects(schema: Any, dialect: int) -> dict[int, int]:
    """The draft (:func:`_dialect_in`) of each schema object in ``schema``, a schema read in ``dialect``, by its ``id``."""
    drafts: dict[int, int] = {}

    def visit(node: Any, dialect: int) -> None:
        if not isinstance(node, dict):
            return
        drafts[id(node)] = dialect = _dialect_in(node, dialect)
        for key, value in node.items():
            kind = _position(key, value)
            for sub in (value,) if kind == "one" else value if kind == "list" else value.values() if kind == "map" else ():
                visit(sub, dialect)

    visit(schema, dialect)
    return drafts


def _draft_2020(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A schema of an earlier draft (its ``$schema`` says which) rewritten as draft 2020-12, which Anthropic reads
    every schema as (it refuses one that is not valid 2020-12, failing the whole request), and a note for each change:
    ``$schema`` dropped; draft-04's boolean ``exclusiveMinimum``/``exclusiveMaximum`` made numeric; ``items`` as an
    array (a tuple) as ``prefixItems``, with ``additionalItems`` as ``items`` (dropped without a tuple, which it
    does not apply to); an ``id``/``$id`` of ``"#name"`` as ``$anchor``, draft-04's ``id`` as ``$id``; in drafts 4-7,
    the keywords beside ``$ref`` (which they ignore) dropped but annotations; keywords the draft does not define
    (:data:`_DEFINED_SINCE`: draft-07's ``prefixItems``) dropped, each subschema judged by the draft it is read in
    (:func:`_dialect_in`). ``schema`` itself for 2020-12.
    (``definitions`` and ``dependencies`` are kept: 2020-12's meta-schema still defines them.)"""
    dialect = _dialect(schema.get("$schema"))
    if dialect is None or dialect >= 2020:
        return schema, []
    id_key = _id_key(dialect)
    notes = [f"$: $schema ({_DRAFT_NAMES[dialect]}) dropped and the schema written as draft 2020-12, as Anthropic reads it"]
    found = _walk(schema, dialect)
    moved = _moved_refs(schema, dialect, found)
    recursive, anchored = _recursive_2020(found) if dialect == 2019 else ({}, {})

    def name(key: str, value: Any, path: str, node: dict[str, Any], out: dict[str, Any]) -> None:
        """``id``/``$id``: a fragment-only one (``#name``) as ``$anchor``, ``uri#name`` as both (the name dropped
        where ``node`` has a ``$anchor`` of its own that 2020-12 allows: that one is kept)."""
        uri, _, fragment = value.partition("#")
        if fragment and _kept_anchor(node, key) == fragment:
            out["$anchor"] = fragment
            notes.append(f"{path}: {key} {value!r} rewritten as $anchor {fragment!r}" + (f" and $id {uri!r}" if uri else ""))
        elif fragment or key != "$id":
            notes.append(f"{path}: {key} {value!r} rewritten as $id {uri!r}" if uri else f"{path}: {key} {value!r} dropped")
        if uri:
            out["$id"] = uri

    def walk(node: Any, path: str, outer: int) -> Any:
        """``node`` rewritten, where the schema around it is read in draft ``outer``."""
        if not isinstance(node, dict):
            return node
        dialect = _dialect_in(node, outer)  # (a subschema's own $schema: the backends read it in that draft)
        original = id(node)  # (what the walks before the rewrite know it by)
        if id(node) in moved:
            ref, target, why = moved[id(node)]
            if target is None:
                notes.append(
                    f"{path}: $ref {ref!r} names a place the rewrite drops, so it is sent as any value (calls are "
                    "still validated with it)"
                )
                node = {k: v for k, v in node.items() if k != "$ref" and (dialect > 7 or k in _REF_ANNOTATIONS)}
            else:
                notes.append(f"{path}: $ref {ref!r} rewritten as {target!r}, {why}")
                node = {**node, "$ref": target}
        node = _defined(node, dialect, path, notes)
        if "$recursiveAnchor" in node or "$recursiveRef" in node:
            node = recursive_2020(node, path, original)
        if "$ref" in node and dialect <= 7 and set(node) - _REF_ANNOTATIONS - {"$ref"}:
            dropped = sorted(set(node) - _REF_ANNOTATIONS - {"$ref"})
            notes.append(f"{path}: {', '.join(dropped)} beside $ref dropped ({_DRAFT_NAMES[dialect]} ignores them)")
            node = {k: v for k, v in node.items() if k == "$ref" or k in _REF_ANNOTATIONS}
        exclusive = _numeric_exclusive(node)
        if exclusive is not node:
            notes.append(f"{path}: boolean exclusiveMinimum/exclusiveMaximum rewritten as numbers")
        out: dict[str, Any] = {}
        tuple_items = isinstance(exclusive.get("items"), list)
        for key, value in exclusive.items():
            if key == "$schema" and path == "$":
                continue
            if key == id_key and isinstance(value, str) and (key == "id" or "#" in value):
                name(key, value, path, exclusive, out)
                continue
            if key == "$anchor" and _anchor_2020(node, "$anchor") is None:  # (2019-09's may hold a ':' or start "0")
                notes.append(f"{path}: $anchor {value!r} dropped (no 2020-12 anchor name)")
                continue
            if key == "items" and tuple_items:
                out["prefixItems"] = [walk(sub, f"{path}[{i}]", dialect) for i, sub in enumerate(value)]
                notes.append(f"{path}: items as an array rewritten as prefixItems")
                continue
            if key == "additionalItems":
                if tuple_items:
                    out["items"] = walk(value, f"{path}[]", dialect)
                    notes.append(f"{path}: additionalItems rewritten as items")
                else:
                    notes.append(f"{path}: additionalItems dropped (without items as an array it applies to nothing)")
                continue
            kind = _position(key, value)
            if kind == "one":
                out[key] = walk(value, f"{path}[]" if key == "items" else f"{path}.{key}", dialect)
            elif kind == "list":
                out[key] = [walk(sub, f"{path}.{key}[{i}]", dialect) for i, sub in enumerate(value)]
            elif kind == "map":
                at = path if key == "properties" else f"{path}.{key}"
                out[key] = {k: walk(sub, at + path_step(k), dialect) for k, sub in value.items()}
            else:
                out[key] = value
        return out

    def recursive_2020(node: dict[str, Any], path: str, original: int) -> dict[str, Any]:
        """2019-09's ``$recursiveAnchor``/``$recursiveRef``, which 2020-12 does not know: a ``$recursiveRef`` as the
        ``$ref`` it resolves to when only its own resource (or none) has ``$recursiveAnchor: true``, else as a
        ``$dynamicRef`` to the ``$dynamicAnchor`` each such resource gets instead."""
        out = {k: v for k, v in node.items() if k not in ("$recursiveAnchor", "$recursiveRef")}
        dynamic = anchored.get(original)
        if dynamic is not None:
            out["$dynamicAnchor"] = dynamic
            notes.append(f"{path}: $recursiveAnchor rewritten as $dynamicAnchor {dynamic!r}")
        elif "$recursiveAnchor" in node:
            notes.append(f"{path}: $recursiveAnchor dropped (its $recursiveRef are rewritten as $ref)")
        if "$recursiveRef" in node:
            ref = node["$recursiveRef"]
            key, target = recursive.get(original, ("$ref", ref))
            if key in out:  # (a $ref beside it): both apply
                out["allOf"] = [*(out.get("allOf") or []), {key: target}]
            else:
                out[key] = target
            notes.append(f"{path}: $recursiveRef {ref!r} rewritten as {key} {target!r}")
        return out

    return walk(schema, "$", dialect), notes


def _anchor_2020(node: Mapping[str, Any], key: str) -> str | None:
    """The anchor name ``node``'s ``key`` (``$anchor``, or an id ``#name``/``uri#name``) declares, if it is one that
    draft 2020-12 allows (else :func:`_draft_2020` drops it)."""
    value = node.get(key)
    if not isinstance(value, str):
        return None
    name = value if key == "$anchor" else value.partition("#")[2]
    return name if _ANCHOR.fullmatch(name) else None


def _kept_anchor(node: Mapping[str, Any], id_key: str) -> str | None:
    """The ``$anchor`` :func:`_draft_2020` gives ``node``: its own ``$anchor`` if 2020-12 allows that name, else the
    name of an id ``#name`` (``id_key``: ``$id``, or draft-04's ``id``) if it allows that one."""
    own = _anchor_2020(node, "$anchor")
    return own if own is not None else _anchor_2020(node, id_key)


def _moved_refs(schema: dict[str, Any], dialect: int, found: _Found) -> dict[int, tuple[str, str | None, str]]:
    """The ``$ref``s of ``schema`` (a draft 4 to 2019-09 one, ``found`` its walk) whose target :func:`_draft_2020`
    moves, drops or leaves without its name, by the ``id`` of the schema holding each: the reference, what it becomes
    and why. A JSON pointer through ``prefixItems`` for a tuple's ``items``, through ``items`` for
    ``additionalItems``; ``None`` where it names a place the rewrite drops (``additionalItems`` without a tuple, a
    sibling of ``$ref`` in drafts 4-7); and for an anchor whose name 2020-12 does not allow (``#1abc``, ``#a:b``),
    the JSON pointer of the schema it names."""
    moved: dict[int, tuple[str, str | None, str]] = {}
    drafts = _dialects(schema, dialect) if found.refs else {}
    for path, ref, target in found.refs:
        uri, fragment = urldefrag(target)
        if path[-1] != "$ref" or not fragment or uri not in found.resources:
            continue  # the resource itself: nothing in between moves
        why = "where the rewrite moved what it names"
        if not fragment.startswith("/"):  # an anchor: kept unless the rewrite drops its name
            declared = found.anchors.get((uri, fragment))
            if declared is None or any(again == fragment and first == declared for _, again, first in found.doubled):
                continue  # (no schema, or several, declare it: as it is)
            node = found.node(uri, fragment)
            if fragment == _kept_anchor(node, _id_key(dialect)) and not (drafts.get(id(node), dialect) <= 7 and "$ref" in node):
                continue  # (in drafts 4-7, a name beside $ref is dropped with the other siblings)
            within = _within(schema, declared, found.resources[uri])
            if within is None:
                continue
            fragment = quote(_pointer(within)[1:], safe="/~!$&'()*+,;=:@")
            why = f"as the anchor {unquote(urldefrag(target)[1])!r} is dropped (no 2020-12 anchor name)"
        resource = found.resources[uri]
        rewritten = _pointer_in_2020(resource, fragment, drafts.get(id(resource), dialect))
        if rewritten != urldefrag(target)[1]:
            holder = _holder(found, path)
            moved[id(holder)] = (ref, None if rewritten is None else ref.partition("#")[0] + "#" + rewritten, why)
    return moved


def _holder(found: _Found, path: tuple[Any, ...]) -> Any:
    """The schema holding the keyword at ``path`` (a reference's place, from the root ``found`` walked)."""
    return functools.reduce(operator.getitem, path[:-1], found.resources[""])


def _within(schema: Any, path: tuple[Any, ...], resource: Any) -> tuple[Any, ...] | None:
    """``path`` (from ``schema``'s root) from ``resource``, the innermost schema on it that is that resource's root."""
    node, start = schema, None
    if node is resource:
        start = 0
    for at, step in enumerate(path, 1):
        node = node[step]
        if node is resource:
            start = at
    return None if start is None else path[start:]


def _recursive_2020(found: _Found) -> tuple[dict[int, tuple[str, str]], dict[int, str]]:
    """How :func:`_draft_2020` rewrites a 2019-09 schema's ``$recursiveRef``s (by the ``id`` of the schema holding
    each: the keyword and its value) and which resources' ``$recursiveAnchor: true`` become a ``$dynamicAnchor``
    (by their ``id``: its name). A ``$recursiveRef`` resolves as a ``$ref`` unless its resource has
    ``$recursiveAnchor: true``, and then to the outermost such resource in the dynamic scope: with no other such
    resource in the schema, its own (a ``$ref``); else a ``$dynamicRef`` to the anchor all of them get."""
    resources = {id(node): node for node in found.resources.values() if isinstance(node, dict)}
    anchors = [node for node in resources.values() if node.get("$recursiveAnchor") is True]
    taken = {name for _, name in found.anchors}
    name = next(n for n in ("recursive", *(f"recursive{i}" for i in range(1, len(taken) + 2))) if n not in taken)
    dynamic = len(anchors) > 1
    recursive: dict[int, tuple[str, str]] = {}
    for path, ref, target in found.refs:
        if path[-1] != "$recursiveRef":
            continue
        holder = _holder(found, path)
        resource = found.resources.get(urldefrag(target)[0])
        if dynamic and ref == "#" and isinstance(resource, dict) and resource.get("$recursiveAnchor") is True:
            recursive[id(holder)] = ("$dynamicRef", f"#{name}")
        else:
            recursive[id(holder)] = ("$ref", ref)
    return recursive, ({id(node): name for node in anchors} if dynamic else {})


def _pointer_in_2020(resource: Any, fragment: str, dialect: int) -> str | None:
    """The JSON pointer ``fragment`` (of a ``$ref`` into ``resource``, read in draft ``dialect`` where it stands) as it
    reads once :func:`_draft_2020` rewrote the resource: ``fragment`` itself if nothing on its way moved, ``None`` if
    it passes where the rewrite drops."""
    tokens = unquote(fragment).split("/")
    node, kind = resource, "one"
    for at, escaped in enumerate(tokens[1:], 1):
        token = escaped.replace("~1", "/").replace("~0", "~")
        if kind == "one":
            if not isinstance(node, dict) or token not in node:
                return fragment  # no schema (a boolean), or a pointer the definition checks let through: as it is
            dialect = _dialect_in(node, dialect)
            if dialect <= 7 and "$ref" in node and token not in _REF_ANNOTATIONS and token != "$ref":
                return None
            tuple_items = isinstance(node.get("items"), list)
            if (token == "additionalItems" and not tuple_items) or _DEFINED_SINCE.get(token, 0) > dialect:
                return None
            if token in ("items", "additionalItems") and tuple_items:
                tokens[at] = "prefixItems" if token == "items" else "items"
            node, kind = node[token], _position(token, node[token])
        elif kind in ("list", "map"):
            if isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node, kind = node[int(token)], "one"
            elif isinstance(node, dict) and token in node:
                node, kind = node[token], "one"
            else:
                return fragment
        else:
            break  # data (an enum, a default): the rewrite copies it as it is
    changed = "/".join(tokens)
    return fragment if changed == unquote(fragment) else quote(changed, safe="/~!$&'()*+,;=:@")


def to_anthropic(tool: Tool) -> dict[str, Any]:
    """Messages API: ``{"name", "description", "input_schema"}`` (a top-level ``anyOf``/``oneOf``/``allOf`` dropped)."""
    return _copied(_anthropic(tool)[0])


def to_gemini(tool: Tool, name: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """A Gemini function declaration, and the notes of :func:`gemini_schema`.

    A tool that takes no arguments gets no ``parameters``: Gemini refuses an object whose
    ``properties`` are empty ("properties: should be non-empty for OBJECT type").
    """
    declaration, notes = _gemini(tool, name)
    return _copied(declaration), notes


def _gemini(tool: Tool, name: str | None) -> tuple[dict[str, Any], list[str]]:
    declaration: dict[str, Any] = {"name": name or tool.name, "description": tool.description}
    if _takes_nothing(tool.parameters):  # no schema is sent: nothing of one is noted as dropped
        notes = (
            ["$: description dropped with the parameters (the tool takes no arguments)"]
            if "description" in tool.parameters
            else []
        )
        return declaration, notes
    declaration["parameters"], notes = gemini_schema(tool.parameters, tool=tool.name)
    notes.extend(
        f"${path_step(name)}: a parameter name outside google-genai's documented rule (a letter or '_', then letters, "
        f"digits or '_', at most {GEMINI_PARAMETER_MAX} characters)"
        for name in declaration["parameters"].get("properties") or ()
        if not GEMINI_PARAMETER.match(name)
    )
    return declaration, notes


#: The keywords a tool's parameters may have and still take no argument (besides what :func:`_takes_nothing` reads).
_NO_ARGUMENTS = frozenset({
    "type", "properties", "required", "additionalProperties", "unevaluatedProperties", "patternProperties",
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "$defs", "definitions",
})  # fmt: skip


def _takes_nothing(schema: Mapping[str, Any]) -> bool:
    """Whether an object schema declares no argument: no property (but ``false`` ones), none required, and no
    other key let in (``additionalProperties`` absent or false: a kwargs-only tool's schema takes arguments)."""
    return (
        schema.get("type") == "object"
        and set(schema) <= _NO_ARGUMENTS
        and not schema.get("required")
        and not schema.get("patternProperties")
        and all(schema.get(key, False) is False for key in ("additionalProperties", "unevaluatedProperties"))
        and all(sub is False for sub in (schema.get("properties") or {}).values())
    )


def to_mcp(tool: Tool) -> dict[str, Any]:
    """An MCP tool descriptor, with annotations from the tool's metadata.

    ``title`` comes from ``options["title"]``; ``outputSchema`` is the tool's (object)
    ``output_schema``, marked ``x-fastmcp-wrap-result`` when results travel wrapped as
    ``{"result": ...}`` (``output_wrapped``), the convention MCP clients unwrap. Annotations:
    ``readOnlyHint`` = ``read_only``; ``destructiveHint`` = ``destructive``, never for a
    read-only tool and, when undeclared, MCP's default (true) for any other;
    ``idempotentHint`` = ``idempotent`` or read-only; ``openWorldHint`` = ``open_world``
    (MCP's default, true, when undeclared).
    """
    return _copied(_mcp(tool))


def _mcp(tool: Tool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name}
    title = tool.options.get("title")
    if isinstance(title, str) and title:
        out["title"] = title
    out["description"] = tool.description
    out["inputSchema"] = tool.parameters
    if tool.output_schema is not None:
        out["outputSchema"] = {**tool.output_schema, "x-fastmcp-wrap-result": True} if tool.output_wrapped else tool.output_schema
    out["annotations"] = {
        "readOnlyHint": tool.read_only,
        "destructiveHint": not tool.read_only and (tool.destructive is None or bool(tool.destructive)),
        "idempotentHint": tool.idempotent or tool.read_only,
        "openWorldHint": True if tool.open_world is None else tool.open_world,
    }
    return out


def gemini_name(name: str) -> str:
    """The name Gemini is shown for the tool called ``name``: the name itself if Gemini accepts it.

    Gemini names start with a letter or ``_``; a tool name starting with a digit or ``-`` is
    exported as ``_.`` + the name (cut to 51 characters and followed by ``.`` and a hash when
    longer than 62). Tool names have no dots, so such a name is never another tool's name, and
    it depends on nothing but the tool's own name: not on the other tools, nor on ``names=``.
    """
    if GEMINI_NAME.match(name):
        return name
    if not NAME_PATTERN.match(name):  # not a tool name (made by hand, past the checks): Gemini refuses it anyway
        return f"_{name}"[:GEMINI_NAME_MAX]
    if len(name) <= GEMINI_NAME_MAX - 2:
        return f"_.{name}"
    digest = base64.b32encode(hashlib.sha256(name.encode()).digest()).decode().lower()
    return f"_.{name[: GEMINI_NAME_MAX - 13]}.{digest[:10]}"  # "_." + 51 + "." + 10 = 64


def export_tools(
    tools: Iterable[Tool], format: str, *, strict: bool | str = False, reuse: Export | None = None, copy: bool = True
) -> Export:
    """Every tool in ``format`` (one of :data:`FORMATS`); see the module docstring.

    ``reuse``: an earlier export in the same format, whose per-tool definitions are taken
    for the tools it has (what a registry does after a tool was removed or replaced).

    ``strict`` (OpenAI formats): ``True`` makes every tool strict or raises
    :class:`StrictSchemaError`; ``"auto"`` makes each tool strict where its schema allows and
    exports the others non-strict, listing why in ``Export.not_strict`` (and ``notes``).

    ``copy``: the definitions are the caller's, changing them changes no tool and no later
    export; with ``copy=False`` they share the tools' own schemas (and ``reuse``'s
    definitions): read them, never change them (what a registry caches).
    """
    check_format(format)
    if strict not in (True, False, "auto"):
        raise ValueError(f"strict must be True, False or 'auto', not {strict!r}")
    if strict and format not in ("openai", "openai-responses"):
        raise ValueError(f"strict mode is OpenAI's: the {format!r} format has none (export it with strict=False)")
    tools = list(tools)
    pieces = reuse._pieces if reuse is not None and (reuse.format, reuse.strict) == (format, strict) else None
    result = Export(format=format, strict=strict, tools=[], names=NameMap())
    for tool in tools:
        result._add(tool, pieces)
    return result.copy() if copy else result
