"""Credentials and region for the S3 signer, with botocore only where needed.

Fast path: no profile was asked for and ``AWS_ACCESS_KEY_ID`` and
``AWS_SECRET_ACCESS_KEY`` (and optionally ``AWS_SESSION_TOKEN``) are set --
botocore's environment provider would win anyway -- so they are used as
they are, and botocore is not even imported. Otherwise botocore's
credential chain (profiles, SSO, ``credential_process``, container and
instance metadata, assume-role, with refresh) is imported lazily, resolved
in a worker thread (it may do network I/O), and consulted again whenever
its credentials are due for refresh.

The region follows the same rule: ``AWS_REGION`` / ``AWS_DEFAULT_REGION``
when no profile was asked for, else botocore's configuration chain (the
config file; without one, and without a profile, botocore is not needed).

A chain that finds no credentials raises :class:`~synxfer.NoCredentials`
(a set-up error: the CLI exits 2), not a plain PermissionDenied.

:func:`profile_s3_setting` reads one key of the active profile's ``s3``
section of the AWS config file (``addressing_style``), as aws-cli does.

Secrets never appear in a repr, a log line or an error message.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from synxfer import ConfigError, NoCredentials, PermissionDenied

from ._classify import CREDENTIALS_HINT

if TYPE_CHECKING:
    from botocore.credentials import Credentials as BotoCredentials
    from botocore.session import Session as BotoSession

__all__ = [
    "CREDENTIALS_HINT",
    "BotocoreCredentials",
    "CredentialSource",
    "Credentials",
    "LazyCredentials",
    "StaticCredentials",
    "credentials_from_env",
    "profile_region",
    "profile_s3_setting",
    "resolve_credentials",
    "resolve_region",
]


class Credentials:
    """An access key, its secret and an optional session token.

    The repr shows the first four characters of the access key id and
    nothing of the secret or token.
    """

    __slots__ = ("access_key", "secret_key", "token")

    def __init__(self, access_key: str, secret_key: str, token: str | None = None) -> None:
        self.access_key = access_key
        self.secret_key = secret_key
        self.token = token or None

    def __repr__(self) -> str:
        token = ", token=****" if self.token else ""
        return f"Credentials(access_key={self.access_key[:4]}****, secret_key=****{token})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Credentials):
            return NotImplemented
        return (self.access_key, self.secret_key, self.token) == (
            other.access_key,
            other.secret_key,
            other.token,
        )

    def __hash__(self) -> int:
        return hash((self.access_key, self.secret_key, self.token))


class CredentialSource(Protocol):
    """Where the signer gets credentials for each request."""

    async def get(self) -> Credentials:
        """Current credentials (refreshed first if they are about to expire)."""
        ...


class StaticCredentials:
    """Credentials that never change (environment variables, tests)."""

    __slots__ = ("_credentials",)

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    def __repr__(self) -> str:
        return f"StaticCredentials({self._credentials!r})"

    async def get(self) -> Credentials:
        return self._credentials


class BotocoreCredentials:
    """botocore's (possibly refreshable) credentials, re-read when due.

    botocore refreshes inside ``get_frozen_credentials`` (blocking, maybe a
    network call), so that runs in a worker thread, at most one at a time.
    Whether a refresh is due is checked at most once a second.
    """

    def __init__(self, credentials: BotoCredentials) -> None:
        self._source = credentials
        self._current: Credentials | None = None
        self._checked = 0.0
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"BotocoreCredentials({type(self._source).__name__})"

    def _due(self) -> bool:
        refresh_needed = getattr(self._source, "refresh_needed", None)
        return bool(refresh_needed()) if refresh_needed is not None else False

    async def get(self) -> Credentials:
        current = self._current
        now = time.monotonic()
        if current is not None and now - self._checked < 1.0:
            return current
        if current is not None and not self._due():
            self._checked = now
            return current
        async with self._lock:
            if self._current is not current:  # another task refreshed meanwhile
                assert self._current is not None
                return self._current
            frozen = await asyncio.to_thread(_freeze, self._source)
            self._current = frozen
            self._checked = time.monotonic()
            return frozen


class LazyCredentials:
    """The credentials of ``profile`` (None: the default chain), found on first use.

    Nothing is resolved until the first request asks, as botocore does: a
    backend opens without touching the environment or botocore's chain,
    and missing credentials surface as :class:`~synxfer.NoCredentials` (a
    PermissionDenied) on the first request. The resolved source is kept (and refreshes
    itself if it is botocore's).
    """

    def __init__(self, profile: str | None = None, env: Mapping[str, str] | None = None) -> None:
        self._profile = profile
        self._env = env
        self._source: CredentialSource | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"LazyCredentials(profile={self._profile!r}, resolved={self._source!r})"

    async def get(self) -> Credentials:
        source = self._source
        if source is None:
            async with self._lock:
                if self._source is None:
                    self._source = await resolve_credentials(self._profile, self._env)
                source = self._source
        return await source.get()


def _freeze(source: BotoCredentials) -> Credentials:
    from botocore.exceptions import BotoCoreError

    try:
        frozen = source.get_frozen_credentials()
    except BotoCoreError as exc:
        raise PermissionDenied(f"could not obtain credentials: {exc}") from exc
    if not frozen.access_key or not frozen.secret_key:
        raise NoCredentials(f"no usable credentials: {CREDENTIALS_HINT}")
    return Credentials(frozen.access_key, frozen.secret_key, frozen.token)


def credentials_from_env(env: Mapping[str, str] | None = None) -> Credentials | None:
    """Credentials from ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (+ token), if set."""
    env = os.environ if env is None else env
    access = env.get("AWS_ACCESS_KEY_ID")
    secret = env.get("AWS_SECRET_ACCESS_KEY")
    if not access or not secret:
        return None
    token = env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN")
    return Credentials(access, secret, token)


def _session(profile: str | None) -> BotoSession:
    try:
        import botocore.session
        from botocore.exceptions import ProfileNotFound
    except ImportError:  # pragma: no cover - botocore comes with the s3 extra
        raise ConfigError(
            "AWS profiles and the AWS credential chain need botocore "
            "(pip install 'synxfer[s3]'); without it, set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY and name no profile"
        ) from None

    from . import _redact

    _redact.install()
    session = botocore.session.Session(profile=profile)
    if profile:
        try:
            session.get_scoped_config()
        except ProfileNotFound as exc:
            raise ConfigError(
                f"AWS profile {profile!r} not found; check Client(profile=...) / "
                "AWS_PROFILE and ~/.aws/config"
            ) from exc
    return session


def _chain_credentials(profile: str | None) -> BotoCredentials:
    from botocore.exceptions import (
        BotoCoreError,
        ConfigParseError,
        PartialCredentialsError,
        ProfileNotFound,
    )

    session = _session(profile)
    try:
        credentials = session.get_credentials()
    except ProfileNotFound as exc:
        # AWS_PROFILE names no profile: a set-up error that ends the run, as --profile's does.
        raise NoCredentials(f"{exc}; check AWS_PROFILE and ~/.aws/config") from exc
    except ConfigParseError as exc:
        raise NoCredentials(
            f"{exc}: fix the file or point AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE elsewhere"
        ) from exc
    except PartialCredentialsError as exc:
        raise NoCredentials(f"no usable credentials ({exc}): {CREDENTIALS_HINT}") from exc
    except BotoCoreError as exc:
        raise PermissionDenied(f"could not obtain credentials: {exc}") from exc
    if credentials is None:
        raise NoCredentials(f"no credentials found: {CREDENTIALS_HINT}")
    return credentials


async def resolve_credentials(
    profile: str | None = None, env: Mapping[str, str] | None = None
) -> CredentialSource:
    """The credential source for ``profile`` (None: the default chain).

    Environment credentials without a profile need no botocore; anything
    else goes through botocore's chain, resolved in a worker thread.
    Raises ConfigError for an unknown profile and NoCredentials when no
    credentials can be found.
    """
    if not profile:
        found = credentials_from_env(env)
        if found is not None:
            return StaticCredentials(found)
    credentials = await asyncio.to_thread(_chain_credentials, profile)
    source = BotocoreCredentials(credentials)
    await source.get()  # fail now, with a clear message, rather than on first use
    return source


async def resolve_region(
    profile: str | None = None,
    *,
    explicit: str | None = None,
    default: str = "us-east-1",
    env: Mapping[str, str] | None = None,
) -> str:
    """The signing region: ``explicit``, else the environment's (no profile)
    or the profile's, else ``default``."""
    if explicit:
        return explicit
    env = os.environ if env is None else env
    if not profile:
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region:
            return region
        # botocore reads the region from the config file only: none, no botocore.
        config = env.get("AWS_CONFIG_FILE") or "~/.aws/config"
        if not os.path.exists(os.path.expanduser(config)):
            return default
    chain = await asyncio.to_thread(_chain_region, profile)
    return chain or default


def _chain_region(profile: str | None) -> str | None:
    value: Any = _session(profile).get_config_variable("region")
    return str(value) if value else None


async def profile_region(profile: str) -> str | None:
    """The region configured for ``profile`` (ConfigError if there is no such profile)."""
    return await asyncio.to_thread(_chain_region, profile)


def profile_s3_setting(
    profile: str | None, name: str, env: Mapping[str, str] | None = None
) -> tuple[str | None, str]:
    """``(value, where)``: setting ``name`` of the active profile's ``s3`` section
    of the AWS config file, as aws-cli reads it (blocking: a file read).

    The file is ``AWS_CONFIG_FILE``, else ``~/.aws/config``; the profile is
    ``profile``, else ``AWS_PROFILE``, else ``default``. ``value`` is None
    when the file, the profile, its ``s3`` section or the setting is missing;
    ``where`` names the file, profile and setting for messages.
    """
    env = os.environ if env is None else env
    path = os.path.expanduser(env.get("AWS_CONFIG_FILE") or "~/.aws/config")
    active = profile or env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"
    where = f"{path}: [profile {active}] s3.{name}"
    if not os.path.isfile(path):
        return None, where
    import configparser  # only when there is a file to read: start-up pays for it

    parser = configparser.RawConfigParser(default_section="synxfer-no-default-section")
    try:
        if not parser.read(path, encoding="utf-8"):
            return None, where
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the AWS config file {path}: {exc}") from None
    sections = [f"profile {active}", active] if active == "default" else [f"profile {active}"]
    section = next((s for s in sections if parser.has_section(s)), None)
    if section is None:
        return None, where
    for line in (parser.get(section, "s3", fallback=None) or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip() or None, f"{path}: [{section}] s3.{name}"
    return None, where
