"""A layer wraps a backend and is itself a backend."""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from .._models import (
    BucketInfo,
    CompletedPart,
    ListPage,
    MultipartUpload,
    ObjectInfo,
    PartInfo,
    PendingUpload,
    ReadResult,
    WriteOptions,
)
from ..backend import Backend, Capabilities, Checksum, Payload

__all__ = ["Layer"]

T = TypeVar("T")


@functools.cache
def _takes_whole(cls: type[Backend]) -> bool:
    """Whether ``cls.read_into`` takes ``whole`` (a backend written before it
    was added may override ``read_into`` without it)."""
    return "whole" in inspect.signature(cls.read_into).parameters


class Layer(Backend):
    """Forwards every primitive to ``inner`` through :meth:`_call`.

    A layer overrides ``_call`` to add behaviour around every operation
    (``op`` names it, e.g. ``"upload_part"``), so no layer repeats the list
    of primitives.
    """

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.scheme = inner.scheme  # type: ignore[misc]
        self.bucket = inner.bucket
        self.capabilities: Capabilities = inner.capabilities

    def url(self, key: str = "") -> str:
        return self.inner.url(key)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.inner!r}>"

    async def _call(self, op: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        return await fn(*args)

    async def open(self) -> None:
        await self.inner.open()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def stat(self, key: str) -> ObjectInfo:
        return await self._call("stat", self.inner.stat, key)

    async def stat_part(self, key: str, number: int, *, if_match: str | None = None) -> PartInfo:
        return await self._call("stat_part", self._stat_part, key, number, if_match)

    async def _stat_part(self, key: str, number: int, if_match: str | None) -> PartInfo:
        return await self.inner.stat_part(key, number, if_match=if_match)

    async def list_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        return await self._call("list_page", self.inner.list_page, prefix, cursor)

    async def read(
        self,
        key: str,
        offset: int = 0,
        length: int | None = None,
        *,
        if_match: str | None = None,
    ) -> ReadResult:
        return await self._call("read", self._read, key, offset, length, if_match)

    async def _read(
        self, key: str, offset: int, length: int | None, if_match: str | None
    ) -> ReadResult:
        return await self.inner.read(key, offset, length, if_match=if_match)

    async def read_into(
        self,
        key: str,
        offset: int,
        buf: memoryview,
        *,
        if_match: str | None = None,
        whole: bool = False,
    ) -> ObjectInfo:
        return await self._call("read_into", self._read_into, key, offset, buf, if_match, whole)

    async def _read_into(
        self, key: str, offset: int, buf: memoryview, if_match: str | None, whole: bool = False
    ) -> ObjectInfo:
        if whole and _takes_whole(type(self.inner)):
            return await self.inner.read_into(key, offset, buf, if_match=if_match, whole=True)
        return await self.inner.read_into(key, offset, buf, if_match=if_match)

    async def put(
        self, key: str, data: Payload, options: WriteOptions, checksum: Checksum | None = None
    ) -> ObjectInfo:
        return await self._call("put", self.inner.put, key, data, options, checksum)

    async def delete(self, key: str) -> None:
        await self._call("delete", self.inner.delete, key)

    async def delete_many(self, keys: Sequence[str]) -> Mapping[str, Exception]:
        return await self._call("delete_many", self.inner.delete_many, keys)

    async def copy(self, src_key: str, dst_key: str, options: WriteOptions) -> ObjectInfo:
        return await self._call("copy", self.inner.copy, src_key, dst_key, options)

    def copy_scope(self) -> object | None:
        return self.inner.copy_scope()

    async def copy_from(
        self, src_bucket: str, src_key: str, dst_key: str, options: WriteOptions
    ) -> ObjectInfo:
        fn = self.inner.copy_from
        return await self._call("copy", fn, src_bucket, src_key, dst_key, options)

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        return await self._call("create_multipart", self.inner.create_multipart, key, options)

    async def upload_part(
        self, upload: MultipartUpload, number: int, data: Payload, checksum: Checksum | None = None
    ) -> CompletedPart:
        return await self._call(
            "upload_part", self.inner.upload_part, upload, number, data, checksum
        )

    async def complete_multipart(
        self, upload: MultipartUpload, parts: Sequence[CompletedPart]
    ) -> ObjectInfo:
        return await self._call("complete_multipart", self.inner.complete_multipart, upload, parts)

    async def abort_multipart(self, upload: MultipartUpload) -> None:
        await self._call("abort_multipart", self.inner.abort_multipart, upload)

    async def list_parts(self, upload: MultipartUpload) -> list[CompletedPart]:
        return await self._call("list_parts", self.inner.list_parts, upload)

    async def list_uploads(self, key: str) -> list[PendingUpload]:
        return await self._call("list_uploads", self.inner.list_uploads, key)

    async def create_bucket(self, *, region: str | None = None) -> None:
        await self._call("create_bucket", self._create_bucket, region)

    async def _create_bucket(self, region: str | None) -> None:
        await self.inner.create_bucket(region=region)

    async def delete_bucket(self) -> None:
        await self._call("delete_bucket", self.inner.delete_bucket)

    async def list_buckets(self) -> list[BucketInfo]:
        return await self._call("list_buckets", self.inner.list_buckets)

    async def sole_key(self) -> str | None:
        return await self._call("sole_key", self.inner.sole_key)

    def at_version(self, version_id: str) -> Backend:
        # The same layers (sharing their state: limiter, retry policy) over
        # the inner backend's view of that version.
        view = copy.copy(self)
        view.inner = self.inner.at_version(version_id)
        return view

    async def list_versions_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        fn = self.inner.list_versions_page
        return await self._call("list_versions_page", fn, prefix, cursor)

    async def delete_versions(
        self, items: Sequence[tuple[str, str]]
    ) -> Mapping[tuple[str, str], Exception]:
        return await self._call("delete_versions", self.inner.delete_versions, items)

    async def presign(self, key: str, method: Literal["GET", "PUT"], expires_in: int) -> str:
        # Local signing, no request: no slot, no retry, no timeout.
        return await self.inner.presign(key, method, expires_in)
