"""Exports read ``$ref`` as the tool's validator does: an absolute URI naming the root's own ``$id`` is local, drafts
4-7 ignore what stands beside ``$ref``, and notes name every property readably (``$[""]``)."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from harness_one import ToolDefinitionError, ToolRegistry
from harness_one.export import StrictSchemaError, gemini_schema, inline_refs, strict_schema

ROOT = "https://example.com/s"
DRAFTS = {
    "draft-04": "http://json-schema.org/draft-04/schema#",
    "draft-06": "http://json-schema.org/draft-06/schema#",
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}


def _registry(schema: dict[str, Any]) -> ToolRegistry:
    """A registry with the tool ``t`` taking ``schema`` (so the definition checks and validation accept it)."""
    reg = ToolRegistry(autoload=False)
    reg.add(lambda **kw: json.dumps(kw), name="t", parameters=schema)
    return reg


def _strict(reg: ToolRegistry) -> dict[str, Any]:
    parameters: dict[str, Any] = reg.export("openai", strict=True).tools[0]["function"]["parameters"]
    return parameters


# --------------------------------------------------------------------------- an absolute $ref to the root's own $id


@pytest.mark.parametrize(
    "ref",
    [f"{ROOT}#/$defs/n", f"{ROOT}#n", "s#/$defs/n", "./s#/$defs/n", "/s#/$defs/n", "//example.com/s#/$defs/n", "s#n"],
)
def test_a_ref_to_the_roots_own_id_is_inlined(ref: str) -> None:
    """The definition resolves it (absolute, or relative: RFC 3986 against the root's ``$id``) to a place in
    the document; inlining refused it as "not local" (it read only ``#...`` and absolute URIs)."""
    schema = {
        "$id": ROOT,
        "type": "object",
        "$defs": {"n": {"$anchor": "n", "type": "string"}},
        "properties": {"x": {"$ref": ref}},
        "required": ["x"],
    }
    reg = _registry(schema)
    assert reg.try_call("t", {"x": "a"}).ok and not reg.try_call("t", {"x": 1}).ok
    assert inline_refs(schema)["properties"]["x"] == {"type": "string"}
    assert _strict(reg) == {  # the root's $id dropped: inlined, no reference reads it (strict refused it)
        "type": "object",
        "properties": {"x": {"type": "string"}},
        "required": ["x"],
        "additionalProperties": False,
    }
    gemini = reg.export("gemini")
    assert gemini.tools[0]["parameters"]["properties"]["x"] == {"type": "string"}
    assert gemini.notes == {"t": ["$: $id dropped"]}


@pytest.mark.parametrize("ref", [f"{ROOT}#/$defs/N", "s#/$defs/N"])
def test_an_absolute_or_relative_ref_to_a_root_definition_becomes_gemini_ref_where_inlining_cannot_be_done(
    ref: str,
) -> None:
    tree = {
        "$id": ROOT,
        "type": "object",
        "$defs": {"N": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": ref}}}}},
        "properties": {"node": {"$ref": ref}},
    }
    converted, notes = gemini_schema(tree)
    assert converted["properties"]["node"] == {"ref": "#/defs/N"}
    assert converted["defs"]["N"]["properties"]["kids"]["items"] == {"ref": "#/defs/N"}
    assert "recursive" in notes[0]


def test_a_ref_to_the_roots_own_id_is_the_root_as_hash_is() -> None:
    """``$ref: "<root $id>"`` is ``$ref: "#"``, as are ``""`` and the last segment of the root's ``$id`` (RFC 3986
    resolves both to it; inlining refused them as "not local"): recursion to the root (strict refuses it, Gemini gets
    any object)."""

    def schema(ref: str) -> dict[str, Any]:
        return {"$id": ROOT, "type": "object", "properties": {"v": {"type": "string"}, "next": {"$ref": ref}}}

    for ref in (ROOT, "s"):
        reg = _registry(schema(ref))
        assert not reg.try_call("t", {"next": {"v": 1}}).ok  # the definition resolves it to the root
    for ref in (ROOT, "#", "", "s", "./s"):
        with pytest.raises(StrictSchemaError, match=re.escape(f"$ref {ref!r} is recursive and cannot be inlined")):
            strict_schema(schema(ref))
        converted, notes = gemini_schema(schema(ref))
        assert converted == {"type": "object"}
        assert notes == [
            f"$: parameters exported as any object ($ref {ref!r} is recursive and cannot be inlined, "
            "and not every $ref is to root $defs)"
        ]


@pytest.mark.parametrize(
    ("root_id", "ref"),
    [
        (None, "https://example.com/other#/$defs/n"),
        (ROOT, "https://example.com/other#/$defs/n"),
        (ROOT, "other#/$defs/n"),  # https://example.com/other
        (ROOT, "s/#/$defs/n"),  # https://example.com/s/
        (None, "s#/$defs/n"),  # no base to resolve it against
    ],
)
def test_a_ref_to_another_uri_is_still_not_local(root_id: str | None, ref: str) -> None:
    """Nothing is fetched: a reference that resolves to a URI other than the root's ``$id`` or an embedded resource's
    (the definition refuses it as remote)."""
    schema: dict[str, Any] = {"type": "object", "$defs": {"n": {"type": "string"}}, "properties": {"x": {"$ref": ref}}}
    if root_id is not None:
        schema["$id"] = root_id
    with pytest.raises(ToolDefinitionError, match="remote schemas"):
        _registry(schema)
    with pytest.raises(StrictSchemaError, match=re.escape(f"$ref {ref!r} is not local")):
        inline_refs(schema)
    assert gemini_schema(schema)[0] == {"type": "object"}


# --------------------------------------------------------------------------- relative refs, embedded resources' $ids


#: ``q``: an embedded resource (a definition with its own ``$id``), named by its ``$id``, absolute or relative, by an
#: anchor in it and by a pointer into it.
Q = "https://example.com/q"
EMBEDDED = {
    "$id": ROOT,
    "type": "object",
    "$defs": {"q": {"$id": Q, "type": "object", "properties": {"a": {"$anchor": "a", "type": "string"}}, "required": ["a"]}},
    "properties": {"x": {"$ref": Q}, "y": {"$ref": "q"}, "z": {"$ref": f"{Q}#a"}, "w": {"$ref": "q#/properties/a"}},
    "required": ["x", "y", "z", "w"],
}


def test_a_ref_to_an_embedded_resource_is_inlined() -> None:
    """The definition resolves each to ``q`` or into it; inlining refused them as "not local"."""
    reg = _registry(EMBEDDED)
    assert reg.try_call("t", {"x": {"a": "s"}, "y": {"a": "s"}, "z": "s", "w": "s"}).ok
    assert not reg.try_call("t", {"x": {"a": "s"}, "y": {"a": 1}, "z": "s", "w": "s"}).ok
    assert not reg.try_call("t", {"x": {"a": "s"}, "y": {"a": "s"}, "z": "s", "w": 1}).ok
    q = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    inlined = inline_refs(EMBEDDED)["properties"]
    assert inlined == {"x": {"$id": Q, **q}, "y": {"$id": Q, **q}, "z": {"type": "string"}, "w": {"type": "string"}}
    assert _strict(reg)["properties"] == {  # no $id: strict refused them (see test_strict_drops_every_id)
        "x": {**q, "additionalProperties": False},
        "y": {**q, "additionalProperties": False},
        "z": {"type": "string"},
        "w": {"type": "string"},
    }
    gemini = reg.export("gemini")
    assert gemini.tools[0]["parameters"]["properties"] == {"x": q, "y": q, "z": {"type": "string"}, "w": {"type": "string"}}


def test_a_ref_to_an_embedded_root_definition_becomes_gemini_ref_where_inlining_cannot_be_done() -> None:
    n = "https://example.com/N"
    tree = {
        "$id": ROOT,
        "type": "object",
        "$defs": {"N": {"$id": n, "type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": n}}}}},
        "properties": {"node": {"$ref": "N"}},
    }
    converted, notes = gemini_schema(tree)
    assert converted["properties"]["node"] == {"ref": "#/defs/N"}
    assert converted["defs"]["N"]["properties"]["kids"]["items"] == {"ref": "#/defs/N"}
    assert notes[0] == f"$: $ref kept as Gemini's ref to root defs ($ref {n!r} is recursive and cannot be inlined)"


#: Inside ``https://example.com/b/q``, ``q#/$defs/n`` is its own integer; against the root (``.../a/s``) it would be
#: ``.../a/q``'s boolean, and ``s#/$defs/n`` the root's string where the definition finds a remote schema.
TWO_QS = {
    "$id": "https://example.com/a/s",
    "type": "object",
    "$defs": {"n": {"type": "string"}, "aq": {"$id": "q", "$defs": {"n": {"type": "boolean"}}}},
    "properties": {
        "q": {"$id": "../b/q", "$defs": {"n": {"type": "integer"}}, "type": "object", "properties": {"m": {"$ref": "q#/$defs/n"}}}
    },
}


@pytest.mark.parametrize("ref", ["q#/$defs/n", "s#/$defs/n"])
def test_a_relative_ref_in_an_embedded_resource_is_refused_not_resolved_against_the_root(ref: str) -> None:
    schema = json.loads(json.dumps(TWO_QS).replace("q#/$defs/n", ref))
    if ref == "q#/$defs/n":
        reg = _registry(schema)  # the definition resolves it against its resource
        assert reg.try_call("t", {"q": {"m": 1}}).ok and not reg.try_call("t", {"q": {"m": True}}).ok
    else:
        with pytest.raises(ToolDefinitionError, match=re.escape("remote schemas, which are never fetched: s#/$defs/n")):
            _registry(schema)
    why = f"at #/properties/q/properties/m, $ref {ref!r} is in the embedded resource 'https://example.com/b/q' (its own $id)"
    with pytest.raises(StrictSchemaError, match=re.escape(why)):
        inline_refs(schema)
    converted, notes = gemini_schema(schema)
    assert converted == {"type": "object"} and why in notes[0]


@pytest.mark.parametrize(
    ("name", "ref", "expected"),
    [
        ("a/b", "#x", None),  # an anchor on a definition Gemini's ref cannot name as it is (it sent "#/defs/a/b")
        ("a b", "#/$defs/a%20b", "#/defs/a b"),  # a pointer, percent-encoded (it made the parameters any object)
    ],
)
def test_a_gemini_ref_names_a_definition_only_as_it_can(name: str, ref: str, expected: str | None) -> None:
    tree = {
        "type": "object",
        "$defs": {name: {"$anchor": "x", "type": "object", "properties": {"k": {"$ref": ref}}}},
        "properties": {"p": {"$ref": ref}},
    }
    converted, _ = gemini_schema(tree)
    assert converted == {"type": "object"} if expected is None else converted["properties"]["p"] == {"ref": expected}


# --------------------------------------------------------------------------- strict mode drops the ids nothing reads


@pytest.mark.parametrize("draft", list(DRAFTS))
def test_strict_drops_every_id(draft: str) -> None:
    """Strict mode refused any schema with an ``$id`` (draft-04: ``id``), the root's or a subschema's, though inlined
    no reference is left to read one. The draft's other spelling is an unknown keyword, and still refused."""
    key = "id" if draft == "draft-04" else "$id"
    defs = "$defs" if draft in ("2019-09", "2020-12") else "definitions"
    schema = {
        "$schema": DRAFTS[draft],
        key: ROOT,
        "type": "object",
        defs: {"n": {"type": "string"}},
        "properties": {"x": {"$ref": f"{ROOT}#/{defs}/n"}, "q": {key: Q, "type": "integer"}},
        "required": ["x", "q"],
    }
    reg = _registry(schema)
    assert reg.try_call("t", {"x": "a", "q": 1}).ok and not reg.try_call("t", {"x": 1, "q": 1}).ok
    assert _strict(reg) == {
        "type": "object",
        "properties": {"x": {"type": "string"}, "q": {"type": "integer"}},
        "required": ["x", "q"],
        "additionalProperties": False,
    }
    other = "$id" if key == "id" else "id"
    with pytest.raises(StrictSchemaError, match=re.escape(f"$.q: {other} not supported")):
        strict_schema({**schema, "properties": {**schema["properties"], "q": {other: Q, "type": "integer"}}})


# --------------------------------------------------------------------------- $ref's siblings, per draft


def _beside_ref(draft: str, recursive: bool = False) -> dict[str, Any]:
    """``a``: a ``$ref`` to a string with an ``enum`` beside it (applied in 2019-09 and later, ignored in 4-7)."""
    defs = "$defs" if draft in ("2019-09", "2020-12") else "definitions"
    s: dict[str, Any] = {"type": "string"}
    if recursive:  # a definition inlining cannot end (Gemini then keeps $ref as its ref)
        s = {"type": "object", "properties": {"more": {"$ref": f"#/{defs}/s", "description": "beside"}}}
    return {
        "$schema": DRAFTS[draft],
        "type": "object",
        defs: {"s": s},
        "properties": {"a": {"$ref": f"#/{defs}/s", "enum": ["x"], "description": "beside"}},
        "required": ["a"],
    }


@pytest.mark.parametrize("draft", list(DRAFTS))
def test_ref_siblings_count_in_exports_as_the_tools_draft_counts_them(draft: str) -> None:
    """Drafts 4-7 ignore what stands beside ``$ref``: strict mode sent ``enum: ["x"]`` (the model could send only "x"
    where the tool takes any string); later drafts apply it, and the export keeps it."""
    schema = _beside_ref(draft)
    reg = _registry(schema)
    applied = draft in ("2019-09", "2020-12")
    assert reg.try_call("t", {"a": "y"}).ok is not applied
    expected = {"type": "string", "enum": ["x"], "description": "beside"} if applied else {"type": "string"}
    assert inline_refs(schema)["properties"]["a"] == expected
    strict = _strict(reg)
    assert strict["properties"]["a"] == expected
    assert jsonschema.Draft202012Validator(strict).is_valid({"a": "y"}) is not applied  # the export means what the tool does
    gemini = reg.export("gemini")
    assert gemini.tools[0]["parameters"]["properties"]["a"] == expected and gemini.notes == {}


@pytest.mark.parametrize("draft", list(DRAFTS))
def test_ref_siblings_count_in_gemini_refs_as_the_tools_draft_counts_them(draft: str) -> None:
    converted, _ = gemini_schema(_beside_ref(draft, recursive=True))
    applied = draft in ("2019-09", "2020-12")
    beside = {"enum": ["x"], "type": "string", "description": "beside"} if applied else {}
    assert converted["properties"]["a"] == {"ref": "#/defs/s", **beside}
    more = {"description": "beside"} if applied else {}
    assert converted["defs"]["s"]["properties"]["more"] == {"ref": "#/defs/s", **more}


# --------------------------------------------------------------------------- notes name every property


def test_notes_name_an_empty_or_odd_property_name_readably() -> None:
    """A property named ``""`` was noted as ``$.``; names notes give are JSON paths, as argument problems give."""
    schema = {
        "type": "object",
        "properties": {
            "": {"type": "string", "format": "uri"},
            "a b": {"type": "object", "properties": {"": {"type": "string", "format": "uri"}}, "required": [""]},
        },
        "required": ["", "a b"],
    }
    assert gemini_schema(schema)[1] == [
        "$[\"\"]: format 'uri' dropped (Gemini refuses it)",
        '$["a b"][""]: format \'uri\' dropped (Gemini refuses it)',
    ]
    with pytest.raises(StrictSchemaError) as refused:
        strict_schema(schema)
    assert [reason.split(":")[0] for reason in refused.value.reasons] == ['$[""]', '$["a b"][""]']


def test_gemini_definitions_are_named_readably_in_notes() -> None:
    tree = {
        "type": "object",
        "$defs": {"a node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/a node"}}}}},
        "properties": {"node": {"$ref": "#/$defs/a node", "format": "uri"}},
    }
    converted, notes = gemini_schema(tree)
    assert converted["defs"]["a node"]["properties"]["kids"]["items"] == {"ref": "#/defs/a node"}
    assert notes[1:] == ["$.node: format 'uri' dropped (Gemini refuses it)"]
    tree["$defs"]["a node"]["format"] = "uri"
    assert gemini_schema(tree)[1][1:] == [
        "$.node: format 'uri' dropped (Gemini refuses it)",
        "$defs[\"a node\"]: format 'uri' dropped (Gemini refuses it)",
    ]


# --------------------------------------------------------------------------- which $refs count: those the export reads

#: Inlining ``N`` cannot end, so Gemini gets root ``defs`` and ``ref``s where every ``$ref`` it reads names one.
TREE_DEFS = {"N": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}}}}}
REMOTE = "https://api.example.com/openapi.json#/components/schemas/Tree"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("x-source", {"$ref": REMOTE}),  # an unknown keyword's value is data, not a schema
        ("x-source", [{"$ref": "#/$defs/Missing"}]),
        ("not", [{"$ref": REMOTE}]),  # a list under a one-schema keyword: data, as inlining copies it
        ("not", [{"$ref": "#/$defs/Missing"}]),
        ("allOf", [{"$ref": 5}]),  # no string: never a Gemini ref, dropped with allOf as Gemini drops allOf
    ],
)
def test_a_ref_in_a_keyword_gemini_drops_keeps_the_other_refs(key: str, value: Any) -> None:
    """Only the ``$ref``s in schema positions count; one in data goes with the keyword that holds it, with a note
    (they made the whole schema "any object", since the fallback read the references the definition checks record
    wherever they stand)."""
    tree = {"type": "object", "properties": {"root": {"$ref": "#/$defs/N"}}, key: value, "$defs": TREE_DEFS}
    converted, notes = gemini_schema(tree)
    assert converted["properties"] == {"root": {"ref": "#/defs/N"}}
    assert converted["defs"]["N"]["properties"]["kids"]["items"] == {"ref": "#/defs/N"}
    assert notes == [
        "$: $ref kept as Gemini's ref to root defs ($ref '#/$defs/N' is recursive and cannot be inlined)",
        f"$: {key} dropped",
    ]


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"allOf": [{"$ref": REMOTE}]}, "$ref '#/$defs/N' is recursive and cannot be inlined"),  # a schema keyword
        (
            {"properties": {"root": {"$ref": "#/$defs/N"}, "n": {"$ref": 5}}},
            "$ref '#/$defs/N' is recursive and cannot be inlined",
        ),
        ({"properties": {"n": {"$ref": 5}}}, "$ref 5 is not local"),
    ],
)
def test_a_ref_in_a_schema_position_to_no_root_definition_makes_gemini_any_object(extra: dict[str, Any], why: str) -> None:
    """A ``$ref`` that is no string is no Gemini ref either (the fallback kept root ``defs`` and noted the ``$ref``
    dropped, as the walk records no such reference)."""
    tree = {"type": "object", "properties": {"root": {"$ref": "#/$defs/N"}}, "$defs": TREE_DEFS, **extra}
    assert gemini_schema(tree) == (
        {"type": "object"},
        [f"$: parameters exported as any object ({why}, and not every $ref is to root $defs)"],
    )


def test_an_embedded_resource_beside_a_ref_is_ignored_in_drafts_4_to_7() -> None:
    """Drafts 4-7 ignore what stands beside ``$ref``, ``$id``s and ``$ref``s in its subschemas too: inlining replaces
    the ``$ref`` and its siblings by the target (it refused the tool for a ``$ref`` in a resource it never reads)."""
    schema = {
        "$schema": DRAFTS["draft-07"],
        "type": "object",
        "definitions": {"a": {"type": "string"}},
        "properties": {
            "x": {
                "$ref": "#/definitions/a",
                "properties": {"p": {"$id": "https://example.com/p", "properties": {"q": {"$ref": "#"}}}},
            }
        },
        "required": ["x"],
    }
    reg = _registry(schema)
    assert reg.try_call("t", {"x": "s"}).ok and not reg.try_call("t", {"x": 1}).ok
    assert inline_refs(schema)["properties"]["x"] == {"type": "string"}
    assert _strict(reg)["properties"]["x"] == {"type": "string"}
    gemini = reg.export("gemini")
    assert gemini.tools[0]["parameters"]["properties"] == {"x": {"type": "string"}} and gemini.notes == {}


def test_a_ref_beside_a_ref_is_ignored_in_drafts_4_to_7_where_gemini_keeps_refs() -> None:
    """The remote ``$ref`` is in a sibling of ``$ref``, which draft-07 ignores and the export drops."""
    tree = {
        "$schema": DRAFTS["draft-07"],
        "type": "object",
        "definitions": {"N": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/definitions/N"}}}}},
        "properties": {"root": {"$ref": "#/definitions/N", "properties": {"z": {"$ref": REMOTE}}}},
    }
    converted, notes = gemini_schema(tree)
    assert (
        converted["properties"] == {"root": {"ref": "#/defs/N"}}
        and "ref" in converted["defs"]["N"]["properties"]["kids"]["items"]
    )
    assert notes == ["$: $ref kept as Gemini's ref to root defs ($ref '#/definitions/N' is recursive and cannot be inlined)"]
