"""AWS Signature Version 4 for S3, header authentication, in a few microseconds.

What botocore's ``S3SigV4Auth`` computes (and ``tests/test_s3_wire.py``
checks ours against it, request by request), without its request objects:

* the canonical URI is the request path as sent, each key segment
  RFC 3986-encoded once with ``/`` kept (:func:`quote_path`); S3 paths are
  not normalised (``a//b``, ``./`` and a trailing ``/`` are part of a key);
* the canonical query string is every ``name=value`` pair encoded with
  :func:`quote_query` and sorted; the same string is sent as the URL's
  query, so what is signed is exactly what is sent (a bare flag such as
  ``?uploads`` is signed as ``uploads=``);
* the signed headers are ``host``, ``x-amz-date``, ``x-amz-content-sha256``,
  ``x-amz-security-token`` (with a session token) and every header the
  caller passes (the caller passes only what it sends);
* the payload hash is ``UNSIGNED-PAYLOAD``: the body's integrity travels in
  ``Content-MD5`` or an ``x-amz-checksum-*`` header, which the server
  verifies, so nothing hashes the body twice;
* the signing key (four HMACs) is cached per (date, region, service,
  secret); a request then costs one SHA-256 of the canonical request and
  one HMAC.

No secret is ever part of a repr, a log line or an exception message.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping
from urllib.parse import quote

__all__ = [
    "EMPTY_SHA256",
    "UNSIGNED_PAYLOAD",
    "SigV4Signer",
    "amz_date",
    "canonical_query",
    "quote_path",
    "quote_query",
]

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_ALGORITHM = "AWS4-HMAC-SHA256"

#: Query parameters: ``(name, value)``; a value of ``None`` is a bare flag
#: (``?uploads``), signed as ``uploads=``.
QueryItems = Iterable[tuple[str, str | None]]


def quote_path(key: str) -> str:
    """``key`` as an S3 URL path: RFC 3986-encoded (UTF-8) once, ``/`` kept.

    Unreserved characters (``A-Za-z0-9-._~``) stay as they are; everything
    else -- spaces, ``+``, ``%``, ``=``, ``&``, ``?``, ``#``, non-ASCII --
    becomes ``%XX``. This is botocore's encoding of S3 keys.
    """
    return quote(key, safe="/~")


def quote_query(value: str) -> str:
    """A query-string name or value, encoded as SigV4 wants (``/`` too)."""
    return quote(value, safe="-_.~")


def canonical_query(items: QueryItems) -> tuple[str, str]:
    """``(canonical query string, URL query string)`` for ``items``.

    Both are sorted by encoded name, then value. They differ only for bare
    flags: ``uploads=`` in the canonical string, ``uploads`` in the URL.
    """
    pairs = sorted((quote_query(k), None if v is None else quote_query(v)) for k, v in items)
    canonical = "&".join(f"{k}={v or ''}" for k, v in pairs)
    url = "&".join(k if v is None else f"{k}={v}" for k, v in pairs)
    return canonical, url


_date_second = -1
_date_value = ""


def amz_date(now: float | None = None) -> str:
    """``YYYYMMDDTHHMMSSZ`` (UTC) for ``now`` (default: the current time).

    The current time's string is cached for the second it names.
    """
    global _date_second, _date_value
    if now is not None:
        return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    second = int(time.time())
    if second != _date_second:
        _date_value = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second))
        _date_second = second
    return _date_value


def _trim(value: str) -> str:
    """SigV4's Trimall: no leading/trailing blanks, runs of blanks as one space."""
    if value.isprintable() and "  " not in value and value[:1] != " " and value[-1:] != " ":
        return value
    return " ".join(value.split())


def _hmac_sha256(key: bytes, msg: bytes) -> bytes:
    """HMAC-SHA256 without giving up the GIL.

    ``hmac.digest`` (the one-shot C call) releases the GIL for every message,
    however short; on the event loop, taking it back from a worker thread
    that is hashing or writing is a wait per request (docs/decisions/0014).
    ``hmac.new`` keeps it for messages under 2 KiB.
    """
    return hmac.new(key, msg, hashlib.sha256).digest()


class SigV4Signer:
    """Signs S3 requests for one region (and service) with SigV4 header auth.

    The signer holds no credentials: each :meth:`sign` call is given them, so
    a refreshed set takes effect at once. Its signing-key cache is keyed by
    the secret among other things and never shown.
    """

    __slots__ = ("_keys", "region", "service")

    def __init__(self, region: str, service: str = "s3") -> None:
        if not region:
            raise ValueError("SigV4 needs a region")
        self.region = region
        self.service = service
        self._keys: dict[tuple[str, str], bytes] = {}

    def __repr__(self) -> str:
        return f"<SigV4Signer region={self.region!r} service={self.service!r}>"

    def signing_key(self, secret_key: str, date: str) -> bytes:
        """The derived key for ``date`` (``YYYYMMDD``), cached per (date, secret)."""
        cache_key = (date, secret_key)
        key = self._keys.get(cache_key)
        if key is None:
            k = _hmac_sha256(("AWS4" + secret_key).encode(), date.encode())
            k = _hmac_sha256(k, self.region.encode())
            k = _hmac_sha256(k, self.service.encode())
            key = _hmac_sha256(k, b"aws4_request")
            if len(self._keys) >= 8:  # old dates and rotated secrets
                self._keys.clear()
            self._keys[cache_key] = key
        return key

    def sign(
        self,
        method: str,
        host: str,
        path: str,
        query: str,
        headers: dict[str, str],
        *,
        access_key: str,
        secret_key: str,
        token: str | None = None,
        timestamp: str | None = None,
        payload_hash: str = UNSIGNED_PAYLOAD,
    ) -> dict[str, str]:
        """Sign a request: add the auth headers to ``headers`` and return it.

        ``headers`` maps *lower-case* names to the values that will be sent;
        every one of them is signed (pass only headers that are sent as
        given). ``host`` is the Host header (``name`` or ``name:port`` when
        the port is not the scheme's default); it is added to ``headers``.
        ``path`` is the encoded path (:func:`quote_path`) and ``query`` the
        canonical query string (:func:`canonical_query`).

        Adds ``host``, ``x-amz-date``, ``x-amz-content-sha256`` (unless given),
        ``x-amz-security-token`` (with a token) and ``authorization``.
        """
        stamp = timestamp or amz_date()
        headers["host"] = host
        headers["x-amz-date"] = stamp
        if "x-amz-content-sha256" not in headers:
            headers["x-amz-content-sha256"] = payload_hash
        if token:
            headers["x-amz-security-token"] = token
        names = sorted(headers)
        signed = ";".join(names)
        canonical_headers = "".join(f"{n}:{_trim(headers[n])}\n" for n in names)
        canonical = (
            f"{method}\n{path}\n{query}\n{canonical_headers}\n{signed}\n"
            f"{headers['x-amz-content-sha256']}"
        )
        date = stamp[:8]
        scope = f"{date}/{self.region}/{self.service}/aws4_request"
        to_sign = (
            f"{_ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        )
        signature = _hmac_sha256(self.signing_key(secret_key, date), to_sign.encode()).hex()
        headers["authorization"] = (
            f"{_ALGORITHM} Credential={access_key}/{scope}, "
            f"SignedHeaders={signed}, Signature={signature}"
        )
        return headers


def host_header(hostname: str, port: int | None, scheme: str) -> str:
    """The Host header: ``hostname``, with ``:port`` unless it is the default."""
    if port is None or (scheme == "https" and port == 443) or (scheme == "http" and port == 80):
        return hostname
    return f"{hostname}:{port}"


def headers_lower(headers: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``headers`` with lower-case names (what :meth:`SigV4Signer.sign` takes)."""
    return {k.lower(): v for k, v in headers.items()}
