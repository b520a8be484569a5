"""Start-up time: fresh interpreters importing harness-one, its command line, and langchain-core.

Each command runs ``runs`` times, the commands interleaved round by round so load on the
machine hits all alike; a row is the median wall-clock time of its runs, in milliseconds,
``python -c pass`` the baseline every other row includes.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from table import Row

__all__ = ["startup_rows"]


def _commands() -> list[tuple[str, list[str], float | None]]:
    python = sys.executable
    cli = Path(python).with_name("harness-one")
    return [
        ("start-up: python -c pass (baseline)", [python, "-c", "pass"], None),
        ('start-up: python -c "import harness_one.tools"', [python, "-c", "import harness_one.tools"], 100.0),
        ("start-up: harness-one --help", [str(cli), "--help"], 150.0),
        ('start-up: python -c "import langchain_core.tools"', [python, "-c", "import langchain_core.tools"], None),
    ]


def startup_rows(runs: int = 10) -> list[Row]:
    """One row per command: the median of ``runs`` fresh processes, in ms."""
    commands = [c for c in _commands() if Path(c[1][0]).exists()]
    times: dict[str, list[float]] = {label: [] for label, _, _ in commands}
    # One untimed run each: the page cache warm and byte-code written, as an installed wheel
    # has it, even where PYTHONDONTWRITEBYTECODE is set (an editable install would then
    # compile every module on every start).
    writes = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for _, argv, _ in commands:
        subprocess.run(argv, capture_output=True, check=False, env=writes)
    for _ in range(runs):
        for label, argv, _ in commands:
            start = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, check=False)
            times[label].append(time.perf_counter() - start)
            if done.returncode:
                print(f"note: {' '.join(argv)} failed: {done.stderr.decode(errors='replace')[-300:]}")
    return [Row(label, statistics.median(times[label]) * 1e3, "ms", target) for label, _, target in commands]
