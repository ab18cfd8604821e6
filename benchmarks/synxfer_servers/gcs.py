"""GCS test servers on 127.0.0.1: gcp-storage-emulator, and a front that makes it act like GCS.

* :class:`GcsEmulator` -- ``gcp-storage-emulator`` (PyPI) in a subprocess,
  in memory, bound to 127.0.0.1 on a free port.
* :class:`GcsFront` -- an HTTP server in a thread of this process that
  forwards to an emulator and adds what real GCS does and the emulator does
  not (below), plus what tests need: a request log, fault injection, and an
  OAuth token endpoint with a Bearer-token check.
* :func:`create_bucket` -- a bucket through the JSON API (soft delete off, so
  deleted objects do not pile up in the emulator's memory); :func:`wipe` --
  every object deleted, buckets kept (the emulator serializes its whole state
  on every write: a lean emulator is a fast one).

What ``gcp-storage-emulator`` does (checked against 2026.7.19): the JSON API's
uploads (media; multipart, verifying the ``crc32c`` / ``md5Hash`` given in the
metadata and answering 400 "Provided CRC32C ... doesn't match calculated
CRC32C ..." as GCS does; resumable, chunk by chunk, with ``308`` + ``Range``
status queries), ``alt=media`` reads with ``Range``, listing by prefix,
delete, patch, compose (concatenation, destination metadata) and rewrite.

What it does not do, and what :class:`GcsFront` adds:

* Preconditions: ``ifGenerationMatch`` / ``ifGenerationNotMatch`` are ignored
  everywhere. The front checks them on object GETs and DELETEs (412).
* Media responses carry neither ``x-goog-generation`` nor
  ``x-goog-stored-content-length``, and ``x-goog-hash`` only when unranged; a
  range starting at or past the end gets ``206`` and no bytes (GCS: ``416``).
  The front sends GCS's headers on every media response (``x-goog-hash`` as
  two header lines, as GCS does) and answers 416.
* Compose ignores ``sourceObjects[].generation`` and takes any number of
  sources; composite objects keep an MD5. The front refuses more than 32
  sources (400), answers 404 for a source generation that is not live, and,
  like GCS, reports no ``md5Hash`` and a ``componentCount`` for composite
  objects.
* Rewrite ignores the request body (the destination's metadata) and always
  finishes in one call. The front applies the body's ``metadata``,
  ``contentType``, ``storageClass``, ``cacheControl`` and
  ``contentDisposition`` and can make a rewrite take several calls
  (``rewrite_steps``), returning ``rewriteToken``\\ s as GCS does for large
  objects.
* Listing ignores ``maxResults`` and ``pageToken`` (one page). The front
  pages.
* 404 responses have no body. The front sends GCS's JSON errors ("No such
  object: b/o", "The specified bucket does not exist.").
* Resumable sessions: chunk sizes are not checked (the front refuses a
  non-final chunk that is not a multiple of 256 KiB, as GCS does); a status
  query on a session with nothing committed answers ``Range: bytes=0-0``
  (one byte) instead of no ``Range`` -- not fixed, so tests interrupt an
  upload only after its first chunk; ``DELETE`` of a session answers 501.
* HTTP/1.0 only, one request at a time, listen backlog 5. The front speaks
  HTTP/1.1 with keep-alive and a large backlog, and serializes forwarding
  (which also makes its check-then-forward steps atomic).

Everything binds 127.0.0.1. Nothing here sets environment variables.
"""

from __future__ import annotations

import base64
import dataclasses
import email.utils
import http.client
import json
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import IO, Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from .process import ChildProcess, end_process, stderr_tail

__all__ = [
    "HOST",
    "Fault",
    "GcsEmulator",
    "GcsFront",
    "RecordedRequest",
    "create_bucket",
    "wipe",
]

#: The only address these servers bind.
HOST = "127.0.0.1"

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "date",
        "server",
    }
)
_CHUNK = 256 * 1024
#: GCS's error reasons for the statuses faults inject.
_REASONS = {
    400: "invalid",
    401: "authError",
    403: "forbidden",
    404: "notFound",
    412: "conditionNotMet",
    429: "rateLimitExceeded",
    500: "backendError",
    503: "backendError",
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def create_bucket(endpoint_url: str, name: str, *, soft_delete: bool = False) -> None:
    """Create bucket ``name`` on a GCS(-like) server (no credentials)."""
    base = endpoint_url.rstrip("/")
    request = urllib.request.Request(
        f"{base}/storage/v1/b?project=synxfer-tests",
        data=json.dumps({"name": name}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
    if not soft_delete:
        policy = {"softDeletePolicy": {"retentionDurationSeconds": "0"}}
        request = urllib.request.Request(
            f"{base}/storage/v1/b/{quote(name, safe='')}",
            data=json.dumps(policy).encode(),
            headers={"Content-Type": "application/json"},
            method="PATCH",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()


def wipe(endpoint_url: str) -> None:
    """Delete every object on a gcp-storage-emulator, keeping the buckets.

    The emulator serializes its whole state on every write, so writes slow
    down as objects pile up; tests sharing one emulator stay fast by wiping
    it between tests.
    """
    base = endpoint_url.rstrip("/")
    with urllib.request.urlopen(f"{base}/wipe?keep-buckets=true", timeout=30) as response:
        response.read()


# -- the emulator --------------------------------------------------------------

#: The child process: the emulator's own CLI entry point in a thread, while the
#: main thread waits for stdin to close -- so the emulator also goes away when
#: the test process dies without stopping it.
_EMULATOR_MAIN = """
import os, sys, threading
from gcp_storage_emulator.__main__ import main

def serve():
    try:
        main(sys.argv[1:])
    finally:
        os._exit(3)  # the emulator stopped, or never started

threading.Thread(target=serve, daemon=True).start()
sys.stdin.buffer.read()
os._exit(0)
"""


class GcsEmulator(ChildProcess):
    """``gcp-storage-emulator`` in a subprocess, as a (synchronous) context manager::

        with GcsEmulator() as emulator:
            create_bucket(emulator.endpoint_url, "bucket")
            ...

    It runs the emulator's CLI (``start --host 127.0.0.1 --port N --in-memory
    --quiet``) in a temporary working directory. The child exits when its
    stdin closes: leaving the block closes it (then terminates and finally
    kills the child if it lingers), and so does the death of this process.
    """

    def __init__(self, *, startup_timeout: float = 30.0, stop_timeout: float = 5.0) -> None:
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._cwd: tempfile.TemporaryDirectory[str] | None = None

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running emulator."""
        if self.port is None:
            raise RuntimeError("GcsEmulator is not running")
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("GcsEmulator is not running")
        return self._proc.pid

    def start(self) -> None:
        """Start the emulator and wait until it answers."""
        if self._proc is not None:
            raise RuntimeError("GcsEmulator already started")
        self._cwd = tempfile.TemporaryDirectory(prefix="synxfer-gcs-")
        last_error = ""
        for _ in range(3):  # the free port may be taken before the emulator binds it
            port = _free_port()
            self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _EMULATOR_MAIN,
                    "start",
                    "--host",
                    HOST,
                    "--port",
                    str(port),
                    "--in-memory",
                    "--quiet",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                cwd=self._cwd.name,
            )
            try:
                if self._wait_ready(port):
                    self.port = port
                    return
            except BaseException:
                self.stop()
                raise
            last_error = self._stderr_tail()
            self._kill()
        self.stop()
        raise RuntimeError(f"gcp-storage-emulator did not start{last_error}")

    def _wait_ready(self, port: int) -> bool:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"http://{HOST}:{port}/", timeout=2) as response:
                    if response.read() == b"OK":
                        return True
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.02)
        raise RuntimeError(
            f"gcp-storage-emulator did not answer within {self.startup_timeout}s"
            f"{self._stderr_tail()}"
        )

    def _stderr_tail(self) -> str:
        return stderr_tail(self._stderr)

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:  # the wrapper exits at EOF on its stdin
            end_process(proc, self.stop_timeout, close_stdin_first=True)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def stop(self) -> None:
        """Stop the emulator: SIGTERM, then SIGKILL. Safe to call twice."""
        self._kill()
        self.port = None
        if self._cwd is not None:
            self._cwd.cleanup()
            self._cwd = None

    def __repr__(self) -> str:
        state = f"pid={self._proc.pid} {self.endpoint_url}" if self._proc else "stopped"
        return f"<GcsEmulator {state}>"


# -- the front -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    """One request the front received (the body's size only)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body_size: int

    @property
    def object_name(self) -> str | None:
        """The object a ``/storage/v1/b/B/o/NAME...`` request is about, decoded."""
        m = re.match(r"^/(?:upload/|download/)?storage/v1/b/[^/]+/o/([^/]+)", self.path)
        return unquote(m.group(1)) if m else None


@dataclasses.dataclass
class Fault:
    """Make the next ``times`` requests matching ``method`` and ``path`` fail.

    ``path`` is a regular expression searched in the request's raw path and
    query. The first ``skip`` matching requests pass; then ``times`` fail.
    ``action``: ``"drop-request"`` closes the connection without forwarding
    the request; ``"drop-response"`` forwards it, then closes the connection
    without answering (the request took effect, the client cannot know);
    ``"ignore-range"`` forwards it without its ``Range`` header (a server may
    ignore Range and answer 200 with the whole object); ``"cut-body"``
    answers in full but sends only the first half of the body, then closes
    the connection; an int answers with that HTTP status and a GCS error
    body. Every fault counts
    every matching request (``seen``), whichever fault handles it.
    """

    method: str
    path: str
    action: str | int = "drop-request"
    times: int = 1
    skip: int = 0
    seen: int = 0
    hits: int = 0


class _FrontServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, front: GcsFront) -> None:
        self.front = front
        super().__init__((HOST, 0), _FrontHandler)


class _FrontHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120
    server: _FrontServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes: without this, Nagle's
        # algorithm and the client's delayed ACK add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        front = self.server.front
        body = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        parts = urlsplit(self.path)
        request = RecordedRequest(
            self.command,
            parts.path,
            parse_qs(parts.query, keep_blank_values=True),
            headers,
            len(body),
        )
        front._record(request)
        fault: Fault | None = None
        try:
            if parts.path == "/token" and self.command == "POST":
                reply = front._token()
            elif front.require_token and headers.get("authorization") != (
                f"Bearer {front.require_token}"
            ):
                reply = _error(401, "Invalid Credentials", "authError")
            else:
                fault = front._take_fault(self.command, self.path)
                if fault is not None and fault.action == "drop-request":
                    self.close_connection = True
                    return
                if fault is not None and isinstance(fault.action, int):
                    reply = _error(fault.action, "injected failure", _REASONS.get(fault.action))
                else:
                    served = request
                    if fault is not None and fault.action == "ignore-range":
                        kept = {k: v for k, v in headers.items() if k != "range"}
                        served = dataclasses.replace(request, headers=kept)
                    with front.lock:
                        reply = front._serve(served, parts.query, body)
                    if fault is not None and fault.action == "drop-response":
                        self.close_connection = True
                        return
        except Exception as exc:  # a bug in the front: answer rather than hang
            reply = _error(500, f"front error: {type(exc).__name__}: {exc}", "backendError")
        status, reply_headers, payload = reply
        self.send_response(status)
        for name, value in reply_headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if fault is not None and fault.action == "cut-body":
            self.wfile.write(payload[: len(payload) // 2])
            self.close_connection = True
            return
        self.wfile.write(payload)


Reply = tuple[int, list[tuple[str, str]], bytes]

_OBJECT = re.compile(r"^/storage/v1/b/(?P<b>[^/]+)/o/(?P<o>[^/]+)$")
_COMPOSE = re.compile(r"^/storage/v1/b/(?P<b>[^/]+)/o/(?P<o>[^/]+)/compose$")
_REWRITE = re.compile(
    r"^/storage/v1/b/(?P<b>[^/]+)/o/(?P<o>[^/]+)/rewriteTo/b/(?P<db>[^/]+)/o/(?P<do>[^/]+)$"
)
_LIST = re.compile(r"^/storage/v1/b/(?P<b>[^/]+)/o$")
_UPLOAD = re.compile(r"^/upload/storage/v1/b/(?P<b>[^/]+)/o$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
_CHUNK_RANGE = re.compile(r"^bytes (\d+)-(\d+)/\*$")


def _json_reply(status: int, doc: Any, extra: list[tuple[str, str]] | None = None) -> Reply:
    headers = [("Content-Type", "application/json; charset=UTF-8"), *(extra or [])]
    return status, headers, json.dumps(doc).encode()


def _error(status: int, message: str, reason: str | None = "invalid") -> Reply:
    doc = {
        "error": {
            "code": status,
            "message": message,
            "errors": [{"domain": "global", "reason": reason or "invalid", "message": message}],
        }
    }
    return _json_reply(status, doc)


#: Fields of a rewrite's body the front applies to the destination (the emulator ignores them).
_REWRITE_FIELDS = ("metadata", "contentType", "storageClass", "cacheControl", "contentDisposition")


class GcsFront:
    """A GCS-faithful front for a :class:`GcsEmulator` (see the module docstring)::

        with GcsEmulator() as emulator, GcsFront(emulator.endpoint_url) as front:
            create_bucket(front.endpoint_url, "bucket")
            front.faults.append(Fault("PUT", r"upload_id=", "drop-response"))
            ...

    ``rewrite_steps`` > 1 makes every rewrite take that many calls.
    ``token`` is what ``POST /token`` hands out (an OAuth token endpoint for
    credential files whose ``token_uri`` points here); with
    ``require_token``, other requests without ``Authorization: Bearer
    <require_token>`` get 401. ``requests`` logs every request received;
    ``token_requests`` counts token grants.
    """

    def __init__(
        self,
        upstream: str,
        *,
        rewrite_steps: int = 1,
        token: str = "synxfer-test-token",
        require_token: str | None = None,
    ) -> None:
        up = urlsplit(upstream)
        if up.hostname is None or up.port is None:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self.upstream_host = up.hostname
        self.upstream_port = up.port
        self.rewrite_steps = rewrite_steps
        self.token = token
        self.require_token = require_token
        self.faults: list[Fault] = []
        self.requests: list[RecordedRequest] = []
        self.token_requests = 0
        self.lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._composites: dict[tuple[str, str], tuple[str, int]] = {}
        self._server: _FrontServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    @property
    def endpoint_url(self) -> str:
        if self._server is None:
            raise RuntimeError("GcsFront is not running")
        return f"http://{HOST}:{self._server.server_address[1]}"

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("GcsFront already started")
        self._server = _FrontServer(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> GcsFront:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- test helpers --

    def clear(self) -> None:
        """Forget logged requests and pending faults."""
        with self._log_lock:
            self.requests.clear()
            self.faults.clear()

    def matching(self, method: str, pattern: str) -> list[RecordedRequest]:
        """Logged requests with ``method`` whose path+query matches ``pattern``."""
        rx = re.compile(pattern)
        with self._log_lock:
            return [
                r
                for r in self.requests
                if r.method == method and rx.search(r.path + "?" + urlencode(r.query, True))
            ]

    def _record(self, request: RecordedRequest) -> None:
        with self._log_lock:
            self.requests.append(request)

    def _take_fault(self, method: str, target: str) -> Fault | None:
        chosen: Fault | None = None
        with self._log_lock:
            for fault in self.faults:
                if fault.method != method or not re.search(fault.path, target):
                    continue
                fault.seen += 1
                if chosen is None and fault.seen > fault.skip and fault.hits < fault.times:
                    fault.hits += 1
                    chosen = fault
        return chosen

    def _token(self) -> Reply:
        with self._log_lock:
            self.token_requests += 1
        doc = {"access_token": self.token, "expires_in": 3600, "token_type": "Bearer"}
        return _json_reply(200, doc)

    # -- forwarding --

    def _forward(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)
        try:
            hdrs = {k: v for k, v in headers.items() if k not in _HOP_BY_HOP}
            if body is not None:
                hdrs["content-length"] = str(len(body))
            conn.request(method, target, body=body, headers=hdrs)
            response = conn.getresponse()
            data = response.read()
            out = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
            return response.status, out, data
        finally:
            conn.close()

    def _get_json(self, path: str) -> dict[str, Any] | None:
        status, _, data = self._forward("GET", path, {"host": "front"}, None)
        if status != 200:
            return None
        doc = json.loads(data)
        return doc if isinstance(doc, dict) else None

    def _resource(self, bucket: str, name: str) -> dict[str, Any] | None:
        return self._get_json(f"/storage/v1/b/{bucket}/o/{name}")

    def _not_found(self, bucket: str, name: str | None) -> Reply:
        if self._get_json(f"/storage/v1/b/{bucket}") is None:
            return _error(404, "The specified bucket does not exist.", "notFound")
        return _error(404, f"No such object: {unquote(bucket)}/{unquote(name or '')}", "notFound")

    def _fix(self, doc: dict[str, Any]) -> dict[str, Any]:
        """A resource as GCS shows it: composite objects have no MD5."""
        key = (str(doc.get("bucket")), str(doc.get("name")))
        composite = self._composites.get(key)
        if composite is not None and composite[0] == str(doc.get("generation")):
            doc = {k: v for k, v in doc.items() if k != "md5Hash"}
            doc["componentCount"] = composite[1]
        return doc

    @staticmethod
    def _precondition(query: dict[str, list[str]], resource: dict[str, Any] | None) -> bool:
        generation = str(resource["generation"]) if resource else "0"
        match = query.get("ifGenerationMatch")
        if match and match[0] != generation:
            return False
        not_match = query.get("ifGenerationNotMatch")
        return not (not_match and not_match[0] == generation)

    def _serve(self, request: RecordedRequest, raw_query: str, body: bytes) -> Reply:
        method, path, query, headers = (
            request.method,
            request.path,
            request.query,
            request.headers,
        )
        target = path + (f"?{raw_query}" if raw_query else "")
        if m := _COMPOSE.match(path):
            return self._compose(m.group("b"), m.group("o"), target, headers, body)
        if m := _REWRITE.match(path):
            return self._rewrite(m, query, target, headers, body)
        if m := _OBJECT.match(path):
            bucket, name = m.group("b"), m.group("o")
            if method in ("GET", "DELETE"):
                resource = self._resource(bucket, name)
                if resource is None:
                    return self._not_found(bucket, name)
                if not self._precondition(query, resource):
                    return _error(412, "Precondition Failed", "conditionNotMet")
                if method == "GET" and query.get("alt") == ["media"]:
                    return self._media(resource, target, headers)
                if method == "GET":
                    return _json_reply(200, self._fix(resource))
        if m := _LIST.match(path):
            return self._list(m.group("b"), query, headers)
        if (m := _UPLOAD.match(path)) and method == "PUT" and "upload_id" in query:
            chunk = _CHUNK_RANGE.match(headers.get("content-range", ""))
            if chunk and (int(chunk.group(2)) - int(chunk.group(1)) + 1) % _CHUNK:
                return _error(
                    400,
                    "Invalid request. The number of bytes uploaded is required to be equal or "
                    "greater than 262144, except for the final request (it's recommended to be "
                    "the exact multiple of 262144).",
                )
        if (m := _UPLOAD.match(path)) and method == "DELETE" and "upload_id" in query:
            return 499, [], b""
        status, out, data = self._forward(method, target, headers, body)
        if status == 404 and not data:
            m = _OBJECT.match(path) or _UPLOAD.match(path)
            if m:
                return self._not_found(m.group("b"), m.groupdict().get("o"))
        if status == 200 and data[:1] == b"{":
            doc = json.loads(data)
            if isinstance(doc, dict) and doc.get("kind") == "storage#object":
                return _json_reply(status, self._fix(doc))
        return status, out, data

    def _media(self, resource: dict[str, Any], target: str, headers: dict[str, str]) -> Reply:
        size = int(resource.get("size") or 0)
        m = _RANGE.match(headers.get("range", "").strip())
        if m and int(m.group(1)) >= size:
            return 416, [("Content-Range", f"bytes */{size}")], b""
        status, out, data = self._forward("GET", target, headers, None)
        if status not in (200, 206):
            return status, out, data
        resource = self._fix(resource)
        out = [(k, v) for k, v in out if k.lower() != "x-goog-hash"]
        out.append(("x-goog-generation", str(resource["generation"])))
        out.append(("x-goog-metageneration", str(resource.get("metageneration", "1"))))
        out.append(("x-goog-stored-content-length", str(size)))
        out.append(("x-goog-hash", f"crc32c={resource['crc32c']}"))
        if resource.get("md5Hash"):
            out.append(("x-goog-hash", f"md5={resource['md5Hash']}"))
        updated = resource.get("updated")
        if isinstance(updated, str):
            stamp = datetime.fromisoformat(updated.replace("Z", "+00:00")).timestamp()
            out.append(("Last-Modified", email.utils.formatdate(stamp, usegmt=True)))
        return status, out, data

    def _list(self, bucket: str, query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
        params = {"prefix": query.get("prefix", [""])[0]}
        status, out, data = self._forward(
            "GET", f"/storage/v1/b/{bucket}/o?{urlencode(params)}", headers, None
        )
        if status == 404:
            return _error(404, "The specified bucket does not exist.", "notFound")
        if status != 200:
            return status, out, data
        items = [self._fix(i) for i in json.loads(data).get("items") or []]
        items.sort(key=lambda i: str(i.get("name")))
        token = query.get("pageToken", [""])[0]
        if token:
            after = base64.urlsafe_b64decode(token.encode()).decode()
            items = [i for i in items if str(i.get("name")) > after]
        limit = int(query.get("maxResults", ["1000"])[0])
        page = items[:limit]
        doc: dict[str, Any] = {"kind": "storage#objects", "items": page}
        if len(items) > limit:
            last = str(page[-1]["name"]).encode()
            doc["nextPageToken"] = base64.urlsafe_b64encode(last).decode()
        return _json_reply(200, doc)

    def _compose(
        self, bucket: str, name: str, target: str, headers: dict[str, str], body: bytes
    ) -> Reply:
        request = json.loads(body or b"{}")
        sources = request.get("sourceObjects") or []
        if not 1 <= len(sources) <= 32:
            return _error(
                400,
                f"The number of source components provided ({len(sources)}) is not in the "
                "range 1..32.",
            )
        count = 0
        for source in sources:
            resource = self._resource(bucket, quote(str(source.get("name")), safe=""))
            if resource is None or (
                source.get("generation") is not None
                and str(source["generation"]) != str(resource["generation"])
            ):
                return _error(404, f"No such object: {unquote(bucket)}/{source.get('name')}")
            composite = self._composites.get((unquote(bucket), str(resource["name"])))
            live = composite is not None and composite[0] == str(resource["generation"])
            count += composite[1] if composite is not None and live else 1
        if count > 1024:
            return _error(400, f"The composite object would have {count} > 1024 components.")
        status, out, data = self._forward("POST", target, headers, body)
        if status != 200:
            return status, out, data
        doc = json.loads(data)
        self._composites[(unquote(bucket), str(doc["name"]))] = (str(doc["generation"]), count)
        return _json_reply(200, self._fix(doc))

    def _rewrite(
        self,
        m: re.Match[str],
        query: dict[str, list[str]],
        target: str,
        headers: dict[str, str],
        body: bytes,
    ) -> Reply:
        source = self._resource(m.group("b"), m.group("o"))
        if source is None:
            return self._not_found(m.group("b"), m.group("o"))
        token = query.get("rewriteToken", [""])[0]
        step = int(token.rsplit("-", 1)[1]) if token.startswith("front-rewrite-") else 0
        if step + 1 < self.rewrite_steps:
            size = str(source.get("size", "0"))
            doc = {
                "kind": "storage#rewriteResponse",
                "totalBytesRewritten": "0",
                "objectSize": size,
                "done": False,
                "rewriteToken": f"front-rewrite-{step + 1}",
            }
            return _json_reply(200, doc)
        status, out, data = self._forward("POST", target, headers, body)
        if status != 200:
            return status, out, data
        doc = json.loads(data)
        wanted = json.loads(body) if body else {}
        patch = {k: wanted[k] for k in _REWRITE_FIELDS if k in wanted}
        if patch:
            dest = f"/storage/v1/b/{m.group('db')}/o/{m.group('do')}"
            status, out, data = self._forward(
                "PATCH",
                dest,
                {"host": headers.get("host", "front"), "content-type": "application/json"},
                json.dumps(patch).encode(),
            )
            if status != 200:
                return status, out, data
            doc["resource"] = json.loads(data)
        return _json_reply(200, doc)
