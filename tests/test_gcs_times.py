"""GCS object times in rclone's form: ``mtime`` metadata in RFC 3339, both ways.

rclone stores a file's time on GCS as metadata ``mtime`` in RFC 3339 with
nanoseconds (Go's RFC3339Nano) and reads it back; gsutil stores whole
seconds as ``goog-reserved-file-mtime``. synxfer writes rclone's form and
reads all of these and its own older decimal form, so each tool sees the
other's times. Against the GCS emulator in a subprocess on 127.0.0.1; the
"rclone" objects are written with plain JSON API requests carrying exactly
the metadata rclone sends.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

import synxfer
from synxfer_gcs._wire import format_rfc3339, parse_rfc3339, read_metadata, stored_metadata
from synxfer_servers.gcs import GcsEmulator, create_bucket, wipe

T = 1_700_000_000_123_456_789  # 2023-11-14T22:13:20.123456789Z


@pytest.fixture(scope="module")
def emulator() -> Iterator[GcsEmulator]:
    with GcsEmulator() as server:
        yield server


@pytest.fixture
def gcs(emulator: GcsEmulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.endpoint_url)
    yield emulator.endpoint_url
    wipe(emulator.endpoint_url)


def _bucket(endpoint: str) -> str:
    name = f"t-{uuid.uuid4().hex[:16]}"
    create_bucket(endpoint, name)
    return name


def _resource(endpoint: str, bucket: str, name: str) -> dict[str, object]:
    r = httpx.get(f"{endpoint}/storage/v1/b/{bucket}/o/{name.replace('/', '%2F')}")
    r.raise_for_status()
    doc: dict[str, object] = r.json()
    return doc


def _raw_upload(endpoint: str, bucket: str, name: str, data: bytes, meta: dict[str, str]) -> None:
    """A multipart upload with exactly this metadata, as another tool sends it."""
    boundary = "other-tool-boundary"
    doc = json.dumps({"name": name, "metadata": meta}).encode()
    body = (
        f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode()
        + doc
        + f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    r = httpx.post(
        f"{endpoint}/upload/storage/v1/b/{bucket}/o",
        params={"uploadType": "multipart"},
        headers={"Content-Type": f"multipart/related; boundary={boundary}"},
        content=body,
    )
    r.raise_for_status()


# -- the conversions ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (T, "2023-11-14T22:13:20.123456789Z"),
        (1_700_000_000_500_000_000, "2023-11-14T22:13:20.5Z"),
        (1_700_000_000_000_000_000, "2023-11-14T22:13:20Z"),
        (0, "1970-01-01T00:00:00Z"),
        (-1_500_000_000, "1969-12-31T23:59:58.5Z"),
    ],
)
def test_rfc3339_is_gos_rfc3339nano(ns: int, text: str) -> None:
    assert format_rfc3339(ns) == text
    assert parse_rfc3339(text) == ns


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2023-11-14T23:13:20.123456789+01:00", T),  # rclone keeps the file's zone
        ("2023-11-14T17:13:20.123456789-05:00", T),
        ("2023-11-14t22:13:20.123456789z", T),
        ("2023-11-14T22:13:20.1Z", 1_700_000_000_100_000_000),
    ],
)
def test_rfc3339_offsets_are_read(text: str, ns: int) -> None:
    assert parse_rfc3339(text) == ns


@pytest.mark.parametrize("text", ["", "yesterday", "2023-13-01T00:00:00Z", "2023-11-14T22:13:20"])
def test_malformed_times_are_left_alone(text: str) -> None:
    assert parse_rfc3339(text) is None
    assert read_metadata({"mtime": text}) == {"mtime": text}
    assert stored_metadata({"mtime": text}) == {"mtime": text}


def test_metadata_both_ways() -> None:
    stored = stored_metadata({"mtime": "1700000000.123456789", "synxfer-part-size": "0"})
    assert stored == {"mtime": "2023-11-14T22:13:20.123456789Z", "synxfer-part-size": "0"}
    assert read_metadata(stored)["mtime"] == "1700000000.123456789"
    assert read_metadata({"mtime": "1700000000.25"}) == {"mtime": "1700000000.25"}  # old form
    gsutil = read_metadata({"goog-reserved-file-mtime": "1600000000"})
    assert gsutil["mtime"] == "1600000000"
    # Written as given, read back in the shortest form; the engine parses both alike.
    for written, read in [("-1.500000000", "-1.5"), ("42", "42"), ("1.25", "1.25")]:
        assert read_metadata(stored_metadata({"mtime": written})) == {"mtime": read}


# -- against the emulator ------------------------------------------------------------


def _set_mtime(path: Path, ns: int) -> None:
    os.utime(path, ns=(ns, ns))


async def test_synxfer_writes_rclones_form(
    gcs: str, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    bucket = _bucket(gcs)
    src = make_tree({"a.txt": 10, "big.bin": 600 * 1024})
    _set_mtime(src / "a.txt", T)
    _set_mtime(src / "big.bin", T + 1_000_000_000)
    config = synxfer.TransferConfig(
        max_threads=2, part_size=256 * 1024, multipart_threshold=256 * 1024
    )
    async with synxfer.Client(config) as client:
        result = await client.sync_to(src, f"gs://{bucket}/d")
        assert result.ok
        assert result.files_transferred == 2
        small = _resource(gcs, bucket, "d/a.txt")["metadata"]
        big = _resource(gcs, bucket, "d/big.bin")["metadata"]  # a composite upload
        assert isinstance(small, dict)
        assert isinstance(big, dict)
        assert small["mtime"] == "2023-11-14T22:13:20.123456789Z"
        assert big["mtime"] == "2023-11-14T22:13:21.123456789Z"
        # A server-side copy with new metadata keeps the form too.
        await client.copy(f"gs://{bucket}/d/a.txt", f"gs://{bucket}/e/a.txt")
        copied = _resource(gcs, bucket, "e/a.txt")["metadata"]
        assert isinstance(copied, dict)
        assert copied["mtime"] == small["mtime"]
        # And synxfer reads its own objects back as the same time.
        out = tmp_path / "out"
        down = await client.sync_from(f"gs://{bucket}/d", out)
        assert down.ok
        assert down.files_transferred == 2
        assert (out / "a.txt").stat().st_mtime_ns == T
        again = await client.sync_to(src, f"gs://{bucket}/d")
        assert again.files_transferred == 0


@pytest.mark.parametrize(
    ("meta", "ns"),
    [
        ({"mtime": "2023-11-14T22:13:20.123456789Z"}, T),  # rclone, UTC
        ({"mtime": "2023-11-14T23:13:20.123456789+01:00"}, T),  # rclone, a local zone
        ({"mtime": "1700000000.123456789"}, T),  # synxfer before RFC 3339
        ({"goog-reserved-file-mtime": "1700000000"}, 1_700_000_000_000_000_000),  # gsutil
    ],
)
async def test_synxfer_reads_other_tools_times(
    gcs: str, tmp_path: Path, meta: dict[str, str], ns: int
) -> None:
    bucket = _bucket(gcs)
    data = b"written by another tool"
    _raw_upload(gcs, bucket, "o/file.txt", data, meta)
    out = tmp_path / "out"
    async with synxfer.Client() as client:
        down = await client.sync_from(f"gs://{bucket}/o", out)
        assert down.ok
        assert down.files_transferred == 1
        assert (out / "file.txt").read_bytes() == data
        assert (out / "file.txt").stat().st_mtime_ns == ns
        # Both sides agree now: nothing to do either way.
        assert (await client.sync_from(f"gs://{bucket}/o", out)).files_transferred == 0
        assert (await client.sync_to(out, f"gs://{bucket}/o")).files_transferred == 0
