"""synxfer-blockd and the blocks:// backend: server safety, placement, RTT, failover, hedging.

Most tests run sites in this process (:func:`synxfer_blockstore.server.serve`
on 127.0.0.1, a few milliseconds each); the restart and command-line tests
run real ``synxfer-blockd`` processes. Timing assertions are generous.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import os
import random
import time
import tracemalloc
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import synxfer
from synxfer import ConfigError, NotFound, PreconditionFailed, TransientError, WriteOptions
from synxfer.backend import BackendOptions
from synxfer_blockstore import BlockStoreBackend, Secret, load_cluster
from synxfer_blockstore.cluster import CLUSTER_ENV, find_cluster_file
from synxfer_blockstore.placement import (
    PlacementContext,
    Policy,
    get_policy,
    policy_names,
    register_policy,
)
from synxfer_blockstore.protocol import Manifest, compute_etag, parse_range
from synxfer_blockstore.rtt import SiteMonitor
from synxfer_blockstore.server import ServerConfig, main, serve
from synxfer_servers.blockd import BlockdProcess, write_cluster_file
from synxfer_servers.delayproxy import DelayProxy

from ._fanout import CountingLimiter

TOKEN = "unit-test-token-never-printed"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
KiB = 1024


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextlib.asynccontextmanager
async def sites(root: Path, names: list[str], **config: Any) -> AsyncIterator[dict[str, str]]:
    """In-process blockd sites; yields name -> URL."""
    async with contextlib.AsyncExitStack() as stack:
        urls = {}
        for name in names:
            cfg = ServerConfig(data_dir=root / name, site=name, token=TOKEN, **config)
            urls[name] = await stack.enter_async_context(serve(cfg))
        yield urls


@contextlib.asynccontextmanager
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


def cluster(tmp_path: Path, urls: Mapping[str, str], local: str, **settings: object) -> str:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    path = write_cluster_file(
        tmp_path / f"cluster-{random.randrange(10**9)}.json",
        urls,
        local,
        token_file=token,
        probe_interval=0,
        **settings,
    )
    return str(path)


def backend(path: str, bucket: str = "ns", **extra: str) -> BlockStoreBackend:
    return BlockStoreBackend(
        bucket, BackendOptions(max_connections=8, extra={"cluster": path, **extra})
    )


# -- server ----------------------------------------------------------------------


async def test_every_request_needs_the_token(tmp_path: Path) -> None:
    async with sites(tmp_path, ["A"]) as urls, http() as s:
        base = urls["A"] + "/v1"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            for method, path in (("GET", "/ping"), ("GET", "/list?bucket=b"), ("PUT", "/blocks/x")):
                async with s.request(method, base + path, headers=headers) as r:
                    assert r.status == 401, (method, path, headers)
                    assert TOKEN not in await r.text()
        async with s.get(base + "/ping", headers=AUTH) as r:
            assert r.status == 200
            assert (await r.json())["site"] == "A"


async def test_block_ids_cannot_name_paths(tmp_path: Path) -> None:
    async with sites(tmp_path, ["A"]) as urls, http() as s:
        base = urls["A"] + "/v1/blocks/"
        bad = ["..%2F..%2Fetc%2Fpasswd", "%2e%2e", "A" * 64, "0" * 63, "0" * 65, "g" * 64]
        for bid in bad:
            async with s.get(base + bid, headers=AUTH) as r:
                assert r.status in (400, 404), bid
            async with s.put(base + bid, data=b"x", headers=AUTH) as r:
                assert r.status in (400, 404, 405), bid
        async with s.get(urls["A"] + "/v1/../../etc/passwd", headers=AUTH) as r:
            assert r.status == 404
        async with s.get(
            urls["A"] + "/v1/manifest", params={"bucket": "../x", "key": "k"}, headers=AUTH
        ) as r:
            assert r.status == 400
    assert not list((tmp_path / "A" / "blocks").rglob("*.*"))


async def test_blocks_are_verified_and_written_atomically(tmp_path: Path) -> None:
    data = os.urandom(100 * KiB)
    async with sites(tmp_path, ["A"]) as urls, http() as s:
        base = urls["A"] + "/v1/blocks/"
        wrong = sha(b"other bytes")
        async with s.put(base + wrong, data=data, headers=AUTH) as r:
            assert r.status == 400
            assert (await r.json())["error"] == "BadDigest"
        async with s.get(base + wrong, headers=AUTH) as r:
            assert r.status == 404
        async with s.put(base + sha(data), data=data, headers=AUTH) as r:
            assert r.status == 201
        async with s.put(base + sha(data), data=data, headers=AUTH) as r:
            assert r.status == 200, "an existing block is acknowledged, not rewritten"
        async with s.get(base + sha(data), headers=AUTH) as r:
            assert await r.read() == data
        async with s.get(base + sha(data), headers={**AUTH, "Range": "bytes=10-19"}) as r:
            assert r.status == 206
            assert await r.read() == data[10:20]
        async with s.get(base + sha(data), headers={**AUTH, "Range": "bytes=999999-"}) as r:
            assert r.status == 416
        async with s.head(base + sha(data), headers=AUTH) as r:
            assert r.status == 200
            assert int(r.headers["Content-Length"]) == len(data)
    files = [p for p in (tmp_path / "A").rglob("*") if p.is_file() and "blocks" in p.parts]
    assert [p.name for p in files] == [sha(data)]
    assert files[0].read_bytes() == data
    assert list((tmp_path / "A" / "tmp").iterdir()) == [], "no temp file is left behind"


async def test_request_size_limits(tmp_path: Path) -> None:
    big = os.urandom(64 * KiB + 1)
    limits = {"max_block_size": 64 * KiB, "max_manifest_bytes": 4096}
    async with sites(tmp_path, ["A"], **limits) as urls, http() as s:
        async with s.put(urls["A"] + "/v1/blocks/" + sha(big), data=big, headers=AUTH) as r:
            assert r.status == 413
        manifest = _manifest("b", "k", blocks=[], size=0)
        manifest["metadata"] = {"pad": "x" * 5000}
        async with s.put(
            urls["A"] + "/v1/manifest",
            params={"bucket": "b", "key": "k"},
            data=json.dumps(manifest),
            headers=AUTH,
        ) as r:
            assert r.status == 413


def _manifest(
    bucket: str, key: str, *, blocks: list[list[Any]], size: int, stamp: int = 1, **kw: Any
) -> dict[str, Any]:
    doc = Manifest(
        bucket=bucket,
        key=key,
        size=size,
        blocks=(),
        stamp=stamp,
        writer="test",
        etag=compute_etag(size, []),
    ).to_json()
    doc["blocks"] = blocks
    doc.update(kw)
    return doc


async def _put_manifest(s: aiohttp.ClientSession, url: str, doc: dict[str, Any]) -> int:
    async with s.put(
        url + "/v1/manifest",
        params={"bucket": doc["bucket"], "key": doc["key"]},
        data=json.dumps(doc),
        headers=AUTH,
    ) as r:
        return r.status


async def test_manifests_last_writer_wins_and_peers_converge(tmp_path: Path) -> None:
    async with sites(tmp_path, ["A"]) as a:
        config = ServerConfig(
            data_dir=tmp_path / "B", site="B", token=TOKEN, peers=a, sync_interval=0.05
        )
        async with serve(config) as b_url, http() as s:
            block = os.urandom(1000)
            async with s.put(a["A"] + "/v1/blocks/" + sha(block), data=block, headers=AUTH):
                pass
            new = _manifest("b", "k", blocks=[[sha(block), 1000, ["A"]]], size=1000, stamp=20)
            old = _manifest("b", "k", blocks=[], size=0, stamp=10)
            assert await _put_manifest(s, a["A"], new) == 200
            assert await _put_manifest(s, a["A"], old) == 200  # accepted, not applied
            params = {"bucket": "b", "key": "k"}
            for _ in range(100):  # B pulls A's change feed
                async with s.get(b_url + "/v1/manifest", params=params, headers=AUTH) as r:
                    if r.status == 200:
                        assert (await r.json())["stamp"] == 20
                        break
                await asyncio.sleep(0.05)
            else:
                pytest.fail("site B never pulled the manifest from its peer")
            async with s.get(
                b_url + "/v1/list", params={"bucket": "b", "prefix": ""}, headers=AUTH
            ) as r:
                assert [i["key"] for i in (await r.json())["items"]] == ["k"]
            tomb = _manifest("b", "k", blocks=[], size=0, stamp=30, deleted=True)
            assert await _put_manifest(s, a["A"], tomb) == 200
            async with s.get(a["A"] + "/v1/manifest", params=params, headers=AUTH) as r:
                assert r.status == 404


async def test_gc_deletes_only_unreferenced_blocks(tmp_path: Path) -> None:
    keep, drop = os.urandom(2000), os.urandom(3000)
    async with sites(tmp_path, ["A"]) as urls, http() as s:
        base = urls["A"]
        for data in (keep, drop):
            async with s.put(base + "/v1/blocks/" + sha(data), data=data, headers=AUTH) as r:
                assert r.status == 201
        doc = _manifest("b", "k", blocks=[[sha(keep), 2000, ["A"]]], size=2000)
        assert await _put_manifest(s, base, doc) == 200
        async with s.post(base + "/v1/gc", params={"grace": "3600"}, headers=AUTH) as r:
            assert (await r.json())["deleted"] == 0, "young blocks are kept"
        async with s.post(base + "/v1/gc", params={"grace": "0"}, headers=AUTH) as r:
            assert await r.json() == {"deleted": 1, "kept": 1}
        async with s.get(base + "/v1/blocks", headers=AUTH) as r:
            assert [b["id"] for b in (await r.json())["blocks"]] == [sha(keep)]


def test_restart_after_a_crash_keeps_acknowledged_writes(tmp_path: Path) -> None:
    data = os.urandom(50 * KiB)
    doc = _manifest("b", "k", blocks=[[sha(data), len(data), ["A"]]], size=len(data))

    async def write(url: str) -> None:
        async with http() as s:
            async with s.put(url + "/v1/blocks/" + sha(data), data=data, headers=AUTH) as r:
                assert r.status == 201
            assert await _put_manifest(s, url, doc) == 200

    async def check(url: str) -> None:
        async with http() as s:
            async with s.get(url + "/v1/blocks/" + sha(data), headers=AUTH) as r:
                assert await r.read() == data
            params = {"bucket": "b", "key": "k"}
            async with s.get(url + "/v1/manifest", params=params, headers=AUTH) as r:
                assert (await r.json())["size"] == len(data)

    site = BlockdProcess("A", tmp_path / "A", TOKEN)
    site.start()
    try:
        asyncio.run(write(site.url))
    finally:
        site.kill()  # SIGKILL: no clean shutdown
    with BlockdProcess("A", tmp_path / "A", TOKEN) as again:
        asyncio.run(check(again.url))


def test_command_line_refuses_remote_binds_and_missing_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SYNXFER_BLOCKD_TOKEN", TOKEN)
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-dir", str(tmp_path), "--site", "A", "--host", "0.0.0.0"])
    assert exit_info.value.code == 2
    assert "loopback" in capsys.readouterr().err
    monkeypatch.delenv("SYNXFER_BLOCKD_TOKEN")
    with pytest.raises(SystemExit):
        main(["--data-dir", str(tmp_path), "--site", "A"])
    assert "no token" in capsys.readouterr().err


async def test_ping_reports_load_while_a_paced_block_is_served(tmp_path: Path) -> None:
    data = os.urandom(128 * KiB)
    async with sites(tmp_path, ["A"], serve_rate=256 * KiB) as urls, http() as s:
        base = urls["A"] + "/v1"
        async with s.put(base + "/blocks/" + sha(data), data=data, headers=AUTH) as r:
            assert r.status == 201

        async def fetch() -> bytes:
            async with s.get(base + "/blocks/" + sha(data), headers=AUTH) as r:
                return await r.read()

        slow = asyncio.create_task(fetch())
        await asyncio.sleep(0.15)
        async with s.get(base + "/ping", headers=AUTH) as r:
            ping = await r.json()
        assert ping["active"] == 1
        assert ping["rate"] == 256 * KiB
        assert 0 < ping["pending_bytes"] <= len(data)
        start = time.monotonic()
        assert await slow == data
        assert time.monotonic() - start > 0.1, "the block leaves at the paced rate"


# -- protocol, cluster files -------------------------------------------------------


def test_ranges_and_manifest_validation() -> None:
    assert parse_range("bytes=0-9", 100) == (0, 10)
    assert parse_range("bytes=90-", 100) == (90, 100)
    assert parse_range("bytes=-5", 100) == (95, 100)
    assert parse_range("bytes=50-500", 100) == (50, 100)
    with pytest.raises(IndexError):
        parse_range("bytes=100-", 100)
    with pytest.raises(ValueError, match="unsupported Range"):
        parse_range("bytes=1-2,4-5", 100)
    good = _manifest("b", "k", blocks=[["a" * 64, 5, ["A"]]], size=5)
    assert Manifest.from_json(good).blocks[0].sites == ("A",)
    for broken in (
        {**good, "size": 6},
        {**good, "blocks": [["../x", 5, ["A"]]]},
        {**good, "blocks": [["a" * 64, 5, []]]},
        {**good, "bucket": "a/b"},
        {**good, "key": ""},
        {**good, "v": 2},
    ):
        with pytest.raises(ValueError, match=r"."):
            Manifest.from_json(broken)


def test_cluster_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tok").write_text(TOKEN + "\n")
    toml = tmp_path / "seoul.toml"
    toml.write_text(
        'local = "Seoul"\ntoken_file = "tok"\npolicy = "local"\n'
        '[sites]\nSeoul = "http://127.0.0.1:1"\nDublin = "http://127.0.0.1:2"\n'
    )
    c = load_cluster(toml)
    assert c.local == "Seoul"
    assert c.token.reveal() == TOKEN
    assert c.settings["policy"] == "local"
    assert TOKEN not in repr(c) + str(c.token) + repr(Secret(TOKEN))
    monkeypatch.setenv(CLUSTER_ENV, str(tmp_path))
    assert find_cluster_file("seoul", {}) == toml
    with pytest.raises(ConfigError):
        find_cluster_file("dublin", {})
    leaky = tmp_path / "leaky.json"
    leaky.write_text(json.dumps({"sites": {"A": "http://x"}, "local": "A", "token": TOKEN}))
    with pytest.raises(ConfigError) as err:
        load_cluster(leaky)
    assert TOKEN not in str(err.value)
    b = BlockStoreBackend("seoul", BackendOptions(extra={"block_size": "64KiB"}))
    assert (b.block_size, b.policy.name, b.capabilities.min_part_size) == (65536, "local", 65536)
    assert TOKEN not in repr(b)
    with pytest.raises(ConfigError):
        BlockStoreBackend("seoul", BackendOptions(extra={"block_size": "16KiB"}))
    with pytest.raises(ConfigError):
        BlockStoreBackend("seoul", BackendOptions(extra={"policy": "nearest"}))


# -- placement -----------------------------------------------------------------------

#: The published RTTs (seconds), from Seoul and from Dublin.
FROM_SEOUL = {"Seoul": 0.001, "Dublin": 0.267, "SaoPaulo": 0.298, "Mumbai": 0.163}
FROM_DUBLIN = {"Dublin": 0.001, "Seoul": 0.267, "SaoPaulo": 0.184, "Mumbai": 0.122}
SITES = ["Seoul", "Dublin", "SaoPaulo", "Mumbai"]


def _choose(name: str, local: str, rtt: Mapping[str, float], seed: int = 0) -> list[str]:
    policy = get_policy(name)
    ctx = PlacementContext(local, SITES, rtt, random.Random(seed))
    order = policy.choose(ctx)
    assert sorted(order) == sorted(SITES), "every site, each once"
    return order[: policy.replicas(len(SITES))]


def test_policies_pick_the_published_sites() -> None:
    assert _choose("local", "Seoul", FROM_SEOUL) == ["Seoul"]
    assert _choose("localclosest", "Seoul", FROM_SEOUL) == ["Seoul", "Mumbai"]
    assert _choose("localfarthest", "Seoul", FROM_SEOUL) == ["Seoul", "SaoPaulo"]
    assert _choose("local", "Dublin", FROM_DUBLIN) == ["Dublin"]
    assert _choose("localclosest", "Dublin", FROM_DUBLIN) == ["Dublin", "Mumbai"]
    assert _choose("localfarthest", "Dublin", FROM_DUBLIN) == ["Dublin", "Seoul"]
    singles = {_choose("random", "Seoul", FROM_SEOUL, seed)[0] for seed in range(200)}
    assert singles == set(SITES)
    pairs = [_choose("tworandom", "Seoul", FROM_SEOUL, seed) for seed in range(200)]
    assert all(len(set(p)) == 2 for p in pairs)
    assert {frozenset(p) for p in pairs} == {
        frozenset((a, b)) for a in SITES for b in SITES if a != b
    }
    assert set(policy_names()) >= {"random", "tworandom", "local", "localclosest", "localfarthest"}


def test_unreachable_sites_are_never_the_farthest_and_policies_are_pluggable() -> None:
    rtt = {**FROM_SEOUL, "SaoPaulo": math.inf}
    assert _choose("localfarthest", "Seoul", rtt) == ["Seoul", "Dublin"]

    @register_policy
    class EveryOther(Policy):
        name = "test-mumbai"
        copies = 1

        def choose(self, ctx: PlacementContext) -> list[str]:
            return ["Mumbai", *[s for s in ctx.sites if s != "Mumbai"]]

    assert _choose("test-mumbai", "Seoul", FROM_SEOUL) == ["Mumbai"]
    with pytest.raises(KeyError):
        get_policy("nearest")


# -- RTT and load -----------------------------------------------------------------------


async def test_prober_discards_the_first_probe_and_averages_the_rest() -> None:
    now = [0.0]
    durations = {"A": [1.0, 0.10, 0.12, 0.14], "B": [0.5, 0.2]}
    fail = {"B": False}

    async def probe(site: str) -> dict[str, Any]:
        if fail.get(site, False):
            raise OSError("refused")
        now[0] += durations[site].pop(0)
        return {"active": 0, "rate": 0}

    monitor = SiteMonitor(["A", "B"], probe, window=5, clock=lambda: now[0])
    assert math.isinf(monitor.rtt("A"))
    await monitor.warm_up()  # two probes each; the first is dropped
    assert monitor.rtt("A") == pytest.approx(0.10)
    assert monitor.rtt("B") == pytest.approx(0.2)
    await monitor.probe_site("A")
    await monitor.probe_site("A")
    assert monitor.rtt("A") == pytest.approx(0.12), "mean of 0.10, 0.12, 0.14; 1.0 dropped"
    fail["B"] = True
    await monitor.probe_site("B")
    assert math.isinf(monitor.rtt("B")), "a failed probe marks the site down"
    assert monitor.rank(["B", "A"], 0, "rtt") == ["A", "B"]


def test_load_aware_choice_finds_the_crossover() -> None:
    async def never(site: str) -> dict[str, Any]:
        raise AssertionError

    monitor = SiteMonitor(["Seoul", "Mumbai"], never)
    monitor.stats["Seoul"].samples.append(0.001)
    monitor.stats["Mumbai"].samples.append(0.163)
    rate = 16 * 2**20
    monitor.record_load("Mumbai", 0, rate)
    size = 2**20
    crossover = None
    for queue in range(10):
        monitor.record_load("Seoul", queue, rate)
        assert monitor.rank(["Seoul", "Mumbai"], size, "rtt")[0] == "Seoul", "RTT alone"
        if crossover is None and monitor.rank(["Seoul", "Mumbai"], size, "load")[0] == "Mumbai":
            crossover = queue
    # (q + 1) * 1 MiB / 16 MiB/s > 0.163 + 1/16 s  <=>  q >= 3
    assert crossover == 3
    # Our own requests in flight count as queued work too.
    monitor.record_load("Seoul", 0, rate)
    with monitor.track("Seoul", size), monitor.track("Seoul", size), monitor.track("Seoul", size):
        assert monitor.rank(["Seoul", "Mumbai"], size, "load")[0] == "Mumbai"
    assert monitor.rank(["Seoul", "Mumbai"], size, "load")[0] == "Seoul"


# -- the backend ---------------------------------------------------------------------


async def test_reads_fail_over_when_a_replica_site_is_down(tmp_path: Path) -> None:
    data = os.urandom(300 * KiB)
    root = tmp_path / "data"
    async with sites(root, ["B", "C"]) as bc:
        a_config = ServerConfig(data_dir=root / "A", site="A", token=TOKEN)
        a_server = serve(a_config)
        a_url = await a_server.__aenter__()
        path = cluster(tmp_path, {"A": a_url, **bc}, "A", block_size="64KiB", policy="local")
        async with backend(path) as b:
            b.monitor.stats["A"].samples.extend([0.0001] * 5)  # A looks best
            await b.put("k", data, WriteOptions())
            assert all(sites_ == ("A",) for sites_ in await b.locate("k"))
            await b.put("k2", data, WriteOptions())
            b.policy = get_policy("localclosest")
            await b.put("two", data, WriteOptions())
            await a_server.__aexit__(None, None, None)  # site A goes away
            result = await b.read("two")
            assert result.data == data, "every block came from its other replica"
            assert math.isinf(b.monitor.rtt("A")), "the dead site is marked down"
            with pytest.raises(TransientError):
                await b.read("k")  # its only replica is gone: retryable, not corrupt
            # Writes keep their replica count by falling back to the next site.
            await b.put("later", data[:1000], WriteOptions())
            placed = await b.locate("later")
            assert len(placed[0]) == 2
            assert "A" not in placed[0]
            assert (await b.read("later")).data == data[:1000]


async def test_read_into_places_blocks_without_a_joined_copy(tmp_path: Path) -> None:
    """read_into copies each block to its place as it arrives: no joined copy
    of the object (the default read_into held the blocks, their join and the
    buffer at once), and an object that does not fit the buffer is refused
    from its manifest, before any block is read. The site is a child
    process, so only the client's memory is traced."""
    data = os.urandom(8 * 1024 * KiB)
    with BlockdProcess("A", tmp_path / "A", TOKEN) as site:
        path = cluster(tmp_path, {"A": site.url}, "A", block_size="256KiB", policy="local")
        async with backend(path) as b:
            put = await b.put("k", data, WriteOptions())
            buf = bytearray(len(data) + 3)
            view = memoryview(buf)
            info = await b.read_into("k", 100 * KiB + 5, view[: 600 * KiB], if_match=put.etag)
            assert buf[: 600 * KiB] == data[100 * KiB + 5 : 700 * KiB + 5], "across blocks"
            assert buf[600 * KiB :] == bytes(len(buf) - 600 * KiB), "nothing past the view"
            assert (info.size, info.etag) == (len(data), put.etag)
            tracemalloc.start()
            try:
                await b.read_into("k", 0, view[: len(data)], whole=True)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert buf[: len(data)] == data
            half = len(data) // 2
            assert peak < half, f"{peak} bytes allocated at most at once"
            read = dict(b.read_bytes)
            for offset, size, whole in [(0, len(data) - 1, True), (len(data) - 10, 11, False)]:
                with pytest.raises(PreconditionFailed, match="the object has 8388608 bytes"):
                    await b.read_into("k", offset, view[:size], whole=whole)
            assert b.read_bytes == read, "refused before any block was read"


async def test_manifest_writes_need_a_quorum(tmp_path: Path) -> None:
    async with sites(tmp_path / "d", ["A", "B"]) as ab:
        dead = {"C": "http://127.0.0.1:9", "D": "http://127.0.0.1:9"}  # discard port: refused
        path = cluster(tmp_path, {**ab, **dead}, "A", block_size="64KiB", policy="local")
        async with backend(path) as b:
            with pytest.raises(TransientError) as err:
                await b.put("k", b"x" * 100, WriteOptions())  # 2 of 4 < majority (3)
            assert "2 of 4" in str(err.value)
        async with backend(path, write_quorum="2") as b:
            await b.put("k", b"x" * 100, WriteOptions())
            assert (await b.read("k")).data == b"x" * 100


async def test_hedged_read_beats_a_stalled_replica(tmp_path: Path) -> None:
    data = os.urandom(128 * KiB)
    async with sites(tmp_path / "d", ["A", "B"]) as urls:
        host, port = urls["B"].removeprefix("http://").split(":")
        async with DelayProxy(host, int(port)) as slow_b:
            path = cluster(
                tmp_path,
                {"A": urls["A"], "B": slow_b.url},
                "A",
                block_size="64KiB",
                policy="tworandom",
                read_choice="rtt",
            )
            async with backend(path) as b:
                await b.put("k", data, WriteOptions())
                slow_b.set_delay(0.0, 3.0)  # B's answers now take 3 s...
                b.monitor.stats["B"].samples.extend([0.0001] * 5)  # ...but B looks fastest
                b.monitor.stats["A"].samples.extend([0.005] * 5)
                start = time.monotonic()
                assert (await b.read("k")).data == data
                hedged = time.monotonic() - start
            assert hedged < 2.0, f"the hedge to A should win, took {hedged:.2f}s"
            slow_b.set_delay(0.0, 0.0)
            async with backend(path, hedge="false", stall_timeout="0.3") as b:
                slow_b.set_delay(0.0, 3.0)
                b.monitor.stats["B"].samples.extend([0.0001] * 5)
                b.monitor.stats["A"].samples.extend([0.005] * 5)
                start = time.monotonic()
                assert (await b.read("k")).data == data
                stalled = time.monotonic() - start
            assert 0.25 < stalled < 2.5, f"without hedging, a stall fails over ({stalled:.2f}s)"


async def test_corrupt_replica_is_detected_and_skipped(tmp_path: Path) -> None:
    data = os.urandom(64 * KiB)
    async with sites(tmp_path / "d", ["A", "B"]) as urls:
        path = cluster(tmp_path, urls, "A", block_size="64KiB", policy="tworandom")
        async with backend(path) as b:
            await b.put("k", data, WriteOptions())
            bid = sha(data)
            victim = tmp_path / "d" / "A" / "blocks" / bid[:2] / bid[2:4] / bid
            victim.write_bytes(b"\0" * len(data))  # bit rot at site A
            b.monitor.stats["A"].samples.extend([0.0001] * 5)
            b.monitor.stats["B"].samples.extend([0.05] * 5)
            assert (await b.read("k")).data == data


@pytest.mark.parametrize("limit", [1, 2])
async def test_every_block_store_request_takes_a_request_slot(tmp_path: Path, limit: int) -> None:
    """Block-store calls fan out (a block to each replica, a manifest to every site,
    the blocks of a read), so the scheduler holds no slot around them: each request
    takes one of ``options.requests``, never more than the limit at once. The
    backend's own RTT probes take none."""
    data = os.urandom(4 * 64 * KiB)  # 4 blocks
    async with sites(tmp_path / "d", ["A", "B", "C"]) as urls:
        path = cluster(tmp_path, urls, "A", block_size="64KiB", policy="tworandom", hedge="false")
        limiter = CountingLimiter(limit)
        options = BackendOptions(max_connections=8, extra={"cluster": path}, requests=limiter)
        async with BlockStoreBackend("ns", options) as b:
            assert b.capabilities.fan_out == {
                "stat",
                "list_page",
                "read",
                "read_into",
                "put",
                "delete",
                "delete_many",
                "copy",
                "upload_part",
                "complete_multipart",
            }
            await b.monitor.probe_all()
            assert limiter.taken == 0, "RTT probes take no request slot"
            await asyncio.wait_for(b.put("k", data, WriteOptions()), 30)
            assert limiter.taken == 4 * 2 + 3, "4 blocks x 2 replicas, the manifest x 3 sites"
            assert limiter.peak == limit, "the replica writes ran side by side, up to the limit"
            limiter.taken = 0
            assert (await asyncio.wait_for(b.read("k"), 30)).data == data
            assert limiter.taken == 1 + 4, "the manifest, then each block from one replica"
            limiter.taken = 0
            await b.copy("k", "k2", WriteOptions())
            assert limiter.taken == 1 + 3
        assert limiter.held == 0


async def test_client_round_trip_through_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    files = {f"f{i}.bin": os.urandom(200 * KiB + i) for i in range(3)}
    for name, body in files.items():
        (src / name).write_bytes(body)
    async with sites(tmp_path / "d", ["A", "B", "C"]) as urls:
        cdir = tmp_path / "clusters"
        cdir.mkdir()
        (tmp_path / "token").write_text(TOKEN)
        for local in urls:
            write_cluster_file(
                cdir / f"at{local}.json",
                urls,
                local,
                token_file=tmp_path / "token",
                namespace="shared",
                block_size="64KiB",
                policy="localclosest",
            )
        monkeypatch.setenv(CLUSTER_ENV, str(cdir))
        # One request at a time: the LimitLayer holds no slot around the calls the
        # backend fans out, so they cannot wait for a slot their own call holds.
        config = synxfer.TransferConfig(max_threads=1, part_size=128 * KiB)
        async with synxfer.Client(config) as client:
            up = await asyncio.wait_for(client.sync_to(src, "blocks://atA/dir/"), 60)
            assert up.ok
            assert up.files_transferred == 3
            down = await asyncio.wait_for(
                client.sync_from("blocks://atC/dir/", tmp_path / "out"), 60
            )
            assert down.ok
            assert down.files_transferred == 3, "another site sees the same objects"
        for name, body in files.items():
            assert (tmp_path / "out" / name).read_bytes() == body
        async with backend(str(cdir / "atB.json"), "atB") as b:
            with pytest.raises(NotFound):
                await b.stat("dir/missing")
            assert [i.key for i in (await b.list_page("dir/")).items] == sorted(
                f"dir/{n}" for n in files
            )
