"""The SDK's HTTP/1.1 client (``synxfer.backend.HttpClient``, the S3 data path's) on raw servers.

asyncio servers on 127.0.0.1 answer exactly what each test needs:
chunked and read-until-close bodies, interim answers, connections that die
idle or mid-body, stalls, malformed answers, early answers to large
uploads, a bounded pool under cancellation, TLS with a throwaway
certificate, and S3 answers no test server gives (an <Error> in a 200, an
HTML 502, a region redirect).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from synxfer import BackendError, MiB, TransientError
from synxfer.backend import HttpClient, HttpResponse
from synxfer_s3._core import S3Wire, s3_code
from synxfer_s3._credentials import (
    Credentials,
    StaticCredentials,
)

# -- the HTTP client against raw servers ---------------------------------------------------


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[dict[str, Any]]:
    """An asyncio TCP server on 127.0.0.1; yields ``{"port", "connections"}``."""
    state: dict[str, Any] = {"connections": 0, "open": 0, "max_open": 0}

    async def wrapped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state["connections"] += 1
        state["open"] += 1
        state["max_open"] = max(state["max_open"], state["open"])
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            state["open"] -= 1
            writer.close()

    server = await asyncio.start_server(wrapped, "127.0.0.1", 0)
    state["port"] = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()


async def read_request(reader: asyncio.StreamReader) -> tuple[str, bytes]:
    """One request: its request line and body (by Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return lines[0], body


async def get(client: HttpClient, port: int, path: str = "/", **kw: Any) -> HttpResponse:
    method = kw.pop("method", "GET")
    return await client.request(
        method, "http", "127.0.0.1", port, path, {"host": f"127.0.0.1:{port}"}, **kw
    )


async def test_http_chunked_answers_parsed_in_pieces_and_connection_reused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            await read_request(reader)
            answer = (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"
            )
            for i in range(0, len(answer), 3):  # dribble it out
                writer.write(answer[i : i + 3])
                await writer.drain()
                await asyncio.sleep(0)

    async with raw_server(handler) as srv:
        client = HttpClient()
        first = await get(client, srv["port"])
        sink = bytearray(20)
        second = await get(client, srv["port"], sink=memoryview(sink))
        await client.aclose()
    assert (first.status, bytes(first.body)) == (200, b"hello world")
    assert second.length == 11
    assert sink[:11] == b"hello world"
    assert second.body == b""
    assert srv["connections"] == 1  # keep-alive


async def test_http_connection_close_and_http10_until_eof() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _ = await read_request(reader)
        if "close" in line:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        else:
            writer.write(b"HTTP/1.0 200 OK\r\n\r\nuntil the end")
        await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient()
        a = await get(client, srv["port"], "/close")
        b = await get(client, srv["port"], "/close")
        c = await get(client, srv["port"], "/old")
        await client.aclose()
    assert bytes(a.body) == bytes(b.body) == b"ok"
    assert bytes(c.body) == b"until the end"
    assert srv["connections"] == 3


async def test_http_interim_100_continue_is_skipped() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx"
        )

    async with raw_server(handler) as srv:
        client = HttpClient()
        r = await get(client, srv["port"], method="PUT", body=b"abc")
        await client.aclose()
    assert (r.status, bytes(r.body)) == (201, b"x")


def _dropping_handler(seen: list[str]) -> Handler:
    """Answers the first request on a connection; reads the second and drops it
    unanswered (a server closing an idle connection just as a request arrives)."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = True
        while True:
            line, _ = await read_request(reader)
            seen.append(line)
            if not first:
                return  # closed without an answer
            first = False
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    return handler


async def test_http_request_on_a_dead_idle_connection_is_retried_if_idempotent() -> None:
    seen: list[str] = []
    async with raw_server(_dropping_handler(seen)) as srv:
        client = HttpClient()
        assert (await get(client, srv["port"], "/1")).status == 200
        r = await get(client, srv["port"], "/2")  # sent on the idle one, dropped, re-sent
        await client.aclose()
    assert bytes(r.body) == b"ok"
    assert seen == ["GET /1 HTTP/1.1", "GET /2 HTTP/1.1", "GET /2 HTTP/1.1"]
    assert srv["connections"] == 2


async def test_http_post_is_never_resent_silently() -> None:
    seen: list[str] = []
    async with raw_server(_dropping_handler(seen)) as srv:
        client = HttpClient()
        assert (await get(client, srv["port"], "/1", method="POST", body=b"a")).status == 200
        with pytest.raises(TransientError, match="connection closed"):
            await get(client, srv["port"], "/2", method="POST", body=b"b")
        await client.aclose()
    assert seen == ["POST /1 HTTP/1.1", "POST /2 HTTP/1.1"]  # sent once, not twice


async def test_http_reset_mid_body_is_transient() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 5000)
        await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient()
        with pytest.raises(TransientError, match="before the end of the response") as info:
            await get(client, srv["port"], "/obj", sink=memoryview(bytearray(100000)))
        with pytest.raises(TransientError):
            await get(client, srv["port"], "/obj")
        await client.aclose()
    assert "127.0.0.1" in str(info.value)
    assert srv["connections"] == 2  # nothing was retried: bytes of an answer had arrived


async def test_http_stall_is_transient() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await writer.drain()
        await asyncio.sleep(30)

    async with raw_server(handler) as srv:
        client = HttpClient(read_timeout=0.3)
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(TransientError, match="stalled"):
            await get(client, srv["port"])
        assert loop.time() - start < 5
        await client.aclose()


async def test_http_connect_refused_is_transient() -> None:
    async with raw_server(read_request) as srv:  # bind a port, then free it
        port = srv["port"]
    client = HttpClient(connect_timeout=2)
    with pytest.raises(TransientError, match="cannot connect"):
        await get(client, port)
    await client.aclose()


async def test_http_malformed_answer_and_small_sink_are_errors() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _ = await read_request(reader)
        if "garbage" in line:
            writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"y" * 100)
        await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient()
        with pytest.raises(BackendError, match="bad status line") as bad:
            await get(client, srv["port"], "/garbage")
        assert not isinstance(bad.value, TransientError)
        with pytest.raises(BackendError, match="does not fit the 10-byte buffer"):
            await get(client, srv["port"], "/big", sink=memoryview(bytearray(10)))
        await client.aclose()


async def test_http_early_answer_stops_a_large_upload() -> None:
    received = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal received
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 6\r\n\r\ndenied")
        await writer.drain()
        while chunk := await reader.read(65536):  # keep reading, as servers do
            received += len(chunk)

    body = bytearray(32 * MiB)
    async with raw_server(handler) as srv:
        client = HttpClient(write_chunk=64 * 1024)
        r = await get(client, srv["port"], method="PUT", body=body)
        await client.aclose()
    assert (r.status, bytes(r.body)) == (403, b"denied")
    assert received < len(body)


async def test_http_large_body_sent_and_received_intact() -> None:
    payload = random.Random(3).randbytes(3 * MiB + 7)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, body = await read_request(reader)
            if line.startswith("PUT"):
                digest = hashlib.sha256(body).hexdigest().encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n" + digest)
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload))
                writer.write(payload)
            await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient()
        put = await get(client, srv["port"], method="PUT", body=memoryview(payload))
        sink = bytearray(len(payload) + 100)
        got = await get(client, srv["port"], sink=memoryview(sink))
        plain = await get(client, srv["port"])
        await client.aclose()
    assert bytes(put.body) == hashlib.sha256(payload).hexdigest().encode()
    assert got.length == len(payload)
    assert sink[: len(payload)] == payload
    assert bytes(plain.body) == payload
    assert srv["connections"] == 1


async def test_http_body_in_pieces_goes_out_in_order() -> None:
    """A body given as several buffers (a multipart head, the data, its tail)
    is sent in order with one Content-Length: small ones in the head's write,
    large ones in slices across piece boundaries."""
    data = random.Random(4).randbytes(MiB + 3)
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            _, body = await read_request(reader)
            seen.append(body)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient(write_chunk=100_000)
        big = (b"--head--", bytearray(data), memoryview(b"--tail--"))
        small = [b"a", memoryview(b"bc"), bytearray(b"")]
        for body in (big, small):
            r = await get(client, srv["port"], method="POST", body=body)
            assert (r.status, bytes(r.body)) == (200, b"ok")
        await client.aclose()
    assert seen == [b"--head--" + data + b"--tail--", b"abc"]


async def test_http_pool_is_bounded_and_survives_cancellation() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, _ = await read_request(reader)
            await asyncio.sleep(5 if "slow" in line else 0.05)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient(max_connections=2)
        results = await asyncio.gather(*(get(client, srv["port"]) for _ in range(8)))
        assert all(bytes(r.body) == b"ok" for r in results)
        assert srv["max_open"] == 2
        slow = asyncio.create_task(get(client, srv["port"], "/slow"))
        await asyncio.sleep(0.1)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        again = await asyncio.gather(*(get(client, srv["port"]) for _ in range(4)))
        assert all(r.status == 200 for r in again)
        await client.aclose()


async def test_https_round_trip_receives_into_the_sink(tls_files: tuple[Path, Path]) -> None:
    import ssl

    cert, key = tls_files
    payload = random.Random(8).randbytes(2 * MiB + 11)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, body = await read_request(reader)
            if line.startswith("PUT"):
                digest = hashlib.sha256(body).hexdigest().encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n" + digest)
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload))
                writer.write(payload)
            await writer.drain()

    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    state = {"n": 0}

    async def counted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state["n"] += 1
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            await handler(reader, writer)
        writer.close()

    server = await asyncio.start_server(counted, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        trusted = HttpClient(ca_bundle=str(cert))
        headers = {"host": f"127.0.0.1:{port}"}
        put = await trusted.request("PUT", "https", "127.0.0.1", port, "/k", headers, payload)
        sink = bytearray(len(payload))
        got = await trusted.request(
            "GET", "https", "127.0.0.1", port, "/k", headers, sink=memoryview(sink)
        )
        await trusted.aclose()
        assert bytes(put.body) == hashlib.sha256(payload).hexdigest().encode()
        assert got.length == len(payload)
        assert sink == payload
        assert state["n"] == 1
        untrusted = HttpClient()  # the system's store does not know this certificate
        with pytest.raises(BackendError, match="not trusted"):
            await untrusted.request("GET", "https", "127.0.0.1", port, "/k", headers)
        await untrusted.aclose()
    finally:
        server.close()


async def test_wire_maps_answers_no_test_server_gives() -> None:
    """Errors inside a 200, throttling, HTML 5xx pages and redirects, from a raw server."""
    answers = {
        "/b/complete": b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s",
        "/b/copy": b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s",
        "/b/slow": b"HTTP/1.1 503 Slow Down\r\nContent-Length: %d\r\n\r\n%s",
        "/b/html": b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\n\r\n%s",
        "/b/moved": b"HTTP/1.1 301 Moved\r\nx-amz-bucket-region: eu-west-1\r\n"
        b"Content-Length: %d\r\n\r\n%s",
    }
    bodies = {
        "/b/complete": b'<?xml version="1.0"?>\n\n   <Error><Code>InternalError</Code>'
        b"<Message>We encountered an internal error.</Message></Error>",
        "/b/copy": b"<Error><Code>SlowDown</Code><Message>Reduce your rate.</Message></Error>",
        "/b/slow": b"<Error><Code>SlowDown</Code><Message>Please reduce.</Message></Error>",
        "/b/html": b"<html><body>bad gateway</body></html>",
        "/b/moved": b"<Error><Code>PermanentRedirect</Code><Message>Use the right endpoint."
        b"</Message><Region>eu-west-1</Region></Error>",
    }

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, _ = await read_request(reader)
            path = line.split(" ")[1].split("?")[0]
            body = bodies[path]
            writer.write(answers[path] % (len(body), body))
            await writer.drain()

    async with raw_server(handler) as srv:
        wire = S3Wire(
            region="us-east-1",
            credentials=StaticCredentials(Credentials("a", "b")),
            endpoint_url=f"http://127.0.0.1:{srv['port']}",
        )
        with pytest.raises(TransientError, match="in a 200 answer") as in_ok:
            await wire.complete_multipart_upload("b", "complete", "u", [(1, "e")])
        assert s3_code(in_ok.value) == "InternalError"
        with pytest.raises(TransientError) as copy:
            await wire.copy_object("b", "copy", "b", "src")
        assert s3_code(copy.value) == "SlowDown"
        with pytest.raises(TransientError, match="SlowDown") as slow:
            await wire.get_object("b", "slow")
        assert slow.value.status == 503
        with pytest.raises(TransientError, match="HTTP 502"):
            await wire.get_object("b", "html")
        with pytest.raises(BackendError, match="region 'eu-west-1'") as moved:
            await wire.head_object("b", "moved")
        assert not isinstance(moved.value, TransientError)
        await wire.aclose()
