"""Benchmark harness behind ``synxfer-bench``: scenarios, data, tools, targets, runners, reports.

* :mod:`.scenarios` -- named matrices (rows of N files of a size) and how ``--scale`` shrinks them;
* :mod:`.datagen` -- seeded random and text data, generated once and reused;
* :mod:`.targets` -- embedded moto, a local SeaweedFS, or a real URL;
* :mod:`.tools` -- synxfer and its peers (aws-cli, s5cmd, rclone, boto3) as subprocesses,
  and ``setup-peers``;
* :mod:`.measure` -- wall time, CPU and peak RSS of a process tree; the 1 Hz timeline;
* :mod:`.matrix` -- runs a scenario, tools interleaved, every run verified;
* :mod:`.runner` -- the in-process ``--quick`` runner;
* :mod:`.report`, :mod:`.charts`, :mod:`.compare` -- tables, JSON, Markdown, PNGs, comparisons.
"""

from .scenarios import QUICK, SCENARIOS, Row, Scenario, parse_rows

__all__ = ["QUICK", "SCENARIOS", "Row", "Scenario", "parse_rows"]
