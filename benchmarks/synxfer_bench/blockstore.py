"""``synxfer-bench blockstore``: the multi-site block-store experiment, reproduced on loopback.

A published class project ran block servers in Seoul, Dublin, São Paulo and
Mumbai, placed each block's replicas by policy and measured how long a
client took to download files under each policy. This module rebuilds that
experiment with the ``blocks://`` backend:

* four ``synxfer-blockd`` processes on 127.0.0.1 (temporary data dirs);
* one userspace delay proxy per (client site, server site) pair
  (:class:`synxfer_servers.delayproxy.EmulatedNetwork`), one-way delay =
  RTT/2 with the published RTTs (São Paulo <-> Mumbai was not published:
  305 ms is *assumed*), plus one round trip per new TCP connection;
* the engine (:class:`synxfer.Client`) uploads 10 files of 1 MiB at the
  upload site and downloads them at Seoul, for each block size (64 KiB,
  1 MiB) and placement policy, 3 runs each (each run uploads afresh, so
  random placements are redrawn); reads use the published rule (lowest
  RTT), without hedging.

Experiment 1 uploads and downloads at Seoul; experiment 2 uploads at Dublin
and downloads at Seoul; experiment 3, the one the project proposed and did
not run, uploads at São Paulo and downloads at Seoul (``localclosest``
against ``tworandom``: what the model predicts is :data:`PREDICTED`).

The *further experiment* floods the Seoul site with N concurrent readers
(sites serve at most ``--serve-rate`` bytes/s, shared by all readers, like a
NIC or disk) while a client at Seoul downloads files whose blocks live at
Seoul and Mumbai (``localclosest``), reading by lowest RTT (always Seoul),
from Mumbai only, or load-aware (RTT + queued work). It shows at which load
the farther replica wins and whether the load-aware choice finds it.

Outputs in ``--out``: ``results.json``, ``results.md`` (tables, measured
orderings), ``exp1.png``, ``exp2.png``, ``further.png``.

Run it with ``python -m synxfer_bench.blockstore --out DIR`` (or, once
wired, ``synxfer-bench blockstore --out DIR``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as _dt
import hashlib
import itertools
import json
import math
import os
import platform
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from synxfer import MiB, parse_size

from .scenarios import format_size

__all__ = ["PUBLISHED_RTT", "SITES", "main"]

#: Site names (ASCII) and how the report spells them.
SITES = ("Seoul", "Dublin", "SaoPaulo", "Mumbai")
DISPLAY = {"Seoul": "Seoul", "Dublin": "Dublin", "SaoPaulo": "São Paulo", "Mumbai": "Mumbai"}
POLICIES = ("random", "tworandom", "local", "localclosest", "localfarthest")

#: Round-trip times in seconds. São Paulo <-> Mumbai was not published: assumed.
PUBLISHED_RTT: dict[frozenset[str], float] = {
    frozenset(("Seoul", "Dublin")): 0.267,
    frozenset(("Seoul", "SaoPaulo")): 0.298,
    frozenset(("Seoul", "Mumbai")): 0.163,
    frozenset(("Dublin", "SaoPaulo")): 0.184,
    frozenset(("Dublin", "Mumbai")): 0.122,
    frozenset(("SaoPaulo", "Mumbai")): 0.305,
}
ASSUMED = frozenset(("SaoPaulo", "Mumbai"))

#: The published findings, as orderings (fastest first; a tuple is a tie).
PUBLISHED_ORDER: dict[int, list[str | tuple[str, ...]]] = {
    1: [("local", "localclosest", "localfarthest"), "tworandom", "random"],
    2: ["localfarthest", "localclosest", "tworandom", ("local", "random")],
}

#: Where each experiment uploads (every one downloads at Seoul), and its title.
EXPERIMENTS: dict[int, tuple[str, str]] = {
    1: ("Seoul", "Experiment 1: upload at Seoul, download at Seoul"),
    2: ("Dublin", "Experiment 2: upload at Dublin, download at Seoul"),
    3: ("SaoPaulo", "Experiment 3: upload at São Paulo, download at Seoul"),
}

#: Experiment 3 was proposed, not run: no published ordering. What the RTTs
#: predict (written before it was run here), per block-request regime.
PREDICTED: dict[int, str] = {
    3: (
        "localclosest puts every block at São Paulo and Dublin (São Paulo's closest, "
        "184 ms), so Seoul reads them all from Dublin (267 ms); tworandom does not depend "
        "on the upload site (as in experiments 1-2: the best replica is 0 ms for half the "
        "pairs, 163 ms for a third, 267 ms for a sixth, 99 ms on average). Many blocks in "
        "flight (64 KiB): tworandom < localclosest, about 2.7x on the block latency "
        "(99 vs 267 ms); few large blocks (1 MiB, the slowest block counts): tworandom ≈ "
        "localclosest (84 % of 10-block runs hold a Dublin + São Paulo pair: 267 ms)"
    ),
}


# -- small helpers ---------------------------------------------------------------


#: The further experiment's placement policy (see ``_fixed_layout_policy``).
FURTHER_POLICY = "seoul+mumbai"


def _fixed_layout_policy() -> None:
    """Register the further experiment's fixed layout: a copy at Seoul and at Mumbai.

    That is where ``localclosest`` puts them from Seoul, but the placement is
    set-up there, not what is measured, so it must not depend on RTT probes
    (at scaled-down RTTs the gap between Mumbai and Dublin is a few ms).
    """
    from synxfer_blockstore.placement import PlacementContext, Policy, register_policy

    @register_policy
    class SeoulAndMumbai(Policy):
        name = FURTHER_POLICY
        copies = 2

        def choose(self, ctx: PlacementContext) -> list[str]:
            fixed = ["Seoul", "Mumbai"]
            return fixed + [s for s in ctx.sites if s not in fixed]


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def _fmt(values: Sequence[float]) -> str:
    mean, sd = _mean_sd(values)
    return f"{mean:.3f} ± {sd:.3f}" if values else "n/a"


def ordering(means: dict[str, tuple[float, float]], tie: float = 0.10) -> str:
    """Policies from fastest to slowest, ``≈`` between neighbours that are tied.

    Neighbours are tied when their means differ by less than ``tie`` (10 %)
    of the faster one, or by less than the larger of their standard
    deviations.
    """
    ranked = sorted(means, key=lambda p: means[p][0])
    out = ranked[:1]
    for prev, cur in itertools.pairwise(ranked):
        (m0, s0), (m1, s1) = means[prev], means[cur]
        tied = (m1 - m0) < max(tie * m0, s0, s1)
        out.append(("≈ " if tied else "< ") + cur)
    return " ".join(out)


def _published(exp: int) -> str:
    parts = []
    for item in PUBLISHED_ORDER[exp]:
        parts.append(" ≈ ".join(item) if isinstance(item, tuple) else item)
    return " < ".join(parts)


# -- results ----------------------------------------------------------------------


@dataclass
class Cell:
    """All runs of one (experiment, block size, policy)."""

    experiment: int
    block_size: int
    policy: str
    download_s: list[float] = field(default_factory=list)
    upload_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    #: Fraction of blocks with a replica at each site, over all runs.
    placement: dict[str, float] = field(default_factory=dict)
    #: Fraction of downloaded bytes read from each site, over all runs.
    read_from: dict[str, float] = field(default_factory=dict)


@dataclass
class FurtherPoint:
    """Downloads at one flood level, per read mode."""

    flood: int
    times: dict[str, list[float]] = field(default_factory=dict)
    read_from: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass
class Results:
    """Everything one run of the benchmark measured."""

    command: str
    started: str
    params: dict[str, Any]
    machine: dict[str, Any]
    cells: list[Cell] = field(default_factory=list)
    further: list[FurtherPoint] = field(default_factory=list)
    elapsed_s: float = 0.0

    def cell(self, exp: int, block_size: int, policy: str) -> Cell:
        for c in self.cells:
            if (c.experiment, c.block_size, c.policy) == (exp, block_size, policy):
                return c
        c = Cell(exp, block_size, policy)
        self.cells.append(c)
        return c


# -- the cluster --------------------------------------------------------------------


@dataclass
class Options:
    """Parsed command-line options."""

    out: Path
    runs: int
    files: int
    file_size: int
    block_sizes: list[int]
    policies: list[str]
    threads: int
    bandwidth: float | None
    rtt_scale: float
    experiments: list[int]
    further: bool
    flood_levels: list[int]
    serve_rate: int
    further_block: int
    seed: int
    keep_work: bool


@contextlib.contextmanager
def _blockd_sites(
    root: Path, token: str, extra_args: Sequence[str] = ()
) -> Iterator[dict[str, Any]]:
    """Four blockd processes (one per site) under ``root``; yields name -> process."""
    from synxfer_servers.blockd import BlockdProcess, start_all

    procs = {
        name: BlockdProcess(
            name,
            root / name,
            token,
            extra_args=["--no-fsync", *extra_args],
            log_file=root / f"{name}.log",
        )
        for name in SITES
    }
    root.mkdir(parents=True, exist_ok=True)
    try:
        start_all(list(procs.values()))
        yield procs
    finally:
        for proc in procs.values():
            proc.stop()


@contextlib.asynccontextmanager
async def _network(
    procs: dict[str, Any], opts: Options, clients: Sequence[str]
) -> AsyncIterator[Any]:
    """The emulated WAN, in a child process so relaying does not load the client's loop."""
    from synxfer_servers.delayproxy import NetworkProcess

    rtt = {pair: value * opts.rtt_scale for pair, value in PUBLISHED_RTT.items()}
    servers = {name: proc.host_port for name, proc in procs.items()}
    net = NetworkProcess(
        servers, rtt, clients=clients, rate=opts.bandwidth, handshake=True, local_direct=True
    )
    await asyncio.to_thread(net.start)
    try:
        yield net
    finally:
        await asyncio.to_thread(net.stop)


def _write_clusters(
    directory: Path,
    net: Any,
    token_file: Path,
    clients: Sequence[str],
    policies: Sequence[str],
    block_sizes: Sequence[int],
    seed: int,
    namespace: str,
    settings: dict[str, object],
) -> None:
    """One cluster file per (client site, policy, block size): ``SITE-POLICY-SIZE.json``."""
    from synxfer_servers.blockd import write_cluster_file

    for site in clients:
        for policy in policies:
            for bs in block_sizes:
                write_cluster_file(
                    directory / f"{site}-{policy}-{format_size(bs)}.json",
                    net.site_urls(site),
                    site,
                    token_file=token_file,
                    namespace=namespace,
                    policy=policy,
                    block_size=format_size(bs),
                    seed=f"{seed}-{site}-{policy}-{bs}",
                    settings=settings,
                )


def _bucket(site: str, policy: str, block_size: int) -> str:
    return f"{site}-{policy}-{format_size(block_size)}"


def _make_data(root: Path, files: int, size: int, seed: int) -> dict[str, str]:
    """``files`` seeded random files under ``root``; name -> SHA-256."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    digests = {}
    for i in range(files):
        data = rng.randbytes(size)
        name = f"file{i:02d}.bin"
        (root / name).write_bytes(data)
        digests[name] = hashlib.sha256(data).hexdigest()
    return digests


def _check(dest: Path, digests: dict[str, str]) -> None:
    for name, digest in digests.items():
        got = hashlib.sha256((dest / name).read_bytes()).hexdigest()
        if got != digest:
            raise RuntimeError(f"downloaded {name} differs from the uploaded file")


def _blocks_backend(layered: Any) -> Any:
    """The BlockStoreBackend under a client's layers."""
    from synxfer_blockstore import BlockStoreBackend

    backend = layered
    for _ in range(10):
        if isinstance(backend, BlockStoreBackend):
            return backend
        backend = getattr(backend, "inner", None)
    raise RuntimeError("no blocks:// backend under the client's layers")


def _fractions(counts: dict[str, float]) -> dict[str, float]:
    total = sum(counts.values())
    return {s: round(counts.get(s, 0) / total, 4) if total else 0.0 for s in SITES}


def _log(message: str) -> None:
    print(f"[blockstore-bench] {message}", file=sys.stderr, flush=True)


# -- experiments 1 and 2 ---------------------------------------------------------------


async def _policy_experiments(opts: Options, work: Path, results: Results) -> None:
    token = secrets.token_hex(24)
    token_file = work / "token"
    token_file.write_text(token)
    os.chmod(token_file, 0o600)
    data_dir = work / "data"
    digests = _make_data(data_dir, opts.files, opts.file_size, opts.seed)
    clusters = work / "clusters"
    clients = sorted({"Seoul", *(EXPERIMENTS[e][0] for e in opts.experiments)}, key=SITES.index)
    with _blockd_sites(work / "sites", token) as procs:
        async with _network(procs, opts, clients) as net:
            _write_clusters(
                clusters,
                net,
                token_file,
                clients,
                opts.policies,
                opts.block_sizes,
                opts.seed,
                "bench",
                {"read_choice": "rtt", "hedge": False, "probe_interval": 5},
            )
            os.environ["SYNXFER_BLOCKS_CLUSTER"] = str(clusters)
            for exp, (up_site, _title) in EXPERIMENTS.items():
                if exp not in opts.experiments:
                    continue
                for bs in opts.block_sizes:
                    for policy in opts.policies:
                        await _one_cell(
                            opts, results, exp, up_site, bs, policy, data_dir, digests, work
                        )


async def _one_cell(
    opts: Options,
    results: Results,
    exp: int,
    up_site: str,
    bs: int,
    policy: str,
    data_dir: Path,
    digests: dict[str, str],
    work: Path,
) -> None:
    """Every run of one (experiment, block size, policy): upload, then a timed download.

    Each download uses a fresh client, opened (RTTs probed) before the
    clock starts, so every run pays the same connection set-up, as a new
    program run would.
    """
    import synxfer

    cell = results.cell(exp, bs, policy)
    placement: dict[str, float] = {}
    blocks_total = 0
    read_from: dict[str, float] = {}
    up_bucket, down_bucket = _bucket(up_site, policy, bs), _bucket("Seoul", policy, bs)
    # Uploads are not what is measured: give them more requests in flight.
    up_config = synxfer.TransferConfig(max_threads=2 * opts.threads)
    down_config = synxfer.TransferConfig(max_threads=opts.threads)
    async with synxfer.Client(up_config) as up:
        up_backend = _blocks_backend((await up.backend(f"blocks://{up_bucket}/x"))[0])
        for run in range(opts.runs):
            prefix = f"e{exp}/{policy}/{format_size(bs)}/r{run}/"
            t0 = time.perf_counter()
            res = await up.sync_to(data_dir, f"blocks://{up_bucket}/{prefix}")
            upload = time.perf_counter() - t0
            if not res.ok or res.files_transferred != opts.files:
                raise RuntimeError(f"upload failed: {res.to_dict()}")
            for name in digests:
                for sites in await up_backend.locate(prefix + name):
                    blocks_total += 1
                    for site in sites:
                        placement[site] = placement.get(site, 0) + 1
            dest = work / "down" / prefix
            async with synxfer.Client(down_config) as down:
                layered, _ = await down.backend(f"blocks://{down_bucket}/x")
                down_backend = _blocks_backend(layered)
                cpu0 = time.process_time()
                t0 = time.perf_counter()
                res = await down.sync_from(f"blocks://{down_bucket}/{prefix}", dest)
                elapsed = time.perf_counter() - t0
                cpu = time.process_time() - cpu0
                for site, n in down_backend.read_bytes.items():
                    read_from[site] = read_from.get(site, 0) + n
            if not res.ok or res.files_transferred != opts.files:
                raise RuntimeError(f"download failed: {res.to_dict()}")
            _check(dest, digests)
            shutil.rmtree(dest, ignore_errors=True)
            cell.download_s.append(round(elapsed, 4))
            cell.upload_s.append(round(upload, 4))
            cell.cpu_s.append(round(cpu, 4))
            _log(
                f"exp{exp} {format_size(bs):>6} {policy:<13} run {run + 1}: "
                f"download {elapsed:.3f}s (upload {upload:.3f}s)"
            )
    cell.placement = {s: round(placement.get(s, 0) / blocks_total, 4) for s in SITES}
    cell.read_from = _fractions(read_from)


# -- the further experiment --------------------------------------------------------------


async def _flood(url: str, token: str, block: str, workers: int, stop: asyncio.Event) -> int:
    """``workers`` readers fetching ``block`` from ``url`` in a loop until ``stop``."""
    import aiohttp

    fetched = 0
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as session:

        async def reader() -> None:
            nonlocal fetched
            while not stop.is_set():
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with session.get(f"{url}/v1/blocks/{block}") as resp:
                        await resp.read()
                        fetched += 1

        tasks = [asyncio.create_task(reader()) for _ in range(workers)]
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return fetched


async def _further_experiment(opts: Options, work: Path, results: Results) -> None:
    import aiohttp

    import synxfer

    token = secrets.token_hex(24)
    token_file = work / "token-further"
    token_file.write_text(token)
    os.chmod(token_file, 0o600)
    data_dir = work / "data-further"
    digests = _make_data(data_dir, opts.files, opts.file_size, opts.seed + 1)
    clusters = work / "clusters-further"
    rate = str(opts.serve_rate)
    modes: dict[str, dict[str, object]] = {
        "rtt": {"read_choice": "rtt"},
        "remote": {"read_choice": "rtt"},
        "load": {"read_choice": "load"},
    }
    config = synxfer.TransferConfig(max_threads=opts.threads)
    with _blockd_sites(work / "sites-further", token, ["--serve-rate", rate]) as procs:
        async with _network(procs, opts, ["Seoul"]) as net:
            from synxfer_servers.blockd import write_cluster_file

            _fixed_layout_policy()
            for mode, settings in modes.items():
                write_cluster_file(
                    clusters / f"further-{mode}.json",
                    net.site_urls("Seoul"),
                    "Seoul",
                    token_file=token_file,
                    namespace="further",
                    policy=FURTHER_POLICY,
                    block_size=format_size(opts.further_block),
                    hedge=False,
                    probe_interval=0.25,
                    read_exclude="Seoul" if mode == "remote" else None,
                    settings=settings,
                )
            os.environ["SYNXFER_BLOCKS_CLUSTER"] = str(clusters)
            # The flood reads a block stored at Seoul, straight from the site (local users).
            flood_block = os.urandom(opts.further_block)
            flood_id = hashlib.sha256(flood_block).hexdigest()
            seoul = procs["Seoul"].url
            async with (
                aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session,
                session.put(f"{seoul}/v1/blocks/{flood_id}", data=flood_block) as r,
            ):
                if r.status not in (200, 201):
                    raise RuntimeError(f"could not store the flood block: HTTP {r.status}")
            async with synxfer.Client(config) as up:
                upload = await up.sync_to(data_dir, "blocks://further-rtt/files/")
                if not upload.ok:
                    raise RuntimeError(f"upload failed: {upload.to_dict()}")
                layered, _ = await up.backend("blocks://further-rtt/x")
                for name in digests:
                    sites = await _blocks_backend(layered).locate("files/" + name)
                    if any(set(s) != {"Seoul", "Mumbai"} for s in sites):
                        raise RuntimeError(f"unexpected placement {sites}")
            for level in opts.flood_levels:
                point = FurtherPoint(level)
                stop = asyncio.Event()
                flood = asyncio.create_task(_flood(seoul, token, flood_id, level, stop))
                await asyncio.sleep(1.0 if level else 0.1)  # let the queue build up
                try:
                    for run in range(opts.runs):
                        for mode in modes:
                            t, where = await _timed_download(
                                config, mode, run, level, work, digests
                            )
                            point.times.setdefault(mode, []).append(round(t, 4))
                            acc = point.read_from.setdefault(mode, {})
                            for site, n in where.items():
                                acc[site] = acc.get(site, 0) + n
                            _log(f"further flood={level:>2} {mode:<6} run {run + 1}: {t:.3f}s")
                finally:
                    stop.set()
                    await flood
                point.read_from = {m: _fractions(c) for m, c in point.read_from.items()}
                results.further.append(point)


async def _timed_download(
    config: Any,
    mode: str,
    run: int,
    level: int,
    work: Path,
    digests: dict[str, str],
) -> tuple[float, dict[str, float]]:
    """One timed download by a fresh client (its RTT and load probes happen before the clock)."""
    import synxfer

    dest = work / "down-further" / f"{mode}-{level}-{run}"
    async with synxfer.Client(config) as client:
        layered, _ = await client.backend(f"blocks://further-{mode}/x")
        backend = _blocks_backend(layered)
        t0 = time.perf_counter()
        res = await client.sync_from(f"blocks://further-{mode}/files/", dest)
        elapsed = time.perf_counter() - t0
        where = dict(backend.read_bytes)
    if not res.ok or res.files_transferred != len(digests):
        raise RuntimeError(f"download failed: {res.to_dict()}")
    _check(dest, digests)
    shutil.rmtree(dest, ignore_errors=True)
    return elapsed, where


# -- report -----------------------------------------------------------------------------


def _markdown(results: Results, opts: Options) -> str:
    lines = [
        "# Block-store placement experiment (generated)",
        "",
        f"Command: `{results.command}`  ",
        f"Started {results.started}; took {results.elapsed_s:.0f} s.  ",
        f"Machine: {results.machine['cpu_count']} CPUs, Python {results.machine['python']}, "
        f"{results.machine['platform']}.",
        "",
        "## Set-up",
        "",
        f"- {opts.files} files × {format_size(opts.file_size)}, block sizes "
        f"{', '.join(format_size(b) for b in opts.block_sizes)}, {opts.runs} runs per cell "
        "(each run uploads afresh, then downloads at Seoul through the engine).",
        f"- Client: `synxfer.Client` with max_threads={opts.threads} (block requests in flight); "
        "reads pick the replica with the lowest mean RTT (the published rule), no hedging.",
        "- Emulated WAN: a userspace delay proxy per (client site, server site) link, one-way "
        "delay = RTT/2, plus one round trip per new TCP connection (a client reaches its own "
        "site directly); "
        + (
            f"each link direction capped at {opts.bandwidth / MiB:.1f} MiB/s."
            if opts.bandwidth
            else "no bandwidth cap."
        ),
        "",
        "| RTT (ms) | " + " | ".join(DISPLAY[s] for s in SITES) + " |",
        "| --- | " + " | ".join("---:" for _ in SITES) + " |",
    ]
    for a in SITES:
        row = []
        for b in SITES:
            if a == b:
                row.append("—")
            else:
                pair = frozenset((a, b))
                ms = PUBLISHED_RTT[pair] * 1000 * opts.rtt_scale
                row.append(f"{ms:.0f}" + (" (assumed)" if pair == ASSUMED else ""))
        lines.append(f"| {DISPLAY[a]} | " + " | ".join(row) + " |")
    for exp, (_site, title) in EXPERIMENTS.items():
        cells = [c for c in results.cells if c.experiment == exp]
        if not cells:
            continue
        lines += ["", f"## {title}", ""]
        header = "| policy | " + " | ".join(
            f"download {format_size(b)} (s)" for b in opts.block_sizes
        )
        header += " | upload " + " | upload ".join(
            f"{format_size(b)} (s)" for b in opts.block_sizes
        )
        header += " | blocks with a Seoul replica | bytes read from |"
        lines += [header, "|" + " --- |" * (2 + 2 * len(opts.block_sizes) + 1)]
        for policy in opts.policies:
            row = [policy]
            by_bs = {c.block_size: c for c in cells if c.policy == policy}
            row += [_fmt(by_bs[b].download_s) if b in by_bs else "n/a" for b in opts.block_sizes]
            row += [_fmt(by_bs[b].upload_s) if b in by_bs else "n/a" for b in opts.block_sizes]
            first = by_bs.get(opts.block_sizes[0])
            seoul = statistics.fmean(c.placement.get("Seoul", 0) for c in by_bs.values())
            reads: dict[str, float] = {}
            for c in by_bs.values():
                for s, f in c.read_from.items():
                    reads[s] = reads.get(s, 0) + f / len(by_bs)
            row.append(f"{seoul:.0%}" if first else "n/a")
            row.append(", ".join(f"{DISPLAY[s]} {f:.0%}" for s, f in reads.items() if f >= 0.005))
            lines.append("| " + " | ".join(row) + " |")
        lines += ["", "Measured ordering (fastest first; ≈ = within 10 % or one sd):", ""]
        for bs in opts.block_sizes:
            means = {
                c.policy: _mean_sd(c.download_s)
                for c in cells
                if c.block_size == bs and c.download_s
            }
            lines.append(f"- {format_size(bs)} blocks: {ordering(means)}")
        if exp in PUBLISHED_ORDER:
            lines.append(f"- published: {_published(exp)}")
        else:
            lines.append(f"- not run by the project; predicted from the RTTs: {PREDICTED[exp]}")
    if results.further:
        modes = list(results.further[0].times)
        lines += [
            "",
            "## Further experiment: Seoul flooded, replicas at Seoul and Mumbai",
            "",
            f"Sites serve at most {opts.serve_rate / MiB:.0f} MiB/s each (shared by all "
            f"readers); {opts.files} files × {format_size(opts.file_size)} in "
            f"{format_size(opts.further_block)} blocks placed by `localclosest` (Seoul + Mumbai); "
            "N flood readers fetch blocks from Seoul in a loop.",
            "",
            "| flood readers | "
            + " | ".join(f"{m} (s)" for m in modes)
            + " | load vs the better fixed choice | load read from |",
            "|" + " --- |" * (len(modes) + 3),
        ]
        for point in results.further:
            where = point.read_from.get("load", {})
            lines.append(
                f"| {point.flood} | "
                + " | ".join(_fmt(point.times[m]) for m in modes)
                + f" | {_versus_best(point)} | "
                + ", ".join(f"{DISPLAY[s]} {f:.0%}" for s, f in where.items() if f >= 0.005)
                + " |"
            )
        crossover = further_crossover(results)
        lines += [
            "",
            "- `rtt`: lowest RTT (the published rule: always Seoul); `remote`: Mumbai only; "
            "`load`: lowest RTT + queued work (ours).",
        ]
        if crossover is None:
            lines.append("- Reading the farther replica never won at these flood levels.")
        else:
            before = [p.flood for p in results.further if p.flood < crossover]
            lines.append(
                f"- Reading only the farther replica (Mumbai) beats reading only the nearest "
                f"(Seoul) from {crossover} flood readers on"
                + (f" (not at {before[-1]})." if before else ".")
            )
    return "\n".join(lines) + "\n"


def _versus_best(point: FurtherPoint) -> str:
    """How the load-aware mean compares with the better of the two fixed choices."""
    fixed = [statistics.fmean(point.times[m]) for m in ("rtt", "remote") if point.times.get(m)]
    if not fixed or not point.times.get("load"):
        return "n/a"
    best = min(fixed)
    return f"{(statistics.fmean(point.times['load']) - best) / best:+.0%}"


def further_crossover(results: Results) -> int | None:
    """The smallest flood level at which reading Mumbai only beats reading Seoul only."""
    for point in results.further:
        rtt, remote = point.times.get("rtt"), point.times.get("remote")
        if rtt and remote and statistics.fmean(remote) < statistics.fmean(rtt):
            return point.flood
    return None


def _charts(results: Results, opts: Options, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for exp, (_site, title) in EXPERIMENTS.items():
        cells = [c for c in results.cells if c.experiment == exp]
        if not cells:
            continue
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
        width = 0.8 / len(opts.block_sizes)
        for i, bs in enumerate(opts.block_sizes):
            means, sds = [], []
            for policy in opts.policies:
                cell = next((c for c in cells if c.policy == policy and c.block_size == bs), None)
                mean, sd = _mean_sd(cell.download_s if cell else [])
                means.append(mean)
                sds.append(sd)
            xs = [j + (i - (len(opts.block_sizes) - 1) / 2) * width for j in range(len(means))]
            bars = ax.bar(xs, means, width, yerr=sds, capsize=4, label=f"{format_size(bs)} blocks")
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
        ax.set_xticks(range(len(opts.policies)), opts.policies)
        ax.set_ylabel("download time of all files (s)")
        ax.set_title(
            f"{title}\n{opts.files} × {format_size(opts.file_size)}, mean ± sd of {opts.runs} runs",
            fontsize=10,
        )
        ax.legend()
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        path = out / f"exp{exp}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    if results.further:
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
        levels = [p.flood for p in results.further]
        labels = {
            "rtt": "lowest RTT (published rule: Seoul)",
            "remote": "farther replica only (Mumbai)",
            "load": "load-aware (RTT + queued work)",
        }
        for mode in results.further[0].times:
            stats = [_mean_sd(p.times[mode]) for p in results.further]
            ax.errorbar(
                levels,
                [m for m, _ in stats],
                yerr=[s for _, s in stats],
                marker="o",
                capsize=4,
                label=labels.get(mode, mode),
            )
        crossover = further_crossover(results)
        if crossover is not None:
            ax.axvline(crossover, color="grey", linestyle=":", label="farther replica wins")
        ax.set_xlabel("flood readers at Seoul")
        ax.set_ylabel("download time of all files (s)")
        ax.set_title(
            f"Further experiment: Seoul under load, replicas at Seoul + Mumbai\n"
            f"sites serve {opts.serve_rate / MiB:.0f} MiB/s; mean ± sd of {opts.runs} runs",
            fontsize=10,
        )
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out / "further.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


# -- command line -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``synxfer-bench blockstore``."""
    p = argparse.ArgumentParser(
        prog="synxfer-bench blockstore",
        description="Reproduce the multi-site block-store placement experiment on loopback.",
    )
    p.add_argument("--out", type=Path, default=Path("bench-work/blockstore"), help="output dir")
    p.add_argument("--runs", type=int, default=3, help="runs per cell (default 3)")
    p.add_argument("--files", type=int, default=10, help="files per run (default 10)")
    p.add_argument("--file-size", type=_size, default=MiB, help="bytes per file (default 1MiB)")
    p.add_argument(
        "--block-sizes",
        default="64KiB,1MiB",
        help="comma-separated block sizes (default 64KiB,1MiB)",
    )
    p.add_argument("--policies", default=",".join(POLICIES), help="comma-separated policies")
    p.add_argument("--threads", type=int, default=16, help="client max_threads (default 16)")
    p.add_argument(
        "--bandwidth", type=_size, default=None, help="cap each link direction (bytes/s)"
    )
    p.add_argument(
        "--rtt-scale", type=float, default=1.0, help="multiply every RTT (default 1: published)"
    )
    p.add_argument(
        "--experiments",
        default="1,2,3,further",
        help="which to run: comma-separated from 1, 2, 3, further (default all)",
    )
    p.add_argument(
        "--flood-levels", default="0,2,4,6,8,12,16", help="flood readers at Seoul (further exp.)"
    )
    p.add_argument(
        "--serve-rate",
        type=_size,
        default=16 * MiB,
        help="site capacity in the further experiment (bytes/s, default 16MiB)",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of data and random placements")
    p.add_argument("--keep-work", action="store_true", help="keep the temporary work directory")
    return p


def _parse(argv: list[str]) -> Options:
    parser = build_parser()
    a = parser.parse_args(argv)
    from synxfer_blockstore.placement import policy_names

    try:
        block_sizes = [_size(s) for s in a.block_sizes.split(",") if s.strip()]
        levels = [int(x) for x in a.flood_levels.split(",") if x.strip()]
    except (argparse.ArgumentTypeError, ValueError) as exc:
        parser.error(str(exc))
    policies = [p.strip() for p in a.policies.split(",") if p.strip()]
    experiments = {e.strip() for e in a.experiments.split(",") if e.strip()}
    if not experiments or experiments - {"1", "2", "3", "further"}:
        parser.error("--experiments takes a comma-separated subset of 1, 2, 3, further")
    unknown = set(policies) - set(policy_names())
    if unknown:
        parser.error(f"unknown policies: {', '.join(sorted(unknown))}")
    if a.runs < 1 or a.files < 1 or a.threads < 1 or a.rtt_scale <= 0:
        parser.error("--runs, --files, --threads and --rtt-scale must be positive")
    return Options(
        out=a.out,
        runs=a.runs,
        files=a.files,
        file_size=a.file_size,
        block_sizes=block_sizes,
        policies=policies,
        threads=a.threads,
        bandwidth=float(a.bandwidth) if a.bandwidth else None,
        rtt_scale=a.rtt_scale,
        experiments=sorted(int(e) for e in experiments if e.isdigit()),
        further="further" in experiments,
        flood_levels=levels,
        serve_rate=a.serve_rate,
        further_block=max(block_sizes),
        seed=a.seed,
        keep_work=a.keep_work,
    )


async def _run(opts: Options, results: Results, work: Path) -> None:
    if opts.experiments:
        await _policy_experiments(opts, work, results)
    if opts.further and opts.flood_levels:
        await _further_experiment(opts, work, results)


def main(argv: list[str] | None = None) -> int:
    """Run the experiment; write results.json, results.md and PNG charts to ``--out``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = _parse(argv)
    opts.out.mkdir(parents=True, exist_ok=True)
    results = Results(
        command="python -m synxfer_bench.blockstore " + " ".join(argv),
        started=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        params={
            **{k: str(v) if isinstance(v, Path) else v for k, v in asdict(opts).items()},
            "rtt_ms": {
                "-".join(sorted(pair)): round(v * 1000 * opts.rtt_scale, 1)
                for pair, v in PUBLISHED_RTT.items()
            },
            "assumed": "-".join(sorted(ASSUMED)),
        },
        machine={
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
        },
    )
    saved_env = os.environ.get("SYNXFER_BLOCKS_CLUSTER")
    work = Path(tempfile.mkdtemp(prefix="synxfer-blockstore-bench-"))
    start = time.perf_counter()
    try:
        asyncio.run(_run(opts, results, work))
    except KeyboardInterrupt:
        _log("interrupted")
        return 130
    except RuntimeError as exc:
        _log(f"failed: {exc}")
        return 1
    finally:
        if saved_env is None:
            os.environ.pop("SYNXFER_BLOCKS_CLUSTER", None)
        else:
            os.environ["SYNXFER_BLOCKS_CLUSTER"] = saved_env
        if opts.keep_work:
            _log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    results.elapsed_s = round(time.perf_counter() - start, 1)
    doc = asdict(results)
    (opts.out / "results.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    (opts.out / "results.md").write_text(_markdown(results, opts), encoding="utf-8")
    charts = _charts(results, opts, opts.out)
    print(_markdown(results, opts))
    _log(
        f"done in {results.elapsed_s:.0f} s: "
        + ", ".join(str(p) for p in [opts.out / "results.md", opts.out / "results.json", *charts])
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
