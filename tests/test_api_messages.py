"""Library messages name the API (``follow_symlinks=True``, ``Client(endpoint_url=...)``,
``TransferConfig(part_size=...)``); the CLI prints its flags instead (issue 13 item 12).

Real parts: moto over HTTP on 127.0.0.1 for the runs, the CLI in process and
as a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import synxfer
import synxfer.backend
from synxfer import ConfigError, Event, EventKind, MiB
from synxfer._config import check_capabilities
from synxfer.backend import Capabilities
from synxfer.cli import main as cli
from synxfer.cli._output import cli_words
from synxfer.engine.parts import plan_part_size
from synxfer_scp import ScpBackend

from .conftest import SMALL


def test_cli_words_maps_api_names_to_flags() -> None:
    assert cli_words("use follow_symlinks=True") == "use --follow-symlinks"
    assert cli_words("copy it with recursive=True") == "copy it with --recursive"
    assert cli_words("(TransferConfig(part_size=...))") == "(--part-size)"
    assert cli_words("pass Client(endpoint_url=...) or X") == "pass --endpoint-url or X"
    assert cli_words("choose one with Client(profile=...)") == "choose one with --profile"
    assert cli_words("WriteOptions(storage_class=...)") == "--storage-class"
    assert cli_words("WriteOptions(sse_kms_key_id=...)") == "--sse-kms-key-id"
    # Names without a flag stay as the API names them.
    assert cli_words("TransferConfig(min_throughput=...)") == "TransferConfig(min_throughput=...)"
    assert cli_words("nothing=True here") == "nothing=True here"


def test_part_size_errors_name_the_api() -> None:
    caps = Capabilities(max_part_size=5 * MiB)
    with pytest.raises(ConfigError) as exc:
        plan_part_size(100, 6 * MiB, caps)
    assert "TransferConfig(part_size=...)" in str(exc.value)
    assert "--" not in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        check_capabilities(synxfer.TransferConfig(part_size=6 * MiB), caps, "s3://b/")
    assert "TransferConfig(part_size=...)" in str(exc.value)
    assert "--part-size" not in str(exc.value)


@pytest.fixture
def linked_tree(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    (root / "a.txt").write_bytes(b"a")
    (root / "link.txt").symlink_to(root / "a.txt")
    return root


async def test_a_skipped_symlink_names_follow_symlinks(
    s3_endpoint: str, bucket: str, linked_tree: Path
) -> None:
    events: list[Event] = []
    async with synxfer.Client(SMALL, endpoint_url=s3_endpoint, on_event=events.append) as c:
        result = await c.sync_to(linked_tree, f"s3://{bucket}/p/")
    assert result.files_transferred == 1
    (skipped,) = [e for e in events if e.kind is EventKind.SKIPPED]
    assert skipped.error == "symlink not followed (use follow_symlinks=True)"


def test_the_cli_names_the_flag_for_a_skipped_symlink(
    s3_endpoint: str, bucket: str, linked_tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(
        ["sync", str(linked_tree), f"s3://{bucket}/p/", "--endpoint-url", s3_endpoint, "--json"]
    )
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (skipped,) = [d for d in lines if d.get("kind") == "skipped"]
    assert skipped["error"] == "symlink not followed (use --follow-symlinks)"


def test_scp_takes_its_own_endpoint_never_aws_endpoint_url(
    monkeypatch: pytest.MonkeyPatch, s3_endpoint: str
) -> None:
    monkeypatch.delenv("SCP_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)  # S3's, not SCP's
    with pytest.raises(ConfigError) as exc:
        ScpBackend("b", synxfer.backend.BackendOptions())
    assert "Client(endpoint_url=...)" in str(exc.value)
    assert "SCP_ENDPOINT_URL" in str(exc.value)
    assert "--endpoint-url" not in str(exc.value)
    monkeypatch.setenv("SCP_ENDPOINT_URL", "http://127.0.0.1:9")
    assert ScpBackend("b", synxfer.backend.BackendOptions()).endpoint_url == "http://127.0.0.1:9"
    given = synxfer.backend.BackendOptions(endpoint_url="http://127.0.0.1:8")
    assert ScpBackend("b", given).endpoint_url == "http://127.0.0.1:8"
    with pytest.raises(ConfigError, match=r"Client\(endpoint_url=\.\.\.\)"):
        ScpBackend("b", synxfer.backend.BackendOptions(endpoint_url="ftp://x"))


def test_the_cli_says_endpoint_url_for_scp(tmp_path: Path, s3_endpoint: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SCP_ENDPOINT_URL"}
    env["AWS_ENDPOINT_URL"] = s3_endpoint
    out = subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", "ls", "scp://b/"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert "pass --endpoint-url or set SCP_ENDPOINT_URL" in out.stderr


# -- the S3 plugin's messages ---------------------------------------------------------


def test_s3_messages_name_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import ProfileNotFound

    from synxfer.backend import HttpResponse
    from synxfer_s3 import S3Backend, map_error
    from synxfer_s3._classify import CREDENTIALS_HINT
    from synxfer_s3._credentials import Credentials, StaticCredentials
    from synxfer_s3._signed import SignedClient

    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with pytest.raises(ConfigError) as exc:
        S3Backend("b", synxfer.backend.BackendOptions(endpoint_url="ftp://x"))
    assert "Client(endpoint_url=...)" in str(exc.value)
    assert "--endpoint-url" not in str(exc.value)
    assert "Client(profile=...)" in CREDENTIALS_HINT
    profile = map_error(ProfileNotFound(profile="nope"), url="s3://b/", bucket="b")
    assert "Client(profile=...)" in str(profile)
    client = SignedClient(
        region="us-east-1",
        credentials=StaticCredentials(Credentials("a", "b")),
        endpoint_url="http://127.0.0.1:9",
    )
    body = b"<Error><Code>PermanentRedirect</Code><Message>m</Message></Error>"
    moved = HttpResponse(301, "Moved", {"x-amz-bucket-region": "eu-west-1"}, body, len(body))
    text = str(client._error("GetObject", moved, "b", "k"))
    assert "the bucket is in region 'eu-west-1': pass it as Client(region=...)" in text
    assert cli_words(text).endswith("pass it as --region")


def test_the_cli_prints_flags_for_s3_messages(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT")}
    out = subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", "ls", "s3://b/", "--endpoint-url", "ftp://x"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert "(from --endpoint-url / AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL)" in out.stderr
