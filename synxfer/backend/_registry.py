"""Schemes -> backend factories, discovered lazily through entry points.

Backends register in the ``synxfer.backends`` entry-point group::

    [project.entry-points."synxfer.backends"]
    myscheme = "my_package:MyBackend"

Nothing is imported until a scheme is first used. A scheme synxfer knows
about but whose plugin cannot be imported gives an install hint.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from .._exceptions import UnknownScheme
from ._base import Backend, BackendFactory, BackendOptions

__all__ = ["available_schemes", "open_backend", "register", "resolve"]

GROUP = "synxfer.backends"

#: Where each first-party scheme lives, to give a useful hint when missing.
_INSTALL_HINTS = {
    "s3": "pip install 'synxfer[s3]'",
    "scp": "pip install 'synxfer[scp]'",
    "gs": "pip install 'synxfer[gcs]'",
    "blocks": "pip install 'synxfer[blockstore]'",
    "file": "pip install synxfer",
}

_registered: dict[str, BackendFactory] = {}


def register(scheme: str, factory: BackendFactory) -> None:
    """Register a factory for ``scheme`` in this process (tests, embedding).

    Entry points are the normal route; this overrides them.
    """
    _registered[scheme.lower()] = factory


def available_schemes() -> list[str]:
    """Schemes with a registered factory or an entry point (not imported)."""
    names = set(_registered) | {ep.name for ep in entry_points(group=GROUP)}
    return sorted(names)


def resolve(scheme: str) -> BackendFactory:
    """The factory for ``scheme``; raises UnknownScheme with an install hint."""
    scheme = scheme.lower()
    if scheme in _registered:
        return _registered[scheme]
    eps = [ep for ep in entry_points(group=GROUP) if ep.name == scheme]
    hint = _INSTALL_HINTS.get(scheme)
    if not eps:
        known = ", ".join(available_schemes()) or "none"
        msg = f"no backend for scheme {scheme!r}:// (installed: {known})"
        if hint:
            msg += f"; install it with: {hint}"
        raise UnknownScheme(msg)
    try:
        factory: BackendFactory = eps[0].load()
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
