"""Large GET bodies received off the event loop (``recv_threads``, decision 0013).

Raw asyncio servers on 127.0.0.1 send exactly the answers each case needs;
``Connection._receive_body`` is wrapped to see which bodies went to a
worker thread, and when each thread let go of the body.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import ssl
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from synxfer import ConfigError, MiB, TransientError
from synxfer.backend import BackendOptions, HttpClient, HttpResponse
from synxfer.backend._protocol import OFFLOAD_MIN, Connection
from synxfer_s3 import S3Backend

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def raw_server(
    handler: Handler, ssl_ctx: ssl.SSLContext | None = None
) -> AsyncIterator[dict[str, Any]]:
    """An asyncio TCP server on 127.0.0.1; yields ``{"port", "connections"}``."""
    state: dict[str, Any] = {"connections": 0}

    async def wrapped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state["connections"] += 1
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(wrapped, "127.0.0.1", 0, ssl=ssl_ctx)
    state["port"] = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()


async def read_request(reader: asyncio.StreamReader) -> str:
    head = await reader.readuntil(b"\r\n\r\n")
    return head.decode("latin-1").split("\r\n")[0]


async def get(client: HttpClient, port: int, path: str = "/", **kw: Any) -> HttpResponse:
    scheme = kw.pop("scheme", "http")
    return await client.request(
        "GET", scheme, "127.0.0.1", port, path, {"host": f"127.0.0.1:{port}"}, **kw
    )


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every body a receiver thread took: its thread's name, bytes, start and end."""
    seen: list[dict[str, Any]] = []
    original = Connection._receive_body

    def spy(self: Connection, job: Any) -> None:
        entry: dict[str, Any] = {
            "thread": threading.current_thread().name,
            "start": time.monotonic(),
            "from": job.got,
        }
        seen.append(entry)
        try:
            original(self, job)
        finally:
            entry["end"] = time.monotonic()
            entry["got"] = job.got

    monkeypatch.setattr(Connection, "_receive_body", spy)
    return seen


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def body_handler(payload: bytes, count: int) -> Handler:
    """Answer ``count`` GETs with ``payload``, written in pieces (a real network's pace)."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(count):
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload))
            for i in range(0, len(payload), 256 * 1024):
                writer.write(payload[i : i + 256 * 1024])
                await writer.drain()

    return handler


async def test_big_body_in_a_thread_is_intact_and_the_connection_reused(
    threads: list[dict[str, Any]],
) -> None:
    payload = random.Random(13).randbytes(9 * MiB + 7)
    async with raw_server(body_handler(payload, 3)) as srv:
        client = HttpClient(recv_threads=True, max_connections=2)
        assert client.receiver is not None
        assert client.receiver.threads == 2
        for _ in range(2):
            sink = bytearray(len(payload) + 5)
            answer = await get(client, srv["port"], sink=memoryview(sink))
            assert answer.status == 200
            assert answer.length == len(payload)
            assert sink[: len(payload)] == payload
            assert sink[len(payload) :] == bytes(5)
        # Without a sink, into a buffer of the body's size: the same path.
        answer = await get(client, srv["port"])
        assert bytes(answer.body) == payload
        assert client.receiver.busy == 0
        await client.aclose()
    assert srv["connections"] == 1  # reused after each body the thread received
    assert len(threads) == 3
    assert all(t["thread"].startswith("synxfer-s3-recv") for t in threads)
    assert all(t["got"] == len(payload) for t in threads)


async def test_small_and_chunked_bodies_stay_on_the_loop(threads: list[dict[str, Any]]) -> None:
    small = b"s" * (OFFLOAD_MIN - 100)
    chunk = b"c" * (2 * MiB)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(small) + small)
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n0\r\n\r\n")
        await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient(recv_threads=True)
        first = await get(client, srv["port"])
        second = await get(client, srv["port"])
        await client.aclose()
    assert bytes(first.body) == small
    assert bytes(second.body) == chunk
    assert threads == []


async def test_peer_closing_mid_body_is_dropped_and_not_reused(
    threads: list[dict[str, Any]],
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await read_request(reader)
        if "/short" in line:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (4 * MiB))
            writer.write(b"x" * (3 * MiB))
            await writer.drain()
            await asyncio.sleep(0.2)  # the thread has the body by now
            return  # closes the connection
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient(recv_threads=True)
        with pytest.raises(TransientError, match="before the end of the response") as info:
            await get(client, srv["port"], "/short", sink=memoryview(bytearray(4 * MiB)))
        after = await get(client, srv["port"], "/next")
        await client.aclose()
    assert "127.0.0.1" in str(info.value)
    assert bytes(after.body) == b"ok"
    assert srv["connections"] == 2  # the broken one was not reused
    assert len(threads) == 1
    assert threads[0]["got"] == 3 * MiB


async def test_stalled_body_in_a_thread_trips_the_stall_timeout(
    threads: list[dict[str, Any]],
) -> None:
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (8 * MiB))
        for _ in range(6):  # progress for a while (longer than the timeout in all) ...
            writer.write(b"y" * (256 * 1024))
            await writer.drain()
            await asyncio.sleep(0.15)
        await release.wait()  # ... then nothing

    async with raw_server(handler) as srv:
        client = HttpClient(recv_threads=True, read_timeout=0.4)
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(TransientError, match="stalled"):
            await get(client, srv["port"], sink=memoryview(bytearray(8 * MiB)))
        took = loop.time() - start
        release.set()
        await client.aclose()
    assert 0.9 < took < 5  # the thread's progress kept the watchdog quiet at first
    assert len(threads) == 1
    assert threads[0]["got"] >= 1 * MiB
    assert "end" in threads[0]  # the request returned after the thread let go of the sink


async def test_cancelling_mid_body_stops_the_thread_and_leaks_no_fd(
    threads: list[dict[str, Any]],
) -> None:
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line = await read_request(reader)
            if "/slow" in line:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (8 * MiB))
                writer.write(b"z" * (2 * MiB))
                await writer.drain()
                await release.wait()
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient(recv_threads=True, max_connections=1)
        await get(client, srv["port"], "/warm")  # the receiver's executor aside, fds settled
        before = open_fds()
        task = asyncio.create_task(
            get(client, srv["port"], "/slow", sink=memoryview(bytearray(8 * MiB)))
        )
        for _ in range(200):
            await asyncio.sleep(0.01)
            if threads and client.receiver is not None and client.receiver.busy:
                break
        assert threads, "the body never reached a receiver thread"
        await asyncio.sleep(0.1)
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert "end" in threads[0]  # done before the cancelled request returned
        assert threads[0]["end"] - cancelled_at < 1.0
        assert threads[0]["got"] < 8 * MiB
        # The pool's slot came back: the next request gets a new connection.
        again = await get(client, srv["port"], "/again")
        assert bytes(again.body) == b"ok"
        await client.aclose()
        release.set()
        await asyncio.sleep(0.05)
        assert open_fds() <= before
    assert srv["connections"] == 2  # /warm and /slow on one, /again on a new one


async def test_receiver_threads_are_bounded(threads: list[dict[str, Any]]) -> None:
    """More bodies than threads at once (two hosts' pools): the rest stay on the loop."""
    payload = random.Random(5).randbytes(3 * MiB)
    async with (
        raw_server(body_handler(payload, 1)) as one,
        raw_server(body_handler(payload, 1)) as two,
    ):
        client = HttpClient(recv_threads=True, max_connections=1)
        answers = await asyncio.gather(get(client, one["port"]), get(client, two["port"]))
        await client.aclose()
    assert all(bytes(a.body) == payload for a in answers)
    assert 1 <= len(threads) <= 2


async def test_option_off_changes_nothing(threads: list[dict[str, Any]]) -> None:
    payload = random.Random(3).randbytes(4 * MiB)
    async with raw_server(body_handler(payload, 2)) as srv:
        client = HttpClient()
        assert client.receiver is None
        for _ in range(2):
            assert bytes((await get(client, srv["port"])).body) == payload
        await client.aclose()
    assert threads == []
    assert srv["connections"] == 1


def test_backend_option_parsing() -> None:
    default = S3Backend("b", BackendOptions(endpoint_url="http://127.0.0.1:9"))
    assert default.recv_off_loop is S3Backend.recv_threads
    on = S3Backend("b", BackendOptions(extra={"recv_threads": "true"}))
    off = S3Backend("b", BackendOptions(extra={"recv_threads": "false"}))
    assert (on.recv_off_loop, off.recv_off_loop) == (True, False)
    with pytest.raises(ConfigError, match="recv_threads"):
        S3Backend("b", BackendOptions(extra={"recv_threads": "maybe"}))


async def test_tls_bodies_stay_on_the_loop(
    tls_files: tuple[Path, Path], threads: list[dict[str, Any]]
) -> None:
    cert, key = tls_files
    payload = random.Random(21).randbytes(3 * MiB + 1)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    async with raw_server(body_handler(payload, 2), server_ctx) as srv:
        client = HttpClient(recv_threads=True, ca_bundle=str(cert))
        for _ in range(2):
            sink = bytearray(len(payload))
            answer = await get(client, srv["port"], scheme="https", sink=memoryview(sink))
            assert answer.length == len(payload)
            assert sink == payload
        await client.aclose()
    assert threads == []
    assert srv["connections"] == 1


async def test_ranged_gets_from_moto_in_threads(
    s3_endpoint: str, bucket: str, threads: list[dict[str, Any]]
) -> None:
    """A real S3 server (moto over HTTP): ranges into one buffer, intact (moto closes
    connections after each answer: reuse is tested on the raw servers above)."""
    from synxfer_s3._core import S3Wire
    from synxfer_s3._credentials import StaticCredentials, credentials_from_env

    creds = credentials_from_env()
    assert creds is not None
    data = random.Random(34).randbytes(6 * MiB + 5000)
    async with S3Wire(
        region="us-east-1",
        credentials=StaticCredentials(creds),
        endpoint_url=s3_endpoint,
        max_connections=1,
        recv_threads=True,
    ) as wire:
        await wire.put_object(bucket, "big", data)
        buf = bytearray(len(data))
        step = 3 * MiB
        for start in range(0, len(data), step):
            view = memoryview(buf)[start : start + step]
            n, info = await wire.get_object_into(
                bucket, "big", view, offset=start, length=min(step, len(data) - start)
            )
            assert n == len(view)
            assert info.size == len(data)
        assert buf == data
        whole, _ = await wire.get_object(bucket, "big")
        assert bytes(whole) == data
    # 3 MiB, 3 MiB and the whole object went to a thread; the 5000-byte tail stayed.
    assert len(threads) == 3
