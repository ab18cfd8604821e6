"""A file that changes while it is being uploaded is never committed.

The upload keeps the file open and compares, before the object is made
visible (the put, or CompleteMultipartUpload), the open file's identity and
what its path names now with what it was when reading began
(``LocalFile.unchanged_since``). moto S3 over HTTP; the change is made from
inside the transfer, by a layer, between two part uploads.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import boto3
import pytest

import synxfer
from synxfer.layers import Layer

from .conftest import PART, SMALL, write_tree


class _RewriteOnFirstPart(Layer):
    """Rewrites (or replaces) the source file when the first part goes out."""

    target: ClassVar[Path]
    how: ClassVar[str] = "rewrite"
    fired: ClassVar[int] = 0

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        cls = type(self)
        if op == "upload_part" and not cls.fired:
            cls.fired += 1
            if cls.how == "rewrite":
                data = bytearray(cls.target.read_bytes())
                data[-1] ^= 0xFF
                cls.target.write_bytes(data)
                st = cls.target.stat()
                os.utime(cls.target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
            else:  # replaced by another file under the same name
                new = cls.target.with_suffix(".new")
                new.write_bytes(b"y" * cls.target.stat().st_size)
                os.replace(new, cls.target)
        return await fn(*args)


class _TruncateOnFirstPart(Layer):
    """Cuts the source file to one part when the first part goes out."""

    target: ClassVar[Path]
    fired: ClassVar[int] = 0

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        cls = type(self)
        if op == "upload_part" and not cls.fired:
            cls.fired += 1
            os.truncate(cls.target, PART)
        return await fn(*args)


async def test_a_file_cut_short_during_a_multipart_upload_says_it_changed(
    bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """A later part that reads short is the same failure, in the same words,
    as any other change (with how it changed), and commits nothing."""
    src = tmp_path / "src"
    write_tree(src, {"big.bin": 3 * PART + 11})
    _TruncateOnFirstPart.target = src / "big.bin"
    _TruncateOnFirstPart.fired = 0
    # One part at a time: the second is read after the first goes out.
    config = SMALL.evolve(state_dir=str(tmp_path / "state"), max_threads=1)
    async with synxfer.Client(config, endpoint_url=s3_endpoint, layers=[_TruncateOnFirstPart]) as c:
        r = await c.sync_to(src, f"s3://{bucket}/p")
    assert _TruncateOnFirstPart.fired == 1
    assert r.files_failed == 1, r
    error = r.failures[0].error
    assert "changed while it was being uploaded (it shrank)" in error
    assert "run the command again" in error
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


@pytest.mark.parametrize("how", ["rewrite", "replace"])
@pytest.mark.parametrize("compress", [None, "zstd"])
async def test_a_file_changed_during_a_multipart_upload_is_not_committed(
    how: str, compress: str | None, bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    if compress:
        pytest.importorskip("zstandard")
    src = tmp_path / "src"
    write_tree(src, {"big.bin": 3 * PART + 11})
    _RewriteOnFirstPart.target = src / "big.bin"
    _RewriteOnFirstPart.how = how
    _RewriteOnFirstPart.fired = 0
    config = SMALL.evolve(state_dir=str(tmp_path / "state"), compress=compress)
    async with synxfer.Client(config, endpoint_url=s3_endpoint, layers=[_RewriteOnFirstPart]) as c:
        r = await c.sync_to(src, f"s3://{bucket}/p")
    assert _RewriteOnFirstPart.fired == 1
    assert r.files_failed == 1, r
    assert "changed while it was being uploaded" in r.failures[0].error
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
