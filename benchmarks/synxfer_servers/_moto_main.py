"""``python -m synxfer_servers._moto_main [--stock]``: the server process of ``MotoProcess``.

Starts moto on 127.0.0.1 on a free port, prints the port on stdout, and
serves until stdin closes or SIGTERM arrives.

Without ``--stock`` it is the strict model of AWS (:func:`synxfer_servers.s3.moto_server`:
checksums verified and listed by a front, copies re-checksummed). With
``--stock`` it is moto exactly as ``pip install "moto[server]"`` ships it:
moto's own ``ThreadedMotoServer`` app, no front, no patch, and the optional
``crc32c`` package hidden (``sys.modules["crc32c"] = None`` before moto is
imported). That reproduces an install without moto's ``s3crc32c`` extra --
what LocalStack-style setups and most tutorials run -- in which moto stores
CRC32 values under ``ChecksumCRC32C``. Removing an optional extra is not
shaping the server: it is the server as users get it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def _stock() -> Iterator[int]:
    """moto's own threaded server, as shipped (the caller hid ``crc32c`` first)."""
    from moto.server import ThreadedMotoServer

    # werkzeug's per-request log lines would fill the captured stderr.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield server.get_host_and_port()[1]
    finally:
        server.stop()


@contextlib.contextmanager
def _strict() -> Iterator[int]:
    from synxfer_servers.s3 import moto_server

    with moto_server() as server:
        yield server.port


def main(argv: list[str] | None = None) -> None:
    """Serve until stdin reaches EOF or the process gets SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m synxfer_servers._moto_main")
    parser.add_argument(
        "--stock",
        action="store_true",
        help='moto as `pip install "moto[server]"` ships it (no front, no crc32c package)',
    )
    args = parser.parse_args(argv)
    if args.stock:
        # Must precede every moto import: moto imports crc32c lazily, per call.
        sys.modules["crc32c"] = None  # type: ignore[assignment]
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def watch_stdin() -> None:
        while sys.stdin.buffer.read(65536):
            pass
        stop.set()

    with _stock() if args.stock else _strict() as port:
        print(port, flush=True)
        threading.Thread(target=watch_stdin, daemon=True).start()
        while not stop.wait(1.0):
            pass


if __name__ == "__main__":
    main()
