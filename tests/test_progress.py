"""Progress: PLANNED totals from the engine, the running totals, the tqdm adapter,
and the CLI's display in a real pseudo-terminal (pexpect) and off one.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import synxfer
from synxfer import Action, Event, EventKind, MiB
from synxfer.progress import TransferProgress, tqdm_callback

from .conftest import SMALL, write_tree

K = EventKind


def _ev(kind: EventKind, src: str = "", size: int = 0, **kw: object) -> Event:
    return Event(kind, Action.UPLOAD, src, f"s3://b/{src}", size=size, **kw)  # type: ignore[arg-type]


# -- running totals -----------------------------------------------------------------


def test_totals_come_from_the_plan_before_any_file_starts() -> None:
    p = TransferProgress()
    p.update(Event(K.SKIPPED, Action.UPLOAD, "old", "s3://b/old", size=99))  # at planning
    p.update(Event(K.PLANNED, Action.UPLOAD, "", "", size=300, files=3))
    p.update(Event(K.PLANNED, Action.DELETE, "", "", files=2))
    assert (p.files_total, p.bytes_total, p.files_skipped) == (5, 300, 1)
    assert p.fraction == 0.0
    p.update(_ev(K.STARTED, "a", 100))
    p.update(_ev(K.STARTED, "big", 150))
    p.update(_ev(K.PROGRESS, "a", 100, nbytes=100))
    p.update(_ev(K.PROGRESS, "big", 150, nbytes=50))
    assert [(f.name, f.done) for f in p.biggest_in_flight(5)] == [("big", 50), ("a", 100)]
    p.update(_ev(K.DONE, "a", 100))
    p.update(_ev(K.SKIPPED, "c", 50))  # planned, then found up to date
    assert (p.files_total, p.bytes_total) == (4, 250)
    p.update(_ev(K.FAILED, "big", 150, error="boom"))
    assert p.fraction == pytest.approx(150 / 250)
    assert p.files_text() == "files 2/4, 1 failed, 2 skipped"
    assert p.biggest_in_flight(5) == []


def test_totals_without_a_plan_grow_as_files_start() -> None:
    p = TransferProgress()
    p.update(_ev(K.STARTED, "a", 10))
    p.update(_ev(K.STARTED, "b", 30))
    assert (p.files_total, p.bytes_total) == (2, 40)


# -- the engine's PLANNED events ------------------------------------------------------


async def test_engine_announces_the_plan_first(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    files = {"a": 1000, "b/c": 2 * MiB, "d": 0}
    src = tmp_path / "src"
    write_tree(src, files)
    events: list[Event] = []
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint, on_event=events.append) as c:
        await c.sync_to(src, f"s3://{bucket}/p/")
        assert events[0].kind is K.PLANNED
        assert (events[0].action, events[0].files, events[0].size) == (
            Action.UPLOAD,
            3,
            2 * MiB + 1000,
        )
        assert [e.kind for e in events].count(K.PLANNED) == 1

        # A second sync: one file changed, one gone, so 1 upload and 1 delete planned.
        (src / "a").write_bytes(b"x" * 5000)
        os.utime(src / "a", (4e9, 4e9))
        (src / "d").unlink()
        events.clear()
        await c.sync_to(src, f"s3://{bucket}/p/", delete=True)
        planned = {e.action: (e.files, e.size) for e in events if e.kind is K.PLANNED}
        assert planned == {Action.UPLOAD: (1, 5000), Action.DELETE: (1, 0)}
        kinds = [e.kind for e in events]
        assert kinds.index(K.SKIPPED) < kinds.index(K.PLANNED)  # b/c: found at planning
        assert max(i for i, k in enumerate(kinds) if k is K.PLANNED) < kinds.index(K.STARTED)

        events.clear()
        await c.rm(f"s3://{bucket}/p/", recursive=True)
        assert events[0].kind is K.PLANNED
        assert (events[0].action, events[0].files) == (Action.DELETE, 2)


# -- the tqdm adapter -----------------------------------------------------------------


async def test_tqdm_callback_shows_a_real_bar(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    files = {"a": 300_000, "b": 6 * MiB, "c": 10}
    total = sum(files.values())
    write_tree(tmp_path / "src", files)
    out = io.StringIO()
    bar = tqdm_callback(file=out, desc="upload", mininterval=0)
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint, on_event=bar) as c:
        result = await c.sync_to(tmp_path / "src", f"s3://{bucket}/t/")
    assert result.ok
    assert bar.bar is not None
    assert bar.bar.total == total
    assert bar.bar.n == total
    assert bar._closed  # every planned file finished: the bar closed itself
    text = out.getvalue()
    assert "upload: 100%" in text
    assert "files 3/3" in text
    assert "upload:   0%" in text  # the total was known from the start


def test_tqdm_callback_takes_any_tqdm_class() -> None:
    made: list[dict[str, object]] = []

    class Fake:
        def __init__(self, **kw: object) -> None:
            made.append(kw)
            self.n, self.total = 0, kw["total"]
            self.postfix = ""

        def update(self, n: int) -> None:
            self.n += n

        def set_postfix_str(self, s: str, refresh: bool = True) -> None:
            self.postfix = s

        def close(self) -> None:
            self.closed = True

    cb = tqdm_callback(Fake, desc="x")
    assert cb.event_kinds >= {K.PLANNED, K.PROGRESS, K.DONE}
    cb(Event(K.PLANNED, Action.DOWNLOAD, "", "", size=10, files=1))
    cb(Event(K.STARTED, Action.DOWNLOAD, "s3://b/k", "k", size=10))
    cb(Event(K.PROGRESS, Action.DOWNLOAD, "s3://b/k", "k", size=10, nbytes=7))
    cb(Event(K.PROGRESS, Action.DOWNLOAD, "s3://b/k", "k", size=10, nbytes=7))  # re-fetched
    cb(Event(K.DONE, Action.DOWNLOAD, "s3://b/k", "k", size=10))
    assert made[0]["total"] == 10
    assert made[0]["desc"] == "x"
    assert cb.bar.n == 10  # never past the total
    assert cb.bar.postfix == "files 1/1"
    assert cb.bar.closed


# -- the CLI's display ------------------------------------------------------------------


def _cli_env(endpoint: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(AWS_ENDPOINT_URL=endpoint, COLUMNS="120", LINES="30")
    env.pop("PYTHONWARNINGS", None)
    return env


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_cli_progress_in_a_terminal(s3_endpoint: str, bucket: str, tmp_path: Path) -> None:
    """In a pseudo-terminal, with the run slowed by --bwlimit so that several frames show."""
    pexpect = pytest.importorskip("pexpect")
    files = {"src/one.bin": 3 * MiB // 2, "src/two.bin": 3 * MiB // 2, "src/sub/three.bin": 3 * MiB}
    files["src/tiny.txt"] = 0
    write_tree(tmp_path, files)
    args = ["-m", "synxfer.cli.main", "cp", "--recursive", "src", f"s3://{bucket}/pty/"]
    child = pexpect.spawn(
        sys.executable,
        [*args, "--bwlimit", "2M/s", "--max-threads", "2"],
        env=_cli_env(s3_endpoint),
        cwd=str(tmp_path),
        dimensions=(30, 120),
        encoding="utf-8",
        timeout=120,
    )
    child.expect(pexpect.EOF)
    child.close()
    raw = child.before
    assert child.exitstatus == 0, raw
    screen = _ANSI.sub("", raw)
    # Totals from the plan (4 files, 6 MiB), a percentage, a rate and a real ETA.
    assert re.search(r"\d+%\|", screen), screen
    assert "/ 6.00 MiB" in screen
    assert re.search(r"\d+(\.\d+)? [KM]iB/s", screen)
    assert re.search(r"ETA \d\d:\d\d", screen), screen
    assert re.search(r"files [0-3]/4", screen)
    # Several lines: the biggest file in flight under the totals line.
    assert re.search(r"\d+% of +3\.00 MiB  src/sub/three\.bin", screen), screen
    assert "\x1b[A" in raw  # tqdm moves the cursor between its lines
    assert "upload: src/sub/three.bin to s3://" in screen  # per-file lines, as given
    assert "summary: 4 transferred (6.00 MiB)" in screen


def test_cli_no_progress_and_only_show_errors_in_a_terminal(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    pexpect = pytest.importorskip("pexpect")
    write_tree(tmp_path, {"src/a.bin": 100_000})
    for flag, expect_lines in (("--no-progress", True), ("--only-show-errors", False)):
        child = pexpect.spawn(
            sys.executable,
            ["-m", "synxfer.cli.main", "cp", "--recursive", "src", f"s3://{bucket}/n/", flag],
            env=_cli_env(s3_endpoint),
            cwd=str(tmp_path),
            dimensions=(30, 120),
            encoding="utf-8",
            timeout=120,
        )
        child.expect(pexpect.EOF)
        child.close()
        out = child.before
        assert child.exitstatus == 0, out
        assert "ETA" not in out
        assert "%|" not in out
        assert ("upload: src/a.bin" in out) is expect_lines
        assert ("summary:" in out) is expect_lines


def test_cli_progress_off_a_terminal_is_one_line(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    write_tree(tmp_path, {"src/a.bin": 2 * MiB, "src/b.bin": 1000})
    args = ["cp", "--recursive", "src", f"s3://{bucket}/o/", "-P", "--bwlimit", "2M/s"]
    proc = subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", *args],
        env=_cli_env(s3_endpoint),
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "/ 2.00 MiB" in err
    assert "files 0/2" in err
    assert "\x1b[A" not in err  # no cursor movement: one line redrawn with \r
    assert "% of " not in err  # no per-file lines
    assert err.rstrip("\n").rsplit("\r", 1)[-1].startswith("summary: 2 transferred")
