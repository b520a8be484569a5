"""Review 31: one ``error.type`` naming for a tool's exception (live, replayed, process mode); cuts that keep symbols whole."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

import pytest
import tools_for_process_mode2 as tpm

from harness_one import ToolError, ToolExecutionError, ToolRegistry
from harness_one_plugins.otel import error_type
from harness_one_plugins.output import OutputLimit


class QuotaError(Exception):
    pass


class Outer:
    class Inner(Exception):
        pass


@pytest.fixture
def reg() -> Iterator[ToolRegistry]:
    registry = ToolRegistry(autoload=False)
    yield registry
    registry.plugins.get("timeout").processes.shutdown()


# --- error.type of a tool's exception --------------------------------------------------------


@pytest.mark.parametrize("cls", [QuotaError, Outer.Inner, ValueError])
def test_a_replayed_error_names_its_cause_as_the_live_one_does(reg: ToolRegistry, cls: type[Exception]) -> None:
    def fail() -> None:
        raise cls("over quota")

    reg.add(fail, idempotent=True)
    first, second = (reg.try_call("fail", idempotency_key="k") for _ in range(2))
    assert isinstance(first.error, ToolExecutionError) and isinstance(second.error, ToolExecutionError)
    assert getattr(second.error, "replayed", False) and not isinstance(second.error.cause, BaseException)
    named = cls.__qualname__ if cls is ValueError else f"{__name__}.{cls.__qualname__}"
    assert first.error.to_dict()["cause"] == second.error.to_dict()["cause"] == second.error.cause == named
    assert error_type(first.error) == error_type(second.error) == named  # the span's and metrics' error.type
    assert second.error.message == first.error.message == f"Tool 'fail' failed: {cls.__name__}: over quota"


def test_type_name_is_module_and_qualname_a_builtins_bare() -> None:
    from harness_one._errors import type_name

    assert (type_name(Outer.Inner), type_name(ValueError)) == (f"{__name__}.Outer.Inner", "ValueError")


def test_an_outcome_stored_before_keeps_its_bare_type_name() -> None:
    old = ToolError.from_dict({"type": "ToolExecutionError", "message": "Tool 'q' failed: QuotaError: x", "cause": "QuotaError"})
    assert isinstance(old, ToolExecutionError) and old.cause == "QuotaError" and error_type(old) == "QuotaError"


def test_an_exception_a_worker_only_describes_is_named_as_in_the_other_modes(reg: ToolRegistry) -> None:
    reg.add(tpm.raise_unsendable_secret, timeout=30, timeout_mode="process")
    reg.add(tpm.raise_unsendable_secret, name="in_thread")
    process, thread = reg.try_call("raise_unsendable_secret"), reg.try_call("in_thread")
    assert isinstance(process.error, ToolExecutionError) and isinstance(thread.error, ToolExecutionError)
    assert process.error.cause == "tools_for_process_mode2.Unsendable" == error_type(thread.error) == error_type(process.error)
    assert str(process.error) == "Tool 'raise_unsendable_secret' failed: Unsendable: cannot connect to postgres://[REDACTED]@db/x"


# --- a cut never splits a symbol -------------------------------------------------------------


def cut(text: str, limit: int = 100, unit: str = "chars") -> str:
    """What the plugin shows of ``text`` (the marker taken off), checked to fit the limit."""
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: text, name="t", options={"max_output": {"limit": limit, "unit": unit}})
    out = reg.call("t")
    assert OutputLimit(limit, unit).measure(out) <= limit
    head, marker = out.rsplit("\n[output truncated: ", 1)
    assert text.startswith(head) and marker.endswith(f"the first {OutputLimit(limit, unit).measure(head):,} shown]")
    return head


FLAG, ACCENT = "\U0001f1eb\U0001f1f7", "e\u0301"


@pytest.mark.parametrize("unit", ["chars", "bytes"])
@pytest.mark.parametrize("pad", range(6))
def test_a_cut_keeps_a_flag_whole(unit: str, pad: int) -> None:
    for text in ("a" * (37 + pad) + FLAG * 100, FLAG * 100, "a" * pad + FLAG * 600):  # (a run longer than the marker's room)
        head = cut(text, unit=unit)
        run = len(head) - len(head.rstrip(FLAG))
        assert run % 2 == 0 and head.endswith(FLAG if run else "a"), (text[:50], head[-4:])


@pytest.mark.parametrize("unit", ["chars", "bytes"])
@pytest.mark.parametrize("pad", range(4))
def test_a_cut_keeps_a_letter_with_its_marks(unit: str, pad: int) -> None:
    for symbol in (ACCENT, "e\u0301\u0323", "\u0915\u093f", "1\ufe0f\u20e3"):  # marks, a vowel sign, a keycap (Me)
        text = "a" * (37 + pad) + symbol * 100
        head = cut(text, unit=unit)
        assert not unicodedata.category(text[len(head)]).startswith("M") and (head.endswith(symbol) or head.endswith("a"))


@pytest.mark.parametrize("unit", ["chars", "bytes"])
@pytest.mark.parametrize("pad", range(12))
def test_a_cut_keeps_an_emoji_sequence_whole(unit: str, pad: int) -> None:
    for symbol in (
        "\U0001f469\u200d\U0001f4bb",
        "\u2764\ufe0f",
        "\U0001f468\U0001f3fb\u200d\u2764\ufe0f\u200d\U0001f468\U0001f3fc",
    ):
        head = cut("a" * (37 + pad) + symbol * 100, unit=unit)
        assert head.endswith(symbol) or head.endswith("a"), (symbol, head[-6:])


def test_the_backing_up_is_bounded() -> None:
    plain = len(cut("a" * 506))
    head = cut("a" * 5 + "e" + "\u0301" * 500)  # a letter with hundreds of marks: cut 16 characters back from the limit
    assert len(head) == plain - 16 and head.endswith("\u0301")
