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
from synxfer.cli.main import main
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


def test_cli_missing_credentials_exit_2(
    s3_endpoint: str,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What a backend whose chain finds nothing raises (the documented contract)."""
    from synxfer_s3 import _credentials

    async def nothing(self: object) -> object:
        raise NoCredentials(f"no credentials found: {_credentials.CREDENTIALS_HINT}")

    monkeypatch.setattr(_credentials.LazyCredentials, "get", nothing)
    write_tree(tmp_path / "src", {"a": 10, "b": 20})
    common = ["--endpoint-url", s3_endpoint, "--json"]
    assert main(["cp", "--recursive", str(tmp_path / "src"), f"s3://{bucket}/p/", *common]) == 2
    assert main(["ls", f"s3://{bucket}/", *common]) == 2
    out, err = capsys.readouterr()
    assert err.count("synxfer: error: no credentials found") == 2
    assert "upload failed" not in err
    errors = [json.loads(line) for line in out.splitlines() if '"error"' in line]
    assert [e["exit_code"] for e in errors if e["type"] == "error"] == [2, 2]


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
