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
from typing import TYPE_CHECKING

from synxfer import __version__

from .runner import Measurement

if TYPE_CHECKING:
    from .matrix import MatrixResult

__all__ = [
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
    """Egress $ (bytes on the wire x ratio) + instance $ (time), Skyplane's model."""
    egress = bytes_ / 1e9 * ratio * prices.egress_per_gb
    instance = seconds / 3600 * prices.instance_per_hour
    return {"egress_usd": egress, "instance_usd": instance, "total_usd": egress + instance}


def row_label(m: Measurement) -> str:
    """The table row of a measurement: the row name, plus ``c=N`` in a sweep."""
    return m.row if m.concurrency is None else f"{m.row} c={m.concurrency}"


def cpu_per_gib(m: Measurement) -> float:
    """Client CPU seconds per GiB moved."""
    return m.client_cpu / (m.bytes / 2**30) if m.bytes else 0.0


def _cell(m: Measurement | None, metric: str) -> str:
    if m is None:
        return "-"
    if not m.ok:
        return "skipped" if (m.error or "").startswith("skipped") else "FAILED"
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


def pivot(
    measurements: Sequence[Measurement],
    direction: str,
    metric: str,
    tools: Sequence[str],
    skipped: Sequence[str] = (),
) -> tuple[list[str], list[list[str]]]:
    """Rows = test, columns = tools (the Synapse client's table shape).

    Tools in ``skipped`` (not installed) show ``skipped`` in every cell.
    """
    index: dict[tuple[str, str], Measurement] = {}
    labels: list[str] = []
    for m in measurements:
        if m.direction != direction:
            continue
        label = row_label(m)
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


def _text_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    ]
    lines.append("  ".join("-" * w for w in widths))
    for r in body:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
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


def _tool_versions(result: MatrixResult) -> dict[str, object]:
    return {str(t["name"]): t.get("version") for t in result.tools}


@dataclass
class ScenarioReport:
    """The report of one scenario run: terminal table, JSON, Markdown (charts: :mod:`.charts`)."""

    result: MatrixResult
    command: str
    prices: Prices = field(default_factory=Prices)
    note: str = ""
    machine: dict[str, object] = field(default_factory=machine_info)

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.result.measurements)

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

    def _ratio(self, row: str) -> float:
        for info in self.result.rows:
            if info["name"] == row:
                return float(info.get("compression_ratio_zlib6") or 1.0)  # type: ignore[arg-type]
        return 1.0

    def _row_info(self, row: str) -> dict[str, object]:
        return next((r for r in self.result.rows if r["name"] == row), {})

    def costs(self, m: Measurement) -> dict[str, object]:
        """Cost of the measured run, with compression where the data compresses, and projected."""
        info = self._row_info(m.row)
        out: dict[str, object] = {"as_sent": cost(m.bytes, m.seconds, self.prices)}
        ratio = self._ratio(m.row)
        if info.get("data") == "text":
            out["compressed"] = cost(m.bytes, m.seconds, self.prices, ratio)
            out["compression_ratio"] = ratio
        full = int(info.get("published_bytes") or 0)  # type: ignore[call-overload]
        if m.ok and m.seconds > 0 and m.bytes and full > m.bytes and m.concurrency is None:
            seconds = m.seconds * full / m.bytes
            out["projected_full_size"] = cost(full, seconds, self.prices)
        return out

    def to_dict(self) -> dict[str, object]:
        plan = self.result.plan
        results = []
        for m in self.result.measurements:
            d = m.to_dict()
            d["label"] = row_label(m)
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
            "rows": self.result.rows,
            "notes": self.result.notes,
            "prices": self.prices.to_dict(),
            "ok": self.ok,
            "results": results,
            "samples": [s.to_dict() for s in self.result.samples],
            "timeline": [t.to_dict() for t in self.result.timeline],
        }

    def write_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    # -- comparisons
    def versus(self) -> list[dict[str, object]]:
        """Per (row, direction): synxfer against the fastest peer, and CPU/GiB against s5cmd."""
        out: list[dict[str, object]] = []
        by_key: dict[tuple[str, str], dict[str, Measurement]] = {}
        for m in self.result.measurements:
            by_key.setdefault((row_label(m), m.direction), {})[m.tool] = m
        for (label, direction), tools in by_key.items():
            ours = [m for t, m in tools.items() if t.startswith("synxfer") and m.ok]
            peers = [m for t, m in tools.items() if not t.startswith("synxfer") and m.ok]
            if not ours:
                continue
            best = min(ours, key=lambda m: m.seconds)
            row: dict[str, object] = {
                "test": label,
                "direction": direction,
                "synxfer": best.tool,
                "synxfer_s": best.seconds,
                "synxfer_cpu_per_gib": cpu_per_gib(best),
            }
            if peers:
                fastest = min(peers, key=lambda m: m.seconds)
                row.update(
                    fastest_peer=fastest.tool,
                    fastest_peer_s=fastest.seconds,
                    time_ratio=best.seconds / fastest.seconds if fastest.seconds else None,
                )
            s5 = tools.get("s5cmd")
            if s5 is not None and s5.ok:
                row["s5cmd_cpu_per_gib"] = cpu_per_gib(s5)
            out.append(row)
        return out

    # -- renderings
    def terminal(self) -> str:
        """The Synapse-shaped tables (rows = test, columns = tools) and the notes."""
        tools = self.tool_names
        plan = self.result.plan
        parts = [
            f"synxfer-bench {plan.scenario.name} x{plan.scale:g} on {self.result.target['name']}"
            f" (median of {plan.repeat})"
        ]
        for direction in self.directions:
            for metric, title in (("seconds", "seconds"), ("cpu_per_gib", "client CPU s/GiB")):
                header, body = pivot(
                    self.result.measurements, direction, metric, tools, self.result.skipped_tools
                )
                parts.append(f"\n{direction}: {title}\n{_text_table(header, body)}")
        if self.result.notes:
            parts.append("\nnotes:\n" + "\n".join(f"  {n}" for n in self.result.notes))
        failures = [m for m in self.result.measurements if not m.ok and m.error]
        failures = [m for m in failures if not (m.error or "").startswith("skipped")]
        if failures:
            parts.append(
                "\nfailures:\n"
                + "\n".join(f"  {row_label(m)} {m.tool} {m.direction}: {m.error}" for m in failures)
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
            f"median of {plan.repeat} run(s) per cell, tools interleaved per row, "
            "fresh prefix per run, every run verified (object count and sizes)",
            f"* machine: {m.get('cpu_count')} CPUs, {m.get('platform')}, Python {m.get('python')}",
            f"* target: {_describe_target(r.target)}",
        ]
        if self.note:
            lines += ["", f"> {self.note}"]
        for direction in self.directions:
            lines += ["", f"## {direction.capitalize()}"]
            for metric, title in _METRICS:
                shown = "range" if metric == "seconds" else metric
                header, body = pivot(r.measurements, direction, shown, tools, r.skipped_tools)
                if metric == "seconds":
                    title += " (min-max)"
                lines += ["", f"**{title}**", "", _md_table(header, body)]
        versus = self.versus()
        if versus:
            lines += [
                "",
                "## synxfer against the peers",
                "",
                "Goal (not a gate): synxfer's wall time <= the fastest peer's, and its client "
                "CPU s/GiB <= s5cmd's. The better of synxfer's two profiles is shown.",
                "",
            ]
            header = ["test", "direction", "synxfer s", "fastest peer", "peer s", "time ratio",
                      "synxfer CPU s/GiB", "s5cmd CPU s/GiB", "goals met"]  # fmt: skip
            body = []
            for v in versus:
                ratio = v.get("time_ratio")
                s5 = v.get("s5cmd_cpu_per_gib")
                time_ok = ratio is None or float(ratio) <= 1.0  # type: ignore[arg-type]
                cpu_ok = s5 is None or float(v["synxfer_cpu_per_gib"]) <= float(s5)  # type: ignore[arg-type]
                goals = ("time " + ("yes" if time_ok else "NO")) + (
                    ", CPU " + ("yes" if cpu_ok else "NO")
                )
                body.append(
                    [
                        str(v["test"]),
                        str(v["direction"]),
                        f"{float(v['synxfer_s']):.2f} ({v['synxfer']})",  # type: ignore[arg-type]
                        str(v.get("fastest_peer", "-")),
                        f"{float(v['fastest_peer_s']):.2f}" if "fastest_peer_s" in v else "-",  # type: ignore[arg-type]
                        f"{float(ratio):.2f}" if ratio is not None else "-",  # type: ignore[arg-type]
                        f"{float(v['synxfer_cpu_per_gib']):.1f}",  # type: ignore[arg-type]
                        f"{float(s5):.1f}" if s5 is not None else "-",  # type: ignore[arg-type]
                        goals,
                    ]
                )
            lines += [_md_table(header, body)]
        lines += self._cost_section()
        lines += ["", "## Rows", ""]
        header = ["test", "published", "measured as", "bytes", "data", "zlib-6 ratio", "case"]
        body = [
            [
                str(i["name"]),
                str(i["published"]),
                str(i["geometry"]),
                str(i["bytes"]),
                str(i["data"]),
                f"{float(i['compression_ratio_zlib6']):.3f}",  # type: ignore[arg-type]
                str(i["case"]) + (f" sweep {i['sweep']}" if i.get("sweep") else ""),
            ]
            for i in r.rows
        ]
        lines += [_md_table(header, body)]
        lines += ["", "## Tools", ""]
        header = ["tool", "version", "how"]
        body = [
            [str(t["name"]), str(t.get("version")), str(t.get("options") or t.get("path") or "")]
            for t in r.tools
        ]
        lines += [_md_table(header, body)]
        if r.notes:
            lines += ["", "## Notes", ""] + [f"* {n}" for n in r.notes]
        failures = [
            x for x in r.measurements if not x.ok and not (x.error or "").startswith("skipped")
        ]
        if failures:
            lines += ["", "## Failures", ""] + [
                f"* {row_label(x)} {x.tool} {x.direction}: {x.error}" for x in failures
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

    def _cost_section(self) -> list[str]:
        p = self.prices
        lines = [
            "",
            "## Cost estimate",
            "",
            f"Skyplane-style: egress ${p.egress_per_gb}/GB x bytes (x the zlib-6 ratio where the "
            f"data compresses) + instance ${p.instance_per_hour}/h x transfer time. None of the "
            "tools compresses in transit; the *compressed* column is what the transfer would "
            "cost if it did. *Projected* scales bytes and time back to the published row size at "
            "the measured rate. Prices: `--egress-price`, `--instance-price` or `--prices FILE`.",
            "",
        ]
        header = [
            "test",
            "direction",
            "tool",
            "$ as sent",
            "$ compressed",
            "$ projected (full size)",
        ]
        body = []
        for m in self.result.measurements:
            if not m.ok:
                continue
            c = self.costs(m)
            sent = c["as_sent"]
            comp = c.get("compressed")
            proj = c.get("projected_full_size")
            body.append(
                [
                    row_label(m),
                    m.direction,
                    m.tool,
                    f"{sent['total_usd']:.6f}",  # type: ignore[index]
                    f"{comp['total_usd']:.6f}" if comp else "-",  # type: ignore[index]
                    f"{proj['total_usd']:.2f}" if proj else "-",  # type: ignore[index]
                ]
            )
        return [*lines, _md_table(header, body)]


def _describe_target(target: dict[str, object]) -> str:
    parts = [str(target.get("server") or target.get("name"))]
    if target.get("version"):
        parts.append(str(target["version"]))
    return " ".join(parts) + (" on 127.0.0.1" if target.get("local") else "")
