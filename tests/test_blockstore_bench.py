"""A tiny run of the block-store experiment (``synxfer_bench.blockstore``): it runs end to end.

Scaled down (2 small files, 2 policies, RTTs / 20, one run) so it takes
seconds; it checks the outputs, not the timings.
"""

from __future__ import annotations

import json
from pathlib import Path

from synxfer_bench import blockstore


def test_tiny_experiment_writes_every_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = blockstore.main(
        [
            "--out",
            str(out),
            "--runs",
            "1",
            "--files",
            "2",
            "--file-size",
            "128KiB",
            "--block-sizes",
            "64KiB",
            "--policies",
            "local,localfarthest",
            "--rtt-scale",
            "0.05",
            "--experiments",
            "2,further",
            "--flood-levels",
            "0,2",
            "--serve-rate",
            "8MiB",
        ]
    )
    assert code == 0
    doc = json.loads((out / "results.json").read_text())
    cells = {(c["experiment"], c["policy"]): c for c in doc["cells"]}
    assert set(cells) == {(2, "local"), (2, "localfarthest")}
    local, farthest = cells[(2, "local")], cells[(2, "localfarthest")]
    assert local["read_from"]["Dublin"] == 1.0, f"local = Dublin, the upload site: {local}"
    assert farthest["read_from"]["Seoul"] == 1.0, f"its 2nd copy is at Seoul: {farthest}"
    assert [p["flood"] for p in doc["further"]] == [0, 2]
    assert set(doc["further"][0]["times"]) == {"rtt", "remote", "load"}
    assert doc["further"][1]["read_from"]["remote"]["Mumbai"] == 1.0
    report = (out / "results.md").read_text()
    assert "305 (assumed)" not in report, "RTTs are scaled in the table"
    assert "Experiment 2" in report
    for png in ("exp2.png", "further.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "exp1.png").exists()


def test_orderings_mark_ties() -> None:
    means = {"a": (1.0, 0.01), "b": (1.05, 0.01), "c": (2.0, 0.5), "d": (2.2, 0.05)}
    assert blockstore.ordering(means) == "a ≈ b < c ≈ d"
