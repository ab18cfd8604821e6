"""Acceptance: kill -9 the CLI mid-sync, rerun, count the bytes sent twice.

A sync of 1000 × 1 MiB + 1 × 256 MiB to moto (in this process, behind the
counting middleware, which sums upload body bytes) is killed with SIGKILL
when the server has received ~30 %, ~60 % and ~90 % of the data; each time
the same command is rerun to completion. Reported per kill point: bytes
sent before the kill, bytes the rerun sent, and the extra bytes (sent in
total minus the data set), against the goal of less than one part per file
in flight at the kill::

    python benchmarks/experiments/kill_resume.py            # full size
    python benchmarks/experiments/kill_resume.py --small    # 200 × 1 MiB + 1 × 64 MiB
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3

from synxfer_servers.s3 import counting_moto_server

MiB = 1024 * 1024
PART = 8 * MiB


def make_tree(root: Path, n_small: int, big: int) -> int:
    rng = random.Random(9)
    for i in range(n_small):
        path = root / f"d{i % 10}" / f"f{i:04d}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(MiB))
    with open(root / "big.bin", "wb") as fh:
        for _ in range(big // MiB):
            fh.write(rng.randbytes(MiB))
    return n_small * MiB + big


def run(fraction: float, n_small: int, big: int, work: Path) -> dict[str, float]:
    src = work / f"src-{fraction}"
    total = make_tree(src, n_small, big)
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "XDG_CACHE_HOME": str(work / f"cache-{fraction}"),
    }
    bucket = f"kill-{int(fraction * 100)}"
    with counting_moto_server() as server:
        boto3.client(
            "s3",
            endpoint_url=server.endpoint_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket=bucket)
        cmd = [sys.executable, "-m", "synxfer.cli.main", "sync", str(src), f"s3://{bucket}/p"]
        cmd += ["--endpoint-url", server.endpoint_url, "-q"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        while server.snapshot().upload_bytes < fraction * total:
            if proc.poll() is not None:
                raise SystemExit(f"the sync finished before {fraction:.0%}; use more data")
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = server.snapshot().upload_bytes
        t0 = time.monotonic()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        rerun_s = time.monotonic() - t0
        sent = server.snapshot().upload_bytes
        s3 = boto3.client(
            "s3",
            endpoint_url=server.endpoint_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        keys = sum(
            page.get("KeyCount", 0)
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        )
        assert keys == n_small + 1, f"{keys} objects"
        assert not s3.list_multipart_uploads(Bucket=bucket).get("Uploads")
    return {
        "kill_at": fraction,
        "before_mib": before / MiB,
        "rerun_mib": (sent - before) / MiB,
        "extra_mib": (sent - total) / MiB,
        "rerun_s": rerun_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="200 x 1 MiB + 64 MiB")
    args = parser.parse_args()
    n_small, big = (200, 64 * MiB) if args.small else (1000, 256 * MiB)
    max_threads = (os.cpu_count() or 1) + 4
    print(
        f"data: {n_small} x 1 MiB + 1 x {big // MiB} MiB; default limits: "
        f"{max_threads} parts in flight, {2 * max_threads} files in flight, 8 MiB parts"
    )
    print(f"goal: extra < one part per file in flight at the kill (<= {max_threads * 8} MiB)")
    with tempfile.TemporaryDirectory() as tmp:
        for fraction in (0.3, 0.6, 0.9):
            r = run(fraction, n_small, big, Path(tmp))
            print(
                f"kill at {r['kill_at']:.0%}: sent before kill {r['before_mib']:.0f} MiB, "
                f"rerun sent {r['rerun_mib']:.0f} MiB in {r['rerun_s']:.1f} s, "
                f"extra {r['extra_mib']:.1f} MiB; all {n_small + 1} objects present"
            )


if __name__ == "__main__":
    main()
