"""The ``s3://`` backend's options, read once into :class:`S3Options`.

Every setting the backend takes from ``BackendOptions.extra`` (``--backend-option
s3.NAME=VALUE``) or from the environment is named here, with the
:class:`~synxfer.ConfigError` that names it when its value cannot be used, so
a reader (and the user guide) finds them in one place and the rest of the
plugin sees typed values only. Credentials are not options: they come from
the AWS chain (:mod:`._credentials`); the CA bundle is the wire's default
(``AWS_CA_BUNDLE``, as botocore reads it, :mod:`._signed`).

S3-compatible subclasses (``scp://``) change defaults, not names: the
``md5_only``, ``recv_threads`` and ``addressing_style`` defaults arrive as
arguments from the backend class's attributes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from synxfer import ConfigError
from synxfer.backend import BackendOptions, option_bool

__all__ = [
    "ADDRESSING_STYLES",
    "AddressingStyle",
    "S3Options",
    "addressing_style",
    "check_endpoint_url",
    "endpoint_from_env",
]

AddressingStyle = Literal["auto", "virtual", "path"]
ADDRESSING_STYLES: tuple[AddressingStyle, ...] = ("auto", "virtual", "path")

#: The environment's endpoint for S3, in botocore's order of precedence.
_ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


@dataclass(frozen=True, slots=True)
class S3Options:
    """The backend options of one ``s3://`` backend (see :meth:`read`)."""

    #: ``addressing_style``: ``auto``, ``virtual`` or ``path``; None when not
    #: given, so the class default and the AWS profile's
    #: ``s3.addressing_style`` may apply.
    addressing_style: AddressingStyle | None = None
    #: ``md5_only``: bodies carry ``Content-MD5`` and no ``x-amz-checksum-*``
    #: header (servers that predate S3's flexible checksums).
    md5_only: bool = False
    #: ``check_etag``: compare the ETag of a body whose CRC32C the server did
    #: not echo with the MD5 of the bytes sent (off only for a store whose
    #: ETags are not MD5s; decision 0026).
    check_etag: bool = True
    #: ``anonymous``: unsigned requests, no credentials (``--no-sign-request``).
    anonymous: bool = False
    #: ``recv_threads``: large ``http`` GET bodies received in worker threads
    #: (never over TLS; decision 0013).
    recv_threads: bool = False
    #: ``request_payer``: ``requester`` sends ``x-amz-request-payer`` with
    #: every request (requester-pays buckets, ``--request-payer``).
    request_payer: str | None = None

    @classmethod
    def read(
        cls,
        options: BackendOptions,
        *,
        scheme: str,
        md5_only: bool = False,
        recv_threads: bool = False,
    ) -> S3Options:
        """``options.extra`` read and checked; the keyword arguments are the
        defaults of the backend class (a subclass's differ)."""
        extra = options.extra
        style = extra.get("addressing_style")
        read = cls(
            addressing_style=None if style is None else addressing_style(style, "addressing_style"),
            md5_only=option_bool(extra, "md5_only", md5_only, scheme=scheme),
            check_etag=option_bool(extra, "check_etag", True, scheme=scheme),
            anonymous=option_bool(extra, "anonymous", False, scheme=scheme),
            recv_threads=option_bool(extra, "recv_threads", recv_threads, scheme=scheme),
            request_payer=extra.get("request_payer") or None,
        )
        if read.request_payer not in (None, "requester"):
            raise ConfigError(
                f"{scheme}:// option request_payer={read.request_payer!r}: expected requester"
            )
        return read


def addressing_style(value: str, where: str) -> AddressingStyle:
    """``value`` as an addressing style; else ConfigError naming ``where``
    (the option, or the AWS profile setting it came from)."""
    for style in ADDRESSING_STYLES:
        if value == style:
            return style
    raise ConfigError(f"{where} must be one of {', '.join(ADDRESSING_STYLES)} (got {value!r})")


def endpoint_from_env(options: BackendOptions, env: Mapping[str, str] | None = None) -> str | None:
    """``Client(endpoint_url=...)``, else ``AWS_ENDPOINT_URL_S3``, else
    ``AWS_ENDPOINT_URL``, checked; None for AWS's own regional endpoint."""
    env = os.environ if env is None else env
    url = options.endpoint_url or next((env[n] for n in _ENDPOINT_ENV if env.get(n)), None)
    source = "Client(endpoint_url=...) / AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL"
    return check_endpoint_url(url, source) if url else None


def check_endpoint_url(url: str, source: str) -> str:
    """``url`` if it is an http(s) URL with a host; else ConfigError naming ``source``."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - validates the port
    except ValueError:  # a bad port, an unclosed [IPv6] host
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"invalid endpoint URL {url!r} (from {source}): expected http(s)://host[:port]"
        )
    return url
