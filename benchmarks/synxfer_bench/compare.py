"""``synxfer-bench compare A.json B.json``: per-row time ratios, regressions flagged.

Works on the JSON of ``--quick`` runs and of scenario runs alike: cells are
matched by (row, concurrency, tool, direction). The ratio is B's seconds
over A's; above ``1 + threshold`` it is a regression. A row that moved a
different number of bytes in the two files (another ``--scale``, or a
scaling rule that changed) is not compared: a note says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Comparison", "compare_files", "format_comparison"]

Key = tuple[str, int | None, str, str]


@dataclass(frozen=True, slots=True)
class Comparison:
    """One cell present in both runs."""

    row: str
    concurrency: int | None
    tool: str
    direction: str
    before: float
    after: float
    cpu_before: float | None
    cpu_after: float | None
    threshold: float

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before > 0 else float("inf")

    @property
    def regression(self) -> bool:
        return self.ratio > 1 + self.threshold

    @property
    def label(self) -> str:
        return self.row if self.concurrency is None else f"{self.row} c={self.concurrency}"


def _load(path: Path) -> dict[Key, dict[str, object]]:
    from .report import read_results  # gzip or not, as the docs keep runs

    try:
        data = read_results(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise ValueError(f"{path}: not a synxfer-bench JSON file (no 'results' list)")
    cells: dict[Key, dict[str, object]] = {}
    for r in results:
        if not r.get("ok"):
            continue
        key = (str(r["row"]), r.get("concurrency"), str(r["tool"]), str(r["direction"]))
        cells[key] = r
    return cells


def compare_files(
    a: Path, b: Path, *, threshold: float = 0.1
) -> tuple[list[Comparison], list[str]]:
    """Cells of both files, and notes about cells only one of them has."""
    before, after = _load(a), _load(b)
    out: list[Comparison] = []
    for key, old in before.items():
        new = after.get(key)
        if new is None:
            continue
        out.append(
            Comparison(
                key[0],
                key[1],
                key[2],
                key[3],
                float(old["seconds"]),  # type: ignore[arg-type]
                float(new["seconds"]),  # type: ignore[arg-type]
                _float(old.get("client_cpu_s")),
                _float(new.get("client_cpu_s")),
                threshold,
            )
        )
    notes: list[str] = []
    for key, old in before.items():
        new = after.get(key)
        if new is not None and old.get("bytes") and new.get("bytes") not in (None, old["bytes"]):
            out = [c for c in out if (c.row, c.concurrency, c.tool, c.direction) != key]
            notes.append(
                f"not compared: {' '.join(map(str, key))} moved {old['bytes']} bytes in "
                f"{a.name} and {new['bytes']} in {b.name}"
            )
    notes += [f"only in {a.name}: {' '.join(map(str, k))}" for k in before if k not in after]
    notes += [f"only in {b.name}: {' '.join(map(str, k))}" for k in after if k not in before]
    return out, notes


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def format_comparison(rows: Sequence[Comparison]) -> str:
    """A table: test, tool, direction, seconds A, seconds B, ratio, CPU ratio, flag."""
    header = ["test", "tool", "direction", "A s", "B s", "B/A", "CPU B/A", ""]
    body = []
    for c in rows:
        cpu = "-"
        if c.cpu_before and c.cpu_after is not None:
            cpu = f"{c.cpu_after / c.cpu_before:.2f}"
        flag = f"REGRESSION (> {1 + c.threshold:.2f})" if c.regression else ""
        body.append(
            [
                c.label,
                c.tool,
                c.direction,
                f"{c.before:.3f}",
                f"{c.after:.3f}",
                f"{c.ratio:.2f}",
                cpu,
                flag,
            ]
        )
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in body]
    return "\n".join(lines)
