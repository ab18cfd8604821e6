"""What a CLI call costs before it does anything: building the parser and
``synxfer --help`` import no plugin SDK (``synxfer.backend``), which loads
asyncio, the HTTP client and the registry; a command imports it when it runs.

Checked in a fresh interpreter, since this test process has long imported
everything."""

from __future__ import annotations

import subprocess
import sys

import pytest

_PROBE = """
import contextlib, io, sys
from synxfer.cli._parser import build_parser
from synxfer.cli.main import main
build_parser()
for argv in {argvs!r}:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main(argv)
print(sorted(m for m in sys.modules if m == "synxfer.backend" or m.startswith("synxfer.backend.")))
"""


@pytest.mark.parametrize("argvs", [[["--help"]], [["cp", "--help"], ["presign", "--help"]]])
def test_parser_and_help_import_no_backend_sdk(argvs: list[list[str]]) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE.format(argvs=argvs)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "[]", probe.stdout
