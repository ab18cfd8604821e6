"""Knowing the sites: RTT probes, load reports, and the expected time of a request.

:class:`SiteMonitor` keeps, for each site:

* **RTT**: the mean of the last ``window`` probe round trips. The first probe
  after a (re)connection is discarded: it pays for connection set-up (TCP,
  and TLS in real deployments) and would inflate the mean. A failed probe
  marks the site down (RTT infinite) until it answers again.
* **Load**: the number of requests the site reported being busy with (ping
  replies and every response carry it) and its serving rate, plus this
  client's own requests in flight there.
* **Throughput**: an average of the bytes per second this client saw from
  the site, used when the site does not report a rate.

:meth:`SiteMonitor.expected` is what reads rank replicas by:

``rtt`` (the published rule)
    the mean RTT.
``load`` (load-aware)
    RTT + queued work: ``(q + 1) * size / rate``, where ``q`` counts the
    other requests sharing the site (reported by the site, minus ours at that
    time, plus ours now). Under processor sharing a request of ``size``
    bytes finishes after about that long, so a busy nearby site loses to an
    idle farther one exactly when the queue costs more than the extra RTT.

:meth:`SiteMonitor.run` re-probes every ``interval`` seconds, so estimates
stay fresh (and a site a client avoids because it is busy is noticed when
it calms down).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ReadChoice", "SiteMonitor", "SiteStats"]

ReadChoice = Literal["rtt", "load"]

#: Assumed bytes per second of a site until one is reported or measured.
DEFAULT_RATE = 1e9
_EWMA = 0.3


@dataclass
class SiteStats:
    """What this client knows about one site."""

    name: str
    window: int = 5
    samples: deque[float] = field(default_factory=deque)
    probes: int = 0  # successful probes since the last (re)connection
    down: bool = False
    reported_active: int = 0  # requests the site said it was serving
    reported_rate: float = 0.0  # bytes/s the site said it serves (0: unlimited/unknown)
    own_at_report: int = 0  # our requests in flight when that report arrived
    outstanding: int = 0  # our requests in flight now
    throughput: float = 0.0  # bytes/s we observed (EWMA), 0 until measured

    def __post_init__(self) -> None:
        self.samples = deque(self.samples, maxlen=self.window)

    @property
    def rtt(self) -> float:
        """Mean of recent RTT samples in seconds; infinite if down or unmeasured."""
        if self.down or not self.samples:
            return math.inf
        return sum(self.samples) / len(self.samples)

    @property
    def others(self) -> int:
        """Requests of other clients at the site, as of its last report."""
        return max(0, self.reported_active - self.own_at_report)


class SiteMonitor:
    """RTT and load of every site, and the expected time of a request to each.

    ``probe(site)`` performs one probe request and returns the site's ping
    document (``{"active": n, "rate": bytes_per_s, ...}``) or raises. The
    clock is injectable for tests.
    """

    def __init__(
        self,
        sites: Sequence[str],
        probe: Callable[[str], Awaitable[Mapping[str, Any]]],
        *,
        window: int = 5,
        interval: float = 2.0,
        probe_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.stats = {s: SiteStats(s, window) for s in sites}
        self._probe = probe
        self.interval = interval
        self.probe_timeout = probe_timeout
        self._clock = clock

    # -- RTT -----------------------------------------------------------------

    def record_rtt(self, site: str, seconds: float) -> None:
        """A successful probe took ``seconds``; the first after a (re)connection is dropped."""
        st = self.stats[site]
        st.down = False
        st.probes += 1
        if st.probes > 1:
            st.samples.append(seconds)

    def record_failure(self, site: str) -> None:
        """A probe (or request) could not reach ``site``: down until it answers again."""
        st = self.stats[site]
        st.down = True
        st.probes = 0
        st.samples.clear()

    def rtt(self, site: str) -> float:
        """Mean RTT to ``site`` (seconds); infinite when down or unknown."""
        return self.stats[site].rtt

    def rtt_table(self) -> dict[str, float]:
        """Mean RTT of every site."""
        return {s: st.rtt for s, st in self.stats.items()}

    async def probe_site(self, site: str) -> None:
        """Probe ``site`` once and record the result."""
        start = self._clock()
        try:
            async with asyncio.timeout(self.probe_timeout):
                doc = await self._probe(site)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.record_failure(site)
            return
        self.record_rtt(site, self._clock() - start)
        with contextlib.suppress(TypeError, ValueError):
            self.record_load(site, int(doc.get("active", 0)), float(doc.get("rate", 0) or 0))

    async def probe_all(self, rounds: int = 1) -> None:
        """Probe every site ``rounds`` times, sites in parallel."""

        async def probe(site: str) -> None:
            for _ in range(rounds):
                await self.probe_site(site)

        async with asyncio.TaskGroup() as tg:
            for site in self.stats:
                tg.create_task(probe(site))

    async def warm_up(self) -> None:
        """Probe until each reachable site has one kept sample (the first is discarded)."""
        await self.probe_all(rounds=2)

    async def run(self) -> None:
        """Re-probe every ``interval`` seconds, forever (cancel to stop)."""
        while True:
            await asyncio.sleep(self.interval)
            await self.probe_all()

    # -- load ----------------------------------------------------------------

    def record_load(self, site: str, active: int, rate: float) -> None:
        """``site`` reported serving ``active`` requests at ``rate`` bytes/s (0: unlimited)."""
        st = self.stats[site]
        st.reported_active = max(0, active)
        st.reported_rate = max(0.0, rate)
        st.own_at_report = st.outstanding

    @contextlib.contextmanager
    def track(self, site: str, nbytes: int) -> Iterator[None]:
        """Count a request to ``site`` as in flight; learn its throughput on success."""
        st = self.stats[site]
        st.outstanding += 1
        start = self._clock()
        try:
            yield
        finally:
            st.outstanding -= 1
        elapsed = self._clock() - start
        if nbytes >= 16 * 1024 and math.isfinite(st.rtt):
            rate = nbytes / max(elapsed - st.rtt, 1e-3)
            old = st.throughput
            st.throughput = rate if old == 0 else (1 - _EWMA) * old + _EWMA * rate

    def expected(self, site: str, nbytes: int, choice: ReadChoice = "load") -> float:
        """Expected seconds to fetch ``nbytes`` from ``site`` (see the module docstring)."""
        st = self.stats[site]
        rtt = st.rtt
        if choice == "rtt" or not math.isfinite(rtt):
            return rtt
        rate = st.reported_rate or st.throughput or DEFAULT_RATE
        queue = st.others + st.outstanding
        return rtt + (queue + 1) * nbytes / rate

    def rank(self, sites: Sequence[str], nbytes: int, choice: ReadChoice = "load") -> list[str]:
        """``sites`` from the lowest expected time to the highest (ties keep order)."""
        return sorted(sites, key=lambda s: self.expected(s, nbytes, choice))
