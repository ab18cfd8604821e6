"""synxfer's S3 backend (``s3://bucket/key``), built on aiobotocore.

See :mod:`synxfer_s3._backend` for the design and :mod:`synxfer_s3._errors`
for how S3 errors map onto synxfer's exception tree. S3-compatible stores
subclass :class:`S3Backend` (see :mod:`synxfer_scp`).
"""

from . import _redact
from ._backend import AddressingStyle, S3Backend, check_endpoint_url
from ._errors import map_error

_redact.install()

__all__ = ["AddressingStyle", "S3Backend", "check_endpoint_url", "map_error"]
