"""What each tool sends for a large upload over HTTPS, and what it costs the server (0038).

    python benchmarks/experiments/upload_server_cpu.py wire [--size-mib 1024]
    python benchmarks/experiments/upload_server_cpu.py cpu [--rounds 3] [--size-mib 1024]
        [--variants synxfer,synxfer-50MiB,s5cmd,...]
    python benchmarks/experiments/upload_server_cpu.py profile [--variants synxfer,s5cmd]

Both start ``weed mini`` with auth and TLS (the bench's ``seaweedfs-tls``
target: a CA made for the run, every tool verifying it) and upload one
file of random bytes with each tool's CLI.

``wire`` puts a TLS-terminating relay in front of the server (it presents
the server's own certificate, so every tool still verifies the run's CA)
and counts, per tool, the TLS connections opened, the requests by kind,
the part sizes and the integrity headers of the bodies (``Content-MD5``,
``x-amz-checksum-*``, ``x-amz-content-sha256``, aws-chunked trailers). It
is for counting only: nothing timed goes through it.

``cpu`` times the same uploads straight to the server: the server's CPU
(user + system of the ``weed`` process, read from /proc before and after,
after a one-second settle) and the client's (the tool process's rusage),
rounds interleaving the variants, the median printed. Each object is
deleted after its run, outside the measured window.

``profile`` starts a fresh server per variant with ``-cpuprofile`` (Go's
pprof, written when the server stops; no debug port is opened), makes one
upload, and prints the server's CPU by function (flat and cumulative),
read from the profile with the small protobuf reader below (no Go tool
chain needed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import ssl
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from synxfer_bench.targets import SeaweedTlsTarget
from synxfer_bench.tools import Op, Peers, Tool, make_tools

PEERS = Path(__file__).resolve().parents[2] / "bench-work" / "peers-venv"
#: name -> (tool, extra synxfer CLI options)
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "synxfer": ("synxfer", ()),
    "synxfer-16MiB": ("synxfer", ("--part-size", "16MiB")),
    "synxfer-50MiB": ("synxfer", ("--part-size", "50MiB")),
    "synxfer-md5": ("synxfer", ("--backend-option", "s3.md5_only=true")),
    "synxfer-50MiB-md5": (
        "synxfer",
        ("--part-size", "50MiB", "--backend-option", "s3.md5_only=true"),
    ),
    "s5cmd": ("s5cmd", ()),
    "aws": ("aws", ()),
    "rclone": ("rclone", ()),
}
_INTEREST = (
    "content-md5",
    "x-amz-content-sha256",
    "x-amz-checksum-crc32",
    "x-amz-checksum-crc32c",
    "x-amz-checksum-crc64nvme",
    "x-amz-checksum-sha256",
    "x-amz-sdk-checksum-algorithm",
    "x-amz-checksum-algorithm",
    "x-amz-trailer",
    "content-encoding",
    "transfer-encoding",
    "expect",
)


def _tool(variant: str) -> Tool:
    name, options = VARIANTS[variant]
    (tool,) = make_tools([name], Peers.load(PEERS))
    if options:
        tool.options = [*tool.options, *options]  # type: ignore[attr-defined]
    if tool.missing():
        raise SystemExit(tool.missing())
    return tool


# --------------------------------------------------------------------------- wire


class _Wire:
    """Counts what crosses a TLS-terminating relay, request by request."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: Counter[str] = Counter()
        self.headers: Counter[str] = Counter()
        self.sha256: Counter[str] = Counter()
        self.part_sizes: Counter[int] = Counter()
        self.body_bytes = 0


class _RequestParser:
    """Request heads and body lengths of one client->server byte stream (HTTP/1.1)."""

    def __init__(self, wire: _Wire) -> None:
        self.wire = wire
        self.buf = bytearray()
        self.skip = 0  # body bytes still to pass
        self.chunked = False

    def feed(self, data: bytes) -> None:
        self.buf += data
        while True:
            if self.skip:
                n = min(self.skip, len(self.buf))
                del self.buf[:n]
                self.skip -= n
                if self.skip:
                    return
                continue
            if self.chunked:
                if not self._chunk():
                    return
                continue
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
            del self.buf[: end + 4]
            self._request(head)

    def _chunk(self) -> bool:
        end = self.buf.find(b"\r\n")
        if end < 0:
            return False
        size = int(bytes(self.buf[:end]).split(b";")[0], 16)
        if size == 0:  # trailers up to an empty line
            stop = self.buf.find(b"\r\n\r\n")
            if stop < 0:
                return False
            del self.buf[: stop + 4]
            self.chunked = False
            return True
        del self.buf[: end + 2]
        self.skip = size + 2
        return True

    def _request(self, head: list[str]) -> None:
        method, target, _ = head[0].split(" ", 2)
        fields: dict[str, str] = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        query = target.partition("?")[2]
        keys = {q.split("=", 1)[0] for q in query.split("&") if q}
        if method == "PUT" and "partNumber" in keys:
            kind = "UploadPart"
        elif method == "PUT":
            kind = "PutObject"
        elif method == "POST" and "uploads" in keys:
            kind = "CreateMultipartUpload"
        elif method == "POST" and "uploadId" in keys:
            kind = "CompleteMultipartUpload"
        else:
            kind = f"{method} {'?' + '&'.join(sorted(keys)) if keys else ''}".strip()
        w = self.wire
        w.requests[kind] += 1
        if kind in ("UploadPart", "PutObject"):
            for name in _INTEREST:
                if name in fields:
                    w.headers[f"{name}: {fields[name] if name in _VALUE_KEPT else '…'}"] += 1
            sha = fields.get("x-amz-content-sha256", "(none)")
            w.sha256["hex digest" if len(sha) == 64 else sha] += 1
            size = int(
                fields.get("x-amz-decoded-content-length") or fields.get("content-length", "0")
            )
            w.part_sizes[size] += 1
            w.body_bytes += size
        if fields.get("transfer-encoding", "").lower() == "chunked":
            self.chunked = True
        else:
            self.skip = int(fields.get("content-length", "0"))


_VALUE_KEPT = frozenset(
    {
        "x-amz-sdk-checksum-algorithm",
        "x-amz-checksum-algorithm",
        "x-amz-trailer",
        "content-encoding",
        "transfer-encoding",
        "expect",
    }
)


class _Relay:
    """TLS in (the server's certificate), TLS out (verifying the run's CA), counting."""

    def __init__(self, target: SeaweedTlsTarget, wire: _Wire) -> None:
        assert target.endpoint_url is not None
        assert target.ca_file is not None
        self.upstream = int(target.endpoint_url.rsplit(":", 1)[1])
        tls = target.root / "tls"
        self.server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.server_ctx.load_cert_chain(tls / "server.pem", tls / "server-key.pem")
        self.client_ctx = ssl.create_default_context(cafile=str(target.ca_file))
        self.wire = wire
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Relay:
        self._thread.start()
        self._ready.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.server_ctx)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.wire.connections += 1
        up_r, up_w = await asyncio.open_connection(
            "127.0.0.1", self.upstream, ssl=self.client_ctx, server_hostname="127.0.0.1"
        )
        parser = _RequestParser(self.wire)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, count: bool) -> None:
            with contextlib.suppress(OSError, ssl.SSLError):
                while data := await src.read(1 << 18):
                    if count:
                        parser.feed(data)
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(OSError, RuntimeError, ssl.SSLError):
                dst.close()

        await asyncio.gather(pump(reader, up_w, True), pump(up_r, writer, False))


def wire(args: argparse.Namespace, target: SeaweedTlsTarget, src_dir: Path) -> None:
    rows = {}
    for variant in args.variants:
        tool = _tool(variant)
        counts = _Wire()
        with _Relay(target, counts) as relay, tempfile.TemporaryDirectory() as scratch:
            real = target.endpoint_url
            target.endpoint_url = f"https://127.0.0.1:{relay.port}"
            try:
                cmd = tool.command(Op("upload", f"wire-{variant}/", src_dir), target, Path(scratch))
            finally:
                target.endpoint_url = real
            out = subprocess.run(cmd.argv, env=cmd.env, capture_output=True, text=True)
            if out.returncode:
                raise SystemExit(f"{variant}: {out.stderr[-800:]}")
        target.run(target.remove_prefix(f"wire-{variant}/"))
        rows[variant] = {
            "TLS connections (handshakes)": counts.connections,
            "requests": dict(counts.requests),
            "body sizes (bytes: count)": dict(counts.part_sizes),
            "x-amz-content-sha256": dict(counts.sha256),
            "integrity headers on bodies": dict(counts.headers),
        }
        print(variant, json.dumps(rows[variant], indent=1), flush=True)


# --------------------------------------------------------------------------- cpu


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu(args: argparse.Namespace, target: SeaweedTlsTarget, src_dir: Path) -> None:
    assert target.server_pid is not None
    gib = args.size_mib / 1024
    runs: dict[str, list[tuple[float, float, float]]] = {v: [] for v in args.variants}
    for r in range(args.rounds):
        order = args.variants[r % len(args.variants) :] + args.variants[: r % len(args.variants)]
        for variant in order:
            tool = _tool(variant)
            prefix = f"cpu-{variant}-{r}/"
            with tempfile.TemporaryDirectory() as scratch:
                cmd = tool.command(Op("upload", prefix, src_dir), target, Path(scratch))
                time.sleep(1.0)
                s0 = _proc_cpu(target.server_pid)
                k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                out = subprocess.run(cmd.argv, env=cmd.env, capture_output=True, text=True)
                wall = time.perf_counter() - t0
                k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                time.sleep(1.0)
                s1 = _proc_cpu(target.server_pid)
            if out.returncode:
                raise SystemExit(f"{variant}: {out.stderr[-800:]}")
            client = k1.ru_utime - k0.ru_utime + k1.ru_stime - k0.ru_stime
            runs[variant].append(((s1 - s0) / gib, client / gib, wall))
            print(
                f"round {r} {variant:18} server {runs[variant][-1][0]:5.2f} s/GiB  "
                f"client {runs[variant][-1][1]:5.2f} s/GiB  wall {wall:5.2f} s",
                flush=True,
            )
            target.run(target.remove_prefix(prefix))
            target.reclaim()
    print(f"\n{args.size_mib} MiB upload over HTTPS to SeaweedFS, median of {args.rounds}:")
    print("| variant | server CPU s/GiB | client CPU s/GiB | wall s | server CPU of each run |")
    print("|---|---:|---:|---:|---|")
    for variant, values in runs.items():
        server = statistics.median(v[0] for v in values)
        client = statistics.median(v[1] for v in values)
        wall_s = statistics.median(v[2] for v in values)
        each = ", ".join(f"{v[0]:.2f}" for v in values)
        print(f"| {variant} | {server:.2f} | {client:.2f} | {wall_s:.2f} | {each} |")


# --------------------------------------------------------------------------- profile


def _varints(data: bytes) -> Any:
    """Yield (field number, wire type, value) of one protobuf message."""
    i = 0
    n = len(data)
    while i < n:
        key, i = _varint(data, i)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, i = _varint(data, i)
            yield field, wire_type, value
        elif wire_type == 2:
            size, i = _varint(data, i)
            yield field, wire_type, data[i : i + size]
            i += size
        elif wire_type == 1:
            yield field, wire_type, data[i : i + 8]
            i += 8
        elif wire_type == 5:
            yield field, wire_type, data[i : i + 4]
            i += 4
        else:
            raise ValueError(f"wire type {wire_type}")


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def _ints(wire_type: int, value: Any) -> list[int]:
    if wire_type == 0:
        return [value]
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v)
    return out


def read_pprof(
    path: Path,
) -> tuple[dict[str, float], dict[str, float], float, dict[tuple[str, ...], float]]:
    """(flat seconds, cumulative seconds by function, total seconds, seconds by the
    leaf's first five frames) of a Go CPU profile."""
    import gzip

    data = gzip.decompress(path.read_bytes())
    strings: list[str] = []
    samples: list[tuple[list[int], list[int]]] = []
    locations: dict[int, list[int]] = {}
    functions: dict[int, int] = {}
    for field, _wt, value in _varints(data):
        if field == 6:
            strings.append(value.decode("utf-8", "replace"))
        elif field == 2:
            locs: list[int] = []
            vals: list[int] = []
            for f, w, v in _varints(value):
                if f == 1:
                    locs += _ints(w, v)
                elif f == 2:
                    vals += _ints(w, v)
            samples.append((locs, vals))
        elif field == 4:
            loc_id, funcs = 0, []
            for f, _w, v in _varints(value):
                if f == 1:
                    loc_id = v
                elif f == 4:
                    funcs += [lv for lf, _, lv in _varints(v) if lf == 1]
            locations[loc_id] = funcs
        elif field == 5:
            fid = name = 0
            for f, _, v in _varints(value):
                if f == 1:
                    fid = v
                elif f == 2:
                    name = v
            functions[fid] = name
    flat: defaultdict[str, float] = defaultdict(float)
    cum: defaultdict[str, float] = defaultdict(float)
    chains: defaultdict[tuple[str, ...], float] = defaultdict(float)
    total = 0.0
    for locs, vals in samples:
        seconds = vals[-1] / 1e9
        total += seconds
        stack = [strings[functions[f]] for loc in locs for f in locations.get(loc, [])]
        if stack:
            flat[stack[0]] += seconds
            chains[tuple(stack[:5])] += seconds
        for frame in set(stack):
            cum[frame] += seconds
    return dict(flat), dict(cum), total, dict(chains)


class _ProfiledTarget(SeaweedTlsTarget):
    def _tls_flags(self) -> list[str]:
        return [*super()._tls_flags(), f"-cpuprofile={self.root / 'cpu.pprof'}"]


def profile(args: argparse.Namespace, src_dir: Path, tmp: Path) -> None:
    for variant in args.variants:
        tool = _tool(variant)
        with _ProfiledTarget(tmp / variant) as target, tempfile.TemporaryDirectory() as scratch:
            cmd = tool.command(Op("upload", "p/", src_dir), target, Path(scratch))
            out = subprocess.run(cmd.argv, env=cmd.env, capture_output=True, text=True)
            if out.returncode:
                raise SystemExit(f"{variant}: {out.stderr[-800:]}")
        flat, cum, total, chains = read_pprof(target.root / "cpu.pprof")
        print(f"\n{variant}: server CPU in the profile {total:.2f} s (start-up included)")
        print("flat s   function")
        for name, seconds in sorted(flat.items(), key=lambda kv: -kv[1])[:25]:
            print(f"{seconds:6.2f}   {name}")
        print("cum s    function (selected)")
        for name, seconds in sorted(cum.items(), key=lambda kv: -kv[1])[:60]:
            print(f"{seconds:6.2f}   {name}")
        print("s        leaf <- callers (the heaviest stacks' first five frames)")
        for chain, seconds in sorted(chains.items(), key=lambda kv: -kv[1])[:20]:
            print(f"{seconds:6.2f}   {' <- '.join(n.rsplit('/', 1)[-1] for n in chain)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("mode", choices=("wire", "cpu", "profile"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--variants", default="synxfer,synxfer-50MiB,synxfer-md5,s5cmd,aws,rclone")
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}: known {', '.join(VARIANTS)}")
    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        src_dir = Path(tmp) / "src"
        src_dir.mkdir()
        with open(src_dir / "one.bin", "wb") as fh:
            for _ in range(args.size_mib):
                fh.write(os.urandom(1 << 20))
        if args.mode == "profile":
            profile(args, src_dir, Path(tmp))
            return
        with SeaweedTlsTarget(Path(tmp)) as target:
            (wire if args.mode == "wire" else cpu)(args, target, src_dir)


if __name__ == "__main__":
    main()
