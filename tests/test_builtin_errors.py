"""synxfer's errors are the built-in ones where one fits (as obstore's are):
:class:`~synxfer.NotFound` is a :class:`FileNotFoundError`,
:class:`~synxfer.PermissionDenied` a :class:`PermissionError`, so callers
(fsspec's among them) catch the built-ins with no translation.

The other side: synxfer's own code that catches OSErrors for local I/O must
not take a remote error for a local one. The CLI is where both meet: a
missing local path is a usage error (exit 2), a missing bucket or object a
failure at the store (exit 1). Tests run on moto (in-process, 127.0.0.1).
"""

from __future__ import annotations

import errno
import pickle
import uuid
from pathlib import Path

import pytest

import synxfer
from synxfer import BucketNotFound, ConfigError, NoCredentials, NotFound, PermissionDenied
from synxfer.cli.main import main


def test_errors_are_the_builtin_ones() -> None:
    missing = NotFound("no such object", url="s3://b/k", status=404)
    assert isinstance(missing, FileNotFoundError)
    assert (missing.errno, missing.filename, missing.url, missing.status) == (
        errno.ENOENT,
        "s3://b/k",
        "s3://b/k",
        404,
    )
    assert str(missing) == "s3://b/k: no such object"  # synxfer's words, no "[Errno 2]"
    assert isinstance(BucketNotFound("no bucket"), FileNotFoundError)
    refused = PermissionDenied("access denied", url="s3://b/k", status=403)
    assert isinstance(refused, PermissionError)
    assert refused.errno == errno.EACCES
    none = NoCredentials("no credentials")
    assert isinstance(none, PermissionError)
    assert isinstance(none, ConfigError)


def test_an_error_sent_back_by_a_worker_process_keeps_its_fields() -> None:
    """Scale-out workers return errors pickled: OSError's own pickling must
    not drop what synxfer's errors carry."""
    for exc in (
        NotFound("no such object", url="s3://b/k", status=404),
        PermissionDenied("access denied", url="gs://b/k", status=403),
    ):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc)
        assert (str(back), back.url, back.status, back.errno) == (
            str(exc),
            exc.url,
            exc.status,
            exc.errno,
        )


@pytest.fixture
def moto_env(s3_endpoint: str, bucket: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A bucket on moto, its endpoint in the environment the CLI reads."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    return bucket


def test_a_missing_bucket_is_a_failure_at_the_store_not_a_usage_error(
    moto_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = f"no-such-{uuid.uuid4().hex[:12]}"
    assert main(["ls", f"s3://{missing}/"]) == 1
    err = capsys.readouterr().err
    assert missing in err
    assert "Traceback" not in err
    assert "[Errno" not in err


def test_a_missing_object_is_a_failure_at_the_store_not_a_usage_error(
    moto_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cp", f"s3://{moto_env}/missing.bin", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert "missing.bin" in err
    assert "[Errno" not in err
    assert not (tmp_path / "x").exists()
    # ...while a missing local path still is one (exit 2), as before.
    assert main(["cp", str(tmp_path / "absent"), f"s3://{moto_env}/x"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_fsspec_callers_get_synxfer_errors_they_catch_as_builtins(
    moto_env: str, s3_endpoint: str
) -> None:
    pytest.importorskip("fsspec")
    from synxfer.fsspec import SxS3FileSystem

    fs = SxS3FileSystem(endpoint_url=s3_endpoint, skip_instance_cache=True)
    with pytest.raises(FileNotFoundError) as info:
        fs.info(f"{moto_env}/missing")
    assert isinstance(info.value, synxfer.NotFound)  # no hand-made copy of it
    assert info.value.errno == errno.ENOENT
    with pytest.raises(FileNotFoundError) as info:
        fs.cat_file(f"no-such-{uuid.uuid4().hex[:12]}/k")
    assert isinstance(info.value, synxfer.BucketNotFound)
    assert not fs.exists(f"{moto_env}/missing")
