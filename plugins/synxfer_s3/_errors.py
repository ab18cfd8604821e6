"""Translation of botocore / aiohttp errors into synxfer's exception tree.

This is the one place where S3-protocol errors are classified; the S3 backend
and every S3-compatible profile built on it (``synxfer_scp``) go through
:func:`map_error`. The engine only distinguishes :class:`~synxfer.TransientError`
(retried by the RetryLayer) from everything else, so the classification below
is the retry policy of S3: be generous with "transient" for server-side and
network trouble, and never for errors a retry cannot fix.
"""

from __future__ import annotations

import aiohttp
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    FlexibleChecksumError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from synxfer import (
    BackendError,
    BucketNotFound,
    ConfigError,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    SynxferError,
    TransientError,
)

__all__ = [
    "CREDENTIALS_HINT",
    "FOREIGN_ERRORS",
    "bucket_not_found",
    "classify",
    "client_error_details",
    "map_error",
]

CREDENTIALS_HINT = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or choose a configured profile "
    "with --profile (or AWS_PROFILE)"
)

_NOT_FOUND = frozenset({"NoSuchKey", "NotFound", "NoSuchUpload", "NoSuchVersion", "404"})
_NO_BUCKET = frozenset({"NoSuchBucket"})
_DENIED = frozenset(
    {
        "AccessDenied",
        "AllAccessDisabled",
        "AccountProblem",
        "ExpiredToken",
        "Forbidden",
        "InvalidAccessKeyId",
        "InvalidSecurity",
        "InvalidToken",
        "SignatureDoesNotMatch",
        "TokenRefreshRequired",
        # A 403 as well. Retrying with the same clock fails the same way (and
        # botocore's skew correction lives in its retry handler, which is off).
        "RequestTimeTooSkewed",
        "403",
    }
)
_PRECONDITION = frozenset({"PreconditionFailed", "412"})
_TRANSIENT = frozenset(
    {
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "RequestTimeout",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequests",
        "TooManyRequestsException",
        "BandwidthLimitExceeded",
        # "A conflicting conditional operation is in progress ... try again."
        "OperationAborted",
        # The body arrived shorter than its Content-Length: cut in transit.
        "IncompleteBody",
        # The body did not match the Content-MD5 (or SHA-256) we computed from
        # the very buffer we sent, so it was corrupted in transit: worth one
        # more try. A persistent mismatch still fails once the RetryLayer's
        # attempts run out. (InvalidDigest -- a malformed header -- is a bug
        # no retry can fix, so it stays permanent.)
        "BadDigest",
        "XAmzContentSHA256Mismatch",
    }
)
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})

# Network and stream failures. aiobotocore wraps most aiohttp errors in
# botocore's (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError,
# ConnectionClosedError, ResponseStreamingError), but not all of them: a
# truncated chunked body surfaces as aiohttp.ClientPayloadError.
# IncompleteReadError is a body shorter than its Content-Length;
# FlexibleChecksumError a response body that failed its checksum. OSError
# covers TimeoutError (asyncio.TimeoutError) and ConnectionError.
_TRANSIENT_EXC: tuple[type[BaseException], ...] = (
    BotoConnectionError,
    HTTPClientError,
    IncompleteReadError,
    FlexibleChecksumError,
    aiohttp.ClientError,
    OSError,
)


#: What the backend's error boundary catches and hands to :func:`map_error`.
#: Anything else (a bug in synxfer, say) propagates untouched.
FOREIGN_ERRORS: tuple[type[BaseException], ...] = (
    BotoCoreError,
    ClientError,
    aiohttp.ClientError,
    OSError,
)


def classify(code: str, status: int | None) -> type[BackendError]:
    """The synxfer exception class for an S3 error code and HTTP status.

    Codes win over statuses; an unknown code falls back on the status, and
    any other 4xx is a permanent :class:`~synxfer.BackendError`.
    """
    if code in _NO_BUCKET:
        return BucketNotFound
    if code in _NOT_FOUND:
        return NotFound
    if code in _DENIED:
        return PermissionDenied
    if code in _PRECONDITION:
        return PreconditionFailed
    if code in _TRANSIENT:
        return TransientError
    if status == 404:
        return NotFound
    if status == 403:
        return PermissionDenied
    if status == 412:
        return PreconditionFailed
    if status in _TRANSIENT_STATUS or (status is not None and status >= 500):
        return TransientError
    return BackendError


def client_error_details(exc: ClientError) -> tuple[str, int | None, str]:
    """``(code, HTTP status, message)`` of a botocore ClientError."""
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    code = str(error.get("Code") or (status if status is not None else "Unknown"))
    return code, status, str(error.get("Message") or "")


def bucket_not_found(bucket: str, url: str, status: int | None) -> BucketNotFound:
    """The error for a missing bucket, naming it and the URL being accessed."""
    return BucketNotFound(f"bucket {bucket!r} does not exist ({url})", url=url, status=status)


def map_error(exc: BaseException, *, url: str, bucket: str) -> SynxferError:
    """The synxfer exception for ``exc``, raised during a request on ``url``.

    ``bucket`` is the bucket name, for the "bucket does not exist" message.
    Already-synxfer exceptions are returned unchanged.
    """
    if isinstance(exc, SynxferError):
        return exc
    if isinstance(exc, ClientError):
        code, status, message = client_error_details(exc)
        cls = classify(code, status)
        if cls is BucketNotFound:
            return bucket_not_found(bucket, url, status)
        op = exc.operation_name
        if code.isdigit():
            head = f"HTTP {code}"
        else:
            head = code if status is None else f"{code} (HTTP {status})"
        text = f"{head} on {op}" + (f": {message}" if message else "")
        if code in {"InvalidAccessKeyId", "SignatureDoesNotMatch"}:
            text += f"; check the credentials ({CREDENTIALS_HINT})"
        elif code == "RequestTimeTooSkewed":
            text += "; check this machine's clock"
        return cls(text, url=url, status=status)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return PermissionDenied(f"no usable credentials ({exc}): {CREDENTIALS_HINT}", url=url)
    if isinstance(exc, CredentialRetrievalError):
        return PermissionDenied(f"could not obtain credentials: {exc}", url=url)
    if isinstance(exc, ProfileNotFound):
        return ConfigError(f"{exc}; check --profile / AWS_PROFILE and ~/.aws/config")
    if isinstance(exc, _TRANSIENT_EXC):
        detail = str(exc) or type(exc).__name__
        return TransientError(f"network error: {detail}", url=url)
    if isinstance(exc, BotoCoreError):
        return BackendError(f"{type(exc).__name__}: {exc}", url=url)
    return BackendError(f"unexpected {type(exc).__name__}: {exc}", url=url)
