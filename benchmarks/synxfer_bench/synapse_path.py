"""Seed 002 through the Synapse-style path (issue 35): the target, the tools, the seed's figures.

``synxfer-bench run --scenario synapse-path`` moves the Synapse Python
client's upload and download tables through a local Synapse-style REST
service (:mod:`synxfer_servers.synapse`) that vends SigV4 pre-signed URLs to
SeaweedFS, as Synapse vends S3 URLs:

* :class:`SynapsePathTarget` -- SeaweedFS with auth (the harness's
  :class:`~.targets.SeaweedTarget`, plus its Prometheus port) and the service
  in a process of its own (``_synapse_service``), so that the service's CPU
  is measured apart from the clients' and the store's. It counts, per run,
  the service's requests (its stats) and CPU, and the store's S3 requests
  (``SeaweedFS_s3_request_total``: counted by the store itself, so no proxy
  sits in the data path). :class:`SynapseTlsTarget` (``--target
  synapse-tls``) is the same with every hop HTTPS and verified, as real
  Synapse and S3 are: the store as :class:`~.targets.SeaweedTlsTarget`
  serves it, the service with a certificate from the same run's CA, its
  pre-signed URLs ``https://``. The service is started afresh for every tool's
  run of a row: like Synapse, it answers a multipart upload identical to a
  finished one with that upload's file handle, so a second tool -- or the
  same tool's next round -- would move no bytes.
* the columns, named as the seed names them: synapseclient's ``OOP Models
  Interface`` (``File(...).store_async()`` for all files at once),
  ``Synapseutils`` (``syncToSynapse`` / ``syncFromSynapse``), ``syn.Store()
  / syn.get`` (one file after another / ``getChildren`` + ``get``) -- each a
  driver script (``_synapseclient_peer``) in a subprocess, so its CPU is
  measured as every other tool's -- **synxfer** (``sync ./dir syn://...``
  and back), and ``S3 Sync CLI`` (``aws s3 sync``) and ``s5cmd`` straight
  to the bucket. The Synapse clients get a fresh ``HOME`` per run whose
  ``~/.synapseConfig`` names the service's endpoints and a token, and no
  storage credentials; a thread count N is ``[transfer] max_threads`` for
  synapseclient and ``--max-threads`` for synxfer.
* :data:`SEED_002` -- the seed's published seconds, shown beside the run's
  for shape only (a t3a.micro against AWS; here a loopback on two shared
  cores), by :func:`report_lines`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar

from .measure import tree_cpu_seconds
from .runner import BenchError
from .targets import HOST, SeaweedTarget, SeaweedTlsTarget, _free_ports
from .tools import AwsCliTool, Command, Op, Peers, S5cmdTool, SynxferTool, Tool

if TYPE_CHECKING:
    import ssl

    from .report import ScenarioReport
    from .runner import Measurement

__all__ = [
    "SEED_002",
    "SYNAPSE_TOOLS",
    "AwsSyncTool",
    "ServiceProcess",
    "SynapseClientTool",
    "SynapsePathTarget",
    "SynapseTlsTarget",
    "SynxferSynTool",
    "make_synapse_tools",
    "report_lines",
]

#: ``--tools`` name -> the column's label (as the seed names it).
SYNAPSE_TOOLS: dict[str, str] = {
    "synapse-oop": "OOP Models Interface",
    "synapseutils": "Synapseutils",
    "synapse-store": "syn.Store() / syn.get",
    "synxfer": "synxfer",
    "aws": "S3 Sync CLI",
    "s5cmd": "s5cmd",
}
#: The synapseclient driver's mode per tool name.
_MODES = {"synapse-oop": "oop", "synapseutils": "utils", "synapse-store": "store"}
#: How long the service may take to start (imports botocore and werkzeug).
SERVICE_START_TIMEOUT = 60.0
#: Counter names (see :meth:`SynapsePathTarget.counters`).
SERVICE_REQUESTS = "service_requests"
SERVICE_CPU = "service_cpu_s"
STORAGE_REQUESTS = "storage_requests"


# --------------------------------------------------------------------------- the service


class ServiceProcess:
    """The Synapse-style service in its own process (``python -m synxfer_bench._synapse_service``).

    The S3 keys reach it in its environment, never on its command line.
    ``tls``: (certificate chain, key) PEM files to serve HTTPS with.
    """

    def __init__(
        self,
        s3_endpoint: str,
        bucket: str,
        *,
        region: str,
        env: Mapping[str, str],
        log_dir: Path,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.s3_endpoint = s3_endpoint
        self.bucket = bucket
        self.region = region
        self.env = dict(env)
        self.log_dir = log_dir
        self.tls = tls
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[bytes] | None = None
        self.repo = self.auth = self.file = ""
        self.user_id = ""

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def __repr__(self) -> str:
        return f"ServiceProcess(repo={self.repo!r}, s3={self.s3_endpoint!r})"

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log = (self.log_dir / "synapse-service.log").open("ab")
        argv = [sys.executable, "-m", "synxfer_bench._synapse_service"]
        argv += ["--s3", self.s3_endpoint, "--bucket", self.bucket, "--region", self.region]
        if self.tls is not None:
            argv += ["--cert", str(self.tls[0]), "--key", str(self.tls[1])]
        self._proc = subprocess.Popen(
            argv,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            start_new_session=True,
        )
        hello = self._read_line(SERVICE_START_TIMEOUT)
        self.repo, self.auth, self.file = hello["repo"], hello["auth"], hello["file"]
        self.user_id = str(hello["user_id"])

    def _read_line(self, timeout: float) -> Any:
        import selectors

        assert self._proc is not None
        assert self._proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self._proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise BenchError(f"the Synapse-style service did not answer in {timeout:g} s")
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.poll()
            raise BenchError(
                f"the Synapse-style service exited (code {code}); see "
                f"{self.log_dir / 'synapse-service.log'}"
            )
        return json.loads(line)

    def ask(self, command: str) -> Any:
        """Send one command line, return its JSON answer."""
        assert self._proc is not None
        assert self._proc.stdin is not None
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()
        return self._read_line(30.0)

    def stats(self) -> dict[str, int]:
        answer = self.ask("stats")
        return {str(k): int(v) for k, v in answer.items()}

    def create_project(self, name: str) -> str:
        return str(self.ask(f"project {name}")["id"])

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.write("quit\n")
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None


# --------------------------------------------------------------------------- the target


class SynapsePathTarget(SeaweedTarget):
    """SeaweedFS (auth on, Prometheus metrics on) and the Synapse-style service over it.

    The peers (``aws``, ``s5cmd``) see an S3 target as usual (``bucket``,
    ``endpoint_url``); the Synapse clients find the service in
    :attr:`service` and write under :attr:`project`. Listing a prefix
    gives both what is in the bucket under it and what the service holds
    under the Folder path of the same name.
    """

    name = "synapse"
    #: One live copy of a row in the bucket, a deleted one waiting for the vacuum,
    #: and the service's copies (removed after each run).
    disk_factor = 2.0

    def __init__(
        self, work_dir: Path, *, peers_venv: Path | None = None, keep_data: bool = False
    ) -> None:
        super().__init__(work_dir, peers_venv=peers_venv, keep_data=keep_data)
        self.token = "bench-" + secrets.token_hex(16)
        self.secrets.append(self.token)
        self.service: ServiceProcess | None = None
        self.project = ""
        self._metrics_port = 0
        self._projects = 0
        #: Requests this target made to the running service (its listings), to tell
        #: whether any client did (see :meth:`remove_prefix`).
        self._own_requests = 0
        self._own_lock = threading.Lock()

    # -- lifecycle
    def _command(self, ports: list[int]) -> list[str]:
        self._metrics_port = _free_ports(1)[0]
        return [*super()._command(ports), f"-metricsPort={self._metrics_port}"]

    def start(self) -> None:
        super().start()
        self._start_service()

    def _start_service(self) -> None:
        assert self.endpoint_url is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["AWS_ACCESS_KEY_ID"] = self.access_key
        env["AWS_SECRET_ACCESS_KEY"] = self.secret_key
        if self.ca_file is not None:
            env["AWS_CA_BUNDLE"] = str(self.ca_file)  # botocore's, for the store's HTTPS
        service = ServiceProcess(
            self.endpoint_url,
            self.bucket,
            region=self.region,
            env=env,
            log_dir=self.root / "logs",
            tls=self._service_tls(),
        )
        self.service = service
        with self._own_lock:
            self._own_requests = 0
        service.start()
        self._projects += 1
        self.project = service.create_project(f"synxfer-bench-{self._projects}")

    def _service_tls(self) -> tuple[Path, Path] | None:
        """The service's certificate chain and key (None: it serves HTTP)."""
        return None

    def _stop_service(self) -> None:
        service, self.service = self.service, None
        if service is not None:
            service.stop()

    def stop(self) -> None:
        try:
            self._stop_service()
        finally:
            super().stop()

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "name": self.name,
            "server": "SeaweedFS weed mini behind the local Synapse-style service "
            "(synxfer_servers.synapse, its own process)",
        }

    # -- what the Synapse clients need
    def synapse_config(self, home: Path, max_threads: int | None = None) -> Path:
        """Write ``home/.synapseConfig``: the service's endpoints and the run's token."""
        if self.service is None:
            raise RuntimeError("target not started")
        home.mkdir(parents=True, exist_ok=True)
        text = (
            "[default]\n"
            f"authtoken = {self.token}\n"
            "[endpoints]\n"
            f"repoEndpoint = {self.service.repo}\n"
            f"authEndpoint = {self.service.auth}\n"
            f"fileHandleEndpoint = {self.service.file}\n"
        )
        if max_threads is not None:
            text += f"[transfer]\nmax_threads = {max_threads}\n"
        path = home / ".synapseConfig"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return path

    def folder_path(self, prefix: str) -> str:
        """The Folder path (below the Project) a prefix stands for: ``row/tool-0``."""
        return "/".join(p for p in (self.base_prefix + prefix).split("/") if p)

    # -- counters
    def counters(self) -> dict[str, float]:
        out: dict[str, float] = {}
        service = self.service
        if service is not None and service.pid is not None:
            stats = service.stats()
            out[SERVICE_REQUESTS] = float(sum(stats.values()))
            out[SERVICE_CPU] = tree_cpu_seconds(service.pid)
        requests = self._storage_requests()
        if requests is not None:
            out[STORAGE_REQUESTS] = requests
        return out

    def _storage_requests(self) -> float | None:
        """``SeaweedFS_s3_request_total`` summed over its labels (None: unreadable)."""
        if not self._metrics_port:
            return None
        url = f"http://{HOST}:{self._metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                text = answer.read().decode()
        except (OSError, ValueError):
            return None
        return sum_counter(text, "SeaweedFS_s3_request_total")

    # -- verification and clean-up
    def _rest(self, method: str, path: str, body: object | None = None) -> Any:
        assert self.service is not None
        with self._own_lock:
            self._own_requests += 1
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.service.repo + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60, context=self._ssl) as answer:
            raw = answer.read()
        return json.loads(raw) if raw else None

    @property
    def _ssl(self) -> ssl.SSLContext | None:
        """A context that trusts the run's CA (None: the default, for HTTP)."""
        if self.ca_file is None:
            return None
        import ssl

        return ssl.create_default_context(cafile=str(self.ca_file))

    def _folder_id(self, path: str) -> str | None:
        parent = self.project
        for name in (p for p in path.split("/") if p):
            try:
                body = {"parentId": parent, "entityName": name}
                found = self._rest("POST", "/entity/child", body)
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return None
                raise
            parent = str(found["id"])
        return parent

    def synapse_files(self, prefix: str) -> dict[str, int]:
        """``{path below the prefix's Folder: size}`` of the File entities the service holds."""
        if self.service is None:
            return {}
        top = self._folder_id(self.folder_path(prefix))
        if top is None:
            return {}
        files: list[tuple[str, str]] = []
        pending = [(top, "")]
        while pending:
            parent, rel = pending.pop()
            token: str | None = None
            while True:
                body: dict[str, object] = {"parentId": parent, "includeTypes": ["folder", "file"]}
                if token:
                    body["nextPageToken"] = token
                page = self._rest("POST", "/entity/children", body)
                for child in page.get("page", []):
                    path = f"{rel}{child['name']}"
                    if str(child.get("type", "")).endswith("Folder"):
                        pending.append((str(child["id"]), path + "/"))
                    else:
                        files.append((path, str(child["id"])))
                token = page.get("nextPageToken")
                if not token:
                    break

        def size(entity: str) -> int:
            handles = self._rest("GET", f"/entity/{entity}/filehandles").get("list") or []
            return int(handles[0].get("contentSize", -1)) if handles else -1

        with ThreadPoolExecutor(8) as pool:
            sizes = list(pool.map(size, [entity for _, entity in files]))
        return {path: n for (path, _), n in zip(files, sizes, strict=True)}

    async def list_prefix(self, prefix: str) -> dict[str, int]:
        found = await super().list_prefix(prefix)
        found.update(self.synapse_files(prefix))
        return found

    def _only_we_asked(self) -> bool:
        """True when every request the running service has answered was this target's own.

        Then no client has left state in it (an upload in progress, a cached
        handle), and a restart would only cost time: a store-only column (aws,
        s5cmd) never talks to the service, so each of its runs would pay a
        stop and a start of a Python process for nothing.
        """
        service = self.service
        if service is None or service.pid is None:
            return False
        with self._own_lock:
            own = self._own_requests
        return sum(service.stats().values()) == own

    async def remove_prefix(self, prefix: str) -> None:
        """The bucket's prefix, then the service: stopped, its objects deleted, started
        afresh -- unless no client has talked to it since it started."""
        await super().remove_prefix(prefix)
        if self._only_we_asked():
            return
        user = self.service.user_id if self.service is not None else ""
        self._stop_service()
        if user:
            # The service's keys (``<user>/<uuid>/<name>``), at the bucket's root as is
            # the base prefix of a local target.
            await super().remove_prefix(f"{user}/")
        self._start_service()


class SynapseTlsTarget(SynapsePathTarget, SeaweedTlsTarget):
    """:class:`SynapsePathTarget` with every hop HTTPS and verified (``--target synapse-tls``).

    Real Synapse and real S3 pre-signed URLs are HTTPS; plain HTTP is the
    lab's. The store serves S3 over TLS only (:class:`SeaweedTlsTarget`:
    a CA made for the run), the service serves HTTPS with the same
    certificate and presigns against the https endpoint (trusting the CA
    through ``AWS_CA_BUNDLE``), and every client trusts that CA only, each
    through the variable its HTTP stack reads -- so a tool that skipped
    verification, or fell back to plain HTTP, would fail.
    """

    name = "synapse-tls"

    def _service_tls(self) -> tuple[Path, Path] | None:
        return self._cert_and_key

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "server": "SeaweedFS weed mini behind the local Synapse-style service "
            "(synxfer_servers.synapse, its own process), every hop over HTTPS (TLS; a CA "
            "made for the run, verified by every tool)",
            "tls": True,
        }


def sum_counter(text: str, name: str) -> float:
    """The sum of a Prometheus counter's samples over all label sets in ``text``."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        rest = line[len(name) :]
        if rest[:1] not in ("{", " "):
            continue  # another metric whose name starts the same
        try:
            total += float(line.rsplit(None, 1)[1])
        except (IndexError, ValueError):
            continue
    return total


# --------------------------------------------------------------------------- the tools


def _scrubbed_env(
    target: SynapsePathTarget, home: Path, ca_variables: Sequence[str] = ()
) -> dict[str, str]:
    """The environment of a Synapse client: a fresh HOME, no storage credentials, and
    the target's CA (when it has one) in ``ca_variables``, those the client reads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SYNAPSE_"))}
    if target.ca_file is not None:
        for name in ca_variables:
            env[name] = str(target.ca_file)
    env["HOME"] = str(home)
    env["XDG_CACHE_HOME"] = str(home / ".cache")
    # Off for the clients under test: no telemetry exporter, no update check.
    env["OTEL_SDK_DISABLED"] = "true"
    env["OTEL_TRACES_EXPORTER"] = "none"
    env["OTEL_METRICS_EXPORTER"] = "none"
    env["OTEL_LOGS_EXPORTER"] = "none"
    return env


def _fresh_home(scratch: Path) -> Path:
    """A new HOME per run: synapseclient's cache of the upload must not serve the download."""
    homes = scratch / "homes"
    homes.mkdir(parents=True, exist_ok=True)
    for old in homes.iterdir():
        shutil.rmtree(old, ignore_errors=True)
    home = homes / f"h{time.monotonic_ns()}"
    home.mkdir()
    return home


def _need_target(target: object) -> str | None:
    if not isinstance(target, SynapsePathTarget):
        return (
            "needs the synapse target (the local Synapse-style service): --target synapse "
            "(or synapse-tls)"
        )
    return None


class SynapseClientTool(Tool):
    """One of synapseclient's interfaces, driven by ``_synapseclient_peer`` in a subprocess."""

    name = "synapseclient"
    #: synapseclient 4.14 talks to the service with requests (REQUESTS_CA_BUNDLE) and
    #: httpx (SSL_CERT_FILE), and fetches pre-signed URLs with both.
    ca_variables: ClassVar[tuple[str, ...]] = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")

    def __init__(self, mode: str, label: str) -> None:
        super().__init__(label)
        self.mode = mode

    def missing(self) -> str | None:
        if importlib.util.find_spec("synapseclient") is None:
            return (
                "synapseclient is not installed in this interpreter: pip install "
                "'synapseclient[pandas]==4.14.0' (in synxfer's dev extra)"
            )
        return None

    def unsupported(self, op: Op, target: Any) -> str | None:
        reason = _need_target(target)
        if reason is not None:
            return reason
        if op.kind not in ("upload", "download"):
            return f"{self.label} is measured on uploads and downloads only"
        if op.kind == "download" and self.mode == "oop":
            return "the seed's download tables have no OOP Models Interface column"
        return None

    def knob(self) -> str:
        return "[transfer] max_threads N (~/.synapseConfig)"

    def _query_version(self) -> str:
        from importlib.metadata import version

        return f"synapseclient {version('synapseclient')}"

    def describe(self) -> dict[str, object]:
        how = {
            "oop": "models: File(path, parent_id).store_async() for every file at once",
            "utils": "synapseutils.syncToSynapse (manifest) / syncFromSynapse",
            "store": "Synapse.store one file after another / getChildren + Synapse.get",
        }[self.mode]
        return {**super().describe(), "options": how}

    def command(self, op: Op, target: Any, scratch: Path) -> Command:
        assert isinstance(target, SynapsePathTarget)
        home = _fresh_home(scratch)
        target.synapse_config(home, op.concurrency)
        script = Path(__file__).with_name("_synapseclient_peer.py")
        argv = [sys.executable, str(script), self.mode, op.kind, "--local", str(op.local)]
        argv += ["--project", target.project, "--path", target.folder_path(op.prefix)]
        if op.concurrency is not None:
            argv += ["--threads", str(op.concurrency)]
        return Command(argv, _scrubbed_env(target, home, self.ca_variables))


class SynxferSynTool(SynxferTool):
    """``synxfer sync ./dir syn://PROJECT/path`` and back, configured like synapseclient."""

    def missing(self) -> str | None:
        if importlib.util.find_spec("synxfer_synapse") is None:
            return "the syn:// plugin is not installed: pip install -e '.[synapse]'"
        return None

    def unsupported(self, op: Op, target: Any) -> str | None:
        reason = _need_target(target)
        if reason is not None:
            return reason
        if op.kind not in ("upload", "download"):
            return "measured on uploads and downloads only"
        return None

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "options": "sync DIR syn://PROJECT/path (and back)"}

    def command(self, op: Op, target: Any, scratch: Path) -> Command:
        assert isinstance(target, SynapsePathTarget)
        home = _fresh_home(scratch)
        target.synapse_config(home)
        url = f"syn://{target.project}/{target.folder_path(op.prefix)}"
        local = str(op.local)
        args = ["sync", local, url] if op.kind == "upload" else ["sync", url, local]
        options = list(self.options)
        if op.concurrency is not None:
            options += ["--max-threads", str(op.concurrency)]
        argv = [sys.executable, "-m", "synxfer.cli.main", *args, "-q", *options]
        env = _scrubbed_env(target, home, (self.ca_variable,))
        env["XDG_CACHE_HOME"] = str(scratch / "cache")
        return Command(argv, env)


class AwsSyncTool(AwsCliTool):
    """``aws s3 sync`` both ways (the seed's "S3 Sync CLI"), straight to the bucket."""

    def command(self, op: Op, target: Any, scratch: Path) -> Command:
        command = super().command(op, target, scratch)
        argv = list(command.argv)
        if argv[2:4] == ["cp", "--recursive"]:
            argv[2:4] = ["sync"]
        return Command(argv, command.env)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "options": "aws s3 sync (straight to the bucket)"}


def make_synapse_tools(names: Sequence[str], peers: Peers) -> list[Tool]:
    """The synapse-path columns for ``names`` (keys of :data:`SYNAPSE_TOOLS`)."""
    tools: list[Tool] = []
    for name in names:
        label = SYNAPSE_TOOLS.get(name)
        if label is None:
            known = ", ".join(SYNAPSE_TOOLS)
            raise ValueError(f"unknown tool {name!r} for the synapse-path scenario ({known})")
        if name in _MODES:
            tools.append(SynapseClientTool(_MODES[name], label))
        elif name == "synxfer":
            tools.append(SynxferSynTool())
        elif name == "aws":
            tools.append(AwsSyncTool(peers, label))
        else:
            tools.append(S5cmdTool(peers, label))
    return tools


# --------------------------------------------------------------------------- the seed's figures


@dataclass(frozen=True, slots=True)
class SeedTable:
    """One of the seed's published tables: seconds per (row, column)."""

    title: str
    direction: str
    #: The thread count the table was taken at (None: synapseclient's default, 6 there).
    threads: int | None
    #: Seed column -> our tool label.
    columns: Mapping[str, str]
    #: Row name (ours) -> seed column -> seconds (None: "wouldn't complete").
    seconds: Mapping[str, Mapping[str, float | None]]


_UP_COLUMNS = {
    "Synapseutils": "Synapseutils",
    "OOP Models Interface": "OOP Models Interface",
    "syn.Store()": "syn.Store() / syn.get",
    "S3 Sync CLI": "S3 Sync CLI",
}
_DOWN_COLUMNS = {
    "Synapseutils Sync": "Synapseutils",
    "syn.getChildren + syn.get": "syn.Store() / syn.get",
    "S3 Sync": "S3 Sync CLI",
}
_UP_THREAD_COLUMNS = {
    "Synapseutils Sync": "Synapseutils",
    "os.walk + syn.store": "syn.Store() / syn.get",
}


def _thread_study(
    threads: int, values: Mapping[str, tuple[float | None, float | None]]
) -> SeedTable:
    return SeedTable(
        f"12/06/2023 upload, {threads} threads, 5 annotations per file (t3a.micro)",
        "upload",
        threads,
        _UP_THREAD_COLUMNS,
        {
            row: {"Synapseutils Sync": utils, "os.walk + syn.store": store}
            for row, (utils, store) in values.items()
        },
    )


#: The Synapse Python client's published seconds (docs/explanations/benchmarking.md).
SEED_002: tuple[SeedTable, ...] = (
    SeedTable(
        "05/10/2024 upload, default threads (6; t3a.micro, us-east-1)",
        "upload",
        None,
        _UP_COLUMNS,
        {
            "10x10GiB": {
                "Synapseutils": 1656.64,
                "OOP Models Interface": 1656.77,
                "syn.Store()": 1674.63,
                "S3 Sync CLI": 1519.75,
            },
            "1x10GiB": {
                "Synapseutils": 166.83,
                "OOP Models Interface": 166.41,
                "syn.Store()": 167.21,
                "S3 Sync CLI": 149.55,
            },
            "10x1GiB": {
                "Synapseutils": 168.74,
                "OOP Models Interface": 167.15,
                "syn.Store()": 184.78,
                "S3 Sync CLI": 166.39,
            },
            "100x100MiB": {
                "Synapseutils": 158.98,
                "OOP Models Interface": 125.98,
                "syn.Store()": 293.07,
                "S3 Sync CLI": 162.57,
            },
            "10x100MiB": {
                "Synapseutils": 16.55,
                "OOP Models Interface": 14.37,
                "syn.Store()": 29.23,
                "S3 Sync CLI": 19.18,
            },
            "100x10MiB": {
                "Synapseutils": 15.92,
                "OOP Models Interface": 15.49,
                "syn.Store()": 129.90,
                "S3 Sync CLI": 18.66,
            },
            "1000x1MiB": {
                "Synapseutils": 135.77,
                "OOP Models Interface": 137.15,
                "syn.Store()": 1021.32,
                "S3 Sync CLI": 26.03,
            },
        },
    ),
    SeedTable(
        "11/14/2023 upload, default threads (6; t3a.micro)",
        "upload",
        None,
        {
            "Synapseutils Sync": "Synapseutils",
            "os.walk + syn.store": "syn.Store() / syn.get",
            "S3 Sync": "S3 Sync CLI",
        },
        {
            "25x40KiB": {"Synapseutils Sync": 10.43, "os.walk + syn.store": 8.99, "S3 Sync": 1.83},
            "775x12.9KiB": {
                "Synapseutils Sync": 243.57,
                "os.walk + syn.store": 257.27,
                "S3 Sync": 7.64,
            },
            "10x100MiB": {
                "Synapseutils Sync": 27.18,
                "os.walk + syn.store": 33.73,
                "S3 Sync": 16.31,
            },
            "10x10GiB": {
                "Synapseutils Sync": 3211.0,
                "os.walk + syn.store": 3047.0,
                "S3 Sync": 3245.0,
            },
        },
    ),
    SeedTable(
        "12/12/2023 download, 40 threads (t3a.micro)",
        "download",
        40,
        _DOWN_COLUMNS,
        {
            "25x40KiB": {
                "Synapseutils Sync": 1.30,
                "syn.getChildren + syn.get": 5.48,
                "S3 Sync": 1.49,
            },
            "775x12.9KiB": {
                "Synapseutils Sync": 19.17,
                "syn.getChildren + syn.get": 161.46,
                "S3 Sync": 12.02,
            },
            "10x100MiB": {
                "Synapseutils Sync": 14.74,
                "syn.getChildren + syn.get": 21.91,
                "S3 Sync": 11.72,
            },
            "10x10GiB": {"Synapseutils Sync": None, "syn.getChildren + syn.get": None},
        },
    ),
    SeedTable(
        "12/12/2023 download, 6 threads (t3a.micro)",
        "download",
        6,
        _DOWN_COLUMNS,
        {
            "10x10GiB": {
                "Synapseutils Sync": 3859.66,
                "syn.getChildren + syn.get": 2006.53,
                "S3 Sync": 1023.57,
            },
        },
    ),
    SeedTable(
        "07/02/2024 download, v4.4.0, default threads (t3a.micro)",
        "download",
        None,
        {".syncFromSynapse()": "Synapseutils", ".Get()": "syn.Store() / syn.get"},
        {
            "10x10GiB": {".syncFromSynapse()": 1910.0, ".Get()": 2186.0},
            "10x100MiB": {".syncFromSynapse()": 15.0, ".Get()": 24.0},
        },
    ),
    _thread_study(
        6,
        {"25x40KiB": (10.75, 10.96), "775x12.9KiB": (268.33, 298.12), "10x100MiB": (27.17, 36.25)},
    ),
    _thread_study(
        25,
        {"25x40KiB": (6.79, 11.31), "775x12.9KiB": (162.63, 305.93), "10x100MiB": (22.26, 12.77)},
    ),
    _thread_study(
        50, {"25x40KiB": (6.05, 10.90), "775x12.9KiB": (86.46, 304.40), "10x100MiB": (22.24, 12.26)}
    ),
    _thread_study(
        100, {"25x40KiB": (6.14, 10.89), "775x12.9KiB": (85.55, 304.71), "10x100MiB": (None, None)}
    ),
)


# --------------------------------------------------------------------------- the report


def _fmt(value: float | None, digits: int = 2) -> str:
    return "wouldn't complete" if value is None else f"{value:.{digits}f}"


def _md(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return lines


def _index(
    measurements: Sequence[Measurement],
) -> dict[tuple[str, str, int | None], dict[str, Measurement]]:
    out: dict[tuple[str, str, int | None], dict[str, Measurement]] = {}
    for m in measurements:
        out.setdefault((m.row, m.direction, m.concurrency), {})[m.tool] = m
    return out


def _synapse_labels() -> list[str]:
    return [SYNAPSE_TOOLS[n] for n in _MODES]


def report_lines(report: ScenarioReport) -> list[str]:
    """The synapse-path sections: goals, service and store counts, the seed's figures."""
    r = report.result
    by = _index(r.measurements)
    lines: list[str] = []
    # -- issue 35's goals, per row and direction
    body: list[list[str]] = []
    for (_row, direction, _threads), cells in by.items():
        ours = cells.get("synxfer")
        if ours is None or not ours.ok:
            continue
        syn = [cells[t] for t in _synapse_labels() if t in cells and cells[t].ok]
        s3 = [cells[t] for t in ("S3 Sync CLI", "s5cmd") if t in cells and cells[t].ok]
        best_syn = min(syn, key=lambda m: m.seconds) if syn else None
        best_s3 = min(s3, key=lambda m: m.seconds) if s3 else None
        cpu_syn = min((m.cpu_per_gib for m in syn), default=None)
        label = report.label(ours)  # with " c=N" in a thread sweep
        body.append(
            [
                label,
                direction,
                f"{ours.seconds:.2f}",
                f"{best_syn.tool} {best_syn.seconds:.2f}" if best_syn else "-",
                f"{best_syn.seconds / ours.seconds:.2f}" if best_syn and ours.seconds else "-",
                f"{best_s3.tool} {best_s3.seconds:.2f}" if best_s3 else "-",
                f"{best_s3.seconds / ours.seconds:.2f}" if best_s3 and ours.seconds else "-",
                f"{ours.cpu_per_gib:.1f} / " + (f"{cpu_syn:.1f}" if cpu_syn is not None else "-"),
            ]
        )
    if body:
        lines += [
            "",
            "## synxfer through syn:// against synapseclient and the bucket",
            "",
            "Issue 35's goals, per row: synxfer faster than every synapseclient column "
            "(*vs synapseclient* = the fastest synapseclient column's seconds / synxfer's, "
            "> 1: synxfer wins), within 10 % of `aws s3 sync`/s5cmd straight to the bucket on "
            "rows of 10 MiB files and up (*vs the bucket* >= 0.9), and less client CPU per "
            "GiB than synapseclient's least.",
            "",
            *_md(
                ["row", "direction", "synxfer s", "fastest synapseclient s",
                 "vs synapseclient", "fastest straight to the bucket s", "vs the bucket",
                 "client CPU s/GiB (synxfer / synapseclient's least)"],
                body,
            ),
        ]  # fmt: skip
    # -- what each run cost the service and the store
    body = []
    for m in r.measurements:
        if not m.counters or not m.ok:
            continue
        c = m.counters
        body.append(
            [
                report.label(m),
                m.direction,
                m.tool,
                f"{c[SERVICE_REQUESTS]:.0f}" if SERVICE_REQUESTS in c else "-",
                f"{c[SERVICE_REQUESTS] / m.files:.1f}"
                if SERVICE_REQUESTS in c and m.files
                else "-",
                f"{c[STORAGE_REQUESTS]:.0f}" if STORAGE_REQUESTS in c else "-",
                f"{c[SERVICE_CPU]:.2f}" if SERVICE_CPU in c else "-",
                f"{m.server_cpu:.2f}" if m.server_cpu is not None else "-",
                f"{m.client_cpu:.2f}",
            ]
        )
    if body:
        lines += [
            "",
            "## Service and store, per run",
            "",
            "Median per run: requests the Synapse-style service answered (its own counts, "
            "every route) and per file; S3 requests the store answered "
            "(`SeaweedFS_s3_request_total`, every bucket and code: the pre-signed PUTs and "
            "GETs of the Synapse clients and the service's own calls for them -- create, "
            "list parts, complete a multipart upload -- or the direct requests of aws and "
            "s5cmd); CPU seconds "
            "of the service's process, of the store's process tree, and of the client's.",
            "",
            *_md(
                ["row", "direction", "tool", "service requests", "per file",
                 "storage requests", "service CPU s", "store CPU s", "client CPU s"],
                body,
            ),
        ]  # fmt: skip
    lines += _seed_lines(report, by)
    return lines


def _seed_lines(
    report: ScenarioReport, by: Mapping[tuple[str, str, int | None], Mapping[str, Measurement]]
) -> list[str]:
    lines = [
        "",
        "## The seed's published figures (for shape only)",
        "",
        "The Synapse Python client's own tables (docs/explanations/benchmarking.md in "
        "Sage-Bionetworks/synapsePythonClient), at full size on a t3a.micro in us-east-1 "
        "against Synapse and S3 over a network. This run moved a scaled copy on loopback, on "
        "two cores shared by client, service and store: compare the *shape* -- each column "
        "over the S3 CLI's, seed and here -- never the seconds. *here* is this run's median "
        "(blank: the row, column or thread count did not run; where this machine's "
        "default thread count is the seed's 6, a run at the defaults fills the 6-thread "
        "tables).",
    ]
    # synapseclient's and synxfer's default is CPUs + 4: 6 on the seed's t3a.micro, so
    # a run at the defaults stands for the seed's 6 threads where it has 6 too.
    default = int(report.machine.get("cpu_count") or 0) + 4  # type: ignore[call-overload]
    same = {None, 6} if default == 6 else set()
    for table in SEED_002:
        body: list[list[str]] = []
        reference = next((c for c, t in table.columns.items() if t == "S3 Sync CLI"), None)
        for row, values in table.seconds.items():
            cells = by.get((row, table.direction, table.threads), {})
            if not cells and table.threads in same:
                other = 6 if table.threads is None else None
                cells = by.get((row, table.direction, other), {})
            ours_ref = cells.get("S3 Sync CLI")
            seed_ref = values.get(reference) if reference else None
            line = [row]
            for column, tool in table.columns.items():
                seed = values.get(column, None) if column in values else None
                here = cells.get(tool)
                text = _fmt(seed) if column in values else "-"
                if reference and seed is not None and seed_ref:
                    text += f" ({seed / seed_ref:.2f}x)"
                if here is not None and here.ok:
                    mine = f"{here.seconds:.2f}"
                    if ours_ref is not None and ours_ref.ok and ours_ref.seconds:
                        mine += f" ({here.seconds / ours_ref.seconds:.2f}x)"
                    text += f"; here {mine}"
                line.append(text)
            synxfer = cells.get("synxfer")
            line.append(f"{synxfer.seconds:.2f}" if synxfer is not None and synxfer.ok else "")
            body.append(line)
        lines += ["", f"**{table.title}**", ""]
        lines += _md(["row (seed's size)", *table.columns, "synxfer here"], body)
    return lines
