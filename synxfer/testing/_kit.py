"""The conformance kit's plumbing: the fixtures base class and the helpers
its test classes share (payloads, checksums, listing). See
:mod:`synxfer.testing.conformance` for the tests themselves.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import ClassVar

import pytest

from .._models import ObjectInfo, WriteOptions
from ..backend import Backend, Checksum, ChecksumAlgorithm
from .plugin import check_requires

#: ``@requires("multipart")`` is ``@pytest.mark.requires("multipart")``.
requires = pytest.mark.requires

UNICODE_KEY = "dir/sub/ünï cödé.txt"


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE: list[int] = []


def _crc32c(data: bytes) -> int:
    try:
        import google_crc32c  # type: ignore[import-not-found, unused-ignore]

        return int(google_crc32c.value(data))
    except ImportError:
        pass
    if not _CRC32C_TABLE:
        _CRC32C_TABLE.extend(_crc32c_table())
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def make_checksum(algorithm: ChecksumAlgorithm | None, data: bytes) -> Checksum | None:
    """The :class:`~synxfer.Checksum` of ``data`` a backend declaring ``algorithm`` wants."""
    if algorithm is None:
        return None
    if algorithm == "md5":
        digest = hashlib.md5(data, usedforsecurity=False).digest()
    else:
        digest = _crc32c(data).to_bytes(4, "big")
    return Checksum(algorithm, base64.b64encode(digest).decode("ascii"))


def _payload(size: int, seed: int = 0) -> bytes:
    """``size`` bytes that differ at every offset and between seeds."""
    block = hashlib.sha256(f"synxfer-{seed}".encode()).digest() * 8
    out = bytearray()
    n = 0
    while len(out) < size:
        out += hashlib.sha256(block + n.to_bytes(8, "big")).digest() * 8
        n += 1
    return bytes(out[:size])


async def _put(
    backend: Backend, key: str, data: bytes, options: WriteOptions | None = None
) -> ObjectInfo:
    checksum = make_checksum(backend.capabilities.part_checksum, data)
    return await backend.put(key, data, options or WriteOptions(), checksum)


async def _list_all(backend: Backend, prefix: str) -> list[ObjectInfo]:
    """Every object under ``prefix``, following cursors (bounded, so a loop fails)."""
    items: list[ObjectInfo] = []
    cursor: str | None = None
    for _ in range(10_000):
        page = await backend.list_page(prefix, cursor)
        items.extend(page.items)
        if page.cursor is None:
            return items
        assert page.cursor != cursor, f"list_page({prefix!r}) returned the same cursor twice"
        cursor = page.cursor
    raise AssertionError(f"list_page({prefix!r}) never returned a last page")


async def _keys(backend: Backend, prefix: str) -> list[str]:
    return [item.key for item in await _list_all(backend, prefix)]


def _part_size(backend: Backend) -> int:
    caps = backend.capabilities
    return min(max(caps.min_part_size, 1024), caps.max_part_size)


class BackendFixtures:
    """Base of a plugin's fixtures class. Override :meth:`backend`.

    Fixtures:

    ``backend``
        An opened backend on an empty bucket; close it after the test.
        Must be overridden (an async generator fixture).
    ``key_prefix``
        Prepended to every key the kit uses, ``""`` by default. Override it
        with a prefix unique to each test (ending in ``/``) when tests share
        a bucket.
    """

    #: Kit tests this backend is known to fail, by test name, with the reason.
    #: They are skipped, and the reason shown.
    conformance_skips: ClassVar[Mapping[str, str]] = {}

    @pytest.fixture
    def backend(self) -> Backend:
        """Override with a fixture yielding an opened backend on an empty bucket."""
        pytest.fail(
            f"{type(self).__name__} must override the `backend` fixture "
            "(see synxfer.testing.BackendFixtures)",
            pytrace=False,
        )

    @pytest.fixture
    def key_prefix(self) -> str:
        """Prefix of every key a test uses; override for a per-test prefix."""
        return ""

    @pytest.fixture(autouse=True)
    def _synxfer_kit_checks(self, request: pytest.FixtureRequest, backend: Backend) -> None:
        """Skip by ``requires`` markers and ``conformance_skips`` before the test runs."""
        reason = self.conformance_skips.get(request.node.originalname or request.node.name)
        if reason:
            pytest.skip(f"known deviation: {reason}")
        if request.node.get_closest_marker("requires") is not None:
            check_requires(request.node, backend)


class _Kit(BackendFixtures):
    """Base of the test classes.

    Kit tests are coroutines run by pytest-asyncio. They carry no ``asyncio``
    marker of their own, so that the test class (or module) can choose the
    event loop scope: with ``asyncio_mode = "strict"``, give the test class
    ``pytestmark = pytest.mark.asyncio`` (or ``pytest.mark.asyncio(loop_scope=...)``
    to share a backend across tests).
    """
