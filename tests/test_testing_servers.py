"""The test servers of synxfer_servers.s3: moto in-process, in a subprocess, counting."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from synxfer import WriteOptions
from synxfer.backend import BackendOptions
from synxfer.engine.scheduler import RequestSlots
from synxfer.layers import LimitLayer
from synxfer_s3 import S3Backend
from synxfer_servers.process import cpu_seconds
from synxfer_servers.s3 import (
    CountingMotoServer,
    MotoProcess,
    counting_moto_server,
    moto_server,
)

ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing-secret-never-printed",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/synxfer-tests/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/synxfer-tests/credentials",
}


@pytest.fixture(autouse=True)
def fake_aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def s3(endpoint_url: str) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(retries={"max_attempts": 1}, max_pool_connections=32)
    return boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1", config=config)


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_moto_server_in_process() -> None:
    with moto_server() as server:
        assert server.endpoint_url == f"http://127.0.0.1:{server.port}"
        client = s3(server.endpoint_url)
        client.create_bucket(Bucket="inproc")
        client.put_object(Bucket="inproc", Key="k", Body=b"hello")
        assert client.get_object(Bucket="inproc", Key="k")["Body"].read() == b"hello"
        port = server.port
    assert not port_open(port), "the server stops listening on exit"


def test_moto_process() -> None:
    with MotoProcess() as moto:
        assert moto.endpoint_url.startswith("http://127.0.0.1:")
        pid = moto.pid
        assert pid != os.getpid()
        client = s3(moto.endpoint_url)
        client.create_bucket(Bucket="subproc")
        client.put_object(Bucket="subproc", Key="k", Body=b"x" * 100_000)
        assert len(client.get_object(Bucket="subproc", Key="k")["Body"].read()) == 100_000
        cpu = moto.cpu_seconds()
        assert cpu > 0
        assert repr(moto).startswith(f"<MotoProcess pid={pid} ")
        port = moto.port
        assert port is not None
    with pytest.raises(ProcessLookupError):
        cpu_seconds(pid)
    assert not port_open(port)
    with pytest.raises(RuntimeError):
        _ = moto.endpoint_url
    moto.stop()  # twice is fine


def test_cpu_seconds_of_this_process() -> None:
    before = cpu_seconds(os.getpid())
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    assert cpu_seconds(os.getpid()) >= before


@pytest.fixture(scope="module")
def counting() -> Iterator[CountingMotoServer]:
    with pytest.MonkeyPatch.context() as mp:
        for name, value in ENV.items():
            mp.setenv(name, value)
        with counting_moto_server() as server:
            s3(server.endpoint_url).create_bucket(Bucket="counted")
            yield server


@pytest.fixture
def server(counting: CountingMotoServer) -> Iterator[CountingMotoServer]:
    counting.delay = 0.0
    counting.reset()
    yield counting
    counting.delay = 0.0


def together(*calls: Callable[[], object]) -> None:
    """Run ``calls`` at once in threads; re-raise the first error."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], object]) -> object:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        for future in [pool.submit(run, c) for c in calls]:
            future.result()


def test_counts_two_concurrent_puts(server: CountingMotoServer) -> None:
    client = s3(server.endpoint_url)
    server.delay = 0.3
    together(
        lambda: client.put_object(Bucket="counted", Key="a", Body=b"1"),
        lambda: client.put_object(Bucket="counted", Key="b", Body=b"2"),
    )
    stats = server.snapshot()
    assert stats.max_concurrent_requests == 2
    assert stats.max_concurrent_part_requests == 2
    assert stats.max_files_in_flight == 2
    assert (stats.requests_in_flight, stats.part_requests_in_flight, stats.files_in_flight) == (
        0,
        0,
        0,
    )
    assert stats.ops["put_object"] == 2
    assert stats.total_part_requests == 2


def test_same_key_is_one_file(server: CountingMotoServer) -> None:
    client = s3(server.endpoint_url)
    client.put_object(Bucket="counted", Key="same", Body=b"x")
    server.reset()
    server.delay = 0.3
    together(
        lambda: client.get_object(Bucket="counted", Key="same", Range="bytes=0-0")["Body"].read(),
        lambda: client.get_object(Bucket="counted", Key="same")["Body"].read(),
    )
    stats = server.snapshot()
    assert stats.max_concurrent_part_requests == 2
    assert stats.max_files_in_flight == 1
    assert stats.ops["get_object"] == 2


def test_sequential_requests_never_overlap(server: CountingMotoServer) -> None:
    client = s3(server.endpoint_url)
    body = os.urandom(300_000)
    for i in range(5):
        client.put_object(Bucket="counted", Key=f"seq/{i}", Body=body)
        assert client.get_object(Bucket="counted", Key=f"seq/{i}")["Body"].read() == body
        client.head_object(Bucket="counted", Key=f"seq/{i}")
    client.list_objects_v2(Bucket="counted", Prefix="seq/")
    stats = server.snapshot()
    assert stats.max_concurrent_requests == 1
    assert stats.max_files_in_flight == 1
    assert stats.total_requests == 16
    assert stats.total_part_requests == 10
    assert stats.ops["head_object"] == 5
    assert stats.ops["list_objects"] == 1


def test_delay_applies_to_part_requests_only(server: CountingMotoServer) -> None:
    client = s3(server.endpoint_url)
    server.delay = 0.5
    start = time.monotonic()
    client.list_objects_v2(Bucket="counted")
    client.head_bucket(Bucket="counted")
    assert time.monotonic() - start < 0.4
    start = time.monotonic()
    client.put_object(Bucket="counted", Key="slow", Body=b"x")
    assert time.monotonic() - start >= 0.5


def test_open_multipart_upload_is_a_file_in_flight(server: CountingMotoServer) -> None:
    client = s3(server.endpoint_url)
    first = client.create_multipart_upload(Bucket="counted", Key="mpu/1")["UploadId"]
    second = client.create_multipart_upload(Bucket="counted", Key="mpu/2")["UploadId"]
    stats = server.snapshot()
    assert (stats.requests_in_flight, stats.files_in_flight) == (0, 2)
    assert stats.max_files_in_flight == 2
    part = client.upload_part(
        Bucket="counted", Key="mpu/1", UploadId=first, PartNumber=1, Body=b"p" * 10
    )
    assert server.snapshot().files_in_flight == 2
    client.complete_multipart_upload(
        Bucket="counted",
        Key="mpu/1",
        UploadId=first,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert server.snapshot().files_in_flight == 1
    client.abort_multipart_upload(Bucket="counted", Key="mpu/2", UploadId=second)
    stats = server.snapshot()
    assert stats.files_in_flight == 0
    assert stats.max_files_in_flight == 2
    assert stats.ops["upload_part"] == 1
    assert stats.ops["create_multipart"] == 2
    assert stats.ops["complete_multipart"] == 1
    assert stats.ops["abort_multipart"] == 1


def test_many_concurrent_requests(server: CountingMotoServer) -> None:
    client = s3(server.endpoint_url)
    server.delay = 0.2
    together(
        *(
            (lambda i=i: client.put_object(Bucket="counted", Key=f"many/{i % 4}", Body=b"x"))
            for i in range(8)
        )
    )
    stats = server.snapshot()
    assert stats.max_concurrent_requests == 8
    assert stats.max_files_in_flight == 4
    assert stats.files_in_flight == 0


async def test_never_counts_more_than_the_client_sends(server: CountingMotoServer) -> None:
    """Back-to-back requests from an asyncio client capped at N are never seen as N+1."""
    options = BackendOptions(endpoint_url=server.endpoint_url, region="us-east-1")
    async with S3Backend("counted", options) as raw:
        limited = LimitLayer(raw, RequestSlots(3))

        async def one(i: int) -> None:
            key = f"cap/{i % 5}"
            await limited.put(key, b"x" * (i % 4) * 1000, WriteOptions())
            await limited.read(key)

        await asyncio.gather(*(one(i) for i in range(60)))
    stats = server.snapshot()
    assert stats.total_requests == 120
    assert stats.max_concurrent_requests == 3
    assert stats.max_files_in_flight <= 3
