"""Run benchmark rows: upload and download each row with each tool, verify, measure.

For every (row, tool) pair the runner creates a bucket, uploads the row's
directory to ``s3://<bucket>/<row>/``, checks the object count and bytes by
listing (with its own S3 client, independent of the tool), downloads the
prefix into a fresh directory, checks the files found there, and finally
deletes every object and the bucket (moto keeps everything in memory).
When the rows are done, the data the run generated and the downloads are
removed (unless ``BenchOptions.keep``); data that was already there stays.

Each direction records wall seconds, client CPU seconds (this process plus
any reaped children, so subprocess tools are counted too) and, when the
server can tell, server CPU seconds.

A :class:`Tool` is anything that can upload a directory to a URL prefix and
download it back; only :class:`SynxferTool` exists so far, and peers
(aws-cli, s5cmd, rclone) slot in as further subclasses.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import gc
import os
import re
import resource
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from synxfer import GiB, MiB, TransferConfig, __version__

from .datagen import ensure_row_data, expected_files
from .scenarios import Row, row_label

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

__all__ = [
    "BENCH_ENV",
    "TOOLS",
    "BenchError",
    "BenchOptions",
    "Measurement",
    "S3Admin",
    "SynxferTool",
    "Tool",
    "bench_environment",
    "cpu_seconds",
    "run_rows",
    "run_with_moto",
]

REGION = "us-east-1"

#: Environment for the embedded server and every client: throwaway credentials.
BENCH_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    # Keep the user's AWS config (profiles, addressing style, CA bundles) out of it.
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
_UNSET = (
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
)


class BenchError(Exception):
    """A benchmark step failed (a tool reported failures, or setup went wrong)."""


@contextlib.contextmanager
def bench_environment() -> Iterator[None]:
    """Set :data:`BENCH_ENV` (and unset the user's AWS settings) for the duration."""
    saved = {name: os.environ.get(name) for name in (*BENCH_ENV, *_UNSET)}
    os.environ.update(BENCH_ENV)
    for name in _UNSET:
        os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def cpu_seconds() -> float:
    """User + system CPU of this process and its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


# --------------------------------------------------------------------------- tools


class Tool(abc.ABC):
    """A transfer tool under test.

    ``upload`` copies every file under a local directory to a URL prefix
    (``s3://bucket/row/``); ``download`` copies a URL prefix into a local
    directory. Both raise on failure. Subprocess-based tools must wait for
    their child so its CPU time is counted.
    """

    #: Short name used in tables, JSON and bucket names.
    name: ClassVar[str]

    @abc.abstractmethod
    def version(self) -> str:
        """The tool's version string, for the report."""

    @abc.abstractmethod
    async def upload(self, src_dir: Path, url: str) -> None:
        """Copy the directory's files to the URL prefix."""

    @abc.abstractmethod
    async def download(self, url: str, dst_dir: Path) -> None:
        """Copy the URL prefix's objects into the directory."""


class SynxferTool(Tool):
    """synxfer itself, in-process: one :class:`~synxfer.Client` per operation, using ``sync``."""

    name = "synxfer"

    def __init__(
        self, endpoint_url: str, *, region: str = REGION, config: TransferConfig | None = None
    ) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self.config = config

    def version(self) -> str:
        return __version__

    async def _sync(self, src: str, dst: str) -> None:
        from synxfer import Client

        async with Client(self.config, endpoint_url=self.endpoint_url, region=self.region) as c:
            result = await c.sync(src, dst)
        if not result.ok:
            first = result.failures[0]
            raise BenchError(
                f"synxfer sync {src} {dst}: {result.files_failed} file(s) failed; "
                f"first: {first.path}: {first.error}"
            )

    async def upload(self, src_dir: Path, url: str) -> None:
        await self._sync(str(src_dir), url)

    async def download(self, url: str, dst_dir: Path) -> None:
        await self._sync(url, str(dst_dir))


# --------------------------------------------------------------------------- S3 admin


class S3Admin:
    """The runner's own S3 client (aiobotocore): buckets, listings, clean-up.

    Independent of the tools under test, so verification does not trust them.
    """

    def __init__(
        self,
        endpoint_url: str,
        *,
        region: str = REGION,
        credentials: tuple[str, str] | None = None,
        verify: str | None = None,
    ) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self._credentials = credentials
        #: A CA bundle to verify an HTTPS endpoint with (None: the system's).
        self._verify = verify
        self._stack = contextlib.AsyncExitStack()
        self._client: S3Client | None = None

    async def __aenter__(self) -> S3Admin:
        from aiobotocore.session import get_session

        session = get_session()
        key, secret = self._credentials or (None, None)
        self._client = await self._stack.enter_async_context(
            session.create_client(
                "s3",
                region_name=self.region,
                endpoint_url=self.endpoint_url,
                aws_access_key_id=key,
                aws_secret_access_key=secret,
                verify=self._verify,
            )
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._client = None
        await self._stack.aclose()

    @property
    def client(self) -> S3Client:
        if self._client is None:
            raise RuntimeError("S3Admin is not open; use 'async with'")
        return self._client

    async def create_bucket(self, bucket: str) -> None:
        await self.client.create_bucket(Bucket=bucket)

    async def objects(self, bucket: str, prefix: str = "") -> AsyncIterator[tuple[str, int]]:
        """Every ``(key, size)`` under ``prefix``."""
        paginator = self.client.get_paginator("list_objects_v2")
        async for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                yield item["Key"], item["Size"]

    async def remove_bucket(self, bucket: str) -> None:
        """Delete every object, abort open multipart uploads, delete the bucket."""
        batch: list[str] = []
        async for key, _size in self.objects(bucket):
            batch.append(key)
            if len(batch) == 1000:
                await self._delete(bucket, batch)
                batch = []
        if batch:
            await self._delete(bucket, batch)
        uploads = await self.client.list_multipart_uploads(Bucket=bucket)
        for up in uploads.get("Uploads", []):
            await self.client.abort_multipart_upload(
                Bucket=bucket, Key=up["Key"], UploadId=up["UploadId"]
            )
        await self.client.delete_bucket(Bucket=bucket)

    async def delete_keys(self, bucket: str, keys: list[str]) -> None:
        """Delete ``keys`` (at most 1000) in one request."""
        await self._delete(bucket, keys)

    async def _delete(self, bucket: str, keys: list[str]) -> None:
        await self.client.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
        )


# --------------------------------------------------------------------------- measuring


@dataclass(slots=True)
class Measurement:
    """One direction of one row with one tool, and whether its result checked out."""

    tool: str
    row: str
    direction: str  # "upload" or "download"
    files: int
    bytes: int
    seconds: float = 0.0
    client_cpu: float = 0.0
    server_cpu: float | None = None
    verified_files: int = 0
    verified_bytes: int = 0
    verified: bool = False
    error: str | None = None
    #: Scenario runs: the sweep's concurrency, how many runs the median is of,
    #: the fastest and slowest run, and the tool's peak resident memory.
    concurrency: int | None = None
    runs: int = 1
    seconds_min: float | None = None
    seconds_max: float | None = None
    peak_rss: int | None = None
    #: What the row moved, for tables (``100x10.2KiB (nominal: 100x1MiB, scale 0.01)``).
    label: str = ""
    #: Sync rounds: objects the round (re)wrote and their bytes (median; None: not measured).
    moved_files: int | None = None
    moved_bytes: int | None = None
    #: What the target counted during the runs (median per counter): the synapse-path
    #: target's service requests and CPU, the store's requests (:meth:`Target.counters`).
    counters: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.verified

    @property
    def mib_per_s(self) -> float:
        return self.bytes / MiB / self.seconds if self.seconds > 0 else 0.0

    @property
    def files_per_s(self) -> float:
        return self.files / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_gib(self) -> float:
        return self.client_cpu / (self.bytes / GiB) if self.bytes else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "tool": self.tool,
            "row": self.row,
            "direction": self.direction,
            "files": self.files,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 6),
            "mib_per_s": round(self.mib_per_s, 3),
            "files_per_s": round(self.files_per_s, 3),
            "client_cpu_s": round(self.client_cpu, 6),
            "client_cpu_s_per_gib": round(self.cpu_per_gib, 6),
            "server_cpu_s": None if self.server_cpu is None else round(self.server_cpu, 6),
            "verified_files": self.verified_files,
            "verified_bytes": self.verified_bytes,
            "verified": self.verified,
            "ok": self.ok,
            "error": self.error,
            "concurrency": self.concurrency,
            "runs": self.runs,
            "seconds_min": None if self.seconds_min is None else round(self.seconds_min, 6),
            "seconds_max": None if self.seconds_max is None else round(self.seconds_max, 6),
            "peak_rss": self.peak_rss,
            "label": self.label or self.row,
            "moved_files": self.moved_files,
            "moved_bytes": self.moved_bytes,
            "counters": {k: round(v, 4) for k, v in self.counters.items()},
        }


@dataclass(slots=True)
class BenchOptions:
    """What to run: rows (already scaled), where the data lives, and tuning."""

    rows: Sequence[Row]
    work_dir: Path
    seed: int = 0
    config: TransferConfig | None = None
    scenario: str = "custom"
    scale: float = 1.0
    extra: dict[str, object] = field(default_factory=dict)
    #: Leave generated data and downloads behind (``--keep``); data found and reused always stays.
    keep: bool = False


def _bucket_name(index: int, tool: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", f"synxfer-bench-{index}-{tool}".lower())[:63]


def _local_files(root: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = Path(dirpath) / name
            found[full.relative_to(root).as_posix()] = full.stat().st_size
    return found


def _check(m: Measurement, found: dict[str, int], row: Row) -> None:
    m.verified_files = len(found)
    m.verified_bytes = sum(found.values())
    want = dict.fromkeys(expected_files(row), row.size)
    m.verified = found == want
    if not m.verified and m.error is None:
        missing = len(set(want) - set(found))
        extra = len(set(found) - set(want))
        m.error = (
            f"verification failed: found {m.verified_files} files / {m.verified_bytes} bytes, "
            f"expected {row.files} / {row.total_bytes} ({missing} missing, {extra} unexpected)"
        )


async def _timed(
    m: Measurement, step: Callable[[], Awaitable[None]], server_cpu: Callable[[], float] | None
) -> None:
    """Run ``step()``, filling in time and CPU; record its error, if any."""
    gc.collect()
    s0 = server_cpu() if server_cpu else None
    c0, t0 = cpu_seconds(), time.perf_counter()
    try:
        await step()
    except Exception as exc:
        m.error = f"{type(exc).__name__}: {exc}"
    m.seconds = time.perf_counter() - t0
    m.client_cpu = cpu_seconds() - c0
    if server_cpu is not None and s0 is not None:
        m.server_cpu = server_cpu() - s0


async def run_rows(
    options: BenchOptions,
    tools: Sequence[Tool],
    *,
    endpoint_url: str,
    server_cpu: Callable[[], float] | None = None,
    log: Callable[[str], None] = lambda _msg: None,
) -> list[Measurement]:
    """Upload and download every row with every tool against ``endpoint_url``."""
    results: list[Measurement] = []
    out_root = options.work_dir / "out"
    made: list[Path] = []
    try:
        async with S3Admin(endpoint_url) as admin:
            for index, row in enumerate(options.rows):
                log(f"[{index + 1}/{len(options.rows)}] {row.name}: preparing data")
                src, generated = await asyncio.to_thread(
                    ensure_row_data, options.work_dir, row, seed=options.seed
                )
                if generated:
                    made.append(src)
                    log(f"  generated {row.files} files of {row.size} bytes in {src}")
                for tool in tools:
                    results.extend(
                        await _run_one(admin, tool, row, src, index, out_root, server_cpu, log)
                    )
    finally:
        if not options.keep:
            for path in [*made, out_root]:
                await asyncio.to_thread(shutil.rmtree, path, True)
    return results


async def _run_one(
    admin: S3Admin,
    tool: Tool,
    row: Row,
    src: Path,
    index: int,
    out_root: Path,
    server_cpu: Callable[[], float] | None,
    log: Callable[[str], None],
) -> list[Measurement]:
    bucket = _bucket_name(index, tool.name)
    prefix = f"{row.name}/"
    url = f"s3://{bucket}/{prefix}"
    out = out_root / f"{row.name}-{tool.name}"
    if out.exists():
        shutil.rmtree(out)
    up = Measurement(tool.name, row.name, "upload", row.files, row.total_bytes)
    down = Measurement(tool.name, row.name, "download", row.files, row.total_bytes)
    up.label = down.label = row_label(
        row.name,
        row.geometry,
        published=row.published,
        nbytes=row.total_bytes,
        published_bytes=row.published_bytes,
        word="nominal",
    )
    await admin.create_bucket(bucket)
    try:
        await _timed(up, lambda: tool.upload(src, url), server_cpu)
        listed = {key[len(prefix) :]: size async for key, size in admin.objects(bucket, prefix)}
        _check(up, listed, row)
        log(
            f"  {tool.name} upload:   {up.seconds:7.2f}s {up.mib_per_s:8.1f} MiB/s"
            + (f"  FAILED: {up.error}" if up.error else "")
        )
        if not up.ok:
            down.error = "skipped: upload failed"
            return [up, down]
        out.mkdir(parents=True)
        await _timed(down, lambda: tool.download(url, out), server_cpu)
        _check(down, await asyncio.to_thread(_local_files, out), row)
        log(
            f"  {tool.name} download: {down.seconds:7.2f}s {down.mib_per_s:8.1f} MiB/s"
            + (f"  FAILED: {down.error}" if down.error else "")
        )
        return [up, down]
    finally:
        await admin.remove_bucket(bucket)
        if out.exists():
            await asyncio.to_thread(shutil.rmtree, out)


#: Tools the runner knows, by name: ``factory(endpoint_url, config)``.
TOOLS: dict[str, Callable[[str, TransferConfig | None], Tool]] = {
    "synxfer": lambda endpoint, config: SynxferTool(endpoint, config=config),
}


def run_with_moto(
    options: BenchOptions,
    *,
    tools: Sequence[str] = ("synxfer",),
    log: Callable[[str], None] = lambda _msg: None,
) -> list[Measurement]:
    """Start an embedded moto S3 server in a subprocess and run every row with ``tools``.

    Credentials and region come from :data:`BENCH_ENV` for the server and
    the clients alike; the user's AWS settings are kept out.
    """
    from synxfer_servers.s3 import MotoProcess

    unknown = [name for name in tools if name not in TOOLS]
    if unknown:
        raise BenchError(f"unknown tool(s): {', '.join(unknown)} (known: {', '.join(TOOLS)})")
    with bench_environment(), MotoProcess() as server:
        endpoint = server.endpoint_url
        log(f"moto S3 server at {endpoint}")
        instances = [TOOLS[name](endpoint, options.config) for name in tools]
        return asyncio.run(
            run_rows(
                options,
                instances,
                endpoint_url=endpoint,
                server_cpu=server.cpu_seconds,
                log=log,
            )
        )
