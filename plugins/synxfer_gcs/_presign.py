"""V4 signed URLs for GCS (``gsutil signurl``, ``gcloud storage sign-url``).

Google's documented algorithm ("V4 signing process", GOOG4-RSA-SHA256), as
``google-cloud-storage``'s ``generate_signed_url(version="v4")`` computes it:

* canonical request: the method, the path ``/bucket/object`` (the object
  name percent-encoded, ``/`` kept), the sorted query (``X-Goog-Algorithm``,
  ``X-Goog-Credential`` = ``<service account email>/<date>/auto/storage/goog4_request``,
  ``X-Goog-Date``, ``X-Goog-Expires``, ``X-Goog-SignedHeaders=host``), the
  ``host`` header, and ``UNSIGNED-PAYLOAD``;
* string to sign: the algorithm, the timestamp, the scope and the SHA-256 of
  the canonical request;
* ``X-Goog-Signature``: the hex RSA-SHA256 signature of it with the service
  account's private key.

Only a service-account key can sign here: user credentials and metadata-server
credentials would need the IAM ``signBlob`` API, which this plugin does not
call. An emulator is used anonymously, so a key must be given for signing
(backend option ``credentials_file``). The RSA signature is computed in a
worker thread. The URL is a bearer credential: nothing here logs it.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from synxfer import ConfigError

__all__ = ["MAX_EXPIRES", "presign_url"]

#: V4 signed URLs live at most 7 days (604,800 s).
MAX_EXPIRES = 7 * 24 * 3600
_ALGORITHM = "GOOG4-RSA-SHA256"

_KEY_HINT = (
    "a gs:// presigned URL is signed with a service account's private key: point "
    "GOOGLE_APPLICATION_CREDENTIALS, or the backend option gs.credentials_file "
    "(--backend-option gs.credentials_file=KEY.json), at a service-account JSON key"
)


def _quote(value: str, safe: str = "") -> str:
    return quote(value, safe="-_.~" + safe)


def _signing_credentials(credentials: Any, credentials_file: str | None, url: str) -> Any:
    """Credentials that can sign (``sign_bytes`` and an email), or ConfigError."""
    if credentials is None and credentials_file:
        from ._auth import _from_file

        credentials = _from_file(credentials_file)
    if credentials is None:
        raise ConfigError(
            f"{url}: this endpoint is used without credentials (an emulator, or "
            f"gs.anonymous=true), so there is nothing to sign with; {_KEY_HINT}"
        )
    email = getattr(credentials, "service_account_email", None)
    if not hasattr(credentials, "sign_bytes") or not isinstance(email, str) or "@" not in email:
        raise ConfigError(
            f"{url}: the Google credentials found ({type(credentials).__name__}) cannot "
            f"sign URLs; {_KEY_HINT}"
        )
    return credentials


def check_expires(expires_in: int) -> int:
    if (
        isinstance(expires_in, bool)
        or not isinstance(expires_in, int)
        or not 1 <= expires_in <= MAX_EXPIRES
    ):
        raise ConfigError(
            f"--expires-in / expires_in={expires_in!r}: a gs:// signed URL lives 1 to "
            f"{MAX_EXPIRES} seconds (7 days); give a whole number of seconds in that range"
        )
    return expires_in


async def presign_url(
    endpoint_url: str,
    bucket: str,
    key: str,
    method: Literal["GET", "PUT"],
    expires_in: int,
    *,
    credentials: Any,
    credentials_file: str | None = None,
    now: datetime.datetime | None = None,
) -> str:
    """A V4 signed URL for ``method`` on ``gs://bucket/key`` at ``endpoint_url``.

    ``credentials``: google-auth credentials (None when the backend runs
    anonymously; then ``credentials_file`` must name a service-account key).
    """
    check_expires(expires_in)
    if method not in ("GET", "PUT"):
        raise ConfigError(f"presign: method={method!r}: expected 'GET' or 'PUT'")
    url = f"gs://{bucket}/{key}"
    if not key:
        raise ConfigError(f"presign needs an object: gs://{bucket}/KEY")
    signer = await asyncio.to_thread(_signing_credentials, credentials, credentials_file, url)
    parts = urlsplit(endpoint_url)
    host = parts.netloc
    path = f"{parts.path.rstrip('/')}/{_quote(bucket)}/{_quote(key, '/')}"
    stamp_dt = now or datetime.datetime.now(datetime.UTC)
    stamp = stamp_dt.strftime("%Y%m%dT%H%M%SZ")
    scope = f"{stamp[:8]}/auto/storage/goog4_request"
    query = {
        "X-Goog-Algorithm": _ALGORITHM,
        "X-Goog-Credential": f"{signer.service_account_email}/{scope}",
        "X-Goog-Date": stamp,
        "X-Goog-Expires": str(expires_in),
        "X-Goog-SignedHeaders": "host",
    }
    canonical_query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items()))
    request = f"{method}\n{path}\n{canonical_query}\nhost:{host}\n\nhost\nUNSIGNED-PAYLOAD"
    to_sign = f"{_ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(request.encode()).hexdigest()}"
    signature: bytes = await asyncio.to_thread(signer.sign_bytes, to_sign.encode())
    return f"{parts.scheme}://{host}{path}?{canonical_query}&X-Goog-Signature={signature.hex()}"
