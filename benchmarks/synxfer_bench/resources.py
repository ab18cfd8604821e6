"""Per-second resources of one tool run (dstat-like) and a per-thread view of the tool.

s5cmd's published benchmark prints, per second of a run, ``dstat``'s
columns: CPU usr/sys/idl/wai, disk read/write, net recv/send; issue 14
adds interrupts and context switches. :class:`ResourceSampler` records the
same from ``/proc``, in a thread of the bench (never in the measured
process), once a second, while one tool runs:

* CPU: ``/proc/stat``'s ``cpu`` line, as % of all cores (``usr`` counts
  nice; ``sys`` counts irq, softirq and steal, as the bench's timeline does);
* disk: ``/proc/diskstats``, sectors read/written of whole disks only
  (``/sys/block`` devices that are not loop, ram or zram devices and are
  not stacked on other devices, so nothing is counted twice);
* net: ``/proc/net/dev``'s ``lo`` (local targets talk over loopback; a
  byte sent on ``lo`` is also received on it, so recv = send there);
* ``int`` and ``csw``: ``/proc/stat``'s ``intr`` total and ``ctxt``, per second.

and, every :data:`THREAD_INTERVAL` seconds, the CPU of each thread of the
tool's process tree (``/proc/PID/task/TID/stat``: comm, utime, stime), so
a report can say which threads burn CPU (synxfer: the event loop, named
after the program, against its ``synxfer-io_N`` worker threads; s5cmd: its
Go runtime's threads). A thread's figure is the last one read before it
(or the process) ended: up to :data:`THREAD_INTERVAL` of CPU at the very
end can be missing; :attr:`ResourceRecord.process_cpu`, from ``wait4``,
is the exact total when the caller supplies it.

The sampler is bounded (:data:`MAX_SECONDS` rows at most; it stops
sampling beyond that and says so) and stops by itself once the watched
process has exited (or is a zombie waiting to be reaped).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "MAX_SECONDS",
    "THREAD_INTERVAL",
    "ResourceRecord",
    "ResourceSampler",
    "SecondRow",
    "SystemCounters",
    "ThreadCpu",
    "read_system",
    "read_threads",
    "render_resources",
    "report_section",
    "thread_table",
]

#: Seconds between system rows.
INTERVAL = 1.0
#: Seconds between reads of the tool's threads.
THREAD_INTERVAL = 0.2
#: At most this many per-second rows per run (about an hour); beyond, sampling stops.
MAX_SECONDS = 3600
_TICK = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
_SECTOR = 512
_VIRTUAL_DISKS = ("loop", "ram", "zram")


# --------------------------------------------------------------------------- reading /proc


@dataclass(frozen=True, slots=True)
class SystemCounters:
    """Cumulative machine counters at one instant (``t`` from :func:`time.monotonic`)."""

    t: float
    #: Clock ticks: user, nice, system, idle, iowait, irq, softirq, steal.
    cpu: tuple[int, ...]
    intr: int
    ctxt: int
    disk_read: int
    disk_write: int
    net_recv: int
    net_send: int


def _whole_disks(sys_block: Path) -> set[str] | None:
    """Names of real whole disks (see the module docstring); None if ``/sys/block`` is absent."""
    try:
        entries = list(sys_block.iterdir())
    except OSError:
        return None
    disks = set()
    for entry in entries:
        if entry.name.startswith(_VIRTUAL_DISKS):
            continue
        slaves = entry / "slaves"
        with contextlib.suppress(OSError):
            if slaves.is_dir() and any(slaves.iterdir()):
                continue  # dm/md on top of another disk: its I/O is counted there
        disks.add(entry.name)
    return disks


def _read_stat(path: Path) -> tuple[tuple[int, ...], int, int]:
    cpu: tuple[int, ...] = ()
    intr = ctxt = 0
    with path.open() as f:
        for line in f:
            if line.startswith("cpu "):
                cpu = tuple(int(x) for x in line.split()[1:9])
            elif line.startswith("intr "):
                intr = int(line.split(maxsplit=2)[1])
            elif line.startswith("ctxt "):
                ctxt = int(line.split()[1])
    return cpu, intr, ctxt


def _read_diskstats(path: Path, disks: set[str] | None) -> tuple[int, int]:
    read = write = 0
    with contextlib.suppress(OSError), path.open() as f:
        for line in f:
            parts = line.split()
            if len(parts) < 10:
                continue
            name = parts[2]
            if disks is None:
                if name.startswith(_VIRTUAL_DISKS):
                    continue
            elif name not in disks:
                continue
            read += int(parts[5]) * _SECTOR
            write += int(parts[9]) * _SECTOR
    return read, write


def _read_net(path: Path, iface: str) -> tuple[int, int]:
    with contextlib.suppress(OSError), path.open() as f:
        for line in f:
            name, sep, rest = line.partition(":")
            if sep and name.strip() == iface:
                fields = rest.split()
                return int(fields[0]), int(fields[8])
    return 0, 0


def read_system(
    proc: Path = Path("/proc"), *, disks: set[str] | None = None, iface: str = "lo"
) -> SystemCounters:
    """The machine's counters now (``disks``: whole-disk names; None: every non-virtual one)."""
    cpu, intr, ctxt = _read_stat(proc / "stat")
    read, write = _read_diskstats(proc / "diskstats", disks)
    recv, send = _read_net(proc / "net" / "dev", iface)
    return SystemCounters(time.monotonic(), cpu, intr, ctxt, read, write, recv, send)


@dataclass(slots=True)
class ThreadCpu:
    """CPU seconds one thread of the tool used (as last read)."""

    pid: int
    tid: int
    comm: str
    user: float
    system: float

    @property
    def cpu(self) -> float:
        return self.user + self.system

    def to_dict(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "tid": self.tid,
            "comm": self.comm,
            "user_s": round(self.user, 3),
            "system_s": round(self.system, 3),
        }


def _parse_task_stat(text: str) -> tuple[str, str, float, float]:
    """``(comm, state, utime s, stime s)`` of a ``/proc/.../stat`` line (comm may hold ')')."""
    head, _, rest = text.rpartition(")")
    comm = head.split("(", 1)[1] if "(" in head else head
    fields = rest.split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return comm, fields[0], int(fields[11]) / _TICK, int(fields[12]) / _TICK


def _state(pid: int, proc: Path) -> str | None:
    """The process's state letter, or None once it is gone."""
    try:
        return _parse_task_stat((proc / str(pid) / "stat").read_text())[1]
    except (OSError, IndexError, ValueError):
        return None


def _children(pid: int, proc: Path) -> list[int]:
    """Every descendant of ``pid`` (one scan of ``/proc``)."""
    parents: dict[int, list[int]] = {}
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            text = (proc / entry / "stat").read_text()
        except OSError:
            continue
        rest = text.rpartition(")")[2].split()
        if len(rest) > 1:
            parents.setdefault(int(rest[1]), []).append(int(entry))
    out: list[int] = []
    todo = [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def read_threads(pid: int, proc: Path = Path("/proc"), *, tree: bool = True) -> list[ThreadCpu]:
    """Every thread of ``pid`` (and, with ``tree``, of its descendants) and its CPU so far."""
    pids = [pid, *(_children(pid, proc) if tree else [])]
    out: list[ThreadCpu] = []
    for p in pids:
        try:
            tids = [t for t in os.listdir(proc / str(p) / "task") if t.isdigit()]
        except OSError:
            continue
        for tid in tids:
            try:
                comm, _, user, system = _parse_task_stat(
                    (proc / str(p) / "task" / tid / "stat").read_text()
                )
            except (OSError, IndexError, ValueError):
                continue
            out.append(ThreadCpu(p, int(tid), comm, user, system))
    return out


# --------------------------------------------------------------------------- per second


@dataclass(frozen=True, slots=True)
class SecondRow:
    """One second (or, last, the part second before the run ended) of the machine."""

    t: float
    seconds: float
    usr: float
    sys: float
    idl: float
    wai: float
    read: float
    write: float
    recv: float
    send: float
    intr: float
    csw: float

    def to_dict(self) -> dict[str, object]:
        return {
            "t": round(self.t, 2),
            "dt": round(self.seconds, 3),
            "usr": round(self.usr, 1),
            "sys": round(self.sys, 1),
            "idl": round(self.idl, 1),
            "wai": round(self.wai, 1),
            "read_b_s": round(self.read),
            "writ_b_s": round(self.write),
            "recv_b_s": round(self.recv),
            "send_b_s": round(self.send),
            "int_s": round(self.intr),
            "csw_s": round(self.csw),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SecondRow:
        return cls(
            float(d["t"]),
            float(d.get("dt", 1.0)),
            float(d["usr"]),
            float(d["sys"]),
            float(d["idl"]),
            float(d["wai"]),
            float(d["read_b_s"]),
            float(d["writ_b_s"]),
            float(d["recv_b_s"]),
            float(d["send_b_s"]),
            float(d["int_s"]),
            float(d["csw_s"]),
        )


def second_row(a: SystemCounters, b: SystemCounters, t0: float) -> SecondRow:
    """The rates between two readings (CPU as % of all cores' ticks)."""
    dt = max(b.t - a.t, 1e-6)
    d = [y - x for x, y in zip(a.cpu, b.cpu, strict=False)] + [0] * 8
    user, nice, system, idle, iowait, irq, softirq, steal = d[:8]
    total = max(sum(d[:8]), 1)
    return SecondRow(
        t=b.t - t0,
        seconds=dt,
        usr=100.0 * (user + nice) / total,
        sys=100.0 * (system + irq + softirq + steal) / total,
        idl=100.0 * idle / total,
        wai=100.0 * iowait / total,
        read=(b.disk_read - a.disk_read) / dt,
        write=(b.disk_write - a.disk_write) / dt,
        recv=(b.net_recv - a.net_recv) / dt,
        send=(b.net_send - a.net_send) / dt,
        intr=(b.intr - a.intr) / dt,
        csw=(b.ctxt - a.ctxt) / dt,
    )


@dataclass(slots=True)
class ResourceRecord:
    """What :class:`ResourceSampler` saw during one run."""

    rows: list[SecondRow] = field(default_factory=list)
    threads: list[ThreadCpu] = field(default_factory=list)
    #: Seconds not sampled because the run outlived :data:`MAX_SECONDS`.
    truncated: bool = False
    #: The tool process's own CPU seconds (wait4), when the caller knows them.
    process_cpu: float | None = None
    #: Threads seen in all (``threads`` may keep only those that used CPU).
    threads_seen: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "seconds": [r.to_dict() for r in self.rows],
            "threads": [
                t.to_dict() for t in sorted(self.threads, key=lambda t: -t.cpu) if t.cpu > 0
            ],
            "threads_seen": self.threads_seen or len(self.threads),
            "truncated": self.truncated,
            "process_cpu_s": None if self.process_cpu is None else round(self.process_cpu, 3),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ResourceRecord:
        threads = [
            ThreadCpu(int(t["pid"]), int(t["tid"]), str(t["comm"]), t["user_s"], t["system_s"])
            for t in d.get("threads", [])
        ]
        cpu = d.get("process_cpu_s")
        return cls(
            [SecondRow.from_dict(r) for r in d.get("seconds", [])],
            threads,
            bool(d.get("truncated")),
            float(cpu) if cpu is not None else None,
            int(d.get("threads_seen") or len(threads)),
        )


class ResourceSampler:
    """A bench thread sampling the machine each second and one process's threads meanwhile.

    ``start()`` takes the first reading (call it just before the tool
    starts), ``watch(pid)`` names the tool's process (the ``on_start``
    hook of :func:`~.measure.run_measured`), ``stop()`` ends sampling and
    returns the :class:`ResourceRecord`. Sampling also ends by itself once
    the watched process has exited, or after ``max_seconds`` rows.
    """

    def __init__(
        self,
        *,
        interval: float = INTERVAL,
        thread_interval: float = THREAD_INTERVAL,
        max_seconds: int = MAX_SECONDS,
        proc: Path = Path("/proc"),
        iface: str = "lo",
    ) -> None:
        self.interval = interval
        self.thread_interval = min(thread_interval, interval)
        self.max_seconds = max_seconds
        self.proc = proc
        self.iface = iface
        self._disks = _whole_disks(Path("/sys/block"))
        self._pid: int | None = None
        self._threads: dict[tuple[int, int], ThreadCpu] = {}
        self._record = ResourceRecord()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._last: SystemCounters | None = None
        self._lock = threading.Lock()
        #: The thread ended on its own (the process exited, or max_seconds).
        self._ended = False

    @property
    def running(self) -> bool:
        """Whether the sampling thread is still alive."""
        return self._thread is not None and self._thread.is_alive()

    def _read(self) -> SystemCounters:
        return read_system(self.proc, disks=self._disks, iface=self.iface)

    def start(self) -> None:
        self._last = self._read()
        self._t0 = self._last.t
        self._thread = threading.Thread(target=self._run, name="bench-resources", daemon=True)
        self._thread.start()

    def watch(self, pid: int) -> None:
        """Sample the threads of ``pid`` and its descendants from now on."""
        self._pid = pid
        self._sample_threads()

    def _sample_threads(self) -> bool:
        """Read the watched tree's threads; False once the process has exited."""
        pid = self._pid
        if pid is None:
            return True
        state = _state(pid, self.proc)
        if state is None or state in "ZX":
            return False
        seen = read_threads(pid, self.proc)
        with self._lock:
            for t in seen:
                self._threads[(t.pid, t.tid)] = t
        return True

    def _row(self) -> None:
        now = self._read()
        assert self._last is not None
        if now.t - self._last.t < 0.05:
            return
        with self._lock:
            if len(self._record.rows) >= self.max_seconds:
                self._record.truncated = True
                return
            self._record.rows.append(second_row(self._last, now, self._t0))
        self._last = now

    def _run(self) -> None:
        next_row = time.monotonic() + self.interval
        while not self._stop.wait(max(0.0, min(self.thread_interval, next_row - time.monotonic()))):
            alive = self._sample_threads()
            if time.monotonic() >= next_row:
                self._row()
                next_row += self.interval
                if len(self._record.rows) >= self.max_seconds:
                    self._record.truncated = True
                    self._ended = True
                    return
            if not alive:
                self._row()  # the part second before the process ended
                self._ended = True
                return

    def stop(self, process_cpu: float | None = None) -> ResourceRecord:
        """Stop sampling (if it has not stopped by itself) and return what was recorded."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
            if not self._ended:
                self._row()  # stopped from outside: the part second since the last row
        with self._lock:
            self._record.threads = list(self._threads.values())
            self._record.threads_seen = len(self._threads)
        self._record.process_cpu = process_cpu
        return self._record


# --------------------------------------------------------------------------- rendering


def _rate(value: float) -> str:
    """dstat's style: ``0``, ``512B``, ``12k``, ``3.4M``, ``120M``, ``1.2G`` (bytes/s or counts)."""
    for unit, factor in (("G", 2**30), ("M", 2**20), ("k", 2**10)):
        if value >= factor:
            v = value / factor
            return f"{v:.1f}{unit}" if v < 10 else f"{v:.0f}{unit}"
    return f"{value:.0f}" if value >= 1 else "0"


def _count(value: float) -> str:
    for unit, factor in (("M", 1e6), ("k", 1e3)):
        if value >= factor:
            v = value / factor
            return f"{v:.1f}{unit}" if v < 10 else f"{v:.0f}{unit}"
    return f"{value:.0f}"


_HEADER = ["s", "usr", "sys", "idl", "wai", "read", "writ", "recv", "send", "int", "csw"]


def _cells(r: SecondRow, label: str) -> list[str]:
    return [
        label,
        f"{r.usr:.0f}",
        f"{r.sys:.0f}",
        f"{r.idl:.0f}",
        f"{r.wai:.0f}",
        _rate(r.read),
        _rate(r.write),
        _rate(r.recv),
        _rate(r.send),
        _count(r.intr),
        _count(r.csw),
    ]


def _mean_row(rows: Sequence[SecondRow]) -> SecondRow:
    """Time-weighted means of ``rows``."""
    total = sum(r.seconds for r in rows) or 1.0

    def avg(name: str) -> float:
        return float(sum(getattr(r, name) * r.seconds for r in rows)) / total

    names = ("usr", "sys", "idl", "wai", "read", "write", "recv", "send", "intr", "csw")
    values = {n: avg(n) for n in names}
    return SecondRow(t=rows[-1].t, seconds=total, **values)


def pick_rows(rows: Sequence[SecondRow], limit: int) -> list[SecondRow]:
    """At most ``limit`` rows: all of them, or evenly spaced ones with the first and last."""
    if len(rows) <= limit:
        return list(rows)
    if limit < 2:
        return [rows[-1]] if limit == 1 else []
    step = (len(rows) - 1) / (limit - 1)
    return [rows[round(i * step)] for i in range(limit)]


def _md(header: Sequence[str], body: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " ---: |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return lines


def second_table(record: ResourceRecord, limit: int = 12) -> list[str]:
    """The per-second table (Markdown), at most ``limit`` seconds shown, and the run's mean."""
    rows = record.rows
    if not rows:
        return []
    shown = pick_rows(rows, limit)
    body = [_cells(r, f"{r.t:.0f}" if r.seconds >= 0.95 else f"{r.t:.1f}") for r in shown]
    body.append(_cells(_mean_row(rows), "**mean**"))
    out = _md(_HEADER, body)
    if len(shown) < len(rows):
        out.append("")
        out.append(
            f"({len(shown)} of {len(rows)} seconds shown, evenly spaced; all in results.json)"
        )
    return out


def thread_table(record: ResourceRecord, limit: int = 8) -> list[str]:
    """The busiest threads of the tool (Markdown), the rest summed per name."""
    threads = sorted((t for t in record.threads if t.cpu > 0), key=lambda t: -t.cpu)
    if not threads:
        return []
    total = sum(t.cpu for t in threads)
    body = [
        [
            str(t.tid),
            t.comm + (" (main)" if t.tid == t.pid else ""),
            f"{t.user:.2f}",
            f"{t.system:.2f}",
            f"{100 * t.cpu / total:.0f} %",
        ]
        for t in threads[:limit]
    ]
    rest: dict[str, list[ThreadCpu]] = {}
    for t in threads[limit:]:
        rest.setdefault(t.comm, []).append(t)
    for comm, group in sorted(rest.items(), key=lambda kv: -sum(t.cpu for t in kv[1])):
        user = sum(t.user for t in group)
        system = sum(t.system for t in group)
        body.append(
            [
                f"{len(group)} more",
                comm,
                f"{user:.2f}",
                f"{system:.2f}",
                f"{100 * (user + system) / total:.0f} %",
            ]
        )
    header = ["thread", "name", "user s", "sys s", "share"]
    out = _md(header, body)
    out[1] = "| ---: | --- | ---: | ---: | ---: |"
    seen = record.threads_seen or len(record.threads)
    note = f"{seen} threads seen, {total:.2f} CPU s read per thread"
    if record.process_cpu is not None:
        note += f"; the process tree used {record.process_cpu:.2f} s (wait4)"
    return [*out, "", note]


def render_resources(
    entries: Sequence[tuple[str, ResourceRecord]], *, seconds: int = 12, threads: int = 8
) -> list[str]:
    """Markdown for ``(title, record)`` pairs: each run's per-second table and thread view."""
    if not entries:
        return []
    lines = [
        "",
        "## Resources per second and per thread",
        "",
        "Per second of each shown run, as s5cmd's benchmark prints dstat: CPU usr/sys/idl/wai "
        "(% of all cores, the whole machine), disk read/write of whole disks "
        "(`/proc/diskstats`), loopback recv/send (`/proc/net/dev` `lo`: every byte sent is "
        "also received), interrupts and context switches per second (`/proc/stat`); sampled "
        "by a thread of the bench, not of the tool. Then the tool's busiest threads "
        "(`/proc/PID/task/*/stat`). One run per cell (its median-time run) is shown, its "
        "seconds trimmed; every run's full series is in results.json (`resources`).",
    ]
    for title, exact in entries:
        # As results.json keeps it, so a report re-rendered from the JSON is the same.
        record = ResourceRecord.from_dict(exact.to_dict())
        table = second_table(record, seconds)
        if not table:
            continue
        lines += ["", f"**{title}**", "", *table]
        view = thread_table(record, threads)
        if view:
            lines += ["", *view]
    return lines


class _Run(Protocol):
    """What :func:`report_section` reads of a matrix run (``matrix.Sample``)."""

    row: str
    tool: str
    direction: str
    rep: int
    concurrency: int | None
    seconds: float
    resources: ResourceRecord | None


def report_section(
    runs: Sequence[_Run], labels: Mapping[str, str] | None = None, *, seconds: int = 12
) -> list[str]:
    """:func:`render_resources` for a matrix: per (row, concurrency, tool, direction),
    the run of median time among those with a record. ``labels`` maps a row to its label."""
    cells: dict[tuple[str, int, str, str], list[_Run]] = {}
    for run in runs:
        if run.resources is not None and run.resources.rows:
            key = (run.row, run.concurrency or 0, run.direction, run.tool)
            cells.setdefault(key, []).append(run)
    entries = []
    for key in cells:  # in the order they ran
        group = sorted(cells[key], key=lambda r: r.seconds)
        run = group[(len(group) - 1) // 2]
        assert run.resources is not None
        title = (labels or {}).get(run.row, run.row)
        if run.concurrency is not None:
            title += f" c={run.concurrency}"
        title += f", {run.tool} {run.direction} (round {run.rep + 1}, {run.seconds:.2f} s)"
        entries.append((title, run.resources))
    return render_resources(entries, seconds=seconds)
