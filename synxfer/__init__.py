"""synxfer: fast, bounded, verifiable transfers between local disk and object stores.

The client, the blocking facade and the backend SDK are imported on first
use (``synxfer.Client``, ``from synxfer import sync``), so importing synxfer
-- or running ``synxfer --version`` -- does not pay for asyncio, the engine
or the plugin registry.
"""

from typing import TYPE_CHECKING, Any

from ._config import GiB, KiB, MiB, RetryPolicy, TransferConfig
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

if TYPE_CHECKING:
    from ._blocking import copy, download_file, sync, sync_from, sync_to, upload_file
    from .backend import Backend, BackendOptions, Capabilities, Checksum
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
    "Backend": ".backend",
    "BackendOptions": ".backend",
    "Capabilities": ".backend",
    "Checksum": ".backend",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "Action",
    "Backend",
    "BackendError",
    "BackendOptions",
    "BucketInfo",
    "BucketNotFound",
    "Capabilities",
    "Checksum",
    "Client",
    "CompletedPart",
    "ConfigError",
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
