"""What the ``synxfer`` CLI prints: per-file lines, JSON lines, progress, summary.

stdout carries results (one line per file, or one JSON object per line);
stderr carries everything meant for a human watching: failures, the
progress line and the final summary.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable, MutableMapping
from typing import Any, TextIO

from .._models import Action, Event, EventKind, TransferResult
from ..progress import PROGRESS_EVENTS, TransferProgress

__all__ = [
    "EventPrinter",
    "Progress",
    "cli_words",
    "display_path",
    "human_bytes",
    "redact",
    "summary_line",
]

log = logging.getLogger("synxfer.cli")

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")
_SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
#: The query of an http(s) URL: a pre-signed URL's signature and credential.
_QUERY = re.compile(
    r"(?P<base>\bhttps?://[^\s?#]+)\?[^\s#]+?(?=[:;,.)\]'\"]*(?:\s|$))", re.IGNORECASE
)


def redact(text: str) -> str:
    """Hide credentials that could end up in a message.

    Removes ``user:password@`` from URLs and the query from ``http(s)://``
    URLs (where a pre-signed URL carries its signature), and replaces the
    values of secret environment variables (when long enough to be
    unambiguous) with ``****``.
    """
    text = _USERINFO.sub(r"\g<scheme>****@", text)
    text = _QUERY.sub(r"\g<base>?…", text)
    for name in _SECRET_ENV:
        value = os.environ.get(name)
        if value and len(value) >= 8:
            text = text.replace(value, "****")
    return text


#: Library messages name the API (``recursive=True``, ``Client(profile=...)``,
#: ``TransferConfig(part_size=...)``, ``WriteOptions(storage_class=...)``):
#: the CLI prints the flag of the same meaning instead.
_API_FLAG = re.compile(
    r"\b(?:(?P<flag>recursive|follow_symlinks|size_only|exact_timestamps|checksum|force)=True"
    r"|(?:Client|TransferConfig|WriteOptions)\((?P<name>\w+)=\.\.\.\))"
)
#: Names in ``Client(...)``, ``TransferConfig(...)`` or ``WriteOptions(...)`` that
#: have a flag; others are left as the API names them.
_FLAGGED = frozenset(
    {
        "endpoint_url",
        "endpoints",
        "backend_options",
        "region",
        "profile",
        "part_size",
        "max_threads",
        "max_files",
        "bwlimit",
        "follow_symlinks",
        "content_type",
        "guess_mime_type",
        "storage_class",
        "sse",
        "sse_kms_key_id",
        "acl",
        "metadata",
        "cache_control",
        "content_encoding",
        "content_disposition",
        "checksum_algorithm",
        "compress",
        "compress_level",
    }
)
_FLAG_OF = {
    "endpoints": "endpoint",
    "guess_mime_type": "no-guess-mime-type",
    "backend_options": "backend-option",
}


def cli_words(message: str) -> str:
    """``message`` with the API's names of options replaced by their flags."""

    def flag(m: re.Match[str]) -> str:
        name = m.group("flag") or m.group("name")
        if m.group("name") and name not in _FLAGGED:
            return m.group(0)
        return "--" + _FLAG_OF.get(name, name.replace("_", "-"))

    return _API_FLAG.sub(flag, message)


def display_path(location: str) -> str:
    """How a location is shown in per-file lines: as the user gave it.

    URLs as they are; local paths as the engine built them from the path on
    the command line (``src`` gives ``src/a.txt``, ``/data`` gives
    ``/data/a.txt``), never rewritten relative to the current directory.
    """
    return location


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
    when N downloaded files had no checksum to be checked against, and
    ``; wrong store checksums: K (see the warnings)`` when K files were
    verified by another checksum than a wrong one the store gave.
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
    wrong = sum(1 for w in result.warnings if w.kind == "wrong-checksum")
    if wrong:
        line += f"; wrong store checksums: {wrong} (see the warnings)"
    return line


#: The totals line: % of the planned bytes, bytes done/total, rate, ETA, then the files.
_TOTAL_FORMAT = "{percentage:3.0f}%|{bar}| {done_h} / {total_h}  {rate_h}  ETA {remaining}{postfix}"
#: The same before the plan's bytes are known (or when it has none: deletions, empty files).
_NO_TOTAL_FORMAT = "{done_h}  {rate_h}{postfix}"


def _bar_class() -> Any:
    """tqdm with sizes in the CLI's units (``1.50 MiB``, ``3.20 MiB/s``)."""
    global _BAR
    if _BAR is None:
        from tqdm import tqdm

        class Bar(tqdm):  # type: ignore[type-arg]
            @property
            def format_dict(self) -> MutableMapping[str, Any]:
                d = super().format_dict
                rate = d.get("rate")
                if rate is None and d.get("elapsed"):
                    rate = d["n"] / d["elapsed"]
                d["done_h"] = human_bytes(d["n"])
                d["total_h"] = human_bytes(d["total"] or 0)
                d["rate_h"] = f"{human_bytes(rate)}/s" if rate else "-- B/s"
                return d

        _BAR = Bar
    return _BAR


_BAR: Any = None


class Progress:
    """The progress display of the CLI on a stream (normally stderr), drawn with tqdm.

    Totals come from the plan (``PLANNED`` events, see
    :class:`synxfer.progress.TransferProgress`), so the first line shows a
    real percentage of the bytes to move, bytes done of the total, the rate,
    the time left (ETA) and files finished of the total, with failures and
    skips. On a terminal, up to ``lines`` more lines show the biggest files
    in flight; elsewhere (``-P`` into a pipe or a log) the first line alone
    is redrawn in place. Redraws at most ``1 / interval`` times a second.
    tqdm is imported when the first bar is drawn (only with progress on).
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        interval: float = 0.1,
        terminal: bool | None = None,
        lines: int = 4,
    ) -> None:
        self.stream = stream
        self.interval = interval
        if terminal is None:
            isatty = getattr(stream, "isatty", None)
            terminal = bool(isatty()) if isatty is not None else False
        self.terminal = terminal
        self.lines = lines if terminal else 0
        self.state = TransferProgress()
        self._bars: list[Any] = []  # the totals line, then one per file line
        self._last_draw = float("-inf")

    # What the old single-line display exposed; tests and callers read these.
    @property
    def bytes_done(self) -> int:
        return self.state.bytes_done

    @property
    def bytes_total(self) -> int:
        return self.state.bytes_total

    @property
    def files_done(self) -> int:
        return self.state.files_done

    def update(self, event: Event) -> None:
        """Account for ``event`` and redraw if the throttle allows."""
        if not self.state.update(event):
            return
        if event.kind is EventKind.PROGRESS and self._bars:
            bar = self._bars[0]
            step = event.nbytes
            if bar.total and bar.n + step > bar.total:  # re-fetched bytes: never past 100%
                step = max(0, bar.total - bar.n)
            bar.update(step)  # tqdm's own throttle and rate estimate
        self.draw(force=event.kind is EventKind.PLANNED)

    def text(self) -> str:
        """The first line, as drawn now (without control characters)."""
        if not self._bars:
            return ""
        self._sync()
        return str(self._bars[0])

    def draw(self, *, force: bool = False) -> None:
        """Redraw every line, unless they were drawn less than ``interval`` ago."""
        now = time.monotonic()
        if not force and now - self._last_draw < self.interval:
            return
        self._last_draw = now
        if not self._bars:
            self._open()
            return
        self._sync()
        for bar in self._bars:
            bar.refresh()

    def write(self, stream: TextIO, line: str) -> None:
        """Print ``line`` on ``stream`` above the progress lines (which are redrawn)."""
        if not self._bars:
            stream.write(line + "\n")
            stream.flush()
            return
        self._bars[0].write(line, file=stream)

    def clear(self) -> None:
        """Erase the progress lines (at the end, or before a final message)."""
        bars, self._bars = self._bars, []
        for bar in reversed(bars):
            bar.close()
        self._last_draw = float("-inf")

    # -- tqdm ------------------------------------------------------------------

    def _open(self) -> None:
        import threading

        tqdm = _bar_class()
        tqdm.monitor_interval = 0  # no monitor thread: the CLI redraws on its own tick
        tqdm.set_lock(threading.RLock())  # events come on one thread: no process lock
        common: dict[str, Any] = {
            "file": self.stream,
            "leave": False,
            "dynamic_ncols": True,
            "mininterval": self.interval,
        }
        total = tqdm(
            total=self.state.bytes_total or None,
            initial=min(self.state.bytes_done, self.state.bytes_total or self.state.bytes_done),
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            position=0,
            bar_format=self._total_format(),
            postfix=self.state.files_text(),
            **common,
        )
        self._bars = [total]
        self._bars += [
            tqdm(total=None, bar_format="{desc}", position=i, **common)
            for i in range(1, self.lines + 1)
        ]
        self._sync()
        for bar in self._bars:
            bar.refresh()

    def _total_format(self) -> str:
        prefix = "(dryrun) " if self.state.dryrun else ""
        return prefix + (_TOTAL_FORMAT if self.state.bytes_total else _NO_TOTAL_FORMAT)

    def _sync(self) -> None:
        """Bring the bars up to the state: total, file counts, files in flight."""
        state = self.state
        bar = self._bars[0]
        total = state.bytes_total or None
        if bar.total != total:
            bar.total = total
        bar.bar_format = self._total_format()
        bar.set_postfix_str(state.files_text(), refresh=False)
        if len(self._bars) > 1:
            width = max(20, (bar.ncols or 80) - 20)
            flights = state.biggest_in_flight(len(self._bars) - 1)
            for i, line in enumerate(self._bars[1:]):
                if i >= len(flights):
                    line.set_description_str("", refresh=False)
                    continue
                f = flights[i]
                name = display_path(f.name)
                if len(name) > width:
                    name = "..." + name[-(width - 3) :]
                pct = min(100.0, 100 * f.done / f.size) if f.size else 100.0
                line.set_description_str(
                    f"  {pct:3.0f}% of {human_bytes(f.size):>10}  {name}", refresh=False
                )


class EventPrinter:
    """The ``on_event`` callback of the CLI: prints per-file lines or JSON lines.

    Human mode (aws-cli style), on stdout::

        upload: ./a.txt to s3://bucket/p/a.txt
        (dryrun) download: s3://bucket/k to ./k
        delete: s3://bucket/old

    and failures on stderr: ``upload failed: ./x to s3://b/x <error>``, as
    are a landed file's warnings: ``warning: s3://b/k: <why>``.
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
        # DONE even when quiet: a file's warning rides on it (printed as errors are).
        kinds = {EventKind.DONE, EventKind.FAILED, EventKind.RETRY}
        if self.progress is not None:
            kinds |= PROGRESS_EVENTS
        if self.json_lines:
            kinds.add(EventKind.SKIPPED)
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
            import json

            self._emit(self.out, json.dumps(self._event_dict(event)))
        if kind is EventKind.FAILED:
            self._emit(self.err, self._human(event))
        elif kind is EventKind.DONE and not self.quiet and not self.json_lines:
            self._emit(self.out, self._human(event))
        if kind is EventKind.DONE and event.warning:
            # Per file, on stderr, whatever the mode: a store's wrong checksum,
            # or why the file could not be verified.
            self._emit(self.err, redact(f"warning: {cli_words(event.warning)}"))

    def _emit(self, stream: TextIO, line: str) -> None:
        if self.progress is not None:
            self.progress.write(stream, line)
        else:
            stream.write(line + "\n")

    @staticmethod
    def _event_dict(event: Event) -> dict[str, object]:
        out: dict[str, object] = {
            "type": "file",
            "kind": event.kind.value,
            "action": event.action.value,
            "src": event.src,
            "dst": event.dst,
            "size": event.size,
            "error": redact(cli_words(event.error)) if event.error is not None else None,
            "dryrun": event.dryrun,
        }
        if event.verified is not None:
            out["verified"] = event.verified
        if event.warning is not None:
            out["warning"] = redact(cli_words(event.warning))
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
            why = cli_words(event.error or "unknown error")
            return redact(f"{prefix}{verb} failed: {where} {why}")
        unchecked = " (not verified: no checksum)" if event.verified is False else ""
        return redact(f"{prefix}{verb}: {where}{unchecked}")
