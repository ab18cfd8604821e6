"""Scenario reports: issue 10's summary table, true labels, re-rendering from results.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synxfer_bench import cli as bench
from synxfer_bench.matrix import MatrixResult, RunPlan
from synxfer_bench.report import HAND_WRITTEN, ScenarioReport
from synxfer_bench.runner import Measurement
from synxfer_bench.scenarios import SCENARIOS

REPO = Path(__file__).resolve().parent.parent
GiB = 2**30


def _m(tool: str, seconds: float, cpu: float, server: float, *, ok: bool = True) -> Measurement:
    m = Measurement(tool, "1000x1MiB", "download", 1000, GiB, seconds, cpu, server)
    m.verified, m.peak_rss = ok, 300 * 2**20
    if not ok:
        m.error = "1 of 3 runs failed: exit 1"
    return m


def _result(*measurements: Measurement, skipped: tuple[str, ...] = ()) -> MatrixResult:
    scenario = SCENARIOS["speed"]
    result = MatrixResult(
        RunPlan(scenario, scenario.rows, 1.0, Path("."), repeat=3),
        {"name": "seaweedfs", "server": "SeaweedFS", "local": True},
        [{"name": m.tool, "version": "1"} for m in measurements],
    )
    result.measurements = list(measurements)
    result.skipped_tools = list(skipped)
    result.rows = [
        {"name": "1000x1MiB", "files": 1000, "bytes": GiB, "geometry": "1000x1MiB",
         "published": "1000x1MiB", "published_bytes": GiB, "data": "random",
         "case": "transfer", "compression_ratio_zlib6": 1.0}
    ]  # fmt: skip
    return result


def test_summary_is_issue_10s_table() -> None:
    report = ScenarioReport(
        _result(
            _m("synxfer", 6.46, 7.0, 1.0),
            _m("s5cmd", 1.94, 2.2, 1.5),
            _m("aws", 5.21, 6.0, 1.4),
            _m("rclone", 3.04, 3.0, 1.6, ok=False),
        ),
        "synxfer-bench run --scenario speed",
        machine={"cpu_count": 2},
    )
    (row,) = report.versus()
    assert row["ratio"] == pytest.approx(1.94 / 6.46)  # fastest peer / synxfer: < 1 loses
    assert row["fastest_peer"] == "s5cmd"  # the failed rclone is not a candidate
    assert (row["goal_time_met"], row["goal_cpu_met"]) == (False, False)
    md = report.markdown()
    line = next(ln for ln in md.splitlines() if ln.startswith("| 1000x1MiB down |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:6] == ["1000x1MiB down", "6.46", "1.94", "5.21", "FAILED", "0.30"]
    assert cells[6] == "7.0 / 2.2 / 6.0 / FAILED"  # client CPU s/GiB, each tool
    assert cells[7] == "1.00 / 1.50 / 1.40 / FAILED"  # server CPU s beside each
    assert cells[8] == "300"  # synxfer's peak RSS
    assert cells[9].startswith("neither side's CPU (server 1.0 s, client 7.0 s CPU; 62% of 2")
    assert cells[10] == "time NO, CPU NO"
    assert "synxfer against the fastest peer" in report.terminal()


def test_a_report_never_says_a_goal_is_met_when_no_peer_ran() -> None:
    report = ScenarioReport(
        _result(_m("synxfer", 1.0, 0.5, 0.1), skipped=("aws",)), "t", machine={"cpu_count": 2}
    )
    (row,) = report.versus()
    assert row["goal_time_met"] is None
    md = report.markdown()
    line = next(ln for ln in md.splitlines() if ln.startswith("| 1000x1MiB down |"))
    assert "no peer ran" in line
    assert "| skipped |" in line
    assert "yes" not in line


def test_re_rendering_from_results_json(tmp_path: Path) -> None:
    """A run's report is rebuilt from its JSON alone; hand-written notes survive."""
    out = tmp_path / "out"
    # A small-file row (its count kept, its size shrunk) of 25 files, both ways: the
    # seed's 1000x1MiB row made the same point with 1000 PUTs to moto (10 s).
    argv = ["run", "--scenario", "synapse-download", "--rows", "1", "--scale", "0.000001",
            "--repeat", "1", "--target", "embedded", "--tools", "synxfer",
            "--work-dir", str(tmp_path / "work"), "--out", str(out), "--no-charts"]  # fmt: skip
    assert bench.main(argv) == 0
    original = (out / "report.md").read_text()
    assert ScenarioReport.load(out / "results.json").markdown() == original
    label = "25x4.19KiB (seed: 25x40KiB, scale 0.105)"  # count kept, size shrunk
    assert f"| {label} up |" in original
    assert f"| {label} down |" in original
    data = json.loads((out / "results.json").read_text())
    assert data["rows"][0]["label"] == label
    assert data["results"][0]["label"] == label

    (out / "report.md").write_text(original + f"\n{HAND_WRITTEN}\n\nWhy it is slow: ...\n")
    assert bench.main(["report", str(out), "--no-charts"]) == 0
    again = (out / "report.md").read_text()
    note = next(ln for ln in again.splitlines() if "re-rendered on" in ln)
    assert "from its results.json by `synxfer-bench report`" in note
    assert again.replace(note + "\n", "").startswith(original)
    assert again.endswith(f"{HAND_WRITTEN}\n\nWhy it is slow: ...\n")
    assert bench.main(["report", str(tmp_path / "nothing.json")]) == 2


@pytest.mark.parametrize(
    "name",
    [
        "synapse-upload",
        "cross-cloud",
        "synapse-download",
        "synapse-threads",
        "awscli",
        "awscli/small-files",
    ],
)
def test_committed_reports_carry_true_labels(name: str) -> None:
    """Every committed scenario report re-renders from its JSON, rows labelled with what moved."""
    path = REPO / "docs" / "benchmarks" / name / "results.json.gz"
    report = ScenarioReport.load(path)
    md = report.markdown()
    committed = path.with_name("report.md").read_text()
    rows = report.to_dict()["rows"]
    assert isinstance(rows, list)
    for info in rows:
        label = str(info["label"])
        assert str(info["geometry"]) in label  # named rows: "<name>: <geometry> (seed: ...)"
        if info["bytes"] != info["published_bytes"]:
            assert f"(seed: {info['published']}, scale" in label
        assert f"| {label} " in md
        assert f"| {label} " in committed  # the committed Markdown says so too


def test_setup_peers_if_missing_installs_nothing_that_is_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = tmp_path / "peers"
    venv.mkdir()
    aws = venv / "aws"
    aws.write_text("")
    (venv / "synxfer-peers.json").write_text(json.dumps({"tools": {"aws": {"path": str(aws)}}}))
    argv = ["setup-peers", "--venv", str(venv), "--tools", "aws", "--if-missing"]
    assert bench.main(argv) == 0
    assert "peers already in" in capsys.readouterr().err
    assert not (venv / "bin").exists()  # no venv made, no pip run


def test_compare_skips_rows_that_moved_other_bytes(tmp_path: Path) -> None:
    from synxfer_bench.compare import compare_files

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    cell = {"tool": "synxfer", "row": "1000x1MiB", "direction": "upload", "ok": True}
    a.write_text(json.dumps({"results": [{**cell, "seconds": 1.0, "bytes": 10}]}))
    b.write_text(json.dumps({"results": [{**cell, "seconds": 9.0, "bytes": 20}]}))
    rows, notes = compare_files(a, b)
    assert rows == []
    assert any("not compared" in n for n in notes)


def test_compare_reads_the_gzipped_runs_the_docs_keep() -> None:
    """docs/benchmarks keeps each run as results.json.gz; compare takes it as it is."""
    from synxfer_bench.compare import compare_files

    run = REPO / "docs" / "benchmarks" / "speed" / "results.json.gz"
    rows, _ = compare_files(run, run)
    assert len(rows) == 32  # 4 rows x up, down x 4 tools, each against itself
    assert not any(r.regression for r in rows)
