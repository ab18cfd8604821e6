"""A listing body with one byte flipped on the way is retried, not fatal (issue 33).

A byte inverted in an XML answer (``b ^ 0xFF``) makes it, almost always,
no UTF-8 and so no XML: the answer was damaged on the way, like a reset
connection, and the same request again gets a good one. Stock moto as it
ships, a :class:`FaultProxy` flipping a byte of the first ListObjectsV2
answer's body.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

import synxfer
from synxfer_servers.faultproxy import Fault, FaultProxy

from .conftest import SMALL


@pytest.fixture
def world(stock_moto: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    return str(stock_moto.endpoint_url)


async def test_a_flipped_byte_in_a_listing_is_retried(world: str, tmp_path: Path) -> None:
    s3 = boto3.client("s3", endpoint_url=world)
    s3.create_bucket(Bucket="flipped-listing")
    keys = [f"p/k{i:02d}" for i in range(20)]
    for key in keys:
        s3.put_object(Bucket="flipped-listing", Key=key, Body=key.encode())
    retry = synxfer.RetryPolicy(attempts=4, initial_delay=0.0, max_delay=0.0)
    config = SMALL.evolve(retry=retry, state_dir=str(tmp_path / "state"))
    async with FaultProxy(
        world,
        rate=1.0,
        faults={Fault.CORRUPT: 1.0},
        ops={"list_objects"},
        max_faults=1,
        seed=33,
    ) as proxy:
        async with synxfer.Client(config, endpoint_url=proxy.url) as c:
            r = await c.sync_from("s3://flipped-listing/p/", tmp_path / "out")
        stats = proxy.snapshot()
    assert stats.corrupted == 1  # the first listing was damaged
    assert r.ok, r.failures
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [k[2:] for k in keys]
