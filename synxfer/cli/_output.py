"""What the ``synxfer`` CLI prints: per-file lines, JSON lines, progress, summary.

stdout carries results (one line per file, or one JSON object per line);
stderr carries everything meant for a human watching: failures, the
progress line and the final summary.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable
from typing import TextIO

from .._models import Action, Event, EventKind, TransferResult

__all__ = [
    "EventPrinter",
    "Progress",
    "display_path",
    "human_bytes",
    "redact",
    "summary_line",
]

log = logging.getLogger("synxfer.cli")

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")
_SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


def redact(text: str) -> str:
    """Hide credentials that could end up in a message.

    Removes ``user:password@`` from URLs and replaces the values of secret
    environment variables (when long enough to be unambiguous) with ``****``.
    """
    text = _USERINFO.sub(r"\g<scheme>****@", text)
    for name in _SECRET_ENV:
        value = os.environ.get(name)
        if value and len(value) >= 8:
            text = text.replace(value, "****")
    return text


def display_path(location: str) -> str:
    """How a location is shown in per-file lines, like aws-cli.

    URLs are shown as they are; local paths relative to the current
    directory (``./a.txt``, ``sub/b.txt``, ``../c``), or absolute when no
    relative form exists.
    """
    if "://" in location or not location:
        return location
    try:
        dirname, basename = os.path.split(location)
        return os.path.join(os.path.relpath(dirname or os.curdir), basename)
    except ValueError:  # e.g. another drive on Windows
        return os.path.abspath(location)


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.50 KiB``; plain ``B`` below 1 KiB."""
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            break
    return f"{n:.2f} {unit}"


def _rate(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / (1024 * 1024) if seconds > 0 else 0.0


def summary_line(result: TransferResult) -> str:
    """The one-line human summary printed on stderr at the end of a run.

    ``summary: 3 transferred (1.50 MiB), 2 skipped, 0 deleted, 0 failed in 0.42s, 3.57 MiB/s``
    (prefixed with ``(dryrun) `` for dry runs), then ``; not verified: N``
    when N downloaded files had no checksum to be checked against.
    """
    prefix = "(dryrun) " if result.dryrun else ""
    line = (
        f"{prefix}summary: {result.files_transferred} transferred "
        f"({human_bytes(result.bytes_transferred)}), {result.files_skipped} skipped, "
        f"{result.files_deleted} deleted, {result.files_failed} failed "
        f"in {result.elapsed:.2f}s, {_rate(result.bytes_transferred, result.elapsed):.2f} MiB/s"
    )
    if result.not_verified:
        line += f"; not verified: {result.not_verified}"
    return line


class Progress:
    """A single, self-overwriting progress line on a stream (normally stderr).

    Tracks bytes done against bytes known so far (files announce their size
    when they start), throughput since the first event and files done.
    Redraws at most ``1 / interval`` times a second.
    """

    def __init__(self, stream: TextIO, *, interval: float = 0.1) -> None:
        self.stream = stream
        self.interval = interval
        self.bytes_done = 0
        self.bytes_total = 0
        self.files_done = 0
        self.files_failed = 0
        self._start = time.monotonic()
        self._last_draw = float("-inf")
        self._width = 0

    def update(self, event: Event) -> None:
        """Account for ``event`` and redraw if the throttle allows."""
        kind = event.kind
        if kind is EventKind.STARTED:
            self.bytes_total += event.size
        elif kind is EventKind.PROGRESS:
            self.bytes_done += event.nbytes
        elif kind is EventKind.DONE:
            self.files_done += 1
        elif kind is EventKind.FAILED:
            self.files_failed += 1
        else:
            return
        self.draw()

    def text(self) -> str:
        """The current progress line (without control characters)."""
        elapsed = time.monotonic() - self._start
        line = (
            f"{human_bytes(self.bytes_done)} / {human_bytes(self.bytes_total)}"
            f"  {_rate(self.bytes_done, elapsed):.2f} MiB/s  {self.files_done} files done"
        )
        if self.files_failed:
            line += f", {self.files_failed} failed"
        return line

    def draw(self, *, force: bool = False) -> None:
        """Redraw the line, unless it was drawn less than ``interval`` ago."""
        now = time.monotonic()
        if not force and now - self._last_draw < self.interval:
            return
        self._last_draw = now
        line = self.text()
        pad = " " * max(0, self._width - len(line))
        self.stream.write(f"\r{line}{pad}")
        self.stream.flush()
        self._width = len(line)

    def clear(self) -> None:
        """Erase the line (before other output, and before the summary)."""
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


class EventPrinter:
    """The ``on_event`` callback of the CLI: prints per-file lines or JSON lines.

    Human mode (aws-cli style), on stdout::

        upload: ./a.txt to s3://bucket/p/a.txt
        (dryrun) download: s3://bucket/k to ./k
        delete: s3://bucket/old

    and failures on stderr: ``upload failed: ./x to s3://b/x <error>``.
    JSON mode prints one object per DONE/SKIPPED/FAILED event on stdout.

    It never raises into the engine: an error writing output is kept in
    :attr:`output_error` and reported through :attr:`on_output_error`.
    """

    def __init__(
        self,
        *,
        json_lines: bool = False,
        quiet: bool = False,
        progress: Progress | None = None,
        out: TextIO | None = None,
        err: TextIO | None = None,
    ) -> None:
        self.json_lines = json_lines
        self.quiet = quiet
        self.progress = progress
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        #: The first error writing output; once set, nothing more is printed.
        self.output_error: OSError | None = None
        #: Called once when writing output fails (the CLI cancels the run).
        self.on_output_error: Callable[[], object] | None = None

    @property
    def event_kinds(self) -> frozenset[EventKind]:
        """The events this printer uses; the engine builds no others."""
        kinds = {EventKind.FAILED, EventKind.RETRY}
        if self.progress is not None:
            kinds |= {EventKind.STARTED, EventKind.PROGRESS, EventKind.DONE}
        if self.json_lines:
            kinds |= {EventKind.DONE, EventKind.SKIPPED}
        elif not self.quiet:
            kinds.add(EventKind.DONE)
        return frozenset(kinds)

    def __call__(self, event: Event) -> None:
        if self.output_error is not None:
            return
        try:
            self._handle(event)
        except OSError as exc:  # stdout closed (`| head`), disk full, ...
            # Raising into the engine would fail a file, not stop the run: record
            # the error and let the owner stop the run.
            self.output_error = exc
            if self.on_output_error is not None:
                self.on_output_error()

    def _handle(self, event: Event) -> None:
        if self.progress is not None:
            self.progress.update(event)
        kind = event.kind
        if kind is EventKind.RETRY:
            log.info("retrying %s %s: %s", event.action.value, event.src, redact(event.error or ""))
            return
        if kind not in (EventKind.DONE, EventKind.SKIPPED, EventKind.FAILED):
            return
        if self.json_lines:
            self._emit(self.out, json.dumps(self._event_dict(event)))
        if kind is EventKind.FAILED:
            self._emit(self.err, self._human(event))
        elif kind is EventKind.DONE and not self.quiet and not self.json_lines:
            self._emit(self.out, self._human(event))

    def _emit(self, stream: TextIO, line: str) -> None:
        if self.progress is not None:
            self.progress.clear()
        stream.write(line + "\n")
        if self.progress is not None:
            stream.flush()
            self.progress.draw()

    @staticmethod
    def _event_dict(event: Event) -> dict[str, object]:
        out: dict[str, object] = {
            "type": "file",
            "kind": event.kind.value,
            "action": event.action.value,
            "src": event.src,
            "dst": event.dst,
            "size": event.size,
            "error": redact(event.error) if event.error is not None else None,
            "dryrun": event.dryrun,
        }
        if event.verified is not None:
            out["verified"] = event.verified
        return out

    @staticmethod
    def _human(event: Event) -> str:
        verb = event.action.value
        if event.action is Action.DELETE:
            where = display_path(event.dst or event.src)
        else:
            where = f"{display_path(event.src)} to {display_path(event.dst)}"
        prefix = "(dryrun) " if event.dryrun else ""
        if event.kind is EventKind.FAILED:
            return redact(f"{prefix}{verb} failed: {where} {event.error or 'unknown error'}")
        unchecked = " (not verified: no checksum)" if event.verified is False else ""
        return redact(f"{prefix}{verb}: {where}{unchecked}")
