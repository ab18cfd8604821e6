"""``python -m synxfer_servers._moto_main``: the server process of ``MotoProcess``.

Starts moto on 127.0.0.1 on a free port, prints the port on stdout, and
serves until stdin closes or SIGTERM arrives.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

from synxfer_servers.s3 import moto_server


def main() -> None:
    """Serve until stdin reaches EOF or the process gets SIGTERM."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def watch_stdin() -> None:
        while sys.stdin.buffer.read(65536):
            pass
        stop.set()

    with moto_server() as server:
        print(server.port, flush=True)
        threading.Thread(target=watch_stdin, daemon=True).start()
        while not stop.wait(1.0):
            pass


if __name__ == "__main__":
    main()
