"""Uploads with a chosen checksum resume (issue 38 item 5's gap).

The CLI uploads a 6-part file with ``--checksum-algorithm`` through a
counting proxy, is interrupted (SIGINT) once about two parts reached the
server, and runs again. The journal recorded the algorithm and its type, so
the rerun keeps the parts the server holds whose bytes are the file's now
(no server here lists part checksums: stock moto, SeaweedFS 4.x and Ceph
RGW 16 all omit them, so each kept part is proven by its MD5 ETag) and
sends only the others; the completed object carries the chosen checksum of
the right type. Before this, such an upload was aborted by the rerun and
sent again whole.
"""

from __future__ import annotations

import hashlib
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from synxfer import CompletedPart, MiB
from synxfer.engine.journal import Journal
from synxfer.engine.upload import _vouched
from synxfer_servers.faultproxy import FaultProxy

from ._s3checksums import checksum_value, composite_value
from ._s3server import S3World, admin_client

PART = 5 * MiB
SIZE = 5 * PART + MiB  # 6 parts, the last 1 MiB


def _composite(alg: str, data: bytes) -> str:
    return f"{composite_value(alg, data, PART)}-{-(-len(data) // PART)}"


def _cli(endpoint: str, src: Path, url: str, alg: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "synxfer.cli.main", "cp", str(src), url,
        "--checksum-algorithm", alg, "--endpoint-url", endpoint, "--part-size", "5MiB",
        "--max-threads", "1", *extra,
    ]  # fmt: skip


def _interrupted(cmd: list[str], env: dict[str, str], proxy: FaultProxy, after: int) -> str:
    """Run ``cmd`` and SIGINT it once the server received ``after`` body bytes."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while proxy.snapshot().body_bytes < after:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the first run did not get far enough in 60 s"
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, "the first run was not interrupted"
    return err.decode(errors="replace")


def _admin(world: S3World) -> Any:
    """boto3 to the server, checking no response checksum itself (the test compares bytes)."""
    return admin_client(world, check_checksums=False)


@pytest.fixture
def worlds(request: pytest.FixtureRequest) -> Any:
    def get(name: str) -> S3World:
        if name == "stock-moto":
            moto = request.getfixturevalue("stock_moto")
            return S3World(name, moto.endpoint_url, "testing", "testing-secret-never-printed")
        weed = request.getfixturevalue("seaweed")
        return S3World(name, weed.endpoint_url, weed.access_key, weed.secret_key)

    return get


@pytest.mark.parametrize(
    ("server", "alg", "tamper"),
    [
        ("seaweedfs", "CRC64NVME", False),
        ("seaweedfs", "SHA256", False),
        ("stock-moto", "SHA256", False),
        ("stock-moto", "CRC32C", True),
    ],
)
def test_an_interrupted_chosen_checksum_upload_resumes(
    worlds: Any, tmp_path: Path, server: str, alg: str, tamper: bool
) -> None:
    """Rerun sends fewer than the 6 parts; the object holds the file's
    bytes and carries the chosen checksum (on SeaweedFS the value S3 would
    give; on stock moto, which keeps its own values, the same as an upload
    never interrupted). ``tamper``: part 1 on the server is replaced by other
    bytes of its size before the rerun, which must send it again."""
    world = worlds(server)
    bucket = world.new_bucket("chosen-resume")
    src = tmp_path / "big.bin"
    data = random.Random(f"{server} {alg}").randbytes(SIZE)
    src.write_bytes(data)
    env = {**world.environ(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    url = f"s3://{bucket}/big.bin"
    s3 = _admin(world)
    with FaultProxy(world.endpoint_url, rate=0.0) as proxy:
        cmd = _cli(proxy.url, src, url, alg, "--bwlimit", "16MiB", "-q")
        err = _interrupted(cmd, env, proxy, 2 * PART + MiB)
        entry = Journal(tmp_path / "cache" / "synxfer").upload_get(url)
        assert entry is not None, f"the interrupted upload was not journaled: {err!r}"
        assert entry.checksum.split("/")[0] == alg
        if tamper:
            other = bytes(PART)
            s3.upload_part(
                Bucket=bucket, Key="big.bin", UploadId=entry.upload_id, PartNumber=1,
                Body=other, **{f"Checksum{alg}": checksum_value(alg, other)},
            )  # fmt: skip
        before = proxy.snapshot()
        rerun = subprocess.run(
            [*cmd[:-1], "-v"], env=env, capture_output=True, text=True, timeout=120
        )
        assert rerun.returncode == 0, rerun.stderr
        parts = proxy.snapshot().ops["upload_part"] - before.ops["upload_part"]
        again = proxy.snapshot().body_bytes - before.body_bytes
    # At least parts 1 and 2 were on the server (part 1 replaced when tampered).
    assert parts <= (5 if tamper else 4), f"rerun sent {parts} of 6 parts:\n{rerun.stderr}"
    assert again <= SIZE - (1 if tamper else 2) * PART, f"rerun sent {again} of {SIZE} bytes"
    assert "resuming" in rerun.stderr, rerun.stderr
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert Journal(tmp_path / "cache" / "synxfer").upload_get(url) is None
    assert s3.get_object(Bucket=bucket, Key="big.bin")["Body"].read() == data
    head = s3.head_object(Bucket=bucket, Key="big.bin", ChecksumMode="ENABLED")
    got = head.get(f"Checksum{alg}")
    if server == "seaweedfs":
        want = checksum_value(alg, data) if alg.startswith("CRC") else _composite(alg, data)
        assert got == want
        assert head.get("ChecksumType") == ("FULL_OBJECT" if alg.startswith("CRC") else "COMPOSITE")
    else:  # stock moto keeps values of its own: those of an upload never interrupted
        whole = subprocess.run(
            _cli(world.endpoint_url, src, f"s3://{bucket}/whole.bin", alg, "-q"),
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert whole.returncode == 0, whole.stderr
        other = s3.head_object(Bucket=bucket, Key="whole.bin", ChecksumMode="ENABLED")
        assert got is not None
        assert got == other.get(f"Checksum{alg}")


def test_a_rerun_with_another_algorithm_starts_over(stock_moto: Any, tmp_path: Path) -> None:
    """The journaled upload was made with SHA256; a rerun asking for CRC32
    aborts it, says so, and sends the file whole with CRC32."""
    world = S3World("stock-moto", stock_moto.endpoint_url, "testing", "testing-secret")
    bucket = world.new_bucket("chosen-restart")
    src = tmp_path / "big.bin"
    data = random.Random(47).randbytes(SIZE)
    src.write_bytes(data)
    env = {**world.environ(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    url = f"s3://{bucket}/big.bin"
    s3 = _admin(world)
    with FaultProxy(world.endpoint_url, rate=0.0) as proxy:
        first = _cli(proxy.url, src, url, "SHA256", "--bwlimit", "16MiB", "-q")
        _interrupted(first, env, proxy, 2 * PART + MiB)
        entry = Journal(tmp_path / "cache" / "synxfer").upload_get(url)
        assert entry is not None
        assert entry.checksum == "SHA256/COMPOSITE"
        before = proxy.snapshot()
        rerun = subprocess.run(
            _cli(proxy.url, src, url, "CRC32"), env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert rerun.returncode == 0, rerun.stderr
        parts = proxy.snapshot().ops["upload_part"] - before.ops["upload_part"]
    assert "SHA256" in rerun.stderr, rerun.stderr
    assert "CRC32" in rerun.stderr, rerun.stderr
    assert "starts over" in rerun.stderr, rerun.stderr
    assert parts == 6
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert s3.get_object(Bucket=bucket, Key="big.bin")["Body"].read() == data
    head = s3.head_object(Bucket=bucket, Key="big.bin", ChecksumMode="ENABLED")
    assert "ChecksumCRC32" in head
    assert "ChecksumSHA256" not in head


def test_a_part_is_kept_only_by_a_proof_of_the_bytes_read_now() -> None:
    """The rule each listed part of a chosen-checksum upload is kept by: the
    checksum the server lists (S3 lists them; no server here does), else a
    plain-MD5 ETag; a listed checksum of other bytes sends the part again
    even when its ETag matches (the object's claim is built from it)."""
    md5 = hashlib.md5(b"part").hexdigest()
    listed = CompletedPart(1, md5, 4, "c2hhMjU2")
    assert _vouched(listed, "c2hhMjU2", md5) == "checksum"
    assert _vouched(listed, "b3RoZXI=", md5) is None
    unlisted = CompletedPart(1, md5, 4)
    assert _vouched(unlisted, "c2hhMjU2", md5) == "md5"
    assert _vouched(unlisted, None, md5) == "md5"  # MD5 chosen: the ETag is the claim
    assert _vouched(unlisted, "c2hhMjU2", hashlib.md5(b"other").hexdigest()) is None
    assert _vouched(CompletedPart(1, f"{md5}-2", 4), "c2hhMjU2", md5) is None
