"""The bandwidth limit: rates as text, the scheduler's token bucket, and its use.

No timing assertions: the bucket's accounting is checked with an injected
clock (bytes granted by each moment), and the end-to-end checks count the
bytes charged against the bytes moved.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

import synxfer
from synxfer import ConfigError, MiB, TransferConfig
from synxfer.cli.main import build_parser, main
from synxfer.engine.parts import split
from synxfer.engine.scheduler import Lease, Scheduler, TokenBucket

from .conftest import SMALL, write_tree

# -- rates as text ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("16M/s", 16 * MiB),
        ("1MiB/s", MiB),
        ("10MB/s", 10 * MiB),  # aws-cli: MB is MiB
        ("16M", 16 * MiB),
        ("1048576", MiB),
        ("800KB/s", 800 * 1024),
        ("800Kb/s", 800 * 1024 // 8),  # aws-cli: a lowercase b after a unit is bits
        ("100Mbit/s", 100 * MiB // 8),
        ("8Mbps", MiB),
        ("1.5G/s", 1536 * MiB),
        ("512 KiB/s", 512 * 1024),
        ("5B/s", 5),
    ],
)
def test_parse_rate(text: str, rate: int) -> None:
    assert synxfer.parse_rate(text) == rate


@pytest.mark.parametrize("text", ["", "fast", "10X/s", "-1M/s", "0", "1bit/s", "M/s"])
def test_parse_rate_refuses_with_the_text_named(text: str) -> None:
    with pytest.raises(ValueError, match="invalid rate") as info:
        synxfer.parse_rate(text)
    assert repr(text) in str(info.value)


def test_cli_bwlimit_option() -> None:
    parser = build_parser()
    assert parser.parse_args(["--bwlimit", "16M/s", "ls", "s3://b"]).bwlimit == 16 * MiB
    assert parser.parse_args(["ls", "s3://b", "--bwlimit", "off"]).bwlimit == 0
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["ls", "s3://b", "--bwlimit", "lots"])
    assert info.value.code == 2


def test_config_bwlimit() -> None:
    assert TransferConfig().bwlimit == 0
    assert TransferConfig(bwlimit=MiB).bwlimit == MiB
    with pytest.raises(ConfigError, match="bwlimit"):
        TransferConfig(bwlimit=-1)


# -- the token bucket's accounting, with an injected clock -----------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _assert_within_limit(grants: list[tuple[float, int]], rate: int, burst: int) -> None:
    """By every grant's time t, at most ``burst + rate * t`` bytes were granted."""
    total = 0
    for when, nbytes in sorted(grants):
        total += nbytes
        assert total <= burst + rate * when + 1e-6, (when, total)


def test_bucket_paces_one_stream_of_parts() -> None:
    """One file's parts, each sent when granted: N bytes take (N - burst) / rate."""
    clock = Clock()
    rate, burst = 1 * MiB, 1 * MiB
    bucket = TokenBucket(rate, burst, clock=clock)
    grants = []
    for part in split(20 * MiB + 123, 1 * MiB):
        clock.now += bucket.charge(part.length)  # wait, then send instantly
        grants.append((clock.now, part.length))
    _assert_within_limit(grants, rate, burst)
    assert bucket.granted == 20 * MiB + 123
    assert clock.now == pytest.approx((20 * MiB + 123 - burst) / rate)
    # Bytes granted in each one-second interval after the burst: the rate.
    per_second: dict[int, int] = {}
    for when, nbytes in grants:
        per_second[int(when - 1e-9)] = per_second.get(int(when - 1e-9), 0) + nbytes
    assert all(n <= rate + burst for n in per_second.values())
    assert max(per_second) >= 18


def test_bucket_shares_one_rate_among_concurrent_charges() -> None:
    """Many files charging at once (both directions alike) share one rate, in order."""
    clock = Clock()
    rate = 4 * MiB
    bucket = TokenBucket(rate, clock=clock)  # burst: one second's worth
    rng = random.Random(7)
    sizes = [rng.randint(1, 3 * MiB) for _ in range(200)]
    grants = []
    for i, size in enumerate(sizes):
        clock.now = i * 0.01  # all asked for within two seconds
        grants.append((clock.now + bucket.charge(size), size))
    _assert_within_limit(grants, rate, bucket.burst)
    waits = [when for when, _ in grants]
    assert waits == sorted(waits)  # granted in the order asked
    assert waits[-1] == pytest.approx((sum(sizes) - bucket.burst) / rate)


def test_bucket_refills_only_up_to_the_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(1000, 500, clock=clock)
    assert bucket.charge(500) == 0  # the initial burst
    clock.now = 100.0  # a long pause earns no more than the burst
    assert bucket.charge(500) == 0
    assert bucket.charge(1000) == pytest.approx(1.0)


async def test_bucket_acquire_refunds_a_cancelled_wait() -> None:
    bucket = TokenBucket(1000, 0)
    task = asyncio.create_task(bucket.acquire(100_000))  # would wait 100 s
    await asyncio.sleep(0)
    assert bucket.granted == 100_000
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert bucket.granted == 0
    assert bucket.charge(0) == 0  # the debt went with it


def test_bucket_refuses_a_zero_rate() -> None:
    with pytest.raises(ValueError, match="bandwidth"):
        TokenBucket(0)


async def test_scheduler_charges_every_lease() -> None:
    """Parts (map_parts) and whole files (reserve) are charged their bytes."""
    scheduler = Scheduler(TransferConfig(max_threads=2, part_size=MiB, bwlimit=10**12))
    try:
        assert scheduler.bandwidth is not None
        seen = []

        async def work(part: object, lease: Lease) -> None:
            seen.append(lease.nbytes)

        await scheduler.map_parts(split(5 * MiB + 7, MiB), work)
        async with scheduler.reserve(1234):
            pass
        assert scheduler.bandwidth.granted == 5 * MiB + 7 + 1234 == sum(seen) + 1234
    finally:
        scheduler.close()
    unlimited = Scheduler(TransferConfig(max_threads=2))
    try:
        assert unlimited.bandwidth is None
    finally:
        unlimited.close()


# -- end to end: the limit is applied to what moves ------------------------------------


async def test_transfer_charges_every_byte_both_ways(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    files = {"big.bin": 11 * MiB + 5, "small.txt": 1000, "sub/c.bin": 70_000, "empty": 0}
    total = sum(files.values())
    src = tmp_path / "src"
    write_tree(src, files)
    config = SMALL.evolve(bwlimit=10**12)  # far above the link: counts only
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as client:
        bandwidth = client._engine.scheduler.bandwidth
        assert bandwidth is not None
        up = await client.sync_to(src, f"s3://{bucket}/p/")
        assert up.ok
        assert bandwidth.granted == up.bytes_uploaded == total
        down = await client.sync_from(f"s3://{bucket}/p/", tmp_path / "dst")
        assert down.ok
        assert bandwidth.granted == 2 * total
        assert down.bytes_downloaded == total


def test_cli_bwlimit_reaches_the_scheduler(
    s3_endpoint: str, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(tmp_path / "src", {"a.bin": 300_000, "b.bin": 5})
    charged: list[tuple[int, int]] = []
    real = TokenBucket.charge

    def charge(self: TokenBucket, nbytes: int) -> float:
        charged.append((self.rate, nbytes))
        return real(self, nbytes)

    monkeypatch.setattr(TokenBucket, "charge", charge)
    code = main(
        [
            "cp",
            "--recursive",
            str(tmp_path / "src"),
            f"s3://{bucket}/x/",
            "--endpoint-url",
            s3_endpoint,
            "--bwlimit",
            "1G/s",
            "--quiet",
        ]
    )
    assert code == 0
    assert sorted(charged) == [(1024 * MiB, 5), (1024 * MiB, 300_000)]
