"""Client CPU per GiB of an upload to SeaweedFS, by body checksum (decision 0026).

    python benchmarks/experiments/upload_checksum_cpu.py [--rounds 5] [--size-mib 1024]

Modes: ``crc32c`` -- CRC32C only (an endpoint whose answers echo the CRC32C
they verified); ``md5`` -- Content-MD5 only (``s3.md5_only=true``); ``both``
-- CRC32C and Content-MD5, the answer's ETag compared (an endpoint that does
not confirm the CRC32C). SeaweedFS (auth on) runs in its own process; the
client's CPU is this process's user + system time around each upload, the
file read once before (page cache). Rounds interleave the modes, so drift
hits each alike; the median is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

import boto3

import synxfer
from synxfer_bench.targets import SeaweedTarget
from synxfer_s3._trust import endpoint_trust, forget_endpoints

MODES = ("crc32c", "md5", "both")


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def upload(url: str, bucket: str, src: Path, mode: str, i: int) -> tuple[float, float]:
    """(client CPU s, wall s) of one upload of ``src`` in ``mode``."""
    forget_endpoints()
    extra = {"s3": {"md5_only": "true"}} if mode == "md5" else None
    config = synxfer.TransferConfig(resume=False)
    async with synxfer.Client(config, endpoint_url=url, backend_options=extra) as c:
        if mode != "md5":
            endpoint_trust(url).verdict = "verifies" if mode == "crc32c" else "not-verifying"
        c0, w0 = cpu_seconds(), time.monotonic()
        r = await c.copy(str(src), f"s3://{bucket}/{mode}-{i}")
        c1, w1 = cpu_seconds(), time.monotonic()
        if not r.ok:
            raise SystemExit(f"upload failed: {r.failures}")
    return c1 - c0, w1 - w0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size-mib", type=int, default=1024)
    args = parser.parse_args()
    gib = args.size_mib / 1024
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "one.bin"
        with open(src, "wb") as fh:
            for _ in range(args.size_mib):
                fh.write(os.urandom(1 << 20))
        src.read_bytes()  # into the page cache
        with SeaweedTarget(Path(tmp)) as target:
            for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
                os.environ.pop(name, None)
            os.environ["AWS_ACCESS_KEY_ID"] = target.access_key
            os.environ["AWS_SECRET_ACCESS_KEY"] = target.secret_key
            os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
            url = target.endpoint_url
            boto3.client("s3", endpoint_url=url).create_bucket(Bucket="cpu")
            runs: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
            for i in range(args.rounds):
                for mode in MODES:
                    runs[mode].append(asyncio.run(upload(url, "cpu", src, mode, i)))
    print(f"{args.size_mib} MiB upload to SeaweedFS, median of {args.rounds}:")
    print("| body checksum | client CPU s/GiB | wall s | CPU s/GiB of each run |")
    print("|---|---|---|---|")
    for mode, got in runs.items():
        cpu = statistics.median(c for c, _ in got) / gib
        wall = statistics.median(w for _, w in got)
        each = ", ".join(f"{c / gib:.2f}" for c, _ in got)
        print(f"| {mode} | {cpu:.2f} | {wall:.2f} | {each} |")


if __name__ == "__main__":
    main()
