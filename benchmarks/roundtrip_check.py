"""Acceptance check: sync a ~300-file tree up and back down with the CLI.

Against moto in a subprocess on 127.0.0.1: ``synxfer sync DIR s3://…`` then
``synxfer sync s3://… EMPTY_DIR``; the trees must be identical in names,
bytes and mtimes, and a second sync in each direction must transfer 0 files::

    python benchmarks/roundtrip_check.py
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3

from synxfer_servers.s3 import MotoProcess

MiB = 1024 * 1024


def make_tree(root: Path, n_small: int = 299, big: int = 40 * MiB) -> None:
    rng = random.Random(42)
    for i in range(n_small):
        path = root / f"d{i % 7}" / f"s{i % 3}" / f"file-{i:03d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(rng.randint(0, 200_000)))
    (root / "big.bin").write_bytes(rng.randbytes(big))


def snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[p.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns, p.read_bytes())
    return out


def sync(src: str, dst: str, endpoint: str, env: dict[str, str]) -> dict[str, object]:
    cmd = [sys.executable, "-m", "synxfer.cli.main", "sync", src, dst, "--json"]
    cmd += ["--endpoint-url", endpoint]
    t0 = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    summary: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    summary["wall"] = time.monotonic() - t0
    return summary


def main() -> None:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    env["AWS_DEFAULT_REGION"] = "us-east-1"
    with tempfile.TemporaryDirectory() as tmp, MotoProcess(env=env) as moto:
        src, dst = Path(tmp) / "src", Path(tmp) / "dst"
        make_tree(src)
        boto3.client(
            "s3",
            endpoint_url=moto.endpoint_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket="check")
        url = "s3://check/tree"
        steps = [
            ("upload", str(src), url),
            ("download", url, str(dst)),
            ("upload again", str(src), url),
            ("download again", url, str(dst)),
        ]
        for name, a, b in steps:
            s = sync(a, b, moto.endpoint_url, env)
            print(
                f"{name:15s} files={s['files_transferred']:4} bytes={s['bytes_transferred']:>10} "
                f"skipped={s['files_skipped']:4} failed={s['files_failed']} {s['wall']:.2f} s"
            )
        same = snapshot(src) == snapshot(dst)
        print(f"trees identical (names, bytes, mtimes): {same}; files: {len(snapshot(src))}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
