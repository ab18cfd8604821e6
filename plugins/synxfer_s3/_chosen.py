"""Checksums a user chose for the objects an upload stores (``--checksum-algorithm``).

``WriteOptions.checksum_algorithm`` names the checksum a stored object
carries as its *claim*, so aws-cli and other tools can verify it later
(aws-cli#6750, rclone#7445). Without it the backend picks what the endpoint
verifies best (CRC32C, decision 0026); with it, every body carries the
chosen ``x-amz-checksum-<algorithm>`` instead, computed here from the very
buffer sent, in a worker thread (never on the event loop):

* a single PUT carries the object's checksum;
* a multipart upload declares the algorithm and its type when it is created,
  each part carries its own checksum, and the completion lists them all:
  ``FULL_OBJECT`` for CRC32, CRC32C and CRC64NVME (the completion also
  carries the whole object's CRC, folded from the parts' CRCs with awscrt's
  ``combine_*``: no byte is read twice), ``COMPOSITE`` for SHA1 and SHA256
  (S3 takes no other types for them);
* ``MD5`` sends no ``x-amz-checksum-*`` header: every body carries
  ``Content-MD5`` and the object's claim is its MD5 ETag.

Verification on the way up is never weaker than without a choice: an
answer proves a body only by echoing the value sent (trust is kept per
endpoint *and* algorithm, :mod:`._trust`); otherwise the body also carries
``Content-MD5`` and its ETag is compared with the MD5 of the bytes sent.

Stores differ (measured, ``docs/checksums.md``): SeaweedFS does what S3
does; Ceph RGW 16 ignores every ``x-amz-checksum-*`` header and stores no
claim; stock moto verifies nothing, keeps no checksum of a single PUT and
reports a CRC32 as the CRC32C of a multipart object. So a store that
refuses FULL_OBJECT makes the upload fall back to COMPOSITE, and one that
does not keep the claim chosen is found by the completion's answer (or one
HEAD per endpoint) -- each said once per endpoint, as a warning.

An interrupted multipart upload resumes (decision 0047): its handle names
the algorithm and type (:func:`spec`, kept by the engine's journal), from
which a later process rebuilds the upload's state (:func:`of`); the parts
an earlier run sent bring their values with the completion's parts, which
the engine computed again from the file and checked against the server's.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import logging
import threading
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from synxfer import (
    BackendError,
    CompletedPart,
    ConfigError,
    MultipartUpload,
    ObjectInfo,
    WriteOptions,
)
from synxfer.backend import Checksum, Payload, crc32c, crc32c_available

from ._trust import endpoint_trust
from ._wire import b64md5

if TYPE_CHECKING:
    from ._backend import S3Backend

__all__ = [
    "ChosenUpload",
    "body",
    "complete_args",
    "create",
    "from_spec",
    "kind_of",
    "note_copy",
    "note_put",
    "of",
    "spec",
    "stored_claim",
]

log = logging.getLogger("synxfer")

#: aws-cli's names -> the names of ``x-amz-checksum-<name>`` (and ``md5``).
KINDS: Mapping[str, str] = {
    "CRC32": "crc32",
    "CRC32C": "crc32c",
    "CRC64NVME": "crc64nvme",
    "SHA1": "sha1",
    "SHA256": "sha256",
    "MD5": "md5",
}
_CRCS = ("crc32", "crc32c", "crc64nvme")
_WIDTH = {"crc32": 4, "crc32c": 4, "crc64nvme": 8}


def kind_of(options: WriteOptions) -> str | None:
    """The algorithm chosen in ``options`` (``sha256``...), or None."""
    chosen = options.checksum_algorithm
    return KINDS[chosen] if chosen else None


def label(kind: str) -> str:
    return next(name for name, k in KINDS.items() if k == kind)


@functools.cache
def _crt() -> Any:
    """awscrt's checksums (CRC64NVME, and combining CRCs), or None."""
    if importlib.util.find_spec("awscrt") is None:
        return None
    return importlib.import_module("awscrt.checksums")


def check_available(kind: str, backend: S3Backend) -> None:
    """ConfigError where ``kind`` cannot be sent by ``backend`` here."""
    if backend.capabilities.part_checksum == "md5" and kind != "md5":
        raise ConfigError(
            f"{backend.scheme}:// sends Content-MD5 only (md5_only): "
            f"--checksum-algorithm {label(kind)} cannot be sent; use MD5 or leave it out"
        )
    if kind == "crc64nvme" and _crt() is None:
        raise ConfigError("--checksum-algorithm CRC64NVME needs awscrt: pip install 'synxfer[s3]'")
    if kind == "crc32c" and not crc32c_available():
        raise ConfigError("--checksum-algorithm CRC32C needs fastcrc: pip install 'synxfer[s3]'")


def _crc(kind: str, data: Payload | bytes) -> int:
    """The CRC of ``data``. Blocking: a worker thread's."""
    if kind == "crc32":
        return zlib.crc32(data)
    if kind == "crc32c":
        return crc32c(data)
    return int(_crt().crc64nvme(data))


def _raw(kind: str, data: Payload | bytes) -> bytes:
    """The checksum of ``data`` as bytes (CRCs big-endian, as S3 sends them)."""
    if kind in _CRCS:
        return _crc(kind, data).to_bytes(_WIDTH[kind], "big")
    return hashlib.new(kind, data, usedforsecurity=False).digest()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _sums(
    kind: str, data: Payload, given: Checksum | None, md5: bool
) -> tuple[str | None, str | None, str | None]:
    """``(content_md5, value, wrong)`` of one body, in ONE worker-thread call:
    the chosen checksum (None for MD5), the MD5 when asked, and a message
    when the engine's checksum ``given`` is not that of these bytes."""
    value = None if kind == "md5" else _b64(_raw(kind, data))
    content_md5 = b64md5(data) if md5 or kind == "md5" else None
    wrong = None
    if given is not None:
        if given.algorithm == kind:
            actual = value  # computed above, from these bytes
        elif given.algorithm == "md5":
            actual = content_md5 or b64md5(data)
        else:
            actual = _b64(crc32c(data).to_bytes(4, "big"))
        if actual != given.value:
            wrong = (
                f"the {given.algorithm.upper()} given for the body ({given.value}) is not "
                f"that of its bytes ({actual}); nothing was sent"
            )
    return content_md5, value, wrong


async def body(
    backend: S3Backend, key: str, data: Payload, given: Checksum | None, kind: str
) -> tuple[str | None, dict[str, str] | None]:
    """``(content_md5, checksums)`` of a body sent with the chosen ``kind``.

    Content-MD5 travels unless the endpoint has shown (by echoing it) that it
    verifies ``kind``: the same rule as synxfer's own CRC32C (decision 0026).
    """
    trust = backend._trust
    verifies = kind != "md5" and trust is not None and endpoint_trust(trust.endpoint, kind).verifies
    md5, value, wrong = await asyncio.to_thread(_sums, kind, data, given, not verifies)
    if wrong is not None:
        raise BackendError(wrong, url=backend.url(key))
    return md5, ({kind: value} if value is not None else None)


# -- say it once per endpoint ---------------------------------------------------------

_lock = threading.Lock()
_said: set[tuple[str, ...]] = set()
#: Whether an endpoint keeps the claim chosen for multipart objects, by
#: (endpoint, kind, type): learned from a completion's answer or one HEAD.
_keeps: dict[tuple[str, str, str], bool] = {}


def _once(*what: str) -> bool:
    with _lock:
        if what in _said:
            return False
        _said.add(what)
        return True


def forget() -> None:
    """Forget what was said and learned (tests)."""
    with _lock:
        _said.clear()
        _keeps.clear()


def _endpoint(backend: S3Backend) -> str:
    return backend._trust.endpoint if backend._trust is not None else backend.url()


def note_put(
    backend: S3Backend, key: str, kind: str, sums: Mapping[str, str] | None, info: ObjectInfo
) -> None:
    """After a PutObject whose bytes were proven: warn once per endpoint when
    its answer did not confirm the chosen checksum (the store may not keep it)."""
    if sums is None:
        return
    if info.checksums.get(kind) == sums.get(kind):
        return
    endpoint = _endpoint(backend)
    if _once(endpoint, kind, "put"):
        log.warning(
            "%s did not confirm the %s checksum chosen (--checksum-algorithm) for %s: "
            "it may not keep it as the object's claim; the bytes it stored were "
            "checked by their MD5 ETag instead",
            endpoint,
            label(kind),
            backend.url(key),
        )


def note_copy(
    backend: S3Backend, key: str, options: WriteOptions, checksums: Mapping[str, str]
) -> None:
    """After a CopyObject sent with a chosen checksum: warn once per endpoint
    when its answer shows none (SeaweedFS ignores ``x-amz-checksum-algorithm``
    on CopyObject; stock moto and S3 compute it)."""
    kind = kind_of(options)
    if kind is None or kind == "md5" or _claim(checksums, kind) is not None:
        return
    endpoint = _endpoint(backend)
    if _once(endpoint, kind, "copy"):
        log.warning(
            "%s did not report the %s checksum chosen (--checksum-algorithm) for the "
            "server-side copy %s: it may not keep it",
            endpoint,
            label(kind),
            backend.url(key),
        )


# -- multipart ---------------------------------------------------------------------------


@dataclass(slots=True)
class ChosenUpload:
    """A multipart upload made with a chosen checksum: its algorithm, type
    (``FULL_OBJECT``, ``COMPOSITE``, or None for MD5) and each part's
    checksum (base64) and size, as sent."""

    kind: str
    type: str | None
    parts: dict[int, tuple[str, int]] = field(default_factory=dict)


def spec(upload: ChosenUpload) -> str:
    """``MultipartUpload.checksum`` of ``upload``: ``SHA256/COMPOSITE``,
    ``CRC64NVME/FULL_OBJECT``, ``MD5`` -- what the resume journal records."""
    return label(upload.kind) + (f"/{upload.type}" if upload.type else "")


def from_spec(words: str) -> ChosenUpload:
    """The :class:`ChosenUpload` a :func:`spec` names, with no part known yet."""
    name, _, ctype = words.partition("/")
    if name not in KINDS or ctype not in ("", "FULL_OBJECT", "COMPOSITE"):
        raise ConfigError(f"a resumed upload names an unknown checksum {words!r}")
    kind = KINDS[name]
    if ctype == "FULL_OBJECT" and _type_for(kind) != "FULL_OBJECT":
        raise ConfigError(
            f"the upload to resume carries FULL_OBJECT {name} checksums, which need "
            "awscrt to complete: pip install 'synxfer[s3]'"
        )
    return ChosenUpload(kind, ctype or None)


def of(backend: S3Backend, upload: MultipartUpload) -> ChosenUpload | None:
    """The chosen checksum of ``upload``, or None for the backend's own: known
    from its creation in this process, or rebuilt from its handle's
    ``checksum`` (an upload resumed from the journal; its parts' values come
    with the parts the completion lists, see :func:`complete_args`)."""
    mine = backend._chosen.get(upload.upload_id)
    if mine is None and upload.checksum:
        mine = backend._chosen[upload.upload_id] = from_spec(upload.checksum)
    return mine


def _type_for(kind: str) -> str | None:
    """S3's rules: CRC64NVME is FULL_OBJECT only, SHA1/SHA256 COMPOSITE only;
    CRC32/CRC32C either -- FULL_OBJECT, the claim any reader can check
    without knowing the part layout (needs awscrt to fold the parts' CRCs)."""
    if kind == "md5":
        return None
    if kind in _CRCS and _crt() is not None and hasattr(_crt(), f"combine_{kind}"):
        return "FULL_OBJECT"
    return "COMPOSITE"


async def create(
    backend: S3Backend, key: str, options: WriteOptions, kind: str
) -> tuple[MultipartUpload, ChosenUpload]:
    """CreateMultipartUpload declaring ``kind`` and its type; a store that
    refuses FULL_OBJECT (400) gets a COMPOSITE upload instead, said once."""
    check_available(kind, backend)
    ctype = _type_for(kind)
    if kind == "md5":
        upload, mine = (
            await backend._create(key, options, checksums=False),
            ChosenUpload(kind, None),
        )
        return dataclasses.replace(upload, checksum=spec(mine)), mine
    try:
        upload = await backend._create(
            key, options, checksums=True, algorithm=kind, checksum_type=ctype
        )
    except BackendError as exc:
        if ctype != "FULL_OBJECT" or exc.status != 400:
            raise
        endpoint = _endpoint(backend)
        if _once(endpoint, kind, "refused"):
            log.warning(
                "%s refuses FULL_OBJECT %s checksums for multipart uploads (%s): "
                "they carry COMPOSITE ones instead",
                endpoint,
                label(kind),
                exc,
            )
        ctype = "COMPOSITE"
        upload = await backend._create(
            key, options, checksums=True, algorithm=kind, checksum_type=ctype
        )
    mine = ChosenUpload(kind, ctype)
    return dataclasses.replace(upload, checksum=spec(mine)), mine


def _whole(upload: ChosenUpload, numbers: Sequence[int]) -> tuple[str, str]:
    """``(full, composite)`` values (base64) the parts ``numbers`` make.
    Blocking (a worker thread's): folds CRCs with awscrt, hashes part values."""
    kind = upload.kind
    values = [base64.b64decode(upload.parts[n][0]) for n in numbers]
    composite = _b64(_raw(kind, b"".join(values)))
    full = ""
    if upload.type == "FULL_OBJECT":
        combine = getattr(_crt(), f"combine_{kind}")
        crc = int.from_bytes(values[0], "big")
        for n, raw in zip(numbers[1:], values[1:], strict=True):
            crc = int(combine(crc, int.from_bytes(raw, "big"), upload.parts[n][1]))
        full = _b64(crc.to_bytes(_WIDTH[kind], "big"))
    return full, composite


async def complete_args(
    upload: ChosenUpload, parts: Sequence[CompletedPart]
) -> tuple[list[Any], dict[str, str], str | None]:
    """``(specs, headers, expected)`` of the CompleteMultipartUpload: each
    part with its chosen checksum, the whole object's CRC and the type for
    FULL_OBJECT, and the claim the object should then carry (base64).

    A part sent by an earlier run (a resumed upload) brings its value in
    ``CompletedPart.checksum``: the engine computed it from the file's bytes
    now and checked it against what the server holds."""
    for p in parts:
        if p.number not in upload.parts and p.checksum:
            upload.parts[p.number] = (p.checksum, p.size)
    numbers = [p.number for p in parts]
    if upload.type is None or not all(n in upload.parts for n in numbers):
        return [(p.number, p.etag) for p in parts], {}, None
    full, composite = await asyncio.to_thread(_whole, upload, numbers)
    specs = [(p.number, p.etag, {upload.kind: upload.parts[p.number][0]}) for p in parts]
    headers = {"x-amz-checksum-type": upload.type}
    if upload.type == "FULL_OBJECT":
        headers[f"x-amz-checksum-{upload.kind}"] = full
    return specs, headers, full or composite


def _claim(checksums: Mapping[str, str], kind: str) -> str | None:
    value = checksums.get(kind) or checksums.get(kind + "-composite")
    return value.split("-")[0] if value else None


async def stored_claim(
    backend: S3Backend,
    key: str,
    upload: ChosenUpload,
    expected: str | None,
    info: ObjectInfo,
) -> ObjectInfo:
    """Check the completed object carries the claim chosen; warn once per
    endpoint where it does not (asking with one HEAD while the completion's
    answer does not say and the endpoint's habit is unknown). Returns
    ``info`` with a FULL_OBJECT claim named as a whole-object checksum."""
    if expected is None or upload.type is None:
        return info
    endpoint = _endpoint(backend)
    habit = (endpoint, upload.kind, upload.type)
    got = _claim(info.checksums, upload.kind)
    if got is None and habit not in _keeps:
        got = _claim((await backend._head(key)).checksums, upload.kind)
    if got == expected:
        _keeps[habit] = True
        if upload.type == "FULL_OBJECT":
            rest = {k: v for k, v in info.checksums.items() if not k.startswith(upload.kind)}
            return dataclasses.replace(info, checksums={**rest, upload.kind: expected})
        return info
    if got is None and _keeps.get(habit):
        return info  # known to keep it; this answer just does not say
    _keeps[habit] = False
    if _once(endpoint, upload.kind, "claim"):
        log.warning(
            "%s did not keep the %s %s checksum chosen (--checksum-algorithm) for %s "
            "(it reports %s): other tools cannot verify its multipart objects by it; "
            "their bytes were proven on the way up, and downloads check their MD5 ETag",
            endpoint,
            upload.type,
            label(upload.kind),
            backend.url(key),
            f"{label(upload.kind)} {got}" if got else "none",
        )
    return info
