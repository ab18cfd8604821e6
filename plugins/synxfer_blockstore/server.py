"""``synxfer-blockd``: one site of the replicated block store.

One process serves one site over HTTP (aiohttp) on 127.0.0.1. It stores:

* **Blocks**, content-addressed: ``DATA/blocks/ab/cd/<sha256>``. A PUT is
  read whole (at most ``--max-block-size`` bytes), hashed in a worker
  thread and refused (400 ``BadDigest``) unless its SHA-256 is the id it
  was sent to; it is written to ``DATA/tmp/``, fsynced (unless
  ``--no-fsync``), and renamed into place, so a block file is always whole
  and a restart loses nothing that was acknowledged. Leftover temp files are
  removed at start. GETs serve one ``Range`` at a time.
* **Manifests** (object name -> size, block ids, replica sites, metadata) in
  SQLite (``DATA/manifests.sqlite3``, WAL, ``synchronous=FULL``), one
  worker thread owns the connection. Each site keeps, per object, the
  manifest with the greatest ``(stamp, writer)``: last writer wins, deletes
  are tombstones. Clients write a manifest to every site; sites also pull
  each other's change feed (``--peers``, every ``--sync-interval`` seconds
  and at start), so a site that was down or unreachable converges, and any
  site can serve a listing.

Security: every request needs ``Authorization: Bearer <token>`` (the token
comes from ``--token-file`` or ``$SYNXFER_BLOCKD_TOKEN`` and is never
logged); block ids must be 64 lowercase hex digits, so no request names a
path; request bodies are bounded; the server binds loopback unless
``--allow-remote`` is given (and then it should sit behind TLS).

Emulating a busy site: ``--serve-rate 16MiB`` paces block data leaving the
site through one shared timeline, as a NIC or disk of that capacity would;
responses carry the site's load (``X-Blockd-Active``, ``X-Blockd-Rate``) and
so does ``/v1/ping``, which load-aware clients use.

Garbage: deleting an object removes (tombstones) its manifest; its blocks
stay until ``POST /v1/gc?grace=SECONDS`` (or ``--gc-interval``) deletes
every block no live manifest references and that is older than the grace
period (a block of an upload in progress is not referenced yet).

``synxfer-blockd --port 0`` binds a free port and prints one JSON line on
stdout (``{"port": ..., "url": ..., "site": ...}``) once it is serving.

This module is the command line; the site lives in
:mod:`synxfer_blockstore._store` (block files),
:mod:`synxfer_blockstore._manifests` (SQLite) and
:mod:`synxfer_blockstore._app` (the HTTP service, :func:`serve`), whose
public names it re-exports.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import logging
import os
import signal
import sys
from pathlib import Path

from .protocol import MAX_BLOCK_SIZE, SITE_NAME, parse_size

#: Why the site cannot run here (aiohttp missing), or None.
_MISSING: ModuleNotFoundError | None = None
#: What to do about it.
INSTALL_HINT = "pip install 'synxfer[blockstore]' (or pip install aiohttp)"

try:
    from ._app import Blockd, ServerConfig, make_app, serve
    from ._manifests import ManifestDB
    from ._store import BlockStore
except ModuleNotFoundError as exc:  # the synxfer[blockstore] extra is not installed
    if exc.name != "aiohttp":
        raise
    _MISSING = exc

    def __getattr__(name: str) -> object:
        # ``from synxfer_blockstore.server import Blockd`` says what is missing.
        if name in ("Blockd", "ServerConfig", "make_app", "serve", "ManifestDB", "BlockStore"):
            raise ImportError(f"synxfer_blockstore.server.{name} needs aiohttp: {INSTALL_HINT}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "TOKEN_ENV",
    "BlockStore",
    "Blockd",
    "ManifestDB",
    "ServerConfig",
    "main",
    "make_app",
    "serve",
]

log = logging.getLogger("synxfer_blockstore.server")

#: Environment variable holding the bearer token when no ``--token-file`` is given.
TOKEN_ENV = "SYNXFER_BLOCKD_TOKEN"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _peers(text: str) -> dict[str, str]:
    peers: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, url = item.partition("=")
        if not sep or not SITE_NAME.match(name) or not url.startswith(("http://", "https://")):
            raise argparse.ArgumentTypeError(
                f"invalid peer {item!r}: expected NAME=http://HOST:PORT"
            )
        peers[name] = url
    return peers


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``synxfer-blockd``."""
    p = argparse.ArgumentParser(
        prog="synxfer-blockd",
        description="One site of synxfer's replicated block store (blocks:// backend).",
    )
    p.add_argument("--data-dir", type=Path, required=True, help="where blocks and manifests live")
    p.add_argument("--site", required=True, help="this site's name, as in the cluster file")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (printed)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow binding a non-loopback address (put TLS in front of it)",
    )
    p.add_argument(
        "--token-file", type=Path, help=f"file holding the bearer token (else ${TOKEN_ENV})"
    )
    p.add_argument("--peers", type=_peers, default={}, help="NAME=URL,... to pull manifests from")
    p.add_argument("--sync-interval", type=float, default=30.0, help="seconds between peer syncs")
    p.add_argument(
        "--max-block-size", type=_size, default=MAX_BLOCK_SIZE, help="largest block accepted"
    )
    p.add_argument("--no-fsync", action="store_true", help="do not fsync blocks (faster, unsafe)")
    p.add_argument(
        "--serve-rate",
        type=_size,
        default=None,
        help="emulate a site of this capacity: block data leaves at most at SIZE per second",
    )
    p.add_argument("--gc-interval", type=float, default=None, help="seconds between block GCs")
    p.add_argument(
        "--gc-grace", type=float, default=3600.0, help="GC keeps blocks younger than this (s)"
    )
    p.add_argument("--access-log", action="store_true", help="log every request (never the token)")
    p.add_argument("-v", "--verbose", action="store_true", help="log more")
    return p


def _read_token(args: argparse.Namespace) -> str:
    if args.token_file is not None:
        return str(args.token_file.read_text(encoding="utf-8")).strip()
    return os.environ.get(TOKEN_ENV, "").strip()


async def _run(config: ServerConfig, host: str, port: int, access_log: bool) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with serve(config, host, port, access_log=access_log) as url:
        bound = int(url.rsplit(":", 1)[1])
        print(json.dumps({"port": bound, "url": url, "site": config.site}), flush=True)
        log.info("site %s serving %s on %s", config.site, config.data_dir, url)
        if config.peers:
            log.info("site %s pulls manifests from %s", config.site, ", ".join(config.peers))
        await stop.wait()
    log.info("site %s stopped", config.site)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``synxfer-blockd``."""
    if _MISSING is not None:
        print(
            f"synxfer-blockd: error: aiohttp is not installed; the block store server needs "
            f"it: {INSTALL_HINT}",
            file=sys.stderr,
        )
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose or args.access_log else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s blockd %(levelname)s %(message)s",
    )
    if not _is_loopback(args.host) and not args.allow_remote:
        parser.error(f"refusing to bind {args.host!r}: not a loopback address (see --allow-remote)")
    if not SITE_NAME.match(args.site):
        parser.error(f"invalid site name {args.site!r}")
    try:
        token = _read_token(args)
    except OSError as exc:
        parser.error(f"cannot read the token file: {exc.strerror or exc}")
    if not token:
        parser.error(f"no token: give --token-file or set ${TOKEN_ENV}")
    config = ServerConfig(
        data_dir=args.data_dir,
        site=args.site,
        token=token,
        max_block_size=args.max_block_size,
        fsync=not args.no_fsync,
        serve_rate=float(args.serve_rate) if args.serve_rate else None,
        peers=args.peers,
        sync_interval=args.sync_interval,
        gc_interval=args.gc_interval,
        gc_grace=args.gc_grace,
    )
    try:
        asyncio.run(_run(config, args.host, args.port, args.access_log))
    except OSError as exc:
        print(f"synxfer-blockd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
