"""Object versions for the client: ``version_id=`` / ``--version-id`` and ``versions=True``.

A version travels as a *view* of the bucket's backend
(:meth:`synxfer.backend.Backend.at_version`): the engine's download, copy
and delete run unchanged on it, and every request they send for the object
(HEAD, each ranged GET, ``partNumber`` HEADs, DELETE) names the version, so
a download never mixes versions and a delete removes that version only.
Backends without versions refuse, and so does this module, with a message
naming the option, before anything moves (docs/versions.md).

``rm --all-versions`` / ``rm(all_versions=True)`` deletes every version and
delete marker of a key, or (with ``recursive``) under a prefix:
:func:`check_all_versions` before anything is opened, then
:func:`all_versions_jobs` -- batches the backend deletes in one request each
where it can (S3's DeleteObjects with ``VersionId``), one event per version.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._exceptions import BackendError, BucketNotFound, ConfigError, NotFound
from ._models import Action, ObjectInfo
from ._url import Location
from .backend import Backend, resolve

if TYPE_CHECKING:
    from .engine.core import Engine, Run

__all__ = [
    "ALL_VERSIONS",
    "OPTION",
    "DeleteVersionsJob",
    "all_versions_jobs",
    "check_all_versions",
    "check_version_id",
    "check_versioned",
    "check_versioned_copy",
    "delete_version_view",
    "listed_versions",
    "no_versions",
    "open_version",
    "refuse_unversioned",
    "stat_version",
    "version_view",
]

#: How the option is named in messages: the CLI's flag and the keyword.
OPTION = "--version-id / version_id="
#: How ``rm``'s every-version option is named in messages.
ALL_VERSIONS = "--all-versions / all_versions=True"
#: Versions per job: one DeleteObjects request (S3's maximum).
_BATCH = 1000

#: S3 documents version ids as URL-safe strings of at most 1,024 bytes.
_MAX_LEN = 1024


def check_version_id(version_id: object, url: str) -> str:
    """``version_id`` as given, or ConfigError saying what a version id is."""
    if (
        not isinstance(version_id, str)
        or not version_id.strip()
        or len(version_id.encode()) > _MAX_LEN
        or not version_id.isprintable()
        or version_id != version_id.strip()
    ):
        raise ConfigError(
            f"{OPTION}{version_id!r} for {url}: expected a version id as the store reports it "
            "(synxfer ls --all-versions URL lists them; 'null' for an object written "
            "before versioning was on)"
        )
    return version_id


def no_versions(scheme: str, what: str = OPTION) -> ConfigError:
    """The error for a scheme whose backend keeps no versions."""
    return ConfigError(
        f"{what}: {scheme}:// has no object versions here (s3:// and syn:// have); "
        "leave the option out to use the current object"
    )


def refuse_unversioned(scheme: str, what: str = OPTION) -> None:
    """ConfigError, before a backend is opened (or asks for credentials), when
    ``scheme``'s backend class leaves versions to :class:`Backend`."""
    factory = resolve(scheme)
    if (
        isinstance(factory, type)
        and issubclass(factory, Backend)
        and factory.at_version is Backend.at_version
    ):
        raise no_versions(scheme, what)


def check_versioned(loc: Location, version_id: object) -> str:
    """``version_id`` for the object ``loc``; ConfigError for a bad id, a
    prefix or a store without versions (nothing opened yet)."""
    url = str(loc)
    vid = check_version_id(version_id, url)
    if not loc.key or loc.key.endswith("/"):
        raise ConfigError(
            f"{OPTION}: {url} names a prefix; a version belongs to one object, like s3://bucket/key"
        )
    refuse_unversioned(loc.scheme)
    return vid


def version_view(backend: Backend, loc: Location, version_id: object) -> Backend:
    """The view of ``backend`` addressing version ``version_id`` of the key
    ``loc`` names; ConfigError for a bad id, a prefix or a store without versions."""
    vid = check_versioned(loc, version_id)
    try:
        return backend.at_version(vid)
    except NotImplementedError:
        raise no_versions(loc.scheme) from None


async def stat_version(view: Backend, key: str, url: str, version_id: str) -> ObjectInfo:
    """The info of one version, or NotFound / ConfigError naming it."""
    try:
        return await view.stat(key)
    except BucketNotFound:
        raise
    except NotFound as exc:
        raise NotFound(
            f"{url}: no version {version_id!r} of this object (synxfer ls --all-versions "
            "lists its versions)",
            url=url,
            status=exc.status,
        ) from None
    except BackendError as exc:
        # S3 answers a HEAD of a malformed version id with a body-less 400.
        if exc.status != 400:
            raise
        raise ConfigError(
            f"{OPTION}{version_id!r}: {url} has no such version (the server refused the "
            "id as invalid); synxfer ls --all-versions lists the object's versions"
        ) from None


async def open_version(
    backend: Backend, loc: Location, version_id: object
) -> tuple[Backend, ObjectInfo]:
    """The view of ``backend`` that reads version ``version_id`` of ``loc``'s
    key, and that version's info (``cat`` / ``get_stream`` / ``open`` with
    ``version_id=``); ConfigError or NotFound naming it, as for a download."""
    view = version_view(backend, loc, version_id)
    assert isinstance(version_id, str)  # checked by version_view
    return view, await stat_version(view, loc.key, str(loc), version_id)


def check_versioned_copy(src: Location, recursive: bool, files: object) -> None:
    """A version is of one remote object: refuse ``version_id`` with a local
    source, ``recursive`` or a list of files."""
    if src.is_local:
        raise ConfigError(
            f"{OPTION}: the source {src.key or str(src)!r} is a local path; a version "
            "belongs to a remote object (s3://bucket/key)"
        )
    if recursive or files is not None:
        what = "--recursive" if recursive else "--files-from / files="
        raise ConfigError(f"{OPTION} copies one object; it cannot be combined with {what}")


async def delete_version_view(
    backend: Backend, loc: Location, version_id: object, recursive: bool, filters: object
) -> Backend:
    """The view that deletes version ``version_id`` of ``loc``'s key, after
    checking that the version exists (deleting a missing one succeeds on S3:
    say so instead, as ``rm`` does for a missing key)."""
    url = str(loc)
    if recursive or filters:
        what = "--recursive" if recursive else "--include / --exclude (filters=)"
        raise ConfigError(f"{OPTION} deletes one object version; it cannot be combined with {what}")
    view = version_view(backend, loc, version_id)
    assert isinstance(version_id, str)  # checked by version_view
    try:
        await stat_version(view, loc.key, url, version_id)
    except NotFound:
        # A delete marker has no body to HEAD (SeaweedFS: 404): the version
        # listing says whether it is one, and deleting it brings the object back.
        if not await _is_delete_marker(backend, loc.key, version_id):
            raise
    except BackendError as exc:
        # S3 answers a HEAD of a delete marker's version with 405.
        if exc.status != 405:
            raise
    return view


async def _is_delete_marker(backend: Backend, key: str, version_id: str) -> bool:
    """Whether version ``version_id`` of ``key`` is a delete marker."""
    async for item in backend.list_versions(key):
        if item.key == key and item.version_id == version_id:
            return item.delete_marker
        if item.key > key:
            break
    return False


async def listed_versions(
    listing: AsyncIterator[ObjectInfo], scheme: str
) -> AsyncIterator[ObjectInfo]:
    """``listing`` (a version listing), with a backend that keeps no versions
    refused as a ConfigError naming the option."""
    try:
        first = await anext(listing)
    except StopAsyncIteration:
        return
    except NotImplementedError:
        raise no_versions(scheme, "--all-versions / versions=True") from None
    yield first
    async for item in listing:
        yield item


def check_all_versions(loc: Location, recursive: bool, version_id: object) -> None:
    """ConfigError, before a backend is opened, for ``rm --all-versions``
    with ``--version-id``, a prefix without ``--recursive`` (as ``rm``
    refuses one), or a store without versions."""
    url = str(loc)
    if version_id is not None:
        raise ConfigError(
            f"{ALL_VERSIONS} deletes every version of {url}; {OPTION} deletes one: give one of them"
        )
    if not recursive and (not loc.key or loc.key.endswith("/")):
        raise ConfigError(
            f"{ALL_VERSIONS}: {url} is a prefix; add --recursive (recursive=True) to delete "
            "every version under it, or name one object"
        )
    refuse_unversioned(loc.scheme, ALL_VERSIONS)


def _named(backend: Backend, item: ObjectInfo) -> str:
    """How an event names one version: its URL and version id."""
    what = "delete marker" if item.delete_marker else "version"
    return f"{backend.url(item.key)} ({what} {item.version_id or 'null'})"


@dataclass
class DeleteVersionsJob:
    """Deletes a batch of versions and delete markers in one call
    (:meth:`~synxfer.backend.Backend.delete_versions`); a dry run names each."""

    backend: Backend
    items: Sequence[ObjectInfo]
    action: Action = Action.DELETE
    size: int = 0
    src: str = ""
    dst: str = ""

    def __post_init__(self) -> None:
        self.dst = self.dst or (_named(self.backend, self.items[0]) if self.items else "")

    @property
    def keys(self) -> list[str]:
        """The key of each version: the engine's plan counts a batch by its keys."""
        return [item.key for item in self.items]

    async def run(self, engine: Engine, run: Run) -> None:
        pairs = [(item.key, item.version_id or "null") for item in self.items]
        failed = {} if run.dryrun else await self.backend.delete_versions(pairs)
        for item, pair in zip(self.items, pairs, strict=True):
            one = DeleteVersionsJob(self.backend, [item])
            if pair in failed:
                engine.failed(run, one, failed[pair])
            else:
                engine.done(run, one)


async def all_versions_jobs(
    backend: Backend, loc: Location, recursive: bool, filters: Sequence[tuple[str, str]]
) -> list[DeleteVersionsJob]:
    """The jobs deleting every version and delete marker of ``loc``'s key, or
    (``recursive``) under its prefix whose relative names ``filters`` keep
    (:class:`~synxfer.engine.filters.Filters`). A key with no version at
    all is NotFound, as ``rm`` of a missing key."""
    from .engine.filters import Filters  # the engine imports this module

    url = str(loc)
    found: list[ObjectInfo] = []
    if recursive:
        prefix = loc.key if not loc.key or loc.key.endswith("/") else loc.key + "/"
        flt = Filters(filters)
        async for item in listed_versions(backend.list_versions(prefix), loc.scheme):
            if flt.included(item.key[len(prefix) :]):
                found.append(item)
    else:
        async for item in listed_versions(backend.list_versions(loc.key), loc.scheme):
            if item.key == loc.key:
                found.append(item)
            elif item.key > loc.key:
                break
        if not found:
            raise NotFound(f"{url}: no such object, nor any version of it", url=url)
    return [DeleteVersionsJob(backend, found[i : i + _BATCH]) for i in range(0, len(found), _BATCH)]
