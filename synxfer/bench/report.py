"""Benchmark output: the results table, the machine description and the JSON file."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from .. import __version__
from .runner import Measurement

__all__ = ["BenchReport", "format_table", "machine_info"]

_PACKAGES = ("botocore", "aiobotocore", "moto")


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, object]:
    """Where the numbers came from: interpreter, CPUs, OS and library versions."""
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "synxfer": __version__,
        **{name: _package_version(name) for name in _PACKAGES},
    }


_COLUMNS = (
    ("test", "<"),
    ("tool", "<"),
    ("direction", "<"),
    ("seconds", ">"),
    ("MiB/s", ">"),
    ("files/s", ">"),
    ("client CPU s", ">"),
    ("CPU s/GiB", ">"),
    ("server CPU s", ">"),
    ("ok", "<"),
)


def _cells(m: Measurement) -> list[str]:
    return [
        m.row,
        m.tool,
        m.direction,
        f"{m.seconds:.2f}",
        f"{m.mib_per_s:.1f}",
        f"{m.files_per_s:.1f}",
        f"{m.client_cpu:.2f}",
        f"{m.cpu_per_gib:.1f}",
        "-" if m.server_cpu is None else f"{m.server_cpu:.2f}",
        "yes" if m.ok else "NO",
    ]


def format_table(measurements: Sequence[Measurement]) -> str:
    """A plain-text table, one line per measurement (row x tool x direction)."""
    rows = [_cells(m) for m in measurements]
    widths = [
        max(len(title), *(len(r[i]) for r in rows)) if rows else len(title)
        for i, (title, _align) in enumerate(_COLUMNS)
    ]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            f"{c:{align}{w}}" for c, w, (_t, align) in zip(cells, widths, _COLUMNS, strict=True)
        ).rstrip()

    out = [line([t for t, _ in _COLUMNS]), line(["-" * w for w in widths])]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


@dataclass(slots=True)
class BenchReport:
    """Everything one ``synxfer-bench run`` produced."""

    scenario: str
    scale: float
    seed: int
    measurements: list[Measurement]
    machine: dict[str, object] = field(default_factory=machine_info)
    started: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    )
    server: str = "moto"

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.measurements)

    def to_dict(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "scale": self.scale,
            "seed": self.seed,
            "started": self.started,
            "server": self.server,
            "machine": self.machine,
            "ok": self.ok,
            "results": [m.to_dict() for m in self.measurements],
        }

    def write_json(self, path: Path) -> None:
        """Write :meth:`to_dict` as indented JSON (parent directories are created)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
