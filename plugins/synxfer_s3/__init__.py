"""synxfer's S3 backend (``s3://bucket/key``), on its own S3 data plane.

See :mod:`synxfer_s3._backend` for the design, :mod:`synxfer_s3._core` for
the requests it sends and :mod:`synxfer_s3._classify` for how S3 errors map
onto synxfer's exception tree. S3-compatible stores subclass
:class:`S3Backend` (see :mod:`synxfer_scp`).

Importing this package loads neither botocore nor aiohttp: botocore is
imported only when the credential chain or a profile is needed.
"""

from . import _redact
from ._backend import S3Backend
from ._credentials import profile_region
from ._errors import map_error
from ._options import AddressingStyle, check_endpoint_url

_redact.install()

# What S3-compatible plugins build on (synxfer_scp): they import it from here,
# never from this package's private modules.
__all__ = ["AddressingStyle", "S3Backend", "check_endpoint_url", "map_error", "profile_region"]
