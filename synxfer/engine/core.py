"""The engine: runs a plan's jobs under the client's limits, and accounts for them.

:class:`Engine` is what jobs see: the :class:`~.scheduler.Scheduler` (every
limit: files, requests, bytes, threads, buffers), the resume journal
(:class:`~.journal.ResumeJournal`), and the run's accounting and events.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from .._config import TransferConfig
from .._exceptions import BackendError, NoCredentials, PreconditionFailed, SynxferError
from .._models import (
    Action,
    Event,
    EventKind,
    FileFailure,
    FileWarning,
    TransferResult,
    WriteOptions,
)
from .journal import ResumeJournal
from .scheduler import Scheduler

__all__ = ["NO_CLOBBER", "Engine", "Job", "Run", "describe_error", "keep_existing"]

#: Why a file was skipped when its destination exists and ``--no-clobber`` is on.
NO_CLOBBER = "exists, --no-clobber"

log = logging.getLogger("synxfer")

EventHook = Callable[[Event], None]


@dataclass
class Run:
    """One operation (a sync, a copy, an rm): its result and options.

    ``write_options``: the object options of what it writes (a call's
    ``write_options=``); None: the engine's ``TransferConfig.write_options``.
    """

    dryrun: bool = False
    result: TransferResult = field(default_factory=TransferResult)
    started: float = field(default_factory=time.monotonic)
    write_options: WriteOptions | None = None
    #: Warnings of files still in flight, by ``id(job)`` (:meth:`Engine.warn`).
    notes: dict[int, list[str]] = field(default_factory=dict)
    #: Sources of uploads the store refused because the key exists
    #: (``WriteOptions.if_none_match``): skipped, so a move keeps them.
    kept: set[str] = field(default_factory=set)
    #: ``--no-clobber``: a download never renames over an existing file
    #: (:func:`.localfile.place`), even one made after the plan looked.
    no_clobber: bool = False

    def finish(self) -> TransferResult:
        self.result.elapsed = time.monotonic() - self.started
        self.result.dryrun = self.dryrun
        return self.result


class Job(Protocol):
    """One file's worth of work. ``run`` raises to fail just this file."""

    action: Action
    src: str
    dst: str
    size: int

    async def run(self, engine: Engine, run: Run) -> None: ...


_current: contextvars.ContextVar[tuple[Run, Job] | None] = contextvars.ContextVar(
    "synxfer_current_job", default=None
)


def _wanted(on_event: EventHook | None) -> frozenset[EventKind]:
    """Every kind for a plain callback; what it names in ``event_kinds`` if it
    has that attribute (the CLI's printer does); none without a callback."""
    if on_event is None:
        return frozenset()
    kinds = getattr(on_event, "event_kinds", None)
    return frozenset(EventKind) if kinds is None else frozenset(kinds)


def describe_error(exc: BaseException, named: tuple[str, ...] = ()) -> str:
    """A one-line, user-facing description of why a file failed.

    A backend error's URL is left out when it is one of ``named`` (the
    caller's message already shows it).
    """
    if isinstance(exc, BaseExceptionGroup):
        # A part failed and cancelled its siblings: report the first real cause.
        leaves = [e for e in _leaves(exc) if not isinstance(e, asyncio.CancelledError)]
        return describe_error(leaves[0], named) if leaves else "cancelled"
    if isinstance(exc, BackendError) and exc.url in named and exc.args:
        return str(exc.args[0])
    if isinstance(exc, SynxferError):
        return str(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for e in group.exceptions:
        out.extend(_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    return out


class Engine:
    """Runs jobs under the client's shared limits and reports through events."""

    def __init__(self, config: TransferConfig, on_event: EventHook | None = None) -> None:
        self.config = config
        self.on_event = on_event
        #: The kinds of event anyone listens to: no other event is even built.
        #: A callback may narrow them with an ``event_kinds`` attribute.
        self.wanted: frozenset[EventKind] = _wanted(on_event)
        self.scheduler = Scheduler(config)
        self.journal = ResumeJournal(config.resume, config.state_dir)

    def close(self) -> None:
        self.scheduler.close()
        self.journal.close()

    @property
    def resumable(self) -> bool:
        """True when transfers keep a journal (and so survive interruption)."""
        return self.journal.enabled

    # -- running -------------------------------------------------------------

    async def execute(self, jobs: Iterable[Job], run: Run) -> None:
        """Run every job, at most ``max_files`` at once; failures are recorded.

        First, when anyone listens, one PLANNED event per action says how
        many files and bytes the jobs hold (see :meth:`planned`).
        """
        if EventKind.PLANNED in self.wanted:
            jobs = list(jobs)
            self.planned(run, jobs)
        try:
            await self.scheduler.map_files(jobs, lambda job: self._run_job(job, run))
        except BaseExceptionGroup as group:
            # A set-up error no file can get past (no credentials) ends the run.
            fatal = [e for e in _leaves(group) if isinstance(e, NoCredentials)]
            if fatal:
                raise fatal[0] from None
            raise

    def planned(self, run: Run, jobs: Sequence[Job]) -> None:
        """Emit the plan's totals: one PLANNED event per action, in the jobs' order.

        A batched delete counts each of its keys.
        """
        totals: dict[Action, list[int]] = {}
        for job in jobs:
            counts = totals.setdefault(job.action, [0, 0])
            keys = getattr(job, "keys", None) if job.action is Action.DELETE else None
            counts[0] += len(keys) if keys is not None else 1
            counts[1] += job.size
        for action, (files, nbytes) in totals.items():
            self.emit(
                Event(
                    EventKind.PLANNED, action, "", "", size=nbytes, files=files, dryrun=run.dryrun
                )
            )

    async def _run_job(self, job: Job, run: Run) -> None:
        _current.set((run, job))
        try:
            await job.run(self, run)
        except NoCredentials:
            raise  # not this file's failure: the whole run's (see execute)
        except PreconditionFailed as exc:
            options = self.config.write_options if run.write_options is None else run.write_options
            if job.action is Action.UPLOAD and options.if_none_match:
                # The conditional write found an object: --no-clobber's skip.
                run.kept.add(job.src)
                self.skipped(run, job, NO_CLOBBER)
            else:
                self.failed(run, job, exc)
        except FileExistsError as exc:
            from .localfile import DestinationExists

            if isinstance(exc, DestinationExists):  # a file appeared: --no-clobber keeps it
                run.kept.add(job.src)
                self.skipped(run, job, NO_CLOBBER)
            else:
                self.failed(run, job, exc)
        except Exception as exc:
            log.debug("%s %s -> %s failed", job.action.value, job.src, job.dst, exc_info=True)
            self.failed(run, job, exc)

    # -- accounting and events -----------------------------------------------

    def emit(self, event: Event) -> None:
        """Pass ``event`` to the callback; a failing callback never fails a transfer."""
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:
            log.exception("the on_event callback raised on %s; the transfer goes on", event)

    def _event(self, kind: EventKind, job: Job, run: Run, **kw: object) -> None:
        if kind in self.wanted:
            self.emit(
                Event(kind, job.action, job.src, job.dst, size=job.size, dryrun=run.dryrun, **kw)  # type: ignore[arg-type]
            )

    def started(self, run: Run, job: Job) -> None:
        self._event(EventKind.STARTED, job, run)

    def progress(
        self, nbytes: int, direction: Literal["up", "down"], *, advanced: int | None = None
    ) -> None:
        """``nbytes`` of payload crossed the network for the current file
        (``bytes_uploaded`` / ``bytes_downloaded``), moving it ``advanced``
        bytes along in the units of its size (None: ``nbytes``): the PROGRESS
        event carries that, so a file's events add up to its size, the
        plan's total. A compressed upload sends fewer bytes than it reads:
        it passes the file's bytes read (docs/compression.md)."""
        current = _current.get()
        if current is not None:
            run, job = current
            if direction == "up":
                run.result.bytes_uploaded += nbytes
            else:
                run.result.bytes_downloaded += nbytes
            step = nbytes if advanced is None else advanced
            self._event(EventKind.PROGRESS, job, run, nbytes=step)

    def done(
        self, run: Run, job: Job, nbytes: int | None = None, verified: bool | None = None
    ) -> None:
        """A file is done; ``verified`` False counts a download or streamed copy
        whose source vouched for no checksum (``TransferResult.not_verified``)."""
        r = run.result
        if job.action is Action.DELETE:
            r.files_deleted += 1
        else:
            r.files_transferred += 1
            r.bytes_transferred += job.size if nbytes is None else nbytes
        if verified is False:
            r.not_verified += 1
        # The warnings this file's transfer gave (:meth:`warn`), on its DONE event too.
        notes = run.notes.pop(id(job), None)
        extra: dict[str, object] = {} if verified is None else {"verified": verified}
        if notes:
            extra["warning"] = "; ".join(notes)
        self._event(EventKind.DONE, job, run, **extra)

    def warn(self, message: str, kind: str = "wrong-checksum") -> None:
        """The file being transferred landed, and the user should know
        ``message`` about it (``TransferResult.warnings``, and its DONE event);
        ``kind``: see :class:`~synxfer.FileWarning`."""
        current = _current.get()
        if current is None:
            log.warning("%s", message)
            return
        run, job = current
        run.result.warnings.append(FileWarning(job.src, job.action, message, kind))
        run.notes.setdefault(id(job), []).append(message)

    def skipped(self, run: Run, job: Job, reason: str | None = None) -> None:
        run.result.files_skipped += 1
        run.result.bytes_skipped += job.size
        self._event(EventKind.SKIPPED, job, run, error=reason)

    def failed(self, run: Run, job: Job, exc: BaseException | str) -> None:
        msg = exc if isinstance(exc, str) else describe_error(exc, (job.src, job.dst))
        path = job.src if job.action is not Action.DELETE else job.dst
        run.result.failures.append(FileFailure(path, job.action, msg))
        run.notes.pop(id(job), None)
        self._event(EventKind.FAILED, job, run, error=msg)

    def on_retry(self, op: str, attempt: int, exc: BaseException) -> None:
        """RetryLayer hook: counts retries against the run and file being served."""
        current = _current.get()
        if current is None:
            return
        run, job = current
        run.result.retries += 1
        self._event(EventKind.RETRY, job, run, error=f"{op} attempt {attempt}: {exc}")


def keep_existing() -> bool:
    """Whether the job being served must not replace an existing local file
    (its run's ``no_clobber``); read on the event loop, where the job runs."""
    current = _current.get()
    return current is not None and current[0].no_clobber
