"""Running ``synxfer-blockd`` sites as child processes (tests, benchmarks, demos).

:class:`BlockdProcess` starts one site on 127.0.0.1 with ``--port 0``, reads
the port it prints, and stops it (SIGTERM, then SIGKILL) on exit; the token
travels in the child's environment, never on its command line.
:func:`write_cluster_file` writes the JSON cluster file a client needs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from synxfer_blockstore.server import TOKEN_ENV

from .process import ChildProcess, end_process, read_line

__all__ = ["BlockdProcess", "start_all", "write_cluster_file"]


class BlockdProcess(ChildProcess):
    """One ``synxfer-blockd`` child process serving ``site`` from ``data_dir``."""

    def __init__(
        self,
        site: str,
        data_dir: Path,
        token: str,
        *,
        port: int = 0,
        extra_args: Sequence[str] = (),
        start_timeout: float = 30.0,
        log_file: Path | None = None,
    ) -> None:
        self.site = site
        self.data_dir = data_dir
        self._token = token
        self.port = port
        self.extra_args = list(extra_args)
        self.start_timeout = start_timeout
        self.log_file = log_file
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self._log: IO[bytes] | None = None

    def __repr__(self) -> str:
        return f"<BlockdProcess {self.site} {self.url or 'stopped'}>"

    @property
    def host_port(self) -> tuple[str, int]:
        """``("127.0.0.1", port)`` of the running site."""
        return ("127.0.0.1", self.port)

    def start(self) -> None:
        """Start the child and wait until it prints its port."""
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the child without waiting (see :meth:`wait_ready`)."""
        cmd = [
            sys.executable,
            "-m",
            "synxfer_blockstore.server",
            "--data-dir",
            str(self.data_dir),
            "--site",
            self.site,
            "--port",
            str(self.port),
            *self.extra_args,
        ]
        env = {**os.environ, TOKEN_ENV: self._token}
        if self.log_file is not None:
            self._log = open(self.log_file, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log if self._log is not None else subprocess.DEVNULL,
            env=env,
        )

    def wait_ready(self) -> None:
        """Wait until the child prints its port; RuntimeError if it does not."""
        if self.proc is None or self.proc.stdout is None:
            raise RuntimeError(f"synxfer-blockd for site {self.site} was not launched")
        try:
            line = read_line(self.proc.stdout, self.start_timeout)
        except (TimeoutError, EOFError):
            self.stop()
            raise RuntimeError(f"synxfer-blockd for site {self.site} did not start") from None
        info: dict[str, Any] = json.loads(line)
        self.port = int(info["port"])
        self.url = str(info["url"])

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the child (SIGTERM, then SIGKILL). Safe to call twice."""
        proc, self.proc = self.proc, None
        if proc is not None:
            end_process(proc, timeout)
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """Kill the child at once (a crash), without a clean shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.stop()


def start_all(procs: Sequence[BlockdProcess]) -> None:
    """Start several sites in parallel (their start-up times overlap)."""
    try:
        for proc in procs:
            proc.launch()
        for proc in procs:
            proc.wait_ready()
    except BaseException:
        for proc in procs:
            proc.stop()
        raise


def write_cluster_file(
    path: Path,
    sites: Mapping[str, str],
    local: str,
    *,
    token_file: Path | None = None,
    token_env: str | None = None,
    settings: Mapping[str, object] | None = None,
    **more: object,
) -> Path:
    """Write a JSON cluster file (see :mod:`synxfer_blockstore.cluster`); returns ``path``.

    ``settings`` and ``more`` are optional keys (``policy``, ``block_size``,
    ...); ``None`` values are left out.
    """
    doc: dict[str, object] = {"sites": dict(sites), "local": local}
    if token_file is not None:
        doc["token_file"] = str(token_file)
    if token_env is not None:
        doc["token_env"] = token_env
    for key, value in {**(settings or {}), **more}.items():
        if value is not None:
            doc[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
