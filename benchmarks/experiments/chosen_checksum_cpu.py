"""Client CPU per GiB of an upload to SeaweedFS, by chosen checksum (docs/checksums.md).

    python benchmarks/experiments/chosen_checksum_cpu.py [--rounds 3] [--modes M...]

Modes: ``default`` -- no choice (CRC32C, the endpoint known to verify it);
``CRC32`` ... ``SHA256`` -- ``WriteOptions(checksum_algorithm=...)``, the
endpoint known to verify that algorithm (SeaweedFS echoes every one, so
after its first answer no body carries Content-MD5); ``MD5`` -- Content-MD5
on every body, the ETag compared. The file is sent in 8 MiB parts (a
multipart upload: FULL_OBJECT for the CRCs, COMPOSITE for SHA1/SHA256).
SeaweedFS (auth on) runs in its own process; client CPU is this process's
user + system time around each upload, the file read once before (page
cache). Rounds interleave the modes, so drift hits each alike; each
object is deleted after its upload; the median is printed.
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
from synxfer import WriteOptions
from synxfer_bench.targets import SeaweedTarget
from synxfer_s3 import _chosen
from synxfer_s3._trust import endpoint_trust, forget_endpoints

MODES = ("default", "CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256", "MD5")


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def upload(url: str, bucket: str, src: Path, mode: str, i: int) -> tuple[float, float]:
    """(client CPU s, wall s) of one upload of ``src`` in ``mode``."""
    forget_endpoints()
    _chosen.forget()
    options = WriteOptions() if mode == "default" else WriteOptions(checksum_algorithm=mode)
    config = synxfer.TransferConfig(resume=False, write_options=options)
    kind = "crc32c" if mode == "default" else mode.lower()
    async with synxfer.Client(config, endpoint_url=url) as c:
        if kind != "md5":
            endpoint_trust(url, kind).verdict = "verifies"
        c0, w0 = cpu_seconds(), time.monotonic()
        r = await c.copy(str(src), f"s3://{bucket}/{mode}-{i}")
        c1, w1 = cpu_seconds(), time.monotonic()
        if not r.ok:
            raise SystemExit(f"upload failed: {r.failures}")
    return c1 - c0, w1 - w0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=MODES)
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
            s3 = boto3.client("s3", endpoint_url=url)
            s3.create_bucket(Bucket="cpu")
            runs: dict[str, list[tuple[float, float]]] = {m: [] for m in args.modes}
            for i in range(args.rounds):
                for mode in args.modes:
                    runs[mode].append(asyncio.run(upload(url, "cpu", src, mode, i)))
                    s3.delete_object(Bucket="cpu", Key=f"{mode}-{i}")
                    print(mode, i, f"{runs[mode][-1][0] / gib:.2f} s/GiB", flush=True)
            load = os.getloadavg()
    print(f"{args.size_mib} MiB upload to SeaweedFS, median of {args.rounds}, load {load}:")
    print("| checksum | client CPU s/GiB | wall s | CPU s/GiB of each run |")
    print("|---|---:|---:|---|")
    for mode, got in runs.items():
        cpu = statistics.median(c for c, _ in got) / gib
        wall = statistics.median(w for _, w in got)
        each = ", ".join(f"{c / gib:.2f}" for c, _ in got)
        print(f"| {mode} | {cpu:.2f} | {wall:.1f} | {each} |")


if __name__ == "__main__":
    main()
