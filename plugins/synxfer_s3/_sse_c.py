"""SSE-C: the customer-provided key on every S3 request that needs it.

S3 encrypts an SSE-C object with a key it does not keep, so every request
that reads or writes the object's bytes must carry the key again, as three
headers (algorithm, base64 key, base64 MD5 of the key):

* writes -- PutObject, CreateMultipartUpload, UploadPart,
  CompleteMultipartUpload (S3 wants it there when the upload declared a
  checksum algorithm, as synxfer's do), and the destination of CopyObject
  and UploadPartCopy: ``x-amz-server-side-encryption-customer-*`` with the
  write key;
* reads -- HeadObject (``?partNumber`` too) and GetObject, whole or ranged:
  the same headers with the read key;
* the source of CopyObject / UploadPartCopy:
  ``x-amz-copy-source-server-side-encryption-customer-*`` with the read key.

Listing, deleting, ListParts, AbortMultipartUpload and tagging need no key.
The headers are signed like any ``x-amz-*`` header; synxfer's request log
never prints a header (:mod:`._signed`), and a key shows in no ``repr``
(:class:`synxfer.CustomerKey`).
"""

from __future__ import annotations

from synxfer import CustomerKey

__all__ = ["CustomerKeys", "error_hint", "unconfirmed"]

_PREFIX = "x-amz-server-side-encryption-customer-"
_COPY_PREFIX = "x-amz-copy-source-server-side-encryption-customer-"

_WRITES = frozenset({"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"})
_COPIES = frozenset({"CopyObject", "UploadPartCopy"})
_READS = frozenset({"HeadObject", "GetObject"})


def _add(headers: dict[str, str], prefix: str, key: CustomerKey) -> None:
    algorithm, key_b64, md5_b64 = key.header_values()
    headers[prefix + "algorithm"] = algorithm
    headers[prefix + "key"] = key_b64
    headers[prefix + "key-md5"] = md5_b64


class CustomerKeys:
    """The read and write keys of one backend, added to its requests by
    operation name (:meth:`add`)."""

    __slots__ = ("read", "write")

    def __init__(self, read: CustomerKey | None, write: CustomerKey | None) -> None:
        self.read = read
        self.write = write

    def __repr__(self) -> str:
        return f"<CustomerKeys read={self.read is not None} write={self.write is not None}>"

    def add(self, op: str, headers: dict[str, str], *, written: bool = False) -> None:
        """Add the headers ``op`` needs. ``written``: a HEAD of an object this
        backend writes (a check before or after a write), sent with the write key."""
        if op in _READS:
            key = self.write if written else self.read
            if key is not None:
                _add(headers, _PREFIX, key)
        elif op in _WRITES:
            if self.write is not None:
                _add(headers, _PREFIX, self.write)
        elif op in _COPIES:
            if self.write is not None:
                _add(headers, _PREFIX, self.write)
            if self.read is not None:
                _add(headers, _COPY_PREFIX, self.read)


def error_hint(op: str, status: int, keys: CustomerKeys | None) -> str:
    """What an error answer may mean for SSE-C, to append to its message
    (empty when it cannot be about a customer-provided key). S3 answers a
    read of an SSE-C object without its key with 400, with another key
    with 403, and a key sent for an object stored without one with 400."""
    read = keys.read if keys is not None else None
    write = keys.write if keys is not None else None
    copy = op in _COPIES
    if op not in _READS and not copy:
        return ""
    if copy and status == 501 and (read is not None or write is not None):
        return (
            f"; this store does not take a customer-provided key (SSE-C) on {op} (Ceph "
            "RGW 16 does not on CopyObject, SeaweedFS 4.48 not for an UploadPartCopy "
            "source): copy the object through this machine (download, then upload)"
        )
    flag = "--sse-c-copy-source-key" if copy else "--sse-c-key"
    if status == 400 and read is None:
        return (
            "; if the object is encrypted with a customer-provided key (SSE-C), give the "
            f"key ({flag}, Client(sse_c_read_key=...))"
        )
    if status in (400, 403) and read is not None:
        return (
            "; the customer-provided key (SSE-C) given may not be the object's, or the "
            "object may take none"
        )
    return ""


def unconfirmed(keys: CustomerKeys | None, encryption: str | None) -> bool:
    """True when a write carried the SSE-C key and the answer does not say
    the object is SSE-C-encrypted (S3 echoes the algorithm): the server
    ignored the key and may have stored the bytes in clear (stock moto 5.2)."""
    return keys is not None and keys.write is not None and encryption != "SSE-C"
