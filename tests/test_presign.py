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
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

import synxfer
from synxfer import ConfigError
from synxfer.backend import BackendOptions, open_backend
from synxfer.cli.main import main

DATA = os.urandom(300_000) + b"\r\n\n end"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        data: bytes = response.read()
        return data


def _put(url: str, data: bytes) -> int:
    request = urllib.request.Request(url, data=data, method="PUT")
    with urllib.request.urlopen(request, timeout=30) as response:
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
    assert put_url.startswith(weed_env.endpoint_url)
    assert "X-Amz-Signature=" in put_url
    assert _put(put_url, DATA) == 200
    assert main(["presign", key, "-v", *common]) == 0
    out2, err2 = capsys.readouterr()
    assert _get(out2.strip()) == DATA
    signature = parse_qs(urlsplit(out2.strip()).query)["X-Amz-Signature"][0]
    for text in (err, err2):
        assert signature not in text
        assert "X-Amz-Signature" not in text
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
    assert "--expires-in" in err
    assert says in err
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


# -- gs:// (V4 signed URLs) on the GCS emulator ---------------------------------------------


@pytest.fixture(scope="module")
def gcs_emulator() -> Any:
    from synxfer_servers.gcs import GcsEmulator

    with GcsEmulator() as server:
        yield server


@pytest.fixture(scope="module")
def sa_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A throwaway service-account key file and its public key."""
    import json

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    path = tmp_path_factory.mktemp("sa") / "key.json"
    info = {
        "type": "service_account",
        "project_id": "test",
        "private_key_id": "0",
        "private_key": pem,
        "client_email": "signer@test.iam.gserviceaccount.com",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    path.write_text(json.dumps(info))
    return path, key.public_key()


def _check_goog4(url: str, method: str, public_key: Any) -> None:
    """Verify a V4 signed URL as Google documents it (not with synxfer's code)."""
    import hashlib

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    parts = urlsplit(url)
    pairs = [p.split("=", 1) for p in parts.query.split("&")]
    signature = dict(pairs)["X-Goog-Signature"]
    signed = sorted((k, v) for k, v in pairs if k != "X-Goog-Signature")
    query = "&".join(f"{k}={v}" for k, v in signed)
    canonical = f"{method}\n{parts.path}\n{query}\nhost:{parts.netloc}\n\nhost\nUNSIGNED-PAYLOAD"
    fields = dict(signed)
    credential = urllib.parse.unquote(fields["X-Goog-Credential"])
    scope = credential.split("/", 1)[1]
    assert credential.startswith("signer@test.iam.gserviceaccount.com/")
    assert scope.endswith("/auto/storage/goog4_request")
    to_sign = "\n".join(
        [
            "GOOG4-RSA-SHA256",
            fields["X-Goog-Date"],
            scope,
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    public_key.verify(
        bytes.fromhex(signature), to_sign.encode(), padding.PKCS1v15(), hashes.SHA256()
    )


async def test_gs_signed_urls_with_a_service_account_key(
    gcs_emulator: Any, sa_key: tuple[Path, Any], tmp_path: Path
) -> None:
    from synxfer_servers.gcs import create_bucket

    bucket = f"p-{os.urandom(6).hex()}"
    create_bucket(gcs_emulator.endpoint_url, bucket)
    key_file, public_key = sa_key
    src = tmp_path / "f.bin"
    src.write_bytes(DATA)
    url = f"gs://{bucket}/dir/a key+é.bin"
    async with synxfer.Client(
        endpoints={"gs": gcs_emulator.endpoint_url},
        backend_options={"gs": {"credentials_file": str(key_file)}},
    ) as client:
        await client.upload_file(src, url)
        signed = await client.presign(url, expires_in=900)
        put_url = await client.presign(f"gs://{bucket}/dir/put.bin", method="PUT")
        _check_goog4(signed, "GET", public_key)
        _check_goog4(put_url, "PUT", public_key)
        assert parse_qs(urlsplit(signed).query)["X-Goog-Expires"] == ["900"]
        assert urlsplit(signed).path == f"/{bucket}/dir/a%20key%2B%C3%A9.bin"
        assert "PRIVATE KEY" not in signed
        # The emulator serves /bucket/object (it does not check signatures).
        assert _get(signed) == DATA
        assert _put(put_url, b"put through the URL") == 200
        await client.download_file(f"gs://{bucket}/dir/put.bin", tmp_path / "back.bin")
        assert (tmp_path / "back.bin").read_bytes() == b"put through the URL"
        with pytest.raises(ConfigError, match="604800 seconds"):
            await client.presign(url, expires_in=604_801)


def test_gs_without_a_key_says_what_is_needed(
    gcs_emulator: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["presign", "gs://b/k", "--endpoint-url", gcs_emulator.endpoint_url])
    err = capsys.readouterr().err
    assert code == 2
    assert "nothing to sign with" in err
    assert "gs.credentials_file" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("endpoint", "addressing", "key"),
    [
        ("http://127.0.0.1:9000", "path", "dir/a key+é&=?.bin"),
        ("https://s3.eu-west-1.amazonaws.com", "virtual", "plain/key.txt"),
        ("https://minio.example:8443/base", "path", "x~y/(1)!*'.csv"),
    ],
)
async def test_s3_url_is_botocores(
    endpoint: str, addressing: str, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same URL as botocore's ``generate_presigned_url`` at the same second,
    with a session token: what SeaweedFS cannot show (it has no tokens), and
    virtual-host and base-path endpoints. (No request is sent.)"""
    import datetime

    import boto3  # type: ignore[import-untyped]
    import botocore.auth
    from botocore.config import Config

    from synxfer_s3._credentials import Credentials, StaticCredentials
    from synxfer_s3._presign import presign_url
    from synxfer_s3._signed import SignedClient

    when = datetime.datetime(2026, 3, 4, 5, 6, 7, tzinfo=datetime.UTC)
    import botocore.crt.auth  # botocore signs with awscrt when it is installed

    for module in (botocore.auth, botocore.crt.auth):
        monkeypatch.setattr(module, "get_current_datetime", lambda **_: when)
    creds = ("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "FwoG/token+=")
    region = "eu-west-1"
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=creds[0],
        aws_secret_access_key=creds[1],
        aws_session_token=creds[2],
        config=Config(signature_version="s3v4", s3={"addressing_style": addressing}),  # type: ignore[arg-type]
    )
    theirs = s3.generate_presigned_url(
        "put_object", Params={"Bucket": "bkt", "Key": key}, ExpiresIn=900
    )
    client = SignedClient(
        region=region,
        credentials=StaticCredentials(Credentials(*creds)),
        endpoint_url=endpoint,
        addressing=addressing,  # type: ignore[arg-type]
    )
    try:
        ours = await presign_url(client, "bkt", key, "PUT", 900, now=when.timestamp())
    finally:
        await client.aclose()
    a, b = urlsplit(ours), urlsplit(theirs)
    assert (a.scheme, a.netloc, a.path) == (b.scheme, b.netloc, b.path)
    assert parse_qs(a.query) == parse_qs(b.query)
