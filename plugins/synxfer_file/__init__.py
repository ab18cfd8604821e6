"""The ``file`` backend: a local directory served as a bucket.

This is the reference implementation of the backend SDK (see
:mod:`synxfer.backend`): every primitive, multipart included, on a plain
POSIX filesystem, with no dependency beyond the standard library. It passes
the conformance kit in :mod:`synxfer.testing`.

``file:///data/dir/key`` is served by ``FileBackend("/", options)`` with key
``data/dir/key``; any other absolute directory can be the root too.

Layout on disk, next to each object ``dir/name``:

``dir/.name.synxfer-meta``
    A JSON sidecar with the object's ETag, user metadata and content type
    (for names over 200 bytes, ``name`` is replaced by a hash of it),
    and the ``(size, mtime_ns, inode)`` of the file it describes. If the file
    no longer matches (something else rewrote it), the sidecar is ignored
    and the object has no ETag and no metadata. A file without a sidecar is
    an object too, with ETag ``None``.
``dir/.name.synxfer-tmp-<hex>``
    A write in progress. Every write goes to such a temp file in the target's
    directory and is renamed over the target with :func:`os.replace`, so
    readers see the old object or the new one, never a mix.
``dir/.synxfer-mpu-<upload id>/``
    The staging directory of a multipart upload of a key in ``dir``: an
    ``upload.json`` with the options and one ``part-NNNNN`` file per part.
    Completing concatenates the parts into a temp file that is renamed over
    the target; aborting removes the directory. It lives next to the target
    rather than under the root so that the final rename never crosses a
    filesystem boundary (the root of ``file:///`` URLs is ``/``).

Listings never show sidecars, temp files or staging directories, and keys
whose components look like them are refused.

ETags follow S3: the MD5 hex digest of the content for a single put or a
copy, and ``md5(part digests) + "-N"`` for a multipart upload of N parts.

``part_checksum`` is ``"md5"``: a put or part sent with a Content-MD5 that
does not match the bytes received is refused with
:class:`~synxfer.TransientError` (S3's ``BadDigest``), because the bytes
were damaged on the way and sending them again is the cure; nothing is
stored.

Options (``BackendOptions.extra``):

``fsync``
    ``"true"`` to fsync every file before it is renamed into place (slower,
    crash-safe). Default ``"false"``.
``list_page_size``
    Objects per :meth:`FileBackend.list_page` page. Default ``1000``.

Blocking filesystem calls all run in worker threads via
:func:`asyncio.to_thread`; the event loop never waits on the disk.
Keys may not contain ``..``, ``.`` or empty components, a NUL, or start or
end with ``/``: such keys raise :class:`~synxfer.BackendError` naming them.
Symbolic links to files are served; symbolic links to directories are not
followed by listings.
"""

from ._backend import FileBackend

__all__ = ["FileBackend"]
