"""Keys <-> Synapse entities: Folders by name under the container, File entities and their handles.

``syn://syn123/a/b/c.csv`` is the File entity named ``c.csv`` in the Folder
``b`` in the Folder ``a`` in the Project (or Folder) ``syn123``. Names are
looked up with ``POST /entity/child`` (what synapseclient's ``get_child``
does); folder ids are cached for the backend's life (a folder's id never
changes), files are looked up each time they are asked for (they get new
versions). Folders are created on demand, once even when many uploads
into one folder start together (one lock per folder path).

A folder this backend created holds only what it put there (or what a
concurrent writer did, which a create's 409 reveals), and one a listing
read whole holds what it saw (likewise), so an upload into it needs no
lookup: :meth:`Tree.known` answers from what was registered,
and a new file is one ``POST /entity``.

A File entity's bytes are its current version's file handle: size,
``contentMd5`` (hex), content type, and the entity's ``modifiedOn``. Its
:class:`~synxfer.ObjectInfo` carries the MD5 as ``checksums["md5"]``
(base64), so the engine verifies downloads against it, and as the
``etag`` (hex), so ``--checksum`` compares it with a local file's MD5 and
a read pinned to it fails if the content changed. Its annotations, read in
the same ``bundle2`` request, are its ``metadata`` (:mod:`._annotations`).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as _dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final

from synxfer import BackendError, BucketNotFound, NotFound, ObjectInfo, TransientError

from ._annotations import is_subset, metadata_of
from ._core import Conflict, SynapseRest

__all__ = ["FILE", "FOLDER", "Remote", "Tree", "entity_kind", "parse_time"]

FILE: Final = "org.sagebionetworks.repo.model.FileEntity"
FOLDER: Final = "org.sagebionetworks.repo.model.Folder"
PROJECT: Final = "org.sagebionetworks.repo.model.Project"


def entity_kind(concrete_type: str) -> str:
    """``file``, ``folder``, ``project`` or the type's last word, lower-cased."""
    name = concrete_type.rsplit(".", 1)[-1].lower()
    return "file" if name == "fileentity" else name


def parse_time(value: object) -> float | None:
    """Synapse's ISO-8601 times (``2024-05-01T12:00:00.000Z``) as epoch seconds."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return when.timestamp()


def _md5_b64(hex_md5: str | None) -> str | None:
    if not hex_md5:
        return None
    try:
        raw = bytes.fromhex(hex_md5)
    except ValueError:
        return None
    return base64.b64encode(raw).decode("ascii") if len(raw) == 16 else None


@dataclass(frozen=True, slots=True)
class Remote:
    """A File entity's current version, as the backend needs it."""

    entity_id: str
    handle_id: str
    size: int
    md5: str | None  # hex
    modified: float | None
    content_type: str | None = None
    version: int | None = None
    #: The version's annotations (Synapse's map), None when not read with it.
    annotations: Mapping[str, Any] | None = None
    #: The entity's etag as last read (an annotations update must name it).
    etag: str | None = None

    def info(self, key: str, *, versioned: bool = False) -> ObjectInfo:
        """The object ``key`` is; ``versioned``: it carries its version number
        as ``version_id`` (a version view's, as S3's HEAD of a version)."""
        b64 = _md5_b64(self.md5)
        return ObjectInfo(
            key=key,
            size=self.size,
            mtime=self.modified,
            etag=self.md5 if b64 else f"fh{self.handle_id}",
            content_type=self.content_type,
            checksums=MappingProxyType({"md5": b64}) if b64 else MappingProxyType({}),
            metadata=MappingProxyType(metadata_of(self.annotations)),
            version_id=str(self.version) if versioned and self.version is not None else None,
        )


def remote_from(
    entity: Mapping[str, Any],
    handle: Mapping[str, Any] | None,
    annotations: Mapping[str, Any] | None = None,
) -> Remote:
    """A Remote from an entity, its file handle (size 0, no MD5 if the handle
    is absent) and its Annotations (``{"id", "etag", "annotations"}``) if read."""
    handle = handle or {}
    version = entity.get("versionNumber")
    size = handle.get("contentSize")
    found = annotations.get("annotations") if isinstance(annotations, Mapping) else None
    etag = annotations.get("etag") if isinstance(annotations, Mapping) else None
    return Remote(
        entity_id=str(entity["id"]),
        handle_id=str(entity.get("dataFileHandleId") or handle.get("id") or ""),
        size=int(size) if isinstance(size, int | str) and str(size).isdigit() else 0,
        md5=str(handle["contentMd5"]).lower() if handle.get("contentMd5") else None,
        modified=parse_time(entity.get("modifiedOn")),
        content_type=str(handle["contentType"]) if handle.get("contentType") else None,
        version=int(version) if isinstance(version, int) else None,
        annotations=dict(found) if isinstance(found, Mapping) else None,
        etag=str(etag or entity.get("etag") or "") or None,
    )


class Tree:
    """The container's folders by path (cached) and the entities under them.

    ``url(key)`` names a key in messages (``syn://syn123/key``).
    """

    def __init__(
        self, rest: SynapseRest, root: str, url: Callable[[str], str], *, pinned: bool = False
    ) -> None:
        self.rest = rest
        self.root = root
        self.url = url
        #: The URL names one version of ``root`` (``syn://syn456.2``): a File.
        self.pinned = pinned
        #: The File entity ``root`` is, when it is one (``syn://syn456``), once
        #: looked at: its one key is its name, and its folder is the root folder.
        self.root_file: dict[str, Any] | None = None
        self._folders: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        #: Folders whose every child this Tree knows, by name: those it created
        #: (and what it made there) and those a listing read whole. Another
        #: writer's child since is found by the 409 a create then gets.
        self._made: dict[str, dict[str, str]] = {}
        #: Folder paths a lookup found missing (not cached as found ones are).
        self._absent: set[str] = set()
        #: Folders a listing is reading, from their first page on.
        self._listing: dict[str, dict[str, str]] = {}
        self._destinations: dict[str, int | None] = {}

    def known(self, parent_id: str, name: str) -> tuple[bool, str | None]:
        """``(True, the id of name in parent_id or None)`` when this Tree made
        the folder or listed it whole, and so knows its children without
        asking; else ``(False, None)``."""
        children = self._made.get(parent_id)
        if children is None:
            return False, None
        return True, children.get(name)

    def listed(self, folder_id: str, page: Mapping[str, str], *, first: bool, last: bool) -> None:
        """One page of ``folder_id``'s children (name -> id) from a listing of
        them all; after its last page (read from the first here) the folder's
        children are :meth:`known`."""
        if first:
            self._listing[folder_id] = {}
        seen = self._listing.get(folder_id)
        if seen is None:
            return  # its first page was read elsewhere: not known whole
        seen.update(page)
        if last:
            del self._listing[folder_id]
            self._made.setdefault(folder_id, {}).update(seen)

    def _note(self, parent_id: str, name: str, entity_id: str) -> None:
        children = self._made.get(parent_id)
        if children is not None:
            children[name] = entity_id

    async def destination(self, parent_id: str, key: str) -> int | None:
        """The storage location new files in ``parent_id`` go to: asked once per
        folder, even when many uploads into it start together."""
        if parent_id not in self._destinations:
            async with self._locks.setdefault(f"destination {parent_id}", asyncio.Lock()):
                if parent_id not in self._destinations:
                    doc = await self.rest.call(
                        "GET",
                        "file",
                        f"/entity/{parent_id}/uploadDestination",
                        url=self.url(key),
                        what="upload destination",
                    )
                    location = doc.get("storageLocationId") if isinstance(doc, dict) else None
                    self._destinations[parent_id] = int(location) if location is not None else None
        return self._destinations[parent_id]

    # -- plain calls -------------------------------------------------------------

    async def child(self, parent_id: str, name: str, key: str) -> str | None:
        """The id of the entity named ``name`` in ``parent_id``; None if there is none."""
        doc = await self.rest.call(
            "POST",
            "repo",
            "/entity/child",
            body={"parentId": parent_id, "entityName": name},
            url=self.url(key),
            what="entity lookup",
            missing_ok=True,
        )
        if not isinstance(doc, dict) or not doc.get("id"):
            return None
        return str(doc["id"])

    async def entity(self, entity_id: str, key: str) -> dict[str, Any]:
        doc = await self.rest.call(
            "GET", "repo", f"/entity/{entity_id}", url=self.url(key), what=f"get {entity_id}"
        )
        if not isinstance(doc, dict):
            raise BackendError(f"the service sent no entity for {entity_id}", url=self.url(key))
        return doc

    async def bundle(self, entity_id: str, key: str, version: int | None = None) -> Remote | None:
        """The File entity ``entity_id`` (its current version, or ``version``)
        with its handle and annotations (one call); None if it is not a file."""
        at = f"/version/{version}" if version is not None else ""
        doc = await self.rest.call(
            "POST",
            "repo",
            f"/entity/{entity_id}{at}/bundle2",
            body={"includeEntity": True, "includeFileHandles": True, "includeAnnotations": True},
            url=self.url(key),
            what=f"get {entity_id}" + (f" version {version}" if version is not None else ""),
        )
        entity = doc.get("entity") if isinstance(doc, dict) else None
        if not isinstance(entity, dict):
            raise BackendError(f"the service sent no entity for {entity_id}", url=self.url(key))
        if entity_kind(str(entity.get("concreteType", ""))) != "file":
            return None
        wanted = str(entity.get("dataFileHandleId") or "")
        handles = doc.get("fileHandles") or []
        handle = next(
            (h for h in handles if isinstance(h, dict) and str(h.get("id")) == wanted), None
        )
        if handle is None:
            raise BackendError(
                f"the service sent no file handle {wanted} for {entity_id}", url=self.url(key)
            )
        return remote_from(entity, handle, doc.get("annotations"))

    async def _entity_annotated(self, entity_id: str, key: str) -> tuple[dict[str, Any], Any]:
        """The entity ``entity_id`` and its Annotations, in one call."""
        doc = await self.rest.call(
            "POST",
            "repo",
            f"/entity/{entity_id}/bundle2",
            body={"includeEntity": True, "includeAnnotations": True},
            url=self.url(key),
            what=f"get {entity_id}",
        )
        entity = doc.get("entity") if isinstance(doc, dict) else None
        if not isinstance(entity, dict):
            raise BackendError(f"the service sent no entity for {entity_id}", url=self.url(key))
        return entity, doc.get("annotations")

    async def annotate(self, remote: Remote, key: str, wanted: Mapping[str, Any]) -> Remote:
        """Put ``wanted`` over the current annotations of ``remote``'s entity
        (others kept), unless they are there already: one ``PUT
        .../annotations2``; a conflict (the entity changed since it was read)
        reads it again."""
        for _ in range(3):
            if is_subset(wanted, remote.annotations):
                return remote
            merged = {**(remote.annotations or {}), **wanted}
            try:
                doc = await self.rest.call(
                    "PUT",
                    "repo",
                    f"/entity/{remote.entity_id}/annotations2",
                    body={"id": remote.entity_id, "etag": remote.etag, "annotations": merged},
                    url=self.url(key),
                    what=f"annotations of {remote.entity_id}",
                )
            except Conflict:
                fresh = await self.bundle(remote.entity_id, key)
                if fresh is None:
                    raise BackendError(
                        f"{self.url(key)} is no longer a file", url=self.url(key)
                    ) from None
                remote = fresh
                continue
            doc = doc if isinstance(doc, dict) else {}
            annotations = doc.get("annotations")
            return replace(
                remote,
                annotations=dict(annotations) if isinstance(annotations, dict) else merged,
                etag=str(doc.get("etag") or "") or None,
            )
        raise TransientError(
            f"{self.url(key)} kept changing while its annotations were written", url=self.url(key)
        )

    # -- folders -----------------------------------------------------------------

    async def folder(self, path: str, *, create: bool) -> str | None:
        """The id of the folder at ``path`` ("" is the container); created with
        its parents when ``create``, else None when missing. A file where a
        folder should be raises BackendError."""
        found = self._folders.get(path)
        if found is not None:
            return found
        lock = self._locks.setdefault(path, asyncio.Lock())
        async with lock:
            found = self._folders.get(path)
            if found is not None:
                return found
            if not path:
                self._folders[""] = found = await self._check_root()
                return found
            parent_path, _, name = path.rpartition("/")
            parent = await self.folder(parent_path, create=create)
            if parent is None:
                return None
            if self.root_file is not None:
                # syn://syn456 is a File: nothing is under it.
                if create:
                    raise self.under_file(path)
                return None
            # Known missing (a listing looked, or the parent's children are
            # known): create at once; one made meanwhile is the create's 409.
            known, child = self.known(parent, name)
            missing = create and (path in self._absent or (known and child is None))
            found = None if missing else await self._child_folder(parent, name, path)
            if found is None:
                if not create:
                    self._absent.add(path)
                    return None
                found = await self._create_folder(parent, name, path)
            self._absent.discard(path)
            self._folders[path] = found
            return found

    async def _check_root(self) -> str:
        """The root folder's id: the container's, once it is known to be a
        Project or Folder, or the folder holding the File ``root`` is
        (:attr:`root_file`). BucketNotFound if it does not exist; a
        BackendError saying what it is for any other entity (a Table, a
        View, a Link...)."""
        try:
            entity = await self.entity(self.root, "")
        except NotFound:
            raise BucketNotFound(
                f"{self.url('')} does not exist: no Project, Folder or File {self.root} "
                "(check the id, and that your token may see it)",
                url=self.url(""),
                status=404,
            ) from None
        kind = entity_kind(str(entity.get("concreteType", "")))
        if kind == "file" and entity.get("parentId"):
            self.root_file = entity
            return str(entity["parentId"])
        if self.pinned:
            raise BackendError(
                f"{self.url('')}: {self.root} is a {kind} entity; only a File has versions "
                f"(syn://syn456.2 is version 2 of the File syn456)",
                url=self.url(""),
            )
        if kind not in ("folder", "project"):
            raise BackendError(
                f"{self.url('')}: {self.root} is a {kind} entity "
                f"({entity.get('concreteType', 'of no known type')}), not a Project, Folder "
                "or File; syn:// moves files: name a File (syn://syn456), or a Project or "
                "Folder and the path under it (syn://syn123/dir/file)",
                url=self.url(""),
            )
        return self.root

    def under_file(self, key: str) -> BackendError:
        """The error for a key under ``syn://syn456`` that is not the File's own name."""
        name = (self.root_file or {}).get("name", "")
        parent = (self.root_file or {}).get("parentId", "syn123")
        return BackendError(
            f"{self.url(key)}: {self.root} is the File {name!r}, not a folder; its one key is "
            f"its name ({self.url(name)}). Write a new version of it to syn://{self.root}; "
            f"to add other files, name the folder that holds it (syn://{parent}/...)",
            url=self.url(key),
        )

    async def _child_folder(self, parent: str, name: str, path: str) -> str | None:
        found = await self.child(parent, name, path + "/")
        if found is None:
            return None
        entity = await self.entity(found, path + "/")
        kind = entity_kind(str(entity.get("concreteType", "")))
        if kind not in ("folder", "project"):
            raise BackendError(
                f"{self.url(path)} is a {kind} entity ({found}), not a folder", url=self.url(path)
            )
        return found

    async def _create_folder(self, parent: str, name: str, path: str) -> str:
        try:
            doc = await self.rest.call(
                "POST",
                "repo",
                "/entity",
                body={"name": name, "parentId": parent, "concreteType": FOLDER},
                url=self.url(path + "/"),
                what="create folder",
            )
        except Conflict:
            # Made meanwhile by someone else: use theirs.
            found = await self._child_folder(parent, name, path)
            if found is None:
                raise
            return found
        if not isinstance(doc, dict) or not doc.get("id"):
            raise BackendError("the service sent no id for a new folder", url=self.url(path))
        made = str(doc["id"])
        self._note(parent, name, made)
        self._made[made] = {}
        return made

    # -- files -------------------------------------------------------------------

    async def lookup(self, key: str) -> tuple[str | None, str | None]:
        """``(parent folder id, entity id)`` of ``key``; either None when missing."""
        parent_path, _, name = key.rpartition("/")
        parent = await self.folder(parent_path, create=False)
        if parent is None:
            return None, None
        if self.root_file is not None:
            # syn://syn456 is a File: its one key is its name.
            return (parent, self.root) if key == self.root_file.get("name") else (None, None)
        return parent, await self.child(parent, name, key)

    async def remote(self, key: str) -> Remote | None:
        """The File entity at ``key``, None when there is none (or a folder is there)."""
        _, entity_id = await self.lookup(key)
        if entity_id is None:
            return None
        return await self.bundle(entity_id, key)

    async def register(
        self,
        parent: str,
        name: str,
        key: str,
        handle_id: str,
        size: int,
        md5: str | None,
        content_type: str | None,
        *,
        hint: str | None = None,
        hinted: bool = False,
        annotations: Mapping[str, Any] | None = None,
    ) -> Remote:
        """Point the File entity ``name`` in ``parent`` at ``handle_id``: a new
        entity, or a new version of the existing one (as synapseclient's
        store does). Nothing to do when it points there already (a retried
        completion). ``hinted``: ``hint`` is what the upload's start knew of
        the key (the entity's id, or None), used on the first attempt instead
        of a lookup; a conflict, or a hinted entity gone or moved meanwhile,
        makes it look again.

        With ``annotations``, each call that writes the entity writes them in
        the same transaction (``POST /entity/bundle2/create``, ``PUT
        /entity/{id}/bundle2``: Synapse puts them over the version's, others
        kept), so no entity or version exists without them; an entity found
        already pointing at the handle gets those it lacks."""
        for attempt in range(3):
            trusted = not (hinted and attempt == 0)
            if trusted:
                entity_id = await self.child(parent, name, key)
            else:
                entity_id = hint
            annotated: Any = None
            if entity_id is None:
                body = {
                    "name": name,
                    "parentId": parent,
                    "concreteType": FILE,
                    "dataFileHandleId": handle_id,
                }
                try:
                    if annotations:
                        bundle = await self.rest.call(
                            "POST",
                            "repo",
                            "/entity/bundle2/create",
                            body={"entity": body, "annotations": {"annotations": annotations}},
                            url=self.url(key),
                            what="create file entity",
                        )
                        doc, annotated = _bundle_parts(bundle)
                    else:
                        doc = await self.rest.call(
                            "POST",
                            "repo",
                            "/entity",
                            body=body,
                            url=self.url(key),
                            what="create file entity",
                        )
                except Conflict:
                    continue  # someone made it meanwhile: update theirs
            else:
                try:
                    if annotations:
                        entity, annotated = await self._entity_annotated(entity_id, key)
                    else:
                        entity = await self.entity(entity_id, key)
                except NotFound:
                    if trusted:
                        raise
                    continue  # the hinted entity is gone: look again
                if not trusted and (
                    str(entity.get("parentId")) != parent or entity.get("name") != name
                ):
                    continue  # the hinted entity moved away: look again
                kind = entity_kind(str(entity.get("concreteType", "")))
                if kind != "file":
                    raise BackendError(
                        f"{self.url(key)} is a {kind} entity ({entity_id}): a file cannot "
                        "replace it",
                        url=self.url(key),
                    )
                if str(entity.get("dataFileHandleId")) == handle_id:
                    doc = entity
                    if annotations:  # registered before without them (a rerun)
                        done = await self.annotate(
                            remote_from(entity, None, annotated), key, annotations
                        )
                        annotated = {"annotations": done.annotations, "etag": done.etag}
                else:
                    entity["dataFileHandleId"] = handle_id
                    try:
                        if annotations:
                            # Synapse makes a new version of a File entity whose
                            # handle changes to other content (PLFM-1744).
                            bundle = await self.rest.call(
                                "PUT",
                                "repo",
                                f"/entity/{entity_id}/bundle2",
                                body={
                                    "entity": entity,
                                    "annotations": {
                                        "id": entity_id,
                                        "etag": entity.get("etag"),
                                        "annotations": annotations,
                                    },
                                },
                                url=self.url(key),
                                what=f"new version of {entity_id}",
                            )
                            doc, annotated = _bundle_parts(bundle)
                        else:
                            doc = await self.rest.call(
                                "PUT",
                                "repo",
                                f"/entity/{entity_id}",
                                body=entity,
                                params={"newVersion": "true"},
                                url=self.url(key),
                                what=f"new version of {entity_id}",
                            )
                    except Conflict:
                        continue  # changed meanwhile (etag): read it again
            if not isinstance(doc, dict) or not doc.get("id"):
                raise BackendError("the service sent no entity back", url=self.url(key))
            self._note(parent, name, str(doc["id"]))
            handle = {"id": handle_id, "contentSize": size, "contentMd5": md5}
            if content_type:
                handle["contentType"] = content_type
            return remote_from(doc, handle, annotated)
        raise TransientError(
            f"{self.url(key)} kept changing while its new version was registered", url=self.url(key)
        )


def _bundle_parts(bundle: Any) -> tuple[Any, Any]:
    """The entity and the Annotations of an EntityBundle."""
    if not isinstance(bundle, dict):
        return None, None
    return bundle.get("entity"), bundle.get("annotations")
