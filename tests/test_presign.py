"""Presigned URLs (issue 38, item 6): ``synxfer presign`` and ``Client.presign``.

On SeaweedFS with auth on, which checks SigV4 query signatures and their
expiry: a GET URL fetched with plain urllib returns the object byte-exact, a
PUT URL stores what urllib sends, and an expired, tampered or
wrong-method URL is refused. Bad ``--expires-in`` values are usage errors.
"""

from __future__ import annotations

import logging
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

import synxfer
from synxfer import BackendOptions, ConfigError
from synxfer.backend import open_backend
from synxfer.cli.main import main

DATA = os.urandom(300_000) + b"\r\n\n end"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - a test URL
        data: bytes = response.read()
        return data


def _put(url: str, data: bytes) -> int:
    request = urllib.request.Request(url, data=data, method="PUT")  # noqa: S310
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        status: int = response.status
        return status


def _refused(fn: Any, *args: Any) -> int:
    with pytest.raises(urllib.error.HTTPError) as info:
        fn(*args)
    return info.value.code


async def test_get_url_fetched_by_urllib_byte_exact(weed_env: Any, tmp_path: Path) -> None:
    src = tmp_path / "f.bin"
    src.write_bytes(DATA)
    url = f"s3://{weed_env.bucket}/presign/dir/a key+é.bin"
    async with synxfer.Client(endpoint_url=weed_env.endpoint_url) as client:
        await client.upload_file(src, url)
        signed = await client.presign(url, expires_in=600)
    assert weed_env.secret_key not in signed
    query = parse_qs(urlsplit(signed).query)
    assert query["X-Amz-Expires"] == ["600"]
    assert query["X-Amz-SignedHeaders"] == ["host"]
    assert _get(signed) == DATA
    # Without the signature (or with another one) the same object is refused:
    # the server does check, so the test above proves the signature right.
    assert _refused(_get, signed.rsplit("&X-Amz-Signature=", 1)[0]) in (400, 403)
    bad = signed[:-4] + ("0000" if not signed.endswith("0000") else "1111")
    assert _refused(_get, bad) == 403


async def test_put_url_then_read_back(weed_env: Any, tmp_path: Path) -> None:
    url = f"s3://{weed_env.bucket}/presign/uploaded.bin"
    async with synxfer.Client(endpoint_url=weed_env.endpoint_url) as client:
        put_url = await client.presign(url, method="PUT", expires_in=60)
        get_url = await client.presign(url, expires_in=60)
        # A GET URL is not an upload URL.
        assert _refused(_put, get_url, b"nope") == 403
        assert _put(put_url, DATA) == 200
        await client.download_file(url, tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == DATA
    assert _get(get_url) == DATA


async def test_expired_url_refused(weed_env: Any, tmp_path: Path) -> None:
    """A URL signed two hours ago for one hour: the server refuses it, while
    the same URL signed now for the same hour works (no sleeping)."""
    from synxfer_s3._presign import presign_url

    src = tmp_path / "f.bin"
    src.write_bytes(DATA)
    async with synxfer.Client(endpoint_url=weed_env.endpoint_url) as client:
        await client.upload_file(src, f"s3://{weed_env.bucket}/presign/old.bin")
    options = BackendOptions(endpoint_url=weed_env.endpoint_url)
    async with open_backend("s3", weed_env.bucket, options) as backend:
        wire = backend.wire  # type: ignore[attr-defined]
        fresh = await presign_url(wire, weed_env.bucket, "presign/old.bin", "GET", 3600)
        old = await presign_url(
            wire, weed_env.bucket, "presign/old.bin", "GET", 3600, now=time.time() - 7200
        )
    assert _get(fresh) == DATA
    assert _refused(_get, old) == 403


def test_cli_prints_urls_and_logs_no_signature(
    weed_env: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = f"s3://{weed_env.bucket}/presign/cli.bin"
    common = ["--endpoint-url", weed_env.endpoint_url]
    assert main(["presign", key, "--put", "--expires-in", "120", "-v", *common]) == 0
    out, err = capsys.readouterr()
    put_url = out.strip()
    assert put_url.startswith(weed_env.endpoint_url) and "X-Amz-Signature=" in put_url
    assert _put(put_url, DATA) == 200
    assert main(["presign", key, "-v", *common]) == 0
    out2, err2 = capsys.readouterr()
    assert _get(out2.strip()) == DATA
    signature = parse_qs(urlsplit(out2.strip()).query)["X-Amz-Signature"][0]
    for text in (err, err2):
        assert signature not in text and "X-Amz-Signature" not in text
        assert weed_env.secret_key not in text
    logging.getLogger().handlers.clear()  # main()'s -v handler


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("0", "at least 1 second"),
        ("-5", "at least 1 second"),
        ("1h", "not a whole number of seconds"),
        ("604801", "604800 seconds (7 days)"),
    ],
)
def test_cli_expires_in_bounds_are_usage_errors(
    stock_moto: Any, value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["presign", "s3://b/k", "--expires-in", value, "--endpoint-url", stock_moto.endpoint_url]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert "--expires-in" in err and says in err
    assert "Traceback" not in err


def test_cli_presign_needs_an_object(stock_moto: Any, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--endpoint-url", stock_moto.endpoint_url]
    assert main(["presign", "s3://bucket", *common]) == 2
    assert "presign needs an object URL like s3://bucket/key" in capsys.readouterr().err
    assert main(["presign", "./local.txt", *common]) == 2
    assert "presign needs an object URL" in capsys.readouterr().err
    assert main(["presign", "file:///tmp/x", *common]) == 2
    assert "file:// cannot presign URLs" in capsys.readouterr().err


async def test_python_bad_input(stock_moto: Any) -> None:
    async with synxfer.Client(endpoint_url=stock_moto.endpoint_url) as client:
        for bad in (0, 604_801, 1.5, True):
            with pytest.raises(ConfigError, match="expires_in"):
                await client.presign("s3://b/k", expires_in=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="'GET' or 'PUT'"):
            await client.presign("s3://b/k", method="DELETE")  # type: ignore[arg-type]
    async with synxfer.Client(
        endpoint_url=stock_moto.endpoint_url,
        backend_options={"s3": {"anonymous": "true"}},
    ) as anonymous:
        with pytest.raises(ConfigError, match="needs credentials to sign"):
            await anonymous.presign("s3://b/k")
