"""synxfer's Google Cloud Storage backend (``gs://bucket/key``), on httpx.

See :mod:`synxfer_gcs._backend` for the design (parallel composite uploads,
generations as ETags, CRC32C everywhere, resumable uploads) and
:mod:`synxfer_gcs._errors` for how GCS errors map onto synxfer's exception
tree. Install with ``pip install 'synxfer[gcs]'``.
"""

from ._backend import (
    COMPOSITE_PREFIX,
    DEFAULT_ENDPOINT,
    GcsBackend,
    ResumableSession,
    ResumableStatus,
    resolve_endpoint,
)
from ._errors import map_error

__all__ = [
    "COMPOSITE_PREFIX",
    "DEFAULT_ENDPOINT",
    "GcsBackend",
    "ResumableSession",
    "ResumableStatus",
    "map_error",
    "resolve_endpoint",
]
