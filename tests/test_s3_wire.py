"""S3Wire, synxfer's own S3 data plane: the signer, XML, credentials.

Real parts throughout: botocore's own signer for the signature table (ours
must produce exactly its requests, call by call). The HTTP client's edge
cases on raw servers are in ``tests/test_s3_http.py``; every call against
moto and against SeaweedFS with auth on in ``tests/test_s3_wire_servers.py``.
"""

from __future__ import annotations

import asyncio
import base64
import calendar
import datetime
import hashlib
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import unquote, urlsplit

import pytest

from synxfer import ConfigError, PermissionDenied
from synxfer.backend import HttpClient, HttpResponse
from synxfer_s3._core import S3Wire
from synxfer_s3._credentials import (
    Credentials,
    StaticCredentials,
    credentials_from_env,
    resolve_credentials,
    resolve_region,
)
from synxfer_s3._sigv4 import SigV4Signer, canonical_query, quote_path
from synxfer_s3._wire import (
    XmlError,
    complete_multipart_body,
    delete_body,
    parse_error,
    parse_http_date,
    parse_iso_date,
    parse_list_buckets,
    parse_list_objects_v2,
)

from ._s3server import ODD_KEYS

# -- the signature table: ours against botocore's S3SigV4Auth --------------------------

FIXED = datetime.datetime(2024, 5, 6, 7, 8, 9)
FIXED_EPOCH = float(calendar.timegm(FIXED.timetuple()))
ACCESS, SECRET, TOKEN = "AKIDEXAMPLE", "wJalr/K7MDENG+bPxRfiCYEXAMPLEKEY", "tok/en+1=="


class _Captured(Exception):
    pass


def _botocore_client(endpoint: str | None, region: str, addressing: str, token: str | None) -> Any:
    import botocore.session
    from botocore.config import Config

    session = botocore.session.Session()
    client = session.create_client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=ACCESS,
        aws_secret_access_key=SECRET,
        aws_session_token=token,
        config=Config(
            s3={"addressing_style": addressing, "payload_signing_enabled": False},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"total_max_attempts": 1},
        ),
    )

    def grab(request: Any, **kwargs: Any) -> None:
        raise _Captured(request)

    client.meta.events.register("before-send.s3", grab)
    return client


def _botocore_request(client: Any, op: str, **params: Any) -> Any:
    """The request botocore would send for ``op`` (signed at FIXED).

    Signed by botocore's own Python signers (``S3SigV4Auth``), also when
    awscrt is installed (botocore then signs with CRT, whose clock this
    does not fix).
    """
    import botocore.auth as auth

    python_v4 = {
        "v4": auth.SigV4Auth,
        "v4-query": auth.SigV4QueryAuth,
        "s3v4": auth.S3SigV4Auth,
        "s3v4-query": auth.S3SigV4QueryAuth,
    }
    with (
        mock.patch.dict(auth.AUTH_TYPE_MAPS, python_v4),
        mock.patch("botocore.auth.get_current_datetime", return_value=FIXED),
    ):
        try:
            getattr(client, op)(**params)
        except _Captured as captured:
            return captured.args[0]
    raise AssertionError("botocore sent nothing")


def _signed_headers(authorization: str) -> list[str]:
    return authorization.split("SignedHeaders=", 1)[1].split(",", 1)[0].split(";")


def _header(request: Any, name: str) -> str:
    for k, v in request.headers.items():
        if k.lower() == name:
            return v.decode() if isinstance(v, bytes) else str(v)
    raise KeyError(name)


def _query_items(query: str) -> list[tuple[str, str | None]]:
    """Decode botocore's (encoded) URL query into the raw items our signer takes."""
    items: list[tuple[str, str | None]] = []
    for pair in query.split("&") if query else []:
        k, eq, v = pair.partition("=")
        items.append((unquote(k), unquote(v) if eq else None))
    return items


def _signature_cases() -> Iterator[tuple[str, str, dict[str, Any]]]:
    md5 = base64.b64encode(hashlib.md5(b"x").digest()).decode()
    for key in ODD_KEYS:
        yield key, "get_object", {"Key": key}
        yield key, "head_object", {"Key": key, "IfMatch": '"abc"'}
        yield key, "put_object", {"Key": key, "Body": b"x", "ContentMD5": md5}
    key = "odd key/+%~=&?#//ü/"
    yield key, "get_object", {"Key": key, "Range": "bytes=5-9", "IfMatch": '"e"'}
    yield key, "put_object", {"Key": key, "Body": b"x", "Metadata": {"mtime": "1.5"}}
    yield key, "create_multipart_upload", {"Key": key, "Metadata": {"mtime": "2"}}
    yield key, "upload_part", {"Key": key, "UploadId": "u+/=%id", "PartNumber": 3, "Body": b"x"}
    yield key, "list_parts", {"Key": key, "UploadId": "u+/=id", "PartNumberMarker": 2}
    yield key, "abort_multipart_upload", {"Key": key, "UploadId": "u+/=id"}
    parts = {"Parts": [{"PartNumber": 1, "ETag": '"a"'}, {"PartNumber": 2, "ETag": '"b"'}]}
    yield key, "complete_multipart_upload", {"Key": key, "UploadId": "u", "MultipartUpload": parts}
    yield key, "delete_object", {"Key": key}
    yield key, "delete_objects", {"Delete": {"Objects": [{"Key": key}, {"Key": "a&b"}]}}
    copy = {"Bucket": "src-bkt", "Key": key}
    yield key, "copy_object", {"Key": "dst", "CopySource": copy, "MetadataDirective": "COPY"}
    yield (
        key,
        "upload_part_copy",
        {
            "Key": "dst",
            "UploadId": "u",
            "PartNumber": 2,
            "CopySource": copy,
            "CopySourceRange": "bytes=0-99",
            "CopySourceIfMatch": '"e"',
        },
    )
    for prefix in ["", "x y/+=&?#%", "ü/"]:
        yield (
            prefix,
            "list_objects_v2",
            {
                "Prefix": prefix,
                "ContinuationToken": "a/b+c==&d",
                "StartAfter": prefix + "~",
                "MaxKeys": 7,
                "Delimiter": "/",
            },
        )
    yield "", "list_objects_v2", {}
    yield (
        key,
        "list_multipart_uploads",
        {"Prefix": key, "KeyMarker": key, "UploadIdMarker": "u+1"},
    )


_ENDPOINTS = [
    # (endpoint_url, region, addressing)
    ("http://127.0.0.1:9000", "us-east-1", "path"),
    ("http://s3.example.test:8333", "eu-west-3", "virtual"),
    (None, "eu-west-3", "virtual"),  # AWS itself, https, default port
]


@pytest.mark.parametrize("endpoint", _ENDPOINTS, ids=["path-ip", "virtual-port", "aws"])
@pytest.mark.parametrize("token", [None, TOKEN], ids=["no-token", "token"])
def test_signer_matches_botocore(endpoint: tuple[str | None, str, str], token: str | None) -> None:
    """For every case, botocore's URL and signed headers, signed by us, give botocore's
    Authorization -- and our encoding of the raw query gives botocore's canonical query."""
    url, region, addressing = endpoint
    client = _botocore_client(url, region, addressing, token)
    signer = SigV4Signer(region)
    cases = list(_signature_cases())
    assert len(cases) > 60
    for key, op, params in cases:
        request = _botocore_request(client, op, Bucket="bkt", **params)
        parts = urlsplit(request.url)
        expected = _header(request, "authorization")
        names = _signed_headers(expected)
        ours = {
            n: _header(request, n)
            for n in names
            if n not in ("host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token")
        }
        canonical, _ = canonical_query(_query_items(parts.query))
        host = parts.netloc
        signed = signer.sign(
            request.method,
            host,
            parts.path,
            canonical,
            ours,
            access_key=ACCESS,
            secret_key=SECRET,
            token=token,
            timestamp="20240506T070809Z",
        )
        assert signed["authorization"] == expected, (op, key)
        assert signed["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
        if token:
            assert signed["x-amz-security-token"] == token


def test_signing_keeps_the_gil() -> None:
    """The signer never calls ``hmac.digest``, which gives up the GIL on every call:
    on the event loop, getting it back from a busy worker thread cost ~0.13 ms a
    request (issue 10). Same signature either way."""
    import hmac

    def sign() -> dict[str, str]:
        headers = {"range": "bytes=0-9"}
        return SigV4Signer("us-east-1").sign(
            "GET",
            "127.0.0.1:9000",
            "/bkt/key",
            "",
            headers,
            access_key=ACCESS,
            secret_key=SECRET,
            timestamp="20240506T070809Z",
        )

    expected = sign()
    with mock.patch.object(hmac, "digest", side_effect=AssertionError("hmac.digest called")):
        assert sign() == expected


class _RecordingHttp(HttpClient):
    """Records the request S3Wire would send, then raises (nothing is sent)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[dict[str, Any]] = []

    async def request(self, method: str, scheme: str, host: str, port: int, target: str,
                      headers: Any, body: Any = None, **kwargs: Any) -> HttpResponse:  # fmt: skip
        self.sent.append(
            {
                "method": method,
                "scheme": scheme,
                "host": host,
                "port": port,
                "target": target,
                "headers": dict(headers),
            }
        )
        raise _Captured()


async def _wire_request(wire: S3Wire, call: Callable[[S3Wire], Awaitable[Any]]) -> dict[str, Any]:
    http = wire._http
    assert isinstance(http, _RecordingHttp)
    with pytest.raises(_Captured):
        await call(wire)
    return http.sent[-1]


def _wire_cases(key: str) -> list[tuple[str, dict[str, Any], Callable[[S3Wire], Awaitable[Any]]]]:
    md5 = base64.b64encode(hashlib.md5(b"x").digest()).decode()
    b = "bkt"
    copy = {"Bucket": "src-bkt", "Key": key}
    parts = {"Parts": [{"PartNumber": 1, "ETag": '"a"'}, {"PartNumber": 2, "ETag": '"b"'}]}
    return [
        ("get_object", {"Key": key}, lambda w: w.get_object(b, key)),
        (
            "get_object",
            {"Key": key, "Range": "bytes=5-9", "IfMatch": '"e"'},
            lambda w: w.get_object(b, key, offset=5, length=5, if_match="e"),
        ),
        ("head_object", {"Key": key}, lambda w: w.head_object(b, key)),
        (
            "put_object",
            {"Key": key, "Body": b"x", "ContentMD5": md5, "Metadata": {"mtime": "1.5"}},
            lambda w: w.put_object(b, key, b"x", content_md5=md5, metadata={"mtime": "1.5"}),
        ),
        (
            "create_multipart_upload",
            {"Key": key, "Metadata": {"mtime": "2"}},
            lambda w: w.create_multipart_upload(b, key, metadata={"mtime": "2"}),
        ),
        (
            "upload_part",
            {"Key": key, "UploadId": "u+/=%id", "PartNumber": 3, "Body": b"x", "ContentMD5": md5},
            lambda w: w.upload_part(b, key, "u+/=%id", 3, b"x", content_md5=md5),
        ),
        (
            "complete_multipart_upload",
            {"Key": key, "UploadId": "u", "MultipartUpload": parts},
            lambda w: w.complete_multipart_upload(b, key, "u", [(1, "a"), (2, "b")]),
        ),
        (
            "abort_multipart_upload",
            {"Key": key, "UploadId": "u+/=id"},
            lambda w: w.abort_multipart_upload(b, key, "u+/=id"),
        ),
        (
            "list_parts",
            {"Key": key, "UploadId": "u+/=id", "PartNumberMarker": 2},
            lambda w: w.list_parts(b, key, "u+/=id", marker=2),
        ),
        ("delete_object", {"Key": key}, lambda w: w.delete_object(b, key)),
        (
            "copy_object",
            {"Key": "dst", "CopySource": copy, "MetadataDirective": "COPY"},
            lambda w: w.copy_object(b, "dst", "src-bkt", key),
        ),
        (
            "upload_part_copy",
            {
                "Key": "dst",
                "UploadId": "u",
                "PartNumber": 2,
                "CopySource": copy,
                "CopySourceRange": "bytes=0-99",
                "CopySourceIfMatch": '"e"',
            },
            lambda w: w.upload_part_copy(
                b, "dst", "u", 2, "src-bkt", key, first=0, last=99, if_match="e"
            ),
        ),
        (
            "list_objects_v2",
            {"Prefix": key, "ContinuationToken": "a/b+c==&d", "MaxKeys": 7, "StartAfter": key},
            lambda w: w.list_objects_v2(
                b, prefix=key, continuation_token="a/b+c==&d", max_keys=7, start_after=key
            ),
        ),
        ("list_objects_v2", {}, lambda w: w.list_objects_v2(b)),
        (
            "list_multipart_uploads",
            {"Prefix": key, "KeyMarker": key, "UploadIdMarker": "u+1"},
            lambda w: w.list_multipart_uploads(
                b, prefix=key, key_marker=key, upload_id_marker="u+1"
            ),
        ),
    ]


@pytest.mark.parametrize("endpoint", _ENDPOINTS, ids=["path-ip", "virtual-port", "aws"])
async def test_wire_requests_match_botocore(endpoint: tuple[str | None, str, str]) -> None:
    """S3Wire sends what botocore sends: method, host, path, query and signature."""
    url, region, addressing = endpoint
    client = _botocore_client(url, region, addressing, TOKEN)
    wire = S3Wire(
        region=region,
        credentials=StaticCredentials(Credentials(ACCESS, SECRET, TOKEN)),
        endpoint_url=url,
        addressing="path" if addressing == "path" else "virtual",
        http=_RecordingHttp(),
        clock=lambda: FIXED_EPOCH,
    )
    checked = 0
    for key in ["plain", "odd key/+%~=&?#//ü/", "a//b/", "k=v&x"]:
        for op, params, call in _wire_cases(key):
            theirs = _botocore_request(client, op, Bucket="bkt", **params)
            ours = await _wire_request(wire, call)
            parts = urlsplit(theirs.url)
            path, _, query = ours["target"].partition("?")
            assert ours["method"] == theirs.method, op
            assert path == parts.path, (op, key)
            assert canonical_query(_query_items(query)) == canonical_query(
                _query_items(parts.query)
            ), (op, key)
            assert ours["headers"]["host"] == parts.netloc, op
            assert ours["scheme"] == parts.scheme
            assert ours["headers"]["authorization"] == _header(theirs, "authorization"), (op, key)
            checked += 1
    assert checked == 4 * 15


def test_quote_path_is_botocore_key_encoding() -> None:
    from botocore.utils import percent_encode

    for key in [*ODD_KEYS, "".join(chr(c) for c in range(32, 127)), "\u00e9\u4e2d\U0001f600"]:
        assert quote_path(key) == percent_encode(key, safe="/~"), key


# -- XML and dates ---------------------------------------------------------------------


def test_listing_with_url_encoding_is_decoded() -> None:
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<Name>b</Name><Prefix>a%20b</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
        b"<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
        b"<Contents><Key>a+b%2Bc%25d</Key><LastModified>2024-01-02T03:04:05.500Z</LastModified>"
        b"<ETag>&quot;abc&quot;</ETag><Size>12</Size><StorageClass>STANDARD</StorageClass>"
        b"</Contents>"
        b"<Contents><Key>ctrl%01%0D</Key><LastModified>2024-01-02T03:04:05Z</LastModified>"
        b'<ETag>"def-2"</ETag><Size>0</Size></Contents>'
        b"<CommonPrefixes><Prefix>dir%2F+x/</Prefix></CommonPrefixes>"
        b"<NextContinuationToken>tok+/=</NextContinuationToken></ListBucketResult>"
    )
    page = parse_list_objects_v2(body)
    assert [o.key for o in page.objects] == ["a b+c%d", "ctrl\x01\r"]
    assert [o.etag for o in page.objects] == ["abc", "def-2"]
    assert page.objects[0].size == 12
    assert page.objects[0].mtime == 1704164645.5
    assert page.prefixes == ["dir/ x/"]
    assert page.truncated
    assert page.next_token == "tok+/="  # tokens are never URL-encoded


def test_listing_without_encoding_keeps_keys() -> None:
    body = (
        b"<ListBucketResult><IsTruncated>false</IsTruncated>"
        b"<Contents><Key>a+b%20&amp;</Key><Size>1</Size></Contents></ListBucketResult>"
    )
    page = parse_list_objects_v2(body)
    assert [o.key for o in page.objects] == ["a+b%20&"]
    assert not page.truncated
    assert page.next_token is None


def test_bucket_lists() -> None:
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        b'<ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<Owner><ID>o</ID></Owner><Buckets>"
        b"<Bucket><Name>a.b-c</Name><CreationDate>2024-01-02T03:04:05.000Z</CreationDate>"
        b"<BucketRegion>eu-west-1</BucketRegion></Bucket>"
        b"<Bucket><Name>d</Name></Bucket>"
        b"</Buckets><ContinuationToken>tok/+=</ContinuationToken></ListAllMyBucketsResult>"
    )
    page = parse_list_buckets(body)
    assert [(b.name, b.created) for b in page.buckets] == [("a.b-c", 1704164645.0), ("d", None)]
    assert page.next_token == "tok/+="
    # No namespace, no token (the last page, or a server that does not page it).
    page = parse_list_buckets(b"<ListAllMyBucketsResult><Buckets/></ListAllMyBucketsResult>")
    assert page == ([], None)
    with pytest.raises(XmlError, match="without a <Name>"):
        parse_list_buckets(
            b"<ListAllMyBucketsResult><Buckets><Bucket/></Buckets></ListAllMyBucketsResult>"
        )
    with pytest.raises(XmlError, match="got an <Error>"):
        parse_list_buckets(b"<Error><Code>AccessDenied</Code></Error>")


def test_dates() -> None:
    assert parse_iso_date("2024-01-02T03:04:05.000Z") == 1704164645.0
    assert parse_iso_date("2024-01-02T03:04:05") == 1704164645.0
    assert parse_iso_date("garbage") is None
    assert parse_http_date("Tue, 02 Jan 2024 03:04:05 GMT") == 1704164645.0
    assert parse_http_date("Tuesday, 02-Jan-24 03:04:05 GMT") == 1704164645.0
    assert parse_http_date("Tue, 02 Jan 2024 04:04:05 +0100") == 1704164645.0
    assert parse_http_date("nonsense") is None
    assert parse_http_date(None) is None


def test_error_bodies() -> None:
    info = parse_error(
        b"<Error><Code>NoSuchKey</Code><Message>gone</Message><RequestId>r</RequestId></Error>"
    )
    assert info is not None
    assert (info.code, info.message, info.request_id) == (
        "NoSuchKey",
        "gone",
        "r",
    )
    assert parse_error(b"<html>Bad Gateway</html>") is None
    assert parse_error(b"") is None


def test_request_bodies_escape_keys() -> None:
    body = delete_body(["a&b", "<x>", "cr\rlf\n"]).decode()
    assert "<Key>a&amp;b</Key><" in body
    assert "<Key>&lt;x&gt;</Key>" in body
    assert "<Key>cr&#13;lf\n</Key>" in body  # a raw CR would come back as LF
    with pytest.raises(ValueError, match=r"XML 1\.0"):
        delete_body(["bad\x01"])
    import xml.etree.ElementTree as ET

    root = ET.fromstring(body)
    keys = [e.text for e in root.iter("{http://s3.amazonaws.com/doc/2006-03-01/}Key")]
    assert keys == ["a&b", "<x>", "cr\rlf\n"]
    complete = complete_multipart_body([(1, "a"), (2, '"b"', {"crc32c": "AAAAAA=="})]).decode()
    assert '<Part><ETag>"a"</ETag><PartNumber>1</PartNumber></Part>' in complete
    assert "<ChecksumCRC32C>AAAAAA==</ChecksumCRC32C><PartNumber>2</PartNumber>" in complete


# -- credentials -------------------------------------------------------------------------


async def test_env_credentials_need_no_botocore(monkeypatch: pytest.MonkeyPatch) -> None:
    """With env credentials and no profile, botocore's chain is never consulted."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret-never-shown")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "env-token-never-shown")
    monkeypatch.setenv("AWS_REGION", "eu-north-1")
    monkeypatch.setitem(sys.modules, "botocore.session", None)  # importing it would fail
    source = await resolve_credentials(None)
    creds = await source.get()
    assert (creds.access_key, creds.secret_key, creds.token) == (
        "AKIAENV",
        "env-secret-never-shown",
        "env-token-never-shown",
    )
    assert await resolve_region(None) == "eu-north-1"
    assert await resolve_region(None, explicit="ap-south-1") == "ap-south-1"
    for text in (repr(creds), str(creds), repr(source)):
        assert "never-shown" not in text
        assert "AKIAENV" not in text


async def test_profile_credentials_and_region_through_botocore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    config.write_text("[profile work]\nregion = sa-east-1\n")
    shared = tmp_path / "credentials"
    shared.write_text(
        "[work]\naws_access_key_id = AKIAPROFILE\naws_secret_access_key = profile-secret\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(shared))
    # (botocore lets AWS_DEFAULT_REGION win over a profile's region.)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    # The environment's keys lose to an explicitly chosen profile.
    source = await resolve_credentials("work")
    creds = await source.get()
    assert (creds.access_key, creds.secret_key, creds.token) == (
        "AKIAPROFILE",
        "profile-secret",
        None,
    )
    assert "profile-secret" not in repr(source) + repr(creds)
    assert await resolve_region("work") == "sa-east-1"
    with pytest.raises(ConfigError, match="nope"):
        await resolve_credentials("nope")


async def test_no_credentials_is_permission_denied(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    # Nothing may leave the machine: no instance or container metadata lookups.
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    assert credentials_from_env() is None
    with pytest.raises(PermissionDenied, match="AWS_ACCESS_KEY_ID"):
        await resolve_credentials(None)


async def test_botocore_credentials_are_refreshed_when_due() -> None:
    from botocore.credentials import RefreshableCredentials

    calls = 0

    def refresh() -> dict[str, str]:
        nonlocal calls
        calls += 1
        expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
        return {
            "access_key": f"AKIA{calls}",
            "secret_key": f"secret-{calls}",
            "token": f"token-{calls}",
            "expiry_time": expiry.isoformat(),
        }

    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=5)
    boto_creds = RefreshableCredentials.create_from_metadata(
        metadata={
            "access_key": "AKIA0",
            "secret_key": "secret-0",
            "token": "token-0",
            "expiry_time": soon.isoformat(),
        },
        refresh_using=refresh,
        method="test",
    )
    from synxfer_s3._credentials import BotocoreCredentials

    source = BotocoreCredentials(boto_creds)
    # Five minutes left is inside botocore's refresh window: refreshed once, in a thread.
    got = await asyncio.gather(*(source.get() for _ in range(5)))
    assert {c.access_key for c in got} == {"AKIA1"}
    assert calls == 1
    assert (await source.get()).secret_key == "secret-1"  # fresh for an hour: no refresh
    assert calls == 1


def test_no_secret_in_reprs() -> None:
    creds = Credentials("AKIAREPR", "repr-secret", "repr-token")
    wire = S3Wire(region="us-east-1", credentials=StaticCredentials(creds))
    for text in (repr(creds), repr(wire), repr(wire._signer), repr(StaticCredentials(creds))):
        assert "repr-secret" not in text
        assert "repr-token" not in text
    assert os.environ.get("AWS_SECRET_ACCESS_KEY", "") not in repr(wire)
