"""The user's aws-cli ``s3`` settings (~/.aws/config or $AWS_CONFIG_FILE) in the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

from synxfer import ConfigError, MiB, TransferConfig
from synxfer.cli import main as cli
from synxfer.cli._awsconfig import read_s3_settings

from .conftest import write_tree

CONFIG = """\
[default]
region = us-east-1
s3 =
  max_concurrent_requests = 3
  multipart_threshold = 6MB
  multipart_chunksize = 6MB
  max_bandwidth = 1GB/s
  addressing_style = path

[profile slow]
s3 =
    max_bandwidth = 800Kb/s
    multipart_chunksize = 16MiB
    use_accelerate_endpoint = false

[profile plain]
region = eu-west-1
"""


@pytest.fixture
def aws_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "aws-config"
    path.write_text(CONFIG)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(path))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return path


def test_reads_the_active_profiles_s3_settings_as_aws_cli_does(
    aws_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MB is MiB in aws-cli's s3 settings; GB/s bytes; unknown keys left alone.
    assert read_s3_settings() == {
        "max_threads": 3,
        "multipart_threshold": 6 * MiB,
        "part_size": 6 * MiB,
        "bwlimit": 1024 * MiB,
    }
    slow = {"bwlimit": 800 * 1024 // 8, "part_size": 16 * MiB}  # Kb/s: bits
    assert read_s3_settings("slow") == slow
    monkeypatch.setenv("AWS_PROFILE", "slow")
    assert read_s3_settings() == slow
    assert read_s3_settings("plain") == {}  # no s3 section
    assert read_s3_settings("missing") == {}  # the backend reports unknown profiles


def test_no_config_file_is_no_settings(tmp_path: Path) -> None:
    assert read_s3_settings(env={"AWS_CONFIG_FILE": str(tmp_path / "none")}) == {}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("max_concurrent_requests = 0", "max_concurrent_requests = '0'"),
        ("max_concurrent_requests = lots", "max_concurrent_requests"),
        ("multipart_chunksize = 8 potatoes", "invalid size"),
        ("max_bandwidth = fast", "invalid rate"),
    ],
)
def test_a_bad_value_names_the_file_profile_and_setting(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "config"
    path.write_text(f"[profile x]\ns3 =\n  {line}\n")
    with pytest.raises(ConfigError, match=message) as info:
        read_s3_settings("x", env={"AWS_CONFIG_FILE": str(path)})
    assert str(path) in str(info.value)
    assert "[profile x]" in str(info.value)


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[TransferConfig | None]:
    made: list[TransferConfig | None] = []
    real = cli._config

    def record(args: Any) -> TransferConfig | None:
        made.append(real(args))
        return made[-1]

    monkeypatch.setattr(cli, "_config", record)
    return made


def _etag_parts(endpoint: str, bucket: str, key: str) -> int:
    s3 = boto3.client("s3", endpoint_url=endpoint)
    etag = s3.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')
    return int(etag.partition("-")[2] or 1)


def test_cli_applies_them_unless_a_flag_says_otherwise(
    aws_config: Path,
    s3_endpoint: str,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = _recording(monkeypatch)
    write_tree(tmp_path, {"big.bin": 13 * MiB})
    src = str(tmp_path / "big.bin")
    common = ["--endpoint-url", s3_endpoint, "--quiet"]
    assert cli.main(["cp", src, f"s3://{bucket}/one", *common]) == 0
    config = made[-1]
    assert config is not None
    assert (config.max_threads, config.part_size, config.multipart_threshold) == (
        3,
        6 * MiB,
        6 * MiB,
    )
    assert config.bwlimit == 1024 * MiB
    assert _etag_parts(s3_endpoint, bucket, "one") == 3  # 6 + 6 + 1 MiB: the profile's chunks

    flags = ["--max-threads", "2", "--part-size", "7MiB", "--bwlimit", "off"]
    assert cli.main(["cp", src, f"s3://{bucket}/two", *common, *flags]) == 0
    config = made[-1]
    assert config is not None
    assert (config.max_threads, config.part_size, config.bwlimit) == (2, 7 * MiB, 0)
    assert config.multipart_threshold == 6 * MiB  # no flag for it: the profile's
    assert _etag_parts(s3_endpoint, bucket, "two") == 2

    # --profile picks the profile whose settings apply (it has no credentials here:
    # the run cannot succeed, but its settings were read).
    cli.main(["cp", src, f"s3://{bucket}/three", *common, "--profile", "slow"])
    config = made[-1]
    assert config is not None
    assert (config.part_size, config.bwlimit) == (16 * MiB, 800 * 1024 // 8)


def test_cli_leaves_other_schemes_alone(
    aws_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _recording(monkeypatch)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a").write_bytes(b"x")
    (tmp_path / "bucket").mkdir()
    url = f"file://{tmp_path / 'bucket'}/p/"
    assert cli.main(["cp", "--recursive", str(tmp_path / "src"), url, "--quiet"]) == 0
    assert made[-1] is None  # defaults: the aws-cli settings are for s3://


def test_cli_bad_setting_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config"
    path.write_text("[default]\ns3 =\n  multipart_chunksize = big\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(path))
    (tmp_path / "a").write_bytes(b"x")
    assert (
        cli.main(["cp", str(tmp_path / "a"), "s3://b/a", "--endpoint-url", "http://127.0.0.1:9"])
        == 2
    )
    err = capsys.readouterr().err
    assert "s3.multipart_chunksize = 'big'" in err
