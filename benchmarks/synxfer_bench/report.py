"""Benchmark output: the results table, the machine description and the JSON file."""

from __future__ import annotations

import datetime as _dt
import gzip
import json
import os
import platform
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from synxfer import __version__

from .resources import report_section
from .runner import Measurement
from .scenarios import SECOND_BUCKET, human_size
from .scenarios import row_label as scenario_row_label

if TYPE_CHECKING:
    from .matrix import MatrixResult

__all__ = [
    "HAND_WRITTEN",
    "BenchReport",
    "Prices",
    "ScenarioReport",
    "cost",
    "cpu_per_gib",
    "format_table",
    "machine_info",
    "pivot",
    "row_label",
]

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
        m.label or m.row,
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


# --------------------------------------------------------------------------- scenario reports


DEFAULT_EGRESS_PER_GB = 0.09
DEFAULT_INSTANCE_PER_HOUR = 0.096


@dataclass(frozen=True, slots=True)
class Prices:
    """The cost model's prices (Skyplane style): egress $/GB and the client instance's $/h.

    Defaults: AWS internet egress, first tier ($0.09/GB), and an on-demand
    2-vCPU instance like this machine (m5.large, $0.096/h).
    """

    egress_per_gb: float = DEFAULT_EGRESS_PER_GB
    instance_per_hour: float = DEFAULT_INSTANCE_PER_HOUR

    @classmethod
    def load(cls, path: Path) -> Prices:
        """Read ``{"egress_per_gb": ..., "instance_per_hour": ...}`` (either key optional)."""
        data = json.loads(path.read_text())
        return cls(
            float(data.get("egress_per_gb", DEFAULT_EGRESS_PER_GB)),
            float(data.get("instance_per_hour", DEFAULT_INSTANCE_PER_HOUR)),
        )

    def to_dict(self) -> dict[str, float]:
        return {"egress_per_gb": self.egress_per_gb, "instance_per_hour": self.instance_per_hour}


def cost(bytes_: int, seconds: float, prices: Prices, ratio: float = 1.0) -> dict[str, float]:
    """Egress $ (bytes on the wire x ratio) + instance $ (time), Skyplane's model.

    ``bytes_`` are the bytes that crossed the wire (for a compressing tool, the
    stored size it measured: ``ratio`` stays 1); ``ratio`` < 1 only for the
    zlib-6 *estimate* of what a tool that does not compress would send.
    """
    egress = bytes_ / 1e9 * ratio * prices.egress_per_gb
    instance = seconds / 3600 * prices.instance_per_hour
    return {"egress_usd": egress, "instance_usd": instance, "total_usd": egress + instance}


def row_label(m: Measurement, rows: Sequence[Mapping[str, object]] = ()) -> str:
    """The table row of a measurement: what it moved and the seed row it stands for.

    ``rows`` are the run's row records (``MatrixResult.rows``); without
    them, or for a row they do not describe, the row's name. ``c=N`` is
    added in a concurrency sweep.
    """
    base = m.label or m.row
    info = next((r for r in rows if r.get("name") == m.row), None)
    if info is not None:
        base = _info_label(info)
    return base if m.concurrency is None else f"{base} c={m.concurrency}"


def _info_label(info: Mapping[str, object]) -> str:
    label = info.get("label")
    if isinstance(label, str) and label:
        return label
    return scenario_row_label(
        str(info["name"]),
        str(info.get("geometry") or info["name"]),
        published=str(info.get("published") or ""),
        nbytes=_int(info.get("bytes")),
        published_bytes=_int(info.get("published_bytes")),
    )


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) else 0


def cpu_per_gib(m: Measurement) -> float:
    """Client CPU seconds per GiB moved."""
    return m.client_cpu / (m.bytes / 2**30) if m.bytes else 0.0


def _failed_cell(m: Measurement) -> str:
    error = m.error or ""
    if error.startswith("skipped"):
        return "skipped"
    if error.startswith("disk full"):
        return "DISK FULL"
    return "FAILED"


def _cell(m: Measurement | None, metric: str) -> str:
    if m is None:
        return "-"
    if not m.ok:
        return _failed_cell(m)
    if metric == "seconds":
        return f"{m.seconds:.2f}"
    if metric == "cpu_per_gib":
        return f"{cpu_per_gib(m):.1f}"
    if metric == "mib_per_s":
        return f"{m.mib_per_s:.1f}"
    if metric == "files_per_s":
        return f"{m.files_per_s:.1f}"
    if metric == "rss":
        return f"{(m.peak_rss or 0) / 2**20:.0f}"
    if metric == "server_cpu":
        return "-" if m.server_cpu is None else f"{m.server_cpu:.2f}"
    if metric == "range":
        lo, hi = m.seconds_min or m.seconds, m.seconds_max or m.seconds
        return f"{m.seconds:.2f} ({lo:.2f}-{hi:.2f})"
    raise ValueError(metric)


_ALL = object()


def pivot(
    measurements: Sequence[Measurement],
    direction: str,
    metric: str,
    tools: Sequence[str],
    skipped: Sequence[str] = (),
    rows: Sequence[Mapping[str, object]] = (),
    threads: int | object | None = _ALL,
) -> tuple[list[str], list[list[str]]]:
    """Rows = test, columns = tools (the Synapse client's table shape).

    Tools in ``skipped`` (not installed) show ``skipped`` in every cell.
    ``threads``: only the measurements at that thread count (a sweep's
    group; the labels then leave ``c=N`` out).
    """
    index: dict[tuple[str, str], Measurement] = {}
    labels: list[str] = []
    for m in measurements:
        if m.direction != direction:
            continue
        if threads is not _ALL and m.concurrency != threads:
            continue
        label = row_label(m, rows) if threads is _ALL else row_label(_plain(m), rows)
        if label not in labels:
            labels.append(label)
        index[(label, m.tool)] = m
    header = ["test", *tools]
    body = [
        [
            label,
            *("skipped" if t in skipped else _cell(index.get((label, t)), metric) for t in tools),
        ]
        for label in labels
    ]
    return header, body


def _plain(m: Measurement) -> Measurement:
    """``m`` without its thread count (for a table that is one thread count's group)."""
    if m.concurrency is None:
        return m
    copy = Measurement(m.tool, m.row, m.direction, m.files, m.bytes)
    copy.label = m.label
    return copy


def thread_counts(measurements: Sequence[Measurement]) -> list[int | None]:
    """The thread counts of a sweep, ascending (``[None]`` when there was no sweep)."""
    found = sorted({m.concurrency for m in measurements if m.concurrency is not None})
    out: list[int | None] = list(found)
    if not found or any(m.concurrency is None for m in measurements):
        out.insert(0, None)
    return out


def _group_title(threads: int | None) -> str:
    return "" if threads is None else f"{threads} threads: "


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}"


def _text_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=True))
        ).rstrip()
    ]
    lines.append("  ".join("-" * w for w in widths))
    for r in body:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )
    return "\n".join(lines)


def _md_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


_METRICS = (
    ("seconds", "wall seconds, median of the runs"),
    ("cpu_per_gib", "client CPU seconds (user+sys of the tool's process tree) per GiB"),
    ("mib_per_s", "MiB/s (median run)"),
    ("files_per_s", "files/s (median run)"),
    ("rss", "client peak RSS, MiB"),
    ("server_cpu", "server CPU seconds (median run)"),
)

#: Client + server CPU over (wall x cores) from which a run counts as CPU-bound.
BUSY = 0.75
#: Short direction names for the summary table (issue 10's "up" and "down").
_SHORT = {"upload": "up", "download": "down"}

#: Everything below this line in an existing report.md is kept when the report is rewritten.
HAND_WRITTEN = "<!-- synxfer-bench: hand-written notes below this line are kept on regeneration -->"


def _tool_versions(result: MatrixResult) -> dict[str, object]:
    return {str(t["name"]): t.get("version") for t in result.tools}


def _is_ours(tool: str) -> bool:
    return tool.startswith("synxfer")


@dataclass
class ScenarioReport:
    """The report of one scenario run: terminal table, JSON, Markdown (charts: :mod:`.charts`)."""

    result: MatrixResult
    command: str
    prices: Prices = field(default_factory=Prices)
    note: str = ""
    machine: dict[str, object] = field(default_factory=machine_info)
    #: Set when the Markdown is re-rendered from a results.json (``synxfer-bench report``).
    rendered: str = ""

    @property
    def ok(self) -> bool:
        return self.result.aborted is None and all(m.ok for m in self.result.measurements)

    @property
    def tool_names(self) -> list[str]:
        names = [str(t["name"]) for t in self.result.tools]
        for m in self.result.measurements:
            if m.tool not in names:
                names.append(m.tool)
        names += [t for t in self.result.skipped_tools if t not in names]
        return names

    @property
    def directions(self) -> list[str]:
        seen: list[str] = []
        for m in self.result.measurements:
            if m.direction not in seen:
                seen.append(m.direction)
        return seen

    def label(self, m: Measurement) -> str:
        """The row of ``m`` as the tables show it: what moved, and the seed row."""
        return row_label(m, self.result.rows)

    def _ratio(self, row: str) -> float:
        for info in self.result.rows:
            if info["name"] == row:
                return float(info.get("compression_ratio_zlib6") or 1.0)  # type: ignore[arg-type]
        return 1.0

    def _row_info(self, row: str) -> dict[str, object]:
        return next((r for r in self.result.rows if r["name"] == row), {})

    def compresses(self, tool: str) -> bool:
        """The tool stored its objects compressed (synxfer-zstd: ``--compress zstd``)."""
        for t in self.result.tools:
            if t.get("name") == tool:
                if "compresses" in t:
                    return bool(t["compresses"])
                return "--compress" in str(t.get("options") or "")
        return False

    def stored_bytes(self, m: Measurement) -> int | None:
        """Median bytes stored by ``m``'s verified runs, as listed after them (None: not listed).

        For a download, the stored bytes of what the tool had uploaded: the
        bytes it fetched.
        """
        values = [
            s.stored_bytes
            for s in self.result.samples
            if s.ok
            and s.stored_bytes is not None
            and (s.row, s.tool, s.direction, s.concurrency)
            == (m.row, m.tool, m.direction, m.concurrency)
        ]
        return round(statistics.median(values)) if values else None

    def within_service(self, row: str) -> bool:
        """The row copies between two buckets of the target's own service.

        Such a copy is server-side: its bytes never leave the service, so
        Skyplane's model bills them no egress. Runs record it per row
        (``within_service``); for results written before they did, the
        scenario's definition says it (a copy to :data:`SECOND_BUCKET`).
        """
        info = self._row_info(row)
        if "within_service" in info:
            return bool(info["within_service"])
        if info.get("case") != "copy":
            return False
        rows = {r.name: r for r in self.result.plan.scenario.rows}
        return row in rows and rows[row].copy_to.startswith(SECOND_BUCKET)

    def wire(self, m: Measurement) -> tuple[int, str]:
        """Bytes that crossed the wire for ``m``, and where the figure comes from.

        A compressing tool's are the stored size of its objects, listed after
        the upload (``"measured"``); every other tool sends the files as they
        are (``"as sent"``); a copy between two buckets of one service sends
        none out of it (``"server-side"``).
        """
        if self.within_service(m.row):
            return 0, "server-side"
        stored = self.stored_bytes(m)
        if self.compresses(m.tool) and stored is not None:
            return stored, "measured"
        return m.bytes, "as sent"

    def costs(self, m: Measurement) -> dict[str, object]:
        """Cost of the measured run: egress for the bytes on the wire, instance for the wall time.

        ``as_sent`` is the bytes that crossed the wire (compressed ones for a
        compressing tool, measured); ``zlib6_estimate`` (text rows, tools
        that do not compress only) what the run would cost if the tool
        compressed like zlib 6; ``projected_full_size`` the seed's row size
        at the measured rate and wire ratio.
        """
        info = self._row_info(m.row)
        wire, source = self.wire(m)
        ratio = wire / m.bytes if m.bytes else 1.0
        out: dict[str, object] = {
            "wire_bytes": wire,
            "wire_source": source,
            "wire_ratio": round(ratio, 4),
            "as_sent": cost(wire, m.seconds, self.prices),
        }
        if info.get("data") == "text" and not self.compresses(m.tool):
            zlib = self._ratio(m.row)
            out["zlib6_estimate"] = cost(m.bytes, m.seconds, self.prices, zlib)
            out["zlib6_ratio"] = zlib
        full = int(info.get("published_bytes") or 0)  # type: ignore[call-overload]
        if m.ok and m.seconds > 0 and m.bytes and full > m.bytes and m.concurrency is None:
            seconds = m.seconds * full / m.bytes
            out["projected_full_size"] = cost(round(full * ratio), seconds, self.prices)
        return out

    def to_dict(self) -> dict[str, object]:
        plan = self.result.plan
        results = []
        for m in self.result.measurements:
            d = m.to_dict()
            d["label"] = self.label(m)
            d["cost"] = self.costs(m)
            results.append(d)
        return {
            "scenario": plan.scenario.name,
            "description": plan.scenario.description,
            "scale": plan.scale,
            "seed": plan.seed,
            "repeat": plan.repeat,
            "command": self.command,
            "note": self.note,
            "started": self.result.started,
            "duration_s": round(self.result.seconds, 1),
            "machine": self.machine,
            "target": self.result.target,
            "tools": self.result.tools,
            "tool_versions": _tool_versions(self.result),
            "skipped_tools": self.result.skipped_tools,
            "rows": [{**r, "label": _info_label(r)} for r in self.result.rows],
            "notes": self.result.notes,
            "aborted": self.result.aborted,
            "disk": self.result.disk,
            "prices": self.prices.to_dict(),
            "ok": self.ok,
            "summary": self.versus(),
            "results": results,
            "samples": [s.to_dict() for s in self.result.samples],
            "timeline": [t.to_dict() for t in self.result.timeline],
        }

    def write_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    # -- comparisons
    def versus(self) -> list[dict[str, object]]:
        """Per (row, direction): synxfer against the fastest peer (issue 10's table).

        ``ratio`` is the fastest peer's wall time over synxfer's (>= 1: synxfer
        wins; ``time_ratio`` is its inverse). synxfer is the ``synxfer`` tool
        (defaults) when it ran, else the best of synxfer's profiles. ``goal``
        is None when no peer ran: nothing is claimed then.
        """
        out: list[dict[str, object]] = []
        by_key: dict[tuple[str, str], dict[str, Measurement]] = {}
        for m in self.result.measurements:
            by_key.setdefault((self.label(m), m.direction), {})[m.tool] = m
        cores = int(self.machine.get("cpu_count") or 1)  # type: ignore[call-overload]
        for (label, direction), tools in by_key.items():
            ours = [m for t, m in tools.items() if _is_ours(t) and m.ok]
            peers = [m for t, m in tools.items() if not _is_ours(t) and m.ok]
            row: dict[str, object] = {
                "test": label,
                "direction": direction,
                "seconds": {t: (m.seconds if m.ok else None) for t, m in tools.items()},
                "cpu_per_gib": {t: (cpu_per_gib(m) if m.ok else None) for t, m in tools.items()},
                "server_cpu_s": {t: (m.server_cpu if m.ok else None) for t, m in tools.items()},
            }
            plain = tools.get("synxfer")
            best = plain if plain is not None and plain.ok else None
            if best is None and ours:
                best = min(ours, key=lambda m: m.seconds)
            if best is not None:
                row.update(
                    synxfer=best.tool,
                    synxfer_s=best.seconds,
                    synxfer_cpu_per_gib=cpu_per_gib(best),
                    synxfer_peak_rss=best.peak_rss,
                    binds=_binds(best, cores, self._machine_busy(best)),
                )
            if best is not None and peers:
                fastest = min(peers, key=lambda m: m.seconds)
                ratio = fastest.seconds / best.seconds if best.seconds else None
                row.update(
                    fastest_peer=fastest.tool,
                    fastest_peer_s=fastest.seconds,
                    ratio=ratio,
                    time_ratio=best.seconds / fastest.seconds if fastest.seconds else None,
                )
            s5 = tools.get("s5cmd")
            if s5 is not None and s5.ok:
                row["s5cmd_cpu_per_gib"] = cpu_per_gib(s5)
            time_met = None if "ratio" not in row else float(row["ratio"] or 0) >= 1.0  # type: ignore[arg-type]
            cpu_met = None
            if best is not None and "s5cmd_cpu_per_gib" in row:
                cpu_met = cpu_per_gib(best) <= float(row["s5cmd_cpu_per_gib"])  # type: ignore[arg-type]
            row["goal_time_met"] = time_met
            row["goal_cpu_met"] = cpu_met
            out.append(row)
        return out

    def _machine_busy(self, m: Measurement) -> float | None:
        """Share of all cores busy (1 - idle) in the timeline while ``m``'s runs ran."""
        spans = [
            (s.start, s.end)
            for s in self.result.samples
            if (s.row, s.tool, s.direction, s.concurrency)
            == (m.row, m.tool, m.direction, m.concurrency)
            and s.ok
            and s.end > s.start
        ]
        busy = [
            1 - t.cpu_idle / 100
            for t in self.result.timeline
            if any(a <= t.t <= b + 0.5 for a, b in spans)
        ]
        return sum(busy) / len(busy) if busy else None

    def _summary_table(self) -> tuple[list[str], list[list[str]]]:
        """Issue 10's table: row, each tool's seconds, ratio, CPU s/GiB, server CPU, RSS."""
        tools = self.tool_names
        order = " / ".join(tools)
        header = [
            "row",
            *tools,
            "ratio",
            f"client CPU s/GiB ({order})",
            "server CPU s (same order)",
            "synxfer peak RSS MiB",
            "which side binds (synxfer's run)",
            "goals (time, CPU)",
        ]
        index: dict[tuple[str, str], dict[str, Measurement]] = {}
        for m in self.result.measurements:
            index.setdefault((self.label(m), m.direction), {})[m.tool] = m
        body: list[list[str]] = []
        for v in self.versus():
            label, direction = str(v["test"]), str(v["direction"])
            cells = index.get((label, direction), {})

            def cell(tool: str, metric: str, cells: dict[str, Measurement] = cells) -> str:
                if tool in self.result.skipped_tools:
                    return "skipped"
                return _cell(cells.get(tool), metric)

            ratio = v.get("ratio")
            rss = v.get("synxfer_peak_rss")
            body.append(
                [
                    f"{label} {_SHORT.get(direction, direction)}",
                    *(cell(t, "seconds") for t in tools),
                    f"{float(ratio):.2f}" if isinstance(ratio, float) else "-",
                    " / ".join(cell(t, "cpu_per_gib") for t in tools),
                    " / ".join(cell(t, "server_cpu") for t in tools),
                    f"{rss / 2**20:.0f}" if isinstance(rss, int) and rss else "-",
                    str(v.get("binds") or "-"),
                    _goals(v),
                ]
            )
        return header, body

    # -- renderings
    def terminal(self) -> str:
        """The Synapse-shaped tables (rows = test, columns = tools), issue 10's summary, notes."""
        tools = self.tool_names
        r = self.result
        plan = r.plan
        parts = [
            f"synxfer-bench {plan.scenario.name} x{plan.scale:g} on {r.target['name']}"
            f" (median of {plan.repeat})"
        ]
        if r.aborted:
            parts.append(f"STOPPED EARLY: {r.aborted}")
        for threads in thread_counts(r.measurements):
            for direction in self.directions:
                for metric, title in (("seconds", "seconds"), ("cpu_per_gib", "client CPU s/GiB")):
                    header, body = pivot(
                        r.measurements, direction, metric, tools, r.skipped_tools, r.rows, threads
                    )
                    if body:
                        parts.append(
                            f"\n{_group_title(threads)}{direction}: {title}\n"
                            + _text_table(header, body)
                        )
        rounds = self._rounds_table()
        if rounds[1]:
            parts.append(
                "\nperiodic sync, per round (moved = objects the round (re)wrote)\n"
                + _text_table(*rounds)
            )
        header, body = self._summary_table()
        if body:
            keep = [0, *range(1, len(tools) + 2), len(header) - 1]
            parts.append(
                "\nsynxfer against the fastest peer (ratio = fastest peer's wall / synxfer's; "
                ">= 1: synxfer wins)\n"
                + _text_table([header[i] for i in keep], [[b[i] for i in keep] for b in body])
            )
        if r.notes:
            parts.append("\nnotes:\n" + "\n".join(f"  {n}" for n in r.notes))
        failures = [m for m in r.measurements if not m.ok and m.error]
        failures = [m for m in failures if not (m.error or "").startswith("skipped")]
        if failures:
            parts.append(
                "\nfailures:\n"
                + "\n".join(
                    f"  {self.label(m)} {m.tool} {m.direction}: {m.error}" for m in failures
                )
            )
        return "\n".join(parts)

    def markdown(self, charts: Sequence[tuple[str, str]] = ()) -> str:
        """The Markdown report; ``charts`` are ``(title, relative path)`` pairs."""
        r = self.result
        plan = r.plan
        tools = self.tool_names
        m = self.machine
        lines = [
            f"# synxfer-bench: `{plan.scenario.name}` on `{r.target['name']}`",
            "",
            f"{plan.scenario.description[:1].upper()}{plan.scenario.description[1:]}."
            if plan.scenario.description
            else "",
            "",
            "```sh",
            self.command,
            "```",
            "",
            f"* started {r.started}, took {r.seconds / 60:.1f} min; scale {plan.scale:g}, "
            f"median of {plan.repeat} run(s) per cell, tools interleaved per row (order "
            "rotated each round), fresh prefix per run, every run verified (object count and "
            "sizes)",
            f"* machine: {m.get('cpu_count')} CPUs, {m.get('platform')}, Python {m.get('python')}",
            f"* target: {_describe_target(r.target)}",
            "* rows are labelled with what was moved; a shrunk row names the seed's row it "
            "stands for and the bytes' scale",
        ]
        if r.disk:
            lines.append(f"* disk: {_describe_disk(r.disk)}")
        if self.rendered:
            lines.append(f"* {self.rendered}")
        if self.note:
            lines += ["", f"> {self.note}"]
        if r.aborted:
            lines += ["", f"**The run stopped early: {r.aborted}.** Cells not run are missing."]
        header, body = self._summary_table()
        if body:
            lines += [
                "",
                "## synxfer against the peers",
                "",
                "Issue 10's table: median wall seconds per tool; *ratio* = the fastest peer's "
                "wall time / synxfer's (>= 1 means synxfer wins); client CPU seconds per GiB "
                "(user + system of each tool's process tree) and the server's CPU seconds "
                "during each tool's runs (median); synxfer's peak RSS. *Which side binds* "
                "compares the client's and the server's CPU seconds during synxfer's runs when "
                f"the two kept the machine's cores at least {BUSY:.0%} busy; when they did not "
                "but the machine was that busy, other processes' CPU bound it; otherwise "
                "neither side's CPU did (latency, start-up or I/O). Goals (not a gate): ratio >= 1 "
                "and client CPU s/GiB <= s5cmd's; none is claimed when no peer ran.",
                "",
                _md_table(header, body),
            ]
        lines += self._rounds_section()
        lines += self._seed_section()
        if plan.scenario.name == "synapse-path":
            from .synapse_path import report_lines

            lines += report_lines(self)
        groups = thread_counts(r.measurements)
        if groups != [None]:
            lines += [
                "",
                "Thread sweep: every row ran once per thread count; each tool got its own knob "
                "(see *Tools*). The tables below are grouped by thread count.",
            ]
        for threads in groups:
            if threads is not None:
                lines += ["", f"## {threads} threads"]
            for direction in self.directions:
                head = "###" if threads is not None else "##"
                section: list[str] = []
                for metric, title in _METRICS:
                    shown = "range" if metric == "seconds" else metric
                    header, body = pivot(
                        r.measurements, direction, shown, tools, r.skipped_tools, r.rows, threads
                    )
                    if metric == "seconds":
                        title += " (min-max)"
                    if body:
                        section += ["", f"**{title}**", "", _md_table(header, body)]
                if section:
                    lines += ["", f"{head} {direction.capitalize()}", *section]
        lines += self._cost_section()
        lines += ["", "## Rows", ""]
        header = ["row (as labelled)", "seed row", "moved", "files", "bytes", "data",
                  "zlib-6 ratio", "case"]  # fmt: skip
        body = [
            [
                _info_label(i),
                str(i["published"]),
                str(i["geometry"]),
                str(i["files"]),
                str(i["bytes"]),
                str(i["data"]),
                f"{float(i['compression_ratio_zlib6']):.3f}",  # type: ignore[arg-type]
                str(i["case"]) + (f" sweep {i['sweep']}" if i.get("sweep") else ""),
            ]
            for i in r.rows
        ]
        lines += [_md_table(header, body)]
        lines += ["", "## Tools", ""]
        header = ["tool", "version", "how", "a thread count N sets"]
        body = [
            [
                str(t["name"]),
                str(t.get("version")),
                str(t.get("options") or t.get("path") or ""),
                str(t.get("threads_knob") or "-"),
            ]
            for t in r.tools
        ]
        body += [[t, "-", "not installed: skipped", "-"] for t in r.skipped_tools]
        lines += [_md_table(header, body)]
        lines += self._runs_section()
        lines += report_section(r.samples, {str(i["name"]): _info_label(i) for i in r.rows})
        if r.notes:
            lines += ["", "## Notes", ""] + [f"* {n}" for n in r.notes]
        failures = [
            x for x in r.measurements if not x.ok and not (x.error or "").startswith("skipped")
        ]
        if failures:
            lines += ["", "## Failures", ""] + [
                f"* {self.label(x)} {x.tool} {x.direction}: {x.error}" for x in failures
            ]
        if charts:
            lines += ["", "## Charts", ""]
            for title, path in charts:
                lines += [f"![{title}]({path})", ""]
        lines += [
            "",
            "## Machine",
            "",
            "```json",
            json.dumps(m, indent=1),
            "```",
            "",
        ]
        return "\n".join(line for line in lines if line is not None) + "\n"

    def write_markdown(self, path: Path, charts: Sequence[tuple[str, str]] = ()) -> None:
        """Write :meth:`markdown` to ``path``; notes below :data:`HAND_WRITTEN` stay."""
        text = self.markdown(charts)
        if path.is_file():
            old = path.read_text()
            if HAND_WRITTEN in old:
                text += "\n" + HAND_WRITTEN + old.split(HAND_WRITTEN, 1)[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def _rounds_table(self) -> tuple[list[str], list[list[str]]]:
        """Periodic sync per round and tool: time, what moved, and aws s3 sync's time over it."""
        from .matrix import SYNC_ROUNDS

        header = ["row", "round", "tool", "seconds", "files moved", "MiB moved",
                  "files/s", "MiB/s (moved)", "vs aws s3 sync (aws s / tool s)"]  # fmt: skip
        body: list[list[str]] = []
        index: dict[tuple[str, str], dict[str, Measurement]] = {}
        for each in self.result.measurements:
            if each.direction in SYNC_ROUNDS:
                index.setdefault((self.label(each), each.direction), {})[each.tool] = each
        for (label, direction), tools in index.items():
            aws = tools.get("aws")
            number = SYNC_ROUNDS.index(direction) + 1
            what = "initial sync" if number == 1 else "after 5 % changed"
            for tool in self.tool_names:
                m = tools.get(tool)
                if m is None:
                    continue
                if not m.ok:
                    body.append([label, f"{number} ({what})", tool, _failed_cell(m)] + ["-"] * 5)
                    continue
                rate = m.moved_files / m.seconds if m.moved_files and m.seconds else 0.0
                mib = (m.moved_bytes or 0) / 2**20 / m.seconds if m.seconds else 0.0
                versus = (
                    f"{aws.seconds / m.seconds:.2f}" if aws is not None and aws.ok and m.seconds
                    else "-"
                )  # fmt: skip
                body.append(
                    [
                        label,
                        f"{number} ({what})",
                        tool,
                        f"{m.seconds:.2f}",
                        "-" if m.moved_files is None else str(m.moved_files),
                        _mib(m.moved_bytes),
                        f"{rate:.1f}" if m.moved_files is not None else "-",
                        f"{mib:.1f}" if m.moved_bytes is not None else "-",
                        versus,
                    ]
                )
        return header, body

    def _rounds_section(self) -> list[str]:
        header, body = self._rounds_table()
        if not body:
            return []
        return [
            "",
            "## Periodic sync, per round",
            "",
            "Each tool syncs the data set to a fresh prefix (round 1), then syncs a copy in "
            "which 5 % of the files changed (1 KiB longer; round 2), then another copy in "
            "which a different 5 % changed (round 3), to the same prefix. *Moved*: the "
            "objects the round (re)wrote -- new keys, a new ETag or a newer LastModified in "
            "the bench's own listing before and after the round -- and their bytes; a tool "
            "that re-sends unchanged files shows it here. Rates are over what moved. "
            "*vs aws s3 sync*: aws-cli's seconds for the round over the tool's (> 1: faster "
            "than `aws s3 sync`).",
            "",
            _md_table(header, body),
        ]

    def _seed_section(self) -> list[str]:
        """aws-cli's study (003) shape: per row and tool, files, time, files/s, MiB/s."""
        if self.result.plan.scenario.name != "awscli":
            return []
        header = ["row", "direction", "tool", "files", "time s", "file rate files/s",
                  "throughput MiB/s"]  # fmt: skip
        body: list[list[str]] = []
        for m in self.result.measurements:
            if m.direction not in ("upload", "download"):
                continue
            ok = m.ok
            body.append(
                [
                    self.label(m),
                    m.direction,
                    m.tool,
                    str(m.files),
                    f"{m.seconds:.2f}" if ok else _failed_cell(m),
                    f"{m.files_per_s:.1f}" if ok else "-",
                    f"{m.mib_per_s:.1f}" if ok else "-",
                ]
            )
        if not body:
            return []
        return [
            "",
            "## The seed's columns",
            "",
            "As aws-cli's study (003) prints them: files, time (median wall seconds, start-up "
            "included), file rate and throughput of the median run.",
            "",
            _md_table(header, body),
        ]

    def _runs_section(self) -> list[str]:
        """Every run in the order it ran: wall time, client and server CPU, peak RSS."""
        samples = sorted(self.result.samples, key=lambda s: (s.start, s.end))
        if not samples:
            return []
        rows = self.result.rows
        header = ["row", "direction", "round", "tool", "seconds", "client CPU s",
                  "server CPU s", "peak RSS MiB", "moved files / MiB", "ok"]  # fmt: skip
        body = []
        for s in samples:
            info = next((i for i in rows if i.get("name") == s.row), None)
            label = _info_label(info) if info is not None else s.row
            if s.concurrency is not None:
                label += f" c={s.concurrency}"
            body.append(
                [
                    label,
                    s.direction,
                    str(s.rep + 1),
                    s.tool,
                    f"{s.seconds:.2f}",
                    f"{s.cpu_user + s.cpu_system:.2f}",
                    "-" if s.server_cpu is None else f"{s.server_cpu:.2f}",
                    f"{s.peak_rss / 2**20:.0f}",
                    "-" if s.moved_files is None else f"{s.moved_files} / {_mib(s.moved_bytes)}",
                    "yes" if s.ok else ("DISK FULL" if s.disk_full else "NO"),
                ]
            )
        return [
            "",
            "## Every run",
            "",
            "<details><summary>each run in the order it ran, with the server's CPU seconds "
            "during it</summary>",
            "",
            _md_table(header, body),
            "",
            "</details>",
        ]

    def _cost_section(self) -> list[str]:
        p = self.prices
        lines = [
            "",
            "## Cost estimate",
            "",
            f"Skyplane's model: egress ${p.egress_per_gb}/GB x the bytes on the wire, plus "
            f"instance ${p.instance_per_hour}/h x the wall time; both shown per tool. *On the "
            "wire*: for a tool that compresses (synxfer-zstd, `--compress zstd`) the stored "
            "size of its objects, listed after the upload (**measured**; a download fetches "
            "those same bytes); for the others the files' bytes as sent. The last but one "
            "column is an **estimate**, for tools that do not compress, on text rows only: "
            "what the run would cost if the tool sent zlib-6-compressed bytes (zlib level 6 "
            "over a sample of the row's data). *Projected* scales bytes and time back to the "
            "seed's row size at the measured rate and wire ratio. A copy between two buckets of "
            "one service is server-side: its bytes stay inside the service, and Skyplane's "
            "model charges them no egress (0 bytes on the wire, *server-side*; the instance's "
            "time is still paid). Prices: `--egress-price`, "
            "`--instance-price` or `--prices FILE`.",
            "",
        ]
        header = [
            "test",
            "direction",
            "tool",
            "on the wire",
            "wire / original",
            "egress $",
            "instance $",
            "total $",
            "total $ if zlib-6 compressed (estimate)",
            "total $ projected (seed size)",
        ]
        body = []
        for m in self.result.measurements:
            if not m.ok:
                continue
            c = self.costs(m)
            sent = c["as_sent"]
            assert isinstance(sent, dict)
            est = c.get("zlib6_estimate")
            proj = c.get("projected_full_size")
            ratio = int(c["wire_bytes"]) / m.bytes if m.bytes else 1.0  # type: ignore[call-overload]
            measured = c["wire_source"] == "measured"
            body.append(
                [
                    self.label(m),
                    m.direction,
                    m.tool,
                    human_size(int(c["wire_bytes"])),  # type: ignore[call-overload]
                    f"{ratio:.3f} (measured)"
                    if measured
                    else "0 (server-side)"
                    if c["wire_source"] == "server-side"
                    else "1 (not compressed)",
                    f"{sent['egress_usd']:.6f}",
                    f"{sent['instance_usd']:.6f}",
                    f"{sent['total_usd']:.6f}",
                    f"{est['total_usd']:.6f} (zlib-6 {float(c['zlib6_ratio']):.3f})"  # type: ignore[index,arg-type]
                    if est
                    else "-",
                    f"{proj['total_usd']:.2f}" if proj else "-",  # type: ignore[index]
                ]
            )
        return [*lines, _md_table(header, body), *self._compression_section()]

    def _compression_section(self) -> list[str]:
        """Per compressing run: original and stored bytes, CPU it cost, wall time vs the others."""
        header = ["test", "direction", "tool", "original", "stored (on the wire)",
                  "stored / original", "client CPU s/GiB", "wall s",
                  "wall vs synxfer (uncompressed)", "wall vs s5cmd"]  # fmt: skip
        index: dict[tuple[str, str, int | None], dict[str, Measurement]] = {}
        for m in self.result.measurements:
            index.setdefault((m.row, m.direction, m.concurrency), {})[m.tool] = m
        body: list[list[str]] = []
        for m in self.result.measurements:
            if not m.ok or not self.compresses(m.tool):
                continue
            wire, source = self.wire(m)
            if source != "measured":
                continue
            peers = index[(m.row, m.direction, m.concurrency)]
            body.append(
                [
                    self.label(m),
                    m.direction,
                    m.tool,
                    human_size(m.bytes),
                    human_size(wire),
                    f"{wire / m.bytes:.3f}" if m.bytes else "-",
                    f"{cpu_per_gib(m):.2f}",
                    f"{m.seconds:.2f}",
                    _wall_versus(m, peers.get("synxfer")),
                    _wall_versus(m, peers.get("s5cmd")),
                ]
            )
        if not body:
            return []
        return [
            "",
            "## Compression, measured",
            "",
            "Runs of a tool that stores objects compressed: the files' bytes, the bytes "
            "stored (listed after the upload; what crossed the wire, both ways), the client's "
            "CPU seconds per GiB of files (user + system of the whole process tree: "
            "compression, or decompression on the way down, included), and its wall time "
            "over the uncompressed synxfer's and s5cmd's on the same row (< 1: faster).",
            "",
            _md_table(header, body),
        ]

    # -- loading a written report back
    @classmethod
    def load(cls, path: Path) -> ScenarioReport:
        """Rebuild a report from its ``results.json`` (to re-render it with this code)."""
        from .matrix import load_result

        data = read_results(path)
        if not isinstance(data, dict) or "samples" not in data or "rows" not in data:
            raise ValueError(f"{path}: not the results.json of a synxfer-bench scenario run")
        prices = data.get("prices") or {}
        return cls(
            load_result(data),
            str(data.get("command", "")),
            Prices(
                float(prices.get("egress_per_gb", DEFAULT_EGRESS_PER_GB)),
                float(prices.get("instance_per_hour", DEFAULT_INSTANCE_PER_HOUR)),
            ),
            note=str(data.get("note") or ""),
            machine=dict(data.get("machine") or {}),
        )


def read_results(path: Path) -> object:
    """A results file's JSON, gunzipped first when it is gzip.

    The reports under docs/benchmarks keep their run as ``results.json.gz``: the
    per-second samples are most of a run's weight and compress well, and
    ``report`` and ``compare`` must read what the docs hold.
    """
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def _binds(m: Measurement, cores: int, machine: float | None = None) -> str:
    """What bound a run: a side's CPU when the cores were busy, else waiting (latency, I/O).

    ``machine`` is the share of all cores busy during the run (the 1 Hz
    timeline), which also counts processes other than the client and server.
    """
    if m.server_cpu is None or m.seconds <= 0:
        return "-"
    client, server = m.client_cpu, m.server_cpu
    busy = (client + server) / (m.seconds * max(1, cores))
    cpus = f"server {server:.1f} s, client {client:.1f} s CPU; {busy:.0%} of {cores} cores"
    if busy >= BUSY:
        return f"{'server' if server > client else 'client'} ({cpus})"
    if machine is not None and machine >= BUSY:
        return f"other processes' CPU (machine {machine:.0%} busy; {cpus})"
    return f"neither side's CPU ({cpus})"


def _wall_versus(m: Measurement, other: Measurement | None) -> str:
    """``m``'s wall time over ``other``'s (< 1: ``m`` was faster), or ``-``."""
    if other is None or not other.ok or not other.seconds:
        return "-"
    return f"{m.seconds / other.seconds:.2f}x"


def _goals(v: Mapping[str, object]) -> str:
    if "synxfer_s" not in v:
        return "synxfer failed"
    if "fastest_peer" not in v:
        return "no peer ran"
    time_ok = "yes" if v["goal_time_met"] else "NO"
    cpu = v.get("goal_cpu_met")
    cpu_ok = "-" if cpu is None else ("yes" if cpu else "NO")
    return f"time {time_ok}, CPU {cpu_ok}"


def _describe_disk(disk: Mapping[str, int]) -> str:
    parts = [f"{k} {human_size(v)}" for k, v in disk.items() if k not in ("needed", "free") and v]
    text = f"needed about {human_size(disk.get('needed', 0))}"
    if parts:
        text += f" ({', '.join(parts)})"
    if "free" in disk:
        text += f", {human_size(disk['free'])} free at the start"
    return text


def _describe_target(target: Mapping[str, object]) -> str:
    parts = [str(target.get("server") or target.get("name"))]
    if target.get("version"):
        parts.append(str(target["version"]))
    return " ".join(parts) + (" on 127.0.0.1" if target.get("local") else "")
