"""Resume: an interrupted run, rerun, sends only what is missing.

Interruptions here are cancellations of the running operation (what Ctrl-C
does under ``asyncio.run``); ``test_kill_9_then_rerun`` kills the CLI
process outright.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import boto3
import pytest

import synxfer
import synxfer.backend
from synxfer import EventKind
from synxfer.engine.journal import Journal, ResumeJournal
from synxfer.layers import Layer
from synxfer_servers.s3 import counting_moto_server

from .conftest import PART, SMALL, CountingLayer, tree


def _config(state: Path, **kw: Any) -> synxfer.TransferConfig:
    return SMALL.evolve(state_dir=str(state), **kw)


async def _interrupt_after(
    op: Callable[[synxfer.Client], Any],
    client: synxfer.Client,
    events: list[synxfer.Event],
    n: int,
    *,
    of: str | None = None,
) -> None:
    """Run ``op`` and cancel it once ``n`` PROGRESS events (of the file whose
    source ends with ``of``, if given) have arrived."""
    task = asyncio.ensure_future(op(client))

    def counted(e: synxfer.Event) -> bool:
        return e.kind is EventKind.PROGRESS and (of is None or e.src.endswith(of))

    while sum(map(counted, events)) < n:
        assert not task.done(), "finished before it could be interrupted"
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def _uploads_in_progress(endpoint: str, bucket: str) -> list[str]:
    resp = boto3.client("s3", endpoint_url=endpoint).list_multipart_uploads(Bucket=bucket)
    return [u["UploadId"] for u in resp.get("Uploads", [])]


def _parts_on_server(endpoint: str, bucket: str) -> set[int]:
    """The part numbers of the one upload in progress in ``bucket``."""
    s3 = boto3.client("s3", endpoint_url=endpoint)
    (upload,) = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    listed = s3.list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    return {p["PartNumber"] for p in listed.get("Parts", [])}


async def test_interrupted_upload_resumes_with_missing_parts_only(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    src = make_tree({"big.bin": 6 * PART + 123})  # 7 parts
    url = f"s3://{bucket}/p"
    config = _config(tmp_path / "state", max_threads=2)
    events: list[synxfer.Event] = []
    async with synxfer.Client(config, endpoint_url=s3_endpoint, on_event=events.append) as c:
        await _interrupt_after(lambda cl: cl.sync_to(src, url), c, events, 3)
    # Interrupted with a journal: the multipart upload is kept for the rerun.
    assert len(_uploads_in_progress(s3_endpoint, bucket)) == 1
    entry = Journal(tmp_path / "state").upload_get(f"s3://{bucket}/p/big.bin")
    assert entry is not None
    journaled = len(entry.parts)
    assert journaled >= 3  # every part reported as sent was journaled first
    # Parts the server took while the run was being cancelled are on the
    # server but not in the journal: kept too, their ETag being their MD5.
    on_server = _parts_on_server(s3_endpoint, bucket)
    assert set(entry.parts) <= on_server

    counts: Counter[str] = Counter()
    async with synxfer.Client(
        config, endpoint_url=s3_endpoint, layers=[lambda b: CountingLayer(b, counts)]
    ) as c:
        r = await c.sync_to(src, url)
    assert r.ok
    assert counts["create_multipart"] == 0  # the same upload, continued
    assert counts["list_parts"] == 1
    assert counts["upload_part"] == 7 - len(on_server)
    sizes = dict.fromkeys(range(1, 7), PART) | {7: 123}
    assert r.bytes_transferred == sum(v for n, v in sizes.items() if n not in on_server)
    assert _uploads_in_progress(s3_endpoint, bucket) == []
    data = (
        boto3.client("s3", endpoint_url=s3_endpoint)
        .get_object(Bucket=bucket, Key="p/big.bin")["Body"]
        .read()
    )
    assert data == (src / "big.bin").read_bytes()


async def test_file_changed_since_interruption_starts_over(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    src = make_tree({"big.bin": 4 * PART})
    url = f"s3://{bucket}/p"
    config = _config(tmp_path / "state", max_threads=1)
    events: list[synxfer.Event] = []
    async with synxfer.Client(config, endpoint_url=s3_endpoint, on_event=events.append) as c:
        await _interrupt_after(lambda cl: cl.sync_to(src, url), c, events, 2)
    (src / "big.bin").write_bytes(os.urandom(4 * PART))  # new content, new mtime
    counts: Counter[str] = Counter()
    async with synxfer.Client(
        config, endpoint_url=s3_endpoint, layers=[lambda b: CountingLayer(b, counts)]
    ) as c:
        r = await c.sync_to(src, url)
    assert r.ok
    assert counts["abort_multipart"] == 1  # the stale upload is not left behind
    assert counts["upload_part"] == 4
    assert _uploads_in_progress(s3_endpoint, bucket) == []
    got = boto3.client("s3", endpoint_url=s3_endpoint).get_object(Bucket=bucket, Key="p/big.bin")
    assert got["Body"].read() == (src / "big.bin").read_bytes()


async def test_abandoned_upload_is_aborted_on_next_sync(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    src = make_tree({"big.bin": 3 * PART, "small": 10})
    url = f"s3://{bucket}/p"
    config = _config(tmp_path / "state", max_threads=1)
    events: list[synxfer.Event] = []
    async with synxfer.Client(config, endpoint_url=s3_endpoint, on_event=events.append) as c:
        # A part of big.bin reported means its upload was journaled (parts
        # are journaled before they are reported): the interruption keeps it.
        await _interrupt_after(lambda cl: cl.sync_to(src, url), c, events, 1, of="big.bin")
    assert len(_uploads_in_progress(s3_endpoint, bucket)) == 1
    (src / "big.bin").unlink()  # the user gave up on that file
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        assert (await c.sync_to(src, url)).ok
    assert _uploads_in_progress(s3_endpoint, bucket) == []


class _CancelAfterCreate(Layer):
    """Cancels ``target`` the moment CreateMultipartUpload's reply has arrived,
    before the engine could journal the upload (as a Ctrl-C landing then would)."""

    def __init__(self, inner: synxfer.backend.Backend, target: list[asyncio.Task[Any]]) -> None:
        super().__init__(inner)
        self.target = target
        self.created: list[str] = []

    async def create_multipart(
        self, key: str, options: synxfer.WriteOptions
    ) -> synxfer.MultipartUpload:
        upload = await self.inner.create_multipart(key, options)
        self.created.append(upload.upload_id)
        for task in self.target:
            task.cancel()
        return upload


@pytest.mark.parametrize("where", ["after-create", "journal-await"])
async def test_cancel_between_create_and_journal_leaks_no_upload(
    where: str,
    bucket: str,
    make_tree: Callable[..., Path],
    s3_endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 11: a sync cancelled after CreateMultipartUpload returned but before
    the upload is journaled must not leave that upload on the server.

    ``after-create``: the run is cancelled the instant the create's reply
    arrives. ``journal-await``: the cancellation lands exactly at the await of
    the journal write (held there by a gate that never opens), so no row can
    have been written: without a fix, the upload is lost for ever.
    """
    src = make_tree({"big.bin": 2 * PART})
    url = f"s3://{bucket}/p"
    state = tmp_path / "state"
    config = _config(state, max_threads=1)
    target: list[asyncio.Task[Any]] = []
    layers: list[_CancelAfterCreate] = []
    gate_reached = asyncio.Event()
    if where == "journal-await":
        real_start = ResumeJournal.upload_start

        async def gated_start(self: ResumeJournal, *args: Any) -> None:
            gate_reached.set()
            await asyncio.Event().wait()  # never opens: the cancellation lands here
            await real_start(self, *args)

        monkeypatch.setattr(ResumeJournal, "upload_start", gated_start)

    def layer(b: synxfer.backend.Backend) -> synxfer.backend.Backend:
        layers.append(_CancelAfterCreate(b, target if where == "after-create" else []))
        return layers[-1]

    async with synxfer.Client(config, endpoint_url=s3_endpoint, layers=[layer]) as c:
        target.append(asyncio.ensure_future(c.sync_to(src, url)))
        if where == "journal-await":
            await asyncio.wait_for(gate_reached.wait(), 30)
            target[0].cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(target[0], 90)
    assert [len(x.created) for x in layers] == [1]  # the upload was created
    assert _uploads_in_progress(s3_endpoint, bucket) == []
    # Nor is a row left pointing at an upload that no longer exists.
    assert Journal(state).upload_get(f"s3://{bucket}/p/big.bin") is None


async def test_without_journal_an_interrupted_upload_is_aborted(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str
) -> None:
    src = make_tree({"big.bin": 3 * PART})
    events: list[synxfer.Event] = []
    config = SMALL.evolve(resume=False, max_threads=1)
    async with synxfer.Client(config, endpoint_url=s3_endpoint, on_event=events.append) as c:
        await _interrupt_after(lambda cl: cl.sync_to(src, f"s3://{bucket}/p"), c, events, 1)
    assert _uploads_in_progress(s3_endpoint, bucket) == []


async def test_interrupted_download_resumes_with_missing_ranges_only(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    src = make_tree({"big.bin": 5 * PART + 7, "small.txt": 5})
    url = f"s3://{bucket}/p"
    config = _config(tmp_path / "state", max_threads=2)
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        await c.sync_to(src, url)
    dst = tmp_path / "dst"
    events: list[synxfer.Event] = []
    async with synxfer.Client(config, endpoint_url=s3_endpoint, on_event=events.append) as c:
        await _interrupt_after(lambda cl: cl.sync_from(url, dst), c, events, 3)
    # Nothing that looks whole: only the hidden temp file of the big one.
    visible = [p.name for p in dst.rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert "big.bin" not in visible
    assert [p.name for p in dst.glob(".*")] == [".big.bin.synxfer-part"]

    entry = Journal(tmp_path / "state").download_get(str(dst / "big.bin"))
    assert entry is not None
    journaled = len(entry.parts)
    assert journaled >= 2  # every part reported (3 events, one may be small.txt) was journaled

    counts: Counter[str] = Counter()
    async with synxfer.Client(
        config, endpoint_url=s3_endpoint, layers=[lambda b: CountingLayer(b, counts)]
    ) as c:
        r = await c.sync_from(url, dst)
    assert r.ok
    small_left = "small.txt" not in visible
    assert counts["read_into"] == (6 - journaled) + small_left
    lengths = {1: PART, 2: PART, 3: PART, 4: PART, 5: PART, 6: 7}
    missing = sum(n for number, n in lengths.items() if number not in entry.parts)
    assert r.bytes_transferred == missing + 5 * small_left
    assert tree(dst) == tree(src)  # bytes and mtimes; the temp file is gone


async def test_object_changed_since_interruption_downloads_afresh(
    bucket: str, make_tree: Callable[..., Path], s3_endpoint: str, tmp_path: Path
) -> None:
    src = make_tree({"big.bin": 4 * PART})
    url = f"s3://{bucket}/p"
    config = _config(tmp_path / "state", max_threads=1)
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        await c.sync_to(src, url)
    dst = tmp_path / "dst"
    events: list[synxfer.Event] = []
    async with synxfer.Client(config, endpoint_url=s3_endpoint, on_event=events.append) as c:
        await _interrupt_after(lambda cl: cl.sync_from(url, dst), c, events, 2)
    (src / "big.bin").write_bytes(os.urandom(4 * PART))
    later = time.time_ns() + 10_000_000_000  # clearly newer than the object
    os.utime(src / "big.bin", ns=(later, later))
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        assert (await c.sync_to(src, url)).files_transferred == 1
        r = await c.sync_from(url, dst)
    assert r.ok
    assert r.bytes_transferred == 4 * PART
    assert tree(dst) == tree(src)


def test_kill_9_then_rerun(make_tree: Callable[..., Path], tmp_path: Path) -> None:
    """kill -9 the CLI mid-sync; the rerun completes, re-sending little.

    The server (in this process) counts upload bytes and is slowed down so
    the kill lands mid-transfer. Extra bytes re-sent must stay below one part
    per file in flight at the kill.
    """
    src = make_tree({**{f"s/{i:03d}": 64 * 1024 for i in range(40)}, "big.bin": 8 * PART})
    total = 40 * 64 * 1024 + 8 * PART
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    with counting_moto_server(delay=0.05) as server:
        boto3.client("s3", endpoint_url=server.endpoint_url).create_bucket(Bucket="kill9")
        cmd = [
            sys.executable, "-m", "synxfer.cli.main", "sync", str(src), "s3://kill9/p",
            "--endpoint-url", server.endpoint_url, "--part-size", "5MiB",
            "--max-threads", "3", "--max-files", "4", "-q",
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while server.snapshot().upload_bytes < total // 2:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        sent_before = server.snapshot().upload_bytes
        assert sent_before < total

        rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        sent_total = server.snapshot().upload_bytes
        s3 = boto3.client("s3", endpoint_url=server.endpoint_url)
        body = s3.get_object(Bucket="kill9", Key="p/big.bin")["Body"].read()
        assert body == (src / "big.bin").read_bytes()
        listed = s3.list_objects_v2(Bucket="kill9", Prefix="p/")["KeyCount"]
        assert listed == 41
        assert s3.list_multipart_uploads(Bucket="kill9").get("Uploads", []) == []
    extra = sent_total - total
    # At most max_threads (3) parts were in flight at the kill.
    assert 0 <= extra <= 3 * PART, f"re-sent {extra} extra bytes"


class _Timeline(Layer):
    """Notes, for a ranged download, what the journal had done when the HEAD
    was asked and when the first range was asked."""

    journal_asked = threading.Event()
    start_written = threading.Event()
    seen: ClassVar[dict[str, bool]] = {}

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        cls = type(self)
        if op == "stat" and "head" not in cls.seen:
            # The journal's lookup goes out while the HEAD is on the wire:
            # give it a moment to arrive (it never does if it waits for us).
            cls.seen["head"] = await asyncio.to_thread(cls.journal_asked.wait, 5)
        if op == "read_into" and "first range" not in cls.seen:
            cls.seen["first range"] = cls.start_written.is_set()
        return await fn(*args)


async def _seeded(
    make_tree: Callable[..., Path],
    files: dict[str, int],
    bucket: str,
    s3_endpoint: str,
    config: synxfer.TransferConfig,
) -> tuple[Path, str]:
    """``files`` made locally and uploaded under ``s3://bucket/p``: the tree and its URL."""
    src = make_tree(files)
    url = f"s3://{bucket}/p"
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        await c.sync_to(src, url)
    return src, url


async def test_the_journal_works_while_the_first_requests_are_on_the_wire(
    bucket: str,
    make_tree: Callable[..., Path],
    s3_endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ranged download asks the journal for an earlier run's entry during
    the HEAD, and writes its own entry while the first ranges are fetched
    (a slow journal delays no request); still, the entry is written before
    any range's record, and removed once the file is whole."""
    config = _config(tmp_path / "state", max_threads=2)
    src, url = await _seeded(make_tree, {"big.bin": 4 * PART + 3}, bucket, s3_endpoint, config)

    order: list[str] = []
    get, start, parts = Journal.download_get, Journal.download_start, Journal.download_parts

    def slow_start(self: Journal, *args: Any) -> None:
        time.sleep(0.5)  # a journal on a slow disk
        start(self, *args)
        order.append("start")
        _Timeline.start_written.set()

    def noted_get(self: Journal, dest: str) -> Any:
        _Timeline.journal_asked.set()
        return get(self, dest)

    def noted_parts(self: Journal, dest: str, temp: str, records: Any) -> None:
        order.extend("part" for _ in records)
        parts(self, dest, temp, records)

    monkeypatch.setattr(Journal, "download_get", noted_get)
    monkeypatch.setattr(Journal, "download_start", slow_start)
    monkeypatch.setattr(Journal, "download_parts", noted_parts)
    _Timeline.journal_asked.clear()
    _Timeline.start_written.clear()
    _Timeline.seen = {}
    async with synxfer.Client(config, endpoint_url=s3_endpoint, layers=[_Timeline]) as c:
        r = await c.sync_from(url, tmp_path / "dst")
    assert r.ok, r.failures
    assert _Timeline.seen == {"head": True, "first range": False}
    assert order[0] == "start"
    assert order.count("part") == 5
    assert Journal(tmp_path / "state").download_get(str(tmp_path / "dst" / "big.bin")) is None
    assert tree(tmp_path / "dst") == tree(src)


async def test_a_fetch_of_two_ranges_is_one_journal_call(
    bucket: str,
    make_tree: Callable[..., Path],
    s3_endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A GET of two adjacent ranges (the default budget, four parts, holds two
    such fetches) records both ranges in one journal call, one transaction,
    not one per range."""
    config = _config(tmp_path / "state")
    # Five ranges: fetches of 2, 2 and 1.
    src, url = await _seeded(make_tree, {"big.bin": 4 * PART + 3}, bucket, s3_endpoint, config)

    calls: list[list[int]] = []
    parts = Journal.download_parts

    def noted_parts(self: Journal, dest: str, temp: str, records: Any) -> None:
        calls.append([number for number, _, _ in records])
        parts(self, dest, temp, records)

    monkeypatch.setattr(Journal, "download_parts", noted_parts)
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        r = await c.sync_from(url, tmp_path / "dst")
    assert r.ok, r.failures
    assert sorted(calls) == [[1, 2], [3, 4], [5]]
    assert tree(tmp_path / "dst") == tree(src)


async def test_a_journal_record_that_fails_fails_the_download(
    bucket: str,
    make_tree: Callable[..., Path],
    s3_endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The entry is written in the background, but its error is not lost:
    the file fails with it, as when the entry was written before the first
    range (errors the journal expects, SQLite's and the disk's, turn resume
    off instead)."""
    config = _config(tmp_path / "state", max_threads=2)
    _, url = await _seeded(make_tree, {"big.bin": 2 * PART + 3}, bucket, s3_endpoint, config)

    def broken_start(self: Journal, *args: Any) -> None:
        raise RuntimeError("journal bug")

    monkeypatch.setattr(Journal, "download_start", broken_start)
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        r = await c.sync_from(url, tmp_path / "dst")
    assert not r.ok
    assert [f.error for f in r.failures] == ["RuntimeError: journal bug"]
    assert not (tmp_path / "dst" / "big.bin").exists()
