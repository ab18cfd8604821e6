"""PNG charts of a scenario run (matplotlib, Agg backend): seconds per row, resource timeline."""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .report import row_label

if TYPE_CHECKING:
    from .matrix import MatrixResult
    from .runner import Measurement

__all__ = ["seconds_chart", "timeline_chart", "write_charts"]

_COLORS = ("#1f77b4", "#17becf", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def _pyplot() -> Any:
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def _tool_order(result: MatrixResult) -> list[str]:
    names = [str(t["name"]) for t in result.tools]
    for m in result.measurements:
        if m.tool not in names:
            names.append(m.tool)
    return names


def _label(result: MatrixResult, m: Measurement) -> str:
    """The row's true label, on two lines: what moved, then the seed row it stands for."""
    return row_label(m, result.rows).replace(" (", "\n(", 1)


def seconds_chart(result: MatrixResult, path: Path) -> None:
    """Grouped bars: median seconds per row per tool (log scale), min-max as error bars."""
    plt = _pyplot()
    tools = _tool_order(result)
    directions: list[str] = []
    for m in result.measurements:
        if m.direction not in directions:
            directions.append(m.direction)
    fig, axes = plt.subplots(len(directions), 1, figsize=(12, 4.2 * len(directions)), squeeze=False)
    for ax, direction in zip(axes[:, 0], directions, strict=True):
        ms = [m for m in result.measurements if m.direction == direction]
        labels: list[str] = []
        for m in ms:
            if _label(result, m) not in labels:
                labels.append(_label(result, m))
        width = 0.8 / max(1, len(tools))
        for ti, tool in enumerate(tools):
            xs, ys, lo, hi, failed = [], [], [], [], []
            for li, label in enumerate(labels):
                cell = next((x for x in ms if _label(result, x) == label and x.tool == tool), None)
                if cell is None:
                    continue
                x = li - 0.4 + width * (ti + 0.5)
                if not cell.ok:
                    failed.append(x)
                    continue
                xs.append(x)
                ys.append(cell.seconds)
                lo.append(cell.seconds - (cell.seconds_min or cell.seconds))
                hi.append((cell.seconds_max or cell.seconds) - cell.seconds)
            color = _COLORS[ti % len(_COLORS)]
            ax.bar(xs, ys, width, label=tool, color=color, yerr=[lo, hi], capsize=2)
            for x in failed:
                ax.text(x, 0.02, "x", color=color, ha="center", transform=ax.get_xaxis_transform())
        ax.set_yscale("log")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("seconds (log)")
        ax.set_title(f"{result.plan.scenario.name} x{result.plan.scale:g}: {direction}")
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def timeline_chart(result: MatrixResult, path: Path) -> None:
    """CPU, disk and network over the run (1 Hz), with each tool's runs shaded."""
    plt = _pyplot()
    tl = result.timeline
    fig, (cpu, disk, net) = plt.subplots(3, 1, figsize=(14, 9), sharex=True)
    t = [s.t for s in tl]
    if tl:
        user = [s.cpu_user for s in tl]
        system = [s.cpu_system for s in tl]
        wait = [s.cpu_iowait for s in tl]
        cpu.stackplot(t, user, system, wait, labels=["user", "system", "iowait"], alpha=0.8)
        server = [s.server_cpu for s in tl]
        if any(v is not None for v in server):
            cores = os.cpu_count() or 1
            cpu.plot(
                t,
                [(v or 0.0) / cores for v in server],
                color="black",
                lw=1,
                label="server (share of all cores)",
            )
        disk.plot(t, [s.disk_read for s in tl], label="read")
        disk.plot(t, [s.disk_write for s in tl], label="write")
        net.plot(t, [s.net_recv for s in tl], label="loopback receive")
        net.plot(t, [s.net_send for s in tl], label="loopback send", ls="--")
    tools = _tool_order(result)
    colors = {tool: _COLORS[i % len(_COLORS)] for i, tool in enumerate(tools)}
    for s in result.samples:
        if s.end > s.start:
            for ax in (cpu, disk, net):
                ax.axvspan(s.start, s.end, color=colors.get(s.tool, "grey"), alpha=0.08, lw=0)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[tool], alpha=0.3) for tool in tools]
    cpu.set_ylabel("CPU % (all cores)")
    cpu.set_ylim(0, 100)
    disk.set_ylabel("disk MiB/s")
    net.set_ylabel("network MiB/s")
    net.set_xlabel("seconds since start")
    cpu.legend(loc="upper left", fontsize=8)
    disk.legend(loc="upper left", fontsize=8)
    net.legend(loc="upper left", fontsize=8)
    fig.legend(
        handles, tools, loc="upper right", ncol=len(tools), fontsize=8, title="shaded: tool running"
    )
    cpu.set_title(
        f"{result.plan.scenario.name} x{result.plan.scale:g} on {result.target['name']}: "
        "resource timeline (1 Hz)",
        loc="left",
    )
    for ax in (cpu, disk, net):
        ax.grid(alpha=0.3)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_charts(result: MatrixResult, out_dir: Path) -> Sequence[tuple[str, str]]:
    """Write ``seconds.png`` and ``timeline.png``; returns ``(title, file name)`` pairs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    seconds_chart(result, out_dir / "seconds.png")
    timeline_chart(result, out_dir / "timeline.png")
    return [("seconds per row per tool", "seconds.png"), ("resource timeline", "timeline.png")]
