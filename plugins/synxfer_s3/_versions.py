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
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from synxfer import BackendError, ListPage, ObjectInfo

from ._wire import XmlError, parse_list_object_versions

if TYPE_CHECKING:
    from ._backend import S3Backend

__all__ = ["list_versions_page", "version_view"]


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
