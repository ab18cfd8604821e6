"""The SDK face (``synxfer.backend``) and the helpers it offers plugins."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping

import pytest

import synxfer
import synxfer.backend as sdk
from synxfer import ConfigError, _exceptions, _models
from synxfer.backend import (
    bounded_map,
    first_error,
    option_bool,
    option_float,
    option_int,
    shielded,
    to_thread_holding,
)

# -- the face ---------------------------------------------------------------------


def test_every_exported_name_exists() -> None:
    assert [name for name in sdk.__all__ if not hasattr(sdk, name)] == []


def test_a_plugin_finds_everything_in_one_place() -> None:
    """The values a backend returns, the whole exception tree and the registry."""
    for name in ("ObjectInfo", "ListPage", "ReadResult", "WriteOptions", "MultipartUpload"):
        assert getattr(sdk, name) is getattr(_models, name)
    for name in ("CompletedPart", "PendingUpload"):
        assert getattr(sdk, name) is getattr(_models, name)
    for name in _exceptions.__all__:
        assert getattr(sdk, name) is getattr(_exceptions, name), name
    for name in ("Backend", "BackendOptions", "Capabilities", "Checksum"):
        assert getattr(sdk, name) is getattr(synxfer, name)
    assert {"register", "resolve", "open_backend", "available_schemes"} <= set(sdk.__all__)
    assert sdk.Capabilities().fan_out == frozenset()
    assert sdk.BackendOptions().requests is sdk.UNLIMITED


def test_the_registry_lives_in_the_sdk() -> None:
    class Dummy(sdk.Backend):
        scheme = "sdk-test"

        async def stat(self, key: str) -> sdk.ObjectInfo:
            raise NotImplementedError

        async def list_page(self, prefix: str, cursor: str | None = None) -> sdk.ListPage:
            raise NotImplementedError

        async def read(
            self,
            key: str,
            offset: int = 0,
            length: int | None = None,
            *,
            if_match: str | None = None,
        ) -> sdk.ReadResult:
            raise NotImplementedError

        async def put(
            self,
            key: str,
            data: sdk.Payload,
            options: sdk.WriteOptions,
            checksum: sdk.Checksum | None = None,
        ) -> sdk.ObjectInfo:
            raise NotImplementedError

        async def delete(self, key: str) -> None:
            raise NotImplementedError

    def factory(bucket: str, options: sdk.BackendOptions) -> sdk.Backend:
        backend = Dummy()
        backend.bucket = bucket
        return backend

    sdk.register("sdk-test", factory)
    assert "sdk-test" in sdk.available_schemes()
    assert sdk.resolve("SDK-TEST") is factory
    assert sdk.open_backend("sdk-test", "b", sdk.BackendOptions()).url("k") == "sdk-test://b/k"
    with pytest.raises(sdk.UnknownScheme, match="no-such-scheme"):
        sdk.resolve("no-such-scheme")


def test_first_party_table_is_the_entry_points() -> None:
    """The registry's table of bundled backends says what pyproject's entry points say."""
    import tomllib
    from pathlib import Path

    from synxfer.backend._registry import FIRST_PARTY, GROUP

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"][GROUP] == FIRST_PARTY


def test_a_bundled_scheme_resolves_without_reading_metadata() -> None:
    """Resolving s3:// imports no importlib.metadata (~45 ms of start-up); an unknown one does."""
    import subprocess
    import sys

    code = (
        "import sys; from synxfer.backend import resolve; resolve('s3'); "
        "print('importlib.metadata' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_s3_backend_and_its_usual_dates_leave_email_utils_unimported() -> None:
    """email.utils (~2.5 ms of start-up) is only for HTTP dates in the rare
    forms: S3's own Last-Modified form is parsed without it."""
    import subprocess
    import sys

    code = (
        "import sys; from synxfer.backend import resolve; resolve('s3'); "
        "from synxfer_s3._wire import parse_http_date as p; "
        "p('Tue, 02 Jan 2024 03:04:05 GMT'); print('email.utils' in sys.modules); "
        "p('Tuesday, 02-Jan-24 03:04:05 GMT'); print('email.utils' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


# -- to_thread_holding ------------------------------------------------------------


async def test_to_thread_holding_runs_in_a_worker_thread() -> None:
    def where(a: int, *, b: int) -> tuple[int, bool]:
        return a + b, threading.current_thread() is threading.main_thread()

    assert await to_thread_holding(where, 1, b=2) == (3, False)


async def test_to_thread_holding_does_not_return_before_the_thread_when_cancelled() -> None:
    buffer = bytearray(b"x" * 10)
    started, release = threading.Event(), threading.Event()
    finished: list[bytes] = []

    def reader() -> None:
        started.set()
        release.wait(5)
        time.sleep(0.05)
        finished.append(bytes(buffer))  # still reading the caller's buffer

    task = asyncio.create_task(to_thread_holding(reader))
    await asyncio.to_thread(started.wait, 5)
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done(), "released while the thread still reads the buffer"
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == [b"x" * 10]
    buffer[:] = b"y" * 10  # only now may the caller reuse it


async def test_to_thread_holding_raises_the_threads_error() -> None:
    def boom() -> None:
        raise OSError("disk on fire")

    with pytest.raises(OSError, match="disk on fire"):
        await to_thread_holding(boom)


# -- first_error ------------------------------------------------------------------


def test_first_error_skips_cancellations_and_flattens() -> None:
    real = ValueError("real")
    group = BaseExceptionGroup(
        "g", [asyncio.CancelledError(), BaseExceptionGroup("inner", [real, KeyError("k")])]
    )
    assert first_error(group) is real
    only_cancelled = BaseExceptionGroup("g", [asyncio.CancelledError()])
    assert isinstance(first_error(only_cancelled), asyncio.CancelledError)


# -- bounded_map ------------------------------------------------------------------


async def test_bounded_map_keeps_order_and_the_limit() -> None:
    running = peak = 0

    async def work(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001 * (n % 3))
        running -= 1
        return n * n

    assert await bounded_map(work, range(20), 3) == [n * n for n in range(20)]
    assert peak == 3
    assert await bounded_map(work, [], 3) == []


async def test_bounded_map_creates_tasks_only_when_a_slot_is_free() -> None:
    before = len(asyncio.all_tasks())
    alive: list[int] = []

    async def work(n: int) -> int:
        alive.append(len(asyncio.all_tasks()) - before)
        await asyncio.sleep(0.001)
        return n

    assert await bounded_map(work, iter(range(50)), 2) == list(range(50))
    assert max(alive) == 2, "never more tasks than slots (not 50 made up front)"


async def test_bounded_map_shares_a_semaphore_and_returns_its_slots() -> None:
    slots = asyncio.Semaphore(2)
    running = peak = 0

    async def work(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001)
        running -= 1
        return n

    first, second = await asyncio.gather(
        bounded_map(work, range(5), slots), bounded_map(work, range(5), slots)
    )
    assert first == second == list(range(5))
    assert peak == 2, "two calls together stay within the shared semaphore"
    assert slots._value == 2  # every slot given back

    async def fail(n: int) -> int:
        raise ValueError(n)

    with pytest.raises(ValueError, match=r"^[0-4]$"):
        await bounded_map(fail, range(5), slots)
    assert slots._value == 2, "tasks cancelled before they ran gave their slots back"


async def test_bounded_map_raises_the_first_failure_and_cancels_the_rest() -> None:
    cancelled: list[int] = []

    async def work(n: int) -> int:
        if n == 1:
            await asyncio.sleep(0.01)
            raise KeyError("first")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(n)
            raise
        return n

    with pytest.raises(KeyError, match="first"):
        await asyncio.wait_for(bounded_map(work, range(4), 4), 5)
    assert sorted(cancelled) == [0, 2, 3]


async def test_bounded_map_rejects_a_zero_limit() -> None:
    async def work(n: int) -> int:
        return n

    with pytest.raises(ValueError, match="limit"):
        await bounded_map(work, [1], 0)


# -- shielded ---------------------------------------------------------------------


async def test_shielded_cleanup_finishes_when_the_caller_is_cancelled() -> None:
    done: list[str] = []

    async def cleanup() -> None:
        await asyncio.sleep(0.05)
        done.append("cleaned")

    task = asyncio.create_task(shielded(cleanup()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert done == ["cleaned"]


async def test_shielded_gives_up_after_the_grace_period_and_stays_cancelled() -> None:
    async def stuck() -> None:
        await asyncio.sleep(10)

    task = asyncio.create_task(shielded(stuck(), grace=0.01))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_shielded_passes_errors_on() -> None:
    async def broken() -> None:
        raise OSError("nope")

    with pytest.raises(OSError, match="nope"):
        await shielded(broken())


# -- options ----------------------------------------------------------------------

EXTRA: Mapping[str, object] = {
    "yes": "Yes",
    "off": " off ",
    "toml_true": True,
    "bad_bool": "maybe",
    "n": "42",
    "neg": "-3",
    "frac": "2.5",
    "word": "many",
    "seconds": "0.25",
    "inf": "inf",
}


def test_option_bool() -> None:
    assert option_bool(EXTRA, "yes", False, scheme="x") is True
    assert option_bool(EXTRA, "off", True, scheme="x") is False
    assert option_bool(EXTRA, "toml_true", False, scheme="x") is True
    assert option_bool(EXTRA, "absent", True, scheme="x") is True
    with pytest.raises(ConfigError, match=r"x:// option bad_bool='maybe': expected true or false"):
        option_bool(EXTRA, "bad_bool", False, scheme="x")


def test_option_int() -> None:
    assert option_int(EXTRA, "n", 1, scheme="gs", low=1, high=1000) == 42
    assert option_int(EXTRA, "absent", 7, scheme="gs") == 7
    assert option_int(EXTRA, "neg", 0, scheme="gs") == -3
    for name in ("frac", "word", "toml_true"):
        with pytest.raises(ConfigError, match=f"gs:// option {name}="):
            option_int(EXTRA, name, 1, scheme="gs")
    with pytest.raises(ConfigError, match=r"expected 1\.\.10"):
        option_int(EXTRA, "n", 1, scheme="gs", low=1, high=10)
    with pytest.raises(ConfigError, match="must be >= 1"):
        option_int(EXTRA, "neg", 1, scheme="gs", low=1)
    with pytest.raises(ConfigError, match="must be <= 10"):
        option_int(EXTRA, "n", 1, scheme="gs", high=10)


def test_option_float() -> None:
    assert option_float(EXTRA, "seconds", 1.0, scheme="blocks") == 0.25
    assert option_float(EXTRA, "n", 1.0, scheme="blocks") == 42.0
    assert option_float(EXTRA, "absent", 3.0, scheme="blocks") == 3.0
    with pytest.raises(ConfigError, match="expected a number"):
        option_float(EXTRA, "word", 1.0, scheme="blocks")
    with pytest.raises(ConfigError, match="expected a number"):
        option_float(EXTRA, "toml_true", 1.0, scheme="blocks")
    with pytest.raises(ConfigError, match=r"must be >= 0\.0"):
        option_float(EXTRA, "inf", 1.0, scheme="blocks")
    with pytest.raises(ConfigError, match=r"must be >= 1\.0"):
        option_float(EXTRA, "seconds", 1.0, scheme="blocks", low=1.0)
