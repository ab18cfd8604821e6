"""Presigned S3 URLs: SigV4 query-string authentication (``aws s3 presign``).

The same signature as every request of the backend (the signing key of
:class:`~._sigv4.SigV4Signer`, the path and query encoding of
:mod:`._sigv4`), carried in the query string instead of headers, as AWS
documents it ("Authenticating Requests: Using Query Parameters"):

* ``X-Amz-Algorithm``, ``X-Amz-Credential`` (access key and scope),
  ``X-Amz-Date``, ``X-Amz-Expires``, ``X-Amz-SignedHeaders=host`` and, with a
  session token, ``X-Amz-Security-Token`` are signed as query parameters;
* only ``host`` is a signed header, so whoever uses the URL may send any
  ``Content-Type``; the payload is ``UNSIGNED-PAYLOAD``;
* ``X-Amz-Signature`` is appended last, unsigned.

The URL carries a signature, never the secret key; it is a bearer credential
for one object and one method until it expires, so nothing here logs it.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Literal

from synxfer import ConfigError

from ._signed import SignedClient
from ._sigv4 import UNSIGNED_PAYLOAD, amz_date, canonical_query, quote_path

__all__ = ["MAX_EXPIRES", "MIN_EXPIRES", "check_expires", "presign_url"]

#: SigV4 query signing accepts 1 second to 7 days (AWS's limit, aws-cli's).
MIN_EXPIRES = 1
MAX_EXPIRES = 7 * 24 * 3600

_ALGORITHM = "AWS4-HMAC-SHA256"


def check_expires(expires_in: int, scheme: str = "s3") -> int:
    """``expires_in`` if SigV4 allows it, else ConfigError naming the option."""
    if (
        isinstance(expires_in, bool)
        or not isinstance(expires_in, int)
        or not MIN_EXPIRES <= expires_in <= MAX_EXPIRES
    ):
        raise ConfigError(
            f"--expires-in / expires_in={expires_in!r}: a {scheme}:// presigned URL lives "
            f"{MIN_EXPIRES} to {MAX_EXPIRES} seconds (7 days); give a whole number of "
            "seconds in that range"
        )
    return expires_in


async def presign_url(
    client: SignedClient,
    bucket: str,
    key: str,
    method: Literal["GET", "PUT"],
    expires_in: int,
    *,
    now: float | None = None,
) -> str:
    """A URL that lets anyone ``method`` (GET or PUT) ``key`` in ``bucket``
    for ``expires_in`` seconds from ``now`` (default: the client's clock).

    Signed with the client's credentials, region, endpoint and addressing,
    exactly as its own requests are. An anonymous client has nothing to sign
    with: ConfigError.
    """
    check_expires(expires_in, client.label)
    if method not in ("GET", "PUT"):
        raise ConfigError(f"presign: method={method!r}: expected 'GET' or 'PUT'")
    if not key:
        raise ConfigError(f"presign needs an object: {client.label}://{bucket}/KEY")
    if client.anonymous:
        raise ConfigError(
            f"{client.label}://{bucket}/{key}: a presigned URL needs credentials to sign "
            "with; drop --no-sign-request (anonymous) to presign"
        )
    address = client._address(bucket)
    path = f"{address.prefix}/{quote_path(key)}"
    creds = await client._credentials.get()
    if now is None and client._clock is not None:
        now = client._clock()
    stamp = amz_date(now)
    date = stamp[:8]
    signer = client._signer
    scope = f"{date}/{signer.region}/{signer.service}/aws4_request"
    query: list[tuple[str, str | None]] = [
        ("X-Amz-Algorithm", _ALGORITHM),
        ("X-Amz-Credential", f"{creds.access_key}/{scope}"),
        ("X-Amz-Date", stamp),
        ("X-Amz-Expires", str(expires_in)),
        ("X-Amz-SignedHeaders", "host"),
    ]
    if creds.token:
        query.append(("X-Amz-Security-Token", creds.token))
    if client.request_payer:
        query.append(("x-amz-request-payer", client.request_payer))
    canonical, url_query = canonical_query(query)
    request = (
        f"{method}\n{path}\n{canonical}\nhost:{address.host_header}\n\nhost\n{UNSIGNED_PAYLOAD}"
    )
    to_sign = f"{_ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(request.encode()).hexdigest()}"
    key_ = signer.signing_key(creds.secret_key, date)
    signature = hmac.new(key_, to_sign.encode(), hashlib.sha256).hexdigest()
    return f"{address.scheme}://{address.host_header}{path}?{url_query}&X-Amz-Signature={signature}"
