"""How S3 errors map onto synxfer's exception tree: the tables, with no imports.

This is the one place where S3-protocol errors are classified. The data
path (:mod:`._core`) uses it for every error answer, and :func:`._errors.map_error`
for foreign exceptions. It imports nothing beyond synxfer's SDK, so an
error costs no import of aiohttp or botocore.

The engine only distinguishes :class:`~synxfer.TransientError` (retried by
the RetryLayer) from everything else, so the classification below is the
retry policy of S3: be generous with "transient" for server-side and
network trouble, and never for errors a retry cannot fix.
"""

from __future__ import annotations

from synxfer import (
    BackendError,
    BucketNotFound,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    TransientError,
)
from synxfer.backend import TRANSIENT_STATUS

__all__ = ["CREDENTIALS_HINT", "bucket_not_found", "classify", "error_text"]

CREDENTIALS_HINT = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or choose a configured profile "
    "with Client(profile=...) (or AWS_PROFILE)"
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
        # A 403 as well. Retrying with the same clock fails the same way.
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
        # The body did not match the Content-MD5 or x-amz-checksum-* we
        # computed from the very buffer we sent, so it was corrupted in
        # transit: worth one more try. A persistent mismatch still fails once
        # the RetryLayer's attempts run out. (InvalidDigest -- a malformed
        # header -- is a bug no retry can fix, so it stays permanent.)
        "BadDigest",
        "XAmzContentSHA256Mismatch",
    }
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
    if status in TRANSIENT_STATUS:
        return TransientError
    return BackendError


def bucket_not_found(bucket: str, url: str, status: int | None) -> BucketNotFound:
    """The error for a missing bucket, naming it and the URL being accessed."""
    return BucketNotFound(f"bucket {bucket!r} does not exist ({url})", url=url, status=status)


def error_text(op: str, code: str, status: int | None, message: str) -> str:
    """``NoSuchKey (HTTP 404) on GetObject: message``, with a hint where one helps."""
    if code.isdigit():
        head = f"HTTP {code}"
    else:
        head = code if status is None else f"{code} (HTTP {status})"
    text = f"{head} on {op}" + (f": {message}" if message else "")
    if code in {"InvalidAccessKeyId", "SignatureDoesNotMatch"}:
        text += f"; check the credentials ({CREDENTIALS_HINT})"
    elif code == "RequestTimeTooSkewed":
        text += "; check this machine's clock"
    elif code == "InvalidBucketName":
        text += (
            "; a bucket name is 3-63 lowercase letters, digits, '.' and '-', "
            "starting and ending with a letter or digit"
        )
    elif code == "BucketNotEmpty":
        text += "; delete its objects first, or give force=True to delete them with it"
    elif status == 403 and code.isdigit():
        # A refused HEAD has no body to say why: wrong credentials, or none for this.
        text += f": access denied; check the credentials ({CREDENTIALS_HINT}) and what they may do"
    return text
