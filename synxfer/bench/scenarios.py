"""The benchmark matrix: rows of N files of one size, grouped into named scenarios."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .._config import GiB, KiB, MiB
from ..cli._args import parse_size

__all__ = ["QUICK", "SCENARIOS", "Row", "Scenario", "format_size", "parse_rows"]


def format_size(n: int) -> str:
    """Shortest exact binary-unit spelling: ``1048576`` -> ``1MiB``, ``1500`` -> ``1500B``."""
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


@dataclass(frozen=True, slots=True)
class Row:
    """One benchmark row: ``files`` files of ``size`` bytes each."""

    name: str
    files: int
    size: int

    @classmethod
    def of(cls, files: int, size: int) -> Row:
        """A row named ``<files>x<size>``, e.g. ``100x1MiB``."""
        return cls(f"{files}x{format_size(size)}", files, size)

    @property
    def total_bytes(self) -> int:
        return self.files * self.size

    def scaled(self, scale: float) -> Row:
        """This row with each file's size multiplied by ``scale`` (at least 1 byte).

        The file count stays, so per-file overheads are still measured at
        small scales; the name stays too, so results line up across scales.
        """
        if scale == 1:
            return self
        return Row(self.name, self.files, max(1, math.ceil(self.size * scale)))


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named list of rows."""

    name: str
    rows: tuple[Row, ...]

    def scaled(self, scale: float) -> Scenario:
        """Every row scaled (see :meth:`Row.scaled`)."""
        return Scenario(self.name, tuple(r.scaled(scale) for r in self.rows))


#: The quick matrix: many small files, a few medium ones, one multipart file.
QUICK = Scenario("quick", (Row.of(100, MiB), Row.of(10, 10 * MiB), Row.of(1, 64 * MiB)))

SCENARIOS: dict[str, Scenario] = {QUICK.name: QUICK}

_ROW = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\S+)\s*$")


def parse_rows(spec: str) -> tuple[Row, ...]:
    """Parse ``--rows``: comma-separated ``<files>x<size>`` like ``100x1MiB,1x64MiB``.

    Raises :class:`ValueError` naming the bad item.
    """
    rows: list[Row] = []
    for item in spec.split(","):
        if not item.strip():
            continue
        m = _ROW.match(item)
        if m is None:
            raise ValueError(
                f"invalid row {item.strip()!r}: expected <files>x<size>, like 100x1MiB"
            )
        files = int(m.group(1))
        if files < 1:
            raise ValueError(f"invalid row {item.strip()!r}: needs at least one file")
        try:
            size = parse_size(m.group(2))
        except ValueError as exc:
            raise ValueError(f"invalid row {item.strip()!r}: {exc}") from None
        rows.append(Row.of(files, size))
    if not rows:
        raise ValueError(f"no rows in {spec!r}")
    return tuple(rows)
