"""A bare downloader: the floor a Python data plane can reach, for the A/Bs.

Not a tool anyone should use: no retries, no journal, no temp files, no
If-Match, no HEAD. It lists ``s3://BUCKET/PREFIX/`` (one ListObjectsV2 page)
and fetches every object in ranged GETs over ``--threads`` plain-HTTP
connections, one blocking socket per thread, each thread receiving,
CRC32C-ing (fastcrc, as synxfer does) and writing with 32 KiB ``pwrite``
calls, as :mod:`synxfer.engine.localfile` does. Three modes:

* ``whole``: a range is received whole into the thread's buffer, then
  hashed and written (synxfer's way: a pooled part buffer per fetch);
* ``pipe``: a range is received in ``--piece`` pieces, each hashed and
  written while it is still in the CPU's cache (s5cmd's way: a 50 MiB GET
  streamed through a 32 KiB buffer);
* ``native``: ``pipe`` in one C call per GET (``bare_native.c``: receive,
  CRC32C and 32 KiB ``pwrite`` calls without the GIL), compiled with the
  system's ``cc`` on first use: the floor of a native data plane under
  Python's start-up (docs/decisions/0021).

It imports ``synxfer_s3._sigv4`` (and so all of synxfer, asyncio included)
to sign its requests, so its start-up costs what synxfer's does. Run it
through ``s3_download_ab.py`` (a tool ``bare...::ARGS``), which gives it the
endpoint and credentials and checks its files; by hand::

    AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \\
        python benchmarks/experiments/bare_download.py --endpoint-url http://127.0.0.1:8333 \\
        --range-mib 32 --mode pipe s3://bucket/prefix/ out/
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.machinery
import importlib.util
import mmap
import os
import queue
import socket
import subprocess
import sysconfig
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from types import ModuleType
from urllib.parse import quote, urlsplit

import fastcrc

from synxfer_s3._sigv4 import SigV4Signer, quote_path

WRITE_CHUNK = 32 * 1024
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


@dataclass(frozen=True)
class Job:
    key: str
    fd: int
    offset: int
    length: int


class Client:
    """Signed HTTP/1.1 requests on one blocking socket (a new one after a
    response that says ``Connection: close``, as moto's do)."""

    def __init__(self, endpoint: str, region: str) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme != "http" or not parts.hostname:
            raise SystemExit(f"--endpoint-url {endpoint!r}: expected http://HOST:PORT")
        self.host = parts.netloc
        self.address = (parts.hostname, parts.port or 80)
        self.sock = self._connect()
        self.signer = SigV4Signer(region)
        self.access = os.environ["AWS_ACCESS_KEY_ID"]
        self.secret = os.environ["AWS_SECRET_ACCESS_KEY"]
        self.head = b""  # the last response's status line and headers

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def send(self, path: str, query: str = "", headers: dict[str, str] | None = None) -> bytes:
        """Send a GET; return the bytes after the response head (the head is checked)."""
        if b"\r\nconnection: close" in self.head.lower():
            self.sock.close()
            self.sock = self._connect()
        h = dict(headers or {})
        self.signer.sign(
            "GET", self.host, path, query, h, access_key=self.access, secret_key=self.secret
        )
        target = f"{path}?{query}" if query else path
        lines = [f"GET {target} HTTP/1.1", *(f"{k}: {v}" for k, v in h.items())]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit(f"GET {target}: connection closed")
            head += chunk
        status, _, rest = head.partition(b"\r\n\r\n")
        if not status.startswith((b"HTTP/1.1 200", b"HTTP/1.1 206")):
            raise SystemExit(f"GET {target}: {status[:200]!r}")
        self.head = status
        return rest

    def content_length(self) -> int:
        for line in self.head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                return int(value)
        raise SystemExit("no Content-Length")

    def read_all(self, rest: bytes) -> bytes:
        want = self.content_length()
        while len(rest) < want:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("connection closed mid-body")
            rest += chunk
        return rest


def list_objects(client: Client, bucket: str, prefix: str) -> list[tuple[str, int]]:
    query = f"list-type=2&prefix={quote(prefix, safe='')}"
    body = client.read_all(client.send(f"/{bucket}", query))
    root = ET.fromstring(body)
    if root.findtext(f"{_NS}IsTruncated") == "true":
        raise SystemExit("more than one page of objects: not supported here")
    return [
        (c.findtext(f"{_NS}Key") or "", int(c.findtext(f"{_NS}Size") or 0))
        for c in root.iter(f"{_NS}Contents")
    ]


def load_native() -> ModuleType:
    """``bare_native.c``, compiled once per source into the user's cache
    directory (not a shared temp directory, where anyone could plant the
    file) and checked against fastcrc before it is trusted."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bare_native.c")
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    cache = os.path.join(cache, "synxfer-bench")
    os.makedirs(cache, mode=0o700, exist_ok=True)
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    path = os.path.join(cache, f"bare-native-{digest}{suffix}")
    if not os.path.exists(path):
        include = sysconfig.get_paths()["include"]
        tmp = f"{path}.{os.getpid()}"
        cmd = ["cc", "-O2", "-msse4.2", "-shared", "-fPIC", f"-I{include}", source, "-o", tmp]
        try:
            subprocess.run(cmd, check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise SystemExit(f"--mode native: could not compile {source} ({exc})") from None
        os.replace(tmp, path)
    loader = importlib.machinery.ExtensionFileLoader("bare_native", path)
    spec = importlib.util.spec_from_file_location("bare_native", path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sample = os.urandom(100_003)
    if module.crc32c(sample) != fastcrc.crc32.iscsi(sample):
        raise SystemExit(f"--mode native: {path} computes a wrong CRC32C")
    return module


@dataclass(frozen=True)
class Mode:
    bucket: str
    whole: bool  # receive a range whole, then hash and write it; else piece by piece
    piece: int  # bytes per receive in pipe and native modes
    size: int  # bytes per GET
    native: ModuleType | None = None  # bare_native, in native mode


def worker(
    client: Client, jobs: queue.SimpleQueue[Job | None], how: Mode, errors: list[BaseException]
) -> None:
    try:
        _work(client, jobs, how.bucket, how.whole, how.piece, how.size, how.native)
    except BaseException as exc:  # reported by main, which exits non-zero
        errors.append(exc)


def _work(
    client: Client,
    jobs: queue.SimpleQueue[Job | None],
    bucket: str,
    whole: bool,
    piece: int,
    size: int,
    native: ModuleType | None,
) -> None:
    # A private anonymous mapping, as synxfer's pooled download buffers (decision 0019).
    buf = memoryview(mmap.mmap(-1, size if whole else piece))
    iscsi = fastcrc.crc32.iscsi
    while (job := jobs.get()) is not None:
        end = job.offset + job.length - 1
        rest = client.send(
            f"/{bucket}/{quote_path(job.key)}", headers={"range": f"bytes={job.offset}-{end}"}
        )
        got = 0
        crc = 0
        if whole:
            buf[: len(rest)] = rest
            got = len(rest)
            while got < job.length:
                got += client.sock.recv_into(buf[got : job.length])
            crc = iscsi(buf[: job.length])
            for o in range(0, job.length, WRITE_CHUNK):
                os.pwrite(job.fd, buf[o : min(o + WRITE_CHUNK, job.length)], job.offset + o)
            continue
        if rest:
            crc = iscsi(rest)
            os.pwrite(job.fd, rest, job.offset)
            got = len(rest)
        if native is not None:  # the rest of the body in one call, without the GIL
            sock = client.sock.fileno()
            native.recv_crc_pwrite(sock, job.fd, job.offset + got, job.length - got, buf, crc)
            continue
        while got < job.length:
            n = client.sock.recv_into(buf[: min(piece, job.length - got)])
            if not n:
                raise SystemExit("connection closed mid-body")
            view = buf[:n]
            crc = iscsi(view, crc)
            for o in range(0, n, WRITE_CHUNK):
                os.pwrite(job.fd, view[o : min(o + WRITE_CHUNK, n)], job.offset + got + o)
            got += n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("src", help="s3://BUCKET/PREFIX/")
    parser.add_argument("dest", help="a directory")
    parser.add_argument("--endpoint-url", required=True)
    parser.add_argument("--region", default=os.environ.get("AWS_REGION", "us-east-1"))
    parser.add_argument("--threads", type=int, default=(os.cpu_count() or 1) + 4)
    parser.add_argument("--range-mib", type=int, default=16, help="bytes per GET (default 16)")
    parser.add_argument("--mode", choices=("whole", "pipe", "native"), default="whole")
    parser.add_argument("--piece", type=int, default=256 * 1024, help="pipe mode's receive size")
    parser.add_argument(
        "--prepare", action="store_true", help="compile native mode's module (if needed) and exit"
    )
    args = parser.parse_args()
    if args.prepare:
        if args.mode == "native":
            load_native()
        return
    url = urlsplit(args.src)
    if url.scheme != "s3" or not url.netloc:
        raise SystemExit(f"{args.src!r}: expected s3://BUCKET/PREFIX/")
    bucket, prefix = url.netloc, url.path.lstrip("/")
    size = args.range_mib << 20
    clients = [Client(args.endpoint_url, args.region) for _ in range(args.threads)]
    objects = list_objects(clients[0], bucket, prefix)
    jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
    errors: list[BaseException] = []
    fds = []
    for key, length in objects:
        path = os.path.join(args.dest, key[len(prefix) :].lstrip("/"))
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        fds.append(fd)
        for offset in range(0, length, size):
            jobs.put(Job(key, fd, offset, min(size, length - offset)))
    native = load_native() if args.mode == "native" else None
    how = Mode(bucket, args.mode == "whole", args.piece, size, native)
    threads = [threading.Thread(target=worker, args=(c, jobs, how, errors)) for c in clients]
    for t in threads:
        jobs.put(None)
        t.start()
    for t in threads:
        t.join()
    for fd in fds:
        os.close(fd)
    if errors:
        raise SystemExit(f"bare_download: {errors[0]!r}")


if __name__ == "__main__":
    main()
