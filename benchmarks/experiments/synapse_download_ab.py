"""syn:// downloads through the Synapse-style service over SeaweedFS (auth on).

``small``: ``synxfer sync syn://P/small DIR`` of 775 x 12.9 KiB, the vendor
with URL batches and without (``--no-riders``: one URL per request, as
before), alternated; per run the service's requests by route, its CPU, the
client's CPU and the wall time.

``split``: one ``sync_from`` of 2 x 512 MiB in this process, its client CPU
split by ``time.thread_time()`` around ``md5.update``, ``pwrite_all`` and the
event loop's thread.

    python benchmarks/experiments/synapse_download_ab.py small --rounds 3
    python benchmarks/experiments/synapse_download_ab.py split

Figures in docs/decisions/0049-synapse-download-requests.md.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PY = sys.executable
#: What a child runs for ``--no-riders``: the vendor asks for its own URL only.
NO_RIDERS = (
    "from synxfer_synapse._backend import SynapseVendor\n"
    "def _riders(self, key):\n"
    "    self._unasked.pop(key, None)\n"
    "    return []\n"
    "SynapseVendor._riders = _riders\n"
)
CLI = "import sys; sys.argv[0] = 'synxfer'\n{pre}from synxfer.cli.main import run\nrun()\n"


def _service_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stand(work: Path) -> Any:
    from synxfer_bench.synapse_path import SynapsePathTarget

    target = SynapsePathTarget(work / "stand")
    target.start()
    return target


def _env(target: Any, work: Path) -> dict[str, str]:
    home = work / "home"
    target.synapse_config(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(home)
    return env


def small(work: Path, rounds: int) -> None:
    src = work / "src"
    src.mkdir()
    for i in range(775):
        (src / f"f{i:04d}.bin").write_bytes(os.urandom(13210))
    target = _stand(work)
    try:
        env = _env(target, work)
        url = f"syn://{target.project}/small"
        subprocess.run(
            [PY, "-c", CLI.format(pre=""), "sync", "-q", str(src), url], env=env, check=True
        )
        for _ in range(rounds):
            for variant, pre in (("batched", ""), ("one-per-request", NO_RIDERS)):
                dst = work / "dst"
                shutil.rmtree(dst, ignore_errors=True)
                before, svc0 = target.service.stats(), _service_cpu(target.service.pid)
                r0, w0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
                argv = [PY, "-c", CLI.format(pre=pre), "sync", "-q", url, str(dst)]
                subprocess.run(argv, env=env, check=True)
                wall = time.perf_counter() - w0
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                after, svc = target.service.stats(), _service_cpu(target.service.pid) - svc0
                delta = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
                files = sum(1 for _ in dst.rglob("*.bin"))
                cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
                total = sum(delta.values())
                print(
                    f"{variant}: files={files} wall={wall:.2f}s client_cpu={cpu:.2f}s "
                    f"service_cpu={svc:.2f}s requests={total} ({total / max(files, 1):.2f}/file) "
                    f"{json.dumps(delta)}",
                    flush=True,
                )
    finally:
        target.stop()


def split(work: Path) -> None:
    import synxfer.engine.download as download
    import synxfer.engine.localfile as localfile
    from synxfer import Client, TransferConfig

    src = work / "src"
    src.mkdir()
    for i in (1, 2):
        with (src / f"f{i}").open("wb") as f:
            for _ in range(64):
                f.write(os.urandom(8 << 20))
    spent: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    new_hash, pwrite_all = download.new_hash, localfile.pwrite_all

    class Timed:
        def __init__(self, kind: Any) -> None:
            self.h = new_hash(kind)

        def update(self, data: Any) -> None:
            t = time.thread_time()
            self.h.update(data)
            with lock:
                spent["md5"] += time.thread_time() - t

        def digest(self) -> bytes:
            return bytes(self.h.digest())

    def timed_pwrite(fd: int, data: Any, offset: int) -> None:
        t = time.thread_time()
        pwrite_all(fd, data, offset)
        with lock:
            spent["pwrite"] += time.thread_time() - t

    target = _stand(work)
    try:
        env = _env(target, work)
        url = f"syn://{target.project}/big"
        subprocess.run(
            [PY, "-c", CLI.format(pre=""), "sync", "-q", str(src), url], env=env, check=True
        )
        os.environ["HOME"] = env["HOME"]
        download.new_hash = Timed  # type: ignore[assignment]
        localfile.pwrite_all = timed_pwrite

        async def main() -> float:
            c0, m0, w0 = os.times(), time.thread_time(), time.perf_counter()
            async with Client(TransferConfig()) as client:
                await client.sync_from(url, str(work / "dst"))
            c1 = os.times()
            spent["main thread"] = time.thread_time() - m0
            print(f"wall {time.perf_counter() - w0:.2f} s")
            return c1.user - c0.user + c1.system - c0.system

        total = asyncio.run(main())
        rest = total - spent["md5"] - spent["pwrite"] - spent["main thread"]
        print(
            f"client CPU {total:.2f} s: MD5 {spent['md5']:.2f}, pwrite {spent['pwrite']:.2f}, "
            f"main thread (receive, loop, HTTP, engine) {spent['main thread']:.2f}, rest {rest:.2f}"
        )
    finally:
        target.stop()


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["small", "split"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="synapse-ab-") as tmp:
        if args.what == "small":
            small(Path(tmp), args.rounds)
        else:
            split(Path(tmp))


if __name__ == "__main__":
    cli()
