"""A tiny run of the block-store experiment (``synxfer_bench.blockstore``): it runs end to end.

Scaled down (2 small files, 2 policies, RTTs / 20, one run) so it takes
seconds; it checks the outputs, not the timings.
"""

from __future__ import annotations

import json
from pathlib import Path

from synxfer_bench import blockstore


def _tiny_run(out: Path, policies: str, rtt_scale: str, experiments: str, *extra: str) -> None:
    """``synxfer-bench blockstore`` at its smallest: 1 run, 2 files of 128 KiB, 64 KiB blocks."""
    argv = ["--out", str(out), "--runs", "1", "--files", "2", "--file-size", "128KiB"]
    argv += ["--block-sizes", "64KiB", "--policies", policies, "--rtt-scale", rtt_scale]
    assert blockstore.main([*argv, "--experiments", experiments, *extra]) == 0


def test_tiny_experiment_writes_every_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _tiny_run(
        out,
        "local,localfarthest",
        "0.05",
        "2,further",
        "--flood-levels",
        "0,2",
        "--serve-rate",
        "8MiB",
    )
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


def test_sao_paulo_experiment(tmp_path: Path) -> None:
    """Experiment 3 (upload at São Paulo, download at Seoul): where each policy puts blocks."""
    out = tmp_path / "out"
    _tiny_run(out, "localclosest,tworandom", "0.2", "3")
    doc = json.loads((out / "results.json").read_text())
    cells = {(c["experiment"], c["policy"]): c for c in doc["cells"]}
    assert set(cells) == {(3, "localclosest"), (3, "tworandom")}
    closest, two = cells[(3, "localclosest")], cells[(3, "tworandom")]
    # São Paulo's closest site is Dublin (184 ms; Seoul 298, Mumbai 305): every block is there.
    assert closest["placement"] == {"Seoul": 0.0, "Dublin": 1.0, "SaoPaulo": 1.0, "Mumbai": 0.0}
    assert closest["read_from"]["Seoul"] == 0.0
    assert closest["read_from"]["Mumbai"] == 0.0
    # Two random sites per block: two replicas of every block, wherever they went.
    assert sum(two["placement"].values()) == 2.0
    md = (out / "results.md").read_text()
    assert "Experiment 3: upload at São Paulo, download at Seoul" in md
    assert "predicted from the RTTs" in md
    assert (out / "exp3.png").is_file()
