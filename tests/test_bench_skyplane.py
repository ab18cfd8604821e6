"""The skyplane scenario: synxfer-zstd, the bench's check of compressed objects, the cost model.

The matrix tests run the real synxfer CLI (with ``--compress zstd``)
against moto on 127.0.0.1 and check what the bench's own client lists and
HEADs; the cost tests feed the report measured stored bytes and check the
dollars follow them.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from synxfer_bench import cli as bench
from synxfer_bench.matrix import MatrixResult, RunPlan, Sample, run_matrix
from synxfer_bench.report import Prices, ScenarioReport
from synxfer_bench.runner import Measurement
from synxfer_bench.scenarios import SCENARIOS, SECOND_BUCKET, Row
from synxfer_bench.targets import EmbeddedTarget, Target
from synxfer_bench.tools import Command, Op, Peers, SynxferTool, make_tools

pytest.importorskip("zstandard")

MiB = 2**20
GiB = 2**30


# --------------------------------------------------------------------------- the scenario


def test_skyplane_rows_are_the_seeds() -> None:
    sky = SCENARIOS["skyplane"]
    by_name = {r.name: r for r in sky.rows}
    shards = by_name["fake-imagenet-shards"]
    assert (shards.files, shards.size, shards.data) == (1024, 64 * MiB, "random")
    big = [(r.files, r.size) for r in sky.rows[1:4]]
    assert big == [(1, 4 * GiB), (1, 16 * GiB), (1, 64 * GiB)]
    text = by_name["text-16MiB-shards"]
    assert (text.data, text.size, text.fixed_size) == ("text", 16 * MiB, True)
    copy = by_name["s3-to-s3-cross-bucket"]
    assert (copy.case, copy.copy_to) == ("copy", SECOND_BUCKET)
    assert sky.tools[:3] == ("synxfer", "synxfer-zstd", "s5cmd")
    scaled = sky.scaled(0.002)
    label = next(r for r in scaled.rows if r.name == "fake-imagenet-shards")
    assert label.published == "1024x64MiB"
    assert label.files > 100


#: sha256 of ``text_bytes(size, seed=, stream=)`` as the word-by-word generator made them.
_CORPUS = {
    (0, "text-16MiB-shards:0", 200_000): (
        "1ca1e98aa720092979d56edd266ab6d83472f893d4456c2cdee740e65caa5ac8"
    ),
    (3, 7, 1_000_003): "a27b9b9e261f8462ace99f0db6fb94c2cf360158cf44de6161ebf3e31e88f638",
}


def test_the_text_corpus_keeps_its_bytes() -> None:
    """The batched generator (decision 0053) makes the bytes the word-by-word one made:
    a corpus on disk or behind a published figure stays the one meant; zlib still
    takes it to about a third, like prose."""
    import hashlib
    import zlib

    from synxfer_bench.datagen import text_bytes

    for (seed, stream, size), digest in _CORPUS.items():
        data = text_bytes(size, seed=seed, stream=stream)
        assert len(data) == size
        assert hashlib.sha256(data).hexdigest() == digest, (seed, stream, size)
    assert 0.3 < len(zlib.compress(data, 6)) / len(data) < 0.4


# --------------------------------------------------------------------------- the tool


def test_synxfer_zstd_tool_command(tmp_path: Path) -> None:
    (tool,) = make_tools(["synxfer-zstd"], Peers(tmp_path))
    assert isinstance(tool, SynxferTool)
    assert tool.compresses
    assert tool.describe()["compresses"] is True
    (plain,) = make_tools(["synxfer"], Peers(tmp_path))
    assert not plain.compresses
    target = EmbeddedTarget()  # not started: only builds commands
    target.endpoint_url = "http://127.0.0.1:1"
    up = tool.command(Op("upload", "row/", tmp_path / "src", 7), target, tmp_path)
    argv = up.argv
    assert argv[argv.index("synxfer.cli.main") + 1 : argv.index("synxfer.cli.main") + 3] == [
        "cp",
        "--recursive",
    ]
    assert argv[argv.index("--compress") + 1] == "zstd"
    assert argv[argv.index("--max-threads") + 1] == "7"  # a sweep keeps --compress
    down = tool.command(Op("download", "row/", tmp_path / "out"), target, tmp_path)
    assert "--compress" in down.argv  # harmless: downloads decompress whatever it says
    copy = Op("copy", "row/", None, copy_to="s3://other/row/")
    assert "not compressed" in (tool.unsupported(copy, target) or "")
    assert plain.unsupported(copy, target) is None


# --------------------------------------------------------------------------- the matrix check


class _TruncatingZstd(SynxferTool):
    """synxfer --compress zstd of a copy of the data whose first file lost its last byte."""

    def command(self, op: Op, target: Target, scratch: Path) -> Command:
        if op.kind == "upload" and op.local is not None:
            bad = scratch / "bad-copy"
            shutil.rmtree(bad, ignore_errors=True)
            shutil.copytree(op.local, bad)
            first = sorted(p for p in bad.rglob("*") if p.is_file())[0]
            first.write_bytes(first.read_bytes()[:-1])
            op = replace(op, local=bad)
        return super().command(op, target, scratch)


def _text_plan(tmp_path: Path) -> RunPlan:
    row = Row("text", 3, MiB, data="text")
    scenario = replace(SCENARIOS["skyplane"], rows=(row,), directions=("upload", "download"))
    return RunPlan(scenario, (row,), 1.0, tmp_path / "work", repeat=1)


def test_the_check_accepts_compressed_objects_and_catches_a_wrong_one(tmp_path: Path) -> None:
    zstd = SynxferTool("synxfer-zstd", ["--compress", "zstd"])
    wrong = _TruncatingZstd("truncating-zstd", ["--compress", "zstd"])
    with EmbeddedTarget() as target:
        result = run_matrix(_text_plan(tmp_path), target, [zstd, wrong])
    by = {(m.tool, m.direction): m for m in result.measurements}
    up, down = by[("synxfer-zstd", "upload")], by[("synxfer-zstd", "download")]
    assert up.ok, up.error
    assert down.ok, down.error  # downloads are transparent: the files' sizes on disk
    assert up.verified_bytes == 3 * MiB  # the original sizes, from the metadata
    samples = {(s.tool, s.direction): s for s in result.samples}
    stored = samples[("synxfer-zstd", "upload")].stored_bytes
    assert stored is not None
    assert stored < 0.5 * 3 * MiB
    assert samples[("synxfer-zstd", "download")].stored_bytes == stored
    bad = by[("truncating-zstd", "upload")]
    assert not bad.ok
    assert "1 of the wrong size" in (bad.error or "")


def test_a_plain_listing_would_have_failed_the_compressed_upload(tmp_path: Path) -> None:
    """Without the metadata check the same upload is a size mismatch: the check matters."""

    class _Unaware(SynxferTool):
        @property
        def compresses(self) -> bool:
            return False

    with EmbeddedTarget() as target:
        plan = _text_plan(tmp_path)
        plan.scenario = replace(plan.scenario, directions=("upload",))
        result = run_matrix(plan, target, [_Unaware("unaware", ["--compress", "zstd"])])
    (m,) = result.measurements
    assert not m.ok
    assert "3 of the wrong size" in (m.error or "")


# --------------------------------------------------------------------------- the cost model


def _cost_report(stored: int, *, data: str = "text") -> ScenarioReport:
    scenario = SCENARIOS["skyplane"]
    row = "text-16MiB-shards"
    nbytes = 10**9
    result = MatrixResult(
        RunPlan(scenario, (), 0.01, Path("."), repeat=1),
        {"name": "seaweedfs", "local": True},
        [
            {"name": "synxfer", "version": "1", "compresses": False},
            {"name": "synxfer-zstd", "version": "1", "compresses": True},
        ],
    )
    result.rows = [
        {"name": row, "files": 60, "bytes": nbytes, "geometry": "60x16MiB",
         "published": "1024x16MiB", "published_bytes": 10 * nbytes, "data": data,
         "case": "transfer", "compression_ratio_zlib6": 0.35}
    ]  # fmt: skip
    for tool, seconds, wire in (("synxfer", 10.0, nbytes), ("synxfer-zstd", 20.0, stored)):
        m = Measurement(tool, row, "upload", 60, nbytes, seconds, 5.0, 1.0)
        m.verified = True
        result.measurements.append(m)
        s = Sample(row, tool, "upload", 0, None, 60, nbytes, seconds=seconds, verified=True)
        s.stored_bytes = wire
        result.samples.append(s)
    return ScenarioReport(result, "synxfer-bench run --scenario skyplane", Prices(0.09, 0.36))


def test_cost_of_a_compressed_run_comes_from_its_stored_bytes() -> None:
    report = _cost_report(340_000_000)
    plain, zstd = report.result.measurements
    c = report.costs(zstd)
    assert c["wire_source"] == "measured"
    assert c["wire_bytes"] == 340_000_000
    assert c["as_sent"] == pytest.approx(
        {"egress_usd": 0.34 * 0.09, "instance_usd": 20 / 3600 * 0.36,
         "total_usd": 0.34 * 0.09 + 20 / 3600 * 0.36}
    )  # fmt: skip
    assert "zlib6_estimate" not in c  # measured, not estimated
    projected = c["projected_full_size"]
    assert isinstance(projected, dict)
    assert projected["egress_usd"] == pytest.approx(3.4 * 0.09)  # seed size x measured ratio
    # Other stored bytes, other dollars: the figure is the measurement's.
    other = _cost_report(500_000_000).costs(zstd)["as_sent"]
    assert isinstance(other, dict)
    assert other["egress_usd"] == pytest.approx(0.5 * 0.09)
    # A tool that does not compress pays for every byte; its zlib figure is an estimate.
    p = report.costs(plain)
    assert p["wire_source"] == "as sent"
    assert p["as_sent"]["egress_usd"] == pytest.approx(0.09)  # type: ignore[index]
    assert p["zlib6_estimate"]["egress_usd"] == pytest.approx(0.35 * 0.09)  # type: ignore[index]
    md = report.markdown()
    line = next(ln for ln in md.splitlines() if "| synxfer-zstd |" in ln and "upload" in ln)
    cells = [x.strip() for x in line.strip("|").split("|")]
    assert cells[4] == "0.340 (measured)"
    assert cells[5] == f"{0.34 * 0.09:.6f}"  # egress $
    assert cells[6] == f"{20 / 3600 * 0.36:.6f}"  # instance $
    assert "estimate" in md
    assert "(zlib-6 0.350)" in md
    assert "## Compression, measured" in md


def test_cost_survives_results_json(tmp_path: Path) -> None:
    report = _cost_report(340_000_000)
    report.write_json(tmp_path / "results.json")
    again = ScenarioReport.load(tmp_path / "results.json")
    zstd = again.result.measurements[1]
    assert again.costs(zstd)["wire_bytes"] == 340_000_000
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["results"][1]["cost"]["wire_source"] == "measured"


def test_a_copy_within_one_service_pays_no_egress_in_older_results() -> None:
    """Results written before rows recorded ``within_service``: the scenario's
    definition (a copy to the second bucket) says the copy stayed inside."""
    report = _cost_report(10**9)
    row = "s3-to-s3-cross-bucket"
    report.result.rows.append(
        {"name": row, "files": 60, "bytes": 10**9, "geometry": "60x16MiB",
         "published": "1024x64MiB", "published_bytes": 10 * 10**9, "data": "random",
         "case": "copy", "compression_ratio_zlib6": 1.0}
    )  # fmt: skip
    m = Measurement("synxfer", row, "copy", 60, 10**9, 10.0, 5.0, 1.0)
    m.verified = True
    report.result.measurements.append(m)
    c = report.costs(m)
    assert (c["wire_bytes"], c["wire_source"]) == (0, "server-side")
    assert c["as_sent"]["egress_usd"] == 0  # type: ignore[index]
    line = next(ln for ln in report.markdown().splitlines() if "| copy | synxfer |" in ln)
    assert "0 (server-side)" in line
    # A copy that leaves the service (another cloud) pays for its bytes.
    report.result.rows[-1]["within_service"] = False
    assert report.costs(m)["as_sent"]["egress_usd"] == pytest.approx(0.09)  # type: ignore[index]


# --------------------------------------------------------------------------- end to end


def test_skyplane_text_and_cross_bucket_copy_end_to_end(tmp_path: Path) -> None:
    """Text shards with synxfer and synxfer-zstd, and the s3 -> s3 copy to a second bucket."""
    out = tmp_path / "out"
    argv = [
        "run", "--scenario", "skyplane", "--rows", "text-16MiB-shards,s3-to-s3-cross-bucket",
        "--scale", "0.000001", "--repeat", "1", "--target", "embedded",
        "--tools", "synxfer,synxfer-zstd", "--work-dir", str(tmp_path / "work"), "--out", str(out),
        "--no-charts",
    ]  # fmt: skip
    assert bench.main(argv) == 0
    report = json.loads((out / "results.json").read_text())
    by = {(r["row"], r["tool"], r["direction"]): r for r in report["results"]}
    up = by[("text-16MiB-shards", "synxfer-zstd", "upload")]
    assert up["ok"]
    assert up["cost"]["wire_source"] == "measured"
    assert 0.2 < up["cost"]["wire_ratio"] < 0.5
    assert by[("text-16MiB-shards", "synxfer", "upload")]["cost"]["wire_ratio"] == 1.0
    copy = by[("s3-to-s3-cross-bucket", "synxfer", "copy")]
    assert copy["ok"]
    assert copy["verified"]
    # Server-side within one service: no egress billed, the instance's time still is.
    assert copy["cost"]["wire_source"] == "server-side"
    assert copy["cost"]["as_sent"]["egress_usd"] == 0
    assert copy["cost"]["as_sent"]["instance_usd"] > 0
    rows = {r["name"]: r for r in report["rows"]}
    assert rows["s3-to-s3-cross-bucket"]["within_service"] is True
    assert rows["text-16MiB-shards"]["within_service"] is False
    assert ("s3-to-s3-cross-bucket", "synxfer-zstd", "copy") not in by
    assert any("synxfer-zstd: skipped s3-to-s3-cross-bucket copy" in n for n in report["notes"])
    assert any("second bucket" in n for n in report["notes"])
    assert not any((tmp_path / "work").rglob("*.txt"))  # the generated corpus is gone
