"""Servers run as child processes, for tests and benchmarks: the shared parts.

Every such server (moto, the GCS emulator, block-store sites, the emulated
network) starts a child, reads a line it prints (usually its port), and on
exit stops it: politely, then by force. This module holds that once.
"""

from __future__ import annotations

import contextlib
import selectors
import subprocess
from types import TracebackType
from typing import IO, Any, Self

__all__ = ["ChildProcess", "end_process", "read_line", "stderr_tail"]


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
