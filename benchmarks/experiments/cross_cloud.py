"""s3 → gs: streamed through memory vs download-then-upload.

moto (subprocess) as S3 and gcp-storage-emulator (subprocess, behind the
GCS-faithful front) as GCS, both on 127.0.0.1. One object is copied with
``synxfer cp s3://… gs://…`` (streamed, no local disk) and, for comparison,
with ``synxfer cp s3://… ./file`` then ``synxfer cp ./file gs://…``. Each run
is a child process whose own peak RSS (VmHWM) is reported::

    python benchmarks/experiments/cross_cloud.py --size-mib 256
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import boto3

from synxfer_servers.gcs import GcsEmulator, GcsFront, create_bucket
from synxfer_servers.process import run_python_module_measured
from synxfer_servers.s3 import MotoProcess

MiB = 1024 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=256)
    args = parser.parse_args()
    size = args.size_mib * MiB
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        MotoProcess(env=env) as moto,
        GcsEmulator() as emulator,
        GcsFront(emulator.endpoint_url) as front,
    ):
        env["STORAGE_EMULATOR_HOST"] = front.endpoint_url
        s3 = boto3.client(
            "s3",
            endpoint_url=moto.endpoint_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        s3.create_bucket(Bucket="src")
        s3.put_object(Bucket="src", Key="big.bin", Body=os.urandom(size))
        create_bucket(front.endpoint_url, "dst")
        s3_opt = ["--endpoint", f"s3={moto.endpoint_url}", "-q"]
        local = str(Path(tmp) / "big.bin")
        runs = {
            "streamed s3 -> gs": [["cp", "s3://src/big.bin", "gs://dst/streamed.bin", *s3_opt]],
            "download then upload": [
                ["cp", "s3://src/big.bin", local, *s3_opt],
                ["cp", local, "gs://dst/via-disk.bin", "-q"],
            ],
        }
        for name, steps in runs.items():
            t0 = time.monotonic()
            peak = 0
            for step in steps:
                done, kib = run_python_module_measured("synxfer.cli.main", step, env=env)
                if done.returncode != 0:
                    raise SystemExit(f"{name} failed: {done.stderr}")
                peak = max(peak, kib)
            wall = time.monotonic() - t0
            print(
                f"{name:22s} {wall:6.2f} s  {args.size_mib / wall:6.1f} MiB/s  "
                f"peak RSS {peak / 1024:.0f} MiB"
            )


if __name__ == "__main__":
    main()
