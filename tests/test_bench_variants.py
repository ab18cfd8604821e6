"""synxfer scale-out variants as bench tools (issue 12): names -> argv, no server needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from synxfer_bench import cli as bench
from synxfer_bench.targets import SeaweedTarget
from synxfer_bench.tools import ALL_TOOLS, Op, Peers, make_tools


@pytest.mark.parametrize(
    ("name", "flags"),
    [
        ("synxfer-p1", ["--processes", "1"]),
        ("synxfer-p2", ["--processes", "2"]),
        ("synxfer-dask2", ["--dask", "local:2"]),
    ],
)
def test_variant_names_resolve_to_their_flags(tmp_path: Path, name: str, flags: list[str]) -> None:
    target = SeaweedTarget(tmp_path)  # not started: only builds commands
    target.endpoint_url = "http://127.0.0.1:1"
    (tool,) = make_tools([name], Peers(tmp_path / "none"))
    assert tool.label == name
    assert tool.describe()["options"] == " ".join(flags)
    argv = tool.command(Op("upload", "row/", tmp_path / "src"), target, tmp_path).argv
    assert argv[1:3] == ["-m", "synxfer.cli.main"]
    at = argv.index(flags[0])
    assert argv[at : at + 2] == flags


def test_variants_are_selectable_but_not_in_all() -> None:
    parser = bench.build_parser()
    spec = "synxfer-p1,synxfer-p2,synxfer-dask2,s5cmd"
    args = parser.parse_args(["run", "--tools", spec])
    assert bench._tool_names(args, parser, None) == spec.split(",")
    args = parser.parse_args(["run", "--tools", "all"])
    assert bench._tool_names(args, parser, None) == list(ALL_TOOLS)
    with pytest.raises(SystemExit):
        bench._tool_names(parser.parse_args(["run", "--tools", "synxfer-p9"]), parser, None)


def test_synxfer_is_byte_compiled_before_it_is_timed() -> None:
    """A stale ``.pyc`` (an edited checkout, ``PYTHONDONTWRITEBYTECODE``) is rebuilt by
    ``prepare``, so no timed run compiles synxfer's sources (decision 0014)."""
    import importlib.util

    import synxfer.engine.checksums as module
    from synxfer_bench.tools import SynxferTool

    assert module.__file__ is not None
    cached = Path(importlib.util.cache_from_source(module.__file__))
    cached.unlink(missing_ok=True)
    assert SynxferTool().prepare() is None
    assert cached.exists()
