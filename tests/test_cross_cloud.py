"""s3 → gs and back through the engine: moto and the GCS emulator on 127.0.0.1.

The GCS side runs behind :class:`~synxfer_servers.gcs.GcsFront`, which makes
gcp-storage-emulator answer as GCS does (``x-goog-hash``, generations, …).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

import synxfer
import synxfer.backend
from synxfer import MiB
from synxfer.layers import Layer
from synxfer_servers.gcs import GcsEmulator, GcsFront, create_bucket
from synxfer_servers.process import run_python_module_measured

from .conftest import PART, SMALL, tree

pytest.importorskip("google_crc32c")

FILES = {"a.txt": 10, "d/big.bin": 2 * PART + 17, "d/e/empty": 0, "ünï/x": 3}


@pytest.fixture(scope="module")
def gcs_front() -> Iterator[GcsFront]:
    with GcsEmulator() as emulator, GcsFront(emulator.endpoint_url) as front:
        yield front


@pytest.fixture
def gs_bucket(gcs_front: GcsFront, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_front.endpoint_url)
    name = f"g-{uuid.uuid4().hex[:16]}"
    create_bucket(gcs_front.endpoint_url, name)
    return name


def _client(s3_endpoint: str, **kw: Any) -> synxfer.Client:
    # The S3 endpoint for s3:// only; gs:// finds the emulator through the env.
    return synxfer.Client(SMALL, endpoints={"s3": s3_endpoint}, **kw)


async def test_s3_to_gs_and_back(
    bucket: str,
    gs_bucket: str,
    make_tree: Callable[..., Path],
    s3_endpoint: str,
    tmp_path: Path,
) -> None:
    src = make_tree(FILES)
    total = sum(FILES.values())
    async with _client(s3_endpoint) as c:
        await c.sync_to(src, f"s3://{bucket}/p")
        r = await c.sync(f"s3://{bucket}/p", f"gs://{gs_bucket}/q")
        assert r.ok, r.failures
        assert (r.files_transferred, r.bytes_downloaded, r.bytes_uploaded) == (4, total, total)
        # The copy kept the source times: a download from GCS matches the tree.
        await c.sync_from(f"gs://{gs_bucket}/q", tmp_path / "from-gs")
        assert tree(tmp_path / "from-gs") == tree(src)
        # Nothing to do the second time, in either direction of comparison.
        again = await c.sync(f"s3://{bucket}/p", f"gs://{gs_bucket}/q")
        assert (again.files_transferred, again.files_skipped) == (0, 4)
        # And back: gs -> s3 under another prefix.
        back = await c.sync(f"gs://{gs_bucket}/q", f"s3://{bucket}/back")
        assert back.ok
        assert back.files_transferred == 4
        gs, _ = await c.backend(f"gs://{gs_bucket}/")
        info = await gs.stat("q/d/big.bin")
    assert "crc32c" in info.checksums  # the composite object's CRC, reconciled by the copy
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    for rel, size in FILES.items():
        body = s3.get_object(Bucket=bucket, Key=f"back/{rel}")["Body"].read()
        assert body == (src / rel).read_bytes()
        assert len(body) == size
    assert not list(tmp_path.rglob("*.synxfer-part"))


class _MisreportCrc(Layer):
    """A destination that reports a whole-object CRC32C it was not sent."""

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        result = await fn(*args)
        if op in ("stat", "put", "complete_multipart") and isinstance(result, synxfer.ObjectInfo):
            bad = base64.b64encode(b"\0\0\0\0").decode()
            return dataclasses.replace(result, checksums={"crc32c": bad})
        return result


@pytest.mark.parametrize("size", [1000, 2 * PART + 3], ids=["single", "composite"])
async def test_destination_checksum_mismatch_deletes_the_copy(
    size: int,
    bucket: str,
    gs_bucket: str,
    make_tree: Callable[..., Path],
    s3_endpoint: str,
) -> None:
    src = make_tree({"x": size})
    async with _client(s3_endpoint) as c:
        await c.sync_to(src, f"s3://{bucket}/p")

    def wrap(b: synxfer.backend.Backend) -> synxfer.backend.Backend:
        return _MisreportCrc(b) if b.scheme == "gs" else b

    async with _client(s3_endpoint, layers=[wrap]) as c:
        r = await c.sync(f"s3://{bucket}/p", f"gs://{gs_bucket}/p")
        assert r.files_failed == 1
        assert "CRC32C" in r.failures[0].error
        assert "deleted" in r.failures[0].error
        listed = [i async for i in c.ls(f"gs://{gs_bucket}/", recursive=True)]
    assert listed == []


def test_cli_copies_s3_to_gs_within_the_memory_bound(
    bucket: str, gs_bucket: str, s3_endpoint: str, gcs_front: GcsFront, tmp_path: Path
) -> None:
    """`synxfer cp s3://… gs://…` in a child process: peak RSS within the byte
    budget + 150 MiB, and no temp file anywhere (nothing touches local disk)."""
    size = 48 * MiB
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.put_object(Bucket=bucket, Key="big.bin", Body=os.urandom(size))
    env = {**os.environ, "STORAGE_EMULATOR_HOST": gcs_front.endpoint_url}
    args = [
        "cp", f"s3://{bucket}/big.bin", f"gs://{gs_bucket}/big.bin",
        "--endpoint", f"s3={s3_endpoint}", "--max-threads", "4", "--json",
    ]  # fmt: skip
    run, peak_kib = run_python_module_measured("synxfer.cli.main", args, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    peak_mib = peak_kib / 1024
    budget_mib = 4 * 8  # max_threads * part_size
    assert 0 < peak_mib <= budget_mib + 150, f"peak RSS {peak_mib:.0f} MiB"
    assert list(tmp_path.iterdir()) == []
    summary = run.stdout.strip().splitlines()[-1]
    assert '"bytes_uploaded": 50331648' in summary
