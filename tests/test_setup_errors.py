"""Set-up errors: missing credentials end the run (NoCredentials, CLI exit 2); an
unknown profile is exit 2; a refusal of given credentials stays a per-file failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import synxfer
from synxfer import ConfigError, NoCredentials, PermissionDenied
from synxfer.backend import Backend
from synxfer.layers import Layer

from .conftest import SMALL, write_tree


class _Refusing(Layer):
    """Every put fails with ``error``; counts the puts tried."""

    def __init__(self, inner: Backend, error: Exception) -> None:
        super().__init__(inner)
        self.error = error
        self.tried = 0

    async def put(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        self.tried += 1
        raise self.error


def test_no_credentials_is_a_config_error_and_a_permission_denied() -> None:
    exc = NoCredentials("no credentials found")
    assert isinstance(exc, ConfigError)
    assert isinstance(exc, PermissionDenied)


async def test_missing_credentials_end_the_run(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    write_tree(tmp_path / "src", {f"f{i}": 100 for i in range(40)})
    layers: list[_Refusing] = []

    def refuse(inner: Backend) -> Backend:
        layers.append(_Refusing(inner, NoCredentials("no credentials found: set ...")))
        return layers[-1]

    config = SMALL.evolve(max_threads=1, max_files=2)
    async with synxfer.Client(config, endpoint_url=s3_endpoint, layers=[refuse]) as client:
        with pytest.raises(NoCredentials, match="no credentials found"):
            await client.sync_to(tmp_path / "src", f"s3://{bucket}/p/")
    assert layers[0].tried < 40  # stopped, not tried file by file


async def test_refused_credentials_fail_file_by_file(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    write_tree(tmp_path / "src", {f"f{i}": 100 for i in range(5)})

    def refuse(inner: Backend) -> Backend:
        return _Refusing(inner, PermissionDenied("AccessDenied"))

    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint, layers=[refuse]) as client:
        result = await client.sync_to(tmp_path / "src", f"s3://{bucket}/p/")
    assert result.files_failed == 5


def _no_credentials_env(tmp_path: Path) -> dict[str, str]:
    """An environment in which the AWS credential chain finds nothing, and asks
    no one: no AWS_* variables, empty config and credentials files, no
    instance metadata (nothing leaves the machine)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    (tmp_path / "aws-config").write_text("")
    (tmp_path / "aws-credentials").write_text("")
    env.update(
        AWS_CONFIG_FILE=str(tmp_path / "aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "aws-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_DEFAULT_REGION="us-east-1",
    )
    return env


def test_cli_missing_credentials_exit_2(s3_endpoint: str, bucket: str, tmp_path: Path) -> None:
    """The real chain (botocore's, in the s3 plugin) finds nothing: NoCredentials,
    one error line, exit 2 -- for a run and for ls, with and without --json."""
    env = _no_credentials_env(tmp_path)
    write_tree(tmp_path / "src", {"a": 10, "b": 20})

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "synxfer.cli.main", *args, "--endpoint-url", s3_endpoint],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    up = cli("cp", "--recursive", "src", f"s3://{bucket}/p/", "--json")
    listed = cli("ls", f"s3://{bucket}/", "--json")
    plain = cli("ls", f"s3://{bucket}/")
    for proc in (up, listed, plain):
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("synxfer: error: no credentials found") == 1, proc.stderr
        assert "--profile" in proc.stderr  # the CLI names its flag
        assert "Client(" not in proc.stderr
        assert "Traceback" not in proc.stderr
    assert "upload failed" not in up.stderr
    for proc in (up, listed):
        errors = [json.loads(line) for line in proc.stdout.splitlines() if '"error"' in line]
        assert [e["exit_code"] for e in errors if e["type"] == "error"] == [2]


async def test_the_s3_chain_raises_no_credentials(
    s3_endpoint: str, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _no_credentials_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    for name in [k for k in os.environ if k.startswith("AWS_") and k not in _KEEP]:
        monkeypatch.delenv(name)
    write_tree(tmp_path / "src", {"a": 10})
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint) as client:
        with pytest.raises(NoCredentials, match="no credentials found"):
            await client.sync_to(tmp_path / "src", f"s3://{bucket}/p/")


#: What _no_credentials_env sets (everything else AWS_* is removed).
_KEEP = frozenset(
    {
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_EC2_METADATA_DISABLED",
        "AWS_DEFAULT_REGION",
    }
)


def test_cli_unknown_profile_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    (tmp_path / "a").write_bytes(b"x")
    proc = subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", "cp", "a", "s3://b/a", "--profile", "nope"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "profile 'nope' not found" in proc.stderr
    assert "Traceback" not in proc.stderr
