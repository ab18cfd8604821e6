"""What an upload costs the Synapse service, request by request (issue 35).

On the ``syn://`` path every service request is CPU on the service and a
round trip for the client, so a new file should cost what Synapse's API
needs and no more: start, one part-URL batch, an ``add`` per part,
complete, and the entity's create -- plus, once per folder, its upload
destination. These tests count the local service's requests by route
(``SynapseService.stats``) for fresh syncs and for a changed file; the
counts are exact, so a request that creeps back in fails them.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

from synxfer import Client, MiB, RetryPolicy, TransferConfig
from synxfer.backend import BackendOptions
from synxfer_synapse import SynapseBackend

from ._synapse import requests_since, service_fixtures

BUCKET = "synapse-requests"


service, home = service_fixtures(BUCKET, "syn-pat-requests")


def _config(**changes: Any) -> TransferConfig:
    return TransferConfig(
        retry=RetryPolicy(attempts=4, initial_delay=0.01, max_delay=0.05), **changes
    )


def _src(tmp_path: Path, sizes: dict[str, int]) -> Path:
    """``tmp_path/src`` holding a file of random bytes per name, of its size."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for name, size in sizes.items():
        (src / name).write_bytes(os.urandom(size))
    return src


async def _sync(
    service: Any, src: Path, url: str, sent: int | None = None, **changes: Any
) -> dict[str, int]:
    """``src`` synced up to ``url`` by a new client (one run), with no failure
    and ``sent`` files sent if given: the service's requests it made, by route."""
    async with Client(_config(**changes)) as client:
        before = service.stats()
        res = await client.sync_to(src, url)
        assert not res.failures, res.failures
        if sent is not None:
            assert res.files_transferred == sent
        return requests_since(service, before)


N = 6


def test_a_fresh_sync_of_small_files_costs_five_requests_a_file(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("small")
    src = _src(tmp_path, {f"f{i}.bin": 1000 + i for i in range(N)})

    assert asyncio.run(_sync(service, src, f"syn://{project}/data", sent=N)) == {
        # Per file: start, its part's URL, add, complete, create.
        "POST /file/multipart": N,
        "POST /file/multipart/{up}/presigned/url/batch": N,
        "PUT /file/multipart/{up}/add/{part}": N,
        "PUT /file/multipart/{up}/complete": N,
        "POST /entity": N + 1,  # and the folder
        # Per run: the container checked, the folder looked up by the listing
        # (then made without looking again), its upload destination asked once.
        "GET /entity/{id}": 1,
        "POST /entity/child": 1,
        "GET /entity/{id}/uploadDestination": 1,
    }


def test_a_fresh_multipart_file_costs_one_url_batch_and_an_add_a_part(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("multi")
    src = _src(tmp_path, {"big.bin": 12 * MiB})
    # One part in flight: parts reach the store in order (the service's
    # per-part check through moto's ListParts sees an early last part as
    # missing, which would add a resend to the count).
    sent = _sync(service, src, f"syn://{project}/big", part_size=5 * MiB, max_threads=1)

    assert asyncio.run(sent) == {
        "POST /file/multipart": 1,
        "POST /file/multipart/{up}/presigned/url/batch": 1,
        "PUT /file/multipart/{up}/add/{part}": 3,
        "PUT /file/multipart/{up}/complete": 1,
        "POST /entity": 2,  # the file and its folder
        "GET /entity/{id}": 1,  # the container checked
        "POST /entity/child": 1,  # the folder looked up, by the listing
        "GET /entity/{id}/uploadDestination": 1,
    }


def test_a_changed_file_is_a_new_version_without_looking_it_up_again(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("changed")
    src = _src(tmp_path, {f"f{i}.bin": 500 + i for i in range(3)})
    url = f"syn://{project}/data"
    target = src / "f0.bin"

    async def main() -> tuple[dict[str, int], dict[str, Any]]:
        await _sync(service, src, url)
        st = target.stat()
        target.write_bytes(b"new content\n")
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 10**10))
        changed = await _sync(service, src, url, sent=1)
        async with SynapseBackend(project, BackendOptions()) as backend:
            info = await backend.stat("data/f0.bin")
            remote = backend.syn.remembered("data/f0.bin")
            assert remote is not None
            versions = await _versions(backend, remote.entity_id)
        return changed, {"etag": info.etag, "versions": versions}

    changed, after = asyncio.run(main())
    assert changed == {
        # The listing: the folder found, its children, each file's entity.
        # The container, the folder (a folder?), and the file's entity for its etag.
        "GET /entity/{id}": 3,
        "POST /entity/child": 1,
        "POST /entity/children": 1,
        "POST /entity/{id}/bundle2": 3,
        # The changed file: no lookup, no second read of what the listing saw.
        "GET /entity/{id}/uploadDestination": 1,
        "POST /file/multipart": 1,
        "POST /file/multipart/{up}/presigned/url/batch": 1,
        "PUT /file/multipart/{up}/add/{part}": 1,
        "PUT /file/multipart/{up}/complete": 1,
        "PUT /entity/{id}": 1,  # newVersion=true: the same entity, version 2
    }
    # A new version of the same entity, holding the new bytes.
    assert after == {
        "etag": hashlib.md5(b"new content\n").hexdigest(),
        "versions": [1, 2],
    }


def test_new_files_in_a_listed_folder_are_not_looked_up(
    service: Any, home: Path, tmp_path: Path
) -> None:
    """A sync lists the destination folder whole: a new file there is one
    create, no ``/entity/child`` lookup each."""
    project = service.create_project("listed")
    src = _src(tmp_path, {"old.bin": 700})
    url = f"syn://{project}/data"

    async def main() -> dict[str, int]:
        await _sync(service, src, url)
        _src(tmp_path, {f"new{i}.bin": 600 + i for i in range(4)})
        # Another run: the folder is not its own.
        return await _sync(service, src, url, sent=4)

    changed = asyncio.run(main())
    assert changed.get("POST /entity/child") == 1  # the folder, for the listing
    assert changed.get("POST /entity") == 4
    assert changed.get("POST /entity/{id}/bundle2") == 1  # old.bin, by the listing


# -- what the upload's start knew may be stale: the entity gone, moved, or made --


async def _backend(project: str) -> SynapseBackend:
    backend = SynapseBackend(project, BackendOptions())
    await backend.open()
    return backend


async def _versions(backend: SynapseBackend, entity_id: str) -> list[int]:
    doc = await backend.rest.call(
        "GET", "repo", f"/entity/{entity_id}/version", url=backend.url(), what="versions"
    )
    return sorted(v["versionNumber"] for v in doc["results"])


def test_an_entity_deleted_or_moved_since_it_was_seen_is_not_written(
    service: Any, home: Path
) -> None:
    """A stat remembers the entity; it is deleted (or moved away) before the
    upload completes: the upload makes a new entity at the key, not a
    version of the gone one (an error) nor of the moved one."""
    project = service.create_project("stale")

    async def main() -> None:
        backend = await _backend(project)
        try:
            opts = _config().write_options
            for key in ("gone.txt", "moved.txt"):
                await backend.put(key, b"first\n", opts)
                await backend.stat(key)
                seen = backend.syn.remembered(key)
                assert seen is not None
                if key == "gone.txt":
                    await backend.delete(key)
                else:
                    other = await backend.tree.folder("elsewhere", create=True)
                    entity = await backend.tree.entity(seen.entity_id, key)
                    entity["parentId"] = other
                    await backend.rest.call(
                        "PUT", "repo", f"/entity/{seen.entity_id}", body=entity, url=key, what="mv"
                    )
                info = await backend.put(key, b"second\n", opts)
                assert info.etag == hashlib.md5(b"second\n").hexdigest()
                now = await backend.tree.remote(key)
                assert now is not None
                assert now.entity_id != seen.entity_id
                assert await _versions(backend, now.entity_id) == [1]
            moved = await backend.tree.remote("elsewhere/moved.txt")
            assert moved is not None
            assert moved.md5 == hashlib.md5(b"first\n").hexdigest()  # left alone
        finally:
            await backend.aclose()

    asyncio.run(main())


def test_a_file_another_writer_made_in_a_folder_made_here_gets_a_new_version(
    service: Any, home: Path
) -> None:
    """The folder was made by this backend, so it 'knows' the name is free;
    another writer made the file meanwhile: the create's 409 makes it look,
    and the other writer's entity gets a new version (no duplicate)."""
    project = service.create_project("concurrent")

    async def main() -> None:
        mine, theirs = await _backend(project), await _backend(project)
        try:
            opts = _config().write_options
            await mine.put("d/a.txt", b"mine\n", opts)  # mine made the folder d
            before = service.stats().get("POST /entity/child", 0)
            await theirs.put("d/b.txt", b"theirs\n", opts)
            made = await theirs.tree.remote("d/b.txt")
            assert made is not None
            lookups = service.stats().get("POST /entity/child", 0) - before
            await mine.put("d/b.txt", b"mine too\n", opts)
            now = await mine.tree.remote("d/b.txt")
            assert now is not None
            assert now.entity_id == made.entity_id
            assert now.md5 == hashlib.md5(b"mine too\n").hexdigest()
            assert await _versions(mine, made.entity_id) == [1, 2]
            assert lookups >= 1
        finally:
            await mine.aclose()
            await theirs.aclose()

    asyncio.run(main())


def test_a_folder_seen_missing_then_made_by_another_writer_is_used(
    service: Any, home: Path
) -> None:
    """A listing found the folder missing, so the upload creates it without
    looking again; another writer made it meanwhile: the create's 409 makes
    it use theirs (one folder, both files in it)."""
    project = service.create_project("folder-race")

    async def main() -> None:
        mine, theirs = await _backend(project), await _backend(project)
        try:
            opts = _config().write_options
            assert await mine.tree.folder("x", create=False) is None
            await theirs.put("x/theirs.txt", b"theirs\n", opts)
            await mine.put("x/mine.txt", b"mine\n", opts)
            assert await mine.tree.folder("x", create=False) == await theirs.tree.folder(
                "x", create=False
            )
            listed = [i.key async for i in theirs.list("x/")]
            assert listed == ["x/mine.txt", "x/theirs.txt"]
        finally:
            await mine.aclose()
            await theirs.aclose()

    asyncio.run(main())
