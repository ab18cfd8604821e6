"""The ``synxfer`` command, run as a subprocess against an in-process moto S3 server.

Each CLI start costs about half a second, so the tests share one server and
spawn as few processes as they can; pure argument and formatting logic is
tested in-process at the bottom.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest
from moto.server import ThreadedMotoServer

from synxfer import Action, Event, EventKind, TransferResult
from synxfer.cli._output import EventPrinter, Progress, display_path, redact, summary_line
from synxfer.cli.main import build_parser

SECRET = "cli-test-secret-0123456789"
REGION = "us-east-1"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="module")
def s3(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key=SECRET,
    )


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"cli-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def env(endpoint: str) -> dict[str, str]:
    e = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and k not in ("PYTHONWARNINGS",)
    }
    e.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_DEFAULT_REGION=REGION,
        AWS_ENDPOINT_URL=endpoint,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    return e


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"alpha\n")
    (root / "b.log").write_bytes(b"bravo" * 100)
    (root / "sub" / "c.txt").write_bytes(b"charlie\n")
    (root / "sub" / "deep" / "d.bin").write_bytes(os.urandom(70_000))
    return root


def run(
    env: dict[str, str], cwd: Path, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m synxfer.cli.main ARGS`` and check no credential leaked."""
    raw = subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    # Decoded by hand: text mode would turn the progress line's "\r" into "\n".
    proc = subprocess.CompletedProcess(
        raw.args, raw.returncode, raw.stdout.decode(), raw.stderr.decode()
    )
    assert SECRET not in proc.stdout + proc.stderr
    return proc


def keys(s3: Any, bucket: str, prefix: str = "") -> dict[str, int]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {o["Key"]: o["Size"] for page in pages for o in page.get("Contents", [])}


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


# --------------------------------------------------------------------------- sync, cp


def test_sync_round_trip_then_nothing_to_do(
    env: dict[str, str], tmp_path: Path, tree: Path, bucket: str, s3: Any
) -> None:
    up = run(env, tmp_path, "sync", "tree", f"s3://{bucket}/p/", "-v")
    assert up.returncode == 0, up.stderr
    assert sorted(up.stdout.splitlines()) == [
        f"upload: tree/a.txt to s3://{bucket}/p/a.txt",
        f"upload: tree/b.log to s3://{bucket}/p/b.log",
        f"upload: tree/sub/c.txt to s3://{bucket}/p/sub/c.txt",
        f"upload: tree/sub/deep/d.bin to s3://{bucket}/p/sub/deep/d.bin",
    ]
    assert "summary: 4 transferred" in up.stderr
    assert "0 failed" in up.stderr
    assert keys(s3, bucket) == {
        "p/a.txt": 6,
        "p/b.log": 500,
        "p/sub/c.txt": 8,
        "p/sub/deep/d.bin": 70_000,
    }

    again = run(env, tmp_path, "sync", "tree", f"s3://{bucket}/p/")
    assert again.returncode == 0, again.stderr
    assert again.stdout == ""
    assert "summary: 0 transferred (0 B), 4 skipped" in again.stderr

    down = run(env, tmp_path, "sync", f"s3://{bucket}/p/", "out", "-P")
    assert down.returncode == 0, down.stderr
    assert f"download: s3://{bucket}/p/sub/c.txt to out/sub/c.txt" in down.stdout.splitlines()
    assert files(tmp_path / "out") == files(tree)
    # -P draws a progress line on stderr even though it is not a terminal,
    # and clears it before the summary, which is the last line.
    assert "\r" in down.stderr
    # The plan's totals from the first draw: 4 files, 68.86 KiB (70,519 bytes).
    assert "%|" in down.stderr
    assert "/ 68.86 KiB" in down.stderr
    assert "files 0/4" in down.stderr
    assert "\x1b[A" not in down.stderr  # one line, no cursor movement, off a terminal
    assert (
        down.stderr.rstrip("\n")
        .rsplit("\n", 1)[-1]
        .rsplit("\r", 1)[-1]
        .startswith("summary: 4 transferred")
    )
    assert "\r" not in up.stderr  # no progress line by default when stderr is a pipe


def test_json_lines_and_summary(
    env: dict[str, str], tmp_path: Path, tree: Path, bucket: str
) -> None:
    proc = run(env, tmp_path, "cp", "--recursive", "tree", f"s3://{bucket}/j/", "--json")
    assert proc.returncode == 0, proc.stderr
    lines = json_lines(proc.stdout)
    events, summary = lines[:-1], lines[-1]
    assert len(events) == 4
    for ev in events:
        assert ev["type"] == "file"
        assert ev["kind"] == "done"
        assert ev["action"] == "upload"
        assert ev["dst"].startswith(f"s3://{bucket}/j/")
        assert ev["error"] is None
        assert ev["dryrun"] is False
        assert set(ev) == {"type", "kind", "action", "src", "dst", "size", "error", "dryrun"}
    assert sum(ev["size"] for ev in events) == 6 + 500 + 8 + 70_000
    assert summary["type"] == "summary"
    assert summary["files_transferred"] == 4
    assert summary["bytes_transferred"] == 70_514
    assert summary["files_failed"] == 0


def test_dryrun_transfers_nothing(
    env: dict[str, str], tmp_path: Path, tree: Path, bucket: str, s3: Any
) -> None:
    proc = run(env, tmp_path, "sync", "tree", f"s3://{bucket}/dry/", "--dryrun")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 4
    assert all(line.startswith("(dryrun) upload: tree/") for line in lines)
    assert "(dryrun) summary:" in proc.stderr
    assert keys(s3, bucket) == {}


def test_filters_keep_command_line_order(
    env: dict[str, str], tmp_path: Path, tree: Path, bucket: str
) -> None:
    url = f"s3://{bucket}/f/"
    # Exclude everything, re-include *.txt, then exclude sub/* again: later filters win.
    proc = run(
        env, tmp_path, "sync", "tree", url, "--dryrun", "--json",
        "--exclude", "*", "--include", "*.txt", "--exclude", "sub/*",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    uploaded = {e["dst"] for e in json_lines(proc.stdout)[:-1]}
    assert uploaded == {url + "a.txt"}

    # The same patterns the other way round: the final --exclude * wins over everything.
    proc = run(
        env, tmp_path, "sync", "tree", url, "--dryrun", "--json",
        "--include", "*.txt", "--exclude", "*",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json_lines(proc.stdout) == [json_lines(proc.stdout)[-1]]


# --------------------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sync", "tree", "s3:/bucket/x"], "malformed URL"),
        (["sync", "tree", "foo://x/y"], "no backend for scheme 'foo'"),
        (["cp", "--recursive", "missing-dir", "s3://bucket/x/"], "does not exist"),
        (["sync", "tree", "s3://bucket/x/", "--part-size", "8XB"], "--part-size"),
    ],
    ids=["malformed-url", "unknown-scheme", "missing-local-path", "bad-part-size"],
)
def test_usage_errors_exit_2_without_traceback(
    env: dict[str, str], tmp_path: Path, tree: Path, args: list[str], message: str
) -> None:
    proc = run(env, tmp_path, *args)
    assert proc.returncode == 2
    assert "synxfer: error: " in proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_per_file_failure_exits_1(
    env: dict[str, str], tmp_path: Path, tree: Path, bucket: str, s3: Any
) -> None:
    for key in ("w/a.txt", "w/sub/c.txt"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    out = tmp_path / "w"
    out.mkdir()
    (out / "sub").write_bytes(b"a file where a directory must go")
    proc = run(env, tmp_path, "sync", f"s3://{bucket}/w/", "w")
    assert proc.returncode == 1
    assert proc.stdout == f"download: s3://{bucket}/w/a.txt to w/a.txt\n"
    assert f"download failed: s3://{bucket}/w/sub/c.txt to w/sub/c.txt " in proc.stderr
    assert "1 transferred" in proc.stderr
    assert "1 failed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_upload_to_missing_bucket_exits_1(env: dict[str, str], tmp_path: Path, tree: Path) -> None:
    proc = run(env, tmp_path, "cp", "tree/a.txt", "s3://no-such-bucket-here/a.txt", "--json")
    assert proc.returncode == 1
    (failed, summary) = json_lines(proc.stdout)
    assert failed["kind"] == "failed"
    assert "no-such-bucket-here" in failed["error"]
    assert summary["files_failed"] == 1
    assert "upload failed: tree/a.txt to s3://no-such-bucket-here/a.txt" in proc.stderr


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can read mode-000 files"
)
def test_unreadable_file_exits_1(
    env: dict[str, str], tmp_path: Path, tree: Path, bucket: str
) -> None:
    secret = tree / "sub" / "c.txt"
    secret.chmod(0)
    try:
        proc = run(env, tmp_path, "sync", "tree", f"s3://{bucket}/u/")
    finally:
        secret.chmod(0o644)
    assert proc.returncode == 1
    assert "upload failed: tree/sub/c.txt" in proc.stderr
    assert len(proc.stdout.splitlines()) == 3


def test_interrupt_exits_130(env: dict[str, str], tmp_path: Path) -> None:
    """SIGINT while a request hangs: a clean message and exit code 130."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        conn, _ = listener.accept()  # hold the connection open; never answer
        held.append(conn)
        accepted.set()

    threading.Thread(target=accept, daemon=True).start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "synxfer.cli.main", "ls", "s3://bucket/"],
        env={**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert accepted.wait(30), "the CLI never connected"
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for conn in held:
            conn.close()
        listener.close()
    assert proc.returncode == 130
    assert "interrupted; rerun the same command to continue" in err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- ls, rm


def test_ls(env: dict[str, str], tmp_path: Path, bucket: str, s3: Any) -> None:
    for key, size in (("l/a.txt", 3), ("l/d/b.txt", 1234), ("l/d/e/c.txt", 5), ("other", 1)):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x" * size)

    flat = run(env, tmp_path, "ls", f"s3://{bucket}/l/")
    assert flat.returncode == 0, flat.stderr
    lines = flat.stdout.splitlines()
    assert "                           PRE d/" in lines
    (obj,) = [line for line in lines if "PRE" not in line]
    assert obj.endswith("          3 a.txt")
    assert len(obj) == len("2024-01-01 12:00:00          3 a.txt")

    deep = run(env, tmp_path, "ls", "--recursive", f"s3://{bucket}/l/")
    assert deep.returncode == 0, deep.stderr
    assert [line[31:] for line in deep.stdout.splitlines()] == [
        "l/a.txt",
        "l/d/b.txt",
        "l/d/e/c.txt",
    ]
    assert deep.stdout.splitlines()[1][20:30] == "      1234"

    as_json = run(env, tmp_path, "ls", "--json", f"s3://{bucket}/l/")
    assert as_json.returncode == 0, as_json.stderr
    items = json_lines(as_json.stdout)
    assert {"type": "prefix", "prefix": "l/d/"} in items
    (o,) = [i for i in items if i["type"] == "object"]
    assert (o["key"], o["size"]) == ("l/a.txt", 3)
    assert o["last_modified"]


def test_rm_recursive_with_filters(
    env: dict[str, str], tmp_path: Path, bucket: str, s3: Any
) -> None:
    for key in ("r/a.txt", "r/keep/b.txt", "r/x/c.txt", "s/untouched.txt"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"data")
    proc = run(env, tmp_path, "rm", "--recursive", f"s3://{bucket}/r/", "--exclude", "keep/*")
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == [
        f"delete: s3://{bucket}/r/a.txt",
        f"delete: s3://{bucket}/r/x/c.txt",
    ]
    assert "2 deleted" in proc.stderr
    assert set(keys(s3, bucket)) == {"r/keep/b.txt", "s/untouched.txt"}


# --------------------------------------------------------------------------- in-process


# --------------------------------------------------------------------------- the exit


_RUN = """
import atexit, sys, threading
class Teardown:
    def __del__(self):
        print("teardown ran", flush=True)
witness = Teardown()  # freed by the interpreter's teardown, never by os._exit
if sys.argv[1] == "thread":
    # Still running when run() ends, however long the command takes: it
    # waits for the main thread to finish (the interpreter's shutdown).
    main = threading.main_thread()
    threading.Thread(target=lambda: (main.join(), print("thread done", flush=True))).start()
if sys.argv[1] == "atexit":
    atexit.register(lambda: print("atexit ran", flush=True))
sys.argv = ["synxfer", *sys.argv[2:]]
from synxfer.cli.main import run
run()
"""


@pytest.mark.parametrize(
    ("mode", "after"),
    [
        ("plain", []),
        ("thread", ["thread done", "teardown ran"]),
        ("atexit", ["atexit ran", "teardown ran"]),
    ],
)
def test_the_console_script_exits_without_teardown_unless_something_needs_it(
    env: dict[str, str], tmp_path: Path, mode: str, after: list[str]
) -> None:
    """``run`` (the console script) ends the process with ``os._exit`` after
    flushing: the --json lines and the exit code are whole, the interpreter's
    teardown is skipped. With a thread that is not a daemon still running,
    or an atexit handler someone registered (a wrapper reading the peak RSS
    at exit, say), it exits the ordinary way, and those run."""
    src = tmp_path / "a.txt"
    src.write_bytes(b"alpha\n")
    dst = f"file://{tmp_path / 'dst' / 'a.txt'}"

    def synxfer(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-c", _RUN, mode, *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)

    ok = synxfer("cp", str(src), dst, "--json")
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert json.loads(lines[0])["kind"] == "done"
    assert json.loads(lines[1])["type"] == "summary"
    assert (tmp_path / "dst" / "a.txt").read_bytes() == b"alpha\n"
    assert lines[2:] == after
    failed = synxfer("cp", str(tmp_path / "missing"), dst)
    assert failed.returncode == 2
    assert "does not exist" in failed.stderr


def test_parser_filters_and_global_options() -> None:
    args = build_parser().parse_args(
        [
            "--max-threads", "3", "sync", "a", "s3://b/x/",
            "--exclude", "*", "--include", "*.txt", "--exclude", "tmp/*",
            "--part-size", "16MiB", "--follow-symlinks",
        ]
    )  # fmt: skip
    assert args.filters == [("exclude", "*"), ("include", "*.txt"), ("exclude", "tmp/*")]
    assert args.max_threads == 3  # given before the subcommand, not reset by it
    assert args.part_size == 16 * 2**20
    assert args.follow_symlinks is True
    assert build_parser().parse_args(["rm", "s3://b/k"]).filters == []


@pytest.mark.parametrize(
    "argv",
    [
        ["cp", "a", "s3://b/k", "--recursive", "--exclude", "*.tmp", "--max-threads", "3"],
        ["--region", "eu-west-1", "sync", "s3://b/p/", "d", "--delete", "--size-only"],
        ["ls", "s3://b/", "--recursive", "--json"],
        # an option's value that names a command: the command is the next one
        ["--profile", "ls", "cp", "a", "s3://b/k"],
        ["--profile", "rm", "--region", "sync", "mv", "s3://b/k", "d"],
    ],
)
def test_the_command_line_parses_as_with_the_whole_parser(argv: list[str]) -> None:
    """Only the named command's grammar is built at start-up; the result is
    what the whole parser gives, including when an option's value is a
    command's name."""
    from synxfer.cli._parser import parse_command_line

    assert vars(parse_command_line(argv)) == vars(build_parser().parse_args(argv))


@pytest.mark.parametrize("columns", ["50", "80", "132", None])
def test_help_is_formatted_as_argparse_formats_it(
    monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    """The CLI's formatter sizes help without shutil, by the same rule."""
    import argparse

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    parser = build_parser()
    ours = parser.format_help()
    parser.formatter_class = argparse.HelpFormatter
    assert ours == parser.format_help()


#: Modules a download never uses, each a few milliseconds of every run's
#: start-up (docs/decisions/0014-start-up-and-the-gil.md): json (--json),
#: shutil with bz2 and lzma (argparse sizes its help with it), configparser
#: (only when an AWS config file exists), sqlite3 (the resume journal: only
#: for multipart files), random and secrets (retry jitter, temp names).
_UNUSED_AT_START = ("json", "shutil", "bz2", "lzma", "configparser", "sqlite3", "random", "secrets")


def test_a_download_imports_nothing_it_does_not_use(
    env: dict[str, str], tmp_path: Path, bucket: str, s3: Any
) -> None:
    s3.put_object(Bucket=bucket, Key="one.bin", Body=b"1" * 1000)
    s3.put_object(Bucket=bucket, Key="dir/two.bin", Body=b"2" * 2000)
    code = (
        "import sys\n"
        "from synxfer.cli.main import main\n"
        "code = main(sys.argv[1:])\n"
        f"print(code, [m for m in {_UNUSED_AT_START!r} if m in sys.modules])\n"
    )
    for argv in (
        ["cp", f"s3://{bucket}/one.bin", str(tmp_path / "one.bin"), "-q"],
        ["cp", "--recursive", f"s3://{bucket}/dir", str(tmp_path / "dir"), "-q"],
    ):
        out = subprocess.run(
            [sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True, timeout=60
        )
        assert out.stdout.strip() == "0 []", (argv, out.stdout, out.stderr)
    assert (tmp_path / "one.bin").read_bytes() == b"1" * 1000
    assert (tmp_path / "dir" / "two.bin").read_bytes() == b"2" * 2000


def test_display_path_is_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert display_path("a.txt") == "a.txt"
    assert display_path(str(tmp_path / "sub" / "b.txt")) == str(tmp_path / "sub" / "b.txt")
    assert display_path("../x/c") == "../x/c"
    assert display_path("s3://b/k") == "s3://b/k"


def test_redact_hides_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value-xyz")
    assert redact("bad s3cr3t-value-xyz here") == "bad **** here"
    assert redact("http://user:pw@host:9000/x") == "http://****@host:9000/x"


def test_printer_and_throttled_progress() -> None:
    out, err = io.StringIO(), io.StringIO()
    progress = Progress(err, interval=3600)  # at most one draw in this test
    printer = EventPrinter(out=out, err=err, progress=progress)
    ev = Event(EventKind.STARTED, Action.UPLOAD, "x", "s3://b/x", size=100)
    printer(ev)
    drawn = err.getvalue().count("\r")
    for _ in range(50):
        printer(Event(EventKind.PROGRESS, Action.UPLOAD, "x", "s3://b/x", size=100, nbytes=1))
    assert err.getvalue().count("\r") == drawn  # throttled
    assert "50 B / 100 B" in progress.text()  # a total known before the plan: as files start
    printer(Event(EventKind.DONE, Action.UPLOAD, "x", "s3://b/x", size=100))
    printer(Event(EventKind.FAILED, Action.DELETE, "", "s3://b/y", error="denied", dryrun=True))
    assert out.getvalue() == "upload: x to s3://b/x\n"
    assert "(dryrun) delete failed: s3://b/y denied\n" in err.getvalue()
    assert progress.bytes_done == 50
    assert progress.bytes_total == 100
    assert progress.files_done == 1
    progress.clear()
    assert err.getvalue().endswith("\r")  # the line erased
    result = TransferResult(files_transferred=1, bytes_transferred=3 * 2**20, elapsed=2.0)
    assert summary_line(result) == (
        "summary: 1 transferred (3.00 MiB), 0 skipped, 0 deleted, 0 failed in 2.00s, 1.50 MiB/s"
    )


def test_each_run_in_a_process_sets_logging_up_anew(tmp_path: Path) -> None:
    """main() run twice in one process (tests, wrappers): the second run has
    one handler of synxfer's on the root logger, not two, and does not keep
    the first run's -v (whose DEBUG tracebacks would reach its stderr)."""
    import logging

    from synxfer.cli.main import main

    src = tmp_path / "a.txt"
    src.write_bytes(b"a")
    before = list(logging.getLogger().handlers)
    try:
        assert main(["-v", "cp", str(src), f"file://{tmp_path / 'd' / 'b.txt'}"]) == 0
        assert logging.getLogger("synxfer").level == logging.DEBUG
        assert main(["cp", str(src), f"file://{tmp_path / 'd' / 'c.txt'}"]) == 0
        assert logging.getLogger("synxfer").level == logging.NOTSET
        added = [h for h in logging.getLogger().handlers if h not in before]
        assert len(added) == 1
    finally:
        for h in logging.getLogger().handlers:
            if h not in before:
                logging.getLogger().removeHandler(h)
