"""Cluster files: which sites exist, where they listen, and which one is ours.

A cluster file is TOML (``.toml``) or JSON (anything else)::

    # cluster.toml
    local = "Seoul"                  # the site this client is at
    namespace = "photos"             # optional; default: the bucket of the URL
    token_file = "token"             # or token_env = "MY_VAR" (default $SYNXFER_BLOCKS_TOKEN)
    block_size = "1MiB"              # optional, 64KiB..8MiB (default 1MiB)
    policy = "localclosest"          # optional: random, tworandom, local, localclosest, ...
    read_choice = "rtt"              # optional: rtt (lowest RTT) or load (RTT + queued work)
    hedge = true                     # optional: hedged reads for stragglers

    [sites]
    Seoul = "http://127.0.0.1:7001"
    Dublin = "http://127.0.0.1:7002"

``blocks://NAME/key`` finds its cluster file, in this order: the backend
option ``cluster`` (a path); ``$SYNXFER_BLOCKS_CLUSTER`` naming a file; or
``$SYNXFER_BLOCKS_CLUSTER`` naming a directory, in which ``NAME.toml`` or
``NAME.json`` is the cluster file (so one directory can describe a client at
several sites, or several policies, each under its own name). A relative
``token_file`` is relative to the cluster file. The token is held in a
:class:`Secret`, which never shows itself in ``repr`` or ``str``.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from synxfer import ConfigError

from .protocol import BUCKET_NAME, SITE_NAME, check_bucket

__all__ = [
    "CLUSTER_ENV",
    "DEFAULT_TOKEN_ENV",
    "Cluster",
    "Secret",
    "find_cluster_file",
    "load_cluster",
]

#: Environment variable naming the cluster file (or a directory of them).
CLUSTER_ENV = "SYNXFER_BLOCKS_CLUSTER"
#: Environment variable holding the token when the cluster file names none.
DEFAULT_TOKEN_ENV = "SYNXFER_BLOCKS_TOKEN"

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Secret:
    """A string that is never shown: ``repr`` and ``str`` print ``'***'``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)


@dataclass(frozen=True)
class Cluster:
    """A parsed cluster file. ``settings`` holds the optional keys as given."""

    path: Path
    sites: Mapping[str, str]
    local: str
    token: Secret = field(repr=False)
    namespace: str | None = None
    settings: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def url(self, site: str) -> str:
        """Base URL of ``site``, without a trailing slash."""
        return self.sites[site].rstrip("/")


def find_cluster_file(bucket: str, extra: Mapping[str, str]) -> Path:
    """The cluster file for ``blocks://bucket/...`` (see the module docstring)."""
    given = extra.get("cluster")
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise ConfigError(f"blocks:// cluster file {path} does not exist")
        return path
    env = os.environ.get(CLUSTER_ENV, "")
    if not env:
        raise ConfigError(
            f"blocks://{bucket}: no cluster file; set ${CLUSTER_ENV} to a cluster file "
            "(or a directory of NAME.toml / NAME.json files), or pass the backend option 'cluster'"
        )
    path = Path(env).expanduser()
    if path.is_dir():
        for suffix in (".toml", ".json"):
            candidate = path / f"{bucket}{suffix}"
            if candidate.is_file():
                return candidate
        raise ConfigError(
            f"blocks://{bucket}: no {bucket}.toml or {bucket}.json in ${CLUSTER_ENV} ({path})"
        )
    if not path.is_file():
        raise ConfigError(f"${CLUSTER_ENV} names {path}, which does not exist")
    return path


def load_cluster(path: Path) -> Cluster:
    """Parse and check a cluster file; ConfigError says what is wrong."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read cluster file {path}: {exc.strerror or exc}") from None
    try:
        doc: Any = tomllib.loads(raw.decode()) if path.suffix == ".toml" else json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cluster file {path} is not valid: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"cluster file {path} must hold a table/object")
    sites = doc.get("sites")
    if not isinstance(sites, dict) or not sites:
        raise ConfigError(f"cluster file {path}: 'sites' must map site names to URLs")
    for name, url in sites.items():
        if not SITE_NAME.match(name):
            raise ConfigError(f"cluster file {path}: invalid site name {name!r}")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"cluster file {path}: site {name} needs an http(s):// URL")
    local = doc.get("local")
    if local not in sites:
        raise ConfigError(f"cluster file {path}: 'local' must name one of the sites")
    namespace = doc.get("namespace")
    if namespace is not None:
        try:
            check_bucket(namespace)
        except ValueError as exc:
            raise ConfigError(f"cluster file {path}: namespace: {exc}") from None
    token = _token(path, doc)
    settings = {k: v for k, v in doc.items() if k not in {"sites", "local", "namespace"}}
    settings.pop("token", None)
    return Cluster(
        path=path,
        sites=dict(sites),
        local=str(local),
        token=token,
        namespace=namespace,
        settings=settings,
    )


def _token(path: Path, doc: Mapping[str, Any]) -> Secret:
    if "token" in doc:
        raise ConfigError(
            f"cluster file {path}: do not write the token into it; use token_file or token_env"
        )
    token_file = doc.get("token_file")
    if token_file is not None:
        tpath = Path(str(token_file)).expanduser()
        if not tpath.is_absolute():
            tpath = path.parent / tpath
        try:
            value = tpath.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                f"cluster file {path}: cannot read token_file {tpath}: {exc.strerror or exc}"
            ) from None
    else:
        var = str(doc.get("token_env", DEFAULT_TOKEN_ENV))
        value = os.environ.get(var, "").strip()
        if not value:
            raise ConfigError(f"cluster file {path}: no token (set ${var} or give token_file)")
    if not value:
        raise ConfigError(f"cluster file {path}: the token is empty")
    return Secret(value)


def valid_bucket(bucket: str) -> bool:
    """Whether ``bucket`` can be a namespace."""
    return bool(BUCKET_NAME.match(bucket))
