"""The backend conformance kit: tests every backend must pass.

A plugin's test module combines a fixtures class, which says how to get a
backend, with the test classes::

    import pytest_asyncio
    from synxfer.testing import BackendConformance, BackendFixtures

    class MyFixtures(BackendFixtures):
        @pytest_asyncio.fixture
        async def backend(self, tmp_path):
            async with MyBackend("bucket", BackendOptions(...)) as b:
                yield b

    class TestMyBackend(MyFixtures, BackendConformance):
        pass

The tests are coroutines run by pytest-asyncio. With ``asyncio_mode =
"auto"`` nothing more is needed; in strict mode, also set ``pytestmark =
pytest.mark.asyncio`` on the test class. To open one backend for many tests
(opening is slow for some SDKs), make it a module-scoped fixture with
``loop_scope="module"``, mark the module ``pytest.mark.asyncio(loop_scope=
"module")``, and override ``key_prefix`` (see ``tests/test_conformance_s3.py``).

``backend`` must yield an *opened* backend on an empty bucket (or root).
If a fresh bucket per test is costly, share one and override ``key_prefix``
to return a prefix unique to each test; every key the kit uses starts
with it and listings are made under it.

Tests that need a capability carry ``@pytest.mark.requires(...)`` and are
skipped for backends that do not declare it. A backend that knowingly
deviates (typically because its *test server* does not implement a check
the real service makes) lists the affected tests, with the reason, in
:attr:`BackendFixtures.conformance_skips`.

Beyond the rules in :mod:`synxfer.backend`, the kit pins down:

* ETags are returned without quotes; ``put``, ``stat``, ``read`` and
  ``complete_multipart`` agree on them; ``read(if_match=old)`` after an
  overwrite raises PreconditionFailed (ranged or not).
* A read past the end is short, and a ranged read of an empty object
  (or at its end) returns ``b""`` rather than an error.
* ``copy(src, dst, options)`` gives ``dst`` the metadata and content type
  in ``options`` (S3's ``MetadataDirective=REPLACE``); a missing ``src``
  raises NotFound.
* ``list_page`` prefixes are plain string prefixes (not directories),
  results are in key order across pages, and uploads in progress are
  never listed.
* ``list_buckets``, where a backend has it, is served by a backend of its
  class opened for bucket ``""`` with the same ``options``, and names the
  bucket under test once.
* ``delete_many`` reports no failure for missing keys.
* A put or part with a wrong checksum raises a BackendError and stores
  nothing; after a failed upload the old object is intact.
* ``put`` and ``upload_part`` accept a ``bytearray`` the caller refills
  as soon as the call returns.
* NotFound messages name the key; ``repr``/``str`` never show
  ``$AWS_SECRET_ACCESS_KEY`` or ``$AWS_SESSION_TOKEN``.

The test classes, by area: :class:`ReadWriteTests`, :class:`MetadataTests`,
:class:`ListTests`, :class:`DeleteTests`, :class:`CopyTests`,
:class:`MultipartTests`, :class:`ErrorTests`; :class:`BackendConformance`
is all of them. Test data stays small: multipart tests use parts of
``max(capabilities.min_part_size, 1 KiB)``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from typing import ClassVar

import pytest

from .._exceptions import BackendError, NotFound, PreconditionFailed
from .._models import CompletedPart, ObjectInfo, WriteOptions
from ..backend import Backend, BackendFactory, BackendOptions
from ._kit import (
    UNICODE_KEY,
    BackendFixtures,
    _keys,
    _Kit,
    _list_all,
    _part_size,
    _payload,
    _put,
    make_checksum,
    requires,
)

__all__ = [
    "BackendConformance",
    "BackendFixtures",
    "CopyTests",
    "DeleteTests",
    "ErrorTests",
    "ListTests",
    "MetadataTests",
    "MultipartTests",
    "ReadWriteTests",
    "make_checksum",
    "requires",
]


class ReadWriteTests(_Kit):
    """put, stat and read: whole, ranged, empty, overwrite, unicode keys."""

    async def test_put_then_stat(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "hello.txt"
        data = b"hello, synxfer\n"
        before = time.time()
        put = await _put(backend, key, data)
        assert put.key == key
        assert put.etag, "put must return the new object's ETag"
        info = await backend.stat(key)
        assert info.key == key
        assert info.size == len(data)
        assert info.etag == put.etag
        assert not info.etag.startswith('"'), "ETags are returned without quotes"
        if info.mtime is not None:
            assert before - 300 < info.mtime < time.time() + 300, "mtime is seconds since epoch"

    async def test_read_whole(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "whole.bin"
        data = _payload(10_000)
        put = await _put(backend, key, data)
        result = await backend.read(key)
        assert result.data == data
        assert result.info.size == len(data)
        assert result.info.key == key
        assert result.info.etag == put.etag

    @requires("ranged_reads")
    async def test_read_ranges(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "ranged.bin"
        data = _payload(4096, seed=1)
        await _put(backend, key, data)
        for offset, length in [(0, 1), (0, 100), (1, 100), (1000, 1), (4095, 1), (17, 4079)]:
            result = await backend.read(key, offset, length)
            assert result.data == data[offset : offset + length], (offset, length)
            assert result.info.size == len(data), "info.size is the whole object's size"
        tail = await backend.read(key, 4000)
        assert tail.data == data[4000:], "no length reads to the end"

    async def test_read_into(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "into.bin"
        data = _payload(5000, seed=3)
        put = await _put(backend, key, data)
        buf = bytearray(len(data) + 10)
        info = await backend.read_into(key, 0, memoryview(buf)[: len(data)], if_match=put.etag)
        assert bytes(buf[: len(data)]) == data
        assert bytes(buf[len(data) :]) == bytes(10), "nothing written past the view"
        assert info.size == len(data)
        assert info.etag == put.etag
        if backend.capabilities.ranged_reads:
            view = memoryview(buf)[:100]
            info = await backend.read_into(key, 4900, view)
            assert bytes(view) == data[4900:]
            assert info.size == len(data), "info.size is the whole object's size"
            with pytest.raises(PreconditionFailed):
                await backend.read_into(key, 4950, memoryview(buf)[:100])
        await _put(backend, key, b"changed")
        with pytest.raises(PreconditionFailed):
            await backend.read_into(key, 0, memoryview(buf)[:7], if_match=put.etag)
        empty = key_prefix + "into-empty"
        await _put(backend, empty, b"")
        info = await backend.read_into(empty, 0, memoryview(buf)[:0])
        assert info.size == 0

    @requires("ranged_reads")
    async def test_read_past_end_is_short(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "short.bin"
        data = _payload(1000, seed=2)
        await _put(backend, key, data)
        result = await backend.read(key, 900, 500)
        assert result.data == data[900:]
        assert result.info.size == 1000
        result = await backend.read(key, 0, 5000)
        assert result.data == data
        result = await backend.read(key, 1000, 10)
        assert result.data == b"", "a read at the end is empty, not an error"
        assert result.info.size == 1000

    async def test_empty_object(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "empty"
        put = await _put(backend, key, b"")
        assert put.etag
        info = await backend.stat(key)
        assert info.size == 0
        result = await backend.read(key)
        assert result.data == b""
        assert result.info.size == 0

    @requires("ranged_reads")
    async def test_ranged_read_of_empty_object(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "empty-ranged"
        await _put(backend, key, b"")
        result = await backend.read(key, 0, 1024)
        assert result.data == b""
        assert result.info.size == 0

    async def test_overwrite(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "over.txt"
        first = await _put(backend, key, b"first version")
        second = await _put(backend, key, b"second")
        assert first.etag != second.etag
        assert (await backend.read(key)).data == b"second"
        info = await backend.stat(key)
        assert (info.size, info.etag) == (6, second.etag)

    async def test_unicode_and_nested_keys(self, backend: Backend, key_prefix: str) -> None:
        keys = [
            key_prefix + UNICODE_KEY,
            key_prefix + "a/b/c/d/e/deep.txt",
            key_prefix + "spaces and (parens) & more.txt",
            key_prefix + "日本語/ファイル.txt",
        ]
        for i, key in enumerate(keys):
            await _put(backend, key, f"content {i}".encode())
        for i, key in enumerate(keys):
            assert (await backend.stat(key)).size == len(f"content {i}")
            assert (await backend.read(key)).data == f"content {i}".encode()
        assert await _keys(backend, key_prefix) == sorted(keys)

    async def test_concurrent_puts_and_reads(self, backend: Backend, key_prefix: str) -> None:
        blobs = {f"{key_prefix}many/{i:02d}": _payload(100 + i, seed=i) for i in range(12)}
        await asyncio.gather(*(_put(backend, k, v) for k, v in blobs.items()))
        results = await asyncio.gather(*(backend.read(k) for k in blobs))
        assert [r.data for r in results] == list(blobs.values())

    async def test_put_takes_a_reusable_buffer(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "buffer.bin"
        data = _payload(3000, seed=4)
        buffer = bytearray(data)
        await backend.put(
            key, buffer, WriteOptions(), make_checksum(backend.capabilities.part_checksum, data)
        )
        buffer[:] = bytes(len(buffer))  # the engine refills its buffer once put returns
        assert (await backend.read(key)).data == data

    async def test_url_names_key(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "some/key.txt"
        url = backend.url(key)
        assert url.startswith(f"{backend.scheme}://")
        assert url.endswith(key)

    async def test_repr_has_no_secrets(self, backend: Backend) -> None:
        text = f"{backend!r} {backend!s} {backend.url('')}"
        assert type(backend).__name__ in repr(backend) or backend.scheme in repr(backend)
        for var in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            secret = os.environ.get(var)
            if secret and secret not in backend.url("") and secret not in backend.bucket:
                assert secret not in text, f"repr/str of the backend shows ${var}"


class MetadataTests(_Kit):
    """User metadata and content type survive put, multipart and copy."""

    metadata: ClassVar[Mapping[str, str]] = {
        "mtime": "1700000000.123456",
        "x-origin": "synxfer conformance",
    }

    @requires("metadata")
    async def test_put_metadata_round_trip(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "meta.txt"
        options = WriteOptions(metadata=self.metadata, content_type="text/plain")
        await _put(backend, key, b"with metadata", options)
        info = await backend.stat(key)
        assert dict(info.metadata) == dict(self.metadata)
        assert info.content_type == "text/plain"

    @requires("metadata")
    async def test_overwrite_replaces_metadata(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "meta2.txt"
        await _put(backend, key, b"one", WriteOptions(metadata={"a": "1"}))
        await _put(backend, key, b"two", WriteOptions(metadata={"b": "2"}))
        assert dict((await backend.stat(key)).metadata) == {"b": "2"}

    @requires("metadata", "multipart")
    async def test_multipart_metadata_round_trip(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "meta-mpu.bin"
        options = WriteOptions(metadata=self.metadata, content_type="application/x-test")
        upload = await backend.create_multipart(key, options)
        data = _payload(100)
        checksum = make_checksum(backend.capabilities.part_checksum, data)
        part = await backend.upload_part(upload, 1, data, checksum)
        await backend.complete_multipart(upload, [part])
        info = await backend.stat(key)
        assert dict(info.metadata) == dict(self.metadata)
        assert info.content_type == "application/x-test"

    @requires("metadata", "server_side_copy")
    async def test_copy_sets_given_metadata(self, backend: Backend, key_prefix: str) -> None:
        src, dst = key_prefix + "meta-src", key_prefix + "meta-dst"
        await _put(backend, src, b"x", WriteOptions(metadata={"old": "1"}))
        options = WriteOptions(metadata=self.metadata, content_type="text/x-copied")
        await backend.copy(src, dst, options)
        info = await backend.stat(dst)
        assert dict(info.metadata) == dict(self.metadata)
        assert info.content_type == "text/x-copied"


class ListTests(_Kit):
    """list_page: plain string prefixes, key order, cursors, nothing half-written."""

    async def test_list_empty(self, backend: Backend, key_prefix: str) -> None:
        assert await _keys(backend, key_prefix) == []
        assert await _keys(backend, key_prefix + "nothing/here/") == []

    async def test_prefix_is_a_string_prefix(self, backend: Backend, key_prefix: str) -> None:
        names = ["a/1", "a/2", "a/sub/3", "ab", "a.txt", "b/1", "c"]
        for name in names:
            await _put(backend, key_prefix + name, name.encode())
        p = key_prefix
        assert await _keys(backend, p) == sorted(p + n for n in names)
        assert await _keys(backend, p + "a/") == [p + "a/1", p + "a/2", p + "a/sub/3"]
        assert await _keys(backend, p + "a") == sorted(
            p + n for n in ["a/1", "a/2", "a/sub/3", "ab", "a.txt"]
        )
        assert await _keys(backend, p + "a/s") == [p + "a/sub/3"]
        assert await _keys(backend, p + "b/1") == [p + "b/1"]
        assert await _keys(backend, p + "zzz") == []

    async def test_list_items(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "item.bin"
        put = await _put(backend, key, _payload(1234))
        [item] = await _list_all(backend, key_prefix)
        assert (item.key, item.size) == (key, 1234)
        if item.etag is not None:
            assert item.etag == put.etag

    async def test_sorted_and_paginated(self, backend: Backend, key_prefix: str) -> None:
        names = [f"p/{i:03d}" for i in range(0, 40, 3)] + ["p/x/y/z", "p/x-", "p/x.y", "p/X"]
        names += [f"p/{i:03d}" for i in range(1, 40, 3)]
        await asyncio.gather(*(_put(backend, key_prefix + n, b"") for n in names))
        expected = sorted(key_prefix + n for n in names)
        assert await _keys(backend, key_prefix + "p/") == expected
        # Listing via the Backend.list convenience gives the same.
        assert [i.key async for i in backend.list(key_prefix + "p/")] == expected

    async def test_cursor_resumes_after(self, backend: Backend, key_prefix: str) -> None:
        names = ["k/a", "k/b/c", "k/b/d", "k/c"]
        for name in names:
            await _put(backend, key_prefix + name, b"1")
        first = await backend.list_page(key_prefix + "k/")
        if first.cursor is None:
            assert [i.key for i in first.items] == [key_prefix + n for n in names]
        else:
            rest = await _keys_after(backend, key_prefix + "k/", first.cursor)
            assert [i.key for i in first.items] + rest == [key_prefix + n for n in names]

    async def test_deleted_objects_leave_listing(self, backend: Backend, key_prefix: str) -> None:
        for name in ["d/1", "d/2"]:
            await _put(backend, key_prefix + name, b"x")
        await backend.delete(key_prefix + "d/1")
        assert await _keys(backend, key_prefix) == [key_prefix + "d/2"]

    @requires("multipart")
    async def test_listing_hides_multipart_in_progress(
        self, backend: Backend, key_prefix: str
    ) -> None:
        done = key_prefix + "up/done"
        await _put(backend, done, b"x")
        key = key_prefix + "up/pending"
        upload = await backend.create_multipart(key, WriteOptions())
        data = _payload(_part_size(backend))
        checksum = make_checksum(backend.capabilities.part_checksum, data)
        await backend.upload_part(upload, 1, data, checksum)
        try:
            assert await _keys(backend, key_prefix) == [done]
            with pytest.raises(NotFound):
                await backend.stat(key)
        finally:
            await backend.abort_multipart(upload)
        assert await _keys(backend, key_prefix) == [done]

    async def test_list_buckets_names_this_one(self, backend: Backend) -> None:
        """A backend that lists buckets (optional) does it from an account-level
        backend: its class, bucket ``""``, the same options."""
        cls = type(backend)
        if cls.list_buckets is Backend.list_buckets:
            pytest.skip("this backend does not list buckets (optional)")
        options = getattr(backend, "options", None)
        if not isinstance(options, BackendOptions):
            pytest.skip("the backend keeps no `options` to open an account-level one with")
        factory: BackendFactory = cls  # the entry point's contract: Factory(bucket, options)
        async with factory("", options) as account:
            buckets = await account.list_buckets()
        names = [b.name for b in buckets]
        assert backend.bucket in names
        assert len(names) == len(set(names))


async def _keys_after(backend: Backend, prefix: str, cursor: str) -> list[str]:
    keys: list[str] = []
    next_cursor: str | None = cursor
    while next_cursor is not None:
        page = await backend.list_page(prefix, next_cursor)
        keys.extend(i.key for i in page.items)
        next_cursor = page.cursor
    return keys


class DeleteTests(_Kit):
    """delete and delete_many; missing keys are not errors."""

    async def test_delete(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "gone.txt"
        await _put(backend, key, b"bye")
        await backend.delete(key)
        with pytest.raises(NotFound):
            await backend.stat(key)
        with pytest.raises(NotFound):
            await backend.read(key)

    async def test_delete_missing_is_ok(self, backend: Backend, key_prefix: str) -> None:
        await backend.delete(key_prefix + "never-existed")
        await backend.delete(key_prefix + "no/such/dir/file")

    async def test_delete_many(self, backend: Backend, key_prefix: str) -> None:
        keys = [f"{key_prefix}many/{i}" for i in range(5)]
        for key in keys:
            await _put(backend, key, b"x")
        keep = key_prefix + "keep"
        await _put(backend, keep, b"y")
        failed = await backend.delete_many([*keys, key_prefix + "missing"])
        assert dict(failed) == {}
        assert await _keys(backend, key_prefix) == [keep]

    async def test_delete_many_empty(self, backend: Backend) -> None:
        assert dict(await backend.delete_many([])) == {}


class CopyTests(_Kit):
    """Server-side copy within the bucket."""

    @requires("server_side_copy")
    async def test_copy(self, backend: Backend, key_prefix: str) -> None:
        src, dst = key_prefix + "src.bin", key_prefix + "copies/deep/dst.bin"
        data = _payload(5000, seed=3)
        await _put(backend, src, data)
        info = await backend.copy(src, dst, WriteOptions())
        assert info.key == dst
        assert info.etag
        assert (await backend.read(dst)).data == data
        assert (await backend.read(src)).data == data, "the source is left alone"
        assert (await backend.stat(dst)).size == len(data)
        assert await _keys(backend, key_prefix) == sorted([src, dst])

    @requires("server_side_copy")
    async def test_copy_over_existing(self, backend: Backend, key_prefix: str) -> None:
        src, dst = key_prefix + "c-src", key_prefix + "c-dst"
        await _put(backend, src, b"new content")
        await _put(backend, dst, b"old")
        await backend.copy(src, dst, WriteOptions())
        assert (await backend.read(dst)).data == b"new content"

    @requires("server_side_copy")
    async def test_copy_missing_source(self, backend: Backend, key_prefix: str) -> None:
        with pytest.raises(NotFound):
            await backend.copy(key_prefix + "no-such-src", key_prefix + "dst", WriteOptions())
        assert await _keys(backend, key_prefix) == []


class MultipartTests(_Kit):
    """create / upload_part / complete / abort."""

    async def _upload(
        self,
        backend: Backend,
        key: str,
        sizes: list[int],
        *,
        order: list[int] | None = None,
        complete_order: list[int] | None = None,
    ) -> tuple[bytes, ObjectInfo]:
        chunks = [_payload(size, seed=10 + i) for i, size in enumerate(sizes)]
        upload = await backend.create_multipart(key, WriteOptions())
        assert upload.key == key
        assert upload.upload_id
        algorithm = backend.capabilities.part_checksum
        numbers = order or list(range(1, len(sizes) + 1))
        done: dict[int, CompletedPart] = {}
        for number in numbers:
            data = chunks[number - 1]
            part = await backend.upload_part(upload, number, data, make_checksum(algorithm, data))
            assert part.number == number
            assert part.size == len(data)
            assert part.etag
            done[number] = part
        given = [done[n] for n in (complete_order or sorted(done))]
        info = await backend.complete_multipart(upload, given)
        return b"".join(chunks), info

    @requires("multipart")
    async def test_multipart_round_trip(self, backend: Backend, key_prefix: str) -> None:
        ps = _part_size(backend)
        key = key_prefix + "mpu/object.bin"
        data, info = await self._upload(backend, key, [ps, ps, ps // 2 + 1])
        assert info.key == key
        assert info.etag
        stat = await backend.stat(key)
        assert stat.size == len(data)
        assert stat.etag == info.etag
        assert (await backend.read(key)).data == data
        if backend.capabilities.ranged_reads:
            got = await backend.read(key, ps - 10, 20)
            assert got.data == data[ps - 10 : ps + 10], "a range across a part boundary"
        assert await _keys(backend, key_prefix) == [key]

    @requires("multipart", "list_parts")
    async def test_list_parts_reports_uploaded_parts(
        self, backend: Backend, key_prefix: str
    ) -> None:
        """What resume relies on: the server's view of an upload in progress."""
        ps = _part_size(backend)
        key = key_prefix + "mpu/listed.bin"
        upload = await backend.create_multipart(key, WriteOptions())
        algorithm = backend.capabilities.part_checksum
        sent = {}
        for number, size in ((1, ps), (3, 9)):
            data = _payload(size, seed=40 + number)
            sent[number] = await backend.upload_part(
                upload, number, data, make_checksum(algorithm, data)
            )
        listed = await backend.list_parts(upload)
        assert sorted((p.number, p.etag, p.size) for p in listed) == sorted(
            (p.number, p.etag, p.size) for p in sent.values()
        )
        await backend.abort_multipart(upload)
        with pytest.raises(NotFound):
            await backend.list_parts(upload)

    @requires("multipart")
    async def test_list_uploads_is_for_exactly_one_key(
        self, backend: Backend, key_prefix: str
    ) -> None:
        """Optional primitive: uploads in progress for one key, not its prefix-mates."""
        key = key_prefix + "mpu/pending.bin"
        first = await backend.create_multipart(key, WriteOptions())
        second = await backend.create_multipart(key, WriteOptions())
        other = await backend.create_multipart(key + "2", WriteOptions())
        try:
            try:
                pending = await backend.list_uploads(key)
            except NotImplementedError:
                pytest.skip("this backend does not list uploads (optional)")
            ids = sorted(p.upload.upload_id for p in pending)
            assert ids == sorted([first.upload_id, second.upload_id])
            assert all(p.upload.key == key for p in pending)
        finally:
            for upload in (first, second, other):
                await backend.abort_multipart(upload)

    @requires("multipart")
    async def test_multipart_parts_out_of_order(self, backend: Backend, key_prefix: str) -> None:
        ps = _part_size(backend)
        key = key_prefix + "mpu/shuffled.bin"
        data, _ = await self._upload(
            backend, key, [ps, ps, 100], order=[3, 1, 2], complete_order=[2, 3, 1]
        )
        assert (await backend.read(key)).data == data

    @requires("multipart")
    async def test_multipart_concurrent_parts(self, backend: Backend, key_prefix: str) -> None:
        ps = _part_size(backend)
        key = key_prefix + "mpu/concurrent.bin"
        chunks = [_payload(ps, seed=20 + i) for i in range(2)] + [_payload(7, seed=30)]
        upload = await backend.create_multipart(key, WriteOptions())
        algorithm = backend.capabilities.part_checksum
        parts = await asyncio.gather(
            *(
                backend.upload_part(upload, n, c, make_checksum(algorithm, c))
                for n, c in enumerate(chunks, start=1)
            )
        )
        await backend.complete_multipart(upload, parts)
        assert (await backend.read(key)).data == b"".join(chunks)

    @requires("multipart")
    async def test_multipart_parts_from_reusable_buffer(
        self, backend: Backend, key_prefix: str
    ) -> None:
        ps = _part_size(backend)
        key = key_prefix + "mpu/buffer.bin"
        chunks = [_payload(ps, seed=40), _payload(99, seed=41)]
        upload = await backend.create_multipart(key, WriteOptions())
        algorithm = backend.capabilities.part_checksum
        parts = []
        for number, chunk in enumerate(chunks, start=1):
            buffer = bytearray(chunk)
            checksum = make_checksum(algorithm, chunk)
            parts.append(await backend.upload_part(upload, number, buffer, checksum))
            buffer[:] = bytes(len(buffer))  # the engine refills its buffer once the call returns
        await backend.complete_multipart(upload, parts)
        assert (await backend.read(key)).data == b"".join(chunks)

    @requires("multipart")
    async def test_multipart_single_small_part(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "mpu/one.bin"
        data, _ = await self._upload(backend, key, [10])
        assert (await backend.read(key)).data == data
        assert (await backend.stat(key)).size == 10

    @requires("multipart")
    async def test_multipart_part_sent_twice(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "mpu/resent.bin"
        upload = await backend.create_multipart(key, WriteOptions())
        algorithm = backend.capabilities.part_checksum
        await backend.upload_part(upload, 1, b"first try", make_checksum(algorithm, b"first try"))
        part = await backend.upload_part(upload, 1, b"second", make_checksum(algorithm, b"second"))
        await backend.complete_multipart(upload, [part])
        assert (await backend.read(key)).data == b"second"

    @requires("multipart")
    async def test_multipart_overwrites(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "mpu/over.bin"
        await _put(backend, key, b"old content")
        data, _ = await self._upload(backend, key, [_part_size(backend), 3])
        assert (await backend.read(key)).data == data

    @requires("multipart")
    async def test_abort_leaves_nothing(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "mpu/aborted.bin"
        upload = await backend.create_multipart(key, WriteOptions())
        data = _payload(_part_size(backend))
        checksum = make_checksum(backend.capabilities.part_checksum, data)
        await backend.upload_part(upload, 1, data, checksum)
        await backend.abort_multipart(upload)
        with pytest.raises(NotFound):
            await backend.stat(key)
        assert await _keys(backend, key_prefix) == []

    @requires("multipart")
    async def test_abort_keeps_existing_object(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "mpu/kept.bin"
        await _put(backend, key, b"keep me")
        upload = await backend.create_multipart(key, WriteOptions())
        checksum = make_checksum(backend.capabilities.part_checksum, b"replacement")
        await backend.upload_part(upload, 1, b"replacement", checksum)
        await backend.abort_multipart(upload)
        assert (await backend.read(key)).data == b"keep me"

    @requires("multipart")
    async def test_upload_part_after_abort_fails(self, backend: Backend, key_prefix: str) -> None:
        upload = await backend.create_multipart(key_prefix + "mpu/late.bin", WriteOptions())
        await backend.abort_multipart(upload)
        checksum = make_checksum(backend.capabilities.part_checksum, b"late")
        with pytest.raises(BackendError):
            await backend.upload_part(upload, 1, b"late", checksum)
        assert await _keys(backend, key_prefix) == []


class ErrorTests(_Kit):
    """Errors map to synxfer's tree: NotFound, PreconditionFailed, checksum refusals."""

    async def test_stat_missing(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "missing-object.txt"
        with pytest.raises(NotFound) as info:
            await backend.stat(key)
        assert "missing-object.txt" in str(info.value), "the error names the object"

    async def test_read_missing(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "missing/read.txt"
        with pytest.raises(NotFound) as info:
            await backend.read(key)
        assert "read.txt" in str(info.value), "the error names the object"
        if backend.capabilities.ranged_reads:
            with pytest.raises(NotFound):
                await backend.read(key, 10, 10)

    async def test_read_if_match(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "cond.txt"
        put = await _put(backend, key, b"version one")
        assert put.etag
        result = await backend.read(key, if_match=put.etag)
        assert result.data == b"version one"
        if backend.capabilities.ranged_reads:
            result = await backend.read(key, 8, 3, if_match=put.etag)
            assert result.data == b"one"
        await _put(backend, key, b"version two")
        with pytest.raises(PreconditionFailed):
            await backend.read(key, if_match=put.etag)
        if backend.capabilities.ranged_reads:
            with pytest.raises(PreconditionFailed):
                await backend.read(key, 0, 4, if_match=put.etag)

    @requires("part_checksum")
    async def test_put_wrong_checksum_rejected(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "bad-digest.txt"
        wrong = make_checksum(backend.capabilities.part_checksum, b"other bytes")
        with pytest.raises(BackendError):
            await backend.put(key, b"the real bytes", WriteOptions(), wrong)
        with pytest.raises(NotFound):
            await backend.stat(key)
        assert await _keys(backend, key_prefix) == []

    @requires("part_checksum")
    async def test_put_wrong_checksum_keeps_old(self, backend: Backend, key_prefix: str) -> None:
        key = key_prefix + "bad-digest-2.txt"
        await _put(backend, key, b"old")
        wrong = make_checksum(backend.capabilities.part_checksum, b"other bytes")
        with pytest.raises(BackendError):
            await backend.put(key, b"new", WriteOptions(), wrong)
        assert (await backend.read(key)).data == b"old"

    @requires("part_checksum", "multipart")
    async def test_upload_part_wrong_checksum_rejected(
        self, backend: Backend, key_prefix: str
    ) -> None:
        key = key_prefix + "bad-part.bin"
        upload = await backend.create_multipart(key, WriteOptions())
        algorithm = backend.capabilities.part_checksum
        try:
            with pytest.raises(BackendError):
                await backend.upload_part(upload, 1, b"payload", make_checksum(algorithm, b"x"))
            good = await backend.upload_part(
                upload, 1, b"payload", make_checksum(algorithm, b"payload")
            )
            await backend.complete_multipart(upload, [good])
        except BaseException:
            await backend.abort_multipart(upload)
            raise
        assert (await backend.read(key)).data == b"payload"


class BackendConformance(
    ReadWriteTests,
    MetadataTests,
    ListTests,
    DeleteTests,
    CopyTests,
    MultipartTests,
    ErrorTests,
):
    """Every conformance test. Combine with a :class:`BackendFixtures` subclass."""
