"""synxfer-bench's thread sweep (``--threads``), the tuned aws-cli/synxfer profiles and the
per-round accounting of periodic sync (issue 14 items 2 and 3).

Commands are built for real tools (paths that exist, a SeaweedFS target that is
not started); the periodic-sync rounds run for real against SeaweedFS (moto
when the ``weed`` binary is missing), with synxfer, a tool that re-sends every
file, and aws-cli when the peers' venv is set up.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from synxfer_bench import cli as bench
from synxfer_bench.datagen import CHANGED_GROWTH, changed_files, expected_files
from synxfer_bench.matrix import (
    RunPlan,
    moved_since,
    round_sizes,
    run_matrix,
    second_changes,
)
from synxfer_bench.report import ScenarioReport, pivot, thread_counts
from synxfer_bench.scenarios import SCENARIOS, Row, Scenario
from synxfer_bench.targets import EmbeddedTarget, SeaweedTarget, Target, find_weed
from synxfer_bench.tools import (
    ALL_TOOLS,
    AWS_TUNED,
    Command,
    Op,
    Peers,
    SynxferTool,
    make_tools,
)

REPO = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("SYNXFER_BENCH_PEERS", REPO / "bench-work" / "peers-venv"))


# --------------------------------------------------------------------------- --threads


def test_threads_option_parses_and_sweeps_every_row() -> None:
    parser = bench.build_parser()
    args = parser.parse_args(["run", "--scenario", "synapse-upload", "--threads", "6,25,50,100"])
    assert args.threads == (6, 25, 50, 100)
    scenario, scale, _ = bench._scenario(args, parser)
    assert scale == SCENARIOS["synapse-upload"].default_scale
    assert len(scenario.rows) == 7
    assert all(r.sweep == (6, 25, 50, 100) for r in scenario.rows)
    # It replaces a row's own sweep (the s5cmd scenario's 10, 50) too.
    args = parser.parse_args(["run", "--scenario", "s5cmd", "--threads", "10, 50,10"])
    scenario, _, _ = bench._scenario(args, parser)
    assert all(r.sweep == (10, 50) for r in scenario.rows)
    # Without --threads the rows keep theirs.
    args = parser.parse_args(["run", "--scenario", "s5cmd"])
    scenario, _, _ = bench._scenario(args, parser)
    assert [r.sweep for r in scenario.rows][:1] == [(10, 50)]


@pytest.mark.parametrize(
    ("spec", "said"),
    [("6,x", "'x'"), ("0,6", "must be >= 1"), (",", "no thread counts"), ("-3", ">= 1")],
)
def test_bad_threads_are_refused_naming_the_option(
    spec: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.build_parser().parse_args(["run", "--scenario", "awscli", f"--threads={spec}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--threads" in err
    assert said in err


# --------------------------------------------------------------------------- the knobs


def _target(tmp_path: Path) -> SeaweedTarget:
    target = SeaweedTarget(tmp_path)  # not started: only builds commands
    target.endpoint_url = "http://127.0.0.1:1"
    return target


def _peers(tmp_path: Path) -> Peers:
    exe = tmp_path / "bin" / "tool"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    return Peers(
        tmp_path, {name: {"path": str(exe)} for name in ("aws", "s5cmd", "rclone", "boto3")}
    )


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _s3_section(command: Command) -> dict[str, str]:
    text = Path(command.env["AWS_CONFIG_FILE"]).read_text()
    assert text.startswith("[default]\nregion = ")
    section = text.split("s3 =\n", 1)[1] if "s3 =\n" in text else ""
    return dict(line.strip().split(" = ") for line in section.splitlines() if line.strip())


def test_each_tool_gets_its_own_thread_knob(tmp_path: Path) -> None:
    target = _target(tmp_path)
    tools = {t.label: t for t in make_tools(list(ALL_TOOLS), _peers(tmp_path))}
    op = Op("upload", "row/", tmp_path / "src", 25)
    for name in tools:
        (tmp_path / name).mkdir(exist_ok=True)
    argv = {name: t.command(op, target, tmp_path / name).argv for name, t in tools.items()}
    assert _after(argv["synxfer"], "--max-threads") == "25"
    assert argv["synxfer-tuned"].count("--max-threads") == 1
    assert _after(argv["synxfer-tuned"], "--max-threads") == "25"
    assert _after(argv["s5cmd"], "--numworkers") == "25"
    assert _after(argv["s5cmd"], "--concurrency") == "25"
    for flag in ("--transfers", "--s3-upload-concurrency", "--multi-thread-streams"):
        assert _after(argv["rclone"], flag) == "25"
    assert _after(argv["boto3"], "--concurrency") == "25"
    aws = tools["aws"].command(op, target, tmp_path / "aws")
    assert _s3_section(aws) == {"max_concurrent_requests": "25"}
    tuned = tools["aws-tuned"].command(op, target, tmp_path / "aws-tuned")
    assert _s3_section(tuned) == {**AWS_TUNED, "max_concurrent_requests": "25"}
    # The report says which knob each tool got.
    knobs = {name: str(t.describe()["threads_knob"]) for name, t in tools.items()}
    assert knobs["aws"].startswith("max_concurrent_requests")
    assert knobs["s5cmd"] == "--numworkers N --concurrency N"
    assert "--transfers" in knobs["rclone"]
    assert knobs["synxfer"] == "--max-threads N"


def test_defaults_and_the_tuned_profiles(tmp_path: Path) -> None:
    target = _target(tmp_path)
    tools = {t.label: t for t in make_tools(list(ALL_TOOLS), _peers(tmp_path))}
    op = Op("sync", "row/", tmp_path / "src")
    made = {}
    for name, tool in tools.items():
        (tmp_path / name).mkdir()
        made[name] = tool.command(op, target, tmp_path / name)
    # Defaults: no thread flag, aws's config has no s3 section.
    assert "--max-threads" not in made["synxfer"].argv
    assert made["synxfer"].env.get("AWS_CONFIG_FILE") == os.devnull
    assert _s3_section(made["aws"]) == {}
    assert made["aws"].argv[1:3] == ["s3", "sync"]
    # aws-tuned: the seed's four settings in its generated config.
    assert _s3_section(made["aws-tuned"]) == {
        "max_concurrent_requests": "100",
        "max_queue_size": "10000",
        "multipart_threshold": "10MB",
        "multipart_chunksize": "5MB",
    }
    # synxfer-tuned: the same as flags, and the threshold (no flag) from the same config.
    argv = made["synxfer-tuned"].argv
    assert _after(argv, "--max-threads") == "100"
    assert _after(argv, "--part-size") == "5MiB"
    assert _s3_section(made["synxfer-tuned"])["multipart_threshold"] == "10MB"
    assert "multipart_threshold 10MB" in str(tools["synxfer-tuned"].describe()["options"])
    # --max-threads/--part-size on synxfer-bench run still change the profile.
    (tuned,) = make_tools(["synxfer-tuned"], Peers(tmp_path / "none"), tuned_options={
        "max_threads": 7})  # fmt: skip
    assert _after(tuned.command(op, target, tmp_path).argv, "--max-threads") == "7"


def test_the_synxfer_cli_reads_the_tuned_threshold(tmp_path: Path) -> None:
    """The config synxfer-tuned gets is one the synxfer CLI accepts (it reads the s3 section)."""
    from synxfer.cli._awsconfig import read_s3_settings

    target = _target(tmp_path)
    (tool,) = make_tools(["synxfer-tuned"], Peers(tmp_path / "none"))
    command = tool.command(Op("upload", "row/", tmp_path / "src"), target, tmp_path)
    settings = read_s3_settings(None, {"AWS_CONFIG_FILE": command.env["AWS_CONFIG_FILE"]})
    assert settings == {
        "max_threads": 100,
        "multipart_threshold": 10 * 2**20,
        "part_size": 5 * 2**20,
    }


# --------------------------------------------------------------------------- grouped tables


def test_tables_are_grouped_by_thread_count(tmp_path: Path) -> None:
    """A real two-count sweep on a tiny row: one table per thread count, the knobs listed."""
    weed = find_weed()
    out = tmp_path / "out"
    argv = [
        "run", "--scenario", "synapse-download", "--rows", "1", "--scale", "0.0001",
        "--threads", "2,5", "--repeat", "1", "--tools", "synxfer",
        "--target", "seaweedfs" if weed else "embedded", "--work-dir", str(tmp_path / "w"),
        "--out", str(out), "--no-charts",
    ]  # fmt: skip
    assert bench.main(argv) == 0
    data = json.loads((out / "results.json").read_text())
    assert sorted({(r["concurrency"], r["direction"]) for r in data["results"]}) == [
        (2, "download"), (2, "upload"), (5, "download"), (5, "upload"),
    ]  # fmt: skip
    assert all(r["ok"] for r in data["results"])
    report = ScenarioReport.load(out / "results.json")
    assert thread_counts(report.result.measurements) == [2, 5]
    _header, body = pivot(report.result.measurements, "download", "seconds", ["synxfer"], threads=5)
    assert len(body) == 1
    assert "c=" not in body[0][0]
    md = (out / "report.md").read_text()
    assert md.index("## 2 threads") < md.index("## 5 threads")
    assert "| synxfer |" in md
    assert "--max-threads N" in md
    table = (out / "table.txt").read_text()
    assert "2 threads: upload: seconds" in table
    assert "5 threads: download: seconds" in table


# --------------------------------------------------------------------------- periodic sync


def test_round_three_changes_another_five_percent() -> None:
    row = Row("periodic-sync-5pct", 100, 1000, case="periodic-sync")
    first, second = set(changed_files(row)), set(second_changes(row))
    assert len(first) == len(second) == 5
    assert not first & second
    sizes = [round_sizes(row, n) for n in (1, 2, 3)]
    assert set(sizes[0]) == set(sizes[2]) == set(expected_files(row))
    grown = {k for k in sizes[2] if sizes[2][k] != sizes[1][k]}
    assert grown == second
    assert all(sizes[2][k] == 1000 + CHANGED_GROWTH for k in first | second)
    one = Row("p", 1, 10, case="periodic-sync")
    assert second_changes(one) == changed_files(one)  # a one-file row changes it again


def test_moved_since_counts_new_rewritten_and_retagged_objects() -> None:
    before = {"a": (10, '"e1"', 100.0), "b": (20, '"e2"', 100.0), "c": (30, '"e3"', 100.0)}
    after = {
        "a": (10, '"e1"', 100.0),  # untouched
        "b": (20, '"e2"', 102.0),  # same bytes sent again: newer LastModified
        "c": (31, '"e4"', 100.0),  # new content (same second)
        "d": (40, '"e5"', 102.0),  # new key
    }
    assert moved_since(before, after) == (3, 91)
    assert moved_since({}, after) == (4, 101)


class _ResendAll(SynxferTool):
    """A real sync 'tool' that re-sends every file each round (``synxfer cp --recursive``)."""

    def __init__(self) -> None:
        super().__init__("resend-all")

    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        command = super().command(op, target, scratch)
        argv = list(command.argv)
        at = argv.index("sync")
        argv[at : at + 1] = ["cp", "--recursive"]
        return Command(argv, command.env)


def test_periodic_sync_reports_time_and_bytes_per_round(tmp_path: Path) -> None:
    row = Row("periodic-sync-5pct", 40, 4096, case="periodic-sync")
    scenario = Scenario("awscli", (row,), default_scale=1.0)
    plan = RunPlan(scenario, (row,), 1.0, tmp_path / "work", repeat=1)
    names = ["synxfer"]
    if (PEERS / "bin" / "aws").exists():
        names.append("aws")
    tools = [*make_tools(names, Peers.load(PEERS)), _ResendAll()]
    target: Target = SeaweedTarget(tmp_path / "work") if find_weed() else EmbeddedTarget()
    with target:
        result = run_matrix(plan, target, tools)
    got = {(m.tool, m.direction): m for m in result.measurements}
    full = 40 * 4096
    changed = 2 * (4096 + CHANGED_GROWTH)
    for tool in names:
        rounds = [got[(tool, d)] for d in ("sync", "resync", "resync2")]
        assert all(m.ok for m in rounds), [m.error for m in rounds]
        assert [(m.moved_files, m.moved_bytes) for m in rounds] == [
            (40, full),
            (2, changed),
            (2, changed),
        ], tool
        assert all(m.seconds > 0 for m in rounds)
    resend = [got[("resend-all", d)] for d in ("sync", "resync", "resync2")]
    assert all(m.ok for m in resend)
    assert [m.moved_files for m in resend] == [40, 40, 40]
    assert resend[1].moved_bytes == full + 2 * CHANGED_GROWTH
    report = ScenarioReport(result, "synxfer-bench test")
    header, body = report._rounds_table()
    assert header[:6] == ["row", "round", "tool", "seconds", "files moved", "MiB moved"]
    assert len(body) == 3 * len(tools)
    assert body[0][1] == "1 (initial sync)"
    assert body[-1][1] == "3 (after 5 % changed)"
    md = report.markdown()
    assert "## Periodic sync, per round" in md
    if "aws" in names:
        aws_rows = [b for b in body if b[2] == "aws"]
        assert all(b[-1] == "1.00" for b in aws_rows)
    # Rebuilt from the JSON, the rounds keep what moved.
    path = tmp_path / "results.json"
    report.write_json(path)
    again = ScenarioReport.load(path)
    assert again._rounds_table() == (header, body)
