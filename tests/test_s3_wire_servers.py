"""S3Wire against real servers: every call on moto over HTTP, and signed calls on
SeaweedFS with auth on (it verifies signatures, which moto does not): odd keys,
interop with botocore both ways, CRC32C, a wrong secret, a skewed clock.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import random
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from synxfer import (
    BackendError,
    BucketNotFound,
    MiB,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    TransientError,
)
from synxfer_s3._core import S3Wire, s3_code
from synxfer_s3._credentials import (
    Credentials,
    StaticCredentials,
    credentials_from_env,
)

from ._s3server import ODD_KEYS, PORTABLE_KEYS

# -- S3Wire against moto ---------------------------------------------------------------------


@pytest.fixture
async def wire(s3_endpoint: str) -> AsyncIterator[S3Wire]:
    creds = credentials_from_env()
    assert creds is not None
    async with S3Wire(
        region="us-east-1", credentials=StaticCredentials(creds), endpoint_url=s3_endpoint
    ) as w:
        yield w


@pytest.fixture
def boto(s3_endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=s3_endpoint)


def _b64md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


async def test_put_get_head_odd_keys(wire: S3Wire, bucket: str, boto: Any) -> None:
    for i, key in enumerate([*ODD_KEYS, "odd key/+%~=&?#//ü/"]):
        data = f"{i}:{key}".encode() * 100
        info = await wire.put_object(
            bucket, key, data, content_md5=_b64md5(data), metadata={"mtime": f"{i}.5"}
        )
        assert info.etag == hashlib.md5(data).hexdigest()
        head = await wire.head_object(bucket, key)
        assert (head.size, head.etag, head.metadata) == (len(data), info.etag, {"mtime": f"{i}.5"})
        assert head.mtime is not None
        assert abs(head.mtime - datetime.datetime.now().timestamp()) < 600
        got, ginfo = await wire.get_object(bucket, key)
        assert bytes(got) == data
        assert ginfo.size == len(data)
        # Interop: botocore reads what we wrote, with the metadata.
        theirs = boto.get_object(Bucket=bucket, Key=key)
        assert theirs["Body"].read() == data
        assert theirs["Metadata"] == {"mtime": f"{i}.5"}
    listed = await wire.list_objects_v2(bucket)
    assert sorted(o.key for o in listed.objects) == sorted([*ODD_KEYS, "odd key/+%~=&?#//ü/"])


async def test_we_read_what_botocore_wrote(wire: S3Wire, bucket: str, boto: Any) -> None:
    key = "from boto/+ ü%"
    boto.put_object(Bucket=bucket, Key=key, Body=b"theirs", Metadata={"mtime": "7"},
                    ContentType="text/x-test")  # fmt: skip
    info = await wire.head_object(bucket, key)
    assert (info.size, info.metadata, info.content_type) == (6, {"mtime": "7"}, "text/x-test")
    data, _ = await wire.get_object(bucket, key)
    assert bytes(data) == b"theirs"
    # Their multipart object too.
    mp = boto.create_multipart_upload(Bucket=bucket, Key=key + "mp", Metadata={"mtime": "8"})
    p1 = random.Random(1).randbytes(5 * MiB)
    e1 = boto.upload_part(Bucket=bucket, Key=key + "mp", UploadId=mp["UploadId"], PartNumber=1,
                          Body=p1)["ETag"]  # fmt: skip
    e2 = boto.upload_part(Bucket=bucket, Key=key + "mp", UploadId=mp["UploadId"], PartNumber=2,
                          Body=b"end")["ETag"]  # fmt: skip
    boto.complete_multipart_upload(
        Bucket=bucket,
        Key=key + "mp",
        UploadId=mp["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]},
    )
    buf = bytearray(len(p1) + 3)
    n, info = await wire.get_object_into(bucket, key + "mp", buf)
    assert n == len(buf)
    assert buf == p1 + b"end"
    assert info.etag is not None
    assert info.etag.endswith("-2")
    assert info.metadata == {"mtime": "8"}


async def test_empty_objects(wire: S3Wire, bucket: str, boto: Any) -> None:
    info = await wire.put_object(bucket, "empty", b"", content_md5=_b64md5(b""))
    assert info.size == 0
    assert (await wire.head_object(bucket, "empty")).size == 0
    data, ginfo = await wire.get_object(bucket, "empty")
    assert bytes(data) == b""
    assert ginfo.size == 0
    n, _ = await wire.get_object_into(bucket, "empty", bytearray(0))
    assert n == 0
    n, _ = await wire.get_object_into(bucket, "empty", bytearray(10), length=0)
    assert n == 0
    assert boto.get_object(Bucket=bucket, Key="empty")["Body"].read() == b""
    boto.put_object(Bucket=bucket, Key="empty2", Body=b"")
    assert bytes((await wire.get_object(bucket, "empty2"))[0]) == b""


async def test_ranged_get_into_a_memoryview(wire: S3Wire, bucket: str) -> None:
    data = random.Random(5).randbytes(1 * MiB + 333)
    await wire.put_object(bucket, "r", data)
    pool = bytearray(2 * MiB)
    view = memoryview(pool)[1000 : 1000 + 4096]
    n, info = await wire.get_object_into(bucket, "r", view, offset=12345, length=4096)
    assert n == 4096
    assert pool[1000:5096] == data[12345 : 12345 + 4096]
    assert info.size == len(data)
    assert pool[:1000] == bytes(1000)
    assert pool[5096:] == bytes(len(pool) - 5096)
    # To the end, without a length.
    n, info = await wire.get_object_into(bucket, "r", pool, offset=len(data) - 100)
    assert n == 100
    assert pool[:100] == data[-100:]
    # Bytes: the same ranges.
    tail, _ = await wire.get_object(bucket, "r", offset=1 * MiB, length=500)
    assert bytes(tail) == data[1 * MiB : 1 * MiB + 333]  # fewer only at the end
    # Past the end: InvalidRange, status 416.
    with pytest.raises(BackendError) as past:
        await wire.get_object(bucket, "r", offset=len(data) + 10)
    assert past.value.status == 416
    assert s3_code(past.value) == "InvalidRange"
    # A whole object larger than the buffer is refused, not truncated.
    with pytest.raises(BackendError, match="does not fit"):
        await wire.get_object_into(bucket, "r", bytearray(1000))
    with pytest.raises(ValueError, match="does not fit"):
        await wire.get_object_into(bucket, "r", bytearray(10), length=20)


async def test_if_match(wire: S3Wire, bucket: str) -> None:
    info = await wire.put_object(bucket, "v", b"version 1")
    assert info.etag
    data, _ = await wire.get_object(bucket, "v", offset=2, length=3, if_match=info.etag)
    assert bytes(data) == b"rsi"
    await wire.put_object(bucket, "v", b"version 2")
    with pytest.raises(PreconditionFailed):
        await wire.get_object(bucket, "v", offset=2, length=3, if_match=info.etag)
    with pytest.raises(PreconditionFailed):
        await wire.get_object_into(bucket, "v", bytearray(3), offset=2, length=3,
                                   if_match=info.etag)  # fmt: skip
    with pytest.raises(PreconditionFailed):
        await wire.head_object(bucket, "v", if_match=info.etag)


async def test_listing_pagination_with_odd_keys(wire: S3Wire, bucket: str) -> None:
    keys = sorted(["d/" + k for k in ODD_KEYS] + ["d/sub/x", "d/sub/y", "e"])
    for k in keys:
        await wire.put_object(bucket, k, k.encode())
    seen: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        page = await wire.list_objects_v2(bucket, prefix="d/", continuation_token=token,
                                          max_keys=4)  # fmt: skip
        pages += 1
        assert len(page.objects) <= 4
        seen += [o.key for o in page.objects]
        assert all(o.size == len(o.key.encode()) for o in page.objects)
        if not page.truncated:
            break
        token = page.next_token
    assert pages == -(-(len(keys) - 1) // 4)
    assert seen == [k for k in keys if k.startswith("d/")]
    grouped = await wire.list_objects_v2(bucket, prefix="d/", delimiter="/")
    rests = [k[2:] for k in keys if k.startswith("d/")]
    assert grouped.prefixes == sorted({"d/" + r.split("/")[0] + "/" for r in rests if "/" in r})
    assert "d/sub/" in grouped.prefixes
    assert [o.key for o in grouped.objects] == ["d/" + r for r in rests if "/" not in r]
    after = await wire.list_objects_v2(bucket, start_after="d/tilde~x")
    assert [o.key for o in after.objects] == [k for k in keys if k > "d/tilde~x"]


async def test_multipart_round_trip(wire: S3Wire, bucket: str, boto: Any) -> None:
    key = "mp/odd key+ü"
    p1 = random.Random(11).randbytes(5 * MiB)
    p2 = b"the last part"
    upload_id = await wire.create_multipart_upload(bucket, key, metadata={"mtime": "99.25"})
    e2 = await wire.upload_part(bucket, key, upload_id, 2, p2, content_md5=_b64md5(p2))
    e1 = await wire.upload_part(bucket, key, upload_id, 1, memoryview(p1))
    assert e1 == hashlib.md5(p1).hexdigest()
    first = await wire.list_parts(bucket, key, upload_id, max_parts=1)
    assert [p.number for p in first.parts] == [1]
    assert first.truncated
    rest = await wire.list_parts(bucket, key, upload_id, marker=first.next_marker or 0)
    assert [(p.number, p.etag, p.size) for p in rest.parts] == [(2, e2, len(p2))]
    uploads = await wire.list_multipart_uploads(bucket, prefix="mp/")
    assert [(u.key, u.upload_id) for u in uploads.uploads] == [(key, upload_id)]
    done = await wire.complete_multipart_upload(bucket, key, upload_id, [(1, e1), (2, e2)])
    assert done.etag is not None
    assert done.etag.endswith("-2")
    info = await wire.head_object(bucket, key)
    assert (info.size, info.etag, info.metadata) == (len(p1) + len(p2), done.etag,
                                                     {"mtime": "99.25"})  # fmt: skip
    theirs = boto.get_object(Bucket=bucket, Key=key)
    assert theirs["Body"].read() == p1 + p2
    assert theirs["Metadata"] == {"mtime": "99.25"}
    assert (await wire.list_multipart_uploads(bucket, prefix="mp/")).uploads == []


async def test_abort_and_bad_parts(wire: S3Wire, bucket: str) -> None:
    upload_id = await wire.create_multipart_upload(bucket, "ab")
    await wire.upload_part(bucket, "ab", upload_id, 1, b"x")
    with pytest.raises(BackendError) as bad:
        await wire.complete_multipart_upload(bucket, "ab", upload_id, [(1, "0" * 32)])
    assert s3_code(bad.value) == "InvalidPart"
    await wire.abort_multipart_upload(bucket, "ab", upload_id)
    with pytest.raises(NotFound):
        await wire.list_parts(bucket, "ab", upload_id)
    with pytest.raises(NotFound):
        await wire.abort_multipart_upload(bucket, "ab", upload_id)


async def test_deletes(wire: S3Wire, bucket: str) -> None:
    keys = ["a&b<c>", "quote'\"", "ü x", "plain"]
    for k in keys:
        await wire.put_object(bucket, k, b"1")
    await wire.delete_object(bucket, "plain")
    await wire.delete_object(bucket, "plain")  # missing: fine
    errors = await wire.delete_objects(bucket, [*keys[:3], "never-existed"])
    assert errors == []
    assert (await wire.list_objects_v2(bucket)).objects == []
    with pytest.raises(BucketNotFound):
        await wire.delete_objects(f"missing-{uuid.uuid4().hex[:8]}", ["x"])


async def test_copies(wire: S3Wire, bucket: str) -> None:
    src = "src/+ü %"
    data = random.Random(2).randbytes(6 * MiB)
    info = await wire.put_object(bucket, src, data, metadata={"mtime": "5"}, content_type="a/b")
    kept = await wire.copy_object(bucket, "dst1", bucket, src, if_match=info.etag)
    assert kept.etag == info.etag
    head = await wire.head_object(bucket, "dst1")
    assert (head.metadata, head.content_type) == ({"mtime": "5"}, "a/b")
    await wire.copy_object(bucket, "dst2", bucket, src, metadata={"mtime": "6"},
                           content_type="c/d", replace_metadata=True)  # fmt: skip
    head = await wire.head_object(bucket, "dst2")
    assert (head.metadata, head.content_type) == ({"mtime": "6"}, "c/d")
    # (moto ignores x-amz-copy-source-if-match: see the SeaweedFS copy test.)
    # UploadPartCopy: two ranges of the source make a copy of it.
    upload_id = await wire.create_multipart_upload(bucket, "dst4")
    half = 5 * MiB
    c1 = await wire.upload_part_copy(bucket, "dst4", upload_id, 1, bucket, src, first=0,
                                     last=half - 1, if_match=info.etag)  # fmt: skip
    c2 = await wire.upload_part_copy(bucket, "dst4", upload_id, 2, bucket, src, first=half,
                                     last=len(data) - 1)  # fmt: skip
    assert c1.etag
    assert c2.etag
    await wire.complete_multipart_upload(bucket, "dst4", upload_id, [(1, c1.etag), (2, c2.etag)])
    copied, _ = await wire.get_object(bucket, "dst4")
    assert bytes(copied) == data


async def test_errors_are_mapped(wire: S3Wire, bucket: str) -> None:
    with pytest.raises(NotFound) as missing:
        await wire.get_object(bucket, "nope")
    assert not isinstance(missing.value, BucketNotFound)
    assert s3_code(missing.value) == "NoSuchKey"
    assert missing.value.status == 404
    assert f"s3://{bucket}/nope" in str(missing.value)
    with pytest.raises(NotFound):
        await wire.head_object(bucket, "nope")
    other = f"missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(BucketNotFound, match=other):
        await wire.get_object(other, "k")
    with pytest.raises(BucketNotFound):
        await wire.list_objects_v2(other)
    with pytest.raises(BackendError, match="printable ASCII"):
        await wire.put_object(bucket, "m", b"", metadata={"note": "naïve"})
    with pytest.raises(ValueError, match="non-empty key"):
        await wire.get_object(bucket, "")


async def test_many_concurrent_requests_share_the_pool(wire: S3Wire, bucket: str) -> None:
    data = random.Random(9).randbytes(256 * 1024)
    await asyncio.gather(*(wire.put_object(bucket, f"c/{i}", data) for i in range(40)))
    buffers = [bytearray(len(data)) for _ in range(40)]
    results = await asyncio.gather(
        *(wire.get_object_into(bucket, f"c/{i}", buffers[i]) for i in range(40))
    )
    assert all(n == len(data) for n, _ in results)
    assert all(b == data for b in buffers)


# -- S3Wire against SeaweedFS, which checks signatures ------------------------------------------


@pytest.fixture
async def sw(seaweed: Any) -> AsyncIterator[S3Wire]:
    creds = Credentials(seaweed.access_key, seaweed.secret_key)
    async with S3Wire(
        region="us-east-1", credentials=StaticCredentials(creds), endpoint_url=seaweed.endpoint_url
    ) as w:
        yield w
        page = await w.list_objects_v2(seaweed.bucket)
        if page.objects:
            await w.delete_objects(seaweed.bucket, [o.key for o in page.objects])


@pytest.fixture
def sw_boto(seaweed: Any) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=seaweed.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=seaweed.access_key,
        aws_secret_access_key=seaweed.secret_key,
        aws_session_token=None,
    )


async def test_seaweed_signed_requests_with_odd_keys(
    sw: S3Wire, seaweed: Any, sw_boto: Any
) -> None:
    b = seaweed.bucket
    for i, key in enumerate(PORTABLE_KEYS):
        data = f"{i}:{key}".encode()
        await sw.put_object(b, key, data, content_md5=_b64md5(data), metadata={"mtime": str(i)})
        assert (await sw.head_object(b, key)).metadata == {"mtime": str(i)}
        got, _ = await sw.get_object(b, key, offset=1, length=3)
        assert bytes(got) == data[1:4]
        theirs = sw_boto.get_object(Bucket=b, Key=key)
        assert theirs["Body"].read() == data
        assert theirs["Metadata"] == {"mtime": str(i)}
    seen: list[str] = []
    token: str | None = None
    while True:
        page = await sw.list_objects_v2(b, continuation_token=token, max_keys=5)
        seen += [o.key for o in page.objects]
        if not page.truncated:
            break
        token = page.next_token
    assert sorted(seen) == sorted(PORTABLE_KEYS)
    odd_prefix = await sw.list_objects_v2(b, prefix="k=v&")
    assert [o.key for o in odd_prefix.objects] == ["k=v&x=y"]
    assert await sw.delete_objects(b, PORTABLE_KEYS[:5]) == []
    await sw.delete_object(b, PORTABLE_KEYS[5])
    left = await sw.list_objects_v2(b)
    assert sorted(o.key for o in left.objects) == sorted(PORTABLE_KEYS[6:])


async def test_seaweed_multipart_with_crc32c_and_interop(
    sw: S3Wire, seaweed: Any, sw_boto: Any
) -> None:
    import google_crc32c

    def crc(data: bytes) -> str:
        return base64.b64encode(google_crc32c.value(data).to_bytes(4, "big")).decode()

    b, key = seaweed.bucket, "multi part/ü+x"
    p1, p2 = random.Random(4).randbytes(5 * MiB), b"tail bytes"
    upload_id = await sw.create_multipart_upload(b, key, metadata={"mtime": "1.25"})
    e1 = await sw.upload_part(b, key, upload_id, 1, p1, checksums={"crc32c": crc(p1)})
    e2 = await sw.upload_part(b, key, upload_id, 2, p2, checksums={"crc32c": crc(p2)})
    parts = await sw.list_parts(b, key, upload_id)
    assert [p.number for p in parts.parts] == [1, 2]
    await sw.complete_multipart_upload(b, key, upload_id, [(1, e1), (2, e2)])
    buf = bytearray(len(p1) + len(p2))
    n, info = await sw.get_object_into(b, key, buf)
    assert n == len(buf)
    assert buf == p1 + p2
    assert info.metadata == {"mtime": "1.25"}
    theirs = sw_boto.get_object(Bucket=b, Key=key)
    assert theirs["Body"].read() == p1 + p2
    assert theirs["Metadata"] == {"mtime": "1.25"}
    # A single PUT's CRC32C is verified by the server: a wrong one is refused.
    assert (await sw.put_object(b, "c", b"hello", checksums={"crc32c": crc(b"hello")})).etag
    with pytest.raises(TransientError) as bad:  # BadDigest: corrupted in transit, retry
        await sw.put_object(b, "c2", b"hellx", checksums={"crc32c": crc(b"hello")})
    assert s3_code(bad.value) == "BadDigest"
    # botocore's multipart objects read back through us.
    mp = sw_boto.create_multipart_upload(Bucket=b, Key="boto mp", Metadata={"mtime": "3"})
    t1 = sw_boto.upload_part(Bucket=b, Key="boto mp", UploadId=mp["UploadId"], PartNumber=1,
                             Body=p1)["ETag"]  # fmt: skip
    t2 = sw_boto.upload_part(Bucket=b, Key="boto mp", UploadId=mp["UploadId"], PartNumber=2,
                             Body=p2)["ETag"]  # fmt: skip
    sw_boto.complete_multipart_upload(
        Bucket=b,
        Key="boto mp",
        UploadId=mp["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": t1}, {"PartNumber": 2, "ETag": t2}]},
    )
    n, info = await sw.get_object_into(b, "boto mp", buf)
    assert buf == p1 + p2
    assert info.metadata == {"mtime": "3"}


async def test_seaweed_refuses_a_wrong_secret_and_a_skewed_clock(sw: S3Wire, seaweed: Any) -> None:
    b = seaweed.bucket
    await sw.put_object(b, "secret test", b"x")
    wrong = S3Wire(
        region="us-east-1",
        credentials=StaticCredentials(Credentials(seaweed.access_key, "not-the-secret")),
        endpoint_url=seaweed.endpoint_url,
    )
    unknown = S3Wire(
        region="us-east-1",
        credentials=StaticCredentials(Credentials("NOSUCHKEY", seaweed.secret_key)),
        endpoint_url=seaweed.endpoint_url,
    )
    skewed = S3Wire(
        region="us-east-1",
        credentials=StaticCredentials(Credentials(seaweed.access_key, seaweed.secret_key)),
        endpoint_url=seaweed.endpoint_url,
        clock=lambda: datetime.datetime.now().timestamp() - 3600,
    )
    try:
        with pytest.raises(PermissionDenied, match="check the credentials") as denied:
            await wrong.get_object(b, "secret test")
        assert s3_code(denied.value) == "SignatureDoesNotMatch"
        assert "not-the-secret" not in str(denied.value)
        with pytest.raises(PermissionDenied):
            await wrong.head_object(b, "secret test")
        with pytest.raises(PermissionDenied):
            await wrong.put_object(b, "odd key+=&", b"y")
        with pytest.raises(PermissionDenied):
            await unknown.list_objects_v2(b)
        with pytest.raises(PermissionDenied, match="clock") as skew:
            await skewed.get_object(b, "secret test")
        assert s3_code(skew.value) == "RequestTimeTooSkewed"
    finally:
        for w in (wrong, unknown, skewed):
            await w.aclose()
    # The right credentials still work on the same server.
    assert bytes((await sw.get_object(b, "secret test"))[0]) == b"x"


async def test_seaweed_copies_and_missing_uploads(sw: S3Wire, seaweed: Any) -> None:
    b, src = seaweed.bucket, "copy src/+ü=&"
    data = random.Random(6).randbytes(5 * MiB + 100)
    info = await sw.put_object(b, src, data, metadata={"mtime": "4"})
    assert info.etag is not None
    done = await sw.copy_object(b, "copy dst+1", b, src, if_match=info.etag)
    assert done.etag == info.etag
    assert (await sw.head_object(b, "copy dst+1")).metadata == {"mtime": "4"}
    with pytest.raises(PreconditionFailed):
        await sw.copy_object(b, "copy dst+2", b, src, if_match="0" * 32)
    upload_id = await sw.create_multipart_upload(b, "copy dst+3")
    c1 = await sw.upload_part_copy(
        b, "copy dst+3", upload_id, 1, b, src, first=0, last=5 * MiB - 1, if_match=info.etag
    )
    c2 = await sw.upload_part_copy(b, "copy dst+3", upload_id, 2, b, src, first=5 * MiB,
                                   last=len(data) - 1)  # fmt: skip
    with pytest.raises(PreconditionFailed):
        await sw.upload_part_copy(b, "copy dst+3", upload_id, 3, b, src, if_match="0" * 32)
    assert c1.etag
    assert c2.etag
    await sw.complete_multipart_upload(b, "copy dst+3", upload_id, [(1, c1.etag), (2, c2.etag)])
    copied, _ = await sw.get_object(b, "copy dst+3")
    assert bytes(copied) == data
    with pytest.raises(NotFound) as gone:
        await sw.complete_multipart_upload(b, "copy dst+3", "no-such-upload", [(1, c1.etag)])
    assert s3_code(gone.value) == "NoSuchUpload"
    with pytest.raises(NotFound):
        await sw.abort_multipart_upload(b, "copy dst+3", "no-such-upload")
