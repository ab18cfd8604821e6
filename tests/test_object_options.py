"""Content types and object options (issue 13 items 1 and 2).

Uploads get a content type guessed from the file name (as aws-cli does),
``content_type`` forces one, ``guess_mime_type=False`` guesses none; remote
copies keep their source's. ``WriteOptions`` carries storage class,
server-side encryption, canned ACL, user metadata and the stored headers;
backends declare what they honour and a client refuses anything else before
a byte moves. Real parts: moto over HTTP on 127.0.0.1 (checked with boto3's
``head_object``), the GCS emulator in a subprocess, the CLI in process.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

import synxfer
from synxfer import ConfigError, TransferConfig, WriteOptions
from synxfer.cli import main as cli
from synxfer_servers.gcs import GcsEmulator, GcsFront, create_bucket, wipe

from .conftest import PART, SMALL

#: A file over the multipart threshold: its options go with CreateMultipartUpload.
BIG = 2 * PART + 7


def _s3(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint)


def _new_bucket(endpoint: str) -> str:
    name = f"t-{uuid.uuid4().hex[:16]}"
    _s3(endpoint).create_bucket(Bucket=name)
    return name


def _head(endpoint: str, bucket: str, key: str) -> dict[str, Any]:
    head: dict[str, Any] = _s3(endpoint).head_object(Bucket=bucket, Key=key)
    return head


@pytest.fixture(scope="module")
def emulator() -> Iterator[GcsEmulator]:
    with GcsEmulator() as server:
        yield server


@pytest.fixture(scope="module")
def gcs_endpoint(emulator: GcsEmulator) -> Iterator[str]:
    """The emulator behind the front, which applies a rewrite's body as GCS does."""
    with GcsFront(emulator.endpoint_url) as front:
        yield front.endpoint_url


@pytest.fixture
def gs_bucket(emulator: GcsEmulator) -> Iterator[str]:
    name = f"g-{uuid.uuid4().hex[:16]}"
    create_bucket(emulator.endpoint_url, name)
    yield name
    wipe(emulator.endpoint_url)


def _gs_names(endpoint: str, bucket: str) -> list[str]:
    r = httpx.get(f"{endpoint}/storage/v1/b/{bucket}/o")
    r.raise_for_status()
    return [str(o["name"]) for o in r.json().get("items") or []]


def _gs_resource(endpoint: str, bucket: str, key: str) -> dict[str, Any]:
    r = httpx.get(f"{endpoint}/storage/v1/b/{bucket}/o/{key.replace('/', '%2F')}")
    r.raise_for_status()
    doc: dict[str, Any] = r.json()
    return doc


@pytest.fixture
def files(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_bytes(b"<html></html>")
    (root / "data.json").write_bytes(b"{}")
    (root / "archive.tar.gz").write_bytes(b"x" * 100)
    (root / "blob.unknownext").write_bytes(b"?")
    (root / "video.mp4").write_bytes(b"v" * BIG)
    return root


# -- content types ---------------------------------------------------------------


async def test_uploads_get_the_type_their_name_says(
    s3_endpoint: str, bucket: str, files: Path
) -> None:
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        assert (await c.sync_to(files, f"s3://{bucket}/site/")).ok
        assert (await c.upload_file(files / "data.json", f"s3://{bucket}/one.json")).ok
        info = await (await c.backend(f"s3://{bucket}/"))[0].stat("site/index.html")
    types = {
        name: _head(s3_endpoint, bucket, f"site/{name}")["ContentType"]
        for name in ("index.html", "data.json", "archive.tar.gz", "blob.unknownext", "video.mp4")
    }
    assert types == {
        "index.html": "text/html",
        "data.json": "application/json",
        "archive.tar.gz": "application/x-tar",  # as aws-cli: the type, not the encoding
        "blob.unknownext": "binary/octet-stream",  # none guessed: S3's default
        "video.mp4": "video/mp4",  # multipart: given at CreateMultipartUpload
    }
    assert _head(s3_endpoint, bucket, "one.json")["ContentType"] == "application/json"
    assert info.content_type == "text/html"  # read back into ObjectInfo


async def test_a_given_type_wins_and_guessing_can_be_turned_off(
    s3_endpoint: str, bucket: str, files: Path
) -> None:
    forced = SMALL.evolve(write_options=WriteOptions(content_type="text/x-forced"))
    async with synxfer.Client(forced, endpoint_url=s3_endpoint) as c:
        assert (await c.sync_to(files, f"s3://{bucket}/forced/")).ok
    plain = SMALL.evolve(guess_mime_type=False)
    async with synxfer.Client(plain, endpoint_url=s3_endpoint) as c:
        assert (await c.sync_to(files, f"s3://{bucket}/plain/")).ok
        # A call's options take the config's place.
        per_call = WriteOptions(content_type="text/x-call")
        await c.copy(files / "index.html", f"s3://{bucket}/call.html", write_options=per_call)
    for name in ("index.html", "video.mp4"):
        assert _head(s3_endpoint, bucket, f"forced/{name}")["ContentType"] == "text/x-forced"
        assert _head(s3_endpoint, bucket, f"plain/{name}")["ContentType"] == "binary/octet-stream"
    assert _head(s3_endpoint, bucket, "call.html")["ContentType"] == "text/x-call"


async def test_remote_copies_keep_the_source_type(
    s3_endpoint: str, bucket: str, files: Path
) -> None:
    other = _new_bucket(s3_endpoint)
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        assert (await c.sync_to(files, f"s3://{bucket}/a/")).ok
        # Within the bucket: server-side; to another bucket: streamed.
        assert (await c.copy(f"s3://{bucket}/a/", f"s3://{bucket}/b/", recursive=True)).ok
        assert (await c.copy(f"s3://{bucket}/a/", f"s3://{other}/c/", recursive=True)).ok
        assert (await c.copy(f"s3://{bucket}/a/index.html", f"s3://{other}/one.html")).ok
    for where, prefix in ((bucket, "b/"), (other, "c/")):
        assert _head(s3_endpoint, where, prefix + "index.html")["ContentType"] == "text/html"
        assert _head(s3_endpoint, where, prefix + "video.mp4")["ContentType"] == "video/mp4"
    assert _head(s3_endpoint, other, "one.html")["ContentType"] == "text/html"


async def test_gcs_uploads_and_copies_from_s3_carry_types(
    s3_endpoint: str, bucket: str, gcs_endpoint: str, gs_bucket: str, files: Path
) -> None:
    endpoints = {"s3": s3_endpoint, "gs": gcs_endpoint}
    async with synxfer.Client(SMALL, endpoints=endpoints) as c:
        assert (await c.sync_to(files, f"gs://{gs_bucket}/up/")).ok
        assert (await c.sync_to(files, f"s3://{bucket}/src/")).ok
        assert (await c.copy(f"s3://{bucket}/src/", f"gs://{gs_bucket}/x/", recursive=True)).ok
        stat = await (await c.backend(f"gs://{gs_bucket}/"))[0].stat("up/index.html")
    assert stat.content_type == "text/html"
    for prefix in ("up/", "x/"):
        doc = _gs_resource(gcs_endpoint, gs_bucket, prefix + "data.json")
        assert doc["contentType"] == "application/json"
        big = _gs_resource(gcs_endpoint, gs_bucket, prefix + "video.mp4")  # composed
        assert big["contentType"] == "video/mp4"
    none = _gs_resource(gcs_endpoint, gs_bucket, "up/blob.unknownext")
    assert none["contentType"] == "application/octet-stream"


# -- object options --------------------------------------------------------------

ALL = WriteOptions(
    metadata={"owner": "team-a", "Project": "x1"},
    storage_class="STANDARD_IA",
    sse="aws:kms",
    sse_kms_key_id="alias/synxfer-test",
    acl="public-read",
    cache_control="max-age=60",
    content_encoding="identity",
    content_disposition='attachment; filename="f.bin"',
)


def _check_all(endpoint: str, bucket: str, key: str, content_type: str) -> None:
    head = _head(endpoint, bucket, key)
    assert head["StorageClass"] == "STANDARD_IA"
    assert head["ServerSideEncryption"] == "aws:kms"
    assert head["SSEKMSKeyId"].endswith("alias/synxfer-test")
    assert head["CacheControl"] == "max-age=60"
    assert head["ContentEncoding"] == "identity"
    assert head["ContentDisposition"] == 'attachment; filename="f.bin"'
    assert head["ContentType"] == content_type
    assert head["Metadata"]["owner"] == "team-a"
    assert head["Metadata"]["project"] == "x1"  # S3 keeps metadata keys in lower case
    assert "mtime" in head["Metadata"]  # synxfer's own metadata is still there
    grants = _s3(endpoint).get_object_acl(Bucket=bucket, Key=key)["Grants"]
    public = [g for g in grants if g["Grantee"].get("URI", "").endswith("/global/AllUsers")]
    assert [g["Permission"] for g in public] == ["READ"]


async def test_every_option_reaches_s3_on_put_multipart_and_copies(
    s3_endpoint: str, bucket: str, files: Path
) -> None:
    other = _new_bucket(s3_endpoint)
    async with synxfer.Client(SMALL.evolve(write_options=ALL), endpoint_url=s3_endpoint) as c:
        assert (await c.sync_to(files, f"s3://{bucket}/up/")).ok
    # Copies: the options of the call, over the source's type and metadata.
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        plain = f"s3://{bucket}/plain/"
        assert (await c.sync_to(files, plain)).ok
        for dst in (f"s3://{bucket}/same/", f"s3://{other}/streamed/"):
            assert (await c.copy(plain, dst, recursive=True, write_options=ALL)).ok
    for name, ctype in (("index.html", "text/html"), ("video.mp4", "video/mp4")):
        _check_all(s3_endpoint, bucket, f"up/{name}", ctype)
        _check_all(s3_endpoint, bucket, f"same/{name}", ctype)
        _check_all(s3_endpoint, other, f"streamed/{name}", ctype)
    plain_head = _head(s3_endpoint, bucket, "plain/index.html")
    assert (
        "ServerSideEncryption" not in plain_head or plain_head["ServerSideEncryption"] == "AES256"
    )
    assert plain_head.get("StorageClass", "STANDARD") == "STANDARD"
    assert "owner" not in plain_head["Metadata"]


async def test_sse_aes256(s3_endpoint: str, bucket: str, files: Path) -> None:
    config = SMALL.evolve(write_options=WriteOptions(sse="AES256"))
    async with synxfer.Client(config, endpoint_url=s3_endpoint) as c:
        assert (await c.sync_to(files, f"s3://{bucket}/e/")).ok
    for name in ("index.html", "video.mp4"):
        assert _head(s3_endpoint, bucket, f"e/{name}")["ServerSideEncryption"] == "AES256"


async def test_gcs_options_on_put_compose_and_rewrite(
    gcs_endpoint: str, gs_bucket: str, files: Path
) -> None:
    options = WriteOptions(
        metadata={"owner": "team-a"},
        storage_class="NEARLINE",
        cache_control="no-cache",
        content_disposition="inline",
    )
    config = SMALL.evolve(write_options=options)
    async with synxfer.Client(config, endpoints={"gs": gcs_endpoint}) as c:
        assert (await c.sync_to(files, f"gs://{gs_bucket}/up/")).ok
    async with synxfer.Client(SMALL, endpoints={"gs": gcs_endpoint}) as c:
        assert (await c.sync_to(files, f"gs://{gs_bucket}/plain/")).ok
        plain = f"gs://{gs_bucket}/plain/"
        dst = f"gs://{gs_bucket}/copied/"
        assert (await c.copy(plain, dst, recursive=True, write_options=options)).ok
    for key in ("up/index.html", "up/video.mp4", "copied/index.html", "copied/video.mp4"):
        doc = _gs_resource(gcs_endpoint, gs_bucket, key)
        assert doc["storageClass"] == "NEARLINE", key
        assert doc["cacheControl"] == "no-cache", key
        assert doc["contentDisposition"] == "inline", key
        assert doc["metadata"]["owner"] == "team-a", key
        assert "mtime" in doc["metadata"], key
    assert _gs_resource(gcs_endpoint, gs_bucket, "copied/index.html")["contentType"] == "text/html"


# -- refused before anything moves ------------------------------------------------


async def test_an_option_the_destination_cannot_honour_is_refused_at_start(
    s3_endpoint: str, bucket: str, gcs_endpoint: str, gs_bucket: str, files: Path, tmp_path: Path
) -> None:
    endpoints = {"s3": s3_endpoint, "gs": gcs_endpoint}
    sse = WriteOptions(sse="AES256", acl="private")
    async with synxfer.Client(SMALL.evolve(write_options=sse), endpoints=endpoints) as c:
        with pytest.raises(ConfigError) as exc:
            await c.sync_to(files, f"gs://{gs_bucket}/p/")
        message = str(exc.value)
        assert "WriteOptions(acl=...)" in message
        assert "WriteOptions(sse=...)" in message
        assert f"gs://{gs_bucket}/" in message
        # The same options are fine where they are honoured, and for downloads.
        assert (await c.sync_to(files, f"s3://{bucket}/ok/")).ok
        assert (await c.sync_from(f"s3://{bucket}/ok/", tmp_path / "down")).ok
        with pytest.raises(ConfigError, match="sse"):
            await c.copy(f"s3://{bucket}/ok/", f"gs://{gs_bucket}/c/", recursive=True)
        with pytest.raises(ConfigError, match="sse"):
            await c.copy(f"s3://{bucket}/ok/index.html", f"gs://{gs_bucket}/one")
        with pytest.raises(ConfigError, match="sse"):
            await c.upload_file(files / "index.html", f"gs://{gs_bucket}/one")
    async with synxfer.Client(SMALL, endpoints=endpoints) as c:
        with pytest.raises(ConfigError, match="content_encoding"):
            await c.sync_to(
                files, f"gs://{gs_bucket}/p/", write_options=WriteOptions(content_encoding="gzip")
            )
        cold = WriteOptions(storage_class="COLDLINE")
        with pytest.raises(ConfigError, match="storage class 'COLDLINE'"):
            await c.sync_to(files, f"s3://{bucket}/cold/", write_options=cold)
        mine = WriteOptions(metadata={"mtime": "1"})
        with pytest.raises(ConfigError, match="synxfer's own"):
            await c.sync_to(files, f"s3://{bucket}/m/", write_options=mine)
        root = tmp_path / "store"
        root.mkdir()
        store = WriteOptions(storage_class="STANDARD")
        with pytest.raises(ConfigError, match="storage_class"):
            await c.sync_to(files, f"file://{root}/b/", write_options=store)
    names = await asyncio.to_thread(_gs_names, gcs_endpoint, gs_bucket)
    assert names == []  # nothing was written to gs://
    listed = _s3(s3_endpoint).list_objects_v2(Bucket=bucket)
    assert {o["Key"].split("/")[0] for o in listed.get("Contents", [])} == {"ok"}


def test_write_options_check_their_values() -> None:
    with pytest.raises(ConfigError, match=r"WriteOptions\(sse=\.\.\.\)"):
        WriteOptions(sse="rot13")
    with pytest.raises(ConfigError, match="sse_kms_key_id"):
        WriteOptions(sse="AES256", sse_kms_key_id="k")
    with pytest.raises(ConfigError, match="canned ACL"):
        WriteOptions(acl="everyone")
    with pytest.raises(ConfigError, match="control character"):
        WriteOptions(cache_control="a\r\nx-amz-acl: public-read")
    assert WriteOptions(metadata={"a": "1"}, sse="AES256").given() == {"metadata", "sse"}
    with pytest.raises(ConfigError, match="write_options"):
        TransferConfig(write_options={"sse": "AES256"})  # type: ignore[arg-type]


async def test_items_and_processes_carry_the_call_options(
    s3_endpoint: str, bucket: str, files: Path
) -> None:
    options = WriteOptions(storage_class="STANDARD_IA", content_type="text/x-call")
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as c:
        result = await c.sync_to(
            files, f"s3://{bucket}/items/", files=["index.html"], write_options=options
        )
        assert result.files_transferred == 1
    async with synxfer.Client(SMALL.evolve(processes=2), endpoint_url=s3_endpoint) as c:
        result = await c.sync_to(files, f"s3://{bucket}/procs/", write_options=options)
        assert result.ok
        assert result.files_transferred == 5
    for key in ("items/index.html", "procs/index.html", "procs/video.mp4"):
        head = _head(s3_endpoint, bucket, key)
        assert (head["StorageClass"], head["ContentType"]) == ("STANDARD_IA", "text/x-call"), key


# -- the CLI ------------------------------------------------------------------------


def test_cli_object_options(
    s3_endpoint: str, bucket: str, files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--endpoint-url", s3_endpoint, "--part-size", "5MiB"]
    flags = [
        "--storage-class", "STANDARD_IA",
        "--sse", "aws:kms", "--sse-kms-key-id", "alias/synxfer-test",
        "--acl", "public-read",
        "--metadata", "owner=team-a,Project=x1",
        "--cache-control", "max-age=60",
        "--content-encoding", "identity",
        "--content-disposition", 'attachment; filename="f.bin"',
    ]  # fmt: skip
    assert cli.main(["sync", str(files), f"s3://{bucket}/cli/", *common, *flags]) == 0
    for name, ctype in (("index.html", "text/html"), ("video.mp4", "video/mp4")):
        _check_all(s3_endpoint, bucket, f"cli/{name}", ctype)
    forced = ["--content-type", "text/x-forced", "--metadata", '{"a": "1"}', "--sse"]
    assert (
        cli.main(["cp", str(files / "data.json"), f"s3://{bucket}/f.json", *common, *forced]) == 0
    )
    head = _head(s3_endpoint, bucket, "f.json")
    assert (head["ContentType"], head["Metadata"]["a"]) == ("text/x-forced", "1")
    assert head["ServerSideEncryption"] == "AES256"  # --sse alone
    off = ["--no-guess-mime-type"]
    assert cli.main(["cp", str(files / "data.json"), f"s3://{bucket}/g.json", *common, *off]) == 0
    assert _head(s3_endpoint, bucket, "g.json")["ContentType"] == "binary/octet-stream"
    capsys.readouterr()


def test_cli_refuses_what_the_destination_cannot_honour(
    gcs_endpoint: str, gs_bucket: str, files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["sync", str(files), f"gs://{gs_bucket}/p/", "--endpoint-url", gcs_endpoint, "--json"]
    assert cli.main([*args, "--sse", "--storage-class", "NEARLINE"]) == 2
    out, err = capsys.readouterr()
    assert "synxfer: error:" in err
    assert "--sse" in err
    assert "WriteOptions" not in err
    error = json.loads(out.splitlines()[-1])
    assert error["exit_code"] == 2
    assert "--sse" in error["error"]
    assert cli.main([*args, "--storage-class", "GLACIER"]) == 2
    assert "no storage class 'GLACIER' (--storage-class)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli.main([*args, "--metadata", "novalue"])  # a usage error
    assert exit_.value.code == 2
    assert "invalid metadata" in capsys.readouterr().err
    assert cli.main([*args, "--sse-kms-key-id", "k"]) == 2
    assert "error: --sse-kms-key-id needs --sse aws:kms" in capsys.readouterr().err


def test_guess_content_type() -> None:
    from synxfer.engine.meta import guess_content_type

    assert guess_content_type("a.css") == "text/css"
    assert guess_content_type("A.HTML") == "text/html"
    assert guess_content_type("no-extension") is None
