"""Client CPU of a GCS download (or upload), one source tree against another, on the emulator.

Starts ``gcp-storage-emulator`` (:class:`synxfer_servers.gcs.GcsEmulator`) on
127.0.0.1, with :class:`~synxfer_servers.gcs.GcsFront` in front of it unless
``--bare`` (the front sends GCS's media headers, so a read is one request, as
on GCS). It uploads ``--files`` random files of ``--mib`` MiB once, then
downloads them with each tree in turn, ``--rounds`` times (order reversed
every other round). Each download is a fresh process running
``Client(TransferConfig(max_threads=4)).sync_from(...)`` with
``PYTHONPATH=TREE:TREE/plugins``; its CPU comes from ``os.wait4``, so the
emulator's is not counted (the process's start-up is). With ``--upload``
each tree's process uploads the files instead (``sync_to`` a fresh prefix).
Medians are printed::

    python benchmarks/experiments/gcs_transfer_micro.py --files 16 --mib 32 --rounds 4 \\
        before=/path/to/old/worktree after=.
    python benchmarks/experiments/gcs_transfer_micro.py --upload --files 8 --rounds 4 \\
        before=... after=.

An empty sync (``--files 0``) gives the start-up alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import synxfer
from synxfer_servers.gcs import GcsEmulator, GcsFront, create_bucket

_CHILD = """
import asyncio, sys, synxfer
async def main():
    config = synxfer.TransferConfig(max_threads=4)
    async with synxfer.Client(config, endpoint_url=sys.argv[1]) as client:
        if sys.argv[4] == "upload":
            await client.sync_to(sys.argv[3], sys.argv[2])
        else:
            await client.sync_from(sys.argv[2], sys.argv[3])
asyncio.run(main())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("trees", nargs="+", metavar="NAME=TREE", help="source trees to compare")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--mib", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--bare", action="store_true", help="no GcsFront: the emulator alone")
    parser.add_argument("--upload", action="store_true", help="time uploads, not downloads")
    args = parser.parse_args()
    trees = dict(t.split("=", 1) for t in args.trees)
    with tempfile.TemporaryDirectory(prefix="gcs-micro-") as tmp, GcsEmulator() as emulator:
        work = Path(tmp)
        src = work / "data"
        src.mkdir()
        for i in range(args.files):
            (src / f"f{i}").write_bytes(os.urandom(args.mib << 20))
        create_bucket(emulator.endpoint_url, "bench")
        if args.bare:
            _run(emulator.endpoint_url, src, work, trees, args)
        else:
            with GcsFront(emulator.endpoint_url) as front:
                _run(front.endpoint_url, src, work, trees, args)


def _run(
    endpoint: str, src: Path, work: Path, trees: dict[str, str], args: argparse.Namespace
) -> None:
    async def upload() -> None:
        async with synxfer.Client(endpoint_url=endpoint) as client:
            await client.sync_to(str(src), "gs://bench/d")

    if not args.upload:
        asyncio.run(upload())
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for name in order:
            tree = Path(trees[name]).resolve()
            out = work / f"out-{name}"
            shutil.rmtree(out, ignore_errors=True)
            env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'plugins'}"}
            if args.upload:
                url, local, what = f"gs://bench/up-{name}-{r}", str(src), "upload"
            else:
                url, local, what = "gs://bench/d", str(out), "download"
            cmd = [sys.executable, "-c", _CHILD, endpoint, url, local, what]
            t0 = time.monotonic()
            child = subprocess.Popen(cmd, env=env)
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.monotonic() - t0
            if status != 0:
                raise SystemExit(f"{name}: the {what} failed (status {status})")
            results[name].append((wall, usage.ru_utime + usage.ru_stime))
    gib = args.files * args.mib / 1024
    for name, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        per = f" = {cpu / gib:.2f} s/GiB" if gib else ""
        print(
            f"{name:12s} wall {wall:.2f} s, client CPU {cpu:.2f} s{per} "
            f"(median of {args.rounds}; {args.files}x{args.mib}MiB)"
        )


if __name__ == "__main__":
    main()
