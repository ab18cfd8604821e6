"""synxfer's Google Cloud Storage backend (``gs://bucket/key``), on the SDK's HttpClient.

See :mod:`synxfer_gcs._backend` for the design (generations as ETags, CRC32C
everywhere, reads), :mod:`synxfer_gcs._compose` for multipart uploads as
parallel composite uploads, :mod:`synxfer_gcs._core` for endpoints and
credentials, and :mod:`synxfer_gcs._errors` for how GCS errors map onto
synxfer's exception tree. Install with ``pip install 'synxfer[gcs]'``.
"""

from ._backend import COMPOSITE_PREFIX, GcsBackend
from ._core import DEFAULT_ENDPOINT, resolve_endpoint
from ._errors import map_error

__all__ = [
    "COMPOSITE_PREFIX",
    "DEFAULT_ENDPOINT",
    "GcsBackend",
    "map_error",
    "resolve_endpoint",
]
