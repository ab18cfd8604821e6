"""The ``synxfer-bench`` command: reproducible transfer benchmarks against an embedded S3.

``synxfer-bench --quick`` (same as ``synxfer-bench run --quick``) uploads and
downloads the quick matrix (100x1MiB, 10x10MiB, 1x64MiB) through a moto S3
server started in a subprocess, verifies every transfer, and prints a table.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from .._config import TransferConfig
from .._exceptions import ConfigError, SynxferError
from ..bench.report import BenchReport, format_table
from ..bench.runner import BenchError, BenchOptions, run_with_moto
from ..bench.scenarios import QUICK, parse_rows
from ._args import Parser, positive_int, size_arg

__all__ = ["build_parser", "main"]

SUBCOMMANDS = ("run",)
DEFAULT_WORK_DIR = Path("bench-work")


class _BenchParser(Parser):
    tool = "synxfer-bench"


def _scale(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid scale {text!r}: expected a number") from None
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"scale must be > 0 and <= 1000 (got {text})")
    return value


def _rows(text: str) -> str:
    try:
        parse_rows(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def build_parser() -> Parser:
    """The argparse parser of ``synxfer-bench`` (``run`` is the default subcommand)."""
    parser = _BenchParser(
        prog="synxfer-bench",
        description="Benchmark synxfer uploads and downloads against an embedded S3 server.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = sub.add_parser(
        "run",
        help="run a benchmark matrix (the default command)",
        description="Upload and download each row, verify it, and report time and CPU.",
    )
    what = run.add_argument_group("what to run")
    what.add_argument(
        "--quick",
        action="store_true",
        help="the quick matrix: " + ", ".join(r.name for r in QUICK.rows),
    )
    what.add_argument(
        "--rows",
        type=_rows,
        metavar="SPEC",
        help="custom rows instead, comma-separated <files>x<size>, e.g. 100x1MiB,1x64MiB",
    )
    what.add_argument(
        "--scale",
        type=_scale,
        default=1.0,
        help="multiply every file size by this factor (file counts stay); default 1",
    )
    run.add_argument(
        "--work-dir",
        type=Path,
        default=DEFAULT_WORK_DIR,
        metavar="DIR",
        help=f"where test data is generated and reused (default: ./{DEFAULT_WORK_DIR}/)",
    )
    run.add_argument("--json", type=Path, metavar="OUT", help="also write results as JSON to OUT")
    run.add_argument("--seed", type=int, default=0, help="seed of the generated data (default 0)")
    tuning = run.add_argument_group("synxfer tuning")
    tuning.add_argument("--max-threads", type=positive_int, metavar="N")
    tuning.add_argument("--max-files", type=positive_int, metavar="N")
    tuning.add_argument("--part-size", type=size_arg, metavar="SIZE")
    run.add_argument("-v", "--verbose", action="count", default=0, help="debug log on stderr")
    return parser


def _normalize(argv: Sequence[str]) -> list[str]:
    """Make ``run`` the default subcommand: ``synxfer-bench --quick`` == ``... run --quick``."""
    args = list(argv)
    if args and (args[0] in SUBCOMMANDS or args[0] in ("-h", "--help")):
        return args
    return ["run", *args]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _options(args: argparse.Namespace) -> BenchOptions:
    if args.rows:
        scenario, rows = "custom", parse_rows(args.rows)
    else:
        scenario, rows = QUICK.name, QUICK.rows
    changes = {
        name: getattr(args, name)
        for name in ("max_threads", "max_files", "part_size")
        if getattr(args, name) is not None
    }
    config = TransferConfig(**changes) if changes else None
    return BenchOptions(
        rows=tuple(r.scaled(args.scale) for r in rows),
        work_dir=args.work_dir,
        seed=args.seed,
        config=config,
        scenario=scenario,
        scale=args.scale,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``synxfer-bench``; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(_normalize(sys.argv[1:] if argv is None else argv))
    if not args.quick and not args.rows:
        parser.error("nothing to run: pass --quick (or --rows SPEC)")
    if args.verbose:
        logging.basicConfig(
            stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        logging.getLogger("synxfer").setLevel(logging.DEBUG)
    try:
        options = _options(args)
        total = sum(r.total_bytes for r in options.rows)
        _log(
            f"synxfer-bench: {options.scenario} x{options.scale:g}: "
            f"{len(options.rows)} rows, {total / 2**20:.1f} MiB each way, work dir {args.work_dir}"
        )
        measurements = run_with_moto(options, tools=("synxfer",), log=_log)
    except KeyboardInterrupt:
        _log("synxfer-bench: interrupted")
        return 130
    except ConfigError as exc:
        _log(f"synxfer-bench: error: {exc}")
        return 2
    except (BenchError, SynxferError, OSError) as exc:
        _log(f"synxfer-bench: error: {exc}")
        return 1
    report = BenchReport(options.scenario, options.scale, options.seed, measurements)
    print(format_table(measurements))
    if args.json is not None:
        report.write_json(args.json)
        _log(f"results written to {args.json}")
    if not report.ok:
        for m in measurements:
            if not m.ok:
                _log(f"synxfer-bench: {m.row} {m.tool} {m.direction}: {m.error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
