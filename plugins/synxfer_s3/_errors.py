"""Translation of foreign exceptions (botocore, aiohttp, OS) into synxfer's tree.

The S3 data path no longer raises foreign exceptions: :mod:`._core` and
:class:`synxfer.backend.HttpClient` map every answer and network failure themselves, with the
tables of :mod:`._classify`. :func:`map_error` remains for code that drives
botocore directly (the credential chain, tools built on this plugin) and
for anything that slips through.

Nothing is imported to do so: an exception of botocore or aiohttp can only
exist once that library is loaded, so their exception classes are looked up
in ``sys.modules`` -- importing this module (or ``synxfer_s3``) never loads
either library.
"""

from __future__ import annotations

import sys
from typing import Any

from synxfer import (
    BackendError,
    BucketNotFound,
    ConfigError,
    NoCredentials,
    PermissionDenied,
    SynxferError,
    TransientError,
)

from ._classify import CREDENTIALS_HINT, bucket_not_found, classify, error_text

__all__ = [
    "CREDENTIALS_HINT",
    "bucket_not_found",
    "classify",
    "client_error_details",
    "map_error",
]


def client_error_details(exc: Any) -> tuple[str, int | None, str]:
    """``(code, HTTP status, message)`` of a botocore ClientError."""
    response = getattr(exc, "response", None) or {}
    error = response.get("Error", {})
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    code = str(error.get("Code") or (status if status is not None else "Unknown"))
    return code, status, str(error.get("Message") or "")


def _loaded(module: str, *names: str) -> tuple[type[BaseException], ...]:
    """The named exception classes of ``module`` if it is imported, else ()."""
    mod = sys.modules.get(module)
    if mod is None:
        return ()
    return tuple(getattr(mod, name) for name in names if hasattr(mod, name))


def map_error(exc: BaseException, *, url: str, bucket: str) -> SynxferError:
    """The synxfer exception for ``exc``, raised during a request on ``url``.

    ``bucket`` is the bucket name, for the "bucket does not exist" message.
    Already-synxfer exceptions are returned unchanged.
    """
    if isinstance(exc, SynxferError):
        return exc
    bx = "botocore.exceptions"
    if isinstance(exc, _loaded(bx, "ClientError")):
        code, status, message = client_error_details(exc)
        cls = classify(code, status)
        if cls is BucketNotFound:
            return bucket_not_found(bucket, url, status)
        op = str(getattr(exc, "operation_name", "") or "request")
        return cls(error_text(op, code, status, message), url=url, status=status)
    if isinstance(exc, _loaded(bx, "NoCredentialsError", "PartialCredentialsError")):
        return NoCredentials(f"no usable credentials ({exc}): {CREDENTIALS_HINT}", url=url)
    if isinstance(exc, _loaded(bx, "CredentialRetrievalError")):
        return PermissionDenied(f"could not obtain credentials: {exc}", url=url)
    if isinstance(exc, _loaded(bx, "ProfileNotFound")):
        return ConfigError(f"{exc}; check Client(profile=...) / AWS_PROFILE and ~/.aws/config")
    transient: tuple[type[BaseException], ...] = (
        OSError,  # TimeoutError and ConnectionError included
        *_loaded(
            bx,
            "ConnectionError",
            "HTTPClientError",
            "IncompleteReadError",
            "FlexibleChecksumError",
        ),
        *_loaded("aiohttp", "ClientError"),
    )
    if isinstance(exc, transient):
        detail = str(exc) or type(exc).__name__
        return TransientError(f"network error: {detail}", url=url)
    if isinstance(exc, _loaded(bx, "BotoCoreError")):
        return BackendError(f"{type(exc).__name__}: {exc}", url=url)
    return BackendError(f"unexpected {type(exc).__name__}: {exc}", url=url)
