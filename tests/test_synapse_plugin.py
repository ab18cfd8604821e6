"""The syn:// plugin against the local Synapse-style service (issue 34).

The service (``synxfer_servers.synapse.SynapseService``) keeps its bytes in
stock moto (or SeaweedFS, which checks pre-signed URL expiry) and is what
the real synapseclient 4.14 talks to as well: the cross-client tests store
with one client and read with the other, both ways, from one
``~/.synapseConfig`` (its ``[endpoints]`` section points both at the
service).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from synxfer import (
    BackendError,
    BucketNotFound,
    Client,
    ConfigError,
    MiB,
    NoCredentials,
    NotFound,
    PermissionDenied,
    RetryPolicy,
    TransferConfig,
    TransientError,
)
from synxfer.backend import BackendOptions
from synxfer_synapse import SynapseBackend, load_settings
from synxfer_synapse._core import SynapseRest
from synxfer_synapse._options import PRODUCTION_ENDPOINTS

from ._synapse import point_home, service_fixtures, serving, synapseclient_for, write_config

TOKEN = "syn-pat-SECRET-7f3a9c"  # distinctive: grepped for in every output
BUCKET = "synapse-store"
BIG = 40 * MiB
FAST_RETRY = RetryPolicy(attempts=4, initial_delay=0.01, max_delay=0.05)


# -- servers and environment -------------------------------------------------------


service, home = service_fixtures(BUCKET, TOKEN)


@pytest.fixture(scope="module")
def big_bytes() -> bytes:
    return os.urandom(BIG)


def _tree(root: Path, big: bytes | None = None) -> dict[str, bytes]:
    files = {
        "a.txt": b"hello synapse\n",
        "empty.dat": b"",
        "odd name (1) +x,y's.txt": os.urandom(3000),
        "sub/deeper/data.csv": b"id,value\n" + b"1,2\n" * 5000,
    }
    if big is not None:
        files["sub/big.bin"] = big
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def _read_tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".synxfer")
    }


def _config(**changes: Any) -> TransferConfig:
    return TransferConfig(retry=FAST_RETRY, **changes)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _backend(project: str) -> SynapseBackend:
    backend = SynapseBackend(project, BackendOptions())
    await backend.open()
    return backend


# -- config and auth, as synapseclient reads them ----------------------------------


def test_settings_follow_synapseclient(tmp_path: Path) -> None:
    """[default] authtoken, [profile NAME] by SYNAPSE_PROFILE, the legacy
    [authentication] section, the file before SYNAPSE_AUTH_TOKEN (synapseclient's
    chain), [endpoints], backend options on top, [transfer] max_threads."""
    cfg = tmp_path / "cfg"
    cfg.write_text(
        "[default]\nauthtoken = from-default\n"
        "[profile lab]\nauthtoken = from-lab\n"
        "[endpoints]\nrepoEndpoint = http://127.0.0.1:9/repo/v1\n"
        "[transfer]\nmax_threads = 12\n"
    )
    opts = BackendOptions(extra={"config_file": str(cfg)})
    s = load_settings(opts, env={"SYNAPSE_AUTH_TOKEN": "from-env"})
    assert (s.token, s.profile, s.max_threads) == ("from-default", "default", 12)
    assert s.repo_endpoint == "http://127.0.0.1:9/repo/v1"
    assert s.file_endpoint == PRODUCTION_ENDPOINTS["fileHandleEndpoint"]
    assert load_settings(opts, env={"SYNAPSE_PROFILE": "lab"}).token == "from-lab"
    over = BackendOptions(
        extra={"config_file": str(cfg), "repo_endpoint": "https://example.org/repo/v1/"}
    )
    assert load_settings(over, env={}).repo_endpoint == "https://example.org/repo/v1"
    with pytest.raises(ConfigError, match="profile 'nope' does not exist"):
        load_settings(opts, env={"SYNAPSE_PROFILE": "nope"})

    legacy = tmp_path / "legacy"
    legacy.write_text("[authentication]\nauthtoken = from-legacy\n")
    s = load_settings(BackendOptions(extra={"config_file": str(legacy)}), env={})
    assert s.token == "from-legacy"
    none = BackendOptions(extra={"config_file": str(tmp_path / "missing")})
    assert load_settings(none, env={"SYNAPSE_AUTH_TOKEN": "from-env"}).token == "from-env"
    assert load_settings(none, env={}).token is None
    assert load_settings(none, env={}).repo_endpoint == PRODUCTION_ENDPOINTS["repoEndpoint"]

    bad = tmp_path / "bad"
    bad.write_text("[transfer]\nmax_threads = many\n")
    with pytest.raises(ConfigError, match="max_threads"):
        load_settings(BackendOptions(extra={"config_file": str(bad)}), env={})
    # The token never shows in a repr.
    shown = repr(load_settings(opts, env={})) + repr(SynapseBackend("syn1", opts))
    assert "from-default" not in shown


def test_the_command_takes_transfer_max_threads_unless_a_flag_says_otherwise(
    service: Any, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synxfer.cli import main as cli

    write_config(home, service, extra="[transfer]\nmax_threads = 3\n")
    project = service.create_project("threads")
    src = tmp_path / "src"
    _tree(src)
    made: list[TransferConfig | None] = []
    real = cli._config

    def record(args: Any) -> TransferConfig | None:
        made.append(real(args))
        return made[-1]

    monkeypatch.setattr(cli, "_config", record)
    assert cli.main(["sync", str(src), f"syn://{project}", "--quiet"]) == 0
    assert made[-1] is not None
    assert made[-1].max_threads == 3
    assert cli.main(["sync", f"syn://{project}", str(tmp_path / "out"), "--quiet"]) == 0
    assert made[-1] is not None
    assert made[-1].max_threads == 3
    flags = ["--quiet", "--max-threads", "5"]
    assert cli.main(["sync", str(src), f"syn://{project}", *flags]) == 0
    assert made[-1] is not None
    assert made[-1].max_threads == 5


def test_a_presigned_urls_expiry_is_read_in_utc() -> None:
    from synxfer_synapse._backend import _expires

    url = "http://127.0.0.1:1/b/k?X-Amz-Date=20260101T000000Z&X-Amz-Expires=900&X-Amz-Signature=s"
    assert _expires(url) == 1767225600 + 900  # 2026-01-01T00:00:00Z + 900 s
    assert _expires("http://127.0.0.1:1/b/k?sig=1") is None


# -- the round trip ------------------------------------------------------------------


def test_sync_up_and_down_byte_exact_then_nothing_to_send(
    service: Any, home: Path, tmp_path: Path, big_bytes: bytes
) -> None:
    project = service.create_project("roundtrip")
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = _tree(src, big_bytes)
    url = f"syn://{project}/data"

    async def main() -> None:
        async with Client(_config()) as client:
            up = await client.sync_to(src, url)
            assert not up.failures, up.failures
            assert up.files_transferred == len(files)
            starts = service.stats().get("POST /file/multipart", 0)
            again = await client.sync_to(src, url)
            assert again.bytes_uploaded == 0
            assert again.files_transferred == 0
            assert service.stats().get("POST /file/multipart", 0) == starts

            down = await client.sync_from(url, dst)
            assert not down.failures, down.failures
            assert down.not_verified == 0  # every download checked against the handle's MD5
            again = await client.sync_from(url, dst)
            assert again.bytes_downloaded == 0
            assert again.files_transferred == 0

            listed = {i.key: i async for i in client.ls(url + "/", recursive=True)}
            big = listed["data/sub/big.bin"]
            assert big.size == BIG
            assert big.etag == hashlib.md5(big_bytes).hexdigest()

    _run(main())
    assert _read_tree(dst) == files


def test_a_changed_file_is_a_new_version_an_unchanged_one_is_not(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("versions")
    src = tmp_path / "src"
    _tree(src)
    url = f"syn://{project}"
    target = src / "a.txt"

    async def versions() -> list[int]:
        backend = await _backend(project)
        try:
            info = await backend.stat("a.txt")
            remote = backend.syn.remembered("a.txt")
            assert remote is not None
            assert info.etag == remote.md5
            doc = await backend.rest.call(
                "GET",
                "repo",
                f"/entity/{remote.entity_id}/version",
                url=backend.url("a.txt"),
                what="versions",
            )
            return sorted(v["versionNumber"] for v in doc["results"])
        finally:
            await backend.aclose()

    async def main() -> None:
        async with Client(_config()) as client:
            await client.sync_to(src, url)
            assert await versions() == [1]
            # Same bytes, newer mtime: synced, but nothing sent and no version.
            st = target.stat()
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 10**10))
            starts = service.stats().get("POST /file/multipart", 0)
            res = await client.sync_to(src, url)
            assert not res.failures
            assert service.stats().get("POST /file/multipart", 0) == starts
            assert await versions() == [1]
            # New bytes: a new version of the same entity.
            target.write_bytes(b"changed content\n")
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 2 * 10**10))
            res = await client.sync_to(src, url)
            assert res.files_transferred == 1
            assert not res.failures
            assert await versions() == [1, 2]
            out = tmp_path / "a.txt"
            await client.download_file(f"{url}/a.txt", out)
            assert out.read_bytes() == b"changed content\n"

    _run(main())


def test_ls_rm_and_a_name_synapse_refuses(service: Any, home: Path, tmp_path: Path) -> None:
    project = service.create_project("ls-rm")
    src = tmp_path / "src"
    for rel in ("a.txt", "m/deep/x.txt", "m/y.txt", "z/w.txt", "caf\u00e9.txt"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(rel.encode())
    url = f"syn://{project}"

    async def main() -> None:
        async with Client(_config()) as client:
            res = await client.sync_to(src, url)
            # Synapse refuses the name: that file fails, with why; the others go.
            assert res.files_transferred == 4
            assert [f.path.rsplit("/", 1)[-1] for f in res.failures] == ["caf\u00e9.txt"]
            assert "HTTP 400" in res.failures[0].error
            top = [i if isinstance(i, str) else i.key async for i in client.ls(url + "/")]
            assert top == ["a.txt", "m/", "z/"]  # each directory once: depth first
            deep = [i.key async for i in client.ls(url + "/m/", recursive=True)]
            assert sorted(deep) == ["m/deep/x.txt", "m/y.txt"]
            await client.rm(f"{url}/m/y.txt")
            await client.rm(f"{url}/m/", recursive=True)
            left = sorted([i.key async for i in client.ls(url + "/", recursive=True)])
            assert left == ["a.txt", "z/w.txt"]
            with pytest.raises(NotFound):
                await client.rm(f"{url}/m/y.txt")

    _run(main())


def test_a_copy_between_stores_needs_the_md5_first(
    service: Any, home: Path, tmp_path: Path
) -> None:
    """A remote copy into syn:// works for a file sent in one request (its MD5
    comes from the buffer); a larger one is refused with what to do instead."""
    project = service.create_project("copies")
    src = tmp_path / "src"
    src.mkdir()
    (src / "small.txt").write_bytes(b"small\n")
    (src / "big.bin").write_bytes(os.urandom(6 * MiB))
    config = _config(part_size=5 * MiB, multipart_threshold=5 * MiB)

    async def main() -> None:
        async with Client(config) as client:
            await client.sync_to(src, f"syn://{project}/a")
            res = await client.copy(f"syn://{project}/a/", f"syn://{project}/b/", recursive=True)
            assert res.files_transferred == 1
            assert [f.path.rsplit("/", 1)[-1] for f in res.failures] == ["big.bin"]
            assert "download it first" in res.failures[0].error
            out = tmp_path / "small.txt"
            await client.download_file(f"syn://{project}/b/small.txt", out)
            assert out.read_bytes() == b"small\n"

    _run(main())


# -- bad input and faults ------------------------------------------------------------


def test_unknown_entity_and_missing_file_are_named(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("missing")

    async def main() -> None:
        async with Client(_config()) as client:
            with pytest.raises(BucketNotFound, match=r"syn://syn99999999"):
                await client.sync_from("syn://syn99999999/x", tmp_path / "out")
            with pytest.raises(NotFound, match=rf"syn://{project}/nope/file.txt"):
                await client.download_file(f"syn://{project}/nope/file.txt", tmp_path / "f")

    _run(main())
    cli = _cli(["ls", "syn://syn99999999/"], tmp_path)
    assert cli.returncode != 0
    assert "syn://syn99999999" in cli.stderr
    assert "Traceback" not in cli.stderr


def test_refused_access_names_the_entity_and_what_to_check(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("denied")
    src = tmp_path / "src"
    _tree(src)

    async def main() -> None:
        async with Client(_config()) as client:
            assert not (await client.sync_to(src, f"syn://{project}")).failures
            service.deny(project)  # the user loses every permission on it
            with pytest.raises(PermissionDenied) as caught:
                await client.sync_from(f"syn://{project}", tmp_path / "out")
            text = str(caught.value)
            assert f"syn://{project}" in text
            assert "HTTP 403" in text
            assert "scopes" in text
            assert "sharing settings" in text

    _run(main())


def test_a_faulty_service_is_survived(service: Any, home: Path, tmp_path: Path) -> None:
    """5xx, resets before and after the service acted, cut answers: retried, and
    a retried create (folder, upload, entity) finds what the first one made."""
    from synxfer_servers.faultproxy import FaultProxy

    project = service.create_project("faulty")
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = _tree(src)
    upstream = service.repo_endpoint.rsplit("/repo/v1", 1)[0]
    # At most 5 faults, fewer than the 7 attempts: a file's put (8 calls to the
    # service, retried as a whole) always gets through; which calls fail varies.
    with FaultProxy(upstream, rate=0.3, seed=34, max_faults=5) as proxy:
        options = {
            "syn": {
                "repo_endpoint": f"{proxy.url}/repo/v1",
                "file_endpoint": f"{proxy.url}/file/v1",
            }
        }

        async def main() -> None:
            retry = RetryPolicy(attempts=7, initial_delay=0.01, max_delay=0.05)
            async with Client(TransferConfig(retry=retry), backend_options=options) as client:
                up = await client.sync_to(src, f"syn://{project}")
                assert not up.failures, up.failures
                down = await client.sync_from(f"syn://{project}", dst)
                assert not down.failures, down.failures

        _run(main())
        assert proxy.snapshot().faulted >= 3
    assert _read_tree(dst) == files


def test_bad_or_missing_token_is_a_setup_error(
    stock_moto: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(stock_moto, BUCKET, token="the-right-one") as svc:
        # SYNAPSE_AUTH_TOKEN is not the right one.
        point_home(tmp_path / "home", svc, monkeypatch, env_token=TOKEN)
        project = svc.create_project("guarded")
        src = tmp_path / "src"
        _tree(src)

        async def main() -> None:
            async with Client(_config()) as client:
                with pytest.raises(NoCredentials) as caught:
                    await client.sync_to(src, f"syn://{project}")
                text = str(caught.value)
                assert "HTTP 401" in text
                assert "SYNAPSE_AUTH_TOKEN" in text
                assert TOKEN not in text

        _run(main())
        cli = _cli(["sync", str(src), f"syn://{project}"], tmp_path)
        assert cli.returncode == 2, cli.stderr
        assert "SYNAPSE_AUTH_TOKEN" in cli.stderr
        assert TOKEN not in cli.stderr + cli.stdout
        monkeypatch.delenv("SYNAPSE_AUTH_TOKEN")
        cli = _cli(["ls", f"syn://{project}/"], tmp_path)
        assert cli.returncode == 2, cli.stderr
        assert "no Synapse access token" in cli.stderr
        assert "~/.synapseConfig" in cli.stderr


def test_throttling_is_survived_and_retry_after_honoured(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("throttled")
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = _tree(src)

    async def main() -> None:
        # One call: a 429 with Retry-After is waited out before the error is raised.
        backend = await _backend(project)
        waits: list[float] = []

        async def sleep(seconds: float) -> None:
            waits.append(seconds)

        backend.rest = SynapseRest(backend.settings, lambda: backend.http, sleep=sleep)
        backend.tree.rest = backend.rest
        service.throttle(1, retry_after=7)
        try:
            with pytest.raises(TransientError, match="HTTP 429") as caught:
                await backend.stat("a.txt")
        finally:
            await backend.aclose()
        assert waits == [7.0]
        assert caught.value.retry_after == 7.0  # type: ignore[attr-defined]

        # A whole sync through a throttled service.
        service.throttle(2, retry_after=1)
        async with Client(_config()) as client:
            res = await client.sync_to(src, f"syn://{project}")
            assert not res.failures
            await client.sync_from(f"syn://{project}", dst)

    before = service.stats().get("429", 0)
    _run(main())
    assert service.stats().get("429", 0) == before + 3
    assert _read_tree(dst) == files


def test_a_refused_part_is_sent_again_and_nothing_is_half_registered(
    service: Any, home: Path, tmp_path: Path
) -> None:
    project = service.create_project("refused")
    src = tmp_path / "src"
    src.mkdir()
    data = os.urandom(12 * MiB)
    (src / "big.bin").write_bytes(data)
    config = _config(part_size=5 * MiB, multipart_threshold=5 * MiB)

    async def main() -> None:
        async with Client(config) as client:
            service.reject_parts(1)  # one add-part answered ADD_FAILED: sent again
            res = await client.sync_to(src, f"syn://{project}/ok")
            assert not res.failures
            assert res.retries >= 1
            out = tmp_path / "back.bin"
            await client.download_file(f"syn://{project}/ok/big.bin", out)
            assert out.read_bytes() == data

            # Refused every time: the file fails, nothing is registered. (Other
            # bytes: the same request again would be the same, completed, upload.)
            service.reject_parts(100)
            (src / "big.bin").write_bytes(os.urandom(12 * MiB))
            try:
                res = await client.sync_to(src, f"syn://{project}/never")
            finally:
                service.reject_parts(0)
            assert len(res.failures) == 1
            failure = res.failures[0]
            assert "big.bin" in failure.path
            assert "refused part" in failure.error
            backend = await _backend(project)
            try:
                with pytest.raises(NotFound):
                    await backend.stat("never/big.bin")
            finally:
                await backend.aclose()

    _run(main())


def test_expired_urls_are_fetched_again(seaweed: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """SeaweedFS checks pre-signed URL expiry (stock moto does not): the
    service hands out URLs that lapsed; the client fetches them again."""
    from synxfer_servers.synapse import SynapseService

    if not hasattr(SynapseService, "expire_url_batches"):
        pytest.skip("this SynapseService cannot hand out expired URLs yet")
    with SynapseService(
        seaweed.endpoint_url,
        seaweed.bucket,
        access_key=seaweed.access_key,
        secret_key=seaweed.secret_key,
    ) as svc:
        point_home(tmp_path / "home", svc, monkeypatch, config_token=TOKEN)
        project = svc.create_project("expiring")
        src, dst = tmp_path / "src", tmp_path / "dst"
        src.mkdir()
        data = os.urandom(11 * MiB)
        (src / "f.bin").write_bytes(data)
        config = _config(part_size=5 * MiB, multipart_threshold=5 * MiB)

        async def main() -> None:
            async with Client(config) as client:
                svc.expire_url_batches(1)  # the first batch of part URLs has lapsed
                res = await client.sync_to(src, f"syn://{project}")
                assert not res.failures, res.failures
                assert svc.stats()["POST /file/multipart/{up}/presigned/url/batch"] >= 2
                svc.expire_url_batches(1)  # and the first download URL
                res = await client.sync_from(f"syn://{project}", dst)
                assert not res.failures, res.failures
                assert svc.stats()["POST /fileHandle/batch"] >= 2

        _run(main())
        assert (dst / "f.bin").read_bytes() == data


def test_an_interrupted_upload_resumes_on_the_service(
    service: Any, home: Path, tmp_path: Path
) -> None:
    """SIGINT halfway through a syn:// upload, then the same command again: the
    service still holds the parts added (the same request is the same upload),
    so the rerun sends only the rest; nothing was registered in between."""
    import signal

    add = "PUT /file/multipart/{up}/add/{part}"
    project = service.create_project("interrupted")
    src = tmp_path / "big.bin"
    data = os.urandom(30 * MiB)  # 6 parts of 5 MiB
    src.write_bytes(data)
    url = f"syn://{project}/in/big.bin"
    args = ["cp", str(src), url, "--part-size", "5MiB", "--max-threads", "2"]
    cmd = [sys.executable, "-m", "synxfer.cli.main", *args, "--state-dir", str(tmp_path / "st")]
    before = service.stats().get(add, 0)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = 600  # x 0.05 s
        while service.stats().get(add, 0) - before < 2 and proc.poll() is None and deadline:
            deadline -= 1
            time.sleep(0.05)
        service.throttle(10_000, retry_after=1)  # hold it mid-upload: every call 429s
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        service.throttle(0)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    added = service.stats().get(add, 0) - before
    assert 2 <= added < 6

    async def registered() -> bool:
        backend = await _backend(project)
        try:
            await backend.stat("in/big.bin")
        except NotFound:
            return False
        finally:
            await backend.aclose()
        return True

    assert not _run(registered())
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert service.stats().get(add, 0) - before == 6  # each part added once in all
    assert _run(registered())
    back = tmp_path / "back.bin"
    _run(_download(url, back))
    assert back.read_bytes() == data


async def _download(url: str, path: Path) -> None:
    async with Client(_config()) as client:
        await client.download_file(url, path)


# -- the token is never shown ----------------------------------------------------------


def _cli(args: list[str], cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "synxfer.cli.main", *args, *extra],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ),
        timeout=120,
        check=False,
    )


def test_the_token_is_never_printed_nor_stored(
    service: Any, home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = service.create_project("secret")
    src = tmp_path / "src"
    _tree(src, big=os.urandom(9 * 1024 * 1024))  # a multipart upload: a journal entry
    state = tmp_path / "state"
    caplog.set_level(logging.DEBUG)

    async def main() -> None:
        async with Client(_config(state_dir=state)) as client:
            res = await client.sync_to(src, f"syn://{project}/in")
            assert not res.failures
            backend = await _backend(project)
            try:
                shown = repr(backend) + repr(backend.settings) + repr(backend.rest)
                shown += repr(backend.syn)
            finally:
                await backend.aclose()
            assert TOKEN not in shown

    _run(main())
    assert TOKEN not in caplog.text
    out = tmp_path / "out"
    cli = _cli(
        ["sync", str(src), f"syn://{project}/cli", "--json", "-v", "--state-dir", str(state)],
        tmp_path,
    )
    assert cli.returncode == 0, cli.stderr
    cli2 = _cli(["sync", f"syn://{project}/cli", str(out), "--json", "-v"], tmp_path)
    assert cli2.returncode == 0, cli2.stderr
    for line in cli.stdout.splitlines():
        json.loads(line)  # --json is JSON lines
    printed = cli.stdout + cli.stderr + cli2.stdout + cli2.stderr
    assert printed
    assert TOKEN not in printed
    stored = [p for p in state.rglob("*") if p.is_file()]
    assert stored  # the journal is there, and holds no token
    for path in stored:
        assert TOKEN.encode() not in path.read_bytes(), path


def test_an_answer_that_echoes_the_token_does_not_carry_it_into_the_error() -> None:
    """A server (or a proxy's error page) that repeats the request's headers."""
    import http.server
    import threading

    class Echo(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.dumps({"reason": f"refused: {self.headers['Authorization']}"}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/repo/v1"
        backend = SynapseBackend("syn1", BackendOptions(extra={"repo_endpoint": base}))
        backend.rest.settings = dataclasses.replace(backend.settings, token=TOKEN)

        async def main() -> None:
            try:
                with pytest.raises(BackendError) as caught:
                    await backend.rest.call(
                        "POST", "repo", "/entity/child", body={}, url="syn://syn1/x", what="lookup"
                    )
            finally:
                await backend.aclose()
            text = str(caught.value)
            assert "refused: Bearer <token>" in text
            assert TOKEN not in text

        _run(main())
    finally:
        server.shutdown()
        server.server_close()


# -- the real synapseclient, both ways -------------------------------------------------


def test_a_tree_stored_by_synapseclient_is_synced_down_byte_exact(
    service: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, big_bytes: bytes
) -> None:
    import synapseutils
    from synapseclient.models import File

    home = point_home(tmp_path / "home", service, monkeypatch, config_token=TOKEN)
    syn = synapseclient_for(home)
    project = service.create_project("from-synapseclient")
    src = tmp_path / "src"
    files = _tree(src, big_bytes)
    # The models' File(...).store() for the top level, syncToSynapse for the rest.
    folder = syn.store(__import__("synapseclient").Folder("sub", parent=project))
    deeper = syn.store(__import__("synapseclient").Folder("deeper", parent=folder.id))
    for name in ("a.txt", "empty.dat", "odd name (1) +x,y's.txt"):
        File(path=str(src / name), parent_id=project).store(synapse_client=syn)
    manifest = tmp_path / "manifest.tsv"
    manifest.write_text(
        "path\tparent\n"
        f"{src / 'sub' / 'big.bin'}\t{folder.id}\n"
        f"{src / 'sub' / 'deeper' / 'data.csv'}\t{deeper.id}\n"
    )
    synapseutils.syncToSynapse(syn, str(manifest), sendMessages=False)

    dst = tmp_path / "dst"

    async def main() -> None:
        async with Client(_config()) as client:
            res = await client.sync_from(f"syn://{project}", dst)
            assert not res.failures, res.failures
            assert res.not_verified == 0

    _run(main())
    assert _read_tree(dst) == files


def test_a_tree_synced_up_by_synxfer_is_read_by_synapseclient(
    service: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, big_bytes: bytes
) -> None:
    import synapseutils
    from synapseclient.models import File

    home = point_home(tmp_path / "home", service, monkeypatch, config_token=TOKEN)
    project = service.create_project("to-synapseclient")
    src = tmp_path / "src"
    files = _tree(src, big_bytes)

    async def main() -> None:
        async with Client(_config()) as client:
            res = await client.sync_to(src, f"syn://{project}")
            assert not res.failures, res.failures

    _run(main())
    syn = synapseclient_for(home)
    dst = tmp_path / "dst"
    got = synapseutils.syncFromSynapse(syn, project, path=str(dst))
    assert len(got) == len(files)
    assert {
        p.relative_to(dst).as_posix(): p.read_bytes()
        for p in dst.rglob("*")
        if p.is_file() and p.name not in ("SYNAPSE_METADATA_MANIFEST.tsv", "manifest.csv")
    } == files
    # File(id).get() on the multipart one: synapseclient checks its MD5.
    big_id = next(e.id for e in got if e.name == "big.bin")
    one = File(id=big_id, path=str(tmp_path / "one")).get(synapse_client=syn)
    assert Path(one.path).read_bytes() == big_bytes
