"""Testing tools for synxfer backends: the conformance kit and its pytest plugin.

* :mod:`synxfer.testing.conformance` -- the tests every backend must pass
  (:class:`BackendFixtures`, :class:`BackendConformance` and the per-area
  classes); re-exported here.
* :mod:`synxfer.testing.plugin` -- the pytest plugin (``requires`` marker),
  loaded automatically through the ``pytest11`` entry point.

The servers synxfer's own tests run against (moto, the GCS emulator, the
fault and delay proxies) are not part of the library: they live in
``benchmarks/synxfer_servers`` (the ``synxfer-bench`` distribution).

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
