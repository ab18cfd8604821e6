"""Kernel CPU of writing one file's parts from several threads: with and without
``LocalFile``'s per-file write lock, and with other ``pwrite`` sizes.

Writes 1 GiB (``--parts`` parts of 8 MiB, one of six reused buffers each) to a
fresh preallocated file with six worker threads, as a ranged download does:

* ``lock`` -- through ``LocalFile.write`` (one writer thread at a time per file,
  at most ``WRITE_CHUNK`` bytes per ``pwrite``);
* ``nolock`` -- the same ``pwrite_all`` calls straight from the threads, which
  then wait for the file's inode lock in the kernel (and spin while waiting);
* ``chunk=N`` (``--chunks N ...``) -- ``lock`` with ``N``-byte ``pwrite`` calls
  (docs/decisions/0012-write-chunks.md).

The variants alternate (order rotated) ``--rounds`` times, ``--pause``
seconds apart; the median wall time and this process's user and system CPU
(``getrusage``) are printed::

    python benchmarks/experiments/local_write_micro.py --rounds 6 --dir /tmp
    python benchmarks/experiments/local_write_micro.py --rounds 8 --chunks 32768 262144 8388608
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from synxfer.engine import localfile
from synxfer.engine.localfile import LocalFile, pwrite_all

PART = 8 << 20
THREADS = 6


async def _write(path: Path, parts: int, bufs: list[bytearray], locked: bool) -> None:
    with concurrent.futures.ThreadPoolExecutor(THREADS) as executor:
        f = await LocalFile.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, executor)
        try:
            await f.allocate(PART * parts)
            loop = asyncio.get_running_loop()
            slots = asyncio.Semaphore(THREADS)

            async def one(i: int) -> None:
                async with slots:
                    buf = bufs[i % THREADS]
                    if locked:
                        await f.write(i * PART, buf)
                    else:
                        await loop.run_in_executor(executor, pwrite_all, f.fd, buf, i * PART)

            await asyncio.gather(*(one(i) for i in range(parts)))
        finally:
            await f.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--parts", type=int, default=128, help="8 MiB parts per file")
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: TMPDIR)")
    ap.add_argument("--pause", type=float, default=2.0, help="seconds between runs")
    ap.add_argument(
        "--chunks",
        type=int,
        nargs="+",
        metavar="BYTES",
        help="compare these pwrite sizes (locked) instead of lock / nolock",
    )
    args = ap.parse_args()
    bufs = [bytearray(os.urandom(PART)) for _ in range(THREADS)]
    names = [f"chunk={n}" for n in args.chunks] if args.chunks else ["lock", "nolock"]
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
    default_chunk = localfile.WRITE_CHUNK
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for r in range(args.rounds):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                path = Path(tmp) / "out"
                chunk = int(name.partition("=")[2] or default_chunk)
                localfile.WRITE_CHUNK = chunk  # read by pwrite_all at each call
                before = resource.getrusage(resource.RUSAGE_SELF)
                start = time.monotonic()
                asyncio.run(_write(path, args.parts, bufs, name != "nolock"))
                wall = time.monotonic() - start
                after = resource.getrusage(resource.RUSAGE_SELF)
                row = (wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime)
                results[name].append(row)
                print(f"r{r} {name:13s} wall {row[0]:.2f} s  usr {row[1]:.2f}  sys {row[2]:.2f}")
                path.unlink()
                time.sleep(args.pause)
    print(f"median of {args.rounds}, {args.parts * PART / (1 << 30):.2f} GiB each:")
    for name, rows in results.items():
        wall, usr, sys_ = (statistics.median(c) for c in zip(*rows, strict=True))
        print(f"  {name:13s} wall {wall:.2f} s  usr {usr:.2f} s  sys {sys_:.2f} s")


if __name__ == "__main__":
    main()
