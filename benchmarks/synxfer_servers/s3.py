"""Real S3 servers (moto) on 127.0.0.1, for tests and benchmarks.

* :func:`moto_server` -- moto in a thread of this process.
* :class:`MotoProcess` -- moto in a subprocess, so it does not share the
  client's GIL (benchmarks); reports the server's CPU time.
* :func:`counting_moto_server` -- in-process moto behind a WSGI middleware
  that counts *concurrent* requests, part requests and files in flight, and
  can slow data requests down so concurrency builds up.

Every server binds 127.0.0.1 on a free port and serves path-style S3 at
``endpoint_url``, and, like real S3 and unlike bare moto, refuses a body
whose ``Content-MD5`` or ``x-amz-checksum-crc32c`` does not match, lists
part checksums in ListParts and checks them on completion
(:class:`VerifyChecksums`). moto keeps
its state per process: in-process servers share buckets with each other (and
with ``moto.mock_aws``), so tests should use fresh bucket names. Clients need
some credentials; tests usually set ``AWS_ACCESS_KEY_ID=testing`` and
``AWS_SECRET_ACCESS_KEY=testing``. These helpers set no environment variables.

moto (a dependency of the ``synxfer-bench`` distribution, ``pip install -e
./benchmarks``) is imported only when a server starts.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import dataclasses
import hashlib
import io
import re
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import parse_qs

from .process import ChildProcess, cpu_seconds, end_process, read_line, stderr_tail

if TYPE_CHECKING:
    from werkzeug.serving import BaseWSGIServer

__all__ = [
    "HOST",
    "CountingMotoServer",
    "MotoProcess",
    "MotoServer",
    "RequestStats",
    "VerifyChecksums",
    "VerifyContentMD5",
    "counting_moto_server",
    "moto_server",
]

#: The only address these servers bind.
HOST = "127.0.0.1"

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _moto_app(verify_md5: bool = True) -> WSGIApp:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    _fix_copied_checksums()
    app: WSGIApp = DomainDispatcherApplication(create_backend_app)
    return VerifyChecksums(app) if verify_md5 else app


def _fix_copied_checksums() -> None:
    """Make moto's CopyObject compute the copy's checksum, as S3 does.

    moto gives the copy its source's checksum value as is; the copy of a
    multipart object is a single-part object, so its source's *composite*
    checksum (of the part checksums) would be reported as the copy's
    full-object checksum, which its bytes do not match (and readers that
    verify, synxfer and botocore with awscrt, refuse it). Patched once per
    process.
    """
    from moto.s3.models import S3Backend
    from moto.s3.utils import compute_checksum

    original = S3Backend.copy_object
    if getattr(original, "_synxfer_fixed", False):
        return

    def copy_object(
        self: Any, src_key: Any, dest_bucket_name: str, dest_key_name: str, *args: Any, **kw: Any
    ) -> None:
        original(self, src_key, dest_bucket_name, dest_key_name, *args, **kw)
        if not src_key.checksum_value or not src_key.checksum_algorithm:
            return
        key = self.get_object(dest_bucket_name, dest_key_name)
        if key is not None and "-" not in key.etag:
            algorithm = src_key.checksum_algorithm.upper()
            key.checksum_value = compute_checksum(key.value, algorithm).decode()
            key.checksum_type = "FULL_OBJECT"

    copy_object._synxfer_fixed = True  # type: ignore[attr-defined]
    S3Backend.copy_object = copy_object  # type: ignore[method-assign]


_BAD_DIGEST = "The {} you specified did not match the calculated checksum."
#: ``x-amz-checksum-<name>`` algorithms verified here (crc64nvme passes unchecked).
_VERIFIED = ("crc32c", "crc32", "sha1", "sha256")
_LIST_PART = re.compile(rb"<PartNumber>(\d+)</PartNumber>")
_COMPLETE_PART = re.compile(rb"<Part>(.*?)</Part>", re.S)


def _digest(algorithm: str, body: bytes) -> str:
    if algorithm == "md5":
        raw = hashlib.md5(body, usedforsecurity=False).digest()
    elif algorithm == "crc32c":
        import google_crc32c  # type: ignore[import-not-found,unused-ignore]

        raw = int(google_crc32c.value(body)).to_bytes(4, "big")
    elif algorithm == "crc32":
        raw = zlib.crc32(body).to_bytes(4, "big")
    else:
        raw = hashlib.new(algorithm, body).digest()
    return base64.b64encode(raw).decode()


def _error(start_response: Callable[..., Any], status: str, code: str, message: str) -> list[bytes]:
    xml = (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
        f"<Message>{message}</Message></Error>"
    ).encode()
    start_response(status, [("Content-Type", "application/xml"), ("Content-Length", str(len(xml)))])
    return [xml]


class VerifyChecksums:
    """WSGI middleware: the body checksums real S3 verifies and moto does not.

    * A body whose ``Content-MD5`` or ``x-amz-checksum-crc32c`` (also
      ``crc32``, ``sha1``, ``sha256``) does not match it is refused with
      ``400 BadDigest``, as S3 (and SCP, for Content-MD5) answer. Without
      this layer no test could see a corrupted part being refused.
    * A multipart upload created with ``x-amz-checksum-algorithm`` is held
      to it, as S3 holds it: the checksum sent with each part is reported in
      ListParts (``<ChecksumCRC32C>`` per part) and checked in
      CompleteMultipartUpload -- a part listed with another value is refused
      (``400 BadDigest``), one listed without any (``400 InvalidRequest``).

    Bodies without such headers pass untouched, as do aws-chunked bodies
    (their checksum is a trailer). A PutObject or UploadPart accepted with
    an ``x-amz-checksum-*`` header gets it back in the answer, as S3 echoes
    the checksum it verified (clients learn from the echo that this server
    verifies them).
    """

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self._lock = threading.Lock()
        #: upload id -> the algorithm it was created with
        self._declared: dict[str, str] = {}
        #: upload id -> part number -> base64 checksum of that algorithm
        self._parts: dict[str, dict[int, str]] = {}

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        sent = {
            name: value.strip()
            for name in ("md5", *_VERIFIED)
            if (value := environ.get("HTTP_CONTENT_MD5" if name == "md5" else _env(name)))
        }
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        query = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
        upload_id = (query.get("uploadId") or [""])[0]
        chunked = "aws-chunked" in str(environ.get("HTTP_CONTENT_ENCODING", "")) or (
            "HTTP_X_AMZ_DECODED_CONTENT_LENGTH" in environ
        )
        body = b""
        if (sent and not chunked) or (upload_id and method == "POST"):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length) if length else b""
            environ["wsgi.input"] = io.BytesIO(body)
        if not chunked:
            for name, value in sent.items():
                if value != _digest(name, body):
                    label = "Content-MD5" if name == "md5" else name.upper()
                    message = _BAD_DIGEST.format(label)
                    return _error(start_response, "400 Bad Request", "BadDigest", message)
            echo = [(f"x-amz-checksum-{n}", v) for n, v in sent.items() if n != "md5"]
            if echo and method == "PUT" and "HTTP_X_AMZ_COPY_SOURCE" not in environ:
                start_response = _echoing(start_response, echo)
        declared = environ.get("HTTP_X_AMZ_CHECKSUM_ALGORITHM")
        if method == "POST" and "uploads" in query and declared:
            return self._create(environ, start_response, declared.lower())
        with self._lock:
            algorithm = self._declared.get(upload_id) if upload_id else None
        if algorithm is None:
            return self.app(environ, start_response)
        if method == "PUT" and "partNumber" in query and "HTTP_X_AMZ_COPY_SOURCE" not in environ:
            number = int(query["partNumber"][0])
            return self._upload_part(environ, start_response, upload_id, number, sent)
        if method == "POST":
            refused = self._check_complete(start_response, upload_id, algorithm, body)
            if refused is not None:
                return refused
            return self._forget_on_success(environ, start_response, upload_id)
        if method == "DELETE":
            return self._forget_on_success(environ, start_response, upload_id)
        if method == "GET":
            return self._list_parts(environ, start_response, upload_id, algorithm)
        return self.app(environ, start_response)

    def _run(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], Any, bytes]:
        """Call the app and collect its whole answer: status, headers, exc_info, body."""
        held: list[Any] = []

        def hold(status: str, headers: Any, exc_info: Any = None) -> Any:
            held[:] = [status, list(headers), exc_info]
            return lambda data: None

        result = self.app(environ, hold)
        try:
            data = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        status, headers, exc_info = held
        return status, headers, exc_info, data

    def _create(
        self, environ: dict[str, Any], start_response: Callable[..., Any], algorithm: str
    ) -> list[bytes]:
        status, headers, exc_info, data = self._run(environ)
        found = re.search(rb"<UploadId>([^<]+)</UploadId>", data)
        if status.startswith("2") and found is not None:
            with self._lock:
                self._declared[found.group(1).decode()] = algorithm
        start_response(status, headers, exc_info)
        return [data]

    def _upload_part(
        self,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        upload_id: str,
        number: int,
        sent: dict[str, str],
    ) -> Any:
        def record(status: str, headers: Any, exc_info: Any = None) -> Any:
            if status.startswith("2"):
                with self._lock:
                    parts = self._parts.setdefault(upload_id, {})
                    algorithm = self._declared.get(upload_id, "")
                    if algorithm in sent:
                        parts[number] = sent[algorithm]
                    else:
                        parts.pop(number, None)
            return start_response(status, headers, exc_info)

        return self.app(environ, record)

    def _check_complete(
        self, start_response: Callable[..., Any], upload_id: str, algorithm: str, body: bytes
    ) -> list[bytes] | None:
        with self._lock:
            known = dict(self._parts.get(upload_id, {}))
        tag = f"Checksum{algorithm.upper()}".encode()
        for part in _COMPLETE_PART.findall(body):
            number = re.search(rb"<PartNumber>\s*(\d+)\s*</PartNumber>", part)
            listed = re.search(rb"<" + tag + rb">([^<]*)</" + tag + rb">", part)
            if listed is None:
                message = (
                    f"The upload was created using a {algorithm} checksum. The complete "
                    "request must include the checksum for each part."
                )
                return _error(start_response, "400 Bad Request", "InvalidRequest", message)
            value = known.get(int(number.group(1))) if number is not None else None
            if value is not None and listed.group(1).decode().strip() != value:
                message = _BAD_DIGEST.format(algorithm.upper())
                return _error(start_response, "400 Bad Request", "BadDigest", message)
        return None

    def _forget_on_success(
        self, environ: dict[str, Any], start_response: Callable[..., Any], upload_id: str
    ) -> Any:
        def forget(status: str, headers: Any, exc_info: Any = None) -> Any:
            if status.startswith("2"):
                with self._lock:
                    self._parts.pop(upload_id, None)
                    self._declared.pop(upload_id, None)
            return start_response(status, headers, exc_info)

        return self.app(environ, forget)

    def _list_parts(
        self,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        upload_id: str,
        algorithm: str,
    ) -> list[bytes]:
        with self._lock:
            known = dict(self._parts.get(upload_id, {}))
        status, headers, exc_info, data = self._run(environ)
        if status.startswith("2") and known:
            tag = f"Checksum{algorithm.upper()}"

            def add(m: re.Match[bytes]) -> bytes:
                value = known.get(int(m.group(1)))
                if value is None:
                    return m.group(0)
                return m.group(0) + f"<{tag}>{value}</{tag}>".encode()

            data = _LIST_PART.sub(add, data)
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            headers.append(("Content-Length", str(len(data))))
        start_response(status, headers, exc_info)
        return [data]


def _echoing(start_response: Callable[..., Any], echo: list[tuple[str, str]]) -> Callable[..., Any]:
    """``start_response`` that adds ``echo`` to a 2xx answer's headers, but
    not a header moto already sent (twice, boto3 reads ``v, v`` as the part's
    checksum and CompleteMultipartUpload fails with BadDigest)."""

    def respond(status: str, headers: Any, exc_info: Any = None) -> Any:
        if status.startswith("2"):
            present = {name.lower() for name, _ in headers}
            headers = [*headers, *(h for h in echo if h[0].lower() not in present)]
        return start_response(status, headers, exc_info)

    return respond


def _env(algorithm: str) -> str:
    return f"HTTP_X_AMZ_CHECKSUM_{algorithm.upper()}"


#: The former name of :class:`VerifyChecksums`, which verified Content-MD5 only.
VerifyContentMD5 = VerifyChecksums


def _make_server(app: WSGIApp) -> BaseWSGIServer:
    """A threaded werkzeug server for ``app`` on 127.0.0.1, with moto's handler, not logging."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    class QuietHandler(MotoRequestHandler):
        """moto's request handler without a log line per request."""

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            pass

    return make_server(HOST, 0, app, threaded=True, request_handler=QuietHandler)


@dataclasses.dataclass
class MotoServer:
    """A running in-process moto server."""

    host: str
    port: int

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"


@contextlib.contextmanager
def _serving(app: WSGIApp) -> Iterator[tuple[str, int]]:
    server = _make_server(app)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield HOST, int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def moto_server() -> Iterator[MotoServer]:
    """Run moto's S3 (and every other moto service) in a thread of this process.

    The same building blocks as moto's ``ThreadedMotoServer(ip_address="127.0.0.1",
    port=0)``, minus its per-request log lines::

        with moto_server() as server:
            boto3.client("s3", endpoint_url=server.endpoint_url, ...)
    """
    with _serving(_moto_app()) as (host, port):
        yield MotoServer(host, port)


# -- moto in a subprocess ------------------------------------------------------


class MotoProcess(ChildProcess):
    """moto in a subprocess on 127.0.0.1, as a (synchronous) context manager::

        with MotoProcess() as moto:
            run_benchmark(moto.endpoint_url)
            print(moto.cpu_seconds())

    The child is ``python -m synxfer_servers._moto_main``; it prints its port
    and serves until its stdin closes or it gets SIGTERM. Leaving the block
    closes stdin, then terminates and finally kills the child if it lingers.
    ``env`` replaces the child's environment (default: inherited).

    ``stock=True`` runs moto as ``pip install "moto[server]"`` ships it
    instead of the strict model of AWS: no checksum front, no copy patch,
    and without the optional ``crc32c`` package (so it reports CRC32 values
    as ``ChecksumCRC32C``, as users' installs do). See ``_moto_main``.
    """

    def __init__(
        self,
        *,
        startup_timeout: float = 60.0,
        stop_timeout: float = 5.0,
        env: dict[str, str] | None = None,
        stock: bool = False,
    ) -> None:
        self.stock = stock
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.env = env
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if self.port is None:
            raise RuntimeError("MotoProcess is not running")
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        """The server process id."""
        if self._proc is None:
            raise RuntimeError("MotoProcess is not running")
        return self._proc.pid

    def cpu_seconds(self) -> float:
        """CPU seconds the server process has used so far."""
        return cpu_seconds(self.pid)

    def start(self) -> None:
        """Start the server and wait until it listens."""
        if self._proc is not None:
            raise RuntimeError("MotoProcess already started")
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "synxfer_servers._moto_main",
                *(["--stock"] if self.stock else []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=self.env,
        )
        try:
            self.port = self._read_port()
        except BaseException:
            self.stop()
            raise

    def _read_port(self) -> int:
        assert self._proc is not None
        assert self._proc.stdout is not None
        try:
            return int(read_line(self._proc.stdout, self.startup_timeout).strip())
        except TimeoutError:
            raise RuntimeError(
                f"moto did not start within {self.startup_timeout}s{self._stderr_tail()}"
            ) from None
        except EOFError:
            raise RuntimeError(f"moto exited while starting{self._stderr_tail()}") from None

    def _stderr_tail(self) -> str:
        return stderr_tail(self._stderr)

    def stop(self) -> None:
        """Stop the server: close stdin, then SIGTERM, then SIGKILL. Safe to call twice."""
        proc, self._proc = self._proc, None
        self.port = None
        if proc is not None:  # the child exits when its stdin closes
            end_process(proc, self.stop_timeout, close_stdin_first=True)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __repr__(self) -> str:
        state = f"pid={self._proc.pid} {self.endpoint_url}" if self._proc else "stopped"
        kind = "MotoProcess stock" if self.stock else "MotoProcess"
        return f"<{kind} {state}>"


# -- the counting server -------------------------------------------------------


@dataclasses.dataclass
class RequestStats:
    """Counters of a :class:`CountingMotoServer`; read them via ``snapshot()``.

    ``*_in_flight`` are current values, ``max_*`` the highest seen since the
    start (or the last ``reset``), ``total_*`` counts since then.

    *Part requests* carry object data: UploadPart, PutObject (not copies) and
    GetObject. A *file in flight* is an object key with a request in progress
    or a multipart upload initiated and not yet completed or aborted.
    ``ops`` counts requests by operation (``put_object``, ``upload_part``,
    ``get_object``, ``head_object``, ``create_multipart``,
    ``complete_multipart``, ``abort_multipart``, ``list_objects``,
    ``delete_object``, ``delete_objects``, ``copy_object``, ``create_bucket``,
    ``head_bucket``, ``delete_bucket``, ``other``).
    """

    requests_in_flight: int = 0
    part_requests_in_flight: int = 0
    files_in_flight: int = 0
    max_concurrent_requests: int = 0
    max_concurrent_part_requests: int = 0
    max_files_in_flight: int = 0
    total_requests: int = 0
    total_part_requests: int = 0
    #: Body bytes of the data uploads (PutObject, UploadPart) begun.
    upload_bytes: int = 0
    ops: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


@dataclasses.dataclass(frozen=True)
class _Request:
    op: str
    file: tuple[str, str] | None
    is_part: bool


_LIST_PARAMS = frozenset(
    {"list-type", "prefix", "delimiter", "continuation-token", "start-after", "max-keys"}
    | {"encoding-type", "marker", "fetch-owner"}
)


def _classify(environ: dict[str, Any]) -> _Request:
    """What an S3 request is: operation, object (bucket, key), whether it carries data."""
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    path = str(environ.get("PATH_INFO", "/"))
    query = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
    params = set(query) - {"x-id"}
    host = str(environ.get("HTTP_HOST", "")).rsplit(":", 1)[0]
    labels = host.split(".")
    path_style = (
        not host
        or "." not in host
        or host.startswith("localhost")
        or all(label.isdigit() for label in labels)
    )
    if path_style:
        bucket, _, key = path.lstrip("/").partition("/")
    else:
        bucket, key = labels[0], path.lstrip("/")
    file = (bucket, key) if bucket and key else None
    copy = "HTTP_X_AMZ_COPY_SOURCE" in environ

    if file is None:
        if method == "GET" and bucket and not params - _LIST_PARAMS:
            return _Request("list_objects", None, False)
        if method == "POST" and "delete" in params:
            return _Request("delete_objects", None, False)
        if bucket and not params and method in ("PUT", "HEAD", "DELETE"):
            op = {"PUT": "create_bucket", "HEAD": "head_bucket", "DELETE": "delete_bucket"}
            return _Request(op[method], None, False)
        return _Request("other", None, False)
    if method == "POST" and "uploads" in params:
        return _Request("create_multipart", file, False)
    if method == "POST" and "uploadId" in params:
        return _Request("complete_multipart", file, False)
    if method == "DELETE" and "uploadId" in params:
        return _Request("abort_multipart", file, False)
    if method == "DELETE" and not params - {"versionId"}:
        return _Request("delete_object", file, False)
    if method == "PUT" and {"uploadId", "partNumber"} <= params:
        return _Request("upload_part", file, not copy)
    if method == "PUT" and not params:
        return _Request("copy_object" if copy else "put_object", file, not copy)
    data_get = not {p for p in params if not p.startswith("response-")} - {
        "partNumber",
        "versionId",
    }
    if method == "GET" and data_get:
        return _Request("get_object", file, True)
    if method == "HEAD" and data_get:
        return _Request("head_object", file, False)
    return _Request("other", file, False)


class _CountingMiddleware:
    """WSGI middleware keeping :class:`RequestStats` exact under a lock.

    A request counts from when the app is called until just before the last
    chunk of its response is handed to the server to send, so the server
    never counts a request the client already considers finished.
    """

    def __init__(self, app: WSGIApp, delay: float) -> None:
        self.app = app
        self.delay = delay
        self.lock = threading.Lock()
        self.stats = RequestStats()
        self._refs: collections.Counter[tuple[str, str]] = collections.Counter()
        self._uploads: collections.Counter[tuple[str, str]] = collections.Counter()

    # Under self.lock:
    def _ref(self, file: tuple[str, str], delta: int) -> None:
        before = self._refs[file]
        after = before + delta
        if after:
            self._refs[file] = after
        else:
            del self._refs[file]
        s = self.stats
        if before == 0 and after > 0:
            s.files_in_flight += 1
            s.max_files_in_flight = max(s.max_files_in_flight, s.files_in_flight)
        elif before > 0 and after == 0:
            s.files_in_flight -= 1

    def _begin(self, req: _Request) -> None:
        with self.lock:
            s = self.stats
            s.total_requests += 1
            s.ops[req.op] += 1
            s.requests_in_flight += 1
            s.max_concurrent_requests = max(s.max_concurrent_requests, s.requests_in_flight)
            if req.is_part:
                s.total_part_requests += 1
                s.part_requests_in_flight += 1
                s.max_concurrent_part_requests = max(
                    s.max_concurrent_part_requests, s.part_requests_in_flight
                )
            if req.file is not None:
                self._ref(req.file, +1)

    def _end(self, req: _Request, status: int | None) -> None:
        with self.lock:
            s = self.stats
            ok = status is not None and 200 <= status < 300
            if req.file is not None:
                if ok and req.op == "create_multipart":
                    self._uploads[req.file] += 1
                    self._ref(req.file, +1)
                elif (
                    ok
                    and req.op in ("complete_multipart", "abort_multipart")
                    and self._uploads[req.file] > 0
                ):
                    self._uploads[req.file] -= 1
                    self._ref(req.file, -1)
                self._ref(req.file, -1)
            s.requests_in_flight -= 1
            if req.is_part:
                s.part_requests_in_flight -= 1

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        req = _classify(environ)
        status: list[int] = []

        def counting_start_response(status_line: str, headers: Any, exc_info: Any = None) -> Any:
            status[:] = [int(status_line.split(None, 1)[0])]
            return start_response(status_line, headers, exc_info)

        self._begin(req)
        if req.is_part and environ.get("REQUEST_METHOD") == "PUT":
            with self.lock:
                self.stats.upload_bytes += int(environ.get("CONTENT_LENGTH") or 0)
        try:
            if req.is_part and self.delay > 0:
                time.sleep(self.delay)
            body = self.app(environ, counting_start_response)
        except BaseException:
            self._end(req, None)
            raise
        return _Body(body, lambda: self._end(req, status[0] if status else None))


class _Body:
    """Yields ``body``'s chunks, calling ``done`` once just before the last one."""

    def __init__(self, body: Iterable[bytes], done: Callable[[], None]) -> None:
        self._body = body
        self._done: Callable[[], None] | None = done

    def _finish(self) -> None:
        done, self._done = self._done, None
        if done is not None:
            done()

    def __iter__(self) -> Iterator[bytes]:
        try:
            it = iter(self._body)
            pending = next(it, None)
            while pending is not None:
                following = next(it, None)
                if following is None:
                    self._finish()
                yield pending
                pending = following
        finally:
            self._finish()

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            self._finish()


class CountingMotoServer:
    """An in-process moto server that counts concurrency (see :class:`RequestStats`).

    ``delay`` seconds are slept inside every part request, before moto
    handles it; it can be changed while the server runs.
    """

    def __init__(self, host: str, port: int, middleware: _CountingMiddleware) -> None:
        self.host = host
        self.port = port
        self._middleware = middleware

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def delay(self) -> float:
        """Seconds each part request is held before moto serves it."""
        return self._middleware.delay

    @delay.setter
    def delay(self, value: float) -> None:
        self._middleware.delay = value

    @property
    def lock(self) -> threading.Lock:
        """The lock guarding :attr:`stats`."""
        return self._middleware.lock

    @property
    def stats(self) -> RequestStats:
        """The live counters; hold :attr:`lock` to read several consistently."""
        return self._middleware.stats

    def snapshot(self) -> RequestStats:
        """A consistent copy of the counters."""
        with self.lock:
            s = self.stats
            return dataclasses.replace(s, ops=collections.Counter(s.ops))

    def reset(self) -> None:
        """Zero totals, op counts and maxima (maxima restart from the current values)."""
        with self.lock:
            s = self.stats
            s.total_requests = s.total_part_requests = s.upload_bytes = 0
            s.ops.clear()
            s.max_concurrent_requests = s.requests_in_flight
            s.max_concurrent_part_requests = s.part_requests_in_flight
            s.max_files_in_flight = s.files_in_flight


@contextlib.contextmanager
def counting_moto_server(delay: float = 0.0) -> Iterator[CountingMotoServer]:
    """Run in-process moto behind the counting middleware::

    with counting_moto_server(delay=0.05) as server:
        ...  # transfer against server.endpoint_url
        assert server.snapshot().max_concurrent_part_requests <= 4
    """
    middleware = _CountingMiddleware(_moto_app(), delay)
    with _serving(middleware) as (host, port):
        yield CountingMotoServer(host, port, middleware)
