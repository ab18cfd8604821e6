"""Progress from a client's events: running totals, and a tqdm bar for notebooks and scripts.

:class:`TransferProgress` turns :class:`~synxfer.Event` objects into the
totals of a run: planned files and bytes (from ``PLANNED`` events, so files
not started yet count), bytes moved, files done, failed and skipped, and
the files in flight. The ``synxfer`` command's progress display is built on
it, and so is :func:`tqdm_callback`, an ``on_event`` callback that drives a
`tqdm <https://tqdm.github.io>`_ bar (``tqdm.auto``: a widget in Jupyter, a
text bar elsewhere)::

    from synxfer.progress import tqdm_callback

    synxfer.sync_to("data/", "s3://bucket/data/", on_event=tqdm_callback())

    async with synxfer.Client(on_event=tqdm_callback(desc="upload")) as client:
        await client.sync_to("data/", "s3://bucket/data/")

tqdm is imported only when a bar is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from ._models import Action, Event, EventKind

__all__ = ["FileInFlight", "TqdmProgress", "TransferProgress", "tqdm_callback"]

#: The events a progress display needs; the engine builds no others for it.
PROGRESS_EVENTS = frozenset(
    {
        EventKind.PLANNED,
        EventKind.STARTED,
        EventKind.PROGRESS,
        EventKind.DONE,
        EventKind.SKIPPED,
        EventKind.FAILED,
    }
)


@dataclass(slots=True)
class FileInFlight:
    """A file that started and has not finished: its name, size and bytes moved."""

    name: str
    size: int
    done: int = 0


class TransferProgress:
    """Running totals of one client's runs, from its events.

    ``files_total``/``bytes_total`` are what the plans hold (``PLANNED``
    events add up), less the files found up to date after planning; before
    any ``PLANNED`` event (a caller whose engine sends none) they grow as
    files start. Deletions count in ``files_total`` (and ``files_done``)
    but carry no bytes. ``bytes_done`` counts payload bytes moved, both
    directions, capped at ``bytes_total`` in :attr:`fraction`.
    """

    def __init__(self) -> None:
        self.planned = False
        self.files_total = 0
        self.bytes_total = 0
        self.files_done = 0
        self.files_failed = 0
        self.files_skipped = 0
        self.bytes_done = 0
        self.dryrun = False
        self.in_flight: dict[tuple[str, str], FileInFlight] = {}
        self._started_bytes = 0  # totals as files start, while no plan is known
        self._started_files = 0

    def update(self, event: Event) -> bool:
        """Account for ``event``; True when it changed anything shown."""
        kind = event.kind
        if kind is EventKind.PROGRESS:
            self.bytes_done += event.nbytes
            flight = self.in_flight.get((event.src, event.dst))
            if flight is not None:
                flight.done += event.nbytes
            return True
        if kind is EventKind.PLANNED:
            if not self.planned:
                self.planned = True
                self.files_total = self.bytes_total = 0
            self.files_total += event.files
            self.bytes_total += event.size
            self.dryrun = event.dryrun
            return True
        if kind is EventKind.STARTED:
            self.in_flight[(event.src, event.dst)] = FileInFlight(_name(event), event.size)
            if not self.planned:
                self.files_total += 1
                self.bytes_total += event.size
            return True
        if kind is EventKind.DONE:
            self.in_flight.pop((event.src, event.dst), None)
            self.files_done += 1
            if not self.planned and event.action is Action.DELETE:
                self.files_total += 1
            return True
        if kind is EventKind.FAILED:
            self.in_flight.pop((event.src, event.dst), None)
            self.files_failed += 1
            return True
        if kind is EventKind.SKIPPED:
            self.files_skipped += 1
            if self.planned:  # planned, then found up to date: not to do after all
                self.files_total = max(0, self.files_total - 1)
                self.bytes_total = max(0, self.bytes_total - event.size)
            return True
        return False

    @property
    def files_finished(self) -> int:
        """Files done or failed."""
        return self.files_done + self.files_failed

    @property
    def fraction(self) -> float | None:
        """Bytes done over bytes planned (files when no bytes are), or None when unknown."""
        if self.bytes_total > 0:
            return min(1.0, self.bytes_done / self.bytes_total)
        if self.files_total > 0:
            return min(1.0, self.files_finished / self.files_total)
        return None

    def biggest_in_flight(self, n: int) -> list[FileInFlight]:
        """Up to ``n`` files in flight, biggest first."""
        return sorted(self.in_flight.values(), key=lambda f: -f.size)[:n]

    def files_text(self) -> str:
        """``files 3/10, 1 failed, 2 skipped`` (failed and skipped only when any)."""
        text = f"files {self.files_finished}/{self.files_total}"
        if self.files_failed:
            text += f", {self.files_failed} failed"
        if self.files_skipped:
            text += f", {self.files_skipped} skipped"
        return text


def _name(event: Event) -> str:
    """What a file in flight is called: its source (a delete's target)."""
    return event.src or event.dst


class TqdmProgress:
    """An ``on_event`` callback drawing a run's progress as one tqdm bar.

    The bar counts bytes against the planned total (so it shows a real
    percentage, rate and time left from the start), with the files done,
    failed and skipped after it. It is made on the first event (``tqdm.auto``
    unless ``tqdm_class`` is given; keyword arguments go to it) and closed
    when every planned file has finished, or by :meth:`close` (also as a
    context manager). Events come on the client's event loop; keep one
    callback per client.
    """

    #: The engine builds only these events for this callback.
    event_kinds = PROGRESS_EVENTS

    def __init__(self, tqdm_class: Callable[..., Any] | None = None, **kwargs: Any) -> None:
        self.state = TransferProgress()
        self._tqdm_class = tqdm_class
        self._kwargs = kwargs
        self.bar: Any = None
        self._closed = False

    def __call__(self, event: Event) -> None:
        if self._closed or not self.state.update(event):
            return
        bar = self.bar if self.bar is not None else self._make_bar()
        state = self.state
        if event.kind is EventKind.PROGRESS:
            if state.bytes_total and bar.n + event.nbytes > state.bytes_total:
                bar.update(max(0, state.bytes_total - bar.n))  # re-fetched bytes: no >100%
            else:
                bar.update(event.nbytes)
            return
        if bar.total != state.bytes_total:
            bar.total = state.bytes_total
        bar.set_postfix_str(state.files_text(), refresh=True)
        if state.planned and state.files_total and state.files_finished >= state.files_total:
            self.close()

    def _make_bar(self) -> Any:
        factory = self._tqdm_class
        if factory is None:
            from tqdm.auto import tqdm

            factory = tqdm
        options: dict[str, Any] = {
            "unit": "B",
            "unit_scale": True,
            "unit_divisor": 1024,
            "total": self.state.bytes_total,
            "dynamic_ncols": True,
        }
        options.update(self._kwargs)
        self.bar = factory(**options)
        return self.bar

    def close(self) -> None:
        """Close the bar (drawn at its final state); later events are ignored."""
        if self._closed:
            return
        self._closed = True
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> TqdmProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def tqdm_callback(tqdm_class: Callable[..., Any] | None = None, **kwargs: Any) -> TqdmProgress:
    """An ``on_event`` callback that shows a run's progress in a tqdm bar.

    ``tqdm_class`` defaults to ``tqdm.auto.tqdm`` (a widget in Jupyter,
    text elsewhere: ``pip install tqdm``, and ``ipywidgets`` for the
    widget); other keyword arguments go to it (``desc="upload"``,
    ``leave=False``, ``file=sys.stdout`` ...). See :class:`TqdmProgress`.
    """
    return TqdmProgress(tqdm_class, **kwargs)
