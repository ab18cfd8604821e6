"""Samsung Cloud Platform (SCP) Object Storage: ``scp://bucket/prefix``.

SCP Object Storage speaks the S3 API, so this is :class:`synxfer_s3.S3Backend`
with a different profile, expressed only through S3Backend's hooks:

* **The endpoint is required**: there is no default SCP endpoint to fall back
  on, and silently talking to AWS instead would be wrong. It comes from
  ``options.endpoint_url`` (``Client(endpoint_url=...)``, ``--endpoint-url``),
  else ``SCP_ENDPOINT_URL``. ``AWS_ENDPOINT_URL`` is S3's endpoint, never
  SCP's: a user with both services configured gets each one's own.
* **Path-style addressing** (``https://endpoint/bucket/key``): it works
  whatever DNS and certificates the endpoint has.
* **Legacy checksums only.** SCP documents support for SDKs that predate S3's
  "flexible checksums" (boto3 <= 1.35), so requests carry ``Content-MD5``
  and never ``x-amz-checksum-*`` headers or aws-chunked trailers: puts and
  parts carry the engine's Content-MD5 (``md5_only``: the part checksum is
  MD5, not S3's default CRC32C), multipart uploads declare no checksum
  algorithm, and DeleteObjects carries Content-MD5 (as on S3).
* **Object options**: metadata, content type and the stored headers
  (``Cache-Control``, ``Content-Encoding``, ``Content-Disposition``). S3's
  storage classes, server-side encryption and canned ACLs are not among
  the features SCP documents, so they are refused (ConfigError) rather
  than sent and perhaps ignored.
* **Region**: ``options.region``, else ``SCP_REGION``, else -- only when a
  profile is named -- that profile's region, else :data:`DEFAULT_REGION`.
  The ambient AWS region (``AWS_DEFAULT_REGION``) is ignored: it names an
  AWS region, not an SCP one.

Credentials are the SCP authentication key (access key / secret key), taken
from the standard AWS chain like S3's: ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` or a profile.
"""

from __future__ import annotations

import dataclasses
import os
from typing import ClassVar

from synxfer import ConfigError
from synxfer_s3 import AddressingStyle, S3Backend, check_endpoint_url, profile_region

__all__ = ["DEFAULT_REGION", "ScpBackend"]

#: SigV4 signing region used when none is configured. SCP's S3 guide does not
#: name one, so this is a default, not a fact: "kr-west1" (Korea West). If the
#: endpoint expects another region, set ``--region`` or ``SCP_REGION``.
DEFAULT_REGION = "kr-west1"


class ScpBackend(S3Backend):
    """Samsung Cloud Platform Object Storage (S3-compatible); see the module docstring."""

    scheme: ClassVar[str] = "scp"
    capabilities = dataclasses.replace(
        S3Backend.capabilities,
        part_checksum="md5",
        write_options=frozenset(
            {"metadata", "content_type", "cache_control", "content_encoding", "content_disposition"}
        ),
        storage_classes=frozenset(),
    )
    default_region: ClassVar[str] = DEFAULT_REGION
    addressing_style: ClassVar[AddressingStyle] = "path"
    md5_only: ClassVar[bool] = True

    def _resolve_endpoint(self) -> str | None:
        for value, source in (
            (self.options.endpoint_url, "Client(endpoint_url=...)"),
            (os.environ.get("SCP_ENDPOINT_URL"), "SCP_ENDPOINT_URL"),
        ):
            if value:
                return check_endpoint_url(value, source)
        raise ConfigError(
            "scp:// needs the SCP Object Storage endpoint: pass Client(endpoint_url=...) "
            "or set SCP_ENDPOINT_URL (e.g. https://<object storage endpoint>)"
        )

    async def _resolve_region(self) -> str:
        # A named profile is looked up even when its region is not needed, so
        # an unknown one is a ConfigError when the backend opens.
        profile = self.options.profile
        chain = await profile_region(profile) if profile else None
        return self.options.region or os.environ.get("SCP_REGION") or chain or self.default_region
