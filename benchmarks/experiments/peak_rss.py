"""Peak resident memory of a client uploading one large file with defaults.

The memory bound synxfer promises is ``max_threads * part_size + 150 MiB``
(the budget plus the interpreter, botocore's models and buffers). This runs
``synxfer cp`` in a child process against moto (in another child) and reads
the child's own peak RSS (``VmHWM``) at exit::

    python benchmarks/experiments/peak_rss.py --size-mib 1024
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

import boto3

import synxfer
from synxfer_servers.process import run_python_module_measured
from synxfer_servers.s3 import MotoProcess

MiB = 1024 * 1024


def make_file(path: Path, size: int) -> None:
    rng = random.Random(7)
    with open(path, "wb") as fh:
        for _ in range(size // MiB):
            fh.write(rng.randbytes(MiB))
        fh.write(rng.randbytes(size % MiB))


def measure(size: int, max_threads: int = 0) -> dict[str, float]:
    """Upload ``size`` bytes in a child process; its peak RSS and the bound."""
    env = dict(os.environ)
    env.setdefault("AWS_ACCESS_KEY_ID", "testing")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    with tempfile.TemporaryDirectory() as tmp, MotoProcess(env=env) as moto:
        path = Path(tmp) / "big.bin"
        make_file(path, size)
        s3 = boto3.client(
            "s3",
            endpoint_url=moto.endpoint_url,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
        )
        s3.create_bucket(Bucket="rss")
        args = ["cp", str(path), "s3://rss/big.bin", "--endpoint-url", moto.endpoint_url, "-q"]
        if max_threads:
            args += ["--max-threads", str(max_threads)]
        t0 = time.monotonic()
        run, peak_kib = run_python_module_measured("synxfer.cli.main", args, env=env)
        elapsed = time.monotonic() - t0
        if run.returncode != 0:
            raise SystemExit(f"the upload failed: {run.stderr}")
        assert s3.head_object(Bucket="rss", Key="big.bin")["ContentLength"] == size
    config = (
        synxfer.TransferConfig(max_threads=max_threads) if max_threads else synxfer.TransferConfig()
    )
    return {
        "size_mib": size / MiB,
        "max_threads": config.max_threads,
        "peak_rss_mib": peak_kib / 1024,
        "bound_mib": (config.max_threads * config.part_size) / MiB + 150,
        "seconds": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--max-threads", type=int, default=0, help="0 = the default")
    args = parser.parse_args()
    m = measure(args.size_mib * MiB, args.max_threads)
    verdict = "within" if m["peak_rss_mib"] <= m["bound_mib"] else "OVER"
    print(
        f"upload {m['size_mib']:.0f} MiB, max_threads={m['max_threads']}: "
        f"peak RSS {m['peak_rss_mib']:.0f} MiB ({verdict} the bound {m['bound_mib']:.0f} MiB), "
        f"{m['seconds']:.1f} s"
    )


if __name__ == "__main__":
    main()
