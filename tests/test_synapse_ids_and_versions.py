"""syn:// addresses files as synapseclient users do: by entity id
(``syn://syn456``, as ``synapse get syn456``) and by version (``--version-id
N``, ``ls --all-versions``, ``syn://syn456.2``), on the local Synapse-style
service over stock moto; 501/505 are not retried; the service versions a
File entity as Synapse does (a handle of another MD5 only).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from synxfer import BackendError, Client, RetryPolicy, TransferConfig, TransientError
from synxfer.backend import BackendOptions
from synxfer.cli import main as cli
from synxfer_synapse import SynapseBackend

from ._synapse import (
    entity_id_of,
    moto_s3,
    requests_since,
    rest_call,
    service_fixtures,
    synapseclient_for,
)

TOKEN = "syn-pat-versions-7c2a"
BUCKET = "synapse-versions"

service, home = service_fixtures(BUCKET, TOKEN)


def _config() -> TransferConfig:
    return TransferConfig(retry=RetryPolicy(attempts=4, initial_delay=0.01, max_delay=0.05))


def _upload(path: Path, url: str) -> None:
    async def main() -> None:
        async with Client(_config()) as client:
            res = await client.upload_file(path, url)
            assert not res.failures, res.failures

    asyncio.run(main())


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _versions(capsys: pytest.CaptureFixture[str], url: str) -> list[dict[str, Any]]:
    code, out, err = _cli(capsys, "ls", "--all-versions", "--json", url)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines() if '"object"' in line]


def _two_versions(service: Any, tmp_path: Path, name: str) -> tuple[str, str, bytes, bytes]:
    """A project with ``d/a.csv`` written twice by synxfer: (project, file id, v1, v2)."""
    project = service.create_project(name)
    v1, v2 = b"id,value\n1,2\n", b"id,value\n1,2\n3,4\n"
    f = tmp_path / "a.csv"
    f.write_bytes(v1)
    _upload(f, f"syn://{project}/d/a.csv")
    f.write_bytes(v2)
    _upload(f, f"syn://{project}/d/a.csv")
    return project, asyncio.run(entity_id_of(project, "d/a.csv")), v1, v2


# -- a File id as the URL ------------------------------------------------------


def test_a_file_id_names_that_file(
    service: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project, file_id, _, v2 = _two_versions(service, tmp_path, "by-id")
    out = tmp_path / "out"
    out.mkdir()
    # synapse get syn456: saved under the entity's name.
    code, _, err = _cli(capsys, "cp", f"syn://{file_id}", f"{out}/")
    assert code == 0, err
    assert (out / "a.csv").read_bytes() == v2
    # ... or under the name given.
    code, _, err = _cli(capsys, "cp", f"syn://{file_id}", str(out / "x.csv"))
    assert code == 0, err
    assert (out / "x.csv").read_bytes() == v2
    code, text, err = _cli(capsys, "cat", f"syn://{file_id}")
    assert code == 0, err
    assert text.encode() == v2
    code, text, err = _cli(capsys, "ls", f"syn://{file_id}")
    assert code == 0, err
    assert text.split()[-1] == "a.csv"
    # The File's own name under it is the same file; nothing else is.
    code, text, err = _cli(capsys, "cat", f"syn://{file_id}/a.csv")
    assert (code, text.encode()) == (0, v2), err
    code, _, err = _cli(capsys, "cat", f"syn://{file_id}/b.csv")
    assert code == 1
    assert "no such object" in err
    # synapse get -r syn123: a Project syncs down as its tree.
    code, _, err = _cli(capsys, "sync", f"syn://{project}", str(out / "tree"))
    assert code == 0, err
    assert (out / "tree" / "d" / "a.csv").read_bytes() == v2
    code, _, err = _cli(capsys, "sync", f"syn://{file_id}", str(out / "one"))
    assert code == 0, err
    assert [p.name for p in (out / "one").iterdir()] == ["a.csv"]


def test_an_upload_to_a_file_id_is_a_new_version_of_it(
    service: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project, file_id, _, _ = _two_versions(service, tmp_path, "store-id")
    v3 = tmp_path / "other-name.txt"
    v3.write_bytes(b"third\n")
    # synapse store --id syn456 FILE: a new version, the entity keeps its name.
    code, _, err = _cli(capsys, "cp", str(v3), f"syn://{file_id}")
    assert code == 0, err
    got = _versions(capsys, f"syn://{project}/d/a.csv")
    assert [(v["version_id"], v["is_latest"], v["size"]) for v in got] == [
        ("3", True, 6),
        ("2", False, 17),
        ("1", False, 13),
    ]
    # Another name under a File is refused, saying where other files go.
    code, _, err = _cli(capsys, "cp", str(v3), f"syn://{file_id}/b.csv")
    assert code == 1
    assert f"{file_id} is the File 'a.csv', not a folder" in err
    assert "name the folder that holds it" in err
    # A version cannot change.
    code, _, err = _cli(capsys, "cp", str(v3), f"syn://{file_id}.1")
    assert code == 1
    assert "names version 1" in err
    assert f"write to syn://{file_id}" in err


def test_a_file_id_copies_to_and_from_another_store(
    service: Any, home: Path, tmp_path: Path, stock_moto: Any
) -> None:

    _, file_id, _, v2 = _two_versions(service, tmp_path, "cross")
    endpoint = str(stock_moto.endpoint_url)
    s3: Any = moto_s3(stock_moto)
    s3.create_bucket(Bucket="ids-cross")
    s3.put_object(Bucket="ids-cross", Key="in/new.csv", Body=b"from s3\n")

    async def main() -> None:
        async with Client(_config(), endpoints={"s3": endpoint}) as client:
            res = await client.copy(f"syn://{file_id}", "s3://ids-cross/out/")
            assert not res.failures, res.failures
            # An S3 object copied to a File id is its new version.
            res = await client.copy("s3://ids-cross/in/new.csv", f"syn://{file_id}")
            assert not res.failures, res.failures
            assert await client.get_bytes(f"syn://{file_id}") == b"from s3\n"
            assert await client.get_bytes(f"syn://{file_id}.2") == v2

    asyncio.run(main())
    assert s3.get_object(Bucket="ids-cross", Key="out/a.csv")["Body"].read() == v2


def test_ids_that_are_no_file_say_what_they_are(
    service: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project, file_id, _, _ = _two_versions(service, tmp_path, "not-files")
    folder = asyncio.run(entity_id_of(project, "d"))
    link = asyncio.run(
        rest_call(
            "syn1",
            "POST",
            "/entity",
            {
                "name": "to-a",
                "parentId": project,
                "concreteType": "org.sagebionetworks.repo.model.Link",
                "linksTo": {"targetId": file_id},
            },
        )
    )["id"]
    code, _, err = _cli(capsys, "cat", f"syn://{link}")
    assert code == 1
    assert f"{link} is a link entity (org.sagebionetworks.repo.model.Link)" in err
    code, _, err = _cli(capsys, "cat", "syn://syn99999999")
    assert code == 1
    assert "no Project, Folder or File syn99999999" in err
    code, _, err = _cli(capsys, "cat", f"syn://{folder}.2")
    assert code == 1
    assert "only a File has versions" in err
    # A Folder id is a prefix, as before.
    code, _, err = _cli(capsys, "cat", f"syn://{folder}")
    assert code == 2
    assert "names a prefix" in err


# -- versions --------------------------------------------------------------------


def test_versions_stored_by_synapseclient_are_listed_and_read_by_synxfer(
    service: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synapseclient = pytest.importorskip("synapseclient")
    syn = synapseclient_for(home)
    project = service.create_project("interop")
    v1, v2 = b"first version\n" * 50, b"second\n" * 30
    f = tmp_path / "data.csv"
    f.write_bytes(v1)
    stored = syn.store(synapseclient.File(str(f), parent=project))
    # Another path of the same name: synapseclient's cache keys a path by its
    # mtime, so rewriting one within a second would store its old handle again.
    (tmp_path / "two").mkdir()
    f2 = tmp_path / "two" / "data.csv"
    f2.write_bytes(v2)
    again = syn.store(synapseclient.File(str(f2), parent=project))
    assert (stored.versionNumber, again.versionNumber, again.id) == (1, 2, stored.id)

    got = _versions(capsys, f"syn://{project}/data.csv")
    assert [(v["version_id"], v["is_latest"], v["etag"]) for v in got] == [
        ("2", True, hashlib.md5(v2).hexdigest()),
        ("1", False, hashlib.md5(v1).hexdigest()),
    ]
    out = tmp_path / "v1.csv"
    code, _, err = _cli(capsys, "cp", "--version-id", "1", f"syn://{project}/data.csv", str(out))
    assert code == 0, err
    assert out.read_bytes() == v1
    code, text, err = _cli(capsys, "cat", f"syn://{stored.id}.1")
    assert (code, text.encode()) == (0, v1), err

    async def main() -> None:
        async with Client(_config()) as client:
            res = await client.download_file(
                f"syn://{project}/data.csv", tmp_path / "again", version_id="1"
            )
            assert res.not_verified == 0
            assert not res.failures
            assert await client.get_bytes(f"syn://{stored.id}", version_id=None) == v2
            listed = [i async for i in client.ls(f"syn://{stored.id}.1")]
            assert [(i.key, i.version_id, i.size) for i in listed if not isinstance(i, str)] == [
                ("data.csv", "1", len(v1))
            ]

    asyncio.run(main())
    assert (tmp_path / "again").read_bytes() == v1
    # And synapseclient reads a version synxfer wrote.
    f.write_bytes(b"third, by synxfer\n")
    code, _, err = _cli(capsys, "cp", str(f), f"syn://{stored.id}")
    assert code == 0, err
    third = syn.get(stored.id, version=3, downloadLocation=str(tmp_path / "sc"))
    assert Path(third.path).read_bytes() == b"third, by synxfer\n"


def test_a_version_download_is_that_versions_handle_verified_by_its_md5(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project, _file_id, v1, _ = _two_versions(service, tmp_path, "requests")

    async def main() -> dict[str, int]:
        async with Client(_config()) as client:
            before = service.stats()
            res = await client.download_file(
                f"syn://{project}/d/a.csv", tmp_path / "v1", version_id="1"
            )
            assert res.not_verified == 0
            assert not res.failures
            return requests_since(service, before)

    calls = asyncio.run(main())
    assert (tmp_path / "v1").read_bytes() == v1
    # The container (a GET), the folder d (its name, a GET: a folder?), the
    # file's name, that version's bundle, its URL: nothing else.
    assert calls == {
        "GET /entity/{id}": 2,
        "POST /entity/child": 2,
        "POST /entity/{id}/version/{v}/bundle2": 1,
        "POST /fileHandle/batch": 1,
    }, calls


def test_version_listing_pages_and_version_ids_are_numbers(
    service: Any,
    home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import synxfer_synapse._backend as plugin

    project, file_id, _, _ = _two_versions(service, tmp_path, "paging")
    f = tmp_path / "a.csv"
    f.write_bytes(b"3\n")
    _upload(f, f"syn://{project}/d/a.csv")
    monkeypatch.setattr(plugin, "_VERSION_PAGE", 2)  # three versions: two pages
    before = service.stats()
    got = _versions(capsys, f"syn://{file_id}")
    assert [v["version_id"] for v in got] == ["3", "2", "1"]
    assert requests_since(service, before)["GET /entity/{id}/version"] == 2
    code, _, err = _cli(capsys, "cat", "--version-id", "v1", f"syn://{project}/d/a.csv")
    assert code == 2
    assert "a Synapse version is a number" in err
    code, _, err = _cli(capsys, "cat", "--version-id", "9", f"syn://{project}/d/a.csv")
    assert code == 1
    assert "no version '9'" in err


def test_rm_version_deletes_that_version_and_the_only_one_is_refused(
    service: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project, _file_id, _, v2 = _two_versions(service, tmp_path, "rm-version")
    url = f"syn://{project}/d/a.csv"
    before = service.stats()
    code, _, err = _cli(capsys, "rm", "--version-id", "1", url)
    assert code == 0, err
    assert requests_since(service, before)["DELETE /entity/{id}/version/{v}"] == 1
    assert [v["version_id"] for v in _versions(capsys, url)] == ["2"]
    code, text, _ = _cli(capsys, "cat", url)
    assert text.encode() == v2
    # Synapse keeps at least one version: its message is the error.
    code, _, err = _cli(capsys, "rm", "--version-id", "2", url)
    assert code == 1
    assert "Cannot delete the only version" in err
    assert [v["version_id"] for v in _versions(capsys, url)] == ["2"]


def test_rm_all_versions_deletes_the_file(
    service: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project, file_id, _, _ = _two_versions(service, tmp_path, "rm-all")
    f = tmp_path / "a.csv"
    f.write_bytes(b"three\n")
    _upload(f, f"syn://{project}/d/a.csv")

    async def some() -> Any:
        backend = SynapseBackend(project, BackendOptions())
        await backend.open()
        try:  # some of the versions: those only
            return await backend.delete_versions([("d/a.csv", "1"), ("d/a.csv", "2")])
        finally:
            await backend.aclose()

    assert asyncio.run(some()) == {}
    url = f"syn://{project}/d/a.csv"
    assert [v["version_id"] for v in _versions(capsys, url)] == ["3"]
    # Every version: the File goes (to the trash can), in one request, as on
    # S3 nothing of the key is left; Synapse would refuse its last version.
    before = service.stats()
    code, text, err = _cli(capsys, "rm", "--all-versions", url)
    assert code == 0, err
    assert "(version 3)" in text
    calls = requests_since(service, before)
    assert calls["DELETE /entity/{id}"] == 1
    assert "DELETE /entity/{id}/version/{v}" not in calls
    code, _, err = _cli(capsys, "cat", f"syn://{file_id}")
    assert code == 1
    assert "does not exist" in err


def test_one_request_slot_is_enough(service: Any, home: Path, tmp_path: Path) -> None:
    """With one request in flight (max_threads=1), nothing waits for a slot
    its own call holds: sole_key, a version listing, rm --all-versions."""
    project, file_id, _, v2 = _two_versions(service, tmp_path, "one-slot")
    config = TransferConfig(
        max_threads=1, retry=RetryPolicy(attempts=2, initial_delay=0.01, max_delay=0.05)
    )

    async def main() -> None:
        async with Client(config) as client:
            assert await client.get_bytes(f"syn://{file_id}") == v2
            listed = [i async for i in client.ls(f"syn://{file_id}", versions=True)]
            assert len(listed) == 2
            res = await client.rm(f"syn://{project}/d/a.csv", all_versions=True)
            assert not res.failures, res.failures

    # A bound, not a timing assertion: a call waiting for its own slot never ends.
    asyncio.run(asyncio.wait_for(main(), 60))


# -- retries ---------------------------------------------------------------------


def test_501_and_505_are_not_retried_503_is(service: Any, home: Path, tmp_path: Path) -> None:
    # A route the service does not implement answers 501: a permanent error.
    before = service.stats()
    with pytest.raises(BackendError) as caught:
        asyncio.run(rest_call("syn1", "GET", "/no/such/route"))
    assert not isinstance(caught.value, TransientError)
    assert caught.value.status == 501
    assert requests_since(service, before) == {"501": 1}
    _project, file_id, _, v2 = _two_versions(service, tmp_path, "retries")

    async def cat(status: int) -> bytes | BaseException:
        service.fail(1, status)
        async with Client(_config()) as client:
            try:
                return await client.get_bytes(f"syn://{file_id}")
            except BackendError as exc:
                return exc

    for status in (501, 505):
        before = service.stats()
        got = asyncio.run(cat(status))
        assert isinstance(got, BackendError), got
        assert not isinstance(got, TransientError), got
        assert f"HTTP {status}" in str(got)
        assert requests_since(service, before) == {str(status): 1}  # one request: no retry
    before = service.stats()
    assert asyncio.run(cat(503)) == v2  # retried, then read
    assert requests_since(service, before)["503"] == 1


# -- the service versions as Synapse does ------------------------------------------


def test_the_service_makes_a_version_for_another_md5_only(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("auto-version")
    same = tmp_path / "same.csv"
    same.write_bytes(b"same bytes\n")
    other = tmp_path / "other.csv"
    other.write_bytes(b"other bytes\n")
    for key, path in (("x1.csv", same), ("x2.csv", same), ("x3.csv", other)):
        _upload(path, f"syn://{project}/{key}")
    ids = [asyncio.run(entity_id_of(project, k)) for k in ("x1.csv", "x2.csv", "x3.csv")]
    x1, x2, x3 = (asyncio.run(rest_call("syn1", "GET", f"/entity/{i}")) for i in ids)
    assert x1["dataFileHandleId"] != x2["dataFileHandleId"]
    # Another handle of the same MD5, no newVersion: the version is updated in place.
    x1["dataFileHandleId"] = x2["dataFileHandleId"]
    got = asyncio.run(rest_call("syn1", "PUT", f"/entity/{ids[0]}", x1))
    assert (got["versionNumber"], got["dataFileHandleId"]) == (1, x2["dataFileHandleId"])
    # Another MD5: a new version by itself, its label the number (PLFM-1744).
    got["dataFileHandleId"] = x3["dataFileHandleId"]
    got["versionLabel"] = "kept?"
    got = asyncio.run(rest_call("syn1", "PUT", f"/entity/{ids[0]}", got))
    assert (got["versionNumber"], got["versionLabel"]) == (2, "2")
