"""The backend SDK: what a storage plugin implements.

A backend serves one bucket (or container, or root directory) and implements
*primitives only*: stat, list a page, read a byte range, put, delete, copy,
and the four multipart calls. It declares what it can do in
:class:`Capabilities`. Everything else -- chunking, concurrency, retries,
checksums, progress, temp files -- belongs to the engine, which only ever
talks to a backend through this interface (usually wrapped in layers, see
:mod:`synxfer.layers`).

Rules for implementers (the conformance kit in :mod:`synxfer.testing`
checks them):

* Map every dependency error to :mod:`synxfer`'s exception tree at the
  boundary: missing objects raise :class:`~synxfer.NotFound`, refused access
  :class:`~synxfer.PermissionDenied`, anything worth retrying
  :class:`~synxfer.TransientError`. Never retry inside a backend.
* ``read(key, offset, length)`` returns exactly ``length`` bytes (fewer only
  at the end of the object) and the whole object's info.
* ``delete`` of a missing key is not an error.
* Keys are ``/``-separated strings relative to the bucket, never starting
  with ``/``.
* Never log or ``repr`` credentials.
* A call that sends several requests at once (a copy in parts, a compose
  tree, a write to every replica) is listed in
  :attr:`Capabilities.fan_out` and takes one slot of ``options.requests``
  per request it sends, so the client's request limit holds inside it too.

A backend is constructed by its factory as ``Factory(bucket, options)`` and
used as an async context manager.

A plugin imports :mod:`synxfer` and :mod:`synxfer.backend`, nothing else
from synxfer, and each name from one place: the exception tree, the values a
backend returns (:class:`~synxfer.ObjectInfo`, :class:`~synxfer.ReadResult`,
:class:`~synxfer.ListPage`, ...) and the units come from :mod:`synxfer`, the
face users see too; this package holds only what implementers need besides.
Besides the base class, options and capabilities it offers the registry of
schemes, and helpers: asyncio
(:func:`to_thread_holding`, :func:`bounded_map`, :func:`first_error`,
:func:`shielded`), CRC32C (:func:`crc32c`, :func:`crc32c_available`),
option parsing (:func:`option_bool`, :func:`option_int`,
:func:`option_float`), :class:`CursorGuard` (a paging loop that stops on a
repeated cursor), :func:`check_write_options`
(what a client asks before writing with :class:`WriteOptions`: every option
set must be in ``Capabilities.write_options``), and :class:`HttpClient`, a
pooled HTTP/1.1 client whose GETs receive a body straight into the
caller's buffer (the S3 data path; GCS media reads). For services that vend
pre-signed URLs (Synapse, GA4GH DRS): :class:`UrlVendor`, :class:`UrlBackend`,
:class:`SignedUrl` and the helpers of :mod:`synxfer.backend._urls`.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from .. import _exceptions
from .._config import check_write_options
from .._customer_key import CUSTOMER_KEY_ALGORITHMS, customer_key
from .._models import CANNED_ACLS, SSE_ALGORITHMS, WRITE_OPTION_NAMES, ContentDigests
from ._aio import bounded_map, first_error, shielded, to_thread_holding
from ._base import (
    Backend,
    BackendFactory,
    BackendOptions,
    Capabilities,
    Checksum,
    ChecksumAlgorithm,
    CursorGuard,
    Payload,
)
from ._crc32c import crc32c, crc32c_available
from ._http import TRANSIENT_STATUS, Body, BodyTooLarge, HttpClient, parse_http_date
from ._options import option_bool, option_float, option_int
from ._protocol import HttpResponse
from ._registry import available_schemes, open_backend, register, resolve
from ._requests import UNLIMITED, RequestLimiter

if _TYPE_CHECKING:
    # The URL plane is imported on first use (``__getattr__`` below): a
    # backend that signs its own requests (S3) never loads it.
    from ._urls import (
        SignedUrl,
        UploadRequest,
        UrlBackend,
        UrlVendor,
        VendedUpload,
        checksums_from_headers,
        md5_header_allowed,
        put_url,
        read_url_into,
        redact_url,
    )

__all__ = [
    "CANNED_ACLS",
    "CUSTOMER_KEY_ALGORITHMS",
    "SSE_ALGORITHMS",
    "TRANSIENT_STATUS",
    "UNLIMITED",
    "WRITE_OPTION_NAMES",
    "Backend",
    "BackendFactory",
    "BackendOptions",
    "Body",
    "BodyTooLarge",
    "Capabilities",
    "Checksum",
    "ChecksumAlgorithm",
    "ContentDigests",
    "CursorGuard",
    "HttpClient",
    "HttpResponse",
    "Payload",
    "RequestLimiter",
    "SignedUrl",
    "UploadRequest",
    "UrlBackend",
    "UrlVendor",
    "VendedUpload",
    "available_schemes",
    "bounded_map",
    "check_write_options",
    "checksums_from_headers",
    "crc32c",
    "crc32c_available",
    "customer_key",
    "first_error",
    "md5_header_allowed",
    "open_backend",
    "option_bool",
    "option_float",
    "option_int",
    "parse_http_date",
    "put_url",
    "read_url_into",
    "redact_url",
    "register",
    "resolve",
    "shielded",
    "to_thread_holding",
]


#: The URL plane's names (:mod:`._urls`), loaded when one is first asked for.
#: They are listed here, not read from ``_urls.__all__``: reading that would
#: import the module this defers. ``_LAZY``, as in :mod:`synxfer`, is the name
#: the export check (tests/test_units.py) counts as public.
_LAZY = frozenset(
    {
        "SignedUrl",
        "UploadRequest",
        "UrlBackend",
        "UrlVendor",
        "VendedUpload",
        "checksums_from_headers",
        "md5_header_allowed",
        "put_url",
        "read_url_into",
        "redact_url",
    }
)

#: Names this package used to repeat from :mod:`synxfer` (the errors, the
#: values, the units), and the private module each lives in. Each has one
#: address, ``synxfer``; the old one still resolves, with a DeprecationWarning,
#: so a plugin written against it keeps working while it moves its import
#: (docs/decisions/0039-one-address-per-name.md).
_MOVED = {
    **dict.fromkeys(("GiB", "KiB", "MiB"), "_config"),
    **dict.fromkeys(_exceptions.__all__, "_exceptions"),
    **dict.fromkeys(
        (
            "BucketInfo",
            "CompletedPart",
            "ListPage",
            "MultipartUpload",
            "ObjectInfo",
            "PartInfo",
            "PendingUpload",
            "ReadResult",
            "WriteOptions",
        ),
        "_models",
    ),
}


# Hidden from type checkers, so that mypy names an old import as an error
# while it still runs.
if not _TYPE_CHECKING:

    def __getattr__(name: str) -> _Any:
        if name in _LAZY:
            from . import _urls

            value = getattr(_urls, name)
            globals()[name] = value  # once: later lookups find it directly
            return value
        module = _MOVED.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib
        import warnings

        warnings.warn(
            f"synxfer.backend.{name} is synxfer.{name}: import it from synxfer",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(f"synxfer.{module}"), name)
