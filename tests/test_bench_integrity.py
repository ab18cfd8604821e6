"""The ``integrity`` scenario of synxfer-bench (issue 33), small: a tiny tree,
one round, stock moto only.

synxfer must store and land 0 corrupt files through the flipping proxy; a
naive client (boto3 with no checksums, a real client on the real server)
proves that the scenario's counting sees corruption when a tool lets it
through; each installed peer runs once (skipped, naming the peer, when it
is not installed: ``synxfer-bench setup-peers``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from synxfer_bench.cli import _normalize, main
from synxfer_bench.integrity import IntegrityReport, run_integrity
from synxfer_bench.targets import Target
from synxfer_bench.tools import Command, Op, Peers, Tool, make_tools

REPO = Path(__file__).resolve().parents[1]
PEERS = Path(os.environ.get("SYNXFER_BENCH_PEERS", REPO / "bench-work" / "peers-venv"))
#: 8 small files and one of 9 MiB (multipart for synxfer and aws-cli).
TINY = ((3, 4096), (3, 200_000), (1, 9 * 2**20))

_NAIVE = """
import sys, boto3, pathlib
from botocore.config import Config
kind, endpoint, bucket, prefix, local = sys.argv[1:6]
s3 = boto3.client("s3", endpoint_url=endpoint, config=Config(
    request_checksum_calculation="when_required", response_checksum_validation="when_required",
    s3={"addressing_style": "path"}))
root = pathlib.Path(local)
if kind == "upload":
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        s3.put_object(Bucket=bucket, Key=prefix + path.relative_to(root).as_posix(),
                      Body=path.read_bytes())
else:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            dest = root / item["Key"][len(prefix):]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
"""


class _Naive(Tool):
    """A client that checks nothing: boto3 put_object / get_object, no checksums."""

    name = "naive"

    def _query_version(self) -> str:
        return "boto3, no checksums"

    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        assert target.endpoint_url is not None
        argv = [sys.executable, "-c", _NAIVE, op.kind, target.endpoint_url, target.bucket]
        return Command([*argv, target.base_prefix + op.prefix, str(op.local)], target.tool_env())


PEER_NAMES = ("aws", "s5cmd", "rclone")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> IntegrityReport:
    """One run (one stock moto) for the whole module: synxfer, the naive
    client and every installed peer (the others are skipped in the report)."""
    return run_integrity(
        servers=["stock-moto"],
        tools=["synxfer", _Naive(), *PEER_NAMES],
        rounds=1,
        work_dir=tmp_path_factory.mktemp("integrity"),
        peers_venv=PEERS,
        groups=TINY,
        timeout=300,
        log=lambda _m: None,
    )


def test_synxfer_stores_and_lands_no_corrupt_file_and_a_naive_client_is_caught(
    report: IntegrityReport, tmp_path: Path
) -> None:
    cells = {(c.tool, c.direction): c for c in report.cells}
    assert {(t, d) for t in ("synxfer", "naive", *PEER_NAMES) for d in ("put", "get")} == set(cells)
    for direction in ("put", "get"):
        mine = cells[("synxfer", direction)]
        assert mine.flipped > 0, direction  # the proxy did flip bytes
        assert (mine.corrupt, mine.missing, mine.exit_codes) == (0, 0, [0]), mine.runs
        naive = cells[("naive", direction)]
        # Every flipped body of the naive client is a corrupt object or file.
        assert naive.flipped > 0
        assert naive.corrupt == naive.flipped, naive.runs
        assert naive.missing == 0
    assert cells[("synxfer", "get")].runs[0].files == 2 * 7  # its own objects and aws-cli's
    assert report.synxfer_clean()

    out = tmp_path / "out"
    report.write(out)
    assert {p.name for p in out.iterdir()} == {"table.txt", "results.json", "report.md"}
    md = (out / "report.md").read_text()
    assert "Listing bodies are **not** flipped" in md
    assert "| PUT | stock-moto | **synxfer** | **0** |" in md
    again = IntegrityReport.load(out / "results.json")
    assert again.terminal() == report.terminal()
    assert "every server: yes" in report.terminal()
    # Hand-written notes below the marker survive a rewrite.
    (out / "report.md").write_text(md + "a note\n")
    again.write(out)
    assert (out / "report.md").read_text().endswith("a note\n")


@pytest.mark.parametrize("peer", PEER_NAMES)
def test_a_peer_runs_and_is_counted(report: IntegrityReport, peer: str) -> None:
    tool = make_tools([peer], Peers.load(PEERS))[0]
    why = tool.missing()
    if why is not None:
        assert all(c.skipped == why for c in report.cells if c.tool == peer)
        pytest.skip(f"{peer} is not installed: {why}")
    for cell in (c for c in report.cells if c.tool == peer):
        (run,) = cell.runs
        assert run.flipped > 0
        assert run.corrupt + run.missing <= run.files
        assert run.exit_code is not None  # not killed at the timeout
        assert cell.corrupt <= run.flipped  # one flipped body makes at most one bad file


def test_cli_forms_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert _normalize(["run", "--scenario", "integrity", "--rounds", "2"]) == [
        "integrity",
        "--rounds",
        "2",
    ]
    assert _normalize(["--scenario=integrity"]) == ["integrity"]
    assert _normalize(["run", "--scenario", "speed"])[:3] == ["run", "--scenario", "speed"]
    assert main(["run", "--scenario", "integrity", "--targets", "minio"]) == 2
    err = capsys.readouterr().err
    assert "--targets: unknown server 'minio'" in err
    assert "stock-moto" in err
    assert main(["integrity", "--tools", "wget"]) == 2
    assert "--tools: unknown tool 'wget'" in capsys.readouterr().err
