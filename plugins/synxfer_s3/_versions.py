"""Object versions on S3: the version view and ListObjectVersions.

A version is addressed by S3's ``versionId`` query parameter on HEAD, GET
(ranged too) and DELETE. :func:`version_view` gives a shallow copy of an
open :class:`~._backend.S3Backend` whose every read and delete carries that
parameter, so the engine's download (HEAD, ranged GETs, ``partNumber``
HEADs) and the client's delete address the one version and nothing else.
The view shares its backend's connections and never closes them, and it
reports no copy scope: a copy of a version streams through the client
(pinned on every read and verified) instead of a server-side copy of
whatever is current.

``rm --all-versions`` deletes versions and delete markers in DeleteObjects
batches naming each ``VersionId`` (:func:`delete_versions`).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from synxfer import BackendError, ListPage, NotFound, ObjectInfo

from ._classify import classify
from ._wire import S3_NS, XmlError, _escape, _root, _text, b64md5, parse_list_object_versions

if TYPE_CHECKING:
    from ._backend import S3Backend

__all__ = ["delete_versions", "list_versions_page", "version_view"]


def version_view(backend: S3Backend, version_id: str) -> S3Backend:
    """``backend``'s view of version ``version_id`` (see the module docstring)."""
    view = copy.copy(backend)
    view._version_id = version_id
    return view


def _markers(cursor: str | None) -> tuple[str | None, str | None]:
    """The key and version-id markers a cursor of ours carries."""
    if cursor is None:
        return None, None
    import json  # a version listing's; a plain download imports none of it (test_cli)

    key, version = json.loads(cursor)
    return key, version


async def list_versions_page(backend: S3Backend, prefix: str, cursor: str | None) -> ListPage:
    """One ListObjectVersions page: versions and delete markers under ``prefix``.

    S3 pages it by two markers (key and version id); the cursor carries both
    (JSON), so :class:`~synxfer.backend.CursorGuard` sees one string per page.
    A server that does not keep versions lists each object once, as version
    ``null`` (S3's own answer for an unversioned bucket). Within a page,
    items are in key order with the current version first, whatever order
    the server sent them in.
    """
    key_marker, version_marker = _markers(cursor)
    query: list[tuple[str, str | None]] = [("versions", None), ("encoding-type", "url")]
    if prefix:
        query.append(("prefix", prefix))
    if key_marker:
        query.append(("key-marker", key_marker))
    if version_marker:
        query.append(("version-id-marker", version_marker))
    query.append(("max-keys", str(backend.list_page_size)))
    wire = backend.wire
    response = await wire._request("ListObjectVersions", "GET", backend.bucket, None, query=query)
    try:
        page = parse_list_object_versions(response.body)
    except XmlError as exc:
        raise wire._bad_xml("ListObjectVersions", exc, backend.bucket, prefix) from None
    # Key order, the current version first: stock moto lists a page's delete
    # markers after all its versions (S3 interleaves them by key).
    listed = sorted(page.versions, key=lambda v: (v.key, not v.is_latest))
    items = [
        ObjectInfo(
            key=v.key,
            size=v.size,
            mtime=v.mtime,
            etag=v.etag,
            version_id=v.version_id,
            is_latest=v.is_latest,
            delete_marker=v.delete_marker,
        )
        for v in listed
    ]
    if not page.truncated:
        return ListPage(items, None)
    if page.next_key_marker is None:
        raise BackendError(
            "version listing is truncated but the server sent no NextKeyMarker",
            url=backend.url(prefix),
        )
    import json

    return ListPage(items, json.dumps([page.next_key_marker, page.next_version_marker]))


def _delete_body(items: Sequence[tuple[str, str]]) -> bytes:
    """A quiet DeleteObjects body naming each ``(key, version id)``."""
    objects = "".join(
        f"<Object><Key>{_escape(key, 'key')}</Key>"
        f"<VersionId>{_escape(vid, 'version id')}</VersionId></Object>"
        for key, vid in items
    )
    return f'<Delete xmlns="{S3_NS}"><Quiet>true</Quiet>{objects}</Delete>'.encode()


def _errors(data: bytes | bytearray | memoryview) -> list[tuple[str, str, str, str]]:
    """``(key, version id, code, message)`` of each ``<Error>`` of a DeleteResult."""
    root, ns = _root(data)
    return [
        (
            _text(err, ns + "Key") or "",
            _text(err, ns + "VersionId") or "",
            _text(err, ns + "Code") or "Unknown",
            _text(err, ns + "Message") or "",
        )
        for err in root.iter(ns + "Error")
    ]


async def delete_versions(
    backend: S3Backend, items: Sequence[tuple[str, str]]
) -> Mapping[tuple[str, str], Exception]:
    """Delete each ``(key, version id)``: DeleteObjects in batches of
    :attr:`~._backend.S3Backend.delete_batch_size`, each object with its
    ``VersionId`` (a delete marker's id removes the marker). Per-version
    failures are returned (a version already gone is none); a failure of a
    whole request is raised, safe to retry: deleting is idempotent."""
    wire = backend.wire
    failed: dict[tuple[str, str], Exception] = {}
    for start in range(0, len(items), backend.delete_batch_size):
        batch = items[start : start + backend.delete_batch_size]
        try:
            body = _delete_body(batch)
        except ValueError as exc:
            raise BackendError(f"DeleteObjects: {exc}", url=backend.url()) from None
        md5 = await asyncio.to_thread(b64md5, body)
        response = await wire._request(
            "DeleteObjects",
            "POST",
            backend.bucket,
            None,
            query=(("delete", None),),
            headers={"content-md5": md5},
            body=body,
        )
        try:
            errors = _errors(response.body)
        except XmlError as exc:
            raise wire._bad_xml("DeleteObjects", exc, backend.bucket) from None
        for key, vid, code, message in errors:
            cls = classify(code, None)
            if cls is NotFound:
                continue
            msg = f"{code} on DeleteObjects (version {vid}): {message}".rstrip(": ")
            failed[(key, vid)] = cls(msg, url=backend.url(key))
    return failed
