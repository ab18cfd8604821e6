"""Compressed uploads resume through the ordinary journal (issue 36).

The CLI uploads a compressible file with ``--compress zstd`` to stock moto
(as it ships) through a counting proxy, is interrupted (SIGINT) once about
half the compressed bytes arrived, and runs again: the rerun compresses the
file again but does not send the parts the server already holds (their ETag
is the MD5 of the part it compressed again). Before issue 36 a compressed
upload always started over and sent every part again.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from synxfer import MiB
from synxfer.engine.journal import Journal
from synxfer_servers.faultproxy import FaultProxy

from ._s3server import S3World

pytest.importorskip("zstandard")


def _half_random(n: int, seed: int) -> bytes:
    """``n`` bytes that zstd stores at about half: 32 KiB of noise, 32 KiB of zeros."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < n:
        out += rng.randbytes(32 * 1024) + bytes(32 * 1024)
    return bytes(out[:n])


def _cli(proxy_url: str, src: Path, url: str) -> list[str]:
    return [
        sys.executable, "-m", "synxfer.cli.main", "cp", str(src), url, "--compress", "zstd",
        "--endpoint-url", proxy_url, "--part-size", "5MiB", "--max-threads", "1",
        "--bwlimit", "16MiB", "-q",
    ]  # fmt: skip


def test_an_interrupted_compressed_upload_resumes(stock_moto: Any, tmp_path: Path) -> None:
    world = S3World("stock-moto", stock_moto.endpoint_url, "testing", "testing-secret")
    bucket = world.new_bucket("compress-resume")
    src = tmp_path / "big.txt"
    data = _half_random(30 * MiB, 36)  # about 20 MiB stored: 3 parts of 5 MiB
    src.write_bytes(data)
    env = {**world.environ(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    url = f"s3://{bucket}/big.txt"
    with FaultProxy(world.endpoint_url, rate=0.0) as proxy:
        cmd = _cli(proxy.url, src, url)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while proxy.snapshot().body_bytes < 11 * MiB:  # parts 1 and 2 in the proxy's hands
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode != 0, "the first run was not interrupted"
        first = proxy.snapshot().body_bytes
        entry = Journal(tmp_path / "cache" / "synxfer").upload_get(url)
        rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        again = proxy.snapshot().body_bytes - first
    s3 = world.admin()
    head = s3.head_object(Bucket=bucket, Key="big.txt")
    stored = head["ContentLength"]
    assert head["Metadata"]["synxfer-encoding"] == "zstd"
    assert head["Metadata"]["synxfer-size"] == str(len(data))
    assert 10 * MiB < stored < 20 * MiB
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert Journal(tmp_path / "cache" / "synxfer").upload_get(url) is None
    assert entry is not None, f"the interrupted upload was not journaled: {err!r}"
    assert entry.codec == "zstd-3"
    # At least parts 1 and 2 (10 MiB) were kept: the rerun sent the rest only.
    assert again <= stored - 10 * MiB + 64 * 1024, f"rerun sent {again} of {stored} bytes"
    back = tmp_path / "back.txt"
    get = subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", "cp", url, str(back),
         "--endpoint-url", world.endpoint_url, "-q"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert get.returncode == 0, get.stderr
    assert back.read_bytes() == data
