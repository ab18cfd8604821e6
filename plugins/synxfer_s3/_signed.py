"""Signed S3 requests: addressing, SigV4, one HTTP exchange, error answers.

:class:`SignedClient` turns ``(operation, method, bucket, key, query,
headers, body)`` into a signed request on the pooled HTTP/1.1 client of
:class:`synxfer.backend.HttpClient`, and an error answer into synxfer's exception tree with the
tables of :mod:`._classify`: missing objects and uploads ->
:class:`~synxfer.NotFound`, missing buckets -> :class:`~synxfer.BucketNotFound`,
refused or badly signed requests and a skewed clock ->
:class:`~synxfer.PermissionDenied`, failed ``If-Match`` ->
:class:`~synxfer.PreconditionFailed`, 5xx, throttling, timeouts, resets ->
:class:`~synxfer.TransientError`. Each mapped error carries the S3 error
code (see :func:`s3_code`) and HTTP status. The S3 calls themselves are
:class:`~._core.S3Wire`'s.

Addressing: ``path`` (``host/bucket/key``), ``virtual``
(``bucket.host/key``) or ``auto`` (virtual on DNS names for DNS-safe
buckets, path for IP addresses, ``localhost`` and other buckets).

Anonymous requests (``anonymous``: aws-cli's ``--no-sign-request``, for
public buckets) carry no signature and ask for no credentials.
``request_payer`` (``requester``) is sent as ``x-amz-request-payer`` on
every request, for requester-pays buckets. ``customer_keys`` (SSE-C) adds
the customer-provided key to the requests that need it (:mod:`._sse_c`).

Logging: with the ``synxfer.s3`` logger at DEBUG, one line per request --
operation, method, ``s3://bucket/key``, status, body bytes, milliseconds.
Never a header, a query string, a signature or a credential.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import ssl
import time
from collections.abc import Callable, Iterable
from typing import Literal, Self
from urllib.parse import urlsplit

from synxfer import BackendError, BucketNotFound, ConfigError, TransientError
from synxfer.backend import Body, HttpClient, HttpResponse

from ._classify import bucket_not_found, classify, error_text
from ._credentials import CredentialSource
from ._sigv4 import SigV4Signer, amz_date, canonical_query, host_header, quote_path
from ._sse_c import CustomerKeys, error_hint
from ._wire import XmlError, error_in_ok_body, parse_error

__all__ = ["Addressing", "SignedClient", "s3_code"]

Addressing = Literal["auto", "path", "virtual"]

_DNS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
_log = logging.getLogger("synxfer.s3")


def s3_code(exc: BaseException) -> str | None:
    """The S3 error code (``NoSuchKey``...) of an error raised by :class:`S3Wire`."""
    code = getattr(exc, "s3_code", None)
    return code if isinstance(code, str) else None


def _coded(exc: BackendError, code: str) -> BackendError:
    exc.s3_code = code  # type: ignore[attr-defined]
    return exc


class _Address:
    """Where a bucket's requests go: connection key, Host header, path prefix."""

    __slots__ = ("host", "host_header", "port", "prefix", "scheme")

    def __init__(self, scheme: str, host: str, port: int, host_header: str, prefix: str) -> None:
        self.scheme = scheme
        self.host = host
        self.port = port
        self.host_header = host_header
        self.prefix = prefix


class SignedClient:
    """Signed S3 requests over a pooled HTTP/1.1 client (the base of :class:`~._core.S3Wire`).

    ``endpoint_url`` (``http(s)://host[:port][/base]``) defaults to AWS's
    regional endpoint. ``credentials`` is asked for credentials before each
    request (cheap; it refreshes when botocore says so). ``label`` is the
    URL scheme used in error messages (``s3``, ``scp``...). ``clock`` (a
    ``time.time``-like function) is for tests of clock skew. Over ``https``
    the server must be trusted by ``ssl_context``, else by the system's
    store or ``ca_bundle`` (default: ``AWS_CA_BUNDLE``, as botocore does).
    ``anonymous``: send requests unsigned (``credentials`` is never asked);
    ``request_payer``: the ``x-amz-request-payer`` of every request;
    ``recv_threads``: receive large ``http`` bodies in worker threads (see
    :class:`synxfer.backend._protocol.BodyReceiver`).
    """

    def __init__(
        self,
        *,
        region: str,
        credentials: CredentialSource,
        endpoint_url: str | None = None,
        addressing: Addressing = "auto",
        http: HttpClient | None = None,
        max_connections: int = 16,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        label: str = "s3",
        clock: Callable[[], float] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        ca_bundle: str | None = None,
        anonymous: bool = False,
        request_payer: str | None = None,
        recv_threads: bool = False,
        customer_keys: CustomerKeys | None = None,
    ) -> None:
        if addressing not in ("auto", "path", "virtual"):
            raise ConfigError(f"addressing must be auto, path or virtual (got {addressing!r})")
        self.region = region
        self.anonymous = anonymous
        self.request_payer = request_payer
        self._customer_keys = customer_keys
        self.label = label
        self.addressing = addressing
        self._credentials = credentials
        self._signer = SigV4Signer(region)
        self._clock = clock
        if endpoint_url is None:
            suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
            endpoint_url = f"https://s3.{region}.{suffix}"
        parts = urlsplit(endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"invalid endpoint URL {endpoint_url!r}: expected http(s)://host")
        self.endpoint_url = endpoint_url
        self._scheme = parts.scheme
        self._host = parts.hostname
        try:
            port = parts.port
        except ValueError as exc:
            raise ConfigError(f"invalid endpoint URL {endpoint_url!r}: {exc}") from None
        self._port = port or (443 if parts.scheme == "https" else 80)
        self._explicit_port = port
        self._base = parts.path.rstrip("/")
        self._host_is_ip = _is_ip(self._host) or self._host == "localhost"
        self._owns_http = http is None
        self._http = http or HttpClient(
            max_connections=max_connections,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            ssl_context=ssl_context,
            ca_bundle=ca_bundle or os.environ.get("AWS_CA_BUNDLE") or None,
            recv_threads=recv_threads,
        )
        self._addresses: dict[str, _Address] = {}

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"<{name} {self.endpoint_url} region={self.region!r} addressing={self.addressing}>"

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def url(self, bucket: str, key: str = "") -> str:
        """``s3://bucket/key``, for messages (``s3://`` for the service itself)."""
        return f"{self.label}://{bucket}/{key}" if bucket else f"{self.label}://"

    # -- addressing and signing ------------------------------------------------

    def _address(self, bucket: str, *, service: bool = False) -> _Address:
        """Where ``bucket``'s requests go; with ``service``, the requests that
        name no bucket (ListBuckets): the endpoint itself."""
        if service:
            host = self._host
            header = host_header(host, self._explicit_port, self._scheme)
            return _Address(self._scheme, host, self._port, header, self._base)
        address = self._addresses.get(bucket)
        if address is None:
            if not bucket:
                raise ConfigError(
                    f"{self.label}:// needs a bucket: {self.label}://bucket/prefix (a backend "
                    "made for bucket '' only lists buckets)"
                )
            virtual = self.addressing == "virtual" or (
                self.addressing == "auto"
                and not self._host_is_ip
                and _DNS_BUCKET.match(bucket) is not None
                and ".." not in bucket
                and not (self._scheme == "https" and "." in bucket)
            )
            host = f"{bucket}.{self._host}" if virtual else self._host
            prefix = self._base + ("" if virtual else "/" + quote_path(bucket))
            address = _Address(
                self._scheme,
                host,
                self._port,
                host_header(host, self._explicit_port, self._scheme),
                prefix,
            )
            self._addresses[bucket] = address
        return address

    async def _request(
        self,
        op: str,
        method: str,
        bucket: str,
        key: str | None,
        *,
        query: Iterable[tuple[str, str | None]] = (),
        headers: dict[str, str] | None = None,
        body: Body | None = None,
        sink: memoryview | None = None,
        sink_status: int = 0,
        service: bool = False,
        written: bool = False,
    ) -> HttpResponse:
        address = self._address(bucket, service=service)
        if key is None:
            path = address.prefix or "/"
        else:
            if not key:
                raise ValueError(f"{op} needs a non-empty key")
            path = f"{address.prefix}/{quote_path(key)}"
        canonical, url_query = canonical_query(query)
        target = f"{path}?{url_query}" if url_query else path
        headers = headers if headers is not None else {}
        if self.request_payer:
            headers["x-amz-request-payer"] = self.request_payer
        if self._customer_keys is not None:  # ``written``: a HEAD of an object being written
            self._customer_keys.add(op, headers, written=written)
        if self.anonymous:
            signed = headers
            signed["host"] = address.host_header
        else:
            creds = await self._credentials.get()
            signed = self._signer.sign(
                method,
                address.host_header,
                path,
                canonical,
                headers,
                access_key=creds.access_key,
                secret_key=creds.secret_key,
                token=creds.token,
                timestamp=None if self._clock is None else amz_date(self._clock()),
            )
        where = self.url(bucket, key or "")
        debug = _log.isEnabledFor(logging.DEBUG)
        started = time.perf_counter() if debug else 0.0
        try:
            response = await self._http.request(
                method,
                address.scheme,
                address.host,
                address.port,
                target,
                signed,
                body,
                sink=sink,
                sink_status=sink_status,
                label=where,
            )
        except ValueError as exc:  # a header value HTTP cannot carry
            raise BackendError(f"{op}: {exc}", url=where) from None
        except BackendError as exc:
            if debug:
                _log.debug("%s %s %s failed: %s", op, method, where, exc)
            raise
        if debug:
            ms = (time.perf_counter() - started) * 1000
            _log.debug(
                "%s %s %s -> %d (%d bytes, %.1f ms)",
                op,
                method,
                where,
                response.status,
                response.length,
                ms,
            )
        if response.status >= 300:
            raise self._error(op, response, bucket, key or "")
        return response

    def _error(self, op: str, response: HttpResponse, bucket: str, key: str) -> BackendError:
        status = response.status
        info = parse_error(response.body) if response.body else None
        code = info.code if info is not None and info.code else str(status)
        message = info.message if info is not None else ""
        url = self.url(bucket, key)
        cls = classify(code, status)
        if cls is BucketNotFound:
            return _coded(bucket_not_found(bucket, url, status), code)
        text = error_text(op, code, status, message) + error_hint(op, status, self._customer_keys)
        if 300 <= status < 400 or code in {"PermanentRedirect", "AuthorizationHeaderMalformed"}:
            region = response.headers.get("x-amz-bucket-region") or (
                info.region if info is not None else None
            )
            if region and region != self.region:
                text += f"; the bucket is in region {region!r}: pass it as Client(region=...)"
        return _coded(cls(text, url=url, status=status), code)

    def _ok_body_error(self, op: str, data: bytes | bytearray, bucket: str, key: str) -> None:
        """Raise the ``<Error>`` in a 200 answer, if there is one."""
        info = error_in_ok_body(data)
        if info is None:
            return
        code = info.code or "InternalError"
        cls = classify(code, None)
        text = f"{code} (in a 200 answer) on {op}" + (f": {info.message}" if info.message else "")
        raise _coded(cls(text, url=self.url(bucket, key)), code)

    def _bad_xml(self, op: str, exc: XmlError, bucket: str, key: str = "") -> BackendError:
        """Transient: an XML answer that does not parse was most likely damaged
        on the way (one flipped byte makes it no UTF-8), like a reset
        connection; the same request again gets a good one, and a server that
        always answers so fails after the retry policy's attempts (issue 33)."""
        return TransientError(f"unexpected answer to {op}: {exc}", url=self.url(bucket, key))


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
