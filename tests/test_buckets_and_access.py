"""Buckets (``mb``/``rb``, issue 13 item 8), anonymous and requester-pays access
(item 3), and the AWS profile's ``s3.addressing_style`` (item 4).

Real parts: moto behind the recording front of :mod:`tests._s3server` (every
request's headers and small bodies are kept), the GCS emulator in a
subprocess, the CLI in process and as a subprocess.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import synxfer
from synxfer import BackendError, ConfigError, WriteOptions
from synxfer.backend import BackendOptions
from synxfer.cli import main as cli
from synxfer_s3 import S3Backend
from synxfer_scp import ScpBackend
from synxfer_servers.gcs import GcsEmulator, wipe

from ._s3server import Server, new_bucket, serving
from .conftest import SMALL, write_tree


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serving() as srv:
        yield srv


@pytest.fixture(scope="module")
def gcs_endpoint() -> Iterator[str]:
    with GcsEmulator() as emulator:
        yield emulator.endpoint_url
        wipe(emulator.endpoint_url)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def _exists(server: Server, bucket: str) -> bool:
    names = [b["Name"] for b in server.admin.list_buckets()["Buckets"]]
    return bucket in names


def _requests(server: Server, bucket: str, method: str) -> list[dict[str, str]]:
    return [s.headers for s in server.front.for_bucket(bucket) if s.method == method]


# -- mb / rb on S3 and SCP --------------------------------------------------------


async def test_s3_make_and_remove_buckets(server: Server) -> None:
    east, west = _name("mb"), _name("mb")
    async with synxfer.Client(SMALL, endpoint_url=server.url) as c:
        await c.make_bucket(f"s3://{east}")  # us-east-1: no LocationConstraint
        await c.make_bucket(f"s3://{west}", region="eu-west-1")
        with pytest.raises(BackendError, match=r"BucketAlreadyOwnedByYou|BucketAlreadyExists"):
            await c.make_bucket(f"s3://{west}", region="eu-west-1")
        with pytest.raises(ConfigError, match="names an object, not a bucket"):
            await c.make_bucket(f"s3://{east}/key")
        creates = [s for s in server.front.seen if s.method == "PUT" and s.path == f"/{east}"]
        assert creates[0].body == b""
        creates = [s for s in server.front.seen if s.method == "PUT" and s.path == f"/{west}"]
        assert b"<LocationConstraint>eu-west-1</LocationConstraint>" in creates[0].body
        # As aws-cli's --region: signed for that region, not the client's.
        assert "/eu-west-1/s3/aws4_request" in creates[0].headers["authorization"]
        location = server.admin.get_bucket_location(Bucket=west)["LocationConstraint"]
        assert location == "eu-west-1"

        await c.upload_file(__file__, f"s3://{east}/a/one.py")
        await c.upload_file(__file__, f"s3://{east}/two.py")
        with pytest.raises(BackendError, match="BucketNotEmpty"):
            await c.remove_bucket(f"s3://{east}")
        assert _exists(server, east)
        dry = await c.remove_bucket(f"s3://{east}", force=True, dryrun=True)
        assert (dry.files_deleted, dry.dryrun) == (2, True)
        assert _exists(server, east)
        result = await c.remove_bucket(f"s3://{east}", force=True)
        assert result.files_deleted == 2
        assert not _exists(server, east)
        assert (await c.remove_bucket(f"s3://{west}")).files_deleted == 0
        assert not _exists(server, west)
        with pytest.raises(synxfer.BucketNotFound):
            await c.remove_bucket(f"s3://{west}")


async def test_scp_makes_buckets_in_its_region(server: Server) -> None:
    name = _name("scp")
    async with synxfer.Client(
        SMALL, endpoints={"scp": server.url}, region="us-west-2"
    ) as c:  # SCP's own region names are not AWS's; moto knows AWS's only
        await c.make_bucket(f"scp://{name}")
        assert server.admin.get_bucket_location(Bucket=name)["LocationConstraint"] == "us-west-2"
        await c.remove_bucket(f"scp://{name}")
    assert not _exists(server, name)


async def test_buckets_need_a_backend_that_has_them(tmp_path: Path) -> None:
    async with synxfer.Client(SMALL) as c:
        with pytest.raises(ConfigError, match="file:// buckets cannot be created"):
            await c.make_bucket(f"file://{tmp_path}")
        with pytest.raises(ConfigError, match="file:// buckets cannot be removed"):
            await c.remove_bucket(f"file://{tmp_path}")
        with pytest.raises(ConfigError, match="file:// buckets cannot be listed"):
            await c.list_buckets("file")
        with pytest.raises(synxfer.UnknownScheme):
            await c.list_buckets("nope://")


# -- listing buckets (aws s3 ls) ----------------------------------------------------


async def test_s3_lists_buckets(server: Server) -> None:
    names = {_name("lb"), _name("lb")}
    for name in names:
        server.admin.create_bucket(Bucket=name)
    before = len(server.front.seen)
    async with synxfer.Client(SMALL, endpoint_url=server.url) as c:
        listed = {b.name: b for b in await c.list_buckets()}
        assert names <= listed.keys()
        now = time.time()
        for name in names:
            created = listed[name].created
            assert created is not None
            assert abs(created - now) < 3600
        assert names <= {b.name for b in await c.list_buckets("S3://")}
    (get, _) = [s for s in server.front.seen[before:] if s.method == "GET"]
    assert (get.path, get.query) == ("/", "")  # the endpoint itself, no bucket
    assert "/us-east-1/s3/aws4_request" in get.headers["authorization"]  # signed


async def test_s3_lists_buckets_page_by_page(server: Server) -> None:
    names = {_name("pg") for _ in range(3)}
    for name in names:
        server.admin.create_bucket(Bucket=name)
    total = len(server.admin.list_buckets()["Buckets"])
    before = len(server.front.seen)
    server.front.bucket_page = 2
    try:
        async with synxfer.Client(SMALL, endpoint_url=server.url) as c:
            listed = [b.name for b in await c.list_buckets()]
    finally:
        server.front.bucket_page = 0
    assert names <= set(listed)
    assert len(listed) == len(set(listed)) == total
    queries = [s.query for s in server.front.seen[before:] if s.method == "GET"]
    assert queries[0] == ""
    assert queries[1:] == [f"continuation-token={i}" for i in range(2, total, 2)]


def test_cli_mb_rb(server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = _name("cli")
    common = ["--endpoint-url", server.url]
    assert cli.main(["mb", f"s3://{name}", "--region", "eu-west-1", *common]) == 0
    assert capsys.readouterr().out == f"make_bucket: s3://{name}\n"
    assert server.admin.get_bucket_location(Bucket=name)["LocationConstraint"] == "eu-west-1"
    assert cli.main(["mb", f"s3://{name}", "--region", "eu-west-1", *common]) == 1  # exists
    assert "BucketAlreadyOwnedByYou" in capsys.readouterr().err
    write_tree(tmp_path / "t", {"a": 3, "b/c": 4})
    assert cli.main(["cp", "--recursive", str(tmp_path / "t"), f"s3://{name}/", *common]) == 0
    capsys.readouterr()
    assert cli.main(["rb", f"s3://{name}", *common]) == 1  # not empty
    assert "BucketNotEmpty" in capsys.readouterr().err
    assert cli.main(["rb", f"s3://{name}", "--force", *common]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sorted(out[:2]) == [f"delete: s3://{name}/a", f"delete: s3://{name}/b/c"]
    assert out[2] == f"remove_bucket: s3://{name}"
    assert not _exists(server, name)
    assert cli.main(["mb", f"s3://{name}", "--json", *common]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line == {"type": "bucket", "action": "make_bucket", "bucket": f"s3://{name}"}
    assert cli.main(["mb", f"s3://{name}/key", *common]) == 2
    assert cli.main(["mb", str(tmp_path), *common]) == 2
    assert cli.main(["rb", f"file://{tmp_path}"]) == 2
    capsys.readouterr()
    assert cli.main(["rb", f"s3://{name}", "--json", *common]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line == {"type": "bucket", "action": "remove_bucket", "bucket": f"s3://{name}"}


async def test_an_account_level_backend_only_lists_buckets(
    server: Server, gcs_endpoint: str
) -> None:
    """Bucket "" is for list_buckets; any other request says what is missing."""
    from synxfer_gcs import GcsBackend

    async with S3Backend("", BackendOptions(endpoint_url=server.url)) as s3:
        with pytest.raises(ConfigError, match=r"^s3:// needs a bucket: s3://bucket/prefix"):
            await s3.stat("key")
    async with GcsBackend("", BackendOptions(endpoint_url=gcs_endpoint)) as gcs:
        with pytest.raises(ConfigError, match=r"^gs:// needs a bucket: gs://bucket/prefix"):
            await gcs.stat("key")
        with pytest.raises(ConfigError, match=r"^gs:// needs a bucket"):
            await gcs.list_page("")
        with pytest.raises(ConfigError, match=r"^gs:// needs a bucket"):
            await gcs.copy("a", "b", WriteOptions())


def test_cli_ls_lists_buckets(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    name = _name("cli")
    server.admin.create_bucket(Bucket=name)
    common = ["--endpoint-url", server.url]
    assert cli.main(["ls", *common]) == 0  # no URL: aws s3 ls
    lines = capsys.readouterr().out.splitlines()
    (line,) = [x for x in lines if x.endswith(f" {name}")]
    assert len(line) == len(f"2024-01-01 12:00:00 {name}")
    time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")
    assert cli.main(["ls", "s3://", "--json", *common]) == 0
    items = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    (item,) = [i for i in items if i["name"] == name]
    assert (item["type"], item["bucket"]) == ("bucket", f"s3://{name}")
    assert item["created"].endswith("+00:00")
    assert cli.main(["ls", "blocks://"]) == 2
    err = capsys.readouterr().err
    assert "blocks:// buckets cannot be listed here" in err
    assert "Traceback" not in err
    assert cli.main(["ls", "nope://"]) == 2
    assert "no backend for scheme 'nope'" in capsys.readouterr().err


# -- mb / rb on GCS ----------------------------------------------------------------


async def test_gcs_make_and_remove_buckets(gcs_endpoint: str) -> None:
    name = _name("g")
    async with synxfer.Client(SMALL, endpoints={"gs": gcs_endpoint}) as c:
        await c.make_bucket(f"gs://{name}", region="EU")
        r = await asyncio.to_thread(httpx.get, f"{gcs_endpoint}/storage/v1/b/{name}")
        assert r.status_code == 200
        with pytest.raises(BackendError):
            await c.make_bucket(f"gs://{name}")
        await c.upload_file(__file__, f"gs://{name}/x.py")
        with pytest.raises(BackendError):
            await c.remove_bucket(f"gs://{name}")
        # An unfinished composite upload leaves hidden components: they go too.
        backend, _ = await c.backend(f"gs://{name}/")
        upload = await backend.create_multipart("big", WriteOptions())
        await backend.upload_part(upload, 1, b"x" * 1000)
        assert (await c.remove_bucket(f"gs://{name}", force=True)).files_deleted == 1
    gone = await asyncio.to_thread(httpx.get, f"{gcs_endpoint}/storage/v1/b/{name}")
    assert gone.status_code == 404


async def test_gcs_lists_buckets(gcs_endpoint: str) -> None:
    names = {_name("gl"), _name("gl")}
    async with synxfer.Client(SMALL, endpoints={"gs": gcs_endpoint}) as c:
        for name in names:
            await c.make_bucket(f"gs://{name}")
        listed = {b.name: b for b in await c.list_buckets("gs")}
        assert names <= listed.keys()
        for name in names:
            created = listed[name].created
            assert created is not None
            assert abs(created - time.time()) < 3600
        for name in names:
            await c.remove_bucket(f"gs://{name}")
        assert not names & {b.name for b in await c.list_buckets("gs://")}


def test_cli_ls_lists_gcs_buckets(gcs_endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    name = _name("gl")
    assert cli.main(["mb", f"gs://{name}", "--endpoint-url", gcs_endpoint]) == 0
    capsys.readouterr()
    assert cli.main(["ls", "gs://", "--endpoint-url", gcs_endpoint]) == 0
    assert any(line.endswith(f" {name}") for line in capsys.readouterr().out.splitlines())
    assert cli.main(["rb", f"gs://{name}", "--endpoint-url", gcs_endpoint]) == 0


def test_gcs_bucket_project(monkeypatch: pytest.MonkeyPatch) -> None:
    from synxfer_gcs import GcsBackend

    for name in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "GCLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    local = "http://127.0.0.1:9"
    assert GcsBackend("b", BackendOptions(endpoint_url=local)).http.project() == "_"
    given = BackendOptions(endpoint_url=local, extra={"project": "p1"})
    assert GcsBackend("b", given).http.project() == "p1"
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p2")
    assert GcsBackend("b", BackendOptions(endpoint_url=local)).http.project() == "p2"
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    signed = BackendOptions(endpoint_url=local, extra={"anonymous": "false"})
    with pytest.raises(ConfigError, match="GOOGLE_CLOUD_PROJECT"):
        GcsBackend("b", signed).http.project()  # no credentials loaded, no project
    with pytest.raises(ConfigError, match=r"^listing gs:// buckets needs a Google Cloud project"):
        GcsBackend("", signed).http.project("listing gs:// buckets")


# -- anonymous and requester-pays -------------------------------------------------


def _public_bucket(server: Server, prefix: str, key: str) -> str:
    """A bucket anyone may list, holding ``key``, which anyone may read."""
    bucket = new_bucket(server, prefix)
    server.admin.put_bucket_acl(Bucket=bucket, ACL="public-read")
    server.admin.put_object(Bucket=bucket, Key=key, Body=b"public data", ACL="public-read")
    return bucket


async def test_anonymous_requests_are_unsigned_and_need_no_credentials(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = _public_bucket(server, "public", "k")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    options = BackendOptions(endpoint_url=server.url, extra={"anonymous": "true"})
    async with S3Backend(bucket, options) as b:
        assert (await b.read("k")).data == b"public data"
        assert [i.key for i in (await b.list_page("")).items] == ["k"]
    seen = server.front.for_bucket(bucket)[3:]  # after the admin's create, ACL and put
    assert [s.method for s in seen] == ["GET", "GET"]
    for s in seen:
        assert "authorization" not in s.headers
        assert "x-amz-date" not in s.headers
    # Signed, the same read finds no credentials.
    async with S3Backend(bucket, BackendOptions(endpoint_url=server.url)) as b:
        with pytest.raises(synxfer.NoCredentials):
            await b.read("k")
    with pytest.raises(ConfigError, match="anonymous"):
        S3Backend(bucket, BackendOptions(extra={"anonymous": "perhaps"}))


async def test_request_payer_goes_with_every_request_signed(server: Server) -> None:
    bucket = new_bucket(server, "payer")
    options = BackendOptions(endpoint_url=server.url, extra={"request_payer": "requester"})
    async with S3Backend(bucket, options) as b:
        await b.put("k", b"data", WriteOptions())
        assert (await b.read("k")).data == b"data"
        await b.list_page("")
        await b.delete("k")
    seen = server.front.for_bucket(bucket)[1:]
    assert [s.method for s in seen] == ["PUT", "GET", "GET", "DELETE"]
    for s in seen:
        assert s.headers["x-amz-request-payer"] == "requester"
        assert "x-amz-request-payer" in s.headers["authorization"]  # a signed header
    with pytest.raises(ConfigError, match="request_payer"):
        S3Backend(bucket, BackendOptions(extra={"request_payer": "owner"}))


def _no_credentials_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    (tmp_path / "empty").write_text("")
    env.update(
        AWS_CONFIG_FILE=str(tmp_path / "empty"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "empty"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    return env


def test_cli_no_sign_request_and_request_payer(server: Server, tmp_path: Path) -> None:
    bucket = _public_bucket(server, "pub", "dir/k")
    env = _no_credentials_env(tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "synxfer.cli.main", *args, "--endpoint-url", server.url],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    refused = run("ls", f"s3://{bucket}/dir/")
    assert refused.returncode == 2
    assert "no credentials found" in refused.stderr
    listed = run("ls", f"s3://{bucket}/dir/", "--no-sign-request")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split()[-1] == "k"
    got = run(
        "cp", f"s3://{bucket}/dir/k", "k", "--no-sign-request", "--request-payer", "requester"
    )
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "k").read_bytes() == b"public data"
    gets = _requests(server, bucket, "GET")
    assert gets[-1]["x-amz-request-payer"] == "requester"
    assert "authorization" not in gets[-1]


# -- the profile's addressing style --------------------------------------------------


def _profile_config(tmp_path: Path, style: str) -> Path:
    path = tmp_path / "config"
    path.write_text(
        "[profile p]\n"
        "aws_access_key_id = testing\n"
        "aws_secret_access_key = testing\n"
        "region = us-east-1\n"
        f"s3 =\n  addressing_style = {style}\n"
    )
    return path


async def test_the_profiles_addressing_style_applies(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = new_bucket(server, "style")
    port = server.url.rsplit(":", 1)[1]
    named = f"http://localhost:{port}"  # a DNS name: 'auto' would put the bucket in the host
    monkeypatch.setenv("AWS_CONFIG_FILE", str(_profile_config(tmp_path, "path")))
    async with S3Backend(bucket, BackendOptions(endpoint_url=named, profile="p")) as b:
        assert b.wire.addressing == "path"
        await b.put("k", b"x", WriteOptions())
    put = [s for s in server.front.for_bucket(bucket) if s.method == "PUT"]
    assert put[-1].path == f"/{bucket}/k"
    assert put[-1].headers["host"] == f"localhost:{port}"
    # Without the profile's setting: auto.
    async with S3Backend(bucket, BackendOptions(endpoint_url=named)) as b:
        assert b.wire.addressing == "auto"
    # A backend option wins; a subclass that forces a style keeps it.
    monkeypatch.setenv("AWS_CONFIG_FILE", str(_profile_config(tmp_path, "virtual")))
    explicit = BackendOptions(endpoint_url=named, profile="p", extra={"addressing_style": "path"})
    async with S3Backend(bucket, explicit) as b:
        assert b.wire.addressing == "path"
    async with ScpBackend(bucket, BackendOptions(endpoint_url=named, profile="p")) as b:
        assert b.wire.addressing == "path"
    async with S3Backend(bucket, BackendOptions(endpoint_url=named, profile="p")) as b:
        assert b.wire.addressing == "virtual"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(_profile_config(tmp_path, "sideways")))
    with pytest.raises(ConfigError, match=r"\[profile p\] s3.addressing_style"):
        async with S3Backend(bucket, BackendOptions(endpoint_url=named, profile="p")):
            pass
