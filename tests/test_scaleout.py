"""Scale-out (issue 12): one plan, many engines -- processes, Dask, explicit lists.

Real parts only: moto in a subprocess on 127.0.0.1 (so the engines, not the
server, share this process's GIL), a Dask ``LocalCluster`` of two worker
processes on 127.0.0.1, the ``synxfer`` command in subprocesses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer import MiB
from synxfer._scaleout import Item
from synxfer._scaleout._shards import split

from .conftest import PART, tree, write_tree

distributed = pytest.importorskip("distributed")

SECRET = os.environ["AWS_SECRET_ACCESS_KEY"]
CONFIG = synxfer.TransferConfig(max_threads=4, part_size=PART, multipart_threshold=PART)
#: A tree with one multipart file (its parts stay in one engine) and small ones.
FILES = {"big.bin": 2 * PART + 123, **{f"d{i % 3}/f{i:02}.dat": 1000 + 997 * i for i in range(24)}}


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    from synxfer_servers.s3 import MotoProcess

    with MotoProcess() as server:
        yield server.endpoint_url


@pytest.fixture
def bkt(moto: str) -> str:
    import boto3

    name = f"so-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto).create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two single-threaded worker processes, loopback only, no dashboard."""
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as c,
        distributed.Client(c) as dask_client,
    ):
        yield dask_client


def objects(endpoint: str, bucket: str, prefix: str) -> dict[str, bytes]:
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint)
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            out[obj["Key"][len(prefix) :]] = body
    return out


def counts(r: synxfer.TransferResult) -> tuple[int, int, int, int, int, int]:
    return (
        r.files_transferred,
        r.bytes_transferred,
        r.files_skipped,
        r.files_deleted,
        r.files_failed,
        r.bytes_uploaded + r.bytes_downloaded,
    )


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --------------------------------------------------------------------------- shards


def test_split_balances_bytes_and_files_and_keeps_a_huge_file_alone() -> None:
    items = [Item("huge", "huge", 1000 * MiB)] + [Item(f"s{i}", f"s{i}", MiB) for i in range(40)]
    shards = split(items, 3)
    assert sorted(it.src for s in shards for it in s) == sorted(it.src for it in items)
    alone = next(s for s in shards if any(it.src == "huge" for it in s))
    assert len(alone) < 40 / 3  # the huge file's shard takes fewer of the small ones
    small = [len(s) for s in shards if s is not alone]
    assert max(small) - min(small) <= 1  # the rest split evenly by count
    assert all(s == sorted(s, key=lambda it: it.src) for s in shards)


def test_split_pins_a_resumable_file_to_its_shard() -> None:
    items = [Item(f"f{i}", f"f{i}", 10) for i in range(10)]
    pins: list[int | None] = [None] * 10
    pins[7] = 2
    pins[3] = 9  # beyond the shards of this run: placed freely
    shards = split(items, 3, pins)
    assert any(it.src == "f7" for it in shards[2])
    assert sum(len(s) for s in shards) == 10
    assert split([], 4) == [[], [], [], []]


def test_merge_sums_every_counter_and_joins_failures() -> None:
    from dataclasses import fields

    from synxfer._scaleout._shards import merge

    one, two = synxfer.TransferResult(elapsed=5.0), synxfer.TransferResult(elapsed=7.0)
    numbers = [f.name for f in fields(synxfer.TransferResult) if f.type in ("int", int)]
    assert "bytes_downloaded" in numbers
    assert "retries" in numbers
    for i, name in enumerate(numbers):
        setattr(one, name, i + 1)
        setattr(two, name, 100 * (i + 1))
    two.failures.append(synxfer.FileFailure("x", synxfer.Action.UPLOAD, "why"))
    merge(one, two)
    assert [getattr(one, name) for name in numbers] == [101 * (i + 1) for i in range(len(numbers))]
    assert [f.path for f in one.failures] == ["x"]
    assert one.elapsed == 5.0


def test_engine_config_splits_every_machine_wide_limit_bwlimit_included() -> None:
    from synxfer._scaleout._shards import engine_config

    config = synxfer.TransferConfig(max_threads=8, io_threads=8, bwlimit=10 * MiB, processes=4)
    one = engine_config(config, 4)
    assert (one.max_threads, one.max_files, one.processes) == (2, 4, 1)
    assert one.io_threads == 2
    assert one.memory_budget == config.memory_budget // 4
    assert one.bwlimit == 10 * MiB // 4  # four engines together keep to the client's limit
    assert engine_config(synxfer.TransferConfig(bwlimit=3), 4).bwlimit == 1  # never 0 (= none)
    assert engine_config(synxfer.TransferConfig(), 4).bwlimit == 0  # no limit stays none


def test_packed_events_carry_every_field() -> None:
    from synxfer._scaleout._shards import pack_event, unpack_event

    planned = synxfer.Event(
        synxfer.EventKind.PLANNED, synxfer.Action.UPLOAD, "", "", size=12345, files=7
    )
    done = synxfer.Event(
        synxfer.EventKind.DONE, synxfer.Action.DOWNLOAD, "s3://b/k", "k", 5, verified=False
    )
    failed = synxfer.Event(
        synxfer.EventKind.FAILED, synxfer.Action.COPY, "a", "b", 1, 2, "why", dryrun=True
    )
    for event in (planned, done, failed):
        packed = pack_event(event)
        assert unpack_event(list(packed)) == event  # Dask's queue may hand back a list
        pickle.loads(pickle.dumps(packed))
    assert unpack_event(pack_event(planned)).files == 7


async def test_a_workers_events_all_reach_the_driver_even_when_its_threads_are_busy() -> None:
    """The forwarder's close sends every event once, in order, even when its
    pump has taken a batch whose send has not started yet (the loop's threads
    all busy): cancelling the pump there would drop that batch, as CI once
    saw (24 of 25 upload lines from ``--processes 2``)."""
    import concurrent.futures
    import threading

    from synxfer._scaleout._shards import _Forwarder, unpack_event

    loop = asyncio.get_running_loop()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1))
    busy = threading.Event()
    blocker = loop.run_in_executor(None, busy.wait)  # the only thread, taken
    sent: list[list[Any]] = []
    forward = _Forwarder(frozenset({synxfer.EventKind.DONE}), sent.append)
    events = [
        synxfer.Event(synxfer.EventKind.DONE, synxfer.Action.UPLOAD, f"f{i}", f"k{i}", i)
        for i in range(5)
    ]
    for event in events[:3]:
        forward(event)
    forward.start()
    for _ in range(500):  # until the pump took the batch; its send waits for the thread
        if not forward.pending:
            break
        await asyncio.sleep(0.01)
    assert not forward.pending
    for event in events[3:]:
        forward(event)
    loop.call_later(0.2, busy.set)
    await asyncio.wait_for(forward.close(), 10)
    await blocker
    assert [unpack_event(p) for batch in sent for p in batch] == events


# --------------------------------------------------------------------------- Dask


def test_dask_local_cluster_up_and_down_matches_one_process(
    moto: str, bkt: str, cluster: Any, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    src = make_tree(FILES)

    async def go() -> list[synxfer.TransferResult]:
        async with (
            synxfer.Client(CONFIG, endpoint_url=moto, dask=cluster) as dask,
            synxfer.Client(CONFIG, endpoint_url=moto) as one,
        ):
            return [
                await dask.sync(src, f"s3://{bkt}/dask/"),
                await one.sync(src, f"s3://{bkt}/one/"),
                await dask.sync(src, f"s3://{bkt}/dask/"),  # nothing left to do
                await dask.sync(f"s3://{bkt}/dask/", tmp_path / "down-dask"),
                await one.sync(f"s3://{bkt}/one/", tmp_path / "down-one"),
            ]

    up, up_one, again, down, down_one = asyncio.run(go())
    assert counts(up) == counts(up_one)
    assert (up.files_transferred, up.files_failed) == (len(FILES), 0)
    assert (again.files_transferred, again.files_skipped) == (0, len(FILES))
    assert counts(down) == counts(down_one)
    assert down.bytes_downloaded == sum(FILES.values())
    expected = {rel: (src / rel).read_bytes() for rel in FILES}
    assert objects(moto, bkt, "dask/") == expected
    got = tree(tmp_path / "down-dask")
    assert {rel: data for rel, (data, _) in got.items()} == expected
    # mtimes travel both ways, as with one engine
    assert {rel: t for rel, (_, t) in got.items()} == {
        rel: t for rel, (_, t) in tree(tmp_path / "down-one").items()
    }


def test_dask_tasks_carry_no_secret(
    moto: str, bkt: str, cluster: Any, make_tree: Callable[..., Path]
) -> None:
    """Every task the scheduler gets, pickled, holds the plan but no credential."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    payloads: list[bytes] = []

    class Capture(SchedulerPlugin):
        def transition(self, key: Any, start: str, finish: str, *args: Any, **kw: Any) -> None:
            ts = scheduler.tasks.get(key)
            if ts is not None and finish == "processing":
                payloads.append(pickle.dumps(ts.run_spec))

    scheduler = cluster.cluster.scheduler
    plugin = Capture()
    scheduler.add_plugin(plugin, name="synxfer-capture")
    try:
        src = make_tree({"a.txt": 10, "b/c.txt": 20})

        async def go() -> synxfer.TransferResult:
            async with synxfer.Client(
                CONFIG, endpoint_url=moto, dask=cluster, region="us-east-1"
            ) as c:
                return await c.sync(src, f"s3://{bkt}/p/")

        assert asyncio.run(go()).files_transferred == 2
    finally:
        scheduler.remove_plugin(name="synxfer-capture")
    assert payloads, "no task seen"
    shard_payloads = [p for p in payloads if bkt.encode() in p]
    assert shard_payloads, "the captured tasks are not the shards"
    for blob in payloads:
        for secret in (SECRET, os.environ["AWS_SESSION_TOKEN"] + "x"):
            assert secret.encode() not in blob
    # The search works: the secret is found where it is.
    assert SECRET.encode() in pickle.dumps(dict(os.environ))


def test_a_worker_killed_mid_run_still_gives_a_complete_verified_result(
    moto: str, bkt: str, cluster: Any, make_tree: Callable[..., Path]
) -> None:
    files = {f"{i:03}.bin": 40_000 + i for i in range(160)}
    src = make_tree(files)
    pids = list(cluster.run(os.getpid).values())
    killed: list[int] = []
    done = Counter[str]()

    def on_event(event: synxfer.Event) -> None:
        if event.kind is synxfer.EventKind.DONE:
            done[event.dst] += 1
            if not killed and len(done) >= 20:
                killed.append(pids[0])
                os.kill(pids[0], signal.SIGKILL)

    async def go() -> synxfer.TransferResult:
        config = CONFIG.evolve(max_threads=2)
        async with synxfer.Client(config, endpoint_url=moto, dask=cluster, on_event=on_event) as c:
            return await c.sync(src, f"s3://{bkt}/k/")

    result = asyncio.run(go())
    cluster.wait_for_workers(2, timeout=60)
    assert killed, "the run ended before a worker could be killed"
    assert result.files_failed == 0, result.failures
    # Every file is accounted for: sent, or found in place by the re-run shard.
    assert result.files_transferred + result.files_skipped == len(files)
    assert result.files_transferred < len(files) or len(done) == len(files)
    landed = objects(moto, bkt, "k/")
    assert landed == {rel: (src / rel).read_bytes() for rel in files}


def test_unreachable_scheduler_is_a_config_error(
    moto: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from synxfer._scaleout import _dask

    monkeypatch.setattr(_dask, "CONNECT_TIMEOUT", 1.0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from synxfer.cli.main import main

    (tmp_path / "src").mkdir()
    code = main(
        [
            "sync",
            str(tmp_path / "src"),
            "s3://nowhere/p/",
            "--endpoint-url",
            moto,
            "--dask",
            f"tcp://127.0.0.1:{port}",
            "-q",
        ]
    )
    assert code == 2


def test_missing_dask_exits_2_with_the_install_hint(tmp_path: Path) -> None:
    """``distributed`` made unimportable in a fresh interpreter: a clear error, no traceback."""
    (tmp_path / "src").mkdir()
    code = (
        "import sys; sys.modules['distributed'] = None\n"
        "from synxfer.cli.main import main\n"
        f"sys.exit(main(['sync', {str(tmp_path / 'src')!r}, 's3://b/p/', '--dask', 'local:2']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'synxfer[dask]'" in proc.stderr
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- processes


def test_processes_2_up_and_down_via_the_cli(
    moto: str, bkt: str, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    src = make_tree(FILES)
    import boto3

    boto3.client("s3", endpoint_url=moto).put_object(Bucket=bkt, Key="p/stale.txt", Body=b"x")
    common = ["--endpoint-url", moto, "--processes", "2", "--part-size", "5MiB", "--json"]
    up = run_cli("sync", str(src), f"s3://{bkt}/p/", "--delete", *common)
    assert up.returncode == 0, up.stderr
    lines = [json.loads(line) for line in up.stdout.splitlines()]
    summary = lines[-1]
    assert summary["type"] == "summary"
    assert summary["files_transferred"] == len(FILES)
    assert summary["files_deleted"] == 1
    assert summary["bytes_uploaded"] == sum(FILES.values())
    # the workers' per-file lines reached the driver's output
    uploads = {line["dst"] for line in lines[:-1] if line.get("action") == "upload"}
    assert len(uploads) == len(FILES)
    expected = {rel: (src / rel).read_bytes() for rel in FILES}
    assert objects(moto, bkt, "p/") == expected

    down = run_cli("sync", f"s3://{bkt}/p/", str(tmp_path / "down"), *common)
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout.splitlines()[-1])["files_transferred"] == len(FILES)
    assert {rel: data for rel, (data, _) in tree(tmp_path / "down").items()} == expected
    again = run_cli("sync", f"s3://{bkt}/p/", str(tmp_path / "down"), *common)
    assert json.loads(again.stdout.splitlines()[-1])["files_skipped"] == len(FILES)


def test_ctrl_c_stops_every_worker_and_a_rerun_completes(
    moto: str, bkt: str, make_tree: Callable[..., Path]
) -> None:
    files = {f"{i:03}.bin": 300_000 + i for i in range(240)}
    files["zbig.bin"] = 3 * PART
    src = make_tree(files)
    args = [str(src), f"s3://{bkt}/c/", "--endpoint-url", moto, "--processes", "2"]
    args += ["--max-threads", "2", "--part-size", "5MiB", "--json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "synxfer.cli.main", "sync", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:  # wait until the workers are moving files
        seen += '"done"' in line
        if seen >= 10:
            break
    workers = [pid for pid in _children(proc.pid) if b"spawn_main" in _cmdline(pid)]
    assert len(workers) == 2
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not [pid for pid in workers if _alive(pid)], "a worker outlived the command"
    landed = objects(moto, bkt, "c/")
    assert 10 <= len(landed) < len(files)  # stopped midway
    rerun = run_cli("sync", *args)
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout.splitlines()[-1])
    assert summary["files_skipped"] >= len(landed)  # what landed is not sent again
    assert summary["files_transferred"] + summary["files_skipped"] == len(files)
    assert objects(moto, bkt, "c/") == {rel: (src / rel).read_bytes() for rel in files}


# --------------------------------------------------------------------------- explicit lists


def test_files_from_an_explicit_list(
    moto: str, bkt: str, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    src = make_tree({"a.txt": 10, "sub/b.txt": 20, "sub/c.txt": 30, "other.txt": 40})
    listing = tmp_path / "list.txt"
    listing.write_text("# wanted\na.txt\n./sub/b.txt\nsub/c.txt\tsub/renamed.txt\n\nmissing.txt\n")
    common = ["--endpoint-url", moto, "--files-from", str(listing)]
    first = run_cli("sync", str(src), f"s3://{bkt}/x/", *common)
    assert first.returncode == 1  # missing.txt failed, the rest went
    assert "missing.txt" in first.stderr
    got = objects(moto, bkt, "x/")
    assert got == {
        "a.txt": (src / "a.txt").read_bytes(),
        "sub/b.txt": (src / "sub/b.txt").read_bytes(),
        "sub/renamed.txt": (src / "sub/c.txt").read_bytes(),
    }
    listing.write_text("a.txt\nsub/b.txt\nother.txt\n")
    second = run_cli("sync", str(src), f"s3://{bkt}/x/", *common, "--json")
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout.splitlines()[-1])
    assert (summary["files_transferred"], summary["files_skipped"]) == (1, 2)

    # and back down, through the API, with a key that would escape the directory
    async def down() -> synxfer.TransferResult:
        async with synxfer.Client(CONFIG, endpoint_url=moto) as c:
            return await c.sync(
                f"s3://{bkt}/x/", tmp_path / "d", files=["a.txt", ("sub/renamed.txt", "../up")]
            )

    result = asyncio.run(down())
    assert result.files_transferred == 1
    assert [f.path for f in result.failures] == [f"s3://{bkt}/x/sub/renamed.txt"]
    assert (tmp_path / "d/a.txt").read_bytes() == (src / "a.txt").read_bytes()
    assert not (tmp_path / "up").exists()

    bad = run_cli("sync", str(src), f"s3://{bkt}/x/", *common, "--delete")
    assert bad.returncode == 2
    assert "--files-from" in bad.stderr


def test_files_from_with_compress_resyncs_nothing(
    moto: str, bkt: str, make_tree: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An explicit list uploaded with compress: looked up by one listing (as
    a long list is; S3's carries the stored sizes, no metadata), a file whose
    size differs from its compressed object's is settled by a HEAD (the
    original size), as a sync is: the second run sends nothing."""
    pytest.importorskip("zstandard")
    from synxfer.engine import items as _items

    monkeypatch.setattr(_items, "STAT_LIMIT", 0)  # one listing, not a HEAD per item
    names = ["a.txt", "sub/b.txt", "sub/c.txt"]
    src = make_tree({"a.txt": 10_000, "sub/b.txt": 20_000, "sub/c.txt": 30_000})
    config = CONFIG.evolve(compress="zstd")

    async def go() -> list[synxfer.TransferResult]:
        async with synxfer.Client(config, endpoint_url=moto) as c:
            return [await c.sync(src, f"s3://{bkt}/z/", files=names) for _ in range(2)]

    first, second = asyncio.run(go())
    assert first.ok, first.failures
    assert first.files_transferred == len(names)
    assert second.ok, second.failures
    assert (second.files_transferred, second.files_skipped) == (0, len(names))
    assert second.bytes_uploaded == 0


def test_a_process_killed_mid_run_has_its_shard_run_again(
    moto: str, bkt: str, make_tree: Callable[..., Path]
) -> None:
    files = {f"{i:03}.bin": 40_000 + i for i in range(160)}
    src = make_tree(files)
    killed: list[int] = []
    done = Counter[str]()

    def on_event(event: synxfer.Event) -> None:
        if event.kind is synxfer.EventKind.DONE:
            done[event.dst] += 1
            workers = [pid for pid in _children() if b"spawn_main" in _cmdline(pid)]
            if not killed and len(done) >= 20 and workers:
                killed.append(workers[0])
                os.kill(workers[0], signal.SIGKILL)

    async def go() -> synxfer.TransferResult:
        config = CONFIG.evolve(max_threads=2, processes=2)
        async with synxfer.Client(config, endpoint_url=moto, on_event=on_event) as c:
            return await c.sync(src, f"s3://{bkt}/k/")

    result = asyncio.run(go())
    assert killed, "the run ended before a worker could be killed"
    assert result.files_failed == 0, result.failures
    assert result.files_transferred + result.files_skipped == len(files)
    assert objects(moto, bkt, "k/") == {rel: (src / rel).read_bytes() for rel in files}


def test_processes_leave_no_worker_behind(moto: str, bkt: str, tmp_path: Path) -> None:
    """A run's worker processes end with it (nothing left to hold the journal)."""
    src = tmp_path / "s"
    write_tree(src, {"a": 1, "b": 2, "c": 3})
    before = set(_children())

    async def go() -> synxfer.TransferResult:
        config = CONFIG.evolve(processes=2)
        async with synxfer.Client(config, endpoint_url=moto) as c:
            return await c.sync(src, f"s3://{bkt}/n/")

    assert asyncio.run(go()).files_transferred == 3
    deadline = time.monotonic() + 10
    while set(_children()) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not set(_children()) - before


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _children(parent: int | None = None) -> list[int]:
    me = os.getpid() if parent is None else parent
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and b"resource_tracker" not in _cmdline(int(entry.name)):
                out.append(int(entry.name))  # (multiprocessing's tracker lives with us)
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_an_item_list_is_looked_up_by_one_listing_or_a_head_each_whichever_is_fewer(
    moto: str, bkt: str, make_tree: Callable[..., Path]
) -> None:
    from synxfer.engine.compare import Compare
    from synxfer.engine.items import _lookup

    from .conftest import CountingLayer

    names = [f"d/f{i}" for i in range(6)]
    src = make_tree(dict.fromkeys(names, 10))
    calls: Counter[str] = Counter()

    async def go() -> list[dict[str, Any]]:
        async with synxfer.Client(
            CONFIG, endpoint_url=moto, layers=[lambda b: CountingLayer(b, calls)]
        ) as c:
            await c.sync(src, f"s3://{bkt}/t/")
            backend, _ = await c.backend(f"s3://{bkt}/t/")
            engine = c._engine
            calls.clear()
            out = [await _lookup(engine, backend, "t/", names, Compare.DEFAULT, None)]
            heads, lists = calls["stat"], calls["list_page"] + calls["list"]
            calls.clear()
            out.append(await _lookup(engine, backend, "t/", names, Compare.DEFAULT, 500))
            out.append({"heads": heads, "lists": lists, "then": dict(calls)})
            return out

    by_head, by_list, seen = asyncio.run(go())
    assert seen["heads"] == len(names)  # 6 names, no count known: a HEAD each
    assert seen["lists"] == 0
    assert seen["then"].get("stat", 0) == 0  # 500 keys = 1 page < 6 HEADs: one listing
    assert sum(seen["then"].values()) == 1
    assert {n: i.size for n, i in by_head.items()} == {n: i.size for n, i in by_list.items()}
    assert set(by_list) == set(names)


def test_layers_that_cannot_travel_are_refused_at_start(
    moto: str, bkt: str, make_tree: Callable[..., Path]
) -> None:
    src = make_tree({"a": 1})

    async def go() -> None:
        config = CONFIG.evolve(processes=2)
        async with synxfer.Client(config, endpoint_url=moto, layers=[lambda b: b]) as c:
            await c.sync(src, f"s3://{bkt}/l/")

    with pytest.raises(synxfer.ConfigError, match="picklable"):
        asyncio.run(go())
    assert objects(moto, bkt, "l/") == {}


def test_an_interrupted_multipart_upload_resumes_in_its_shard(
    moto: str, bkt: str, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    """Ctrl-C keeps the shard's journal; the rerun pins the file to that shard
    and sends only the parts the server does not have."""
    import sqlite3

    src = make_tree({"big.bin": 8 * PART, **{f"s{i}": 50_000 for i in range(8)}})
    state = tmp_path / "state"
    args = [str(src), f"s3://{bkt}/r/", "--endpoint-url", moto, "--processes", "2"]
    args += ["--max-threads", "2", "--part-size", "5MiB", "--state-dir", str(state), "--json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "synxfer.cli.main", "sync", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def parts() -> int:
        n = 0
        for journal in state.glob("shards/*/journal.sqlite3"):
            with contextlib.suppress(sqlite3.Error):
                db = sqlite3.connect(journal)
                n += db.execute("SELECT count(*) FROM upload_parts").fetchone()[0]
                db.close()
        return n

    deadline = time.monotonic() + 60
    while parts() < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    held = parts()
    assert held >= 2, "the big file finished before it could be interrupted"
    rerun = run_cli("sync", *args)
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout.splitlines()[-1])
    assert summary["bytes_uploaded"] <= (8 - held) * PART + 8 * 50_000
    assert parts() == 0
    assert objects(moto, bkt, "r/")["big.bin"] == (src / "big.bin").read_bytes()


def test_read_pins_takes_a_relative_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative --state-dir / XDG_CACHE_HOME: the shards' journals still open (as_uri needs
    an absolute path; the bench harness's relative scratch dir found this)."""
    import sqlite3

    from synxfer._scaleout._shards import read_pins, shard_journal_dir

    monkeypatch.chdir(tmp_path)
    journal = shard_journal_dir("state", 1) / "journal.sqlite3"
    journal.parent.mkdir(parents=True)
    db = sqlite3.connect(journal)
    db.executescript("CREATE TABLE uploads (dest TEXT); CREATE TABLE downloads (dest TEXT);")
    db.execute("INSERT INTO downloads VALUES ('d/x')")
    db.commit()
    db.close()
    assert read_pins("state", 2, ["d/x", "d/y"]) == [1, None]
