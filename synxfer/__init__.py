"""synxfer: fast, bounded, verifiable transfers between local disk and object stores.

The client and the blocking facade are imported on first use
(``synxfer.Client``, ``from synxfer import sync``), so importing synxfer
-- or running ``synxfer --version`` -- does not pay for asyncio, the engine
or the plugin registry.
"""

import typing as _typing

from ._config import GiB, KiB, MiB, RetryPolicy, TransferConfig
from ._customer_key import CustomerKey
from ._exceptions import (
    BackendError,
    BucketNotFound,
    ConfigError,
    IntegrityError,
    InvalidURL,
    NoCredentials,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    SourceChangedError,
    SynxferError,
    TransferFailed,
    TransientError,
    UnknownScheme,
    UnsafePathError,
)
from ._models import (
    Action,
    BucketInfo,
    CompletedPart,
    Event,
    EventKind,
    FileFailure,
    FileWarning,
    ListPage,
    MultipartUpload,
    ObjectInfo,
    PartInfo,
    PendingUpload,
    ReadResult,
    TransferResult,
    WriteOptions,
)
from ._units import parse_rate, parse_size

if _typing.TYPE_CHECKING:
    from ._blocking import copy, download_file, sync, sync_from, sync_to, upload_file
    from .client import Client

#: Names imported on first use, and the module each comes from.
_LAZY = {
    "Client": ".client",
    "copy": "._blocking",
    "download_file": "._blocking",
    "sync": "._blocking",
    "sync_from": "._blocking",
    "sync_to": "._blocking",
    "upload_file": "._blocking",
}

#: The backend SDK's names this face used to repeat: each has one address,
#: :mod:`synxfer.backend` (docs/decisions/0039-one-address-per-name.md). The
#: old one still resolves, with a DeprecationWarning, and is not cached, so
#: the module's own names stay this face's.
_MOVED = ("Backend", "BackendOptions", "Capabilities", "Checksum")


# Hidden from type checkers: they see the lazy names' imports above, and name
# a moved name as an error while it still runs.
if not _typing.TYPE_CHECKING:

    def __getattr__(name: str) -> _typing.Any:
        import importlib

        if name in _MOVED:
            import warnings

            warnings.warn(
                f"synxfer.{name} is synxfer.backend.{name}: import it from synxfer.backend",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(".backend", __name__), name)
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # once imported, a plain attribute
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "Action",
    "BackendError",
    "BucketInfo",
    "BucketNotFound",
    "Client",
    "CompletedPart",
    "ConfigError",
    "CustomerKey",
    "Event",
    "EventKind",
    "FileFailure",
    "FileWarning",
    "GiB",
    "IntegrityError",
    "InvalidURL",
    "KiB",
    "ListPage",
    "MiB",
    "MultipartUpload",
    "NoCredentials",
    "NotFound",
    "ObjectInfo",
    "PartInfo",
    "PendingUpload",
    "PermissionDenied",
    "PreconditionFailed",
    "ReadResult",
    "RetryPolicy",
    "SourceChangedError",
    "SynxferError",
    "TransferConfig",
    "TransferFailed",
    "TransferResult",
    "TransientError",
    "UnknownScheme",
    "UnsafePathError",
    "WriteOptions",
    "__version__",
    "copy",
    "download_file",
    "parse_rate",
    "parse_size",
    "sync",
    "sync_from",
    "sync_to",
    "upload_file",
]
