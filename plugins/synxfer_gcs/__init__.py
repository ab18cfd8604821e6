"""synxfer's Google Cloud Storage backend (``gs://bucket/key``), on the SDK's HttpClient.

See :mod:`synxfer_gcs._backend` for the design (generations as ETags, CRC32C
everywhere, reads), :mod:`synxfer_gcs._compose` for multipart uploads as
parallel composite uploads, :mod:`synxfer_gcs._core` for requests and
credentials, :mod:`synxfer_gcs._options` for the options and the endpoint,
and :mod:`synxfer_gcs._errors` for how GCS errors map onto synxfer's
exception tree. Install with ``pip install 'synxfer[gcs]'``.
"""

from ._backend import GcsBackend
from ._errors import map_error
from ._options import COMPOSITE_PREFIX, DEFAULT_ENDPOINT, resolve_endpoint

__all__ = [
    "COMPOSITE_PREFIX",
    "DEFAULT_ENDPOINT",
    "GcsBackend",
    "map_error",
    "resolve_endpoint",
]
