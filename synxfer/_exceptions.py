"""One exception tree for everything synxfer raises.

Backends map their dependency's errors (botocore, httpx, OS errors) onto this
tree at their boundary, so the engine and callers never see a foreign
exception.  The one distinction the engine acts on is :class:`TransientError`
(retried with backoff) versus everything else (fails that file at once).

    SynxferError
    ├── ConfigError            bad option, URL, scheme, credentials set-up
    │   ├── InvalidURL
    │   └── UnknownScheme
    ├── BackendError           a backend call failed
    │   ├── NotFound           object or bucket does not exist (a FileNotFoundError)
    │   │   └── BucketNotFound
    │   ├── PermissionDenied   403, bad credentials (a PermissionError)
    │   │   └── NoCredentials  none found (also a ConfigError)
    │   ├── PreconditionFailed object changed under us (If-Match failed)
    │   └── TransientError     5xx, throttling, resets, timeouts: retry
    ├── IntegrityError         checksum or size mismatch
    ├── SourceChangedError     a local file changed while it was read
    ├── UnsafePathError        an object key would escape the destination
    └── TransferFailed         a run finished with failed files

:class:`NotFound` is also the built-in :class:`FileNotFoundError` and
:class:`PermissionDenied` the built-in :class:`PermissionError` (as obstore's
errors are), so code written for files -- fsspec callers, ``except
FileNotFoundError`` -- needs no translation. Their ``errno`` is ENOENT and
EACCES, their ``filename`` the URL; their message is synxfer's, not
``[Errno 2] ...``. The other side of
it: an ``except OSError`` meant for local I/O must not wrap a backend call,
or it catches these too.
"""

from __future__ import annotations

import errno as _errno
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._models import TransferResult

__all__ = [
    "BackendError",
    "BucketNotFound",
    "ConfigError",
    "IntegrityError",
    "InvalidURL",
    "NotFound",
    "PermissionDenied",
    "PreconditionFailed",
    "SourceChangedError",
    "SynxferError",
    "TransferFailed",
    "TransientError",
    "UnknownScheme",
    "UnsafePathError",
]


class SynxferError(Exception):
    """Base class of every error synxfer raises."""


class ConfigError(SynxferError):
    """An option, URL or environment setting is wrong; the message says which."""


class InvalidURL(ConfigError):
    """A URL or path could not be parsed."""


class UnknownScheme(ConfigError):
    """No backend is installed for a URL scheme."""


class BackendError(SynxferError):
    """A backend operation failed.

    ``url`` names the object or bucket concerned when known; ``status`` is the
    protocol status code (HTTP status for HTTP backends) when there is one.
    """

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status

    def __str__(self) -> str:
        # The message as given, also for the errors that are OSErrors (whose
        # own str() would be "[Errno 2] None: 'url'").
        msg = BaseException.__str__(self)
        if self.url and self.url not in msg:
            return f"{self.url}: {msg}"
        return msg


class NotFound(BackendError, FileNotFoundError):
    """The object (or its bucket) does not exist."""

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message, url=url, status=status)
        self.errno, self.filename = _errno.ENOENT, url


class BucketNotFound(NotFound):
    """The bucket or container does not exist."""


class PermissionDenied(BackendError, PermissionError):
    """Access was refused (403) or credentials are missing or invalid."""

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message, url=url, status=status)
        self.errno, self.filename = _errno.EACCES, url


class NoCredentials(PermissionDenied, ConfigError):
    """No credentials were found for a backend that needs them: a set-up error.

    Both a :class:`PermissionDenied` and a :class:`ConfigError` (the CLI
    exits 2). Every request would fail the same way, so a run raises it
    instead of failing each file with it. Backends raise it when their
    credential chain finds nothing (not when a service refuses the
    credentials it was given: that is a plain :class:`PermissionDenied`).
    """


class PreconditionFailed(BackendError):
    """A conditional request failed: the object changed while being read."""


class TransientError(BackendError):
    """A failure worth retrying: throttling, 5xx, a reset connection, a timeout."""


class IntegrityError(SynxferError):
    """Data did not match its checksum or expected size."""


class SourceChangedError(SynxferError):
    """A local source file changed (size, mtime or inode) while being transferred."""


class UnsafePathError(SynxferError):
    """An object key maps to a path outside the destination, or to no valid path."""


class TransferFailed(SynxferError):
    """Raised by :meth:`TransferResult.raise_for_failures` when a run
    finished with failed files (a run itself returns its result and raises
    nothing for them: one failed file must not hide what did transfer).

    ``result`` holds the full outcome, including what did transfer.
    """

    def __init__(self, result: TransferResult) -> None:
        n = len(result.failures)
        first = result.failures[0] if result.failures else None
        detail = f"; first: {first.path}: {first.error}" if first else ""
        super().__init__(f"{n} file(s) failed{detail}")
        self.result = result
