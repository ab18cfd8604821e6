"""The per-file fast path (moto S3 over HTTP, the real S3 backend).

Downloads: a single-request object is one GET and one worker-thread call, no
journal, nothing half-written under the real name; every body is received
into a pooled buffer. Uploads: a single-request file is one worker-thread
call and one put, no journal. Events: only the kinds someone listens to are
built."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any, ClassVar

import synxfer
from synxfer import KiB
from synxfer.engine.localfile import TEMP_SUFFIX
from synxfer.layers import Layer

from .conftest import PART, SMALL, tree, write_tree


def _leftovers(root: Path) -> list[str]:
    """Temp files anywhere under ``root``."""
    return sorted(p.name for p in root.rglob(f"*{TEMP_SUFFIX}"))


def _journal(config: synxfer.TransferConfig) -> Path:
    assert config.state_dir is not None
    return Path(config.state_dir) / "journal.sqlite3"


class _WrongMd5(Layer):
    """Makes the server vouch for an MD5 the data does not have (as a corrupted
    body would look): the engine must refuse the file."""

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        result = await fn(*args)
        if op == "read_into" and isinstance(result, synxfer.ObjectInfo):
            wrong = base64.b64encode(hashlib.md5(b"not this").digest()).decode()
            return dataclasses.replace(result, checksums={"md5": wrong})
        return result


async def test_single_request_download_one_thread_call_no_journal_no_temp(
    bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """An object of one range: one worker-thread call after the GET (open the
    temp, write, hash, verify, tag, rename), no journal at all, no temp left,
    parent directories created, the source's mtime given to the file."""
    src = tmp_path / "src"
    write_tree(src, {"a/b/small.bin": 300 * KiB})
    os.utime(src / "a/b/small.bin", ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    config = SMALL.evolve(state_dir=str(tmp_path / "state"))
    url = f"s3://{bucket}/p/a/b/small.bin"
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        await c.upload_file(src / "a/b/small.bin", url)
    dest = tmp_path / "dst" / "deep" / "small.bin"
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        executor = c._engine.scheduler.executor
        calls: list[str] = []
        submit = executor.submit

        def counting_submit(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            calls.append(getattr(fn, "__name__", repr(fn)))
            return submit(fn, *args, **kwargs)

        executor.submit = counting_submit  # type: ignore[method-assign]
        r = await c.download_file(url, dest)
    assert r.ok
    assert r.files_transferred == 1
    assert dest.read_bytes() == (src / "a/b/small.bin").read_bytes()
    assert dest.stat().st_mtime_ns == 1_600_000_000_000_000_000
    assert len(calls) == 1, calls
    assert _leftovers(tmp_path / "dst") == []
    assert not _journal(config).exists(), "a single-request download touched the journal"


async def test_multipart_download_still_journals(
    bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """The journal is skipped only where there is nothing to resume."""
    src = tmp_path / "src"
    write_tree(src, {"big.bin": 2 * PART + 1})
    config = SMALL.evolve(state_dir=str(tmp_path / "state"))
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        await c.sync_to(src, f"s3://{bucket}/p")
        r = await c.sync_from(f"s3://{bucket}/p", tmp_path / "dst")
    assert r.ok
    assert tree(tmp_path / "dst") == tree(src)
    assert _journal(config).exists()
    assert _leftovers(tmp_path / "dst") == []


async def test_failed_single_request_download_leaves_nothing_under_the_real_name(
    bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """Data that fails verification is never renamed into place: a new file is
    not created, an existing one keeps its old content, and no temp remains."""
    src = tmp_path / "src"
    write_tree(src, {"new.bin": 200 * KiB, "old.bin": 100 * KiB})
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        await c.sync_to(src, f"s3://{bucket}/p")
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "old.bin").write_bytes(b"the old version")
    for resume in (True, False):
        config = SMALL.evolve(resume=resume, state_dir=str(tmp_path / "state"))
        async with synxfer.Client(config, endpoint_url=s3_endpoint, layers=[_WrongMd5]) as c:
            r = await c.copy(f"s3://{bucket}/p/", str(dst), recursive=True)
        assert r.files_failed == 2, r.failures
        assert all("MD5" in f.error for f in r.failures), r.failures
        assert not (dst / "new.bin").exists()
        assert (dst / "old.bin").read_bytes() == b"the old version"
        assert _leftovers(dst) == []


async def test_failed_rename_removes_the_temp(
    bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """A failure inside the worker-thread call (here: the destination is a
    directory) removes the temp file and leaves the destination alone."""
    src = tmp_path / "src"
    write_tree(src, {"x": 10 * KiB})
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        await c.sync_to(src, f"s3://{bucket}/p")
        dst = tmp_path / "dst"
        (dst / "x").mkdir(parents=True)
        (dst / "x" / "keep").write_bytes(b"k")
        r = await c.sync_from(f"s3://{bucket}/p", dst)
    assert r.files_failed == 1
    assert (dst / "x" / "keep").read_bytes() == b"k"
    assert _leftovers(dst) == []


async def test_small_objects_reuse_pooled_buffers(
    bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """Forty objects smaller than a part are received into slices of pooled
    buffers: no more buffers are ever allocated than files are in flight, and
    the budget is never exceeded."""
    src = tmp_path / "src"
    sizes = {f"f{i:02d}": 170 * KiB + 3 * KiB * i for i in range(40)}  # one size class
    write_tree(src, sizes)
    config = SMALL.evolve(max_threads=2)  # 4 files in flight
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        await c.sync_to(src, f"s3://{bucket}/p")
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        pool = c._engine.scheduler.buffers
        budget = c._engine.scheduler.budget
        r = await c.sync_from(f"s3://{bucket}/p", tmp_path / "dst")
        assert r.ok
        assert r.files_transferred == 40
        assert 1 <= pool.allocated <= config.max_files
        assert budget.peak <= budget.capacity
        assert budget.in_use == 0
    assert tree(tmp_path / "dst") == tree(src)


# -- uploads of single-request files -----------------------------------------------


async def test_single_request_upload_one_thread_call_no_journal(
    bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """A file sent in one request: one worker-thread call (open, read, hash,
    identity check), then the put; the journal is never touched."""
    src = tmp_path / "src"
    write_tree(src, {"a.bin": 300 * KiB})
    config = SMALL.evolve(state_dir=str(tmp_path / "state"))
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        executor = c._engine.scheduler.executor
        calls: list[str] = []
        submit = executor.submit

        def counting_submit(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            calls.append(getattr(fn, "__name__", repr(fn)))
            return submit(fn, *args, **kwargs)

        executor.submit = counting_submit  # type: ignore[method-assign]
        r = await c.upload_file(src / "a.bin", f"s3://{bucket}/p/a.bin")
        assert r.ok
        assert calls == ["read_whole_file"]
        executor.submit = submit  # type: ignore[method-assign]
        back = await c.download_file(f"s3://{bucket}/p/a.bin", tmp_path / "back")
    assert back.ok
    assert (tmp_path / "back").read_bytes() == (src / "a.bin").read_bytes()
    assert (tmp_path / "back").stat().st_mtime_ns == (src / "a.bin").stat().st_mtime_ns
    assert not _journal(config).exists()


async def test_single_request_upload_of_a_file_that_changed_size_since_listed(
    bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """The size a listing gave is a hint: a file that grew or shrank since is
    sent as it is now (the general path), never cut to the old size."""
    from synxfer.engine.upload import upload_path

    path = tmp_path / "f"
    path.write_bytes(b"x" * 5000)
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        backend, key = await c.backend(f"s3://{bucket}/f")
        for listed in (4000, 6000):
            sent = await upload_path(c._engine, path, backend, key, listed)
            assert sent == 5000
            assert (await backend.stat(key)).size == 5000


# -- events ------------------------------------------------------------------------


class _Only:
    """An ``on_event`` callback that asks for DONE events only."""

    event_kinds = frozenset({synxfer.EventKind.DONE})

    def __init__(self) -> None:
        self.events: list[synxfer.Event] = []

    def __call__(self, event: synxfer.Event) -> None:
        self.events.append(event)


async def test_events_are_built_only_for_kinds_someone_listens_to(
    bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    write_tree(src, {"a": 10, "b": 20, "c/d": 30})
    narrow = _Only()
    every: list[synxfer.Event] = []
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint, on_event=narrow) as c:
        r = await c.sync_to(src, f"s3://{bucket}/one")
    assert r.files_transferred == 3
    assert r.bytes_uploaded == 60  # accounting does not depend on listeners
    assert sorted(e.src for e in narrow.events) == sorted(str(src / n) for n in ("a", "b", "c/d"))
    assert {e.kind for e in narrow.events} == {synxfer.EventKind.DONE}
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint, on_event=every.append) as c:
        await c.sync_to(src, f"s3://{bucket}/two")
    assert {e.kind for e in every} == {
        synxfer.EventKind.PLANNED,
        synxfer.EventKind.STARTED,
        synxfer.EventKind.PROGRESS,
        synxfer.EventKind.DONE,
    }


def test_cli_printer_asks_only_for_what_it_prints() -> None:
    import io

    from synxfer.cli._output import EventPrinter, Progress

    K = synxfer.EventKind
    quiet = EventPrinter(quiet=True, out=io.StringIO(), err=io.StringIO())
    assert quiet.event_kinds == {K.DONE, K.FAILED, K.RETRY}  # DONE: per-file warnings
    lines = EventPrinter(out=io.StringIO(), err=io.StringIO())
    assert lines.event_kinds == {K.DONE, K.FAILED, K.RETRY}
    json_lines = EventPrinter(json_lines=True, quiet=True, out=io.StringIO())
    assert json_lines.event_kinds == {K.DONE, K.SKIPPED, K.FAILED, K.RETRY}
    bar = EventPrinter(quiet=True, progress=Progress(io.StringIO()), out=io.StringIO())
    assert bar.event_kinds == {
        K.PLANNED,
        K.STARTED,
        K.PROGRESS,
        K.DONE,
        K.SKIPPED,
        K.FAILED,
        K.RETRY,
    }


class _Ops(Layer):
    """Records the backend operations the engine asks for."""

    seen: ClassVar[list[str]] = []

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        type(self).seen.append(op)
        return await fn(*args)


async def test_object_two_parts_long_comes_in_one_get_and_is_verified(
    bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """An object up to SINGLE_GET_PARTS parts long (here a 2-part multipart
    upload with a composite checksum) is one GET: no HEAD, no second range,
    no journal; the composite checksum is still checked, part by part."""
    src = tmp_path / "src"
    write_tree(src, {"mid.bin": PART + PART // 2})
    config = SMALL.evolve(state_dir=str(tmp_path / "state"))
    url = f"s3://{bucket}/p/mid.bin"
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        await c.upload_file(src / "mid.bin", url)
    _Ops.seen = []
    config = config.evolve(state_dir=str(tmp_path / "state-down"))
    async with synxfer.Client(config, endpoint_url=s3_endpoint, layers=[_Ops]) as c:
        r = await c.copy(f"s3://{bucket}/p/", str(tmp_path / "dst"), recursive=True)
    assert r.ok
    assert r.files_transferred == 1
    assert not r.not_verified
    assert (tmp_path / "dst" / "mid.bin").read_bytes() == (src / "mid.bin").read_bytes()
    assert _Ops.seen.count("read_into") == 1, _Ops.seen
    assert "stat" not in _Ops.seen, _Ops.seen
    assert not _journal(config).exists()
