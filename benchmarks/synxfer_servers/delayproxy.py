"""Userspace network emulation on loopback: TCP proxies that add delay and cap bandwidth.

The kernel here has no ``netem``, so latency between emulated sites comes
from :class:`DelayProxy`: an asyncio TCP proxy on 127.0.0.1 in front of one
server. Each direction of the proxy is a :class:`Link` with a one-way
``delay`` and an optional ``rate`` (bytes per second):

* Every chunk read from one side is stamped with the time it may be
  delivered -- ``arrival + delay``, or with a rate cap, the end of its
  transmission slot on the link's shared timeline plus ``delay`` -- and a
  writer task delivers chunks in order when their time comes. Delays
  overlap (a link carries ``rate * delay`` bytes in flight, like a real
  one); nothing sleeps per chunk in a way that would collapse bandwidth.
* All connections through one proxy share its two links, so a rate cap is
  the capacity of the link, not of each connection.
* With ``handshake=True`` the first bytes of each connection also wait one
  emulated round trip, as a TCP handshake over the link would.
* Buffers are bounded (``buffer`` bytes per direction per connection): a
  slow reader pushes back on the sender through TCP, as in a real network.

:class:`EmulatedNetwork` builds one proxy per (client site, server site)
pair from an RTT table (delay = RTT / 2 each way), so a client at site X
reaches site Y at ``network.url(X, Y)``. Everything binds 127.0.0.1 and
stops when the context manager exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from .process import ChildProcess, end_process, read_line

__all__ = ["HOST", "DelayProxy", "EmulatedNetwork", "Link", "NetworkProcess", "rtt_between"]

#: The only address proxies bind.
HOST = "127.0.0.1"

_CHUNK = 64 * 1024


class Link:
    """One direction of an emulated link: one-way ``delay`` (s), optional ``rate`` (B/s).

    Shared by every connection through the proxy; both values may be
    changed while traffic flows (new chunks see the new values).
    """

    def __init__(self, delay: float = 0.0, rate: float | None = None) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0 (got {delay})")
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be > 0 bytes/s (got {rate})")
        self.delay = delay
        self.rate = rate
        self._free_at = 0.0
        self.bytes = 0

    def schedule(self, nbytes: int, now: float) -> float:
        """When a chunk of ``nbytes`` arriving ``now`` is delivered at the far end."""
        self.bytes += nbytes
        if self.rate is None:
            return now + self.delay
        self._free_at = max(now, self._free_at) + nbytes / self.rate
        return self._free_at + self.delay

    def __repr__(self) -> str:
        return f"Link(delay={self.delay}, rate={self.rate})"


class DelayProxy:
    """A TCP proxy on 127.0.0.1 in front of ``target``, with an emulated link each way.

    ``up`` carries client -> server bytes, ``down`` server -> client. Use as
    an async context manager; ``port`` and ``url`` are valid once started.
    At most ``max_connections`` connections are served at once; more are
    closed on arrival.
    """

    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        delay_up: float = 0.0,
        delay_down: float = 0.0,
        rate_up: float | None = None,
        rate_down: float | None = None,
        handshake: bool = False,
        buffer: int = 8 * 1024 * 1024,
        max_connections: int = 256,
        name: str = "",
    ) -> None:
        self.target = (target_host, target_port)
        self.up = Link(delay_up, rate_up)
        self.down = Link(delay_down, rate_down)
        self.handshake = handshake
        self.buffer = buffer
        self.max_connections = max_connections
        self.name = name
        self.connections = 0  # accepted so far
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    def __repr__(self) -> str:
        return (
            f"<DelayProxy {self.name or ''} 127.0.0.1:{self.port} -> "
            f"{self.target[0]}:{self.target[1]} up={self.up} down={self.down}>"
        )

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the proxy."""
        return f"http://{HOST}:{self.port}"

    def set_delay(self, up: float, down: float | None = None) -> None:
        """Change the one-way delays (``down`` defaults to ``up``)."""
        if up < 0 or (down is not None and down < 0):
            raise ValueError("delays must be >= 0")
        self.up.delay = up
        self.down.delay = up if down is None else down

    async def start(self) -> None:
        """Bind a free port on 127.0.0.1 and start accepting."""
        if self._server is None:
            self._server = await asyncio.start_server(self._accept, HOST, 0)
            self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        """Stop accepting and drop every connection. Safe to call twice."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None or len(self._tasks) >= self.max_connections or self._server is None:
            writer.close()
            return
        self._tasks.add(task)
        self.connections += 1
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        opened = loop.time()
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            return
        # A TCP handshake costs one round trip before the client's first byte leaves.
        first_at = opened + self.up.delay + self.down.delay if self.handshake else 0.0
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._direction(client_r, server_w, self.up, first_at))
                tg.create_task(self._direction(server_r, client_w, self.down, 0.0))
        except* (ConnectionError, OSError):
            pass
        finally:
            server_w.close()

    async def _direction(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: Link,
        not_before: float,
    ) -> None:
        """Copy ``reader`` to ``writer`` through ``link``: a reader and a delivering writer."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(
            maxsize=max(2, self.buffer // _CHUNK)
        )

        async def pump_in() -> None:
            last = 0.0
            while True:
                data = await reader.read(_CHUNK)
                now = max(loop.time(), not_before)
                due = link.schedule(len(data), now) if data else now + link.delay
                last = max(last, due)  # order is kept even if the delay shrinks
                await queue.put((last, data))
                if not data:
                    return

        async def pump_out() -> None:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        async with asyncio.TaskGroup() as tg:
            tg.create_task(pump_in())
            tg.create_task(pump_out())


def rtt_between(table: Mapping[frozenset[str], float], a: str, b: str, local: float = 0.0) -> float:
    """The RTT between sites ``a`` and ``b`` from a symmetric table keyed by pairs."""
    if a == b:
        return local
    try:
        return table[frozenset((a, b))]
    except KeyError:
        raise KeyError(f"no RTT between {a} and {b}") from None


@dataclass(frozen=True)
class _LinkKey:
    client: str
    server: str


class EmulatedNetwork:
    """Delay proxies for every (client site, server site) pair.

    ``servers`` maps site names to ``(host, port)`` of the real servers;
    ``rtt`` maps ``frozenset({a, b})`` to the round-trip time between two
    sites (seconds); a site reaches itself with ``local_rtt``. ``clients``
    are the sites clients run at (default: every site). ``rate`` caps each
    link direction (bytes per second). With ``local_direct``, a client
    reaches its own site's server directly (no proxy, no cost), as within a
    datacenter. Use as an async context manager.
    """

    def __init__(
        self,
        servers: Mapping[str, tuple[str, int]],
        rtt: Mapping[frozenset[str], float],
        *,
        clients: Iterable[str] | None = None,
        local_rtt: float = 0.0,
        rate: float | None = None,
        handshake: bool = True,
        local_direct: bool = False,
    ) -> None:
        self.servers = dict(servers)
        self.rtt = dict(rtt)
        self.clients = list(clients) if clients is not None else list(self.servers)
        self.local_rtt = local_rtt
        self.rate = rate
        self.handshake = handshake
        self.local_direct = local_direct
        self.proxies: dict[_LinkKey, DelayProxy] = {}
        for c in self.clients:
            for s in self.servers:
                rtt_between(self.rtt, c, s, local_rtt)  # fail early on a missing pair

    def proxy(self, client: str, server: str) -> DelayProxy:
        """The proxy a client at ``client`` uses to reach ``server``."""
        return self.proxies[_LinkKey(client, server)]

    def url(self, client: str, server: str) -> str:
        """Base URL a client at ``client`` uses for ``server``."""
        if self.local_direct and client == server:
            host, port = self.servers[server]
            return f"http://{host}:{port}"
        return self.proxy(client, server).url

    def site_urls(self, client: str) -> dict[str, str]:
        """Every server's URL as seen from ``client``."""
        return {s: self.url(client, s) for s in self.servers}

    async def start(self) -> None:
        """Start every proxy."""
        for c in self.clients:
            for s, (host, port) in self.servers.items():
                if self.local_direct and c == s:
                    continue
                one_way = rtt_between(self.rtt, c, s, self.local_rtt) / 2
                proxy = DelayProxy(
                    host,
                    port,
                    delay_up=one_way,
                    delay_down=one_way,
                    rate_up=self.rate,
                    rate_down=self.rate,
                    handshake=self.handshake,
                    name=f"{c}->{s}",
                )
                self.proxies[_LinkKey(c, s)] = proxy
                await proxy.start()

    async def aclose(self) -> None:
        """Stop every proxy."""
        proxies, self.proxies = list(self.proxies.values()), {}
        for proxy in proxies:
            await proxy.aclose()

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class NetworkProcess(ChildProcess):
    """An :class:`EmulatedNetwork` in a child process; same arguments, same ``url``.

    Use as a (synchronous) context manager. The child reads its spec from
    stdin and stops when stdin closes, so it never outlives its parent.
    """

    def __init__(
        self,
        servers: Mapping[str, tuple[str, int]],
        rtt: Mapping[frozenset[str], float],
        *,
        clients: Iterable[str] | None = None,
        local_rtt: float = 0.0,
        rate: float | None = None,
        handshake: bool = True,
        local_direct: bool = False,
        start_timeout: float = 30.0,
    ) -> None:
        self.spec: dict[str, Any] = {
            "servers": {name: [host, port] for name, (host, port) in servers.items()},
            "rtt": [[*sorted(pair), value] for pair, value in rtt.items()],
            "clients": list(clients) if clients is not None else list(servers),
            "local_rtt": local_rtt,
            "rate": rate,
            "handshake": handshake,
            "local_direct": local_direct,
        }
        self.start_timeout = start_timeout
        self.urls: dict[str, dict[str, str]] = {}
        self.proc: subprocess.Popen[str] | None = None

    def url(self, client: str, server: str) -> str:
        """Base URL a client at ``client`` uses for ``server``."""
        return self.urls[client][server]

    def site_urls(self, client: str) -> dict[str, str]:
        """Every server's URL as seen from ``client``."""
        return dict(self.urls[client])

    def start(self) -> None:
        """Start the child and wait for its URLs."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "synxfer_servers.delayproxy"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(self.spec) + "\n")
        self.proc.stdin.flush()
        try:
            line = read_line(self.proc.stdout, self.start_timeout)
            self.urls = json.loads(line)["urls"]
        except (ValueError, KeyError, TimeoutError, EOFError) as exc:
            self.stop()
            raise RuntimeError(f"the network process did not start: {exc}") from None

    def stop(self) -> None:
        """Stop the child (close its stdin, then terminate). Safe to call twice."""
        proc, self.proc = self.proc, None
        if proc is not None:
            end_process(proc, 10.0, close_stdin_first=True)


async def _serve_spec(spec: Mapping[str, Any]) -> None:
    servers = {name: (host, int(port)) for name, (host, port) in spec["servers"].items()}
    rtt = {frozenset((a, b)): float(v) for a, b, v in spec["rtt"]}
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    async with EmulatedNetwork(
        servers,
        rtt,
        clients=spec["clients"],
        local_rtt=float(spec["local_rtt"]),
        rate=spec["rate"],
        handshake=bool(spec["handshake"]),
        local_direct=bool(spec["local_direct"]),
    ) as net:
        urls = {c: net.site_urls(c) for c in net.clients}
        print(json.dumps({"urls": urls}), flush=True)

        # Stop when the parent closes stdin (or dies) or on a signal.
        def wait_for_eof() -> None:
            sys.stdin.read()
            loop.call_soon_threadsafe(done.set)

        threading.Thread(target=wait_for_eof, daemon=True).start()
        await done.wait()


def _main() -> int:
    spec = json.loads(sys.stdin.readline())
    asyncio.run(_serve_spec(spec))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
