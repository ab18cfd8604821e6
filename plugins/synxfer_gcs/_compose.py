"""Parallel composite uploads: the GCS backend's multipart primitives, on compose.

``create_multipart`` allocates an upload id and stores a small manifest
``<composite_prefix><upload id>/manifest`` (the key, metadata and content
type); each ``upload_part`` stores a component object
``<composite_prefix><upload id>/<NNNNN>`` with its CRC32C (its
``CompletedPart.etag`` is ``<generation>:<crc32c>``); ``complete_multipart``
composes the components in number order, 32 at a time (GCS's limit per
compose request), in as many levels as needed (two levels reach GCS's limit
of 1024 components per composite object), giving the final object the
metadata and content type passed to ``create_multipart``. Each source is
pinned by generation, and every composed object's CRC32C must equal the
combination of its sources' CRCs (computed without reading data,
:mod:`synxfer_gcs._crc32c`). Afterwards all components and intermediate
composites are deleted, also when completing fails -- except after a
TransientError, when they are kept so that the RetryLayer's next attempt can
complete the upload (the engine aborts the upload, deleting them, if every
attempt fails). ``abort_multipart`` deletes whatever is under the upload's
prefix. Everything about an upload is on the server, so ``list_parts``
works and a later run (another backend instance) can resume, complete or
abort it.

``complete_multipart`` and ``abort_multipart`` send several requests at
once (a level of composes, the deletes), so they are in the backend's
``capabilities.fan_out``: each request they send takes a slot of
``options.requests``, and at most :attr:`GcsBackend.fanout` run at once
within one call.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from synxfer import (
    BackendError,
    BucketNotFound,
    CompletedPart,
    ConfigError,
    IntegrityError,
    MultipartUpload,
    NotFound,
    ObjectInfo,
    SynxferError,
    TransientError,
    WriteOptions,
)
from synxfer.backend import Checksum, Payload, bounded_map, shielded

from . import _crc32c as crc32c
from ._wire import OCTET, OPTION_FIELDS, content_type, option_fields, resource

if TYPE_CHECKING:
    from ._backend import GcsBackend

__all__ = ["MAX_COMPONENTS", "MAX_COMPOSE_SOURCES", "Composer"]

log = logging.getLogger("synxfer.gcs")

#: Sources per compose request, and components per composite object (GCS limits).
MAX_COMPOSE_SOURCES = 32
MAX_COMPONENTS = 1024

_PART_ETAG = re.compile(r"^(\d+):([A-Za-z0-9+/]{6}==)$")
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
_PARTS_FIELDS = "nextPageToken,items(name,size,generation,crc32c)"


@dataclass(slots=True)
class _Upload:
    """A composite upload in progress (see ``create_multipart``)."""

    key: str
    options: WriteOptions
    aborted: bool = False


@dataclass(frozen=True, slots=True)
class _Source:
    """A compose source: an object pinned by generation, with its CRC32C and size."""

    name: str
    generation: str
    crc: int
    size: int


class Composer:
    """The composite uploads of one :class:`~synxfer_gcs.GcsBackend`."""

    def __init__(self, backend: GcsBackend) -> None:
        self.b = backend
        self.http = backend.http
        self._uploads: dict[str, _Upload] = {}

    def _prefix(self, upload_id: str) -> str:
        return f"{self.b.composite_prefix}{upload_id}/"

    def _component(self, upload_id: str, number: int) -> str:
        return f"{self._prefix(upload_id)}{number:05d}"

    def _manifest(self, upload_id: str) -> str:
        return f"{self._prefix(upload_id)}manifest"

    # -- the multipart primitives ------------------------------------------------

    async def create(self, key: str, options: WriteOptions) -> MultipartUpload:
        """Allocate an upload id and store its manifest (key, metadata, content type).

        The manifest, beside the components, lets another backend instance
        (a later run resuming the upload) list, complete or abort it.
        """
        self.b._check_writable(key)
        upload_id = secrets.token_hex(16)
        manifest = {
            "key": key,
            "metadata": dict(options.metadata),
            "contentType": content_type(options.content_type),
            **option_fields(options),
        }
        name = self._manifest(upload_id)
        body = json.dumps(manifest, separators=(",", ":")).encode()
        await self.b._upload(
            name, body, {"name": name, "contentType": "application/json"}, None, key=key
        )
        self._uploads[upload_id] = _Upload(key, options)
        return MultipartUpload(key=key, upload_id=upload_id)

    async def _state(self, upload: MultipartUpload, *, fan_out: bool = False) -> _Upload:
        """The upload's state: from memory, else from its manifest on the server.

        With ``fan_out`` (a call the scheduler holds no slot for), reading the
        manifest takes a request slot.
        """
        state = self._uploads.get(upload.upload_id)
        if state is not None and state.key == upload.key:
            return state
        gone = NotFound(
            f"no composite upload {upload.upload_id} in progress (completed or aborted)",
            url=self.b.url(upload.key),
        )
        if not _UPLOAD_ID.match(upload.upload_id):
            raise gone
        slot = self.b.options.requests.slot() if fan_out else contextlib.nullcontext()
        try:
            async with slot:
                data = (await self.b.read(self._manifest(upload.upload_id))).data
        except NotFound as exc:
            if isinstance(exc, BucketNotFound):
                raise
            raise gone from exc
        try:
            manifest = json.loads(data)
            key = manifest["key"]
            # Any: WriteOptions has non-string fields too (digests).
            given: dict[str, Any] = {
                field: str(manifest[name])
                for field, name in OPTION_FIELDS.items()
                if manifest.get(name) is not None
            }
            options = WriteOptions(
                metadata={str(k): str(v) for k, v in manifest["metadata"].items()},
                content_type=str(manifest["contentType"]),
                **given,
            )
        except (ValueError, KeyError, TypeError, AttributeError, ConfigError) as exc:
            raise BackendError(
                f"the manifest of composite upload {upload.upload_id} is damaged",
                url=self.b.url(upload.key),
            ) from exc
        if key != upload.key:
            raise gone
        state = self._uploads[upload.upload_id] = _Upload(key, options)
        return state

    async def list_parts(self, upload: MultipartUpload) -> list[CompletedPart]:
        """The components stored so far, as ``upload_part`` reported them.

        Raises NotFound when the upload was completed or aborted (its manifest
        is gone).
        """
        if not _UPLOAD_ID.match(upload.upload_id):
            raise NotFound(f"no composite upload {upload.upload_id}", url=self.b.url(upload.key))
        prefix = self._prefix(upload.upload_id)
        parts: list[CompletedPart] = []
        manifest = False
        token: str | None = None
        while True:
            items, token = await self.b._list_raw(prefix, token, _PARTS_FIELDS)
            for item in items:
                rest = str(item.get("name", ""))[len(prefix) :]
                if rest == "manifest":
                    manifest = True
                elif rest.isdigit() and item.get("generation") and item.get("crc32c"):
                    etag = f"{item['generation']}:{item['crc32c']}"
                    parts.append(CompletedPart(int(rest), etag, int(item.get("size", 0))))
            if token is None:
                break
        if not manifest:
            raise NotFound(
                f"no composite upload {upload.upload_id} in progress (completed or aborted)",
                url=self.b.url(upload.key),
            )
        return sorted(parts, key=lambda p: p.number)

    async def upload_part(
        self, upload: MultipartUpload, number: int, data: Payload, checksum: Checksum | None
    ) -> CompletedPart:
        """Store part ``number`` as a component object; its etag is ``<generation>:<crc32c>``."""
        state = await self._state(upload)
        if not 1 <= number <= MAX_COMPONENTS:
            raise BackendError(
                f"part number {number} is outside 1..{MAX_COMPONENTS}", url=self.b.url(upload.key)
            )
        name = self._component(upload.upload_id, number)
        doc = await self.b._upload(
            name, data, {"name": name, "contentType": OCTET}, checksum, key=upload.key
        )
        if state.aborted:
            with contextlib.suppress(SynxferError):
                await self.b.delete(name)
            raise BackendError(
                f"composite upload {upload.upload_id} was aborted", url=self.b.url(upload.key)
            )
        generation, crc = doc.get("generation"), doc.get("crc32c")
        if not generation or not crc:
            raise BackendError(
                "the server did not report the component's generation and CRC32C",
                url=self.b.url(upload.key),
            )
        return CompletedPart(number=number, etag=f"{generation}:{crc}", size=len(data))

    async def complete(self, upload: MultipartUpload, parts: Sequence[CompletedPart]) -> ObjectInfo:
        """Compose the parts in number order (see the module docstring)."""
        state = await self._state(upload, fan_out=True)
        keep = False
        try:
            sources = self._sources(upload, parts)
            level = 0
            while len(sources) > MAX_COMPOSE_SOURCES:
                level += 1
                groups = [
                    sources[i : i + MAX_COMPOSE_SOURCES]
                    for i in range(0, len(sources), MAX_COMPOSE_SOURCES)
                ]
                names = [
                    f"{self._prefix(upload.upload_id)}L{level}-{i:04d}" for i in range(len(groups))
                ]

                async def compose(job: tuple[str, list[_Source]]) -> _Source:
                    name, group = job
                    composed, _ = await self._compose(
                        name, group, {"contentType": OCTET}, key=upload.key
                    )
                    return composed

                sources = await bounded_map(compose, zip(names, groups, strict=True), self.b.fanout)
            destination = resource(upload.key, state.options)
            del destination["name"]
            _, doc = await self._compose(upload.key, sources, destination, key=upload.key)
        except TransientError:
            # Keep the components: the RetryLayer's next attempt can complete.
            keep = True
            raise
        finally:
            if not keep:
                self._uploads.pop(upload.upload_id, None)
                await shielded(self._remove_components(upload.upload_id, upload.key))
            else:
                await shielded(self._remove_intermediates(upload.upload_id, upload.key))
        return self.b._info(doc, upload.key)

    async def abort(self, upload: MultipartUpload) -> None:
        """Forget the upload and delete its components (listing them, so strays go too)."""
        state = self._uploads.pop(upload.upload_id, None)
        if state is not None:
            state.aborted = True
        await self._remove_components(upload.upload_id, upload.key, strict=True)

    # -- composing ---------------------------------------------------------------

    def _sources(self, upload: MultipartUpload, parts: Sequence[CompletedPart]) -> list[_Source]:
        if not parts:
            raise BackendError(
                "a composite upload needs at least one part", url=self.b.url(upload.key)
            )
        if len(parts) > MAX_COMPONENTS:
            raise BackendError(
                f"{len(parts)} parts: a composite object has at most {MAX_COMPONENTS}",
                url=self.b.url(upload.key),
            )
        ordered = sorted(parts, key=lambda p: p.number)
        sources = []
        for i, part in enumerate(ordered):
            m = _PART_ETAG.match(part.etag)
            if m is None or (i and ordered[i - 1].number == part.number):
                raise BackendError(
                    f"part {part.number} ({part.etag!r}) is not a part of this upload",
                    url=self.b.url(upload.key),
                )
            name = self._component(upload.upload_id, part.number)
            sources.append(_Source(name, m.group(1), crc32c.decode(m.group(2)), part.size))
        return sources

    async def _compose(
        self, name: str, sources: Sequence[_Source], destination: dict[str, Any], *, key: str
    ) -> tuple[_Source, dict[str, Any]]:
        """Compose ``sources`` into ``name``; check the result's CRC32C.

        Returns the composed object as a source, and its resource. A result
        whose CRC32C is not the combination of the sources' is deleted. Holds
        one request slot (its requests go one after the other).
        """
        body = {
            "destination": destination,
            "sourceObjects": [{"name": s.name, "generation": s.generation} for s in sources],
        }
        path = f"{self.http.objects_path}/{quote(name, safe='')}/compose"
        async with self.b.options.requests.slot():
            response = await self.http.call(
                "POST",
                path,
                key=key,
                what="compose",
                json_body=body,
                params={"projection": "noAcl"},
            )
            doc = self.http.json(response, key)
            expected = crc32c.combine_all((s.crc, s.size) for s in sources)
            size = sum(s.size for s in sources)
            got, generation = doc.get("crc32c"), str(doc.get("generation") or "")
            try:
                actual = crc32c.decode(str(got)) if got else None
            except ValueError:
                actual = None
            if actual != expected or int(doc.get("size", -1)) != size or not generation:
                with contextlib.suppress(SynxferError):
                    await self._delete_generation(name, generation, key)
                raise IntegrityError(
                    f"{self.b.url(key)}: the composed object does not match its parts "
                    f"(crc32c {got} != {crc32c.encode(expected)} or size {doc.get('size')} != "
                    f"{size}); it was deleted"
                )
        return _Source(name, generation, expected, size), doc

    async def _delete_generation(self, name: str, generation: str, key: str) -> None:
        params = {"ifGenerationMatch": generation} if generation else None
        await self.http.request("DELETE", self.http.object_path(name), key=key, params=params)

    # -- cleaning up -------------------------------------------------------------

    async def _remove_components(self, upload_id: str, key: str, strict: bool = False) -> None:
        """Delete every object under the upload's prefix. Best effort unless ``strict``."""
        try:
            names = await self._names(self._prefix(upload_id), key)
            failed = await self._delete_names(names, key)
        except SynxferError as exc:
            if strict:
                raise
            log.warning("could not clean up composite upload %s of %s: %s", upload_id, key, exc)
            return
        if failed:
            first = next(iter(failed.values()))
            if strict:
                raise first
            log.warning(
                "could not delete %d component(s) of composite upload %s of %s: %s",
                len(failed),
                upload_id,
                self.b.url(key),
                first,
            )

    async def _remove_intermediates(self, upload_id: str, key: str) -> None:
        try:
            names = await self._names(f"{self._prefix(upload_id)}L", key)
            await self._delete_names(names, key)
        except SynxferError as exc:
            log.warning("could not clean up composite upload %s of %s: %s", upload_id, key, exc)

    async def _names(self, prefix: str, key: str) -> list[str]:
        """Every object name under ``prefix`` (one request slot; pages one after the other)."""
        names: list[str] = []
        token: str | None = None
        async with self.b.options.requests.slot():
            while True:
                items, token = await self.b._list_raw(prefix, token, "nextPageToken,items(name)")
                names.extend(str(i["name"]) for i in items if "name" in i)
                if token is None:
                    return names

    async def _delete_names(self, names: Sequence[str], key: str) -> dict[str, Exception]:
        """Delete ``names``, :attr:`GcsBackend.fanout` at a time, a request slot each."""
        failed: dict[str, Exception] = {}

        async def one(name: str) -> None:
            try:
                async with self.b.options.requests.slot():
                    response = await self.http.request(
                        "DELETE", self.http.object_path(name), key=key
                    )
                    if response.status not in (200, 204, 404):
                        await self.http.fail(response, key=key, what="delete component")
            except SynxferError as exc:
                failed[name] = exc

        await bounded_map(one, names, self.b.fanout)
        return failed
