"""The syn:// backend's options: its token, endpoints and thread count found
as synapseclient finds them, and its own backend options.

The one module of this plugin that reads ``BackendOptions.extra``
(:func:`load_settings`).

One ``~/.synapseConfig`` serves both clients. synapseclient 4.14 reads it
with a :class:`configparser.RawConfigParser` (option names are
case-insensitive) and this module follows it step by step:

* **Token** (``synapseclient.core.credentials.credential_provider``): the
  chain is the config file first, then ``$SYNAPSE_AUTH_TOKEN``. The
  profile is ``$SYNAPSE_PROFILE`` (or the ``profile`` backend option, or
  ``BackendOptions.profile``), else ``default``; profile ``default`` is the
  ``[default]`` section, profile ``NAME`` the ``[profile NAME]`` section,
  and when ``[default]`` is absent the legacy ``[authentication]`` section
  is read instead; a named profile that does not exist is an error, as it
  is for synapseclient (even when ``$SYNAPSE_AUTH_TOKEN`` is set). The
  token is ``authtoken``.
* **Endpoints** (``Synapse.setEndpoints``): ``repoEndpoint``,
  ``authEndpoint`` and ``fileHandleEndpoint`` from the ``[endpoints]``
  section, else the public production service; the backend options
  ``repo_endpoint``, ``auth_endpoint`` and ``file_endpoint``
  (``--backend-option syn.repo_endpoint=...``) override both, as
  ``Synapse(repoEndpoint=...)`` arguments do.
* **Threads** (``get_transfer_config``): ``[transfer] max_threads``.
* **The file** is ``~/.synapseConfig`` (synapseclient's ``configPath``
  default); the backend option ``config_file`` names another.
* **Listing** (synxfer's own): ``list_concurrency`` (1..64, default 8),
  entity reads in flight within one listing page.

The token lives in :class:`SynapseSettings`, whose ``repr`` never shows it.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from synxfer import ConfigError, NoCredentials
from synxfer.backend import BackendOptions, option_int

__all__ = [
    "CONFIG_FILE",
    "PRODUCTION_ENDPOINTS",
    "TOKEN_HINT",
    "SynapseSettings",
    "load_settings",
    "read_max_threads",
]

#: synapseclient's ``client.CONFIG_FILE``.
CONFIG_FILE = "~/.synapseConfig"
#: synapseclient's ``client.PRODUCTION_ENDPOINTS``.
PRODUCTION_ENDPOINTS: Mapping[str, str] = {
    "repoEndpoint": "https://repo-prod.prod.sagebase.org/repo/v1",
    "authEndpoint": "https://auth-prod.prod.sagebase.org/auth/v1",
    "fileHandleEndpoint": "https://file-prod.prod.sagebase.org/file/v1",
}
#: Backend option -> synapseclient's endpoint name.
_ENDPOINT_OPTIONS = {
    "repo_endpoint": "repoEndpoint",
    "auth_endpoint": "authEndpoint",
    "file_endpoint": "fileHandleEndpoint",
}
TOKEN_HINT = (
    "set SYNAPSE_AUTH_TOKEN to a Synapse personal access token, or put it in "
    "~/.synapseConfig as 'authtoken = ...' under [default] (or [profile NAME] "
    "with SYNAPSE_PROFILE=NAME)"
)
#: synapseclient caps ``max_threads`` at this (``client.MAX_THREADS_CAP``).
MAX_THREADS_CAP = 128


@dataclass(frozen=True, slots=True)
class SynapseSettings:
    """What the backend needs to talk to the service. ``token`` never shows in a repr."""

    repo_endpoint: str
    auth_endpoint: str
    file_endpoint: str
    token: str | None = field(default=None, repr=False)
    #: Where the token came from, for messages ("SYNAPSE_AUTH_TOKEN", "[default] in ...").
    token_source: str = ""
    profile: str = "default"
    config_file: str = CONFIG_FILE
    #: ``[transfer] max_threads`` of the config file, None when not set.
    max_threads: int | None = None
    #: ``list_concurrency``: entity reads in flight within one listing page.
    list_concurrency: int = 8


def _config_path(extra: Mapping[str, str]) -> Path:
    return Path(extra.get("config_file") or CONFIG_FILE).expanduser()


def _read(path: Path) -> configparser.RawConfigParser:
    # synapseclient: RawConfigParser(), read() ignores a missing file.
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the Synapse config file {path}: {exc}") from None
    return parser


def _section(parser: configparser.RawConfigParser, name: str) -> dict[str, str]:
    try:
        return dict(parser.items(name))
    except configparser.NoSectionError:
        return {}


def _endpoint(value: str, name: str, source: str) -> str:
    value = value.strip().rstrip("/")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - validates the port
    except ValueError:  # a bad port, an unclosed [IPv6] host
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"Synapse {name} {value!r} (from {source}) is not an http(s) URL: expected "
            "e.g. https://repo-prod.prod.sagebase.org/repo/v1"
        )
    if parts.username or parts.password:
        raise ConfigError(f"Synapse {name} (from {source}) must not carry a user or password")
    return value


def read_max_threads(parser: configparser.RawConfigParser, path: Path) -> int | None:
    """``[transfer] max_threads`` (capped at 128 as synapseclient does), None if unset."""
    raw = _section(parser, "transfer").get("max_threads", "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(
            f"{path}: [transfer] max_threads = {raw!r} is not a whole number"
        ) from None
    return min(max(value, 1), MAX_THREADS_CAP)


def load_settings(options: BackendOptions, env: Mapping[str, str] | None = None) -> SynapseSettings:
    """Token, endpoints and threads for these options, the environment and the config file.

    A named profile missing from the file raises :class:`~synxfer.ConfigError`.
    A missing token is not an error here: the backend raises
    :class:`~synxfer.NoCredentials` when it first needs one.
    """
    env = os.environ if env is None else env
    extra = options.extra
    path = _config_path(extra)
    parser = _read(path)
    where = str(path)

    endpoints: dict[str, str] = {}
    from_file = _section(parser, "endpoints")
    for option, name in _ENDPOINT_OPTIONS.items():
        if extra.get(option):
            endpoints[name] = _endpoint(extra[option], name, f"the syn option {option}")
        elif from_file.get(name.lower()):
            endpoints[name] = _endpoint(from_file[name.lower()], name, f"[endpoints] in {where}")
        else:
            endpoints[name] = PRODUCTION_ENDPOINTS[name]

    profile = extra.get("profile") or options.profile or env.get("SYNAPSE_PROFILE") or "default"
    section = profile if profile == "default" else f"profile {profile}"
    values = _section(parser, section)
    if not values:
        if profile != "default":  # synapseclient: SynapseAuthenticationError
            raise ConfigError(
                f"Synapse profile {profile!r} does not exist in {where} (expected a "
                f"[{section}] section); unset SYNAPSE_PROFILE or add the section"
            )
        section = "authentication"
        values = _section(parser, section)
    token = (values.get("authtoken") or "").strip() or None
    source = f"[{section}] in {where}" if token else ""
    if token is None and (env.get("SYNAPSE_AUTH_TOKEN") or "").strip():
        token = env["SYNAPSE_AUTH_TOKEN"].strip()
        source = "SYNAPSE_AUTH_TOKEN"
    return SynapseSettings(
        repo_endpoint=endpoints["repoEndpoint"],
        auth_endpoint=endpoints["authEndpoint"],
        file_endpoint=endpoints["fileHandleEndpoint"],
        token=token,
        token_source=source,
        profile=profile,
        config_file=where,
        max_threads=read_max_threads(parser, path),
        list_concurrency=option_int(extra, "list_concurrency", 8, scheme="syn", low=1, high=64),
    )


def no_token(settings: SynapseSettings, url: str) -> NoCredentials:
    """The set-up error for a run with no token."""
    return NoCredentials(f"no Synapse access token found for {url}: {TOKEN_HINT}")
