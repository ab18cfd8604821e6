"""Servers run as child processes, for tests and benchmarks: the shared parts.

Every such server (moto, the GCS emulator, block-store sites, the emulated
network) starts a child, reads a line it prints (usually its port), and on
exit stops it: politely, then by force. This module holds that once.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import sys
import tempfile
from types import TracebackType
from typing import IO, Any, Self

__all__ = [
    "ChildProcess",
    "cpu_seconds",
    "end_process",
    "read_line",
    "run_python_module_measured",
    "stderr_tail",
]


class ChildProcess:
    """Base for a server in a child process: ``with Server() as s: ...``.

    Subclasses implement :meth:`start` and :meth:`stop` (which must be safe to
    call twice); leaving the block calls :meth:`stop` even on error.
    """

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def end_process(
    proc: subprocess.Popen[Any], timeout: float, *, close_stdin_first: bool = False
) -> None:
    """Stop ``proc``: SIGTERM, up to ``timeout`` seconds, then SIGKILL; close
    its pipes. Nothing happens to a child that already exited but the reaping.

    With ``close_stdin_first``, the child is first given ``timeout`` seconds to
    exit on its own after its stdin closes (children that watch their stdin
    also die with their parent).
    """
    if close_stdin_first and proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def stderr_tail(captured: IO[bytes] | None, limit: int = 2000) -> str:
    """``": <last lines>"`` of a child's captured stderr, for error messages."""
    if captured is None:
        return ""
    captured.seek(0)
    tail = captured.read()[-limit:].decode("utf-8", "replace").strip()
    return f": {tail}" if tail else ""


def read_line(stream: IO[Any], timeout: float) -> Any:
    """The next line a child writes to ``stream``, waiting at most ``timeout``.

    Raises TimeoutError if nothing comes, EOFError if the child closed the
    stream (it exited).
    """
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise TimeoutError(f"the child process said nothing in {timeout} s")
    line = stream.readline()
    if not line:
        raise EOFError("the child process exited")
    return line


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` (Linux ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except FileNotFoundError:
        raise ProcessLookupError(f"no process {pid} (or no /proc on this system)") from None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = raw[raw.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of the whole line
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


# -- measuring a child process --------------------------------------------------

_PEAK_WRAPPER = """
import atexit, runpy, sys
report, module = sys.argv[1], sys.argv[2]
def _peak():
    with open("/proc/self/status") as status, open(report, "w") as out:
        out.write(next(l for l in status if l.startswith("VmHWM:")).split()[1])
atexit.register(_peak)
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def run_python_module_measured(
    module: str,
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 600.0,
) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run ``python -m module args`` and return it with its peak RSS in KiB.

    The peak is the child's own ``VmHWM``, read at exit. Not ``ru_maxrss``:
    on Linux an exec'd child's ``ru_maxrss`` includes the RSS of the process
    it was forked from, so a big parent (say, a test process hosting an
    in-process server) would inflate every child's figure.
    """
    with tempfile.NamedTemporaryFile("r", suffix=".peak") as report:
        cmd = [sys.executable, "-c", _PEAK_WRAPPER, report.name, module, *args]
        done = subprocess.run(
            cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
        text = report.read().strip()
    return done, int(text) if text else 0
