"""Registration at scale: adding ``tools`` tools, ``Tool.create``, suggestions and exports at that size.

Run alone with ``python bench/scale.py --tools 100000``; ``bench/percall.py`` runs it too.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import time

from table import Row

from harness_one import Tool, ToolNotFound, ToolRegistry

__all__ = ["scale_rows"]

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}
AT = 100_000  # the size the targets are given for


def add(a: float, b: float) -> float:
    return a + b


def _schemas(count: int) -> list[dict[str, object]]:
    """A fresh schema per tool, as a real catalogue has (no cache keyed on one object can help)."""
    text = json.dumps(SCHEMA)
    return [json.loads(text) for _ in range(count)]


def scale_rows(tools: int = AT, creates: int = 1000) -> list[Row]:
    """Rows for a registry of ``tools`` tools (standard plugins) and ``creates`` ``Tool.create`` calls."""
    size = f"{tools:,} tools"
    at_size = tools >= AT
    schemas = _schemas(creates)
    gc.collect()  # a full collection the rows before made due would otherwise land in this one-shot timing
    start = time.perf_counter()
    for i, schema in enumerate(schemas):
        Tool.create(add, name=f"c{i}", description="Adds two numbers", parameters=schema)
    create_us = (time.perf_counter() - start) / creates * 1e6

    reg = ToolRegistry(autoload=False)
    tail = max(1, tools // 100)
    schemas = _schemas(tools)
    start = time.perf_counter()
    for i, schema in enumerate(schemas[:-tail]):
        reg.add(add, name=f"tool_{i}", description="Adds two numbers", parameters=schema)
    middle = time.perf_counter()
    for i, schema in enumerate(schemas[-tail:], start=tools - tail):
        reg.add(add, name=f"tool_{i}", description="Adds two numbers", parameters=schema)
    end = time.perf_counter()

    unknown = []
    for i in range(5):
        start_miss = time.perf_counter()
        with contextlib.suppress(ToolNotFound):
            reg.call(f"tool_{i}x7")
        unknown.append(time.perf_counter() - start_miss)

    gc.collect()  # as before Tool.create: a full collection the adds made due lands here otherwise (1.4 s against 0.4)
    # The registry's work (copy=False: its cached export as it is); the default copy is a row of its own.
    start_export = time.perf_counter()
    reg.export("openai", copy=False)
    first = time.perf_counter() - start_export
    reg.add(add, name="one_more", description="Adds two numbers", parameters=_schemas(1)[0])
    start_export = time.perf_counter()
    reg.export("openai", copy=False)
    again = time.perf_counter() - start_export
    reg.remove("one_more")
    start_export = time.perf_counter()
    reg.export("openai", copy=False)
    removed = time.perf_counter() - start_export
    start_export = time.perf_counter()
    reg.export("openai")
    copied = time.perf_counter() - start_export
    share = first / tools * 1e6
    return [
        Row("scale: Tool.create, explicit schema, per tool", create_us, "us", 150.0),
        Row(f"scale: add {size} with explicit schemas, in all", end - start, "s"),
        Row("scale: the last 1% of those adds, per tool", (end - middle) / tail * 1e6, "us"),
        Row(
            f"scale: unknown name answered with suggestions, at {size}",
            statistics.median(unknown) * 1e3,
            "ms",
            5.0 if at_size else None,
            "" if at_size else f"the 5 ms target is for {AT:,}",
        ),
        Row(f'scale: registry.export("openai", copy=False), at {size}', first * 1e3, "ms"),
        Row("scale: the same export after one added tool", again * 1e3, "ms", note=f"one tool's share: {share:.3g} us"),
        Row("scale: the same export after one removed tool", removed * 1e3, "ms", note="each other tool's share reused"),
        Row("scale: the same export, a deep copy for the caller (the default)", copied * 1e3, "ms"),
    ]


def main() -> None:
    from table import render

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tools", type=int, default=AT)
    print(render(scale_rows(parser.parse_args().tools)))


if __name__ == "__main__":
    main()
