"""pytest-benchmark suites: synxfer's upload and download paths, one case per scenario row.

Every transfer row of every ``synxfer-bench`` scenario is a case, at the
scenario's default ``--scale`` times ``SYNXFER_BENCH_FRACTION`` (see
``conftest.py``), plus a ``smoke`` subset (the quick matrix at 1/1000 size)
that CI runs with ``--benchmark-disable`` so the suites keep working. Each
round transfers to a fresh prefix (or directory) with a fresh
:class:`synxfer.Client`, in this process; every round is verified.
Timing is never asserted.

    pytest benchmarks/ --benchmark-only
    pytest benchmarks/ --benchmark-only -k synapse-upload --benchmark-save=base
    pytest benchmarks/ --benchmark-only -k synapse-upload --benchmark-compare
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer_bench.datagen import ensure_row_data, expected_sizes, scenario_data_dir
from synxfer_bench.scenarios import QUICK, SCENARIOS, Row
from synxfer_bench.targets import Target

FRACTION = float(os.environ.get("SYNXFER_BENCH_FRACTION", "0.01"))
ROUNDS = int(os.environ.get("SYNXFER_BENCH_ROUNDS", "3"))
_counter = itertools.count()


def _cases() -> list[Any]:
    cases = [
        pytest.param("smoke", 0.001, row.scaled(0.001), id=f"smoke-{row.name}")
        for row in QUICK.rows
    ]
    for name, scenario in SCENARIOS.items():
        if name == "quick":
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


def _check(result: synxfer.TransferResult, row: Row) -> None:
    result.raise_for_failures()
    assert result.files_transferred == row.files
    assert result.bytes_transferred == row.total_bytes


async def _sync(target: Target, src: str, dst: str) -> synxfer.TransferResult:
    async with synxfer.Client(endpoint_url=target.endpoint_url) as client:
        return await client.sync(src, dst)


@pytest.mark.parametrize(("scenario", "scale", "row"), CASES)
def test_upload(
    benchmark: Any, bench_target: Target, bench_work: Path, scenario: str, scale: float, row: Row
) -> None:
    """synxfer uploads the row's directory to a fresh prefix."""
    src = _data(bench_work, scenario, scale, row)
    prefixes: list[str] = []

    def setup() -> tuple[tuple[str], dict[str, Any]]:
        prefixes.append(_fresh_prefix(row))
        return (bench_target.url(prefixes[-1]),), {}

    def upload(url: str) -> synxfer.TransferResult:
        return asyncio.run(_sync(bench_target, str(src), url))

    benchmark.extra_info.update(files=row.files, bytes=row.total_bytes, geometry=row.geometry)
    result = benchmark.pedantic(upload, setup=setup, rounds=ROUNDS, iterations=1)
    _check(result, row)
    assert bench_target.run(bench_target.list_prefix(prefixes[-1])) == expected_sizes(row)
    for prefix in prefixes:
        bench_target.run(bench_target.remove_prefix(prefix))


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

    def setup() -> tuple[tuple[str], dict[str, Any]]:
        if dests:
            shutil.rmtree(dests[-1], ignore_errors=True)
        dests.append(tmp_path / f"round-{len(dests)}")
        return (str(dests[-1]),), {}

    def download(dst: str) -> synxfer.TransferResult:
        return asyncio.run(_sync(bench_target, url, dst))

    benchmark.extra_info.update(files=row.files, bytes=row.total_bytes, geometry=row.geometry)
    result = benchmark.pedantic(download, setup=setup, rounds=ROUNDS, iterations=1)
    _check(result, row)
    found = {
        p.relative_to(dests[-1]).as_posix(): p.stat().st_size
        for p in dests[-1].rglob("*")
        if p.is_file()
    }
    assert found == expected_sizes(row)
    bench_target.run(bench_target.remove_prefix(prefix))
