"""Paired A/B of downloads on one SeaweedFS: source trees of synxfer (and s5cmd) alternated.

Starts ``weed mini`` on 127.0.0.1 with signature checks on
(:class:`synxfer_bench.targets.SeaweedTarget`), uploads each row once with the
first tree, then downloads it with every tool in turn, ``--rounds`` times,
the order rotated each round. A tool is

* ``NAME=TREE``: synxfer from that source tree (``python -m synxfer.cli.main
  cp --recursive URL DIR -q`` with ``PYTHONPATH=TREE:TREE/plugins``),
  optionally ``NAME=TREE::ARGS`` with more CLI arguments
  (``fast=.::--max-threads 12``), and ``--tool-env NAME:KEY=VALUE`` for a
  scratch tree's switches;
* ``s5cmd``, from ``--peers-venv`` (``synxfer-bench setup-peers``), with
  ``s5cmd::ARGS`` for its global flags (``s5cmd::--numworkers 4``), and
  ``s5cmd-NAME::ARGS`` for a second s5cmd under another name;
* ``bare...`` (any name starting so, e.g. ``bare16``, ``bare32pipe``):
  ``benchmarks/experiments/bare_download.py`` with ``::ARGS`` (``--range-mib 32
  --mode pipe``), the floor of a Python data plane: threads, ranged GETs,
  no journal, no retries; ``--mode native`` is the floor of a native one
  (``bare_native.c``, compiled on first use).

Each run is a fresh process into an empty directory; its CPU comes from
``os.wait4``, the server's from its process tree, and its files are checked
after it, outside the timing: every name and CRC32C against the source's.
Printed per row: each tool's medians (wall, user, system, server CPU
seconds) and, against the first tool, the median of the per-round wall
and client CPU (user + system, and user alone: the system time of a
many-file row swings with the filesystem's inode allocation) differences
and in how many rounds each was lower -- the figures to quote,
since absolute times on a shared machine drift::

    python benchmarks/experiments/s3_download_ab.py --rows 1x1GiB,10x100MiB --rounds 8 \\
        before=/path/to/old/worktree after=. s5cmd
    python benchmarks/experiments/s3_download_ab.py --rows 100x10MiB --tool-env exp:MY_SWITCH=1 \\
        head=. exp=/tmp/scratch-tree "wide=.::--max-threads 12" "s5cmd::--numworkers 4"

``--tls`` serves the rows over HTTPS too (a throw-away CA made per run;
``AWS_CA_BUNDLE`` and ``SSL_CERT_FILE`` name it, so every tool verifies the
server) and downloads over HTTPS; ``--tls --also-http`` measures both.

On ext4 without a journal (this VM's), creating a file skips every inode
deleted in the last minutes, so a many-file row's system time grows with the
runs before it, for every tool: ``--out-dir /dev/shm/ab-out`` (a tmpfs)
measures the client without it.

Options go before the tools. Drop the page cache first (``sync; echo 3 >
/proc/sys/vm/drop_caches``) and run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import fastcrc

from synxfer_bench.datagen import ensure_row_data
from synxfer_bench.scenarios import parse_rows
from synxfer_bench.targets import SeaweedTarget
from synxfer_bench.tools import Peers

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@dataclass
class Tool:
    name: str
    tree: Path | None  # None: s5cmd
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    bare: bool = False  # benchmarks/experiments/bare_download.py, with this repository's synxfer


def parse_tool(spec: str) -> Tool:
    head, _, extra = spec.partition("::")
    if head == "s5cmd" or head.startswith("s5cmd-"):
        return Tool(head, None, extra.split())
    if head.startswith("bare") and "=" not in head:
        return Tool(head, REPO, extra.split(), bare=True)
    name, sep, tree = head.partition("=")
    if not sep or not name or not tree:
        raise SystemExit(
            f"tool {spec!r}: expected NAME=TREE[::ARGS], s5cmd[-NAME][::ARGS] or bare...[::ARGS]"
        )
    return Tool(name, Path(tree).resolve(), extra.split())


def synxfer_cp(endpoint: str, src: str, dst: str) -> list[str]:
    cli = [sys.executable, "-m", "synxfer.cli.main", "--endpoint-url", endpoint]
    return [*cli, "cp", "--recursive", src, dst, "-q"]


def command(tool: Tool, s5cmd: Path | None, endpoint: str, url: str, out: Path) -> list[str]:
    if tool.bare:
        script = str(HERE / "bare_download.py")
        return [sys.executable, script, "--endpoint-url", endpoint, *tool.args, f"{url}/", str(out)]
    if tool.tree is None:
        if s5cmd is None:
            raise SystemExit("s5cmd not found: pass --peers-venv (synxfer-bench setup-peers)")
        return [str(s5cmd), "--endpoint-url", endpoint, *tool.args, "cp", f"{url}/*", f"{out}/"]
    return [*synxfer_cp(endpoint, f"{url}/", str(out)), *tool.args]


class TlsSeaweed(SeaweedTarget):
    """``weed mini`` serving S3 over HTTPS too, with a certificate of a CA made here."""

    def __init__(self, work_dir: Path, **kwargs: object) -> None:
        super().__init__(work_dir, **kwargs)  # type: ignore[arg-type]
        self.ca = work_dir / "ca"
        self.ca.mkdir(parents=True, exist_ok=True)
        cert, key = self.ca / "cert.pem", self.ca / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1"],
            check=True, capture_output=True,
        )  # fmt: skip
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.https_port = s.getsockname()[1]

    def _command(self, ports: list[int]) -> list[str]:
        return [
            *super()._command(ports),
            f"-s3.cert.file={self.ca / 'cert.pem'}",
            f"-s3.key.file={self.ca / 'key.pem'}",
            f"-s3.port.https={self.https_port}",
        ]

    @property
    def https_endpoint(self) -> str:
        return f"https://127.0.0.1:{self.https_port}"

    def tool_env(self) -> dict[str, str]:
        env = super().tool_env()
        env["AWS_CA_BUNDLE"] = env["SSL_CERT_FILE"] = str(self.ca / "cert.pem")
        return env


def tree_env(target: SeaweedTarget, tool: Tool) -> dict[str, str]:
    env = {**target.tool_env(), **tool.env}
    if tool.tree is not None:
        env["PYTHONPATH"] = f"{tool.tree}{os.pathsep}{tool.tree / 'plugins'}"
    return env


def tree_crcs(root: Path) -> dict[str, int]:
    """Each file's CRC32C under ``root``, by its path relative to it."""
    crcs = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        crc = 0
        with path.open("rb") as f:
            while chunk := f.read(8 << 20):
                crc = fastcrc.crc32.iscsi(chunk, crc)
        crcs[path.relative_to(root).as_posix()] = crc
    return crcs


def run_once(
    target: SeaweedTarget, tool: Tool, cmd: list[str], out: Path, expect: dict[str, int]
) -> tuple[float, float, float, float]:
    """One download: (wall, client user, client system, server CPU) seconds.

    After the timed run, every file's name and CRC32C must be the source's:
    a tool that wrote wrong bytes fast is a failure, not a result."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = tree_env(target, tool)
    before = target.server_cpu() or 0.0
    start = time.perf_counter()
    # Not in the caller's directory: `python -m` puts the cwd first on sys.path,
    # and a synxfer source tree there would shadow the tool's own (PYTHONPATH).
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, cwd=out.parent)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    server = (target.server_cpu() or 0.0) - before
    if status != 0:
        raise SystemExit(f"{tool.name}: {' '.join(cmd)} exited with status {status}")
    got = tree_crcs(out)
    if got != expect:
        wrong = sorted(set(got.items()) ^ set(expect.items()))[:3]
        raise SystemExit(f"{tool.name}: its files differ from the source's (path, CRC32C): {wrong}")
    return wall, usage.ru_utime, usage.ru_stime, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "tools", nargs="+", help="NAME=TREE[::ARGS], s5cmd[-NAME][::ARGS] or bare...[::ARGS]"
    )
    parser.add_argument("--rows", default="1x1GiB", help="COUNTxSIZE,... (default: 1x1GiB)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--peers-venv", type=Path, default=Path("bench-work/peers-venv"))
    parser.add_argument("--work-dir", type=Path, default=None, help="default: a temp dir")
    parser.add_argument(
        "--tool-env", action="append", default=[], metavar="NAME:KEY=VALUE", help="repeatable"
    )
    parser.add_argument("--tls", action="store_true", help="download over HTTPS")
    parser.add_argument("--also-http", action="store_true", help="with --tls: HTTP rows too")
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="where each run writes (default: the work dir's out/); a tmpfs such as "
        "/dev/shm/ab-out keeps the filesystem's inode allocation out of the figures",
    )
    args = parser.parse_args()
    tools = [parse_tool(spec) for spec in args.tools]
    by_name = {t.name: t for t in tools}
    for item in args.tool_env:
        name, _, pair = item.partition(":")
        key, sep, value = pair.partition("=")
        if name not in by_name or not sep:
            raise SystemExit(f"--tool-env {item!r}: expected NAME:KEY=VALUE for a named tool")
        by_name[name].env[key] = value
    first = next((t for t in tools if t.tree is not None and not t.bare), None)
    if first is None:
        raise SystemExit("name at least one synxfer tree (NAME=TREE): it uploads the rows")
    try:
        rows = parse_rows(args.rows)
    except ValueError as exc:
        raise SystemExit(f"--rows: {exc}") from None
    s5cmd = Peers.load(args.peers_venv).path("s5cmd") if args.peers_venv.is_dir() else None
    for tool in tools:  # native mode's compile, outside the timed runs
        if tool.bare:
            script = str(HERE / "bare_download.py")
            prepare = [sys.executable, script, "--prepare", "--endpoint-url", "-", "-", "-"]
            subprocess.run([*prepare, *tool.args], env={**os.environ, **tool.env}, check=True)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="s3-ab-"))
    peers = args.peers_venv if args.peers_venv.is_dir() else None
    target = (
        TlsSeaweed(work, peers_venv=peers) if args.tls else SeaweedTarget(work, peers_venv=peers)
    )
    out = (args.out_dir or work / "out").absolute()
    target.start()
    try:
        endpoint = target.endpoint_url
        assert endpoint is not None
        planes = [("http", endpoint)]
        if isinstance(target, TlsSeaweed):
            planes = [*(planes if args.also_http else []), ("https", target.https_endpoint)]
        for row in rows:
            src, _ = ensure_row_data(work, row)
            url = target.url(f"ab/{row.name}")
            upload = synxfer_cp(endpoint, f"{src}/", f"{url}/")
            subprocess.run(upload, env=tree_env(target, first), check=True, cwd=work)
            expect = tree_crcs(src)
            for plane, down in planes:
                measure(
                    args.rounds,
                    target,
                    tools,
                    s5cmd,
                    down,
                    url,
                    out,
                    expect,
                    f"{plane} {row.name}",
                )
    finally:
        target.stop()
        shutil.rmtree(out, ignore_errors=True)
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def measure(
    rounds: int,
    target: SeaweedTarget,
    tools: list[Tool],
    s5cmd: Path | None,
    endpoint: str,
    url: str,
    out: Path,
    expect: dict[str, int],
    title: str,
) -> None:
    """Every tool ``rounds`` times, alternated; print the medians and the paired differences."""
    results: dict[str, list[tuple[float, float, float, float]]] = {t.name: [] for t in tools}
    for r in range(rounds):
        for tool in tools[r % len(tools) :] + tools[: r % len(tools)]:
            cmd = command(tool, s5cmd, endpoint, url, out)
            results[tool.name].append(run_once(target, tool, cmd, out, expect))
    print(f"== {title}, {rounds} rounds: median wall / user / sys / server CPU s")
    for tool in tools:
        runs = results[tool.name]
        medians = [statistics.median(run[i] for run in runs) for i in range(4)]
        print(f"  {tool.name:12} " + " / ".join(f"{m:.3f}" for m in medians))
    base = tools[0].name
    for tool in tools[1:]:
        pairs = list(zip(results[tool.name], results[base], strict=True))
        diffs = [a[0] - b[0] for a, b in pairs]
        cpu = [(a[1] + a[2]) - (b[1] + b[2]) for a, b in pairs]
        user = [a[1] - b[1] for a, b in pairs]
        lower = sum(d < 0 for d in diffs)
        print(
            f"  {tool.name} - {base}: wall {statistics.median(diffs):+.3f} s "
            f"(lower in {lower}/{len(diffs)} rounds), client CPU {statistics.median(cpu):+.3f} s "
            f"(lower in {sum(d < 0 for d in cpu)}/{len(cpu)}), of it user "
            f"{statistics.median(user):+.3f} s (lower in {sum(d < 0 for d in user)}/{len(user)})"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
