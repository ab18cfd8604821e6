"""The committed pytest-benchmark baseline and its regression check (``make bench-compare``).

Nothing here asserts a timing of synxfer: the check is run against copies
of the baseline doctored 5x faster (it must fail, naming the case) and 5x
slower (it must pass), for one small case, so both outcomes are seen
whatever the machine's load. See docs/benchmarks/pytest-benchmark.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BASELINE = REPO / "benchmarks" / "baseline" / "baseline.json"
CASE = "benchmarks/test_bench_synxfer.py::test_upload[baseline-16x1MiB]"
STATS = ("min", "max", "mean", "median", "stddev", "iqr", "q1", "q3", "ld15iqr", "hd15iqr", "total")


def _pytest(
    args: list[str], env: dict[str, str], timeout: float, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "--no-header"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["SYNXFER_BENCH_WORK"] = str(tmp_path / "work")
    for name in ("SYNXFER_BENCH_TARGET", "SYNXFER_BENCH_SLOWDOWN"):
        env.pop(name, None)
    return env


def _doctored(tmp_path: Path, factor: float) -> Path:
    """The baseline with every time of every case multiplied by ``factor``."""
    data: dict[str, Any] = json.loads(BASELINE.read_text())
    for bench in data["benchmarks"]:
        stats = bench["stats"]
        for key in STATS:
            stats[key] *= factor
        stats["data"] = [x * factor for x in stats["data"]]
        stats["ops"] /= factor
    path = tmp_path / f"baseline-x{factor:g}.json"
    path.write_text(json.dumps(data))
    return path


def test_committed_baseline_covers_the_suite_baseline_cases() -> None:
    data = json.loads(BASELINE.read_text())
    names = {b["fullname"] for b in data["benchmarks"]}
    out = _pytest(["benchmarks/", "--collect-only", "-k", "baseline"], dict(os.environ), 120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    collected = {ln.strip() for ln in out.stdout.splitlines() if "::" in ln}
    assert len(collected) == 6, collected  # 3 rows x upload, download
    assert names == collected
    for bench in data["benchmarks"]:
        assert bench["options"]["timer"] == "process_time", bench["fullname"]
        assert bench["stats"]["rounds"] == 7, bench["fullname"]
        assert len(bench["extra_info"]["wall_s"]) == 8, bench["fullname"]  # warm-up + 7


def test_compare_flags_a_regression_and_passes_without_one(tmp_path: Path) -> None:
    env = _env(tmp_path)
    # Run from tmp_path: on a machine unlike the baseline's, pytest-benchmark
    # names the storage relative to the working directory, and fails with an
    # INTERNALERROR when the storage is not under it.
    args = [
        str(REPO / CASE),
        "--benchmark-only",
        f"--basetemp={tmp_path / 'base'}",
        "--benchmark-timer=time.process_time",
        f"--benchmark-storage=file://{tmp_path / 'storage'}",
        "--benchmark-compare-fail=min:50%",
    ]
    faster = _pytest(
        [*args, f"--benchmark-compare={_doctored(tmp_path, 0.2)}"], env, 120, cwd=tmp_path
    )
    text = faster.stdout + faster.stderr
    assert faster.returncode != 0, text[-3000:]
    assert "Performance has regressed" in text, text[-3000:]
    assert "test_upload[baseline-16x1MiB]" in text
    assert "Field 'min' has failed PercentageRegressionCheck" in text

    slower = _pytest(
        [*args, f"--benchmark-compare={_doctored(tmp_path, 5)}"], env, 120, cwd=tmp_path
    )
    text = slower.stdout + slower.stderr
    assert slower.returncode == 0, text[-3000:]
    assert "Performance has regressed" not in text
    assert "1 passed" in text


def test_compare_refuses_a_baseline_of_another_timer(tmp_path: Path) -> None:
    out = _pytest(
        [
            CASE,
            "--benchmark-only",
            f"--benchmark-storage=file://{tmp_path / 'storage'}",
            f"--benchmark-compare={BASELINE}",
            "--benchmark-compare-fail=min:50%",
        ],
        _env(tmp_path),
        120,
    )
    assert out.returncode == 4, out.stdout[-2000:] + out.stderr[-2000:]  # usage error
    assert "measured with the timer process_time and this run uses perf_counter" in out.stderr
    assert "--benchmark-timer=time.process_time" in out.stderr


def test_bad_slowdown_is_refused_naming_the_variable(tmp_path: Path) -> None:
    env = _env(tmp_path)
    env["SYNXFER_BENCH_SLOWDOWN"] = "cpu:fast"
    out = _pytest(["benchmarks/", "--collect-only", "-k", "baseline"], env, 120)
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert "SYNXFER_BENCH_SLOWDOWN='cpu:fast'" in text, text[-2000:]
    assert "cpu:SECONDS or sleep:SECONDS" in text
