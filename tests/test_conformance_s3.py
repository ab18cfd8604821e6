"""The conformance kit against the S3 and SCP backends, on an in-process moto server.

Each backend is opened once for the module (on a module-scoped event loop)
on one fresh bucket, and every test works under its own unique key prefix --
the ``key_prefix`` hook of :class:`~synxfer.testing.BackendFixtures` -- so
the module also exercises one connection pool across many tests.

Bare moto verifies neither ``Content-MD5`` nor ``x-amz-checksum-crc32c``;
the server from :func:`synxfer_servers.s3.moto_server` verifies both (as S3
does; SCP knows only Content-MD5), so the kit's wrong-checksum tests run for
real: against CRC32C for S3 (its default part checksum) and MD5 for SCP.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from synxfer.backend import Backend, BackendOptions
from synxfer.testing import BackendConformance, BackendFixtures
from synxfer_s3 import S3Backend
from synxfer_scp import ScpBackend
from synxfer_servers.s3 import MotoServer, moto_server

pytestmark = pytest.mark.asyncio(loop_scope="module")

_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing-secret-never-printed",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/synxfer-tests/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/synxfer-tests/credentials",
}


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    """An in-process moto server for this module, with fake credentials in the env."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "SCP_REGION"):
            mp.delenv(name, raising=False)
        for name, value in _ENV.items():
            mp.setenv(name, value)
        with moto_server() as server:
            yield server


@pytest.fixture(scope="module")
def s3_admin(moto: MotoServer) -> Any:
    """A boto3 client for setting up buckets."""
    import boto3

    return boto3.client("s3", endpoint_url=moto.endpoint_url, region_name="us-east-1")


def _new_bucket(admin: Any) -> str:
    name = f"conf-{uuid.uuid4().hex[:20]}"
    admin.create_bucket(Bucket=name)
    return name


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def s3_backend(moto: MotoServer, s3_admin: Any) -> AsyncIterator[Backend]:
    """An S3Backend on a fresh bucket, for the module."""
    options = BackendOptions(endpoint_url=moto.endpoint_url, region="us-east-1")
    async with S3Backend(_new_bucket(s3_admin), options) as backend:
        yield backend


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scp_backend(moto: MotoServer, s3_admin: Any) -> AsyncIterator[Backend]:
    """A ScpBackend (path-style, Content-MD5 only, default region) on a fresh bucket."""
    options = BackendOptions(endpoint_url=moto.endpoint_url)
    async with ScpBackend(_new_bucket(s3_admin), options) as backend:
        yield backend


class SharedBucketFixtures(BackendFixtures):
    """One backend per module; a unique key prefix per test."""

    @pytest.fixture
    def key_prefix(self) -> str:
        return f"t-{uuid.uuid4().hex[:16]}/"


class S3Fixtures(SharedBucketFixtures):
    """The S3 backend on moto."""

    @pytest.fixture
    def backend(self, s3_backend: Backend) -> Backend:
        return s3_backend


class ScpFixtures(SharedBucketFixtures):
    """The SCP backend on moto."""

    @pytest.fixture
    def backend(self, scp_backend: Backend) -> Backend:
        return scp_backend


class TestS3Backend(S3Fixtures, BackendConformance):
    """Every conformance test, on S3 (moto): CRC32C part checksums."""

    async def test_part_checksum_is_crc32c(self, backend: Backend) -> None:
        assert backend.capabilities.part_checksum == "crc32c"


class TestScpBackend(ScpFixtures, BackendConformance):
    """Every conformance test, on SCP's S3 profile (moto): Content-MD5 only."""

    async def test_part_checksum_is_md5(self, backend: Backend) -> None:
        assert backend.capabilities.part_checksum == "md5"
