"""syn:// metadata is Synapse annotations (decision 0050), on the local
Synapse-style service over stock moto.

``--metadata k=v`` / ``WriteOptions(metadata=...)`` on an upload writes the
File entity's annotations in the call that creates the entity or its new
version (``POST /entity/bundle2/create``, ``PUT /entity/{id}/bundle2``), so
no entity exists without them and no request is added; listings and
``stat`` read them in the ``bundle2`` request they already make. The real
synapseclient reads what synxfer wrote and writes what synxfer reads.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from synxfer import Client, RetryPolicy, TransferConfig, WriteOptions

from ._synapse import (
    entity_id_of,
    moto_s3,
    requests_since,
    rest_call,
    service_fixtures,
    synapseclient_for,
)

TOKEN = "syn-pat-annotations-5d1e"
BUCKET = "synapse-annotations"
LONG_42 = '{"type":"LONG","value":["42"]}'
TAGS = '{"type":"STRING","value":["a","b"]}'

service, home = service_fixtures(BUCKET, TOKEN)


def _config() -> TransferConfig:
    return TransferConfig(retry=RetryPolicy(attempts=4, initial_delay=0.01, max_delay=0.05))


async def _annotations(project: str, entity_id: str, version: int | None = None) -> Any:
    where = f"/version/{version}" if version else ""
    doc = await rest_call(project, "GET", f"/entity/{entity_id}{where}/annotations2")
    return doc["annotations"]


async def _upload(
    client: Client, path: Path, url: str, metadata: dict[str, str] | None = None
) -> Any:
    options = WriteOptions(metadata=metadata) if metadata is not None else None
    return await client.upload_file(path, url, write_options=options)


def test_metadata_becomes_annotations_in_the_call_that_creates_the_entity(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("upload")
    f = tmp_path / "a.csv"
    f.write_bytes(b"id,value\n1,2\n")
    metadata = {"species": "human", "tissue.type": "liver", "age": LONG_42, "tags": TAGS}

    async def main() -> str:
        async with Client(_config()) as client:
            before = service.stats()
            res = await _upload(client, f, f"syn://{project}/d/a.csv", metadata)
            assert not res.failures, res.failures
            calls = requests_since(service, before)
        # The entity and its annotations in one call: no create, no PUT after.
        assert calls["POST /entity/bundle2/create"] == 1
        assert calls["POST /entity"] == 1  # the folder d, not the file
        assert not [c for c in calls if "annotations2" in c]
        return await entity_id_of(project, "d/a.csv")

    entity_id = asyncio.run(main())
    got = asyncio.run(_annotations(project, entity_id))
    assert got == {
        "species": {"type": "STRING", "value": ["human"]},
        "tissue.type": {"type": "STRING", "value": ["liver"]},
        "age": {"type": "LONG", "value": ["42"]},
        "tags": {"type": "STRING", "value": ["a", "b"]},
    }  # synxfer's own mtime is no annotation
    # The real synapseclient reads them, typed.
    from synapseclient.models import File  # type: ignore[import-untyped]

    syn = synapseclient_for(home)
    seen = File(id=entity_id, download_file=False).get(synapse_client=syn).annotations
    assert seen["species"] == ["human"]
    assert seen["tissue.type"] == ["liver"]
    assert seen["age"] == [42]
    assert seen["tags"] == ["a", "b"]


def test_listing_and_stat_show_annotations_synapseclient_wrote_without_extra_requests(
    service: Any, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from synapseclient.models import File

    from synxfer.cli import main as cli

    project = service.create_project("listing")
    syn = synapseclient_for(home)
    annotated = {
        "one.txt": {"study": "x1"},
        "many.txt": {"tags": ["a", "b"], "n": 3, "ratio": 0.5, "ok": True},
        "none.txt": {},
    }
    for name, given in annotated.items():
        path = tmp_path / name
        path.write_bytes(name.encode())
        File(path=str(path), parent_id=project, annotations=given).store(synapse_client=syn)

    async def main() -> dict[str, dict[str, str]]:
        async with Client(_config()) as client:
            before = service.stats()
            listed = {
                i.key: dict(i.metadata)
                async for i in client.ls(f"syn://{project}/", recursive=True)
                if not isinstance(i, str)
            }
            # One bundle per file, as before: the annotations come in it.
            assert requests_since(service, before) == {
                "GET /entity/{id}": 1,
                "POST /entity/children": 1,
                "POST /entity/{id}/bundle2": 3,
            }
            backend, key = await client.backend(f"syn://{project}/many.txt")
            info = await backend.stat(key)
            assert dict(info.metadata) == listed["many.txt"]
            return listed

    listed = asyncio.run(main())
    assert listed["one.txt"] == {"study": "x1"}
    assert listed["none.txt"] == {}
    many = listed["many.txt"]
    assert json.loads(many["tags"]) == {"type": "STRING", "value": ["a", "b"]}
    assert json.loads(many["n"]) == {"type": "LONG", "value": ["3"]}
    assert json.loads(many["ratio"]) == {"type": "DOUBLE", "value": ["0.5"]}
    assert json.loads(many["ok"]) == {"type": "BOOLEAN", "value": ["true"]}

    capsys.readouterr()
    assert cli.main(["ls", "--json", f"syn://{project}/"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_key = {line["key"]: line for line in lines}
    assert by_key["one.txt"]["metadata"] == {"study": "x1"}
    assert "metadata" not in by_key["none.txt"]


def test_a_new_version_merges_annotations_and_same_bytes_only_update_them(
    service: Any, home: Path, tmp_path: Path
) -> None:
    """A changed file with metadata: one ``PUT /entity/{id}/bundle2`` (new
    version, given keys over the previous version's, others kept); without
    metadata the new version keeps them. The same bytes with new metadata:
    no version, one annotations update -- and none when they are there."""
    project = service.create_project("versions")
    f = tmp_path / "a.txt"
    url = f"syn://{project}/a.txt"

    async def main() -> None:
        async with Client(_config()) as client:
            f.write_bytes(b"one\n")
            assert not (await _upload(client, f, url, {"k1": "v1", "k2": "v2"})).failures
            entity_id = await entity_id_of(project, "a.txt")

            f.write_bytes(b"two\n")
            before = service.stats()
            assert not (await _upload(client, f, url, {"k2": "new"})).failures
            calls = requests_since(service, before)
            assert calls["PUT /entity/{id}/bundle2"] == 1
            assert "PUT /entity/{id}" not in calls
            assert not [c for c in calls if "annotations2" in c]
            assert await _annotations(project, entity_id) == {
                "k1": {"type": "STRING", "value": ["v1"]},
                "k2": {"type": "STRING", "value": ["new"]},
            }
            assert (await _annotations(project, entity_id, 1))["k2"]["value"] == ["v2"]

            f.write_bytes(b"three\n")
            assert not (await _upload(client, f, url)).failures
            versions = await rest_call(project, "GET", f"/entity/{entity_id}/version")
            assert len(versions["results"]) == 3
            assert set(await _annotations(project, entity_id)) == {"k1", "k2"}

            before = service.stats()
            assert not (await _upload(client, f, url, {"k3": "x"})).failures
            calls = requests_since(service, before)
            assert calls["PUT /entity/{id}/annotations2"] == 1
            assert "POST /file/multipart" not in calls  # no byte sent, no version
            versions = await rest_call(project, "GET", f"/entity/{entity_id}/version")
            assert len(versions["results"]) == 3
            assert set(await _annotations(project, entity_id)) == {"k1", "k2", "k3"}

            before = service.stats()
            assert not (await _upload(client, f, url, {"k3": "x"})).failures
            assert "PUT /entity/{id}/annotations2" not in requests_since(service, before)

    asyncio.run(main())


def test_annotations_travel_to_s3_metadata_and_back_with_their_types(
    service: Any, home: Path, tmp_path: Path, stock_moto: Any
) -> None:

    project = service.create_project("carried")
    endpoint = str(stock_moto.endpoint_url)
    s3: Any = moto_s3(stock_moto)
    s3.create_bucket(Bucket="annotations-carried")
    f = tmp_path / "a.txt"
    f.write_bytes(b"carried\n")
    metadata = {"species": "human", "age": LONG_42, "tags": TAGS}

    async def main() -> None:
        async with Client(_config(), endpoints={"s3": endpoint}) as client:
            assert not (await _upload(client, f, f"syn://{project}/a.txt", metadata)).failures
            res = await client.copy(f"syn://{project}/a.txt", "s3://annotations-carried/a.txt")
            assert not res.failures, res.failures
            head = s3.head_object(Bucket="annotations-carried", Key="a.txt")
            assert {k: head["Metadata"][k] for k in metadata} == metadata
            res = await client.copy("s3://annotations-carried/a.txt", f"syn://{project}/b.txt")
            assert not res.failures, res.failures
            back = await entity_id_of(project, "b.txt")
            assert await _annotations(project, back) == {
                "species": {"type": "STRING", "value": ["human"]},
                "age": {"type": "LONG", "value": ["42"]},
                "tags": {"type": "STRING", "value": ["a", "b"]},
            }  # the S3 object's mtime stays out

    asyncio.run(main())


def test_a_key_synapse_refuses_fails_the_file_before_anything_is_sent(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("refused")
    f = tmp_path / "a.txt"
    f.write_bytes(b"refused\n")

    async def main() -> None:
        async with Client(_config()) as client:
            for metadata, named in (
                ({"content-owner": "me"}, "'content-owner'"),
                ({"age": '{"type":"LONG","value":["old"]}'}, "'age'"),
            ):
                before = service.stats()
                res = await _upload(client, f, f"syn://{project}/a.txt", metadata)
                (failure,) = res.failures
                assert named in failure.error
                assert f"syn://{project}/a.txt" in failure.error
                assert TOKEN not in failure.error
                calls = requests_since(service, before)
                assert not [c for c in calls if "multipart" in c or "entity" in c], calls

    asyncio.run(main())


def test_the_service_refuses_a_bad_annotation_and_creates_nothing(
    service: Any, home: Path, tmp_path: Path
) -> None:
    """``POST /entity/bundle2/create`` is one transaction: an annotation Synapse
    refuses (400) leaves no entity, so a rerun finds none half-made."""
    from synxfer import BackendError, NotFound

    project = service.create_project("atomic")
    f = tmp_path / "a.txt"
    f.write_bytes(os.urandom(100))

    async def main() -> None:
        async with Client(_config()) as client:
            assert not (await _upload(client, f, f"syn://{project}/a.txt")).failures
        entity_id = await entity_id_of(project, "a.txt")
        handle = (await rest_call(project, "GET", f"/entity/{entity_id}"))["dataFileHandleId"]
        bad = {"bad-key": {"type": "STRING", "value": ["v"]}}
        body = {
            "entity": {
                "name": "b.txt",
                "parentId": project,
                "concreteType": "org.sagebionetworks.repo.model.FileEntity",
                "dataFileHandleId": handle,
            },
            "annotations": {"annotations": bad},
        }
        with pytest.raises(BackendError, match="Invalid annotation name: 'bad-key'"):
            await rest_call(project, "POST", "/entity/bundle2/create", body)
        with pytest.raises(NotFound):
            await rest_call(
                project, "POST", "/entity/child", {"parentId": project, "entityName": "b.txt"}
            )

    asyncio.run(main())


def test_a_compressed_upload_is_refused_not_stored_unmarked(
    service: Any, home: Path, tmp_path: Path
) -> None:
    """``--compress`` marks an object by metadata that no annotation can hold
    (``synxfer-encoding``): before, syn:// stored the zstd stream unmarked and
    a download gave those bytes back as the file."""
    pytest.importorskip("zstandard")
    project = service.create_project("compressed")
    f = tmp_path / "a.txt"
    f.write_bytes(b"x" * 10_000)

    async def main() -> None:
        config = TransferConfig(
            compress="zstd", retry=RetryPolicy(attempts=2, initial_delay=0.01, max_delay=0.05)
        )
        async with Client(config) as client:
            res = await client.upload_file(f, f"syn://{project}/a.txt")
            (failure,) = res.failures
            assert "--compress" in failure.error
            assert not [i async for i in client.ls(f"syn://{project}/", recursive=True)]

    asyncio.run(main())
