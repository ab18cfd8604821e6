"""A new user's first minutes: the README's first snippet, the embedded S3
server it documents, and the messages of the first mistakes.

The server is ``python -m synxfer_servers s3`` as the README shows it; the
rest runs against moto over HTTP on 127.0.0.1, the CLI as a subprocess.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

import synxfer

from .conftest import SMALL

README = Path(__file__).resolve().parent.parent / "README.md"


def _cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _clean_env() -> dict[str, str]:
    """No AWS settings at all, as on a new machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    return env


@pytest.fixture
def env(s3_endpoint: str) -> dict[str, str]:
    return {**os.environ, "AWS_ENDPOINT_URL": s3_endpoint}


# -- the README and the documented server -------------------------------------------


@pytest.fixture
def documented_server() -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``python -m synxfer_servers s3 --port 0 --bucket bucket``, and its banner."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "synxfer_servers", "s3", "--port", "0", "--bucket", "bucket"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_clean_env(),
    )
    assert proc.stdout is not None
    banner: list[str] = []
    try:
        while not banner or "Ctrl-C" not in banner[-1]:
            line = proc.stdout.readline()
            assert line, f"the server said nothing more: {banner} {proc.stderr.read()}"  # type: ignore[union-attr]
            banner.append(line.rstrip("\n"))
        yield proc, banner
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_readme_first_snippet_runs_against_the_documented_server(
    documented_server: tuple[subprocess.Popen[str], list[str]], tmp_path: Path
) -> None:
    text = README.read_text()
    assert "python -m synxfer_servers s3 --port 9000 --bucket bucket" in text
    proc, banner = documented_server
    # The user exports what the banner says (the README lists the same dummy keys).
    env = _clean_env()
    for line in banner:
        if line.strip().startswith("export "):
            for pair in line.strip().removeprefix("export ").split():
                name, _, value = pair.partition("=")
                env[name] = value
                assert f"{name}=" in text, f"the README does not mention {name}"
    endpoint = env["AWS_ENDPOINT_URL"]
    assert env["AWS_ACCESS_KEY_ID"] == "testing"

    snippet = re.search(r"```python\n(.*?)```", text, re.S)
    assert snippet is not None
    (tmp_path / "first.py").write_text(snippet.group(1))
    (tmp_path / "dataset" / "sub").mkdir(parents=True)
    (tmp_path / "dataset" / "a.txt").write_text("hello\n")
    (tmp_path / "dataset" / "sub" / "b.txt").write_text("world\n")
    run = subprocess.run(
        [sys.executable, "first.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "2 files, 12 bytes" in run.stdout

    # Another bucket, the README's way (a plain PUT), then the CLI sees both.
    host, port = endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("PUT", "/second-bucket", headers={"Content-Length": "0"})
    assert conn.getresponse().status == 200
    conn.close()
    listed = _cli(env, tmp_path, "ls", "--recursive", "s3://bucket/prefix/")
    assert listed.returncode == 0, listed.stderr
    assert "prefix/sub/b.txt" in listed.stdout
    cp = _cli(env, tmp_path, "cp", "dataset/a.txt", "s3://second-bucket/a.txt")
    assert cp.returncode == 0, cp.stderr

    proc.send_signal(signal.SIGINT)
    assert proc.wait(15) == 0


# -- the first mistakes ------------------------------------------------------------------


def _put(s3_endpoint: str, bucket: str, *keys: str) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")


def test_cp_of_a_prefix_suggests_recursive(
    env: dict[str, str], s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    _put(s3_endpoint, bucket, "d/a.txt", "d/e/b.txt")
    for src, dst in [
        (f"s3://{bucket}/d", "out"),
        (f"s3://{bucket}/d/", "out"),
        (f"s3://{bucket}/d", f"s3://{bucket}/copy"),
    ]:
        run = _cli(env, tmp_path, "cp", src, dst)
        assert run.returncode == 2, run.stderr
        assert f"{src} names a prefix, not an object" in run.stderr
        assert "with --recursive" in run.stderr
    assert not (tmp_path / "out").exists()
    missing = _cli(env, tmp_path, "cp", f"s3://{bucket}/nothing", "out")
    assert missing.returncode == 1
    assert f"s3://{bucket}/nothing: no such object" in missing.stderr
    assert "recursive" not in missing.stderr
    up = _cli(env, tmp_path, "cp", str(tmp_path), f"s3://{bucket}/up")
    assert up.returncode == 2
    assert "with --recursive" in up.stderr


def test_rm_of_a_missing_key_says_not_found(
    env: dict[str, str], s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    _put(s3_endpoint, bucket, "keep.txt", "dir/x")
    run = _cli(env, tmp_path, "rm", f"s3://{bucket}/no-such-key")
    assert run.returncode == 1
    assert f"s3://{bucket}/no-such-key: no such object" in run.stderr
    prefix = _cli(env, tmp_path, "rm", f"s3://{bucket}/dir")
    assert prefix.returncode == 2
    assert "--recursive" in prefix.stderr
    ok = _cli(env, tmp_path, "rm", f"s3://{bucket}/keep.txt")
    assert ok.returncode == 0, ok.stderr
    listed = boto3.client("s3", endpoint_url=s3_endpoint).list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in listed["Contents"]] == ["dir/x"]


def test_json_run_that_cannot_start_prints_an_error_object(
    env: dict[str, str], tmp_path: Path
) -> None:
    cases = [
        (["cp", "--json", "s3://no-such-bucket-xyz/k", "out"], 1),
        (["sync", "--json", "missing-dir", "s3://b-b-b/p"], 2),
        (["cp", "--json", "--max-threads", "0", "a", "s3://b-b-b/k"], 2),
        (["ls", "--json", "s3://no-such-bucket-xyz/"], 1),
        (["rm", "--json", "s3://no-such-bucket-xyz/k"], 1),
    ]
    for args, code in cases:
        run = _cli(env, tmp_path, *args)
        assert run.returncode == code, (args, run.stderr)
        [line] = run.stdout.splitlines()
        obj = json.loads(line)
        assert obj["type"] == "error"
        assert obj["exit_code"] == code
        assert obj["error"]
        assert obj["error"] in run.stderr, "the same message on stderr"


async def test_library_errors_name_no_cli_flags(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    _put(s3_endpoint, bucket, "d/a.txt")
    messages: list[str] = []
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as client:
        for call in (
            client.download_file(f"s3://{bucket}/d", tmp_path / "x"),
            client.copy(f"s3://{bucket}/d", f"s3://{bucket}/e"),
            client.upload_file(tmp_path, f"s3://{bucket}/up"),
            client.rm(f"s3://{bucket}/d"),
            client.sync_to(tmp_path, f"s3://{bucket}/p", size_only=True, checksum=True),
        ):
            with pytest.raises(synxfer.ConfigError) as info:
                await call
            messages.append(str(info.value))
        with pytest.raises(synxfer.NotFound, match="no such object"):
            await client.rm(f"s3://{bucket}/missing")
    assert all("recursive=True" in m for m in messages[:4]), messages
    assert "size_only=True and checksum=True" in messages[4]
    assert not [m for m in messages if "--" in m], messages
