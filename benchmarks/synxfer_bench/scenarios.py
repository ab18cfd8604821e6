"""The benchmark matrix: rows of N files of some size, grouped into named scenarios.

A :class:`Row` is ``files`` files of ``size`` bytes (or, for a mixed row,
several ``(count, size)`` groups). A :class:`Scenario` is a named tuple of
rows reproducing a published table, with the directions it measures and a
default ``--scale`` that keeps the whole matrix small enough for a laptop.

Two ways to shrink a row:

* :meth:`Row.scaled` (``--quick`` and ``--rows``, unchanged): every file's
  size times the scale, the file count unchanged.
* :meth:`Row.shrunk` (named scenarios): the row's *bytes* times the scale,
  split between count and size. The count shrinks by ``scale ** (1/3)``
  (never below one file) and the size takes the rest, so a many-file row
  keeps many files (its per-file costs are what it measures) and every
  row's bytes shrink by the same factor. Rows marked ``fixed_size`` (the
  16 MiB text shards) shrink by count only. Small-file rows (files of at
  most :data:`SMALL_FILE`) keep the seed's file count: they run as is
  while the whole row fits :data:`SMALL_ROW_BUDGET` (53,248 x 16 KiB is
  0.8 GiB), and their files shrink to fit it otherwise; a ``--scale`` below
  the scenario's default shrinks that budget in proportion.

Either way a shrunk row remembers the seed's geometry (``published``,
``published_bytes``), and :func:`row_label` names both what was moved and
what it stands for: ``2x512MiB (seed: 10x10GiB, scale 0.01)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from synxfer import GiB, KiB, MiB, parse_size

__all__ = [
    "CASES",
    "DATA_KINDS",
    "GCS_EMULATOR",
    "QUICK",
    "SCENARIOS",
    "SECOND_BUCKET",
    "SMALL_FILE",
    "SMALL_ROW_BUDGET",
    "SPEED",
    "SPEED_TLS",
    "SYNAPSE_PATH",
    "Row",
    "Scenario",
    "format_size",
    "human_size",
    "parse_rows",
    "row_label",
    "select_rows",
]

#: What a row does: transfer the files; sync, change 5 % and sync again;
#: or copy between two URLs (the cross-cloud hook; synxfer only).
CASES = ("transfer", "periodic-sync", "copy")
#: What the files hold: incompressible random bytes, or generated text.
DATA_KINDS = ("random", "text")
#: A row whose files are at most this big is a small-file row: its file count is what it measures.
SMALL_FILE = MiB
#: At a scenario's default scale a small-file row runs as is up to this many bytes.
SMALL_ROW_BUDGET = GiB


def format_size(n: int) -> str:
    """Shortest exact binary-unit spelling: ``1048576`` -> ``1MiB``, ``1500`` -> ``1500B``."""
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


def human_size(n: float) -> str:
    """A readable size with at most three significant digits: ``1.5MiB``, ``410KiB``, ``97B``."""
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= factor:
            value = n / factor
            text = f"{value:.3g}" if value < 1000 else f"{value:.0f}"
            return f"{text}{unit}"
    return f"{n:.0f}B"


@dataclass(frozen=True, slots=True)
class Row:
    """One benchmark row: ``files`` files of ``size`` bytes each.

    ``groups`` makes a mixed row: ``(count, size)`` pairs, ``files`` being
    their total count and ``size`` the largest size. ``data`` is
    ``"random"`` or ``"text"``; ``case`` one of :data:`CASES`; ``sweep``
    the concurrency values every tool runs at (empty: each tool's
    defaults). ``published`` keeps the geometry of the published row once
    :meth:`shrunk`.
    """

    name: str
    files: int
    size: int
    groups: tuple[tuple[int, int], ...] = ()
    data: str = "random"
    case: str = "transfer"
    sweep: tuple[int, ...] = ()
    fixed_size: bool = False
    published: str = ""
    #: For ``case="copy"``: the destination URL prefix (the source is the target).
    copy_to: str = ""
    #: Bytes of the published row, once :meth:`shrunk` (0: not shrunk).
    published_bytes: int = 0
    #: The directions this row measures, when not the scenario's (synapse-path: the
    #: upload table's rows go up only, the download table's up and down).
    directions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.data not in DATA_KINDS:
            raise ValueError(f"row {self.name}: unknown data kind {self.data!r}")
        if self.case not in CASES:
            raise ValueError(f"row {self.name}: unknown case {self.case!r}")

    @classmethod
    def of(cls, files: int, size: int, *, sweep: tuple[int, ...] = ()) -> Row:
        """A row named ``<files>x<size>``, e.g. ``100x1MiB``."""
        return cls(f"{files}x{format_size(size)}", files, size, sweep=sweep)

    @classmethod
    def mixed(cls, name: str, groups: tuple[tuple[int, int], ...]) -> Row:
        """A row of several ``(count, size)`` groups."""
        files = sum(c for c, _ in groups)
        size = max(s for _, s in groups)
        return cls(name, files, size, groups=groups)

    @property
    def layout(self) -> tuple[tuple[int, int], ...]:
        """``(count, size)`` groups; one group for a uniform row."""
        return self.groups or ((self.files, self.size),)

    def file_sizes(self) -> Iterator[int]:
        """The size of each file, in file-index order."""
        for count, size in self.layout:
            for _ in range(count):
                yield size

    @property
    def total_bytes(self) -> int:
        return sum(c * s for c, s in self.layout)

    @property
    def geometry(self) -> str:
        """What the row holds now: ``2x512MiB``, or ``1638 files, 410MiB`` when mixed."""
        if not self.groups:
            return f"{self.files}x{human_size(self.size)}"
        return f"{self.files} files, {human_size(self.total_bytes)}"

    def scaled(self, scale: float) -> Row:
        """This row with each file's size multiplied by ``scale`` (at least 1 byte).

        The file count stays, so per-file overheads are still measured at
        small scales; the name stays too, so results line up across scales,
        and ``published`` keeps the geometry it had before.
        """
        if scale == 1:
            return self
        published = self.published or self.geometry
        full = self.published_bytes or self.total_bytes
        if self.groups:
            groups = tuple((c, max(1, math.ceil(s * scale))) for c, s in self.groups)
            return replace(
                self,
                groups=groups,
                size=max(s for _, s in groups),
                published=published,
                published_bytes=full,
            )
        return replace(
            self,
            size=max(1, math.ceil(self.size * scale)),
            published=published,
            published_bytes=full,
        )

    @property
    def small_files(self) -> bool:
        """Every file is at most :data:`SMALL_FILE`: the row measures per-file costs."""
        return self.size <= SMALL_FILE and not self.fixed_size

    def shrunk(self, scale: float, *, small_budget: int = SMALL_ROW_BUDGET) -> Row:
        """This row with its bytes multiplied by ``scale``, count and size both shrinking.

        The count is multiplied by ``scale ** (1/3)`` (at least one file; by
        ``scale`` itself for ``fixed_size`` rows) and each file's size
        becomes whatever keeps the row's bytes at ``scale`` times the
        original. A small-file row (:attr:`small_files`) keeps its count
        instead and takes ``max(scale x its bytes, small_budget)`` bytes,
        never more than its own: it runs as is when it fits the budget. The
        name stays; ``published`` keeps the original geometry.
        """
        published = self.published or self.geometry
        full = self.published_bytes or self.total_bytes
        if scale == 1:
            return replace(self, published=published, published_bytes=full)
        if self.small_files and not self.groups:
            target = min(self.total_bytes, max(round(self.total_bytes * scale), small_budget))
            size = max(1, target // self.files)
            return replace(self, size=size, published=published, published_bytes=full)
        groups = tuple(_shrink(c, s, scale, self.fixed_size) for c, s in self.layout)
        if self.groups:
            return replace(
                self,
                groups=groups,
                files=sum(c for c, _ in groups),
                size=max(s for _, s in groups),
                published=published,
                published_bytes=full,
            )
        ((files, size),) = groups
        return replace(self, files=files, size=size, published=published, published_bytes=full)


def _shrink(count: int, size: int, scale: float, fixed_size: bool) -> tuple[int, int]:
    if fixed_size:
        return max(1, round(count * scale)), size
    new_count = max(1, round(count * scale ** (1 / 3)))
    return new_count, max(1, round(count * size * scale / new_count))


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named list of rows, the directions measured, and a default ``--scale``."""

    name: str
    rows: tuple[Row, ...]
    #: ``("upload",)`` or ``("upload", "download")``.
    directions: tuple[str, ...] = ("upload", "download")
    #: The ``--scale`` used when none is given (named scenarios only).
    default_scale: float = 1.0
    description: str = ""
    #: Where the published matrix comes from.
    source: str = ""
    #: Scale with :meth:`Row.shrunk` (True) or :meth:`Row.scaled` (``--quick``).
    proportional: bool = True
    notes: tuple[str, ...] = field(default=())
    #: The tools ``--tools`` defaults to (empty: all of them).
    tools: tuple[str, ...] = ()
    #: The target ``--target`` defaults to (empty: ``embedded``).
    target: str = ""
    #: The scheme synxfer addresses a local target with (empty: ``s3``). ``scp``:
    #: synxfer's SCP profile on the same endpoint the peers reach as ``s3://``.
    synxfer_scheme: str = ""

    def scaled(self, scale: float) -> Scenario:
        """Every row scaled (see :meth:`Row.scaled` / :meth:`Row.shrunk`).

        Small-file rows get :data:`SMALL_ROW_BUDGET` at the default scale
        (or above), and a proportionally smaller budget below it.
        """
        if self.proportional:
            budget = round(SMALL_ROW_BUDGET * min(1.0, scale / self.default_scale))
            return replace(
                self, rows=tuple(r.shrunk(scale, small_budget=budget) for r in self.rows)
            )
        return replace(self, rows=tuple(r.scaled(scale) for r in self.rows))


def _is_geometry(name: str) -> bool:
    return _ROW.match(name) is not None


def row_label(
    name: str,
    geometry: str,
    *,
    published: str = "",
    nbytes: int = 0,
    published_bytes: int = 0,
    word: str = "seed",
) -> str:
    """What a row moved, and the seed's row it stands for when it was shrunk.

    ``2x512MiB (seed: 10x10GiB, scale 0.01)``; ``1000x1MiB`` for a row run
    as is; a named row gets its name first: ``periodic-sync-5pct:
    16384x64KiB (seed: 16384x1MiB, scale 0.0625)``. The scale shown is the
    bytes moved over the seed's bytes, whatever ``--scale`` asked for.
    """
    named = not _is_geometry(name)
    if not published_bytes or nbytes == published_bytes:
        if named:
            return f"{name}: {geometry}"
        return name if name == geometry or _same_size(name, geometry) else geometry
    head = f"{name}: {geometry}" if named else geometry
    return f"{head} ({word}: {published or name}, scale {nbytes / published_bytes:.3g})"


def _same_size(name: str, geometry: str) -> bool:
    """``2500x1MB`` and ``2500x977KiB`` name the same files (the row was not resized).

    Within 5 %: ``parse_size`` reads MB as MiB (4.9 % more than a real MB),
    and the geometry is rounded to three digits.
    """
    a, b = _ROW.match(name), _ROW.match(geometry)
    if a is None or b is None or a.group(1) != b.group(1):
        return False
    try:
        named, moved = parse_size(a.group(2)), parse_size(b.group(2))
    except ValueError:
        return False
    return abs(named - moved) <= named / 20


#: The quick matrix: many small files, a few medium ones, one multipart file.
QUICK = Scenario(
    "quick",
    (Row.of(100, MiB), Row.of(10, 10 * MiB), Row.of(1, 64 * MiB)),
    description="a quick smoke matrix (the README's `make bench`)",
    proportional=False,
)

SYNAPSE_UPLOAD = Scenario(
    "synapse-upload",
    (
        Row.of(10, 10 * GiB),
        Row.of(1, 10 * GiB),
        Row.of(10, GiB),
        Row.of(100, 100 * MiB),
        Row.of(10, 100 * MiB),
        Row.of(100, 10 * MiB),
        Row.of(1000, MiB),
    ),
    directions=("upload",),
    default_scale=0.01,
    description="the Synapse Python client's published upload table",
    source="Synapse Python client docs, 'Benchmarking' (upload of N files of size S)",
)

SYNAPSE_DOWNLOAD = Scenario(
    "synapse-download",
    (
        Row("25x40KiB", 25, 40 * KiB),
        Row("775x12.9KiB", 775, 13210, published="775x12.9KiB"),  # 12.9 KiB
        Row.of(10, 100 * MiB),
        Row.of(10, 10 * GiB),
    ),
    default_scale=0.01,
    description="the Synapse Python client's published download table",
    source="Synapse Python client docs, 'Benchmarking' (download of N files of size S)",
)

_UP = ("upload",)
_UP_DOWN = ("upload", "download")

#: Seed 002 the way it was measured (issue 35): the upload table's rows go up, the
#: download table's rows (10x10GiB and 10x100MiB are in both) up, then down, through
#: the local Synapse-style service (pre-signed URLs to SeaweedFS), synapseclient's own
#: interfaces beside synxfer's syn://, and aws s3 sync / s5cmd straight to the bucket.
SYNAPSE_PATH = Scenario(
    "synapse-path",
    (
        replace(Row.of(10, 10 * GiB), directions=_UP_DOWN),
        replace(Row.of(1, 10 * GiB), directions=_UP),
        replace(Row.of(10, GiB), directions=_UP),
        replace(Row.of(100, 100 * MiB), directions=_UP),
        replace(Row.of(10, 100 * MiB), directions=_UP_DOWN),
        replace(Row.of(100, 10 * MiB), directions=_UP),
        replace(Row.of(1000, MiB), directions=_UP),
        Row("25x40KiB", 25, 40 * KiB, directions=_UP_DOWN),
        Row("775x12.9KiB", 775, 13210, published="775x12.9KiB", directions=_UP_DOWN),
    ),
    default_scale=0.01,
    description=(
        "seed 002 through the Synapse-style path: the Synapse Python client's upload and "
        "download tables through a local Synapse-style REST service that vends pre-signed "
        "URLs to SeaweedFS, synapseclient's own interfaces (OOP models, synapseutils, "
        "syn.store / syn.get) beside synxfer's syn://, and aws s3 sync and s5cmd straight "
        "to the bucket"
    ),
    source="Synapse Python client docs, 'Benchmarking' (05/10/2024 upload, 12/12/2023 and "
    "07/02/2024 download, 12/06/2023 upload thread study)",
    notes=(
        "synapseclient's columns and synxfer go through the service (no storage credentials "
        "in their environment); 'S3 Sync CLI' (aws s3 sync) and s5cmd go straight to the "
        "service's bucket with its keys",
        "a fresh service (empty, a new Project) for every tool's run of a row: the service "
        "keeps a finished upload under its request, as Synapse does, and would hand the "
        "next tool the same file handle without a byte moved",
    ),
    tools=("synapse-oop", "synapseutils", "synapse-store", "synxfer", "aws", "s5cmd"),
    target="synapse",
)

#: awscli's mixed set: sizes 512 KiB .. 256 MiB, each class half as many
#: files as the one below, 4 GiB per class: 16 x (1 + 2 + ... + 512) = 16,368 files.
_AWSCLI_MIXED = tuple((8192 >> i, (512 * KiB) << i) for i in range(10))

AWSCLI = Scenario(
    "awscli",
    (
        Row.of(53248, 16 * KiB),
        # Big files keep the seed's 512 MiB and lose files instead (issue 14: scaled count).
        Row("780x512MiB", 780, 512 * MiB, fixed_size=True),
        Row.mixed("mixed-512KiB-256MiB", _AWSCLI_MIXED),
        Row("periodic-sync-5pct", 16384, MiB, case="periodic-sync"),
    ),
    default_scale=0.0005,
    description=(
        "aws-cli's s3transfer benchmarks: many small files, many large files, a mixed "
        "power-of-two set, and a periodic sync (sync, change 5 % of the files, sync again)"
    ),
    source="aws-cli / s3transfer performance scripts and published comparisons",
)

#: s5cmd's published benchmark (seed 001), through synxfer's SCP profile: single
#: 1/10/100 GiB files at workers/concurrency 10 and 50 (s5cmd ``--numworkers N
#: --concurrency N``, synxfer ``--max-threads N``), and 2,500 x 1 MB at the tools'
#: defaults. synxfer addresses ``scp://`` (path-style, Content-MD5 on every
#: request) on the local server; s5cmd reaches the same endpoint as ``s3://``.
S5CMD = Scenario(
    "s5cmd",
    (
        Row.of(1, GiB, sweep=(10, 50)),
        Row.of(1, 10 * GiB, sweep=(10, 50)),
        Row.of(1, 100 * GiB, sweep=(10, 50)),
        Row("2500x1MB", 2500, 1_000_000, published="2500x1MB"),
    ),
    default_scale=0.005,
    description=(
        "s5cmd's published comparison through synxfer's SCP profile: single 1/10/100 GiB "
        "files at workers/concurrency 10 and 50, and 2,500 files of 1 MB"
    ),
    source="s5cmd README / 'Benchmarks' blog posts (seed 001)",
    notes=(
        "synxfer addresses scp:// (its SCP profile: path-style, Content-MD5 on every put and "
        "part) on the local server's endpoint; s5cmd reaches the same endpoint as s3://",
        "c=N: s5cmd --numworkers N --concurrency N; synxfer --max-threads N",
    ),
    tools=("synxfer", "s5cmd"),
    target="seaweedfs",
    synxfer_scheme="scp",
)

#: ``copy_to`` of rows whose destination is a second bucket on the target itself,
#: created by the bench for the run (the URL then becomes ``<scheme>://<bucket>/...``):
#: copies across two buckets of one endpoint and credentials, server-side in synxfer.
SECOND_BUCKET = "s3+bucket://synxfer-bench-dst/"

#: Skyplane (seed 000): an ImageNet-like many-file set, big random files, a text corpus
#: for the compression/cost case, and a copy across two buckets of the same service.
SKYPLANE = Scenario(
    "skyplane",
    (
        # fake_imagenet: 1,024 TFRecord-like shards of 64 MiB of random bytes (64 GiB).
        Row("fake-imagenet-shards", 1024, 64 * MiB, published="1024x64MiB"),
        Row.of(1, 4 * GiB),
        Row.of(1, 16 * GiB),
        Row.of(1, 64 * GiB),
        # A Wikipedia-like dump (datagen's text generator) split in 16 MiB pieces, as the
        # seed splits its corpus; shrinks by count.
        Row("text-16MiB-shards", 1024, 16 * MiB, data="text", fixed_size=True),
        # s3 -> s3 across two buckets of one service: the shards again, copied server-side.
        Row(
            "s3-to-s3-cross-bucket",
            1024,
            64 * MiB,
            case="copy",
            copy_to=SECOND_BUCKET,
            published="1024x64MiB",
        ),
    ),
    default_scale=0.005,
    description=(
        "Skyplane-style transfers: an ImageNet-like data set of 64 MiB shards "
        "(fake_imagenet), large random files (4-64 GiB), a Wikipedia-like text corpus in "
        "16 MiB pieces for the compression/cost case (synxfer-zstd stores it "
        "zstd-compressed), and an s3 -> s3 copy of the shards across two buckets of the "
        "same service (server-side, synxfer only)"
    ),
    source="Skyplane paper and docs (bulk transfer benchmarks, cost model; seed 000)",
    notes=(
        "synxfer-zstd is synxfer with --compress zstd (level 3): objects stored "
        "zstd-compressed with synxfer-encoding/synxfer-size metadata; the bench checks it "
        "by the original sizes in that metadata, and its cost by the stored bytes",
    ),
    tools=("synxfer", "synxfer-zstd", "s5cmd", "aws"),
)

#: ``copy_to`` of rows whose destination is a GCS emulator the bench starts
#: on 127.0.0.1 for the run (the URL then becomes ``gs://<bucket>/...``).
GCS_EMULATOR = "gs+emulator://synxfer-bench-gcs/"

CROSS_CLOUD = Scenario(
    "cross-cloud",
    (
        Row("s3-to-gs-100x1MiB", 100, MiB, case="copy", copy_to=GCS_EMULATOR),
        Row("s3-to-gs-4x64MiB", 4, 64 * MiB, case="copy", copy_to=GCS_EMULATOR),
    ),
    default_scale=1.0,
    description=(
        "Skyplane's headline case, between clouds: objects copied from the S3 target to "
        "GCS (gcp-storage-emulator on 127.0.0.1), streamed through memory; synxfer only"
    ),
    source="Skyplane (cloud-to-cloud transfers and their egress cost)",
)

#: Issue 10's table: true sizes, up and down, synxfer against the three
#: fastest peers on SeaweedFS (4 GiB of data; about 15 minutes at 3 rounds).
SPEED = Scenario(
    "speed",
    (Row.of(1000, MiB), Row.of(100, 10 * MiB), Row.of(10, 100 * MiB), Row.of(1, GiB)),
    directions=("upload", "download"),
    default_scale=1.0,
    description=(
        "issue 10's speed table at true sizes (not scaled): 1000x1MiB, 100x10MiB, "
        "10x100MiB and 1x1GiB, up and down, synxfer against s5cmd, aws-cli and rclone"
    ),
    source="issue 10 (speed: at or beyond s5cmd and rclone on every row)",
    tools=("synxfer", "s5cmd", "aws", "rclone"),
    target="seaweedfs",
)

#: Issue 37's table: the speed rows over HTTPS (SeaweedFS serving S3 with TLS, a
#: CA made per run, every tool verifying it), plus the seed's big row, 1x10GiB
#: down (read by every tool from one copy synxfer puts there unmeasured).
SPEED_TLS = replace(
    SPEED,
    name="speed-tls",
    rows=(*SPEED.rows, replace(Row.of(1, 10 * GiB), directions=("download",))),
    description=(
        "issue 37's table: issue 10's speed rows over HTTPS (every tool verifying a "
        "per-run CA), plus the seed's 1x10GiB download, synxfer against s5cmd, aws-cli "
        "and rclone"
    ),
    source="issue 37 (speed where users are: HTTPS)",
    target="seaweedfs-tls",
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        QUICK,
        SPEED,
        SPEED_TLS,
        SYNAPSE_UPLOAD,
        SYNAPSE_DOWNLOAD,
        SYNAPSE_PATH,
        AWSCLI,
        S5CMD,
        SKYPLANE,
        CROSS_CLOUD,
    )
}

_ROW = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\S+)\s*$")


def parse_rows(spec: str) -> tuple[Row, ...]:
    """Parse ``--rows``: comma-separated ``<files>x<size>`` like ``100x1MiB,1x64MiB``.

    Raises :class:`ValueError` naming the bad item.
    """
    rows: list[Row] = []
    for item in spec.split(","):
        if not item.strip():
            continue
        m = _ROW.match(item)
        if m is None:
            raise ValueError(
                f"invalid row {item.strip()!r}: expected <files>x<size>, like 100x1MiB"
            )
        files = int(m.group(1))
        if files < 1:
            raise ValueError(f"invalid row {item.strip()!r}: needs at least one file")
        try:
            size = parse_size(m.group(2))
        except ValueError as exc:
            raise ValueError(f"invalid row {item.strip()!r}: {exc}") from None
        rows.append(Row.of(files, size))
    if not rows:
        raise ValueError(f"no rows in {spec!r}")
    return tuple(rows)


def select_rows(scenario: Scenario, spec: str) -> tuple[Row, ...]:
    """Pick rows of ``scenario`` by name or 1-based index: ``1,3`` or ``10x1GiB,1000x1MiB``.

    Raises :class:`ValueError` listing the valid names for an unknown one.
    """
    picked: list[Row] = []
    by_name = {r.name.lower(): r for r in scenario.rows}
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
        if item.isdigit() and 1 <= int(item) <= len(scenario.rows):
            row = scenario.rows[int(item) - 1]
        elif item.lower() in by_name:
            row = by_name[item.lower()]
        else:
            names = ", ".join(r.name for r in scenario.rows)
            raise ValueError(
                f"scenario {scenario.name} has no row {item!r} "
                f"(rows: {names}; or 1..{len(scenario.rows)})"
            )
        if row not in picked:
            picked.append(row)
    if not picked:
        raise ValueError(f"no rows in {spec!r}")
    return tuple(picked)
