"""The ``syn://`` backend: Synapse Projects, Folders and Files on the SDK's URL data plane.

``syn://syn123`` is a Project or Folder (the backend's "bucket");
``syn://syn123/a/b.csv`` is the File entity ``b.csv`` in the Folder ``a``
under it (see :mod:`synxfer_synapse._entities`). Synapse users name files by
id, so ``syn://syn456`` where syn456 is a File is that file, as a one-file
folder holding it under its name (:meth:`SynapseBackend.sole_key` gives the
name to a URL with no key; an upload to it is a new version, as
``synapse store --id``), and ``syn://syn456.2`` is its version 2, read-only
(synapseclient's spelling; ``--version-id`` is
:meth:`~SynapseBackend.at_version`).

The bytes never pass through the service: :class:`SynapseVendor` asks it
for pre-signed URLs and :class:`~synxfer.backend.UrlBackend` (the SDK)
moves the bytes, so the engine's scheduler, byte budget, retries,
verification and journal apply as for any store.

How a file goes up (what synapseclient does, step for step):

1. the engine computes the file's MD5 and every part's in one read, off
   the event loop (``Capabilities.needs_content_md5``);
2. ``POST /file/multipart`` with the name, size, ``contentMD5Hex`` and part
   size -- the same request again (a rerun after an interruption) gets the
   same upload back, with the parts the service holds in ``partsState``;
   those are not sent again (the upload is keyed by the whole file's MD5,
   so they hold these very bytes);
3. part URLs fetched in batches, each part PUT with its ``Content-MD5``,
   then ``PUT /file/multipart/{id}/add/{n}?partMD5Hex=...`` (a part the
   service refuses is a TransientError: the retry layer sends it again);
4. ``PUT /file/multipart/{id}/complete`` gives a file handle, and only then
   is the File entity created -- or its ``dataFileHandleId`` updated with
   ``newVersion=true``, a new version, as synapseclient's store does. An
   upload that fails or is interrupted registers nothing. Metadata is the
   entity's annotations, written in that same call (``bundle2``, see
   :mod:`synxfer_synapse._annotations` and decision 0050).

A file whose MD5 and size equal its entity's current version's is not
uploaded again (synapseclient does the same): a put returns at once, and a
multipart upload sends no part and makes no version; metadata given with it
that the entity lacks is written (one ``PUT .../annotations2``).

How a file comes down: ``stat``/``list_page`` read the entity with its file
handle (``POST /entity/{id}/bundle2``); the handle's MD5 is the object's
``checksums["md5"]``, which the engine checks every download against, and
its ``etag`` (hex), which ``--checksum`` compares with a local file's MD5.
A read asks ``POST /fileHandle/batch`` for the handle's pre-signed URL --
with up to 99 other listed files' (see :meth:`SynapseVendor.download_url`) --
(cached until it expires; fetched again on a 403) and GETs ranges of it.

Options (``--backend-option syn.NAME=VALUE``): ``repo_endpoint``,
``auth_endpoint``, ``file_endpoint``, ``profile``, ``config_file`` (see
:mod:`synxfer_synapse._options`), ``list_concurrency`` (entity reads in
flight within one listing page, default 8).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import datetime as _dt
import json
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar, Final

from synxfer import (
    BackendError,
    BucketNotFound,
    ConfigError,
    GiB,
    ListPage,
    MiB,
    MultipartUpload,
    NotFound,
    ObjectInfo,
    PermissionDenied,
    PreconditionFailed,
    ReadResult,
    TransientError,
    WriteOptions,
)
from synxfer.backend import (
    BackendOptions,
    Capabilities,
    Checksum,
    ContentDigests,
    Payload,
    SignedUrl,
    UploadRequest,
    UrlBackend,
    UrlVendor,
    VendedUpload,
    bounded_map,
)

from ._annotations import annotations_of
from ._core import SynapseRest
from ._entities import Remote, Tree, _md5_b64, entity_kind, parse_time
from ._options import SynapseSettings, load_settings, no_token

__all__ = ["MIN_PART_SIZE", "SynapseBackend", "SynapseVendor"]

#: Synapse's smallest part (but for the last one).
MIN_PART_SIZE: Final = 5 * MiB
#: ``syn123``, or ``syn456.2`` (version 2 of the File syn456, synapseclient's spelling).
_SYN_ID = re.compile(r"^syn(\d+)(?:\.([1-9]\d{0,8}))?$", re.IGNORECASE)
_VERSION = re.compile(r"^[1-9]\d{0,8}$")
_UPLOAD_REQUEST: Final = "org.sagebionetworks.repo.model.file.MultipartUploadRequest"
_AMZ_DATE = re.compile(r"[?&]X-Amz-Date=(\d{8}T\d{6}Z)(?:&|$)")
_AMZ_EXPIRES = re.compile(r"[?&]X-Amz-Expires=(\d+)(?:&|$)")
#: Files per ``POST /fileHandle/batch`` (the limit Synapse documents for its
#: batch file-handle calls).
URL_BATCH: Final = 100
#: Versions per ``GET /entity/{id}/version`` (Synapse defaults to 10).
_VERSION_PAGE: Final = 100
#: URLs kept for downloads that have not asked yet; past this the oldest are dropped.
_PREFETCH_MAX: Final = 4 * URL_BATCH


def _expires(url: str) -> float | None:
    """When a SigV4 pre-signed URL lapses (``X-Amz-Date`` + ``X-Amz-Expires``), if it says.

    Read with two searches rather than ``parse_qs`` and ``strptime``: it runs
    for every URL vended, a part or a download each (a small file's share of
    the client's CPU, see docs/decisions/0048-synapse-upload-requests.md)."""
    date = _AMZ_DATE.search(url)
    seconds = _AMZ_EXPIRES.search(url)
    if date is None or seconds is None:
        return None
    d = date.group(1)
    try:
        start = _dt.datetime(
            int(d[0:4]),
            int(d[4:6]),
            int(d[6:8]),
            int(d[9:11]),
            int(d[11:13]),
            int(d[13:15]),
            tzinfo=_dt.UTC,
        ).timestamp()
    except ValueError:
        return None
    return start + int(seconds.group(1))


@dataclass(slots=True)
class _Pending:
    """What the vendor keeps of one upload (``VendedUpload.state``)."""

    parent: str
    name: str
    size: int
    md5: str
    content_type: str | None
    #: Parts the service holds when the upload starts (``partsState``): not sent again.
    done: set[int] = field(default_factory=set)
    #: The entity holds these bytes already: nothing is sent or registered.
    unchanged: Remote | None = None
    #: The service completed this upload before (the same request): its handle.
    handle: str | None = None
    #: The entity at the key when the upload started (None: there was none).
    entity_id: str | None = None
    #: The annotations the file gets (its metadata's, see ``_annotations``).
    annotations: dict[str, Any] = field(default_factory=dict)


class SynapseVendor(UrlVendor):
    """The Synapse REST calls behind :class:`~synxfer.backend.UrlBackend`."""

    def __init__(self, backend: SynapseBackend) -> None:
        self.backend = backend
        self.rest = backend.rest
        self.tree = backend.tree
        self._remotes: dict[str, Remote] = {}
        self._destinations: dict[str, int | None] = {}
        self.pending: dict[str, _Pending] = {}
        #: Listed keys whose download URLs were not asked for, in listing order.
        self._unasked: dict[str, None] = {}
        #: URLs that came with another key's batch: key -> (handle id, URL).
        self._prefetched: dict[str, tuple[str, SignedUrl]] = {}
        #: Keys in a batch in flight: key -> (handle id, its URL or None).
        self._asking: dict[str, tuple[str, asyncio.Future[SignedUrl | None]]] = {}

    def __repr__(self) -> str:
        return f"<SynapseVendor {self.backend.url()}>"

    def remember(self, key: str, remote: Remote, *, listed: bool = False) -> bool:
        """The version a stat or listing saw: what a download of ``key`` reads.
        True if it replaces another version. ``listed``: a listing saw it, so
        its URL may ride along in another download's URL batch."""
        old = self._remotes.get(key)
        self._remotes[key] = remote
        changed = old is not None and old.handle_id != remote.handle_id
        if changed:
            self._prefetched.pop(key, None)
        if listed:
            self._unasked[key] = None
        return changed

    def remembered(self, key: str) -> Remote | None:
        return self._remotes.get(key)

    def forget(self, key: str) -> None:
        """Drop what was seen of ``key`` (its version was deleted)."""
        self._remotes.pop(key, None)
        self._prefetched.pop(key, None)
        self._unasked.pop(key, None)

    # -- downloads -------------------------------------------------------------------

    async def download_url(self, key: str) -> SignedUrl:
        """The pre-signed URL of ``key``'s remembered version.

        One ``POST /fileHandle/batch`` asks for it together with up to
        ``URL_BATCH - 1`` other listed keys whose URLs were not asked yet (in
        listing order, which is the order downloads start): a sync of many
        small files pays one request per batch, not one per file. Those URLs
        wait here, each with its handle id, until their download asks (an
        expired one, or one of another handle, is asked again); a listing
        alone asks for none.
        """
        url = self.backend.url(key)
        remote = self._remotes.get(key)
        if remote is None:
            remote = await self.backend.remote(key)
            if remote is None:
                raise NotFound(f"no such file in Synapse: {url}", url=url)
            self._remotes[key] = remote
        kept = self._prefetched.pop(key, None)
        if (
            kept is not None
            and kept[0] == remote.handle_id
            and not kept[1].expired(self.backend.expiry_margin)
        ):
            return kept[1]
        asked = self._asking.get(key)
        if asked is not None and asked[0] == remote.handle_id:
            signed = await asyncio.shield(asked[1])
            if signed is not None:
                return signed
            # The other download's batch gave no URL for this key: ask alone,
            # so that its own failure (NOT_FOUND, UNAUTHORIZED) is its own.
        return await self._ask(key, remote, url)

    def _riders(self, key: str) -> list[tuple[str, Remote]]:
        """Listed keys whose URLs nobody asked for yet, to ask along with ``key``'s."""
        self._unasked.pop(key, None)
        riders: list[tuple[str, Remote]] = []
        while self._unasked and len(riders) < URL_BATCH - 1:
            other = next(iter(self._unasked))
            del self._unasked[other]
            remote = self._remotes.get(other)
            if remote is not None and other not in self._asking and other not in self._prefetched:
                riders.append((other, remote))
        return riders

    async def _ask(self, key: str, remote: Remote, url: str) -> SignedUrl:
        batch = [(key, remote), *self._riders(key)]
        loop = asyncio.get_running_loop()
        waits: dict[str, asyncio.Future[SignedUrl | None]] = {}
        for k, r in batch:
            waits[k] = loop.create_future()
            self._asking[k] = (r.handle_id, waits[k])
        results: dict[str, dict[str, Any]] = {}
        try:
            doc = await self.rest.call(
                "POST",
                "file",
                "/fileHandle/batch",
                body={
                    "requestedFiles": [
                        {
                            "fileHandleId": r.handle_id,
                            "associateObjectId": r.entity_id,
                            "associateObjectType": "FileEntity",
                        }
                        for _, r in batch
                    ],
                    "includeFileHandles": False,
                    "includePreSignedURLs": True,
                    "includePreviewPreSignedURLs": False,
                },
                url=url,
                what=f"download URL of {remote.entity_id}",
            )
            answers = doc.get("requestedFiles") if isinstance(doc, dict) else None
            by_handle = {
                str(a.get("fileHandleId")): a
                for a in (answers if isinstance(answers, list) else [])
                if isinstance(a, dict)
            }
            for k, r in batch:
                results[k] = by_handle.get(r.handle_id, {})
            for k, r in batch[1:]:
                signed = results[k].get("preSignedURL")
                if isinstance(signed, str) and signed and not results[k].get("failureCode"):
                    vended = SignedUrl(signed, expires=_expires(signed))
                    self._prefetched[k] = (r.handle_id, vended)
                    if len(self._prefetched) > _PREFETCH_MAX:
                        # The oldest were listed first: files the transfer passed
                        # by (a sync's unchanged ones), whose downloads never ask.
                        del self._prefetched[next(iter(self._prefetched))]
                    waits[k].set_result(vended)
        except BaseException:
            # No answer (a 5xx, a timeout, cancelled): the riders go back to the
            # front of the queue, so that the next ask carries them again rather
            # than each of their downloads asking alone.
            self._unasked = dict.fromkeys(k for k, _ in batch[1:]) | self._unasked
            raise
        finally:
            for k, _ in batch:
                if not waits[k].done():
                    waits[k].set_result(None)  # a waiter asks alone
                if self._asking.get(k, (None, None))[1] is waits[k]:
                    del self._asking[k]
            # The one asked for is returned, not kept: the SDK caches it.
            self._prefetched.pop(key, None)
        result = results.get(key, {})
        failure = result.get("failureCode")
        if failure == "NOT_FOUND":
            self._remotes.pop(key, None)
            raise NotFound(f"file handle {remote.handle_id} of {remote.entity_id} is gone", url=url)
        if failure == "UNAUTHORIZED":
            raise PermissionDenied(
                f"not allowed to download {remote.entity_id}; check your token's scopes "
                "(download) and the entity's sharing settings",
                url=url,
            )
        signed = result.get("preSignedURL")
        if not isinstance(signed, str) or not signed:
            raise BackendError(
                f"the service vended no download URL for {remote.entity_id}", url=url
            )
        return SignedUrl(signed, expires=_expires(signed))

    # -- uploads ---------------------------------------------------------------------

    async def _existing(
        self, key: str, parent: str, name: str, md5: str, size: int
    ) -> tuple[str | None, Remote | None]:
        """``(the entity id at key or None, its current version if it may hold
        these very bytes)``, with as few requests as what is known allows.

        A folder this backend made knows its children (no lookup); a key a
        listing or stat of this run saw names its entity (no lookup). A seen
        version of other content is a new version at once; one that looks the
        same is read again (it may have changed since), as is one never seen.
        A stale id costs nothing wrong: ``register`` looks again when the
        entity is gone or moved, and the PUT carries the entity's etag.
        """
        known, entity_id = self.tree.known(parent, name)
        seen = self._remotes.get(key)
        if not known:
            if seen is not None:
                entity_id = seen.entity_id
            else:
                entity_id = await self.tree.child(parent, name, key)
        if entity_id is None:
            return None, None
        other = seen is not None and (seen.md5, seen.size) != (md5, size)
        if other and seen is not None and seen.entity_id == entity_id:
            return entity_id, None
        return entity_id, await self.tree.bundle(entity_id, key)

    async def start_upload(self, request: UploadRequest) -> VendedUpload:
        key = request.key
        url = self.backend.url(key)
        md5 = request.content_md5
        if md5 is None:
            raise BackendError("a Synapse upload needs the file's MD5 first", url=url)
        # Refused keys fail the file before anything is sent or made.
        annotations = annotations_of(request.options.metadata, url)
        parent_path, _, name = key.rpartition("/")
        parent = await self.tree.folder(parent_path, create=True)
        assert parent is not None
        if self.tree.root_file is not None and key != self.tree.root_file.get("name"):
            raise self.tree.under_file(key)
        content_type = request.options.content_type
        # Same content as the entity's current version: nothing to send or register.
        entity_id, existing = await self._existing(key, parent, name, md5, request.size)
        part_size = max(request.part_size, MIN_PART_SIZE)
        parts = max(1, -(-request.size // part_size))
        if existing is not None and existing.md5 == md5 and existing.size == request.size:
            state = _Pending(parent, name, request.size, md5, content_type, unchanged=existing)
            state.annotations = annotations
            state.done = set(range(1, parts + 1))
            upload_id = f"unchanged-{existing.entity_id}-{md5}"
            self.pending[upload_id] = state
            return self._vended(key, upload_id, part_size, state)
        body: dict[str, Any] = {
            "concreteType": _UPLOAD_REQUEST,
            "contentType": content_type or "application/octet-stream",
            "contentMD5Hex": md5,
            "fileName": name,
            "fileSizeBytes": request.size,
            "generatePreview": False,
            "partSizeBytes": part_size,
            "storageLocationId": await self.tree.destination(parent, key),
        }
        doc = await self.rest.call(
            "POST", "file", "/file/multipart", body=body, url=url, what="start upload"
        )
        if not isinstance(doc, dict) or not doc.get("uploadId"):
            raise BackendError("the service started no upload", url=url)
        state = _Pending(parent, name, request.size, md5, content_type, entity_id=entity_id)
        state.annotations = annotations
        parts_state = str(doc.get("partsState") or "")
        state.done = {i for i, c in enumerate(parts_state, 1) if c == "1"}
        if doc.get("state") == "COMPLETED" and doc.get("resultFileHandleId"):
            state.handle = str(doc["resultFileHandleId"])
            state.done = set(range(1, parts + 1))
        upload_id = str(doc["uploadId"])
        self.pending[upload_id] = state
        return self._vended(key, upload_id, part_size, state)

    @staticmethod
    def _vended(key: str, upload_id: str, part_size: int, state: _Pending) -> VendedUpload:
        # Synapse keys an upload by the whole file's MD5: a part it holds is
        # this content's, though partsState gives no part MD5s.
        done = dict.fromkeys(sorted(state.done), "")
        return VendedUpload(
            key, upload_id, part_size, done_parts=done, state=state, content_pinned=True
        )

    async def upload_urls(
        self, upload: VendedUpload, numbers: Sequence[int]
    ) -> Mapping[int, SignedUrl]:
        doc = await self.rest.call(
            "POST",
            "file",
            f"/file/multipart/{upload.upload_id}/presigned/url/batch",
            body={"uploadId": upload.upload_id, "partNumbers": list(numbers)},
            url=self.backend.url(upload.key),
            what="part URLs",
        )
        out: dict[int, SignedUrl] = {}
        for item in (doc.get("partPresignedUrls") if isinstance(doc, dict) else None) or []:
            if not isinstance(item, dict):
                continue
            signed = str(item.get("uploadPresignedUrl") or "")
            number = item.get("partNumber")
            if signed and isinstance(number, int):
                headers = item.get("signedHeaders") or {}
                out[number] = SignedUrl(
                    signed,
                    headers={str(k): str(v) for k, v in headers.items()},
                    expires=_expires(signed),
                )
        return out

    async def part_done(self, upload: VendedUpload, number: int, md5_hex: str) -> None:
        url = self.backend.url(upload.key)
        doc = await self.rest.call(
            "PUT",
            "file",
            f"/file/multipart/{upload.upload_id}/add/{number}",
            params={"partMD5Hex": md5_hex},
            url=url,
            what=f"add part {number}",
        )
        state = doc.get("addPartState") if isinstance(doc, dict) else None
        if state != "ADD_SUCCESS":
            message = doc.get("errorMessage") if isinstance(doc, dict) else None
            # The bytes stored are not the bytes hashed: sending the part again
            # is the cure (the retry layer does it), as for a damaged body.
            raise TransientError(
                f"the Synapse service refused part {number} ({state or 'no answer'}"
                + (f": {message}" if message else "")
                + "): the bytes it stored are not the bytes hashed; the part is sent "
                "again while retries last",
                url=url,
            )

    async def complete(self, upload: VendedUpload) -> ObjectInfo:
        url = self.backend.url(upload.key)
        state = self.pending.get(upload.upload_id)
        if state is None:
            raise NotFound(f"upload {upload.upload_id} is not known here", url=url)
        if state.unchanged is not None:
            # The same bytes: no version, but metadata given is written (as
            # an S3 cp of the same object rewrites its metadata).
            remote = state.unchanged
            if state.annotations:
                remote = await self.tree.annotate(remote, upload.key, state.annotations)
                self._remotes[upload.key] = remote
            self.pending.pop(upload.upload_id, None)
            return remote.info(upload.key)
        handle = state.handle
        if handle is None:
            doc = await self.rest.call(
                "PUT",
                "file",
                f"/file/multipart/{upload.upload_id}/complete",
                url=url,
                what="complete upload",
            )
            if not isinstance(doc, dict) or doc.get("state") != "COMPLETED":
                got = doc.get("state") if isinstance(doc, dict) else None
                raise TransientError(
                    f"the upload did not complete (state {got!r}); it is tried again", url=url
                )
            handle = state.handle = str(doc.get("resultFileHandleId") or "")
            if not handle:
                raise BackendError("the service completed the upload with no file handle", url=url)
        remote = await self.tree.register(
            state.parent,
            state.name,
            upload.key,
            handle,
            state.size,
            state.md5,
            state.content_type,
            hint=state.entity_id,
            hinted=True,
            annotations=state.annotations,
        )
        self.pending.pop(upload.upload_id, None)
        self._remotes[upload.key] = remote
        return remote.info(upload.key)

    async def abort(self, upload: VendedUpload) -> None:
        # Synapse has no abort: an unfinished upload lapses on the service, and
        # no File entity points at it. A rerun with the same file resumes it.
        self.pending.pop(upload.upload_id, None)


class SynapseBackend(UrlBackend):
    """``syn://synNNN/path``: Synapse through its REST API and pre-signed URLs.

    See the module docstring.
    """

    scheme: ClassVar[str] = "syn"
    capabilities = Capabilities(
        multipart=True,
        min_part_size=MIN_PART_SIZE,
        max_part_size=5 * GiB,
        max_parts=10_000,
        max_single_put=5 * GiB,
        ranged_reads=True,
        server_side_copy=False,
        metadata=True,
        batch_delete=False,
        part_checksum="md5",
        list_parts=False,
        needs_content_md5=True,
        # Entity reads of a listing page (and their version lists) run side
        # by side, a slot each.
        fan_out=frozenset({"list_page", "list_versions_page"}),
        # Metadata: the File entity's annotations (see ``_annotations``).
        write_options=frozenset({"content_type", "metadata"}),
    )

    def __init__(self, bucket: str, options: BackendOptions) -> None:
        match = _SYN_ID.match(bucket)
        if match is None:
            raise ConfigError(
                "syn:// needs a Synapse id: syn://syn123/path under a Project or Folder, "
                f"syn://syn456 for a File, syn://syn456.2 for its version 2 (got {bucket!r})"
            )
        root, number = f"syn{match.group(1)}", match.group(2)
        super().__init__(f"{root}.{number}" if number else root, options)
        #: The File version every read and delete addresses (``syn://syn456.2``,
        #: or a view's, :meth:`at_version`); None: the current one.
        self.version: int | None = int(number) if number else None
        self._view = False
        self.settings: SynapseSettings = load_settings(options)
        self.rest = SynapseRest(self.settings, lambda: self.http)
        self.tree = Tree(self.rest, root, self.url, pinned=number is not None)
        self.syn = SynapseVendor(self)
        self.vendor = self.syn
        self.list_concurrency = self.settings.list_concurrency

    @classmethod
    def transfer_defaults(cls, options: BackendOptions) -> Mapping[str, int]:
        """``[transfer] max_threads`` of ~/.synapseConfig, as synapseclient takes it."""
        threads = load_settings(options).max_threads
        return {} if threads is None else {"max_threads": threads}

    def __repr__(self) -> str:
        parts = urllib.parse.urlsplit(self.settings.repo_endpoint)
        return f"<SynapseBackend {self.url()} via {parts.scheme}://{parts.netloc}>"

    async def open(self) -> None:
        if self.settings.token is None:
            raise no_token(self.settings, self.url())

    async def aclose(self) -> None:
        if not self._view:  # a version view's connections are its backend's
            await super().aclose()

    async def sole_key(self) -> str | None:
        """``syn://syn456`` where syn456 is a File names that file: its key is
        its name (``syn://syn456/NAME``), as ``synapse get syn456`` saves it."""
        await self.tree.folder("", create=False)  # the layers hold a slot for the call
        name = self.tree.root_file.get("name") if self.tree.root_file else None
        return str(name) if name else None

    async def remote(self, key: str) -> Remote | None:
        """The File entity at ``key`` at this backend's version (the current
        one unless :attr:`version`); None when there is none."""
        if self.version is None:
            return await self.tree.remote(key)
        _, entity_id = await self.tree.lookup(key)
        if entity_id is None:
            return None
        return await self.tree.bundle(entity_id, key, self.version)

    # -- versions: a File entity's version numbers ---------------------------------

    def at_version(self, version_id: str) -> SynapseBackend:
        """A view whose reads and deletes address version ``version_id`` (a
        number, as ``ls --all-versions`` lists them) of the File at a key:
        ``POST /entity/{id}/version/{n}/bundle2``, that version's handle's
        URL and MD5, ``DELETE /entity/{id}/version/{n}``. It shares this
        backend's connections and entity lookups, not its cached URLs."""
        if not _VERSION.match(version_id):
            raise ConfigError(
                f"--version-id / version_id={version_id!r} for {self.url()}: a Synapse "
                "version is a number (1, 2, ...); synxfer ls --all-versions URL lists them"
            )
        view = copy.copy(self)
        view.version = int(version_id)
        view._view = True
        view._downloads, view._fetching, view._pins, view._uploads = {}, {}, {}, {}
        view.syn = SynapseVendor(view)
        view.vendor = view.syn
        return view

    async def list_versions_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        """Every version of the files one :meth:`list_page` lists, newest first
        within a file: ``GET /entity/{id}/version`` (Synapse's VersionInfo,
        newest first) page by page, per file."""
        page = await self.list_page(prefix, cursor)
        per_file = await bounded_map(self._versions_of, page.items, self.list_concurrency)
        return ListPage([item for items in per_file for item in items], page.cursor)

    async def _versions_of(self, info: ObjectInfo) -> list[ObjectInfo]:
        remote = self.syn.remembered(info.key)
        if remote is None:
            return []
        return await self._entity_versions(remote.entity_id, info.key)

    async def _entity_versions(
        self, entity_id: str, key: str, *, slot: bool = True
    ) -> list[ObjectInfo]:
        """Every version of the File ``entity_id`` (at ``key``), newest first;
        a request slot each unless the caller holds one (``slot=False``)."""
        out: list[ObjectInfo] = []
        offset = 0
        while True:
            async with self.options.requests.slot() if slot else contextlib.nullcontext():
                doc = await self.rest.call(
                    "GET",
                    "repo",
                    f"/entity/{entity_id}/version",
                    params={"offset": str(offset), "limit": str(_VERSION_PAGE)},
                    url=self.url(key),
                    what=f"versions of {entity_id}",
                )
            results = doc.get("results") if isinstance(doc, dict) else None
            results = [r for r in results or [] if isinstance(r, dict)]
            for r in results:
                number = r.get("versionNumber")
                if not isinstance(number, int):
                    continue
                md5 = str(r.get("contentMd5") or "").lower() or None
                size = r.get("contentSize")
                b64 = _md5_b64(md5)
                out.append(
                    ObjectInfo(
                        key=key,
                        size=int(size) if str(size).isdigit() else 0,
                        mtime=parse_time(r.get("modifiedOn")),
                        etag=md5 if b64 else None,
                        checksums=MappingProxyType({"md5": b64} if b64 else {}),
                        version_id=str(number),
                        is_latest=bool(r.get("isLatestVersion")),
                    )
                )
            # Synapse's totalNumberOfResults is not the total: a short page is the last.
            if len(results) < _VERSION_PAGE:
                break
            offset += len(results)
        out.sort(key=lambda i: -int(i.version_id or 0))
        return out

    async def delete_versions(
        self, items: Sequence[tuple[str, str]]
    ) -> Mapping[tuple[str, str], Exception]:
        """``rm --all-versions``: the versions of each key, one ``DELETE
        /entity/{id}/version/{n}`` each; when they are all of the File's
        versions (its list read once), one ``DELETE /entity/{id}`` instead:
        Synapse keeps a File's last version, and deleting the File is what
        deleting every version means (it goes to the trash can)."""
        failed: dict[tuple[str, str], Exception] = {}
        by_key: dict[str, list[str]] = {}
        for key, vid in items:
            by_key.setdefault(key, []).append(vid)
        for key, vids in by_key.items():
            try:
                _, entity_id = await self.tree.lookup(key)
                if entity_id is None:
                    continue  # gone already: no failure
                listed = await self._entity_versions(entity_id, key, slot=False)
                have = {i.version_id for i in listed}
                if have <= set(vids):
                    await self.rest.call(
                        "DELETE",
                        "repo",
                        f"/entity/{entity_id}",
                        url=self.url(key),
                        what=f"delete {entity_id}",
                        ok=(200, 204),
                        missing_ok=True,
                    )
                    self.syn.forget(key)
                    self.forget_url(key)
                    continue
            except BackendError as exc:
                failed.update(dict.fromkeys(((key, v) for v in vids), exc))
                continue
            for vid in vids:
                if vid not in have:
                    continue  # gone already
                try:
                    await self.at_version(vid).delete(key)
                except (BackendError, ConfigError) as exc:
                    failed[(key, vid)] = exc
        return failed

    def _check_key(self, key: str) -> None:
        if self.version is not None:
            name = self.tree.root.removeprefix("syn")
            raise BackendError(
                f"{self.url(key)} names version {self.version} of syn{name}, which cannot "
                f"change; an upload makes a new version: write to syn://syn{name}",
                url=self.url(key),
            )
        if not key or key.endswith("/") or key.startswith("/") or "//" in key:
            raise BackendError(f"not a file path under {self.url()}: {key!r}", url=self.url(key))
        if any(p in (".", "..") for p in key.split("/")):
            raise BackendError(f"'.' and '..' cannot be entity names: {key!r}", url=self.url(key))

    async def stat(self, key: str) -> ObjectInfo:
        if not key or key.endswith("/"):
            raise NotFound(f"{self.url(key)} is not a file", url=self.url(key))
        remote = await self.remote(key)
        if remote is None:
            raise NotFound(f"no such file in Synapse: {self.url(key)}", url=self.url(key))
        if self.syn.remember(key, remote):
            self.forget_url(key)
        return remote.info(key, versioned=self.version is not None)

    async def list_page(self, prefix: str, cursor: str | None = None) -> ListPage:
        """One children page of one folder (depth first; the folders still to
        list, with their page tokens, are the cursor).

        The cursor is the queue of folders still to list, each with the
        service's page token. Files are read with their handles a few at a
        time (``list_concurrency``), each a slot of ``options.requests``.
        """
        if cursor:
            queue: list[list[Any]] = json.loads(cursor)["q"]
        else:
            base, _, start = prefix.rpartition("/")
            async with self.options.requests.slot():
                folder = await self.tree.folder(base, create=False)
            if folder is None:
                return ListPage([], None)
            if self.tree.root_file is not None:
                return await self._list_root_file(prefix)
            queue = [[folder, f"{base}/" if base else "", None, start]]
        items: list[ObjectInfo] = []
        while queue and not items:
            folder_id, path, token, start = queue[0]
            body: dict[str, Any] = {
                "parentId": folder_id,
                "includeTypes": ["folder", "file"],
                "sortBy": "NAME",
                "sortDirection": "ASC",
            }
            if token:
                body["nextPageToken"] = token
            try:
                async with self.options.requests.slot():
                    doc = await self.rest.call(
                        "POST",
                        "repo",
                        "/entity/children",
                        body=body,
                        url=self.url(path),
                        what="list children",
                    )
            except NotFound:
                if folder_id == self.tree.root:
                    raise BucketNotFound(
                        f"{self.url()} does not exist (no Project or Folder {self.tree.root})",
                        url=self.url(),
                        status=404,
                    ) from None
                raise
            doc = doc if isinstance(doc, dict) else {}
            following = doc.get("nextPageToken")
            queue.pop(0)
            files: list[tuple[str, str]] = []
            folders: list[list[Any]] = []
            for child in doc.get("page") or []:
                name = str(child.get("name", ""))
                if not name.startswith(start):
                    continue
                kind = entity_kind(str(child.get("type", "")))
                if kind == "folder":
                    folders.append([str(child["id"]), f"{path}{name}/", None, ""])
                elif kind == "file":
                    files.append((str(child["id"]), path + name))
            if not start:  # every child: uploads into this folder need no lookup
                page = {str(c.get("name", "")): str(c["id"]) for c in doc.get("page") or []}
                self.tree.listed(folder_id, page, first=not token, last=not following)
            # Depth first: everything under a folder comes before its siblings,
            # so the keys under any directory are listed together (ls folds them).
            rest = [[folder_id, path, following, start]] if following else []
            queue[0:0] = rest + folders
            for key, remote in await bounded_map(self._read_file, files, self.list_concurrency):
                if remote is not None:
                    self.syn.remember(key, remote, listed=True)
                    items.append(remote.info(key))
        items.sort(key=lambda i: i.key)
        return ListPage(items, json.dumps({"q": queue}) if queue else None)

    async def _list_root_file(self, prefix: str) -> ListPage:
        """``syn://syn456`` (a File) lists that file, under its name."""
        name = str((self.tree.root_file or {}).get("name", ""))
        if not name.startswith(prefix):
            return ListPage([], None)
        async with self.options.requests.slot():
            remote = await self.remote(name)
        if remote is None:
            return ListPage([], None)
        self.syn.remember(name, remote)
        return ListPage([remote.info(name, versioned=self.version is not None)], None)

    async def _read_file(self, item: tuple[str, str]) -> tuple[str, Remote | None]:
        """``(key, its File entity)`` of a listed ``(entity id, key)``; a request slot each."""
        async with self.options.requests.slot():
            return item[1], await self.tree.bundle(item[0], item[1])

    async def _pinned(self, key: str, if_match: str | None) -> Remote:
        """The version a read of ``key`` gets: the one last seen, or the current
        one; with ``if_match`` (an ``etag``), PreconditionFailed unless the
        current content has that tag."""
        remote = self.syn.remembered(key)
        if remote is None or (if_match is not None and remote.info(key).etag != if_match):
            remote = await self.remote(key)
            if remote is None:
                raise NotFound(f"no such file in Synapse: {self.url(key)}", url=self.url(key))
            if self.syn.remember(key, remote):
                # Another version: the cached URL is the old handle's.
                self.forget_url(key)
        if if_match is not None and remote.info(key).etag != if_match:
            raise PreconditionFailed(
                f"{self.url(key)} changed (a new version) while it was being read",
                url=self.url(key),
            )
        return remote

    async def read_into(
        self,
        key: str,
        offset: int,
        buf: memoryview,
        *,
        if_match: str | None = None,
        whole: bool = False,
    ) -> ObjectInfo:
        """Ranged GETs of the handle's pre-signed URL (the SDK's); the info is
        the entity's (size, MD5), which the engine verifies the bytes against."""
        remote = await self._pinned(key, if_match)
        info = remote.info(key)
        await super().read_into(key, offset, buf, if_match=info.etag, whole=whole)
        return info

    async def read(
        self,
        key: str,
        offset: int = 0,
        length: int | None = None,
        *,
        if_match: str | None = None,
    ) -> ReadResult:
        remote = await self._pinned(key, if_match)
        if length is None:
            length = max(0, remote.size - offset)
        length = min(length, max(0, remote.size - offset))
        buf = bytearray(length)
        info = await self.read_into(key, offset, memoryview(buf), if_match=if_match)
        return ReadResult(bytes(buf), info)

    async def delete(self, key: str) -> None:
        """Delete the File entity at ``key`` (Synapse keeps it in the trash
        can); with a :attr:`version`, that version only (``DELETE
        /entity/{id}/version/{n}``: Synapse refuses to delete the only one,
        and its message is the error)."""
        if not key or key.endswith("/"):
            return
        _, entity_id = await self.tree.lookup(key)
        if entity_id is None:
            return
        if self.version is not None:
            await self.rest.call(
                "DELETE",
                "repo",
                f"/entity/{entity_id}/version/{self.version}",
                url=self.url(key),
                what=f"delete version {self.version} of {entity_id}",
                ok=(200, 204),
            )
            self.syn.forget(key)
            self.forget_url(key)
            return
        entity = await self.tree.entity(entity_id, key)
        kind = entity_kind(str(entity.get("concreteType", "")))
        if kind != "file":
            raise BackendError(
                f"{self.url(key)} is a {kind} entity ({entity_id}); only files are deleted here",
                url=self.url(key),
            )
        await self.rest.call(
            "DELETE",
            "repo",
            f"/entity/{entity_id}",
            url=self.url(key),
            what=f"delete {entity_id}",
            ok=(200, 204),  # an empty answer (the local service says 204)
            missing_ok=True,
        )

    # -- uploads: the parts the service holds are not sent again --------------------

    async def put(
        self,
        key: str,
        data: Payload,
        options: WriteOptions,
        checksum: Checksum | None = None,
    ) -> ObjectInfo:
        """A one-part upload: start (or resume), one part, complete, register."""
        self._check_key(key)
        md5 = await self._md5_hex(data, checksum)  # the SDK's: the engine's MD5, else a thread
        size = len(data)
        digests = ContentDigests(size, max(size, MIN_PART_SIZE), md5, (md5,))
        upload = await self.create_multipart(key, replace(options, digests=digests))
        try:
            part = await self.upload_part(upload, 1, data, Checksum("md5", _b64(md5)))
            return await self.complete_multipart(upload, [part])
        except BaseException:
            await self.abort_multipart(upload)
            raise

    async def create_multipart(self, key: str, options: WriteOptions) -> MultipartUpload:
        self._check_key(key)
        if options.digests is None:
            # The engine computes them for local files only (it reads them twice);
            # a copy from another store has no MD5 to give before its bytes.
            raise BackendError(
                "Synapse needs a file's MD5 before its upload starts, which a copy from "
                "another store cannot give for a file this large; download it first, then "
                "upload the local copy (synxfer cp SRC ./tmp && synxfer cp ./tmp "
                f"{self.url(key)})",
                url=self.url(key),
            )
        return await super().create_multipart(key, options)


def _b64(md5_hex: str) -> str:
    return base64.b64encode(bytes.fromhex(md5_hex)).decode("ascii")
