"""Values that cannot work are refused at start (issue 11, item 6).

A part size above the store's largest part is a :class:`~synxfer.ConfigError`
when the client opens the backend (the first moment its limits are known),
before any request for a file; the CLI exits 2 with a message naming the
option and the limit. A part size below the store's smallest part is raised
to it, with a warning saying so. Values that are wrong whatever the store
(zero threads, negative sizes) are refused by :class:`~synxfer.TransferConfig`
or by the CLI's argument parser.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

import synxfer
from synxfer import GiB, MiB, RetryPolicy, TransferConfig
from synxfer.backend import Capabilities
from synxfer.engine.parts import plan_part_size

from .conftest import SMALL

TiB = 1024 * GiB


# -- TransferConfig: wrong whatever the store -------------------------------------


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"max_threads": 0}, "max_threads"),
        ({"max_threads": -3}, "max_threads"),
        ({"max_files": -1}, "max_files"),
        ({"part_size": 0}, "part_size"),
        ({"part_size": -5 * MiB}, "part_size"),
        ({"multipart_threshold": 0}, "multipart_threshold"),
        ({"memory_budget": -1}, "memory_budget"),
        ({"min_throughput": -1}, "min_throughput"),
        ({"read_timeout": 0}, "read_timeout"),
        ({"connect_timeout": -1.0}, "connect_timeout"),
    ],
)
def test_config_refuses_impossible_values(changes: dict[str, Any], named: str) -> None:
    with pytest.raises(synxfer.ConfigError, match=named):
        TransferConfig(**changes)


def test_retry_policy_refuses_impossible_values() -> None:
    with pytest.raises(synxfer.ConfigError, match="attempts"):
        RetryPolicy(attempts=0)
    with pytest.raises(synxfer.ConfigError, match="delays"):
        RetryPolicy(initial_delay=-1.0)


# -- part sizing against the store's limits -----------------------------------------

S3 = Capabilities()  # S3's limits: parts of 5 MiB .. 5 GiB, 10 000 of them


def test_part_size_growth_stops_at_the_largest_part_when_that_fits() -> None:
    """Doubling from 8 MiB passes 5 GiB for a 40 TiB object (4 GiB parts are
    too few, 8 GiB too big): 5 GiB parts fit, and are used."""
    assert plan_part_size(40 * TiB, 8 * MiB, S3) == 5 * GiB
    assert plan_part_size(40 * TiB, 3 * GiB, S3) == 5 * GiB
    assert plan_part_size(29 * TiB, 3 * GiB, S3) == 3 * GiB  # fits as asked
    with pytest.raises(synxfer.ConfigError, match="exceeds this backend's limit"):
        plan_part_size(10_000 * 5 * GiB + 1, 8 * MiB, S3)


def test_part_size_above_the_largest_part_says_so() -> None:
    with pytest.raises(synxfer.ConfigError, match="above this backend's largest part"):
        plan_part_size(1, 6 * GiB, S3)


def _bucket_keys(endpoint: str, bucket: str) -> list[str]:
    s3 = boto3.client("s3", endpoint_url=endpoint)
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


async def test_client_refuses_a_part_size_above_the_stores_largest(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    src = make_tree({"a.bin": 10, "big.bin": 6 * MiB})
    boto3.client("s3", endpoint_url=s3_endpoint).put_object(Bucket=bucket, Key="p/x", Body=b"x")
    config = SMALL.evolve(part_size=6 * GiB, memory_budget=64 * MiB)
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        for attempt in (
            c.sync_to(src, f"s3://{bucket}/p"),
            c.sync_from(f"s3://{bucket}/p", tmp_path / "dst"),
            c.backend(f"s3://{bucket}/p"),
        ):
            with pytest.raises(synxfer.ConfigError) as info:
                await attempt
            message = str(info.value)
            assert "TransferConfig(part_size=...)" in message  # the API's name, not a flag
            assert "--part-size" not in message
            assert "6 GiB" in message
            assert f"s3://{bucket}/" in message
            assert "5 GiB" in message  # the limit
    assert _bucket_keys(s3_endpoint, bucket) == ["p/x"]  # nothing was sent
    assert not (tmp_path / "dst").exists()


async def test_part_size_below_the_stores_smallest_is_raised_with_a_warning(
    bucket: str,
    make_tree: Callable[..., Path],
    s3_endpoint: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    src = make_tree({"big.bin": 12 * MiB})
    config = SMALL.evolve(part_size=1 * MiB)
    caplog.set_level(logging.WARNING, logger="synxfer")
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        assert (await c.sync_to(src, f"s3://{bucket}/p")).ok
        assert (await c.sync_to(src, f"s3://{bucket}/q")).ok  # same backend: no second warning
    notices = [
        r.getMessage() for r in caplog.records if "below the smallest part" in r.getMessage()
    ]
    assert len(notices) == 1
    assert "1 MiB" in notices[0]
    assert "5 MiB" in notices[0]
    assert "TransferConfig(part_size=...)" in notices[0]
    head = boto3.client("s3", endpoint_url=s3_endpoint).head_object(Bucket=bucket, Key="p/big.bin")
    assert head["ETag"].strip('"').endswith("-3")  # 12 MiB in parts of 5 MiB


# -- the CLI: exit 2, a message naming the option and the limit ----------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "synxfer.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_cli_refuses_a_part_size_above_the_stores_largest(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    src = make_tree({"a.bin": 10})
    url = f"s3://{bucket}/p"
    for args in ([str(src), url], [url, str(tmp_path / "dst")]):
        proc = _cli("sync", *args, "--endpoint-url", s3_endpoint, "--part-size", "6GiB")
        assert proc.returncode == 2, proc.stderr
        assert "synxfer: error: " in proc.stderr
        assert "--part-size" in proc.stderr
        assert "5 GiB" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert _bucket_keys(s3_endpoint, bucket) == []


@pytest.mark.parametrize(
    ("option", "value"),
    [("--max-threads", "0"), ("--max-files", "0"), ("--part-size", "-5MiB"), ("--part-size", "0")],
)
def test_cli_refuses_values_wrong_for_any_store(
    option: str, value: str, make_tree: Callable[..., Path], s3_endpoint: str
) -> None:
    src = make_tree({"a.bin": 10})
    proc = _cli("sync", str(src), "s3://b/p", "--endpoint-url", s3_endpoint, f"{option}={value}")
    assert proc.returncode == 2, proc.stderr
    assert option in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_warns_of_a_part_size_below_the_stores_smallest(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str
) -> None:
    src = make_tree({"big.bin": 11 * MiB})
    url = f"s3://{bucket}/p"
    proc = _cli("sync", str(src), url, "--endpoint-url", s3_endpoint, "--part-size", "1MiB", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "below the smallest part" in proc.stderr
    assert "--part-size" in proc.stderr
    assert "5 MiB" in proc.stderr
    assert _bucket_keys(s3_endpoint, bucket) == ["p/big.bin"]
