"""The base of every kit class: the override guard and capability flags."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

import pytest

__all__ = ["GUARD", "Suite", "xfail_reason"]

#: The guard's name: like langchain-tests', it says what it is in every report.
GUARD = "test_no_overrides_DO_NOT_OVERRIDE"


def xfail_reason(fn: Any) -> str | None:
    """The non-empty ``reason=`` of an ``@pytest.mark.xfail`` on ``fn``, or None."""
    for mark in getattr(fn, "pytestmark", ()):
        reason = mark.kwargs.get("reason") if mark.name == "xfail" else None
        if isinstance(reason, str) and reason.strip():
            return reason
    return None


class Suite:
    """What every kit class shares. Subclass a kit class (never this one) in your tests.

    Each kit class records its standard tests when it is defined; the guard compares the
    subclass against that record, so a test overridden, set to ``None`` or deleted from the
    kit class is found. An override is allowed only under ``@pytest.mark.xfail(reason=...)``:
    a known failure, said out loud. Checks that do not apply are switched off with the
    suite's capability flags, which skip them with the flag's name as the reason.
    """

    #: Lets the pytest plugin tell kit tests apart without importing the kit.
    __harness_one_suite__: ClassVar[bool] = True
    _harness_standard: ClassVar[dict[str, Callable[..., Any]]] = {}

    def __init_subclass__(cls, *, standard: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if standard:
            cls._harness_standard = {n: inspect.getattr_static(cls, n) for n in dir(cls) if n.startswith("test_")}
            cls._harness_is_standard = True  # type: ignore[attr-defined]
        elif GUARD in cls.__dict__:
            raise TypeError(f"{cls.__qualname__} overrides {GUARD}; the guard of the conformance kit cannot be overridden.")
        else:
            cls._harness_is_standard = False  # type: ignore[attr-defined]

    def test_no_overrides_DO_NOT_OVERRIDE(self) -> None:  # noqa: N802 - the name is the message
        """No standard test is overridden or deleted without ``@pytest.mark.xfail(reason=...)``."""
        cls = type(self)
        problems = []
        for kit in cls.__mro__:
            if not kit.__dict__.get("_harness_is_standard"):
                continue
            for name, original in kit.__dict__["_harness_standard"].items():
                current = inspect.getattr_static(cls, name, None)
                if current is original:
                    continue
                if not callable(current):
                    problems.append(f"{name} is deleted (now {current!r})")
                elif xfail_reason(current) is None:
                    problems.append(f"{name} is overridden without @pytest.mark.xfail(reason=...)")
        assert not problems, (
            f"{cls.__qualname__} changes standard tests of the conformance kit: "
            + "; ".join(sorted(problems))
            + ". Mark a known failure with @pytest.mark.xfail(reason='why'), or switch a check off with its capability flag."
        )

    def switched_off(self, flag: str, meaning: str) -> NoReturn:
        """Skip the running check: capability ``flag`` says it does not apply."""
        pytest.skip(f"switched off: {type(self).__name__}.{flag} = {getattr(self, flag)!r} ({meaning})")
