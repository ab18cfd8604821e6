"""synxfer's multi-site block store: ``blocks://NAME/key`` and ``synxfer-blockd``.

A reproduction, as a real backend, of a class project that ran block
servers in four datacenters, split files into blocks, placed replicas by
policy and read each block from the replica with the lowest RTT.

The model
---------

* A **cluster** is a set of named **sites**, one ``synxfer-blockd`` process
  each (:mod:`synxfer_blockstore.server`). A client sits at one of them, its
  **local** site. The cluster file (:mod:`synxfer_blockstore.cluster`) says
  which sites exist, where they listen, which one is local, and where the
  shared bearer token is.
* An object is cut into **blocks** of ``block_size`` (64 KiB to 8 MiB; the
  last block of each part may be shorter). A block's id is the SHA-256 of
  its bytes: sites verify every block they store against its id, and
  clients verify every whole block they read, so the id *is* the integrity
  check and equal blocks are stored once per site.
* A **placement policy** (:mod:`synxfer_blockstore.placement`) picks the
  sites of each block's replicas: ``random``, ``tworandom``, ``local``,
  ``localclosest``, ``localfarthest`` as published, or your own class.
* A **manifest** (object name -> size, ordered block ids, replica sites per
  block, metadata) is written to every site, so any site can serve a
  listing or a stat; the newest version wins everywhere (last writer wins;
  deletes are tombstones) and sites pull each other's change feed to catch
  up after an outage.
* Reads probe every site's **RTT** (:mod:`synxfer_blockstore.rtt`: mean of
  recent probes, first probe discarded, refreshed in the background) and
  fetch each block from the replica with the lowest expected time -- RTT
  alone (``read_choice = "rtt"``, the published rule) or RTT plus queued
  work (``"load"``, the default) -- failing over on errors and stalls and
  hedging slow requests.

URLs and options
----------------

``blocks://NAME/key``: ``NAME`` selects the cluster file (see
:func:`~synxfer_blockstore.cluster.find_cluster_file`: backend option
``cluster``, or ``$SYNXFER_BLOCKS_CLUSTER`` as a file, or as a directory
holding ``NAME.toml``/``NAME.json``) and is the namespace of the keys unless
the cluster file sets ``namespace``. Every option of
:class:`BlockStoreBackend` can be set in the cluster file and overridden by
``BackendOptions.extra``.

Mapping to the SDK: ``multipart=True`` with ``min_part_size = block_size``
(so parts cut at multiples of the block size give full blocks), no
``part_checksum`` (blocks are SHA-256 addressed and verified by the sites),
``ranged_reads=True``, ``server_side_copy=True`` (a copy is a new manifest
naming the same blocks). ETags are 64 hex digits (SHA-256 of the block
list), never mistaken for S3 MD5 ETags.

Not done (yet): re-replicating the blocks of a site that is lost for good,
and TLS (bind loopback, or put a TLS proxy in front).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._backend import BlockStoreBackend
    from .cluster import CLUSTER_ENV, Cluster, Secret, load_cluster
    from .placement import PlacementContext, Policy, get_policy, policy_names, register_policy
    from .rtt import SiteMonitor

__all__ = [
    "CLUSTER_ENV",
    "BlockStoreBackend",
    "Cluster",
    "PlacementContext",
    "Policy",
    "Secret",
    "SiteMonitor",
    "get_policy",
    "load_cluster",
    "policy_names",
    "register_policy",
]

#: Where each public name lives. Imported on first use, so that starting
#: ``synxfer-blockd`` (which needs none of the client) stays quick.
_HOMES = {
    "BlockStoreBackend": "._backend",
    "CLUSTER_ENV": ".cluster",
    "Cluster": ".cluster",
    "Secret": ".cluster",
    "load_cluster": ".cluster",
    "PlacementContext": ".placement",
    "Policy": ".placement",
    "get_policy": ".placement",
    "policy_names": ".placement",
    "register_policy": ".placement",
    "SiteMonitor": ".rtt",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)
