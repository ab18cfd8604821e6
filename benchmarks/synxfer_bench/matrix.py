"""Run a scenario: every row, with every tool in turn, N times, verifying every run.

For each row (and each concurrency of its sweep), each repetition runs the
tools one after the other -- interleaved, in an order rotated per
repetition so no tool always goes first after a cold cache -- each against
a fresh prefix. After every run the bench checks, with its own client, that
the destination holds exactly the expected files with the expected sizes;
a tool that fails or leaves a wrong result is reported as failed, never as
fast. Then the prefix (and any downloaded copy) is removed.

What a row measures depends on its case:

* ``transfer``: ``upload`` (and ``download`` of what was uploaded, when the
  scenario measures downloads);
* ``periodic-sync``: three rounds of ``sync`` to the same prefix: ``sync``
  (round 1, the initial sync), ``resync`` after 5 % of the files changed
  (1 KiB longer each, so skipping one shows) and ``resync2`` after another,
  different 5 % changed. Each round records, beside its time, what it
  moved: the objects it (re)wrote -- new keys, a new ETag or a newer
  LastModified than before the round, from the bench's own listing -- and
  their bytes (before a round the bench waits until the server's clock has
  passed the previous round's last write by a second, so a rewrite always
  shows in LastModified);
* ``copy``: ``copy`` from the target to the row's ``copy_to`` URL (synxfer
  only; the hook for cross-cloud rows).

Disk: :func:`disk_needed` adds up what a run needs before it starts (data
not generated yet, the server's copies, one download). After every run the
prefix is deleted and the target asked to reclaim the space (SeaweedFS
keeps deleted objects' bytes until its volumes are vacuumed). A run that
fails while the disk is full (less than :data:`LOW_DISK` free, or the tool
says "No space left on device") is reported as *disk full*, not as the
tool's failure, and the matrix stops there. When the matrix ends, however
it ends, the bench removes what it made -- the data it generated (data it
found and reused stays), the downloads and the tools' scratch files --
unless :attr:`RunPlan.keep`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as _dt
import errno
import os
import re
import shutil
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .datagen import (
    CHANGED_GROWTH,
    changed_files,
    compression_ratio,
    derived_copy,
    ensure_changed_copy,
    ensure_row_data,
    expected_files,
    expected_sizes,
    row_data_dir,
    scenario_data_dir,
)
from .measure import Timeline, TimelineSample, run_measured
from .resources import ResourceRecord, ResourceSampler
from .runner import BenchError, Measurement
from .scenarios import (
    GCS_EMULATOR,
    SCENARIOS,
    SECOND_BUCKET,
    Row,
    Scenario,
    human_size,
    row_label,
)
from .targets import Target, UrlTarget
from .tools import Op, SynxferTool, Tool

__all__ = [
    "LOW_DISK",
    "MatrixResult",
    "RunPlan",
    "Sample",
    "disk_full_reason",
    "disk_needed",
    "free_bytes",
    "load_result",
    "run_matrix",
]

#: The metadata a compressed object carries (docs/compression.md): its encoding and
#: the original file's size in bytes.
COMPRESSION_ENCODING = "synxfer-encoding"
COMPRESSION_SIZE = "synxfer-size"
#: A failed run with less than this free under the work directory failed of a full disk.
LOW_DISK = 256 * 2**20
#: What tools and servers say when the disk is full.
_DISK_FULL = re.compile(
    r"no space left on device|ENOSPC|errno 28|disk (is )?full|InsufficientStorage|"
    r"XMinioStorageFull|not enough (disk )?space",
    re.IGNORECASE,
)


def free_bytes(path: Path) -> int:
    """Free bytes on the file system holding ``path`` (or its nearest existing parent)."""
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def disk_full_reason(work_dir: Path, output: str = "") -> str | None:
    """Why a failure is the disk's (little free space, or the tool said so), or None."""
    free = free_bytes(work_dir)
    said = _DISK_FULL.search(output)
    if free >= LOW_DISK and said is None:
        return None
    where = work_dir.absolute()
    if said is not None and free >= LOW_DISK:
        return f"disk full: the tool said {said.group(0)!r} ({human_size(free)} free under {where})"
    return f"disk full: {human_size(free)} free under {where}"


class DiskFull(Exception):
    """The disk filled up during a run: stop the matrix (not any tool's failure)."""


@dataclass(slots=True)
class RunPlan:
    """What to run: a scenario's rows (already scaled) and how."""

    scenario: Scenario
    rows: Sequence[Row]
    scale: float
    work_dir: Path
    seed: int = 0
    repeat: int = 3
    timeout: float | None = 3600.0
    #: Named scenarios keep data per (scenario, scale); --quick/--rows per geometry.
    per_scenario_data: bool = True
    #: Leave the generated data, the downloads and scratch files behind (``--keep``).
    keep: bool = False

    def data_dir(self, row: Row) -> Path:
        if self.per_scenario_data:
            return scenario_data_dir(self.work_dir, self.scenario.name, self.scale, row)
        return row_data_dir(self.work_dir, row)


@dataclass(slots=True)
class Sample:
    """One measured run of one tool on one row, in one direction."""

    row: str
    tool: str
    direction: str
    rep: int
    concurrency: int | None
    files: int
    bytes: int
    seconds: float = 0.0
    cpu_user: float = 0.0
    cpu_system: float = 0.0
    peak_rss: int = 0
    server_cpu: float | None = None
    verified_files: int = 0
    verified_bytes: int = 0
    verified: bool = False
    error: str | None = None
    start: float = 0.0
    end: float = 0.0
    #: The run failed because the disk was full (see :func:`disk_full_reason`).
    disk_full: bool = False
    #: Per-second machine rows and the tool's threads (:mod:`.resources`).
    resources: ResourceRecord | None = None
    #: Sync rounds: objects the round (re)wrote and their bytes (None: not measured).
    moved_files: int | None = None
    moved_bytes: int | None = None
    #: Bytes the objects take on the target as listed after the run (the compressed
    #: size for a compressing tool): what crossed the wire. None: not listed.
    stored_bytes: int | None = None
    #: What the target counted during the run (:meth:`Target.counters`, after - before).
    counters: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.verified

    def to_dict(self) -> dict[str, object]:
        return {
            "row": self.row,
            "tool": self.tool,
            "direction": self.direction,
            "rep": self.rep,
            "concurrency": self.concurrency,
            "seconds": round(self.seconds, 4),
            "cpu_user_s": round(self.cpu_user, 4),
            "cpu_system_s": round(self.cpu_system, 4),
            "peak_rss": self.peak_rss,
            "server_cpu_s": None if self.server_cpu is None else round(self.server_cpu, 4),
            "verified_files": self.verified_files,
            "verified_bytes": self.verified_bytes,
            "ok": self.ok,
            "error": self.error,
            "timeline_start": round(self.start, 2),
            "timeline_end": round(self.end, 2),
            "disk_full": self.disk_full,
            "resources": None if self.resources is None else self.resources.to_dict(),
            "moved_files": self.moved_files,
            "moved_bytes": self.moved_bytes,
            "stored_bytes": self.stored_bytes,
            "counters": {k: round(v, 4) for k, v in self.counters.items()},
        }


@dataclass(slots=True)
class MatrixResult:
    """Everything a matrix run produced, for :mod:`.report`."""

    plan: RunPlan
    target: dict[str, object]
    tools: list[dict[str, object]]
    samples: list[Sample] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    timeline: list[TimelineSample] = field(default_factory=list)
    rows: list[dict[str, object]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Tools asked for but not installed (shown as "skipped" columns).
    skipped_tools: list[str] = field(default_factory=list)
    started: str = ""
    seconds: float = 0.0
    #: Why the matrix stopped early (a full disk), or None.
    aborted: str | None = None
    #: What :func:`disk_needed` said before the run (bytes per part, and free).
    disk: dict[str, int] = field(default_factory=dict)


#: The rounds of a periodic-sync row, in order (round 1 is the initial sync).
SYNC_ROUNDS = ("sync", "resync", "resync2")


def _directions(scenario: Scenario, row: Row) -> tuple[str, ...]:
    if row.directions:
        return row.directions
    if row.case == "periodic-sync":
        return SYNC_ROUNDS
    if row.case == "copy":
        return ("copy",)
    return scenario.directions


def disk_needed(plan: RunPlan, *, server_factor: float = 0.0) -> tuple[int, dict[str, int]]:
    """Bytes of disk a run still needs, and their parts.

    ``data``: rows not generated yet (and periodic-sync copies);
    ``server``: ``server_factor`` x the largest row (a local server's copy,
    see :attr:`Target.disk_factor`); ``downloads``: the largest row that is
    downloaded (one download exists at a time).
    """
    parts = {"data": 0, "server": 0, "downloads": 0}
    largest = largest_down = 0
    for row in plan.rows:
        size = row.total_bytes
        if row.case == "periodic-sync":  # two changed copies: 5 % rewritten each
            size += 2 * (len(expected_sizes(row)) // 20 + 1) * (row.size + 2 * CHANGED_GROWTH)
        largest = max(largest, size)
        if "download" in _directions(plan.scenario, row):
            largest_down = max(largest_down, row.total_bytes)
        root = plan.data_dir(row)
        if not (root.is_dir() and _data_complete(root, row)):
            parts["data"] += size
    parts["server"] = round(server_factor * largest)
    parts["downloads"] = largest_down
    return sum(parts.values()), parts


def _data_complete(root: Path, row: Row) -> bool:
    want = expected_sizes(row)
    try:
        return all((root / rel).stat().st_size == size for rel, size in want.items())
    except OSError:
        return False


def _local_files(root: Path) -> dict[str, int]:
    return {
        p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()
    }


def _verify(sample: Sample, found: dict[str, int], want: dict[str, int]) -> None:
    sample.verified_files = len(found)
    sample.verified_bytes = sum(found.values())
    sample.verified = found == want
    if not sample.verified and sample.error is None:
        missing = len(set(want) - set(found))
        extra = len(set(found) - set(want))
        wrong = sum(1 for k in set(want) & set(found) if want[k] != found[k])
        sample.error = (
            f"verification failed: found {sample.verified_files} files / "
            f"{sample.verified_bytes} bytes, expected {len(want)} / {sum(want.values())} "
            f"({missing} missing, {extra} unexpected, {wrong} of the wrong size)"
        )


def second_changes(row: Row) -> list[str]:
    """The files round 3 of a periodic-sync row changes: another 5 %, not round 2's."""
    names = expected_files(row)
    first = set(changed_files(row))
    picked = [n for n in names[10::20] if n not in first]
    if not picked:
        picked = [n for n in names if n not in first][:1] or names[:1]
    return picked


def round_sizes(row: Row, round_: int) -> dict[str, int]:
    """``{path: size}`` a periodic-sync row holds after round ``round_`` (1, 2 or 3)."""
    if round_ <= 1:
        return expected_sizes(row)
    sizes = expected_sizes(row, changed=True)
    if round_ >= 3:
        for rel in second_changes(row):
            sizes[rel] += CHANGED_GROWTH
    return sizes


def ensure_second_change(changed: Path, row: Row, *, seed: int = 0) -> tuple[Path, bool]:
    """Round 3's copy: round 2's copy (hard links) with :func:`second_changes` rewritten.

    Lives beside it as ``<src>.changed2``; the rewritten files are
    :data:`CHANGED_GROWTH` longer and newer, the others keep their content
    and mtime, so a sync tool sees exactly them as changed.
    """
    dst = changed.with_name(changed.name + "2")
    return derived_copy(
        changed, dst, row, round_sizes(row, 3), set(second_changes(row)), f"changed2:{seed}"
    )


#: A listing for per-round accounting: key -> (size, ETag, LastModified as a POSIX time).
Listing = dict[str, tuple[int, str, float]]


def moved_since(before: Listing, after: Listing) -> tuple[int, int]:
    """Objects (re)written between two listings, and their bytes.

    New keys, a changed ETag or a newer LastModified count; an object
    rewritten with the same bytes keeps its ETag but not its LastModified.
    """
    files = nbytes = 0
    for key, (size, etag, stamp) in after.items():
        old = before.get(key)
        if old is None or old[1] != etag or stamp > old[2]:
            files += 1
            nbytes += size
    return files, nbytes


def _redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


class _Runner:
    def __init__(
        self,
        plan: RunPlan,
        target: Target,
        tools: Sequence[Tool],
        log: Callable[[str], None],
    ) -> None:
        self.plan = plan
        self.target = target
        if plan.scenario.synxfer_scheme and target.local:
            target.scheme = plan.scenario.synxfer_scheme  # synxfer's URLs; peers: s3://
        self.tools = list(tools)
        self.log = log
        self.scratch = plan.work_dir / "scratch"
        self.out_root = plan.work_dir / "out"
        self.timeline = Timeline(server_pid=target.server_pid)
        self.result = MatrixResult(
            plan, target.describe(), [t.describe() for t in tools if not t.missing()]
        )
        self.result.notes.extend(plan.scenario.notes)
        self._skips_noted: set[tuple[str, str, str]] = set()
        #: Directories of data this run generated (removed at the end unless keep).
        self.generated: list[Path] = []
        #: The listing after the last sync round, per prefix (per-round accounting).
        self._listings: dict[str, Listing] = {}
        #: Prefixes of download-only rows staged for this row (see _tool_row).
        self._staged: set[str] = set()
        #: Stored bytes of what an upload left at a prefix (a download moves those).
        self._stored: dict[str, int] = {}
        #: The second bucket on the target that copy rows write to (None: none).
        self._second_bucket: str | None = None

    def _listing(self, prefix: str) -> Listing | None:
        """Every object under ``prefix`` with its ETag and LastModified (S3 servers only)."""
        try:
            admin = self.target.admin  # type: ignore[attr-defined]
            bucket = self.target.bucket
            full = self.target.base_prefix + prefix
        except (AttributeError, RuntimeError):
            return None

        async def collect() -> Listing:
            out: Listing = {}
            paginator = admin.client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=bucket, Prefix=full):
                for item in page.get("Contents", []):
                    out[item["Key"][len(full) :]] = (
                        int(item["Size"]),
                        str(item.get("ETag", "")),
                        item["LastModified"].timestamp(),
                    )
            return out

        result: Listing = self._run_coro(collect())
        return result

    def _settle(self, prefix: str) -> None:
        """Wait until now is a second past the prefix's newest LastModified (not measured)."""
        newest = max(
            (stamp for _s, _e, stamp in self._listings.get(prefix, {}).values()), default=0
        )
        wait = newest + 1.05 - time.time()
        if wait > 0:
            time.sleep(min(wait, 2.5))

    def _run_coro(self, coro: Any) -> Any:
        return self.target.run(coro)

    def _original_sizes(self, prefix: str, stored: dict[str, int]) -> dict[str, int]:
        """The file sizes behind a compressing tool's objects, from their metadata.

        One HEAD per object: ``synxfer-size`` where ``synxfer-encoding`` says
        ``zstd``, the stored size where there is no encoding. An encoding
        without a readable size, or another encoding, counts as size -1 (the
        check then fails for that file).
        """
        full = self.target.base_prefix + prefix
        admin = getattr(self.target, "admin", None)
        client = getattr(self.target, "_client", None)

        async def metadata(key: str) -> Mapping[str, str]:
            if admin is not None:
                head = await admin.client.head_object(Bucket=self.target.bucket, Key=full + key)
                return dict(head.get("Metadata") or {})
            if client is None:
                raise BenchError(f"{self.target.name}: cannot read objects' metadata")
            backend, key_ = await client.backend(self.target.url(prefix + key))
            info = await backend.stat(key_)
            return dict(info.metadata)

        async def original(key: str, size: int, gate: asyncio.Semaphore) -> tuple[str, int]:
            async with gate:
                meta = {k.lower(): v for k, v in (await metadata(key)).items()}
            encoding = meta.get(COMPRESSION_ENCODING)
            if encoding is None:
                return key, size
            raw = meta.get(COMPRESSION_SIZE, "")
            return key, int(raw) if encoding == "zstd" and raw.isdigit() else -1

        async def collect() -> dict[str, int]:
            gate = asyncio.Semaphore(16)
            pairs = await asyncio.gather(*(original(k, s, gate) for k, s in stored.items()))
            return dict(pairs)

        result: dict[str, int] = self._run_coro(collect())
        return result

    # -- one measured step
    def _step(
        self, tool: Tool, row: Row, direction: str, op: Op, rep: int, want: dict[str, int]
    ) -> Sample:
        sample = Sample(
            row.name,
            tool.label,
            direction,
            rep,
            op.concurrency,
            len(want),
            sum(want.values()),
        )
        scratch = self.scratch / tool.label
        scratch.mkdir(parents=True, exist_ok=True)
        command = tool.command(op, self.target, scratch)
        self.timeline.label = f"{row.name} {tool.label} {direction}"
        rounds = direction in SYNC_ROUNDS
        if rounds and direction != "sync":
            self._settle(op.prefix)
        c0 = self.target.counters()
        s0 = self.target.server_cpu()
        sample.start = self.timeline.elapsed
        stats = run_measured(
            command.argv, env=command.env, timeout=self.plan.timeout, sampler=ResourceSampler()
        )
        sample.resources = stats.resources
        sample.end = self.timeline.elapsed
        self.timeline.label = ""
        s1 = self.target.server_cpu()
        c1 = self.target.counters()
        sample.counters = {k: c1[k] - c0[k] for k in c1 if k in c0}
        sample.seconds = stats.seconds
        sample.cpu_user, sample.cpu_system = stats.cpu_user, stats.cpu_system
        sample.peak_rss = stats.peak_rss
        if s0 is not None and s1 is not None:
            sample.server_cpu = s1 - s0
        if stats.timed_out:
            sample.error = f"timed out after {self.plan.timeout:g}s"
        elif stats.returncode != 0:
            lines = [ln for ln in stats.stderr_tail.splitlines() if ln.strip()]
            if not lines:
                lines = [ln for ln in stats.stdout_tail.splitlines() if ln.strip()]
            detail = " | ".join(lines[-3:])[-600:]
            sample.error = _redact(f"exit {stats.returncode}: {detail}", self.target.secrets)
        if direction == "download":
            assert op.local is not None
            found = _local_files(op.local) if op.local.exists() else {}
            sample.stored_bytes = self._stored.get(op.prefix)
        elif direction == "copy":
            found = self._list_url(op.copy_to)
        else:
            if rounds and (listing := self._listing(op.prefix)) is not None:
                found = {key: size for key, (size, _e, _t) in listing.items()}
                before = {} if direction == "sync" else self._listings.get(op.prefix, {})
                sample.moved_files, sample.moved_bytes = moved_since(before, listing)
                self._listings[op.prefix] = listing
            else:
                found = self._run_coro(self.target.list_prefix(op.prefix))
            sample.stored_bytes = self._stored[op.prefix] = sum(found.values())
            if tool.compresses:
                found = self._original_sizes(op.prefix, found)
        _verify(sample, found, want)
        full = None
        if not sample.ok:
            full = disk_full_reason(self.plan.work_dir, stats.stderr_tail + stats.stdout_tail)
        if full is not None:
            sample.disk_full = True
            sample.error = f"{full}; not {tool.label}'s failure (it said: {sample.error})"
        self.result.samples.append(sample)
        rate = sample.bytes / 2**20 / sample.seconds if sample.seconds else 0.0
        self.log(
            f"    {tool.label:14} {direction:8} {sample.seconds:8.2f}s {rate:8.1f} MiB/s "
            f"CPU {sample.cpu_user + sample.cpu_system:6.2f}s "
            f"RSS {human_size(sample.peak_rss):>8}"
            + (
                f" moved {sample.moved_files} files, {human_size(sample.moved_bytes)}"
                if sample.moved_bytes is not None
                else ""
            )
            + ("" if sample.ok else f"  FAILED: {sample.error}")
        )
        if full is not None:
            raise DiskFull(f"{full}, during {row.name} {tool.label} {direction}")
        return sample

    @contextlib.contextmanager
    def _gcs_emulator_if_needed(self) -> Iterator[None]:
        """Start a GCS emulator on 127.0.0.1 for rows copying to :data:`GCS_EMULATOR`.

        The rows' ``copy_to`` becomes ``gs://<bucket>/...`` and tools find
        the emulator through ``STORAGE_EMULATOR_HOST`` for the run.
        """
        if not any(row.copy_to.startswith(GCS_EMULATOR) for row in self.plan.rows):
            yield
            return
        from synxfer_servers.gcs import GcsEmulator, GcsFront, create_bucket

        bucket = GCS_EMULATOR.split("://", 1)[1].split("/", 1)[0]
        real = f"gs://{bucket}/"
        saved = os.environ.get("STORAGE_EMULATOR_HOST")
        with GcsEmulator() as emulator, GcsFront(emulator.endpoint_url) as front:
            create_bucket(front.endpoint_url, bucket)
            os.environ["STORAGE_EMULATOR_HOST"] = front.endpoint_url
            self.plan.rows = tuple(
                dataclasses.replace(r, copy_to=r.copy_to.replace(GCS_EMULATOR, real))
                for r in self.plan.rows
            )
            self.result.notes.append(
                "copy rows go to gcp-storage-emulator on 127.0.0.1 (a Python server: it, "
                "not the client, bounds their throughput)"
            )
            try:
                yield
            finally:
                if saved is None:
                    os.environ.pop("STORAGE_EMULATOR_HOST", None)
                else:
                    os.environ["STORAGE_EMULATOR_HOST"] = saved

    @contextlib.contextmanager
    def _second_bucket_if_needed(self) -> Iterator[None]:
        """Create the second bucket of rows copying to :data:`SECOND_BUCKET`, on the target.

        Their ``copy_to`` becomes ``<scheme>://<bucket>/...`` (same endpoint and
        credentials: synxfer copies server-side); the bench lists and empties it
        with its own client and deletes it when the run ends. Only local servers
        (embedded, seaweedfs): on a URL target the bench would create a bucket in
        someone's account, so those rows fail, saying so.
        """
        if not any(row.copy_to.startswith(SECOND_BUCKET) for row in self.plan.rows):
            yield
            return
        admin = getattr(self.target, "admin", None) if self.target.local else None
        if admin is None:
            raise BenchError(
                f"copy rows to a second bucket ({SECOND_BUCKET}) need a local server target "
                f"(embedded or seaweedfs), not {self.target.name}: leave them out with --rows"
            )
        bucket = SECOND_BUCKET.split("://", 1)[1].split("/", 1)[0]
        self._run_coro(admin.create_bucket(bucket))
        self._second_bucket = bucket
        self.plan.rows = tuple(
            dataclasses.replace(
                r, copy_to=r.copy_to.replace(SECOND_BUCKET, f"{self.target.scheme}://{bucket}/")
            )
            for r in self.plan.rows
        )
        self.result.notes.append(
            f"copy rows to a second bucket: {bucket} on the same server, made for the run "
            "(same endpoint and credentials as the source bucket)"
        )
        try:
            yield
        finally:
            self._second_bucket = None
            with contextlib.suppress(Exception):
                self._run_coro(admin.remove_bucket(bucket))

    def _in_second_bucket(self, url: str) -> str | None:
        """The key prefix of ``url`` when it is in the run's second bucket, else None."""
        if self._second_bucket is None:
            return None
        head = f"{self.target.scheme}://{self._second_bucket}/"
        return url[len(head) :] if url.startswith(head) else None

    def _empty_copy_destination(self, url: str) -> None:
        """Delete a copy row's objects from the second bucket (and let the server reclaim them)."""
        prefix = self._in_second_bucket(url)
        if prefix is None:
            return
        admin = self.target.admin  # type: ignore[attr-defined]
        bucket = self._second_bucket

        async def empty() -> int:
            keys: list[str] = []
            nbytes = 0
            async for key, size in admin.objects(bucket, prefix):
                keys.append(key)
                nbytes += size
            for start in range(0, len(keys), 1000):
                await admin.delete_keys(bucket, keys[start : start + 1000])
            return nbytes

        try:
            deleted: int = self._run_coro(empty())
        except Exception as exc:
            self.log(f"    warning: could not empty {url}: {exc}")
            return
        if hasattr(self.target, "deleted_bytes"):
            self.target.deleted_bytes += deleted

    def _list_url(self, url: str) -> dict[str, int]:
        prefix = self._in_second_bucket(url)
        if prefix is not None:
            admin = self.target.admin  # type: ignore[attr-defined]
            bucket = self._second_bucket

            async def collect() -> dict[str, int]:
                return {k[len(prefix) :]: s async for k, s in admin.objects(bucket, prefix)}

            listed: dict[str, int] = self._run_coro(collect())
            return listed
        same_service = url.startswith(f"{self.target.scheme}://")
        other = UrlTarget(url, endpoint_url=self.target.endpoint_url if same_service else None)
        other.base_prefix = other.base_prefix.rsplit("synxfer-bench-", 1)[0]
        with other:
            found: dict[str, int] = other.run(other.list_prefix(""))
            return found

    def _skip(self, tool: Tool, row: Row, direction: str, reason: str) -> None:
        key = (row.name, tool.label, direction)
        if key in self._skips_noted:
            return
        self._skips_noted.add(key)
        self.result.notes.append(f"{tool.label}: skipped {row.name} {direction}: {reason}")

    def _stage(self, src: Path, prefix: str) -> None:
        """Put the row at ``prefix`` with synxfer's default upload (not measured)."""
        scratch = self.scratch / "stage"
        scratch.mkdir(parents=True, exist_ok=True)
        command = SynxferTool().command(Op("upload", prefix, src), self.target, scratch)
        stats = run_measured(command.argv, env=command.env, timeout=self.plan.timeout)
        if stats.returncode != 0:
            raise BenchError(f"staging {prefix} for a copy row failed (exit {stats.returncode})")

    def _cleanup(self, prefix: str, out: Path | None) -> None:
        try:
            self._run_coro(self.target.remove_prefix(prefix))
        except Exception as exc:
            self.log(f"    warning: could not remove {prefix}: {exc}")
        if out is not None and out.exists():
            shutil.rmtree(out, ignore_errors=True)
        self.target.reclaim()

    def _remove_what_we_made(self) -> None:
        """Generated data (not data found and reused), downloads, scratch: gone unless keep."""
        if self.plan.keep:
            return
        for path in [*self.generated, self.scratch, self.out_root]:
            shutil.rmtree(path, ignore_errors=True)
        data = (self.plan.work_dir / "data").absolute()
        for path in self.generated:
            parent = path.absolute().parent
            while parent == data or data in parent.parents:
                with contextlib.suppress(OSError):
                    parent.rmdir()  # only when empty
                parent = parent.parent

    # -- one tool, one repetition of one row
    def _tool_row(self, tool: Tool, row: Row, src: Path, rep: int, concurrency: int | None) -> None:
        directions = _directions(self.plan.scenario, row)
        suffix = f"-c{concurrency}" if concurrency is not None else ""
        prefix = f"{_slug(row.name)}/{_slug(tool.label)}{suffix}-{rep}/"
        ops = {
            "upload": Op("upload", prefix, src, concurrency),
            "download": Op(
                "download", prefix, self.out_root / f"{_slug(tool.label)}{suffix}", concurrency
            ),
            "sync": Op("sync", prefix, src, concurrency),
            "resync": Op("sync", prefix, None, concurrency),
            "resync2": Op("sync", prefix, None, concurrency),
            "copy": Op("copy", prefix, None, concurrency, copy_to=row.copy_to + prefix),
        }
        steps = list(directions)
        # A download-only row: every tool reads the same objects, put there once
        # per repetition by synxfer's default upload (not measured), so a big row
        # costs one upload instead of one per tool and all read the same bytes.
        # Otherwise a download reads what the tool uploaded, measured as the upload.
        staged = "download" in steps and "upload" not in steps and "sync" not in steps
        if staged:
            prefix = f"{_slug(row.name)}/staged{suffix}-{rep}/"
            ops["download"] = dataclasses.replace(ops["download"], prefix=prefix)
            if prefix not in self._staged:
                self._stage(src, prefix)
                self._staged.add(prefix)
                self._stored[prefix] = sum(expected_sizes(row).values())
        elif "download" in steps and "upload" not in steps:
            steps.insert(0, "upload")
        for direction in steps:
            reason = tool.unsupported(ops[direction], self.target)
            if reason is not None:
                self._skip(tool, row, direction, reason)
                if direction in ("upload", "sync"):
                    return  # nothing to download or resync
                continue
        want = expected_sizes(row)
        out = ops["download"].local
        try:
            for direction in steps:
                op = ops[direction]
                if tool.unsupported(op, self.target) is not None:
                    continue
                if direction == "download":
                    assert op.local is not None
                    if op.local.exists():
                        shutil.rmtree(op.local)
                    op.local.mkdir(parents=True)
                if direction in ("resync", "resync2"):
                    changed, generated = ensure_changed_copy(src, row, seed=self.plan.seed)
                    if generated:
                        self.generated.append(changed)
                    if direction == "resync2":
                        changed, generated = ensure_second_change(changed, row, seed=self.plan.seed)
                        if generated:
                            self.generated.append(changed)
                    op = Op("sync", prefix, changed, concurrency)
                    want = round_sizes(row, SYNC_ROUNDS.index(direction) + 1)
                if direction == "copy":
                    self._stage(src, prefix)
                sample = self._step(tool, row, direction, op, rep, want)
                if not sample.ok:
                    for later in steps[steps.index(direction) + 1 :]:
                        failed = Sample(row.name, tool.label, later, rep, concurrency, 0, 0)
                        failed.error = f"skipped: {direction} failed"
                        self.result.samples.append(failed)
                    return
        finally:
            self._listings.pop(prefix, None)
            self._stored.pop(prefix, None)
            if "copy" in steps:
                self._empty_copy_destination(ops["copy"].copy_to)
            if staged:  # the objects stay for the next tool; _rows removes them
                if out is not None and out.exists():
                    shutil.rmtree(out, ignore_errors=True)
            else:
                self._cleanup(prefix, out)

    # -- everything
    def run(self) -> MatrixResult:
        plan = self.plan
        self.result.started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        for tool in self.tools:
            reason = tool.missing()
            if reason is not None:
                self.result.notes.append(f"{tool.label}: skipped: {reason}")
                self.result.skipped_tools.append(tool.label)
                self.log(f"synxfer-bench: {tool.label}: SKIPPED: {reason}")
        tools = [t for t in self.tools if t.missing() is None]
        for tool in tools:
            note = tool.prepare()
            if note:
                self.result.notes.append(note)
        t0 = time.monotonic()
        try:
            with self.timeline, self._gcs_emulator_if_needed(), self._second_bucket_if_needed():
                self._rows(tools)
        except DiskFull as exc:
            self.result.aborted = str(exc)
            self.log(f"synxfer-bench: {exc}: the run stopped")
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            self.result.aborted = f"{disk_full_reason(plan.work_dir, str(exc))}, making data"
            self.log(f"synxfer-bench: {self.result.aborted}: the run stopped")
        finally:
            self._remove_what_we_made()
        self.result.seconds = time.monotonic() - t0
        self.result.timeline = list(self.timeline.samples)
        self.result.measurements = summarize(self.result.samples, plan.rows, tools)
        return self.result

    def _rows(self, tools: Sequence[Tool]) -> None:
        plan = self.plan
        word = "seed" if plan.per_scenario_data else "nominal"
        for index, row in enumerate(plan.rows):
            label = row_label(
                row.name,
                row.geometry,
                published=row.published,
                nbytes=row.total_bytes,
                published_bytes=row.published_bytes,
                word=word,
            )
            self.log(f"[{index + 1}/{len(plan.rows)}] {label}")
            root = plan.data_dir(row)
            src, generated = ensure_row_data(plan.work_dir, row, seed=plan.seed, root=root)
            if generated:
                self.generated.append(root)
                self.log(f"  generated {row.files} files ({human_size(row.total_bytes)})")
            ratio = compression_ratio(src, sample=(64 if row.data == "text" else 8) << 20)
            self.result.rows.append(
                {
                    "name": row.name,
                    "label": label,
                    "files": row.files,
                    "bytes": row.total_bytes,
                    "geometry": row.geometry,
                    "published": row.published or row.geometry,
                    "published_bytes": row.published_bytes or row.total_bytes,
                    "data": row.data,
                    "case": row.case,
                    "within_service": row.case == "copy"
                    and row.copy_to.startswith(f"{self.target.scheme}://"),
                    "sweep": list(row.sweep),
                    "directions": list(_directions(plan.scenario, row)),
                    "compression_ratio_zlib6": round(ratio, 4),
                }
            )
            for concurrency in row.sweep or (None,):
                for rep in range(plan.repeat):
                    shift = rep % len(tools) if tools else 0
                    order = list(tools[shift:]) + list(tools[:shift])
                    conc = f" c={concurrency}" if concurrency is not None else ""
                    self.log(f"  run {rep + 1}/{plan.repeat}{conc}")
                    for tool in order:
                        self._tool_row(tool, row, src, rep, concurrency)
            for prefix in sorted(self._staged):
                self._cleanup(prefix, None)
            self._staged.clear()


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in name.lower())


def summarize(
    samples: Sequence[Sample], rows: Sequence[Row], tools: Sequence[Tool]
) -> list[Measurement]:
    """One :class:`Measurement` per (row, concurrency, tool, direction): medians of the runs."""
    order_rows = {r.name: i for i, r in enumerate(rows)}
    order_tools = {t.label: i for i, t in enumerate(tools)}
    order_dirs = {d: i for i, d in enumerate(("upload", "download", *SYNC_ROUNDS, "copy"))}
    groups: dict[tuple[str, int | None, str, str], list[Sample]] = {}
    for s in samples:
        groups.setdefault((s.row, s.concurrency, s.tool, s.direction), []).append(s)
    out: list[Measurement] = []
    for (row, conc, tool, direction), runs in sorted(
        groups.items(),
        key=lambda kv: (
            order_rows.get(kv[0][0], 99),
            kv[0][1] or 0,
            order_dirs.get(kv[0][3], 9),
            order_tools.get(kv[0][2], 99),
        ),
    ):
        good = [s for s in runs if s.ok]
        first = next((s for s in runs if s.bytes), runs[0])
        m = Measurement(tool, row, direction, first.files, first.bytes)
        m.concurrency = conc
        m.runs = len(runs)
        if good:
            secs = [s.seconds for s in good]
            m.seconds = statistics.median(secs)
            m.seconds_min, m.seconds_max = min(secs), max(secs)
            m.client_cpu = statistics.median(s.cpu_user + s.cpu_system for s in good)
            m.peak_rss = max(s.peak_rss for s in good)
            servers = [s.server_cpu for s in good if s.server_cpu is not None]
            m.server_cpu = statistics.median(servers) if servers else None
            m.verified_files = good[0].verified_files
            m.verified_bytes = good[0].verified_bytes
            m.verified = len(good) == len(runs)
            moved = [s for s in good if s.moved_bytes is not None and s.moved_files is not None]
            if moved:
                m.moved_files = round(statistics.median(s.moved_files or 0 for s in moved))
                m.moved_bytes = round(statistics.median(s.moved_bytes or 0 for s in moved))
            names = {k for s in good for k in s.counters}
            m.counters = {
                k: statistics.median(s.counters[k] for s in good if k in s.counters)
                for k in sorted(names)
            }
        bad = [s for s in runs if not s.ok]
        full = [s for s in bad if s.disk_full]
        if full:
            m.error = full[0].error  # "disk full: ...": the disk's failure, not the tool's
        elif bad:
            m.error = f"{len(bad)} of {len(runs)} runs failed: {bad[0].error}"
        out.append(m)
    return out


def _opt_float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def load_result(data: dict[str, Any]) -> MatrixResult:
    """A :class:`MatrixResult` rebuilt from a scenario run's ``results.json``.

    Enough to render its tables and charts again with today's code; the
    plan's rows are not rebuilt (the JSON's row records describe them).
    Reports written before ``skipped_tools`` was recorded get it from the
    notes (``"<tool>: skipped: <why>"``).
    """
    name = str(data.get("scenario", "?"))
    scenario = SCENARIOS.get(name) or Scenario(name, ())
    if data.get("description"):
        scenario = dataclasses.replace(scenario, description=str(data["description"]))
    plan = RunPlan(
        scenario,
        (),
        float(data.get("scale", 1.0)),
        Path("."),
        seed=int(data.get("seed", 0)),
        repeat=int(data.get("repeat", 1)),
    )
    result = MatrixResult(plan, dict(data.get("target") or {}), list(data.get("tools") or []))
    result.rows = [dict(r) for r in data.get("rows", [])]
    result.notes = [str(n) for n in data.get("notes", [])]
    skipped = data.get("skipped_tools")
    if skipped is None:
        skipped = [n.split(": skipped: ", 1)[0] for n in result.notes if ": skipped: " in n]
    result.skipped_tools = [str(t) for t in skipped]
    result.started = str(data.get("started", ""))
    result.seconds = float(data.get("duration_s", 0.0))
    result.aborted = data.get("aborted")
    result.disk = {str(k): int(v) for k, v in (data.get("disk") or {}).items()}
    for d in data.get("results", []):
        m = Measurement(
            str(d["tool"]), str(d["row"]), str(d["direction"]), int(d["files"]), int(d["bytes"])
        )
        m.seconds = _num(d.get("seconds"))
        m.client_cpu = _num(d.get("client_cpu_s"))
        m.server_cpu = _opt_float(d.get("server_cpu_s"))
        m.verified_files = int(d.get("verified_files") or 0)
        m.verified_bytes = int(d.get("verified_bytes") or 0)
        m.verified = bool(d.get("verified"))
        m.error = d.get("error")
        m.concurrency = d.get("concurrency")
        m.runs = int(d.get("runs") or 1)
        m.seconds_min = _opt_float(d.get("seconds_min"))
        m.seconds_max = _opt_float(d.get("seconds_max"))
        m.peak_rss = d.get("peak_rss")
        m.moved_files = d.get("moved_files")
        m.moved_bytes = d.get("moved_bytes")
        m.counters = {str(k): float(v) for k, v in (d.get("counters") or {}).items()}
        result.measurements.append(m)
    sizes = {(m.row, m.direction): (m.files, m.bytes) for m in result.measurements}
    for d in data.get("samples", []):
        files, nbytes = sizes.get((str(d["row"]), str(d["direction"])), (0, 0))
        sample = Sample(
            str(d["row"]),
            str(d["tool"]),
            str(d["direction"]),
            int(d["rep"]),
            d.get("concurrency"),
            int(d.get("files", files)),
            int(d.get("bytes", nbytes)),
        )
        sample.seconds = _num(d.get("seconds"))
        sample.cpu_user = _num(d.get("cpu_user_s"))
        sample.cpu_system = _num(d.get("cpu_system_s"))
        sample.peak_rss = int(d.get("peak_rss") or 0)
        sample.server_cpu = _opt_float(d.get("server_cpu_s"))
        sample.verified_files = int(d.get("verified_files") or 0)
        sample.verified_bytes = int(d.get("verified_bytes") or 0)
        sample.verified = bool(d.get("ok"))
        sample.error = d.get("error")
        sample.start = _num(d.get("timeline_start"))
        sample.end = _num(d.get("timeline_end"))
        sample.disk_full = bool(d.get("disk_full"))
        if d.get("resources"):
            sample.resources = ResourceRecord.from_dict(d["resources"])
        sample.moved_files = d.get("moved_files")
        sample.moved_bytes = d.get("moved_bytes")
        sample.stored_bytes = d.get("stored_bytes")
        sample.counters = {str(k): float(v) for k, v in (d.get("counters") or {}).items()}
        result.samples.append(sample)
    for d in data.get("timeline", []):
        result.timeline.append(
            TimelineSample(
                t=_num(d.get("t")),
                cpu_user=_num(d.get("cpu_user")),
                cpu_system=_num(d.get("cpu_system")),
                cpu_iowait=_num(d.get("cpu_iowait")),
                cpu_idle=_num(d.get("cpu_idle")),
                disk_read=_num(d.get("disk_read_mib_s")),
                disk_write=_num(d.get("disk_write_mib_s")),
                net_recv=_num(d.get("net_recv_mib_s")),
                net_send=_num(d.get("net_send_mib_s")),
                server_cpu=_opt_float(d.get("server_cpu_pct")),
                label=str(d.get("label", "")),
            )
        )
    return result


def run_matrix(
    plan: RunPlan,
    target: Target,
    tools: Sequence[Tool],
    *,
    log: Callable[[str], None] = lambda _m: None,
) -> MatrixResult:
    """Run every row of ``plan`` with every tool against a started ``target``."""
    if plan.repeat < 1:
        raise BenchError("repeat must be >= 1")
    return _Runner(plan, target, tools, log).run()
