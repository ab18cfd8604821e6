"""Unit tests of the engine's pure parts: no server needed."""

from __future__ import annotations

import asyncio
import base64
import math
import os
import random
import types
from pathlib import Path

import pytest

import synxfer
import synxfer.backend
from synxfer import GiB, KiB, MiB, TransferConfig
from synxfer._url import parse_location, service_scheme
from synxfer.backend import Capabilities
from synxfer.engine.budget import ByteBudget
from synxfer.engine.filters import Filters
from synxfer.engine.localtree import safe_join
from synxfer.engine.meta import format_mtime, parse_mtime, same_mtime
from synxfer.engine.parts import etag_parts, part_ranges, plan_part_size

S3 = Capabilities()


# -- config ----------------------------------------------------------------------


def test_config_defaults_follow_the_brief() -> None:
    c = TransferConfig()
    assert c.max_threads == (os.cpu_count() or 1) + 4
    assert c.max_files == 2 * c.max_threads
    assert c.part_size == 8 * MiB
    assert c.multipart_threshold == 8 * MiB
    assert c.memory_budget == c.max_threads * c.part_size
    # File I/O and hashing: one worker thread per core (at least 2), not one
    # per request: more only compete for the GIL (docs/decisions/0016).
    assert c.io_threads == min(c.max_threads, max(2, os.cpu_count() or 1))


def test_config_derived_values_follow_changes() -> None:
    c = TransferConfig(max_threads=3)
    assert (c.max_files, c.memory_budget) == (6, 3 * 8 * MiB)
    d = c.evolve(max_threads=5)
    assert (d.max_files, d.memory_budget) == (10, 5 * 8 * MiB)
    e = TransferConfig(max_threads=3, max_files=7).evolve(max_threads=5)
    assert e.max_files == 7  # explicitly chosen: kept
    assert TransferConfig(max_threads=1).io_threads == 1  # never above max_threads
    one = TransferConfig(max_threads=1)
    assert one.evolve(max_threads=64).io_threads == TransferConfig(max_threads=64).io_threads
    assert TransferConfig(io_threads=9).evolve(max_threads=5).io_threads == 9  # explicit: kept


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_threads": 0}, "max_threads"),
        ({"part_size": 0}, "part_size"),
        ({"max_files": -1}, "max_files"),
        ({"io_threads": -1}, "io_threads"),
        ({"read_timeout": 0}, "timeout"),
    ],
)
def test_config_rejects_nonsense(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(synxfer.ConfigError, match=message):
        TransferConfig(**kwargs)  # type: ignore[arg-type]


# -- part sizing -----------------------------------------------------------------


def test_part_size_respects_minimum_and_max_parts() -> None:
    assert plan_part_size(100 * MiB, 1 * MiB, S3) == 5 * MiB  # S3's minimum
    assert plan_part_size(100 * MiB, 8 * MiB, S3) == 8 * MiB
    for size in (80 * GiB, 1000 * GiB, 4 * 1024 * GiB):
        part = plan_part_size(size, 8 * MiB, S3)
        assert math.ceil(size / part) <= 10_000
        assert part % (8 * MiB) == 0  # grown by doubling, as s3transfer does
    with pytest.raises(synxfer.ConfigError, match="exceeds"):
        plan_part_size(10_000 * 5 * GiB + 1, 8 * MiB, S3)


def test_part_size_is_a_multiple_when_asked() -> None:
    blocks = Capabilities(min_part_size=1, part_size_multiple=3 * MiB)
    assert plan_part_size(100 * MiB, 8 * MiB, blocks) == 9 * MiB
    assert plan_part_size(100 * MiB, 9 * MiB, blocks) == 9 * MiB


def test_part_ranges_cover_every_byte_once() -> None:
    assert part_ranges(0, 5) == [(0, 0)]
    assert part_ranges(5, 5) == [(0, 5)]
    assert part_ranges(11, 5) == [(0, 5), (5, 5), (10, 1)]


def test_etag_shapes() -> None:
    assert etag_parts("d41d8cd98f00b204e9800998ecf8427e") == 0
    assert etag_parts("d41d8cd98f00b204e9800998ecf8427e-12") == 12
    assert etag_parts("opaque") is None
    assert etag_parts(None) is None


# -- filters ---------------------------------------------------------------------


def test_filters_last_match_wins_like_aws_cli() -> None:
    f = Filters([("exclude", "*"), ("include", "*.txt")])
    assert f.included("a/b.txt")
    assert not f.included("a/b.bin")
    g = Filters([("include", "*.txt"), ("exclude", "*")])
    assert not g.included("a/b.txt")
    assert Filters().included("anything")
    # '*' crosses directory separators, as in aws-cli.
    assert not Filters([("exclude", "logs*")]).included("logs/deep/x")
    assert Filters.build(exclude=["*.tmp"], include=["keep.tmp"]).included("keep.tmp")
    with pytest.raises(synxfer.ConfigError, match="list of patterns"):
        Filters.build(exclude="*.tmp")  # type: ignore[arg-type]


# -- byte budget -----------------------------------------------------------------


async def test_budget_is_fifo_and_bounded() -> None:
    b = ByteBudget(10)
    assert await b.acquire(6) == 6
    order: list[str] = []

    async def take(name: str, n: int) -> None:
        got = await b.acquire(n)
        order.append(name)
        await asyncio.sleep(0.01)
        b.release(got)

    big = asyncio.create_task(take("big", 8))
    await asyncio.sleep(0)
    small = asyncio.create_task(take("small", 1))  # fits now, but must queue behind big
    await asyncio.sleep(0.01)
    assert order == []
    b.release(6)
    await asyncio.gather(big, small)
    assert order == ["big", "small"]
    assert b.peak <= 10
    assert b.in_use == 0
    assert await b.acquire(50) == 10  # larger than the budget: clamped, proceeds alone
    b.release(10)


async def test_budget_cancelled_waiter_leaks_nothing() -> None:
    b = ByteBudget(4)
    await b.acquire(4)
    waiter = asyncio.create_task(b.acquire(3))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    b.release(4)
    assert b.in_use == 0
    assert await b.acquire(4) == 4


# -- locations and paths ---------------------------------------------------------


def test_parse_location() -> None:
    loc = parse_location("s3://bkt/a/b")
    assert (loc.scheme, loc.bucket, loc.key, loc.is_local) == ("s3", "bkt", "a/b", False)
    assert parse_location("./x").is_local
    assert parse_location("file:///data/x").key == "data/x"
    for bad, msg in [
        ("s3://", "no bucket"),
        ("s3:///k", "no bucket"),
        ("s3://bad bucket/k", "bucket name"),
        ("s3:/bkt/k", "malformed"),
        ("", "empty"),
        ("file://host/x", "absolute path"),
    ]:
        with pytest.raises(synxfer.InvalidURL, match=msg):
            parse_location(bad)


def test_service_scheme() -> None:
    """The URLs ``ls`` takes as "list the buckets": a scheme and nothing else."""
    assert service_scheme("s3://") == "s3"
    assert service_scheme("GS://") == "gs"
    for other in ("s3://b", "s3:///", "file://", "s3:/", "./s3://", ""):
        assert service_scheme(other) is None, other


@pytest.mark.parametrize(
    "key", ["../x", "a/../../x", "/etc/passwd", "a//b", "a/./b", "nul\x00byte", "a/" + "n" * 300]
)
def test_safe_join_refuses(tmp_path: Path, key: str) -> None:
    with pytest.raises(synxfer.UnsafePathError):
        safe_join(tmp_path, key)


def test_safe_join_refuses_symlinked_escape(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    with pytest.raises(synxfer.UnsafePathError, match="outside"):
        safe_join(root, "out/x")
    assert safe_join(root, "in/ünï/x") == root / "in" / "ünï" / "x"


def test_safe_join_resolves_each_directory_once_per_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the plan's ``resolved`` dict, 1000 keys in two directories (the
    root and ``d``) cost two realpath calls, and an escape through a
    symlinked directory is still refused."""
    import os

    from synxfer.engine import localtree

    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    calls: list[str] = []
    real = os.path.realpath

    def counting(path: object) -> str:
        calls.append(str(path))
        return real(path)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(localtree.os.path, "realpath", counting)
    resolved: dict[Path, str] = {}
    for i in range(500):
        assert safe_join(root, f"f{i}", resolved) == root / f"f{i}"
        assert safe_join(root, f"d/f{i}", resolved) == root / "d" / f"f{i}"
    assert sorted(calls) == sorted([str(root), str(root / "d")])
    with pytest.raises(synxfer.UnsafePathError, match="outside"):
        safe_join(root, "out/x", resolved)


def test_mtime_round_trip_is_exact() -> None:
    for ns in (0, 1, 1_700_000_000_123_456_789, 999_999_999, -1, -1_500_000_000, -500_000_000):
        assert parse_mtime(format_mtime(ns)) == ns
    assert format_mtime(-1_500_000_000) == "-1.500000000"  # before 1970: sign in front
    assert parse_mtime("-0.5") == -500_000_000
    assert parse_mtime("1604505840.5") == 1_604_505_840_500_000_000  # rclone-style
    assert parse_mtime("garbage") is None
    assert parse_mtime(None) is None
    assert same_mtime(10, 900)
    assert not same_mtime(0, 1_000)


# -- sizes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12345", 12345),
        ("1", 1),
        ("1B", 1),
        ("64KiB", 64 * KiB),
        ("64k", 64 * KiB),
        ("64KB", 64 * KiB),
        ("8MiB", 8 * MiB),
        ("8M", 8 * MiB),
        ("8mb", 8 * MiB),
        (" 8 MiB ", 8 * MiB),
        ("1.5G", 3 * GiB // 2),
        ("1GiB", GiB),
        (".5KiB", 512),
        ("2T", 2 * 1024 * GiB),
        ("1TiB", 1024 * GiB),
    ],
)
def test_parse_size_accepts(text: str, expected: int) -> None:
    assert synxfer.parse_size(text) == expected


@pytest.mark.parametrize(
    "text", ["", " ", "8X", "-1", "0", "0.4", "MiB", "1.3B", "8 MiB extra", "1e3", "8PiB"]
)
def test_parse_size_refuses_with_a_message_naming_the_text(text: str) -> None:
    with pytest.raises(ValueError, match="invalid size") as info:
        synxfer.parse_size(text)
    assert repr(text) in str(info.value)


def test_one_size_grammar_for_the_cli() -> None:
    """The CLI's size options parse with :func:`synxfer.parse_size`, errors and all."""
    import argparse

    from synxfer.cli._args import size_arg

    assert size_arg("1.5MiB") == synxfer.parse_size("1.5MiB") == 3 * MiB // 2
    with pytest.raises(argparse.ArgumentTypeError, match="invalid size '8XB'"):
        size_arg("8XB")


# -- public surface --------------------------------------------------------------


def _public_names(module: types.ModuleType) -> set[str]:
    """A module's public names, bar the submodules Python sets on it as they
    are imported (``synxfer.backend``), plus the names it imports on first use."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    } | set(getattr(module, "_LAZY", ()))


@pytest.mark.parametrize("module", [synxfer, synxfer.backend], ids=lambda m: m.__name__)
def test_exported_members(module: types.ModuleType) -> None:
    """httpx's test: every public name a face imports is in its ``__all__``,
    and ``__all__`` lists each name that exists once, nothing else."""
    everything = [*module.__all__]
    assert len(everything) == len(set(everything))
    assert set(everything) - {"__version__"} == _public_names(module)
    for name in everything:
        assert hasattr(module, name), name


def test_one_address_per_name() -> None:
    """The user's face (``synxfer``) and the implementer's (``synxfer.backend``)
    share no name; a name either used to repeat still resolves to the same
    object, with a DeprecationWarning that says where it lives."""
    assert set(synxfer.__all__) & set(synxfer.backend.__all__) == set()
    moved = [(synxfer, "Capabilities", synxfer.backend), (synxfer.backend, "NotFound", synxfer)]
    for old, name, home in moved:
        with pytest.warns(DeprecationWarning, match=f"import it from {home.__name__}$"):
            assert getattr(old, name) is getattr(home, name)
    for face in (synxfer, synxfer.backend):
        with pytest.raises(AttributeError):
            _ = face.NoSuchName  # type: ignore[attr-defined]


def test_raise_for_failures() -> None:
    ok = synxfer.TransferResult(files_transferred=1)
    assert ok.raise_for_failures() is ok
    bad = synxfer.TransferResult(
        failures=[synxfer.FileFailure("./a", synxfer.Action.UPLOAD, "boom")]
    )
    with pytest.raises(synxfer.TransferFailed, match=r"1 file.*\./a: boom") as info:
        bad.raise_for_failures()
    assert info.value.result is bad


def test_crc32c_of_reusable_buffers() -> None:
    """The engine hands checksum code bytearrays and views of them (its part
    buffers); google-crc32c's C code accepts only bytes."""
    google_crc32c = pytest.importorskip("google_crc32c")
    from synxfer.engine.parts import checksum_of

    data = random.Random(5).randbytes(3 * (1 << 20) + 17)
    expected = google_crc32c.value(data)
    for buf in (data, bytearray(data), memoryview(bytearray(data))):
        checksum = checksum_of("crc32c", buf)
        assert checksum is not None
        assert checksum.value == base64.b64encode(expected.to_bytes(4, "big")).decode()
