"""Instructions per call of harness-one's call paths, counted by callgrind: exact where time is not.

Wall-clock figures move with the machine's load; an instruction count does not (for the same
binary, inputs and environment). Each path runs in its own ``valgrind --tool=callgrind``
process, ``PYTHONHASHSEED=0``, warmed with 10,000 calls; only instructions inside
``functools.reduce`` are counted, over ``N`` and then ``3 N`` calls, and a row is
``(count(3N) - count(N)) / 2N``: the set-up, the warm-up and the interpreter's start-up cancel.
The timing loop (one lambda call per call, about 900 instructions) is included in every row.

    .venv/bin/python bench/instructions.py            # every path
    .venv/bin/python bench/instructions.py standard refused_try_call

Needs valgrind (``apt-get install valgrind``); takes about a minute per path.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["PATHS", "count"]

_SETUP = """
import asyncio, functools, json, sys
sys.path.insert(0, {here!r})
from peers import ARGS, add
from harness_one import RateLimitExceeded, ToolRegistry
from percall import aadd, registry

def refused_registry():
    reg = registry(rate_limit={{"rate": 1e-9, "burst": 1}})
    reg.call("add", ARGS)
    return reg

def except_refusal(reg):
    try:
        reg.call("add", ARGS)
    except RateLimitExceeded:
        pass

def run_async(fn):
    def one():
        coro = fn()
        try:
            coro.send(None)
        except StopIteration:
            pass
    return one
"""

#: name -> (set-up statements, one call as an expression of ``reg``)
PATHS: dict[str, tuple[str, str]] = {
    "bare": ("reg = None", "add(a=5, b=3)"),
    "no_plugins": ("reg = registry(standard_plugins=False)", 'reg.call("add", ARGS)'),
    "no_plugins_class": ("ToolRegistry.set_default(registry(standard_plugins=False))", 'ToolRegistry.call("add", ARGS)'),
    "standard": ("reg = registry()", 'reg.call("add", ARGS)'),
    "standard_json_text": ("reg = registry(); text = json.dumps(ARGS)", 'reg.call("add", text)'),
    "try_call": ("reg = registry()", 'reg.try_call("add", ARGS)'),
    "acall": ("reg = registry(aadd); one = run_async(lambda: reg.acall('add', ARGS))", "one()"),
    "refused_try_call": ("reg = refused_registry()", 'reg.try_call("add", ARGS)'),
    "refused_call": ("reg = refused_registry()", "except_refusal(reg)"),
    "pydantic_ai": (
        "from peers import _pydantic_ai\n_, fn, _ = _pydantic_ai()",
        "fn()",
    ),
}

_RUN = """
{setup}
{prepare}
def step(_, __):
    return {stmt}
for _ in range(10_000):
    step(None, None)
functools.reduce(step, range({n}), None)
"""

_TOTAL = re.compile(r"^summary:\s+(\d+)", re.MULTILINE)


def _instructions(name: str, n: int) -> int:
    prepare, stmt = PATHS[name]
    here = str(Path(__file__).resolve().parent)
    code = _RUN.format(setup=_SETUP.format(here=here), prepare=prepare, stmt=stmt, n=n)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--collect-atstart=no",
                "--toggle-collect=functools_reduce",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-c",
                code,
            ],
            check=True,
            capture_output=True,
            env=env,
        )
        found = _TOTAL.search(out.read_text())
        if found is None:
            raise RuntimeError(f"no summary in callgrind's output for {name}")
        return int(found.group(1))


def count(name: str, n: int = 1000) -> float:
    """Instructions per call of path ``name`` (a key of :data:`PATHS`)."""
    return (_instructions(name, 3 * n) - _instructions(name, n)) / (2 * n)


def main() -> None:
    names = sys.argv[1:] or list(PATHS)
    for name in names:
        print(f"{name:20} {count(name):>10,.0f}", flush=True)


if __name__ == "__main__":
    main()
