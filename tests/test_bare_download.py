"""benchmarks/experiments/bare_download.py, the A/Bs' floor tool: its files must be the objects.

A floor that wrote the wrong bytes quickly would look like a result.
``s3_download_ab.py`` checks each run's files, but it is run by hand, on
SeaweedFS; this runs with the suite. Each mode downloads objects with odd
sizes over a real HTTP server (moto), in ranges smaller than the objects,
and every file is compared with its object. ``native`` mode compiles ``bare_native.c`` with
the system's C compiler (decision 0021), so it needs one and an x86-64 CPU
with SSE4.2.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BARE = Path(__file__).resolve().parent.parent / "benchmarks" / "experiments" / "bare_download.py"
MiB = 1 << 20


def _sse42() -> bool:
    try:
        return " sse4_2 " in f" {Path('/proc/cpuinfo').read_text()} ".replace("\n", " ")
    except OSError:
        return False


@pytest.mark.parametrize("mode", ["whole", "pipe", "native"])
def test_every_mode_writes_the_objects_bytes(
    mode: str, s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    if mode == "native" and not (
        shutil.which("cc") and platform.machine() == "x86_64" and _sse42()
    ):
        pytest.skip("native mode needs cc and an x86-64 CPU with SSE4.2")
    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    objects = {
        "d/a.bin": os.urandom(3 * MiB + 5),  # three whole 1 MiB ranges and a 5-byte one
        "d/b.bin": os.urandom(2 * MiB),  # ranges end where the object does
        "d/c.bin": os.urandom(1),
    }
    for key, data in objects.items():
        s3.put_object(Bucket=bucket, Key=key, Body=data)
    out = tmp_path / "out"
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),  # the compiled module, for this test only
    }
    cmd = [sys.executable, str(BARE), "--endpoint-url", s3_endpoint, "--mode", mode]
    cmd += ["--range-mib", "1", "--piece", "65536", "--threads", "2", f"s3://{bucket}/d/", str(out)]
    subprocess.run(cmd, env=env, check=True, timeout=120)
    for key, data in objects.items():
        assert (out / key.removeprefix("d/")).read_bytes() == data, key
