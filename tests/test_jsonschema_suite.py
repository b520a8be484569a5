"""The official JSON-Schema-Test-Suite, run through the validation plugin's compiled schemas.

Reads ``../shared/jsonschema-test-suite`` (draft 2020-12 and draft 7: every required test, the
``optional/format`` tests for the formats harness-one asserts, and the optional tests for the
pattern dialect, big numbers and ``dependencies``). Every schema goes through the definition-time
check first: the only ones it may refuse are those referring to remote documents, which are never
fetched (the network is cut off for the whole run); every other one must pass the check and then
every test on both backends.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from harness_one import ToolDefinitionError
from harness_one._schema import check_schema
from harness_one_plugins.validation import FORMATS, compile_schema, rust_available

ROOT = Path(__file__).resolve().parents[1]
SUITE = Path(os.environ.get("JSON_SCHEMA_TEST_SUITE", ROOT.parent / "shared" / "jsonschema-test-suite"))
DRAFTS = {"draft2020-12": "https://json-schema.org/draft/2020-12/schema", "draft7": "http://json-schema.org/draft-07/schema#"}
BACKENDS = ["python", pytest.param("rust", marks=pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing"))]
# Optional files both backends must pass: ECMA-262 patterns (what the docs promise), big numbers, and
# `dependencies` in 2019-09 and later (jsonschema-rs reads it there, so both backends do).
OPTIONAL = (
    "ecmascript-regex.json",
    "non-bmp-regex.json",
    "bignum.json",
    "float-overflow.json",
    "dependencies-compatibility.json",
)

pytestmark = [
    pytest.mark.skipif(not SUITE.is_dir(), reason=f"JSON-Schema-Test-Suite not found at {SUITE}"),
    pytest.mark.usefixtures("patient_patterns"),
]


def _files(draft: str, kind: str) -> list[Path]:
    base = SUITE / "tests" / draft
    if kind == "required":
        return sorted(base.glob("*.json"))
    if kind == "optional":
        return [base / "optional" / name for name in OPTIONAL if (base / "optional" / name).exists()]
    return [
        base / "optional" / "format" / f"{fmt}.json" for fmt in FORMATS if (base / "optional" / "format" / f"{fmt}.json").exists()
    ]


def _with_dialect(schema: Any, draft: str) -> Any:
    if isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": DRAFTS[draft], **schema}
    return schema


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def run(draft: str, kind: str, backend: str) -> tuple[int, int, list[str]]:
    """Pass count, refused count and failures for one part of the suite."""
    passed = refused = 0
    failures: list[str] = []
    # The required tests expect the specification's default, format as annotation only;
    # the optional/format tests are what harness-one's default (assert formats) is for.
    formats = kind == "format"
    for path in _files(draft, kind):
        for case in json.loads(path.read_text()):
            schema = _with_dialect(case["schema"], draft)
            where = f"{path.relative_to(SUITE)} :: {case['description']}"
            if isinstance(schema, dict):
                try:
                    check_schema(schema, tool="suite", object_root=False)
                except ToolDefinitionError as exc:  # a tool with this schema is refused at definition
                    # (remote refs; and "empty enum", an empty enum at the root, which no value matches)
                    assert "never fetched" in str(exc) or "the enum is empty" in str(exc), (
                        f"{where}: refused for another reason: {exc}"
                    )
                    refused += len(case["tests"])
                    continue
            assert "refRemote" not in path.name, f"remote reference not detected: {where}"
            compiled = compile_schema(schema, backend, formats=formats)
            for test in case["tests"]:
                try:
                    verdict = compiled.is_valid(test["data"])
                except Exception as exc:  # counted, and shown below
                    verdict = f"{type(exc).__name__}: {exc}"
                if verdict == test["valid"]:
                    passed += 1
                else:
                    failures.append(f"{where} :: {test['description']} -> {verdict}")
    return passed, refused, failures


def report(capsys: pytest.CaptureFixture[str], label: str, passed: int, refused: int, failures: list[str]) -> None:
    with capsys.disabled():
        print(
            f"\nJSON-Schema-Test-Suite {label}: {passed} passed, {len(failures)} failed, {refused} refused (remote refs, the empty enum at a root)"
        )
        for line in failures:
            print("  FAILED", line)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("draft", list(DRAFTS))
def test_required(draft: str, backend: str, no_network: None, capsys: pytest.CaptureFixture[str]) -> None:
    passed, refused, failures = run(draft, "required", backend)
    report(capsys, f"{draft} required [{backend}]", passed, refused, failures)
    assert failures == []
    assert passed > 800 and refused > 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("draft", list(DRAFTS))
def test_optional_formats(draft: str, backend: str, no_network: None, capsys: pytest.CaptureFixture[str]) -> None:
    passed, _, failures = run(draft, "format", backend)
    report(capsys, f"{draft} optional/format [{backend}]", passed, 0, failures)
    assert passed > 0
    assert failures == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("draft", list(DRAFTS))
def test_optional_patterns_and_numbers(draft: str, backend: str, no_network: None, capsys: pytest.CaptureFixture[str]) -> None:
    passed, _, failures = run(draft, "optional", backend)
    report(
        capsys,
        f"{draft} optional/{{ecmascript-regex,non-bmp-regex,bignum,float-overflow,dependencies-compatibility}} [{backend}]",
        passed,
        0,
        failures,
    )
    assert passed > 50
    assert failures == []
