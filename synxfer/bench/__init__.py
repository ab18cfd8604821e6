"""Benchmark harness behind ``synxfer-bench``: scenarios, data generation, runner, report.

A :class:`~synxfer.bench.scenarios.Scenario` is a list of rows (N files of a
given size). :mod:`.datagen` writes seeded random files for a row once and
reuses them; :mod:`.runner` uploads and downloads each row with each
:class:`~synxfer.bench.runner.Tool` against an S3 server, verifying counts
and bytes and measuring time and CPU; :mod:`.report` prints the table and
writes JSON.
"""

from .scenarios import QUICK, SCENARIOS, Row, Scenario, parse_rows

__all__ = ["QUICK", "SCENARIOS", "Row", "Scenario", "parse_rows"]
