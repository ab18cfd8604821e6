"""syn:// downloads ask for pre-signed URLs in batches (the local Synapse-style service).

A sync of N files used to cost one ``POST /fileHandle/batch`` per file on
top of the listing's bundle per file; now a download asks for its URL
together with up to ``URL_BATCH - 1`` listed files' URLs, which wait in the
vendor with their handle ids. These tests pin what must hold while they
wait: a listing asks for none, one failing file in a batch fails only
itself, a URL of an old version or an expired one is never used.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from synxfer import (
    Client,
    NotFound,
    PermissionDenied,
    RetryPolicy,
    TransferConfig,
    TransientError,
)
from synxfer.backend import BackendOptions
from synxfer_synapse import SynapseBackend
from synxfer_synapse._backend import URL_BATCH

from ._synapse import service_fixtures

TOKEN = "syn-pat-BATCH-51c0"
BUCKET = "synapse-batch"
URLS = "POST /fileHandle/batch"


service, home = service_fixtures(BUCKET, TOKEN)


def _config() -> TransferConfig:
    return TransferConfig(retry=RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.05))


def _files(root: Path, n: int) -> dict[str, bytes]:
    files = {f"f{i:03d}.txt": f"file {i}\n".encode() * (i + 1) for i in range(n)}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def _asked(service: Any) -> int:
    """How many URL batches the service has answered so far."""
    return int(service.stats().get(URLS, 0))


@contextlib.asynccontextmanager
async def _listed(project: str, src: Path | None = None) -> AsyncIterator[SynapseBackend]:
    """``src`` synced up to the project (if given), then a backend that has
    listed the whole project (as a sync does first), closed on exit."""
    if src is not None:
        async with Client(_config()) as client:
            assert not (await client.sync_to(src, f"syn://{project}")).failures
    async with SynapseBackend(project, BackendOptions()) as backend:
        cursor: str | None = None
        while True:
            page = await backend.list_page("", cursor)
            cursor = page.cursor
            if cursor is None:
                break
        yield backend


def test_a_sync_down_asks_one_url_request_per_batch_of_files(
    service: Any, home: Path, tmp_path: Path
) -> None:
    n = URL_BATCH + 20
    project = service.create_project("count")
    files = _files(tmp_path / "src", n)
    dst = tmp_path / "dst"

    async def main() -> None:
        async with Client(_config()) as client:
            up = await client.sync_to(tmp_path / "src", f"syn://{project}")
            assert not up.failures, up.failures
            before = _asked(service)
            listed = [i async for i in client.ls(f"syn://{project}/", recursive=True)]
            assert len(listed) == n
            assert _asked(service) == before  # a listing pays for no URL
            down = await client.sync_from(f"syn://{project}", dst)
            assert not down.failures, down.failures
            assert down.files_transferred == n
            asked = _asked(service) - before
            assert asked <= math.ceil(n / URL_BATCH), asked

    asyncio.run(main())
    assert {p.name: p.read_bytes() for p in dst.iterdir() if p.is_file()} == files


def test_a_missing_and_a_refused_file_in_a_batch_fail_alone(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("failures")
    files = _files(tmp_path / "src", 4)

    async def main() -> None:
        async with _listed(project, tmp_path / "src") as backend:
            refused = backend.syn.remembered("f001.txt")
            assert refused is not None
            service.deny(refused.entity_id)
            async with SynapseBackend(project, BackendOptions()) as gone:
                await gone.delete("f002.txt")
            before = _asked(service)
            # The first read asks for all four URLs in one request.
            assert (await backend.read("f000.txt")).data == files["f000.txt"]
            assert _asked(service) == before + 1
            with pytest.raises(PermissionDenied) as refused_error:
                await backend.read("f001.txt")
            assert refused.entity_id in str(refused_error.value)
            assert "sharing settings" in str(refused_error.value)
            with pytest.raises(NotFound):
                await backend.read("f002.txt")
            assert (await backend.read("f003.txt")).data == files["f003.txt"]
            # The two failures asked again, alone (their own errors); f003 asked nothing.
            assert _asked(service) == before + 3

    asyncio.run(main())


def test_a_new_version_never_gets_the_old_handles_url(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("versions")
    src = tmp_path / "src"
    _files(src, 2)

    async def main() -> None:
        async with _listed(project, src) as backend, Client(_config()) as client:
            await backend.read("f000.txt")  # f001's URL (version 1) comes along
            (src / "f001.txt").write_bytes(b"version two\n")
            await client.upload_file(src / "f001.txt", f"syn://{project}/f001.txt")
            info = await backend.stat("f001.txt")  # the new version is remembered
            got = await backend.read("f001.txt")
            assert got.data == b"version two\n"
            assert got.info.etag == info.etag

    asyncio.run(main())


def test_a_url_that_expired_while_waiting_is_asked_again(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("expiry")
    files = _files(tmp_path / "src", 2)

    async def main() -> None:
        async with _listed(project, tmp_path / "src") as backend:
            before = _asked(service)
            # Stock moto does not check expiry: the read of f000 succeeds, and
            # only the vendor's own check can tell f001's URL has lapsed.
            service.expire_url_batches(1)
            assert (await backend.read("f000.txt")).data == files["f000.txt"]
            assert (await backend.read("f001.txt")).data == files["f001.txt"]
            assert _asked(service) == before + 2

    asyncio.run(main())


def test_urls_no_download_takes_make_room_for_the_next_batch(
    service: Any, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync that skips most files leaves their URLs unused: the oldest are
    dropped, and batching goes on (it once stopped, one request a file again)."""
    import synxfer_synapse._backend as syn_backend

    monkeypatch.setattr(syn_backend, "URL_BATCH", 4)
    monkeypatch.setattr(syn_backend, "_PREFETCH_MAX", 6)
    project = service.create_project("skips")
    files = _files(tmp_path / "src", 12)

    async def main() -> None:
        async with _listed(project, tmp_path / "src") as backend:
            before = _asked(service)
            # Each asks for 4 URLs; f001-f003 and f005-f007 are never read.
            for name in ("f000.txt", "f004.txt", "f008.txt", "f009.txt", "f010.txt"):
                assert (await backend.read(name)).data == files[name]
            assert _asked(service) == before + 3

    asyncio.run(main())


def test_a_batch_the_service_fails_is_asked_again_whole(
    service: Any, home: Path, tmp_path: Path
) -> None:
    """After a 5xx, the retry asks for the same riders again: not one request per file."""
    project = service.create_project("retry")
    files = _files(tmp_path / "src", 4)

    async def main() -> None:
        # A bare backend, no retry layer: the first read fails.
        async with _listed(project, tmp_path / "src") as backend:
            before = _asked(service)
            service.fail(1, 503)
            with pytest.raises(TransientError):
                await backend.read("f000.txt")
            for name, data in files.items():
                assert (await backend.read(name)).data == data
            # The 503 is not counted by route: one answered batch carried all four.
            assert _asked(service) == before + 1

    asyncio.run(main())
