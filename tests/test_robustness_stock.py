"""Robustness gaps of issue 33 (items 4-tail, 5, 6), each on stock moto.

Stock moto is moto as ``pip install "moto[server]"`` ships it (the
``stock_moto`` fixture); the faults come from the fault proxy in front of it
(``synxfer_servers.faultproxy``), never from a server shaped to make the
client pass:

* folder markers (keys ending in ``/``): ``rm --recursive`` and ``rb
  --force`` leave none behind, ``rm s3://b/p/`` deletes one, a download
  makes no file of one, fsspec's ``rm(recursive=True)`` removes them;
* a malformed answer (a garbled chunk-size line) is retried, not fatal;
* a listing whose continuation token repeats ends with a clear error;
* SIGTERM stops the CLI as SIGINT does (message, journal kept, exit 143),
  with ``--processes`` workers too;
* a body that goes silent after its head is abandoned after about
  ``read_timeout``, not twice that.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import boto3
import pytest

import synxfer
from synxfer import BackendError, MiB, RetryPolicy, TransferConfig, TransientError
from synxfer.backend import Backend
from synxfer_servers.faultproxy import Fault, FaultProxy

from .conftest import PART, write_tree

SMALL = TransferConfig(max_threads=2, part_size=PART, multipart_threshold=PART)


def _s3(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint)


def _keys(endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    pages = _s3(endpoint).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


@pytest.fixture
def moto(stock_moto: Any) -> str:
    return str(stock_moto.endpoint_url)


@pytest.fixture
def bkt(moto: str) -> str:
    name = f"r-{uuid.uuid4().hex[:16]}"
    _s3(moto).create_bucket(Bucket=name)
    return name


@pytest.fixture
async def client(moto: str) -> AsyncIterator[synxfer.Client]:
    async with synxfer.Client(SMALL, endpoint_url=moto) as c:
        yield c


def _innermost(backend: Backend) -> Backend:
    while hasattr(backend, "inner"):
        backend = backend.inner
    return backend


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# --------------------------------------------------------------------------- the proxy's faults


def test_proxy_bad_chunk_garbles_the_first_chunk_size_line(moto: str, bkt: str) -> None:
    import http.client

    _s3(moto).put_object(Bucket=bkt, Key="a.txt", Body=b"hello")
    with FaultProxy(moto, rate=1.0, faults={Fault.BAD_CHUNK: 1}, ops={"list_objects"}) as proxy:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
        conn.request("GET", f"/{bkt}?list-type=2")
        sock = conn.sock
        assert sock is not None
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
        conn.close()
        stats = proxy.snapshot()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    assert b"content-length" not in head.lower()
    size_line, _, rest = body.partition(b"\r\n")
    with pytest.raises(ValueError, match="invalid literal"):
        int(size_line, 16)  # one byte inverted: no hex number
    data, _, _ = rest.rpartition(b"\r\n0\r\n")
    assert b"<Key>a.txt</Key>" in data
    assert int(bytes([size_line[0] ^ 0xFF]) + size_line[1:], 16) == len(data)
    assert stats.faults["bad-chunk"] == 1


def test_proxy_repeat_token_sends_the_request_token_back(moto: str, bkt: str) -> None:
    s3 = _s3(moto)
    for i in range(3):
        s3.put_object(Bucket=bkt, Key=f"k{i}", Body=b"x")
    faults = {Fault.REPEAT_TOKEN: 1}
    with FaultProxy(moto, rate=1.0, faults=faults, ops={"list_objects"}) as proxy:
        client = _s3(proxy.url)
        first = client.list_objects_v2(Bucket=bkt, MaxKeys=1)  # no token: untouched
        token = first["NextContinuationToken"]
        assert [o["Key"] for o in first["Contents"]] == ["k0"]
        second = client.list_objects_v2(Bucket=bkt, MaxKeys=1, ContinuationToken=token)
        assert second["NextContinuationToken"] == token
        assert [o["Key"] for o in second["Contents"]] == ["k1"]
        # Even the last page says there is more, with the same token.
        last = client.list_objects_v2(Bucket=bkt, MaxKeys=5, ContinuationToken=token)
        assert last["IsTruncated"] is True
        assert last["NextContinuationToken"] == token
        stats = proxy.snapshot()
    assert stats.faults["repeat-token"] == 2  # the first page drew nothing


# --------------------------------------------------------------------------- folder markers


def _with_markers(moto: str, bkt: str) -> None:
    s3 = _s3(moto)
    for key in ("mk/", "mk/sub/", "lone/", "p/x.txt"):
        s3.put_object(Bucket=bkt, Key=key, Body=b"")
    s3.put_object(Bucket=bkt, Key="mk/a.txt", Body=b"a")
    s3.put_object(Bucket=bkt, Key="mk/sub/b.txt", Body=b"bb")


async def test_rm_recursive_and_rm_of_a_marker_leave_no_marker(
    client: synxfer.Client, moto: str, bkt: str
) -> None:
    _with_markers(moto, bkt)
    result = await client.rm(f"s3://{bkt}/mk", recursive=True)
    assert result.ok
    assert result.files_deleted == 4
    assert _keys(moto, bkt) == ["lone/", "p/x.txt"]
    # A single marker is an object: deleted, as aws s3 rm does.
    assert (await client.rm(f"s3://{bkt}/lone/")).files_deleted == 1
    assert _keys(moto, bkt) == ["p/x.txt"]
    # A prefix without a marker still says what to do; nothing at all is NotFound.
    with pytest.raises(synxfer.ConfigError, match="recursive"):
        await client.rm(f"s3://{bkt}/p/")
    with pytest.raises(synxfer.NotFound, match="no such object"):
        await client.rm(f"s3://{bkt}/none/")


def test_cli_rb_force_leaves_nothing_and_a_download_makes_no_file_of_a_marker(
    moto: str, bkt: str, tmp_path: Path
) -> None:
    _with_markers(moto, bkt)
    down = _cli("sync", f"s3://{bkt}/", str(tmp_path / "down"), "--endpoint-url", moto)
    assert down.returncode == 0, down.stderr
    landed = sorted(
        str(p.relative_to(tmp_path / "down")) for p in (tmp_path / "down").rglob("*") if p.is_file()
    )
    assert landed == ["mk/a.txt", "mk/sub/b.txt", "p/x.txt"]
    assert not (tmp_path / "down" / "lone").exists()  # a lone marker makes no directory
    rb = _cli("rb", f"s3://{bkt}", "--force", "--endpoint-url", moto)
    assert rb.returncode == 0, rb.stderr
    assert "remove_bucket" in rb.stdout
    buckets = [b["Name"] for b in _s3(moto).list_buckets()["Buckets"]]
    assert bkt not in buckets


def test_fsspec_rm_recursive_removes_markers(moto: str, bkt: str) -> None:
    import fsspec

    _with_markers(moto, bkt)
    fs = fsspec.filesystem("sx+s3", endpoint_url=moto, skip_instance_cache=True)
    try:
        fs.rm(f"{bkt}/mk", recursive=True)
        assert _keys(moto, bkt) == ["lone/", "p/x.txt"]
        fs.rm(f"{bkt}/lone", recursive=True)
        assert _keys(moto, bkt) == ["p/x.txt"]
    finally:
        fs.close()


async def test_markers_leave_nothing_on_every_server(
    s3_world: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same on SeaweedFS (a filesystem underneath, where ``d/`` is a
    directory) and Ceph RGW as on stock moto."""
    s3_world.apply(monkeypatch)
    s3 = s3_world.admin()
    bkt = s3_world.new_bucket()
    for key in ("mk/", "mk/sub/", "lone/"):
        s3.put_object(Bucket=bkt, Key=key, Body=b"")
    s3.put_object(Bucket=bkt, Key="mk/sub/b.txt", Body=b"bb")
    async with synxfer.Client(SMALL, endpoint_url=s3_world.endpoint_url) as c:
        down = await c.sync(f"s3://{bkt}/", tmp_path / "down")
        assert down.ok
        landed = [p for p in (tmp_path / "down").rglob("*") if p.is_file()]
        assert [p.relative_to(tmp_path / "down").as_posix() for p in landed] == ["mk/sub/b.txt"]
        assert (await c.rm(f"s3://{bkt}/lone/")).ok
        assert (await c.rm(f"s3://{bkt}/mk", recursive=True)).ok
        left = s3.list_objects_v2(Bucket=bkt).get("Contents", [])
        assert [o["Key"] for o in left] == []
        assert (await c.remove_bucket(f"s3://{bkt}", force=True)).ok
    assert bkt not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


# --------------------------------------------------------------------------- malformed answers


async def test_a_garbled_chunk_size_line_is_retried(moto: str, bkt: str) -> None:
    s3 = _s3(moto)
    for i in range(3):
        s3.put_object(Bucket=bkt, Key=f"d/{i}.txt", Body=b"x" * i)
    faults = {Fault.BAD_CHUNK: 1}
    config = TransferConfig(retry=RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.05))
    with FaultProxy(moto, rate=1.0, faults=faults, ops={"list_objects"}, max_faults=1) as proxy:
        async with synxfer.Client(config, endpoint_url=proxy.url) as c:
            listed = [i async for i in c.ls(f"s3://{bkt}/d/", recursive=True)]
        stats = proxy.snapshot()
    assert stats.faults["bad-chunk"] == 1
    assert sorted(i.key for i in listed if isinstance(i, synxfer.ObjectInfo)) == [
        f"d/{i}.txt" for i in range(3)
    ]


async def test_an_answer_that_is_not_http_stays_permanent() -> None:
    """The other side of the rule: the wrong port fails at once, not after retries."""
    from synxfer.backend import HttpClient

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    http = HttpClient()
    try:
        with pytest.raises(BackendError, match="bad status line") as info:
            await http.request("GET", "http", "127.0.0.1", port, "/", {"host": "x"})
        assert not isinstance(info.value, TransientError)
    finally:
        await http.aclose()
        server.close()
        await server.wait_closed()


# --------------------------------------------------------------------------- repeated cursors


async def test_a_repeated_continuation_token_ends_the_listing(moto: str, bkt: str) -> None:
    s3 = _s3(moto)
    for i in range(4):
        s3.put_object(Bucket=bkt, Key=f"r/{i}", Body=b"x")
    faults = {Fault.REPEAT_TOKEN: 1}
    with FaultProxy(moto, rate=1.0, faults=faults, ops={"list_objects"}) as proxy:
        async with synxfer.Client(SMALL, endpoint_url=proxy.url) as c:
            backend, _ = await c.backend(f"s3://{bkt}/r/")
            _innermost(backend).list_page_size = 1  # type: ignore[attr-defined]
            seen: list[Any] = []

            async def listing() -> None:
                async for item in c.ls(f"s3://{bkt}/r/", recursive=True):
                    seen.append(item)

            async with asyncio.timeout(60):  # without the guard: lists forever
                with pytest.raises(BackendError) as info:
                    await listing()
        lists = proxy.snapshot().ops["list_objects"]
    message = str(info.value)
    assert "continuation token" in message
    assert f"s3://{bkt}/r/" in message
    assert not isinstance(info.value, TransientError)  # a retry would loop the same way
    assert len(seen) == 2  # page 1, page 2 (repeats its token): stop
    assert lists == 2


async def test_sync_down_stops_on_a_repeated_token(moto: str, bkt: str, tmp_path: Path) -> None:
    """The engine's plan lists through the same guard as ``ls``."""
    s3 = _s3(moto)
    for i in range(4):
        s3.put_object(Bucket=bkt, Key=f"s/{i}", Body=b"x")
    faults = {Fault.REPEAT_TOKEN: 1}
    with FaultProxy(moto, rate=1.0, faults=faults, ops={"list_objects"}) as proxy:
        async with synxfer.Client(SMALL, endpoint_url=proxy.url) as c:
            backend, _ = await c.backend(f"s3://{bkt}/s/")
            _innermost(backend).list_page_size = 1  # type: ignore[attr-defined]
            async with asyncio.timeout(60):  # without the guard: lists forever
                with pytest.raises(BackendError, match="continuation token"):
                    await c.sync(f"s3://{bkt}/s/", tmp_path / "d")
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())


def _list_uploads_request(req: Any) -> bool:
    return bool(req.method == "GET" and "uploads" in req.query)


def test_proxy_repeat_token_repeats_list_uploads_markers(moto: str, bkt: str) -> None:
    s3 = _s3(moto)
    first_id = s3.create_multipart_upload(Bucket=bkt, Key="u.bin")["UploadId"]
    faults = {Fault.REPEAT_TOKEN: 1}
    with FaultProxy(moto, rate=1.0, faults=faults, match=_list_uploads_request) as proxy:
        client = _s3(proxy.url)
        page = client.list_multipart_uploads(Bucket=bkt)  # a first page: its last upload next
        assert page["IsTruncated"] is True
        assert (page["NextKeyMarker"], page["NextUploadIdMarker"]) == ("u.bin", first_id)
        again = client.list_multipart_uploads(
            Bucket=bkt, KeyMarker="u.bin", UploadIdMarker=first_id
        )
        assert (again["NextKeyMarker"], again["NextUploadIdMarker"]) == ("u.bin", first_id)
        assert again["IsTruncated"] is True
        assert proxy.snapshot().faults["repeat-token"] == 2


async def test_repeated_list_uploads_markers_end_the_listing(moto: str, bkt: str) -> None:
    _s3(moto).create_multipart_upload(Bucket=bkt, Key="u.bin")
    faults = {Fault.REPEAT_TOKEN: 1}
    with FaultProxy(moto, rate=1.0, faults=faults, match=_list_uploads_request) as proxy:
        async with synxfer.Client(SMALL, endpoint_url=proxy.url) as c:
            backend, _ = await c.backend(f"s3://{bkt}/u.bin")
            async with asyncio.timeout(60):  # without the guard: lists forever
                with pytest.raises(BackendError, match="multipart upload listing") as info:
                    await _innermost(backend).list_uploads("u.bin")
        requests = proxy.snapshot().faults["repeat-token"]
    assert f"s3://{bkt}/u.bin" in str(info.value)
    assert requests == 2  # the first page, then the one that repeats it


# --------------------------------------------------------------------------- SIGTERM


def _wait_for(pred: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_sigterm_mid_upload_keeps_the_journal_and_exits_143(
    moto: str, bkt: str, tmp_path: Path
) -> None:
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(4 * PART))
    url = f"s3://{bkt}/big.bin"
    common = ["--part-size", "5MiB", "--max-threads", "1"]

    def third_part(req: Any) -> bool:
        return req.op == "upload_part" and req.query.get("partNumber") == "3"

    faults = {Fault.STALL: 1}
    with FaultProxy(moto, rate=1.0, faults=faults, match=third_part, stall_seconds=60) as proxy:
        command = ["cp", str(src), url, *common, "--endpoint-url", proxy.url]
        proc = subprocess.Popen(
            [sys.executable, "-m", "synxfer.cli.main", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_for(lambda: proxy.snapshot().faults["stall"] >= 1, "part 3 to stall")
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM); rerun the same command to continue" in err
    assert "Traceback" not in err, err
    # The upload was kept (not aborted): the rerun continues it.
    pending = _s3(moto).list_multipart_uploads(Bucket=bkt).get("Uploads", [])
    assert [u["Key"] for u in pending] == ["big.bin"]
    with FaultProxy(moto) as counter:
        rerun = _cli("cp", str(src), url, "--endpoint-url", counter.url, *common)
        ops = counter.snapshot().ops
    assert rerun.returncode == 0, rerun.stderr
    assert ops["create_multipart"] == 0  # the journaled upload was resumed
    body = _s3(moto).get_object(Bucket=bkt, Key="big.bin")["Body"].read()
    assert body == src.read_bytes()


def _children(pid: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=False
    )
    return [int(p) for p in out.stdout.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("to", ["group", "driver"])
def test_sigterm_stops_processes_workers(moto: str, bkt: str, tmp_path: Path, to: str) -> None:
    """``timeout`` and batch schedulers signal the whole process group;
    Kubernetes signals the container's first process, the driver, alone."""
    src = tmp_path / "tree"
    write_tree(src, {f"{i:03}.bin": 100_000 + i for i in range(80)})
    args = ["sync", str(src), f"s3://{bkt}/t/", "--endpoint-url", moto, "--processes", "2"]
    args += ["--max-threads", "2", "--json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "synxfer.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    try:
        seen = 0
        for line in proc.stdout:  # wait until the workers are moving files
            seen += '"done"' in line
            if seen >= 5:
                break
        workers = _children(proc.pid)
        if to == "group":
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, err
        assert "terminated (SIGTERM)" in err
        assert "Traceback" not in err, err
        _wait_for(lambda: not [p for p in workers if _alive(p)], "the workers to end", 30)
    finally:
        with contextlib.suppress(ProcessLookupError):  # what is left of the group, if any
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    rerun = _cli(*args)
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout.splitlines()[-1])
    assert summary["files_transferred"] + summary["files_skipped"] == 80
    assert summary["files_skipped"] >= 5


# --------------------------------------------------------------------------- stalls


@pytest.fixture
def one_object(moto: str, bkt: str) -> str:
    _s3(moto).put_object(Bucket=bkt, Key="o.bin", Body=b"z" * MiB)
    return f"s3://{bkt}/o.bin"


@pytest.mark.parametrize("fault", [Fault.TRICKLE, Fault.STALL], ids=["after-head", "silent"])
async def test_a_silent_body_is_abandoned_after_read_timeout(
    moto: str, one_object: str, fault: Fault
) -> None:
    """TRICKLE at 0 bytes/s sends the head, then nothing: the head's arrival
    once hid the silence from the watchdog for a second ``read_timeout``.
    STALL sends nothing at all (abandoned after one ``read_timeout`` before
    and after the fix)."""
    read_timeout = 2.0
    config = TransferConfig(read_timeout=read_timeout, retry=RetryPolicy(attempts=1))
    faults = {fault: 1}
    with FaultProxy(
        moto,
        rate=1.0,
        faults=faults,
        ops={"get_object"},
        stall_seconds=30,
        trickle_bytes_per_second=0,
    ) as proxy:
        async with synxfer.Client(config, endpoint_url=proxy.url) as c:
            backend, key = await c.backend(one_object)
            loop = asyncio.get_running_loop()
            start = loop.time()
            with pytest.raises(TransientError, match="stalled"):
                await backend.read(key, 0, 1024)
            elapsed = loop.time() - start
        assert proxy.snapshot().faults[fault.value] == 1
    # Order of magnitude only: one read_timeout of silence (plus a quarter), not two.
    assert read_timeout * 0.9 <= elapsed < read_timeout * 1.9, elapsed
