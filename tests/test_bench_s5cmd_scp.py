"""The s5cmd scenario (seed 001): synxfer through ``scp://``, s5cmd on the same endpoint.

A tiny run of its first row (one file, workers/concurrency 10 and 50)
against SeaweedFS (moto without the ``weed`` binary), every run verified by
the bench's own listing; s5cmd runs when the peers venv has it. Every run
carries its per-second resource table and the tool's threads, and the
report renders them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from synxfer_bench.matrix import RunPlan, load_result, run_matrix
from synxfer_bench.report import ScenarioReport
from synxfer_bench.scenarios import SCENARIOS
from synxfer_bench.targets import EmbeddedTarget, SeaweedTarget, Target, find_weed
from synxfer_bench.tools import Op, Peers, S5cmdTool, SynxferTool, Tool, make_tools

REPO = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("SYNXFER_BENCH_PEERS", REPO / "bench-work" / "peers-venv"))


def test_the_scenario_is_seed_001() -> None:
    s5 = SCENARIOS["s5cmd"]
    assert [r.sweep for r in s5.rows] == [(10, 50), (10, 50), (10, 50), ()]
    assert [(r.files, r.size) for r in s5.rows] == [
        (1, 2**30), (1, 10 * 2**30), (1, 100 * 2**30), (2500, 1_000_000),
    ]  # fmt: skip
    assert s5.tools == ("synxfer", "s5cmd")
    assert s5.target == "seaweedfs"
    assert s5.synxfer_scheme == "scp"


def _target(tmp_path: Path) -> Target:
    if find_weed() is not None:
        return SeaweedTarget(tmp_path / "work")
    return EmbeddedTarget()


def test_synxfer_over_scp_beside_s5cmd(tmp_path: Path) -> None:
    s5 = SCENARIOS["s5cmd"]
    scale = 0.00002  # 1 GiB -> one file of about 21 KiB
    scenario = s5.scaled(scale)
    plan = RunPlan(scenario, scenario.rows[:1], scale, tmp_path / "work", repeat=1)
    peers = Peers.load(PEERS)
    tools: list[Tool] = make_tools(["synxfer", "s5cmd"], peers)
    have_s5cmd = tools[1].missing() is None
    with _target(tmp_path) as target:
        assert target.scheme == "s3"
        result = run_matrix(plan, target, tools)
        # The run addressed synxfer at scp:// on the server's endpoint, s5cmd at s3:// on it.
        assert target.scheme == "scp"
        assert result.target["scheme"] == "scp"
        op = Op("upload", "p/", tmp_path, 10)
        synxfer = SynxferTool().command(op, target, tmp_path).argv
        assert f"scp://{target.bucket}/p/" in synxfer
        assert synxfer[synxfer.index("--endpoint-url") + 1] == target.endpoint_url
        assert synxfer[synxfer.index("--max-threads") + 1] == "10"
        if have_s5cmd:
            s5cmd = S5cmdTool(peers).command(op, target, tmp_path).argv
            assert f"s3://{target.bucket}/p/" in s5cmd
            assert s5cmd[s5cmd.index("--endpoint-url") + 1] == target.endpoint_url
            assert s5cmd[s5cmd.index("--numworkers") + 1] == "10"
            assert s5cmd[s5cmd.index("--concurrency") + 1] == "10"
    assert any("scp://" in n for n in result.notes)

    ran = {(s.tool, s.direction, s.concurrency) for s in result.samples if s.ok}
    want = {("synxfer", d, c) for d in ("upload", "download") for c in (10, 50)}
    if have_s5cmd:
        want |= {("s5cmd", d, c) for d in ("upload", "download") for c in (10, 50)}
    assert ran == want, [s.error for s in result.samples if not s.ok]
    for s in result.samples:
        assert s.resources is not None
        assert s.resources.rows, s
        assert s.resources.threads, s
        assert s.resources.process_cpu == pytest.approx(s.cpu_user + s.cpu_system, abs=1e-3)

    report = ScenarioReport(result, command="synxfer-bench run --scenario s5cmd")
    doc = report.to_dict()
    again = load_result(doc)
    assert [s.resources is not None for s in again.samples] == [True] * len(result.samples)
    md = ScenarioReport(again, command="x").markdown()
    assert "## Resources per second and per thread" in md
    assert "| s | usr | sys | idl | wai | read | writ | recv | send | int | csw |" in md
    assert "c=50, synxfer upload" in md
    if have_s5cmd:
        assert "c=10, s5cmd download" in md
