"""The ``blocks://`` client's options: the cluster file's settings,
overridden by ``BackendOptions.extra``, read once into :class:`ClientSettings`.

The one module of this plugin that reads ``BackendOptions.extra``
(:func:`read_options`). Every option is described on
:class:`~synxfer_blockstore.BlockStoreBackend`; a value that cannot be read
raises :class:`~synxfer.ConfigError` naming the bucket or the option.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from synxfer import ConfigError
from synxfer.backend import BackendOptions, option_bool, option_float

from .cluster import Cluster, find_cluster_file, load_cluster
from .placement import Policy, get_policy
from .protocol import MAX_BLOCK_SIZE, MIN_BLOCK_SIZE, check_bucket, parse_size
from .rtt import ReadChoice

__all__ = ["ClientSettings", "client_settings", "read_options"]


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """What one ``blocks://`` backend was configured with."""

    namespace: str
    block_size: int
    policy: Policy
    read_choice: ReadChoice
    hedge: bool
    hedge_factor: float
    stall_timeout: float
    probe_interval: float
    rtt_window: int
    warmup_timeout: float
    verify: bool
    write_quorum: int
    read_exclude: frozenset[str]
    seed: str | None


def read_options(bucket: str, options: BackendOptions) -> tuple[Cluster, ClientSettings]:
    """The cluster of ``blocks://bucket`` (its file named by the ``cluster``
    option or ``$SYNXFER_BLOCKS_CLUSTER``) and the settings it and the
    options give."""
    cluster = load_cluster(find_cluster_file(bucket, options.extra))
    return cluster, client_settings(bucket, cluster, options.extra)


def client_settings(bucket: str, cluster: Cluster, extra: Mapping[str, str]) -> ClientSettings:
    """The settings of ``blocks://bucket`` in ``cluster``, with ``extra`` overriding."""
    settings: dict[str, object] = {**cluster.settings, **extra}
    try:
        namespace = check_bucket(str(extra.get("namespace") or cluster.namespace or bucket))
        block_size = parse_size(cast("str | int", settings.get("block_size", "1MiB")))
    except ValueError as exc:
        raise ConfigError(f"blocks://{bucket}: {exc}") from None
    if not MIN_BLOCK_SIZE <= block_size <= MAX_BLOCK_SIZE:
        raise ConfigError(
            f"blocks://{bucket}: block_size {block_size} is outside "
            f"{MIN_BLOCK_SIZE}..{MAX_BLOCK_SIZE} bytes"
        )
    try:
        policy = get_policy(str(settings.get("policy", "localclosest")))
    except KeyError as exc:
        raise ConfigError(f"blocks://{bucket}: {exc.args[0]}") from None
    choice = str(settings.get("read_choice", "load")).strip().lower()
    if choice not in ("rtt", "load"):
        raise ConfigError(f"blocks://{bucket}: read_choice must be 'rtt' or 'load'")
    n = len(cluster.sites)
    quorum = int(option_float(settings, "write_quorum", n // 2 + 1, scheme="blocks", low=1))
    if quorum > n:
        raise ConfigError(f"blocks://{bucket}: write_quorum {quorum} > {n} sites")
    excluded = str(settings.get("read_exclude", ""))
    seed = settings.get("seed")
    return ClientSettings(
        namespace=namespace,
        block_size=block_size,
        policy=policy,
        read_choice=cast(ReadChoice, choice),
        hedge=option_bool(settings, "hedge", True, scheme="blocks"),
        hedge_factor=option_float(settings, "hedge_factor", 2.0, scheme="blocks", low=1.0),
        stall_timeout=option_float(settings, "stall_timeout", 10.0, scheme="blocks", low=0.01),
        probe_interval=option_float(settings, "probe_interval", 2.0, scheme="blocks"),
        rtt_window=int(option_float(settings, "rtt_window", 5, scheme="blocks", low=1)),
        warmup_timeout=option_float(settings, "warmup_timeout", 3.0, scheme="blocks"),
        verify=option_bool(settings, "verify", True, scheme="blocks"),
        write_quorum=quorum,
        read_exclude=frozenset(s.strip() for s in excluded.split(",") if s.strip()),
        seed=None if seed is None else str(seed),
    )
