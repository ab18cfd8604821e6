"""Client CPU per S3 request: aiobotocore (today's backend) vs S3Wire (our own data plane).

Against a local SeaweedFS with auth on (``weed mini``, 127.0.0.1, telemetry
off, throwaway credentials), N objects of SIZE bytes are read (GET) and
written (PUT, with a precomputed Content-MD5) with C requests in flight by:

* ``botocore`` -- ``synxfer_s3.S3Backend.read`` / ``put`` (aiobotocore);
* ``wire`` -- ``S3Wire.get_object_into`` (received into one of C reused
  buffers) / ``put_object`` (sent from one shared buffer);
* ``aiohttp`` -- aiohttp with our own SigV4 headers, each GET body copied
  chunk by chunk into a reused buffer: what aiohttp can do at best.

The machine is shared, so the implementations alternate within one run
(``--rounds`` times each) and the median is reported. Client CPU is this
process's user+system time (``getrusage``); the server's CPU is reported
beside it::

    python benchmarks/s3_wire_micro.py --objects 1000 --size-mib 1 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

MiB = 1024 * 1024


def cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def run_all(
    n: int, concurrency: int, one: Callable[[int, int], Awaitable[Any]]
) -> tuple[float, float]:
    """``one(i, slot)`` for i in range(n), ``concurrency`` at a time: (cpu s, wall s)."""
    queue = iter(range(n))

    async def worker(slot: int) -> None:
        for i in queue:
            await one(i, slot)

    c0, t0 = cpu(), time.perf_counter()
    await asyncio.gather(*(worker(s) for s in range(concurrency)))
    return cpu() - c0, time.perf_counter() - t0


async def bench(args: argparse.Namespace, endpoint: str, bucket: str, server_cpu: Any) -> dict:
    import aiohttp

    from synxfer.backend import BackendOptions, Checksum, WriteOptions
    from synxfer_s3 import S3Backend
    from synxfer_s3._credentials import Credentials, StaticCredentials
    from synxfer_s3._sigv4 import SigV4Signer, canonical_query, host_header, quote_path
    from synxfer_s3._wire import S3Wire

    n, size, conc = args.objects, args.size_mib * MiB, args.concurrency
    creds = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    wire = S3Wire(
        region="us-east-1",
        credentials=StaticCredentials(creds),
        endpoint_url=endpoint,
        max_connections=conc,
    )
    backend = S3Backend(
        bucket, BackendOptions(endpoint_url=endpoint, region="us-east-1", max_connections=conc)
    )
    await backend.open()
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc))
    signer = SigV4Signer("us-east-1")
    host, port = endpoint.split("//", 1)[1].split(":")
    hh = host_header(host, int(port), "http")

    payload = bytearray(os.urandom(size))
    md5 = base64.b64encode(hashlib.md5(payload, usedforsecurity=False).digest()).decode()
    buffers = [bytearray(size) for _ in range(conc)]
    keys = [f"micro/obj-{i:05d}" for i in range(n)]

    # Seed the objects every GET reads.
    await run_all(n, conc, lambda i, s: wire.put_object(bucket, keys[i], payload, content_md5=md5))

    async def get_botocore(i: int, slot: int) -> None:
        r = await backend.read(keys[i])
        assert len(r.data) == size

    async def get_wire(i: int, slot: int) -> None:
        got, _ = await wire.get_object_into(bucket, keys[i], buffers[slot])
        assert got == size

    def signed(method: str, key: str, extra: dict[str, str]) -> tuple[str, dict[str, str]]:
        path = f"/{bucket}/{quote_path(key)}"
        canonical, _ = canonical_query(())
        headers = signer.sign(
            method,
            hh,
            path,
            canonical,
            dict(extra),
            access_key=creds.access_key,
            secret_key=creds.secret_key,
        )
        return f"{endpoint}{path}", headers

    async def get_aiohttp(i: int, slot: int) -> None:
        url, headers = signed("GET", keys[i], {})
        buf = buffers[slot]
        pos = 0
        async with session.get(url, headers=headers, skip_auto_headers=("User-Agent",)) as r:
            assert r.status == 200, r.status
            async for chunk in r.content.iter_any():
                buf[pos : pos + len(chunk)] = chunk
                pos += len(chunk)
        assert pos == size

    async def put_botocore(i: int, slot: int) -> None:
        await backend.put(f"micro/put-b-{i:05d}", payload, WriteOptions(), Checksum("md5", md5))

    async def put_wire(i: int, slot: int) -> None:
        await wire.put_object(bucket, f"micro/put-w-{i:05d}", payload, content_md5=md5)

    async def put_aiohttp(i: int, slot: int) -> None:
        url, headers = signed("PUT", f"micro/put-a-{i:05d}", {"content-md5": md5})
        async with session.put(
            url, data=bytes(payload), headers=headers, skip_auto_headers=("User-Agent",)
        ) as r:
            assert r.status == 200, (r.status, await r.text())

    impls = {
        "get": {"botocore": get_botocore, "wire": get_wire, "aiohttp": get_aiohttp},
        "put": {"botocore": put_botocore, "wire": put_wire, "aiohttp": put_aiohttp},
    }
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    for op, table in impls.items():
        names = list(table)
        results[op] = {name: [] for name in names}
        for rnd in range(args.rounds):
            order = names if rnd % 2 == 0 else names[::-1]
            for name in order:
                s0 = server_cpu()
                c, w = await run_all(n, conc, table[name])
                s1 = server_cpu()
                results[op][name].append(
                    {"cpu_s": c, "wall_s": w, "server_cpu_s": (s1 - s0) if s0 is not None else -1}
                )
                print(
                    f"{op} {name:9s} round {rnd + 1}: client CPU {c:6.2f} s "
                    f"({c / n * 1e3:5.2f} ms/request), wall {w:6.2f} s",
                    flush=True,
                )
    await session.close()
    await backend.aclose()
    await wire.aclose()

    summary: dict[str, Any] = {
        "objects": n,
        "size_bytes": size,
        "concurrency": conc,
        "rounds": args.rounds,
        "python": sys.version.split()[0],
    }
    for op, per in results.items():
        for name, runs in per.items():
            summary[f"{op}_{name}"] = {
                "cpu_ms_per_request": round(
                    statistics.median(r["cpu_s"] for r in runs) / n * 1e3, 3
                ),
                "wall_s": round(statistics.median(r["wall_s"] for r in runs), 3),
                "server_cpu_s": round(statistics.median(r["server_cpu_s"] for r in runs), 2),
            }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--size-mib", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args()

    from synxfer_bench.targets import SeaweedTarget

    with tempfile.TemporaryDirectory(prefix="s3-wire-micro-") as tmp:
        target = SeaweedTarget(Path(tmp))
        with target:
            assert target.endpoint_url is not None
            os.environ.update(target.tool_env())
            summary = asyncio.run(
                bench(args, target.endpoint_url, target.bucket, target.server_cpu)
            )
            asyncio.run(_cleanup(target))
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")


async def _cleanup(target: Any) -> None:
    """Empty the bucket (the target removes it, and SeaweedFS wants it empty)."""
    from synxfer_s3._credentials import Credentials, StaticCredentials
    from synxfer_s3._wire import S3Wire

    async with S3Wire(
        region="us-east-1",
        credentials=StaticCredentials(Credentials(target.access_key, target.secret_key)),
        endpoint_url=target.endpoint_url,
    ) as wire:
        token: str | None = None
        while True:
            page = await wire.list_objects_v2(target.bucket, continuation_token=token)
            keys = [o.key for o in page.objects]
            if keys:
                await wire.delete_objects(target.bucket, keys)
            if not page.truncated:
                return
            token = page.next_token


if __name__ == "__main__":
    main()
