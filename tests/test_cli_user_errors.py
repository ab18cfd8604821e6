"""User errors, as users of aws-cli, rclone, s5cmd and synapseclient make
them: each is one line on stderr naming the URL, file, option or setting and
what to do, no traceback, the right exit code (2 for usage and set-up), and
with ``--json`` one error object on stdout. The Python API raises the
documented exception types for the same mistakes, never a TypeError,
ValueError or AttributeError from inside.

The CLI runs in process (``main()``, as the console script runs it) against
stock moto; the cases are the ones a sweep found wrong (each failed before
its fix). Cases already covered elsewhere (tests/test_cli.py,
test_setup_errors.py, test_streams.py, test_first_minutes.py) are not
repeated here.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import synxfer
from synxfer import ConfigError, MiB, NoCredentials
from synxfer.cli.main import main

KEY = "testing"
SECRET = "user-errors-secret-0123456789"


@dataclass(frozen=True)
class Case:
    """One mistake: the command line (``{bucket}``, ``{work}`` filled in),
    the environment it runs in, the exit code and a fragment of the message."""

    argv: tuple[str, ...]
    code: int
    words: str
    env: dict[str, str] = field(default_factory=dict)
    unset: tuple[str, ...] = ()
    #: Files written under the work directory first: name -> text.
    files: dict[str, str] = field(default_factory=dict)
    #: The command takes --json.
    json: bool = True


_CONFIG_NO_HEADER = "[default\nregion = us-east-1\n"
_CONFIG_NOT_KV = "[default]\nregion us-east-1\n"
_ENDPOINTS_BAD = "[endpoints]\nrepoEndpoint = http://[::1/repo/v1\n"
#: A port nothing listens on: a request that is built is refused before it is sent.
_ENDPOINTS_NOWHERE = "[endpoints]\n" + "".join(
    f"{name}Endpoint = http://127.0.0.1:9/{name}/v1\n".replace("fileHandle/", "file/")
    for name in ("repo", "auth", "fileHandle")
)

CASES: dict[str, Case] = {
    # -- URLs and paths -------------------------------------------------------------
    "one-slash-short-no-bucket": Case(
        ("cp", "{work}/f.txt", "gs:/"), 2, "malformed URL 'gs:/': expected scheme://bucket/key"
    ),
    "one-slash-short-says-which": Case(
        ("cp", "s3:/{bucket}/k", "{work}/out"), 2, "like s3://{bucket}/k"
    ),
    "rclone-remote-style": Case(
        ("cp", "{work}/f.txt", "s3:{bucket}/k"), 2, "write s3://{bucket}/k"
    ),
    "synapse-id-without-scheme": Case(
        ("cp", "syn123", "{work}/out/"), 2, "for the Synapse entity write syn://syn123"
    ),
    "object-options-on-a-download": Case(
        ("cp", "s3://{bucket}/k", "{work}/out", "--storage-class", "GLACIER", "--tagging", "a=b"),
        2,
        "--storage-class, --tagging set how objects are written to a store; the destination "
        "'{work}/out' is a local path: leave them out",
    ),
    "object-options-on-a-sync-down": Case(
        ("sync", "s3://{bucket}/p/", "{work}/out", "--metadata", "a=b"),
        2,
        "--metadata sets how objects are written to a store",
    ),
    "windows-drive-is-a-path": Case(
        ("cp", "C:/data/f.txt", "s3://{bucket}/k"), 2, "the local path 'C:/data/f.txt' does not"
    ),
    "broken-symlink": Case(
        ("cp", "{work}/dangling", "s3://{bucket}/k"), 2, "is a symbolic link to"
    ),
    "pipe-with-recursive": Case(
        ("cp", "{work}/pipe", "s3://{bucket}/k/", "--recursive"),
        2,
        "streams one object: --recursive does not apply",
    ),
    "state-dir-is-a-file": Case(
        ("cp", "{work}/f.txt", "s3://{bucket}/k", "--state-dir", "{work}/f.txt"),
        2,
        "--state-dir '{work}/f.txt' is not a directory",
    ),
    "state-dir-under-a-file": Case(
        ("cp", "{work}/f.txt", "s3://{bucket}/k", "--state-dir", "{work}/f.txt/journal"),
        2,
        "cannot be written",
    ),
    "cat-of-a-bucket": Case(
        ("cat", "s3://{bucket}"),
        2,
        "s3://{bucket} names a prefix, not an object: name one object under it, like "
        "s3://{bucket}/KEY",
        json=False,
    ),
    "mb-invalid-bucket-name": Case(
        ("mb", "s3://ab"),
        1,
        "InvalidBucketName (HTTP 400) on CreateBucket"
        + ": The specified bucket is not valid.; a bucket name is 3-63 lowercase letters",
    ),
    "expected-size-of-a-file": Case(
        ("cp", "{work}/f.txt", "s3://{bucket}/k", "--expected-size", "1G"),
        2,
        "--expected-size is for a stream (cp - URL, or a named pipe), not '{work}/f.txt'",
    ),
    # -- endpoints ---------------------------------------------------------------------
    "endpoint-url-unreadable": Case(
        ("ls", "s3://{bucket}/", "--endpoint-url", "http://[::1"), 2, "invalid endpoint URL"
    ),
    "endpoint-flag-unreadable": Case(
        ("ls", "s3://{bucket}/", "--endpoint", "s3=http://[::1"), 2, "invalid endpoint URL"
    ),
    "aws-endpoint-url-env-unreadable": Case(
        ("ls", "s3://{bucket}/"), 2, "invalid endpoint URL", env={"AWS_ENDPOINT_URL": "http://[::1"}
    ),
    "scp-endpoint-env-unreadable": Case(
        ("ls", "scp://{bucket}/"),
        2,
        "from SCP_ENDPOINT_URL",
        env={"SCP_ENDPOINT_URL": "http://[::1"},
    ),
    "gcs-emulator-env-unreadable": Case(
        ("ls", "gs://{bucket}/"),
        2,
        "invalid GCS endpoint 'http://[::1' (from STORAGE_EMULATOR_HOST)",
        env={"STORAGE_EMULATOR_HOST": "http://[::1"},
    ),
    "synapse-config-endpoint-unreadable": Case(
        ("ls", "syn://syn123/"),
        2,
        "Synapse repoEndpoint 'http://[::1/repo/v1'",
        env={"SYNAPSE_AUTH_TOKEN": "token-for-the-user-errors-test"},
        files={"home/.synapseConfig": _ENDPOINTS_BAD},
    ),
    # -- configuration files and credentials --------------------------------------------
    "aws-config-no-section-header": Case(
        ("ls", "s3://{bucket}/"),
        2,
        "line 1: '[default' comes before any [section] header; fix it, or point AWS_CONFIG_FILE",
        env={"AWS_CONFIG_FILE": "{work}/aws-config"},
        files={"aws-config": _CONFIG_NO_HEADER},
    ),
    "aws-config-line-not-key-value": Case(
        ("cp", "{work}/f.txt", "s3://{bucket}/k"),
        2,
        "line 2: 'region us-east-1' is not 'name = value'",
        env={"AWS_CONFIG_FILE": "{work}/aws-config"},
        files={"aws-config": _CONFIG_NOT_KV},
    ),
    "synapse-config-malformed": Case(
        ("ls", "syn://syn123/"),
        2,
        "cannot read the Synapse config file",
        env={"SYNAPSE_AUTH_TOKEN": "token-for-the-user-errors-test"},
        files={"home/.synapseConfig": "[endpoints\nrepoEndpoint = http://x\n"},
    ),
    "aws-profile-env-unknown": Case(
        ("ls", "s3://{bucket}/"),
        2,
        "The config profile (ghost) could not be found; check AWS_PROFILE",
        env={"AWS_PROFILE": "ghost"},
        unset=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    ),
    "aws-profile-env-unknown-ends-the-run": Case(
        ("cp", "{work}/f.txt", "s3://{bucket}/k"),
        2,
        "The config profile (ghost) could not be found",
        env={"AWS_PROFILE": "ghost"},
        unset=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    ),
    "aws-credentials-half-a-pair": Case(
        ("cp", "{work}/f.txt", "s3://{bucket}/k"),
        2,
        "no usable credentials (Partial credentials found in env, missing: AWS_SECRET_ACCESS_KEY)",
        unset=("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    ),
    "aws-credentials-file-malformed": Case(
        ("ls", "s3://{bucket}/"),
        2,
        "Unable to parse config file",
        env={"AWS_SHARED_CREDENTIALS_FILE": "{work}/credentials"},
        unset=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
        files={"credentials": "[default\naws_access_key_id = x\n"},
    ),
    "aws-key-with-a-line-break": Case(
        ("ls", "s3://{bucket}/"),
        2,
        "HTTP header 'authorization' has a line break: check the credentials or token in use",
        env={"AWS_ACCESS_KEY_ID": "AKIA\nINJECTED: 1"},
    ),
    "synapse-token-not-ascii": Case(
        ("ls", "syn://syn123/"),
        2,
        "HTTP header 'authorization' has non-ASCII characters: check the credentials or token",
        env={"SYNAPSE_AUTH_TOKEN": "t\u00f6ken-pasted-from-a-document"},
        files={"home/.synapseConfig": _ENDPOINTS_NOWHERE},
    ),
    "gcs-no-credentials": Case(
        ("ls", "gs://{bucket}/"),
        2,
        "no usable Google credentials",
        env={"GOOGLE_APPLICATION_CREDENTIALS": "{work}/no-such-key.json"},
    ),
}


def _s3(endpoint: str, key: str = KEY, secret: str = SECRET) -> Any:
    import boto3  # type: ignore[import-untyped]

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
    )


@pytest.fixture(scope="module")
def moto_bucket(stock_moto: Any) -> str:
    name = f"ue-{uuid.uuid4().hex[:12]}"
    _s3(stock_moto.endpoint_url).create_bucket(Bucket=name)
    return name


@pytest.fixture
def work(tmp_path: Path, stock_moto: Any, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A work directory (a small file, a dangling link, a named pipe) and an
    environment that reaches stock moto and nothing of this machine's."""
    (tmp_path / "f.txt").write_bytes(b"hello\n")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "pipe")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", stock_moto.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    for name in (
        "AWS_PROFILE",
        "STORAGE_EMULATOR_HOST",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SCP_ENDPOINT_URL",
        "SYNAPSE_AUTH_TOKEN",
        "SYNAPSE_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _run(
    case: Case, work: Path, bucket: str, monkeypatch: pytest.MonkeyPatch, json_flag: bool
) -> tuple[int, str]:
    """Run ``case``; returns its exit code and the words its message must hold."""

    def fill(text: str) -> str:
        return text.replace("{bucket}", bucket).replace("{work}", str(work))

    for name, text in case.files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for name, value in case.env.items():
        monkeypatch.setenv(name, fill(value))
    for name in case.unset:
        monkeypatch.delenv(name, raising=False)
    argv = [fill(a) for a in case.argv] + (["--json"] if json_flag else [])
    return main(argv), fill(case.words)


@pytest.mark.parametrize(
    ("name", "json_flag"),
    [
        (name, flag)
        for name, case in CASES.items()
        for flag in (False, True)
        if case.json or not flag
    ],
    ids=lambda value: {False: "text", True: "json"}.get(value, value),
)
def test_user_error(
    name: str,
    json_flag: bool,
    work: Path,
    moto_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = CASES[name]
    code, words = _run(case, work, moto_bucket, monkeypatch, json_flag)
    out, err = capsys.readouterr()
    assert code == case.code, err
    assert "Traceback" not in err
    assert SECRET not in out + err
    lines = err.splitlines()
    assert len(lines) == 1, err  # one line: the error
    assert lines[0].startswith("synxfer: error: ")
    assert words in lines[0]
    if json_flag:
        (obj,) = [json.loads(line) for line in out.splitlines()]
        assert obj["type"] == "error"
        assert obj["exit_code"] == case.code
        assert words in obj["error"]
    else:
        assert out == ""


# -- named pipes and devices: streams, never files ------------------------------------


def _release(fifo: Path) -> None:
    """End a writer's wait to open ``fifo`` (a reader that closes at once)."""
    try:
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    os.close(fd)


def test_cp_from_a_named_pipe_streams_it(
    work: Path, moto_bucket: str, stock_moto: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``synxfer cp <(cmd) s3://...`` or a FIFO: its bytes, read as a stream
    (as ``cp -`` reads standard input). Before: opened and stat'ed as a file
    of size 0, an empty object (or a wait forever for a writer)."""
    fifo = work / "pipe"
    data = os.urandom(300_000)

    def write() -> None:
        with open(fifo, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        code = main(["cp", str(fifo), f"s3://{moto_bucket}/from-pipe"])
    finally:
        _release(fifo)
        writer.join(10)
    assert code == 0, capsys.readouterr().err
    body = _s3(stock_moto.endpoint_url).get_object(Bucket=moto_bucket, Key="from-pipe")["Body"]
    got = body.read()
    assert got == data


def test_cp_to_a_named_pipe_writes_into_it(
    work: Path, moto_bucket: str, stock_moto: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A download onto a FIFO (or /dev/null) writes into it. Before: a temporary
    file renamed over it, replacing the pipe with a regular file (as root,
    ``cp URL /dev/null`` would have replaced /dev/null)."""
    _s3(stock_moto.endpoint_url).put_object(
        Bucket=moto_bucket, Key="to-pipe", Body=b"through the pipe\n"
    )
    fifo = work / "out-pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code = main(["cp", f"s3://{moto_bucket}/to-pipe", str(fifo)])
    reader.join(10)  # the command closed its end: the reader has all (bounded, if not)
    assert code == 0, capsys.readouterr().err
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got == [b"through the pipe\n"]


# -- the Python API: the same mistakes, the documented exceptions -----------------------


def test_transfer_config_values_of_the_wrong_type_are_config_errors() -> None:
    for changes, words in (
        ({"max_threads": "8"}, "max_threads must be a whole number (got '8')"),
        ({"max_threads": 2.5}, "max_threads must be a whole number"),
        ({"max_files": True}, "max_files must be a whole number"),
        ({"part_size": "1x"}, "TransferConfig(part_size=...): invalid size '1x'"),
        ({"part_size": 5.5 * MiB}, "part_size must be a whole number of bytes or text"),
        ({"bwlimit": "fast"}, "TransferConfig(bwlimit=...): invalid rate 'fast'"),
        ({"resume": "no"}, "resume must be True or False"),
        ({"read_timeout": "60"}, "read_timeout must be a number of seconds"),
        ({"retry": 3}, "retry must be a synxfer.RetryPolicy"),
    ):
        with pytest.raises(ConfigError) as exc:
            synxfer.TransferConfig(**changes)
        assert words in str(exc.value), changes
    # Text sizes and rates read as the CLI reads them (and as the docstring says).
    config = synxfer.TransferConfig(
        part_size="16MiB",  # type: ignore[arg-type]
        bwlimit="16M/s",  # type: ignore[arg-type]
        state_dir=Path("/x"),  # type: ignore[arg-type]
    )
    assert (config.part_size, config.bwlimit, config.state_dir) == (16 * MiB, 16 * MiB, "/x")


def test_client_arguments_of_the_wrong_shape_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Client\(config\) must be a synxfer.TransferConfig"):
        synxfer.Client("fast")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"Client\(endpoints=...\) must map schemes"):
        synxfer.Client(endpoints={"s3": 9000})  # type: ignore[dict-item]
    secret = "anonymous=true-but-a-secret-too"
    with pytest.raises(ConfigError, match=r"backend_options=...\) must map schemes") as exc:
        synxfer.Client(backend_options={"s3": secret})  # type: ignore[dict-item]
    assert secret not in str(exc.value)  # an option may be a credential: never echoed
    with pytest.raises(ConfigError, match=r"WriteOptions\(metadata=...\) must be a mapping"):
        synxfer.WriteOptions(metadata="project=x")  # type: ignore[arg-type]


async def test_client_calls_with_mistakes_raise_config_errors(
    work: Path, moto_bucket: str, stock_moto: Any
) -> None:
    fifo = work / "pipe"
    writer = threading.Thread(target=lambda: open(fifo, "wb").close(), daemon=True)
    writer.start()  # without the check, the upload's open() would wait for it forever
    try:
        async with synxfer.Client(endpoint_url=stock_moto.endpoint_url) as client:
            with pytest.raises(ConfigError, match=r"filters must be a list of \(kind, pattern\)"):
                await client.copy(
                    str(work),
                    f"s3://{moto_bucket}/t/",
                    recursive=True,
                    filters="*.txt",  # type: ignore[arg-type]
                )
            with pytest.raises(ConfigError, match="is a named pipe, not a file: upload it"):
                await client.upload_file(fifo, f"s3://{moto_bucket}/p")
            await client.put_bytes(f"s3://{moto_bucket}/p", b"x")
            out = work / "out-pipe"
            os.mkfifo(out)  # a pipe, not /dev/null: without the check it is replaced
            with pytest.raises(ConfigError, match="is a named pipe, not a file: a download"):
                await client.download_file(f"s3://{moto_bucket}/p", out)
            assert stat.S_ISFIFO(out.stat().st_mode)
            with pytest.raises(ConfigError, match="is a symbolic link to"):
                await client.upload_file(work / "dangling", f"s3://{moto_bucket}/p")
    finally:
        _release(fifo)
        writer.join(10)


def test_no_credentials_from_an_unknown_aws_profile_is_a_no_credentials(
    work: Path, monkeypatch: pytest.MonkeyPatch, moto_bucket: str, stock_moto: Any
) -> None:
    """Through the API too: NoCredentials (a ConfigError and a PermissionError)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_PROFILE", "ghost")
    with pytest.raises(NoCredentials, match=r"\(ghost\) could not be found"):
        synxfer.download_file(
            f"s3://{moto_bucket}/k", work / "k", endpoint_url=stock_moto.endpoint_url
        )


def test_a_refused_head_says_to_check_the_credentials(
    seaweed_session: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SeaweedFS with auth, a wrong key: the HEAD before a download is refused
    with no body to say why. Before: ``HTTP 403 on HeadObject`` and nothing
    more; now the credentials hint that a refused GET or LIST carries."""
    weed = seaweed_session
    bucket = f"ue-{uuid.uuid4().hex[:12]}"
    client = _s3(weed.endpoint_url, weed.access_key, weed.secret_key)
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="k", Body=b"x")
    monkeypatch.setenv("AWS_ENDPOINT_URL", weed.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", weed.secret_key)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    code = main(["cp", f"s3://{bucket}/k", str(tmp_path / "k")])
    err = capsys.readouterr().err
    assert code == 1
    assert "HTTP 403 on HeadObject: access denied; check the credentials" in err
    assert weed.secret_key not in err


def test_a_file_in_the_way_of_a_download_is_named(
    work: Path, moto_bucket: str, stock_moto: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cp URL f.txt/sub`` where f.txt is a file: the failure names f.txt.
    Before: the hidden temporary file (``f.txt/.sub.<hex>.synxfer-part: Not a
    directory``), a name the user never gave."""
    _s3(stock_moto.endpoint_url).put_object(Bucket=moto_bucket, Key="in-the-way", Body=b"x")
    for dest in ("f.txt/sub", "f.txt/deeper/sub"):
        code = main(["cp", f"s3://{moto_bucket}/in-the-way", str(work / dest)])
        err = capsys.readouterr().err
        assert code == 1
        assert f"{work / 'f.txt'}: a file, where a directory is needed" in err
        assert "synxfer-part" not in err
        assert "Traceback" not in err


def test_rb_of_a_bucket_with_objects_says_force(
    work: Path, stock_moto: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rb`` of a bucket that is not empty: exit 1, and the flag that empties
    it (the library's message says ``force=True``, the CLI ``--force``)."""
    bucket = f"ue-{uuid.uuid4().hex[:12]}"
    s3 = _s3(stock_moto.endpoint_url)
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    assert main(["rb", f"s3://{bucket}"]) == 1
    err = capsys.readouterr().err
    assert "not empty; delete its objects first, or give --force to delete them" in err
    assert main(["rb", f"s3://{bucket}", "--force", "--quiet"]) == 0


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["s3", "cp", "a", "s3://b/k"], "(synxfer takes aws s3's commands directly"),
        (["copy", "a", "s3://b/k"], "(did you mean 'cp'?)"),
        (["snyc", "a", "s3://b/k"], "(did you mean 'sync'?)"),
        (["cp", "a", "s3://b/k", "-r"], "unrecognized arguments: -r (did you mean --recursive?)"),
        (["cp", "a", "s3://b/k", "--dry-run"], "(did you mean --dryrun?)"),
        (["sync", "a", "s3://b/k", "--part-sise", "8M"], "(did you mean --part-size?)"),
        (["cp", "a", "s3://b/k", "--multipart-threshold", "8M"], "from the s3 section of"),
        (["sync", "a", "s3://b/k", "--recursive"], "(--recursive is for cp, mv, ls and rm; sync"),
        (["cp", "a", "s3://b/k", "--delete"], "(--delete is sync's: cp and mv never delete"),
    ],
    ids=[
        "aws-s3",
        "rclone-copy",
        "typo-command",
        "cp-r",
        "dry-run",
        "typo-flag",
        "threshold",
        "sync-recursive",
        "cp-delete",
    ],
)
def test_an_unknown_command_or_flag_says_what_was_meant(
    argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Habits from aws-cli, rclone and cp, and typos: argparse's error, and
    what synxfer calls it (before: the error alone)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("synxfer: error: ")]
    assert hint in line
    assert "Traceback" not in err


def test_metadata_given_twice_keeps_both(
    work: Path, moto_bucket: str, stock_moto: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--metadata a=1 --metadata b=2``: both (before: b=2 alone, a=1 dropped
    without a word)."""
    url = f"s3://{moto_bucket}/meta"
    args = ["cp", str(work / "f.txt"), url, "--metadata", "a=1", "--metadata", "b=2"]
    assert main(args) == 0, capsys.readouterr().err
    head = _s3(stock_moto.endpoint_url).head_object(Bucket=moto_bucket, Key="meta")
    assert {"a": "1", "b": "2"}.items() <= head["Metadata"].items()


def test_a_backend_option_no_backend_reads_is_reported(
    work: Path, moto_bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--backend-option s3.adressing_style=path`` (misspelt): the run goes on
    (a backend may read an option late) but says the option was ignored and
    which ones s3:// reads. Before: nothing; a known option says nothing."""
    url = f"s3://{moto_bucket}/opt"
    typo = ["--backend-option", "s3.adressing_style=path"]
    assert main(["cp", str(work / "f.txt"), url, *typo]) == 0
    err = capsys.readouterr().err
    assert "the s3:// backend has no option 'adressing_style' (--backend-option): ignored" in err
    assert "the options it reads: addressing_style, anonymous," in err
    known = ["--backend-option", "s3.addressing_style=path", "--no-sign-request"]
    main(["cp", str(work / "f.txt"), url, *known])
    assert "has no option" not in capsys.readouterr().err
