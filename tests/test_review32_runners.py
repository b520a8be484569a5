"""Review 32 (process mode, retry): a warm worker started before a tool's module was imported (a ``sys.path``
entry added, a module loaded from a file) is replaced, not refusing the tool for the runner's life; a retry
the total timeout refuses is counted as given up."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import random
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tools_for_processes import pid

from harness_one import ManualClock, ProcessRunner, RetryableError, ToolExecutionError, ToolRegistry
from harness_one_plugins import RetryPlugin, TimeoutPlugin

_SOURCE = "import os\n\n\ndef {name}() -> int:\n    return os.getpid()\n"


@pytest.fixture
def late(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, bool], Any]]:
    """Writes a module ``name`` in ``tmp_path`` and imports it: through ``sys.path`` (appended to), or
    (``from_file``) with ``spec_from_file_location``; both undone after the test."""
    names: list[str] = []

    def load(name: str, from_file: bool) -> Any:
        path = tmp_path / f"{name}.py"
        path.write_text(_SOURCE.format(name=name))
        names.append(name)
        if not from_file:
            monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
            return importlib.import_module(name)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    yield load
    for name in names:
        sys.modules.pop(name, None)


def _registry(runner: ProcessRunner) -> ToolRegistry:
    reg = ToolRegistry(autoload=False, plugins={"timeout": TimeoutPlugin(mode="process", default=60)})
    reg.plugins.get("timeout").processes = runner
    reg.add(pid)
    return reg


@pytest.mark.parametrize("from_file", [False, True], ids=["sys.path", "spec_from_file_location"])
@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_module_imported_after_the_worker_started_runs_in_a_new_one(
    processes: Callable[..., ProcessRunner], late: Callable[[str, bool], Any], from_file: bool, how: str
) -> None:
    """It was refused (``No module named ...``, call.ran False) on every call, the stale worker taken again."""
    runner = processes(max_workers=1)
    reg = _registry(runner)
    first = reg.call("pid")  # the warm worker, started before the import
    name = f"late_review32_{'file' if from_file else 'path'}_{how}"
    reg.add(getattr(late(name, from_file), name))
    if how == "sync":
        results = [reg.try_call(name) for _ in range(2)]
    else:

        async def twice() -> list[Any]:
            return [await asyncio.wait_for(reg.atry_call(name), 60) for _ in range(2)]

        results = asyncio.run(twice())
    assert [r.error for r in results] == [None, None] and all(r.ran for r in results)
    assert results[0].value == results[1].value != first  # a new worker, kept for the next call
    assert reg.call("pid") == results[0].value and runner.stats()["alive"] == 1  # the stale one retired


def test_a_job_no_new_worker_could_load_is_refused_by_the_same_worker(processes: Callable[..., ProcessRunner]) -> None:
    """Nothing a worker gets changed (a module with no file): refused, the warm worker kept, none started."""
    runner = processes(max_workers=1)
    reg = _registry(runner)
    first = reg.call("pid")
    ghost = types.ModuleType("ghost_review32")
    exec(_SOURCE.format(name="ghost"), ghost.__dict__)
    sys.modules["ghost_review32"] = ghost
    try:
        reg.add(ghost.ghost)
        result = reg.try_call("ghost")
    finally:
        del sys.modules["ghost_review32"]
    assert isinstance(result.error, ToolExecutionError) and not result.ran
    assert "No module named 'ghost_review32'" in result.error.message
    assert reg.call("pid") == first and runner.stats()["alive"] == 1


def test_a_retry_the_total_timeout_refuses_is_counted_as_given_up(clock: ManualClock) -> None:
    """The core drops a Retry whose wait ends after the total timeout: it was counted in ``retries``."""
    plugin = RetryPlugin(rng=random.Random(1))
    reg = ToolRegistry(plugins={"retry": plugin}, clock=clock, autoload=False)
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        if len(runs) == 1:
            raise RetryableError("busy", retry_after=0.5)
        raise RetryableError("slow down", retry_after=10.0)

    reg.add(flaky, idempotent=True, total_timeout=1.0, timeout_mode="none", retry={"attempts": 5})
    result = reg.try_call("flaky")
    assert isinstance(result.error, RetryableError) and len(runs) == 2
    assert reg.stats()["retry"] == {"retries": 1, "gave_up": 1}
