"""Translation of GCS HTTP errors, httpx and google-auth exceptions into synxfer's tree.

This is the one place where GCS errors are classified. The engine only
distinguishes :class:`~synxfer.TransientError` (retried by the RetryLayer,
with backoff) from everything else, so the table below is the GCS retry
policy:

=====================================  ==========================================
what                                   synxfer error
=====================================  ==========================================
408, 429, 5xx; 403 with reason         TransientError (GCS's own retry guidance)
rateLimitExceeded
400 "Provided CRC32C/MD5 ... doesn't   TransientError: the body was damaged on the
match calculated ..."                  way (the checksum came from the very buffer
                                       we sent), so sending it again is the cure; a
                                       persistent mismatch fails once the retry
                                       layer's attempts run out
401                                    PermissionDenied, with how to set credentials
                                       (the backend turns the first 401 of a token
                                       into a TransientError after forcing a
                                       refresh, see ``GcsBackend``)
403                                    PermissionDenied naming the URL
404                                    NotFound; BucketNotFound when the body says
                                       the bucket is missing
412                                    PreconditionFailed (ifGenerationMatch)
other 4xx                              BackendError (a retry cannot help)
httpx timeouts, connect/read/write     TransientError
errors, protocol errors, OSError
google-auth: no credentials            PermissionDenied, with how to set them up
google-auth: refresh failed            TransientError if google-auth says it is
                                       retryable (or a transport failure), else
                                       PermissionDenied
=====================================  ==========================================

Messages never include tokens or resumable-session URLs (which are bearer
capabilities); they name the ``gs://`` URL of the object concerned.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from google.auth import exceptions as gauth

from synxfer import (
    BackendError,
    BucketNotFound,
    ConfigError,
    NoCredentials,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    SynxferError,
    TransientError,
)

__all__ = [
    "CREDENTIALS_HINT",
    "FOREIGN_ERRORS",
    "classify",
    "error_details",
    "error_for_status",
    "is_checksum_mismatch",
    "map_error",
]

CREDENTIALS_HINT = (
    "set up Application Default Credentials (`gcloud auth application-default login`), "
    "or point GOOGLE_APPLICATION_CREDENTIALS at a service-account key file"
)

_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_TRANSIENT_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "backendError"})

# "Provided CRC32C \"...\" doesn't match calculated CRC32C \"...\"." (and the MD5 twin)
_CHECKSUM_MISMATCH = re.compile(
    r"(crc32c|md5).*(doesn't|does not|did not) match|checksum mismatch|baddigest", re.IGNORECASE
)
_BUCKET_MISSING = re.compile(r"bucket.*(does not exist|not found)|no such bucket", re.IGNORECASE)

#: What the backend's error boundary catches and hands to :func:`map_error`.
#: Anything else (a bug in synxfer, say) propagates untouched.
FOREIGN_ERRORS: tuple[type[BaseException], ...] = (
    httpx.HTTPError,
    httpx.InvalidURL,
    httpx.StreamError,
    gauth.GoogleAuthError,
    OSError,
)


def error_details(body: bytes) -> tuple[str, str]:
    """``(reason, message)`` of a GCS JSON error body; empty strings if there is none.

    GCS answers ``{"error": {"code": 404, "message": "...", "errors": [{"reason":
    "notFound", ...}]}}``; some servers send an empty body or plain text.
    """
    if not body:
        return "", ""
    try:
        doc: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        text = body[:300].decode("utf-8", "replace").strip()
        return "", text if text.isprintable() else ""
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, str):
        return error, str(doc.get("error_description") or "")
    if not isinstance(error, dict):
        return "", ""
    message = str(error.get("message") or "")
    reason = ""
    errors = error.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        reason = str(errors[0].get("reason") or "")
        message = message or str(errors[0].get("message") or "")
    return reason, message


def is_checksum_mismatch(status: int, message: str) -> bool:
    """A 400 saying the checksum we sent does not match the bytes received."""
    return status == 400 and bool(_CHECKSUM_MISMATCH.search(message))


def classify(status: int, reason: str = "", message: str = "") -> type[BackendError]:
    """The synxfer exception class for an HTTP status and GCS error reason/message."""
    if status == 404:
        return BucketNotFound if _BUCKET_MISSING.search(message) else NotFound
    if status in _TRANSIENT_STATUS or status >= 500 or reason in _TRANSIENT_REASONS:
        # Rate limits may come as 403 with a rate-limit reason.
        return TransientError
    if status in (401, 403):
        return PermissionDenied
    if status == 412:
        return PreconditionFailed
    if is_checksum_mismatch(status, message):
        return TransientError
    return BackendError


def error_for_status(
    status: int, body: bytes, *, url: str, bucket: str, what: str = ""
) -> BackendError:
    """The synxfer exception for a failed response (``what`` names the operation)."""
    reason, message = error_details(body)
    cls = classify(status, reason, message)
    op = f" on {what}" if what else ""
    detail = f": {message}" if message else ""
    if cls is BucketNotFound:
        return BucketNotFound(
            f"bucket {bucket!r} does not exist (HTTP 404{op})", url=url, status=status
        )
    if cls is NotFound:
        return NotFound(f"not found (HTTP 404{op}){detail}", url=url, status=status)
    if cls is TransientError and not is_checksum_mismatch(status, message):
        return TransientError(f"HTTP {status}{op}{detail}", url=url, status=status)
    if status == 401:
        return PermissionDenied(
            f"authentication failed (HTTP 401{op}){detail}; {CREDENTIALS_HINT}",
            url=url,
            status=status,
        )
    if status == 403:
        return PermissionDenied(
            f"access denied (HTTP 403{op}){detail}; the credentials in use lack permission "
            f"on {url} (transfers need roles/storage.objectAdmin or equivalent on the bucket)",
            url=url,
            status=status,
        )
    if cls is PreconditionFailed:
        return PreconditionFailed(
            f"the object changed (HTTP 412, generation precondition failed{op})",
            url=url,
            status=status,
        )
    if is_checksum_mismatch(status, message):
        return TransientError(
            f"the server refused the data: its checksum does not match (HTTP 400{op}){detail}; "
            "it was damaged in transit",
            url=url,
            status=status,
        )
    return cls(f"HTTP {status}{op}{detail}", url=url, status=status)


def map_error(exc: BaseException, *, url: str) -> SynxferError:
    """The synxfer exception for a transport or credentials error raised for ``url``.

    Already-synxfer exceptions are returned unchanged.
    """
    if isinstance(exc, SynxferError):
        return exc
    if isinstance(exc, gauth.DefaultCredentialsError):  # none found: a set-up error (exit 2)
        return NoCredentials(f"no usable Google credentials ({exc}): {CREDENTIALS_HINT}", url=url)
    if isinstance(exc, gauth.RefreshError):
        if getattr(exc, "retryable", False):
            return TransientError(f"could not refresh Google credentials: {exc}", url=url)
        return PermissionDenied(
            f"could not refresh Google credentials: {exc}; {CREDENTIALS_HINT}", url=url
        )
    if isinstance(exc, gauth.TransportError):
        return TransientError(f"could not reach the credentials service: {exc}", url=url)
    if isinstance(exc, gauth.GoogleAuthError):
        return PermissionDenied(f"Google credentials error: {exc}; {CREDENTIALS_HINT}", url=url)
    if isinstance(exc, httpx.TimeoutException):
        return TransientError(f"timed out ({type(exc).__name__})", url=url)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ConfigError(f"invalid GCS endpoint for {url}: {exc}")
    if isinstance(exc, httpx.TransportError | httpx.DecodingError | httpx.StreamError | OSError):
        detail = str(exc) or type(exc).__name__
        return TransientError(f"network error: {detail}", url=url)
    if isinstance(exc, httpx.HTTPError):
        return BackendError(f"{type(exc).__name__}: {exc}", url=url)
    return BackendError(f"unexpected {type(exc).__name__}: {exc}", url=url)
