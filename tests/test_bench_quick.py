"""``synxfer-bench --quick`` end to end at a tiny scale, plus its building blocks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from synxfer_bench import cli as bench
from synxfer_bench.datagen import ensure_row_data, row_data_dir
from synxfer_bench.report import format_table
from synxfer_bench.runner import Measurement, bench_environment
from synxfer_bench.scenarios import QUICK, Row, parse_rows


def test_quick_bench_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.json"
    before = dict(os.environ)
    code = bench.main(
        ["--quick", "--scale", "0.01", "--work-dir", str(tmp_path / "work"), "--json", str(out)]
    )
    assert code == 0
    assert dict(os.environ) == before  # the bench's credentials don't leak out

    report = json.loads(out.read_text())
    assert report["ok"] is True
    assert report["scenario"] == "quick"
    assert report["scale"] == 0.01
    machine = report["machine"]
    for key in ("python", "cpu_count", "platform", "synxfer", "botocore", "aiobotocore"):
        assert machine[key], key

    results = report["results"]
    rows = [r.scaled(0.01) for r in QUICK.rows]
    assert [(r["row"], r["direction"]) for r in results] == [
        (row.name, d) for row in rows for d in ("upload", "download")
    ]
    for result, row in zip(results, [r for r in rows for _ in (0, 1)], strict=True):
        assert result["tool"] == "synxfer"
        assert result["ok"] is True, result["error"]
        assert result["verified"] is True
        assert result["verified_files"] == row.files
        assert result["verified_bytes"] == row.total_bytes == result["bytes"]
        assert result["seconds"] > 0
        assert result["mib_per_s"] > 0
        assert result["files_per_s"] > 0
        assert result["client_cpu_s"] > 0
        assert result["server_cpu_s"] is not None

    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:3] == ["test", "tool", "direction"]
    assert "100x1MiB" in table
    assert "1x64MiB" in table
    # The server, its data and the downloads are gone; the generated data stays for reuse.
    assert not any((tmp_path / "work" / "out").iterdir())
    assert ensure_row_data(tmp_path / "work", rows[0])[1] is False


def test_datagen_is_seeded_reused_and_repaired(tmp_path: Path) -> None:
    row = Row.of(3, 1500)
    root, generated = ensure_row_data(tmp_path, row, seed=7)
    assert generated
    assert root == row_data_dir(tmp_path, row)
    first = {p.name: p.read_bytes() for p in root.iterdir()}
    assert sorted(first) == ["f000000.bin", "f000001.bin", "f000002.bin"]
    assert {len(b) for b in first.values()} == {1500}
    assert len(set(first.values())) == 3  # different content per file

    assert ensure_row_data(tmp_path, row, seed=7) == (root, False)
    (root / "f000001.bin").write_bytes(b"truncated")
    assert ensure_row_data(tmp_path, row, seed=7) == (root, True)
    assert {p.name: p.read_bytes() for p in root.iterdir()} == first  # same seed, same bytes


def test_rows_and_scaling() -> None:
    assert [r.name for r in QUICK.rows] == ["100x1MiB", "10x10MiB", "1x64MiB"]
    assert parse_rows("100x1MiB, 2x3M") == (Row("100x1MiB", 100, 2**20), Row("2x3MiB", 2, 3 << 20))
    small = Row.of(10, 10 * 2**20).scaled(0.001)
    assert (small.name, small.files, small.size) == ("10x10MiB", 10, 10486)
    for bad in ("x1MiB", "0x1MiB", "3x", "3xlots"):
        with pytest.raises(ValueError, match="invalid row"):
            parse_rows(bad)


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main([])
    assert exc.value.code == 2
    assert "synxfer-bench: error: nothing to run" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        bench.main(["run", "--quick", "--scale", "0"])
    assert exc.value.code == 2


def test_table_and_environment() -> None:
    m = Measurement("synxfer", "1x1MiB", "upload", 1, 2**30, seconds=2.0, client_cpu=1.5)
    m.verified = True
    table = format_table([m])
    header, rule, line = table.splitlines()
    assert header.startswith("test    tool     direction")
    assert set(rule) == {"-", " "}
    assert line.split() == [
        "1x1MiB", "synxfer", "upload", "2.00", "512.0", "0.5", "1.50", "1.5", "-", "yes",
    ]  # fmt: skip
    with bench_environment():
        assert os.environ["AWS_ACCESS_KEY_ID"] == "testing"
        assert "AWS_PROFILE" not in os.environ
