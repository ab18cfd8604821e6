"""The ``gs://`` backend's options, read once into :class:`GcsOptions`.

Every setting the backend takes from ``BackendOptions.extra``
(``--backend-option gs.NAME=VALUE``) or from the environment is named here,
with the :class:`~synxfer.ConfigError` that names it when its value cannot
be used, so the rest of the plugin sees typed values only. Credentials
themselves are google-auth's (:mod:`._auth`); only the file naming them is
an option.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import ip_address
from urllib.parse import urlsplit

from synxfer import ConfigError
from synxfer.backend import BackendOptions, option_bool, option_int

__all__ = ["COMPOSITE_PREFIX", "DEFAULT_ENDPOINT", "GcsOptions", "resolve_endpoint"]

DEFAULT_ENDPOINT = "https://storage.googleapis.com"
#: Default of the ``composite_prefix`` option: where composite-upload components live.
COMPOSITE_PREFIX = ".synxfer-composite/"
#: The environment's Google Cloud project, in the order Google's tools read it.
_PROJECT_ENV = ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "GCLOUD_PROJECT")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


@dataclass(frozen=True, slots=True)
class GcsOptions:
    """The options of one ``gs://`` backend (see :meth:`read`)."""

    #: The JSON API's base URL (see :func:`resolve_endpoint`).
    endpoint_url: str
    #: ``anonymous``: no credentials (default: the endpoint is an emulator).
    anonymous: bool
    #: ``credentials_file``: a service-account key or authorized-user JSON
    #: file, instead of Application Default Credentials.
    credentials_file: str | None = None
    #: ``project`` (else ``GOOGLE_CLOUD_PROJECT``, ``CLOUDSDK_CORE_PROJECT``,
    #: ``GCLOUD_PROJECT``): where new buckets go; None: the credentials'.
    project: str | None = None
    #: ``composite_prefix``: the reserved, hidden prefix of composite-upload
    #: components (ends in ``/``).
    composite_prefix: str = COMPOSITE_PREFIX
    #: ``list_page_size``: objects per listing request (1..1000, GCS's maximum).
    list_page_size: int = 1000

    @classmethod
    def read(cls, options: BackendOptions, env: Mapping[str, str] | None = None) -> GcsOptions:
        """``options`` (and ``env``, default the process environment) read and checked."""
        env = os.environ if env is None else env
        extra = options.extra
        endpoint_url, anonymous = resolve_endpoint(options, env)
        prefix = extra.get("composite_prefix", COMPOSITE_PREFIX)
        if not prefix.endswith("/") or prefix.startswith("/") or len(prefix) < 2:
            raise ConfigError(
                f"gs option composite_prefix={prefix!r}: expected a prefix like "
                f"{COMPOSITE_PREFIX!r} (ending in '/')"
            )
        return cls(
            endpoint_url=endpoint_url,
            anonymous=anonymous,
            credentials_file=extra.get("credentials_file") or None,
            project=extra.get("project")
            or next((env[n] for n in _PROJECT_ENV if env.get(n)), None),
            composite_prefix=prefix,
            list_page_size=option_int(extra, "list_page_size", 1000, scheme="gs", low=1, high=1000),
        )


def resolve_endpoint(
    options: BackendOptions, env: Mapping[str, str] | None = None
) -> tuple[str, bool]:
    """``(base URL, anonymous)`` for these options and the environment.

    ``options.endpoint_url`` wins, then ``$STORAGE_EMULATOR_HOST`` (anonymous,
    like Google's client libraries), then :data:`DEFAULT_ENDPOINT` with
    credentials. An explicit endpoint on a loopback address is assumed to be
    an emulator (anonymous); ``options.extra["anonymous"]`` overrides.
    """
    env = os.environ if env is None else env
    emulator = env.get("STORAGE_EMULATOR_HOST", "").strip()
    if options.endpoint_url:
        raw, source = options.endpoint_url, "the endpoint given for gs://"
    elif emulator:
        raw, source = emulator, "STORAGE_EMULATOR_HOST"
        if "://" not in raw:
            raw = f"http://{raw}"
    else:
        raw, source = DEFAULT_ENDPOINT, "the default"
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - validates the port
    except ValueError:  # a bad port, an unclosed [IPv6] host
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"invalid GCS endpoint {raw!r} (from {source}): expected http(s)://host[:port]"
        )
    path = parts.path.rstrip("/")
    if path.endswith("/storage/v1"):
        path = path[: -len("/storage/v1")]
    base = f"{parts.scheme}://{parts.netloc}{path}"
    guess = _is_loopback(parts.hostname) if options.endpoint_url else bool(emulator)
    return base, option_bool(options.extra, "anonymous", guess, scheme="gs")


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False
