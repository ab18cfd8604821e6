"""Measuring tools as processes: wall time, CPU of the process tree, peak RSS; a 1 Hz timeline.

:func:`run_measured` starts a command in its own session (so a Ctrl-C or a
timeout can stop its whole process group), samples the resident memory of
its process tree (each process's ``VmHWM`` high-water mark, summed over
the tree; ``ru_maxrss`` would count the pre-exec copy of this process),
and reaps it with :func:`os.wait4`, whose resource usage includes every
descendant the tool itself waited for: the CPU seconds are those of the
tool's whole process tree.

:class:`Timeline` samples the machine once a second, like ``dstat``:
CPU (user, system, I/O wait, idle), disk read/write and network
send/receive rates, and the CPU of the server process when there is one.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .resources import ResourceRecord, ResourceSampler

# psutil ships no type information; this keeps mypy --strict quiet with or without types-psutil.
psutil: Any = importlib.import_module("psutil")

__all__ = ["ProcessStats", "Timeline", "TimelineSample", "run_measured", "tree_cpu_seconds"]

#: Seconds between RSS samples of a running tool.
RSS_INTERVAL = 0.05
_TAIL = 4000


@dataclass(slots=True)
class ProcessStats:
    """What one tool process cost."""

    seconds: float
    cpu_user: float
    cpu_system: float
    peak_rss: int
    returncode: int
    stdout_tail: str = ""
    stderr_tail: str = ""
    timed_out: bool = False
    #: Per-second machine rows and the tool's threads, when a sampler was given.
    resources: ResourceRecord | None = None

    @property
    def cpu(self) -> float:
        return self.cpu_user + self.cpu_system


def _hwm(pid: int) -> int | None:
    """The peak resident memory (``VmHWM``) of a process since its last exec, in bytes."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _sample_tree(root: Any, peaks: dict[int, int]) -> None:
    """Record each live process's high-water mark (RSS as fallback) in ``peaks``."""
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for proc in procs:
        value = _hwm(proc.pid)
        if value is None:
            try:
                value = int(proc.memory_info().rss)
            except psutil.Error:
                continue
        peaks[proc.pid] = max(peaks.get(proc.pid, 0), value)


def _tail(f: Any) -> str:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - _TAIL))
    return str(f.read().decode("utf-8", "replace"))


def _kill_group(pid: int) -> tuple[int, Any] | None:
    """SIGTERM the group of ``pid``, reap ``pid`` (5 s grace), SIGKILL the rest.

    Returns ``(status, rusage)`` of ``pid`` once reaped, or None.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    reaped: tuple[int, Any] | None = None
    deadline = time.monotonic() + 5
    while reaped is None and time.monotonic() < deadline:
        try:
            done, status, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            break
        if done == pid:
            reaped = (status, usage)
        else:
            time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if reaped is None:
        with contextlib.suppress(ChildProcessError):
            _done, status, usage = os.wait4(pid, 0)
            reaped = (status, usage)
    return reaped


def run_measured(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
    on_start: Callable[[int], None] | None = None,
    sampler: ResourceSampler | None = None,
) -> ProcessStats:
    """Run ``argv`` to completion and measure it (see the module docstring).

    The child's stdout and stderr go to temporary files; their last few KiB
    come back in the result. On timeout, or if this call is interrupted
    (Ctrl-C), the child's whole process group is terminated, then killed.
    A ``sampler`` (:class:`~.resources.ResourceSampler`, a thread of this
    process) records the machine per second and the child's threads from
    just before the start to the end: ``ProcessStats.resources``.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if sampler is not None:
            sampler.start()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        if sampler is not None:
            sampler.watch(proc.pid)
        if on_start is not None:
            on_start(proc.pid)
        peaks: dict[int, int] = {}
        timed_out = False
        status = 0
        usage = None
        try:
            ps = psutil.Process(proc.pid)
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid == proc.pid:
                    break
                _sample_tree(ps, peaks)
                if timeout is not None and time.perf_counter() - t0 > timeout:
                    timed_out = True
                    reaped = _kill_group(proc.pid)
                    if reaped is not None:
                        status, usage = reaped
                    break
                time.sleep(RSS_INTERVAL)
        except BaseException:
            _kill_group(proc.pid)
            proc.returncode = -1
            if sampler is not None:
                sampler.stop()
            raise
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        resources = None
        if sampler is not None:
            cpu = usage.ru_utime + usage.ru_stime if usage is not None else None
            resources = sampler.stop(process_cpu=cpu)
        return ProcessStats(
            seconds=seconds,
            cpu_user=usage.ru_utime if usage is not None else 0.0,
            cpu_system=usage.ru_stime if usage is not None else 0.0,
            peak_rss=sum(peaks.values()),
            returncode=proc.returncode,
            stdout_tail=_tail(out),
            stderr_tail=_tail(err),
            timed_out=timed_out,
            resources=resources,
        )


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live and reaped descendants."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system
            if proc is root:
                total += t.children_user + t.children_system
    return total


# --------------------------------------------------------------------------- timeline


@dataclass(slots=True)
class TimelineSample:
    """One second of the machine: CPU percentages (of all cores), I/O rates in MiB/s."""

    t: float
    cpu_user: float
    cpu_system: float
    cpu_iowait: float
    cpu_idle: float
    disk_read: float
    disk_write: float
    net_recv: float
    net_send: float
    server_cpu: float | None
    label: str

    def to_dict(self) -> dict[str, object]:
        return {
            "t": round(self.t, 2),
            "cpu_user": round(self.cpu_user, 1),
            "cpu_system": round(self.cpu_system, 1),
            "cpu_iowait": round(self.cpu_iowait, 1),
            "cpu_idle": round(self.cpu_idle, 1),
            "disk_read_mib_s": round(self.disk_read, 2),
            "disk_write_mib_s": round(self.disk_write, 2),
            "net_recv_mib_s": round(self.net_recv, 2),
            "net_send_mib_s": round(self.net_send, 2),
            "server_cpu_pct": None if self.server_cpu is None else round(self.server_cpu, 1),
            "label": self.label,
        }


@dataclass
class Timeline:
    """A background thread sampling the machine every ``interval`` seconds.

    ``label`` (what is running now) is recorded with each sample; set it
    before each run. Network counters are those of the loopback interface
    when it exists (every local target talks over it), else of all
    interfaces. ``server_pid`` adds the server's CPU percentage.
    """

    interval: float = 1.0
    server_pid: int | None = None
    label: str = ""
    samples: list[TimelineSample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _t0: float = 0.0

    @property
    def elapsed(self) -> float:
        """Seconds since :meth:`start`."""
        return time.monotonic() - self._t0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="bench-timeline", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Timeline:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @staticmethod
    def _net() -> tuple[int, int]:
        per = psutil.net_io_counters(pernic=True)
        nic = per.get("lo")
        if nic is None:
            total = psutil.net_io_counters()
            return total.bytes_recv, total.bytes_sent
        return nic.bytes_recv, nic.bytes_sent

    @staticmethod
    def _disk() -> tuple[int, int]:
        disk = psutil.disk_io_counters()
        return (disk.read_bytes, disk.write_bytes) if disk is not None else (0, 0)

    def _server_cpu(self) -> float | None:
        if self.server_pid is None:
            return None
        return tree_cpu_seconds(self.server_pid)

    def _run(self) -> None:
        mib = float(2**20)
        cpu0 = psutil.cpu_times()
        disk0, net0, srv0 = self._disk(), self._net(), self._server_cpu()
        t_prev = time.monotonic()
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            dt = max(now - t_prev, 1e-6)
            cpu1 = psutil.cpu_times()
            disk1, net1, srv1 = self._disk(), self._net(), self._server_cpu()
            deltas = {
                name: getattr(cpu1, name) - getattr(cpu0, name)
                for name in cpu1._fields
                if name not in ("guest", "guest_nice")
            }
            busy = sum(deltas.values()) or 1e-9
            user = deltas.get("user", 0.0) + deltas.get("nice", 0.0)
            system = sum(deltas.get(n, 0.0) for n in ("system", "irq", "softirq", "steal"))
            server = None
            if srv0 is not None and srv1 is not None:
                server = 100.0 * (srv1 - srv0) / dt
            self.samples.append(
                TimelineSample(
                    t=now - self._t0,
                    cpu_user=100.0 * user / busy,
                    cpu_system=100.0 * system / busy,
                    cpu_iowait=100.0 * deltas.get("iowait", 0.0) / busy,
                    cpu_idle=100.0 * deltas.get("idle", 0.0) / busy,
                    disk_read=(disk1[0] - disk0[0]) / mib / dt,
                    disk_write=(disk1[1] - disk0[1]) / mib / dt,
                    net_recv=(net1[0] - net0[0]) / mib / dt,
                    net_send=(net1[1] - net0[1]) / mib / dt,
                    server_cpu=server,
                    label=self.label,
                )
            )
            cpu0, disk0, net0, srv0, t_prev = cpu1, disk1, net1, srv1, now
