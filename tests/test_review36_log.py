"""A log sink that fails shows its own error on stderr, never the tool's exception it was logged under."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from harness_one import ToolRegistry


class RaisingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        raise KeyError("filter broke")


@pytest.fixture
def broken_sink(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import harness_one._log as log_module

    monkeypatch.setattr(log_module, "_failures", 0, raising=False)  # the first failure is the one shown
    logger = logging.getLogger("harness_one.calls")
    sink = RaisingFilter()
    logger.addFilter(sink)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeFilter(sink)
        logger.setLevel(logging.NOTSET)


def test_the_report_of_a_broken_sink_leaves_out_the_tools_unmasked_exception(
    broken_sink: None, capsys: pytest.CaptureFixture[str]
) -> None:
    def login(password: str) -> str:
        raise RuntimeError(f"login failed with password {password}")

    reg = ToolRegistry(autoload=False)
    reg.add(login)
    answer = reg.try_call("login", {"password": "Tr0ub4dor&3xyz"})
    assert not answer.ok and "Tr0ub4dor" not in answer.for_model()
    shown = capsys.readouterr().err
    assert "failed in the application's logging" in shown and "KeyError: 'filter broke'" in shown
    assert "Tr0ub4dor" not in shown and "login failed" not in shown
