"""Testing tools for synxfer backends: the conformance kit and local test servers.

* :mod:`synxfer.testing.conformance` -- the tests every backend must pass
  (:class:`BackendFixtures`, :class:`BackendConformance` and the per-area
  classes); re-exported here.
* :mod:`synxfer.testing.plugin` -- the pytest plugin (``requires`` marker),
  loaded automatically through the ``pytest11`` entry point.
* :mod:`synxfer.testing.servers` -- moto S3 servers on 127.0.0.1, in-process
  or in a subprocess, and one that counts concurrent requests.

Names are imported lazily so that loading the pytest plugin (which imports
this package) stays cheap; the kit needs ``pytest`` and ``pytest-asyncio``
(``pip install 'synxfer[testing]'``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .conformance import (
        BackendConformance,
        BackendFixtures,
        CopyTests,
        DeleteTests,
        ErrorTests,
        ListTests,
        MetadataTests,
        MultipartTests,
        ReadWriteTests,
        make_checksum,
        requires,
    )

__all__ = [
    "BackendConformance",
    "BackendFixtures",
    "CopyTests",
    "DeleteTests",
    "ErrorTests",
    "ListTests",
    "MetadataTests",
    "MultipartTests",
    "ReadWriteTests",
    "make_checksum",
    "requires",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(".conformance", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
