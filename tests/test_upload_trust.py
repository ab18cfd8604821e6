"""Uploads store the bytes sent, whatever the server verifies (issue 33).

Every test runs against servers as they ship (``s3_world``: stock moto,
SeaweedFS with auth, Ceph RGW), with a fault proxy in front that inverts
one byte of some request bodies (``Fault.CORRUPT_REQUEST``) -- a bit flipped
on the way. Stock moto verifies nothing, RGW verifies Content-MD5 but not
``x-amz-checksum-*``, SeaweedFS verifies both: synxfer must store the right
bytes on all three, or fail the file, never exit 0 with wrong bytes.

The resume tests interrupt the CLI (SIGINT, kill -9) half-way through an
upload to servers whose ListParts lists no part checksums, and count the
request body bytes the server received in both runs (the proxy's
``body_bytes``).
"""

from __future__ import annotations

import hashlib
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

import synxfer
from synxfer import MiB
from synxfer.engine.journal import Journal
from synxfer_s3._trust import endpoint_trust
from synxfer_servers.faultproxy import Fault, FaultProxy

from .conftest import PART, SMALL, CountingLayer

SEED = 33


def _s3(world: Any) -> Any:
    """boto3, straight to the server (not through the proxy)."""
    return world.admin()


def _objects(world: Any, bucket: str) -> dict[str, bytes]:
    s3 = _s3(world)
    out: dict[str, bytes] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            out[item["Key"]] = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
    return out


def _uploads(world: Any, bucket: str) -> list[dict[str, Any]]:
    return list(_s3(world).list_multipart_uploads(Bucket=bucket).get("Uploads", []))


@pytest.fixture
def world_env(s3_world: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``s3_world`` with its credentials in this process's environment."""
    s3_world.apply(monkeypatch)
    return s3_world


def _tree(root: Path, big: int) -> dict[str, bytes]:
    """60 small files (1 B .. 300 KiB) and ``big.bin`` of ``big`` bytes."""
    rng = random.Random(SEED)
    files = {
        f"d{i % 6}/f{i:02d}": rng.randbytes(rng.choice([1, 900, 40_000, 300_000]))
        for i in range(60)
    }
    files["big.bin"] = rng.randbytes(big)
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


# -- the proxy's request-body fault -------------------------------------------------


async def test_corrupt_request_inverts_one_byte_of_put_bodies(
    stock_moto: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Fault.CORRUPT_REQUEST`` inverts exactly one byte of a PUT body (the
    head untouched); a body-less request is never hit; body_bytes counts
    what was forwarded."""
    from synxfer.backend import BackendOptions
    from synxfer_s3._backend import S3Backend

    url = stock_moto.endpoint_url
    boto3.client("s3", endpoint_url=url).create_bucket(Bucket="corrupt-req")
    data = random.Random(1).randbytes(50_000)
    async with FaultProxy(url, rate=1.0, faults={Fault.CORRUPT_REQUEST: 1.0}, seed=SEED) as proxy:
        async with S3Backend("corrupt-req", BackendOptions(endpoint_url=proxy.url)) as b:
            await b.wire.put_object("corrupt-req", "k", data)  # no checksum: stored as is
            await b.wire.head_object("corrupt-req", "k")
        stats = proxy.snapshot()
    stored = boto3.client("s3", endpoint_url=url).get_object(Bucket="corrupt-req", Key="k")
    body = stored["Body"].read()
    diff = [i for i in range(len(data)) if body[i] != data[i]]
    assert len(body) == len(data)
    assert len(diff) == 1
    assert body[diff[0]] == data[diff[0]] ^ 0xFF
    assert stats.corrupted == 1
    assert stats.faults == {"corrupt-request": 1}
    assert stats.body_bytes == len(data)


# -- nothing corrupt is stored ---------------------------------------------------------


async def test_a_tree_through_flipped_put_bodies_is_stored_right(
    world_env: Any, tmp_path: Path
) -> None:
    """One byte inverted in 30 % of PUT bodies: every object holds exactly
    the bytes of its file, none is missing, the run reports no failure.

    What the endpoint verifies was learned from its first answers:
    SeaweedFS echoes the CRC32C it verified (bodies then carry CRC32C
    alone); stock moto and Ceph RGW do not (every body carries Content-MD5
    and is checked by its ETag)."""
    world = world_env
    bucket = world.new_bucket()
    src = tmp_path / "src"
    files = _tree(src, 21 * MiB)  # 5 parts of 5 MiB
    # Quick retries: the test is about what is stored, not about backoff.
    retry = synxfer.RetryPolicy(attempts=8, initial_delay=0.01, max_delay=0.1)
    config = SMALL.evolve(state_dir=str(tmp_path / "state"), retry=retry)
    async with FaultProxy(
        world.endpoint_url,
        rate=0.3,
        faults={Fault.CORRUPT_REQUEST: 1.0},
        methods={"PUT"},
        seed=SEED,
    ) as proxy:
        async with synxfer.Client(config, endpoint_url=proxy.url) as c:
            r = await c.sync_to(src, f"s3://{bucket}/t")
        stats = proxy.snapshot()
        verdict = endpoint_trust(proxy.url).verdict
    assert stats.corrupted >= 10, stats  # the proxy did flip bytes
    stored = _objects(world, bucket)
    wrong = [name for name in files if stored.get(f"t/{name}", files[name]) != files[name]]
    assert wrong == []  # 0 stored with wrong bytes
    assert sorted(stored) == sorted(f"t/{name}" for name in files)  # 0 missing
    assert r.ok, r.failures
    assert _uploads(world, bucket) == []
    assert verdict == ("verifies" if world.name == "seaweedfs" else "not-verifying")


async def test_a_put_never_stored_right_fails_and_leaves_no_object(
    stock_moto: Any, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    """Every attempt corrupted on a server that verifies nothing: the file
    fails naming what happened (and the option for stores whose ETags are
    no MD5s), and the wrong object each attempt stored is deleted."""
    url = stock_moto.endpoint_url
    boto3.client("s3", endpoint_url=url).create_bucket(Bucket="never")
    src = make_tree({"one": 5000})
    retry = synxfer.RetryPolicy(attempts=3, initial_delay=0.0, max_delay=0.0)
    config = SMALL.evolve(resume=False, retry=retry)
    async with FaultProxy(
        url, rate=1.0, faults={Fault.CORRUPT_REQUEST: 1.0}, methods={"PUT"}, seed=SEED
    ) as proxy:
        async with synxfer.Client(config, endpoint_url=proxy.url) as c:
            r = await c.sync_to(src, "s3://never/p")
        assert proxy.snapshot().corrupted == 3
    assert r.files_failed == 1
    error = r.failures[0].error
    assert "stored other bytes than those sent" in error
    assert "s3.check_etag=false" in error
    assert "Contents" not in boto3.client("s3", endpoint_url=url).list_objects_v2(Bucket="never")


@pytest.mark.parametrize(
    ("sse", "etag", "stored_ok"),
    [
        (None, "MD5", True),
        (None, "0" * 32, False),  # another MD5: other bytes were stored
        ("AES256", "0" * 32, False),  # SSE-S3 ETags are MD5s
        ("aws:kms", "0" * 32, True),  # SSE-KMS and SSE-C ETags are not
        ("SSE-C", "0" * 32, True),
        (None, "not-an-md5-etag", True),  # nothing to compare
    ],
)
async def test_which_answers_prove_the_stored_bytes(
    sse: str | None, etag: str, stored_ok: bool
) -> None:
    """The ETag proof, answer by answer (no server here encrypts with KMS or
    a customer key, so the answers are made up): an ETag is compared with
    the MD5 of the bytes sent unless the object is SSE-KMS/SSE-C encrypted
    or the ETag is no MD5; an echoed CRC32C equal to the one sent proves the
    bytes whatever the ETag, and teaches the endpoint's verdict."""
    from synxfer.backend import BackendOptions
    from synxfer_s3._backend import S3Backend
    from synxfer_s3._parts import crc32c_b64
    from synxfer_s3._trust import EndpointTrust, StoredOtherBytes
    from synxfer_s3._wire import b64md5

    data = b"the bytes sent"
    md5 = b64md5(data)
    etag = hashlib.md5(data).hexdigest() if etag == "MD5" else etag
    backend = S3Backend("b", BackendOptions(endpoint_url="http://127.0.0.1:9"))
    backend._trust = trust = EndpointTrust("http://127.0.0.1:9")
    sums = {"crc32c": crc32c_b64(data)}
    if stored_ok:
        await backend._check_stored("PutObject", "k", data, md5, sums, (etag, {}, sse))
    else:
        with pytest.raises(StoredOtherBytes, match="stored other bytes than those sent"):
            await backend._check_stored("PutObject", "k", data, md5, sums, (etag, {}, sse))
    assert trust.verdict == "not-verifying"
    trust.verdict = "unknown"
    await backend._check_stored("PutObject", "k", data, None, sums, (etag, sums, sse))
    assert trust.verdict == "verifies"


# -- resume where ListParts lists no part checksums ----------------------------------------


def _cli(proxy_url: str, src: Path, url: str) -> list[str]:
    return [
        sys.executable, "-m", "synxfer.cli.main", "sync", str(src), url,
        "--endpoint-url", proxy_url, "--part-size", "5MiB", "--max-threads", "3",
        "--bwlimit", "16MiB", "-q",
    ]  # fmt: skip


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "kill-9"])
def test_interrupted_upload_resumes_without_listed_checksums(
    s3_world: Any, how: signal.Signals, tmp_path: Path
) -> None:
    """Interrupted once a third of the bytes arrived (the parts whole in the
    proxy's hands then still arrive: the server has about half), the same
    command again sends at most 5 % more than the data (issue 33: 38.6 %
    when every part was re-sent)."""
    world = s3_world
    bucket = world.new_bucket()
    src = tmp_path / "src"
    rng = random.Random(7)
    files = {f"s/{i:02d}": rng.randbytes(128 * 1024) for i in range(10)}
    files["big.bin"] = rng.randbytes(20 * MiB)  # 4 parts
    for name, data in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    total = sum(map(len, files.values()))
    env = {**world.environ(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    with FaultProxy(world.endpoint_url, rate=0.0) as proxy:
        cmd = _cli(proxy.url, src, f"s3://{bucket}/p")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while proxy.snapshot().body_bytes < total // 3:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(how)
        proc.communicate(timeout=60)
        before = proxy.snapshot().body_bytes
        assert before < total
        rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        sent = proxy.snapshot().body_bytes
    stored = _objects(world, bucket)
    assert stored == {f"p/{n}": d for n, d in files.items()}
    assert _uploads(world, bucket) == []
    extra = sent - total
    assert extra <= 0.05 * total, f"re-sent {extra / total:.1%} extra ({extra} bytes)"


# -- a journal entry goes only with its upload -------------------------------------------


async def test_a_refused_abort_keeps_the_journal_entry_for_the_rerun(
    stock_moto: Any, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    """Credentials rejected (403) in the middle of a multipart upload: the
    abort is refused too, so the upload stays on the server, and so does its
    journal entry; the healthy rerun resumes it instead of starting over
    (issue 33: 77.6 % extra, and the old upload orphaned)."""
    url = stock_moto.endpoint_url
    boto3.client("s3", endpoint_url=url).create_bucket(Bucket="refused")
    src = make_tree({"big.bin": 5 * PART + 11})  # 6 parts
    config = SMALL.evolve(state_dir=str(tmp_path / "state"), max_threads=1)

    def denied(req: Any) -> bool:
        number = int(req.query.get("partNumber", "0") or 0)
        return (req.op == "upload_part" and number >= 3) or req.op == "abort_multipart"

    async with FaultProxy(
        url, rate=1.0, faults={Fault.ACCESS_DENIED: 1.0}, match=denied, seed=SEED
    ) as proxy:
        async with synxfer.Client(config, endpoint_url=proxy.url) as c:
            r = await c.sync_to(src, "s3://refused/p")
        assert not r.ok
        assert "AccessDenied" in r.failures[0].error
        dest = "s3://refused/p/big.bin"
        entry = Journal(tmp_path / "state").upload_get(dest)
        assert entry is not None, "the entry went, though its upload is still on the server"
        (pending,) = boto3.client("s3", endpoint_url=url).list_multipart_uploads(Bucket="refused")[
            "Uploads"
        ]
        assert pending["UploadId"] == entry.upload_id

        proxy.configure(rate=0.0)  # the credentials work again
        counts: Counter[str] = Counter()
        async with synxfer.Client(
            config, endpoint_url=proxy.url, layers=[lambda b: CountingLayer(b, counts)]
        ) as c:
            r = await c.sync_to(src, "s3://refused/p")
    assert r.ok, r.failures
    assert counts["create_multipart"] == 0  # the same upload, continued
    assert counts["upload_part"] == 4  # parts 3..6; 1 and 2 were kept
    assert r.bytes_transferred == 3 * PART + 11
    s3 = boto3.client("s3", endpoint_url=url)
    assert s3.list_multipart_uploads(Bucket="refused").get("Uploads", []) == []
    body = s3.get_object(Bucket="refused", Key="p/big.bin")["Body"].read()
    assert body == (src / "big.bin").read_bytes()
    assert Journal(tmp_path / "state").upload_get(dest) is None


async def test_an_abandoned_upload_is_forgotten_only_once_aborted(
    stock_moto: Any, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    """A journaled upload whose file is gone is aborted by the next sync of
    its prefix; while the abort is refused, its entry stays (to be aborted by
    a later run), instead of being dropped with the upload left behind."""
    url = stock_moto.endpoint_url
    boto3.client("s3", endpoint_url=url).create_bucket(Bucket="abandoned")
    src = make_tree({"big.bin": 2 * PART + 1, "small": 10})
    config = SMALL.evolve(state_dir=str(tmp_path / "state"), max_threads=1)
    dest = "s3://abandoned/p/big.bin"

    def part_two(req: Any) -> bool:  # the first run fails at part 2, its abort too
        return req.query.get("partNumber") == "2" or req.op == "abort_multipart"

    async with FaultProxy(
        url, rate=1.0, faults={Fault.ACCESS_DENIED: 1.0}, match=part_two, seed=SEED
    ) as proxy:
        async with synxfer.Client(config, endpoint_url=proxy.url) as c:
            assert not (await c.sync_to(src, "s3://abandoned/p")).ok
            (src / "big.bin").unlink()  # the user gave up on that file
            assert (await c.sync_to(src, "s3://abandoned/p")).ok
        assert Journal(tmp_path / "state").upload_get(dest) is not None
        assert len(_uploads_at(url, "abandoned")) == 1
        proxy.configure(rate=0.0)
        async with synxfer.Client(config, endpoint_url=proxy.url) as c:
            assert (await c.sync_to(src, "s3://abandoned/p")).ok
    assert Journal(tmp_path / "state").upload_get(dest) is None
    assert _uploads_at(url, "abandoned") == []


def _uploads_at(url: str, bucket: str) -> list[Any]:
    s3 = boto3.client("s3", endpoint_url=url)
    return list(s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []))
