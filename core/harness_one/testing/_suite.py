"""The base of every kit class: the override guard and capability flags."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NoReturn

import pytest

from .._clock import ManualClock

__all__ = ["GUARD", "BoundedClock", "Suite", "tuning_changes", "xfail_reason"]

#: The guard's name: like langchain-tests', it says what it is in every report.
GUARD = "test_no_overrides_DO_NOT_OVERRIDE"
_KIT = "harness_one.testing"


def xfail_reason(fn: Any) -> str | None:
    """The non-empty ``reason=`` of an ``@pytest.mark.xfail`` on ``fn``, or None."""
    for mark in getattr(fn, "pytestmark", ()):
        reason = mark.kwargs.get("reason") if mark.name == "xfail" else None
        if isinstance(reason, str) and reason.strip():
            return reason
    return None


def tuning_changes(cls: type) -> list[str]:
    """The tuning attributes of kit class ``cls`` (a subclass of a kit class) that differ from the kit's values."""
    found = []
    for kit in cls.__mro__:
        for name in kit.__dict__.get("_harness_tuning", {}) if kit.__dict__.get("_harness_is_standard") else ():
            if getattr(cls, name) != kit.__dict__[name]:
                found.append(f"{name} = {getattr(cls, name)!r} (the kit's: {kit.__dict__[name]!r})")
    return found


class BoundedClock(ManualClock):
    """The kit's manual clock: every wait is instant, so a check ends its waits by counting them.

    Past ``max_waits`` waits (``sleep`` or ``asleep``), each wait raises an ``AssertionError``: a plugin
    that retries or waits without end fails the check instead of hanging it.
    """

    max_waits: ClassVar[int] = 100_000

    def __init__(self, start: float = 0.0) -> None:
        super().__init__(start)
        self.waits = 0

    def sleep(self, seconds: float) -> None:  # ``asleep`` waits through ``sleep``
        super().sleep(seconds)
        with self._lock:
            self.waits += 1
            waits = self.waits
        if waits > self.max_waits:
            raise AssertionError(
                f"the calls waited {waits} times: a plugin that retries or waits without end? "
                f"(the kit's clock makes each wait instant and stops after {self.max_waits:,} waits)"
            )


class Suite:
    """What every kit class shares. Subclass a kit class (never this one) in your tests.

    Each kit class records, when it is defined, its standard tests and the helpers its checks rely
    on (its other public callables, but for those it names as ``provided``: what an implementer
    fills in). The guard compares the subclass against that record: a test overridden, set to
    ``None`` or deleted is found, and allowed only under ``@pytest.mark.xfail(reason=...)`` (a
    known failure, said out loud); a helper overridden is never allowed. Checks that do not apply
    are switched off with the suite's capability flags, which skip them with the flag's name as
    the reason. ``standard=True`` is for the kit's own classes only.
    """

    #: Lets the pytest plugin tell kit tests apart without importing the kit.
    __harness_one_suite__: ClassVar[bool] = True
    _harness_standard: ClassVar[dict[str, Callable[..., Any]]] = {}
    #: The helpers the checks rely on, and what implementers provide or override (set per kit class).
    _harness_helpers: ClassVar[dict[str, Any]] = {}
    _harness_provided: ClassVar[tuple[str, ...]] = ()
    #: The kit class's tuning attributes, and whether its value is a floor (a lower one weakens a check).
    _harness_tuning: ClassVar[Mapping[str, bool]] = {}

    def __init_subclass__(cls, *, standard: bool = False, provided: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if standard:
            if not cls.__module__.startswith(_KIT + "."):
                raise TypeError(
                    f"{cls.__qualname__} passes standard=True, which only the conformance kit's own suites "
                    f"(modules under {_KIT}) may: subclass the suite without it."
                )
            names = [n for n in dir(cls) if not n.startswith("_")]
            cls._harness_standard = {n: inspect.getattr_static(cls, n) for n in names if n.startswith("test_")}
            found = {n: inspect.getattr_static(cls, n) for n in names if not n.startswith("test_") and n not in provided}
            cls._harness_helpers = {n: v for n, v in found.items() if callable(v) or isinstance(v, (classmethod, property))}
            cls._harness_provided = provided
            cls._harness_is_standard = True  # type: ignore[attr-defined]
        elif GUARD in cls.__dict__:
            raise TypeError(f"{cls.__qualname__} overrides {GUARD}; the guard of the conformance kit cannot be overridden.")
        else:
            cls._harness_is_standard = False  # type: ignore[attr-defined]

    def test_no_overrides_DO_NOT_OVERRIDE(self) -> None:  # noqa: N802 - the name is the message
        """No standard test is overridden or deleted without ``@pytest.mark.xfail(reason=...)``, and no helper the
        checks rely on is overridden."""
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
            for name, floor in kit.__dict__.get("_harness_tuning", {}).items():
                if floor and getattr(cls, name) < kit.__dict__[name]:
                    problems.append(
                        f"{name} = {getattr(cls, name)!r} is below the kit's {kit.__dict__[name]!r}, which it may only raise"
                    )
            provided = ", ".join(kit.__dict__["_harness_provided"]) or "nothing"
            for name, original in kit.__dict__["_harness_helpers"].items():
                if inspect.getattr_static(cls, name, None) is not original:
                    problems.append(
                        f"{name} is overridden, but the checks rely on it (a {kit.__name__} subclass overrides only: {provided})"
                    )
        assert not problems, (
            f"{cls.__qualname__} changes the conformance kit's standard tests or the helpers they rely on: "
            + "; ".join(sorted(problems))
            + ". Mark a known failure with @pytest.mark.xfail(reason='why'), switch a check off with its capability flag, "
            "and override only what the suite asks you to provide."
        )

    def switched_off(self, flag: str, meaning: str) -> NoReturn:
        """Skip the running check: capability ``flag`` says it does not apply."""
        pytest.skip(f"switched off: {type(self).__name__}.{flag} = {getattr(self, flag)!r} ({meaning})")

    def nothing_to_check(self, why: str) -> NoReturn:
        """Skip the running check: what it checks is not there (listed in the summary as switched off are)."""
        pytest.skip(f"nothing to check: {why}")
