"""Schemes -> backend factories, discovered lazily through entry points.

Backends register in the ``synxfer.backends`` entry-point group::

    [project.entry-points."synxfer.backends"]
    myscheme = "my_package:MyBackend"

Nothing is imported until a scheme is first used. A scheme synxfer knows
about but whose plugin cannot be imported gives an install hint.

The schemes of the backends shipped in synxfer's own distribution resolve
through :data:`FIRST_PARTY`, the same ``module:attribute`` values as its
entry points (a test keeps the two equal), without reading any
distribution's metadata: ``importlib.metadata`` and the scan of every
installed distribution were a large share of a small transfer's start-up
(docs/decisions/0014). A first-party scheme therefore cannot be taken over by
another distribution's entry point (it could before, in an unspecified
order); :func:`register` still overrides it in a process.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .._exceptions import UnknownScheme
from ._base import Backend, BackendFactory, BackendOptions

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["available_schemes", "open_backend", "register", "resolve"]

GROUP = "synxfer.backends"

#: Where each first-party scheme lives, to give a useful hint when missing.
_INSTALL_HINTS = {
    "s3": "pip install 'synxfer[s3]'",
    "scp": "pip install 'synxfer[scp]'",
    "gs": "pip install 'synxfer[gcs]'",
    "blocks": "pip install 'synxfer[blockstore]'",
    "syn": "pip install 'synxfer[synapse]'",
    "file": "pip install synxfer",
    "http": "pip install synxfer",
    "https": "pip install synxfer",
}

#: The backends synxfer's distribution ships: scheme -> entry-point value.
FIRST_PARTY = {
    "file": "synxfer_file:FileBackend",
    "s3": "synxfer_s3:S3Backend",
    "scp": "synxfer_scp:ScpBackend",
    "gs": "synxfer_gcs:GcsBackend",
    "blocks": "synxfer_blockstore:BlockStoreBackend",
    "syn": "synxfer_synapse:SynapseBackend",
    "http": "synxfer_http:HttpBackend",
    "https": "synxfer_http:HttpsBackend",
}

_registered: dict[str, BackendFactory] = {}


def _entry_points() -> list[EntryPoint]:
    """The group's entry points (imports importlib.metadata, reads every distribution)."""
    from importlib.metadata import entry_points

    return list(entry_points(group=GROUP))


def _load_first_party(value: str) -> BackendFactory:
    module, _, attr = value.partition(":")
    factory: BackendFactory = getattr(importlib.import_module(module), attr)
    return factory


def register(scheme: str, factory: BackendFactory) -> None:
    """Register a factory for ``scheme`` in this process (tests, embedding).

    Entry points are the normal route; this overrides them (and the first-party table).
    """
    _registered[scheme.lower()] = factory


def available_schemes() -> list[str]:
    """Schemes with a registered factory, a bundled backend or an entry point (none imported)."""
    names = set(_registered) | set(FIRST_PARTY) | {ep.name for ep in _entry_points()}
    return sorted(names)


def resolve(scheme: str) -> BackendFactory:
    """The factory for ``scheme``; raises UnknownScheme with an install hint."""
    scheme = scheme.lower()
    if scheme in _registered:
        return _registered[scheme]
    value = FIRST_PARTY.get(scheme)
    found = None if value else next((ep for ep in _entry_points() if ep.name == scheme), None)
    hint = _INSTALL_HINTS.get(scheme)
    if value is None and found is None:
        known = ", ".join(available_schemes()) or "none"
        msg = f"no backend for scheme {scheme!r}:// (installed: {known})"
        if hint:
            msg += f"; install it with: {hint}"
        raise UnknownScheme(msg)
    try:
        factory: BackendFactory
        if value is not None:
            factory = _load_first_party(value)
        else:
            assert found is not None
            factory = found.load()
    except (ImportError, AttributeError) as exc:
        msg = f"the backend for {scheme}:// could not be imported ({exc})"
        if hint:
            msg += f"; install it with: {hint}"
        raise UnknownScheme(msg) from exc
    _registered[scheme] = factory
    return factory


def open_backend(scheme: str, bucket: str, options: BackendOptions) -> Backend:
    """Construct (not yet open) the backend for ``scheme://bucket``."""
    return resolve(scheme)(bucket, options)
