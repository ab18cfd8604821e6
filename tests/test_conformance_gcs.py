"""The conformance kit against the GCS backend, on gcp-storage-emulator (PyPI) over HTTP.

The emulator runs in a subprocess on 127.0.0.1 for the module
(:class:`synxfer_servers.gcs.GcsEmulator`). Each backend is opened once on a
fresh bucket, on a module-scoped event loop, and every test works under its
own key prefix (the ``key_prefix`` hook of
:class:`~synxfer.testing.BackendFixtures`).

The kit runs twice:

``TestGcsOnEmulator``
    Against the bare emulator. Its media responses carry no
    ``x-goog-generation`` and no ``x-goog-hash`` on ranged reads, and it
    ignores ``ifGenerationMatch``; this run therefore exercises the backend's
    fallback, which asks for the object resource after the bytes and checks
    ``if_match`` against its generation (so ``test_read_if_match`` passes for
    real). One known deviation: the emulator ignores the request body of
    objects.rewrite, so a copy cannot replace metadata there;
    ``test_copy_sets_given_metadata`` is skipped on this run and passes on
    the next.

``TestGcsOnFront``
    Against the emulator behind :class:`~synxfer_servers.gcs.GcsFront`, which
    adds what GCS does and the emulator does not: GCS's headers on media
    responses (the backend's one-request read path), ``ifGenerationMatch``
    (412), 416 past the end, rewrite metadata and multi-call rewrites
    (``rewriteToken``), 32-source compose limit with generation-pinned
    sources, listing pages (5 objects per page here, so cursors are
    exercised) and GCS's 404 bodies. Nothing is skipped.

The wrong-checksum tests run for real on both: the emulator verifies the
``crc32c`` of a multipart upload and answers 400 like GCS.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import ClassVar

import pytest
import pytest_asyncio

from synxfer.backend import Backend, BackendOptions
from synxfer.testing import BackendConformance, BackendFixtures
from synxfer_gcs import GcsBackend
from synxfer_servers.gcs import GcsEmulator, GcsFront, create_bucket, wipe

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def emulator() -> Iterator[GcsEmulator]:
    with GcsEmulator() as server:
        yield server


@pytest.fixture(scope="module")
def front(emulator: GcsEmulator) -> Iterator[GcsFront]:
    with GcsFront(emulator.endpoint_url, rewrite_steps=2) as server:
        yield server


def _new_bucket(endpoint: str) -> str:
    name = f"conf-{uuid.uuid4().hex[:16]}"
    create_bucket(endpoint, name)
    return name


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emulator_backend(emulator: GcsEmulator) -> AsyncIterator[Backend]:
    """A GcsBackend straight on the emulator (4 connections: its listen backlog is 5)."""
    options = BackendOptions(endpoint_url=emulator.endpoint_url, max_connections=4)
    async with GcsBackend(_new_bucket(emulator.endpoint_url), options) as backend:
        yield backend


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def front_backend(front: GcsFront) -> AsyncIterator[Backend]:
    """A GcsBackend on the emulator behind the GCS-faithful front, 5 objects per page."""
    options = BackendOptions(endpoint_url=front.endpoint_url, extra={"list_page_size": "5"})
    async with GcsBackend(_new_bucket(front.endpoint_url), options) as backend:
        yield backend


class SharedBucketFixtures(BackendFixtures):
    """One backend per module; a unique key prefix per test; objects wiped after it
    (the emulator re-serializes all its objects on every write)."""

    @pytest.fixture
    def key_prefix(self, emulator: GcsEmulator) -> Iterator[str]:
        yield f"t-{uuid.uuid4().hex[:16]}/"
        wipe(emulator.endpoint_url)


class EmulatorFixtures(SharedBucketFixtures):
    conformance_skips: ClassVar[dict[str, str]] = {
        "test_copy_sets_given_metadata": (
            "gcp-storage-emulator ignores the request body of objects.rewrite (the "
            "destination's metadata); covered by TestGcsOnFront"
        ),
    }

    @pytest.fixture
    def backend(self, emulator_backend: Backend) -> Backend:
        return emulator_backend


class FrontFixtures(SharedBucketFixtures):
    @pytest.fixture
    def backend(self, front_backend: Backend) -> Backend:
        return front_backend


class TestGcsOnEmulator(EmulatorFixtures, BackendConformance):
    """Every conformance test, on the bare emulator."""


class TestGcsOnFront(FrontFixtures, BackendConformance):
    """Every conformance test, on the emulator made GCS-faithful by GcsFront."""
