"""The S3 test server of the S3 backend tests: moto behind a checking, recording front.

In front of moto sits a small WSGI layer that (a) verifies Content-MD5 and
x-amz-checksum-crc32c the way S3 does -- moto does not -- so every put and
part is checked end to end, and holds a multipart upload created with a
checksum algorithm to it (``synxfer_servers.s3.VerifyChecksums``), (b)
records each request's method, path, query, headers and small bodies, and
(c) injects faults for keys containing a marker or for upload ids it is
told are gone. Test modules build their ``server`` and ``backend``
fixtures on :func:`serving` and :func:`opened`: every test gets a fresh
bucket, and ``backend`` runs once per backend class (``s3``: CRC32C part
checksums; ``scp``: Content-MD5 only).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import logging
import threading
import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import boto3
import pytest
from moto.server import ThreadedMotoServer

from synxfer.backend import BackendOptions, Checksum
from synxfer.testing import make_checksum
from synxfer_s3 import S3Backend
from synxfer_s3._wire import S3_NS
from synxfer_scp import ScpBackend
from synxfer_servers.s3 import VerifyChecksums

__all__ = [
    "BACKENDS",
    "BACKEND_IDS",
    "ODD_KEYS",
    "PORTABLE_KEYS",
    "UNSET_ENV",
    "S3Front",
    "S3World",
    "Seen",
    "Server",
    "b64md5",
    "body",
    "crc32c",
    "md5",
    "native",
    "new_bucket",
    "opened",
    "serving",
]

#: Keys that need escaping, and a few that do not.
ODD_KEYS = [
    "plain.txt",
    "with space",
    "ü/ñ/日本語.bin",
    "a+b",
    "100%",
    "%2F-already-encoded",
    "tilde~x",
    "k=v&x=y",
    "what?",
    "hash#tag",
    "a//b",
    "trailing/",
    "two  spaces ",
    "quote'\"",
    "semi;colon,comma",
    "star*(paren)!$@:",
    "-_.~",
]

#: Odd keys every store keeps as they are (SeaweedFS, a filesystem, folds "//"
#: and treats a trailing "/" as a directory; see the SeaweedFS tests). Each is
#: also a valid relative file name.
PORTABLE_KEYS = [k for k in ODD_KEYS if "//" not in k and not k.endswith("/")]

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def b64md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def md5(data: bytes) -> Checksum:
    return Checksum("md5", b64md5(data))


def crc32c(data: bytes) -> Checksum:
    checksum = make_checksum("crc32c", data)
    assert checksum is not None
    return checksum


def native(backend: S3Backend, data: bytes) -> Checksum:
    """The checksum ``backend`` asks the engine for (CRC32C on S3, MD5 on SCP)."""
    checksum = make_checksum(backend.capabilities.part_checksum, data)
    assert checksum is not None
    return checksum


# -- the server -----------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes = b""  # kept for small requests only


@dataclass
class S3Front:
    """WSGI middleware in front of moto: Content-MD5 checks, a request log, faults."""

    app: WSGIApp
    #: moto itself, without the checksum layer (see plain_list_parts).
    moto: WSGIApp
    seen: list[Seen] = field(default_factory=list)
    #: Answer ListParts without part checksums, as SeaweedFS does.
    plain_list_parts: bool = False
    #: Upload ids answered with 404 NoSuchUpload (moto answers 500 for unknown ids).
    gone_uploads: set[str] = field(default_factory=set)
    #: Answer ListBuckets in pages of this many buckets, each but the last with a
    #: ContinuationToken, as S3 does for long lists (0: moto's single answer).
    bucket_page: int = 0
    #: Requests being served now, and the most served at once (moto is threaded).
    active: int = 0
    peak_active: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        headers = {
            k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k[:5] == "HTTP_"
        }
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        path = environ.get("PATH_INFO", "")
        small = body if len(body) < 65536 else b""
        self.seen.append(
            Seen(environ["REQUEST_METHOD"], path, environ.get("QUERY_STRING", ""), headers, small)
        )
        sent_md5 = headers.get("content-md5")
        if sent_md5 is not None and sent_md5 != b64md5(body):
            return self._error(start_response, 400, "BadDigest", "Content-MD5 mismatch")
        query = environ.get("QUERY_STRING", "")
        if any(f"uploadId={u}" in query for u in self.gone_uploads):
            return self._error(start_response, 404, "NoSuchUpload", "The upload does not exist")
        if "__slowdown__" in path:
            return self._error(start_response, 503, "SlowDown", "Please reduce your request rate.")
        if "__norange__" in path:
            environ.pop("HTTP_RANGE", None)  # a server that ignores Range (HTTP allows it)
        if "__short__" in path and environ["REQUEST_METHOD"] == "GET":
            # Claims bytes 0-9 of a 100-byte object but sends 5 (honest length).
            start_response(
                "206 Partial Content",
                [("Content-Range", "bytes 0-9/100"), ("Content-Length", "5"), ("ETag", '"x"')],
            )
            return [b"12345"]
        if self.bucket_page and environ["REQUEST_METHOD"] == "GET" and path == "/":
            return self._bucket_page(environ, start_response, query)
        app = self.app
        if self.plain_list_parts and environ["REQUEST_METHOD"] == "GET" and "uploadId=" in query:
            app = self.moto
        with self._lock:
            self.active += 1
            self.peak_active = max(self.peak_active, self.active)
        try:
            return app(environ, start_response)
        finally:
            with self._lock:
                self.active -= 1

    def _bucket_page(
        self, environ: dict[str, Any], start_response: StartResponse, query: str
    ) -> list[bytes]:
        """moto's whole ListBuckets answer, cut into pages of :attr:`bucket_page`;
        the continuation token is the next bucket's index."""
        environ["QUERY_STRING"] = ""
        statuses: list[str] = []

        def capture(status: str, headers: Any, exc_info: Any = None) -> Callable[[bytes], None]:
            statuses.append(status)
            return lambda data: None

        answer = b"".join(self.app(environ, capture))
        if not statuses[0].startswith("200"):
            return self._error(start_response, 400, "InvalidRequest", statuses[0])
        names = [
            (e.findtext(f"{{{S3_NS}}}Name"), e.findtext(f"{{{S3_NS}}}CreationDate"))
            for e in ET.fromstring(answer).iter(f"{{{S3_NS}}}Bucket")
        ]
        start = int(parse_qs(query).get("continuation-token", ["0"])[0])
        end = start + self.bucket_page
        items = "".join(
            f"<Bucket><Name>{n}</Name><CreationDate>{d}</CreationDate></Bucket>"
            for n, d in names[start:end]
        )
        token = f"<ContinuationToken>{end}</ContinuationToken>" if end < len(names) else ""
        xml = (
            f'<ListAllMyBucketsResult xmlns="{S3_NS}"><Buckets>{items}</Buckets>'
            f"{token}</ListAllMyBucketsResult>"
        ).encode()
        start_response(
            "200 OK", [("Content-Type", "application/xml"), ("Content-Length", str(len(xml)))]
        )
        return [xml]

    @staticmethod
    def _error(start_response: StartResponse, status: int, code: str, msg: str) -> list[bytes]:
        xml = f"<Error><Code>{code}</Code><Message>{msg}</Message></Error>".encode()
        reason = {400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}[status]
        start_response(
            f"{status} {reason}",
            [("Content-Type", "application/xml"), ("Content-Length", str(len(xml)))],
        )
        return [xml]

    def for_bucket(self, bucket: str) -> list[Seen]:
        return [s for s in self.seen if s.path == f"/{bucket}" or s.path.startswith(f"/{bucket}/")]


@dataclass
class Server:
    url: str
    front: S3Front
    admin: Any  # a boto3 S3 client, for setting up and inspecting buckets


_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    # Keep the developer's ~/.aws and the instance metadata service out of it.
    "AWS_CONFIG_FILE": "/nonexistent/synxfer-test/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/synxfer-test/credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
}
UNSET_ENV = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "SCP_ENDPOINT_URL",
    "SCP_REGION",
)


@contextlib.contextmanager
def serving() -> Iterator[Server]:
    """moto behind an :class:`S3Front`, with test credentials in the environment."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in _ENV.items():
            mp.setenv(name, value)
        for name in UNSET_ENV:
            mp.delenv(name, raising=False)
        srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        srv.start()
        try:
            # Wrap moto's WSGI app; werkzeug's server calls `server.app` per request.
            wsgi = srv._server
            assert wsgi is not None
            front = S3Front(VerifyChecksums(wsgi.app), wsgi.app)
            wsgi.app = front
            host, port = srv.get_host_and_port()
            url = f"http://{host}:{port}"
            admin = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
            yield Server(url, front, admin)
        finally:
            srv.stop()


def new_bucket(server: Server, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:16]}"
    server.admin.create_bucket(Bucket=name)
    return name


#: The backend classes every ``backend`` fixture runs over, and their ids.
BACKENDS = [S3Backend, ScpBackend]
BACKEND_IDS = ["s3", "scp"]


@contextlib.asynccontextmanager
async def opened(cls: type[S3Backend], server: Server) -> AsyncIterator[S3Backend]:
    """A ``cls`` backend on a fresh bucket of ``server``."""
    bucket = new_bucket(server, cls.scheme)
    async with cls(bucket, BackendOptions(endpoint_url=server.url)) as b:
        assert isinstance(b, S3Backend)
        yield b


def body(n: int, seed: int = 0) -> bytes:
    """n deterministic, non-repeating-ish bytes."""
    block = hashlib.sha256(str(seed).encode()).digest() * 4  # 128 bytes
    return (block * (n // len(block) + 1))[:n]


# -- the servers users run, as they ship (issue 33) ------------------------------


def admin_client(server: Any, *, check_checksums: bool = True) -> Any:
    """A boto3 S3 client for set-up and inspection of ``server`` (anything with
    ``endpoint_url``, ``access_key``, ``secret_key`` and ``region``: an
    :class:`S3World` or a bench target), path-style, its keys named (boto3's
    default session keeps the first credentials it saw in a process).
    ``check_checksums=False``: boto3 checks no response checksum itself
    (stock moto's CRC32C of a multipart object is wrong; a test that
    compares the bytes reads it anyway)."""
    from botocore.config import Config

    validation = "when_supported" if check_checksums else "when_required"
    return boto3.client(
        "s3",
        endpoint_url=server.endpoint_url,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        aws_session_token=None,
        region_name=server.region,
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 3},
            response_checksum_validation=validation,
        ),
    )


@dataclass
class S3World:
    """One S3 server as it ships (stock moto, SeaweedFS, Ceph RGW), for tests
    that must hold on every one of them; the ``s3_world`` fixture yields it.

    ``env()`` is the AWS_* environment that reaches it (for a subprocess,
    ``{**environ(), ...}``; for this process, :meth:`apply`); the secret key
    never appears in the repr.
    """

    name: str
    endpoint_url: str
    access_key: str
    secret_key: str = field(repr=False)
    region: str = "us-east-1"
    #: What the server is known not to do (``synxfer.testing`` capability
    #: names or short notes), for tests and skip reasons; see
    #: docs/decisions/0030-test-servers-as-they-ship.md.
    quirks: frozenset[str] = frozenset()

    def env(self) -> dict[str, str]:
        """AWS_* variables for this server (credentials, region, endpoint), and
        no developer configuration or instance metadata."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_CONFIG_FILE": "/nonexistent/synxfer-test/config",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/synxfer-test/credentials",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def environ(self) -> dict[str, str]:
        """A whole environment for a subprocess: this process's, without the
        variables of :data:`UNSET_ENV` (a session token would be sent to the
        server), plus :meth:`env`."""
        import os

        base = {k: v for k, v in os.environ.items() if k not in UNSET_ENV}
        return {**base, **self.env()}

    def apply(self, mp: pytest.MonkeyPatch) -> None:
        """Point this process's AWS environment at the server (through ``mp``)."""
        for name in UNSET_ENV:
            mp.delenv(name, raising=False)
        for name, value in self.env().items():
            mp.setenv(name, value)

    def admin(self, *, check_checksums: bool = True) -> Any:
        """A boto3 S3 client for set-up and inspection: :func:`admin_client`."""
        return admin_client(self, check_checksums=check_checksums)

    def new_bucket(self, prefix: str = "w") -> str:
        """A fresh, empty bucket's name."""
        name = f"{prefix}-{uuid.uuid4().hex[:16]}"
        self.admin().create_bucket(Bucket=name)
        return name

    def new_versioned_bucket(self, prefix: str = "v") -> str:
        """A fresh, empty bucket with versioning on."""
        name = self.new_bucket(prefix)
        status = {"Status": "Enabled"}
        self.admin().put_bucket_versioning(Bucket=name, VersioningConfiguration=status)
        return name

    def put_version(self, bucket: str, key: str, data: bytes) -> str:
        """Write ``data`` at ``key`` (boto3, straight to the server); its VersionId."""
        version: str = self.admin().put_object(Bucket=bucket, Key=key, Body=data)["VersionId"]
        return version
