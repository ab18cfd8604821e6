"""Jobs: one file's worth of work each (upload, download, copy, delete)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._models import Action
from ..backend import Backend
from .compare import SKIP, Check, Compare, decide_copy, resolve
from .core import Engine, Run
from .download import download_object
from .localtree import LocalEntry
from .upload import upload_path

__all__ = [
    "CopyJob",
    "DeleteLocalJob",
    "DeleteRemoteJob",
    "DownloadJob",
    "UploadJob",
]


class _TransferJob:
    """Shared flow of upload and download jobs: settle a pending check, honour
    the dry run, transfer, account."""

    action: Action
    src: str
    dst: str
    size: int
    backend: Backend
    key: str
    local: LocalEntry | None
    check: Check | None

    async def run(self, engine: Engine, run: Run) -> None:
        if (
            self.check is not None
            and self.local is not None
            and not await resolve(
                engine, self.check, self.backend, self.key, self.local, self.action is Action.UPLOAD
            )
        ):
            engine.skipped(run, self)
            return
        if run.dryrun:
            engine.done(run, self)
            return
        engine.started(run, self)
        nbytes, verified = await self.transfer(engine, run)
        engine.done(run, self, nbytes, verified)

    async def transfer(self, engine: Engine, run: Run) -> tuple[int, bool | None]:
        """Move the file: the bytes moved, and whether a download was verified."""
        raise NotImplementedError


@dataclass
class UploadJob(_TransferJob):
    path: Path
    backend: Backend
    key: str
    size: int
    local: LocalEntry | None = None
    check: Check | None = None
    action: Action = Action.UPLOAD
    src: str = ""
    dst: str = ""

    def __post_init__(self) -> None:
        self.src = self.src or str(self.path)
        self.dst = self.dst or self.backend.url(self.key)

    async def transfer(self, engine: Engine, run: Run) -> tuple[int, bool | None]:
        sent = await upload_path(
            engine, self.path, self.backend, self.key, self.size, options=run.write_options
        )
        return sent, None


@dataclass
class DownloadJob(_TransferJob):
    backend: Backend
    key: str
    dest: Path
    size: int
    etag: str | None = None
    local: LocalEntry | None = None
    check: Check | None = None
    action: Action = Action.DOWNLOAD
    src: str = ""
    dst: str = ""

    def __post_init__(self) -> None:
        self.src = self.src or self.backend.url(self.key)
        self.dst = self.dst or str(self.dest)

    async def transfer(self, engine: Engine, run: Run) -> tuple[int, bool | None]:
        # Data that does not match its checksum is fetched again inside,
        # under the retry policy (see .download).
        return await download_object(
            engine, self.backend, self.key, self.dest, self.size, self.etag
        )


@dataclass
class CopyJob:
    """One object from one remote location to another."""

    src_backend: Backend
    src_key: str
    backend: Backend  # the destination
    key: str
    size: int
    etag: str | None = None
    mode: Compare = Compare.ALWAYS
    check: Check | None = None
    action: Action = Action.COPY
    src: str = ""
    dst: str = ""

    def __post_init__(self) -> None:
        self.src = self.src or self.src_backend.url(self.src_key)
        self.dst = self.dst or self.backend.url(self.key)

    async def run(self, engine: Engine, run: Run) -> None:
        if self.check is not None and not await self._needs_copy():
            engine.skipped(run, self)
            return
        if run.dryrun:
            engine.done(run, self)
            return
        engine.started(run, self)
        # Data that does not match its checksum is read (and sent) again
        # inside, under the retry policy; a source that vouches for no
        # checksum is copied and counted as not verified (see .copy).
        from .copy import copy_object  # here: a run without remote copies never needs it

        _, verified = await copy_object(
            engine,
            self.src_backend,
            self.src_key,
            self.backend,
            self.key,
            self.size,
            self.etag,
            options=run.write_options,
        )
        engine.done(run, self, self.size, verified)

    async def _needs_copy(self) -> bool:
        """Settle a check with a HEAD on each side (listings may lack metadata)."""
        src, dst = await asyncio.gather(
            self.src_backend.stat(self.src_key), self.backend.stat(self.key)
        )
        return decide_copy(self.mode, src, dst, final=True) != SKIP


@dataclass
class DeleteRemoteJob:
    """Deletes a batch of keys in one request where the backend batches."""

    backend: Backend
    keys: Sequence[str]
    action: Action = Action.DELETE
    size: int = 0
    src: str = ""
    dst: str = ""

    def __post_init__(self) -> None:
        self.dst = self.dst or self.backend.url(self.keys[0] if self.keys else "")

    async def run(self, engine: Engine, run: Run) -> None:
        failed = {} if run.dryrun else await self.backend.delete_many(self.keys)
        for key in self.keys:
            one = DeleteRemoteJob(self.backend, [key], dst=self.backend.url(key))
            if key in failed:
                engine.failed(run, one, failed[key])
            else:
                engine.done(run, one)


@dataclass
class DeleteLocalJob:
    path: Path
    action: Action = Action.DELETE
    size: int = 0
    src: str = ""
    dst: str = ""

    def __post_init__(self) -> None:
        self.dst = self.dst or str(self.path)

    async def run(self, engine: Engine, run: Run) -> None:
        if not run.dryrun:
            await engine.scheduler.io(self.path.unlink)
        engine.done(run, self)
