"""Endpoints per service: each scheme's own setting, and ``--endpoint-url`` for one service.

``AWS_ENDPOINT_URL``/``AWS_ENDPOINT_URL_S3`` are S3's, ``STORAGE_EMULATOR_HOST``
is GCS's. A copy between two services never sends one service's requests to
the other's server; ``--endpoint-url`` (``endpoint_url=``) with two services
must say which one it is for. moto (S3) in this process and the GCS emulator
in a subprocess, both on 127.0.0.1; the CLI runs as a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import pytest

import synxfer
import synxfer.backend
from synxfer_servers.gcs import GcsEmulator, create_bucket, wipe

from .conftest import SMALL


@pytest.fixture(scope="module")
def gcs_endpoint() -> Iterator[str]:
    with GcsEmulator() as emulator:
        yield emulator.endpoint_url
        wipe(emulator.endpoint_url)


@pytest.fixture
def gs_bucket(gcs_endpoint: str) -> str:
    name = f"g-{uuid.uuid4().hex[:16]}"
    create_bucket(gcs_endpoint, name)
    return name


def _gs_object(endpoint: str, bucket: str, key: str) -> bytes:
    r = httpx.get(
        f"{endpoint}/storage/v1/b/{bucket}/o/{key.replace('/', '%2F')}", params={"alt": "media"}
    )
    r.raise_for_status()
    return r.content


def _cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def env(s3_endpoint: str, gcs_endpoint: str) -> dict[str, str]:
    """A user who set each service's own variable, as the services document them."""
    return {**os.environ, "AWS_ENDPOINT_URL": s3_endpoint, "STORAGE_EMULATOR_HOST": gcs_endpoint}


def test_each_service_takes_its_own_variable(
    env: dict[str, str], bucket: str, gs_bucket: str, gcs_endpoint: str, tmp_path: Path
) -> None:
    """`cp s3://… gs://…` with AWS_ENDPOINT_URL set: gs:// goes to GCS, not to S3."""
    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"])
    s3.put_object(Bucket=bucket, Key="d/a.txt", Body=b"from s3")
    s3.put_object(Bucket=bucket, Key="d/b.txt", Body=b"also from s3")
    one = _cli(env, tmp_path, "cp", f"s3://{bucket}/d/a.txt", f"gs://{gs_bucket}/one.txt")
    assert one.returncode == 0, one.stderr
    assert _gs_object(gcs_endpoint, gs_bucket, "one.txt") == b"from s3"
    tree = _cli(env, tmp_path, "sync", f"s3://{bucket}/d", f"gs://{gs_bucket}/d")
    assert tree.returncode == 0, tree.stderr
    assert _gs_object(gcs_endpoint, gs_bucket, "d/b.txt") == b"also from s3"
    back = _cli(env, tmp_path, "sync", f"gs://{gs_bucket}/d", f"s3://{bucket}/back")
    assert back.returncode == 0, back.stderr
    assert s3.get_object(Bucket=bucket, Key="back/a.txt")["Body"].read() == b"from s3"
    # One service: --endpoint-url is that service's.
    local = _cli(env, tmp_path, "cp", f"gs://{gs_bucket}/one.txt", "got.txt")
    assert local.returncode == 0, local.stderr
    assert (tmp_path / "got.txt").read_bytes() == b"from s3"
    gs_only = {**env, "STORAGE_EMULATOR_HOST": "http://127.0.0.1:9"}  # nothing listens
    flag = _cli(
        gs_only, tmp_path, "cp", "--endpoint-url", gcs_endpoint, f"gs://{gs_bucket}/one.txt", "f"
    )
    assert flag.returncode == 0, flag.stderr


def test_endpoint_url_between_two_services_must_say_which(
    env: dict[str, str], s3_endpoint: str, bucket: str, gs_bucket: str, tmp_path: Path
) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    src, dst = f"s3://{bucket}/k", f"gs://{gs_bucket}/k"
    for command in ("cp", "sync"):
        bad = _cli(env, tmp_path, command, "--endpoint-url", s3_endpoint, src, dst)
        assert bad.returncode == 2, bad.stderr
        assert "--endpoint-url is ambiguous between gs and s3" in bad.stderr
        assert f"--endpoint s3={s3_endpoint}" in bad.stderr
        assert "Traceback" not in bad.stderr
    # Said which: --endpoint-url serves the one left over.
    ok = _cli(env, tmp_path, "cp", "--endpoint-url", s3_endpoint, "--endpoint", "gs=" + env[
        "STORAGE_EMULATOR_HOST"
    ], src, dst)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    # file:// is no service: nothing to say.
    local_bucket = tmp_path / "files"
    local_bucket.mkdir()
    to_file = _cli(
        env, tmp_path, "cp", "--endpoint-url", s3_endpoint, src, f"file://{local_bucket}/k"
    )
    assert to_file.returncode == 0, to_file.stderr
    assert (local_bucket / "k").read_bytes() == b"x"


async def test_client_refuses_one_endpoint_url_for_two_services(
    s3_endpoint: str,
    gcs_endpoint: str,
    bucket: str,
    gs_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    boto3.client("s3", endpoint_url=s3_endpoint).put_object(Bucket=bucket, Key="d/k", Body=b"y")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_endpoint)
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as client:
        with pytest.raises(synxfer.ConfigError, match="endpoint_url is ambiguous") as info:
            await client.copy(f"s3://{bucket}/d/k", f"gs://{gs_bucket}/k")
        assert "--" not in str(info.value), "no CLI flags in a library error"
        with pytest.raises(synxfer.ConfigError, match="endpoint_url is ambiguous"):
            await client.sync(f"s3://{bucket}/d", f"gs://{gs_bucket}/d")
    named = {"s3": s3_endpoint, "gs": gcs_endpoint}
    async with synxfer.Client(SMALL, endpoint_url="http://127.0.0.1:9", endpoints=named) as client:
        assert (await client.copy(f"s3://{bucket}/d/k", f"gs://{gs_bucket}/k")).ok
    assert _gs_object(gcs_endpoint, gs_bucket, "k") == b"y"


def test_gcs_endpoint_errors_name_no_cli_flag() -> None:
    from synxfer_gcs import resolve_endpoint

    with pytest.raises(synxfer.ConfigError, match="invalid GCS endpoint 'ftp://x'") as info:
        resolve_endpoint(synxfer.backend.BackendOptions(endpoint_url="ftp://x"))
    assert "--" not in str(info.value)
