"""The blocking facade (synxfer.sync_to & co.) in scripts, threads and notebooks.

A notebook runs cells inside a running event loop; ``asyncio.run`` cannot
nest there, so the facade moves the operation to a private loop in a worker
thread, and only then. Against moto over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

import synxfer
from synxfer.layers import Layer

from .conftest import SMALL, tree


def _threads_of(events: list[threading.Thread]) -> Callable[[synxfer.Event], None]:
    def on_event(event: synxfer.Event) -> None:
        events.append(threading.current_thread())

    return on_event


def _blocking_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "synxfer-blocking"]


async def test_blocking_calls_work_inside_a_running_loop(
    s3_endpoint: str, bucket: str, make_tree: Callable[..., Path], tmp_path: Path
) -> None:
    """What a notebook cell does: call the blocking API with a loop running."""
    asyncio.get_running_loop()  # a loop is running in this thread
    src = make_tree({"a.txt": 100, "sub/b.bin": 6 * 1024 * 1024})
    seen: list[threading.Thread] = []
    kw: dict[str, Any] = {"config": SMALL, "endpoint_url": s3_endpoint}
    result = synxfer.sync_to(src, f"s3://{bucket}/p", on_event=_threads_of(seen), **kw)
    assert result.ok
    assert result.files_transferred == 2
    # The operation ran on a worker thread, which is gone now.
    assert seen
    assert all(t is not threading.current_thread() for t in seen)
    assert not _blocking_threads()

    out = tmp_path / "out"
    assert synxfer.sync_from(f"s3://{bucket}/p", out, **kw).files_transferred == 2
    assert tree(out) == tree(src)
    synxfer.upload_file(src / "a.txt", f"s3://{bucket}/one.txt", **kw)
    synxfer.download_file(f"s3://{bucket}/one.txt", tmp_path / "one.txt", **kw)
    assert (tmp_path / "one.txt").read_bytes() == (src / "a.txt").read_bytes()
    assert synxfer.copy(f"s3://{bucket}/one.txt", f"s3://{bucket}/two.txt", **kw).ok
    assert synxfer.sync(f"s3://{bucket}/p", tmp_path / "again", **kw).files_transferred == 2
    # The caller's loop is still usable afterwards.
    await asyncio.sleep(0)


async def test_errors_propagate_inside_a_running_loop(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    kw: dict[str, Any] = {"config": SMALL, "endpoint_url": s3_endpoint}
    with pytest.raises(synxfer.ConfigError, match="no such directory"):
        synxfer.sync_to(tmp_path / "missing", f"s3://{bucket}/p", **kw)
    with pytest.raises(synxfer.NotFound):
        synxfer.download_file(f"s3://{bucket}/nothing-here", tmp_path / "x", **kw)
    with pytest.raises(synxfer.BucketNotFound):
        synxfer.sync_to(tmp_path, "s3://no-such-bucket-synxfer/p", **kw)
    assert not _blocking_threads()


def test_plain_thread_runs_in_the_calling_thread(
    s3_endpoint: str, bucket: str, make_tree: Callable[..., Path]
) -> None:
    """No loop running: asyncio.run in the calling thread, no hidden loop thread."""
    src = make_tree({"a.txt": 10, "b.txt": 20})
    seen: list[threading.Thread] = []
    results: list[synxfer.TransferResult] = []
    errors: list[BaseException] = []

    def job() -> None:
        try:
            results.append(
                synxfer.sync_to(
                    src,
                    f"s3://{bucket}/t",
                    config=SMALL,
                    endpoint_url=s3_endpoint,
                    on_event=_threads_of(seen),
                )
            )
            synxfer.sync_to(src / "nope", f"s3://{bucket}/t", endpoint_url=s3_endpoint)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=job, name="plain-caller")
    worker.start()
    worker.join(60)
    assert results
    assert results[0].files_transferred == 2
    assert seen
    assert all(t is worker for t in seen)
    assert len(errors) == 1
    assert isinstance(errors[0], synxfer.ConfigError)


class _Stall(Layer):
    """Puts stall (60 s at most) until cancelled; says when one started and was cancelled."""

    entered = threading.Event()
    cancelled = threading.Event()

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        if op in ("put", "create_multipart"):
            _Stall.entered.set()
            try:
                # Bounded: a Ctrl-C that never reaches the call fails the test
                # (no KeyboardInterrupt) instead of hanging the suite.
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                _Stall.cancelled.set()
                raise
            raise RuntimeError("the stalled put was never cancelled")
        return await fn(*args)


async def test_ctrl_c_inside_a_running_loop_cancels_and_propagates(
    s3_endpoint: str, bucket: str, make_tree: Callable[..., Path]
) -> None:
    """Ctrl-C in a notebook: the transfer is cancelled, cleaned up, and KeyboardInterrupt raised.

    pytest-asyncio's loop (asyncio.Runner) has its own SIGINT handler, which
    would only cancel the test's task after the blocking call returned.
    """
    _Stall.entered.clear()
    _Stall.cancelled.clear()
    src = make_tree({"a.txt": 100})
    main = threading.main_thread().ident
    assert main is not None
    assert threading.current_thread() is threading.main_thread()

    def press_ctrl_c() -> None:
        if _Stall.entered.wait(30):
            time.sleep(0.05)
            signal.pthread_kill(main, signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    handler = signal.getsignal(signal.SIGINT)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            synxfer.sync_to(
                src, f"s3://{bucket}/k", config=SMALL, endpoint_url=s3_endpoint, layers=[_Stall]
            )
    finally:
        presser.join()
    assert time.monotonic() - started < 30
    assert _Stall.cancelled.is_set()
    assert not _blocking_threads()
    assert signal.getsignal(signal.SIGINT) is handler  # the loop's handler is back
    listed = boto3.client("s3", endpoint_url=s3_endpoint).list_objects_v2(Bucket=bucket)
    assert listed.get("KeyCount", 0) == 0
