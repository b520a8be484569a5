"""A hostile review of argument errors: the invalid-JSON snippet near a long secret, the size of
``to_dict()``, and the decoder's messages as a refusal words them."""

from __future__ import annotations

import json

import pytest

from harness_one import ArgumentProblem, ToolArgumentError, ToolRegistry
from harness_one._arguments import ArgumentLimits, check_signature, decode_arguments
from harness_one._errors import ERROR_TEXT_LIMIT

_LIMITS = ArgumentLimits()
_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" * 30
_PEM = "-----BEGIN PRIVATE KEY-----\\n" + _BODY + "\\n-----END PRIVATE KEY-----\\n"


def _json_refusal(text: str) -> str:
    with pytest.raises(ToolArgumentError) as err:
        decode_arguments(text, _LIMITS)
    (problem,) = err.value.problems
    assert problem.keyword == "json"
    return problem.message


# ---------------------------------------------------------------------------- 1. a long secret near a mistake


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # a mistake right after a secret longer than the 1,000 characters read before it
        ('{"name": "a", "private_key": "' + _PEM + '" "x": 1}', '[REDACTED]" "x": 1}'),
        ('{"name": "a", "api_key": "' + "Z" * 990 + '" "x": 1}', '[REDACTED]" "x": 1}'),
        ('{"api_key":\n  "' + "Z" * 5000 + '" "x": 1}', '[REDACTED]" "x": 1}'),
        # escaped quotes and backslashes in the secret, and in an earlier string
        ('{"n": "a\\"b\\\\", "password": "' + 'q\\"\\\\' * 400 + '" "x": 1}', '[REDACTED]" "x": 1}'),
        # a mistake inside the secret: an invalid escape, a control character, a string never closed
        ('{"api_key": "' + "Q" * 1500 + "\\q" + "W" * 30 + '"}', "[REDACTED]"),
        ('{"api_key": "' + "Q" * 1500 + "\x01" + "W" * 30 + '"}', "[REDACTED]"),
        ('{"api_key": "' + "Q" * 1500, '"api_key": "[REDACTED]'),
        # a secret under a name spelt with an escape
        ('{"api\\u005fkey": "' + "Z" * 1200 + '" "x": 1}', '[REDACTED]" "x": 1}'),
    ],
)
def test_a_secret_of_any_length_is_not_quoted_near_a_mistake(text: str, shown: str) -> None:
    message = _json_refusal(text)
    assert message.endswith(f"{shown}')")
    assert "ZZZ" not in message and "QQQ" not in message and "END PRIVATE" not in message and "q\\\\" not in message


def test_a_name_cut_at_the_start_of_the_window_is_read_whole() -> None:
    """The secret's name starts just before the 1,000 characters read: it is read from its quote."""
    for size in (975, 980, 985, 990):
        message = _json_refusal('{"name":"a","private_key": "' + "Z" * size + '" "x": 1}')
        assert "ZZ" not in message and '[REDACTED]" "x": 1}' in message


def test_a_long_value_that_is_no_secret_is_shown() -> None:
    """Only a secret's value is hidden: the end of a long note stays in view, as the mistake's place."""
    assert _json_refusal('{"note": "' + "a" * 2000 + 'tail" x}').endswith("(near '" + "a" * 32 + "tail\" x}')")
    assert _json_refusal('{"api_key": "' + "a" * 2000 + '", "note": "' + "b" * 2000 + '" x}').endswith(
        "(near 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\" x}')"
    )


def test_a_large_text_of_escapes_and_strings_is_read_right() -> None:
    """256 KiB of escaped quotes inside the secret, and of short strings before a mistake."""
    assert _json_refusal('{"token": "' + '\\"' * 131_000 + '" "x": 1}').endswith('(near \'[REDACTED]" "x": 1}\')')
    assert _json_refusal('{"a": [' + '"",' * 87_000 + '"x" "y"]}').endswith(
        """(near ',"","","","","","","","","","","x" "y"]}')"""
    )


# ---------------------------------------------------------------------------- 3. the decoder's messages


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ('{"a": "x\x01"}', "arguments are not valid JSON: Invalid control character at line 1 column 9 "),
        ('{"a": "xy', "arguments are not valid JSON: Unterminated string starting at line 1 column 7 "),
    ],
)
def test_the_decoder_message_reads_once(text: str, start: str) -> None:
    message = _json_refusal(text)
    assert message.startswith(start) and " at at " not in message


def test_a_key_that_is_not_a_string_is_named_as_json_writes_it() -> None:
    with pytest.raises(ToolArgumentError) as err:
        check_signature({None: 1, True: 2, 3: 4}, frozenset({"a"}), frozenset(), True)
    assert [p.message for p in err.value.problems] == [
        "property names must be strings, got null",
        "property names must be strings, got boolean true",
        "property names must be strings, got integer 3",
    ]


# ---------------------------------------------------------------------------- 2. bounded errors


def test_the_names_an_unknown_argument_may_be_are_listed_in_part() -> None:
    accepted = frozenset(f"p{i:04}_" + "x" * 50 for i in range(3000))
    with pytest.raises(ToolArgumentError) as err:
        check_signature({f"z{i}": 1 for i in range(50)}, accepted, frozenset(), False)
    first = err.value.problems[0].message
    assert first.startswith("unexpected argument; expected one of: p0000_x") and first.endswith(", ... (2,980 more)")
    assert first.count(", p") == 19
    assert len(json.dumps(err.value.to_dict())) < 40_000


def test_a_few_accepted_names_are_all_listed() -> None:
    with pytest.raises(ToolArgumentError) as err:
        check_signature({"c": 1}, frozenset({"b", "a"}), frozenset(), False)
    assert err.value.problems[0].message == "unexpected argument; expected one of: a, b"


def test_to_dict_is_bounded_as_the_message_is() -> None:
    """50 problems of 165,000 characters each: the listing is cut, and so is each text."""
    long = "allowed: " + ", ".join(f"p{i}_" + "x" * 50 for i in range(3000))
    err = ToolArgumentError([ArgumentProblem(f"$.z{i}", long, "additionalProperties", long, long) for i in range(50)])
    data = err.to_dict()
    assert len(json.dumps(data)) < 3 * ERROR_TEXT_LIMIT
    problems = data["problems"]
    assert all(len(text) <= 1_000 for p in problems for text in p.values())
    assert problems[0]["message"].endswith("characters in all, the first 929 shown]")
    listed = len(problems) - 1
    assert 1 <= listed < 50 and problems[-1]["message"] == f"only the first {listed} of 50 problems are listed"
    assert ArgumentProblem.from_dict(problems[-1]).is_listing_cut
    restored = ToolArgumentError.from_dict(data)
    assert isinstance(restored, ToolArgumentError) and restored.problems[0].path == "$.z0"


def test_to_dict_of_a_listing_already_cut_counts_its_total() -> None:
    err = ToolArgumentError([ArgumentProblem(f"$.z{i}", "x" * 2000) for i in range(150)])
    problems = err.to_dict()["problems"]
    assert problems[-1]["message"] == f"only the first {len(problems) - 1} of 150 problems are listed"


def test_to_dict_of_ordinary_problems_is_whole() -> None:
    problems = [ArgumentProblem(f"$.a{i}", "expected integer, got string", "type", "integer", "string") for i in range(100)]
    err = ToolArgumentError(problems)
    assert err.to_dict()["problems"] == [p.to_dict() for p in problems]


def test_a_registry_refusal_carries_a_bounded_dict() -> None:
    """The reviewer's reproduction: 50 unknown names on a tool of 3,000 properties (3.4 MB before)."""
    from harness_one import define_tool

    def s(**kw: object) -> str:
        return "ok"

    schema = {
        "type": "object",
        "properties": {f"p{i}_" + "x" * 50: {"type": "string"} for i in range(3000)},
        "additionalProperties": False,
    }
    reg = ToolRegistry(autoload=False)
    reg.add(define_tool(name="s", parameters=schema, registry=None)(s))
    with pytest.raises(ToolArgumentError) as err:
        reg.call("s", {f"z{i}": 1 for i in range(50)})
    assert len(json.dumps(err.value.to_dict())) < 3 * ERROR_TEXT_LIMIT + 2_000


def test_a_tools_own_problem_with_values_that_are_not_text_reads_in_to_dict() -> None:
    """A tool's ``ArgumentProblem('$.n', 'must be even', 'multipleOf', 2, n)``: ``to_dict`` raised TypeError once
    problems were bounded; numbers stay numbers, anything else is its bounded text."""
    registry = ToolRegistry(autoload=False)

    def even(n: int) -> int:
        problems = [
            ArgumentProblem("$.n", "must be even", "multipleOf", 2, n),
            ArgumentProblem("$.m", "x", "k", [1] * 10**6, 10**5000),
        ]
        raise ToolArgumentError(problems)

    registry.add(even)
    problems = registry.try_call("even", {"n": 3}).to_dict()["error"]["problems"]
    assert problems[0] == {"path": "$.n", "keyword": "multipleOf", "message": "must be even", "expected": 2, "got": 3}
    assert problems[1]["expected"] == "[1, 1, 1, 1, 1, 1, ...]" and problems[1]["got"] == "<int>"  # (past the int-to-text limit)
