"""Ranged downloads fetch two adjacent ranges per GET when the budget holds two.

Each GET costs the server and the client a fixed amount; the same bytes in
flight in half as many, twice as long GETs were faster on SeaweedFS
(docs/decisions/0015-two-ranges-per-get.md). A fetch never splits a range,
so it still ends on the upload's part boundaries and every part's checksum
is computed from its slice. moto over HTTP; the GETs are counted by a layer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import synxfer
import synxfer.backend
from synxfer import MiB, TransferConfig
from synxfer.engine.download import fetch_size
from synxfer.engine.parts import Part
from synxfer.engine.verify import group_ranges, plan


def test_fetch_size_is_two_parts_when_the_budget_holds_two_fetches() -> None:
    assert fetch_size(6 * 8 * MiB, 8 * MiB) == 16 * MiB
    assert fetch_size(4 * 8 * MiB, 8 * MiB) == 16 * MiB
    assert fetch_size(3 * 8 * MiB, 8 * MiB) == 8 * MiB  # one 16 MiB fetch at a time: no


def test_group_ranges_merges_adjacent_ranges_up_to_the_limit() -> None:
    ranges = plan(23, 5, None, None).ranges  # 5 5 5 5 3
    assert group_ranges(ranges, 10) == [Part(0, 0, 10), Part(2, 10, 10), Part(4, 20, 3)]
    assert group_ranges(ranges, 7) == ranges  # no two fit: unchanged
    assert group_ranges(ranges, 100) == [Part(0, 0, 23)]


def test_group_ranges_never_bridges_a_gap() -> None:
    """A later pass fetches only the units still in doubt: ranges 0, 1 and 3
    must not become one fetch that also reads range 2 again."""
    ranges = plan(20, 5, None, None).ranges
    todo = [ranges[0], ranges[1], ranges[3]]
    assert group_ranges(todo, 15) == [Part(0, 0, 10), Part(3, 15, 5)]


def test_covering_gives_a_fetch_its_ranges_back() -> None:
    p = plan(23, 5, None, None)
    assert p.covering(Part(2, 10, 10)) == [Part(2, 10, 5), Part(3, 15, 5)]
    assert p.covering(Part(4, 20, 3)) == [Part(4, 20, 3)]
    with pytest.raises(ValueError, match="not a run"):
        p.covering(Part(1, 5, 7))  # ends inside range 2


class _Gets(synxfer.layers.Layer):
    """Records every ranged read: (offset, length)."""

    def __init__(self, inner: synxfer.backend.Backend) -> None:
        super().__init__(inner)
        self.reads: list[tuple[int, int]] = []

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        if op == "read_into":
            self.reads.append((args[1], len(args[2])))
        return await fn(*args)


@pytest.mark.parametrize(
    ("budget", "lengths"),
    [
        (None, [10 * MiB, 5 * MiB + 7]),  # 4 x 5 MiB: fetches of two 5 MiB parts
        (15 * MiB, [5 * MiB, 5 * MiB, 5 * MiB, 7]),  # two 10 MiB fetches do not fit
    ],
    ids=["two-per-get", "small-budget"],
)
async def test_a_multipart_object_comes_in_fetches_of_whole_parts_and_is_verified(
    s3_endpoint: str,
    bucket: str,
    tmp_path: Path,
    budget: int | None,
    lengths: list[int],
) -> None:
    data = os.urandom(3 * 5 * MiB + 7)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f.bin").write_bytes(data)
    up = TransferConfig(max_threads=4, part_size=5 * MiB, multipart_threshold=5 * MiB)
    async with synxfer.Client(up, endpoint_url=s3_endpoint) as client:
        assert (await client.sync_to(tmp_path / "src", f"s3://{bucket}/v")).ok
    gets: list[_Gets] = []

    def record(b: synxfer.backend.Backend) -> synxfer.backend.Backend:
        gets.append(_Gets(b))
        return gets[-1]

    down = up.evolve(memory_budget=budget) if budget else up
    async with synxfer.Client(down, endpoint_url=s3_endpoint, layers=[record]) as client:
        result = await client.sync_from(f"s3://{bucket}/v", tmp_path / "dst")
    assert result.ok, result.failures
    assert result.not_verified == 0  # the parts' CRC32Cs, each from its slice
    assert (tmp_path / "dst" / "f.bin").read_bytes() == data
    assert sorted(gets[0].reads) == [(sum(lengths[:i]), n) for i, n in enumerate(lengths)]


async def test_short_last_fetches_reuse_the_pools_buffers(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    """Each object ends in a shorter fetch: it borrows one of the fetch-sized
    buffers instead of making the pool drop an idle one to allocate its own
    (which then page-faults in again for the next object's first fetch)."""
    (tmp_path / "src").mkdir()
    for i in range(2):  # 5 ranges of 5 MiB and a half one: fetches of 10, 10 and 7.5 MiB
        (tmp_path / "src" / f"f{i}.bin").write_bytes(os.urandom(27 * MiB + MiB // 2))
    config = TransferConfig(max_threads=4, max_files=1, part_size=5 * MiB, memory_budget=20 * MiB)
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as client:
        assert (await client.sync_to(tmp_path / "src", f"s3://{bucket}/t")).ok
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as client:
        result = await client.sync_from(f"s3://{bucket}/t", tmp_path / "dst")
        pool = client._engine.scheduler.buffers
    assert result.ok, result.failures
    for i in range(2):
        name = f"f{i}.bin"
        assert (tmp_path / "dst" / name).read_bytes() == (tmp_path / "src" / name).read_bytes()
    # Two 10 MiB buffers fill the budget; every fetch after them reuses them.
    assert pool.allocated == 2
