"""Placement policies: which sites receive the replicas of a block.

The five policies of the published experiment, exactly:

============== ======= ==============================================================
name           copies  sites
============== ======= ==============================================================
random         1       one site drawn at random (per block)
tworandom      2       two distinct sites drawn at random (per block)
local          1       the client's local site
localclosest   2       local + the other site with the lowest mean RTT from the client
localfarthest  2       local + the other site with the highest mean RTT from the client
============== ======= ==============================================================

A policy returns *every* site, in order of preference: the first
``copies`` are the placement; the rest are fallbacks, used only when a
chosen site fails, so a write keeps its replica count while a site is down
(the manifest records where each replica really went). Sites whose RTT is
unknown or infinite (unreachable) always come last.

A new policy is one class::

    @register_policy
    class AllSites(Policy):
        name = "all"
        copies = 99

        def choose(self, ctx: PlacementContext) -> list[str]:
            return ctx.by_rtt(ctx.sites)
"""

from __future__ import annotations

import abc
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

__all__ = [
    "Local",
    "LocalClosest",
    "LocalFarthest",
    "PlacementContext",
    "Policy",
    "RandomOne",
    "TwoRandom",
    "get_policy",
    "policy_names",
    "register_policy",
]


@dataclass(frozen=True)
class PlacementContext:
    """What a policy may look at: the sites, which is local, and mean RTTs from here."""

    local: str
    sites: Sequence[str]
    rtt: Mapping[str, float]
    rng: random.Random

    def known(self, site: str) -> bool:
        """Whether ``site`` has a finite measured RTT."""
        return math.isfinite(self.rtt.get(site, math.inf))

    def by_rtt(self, sites: Iterable[str], *, reverse: bool = False) -> list[str]:
        """``sites`` by mean RTT (ascending, or descending), unknown RTTs last; ties by name."""
        sites = list(sites)
        known = [s for s in sites if self.known(s)]
        unknown = sorted(s for s in sites if not self.known(s))
        known.sort(key=lambda s: (-self.rtt[s] if reverse else self.rtt[s], s))
        return known + unknown

    def others(self) -> list[str]:
        """Every site but the local one."""
        return [s for s in self.sites if s != self.local]


class Policy(abc.ABC):
    """Where replicas of a block go. Subclass, set ``name`` and ``copies``, register."""

    name: ClassVar[str] = ""
    #: Replicas per block (capped by the number of sites).
    copies: ClassVar[int] = 1
    #: Whether the choice depends on RTTs (the client then waits for its first
    #: measurements before placing anything).
    uses_rtt: ClassVar[bool] = False

    def replicas(self, n_sites: int) -> int:
        """Replicas per block in a cluster of ``n_sites``."""
        return max(1, min(self.copies, n_sites))

    @abc.abstractmethod
    def choose(self, ctx: PlacementContext) -> list[str]:
        """Every site of ``ctx``, placement first, then fallbacks, each once."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} copies={self.copies}>"


_POLICIES: dict[str, type[Policy]] = {}

P = TypeVar("P", bound=type[Policy])


def register_policy(cls: P) -> P:
    """Class decorator: make ``cls`` available by its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _POLICIES[cls.name] = cls
    return cls


def policy_names() -> list[str]:
    """Names of every registered policy."""
    return sorted(_POLICIES)


def get_policy(name: str) -> Policy:
    """A new instance of the policy called ``name``; KeyError lists the known ones."""
    try:
        return _POLICIES[name.strip().lower()]()
    except KeyError:
        raise KeyError(
            f"unknown placement policy {name!r} (known: {', '.join(policy_names())})"
        ) from None


def _reachable_first(ctx: PlacementContext, sites: list[str]) -> list[str]:
    return [s for s in sites if ctx.known(s)] + [s for s in sites if not ctx.known(s)]


@register_policy
class RandomOne(Policy):
    """One replica at a site drawn at random for each block."""

    name = "random"
    copies = 1

    def choose(self, ctx: PlacementContext) -> list[str]:
        sites = list(ctx.sites)
        ctx.rng.shuffle(sites)
        return sites[:1] + _reachable_first(ctx, sites[1:])


@register_policy
class TwoRandom(Policy):
    """Two replicas at two distinct sites drawn at random for each block."""

    name = "tworandom"
    copies = 2

    def choose(self, ctx: PlacementContext) -> list[str]:
        sites = list(ctx.sites)
        ctx.rng.shuffle(sites)
        return sites[:2] + _reachable_first(ctx, sites[2:])


@register_policy
class Local(Policy):
    """One replica, at the client's local site."""

    name = "local"
    copies = 1

    def choose(self, ctx: PlacementContext) -> list[str]:
        return [ctx.local, *ctx.by_rtt(ctx.others())]


@register_policy
class LocalClosest(Policy):
    """The local site and the other site with the lowest mean RTT."""

    name = "localclosest"
    copies = 2
    uses_rtt = True

    def choose(self, ctx: PlacementContext) -> list[str]:
        return [ctx.local, *ctx.by_rtt(ctx.others())]


@register_policy
class LocalFarthest(Policy):
    """The local site and the other site with the highest mean RTT."""

    name = "localfarthest"
    copies = 2
    uses_rtt = True

    def choose(self, ctx: PlacementContext) -> list[str]:
        return [ctx.local, *ctx.by_rtt(ctx.others(), reverse=True)]
