"""Process mode from a program read from stdin (``python - < prog.py``): its ``__main__`` names no file a worker
could import, so workers start without it (they failed to start: ``FileNotFoundError: '<stdin>'``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_PROGRAM = """
import tools_for_processes as tfp
from harness_one import ToolRegistry

reg = ToolRegistry(autoload=False, plugin_options={"timeout": {"mode": "process"}})
reg.add(tfp.pid, timeout=60)
result = reg.try_call("pid")
print(result.ok, result.value != __import__("os").getpid(), result.for_model()[:300])
"""


@pytest.mark.skipif(os.name != "posix", reason="process mode needs POSIX")
def test_a_program_read_from_stdin_runs_its_process_mode_tools(tmp_path: Path) -> None:
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-"], check=False, input=_PROGRAM, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 2)[:2] == ["True", "True"], done.stdout  # run in a worker, another process
