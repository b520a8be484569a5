"""What a timeout costs per call when it does not trip, beside the raw mechanisms it is built on.

Run with ``python bench/timeouts.py``. Prints ``| what | us per call |`` rows (best of several
repeats): a raw ``ThreadPoolExecutor`` round trip, ``ThreadRunner.run`` / ``arun``, a trivial
coroutine bare, under ``asyncio.timeout`` and under ``asyncio.wait_for``; process mode: a warm
worker (``ProcessRunner.run`` / ``arun`` and a whole ``registry.call`` with
``timeout_mode="process"``), a fresh worker per call (``max_calls=1``, which is what every call
cost before warm workers) and a cold first call (a new runner starts its worker).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness_one import Call, ProcessRunner, ThreadRunner, ToolRegistry

TIMEOUT = 10.0
ARGS = {"a": 5, "b": 3}


def add(a: float, b: float) -> float:
    return a + b


async def coro() -> int:
    return 1


def a_call() -> Call:
    """A real ``Call`` for the runners (they use it only to name the tool and to cancel)."""

    def grab(call: Call) -> Call:
        return call

    reg = ToolRegistry(standard_plugins=False, autoload=False)
    reg.add(grab, name="add")
    result: Call = reg.call("add")
    return result


def interleaved_us(fns: dict[str, Callable[[], Any]], number: int, repeat: int) -> dict[str, float]:
    """Best per-call time of each function, in microseconds, the repeats interleaved so load hits all alike."""
    best = dict.fromkeys(fns, float("inf"))
    for fn in fns.values():
        fn()
    for _ in range(repeat):
        for label, fn in fns.items():
            start = time.perf_counter()
            for _ in range(number):
                fn()
            best[label] = min(best[label], time.perf_counter() - start)
    return {label: t / number * 1e6 for label, t in best.items()}


def interleaved_async_us(makes: dict[str, Callable[[], Awaitable[Any]]], number: int, repeat: int) -> dict[str, float]:
    """Like :func:`interleaved_us` for awaitables, all repeats inside one event loop."""

    async def main() -> dict[str, float]:
        best = dict.fromkeys(makes, float("inf"))
        for make in makes.values():
            await make()
        for _ in range(repeat):
            for label, make in makes.items():
                start = time.perf_counter()
                for _ in range(number):
                    await make()
                best[label] = min(best[label], time.perf_counter() - start)
        return {label: t / number * 1e6 for label, t in best.items()}

    return asyncio.run(main())


def rows(number: int, repeat: int) -> list[tuple[str, float]]:
    call = a_call()
    hop = max(200, number // 20)
    out: dict[str, float] = {}

    pool = ThreadPoolExecutor(max_workers=32)
    threads = ThreadRunner(32)
    out |= interleaved_us(
        {
            "raw ThreadPoolExecutor.submit(fn).result(timeout=10)": lambda: pool.submit(add, **ARGS).result(TIMEOUT),
            "ThreadRunner.run (timeout=10)": lambda: threads.run(call, add, ARGS, TIMEOUT),
        },
        hop,
        repeat,
    )

    async def raw_executor() -> Any:
        return await asyncio.get_running_loop().run_in_executor(pool, add, 5, 3)

    async def wait_for_executor() -> Any:
        return await asyncio.wait_for(asyncio.shield(asyncio.get_running_loop().run_in_executor(pool, add, 5, 3)), TIMEOUT)

    out |= interleaved_async_us(
        {
            "raw loop.run_in_executor(pool, fn), awaited": raw_executor,
            "run_in_executor under asyncio.wait_for(shield(...), 10), as arun did": wait_for_executor,
            "ThreadRunner.arun (timeout=10)": lambda: threads.arun(call, add, ARGS, TIMEOUT),
        },
        hop,
        repeat,
    )
    pool.shutdown()
    threads.shutdown()

    async def bare() -> Any:
        return await coro()

    async def under_timeout() -> Any:
        async with asyncio.timeout(TIMEOUT):
            return await coro()

    coros: dict[str, Callable[[], Awaitable[Any]]] = {"await a trivial coroutine": bare}
    coros["the same under async with asyncio.timeout(10)"] = under_timeout
    coros["the same under asyncio.wait_for(coro, 10)"] = lambda: asyncio.wait_for(coro(), TIMEOUT)
    out |= interleaved_async_us(coros, number, repeat)

    processes = ProcessRunner()
    processes.run(call, add, ARGS, TIMEOUT)  # starts the worker (before warm workers: one process per call)
    first = time.perf_counter()
    processes.run(call, add, ARGS, TIMEOUT)
    count = max(3, min(hop, int(0.5 / (time.perf_counter() - first))))  # about half a second per repeat
    out |= interleaved_us(
        {"ProcessRunner.run, warm worker (timeout=10)": lambda: processes.run(call, add, ARGS, TIMEOUT)}, count, repeat
    )
    out |= interleaved_async_us(
        {"ProcessRunner.arun, warm worker (timeout=10)": lambda: processes.arun(call, add, ARGS, TIMEOUT)}, count, repeat
    )
    processes.shutdown()

    reg = ToolRegistry(autoload=False)
    reg.add(add, timeout=TIMEOUT, timeout_mode="process")
    reg.call("add", ARGS)  # starts the worker
    out |= interleaved_us(
        {"registry.call, standard plugins, timeout_mode='process', warm worker": lambda: reg.call("add", ARGS)}, count, repeat
    )
    reg.plugins.get("timeout").processes.shutdown()

    fresh = ProcessRunner(max_calls=1)  # a new worker process per call: the cost of every call before warm workers
    out |= interleaved_us(
        {
            "ProcessRunner.run, a fresh worker per call (max_calls=1; before warm workers)": lambda: fresh.run(
                call, add, ARGS, TIMEOUT
            )
        },
        3,
        min(repeat, 3),
    )
    fresh.shutdown()

    def cold() -> None:
        runner = ProcessRunner()
        runner.run(call, add, ARGS, TIMEOUT)
        runner.shutdown()

    colds = []
    for _ in range(3):
        start = time.perf_counter()
        cold()
        colds.append(time.perf_counter() - start)
    out["ProcessRunner.run, cold first call (a new runner starts its worker)"] = min(colds) * 1e6
    return list(out.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--number", type=int, default=20_000, help="calls per repeat for the async rows (thread rows: 1/20)")
    parser.add_argument("--repeat", type=int, default=7)
    opts = parser.parse_args()
    print("| what | us per call |")
    print("| --- | ---: |")
    for label, us in rows(opts.number, opts.repeat):
        print(f"| {label} | {us:.3g} |" if us < 1000 else f"| {label} | {us:,.0f} |")


if __name__ == "__main__":
    main()
