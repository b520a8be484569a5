"""Rows of the benchmark's table: a figure, its unit, an optional target, printed or as Markdown."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Row", "render"]


@dataclass
class Row:
    """One measured figure; ``target`` is the most it may be (in ``unit``), ``None`` for none."""

    label: str
    value: float
    unit: str = "us"
    target: float | None = None
    note: str = ""
    higher_is_better: bool = False  # then ``target`` is the least it may be

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        return self.value >= self.target if self.higher_is_better else self.value <= self.target


def _num(x: float) -> str:
    if x >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}" if x >= 0.01 else f"{x:.2g}"


def render(rows: list[Row], *, markdown: bool = False) -> str:
    """The table as aligned text, or as a Markdown table."""
    cells = []
    for row in rows:
        target = "" if row.target is None else f"{'>=' if row.higher_is_better else '<='} {_num(row.target)}"
        mark = {None: "", True: "ok", False: "MISSED"}[row.met]
        label = f"{row.label} ({row.note})" if row.note else row.label
        cells.append((label, _num(row.value), row.unit, target, mark))
    if markdown:
        lines = ["| what | value | unit | target | met |", "| --- | ---: | --- | ---: | --- |"]
        lines += [f"| {' | '.join(c)} |" for c in cells]
        return "\n".join(lines)
    width = max(len(c[0]) for c in cells)
    lines = [f"{'what':<{width}} {'value':>10} {'unit':<6} {'target':>10} met"]
    lines += [f"{c[0]:<{width}} {c[1]:>10} {c[2]:<6} {c[3]:>10} {c[4]}" for c in cells]
    return "\n".join(lines)
