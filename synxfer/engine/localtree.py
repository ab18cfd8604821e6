"""Walking a local tree, and mapping object keys safely onto local paths."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from .._exceptions import UnsafePathError
from ._os import get_xattr
from .localfile import TAG_XATTR, TEMP_SUFFIX

__all__ = ["LocalEntry", "WalkProblem", "read_tag", "safe_join", "walk"]

#: The longest file name most local filesystems accept, in bytes.
_NAME_MAX = 255


class LocalEntry(NamedTuple):
    """A regular file found by :func:`walk`; ``rel`` uses ``/`` separators.

    ``tag`` is the ETag of the object this file was downloaded from, when the
    file still has the mtime the download gave it (see :func:`read_tag`).
    """

    rel: str
    path: Path
    size: int
    mtime_ns: int
    tag: str | None = None


def read_tag(path: Path | str, mtime_ns: int) -> str | None:
    """The ETag a download recorded on ``path`` (:func:`.localfile.write_tag`),
    if the file is untouched since.

    None when there is no tag, the filesystem has no extended attributes, or
    the file's mtime is not the one the download set (it was modified).
    """
    raw = get_xattr(path, TAG_XATTR)
    if raw is None:
        return None
    etag, _, stamp = raw.decode("utf-8", "replace").rpartition(" ")
    return etag if etag and stamp == str(mtime_ns) else None


class WalkProblem(NamedTuple):
    """Something under the root that cannot be a source, and why."""

    path: Path
    reason: str
    skipped: bool = False  # True: deliberately left out (symlink); False: an error


def walk(
    root: Path, *, follow_symlinks: bool = False, tags: bool = False
) -> Iterator[LocalEntry | WalkProblem]:
    """Regular files under ``root`` in sorted order (blocking: run in a thread).

    Symlinks are reported as skipped unless ``follow_symlinks``; a followed
    link to one of its own ancestors (a loop) is detected by (device, inode)
    and skipped. A directory reachable by two paths is listed under both.
    With ``tags``, each entry carries its download tag (:func:`read_tag`). Special
    files, unreadable directories and names that are not valid UTF-8 are
    reported as problems; synxfer's own temp files are ignored.
    """
    try:
        st = root.stat()
    except OSError as exc:
        yield WalkProblem(root, exc.strerror or str(exc))
        return
    yield from _walk_dir(root, "", follow_symlinks, {(st.st_dev, st.st_ino)}, tags)


def _walk_dir(
    directory: Path, prefix: str, follow: bool, ancestors: set[tuple[int, int]], tags: bool
) -> Iterator[LocalEntry | WalkProblem]:
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        yield WalkProblem(directory, f"cannot list directory: {exc.strerror or exc}")
        return
    for entry in entries:
        path = Path(entry.path)
        name = entry.name
        if name.endswith(TEMP_SUFFIX):
            continue
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            yield WalkProblem(path, "file name is not valid UTF-8; rename it to transfer it")
            continue
        rel = f"{prefix}{name}"
        try:
            is_link = entry.is_symlink()
            if is_link and not follow:
                yield WalkProblem(path, "symlink not followed (use follow_symlinks=True)", True)
                continue
            st = entry.stat(follow_symlinks=True)
        except OSError as exc:
            yield WalkProblem(path, exc.strerror or str(exc))
            continue
        if stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in ancestors:
                yield WalkProblem(path, "symlink loop: links to a directory above it", True)
                continue
            ancestors.add(key)
            yield from _walk_dir(path, f"{rel}/", follow, ancestors, tags)
            ancestors.discard(key)
        elif stat.S_ISREG(st.st_mode):
            tag = read_tag(path, st.st_mtime_ns) if tags else None
            yield LocalEntry(rel, path, st.st_size, st.st_mtime_ns, tag)
        else:
            yield WalkProblem(path, "not a regular file (device, socket or pipe)", True)


def safe_join(root: Path, rel: str, resolved: dict[Path, str] | None = None) -> Path:
    """``root / rel`` for an object key ``rel``, refusing anything unsafe.

    Refused: NUL bytes, absolute keys, empty, ``.`` or ``..`` segments,
    segments too long for local filesystems, and any path that resolves
    outside ``root`` (e.g. through a symlinked directory inside it).

    ``resolved``, a dict kept by the caller for one plan, remembers each
    directory's real path: ``os.path.realpath`` lstats every component of
    it, for every key, on the event loop, before the first transfer of a
    tree can start (docs/decisions/0014, "Also"). A plan is
    checked as of the moment it is made either way.
    """
    if "\x00" in rel:
        raise UnsafePathError(f"object key {rel!r} contains a NUL byte; refusing to write it")
    if rel.startswith(("/", "\\")):
        raise UnsafePathError(f"object key {rel!r} is an absolute path; refusing to write it")
    parts = rel.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise UnsafePathError(
                f"object key {rel!r} has a {part or 'empty'!r} path segment that would "
                f"escape or confuse the destination; refusing to write it"
            )
        if len(part.encode("utf-8", "surrogateescape")) > _NAME_MAX:
            raise UnsafePathError(
                f"object key {rel!r} has a name longer than {_NAME_MAX} bytes, "
                f"which local filesystems refuse"
            )
    target = root.joinpath(*parts)
    real_root = _realpath(root, resolved)
    real_parent = _realpath(target.parent, resolved)
    if os.path.commonpath([real_root, real_parent]) != real_root:
        raise UnsafePathError(
            f"object key {rel!r} would be written outside {root} "
            f"(through {target.parent}); refusing to write it"
        )
    return target


def _realpath(path: Path, resolved: dict[Path, str] | None) -> str:
    if resolved is None:
        return os.path.realpath(path)
    real = resolved.get(path)
    if real is None:
        real = resolved[path] = os.path.realpath(path)
    return real
