"""Ceph RGW as Debian ships it (``radosgw``), on a one-node cluster on 127.0.0.1.

:class:`CephRgw` starts, all under one work directory (config, data,
sockets, logs):

* one monitor (``ceph-mon``, msgr2 only, on 127.0.0.1),
* one OSD on ``memstore`` (objects live in memory; nothing touches a disk),
* the RADOS gateway (``radosgw``, ``rgw frontends = beast endpoint=127.0.0.1:PORT``),

with cephx *between daemons* off (``auth * required = none``): S3 clients
are still authenticated by RGW (SigV4, against the user
:class:`CephRgw` creates with ``radosgw-admin user create``). Pools have
one replica and few placement groups, which is all one OSD can hold.

Nothing is shaped to suit synxfer: RGW's settings are its packaged
defaults but for addresses, paths, and the one-OSD pool sizes. It needs
``apt-get install radosgw ceph-mon ceph-osd ceph-common``
(:func:`missing_binaries` says what is absent). A start takes about half
a minute on 2 cores; ``startup_timeout`` bounds it. Leaving the block
stops every daemon it started (SIGTERM, then SIGKILL) and the process
group they run in.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import IO, Self

from .process import ChildProcess

__all__ = ["BINARIES", "INSTALL_HINT", "CephRgw", "missing_binaries"]

HOST = "127.0.0.1"

#: The commands a start needs.
BINARIES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "ceph", "monmaptool")

#: What to run when they are missing (Debian / Ubuntu).
INSTALL_HINT = "apt-get install radosgw ceph-mon ceph-osd ceph-common"


def missing_binaries() -> list[str]:
    """The commands of :data:`BINARIES` not on PATH (empty: Ceph can start)."""
    return [name for name in BINARIES if shutil.which(name) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


_CONF = """\
[global]
fsid = {fsid}
mon host = v2:{host}:{mon_port}
mon initial members = a
public addr = {host}
cluster addr = {host}
ms bind ipv4 = true
ms bind ipv6 = false
ms bind msgr1 = false
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
ms client mode = crc
run dir = {work}/run
log file = {work}/log/$name.log
admin socket = {work}/run/$name.$pid.asok
pid file = {work}/run/$name.pid
keyring = {work}/keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 1
osd objectstore = memstore
memstore device bytes = {memstore_bytes}
osd data = {work}/osd-$id
mon data = {work}/mon-$id

[client.rgw.a]
rgw frontends = beast endpoint={host}:{rgw_port}
rgw data = {work}/rgw
"""


class CephRgw(ChildProcess):
    """A one-node Ceph cluster serving S3 on 127.0.0.1 (sync context manager)::

        with CephRgw(tmp_path) as rgw:
            boto3.client("s3", endpoint_url=rgw.endpoint_url,
                         aws_access_key_id=rgw.access_key,
                         aws_secret_access_key=rgw.secret_key,
                         region_name=rgw.region)

    ``workdir`` receives everything (``ceph.conf``, the daemons' data and
    logs under ``log/``); it should be empty and is left in place.
    ``port`` 0 picks a free one. The keys are random per start (throwaway
    credentials of a throwaway server).
    """

    #: RGW's default zonegroup answers to any region; this is what clients sign with.
    region = "us-east-1"

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        *,
        port: int = 0,
        startup_timeout: float = 120.0,
        stop_timeout: float = 3.0,
        memstore_bytes: int = 2 << 30,
    ) -> None:
        self.workdir = Path(workdir)
        self.port = port
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.memstore_bytes = memstore_bytes
        self.access_key = "synxfer" + secrets.token_hex(6)
        self.secret_key = secrets.token_hex(20)
        self._procs: list[subprocess.Popen[bytes]] = []
        self._names: list[str] = []
        self._logs: list[IO[bytes]] = []
        self._conf = self.workdir / "ceph.conf"

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the gateway."""
        return f"http://{HOST}:{self.port}"

    @property
    def pids(self) -> list[int]:
        """Process ids of the running daemons (monitor, OSD, gateway)."""
        return [proc.pid for proc in self._procs]

    def __repr__(self) -> str:  # never the keys
        state = self.endpoint_url if self._procs else "stopped"
        return f"<CephRgw {state} workdir={str(self.workdir)!r}>"

    # -- start ---------------------------------------------------------------

    def start(self) -> None:
        """Create and start the cluster, the gateway and the S3 user; bounded by
        ``startup_timeout`` (RuntimeError naming the log to read)."""
        if self._procs:
            raise RuntimeError("CephRgw already started")
        missing = missing_binaries()
        if missing:
            raise RuntimeError(
                f"Ceph RGW needs {', '.join(missing)}: install with `{INSTALL_HINT}`"
            )
        deadline = time.monotonic() + self.startup_timeout
        try:
            self._start(deadline)
        except BaseException:
            self.stop()
            raise

    def _start(self, deadline: float) -> None:
        work = self.workdir
        for sub in ("run", "log", "rgw", "mon-a", "osd-0"):
            (work / sub).mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = _free_port()
        mon_port = _free_port()
        fsid = str(uuid.uuid4())
        self._conf.write_text(
            _CONF.format(
                fsid=fsid,
                host=HOST,
                mon_port=mon_port,
                rgw_port=self.port,
                work=work,
                memstore_bytes=self.memstore_bytes,
            )
        )
        monmap = work / "monmap"
        self._run(
            "monmaptool", "--create", "--fsid", fsid,
            "--addv", "a", f"[v2:{HOST}:{mon_port}]", str(monmap),
            deadline=deadline,
        )  # fmt: skip
        self._run("ceph-mon", "--mkfs", "-i", "a", "--monmap", str(monmap), deadline=deadline)
        self._spawn("mon.a", "ceph-mon", "-f", "-i", "a")
        osd_uuid = str(uuid.uuid4())
        osd_id = self._run("ceph", "osd", "new", osd_uuid, deadline=deadline).strip()
        self._run("ceph-osd", "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid, deadline=deadline)
        self._spawn(f"osd.{osd_id}", "ceph-osd", "-f", "-i", osd_id)
        self._spawn("client.rgw.a", "radosgw", "-f", "-n", "client.rgw.a")
        self._wait_http(deadline)
        self._run(
            "radosgw-admin", "user", "create", "--uid", "synxfer",
            "--display-name", "synxfer tests",
            "--access-key", self.access_key, "--secret-key", self.secret_key,
            deadline=deadline, secret=True,
        )  # fmt: skip

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["CEPH_CONF"] = str(self._conf)
        return env

    def _run(self, *cmd: str, deadline: float, secret: bool = False) -> str:
        """Run a set-up command with ``-c ceph.conf``; its stdout, or RuntimeError."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RuntimeError(self._timeout_message(cmd[0]))
        try:
            done = subprocess.run(
                [cmd[0], "-c", str(self._conf), *cmd[1:]],
                capture_output=True,
                env=self._env(),
                timeout=remaining,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(self._timeout_message(cmd[0])) from None
        if done.returncode != 0:
            # The user-create command line holds the keys: never echo it.
            shown = cmd[0] if secret else " ".join(cmd)
            detail = done.stderr.decode("utf-8", "replace").strip()[-1500:]
            if secret:
                detail = detail.replace(self.secret_key, "***")
            raise RuntimeError(
                f"Ceph set-up step failed ({shown}, exit {done.returncode}): {detail}; "
                f"logs in {self.workdir / 'log'}"
            )
        return done.stdout.decode("utf-8", "replace")

    def _spawn(self, name: str, *cmd: str) -> None:
        log = (self.workdir / "log" / f"{name}.stderr").open("wb")
        self._logs.append(log)
        self._names.append(name)
        self._procs.append(
            subprocess.Popen(
                [cmd[0], "-c", str(self._conf), *cmd[1:]],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,  # its own group: stopped as one, never by name
            )
        )

    def _wait_http(self, deadline: float) -> None:
        """Until the gateway answers an HTTP request (it listens only once the
        OSD holds its pools), or RuntimeError at the deadline."""
        while time.monotonic() < deadline:
            for name, proc in zip(self._names, self._procs, strict=True):
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"a Ceph daemon exited while starting ({name}, "
                        f"exit {proc.returncode}); logs in {self.workdir / 'log'}"
                    )
            conn = http.client.HTTPConnection(HOST, self.port, timeout=2)
            try:
                conn.request("GET", "/")
                conn.getresponse().read()
                return
            except OSError:
                time.sleep(0.25)
            finally:
                conn.close()
        raise RuntimeError(self._timeout_message("radosgw"))

    def _timeout_message(self, step: str) -> str:
        return (
            f"Ceph RGW did not start within {self.startup_timeout:.0f} s (at {step}); "
            f"logs in {self.workdir / 'log'}"
        )

    # -- stop ----------------------------------------------------------------

    def stop(self) -> None:
        """Stop every daemon (gateway first), SIGTERM then SIGKILL. Safe to call twice."""
        procs, self._procs, self._names = self._procs, [], []
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        end = time.monotonic() + self.stop_timeout
        for proc in reversed(procs):
            try:
                proc.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        logs, self._logs = self._logs, []
        for log in logs:
            log.close()

    def __enter__(self) -> Self:
        self.start()
        return self
