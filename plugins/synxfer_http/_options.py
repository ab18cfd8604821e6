"""The ``http(s)://`` backend's options, read once.

The one module of this plugin that reads ``BackendOptions.extra``: the CA
bundle to trust, ``ca_bundle`` (else ``$AWS_CA_BUNDLE``; without either the
default TLS context reads ``SSL_CERT_FILE``/``SSL_CERT_DIR``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from synxfer.backend import BackendOptions

__all__ = ["HttpOptions"]


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """The options of one ``http(s)://`` backend."""

    #: ``ca_bundle`` (else ``$AWS_CA_BUNDLE``): extra trusted CAs, a PEM file.
    ca_bundle: str | None = None

    @classmethod
    def read(cls, options: BackendOptions, env: Mapping[str, str] | None = None) -> HttpOptions:
        """``options.extra`` and ``env`` (default the process environment) read."""
        env = os.environ if env is None else env
        return cls(ca_bundle=options.extra.get("ca_bundle") or env.get("AWS_CA_BUNDLE") or None)
