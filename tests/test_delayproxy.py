"""The userspace delay proxy: added delay, order, bandwidth cap, emulated networks.

Timing bounds are generous (two shared cores): they check the order of
magnitude the emulation promises, not milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import AsyncIterator

import pytest

from synxfer_servers.delayproxy import (
    DelayProxy,
    EmulatedNetwork,
    Link,
    NetworkProcess,
    rtt_between,
)


@contextlib.asynccontextmanager
async def echo_server() -> AsyncIterator[int]:
    """A TCP echo server on 127.0.0.1; yields its port."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@contextlib.asynccontextmanager
async def blob_server(size: int) -> AsyncIterator[int]:
    """A server that sends ``size`` bytes to each connection, then closes it."""
    payload = os.urandom(size)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(payload)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def _round_trip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, msg: bytes
) -> float:
    start = time.monotonic()
    writer.write(msg)
    await writer.drain()
    assert await reader.readexactly(len(msg)) == msg
    return time.monotonic() - start


async def test_round_trip_adds_both_one_way_delays() -> None:
    async with (
        echo_server() as port,
        DelayProxy("127.0.0.1", port, delay_up=0.1, delay_down=0.05, handshake=True) as proxy,
    ):
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        first = await _round_trip(reader, writer, b"hello")
        later = [await _round_trip(reader, writer, b"x" * 100) for _ in range(3)]
        writer.close()
    assert min(later) >= 0.14, later
    assert max(later) < 0.6, later
    assert first >= 0.28, f"the first exchange also pays a handshake round trip ({first:.3f}s)"


async def test_order_is_preserved_even_when_the_delay_changes() -> None:
    rng = random.Random(7)
    chunks = [os.urandom(rng.randrange(1, 40_000)) for _ in range(120)]
    async with (
        echo_server() as port,
        DelayProxy("127.0.0.1", port, delay_up=0.03, delay_down=0.03) as proxy,
    ):
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)

        async def send() -> None:
            for i, chunk in enumerate(chunks):
                if i == 60:
                    proxy.set_delay(0.0)  # later chunks may not overtake earlier ones
                writer.write(chunk)
                await writer.drain()
            writer.write_eof()

        sender = asyncio.create_task(send())
        received = await asyncio.wait_for(reader.read(-1), 20)
        await sender
        writer.close()
    assert received == b"".join(chunks)


async def test_delays_overlap_instead_of_collapsing_bandwidth() -> None:
    size = 4 * 1024 * 1024
    async with (
        blob_server(size) as port,
        DelayProxy("127.0.0.1", port, delay_down=0.2) as proxy,
    ):
        start = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        data = await asyncio.wait_for(reader.read(-1), 20)
        elapsed = time.monotonic() - start
        writer.close()
    assert len(data) == size
    # 64 chunks each delayed 0.2 s serially would take ~13 s.
    assert 0.18 <= elapsed < 3.0, elapsed


async def test_bandwidth_cap_is_roughly_honoured() -> None:
    size = 384 * 1024
    rate = 768 * 1024  # bytes per second: ~0.5 s for the payload
    async with (
        blob_server(size) as port,
        DelayProxy("127.0.0.1", port, delay_down=0.05, rate_down=rate) as proxy,
    ):
        start = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        data = await asyncio.wait_for(reader.read(-1), 20)
        elapsed = time.monotonic() - start
        writer.close()
    assert len(data) == size
    assert 0.4 <= elapsed < 2.5, elapsed
    assert proxy.down.bytes == size


def test_link_schedule_is_a_shared_timeline() -> None:
    link = Link(delay=0.1, rate=1000.0)
    assert link.schedule(100, now=0.0) == pytest.approx(0.2)  # 0.1 s to send + 0.1 s delay
    assert link.schedule(100, now=0.0) == pytest.approx(0.3), "queued behind the first chunk"
    assert link.schedule(100, now=5.0) == pytest.approx(5.2), "an idle link starts afresh"
    assert Link(delay=0.25).schedule(10**9, now=1.0) == pytest.approx(1.25)
    with pytest.raises(ValueError, match="delay"):
        Link(delay=-1)


async def test_emulated_network_builds_one_link_per_site_pair() -> None:
    rtts = {frozenset(("A", "B")): 0.2, frozenset(("A", "C")): 0.1, frozenset(("B", "C")): 0.3}
    assert rtt_between(rtts, "B", "A") == 0.2
    assert rtt_between(rtts, "C", "C", local=0.001) == 0.001
    async with (
        echo_server() as pa,
        echo_server() as pb,
        echo_server() as pc,
    ):
        servers = {"A": ("127.0.0.1", pa), "B": ("127.0.0.1", pb), "C": ("127.0.0.1", pc)}
        async with EmulatedNetwork(servers, rtts, clients=["A"], handshake=False) as net:
            assert set(net.site_urls("A")) == {"A", "B", "C"}
            assert net.proxy("A", "B").up.delay == pytest.approx(0.1)
            assert net.proxy("A", "A").up.delay == 0.0
            port = net.proxy("A", "C").port
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            rtt = await _round_trip(reader, writer, b"ping")
            writer.close()
            assert 0.09 <= rtt < 0.5, rtt
            with pytest.raises(KeyError):
                net.proxy("B", "A")  # B is not a client site
        async with EmulatedNetwork(servers, rtts, clients=["B"], local_direct=True) as net:
            assert net.url("B", "B") == f"http://127.0.0.1:{pb}"
            assert net.url("B", "C") != f"http://127.0.0.1:{pc}"
        with pytest.raises(ConnectionRefusedError):  # every proxy stopped with the network
            await asyncio.open_connection("127.0.0.1", port)


async def test_network_in_a_child_process_relays_with_delay() -> None:
    rtts = {frozenset(("A", "B")): 0.2}
    async with echo_server() as pa, echo_server() as pb:
        servers = {"A": ("127.0.0.1", pa), "B": ("127.0.0.1", pb)}
        with NetworkProcess(servers, rtts, clients=["A"], handshake=False) as net:
            port = int(net.url("A", "B").rsplit(":", 1)[1])
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await _round_trip(reader, writer, b"warm")
            rtt = await _round_trip(reader, writer, b"ping")
            writer.close()
            assert 0.18 <= rtt < 0.8, rtt
        with pytest.raises(ConnectionRefusedError):  # the child is gone
            await asyncio.open_connection("127.0.0.1", port)
