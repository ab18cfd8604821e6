"""The conformance kit against the blocks:// backend on a real 3-site cluster.

Three ``synxfer-blockd`` processes on 127.0.0.1 (no emulated latency) serve
the module; one backend (64 KiB blocks, ``tworandom`` placement so reads
really pick between replicas at different sites) is opened for the module
on a module-scoped event loop, and every test works under its own key
prefix. Parts of the kit's multipart tests are one block (64 KiB) long.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from synxfer.backend import Backend, BackendOptions
from synxfer.testing import BackendConformance, BackendFixtures
from synxfer_blockstore import BlockStoreBackend
from synxfer_servers.blockd import BlockdProcess, start_all, write_cluster_file

pytestmark = pytest.mark.asyncio(loop_scope="module")

TOKEN = "conformance-token-never-printed"


@pytest.fixture(scope="module")
def cluster_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Three blockd sites in child processes, and a cluster file naming them."""
    root = tmp_path_factory.mktemp("blockd")
    token_file = root / "token"
    token_file.write_text(TOKEN)
    os.chmod(token_file, 0o600)
    sites = [BlockdProcess(name, root / name, TOKEN) for name in ("A", "B", "C")]
    try:
        start_all(sites)
        yield write_cluster_file(
            root / "cluster.json",
            {s.site: s.url for s in sites},
            "A",
            token_file=token_file,
            block_size="64KiB",
            policy="tworandom",
            probe_interval=0,
        )
    finally:
        for site in sites:
            site.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def blocks_backend(cluster_file: Path) -> AsyncIterator[Backend]:
    """One backend for the module, on namespace ``conformance``."""
    options = BackendOptions(max_connections=8, extra={"cluster": str(cluster_file)})
    async with BlockStoreBackend("conformance", options) as backend:
        yield backend


class BlockStoreFixtures(BackendFixtures):
    """The blocks:// backend on a 3-site cluster; a unique key prefix per test."""

    @pytest.fixture
    def backend(self, blocks_backend: Backend) -> Backend:
        return blocks_backend

    @pytest.fixture
    def key_prefix(self) -> str:
        return f"t-{uuid.uuid4().hex[:16]}/"


class TestBlockStoreBackend(BlockStoreFixtures, BackendConformance):
    """Every conformance test, on blocks:// (3 blockd processes)."""

    async def test_repr_hides_the_token(self, backend: Backend) -> None:
        assert TOKEN not in f"{backend!r} {backend!s} {backend.url('')}"
        assert isinstance(backend, BlockStoreBackend)
        assert TOKEN not in repr(backend.cluster)
