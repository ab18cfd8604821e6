"""A missing optional dependency is an install hint (exit 2), never a traceback.

Each command runs in a subprocess where the dependency's module is blocked
(``sys.modules[name] = None`` makes ``import name`` fail as if it were not
installed), the way a user without that extra would run it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run_blocked(module: str, entry: str, *args: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        f"sys.modules[{module!r}] = None\n"
        f"from {entry.partition(':')[0]} import {entry.partition(':')[2]} as main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("args", [("run", "--quick"), ("--help",)])
def test_bench_without_psutil_says_what_to_install(args: tuple[str, ...]) -> None:
    proc = _run_blocked("psutil", "synxfer_bench.cli:main", *args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "psutil is not installed" in proc.stderr
    assert "pip install psutil" in proc.stderr


def test_blockd_without_aiohttp_says_what_to_install() -> None:
    proc = _run_blocked("aiohttp", "synxfer_blockstore.server:main", "--port", "0")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "aiohttp is not installed" in proc.stderr
    assert "pip install 'synxfer[blockstore]'" in proc.stderr


def test_blockd_names_without_aiohttp_raise_import_error_with_the_hint() -> None:
    code = (
        "import sys\n"
        "sys.modules['aiohttp'] = None\n"
        "try:\n"
        "    from synxfer_blockstore.server import Blockd\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "needs aiohttp" in proc.stdout
    assert "synxfer[blockstore]" in proc.stdout


def test_other_import_errors_are_not_hidden() -> None:
    """Only the known optional packages get a hint; another missing module is a bug."""
    proc = _run_blocked("synxfer_bench.tools", "synxfer_bench.cli:main", "--help")
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr
