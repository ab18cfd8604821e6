"""Backends: how a client (or one scale-out shard) opens the stores it talks to.

One :class:`Backends` per engine: it holds the options every backend gets
(endpoint, region, profile, timeouts, the scheduler's request limiter, the
SSE-C keys), each scheme's own endpoint and settings, the caller's layers,
and the backends opened so far (one layered stack per bucket, opened on
first use, closed with it). It sits below :class:`~synxfer.Client` and
beside scale-out, so that the tree operations (:mod:`synxfer.engine.ops`)
and a shard in another process open backends exactly as a client does
without either importing the client (docs/decisions/0040). It is not in the
engine because it builds the layer stack (retry, limit, timeout), which the
engine never imports.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ._config import TransferConfig, check_capabilities, check_write_options
from ._customer_key import CustomerKey
from ._exceptions import ConfigError
from ._models import WriteOptions
from ._url import Location
from .backend import Backend, BackendOptions, customer_key, open_backend
from .engine.core import Engine
from .layers import LimitLayer, RetryLayer, TimeoutLayer

__all__ = ["Backends", "Layer"]

log = logging.getLogger("synxfer")

#: Wraps a backend and returns a backend (``Client(layers=...)``).
Layer = Callable[[Backend], Backend]


class Backends:
    """The backends of one engine, opened and layered on first use.

    ``layers`` wrap every backend, innermost first, inside the retry and
    concurrency layers (so a fault-injecting layer's errors are retried like
    real ones). SSE-C keys are checked here, once per backend: a store that
    cannot send them refuses them before anything moves.
    """

    def __init__(
        self,
        config: TransferConfig,
        engine: Engine,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        layers: Sequence[Layer] = (),
        endpoints: Mapping[str, str] | None = None,
        backend_options: Mapping[str, Mapping[str, str]] | None = None,
        sse_c_read_key: CustomerKey | bytes | str | None = None,
        sse_c_write_key: CustomerKey | bytes | str | None = None,
    ) -> None:
        self.config = config
        self.engine = engine
        self.layers = tuple(layers)
        _check_shapes(endpoints, backend_options)
        self.endpoints = {k.lower(): v for k, v in (endpoints or {}).items()}
        self.extra = {k.lower(): _Given(v) for k, v in (backend_options or {}).items()}
        # Backends get the scheduler's request limiter for the calls they fan
        # out; the LimitLayer of every stack holds the same one for the rest.
        self.options = BackendOptions(
            endpoint_url=endpoint_url,
            region=region,
            profile=profile,
            max_connections=config.max_threads,
            connect_timeout=config.connect_timeout,
            read_timeout=config.read_timeout,
            requests=engine.scheduler.requests,
            sse_c_read_key=customer_key(sse_c_read_key, "Client(sse_c_read_key=...)"),
            sse_c_write_key=customer_key(sse_c_write_key, "Client(sse_c_write_key=...)"),
        )
        self._open: dict[tuple[str, str], Backend] = {}
        self._lock = asyncio.Lock()
        self.closed = False

    def __repr__(self) -> str:
        return f"<Backends open={len(self._open)} closed={self.closed}>"

    @property
    def customer_keys(self) -> bool:
        """Whether SSE-C keys are set (they never travel to worker processes)."""
        return bool(self.options.sse_c_read_key or self.options.sse_c_write_key)

    async def aclose(self) -> None:
        """Close every backend opened. Safe to call twice."""
        self.closed = True
        backends, self._open = list(self._open.values()), {}
        for backend in backends:
            await backend.aclose()

    async def open(self, loc: Location) -> Backend:
        """The (layered, opened) backend serving ``loc``'s bucket."""
        if self.closed:
            raise ConfigError("this Client is closed")
        ident = (loc.scheme, loc.bucket)
        async with self._lock:
            backend = self._open.get(ident)
            if backend is None:
                inner = open_backend(loc.scheme, loc.bucket, self.options_for(loc))
                for layer in self.layers:
                    inner = layer(inner)
                config = self.config
                if config.min_throughput:
                    inner = TimeoutLayer(
                        inner, config.read_timeout, config.min_throughput, config.part_size
                    )
                backend = RetryLayer(
                    LimitLayer(inner, self.engine.scheduler.requests),
                    config.retry,
                    self.engine.on_retry,
                )
                await backend.open()
                _warn_unread(loc.scheme, self.extra.get(loc.scheme))
                try:
                    # Its limits are known now: refuse values that cannot work.
                    check_capabilities(config, backend.capabilities, backend.url(""))
                    self.check_customer_keys(backend)
                except ConfigError:
                    await backend.aclose()
                    raise
                self._open[ident] = backend
        return backend

    def open_in_region(self, loc: Location, region: str) -> Backend:
        """A backend of ``loc`` for ``region`` alone (not cached, not opened:
        the caller opens and closes it), with the retry and limit layers."""
        inner = open_backend(loc.scheme, loc.bucket, self.options_for(loc, region=region))
        return RetryLayer(LimitLayer(inner, self.engine.scheduler.requests), self.config.retry)

    async def writable(self, loc: Location, write_options: WriteOptions | None) -> Backend:
        """The backend of ``loc``, which objects will be written to with
        ``write_options`` (None: the config's): ConfigError, before anything
        moves, if it cannot honour one of them."""
        backend = await self.open(loc)
        options = self.config.write_options if write_options is None else write_options
        check_write_options(options, backend.capabilities, backend.url(""))
        return backend

    def check_customer_keys(self, backend: Backend) -> None:
        """ConfigError if SSE-C keys are set for a backend that cannot send them."""
        if self.customer_keys and not backend.capabilities.customer_keys:
            raise ConfigError(
                f"{backend.url('')} cannot use a customer-provided encryption key "
                "(--sse-c / Client(sse_c_read_key=..., sse_c_write_key=...)): only s3:// "
                "stores take SSE-C; leave the key out for this location"
            )

    def options_for(self, loc: Location, **changes: object) -> BackendOptions:
        """The backend options of ``loc``'s scheme: the client's, with the
        scheme's own endpoint and settings (and ``changes``)."""
        options = self.options
        if loc.scheme in self.endpoints:
            options = replace(options, endpoint_url=self.endpoints[loc.scheme])
        if loc.scheme in self.extra:
            options = replace(options, extra=self.extra[loc.scheme])
        return replace(options, **changes) if changes else options  # type: ignore[arg-type]

    def check_endpoints(self, *locations: Location) -> None:
        """``endpoint_url`` serves one service: refuse it for two unless each has its own.

        ``file://`` is no service (it has no endpoint). Schemes named in
        ``endpoints`` take theirs, so at most one may be left to ``endpoint_url``.
        """
        if self.options.endpoint_url is None:
            return
        unnamed = sorted(
            {loc.scheme for loc in locations if loc.scheme != "file"} - self.endpoints.keys()
        )
        if len(unnamed) > 1:
            schemes = " and ".join(f"{scheme}://" for scheme in unnamed)
            example = ", ".join(f'"{scheme}": "https://..."' for scheme in unnamed)
            raise ConfigError(
                f"endpoint_url is ambiguous for a copy between {schemes}: it would be sent "
                f"to both services; give each its own endpoint, endpoints={{{example}}}"
            )


def _check_shapes(
    endpoints: Mapping[str, str] | None, backend_options: Mapping[str, Mapping[str, str]] | None
) -> None:
    """ConfigError for ``endpoints`` or ``backend_options`` of the wrong shape,
    instead of a ValueError or AttributeError from the dict built of them."""

    def strings(value: object) -> bool:
        return isinstance(value, Mapping) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        )

    if endpoints is not None and not strings(endpoints):
        raise ConfigError(
            "Client(endpoints=...) must map schemes to endpoint URLs, like "
            f"{{'s3': 'http://127.0.0.1:9000'}} (got a {type(endpoints).__name__})"
        )
    if backend_options is None:
        return
    wrong = [
        repr(k)
        for k, v in (backend_options.items() if isinstance(backend_options, Mapping) else ())
        if not (isinstance(k, str) and strings(v))
    ]
    if wrong or not isinstance(backend_options, Mapping):
        # Values are never echoed: an option may be a credential.
        where = f" (not so for {', '.join(wrong)})" if wrong else ""
        raise ConfigError(
            "Client(backend_options=...) must map schemes to options of strings, like "
            f"{{'s3': {{'addressing_style': 'path'}}}}{where}"
        )


class _Given(dict[str, str]):
    """The options given for one scheme, noting which its backend looked at,
    so that one it never looks at (a misspelt name) is reported, not
    dropped silently. Iterating looks at them all (a backend that copies
    them is not told any was unread)."""

    def __init__(self, items: Mapping[str, str]) -> None:
        super().__init__(items)
        self.looked: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.looked.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.looked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.looked.add(str(key))
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self.looked.update(dict.keys(self))
        return super().__iter__()

    def keys(self) -> Any:
        self.looked.update(dict.keys(self))
        return super().keys()

    def items(self) -> Any:
        self.looked.update(dict.keys(self))
        return super().items()

    def values(self) -> Any:
        self.looked.update(dict.keys(self))
        return super().values()


def _warn_unread(scheme: str, given: _Given | None) -> None:
    """Warn of options given for ``scheme`` that its backend never looked at
    while opening (a warning, not an error: a backend may read one later)."""
    if given is None:
        return
    unread = sorted(set(dict.keys(given)) - given.looked)
    if unread:
        looked = ", ".join(sorted(given.looked)) or "none"
        log.warning(
            "the %s:// backend has no option %s (Client(backend_options=...)): ignored; "
            "the options it reads: %s",
            scheme,
            ", ".join(repr(name) for name in unread),
            looked,
        )
