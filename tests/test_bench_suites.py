"""The pytest-benchmark suites in benchmarks/ keep working: their smoke subset runs in CI.

Runs ``pytest benchmarks/ --benchmark-disable -k smoke`` in a subprocess
(each case once, untimed) against moto on 127.0.0.1. Timing is never
asserted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_benchmark_suites_smoke(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["SYNXFER_BENCH_WORK"] = str(tmp_path / "work")
    env.pop("SYNXFER_BENCH_TARGET", None)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "benchmarks/",
            "--benchmark-disable",
            "-k",
            "smoke",
            "-q",
            "-p",
            "no:cacheprovider",
            "--no-header",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    summary = out.stdout.strip().splitlines()[-1]
    match = re.search(r"(\d+) passed", summary)
    assert match is not None, summary
    assert int(match.group(1)) == 6, summary  # quick's 3 rows x upload, download
    assert "failed" not in summary
    assert "error" not in summary


def test_benchmark_suites_collect_every_scenario_row() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "benchmarks/",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    ids = [ln for ln in out.stdout.splitlines() if "::" in ln]
    for case in ("synapse-upload-10x10GiB", "synapse-download-775x12.9KiB", "awscli-53248x16KiB",
                 "s5cmd-1x100GiB", "skyplane-text-16MiB-shards", "smoke-1x64MiB"):  # fmt: skip
        assert any(f"test_upload[{case}]" in i for i in ids), case
        assert any(f"test_download[{case}]" in i for i in ids), case
