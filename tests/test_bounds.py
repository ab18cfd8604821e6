"""The scheduler's limits, observed from the server side and from /proc.

A counting middleware in front of moto measures requests in flight; each data
request is held ``delay`` seconds so concurrency builds up to whatever the
client allows. Each test checks the bound is *reached* (so the test can see a
violation) and never exceeded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest

import synxfer
from synxfer import MiB
from synxfer_servers.s3 import CountingMotoServer, counting_moto_server

from .conftest import PART


@pytest.fixture(scope="module")
def counting() -> Iterator[CountingMotoServer]:
    with counting_moto_server(delay=0.05) as server:
        boto3.client("s3", endpoint_url=server.endpoint_url).create_bucket(Bucket="bounds")
        yield server


def _open_files_under(root: Path) -> int:
    """File descriptors of this process that point below ``root``."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        n += target.startswith(str(root))
    return n


async def _run(
    server: CountingMotoServer,
    config: synxfer.TransferConfig,
    op: Callable[[synxfer.Client], object],
    watch: Path,
) -> tuple[synxfer.TransferResult, int, int]:
    """Run ``op``; returns its result, peak open files under ``watch``, budget peak."""
    peak_fds = 0

    def on_event(_: synxfer.Event) -> None:
        nonlocal peak_fds
        peak_fds = max(peak_fds, _open_files_under(watch))

    server.reset()
    async with synxfer.Client(config, endpoint_url=server.endpoint_url, on_event=on_event) as c:
        result = await op(c)  # type: ignore[misc]
        peak_budget = c._engine.scheduler.budget.peak
    assert isinstance(result, synxfer.TransferResult)
    assert result.ok, result
    return result, peak_fds, peak_budget


async def test_parts_in_flight_never_exceed_max_threads(
    counting: CountingMotoServer, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    src = make_tree({f"f{i}": 2 * PART + 1 for i in range(4)})  # 3 parts each
    # A generous memory budget, so only max_threads limits the parts in flight.
    config = synxfer.TransferConfig(
        max_threads=3, max_files=2, part_size=PART, multipart_threshold=PART, memory_budget=64 * MiB
    )
    _, fds, _ = await _run(counting, config, lambda c: c.sync_to(src, "s3://bounds/up"), src)
    up = counting.snapshot()
    assert up.max_concurrent_part_requests == 3
    assert up.max_concurrent_requests <= 3
    assert up.max_files_in_flight == 2
    assert 1 <= fds <= 2
    assert up.ops["upload_part"] == 12

    dst = tmp_path / "dst"
    _, fds, _ = await _run(counting, config, lambda c: c.sync_from("s3://bounds/up", dst), dst)
    down = counting.snapshot()
    assert down.max_concurrent_part_requests == 3
    assert down.max_concurrent_requests <= 3
    assert down.max_files_in_flight <= 2
    assert 1 <= fds <= 2


async def test_memory_budget_bounds_parts_in_flight(
    counting: CountingMotoServer, make_tree: Callable[..., Path]
) -> None:
    src = make_tree({f"g{i}": 3 * PART for i in range(3)})
    config = synxfer.TransferConfig(
        max_threads=6, part_size=PART, multipart_threshold=PART, memory_budget=2 * PART
    )
    _, _, peak = await _run(counting, config, lambda c: c.sync_to(src, "s3://bounds/mem"), src)
    stats = counting.snapshot()
    assert peak == 2 * PART
    assert stats.max_concurrent_part_requests == 2


async def test_files_in_flight_never_exceed_max_files(
    counting: CountingMotoServer, make_tree: Callable[..., Path]
) -> None:
    src = make_tree({f"small/{i:03d}": 100 for i in range(24)})
    config = synxfer.TransferConfig(max_threads=8, max_files=3)
    _, fds, _ = await _run(counting, config, lambda c: c.sync_to(src, "s3://bounds/small"), src)
    stats = counting.snapshot()
    assert stats.max_files_in_flight == 3
    assert stats.max_concurrent_part_requests == 3
    assert fds <= 3
    assert stats.ops["put_object"] == 24


async def test_ten_thousand_files_keep_descriptors_and_memory_bounded(tmp_path: Path) -> None:
    """10,000 files through the file:// backend: source descriptors never exceed
    max_files, all descriptors stay within a constant per file in flight, and
    file data in memory stays within the budget."""
    src = tmp_path / "src"
    for d in range(100):
        (src / f"d{d:02d}").mkdir(parents=True)
        for f in range(100):
            (src / f"d{d:02d}" / f"f{f:02d}").write_bytes(b"x" * (d + f))
    config = synxfer.TransferConfig(max_threads=4, max_files=8)
    baseline = len(os.listdir("/proc/self/fd"))
    peak_src = peak_all = events = 0

    def on_event(e: synxfer.Event) -> None:
        nonlocal peak_src, peak_all, events
        events += 1
        if events % 7 == 0:  # sample: listing /proc for every event would dominate
            peak_src = max(peak_src, _open_files_under(src))
            peak_all = max(peak_all, len(os.listdir("/proc/self/fd")))

    async with synxfer.Client(config, on_event=on_event) as c:
        r = await c.sync_to(src, f"file://{tmp_path}/remote")
        peak_budget = c._engine.scheduler.budget.peak
    assert r.ok
    assert r.files_transferred == 10_000
    assert 1 <= peak_src <= config.max_files
    assert peak_all - baseline <= 3 * config.max_files + 16
    assert peak_budget <= config.memory_budget
