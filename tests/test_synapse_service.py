"""The local Synapse-style service (synxfer_servers.synapse), proven with the
real synapseclient 4.14 against it, on SeaweedFS with auth on (so every
pre-signed URL's SigV4 signature and expiry are checked by the S3 server).

synapseclient stores a tree (synapseutils.syncToSynapse and the models'
File.store), with a 40 MiB multipart file, an empty file and odd names, and
a second client with an empty cache gets it all back byte-exact through the
pre-signed URLs (syncFromSynapse, File(id).get(), syn.get), its own MD5
checks passing. Faults the service makes on request: 429 with Retry-After,
URLs that expire mid-upload, a wrong token; an unknown route answers 501.
No test lets the client reach anything but 127.0.0.1 (a socket guard), and
OpenTelemetry is off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

synapseclient = pytest.importorskip("synapseclient")

from synxfer_servers.synapse import SynapseService  # noqa: E402

# synapseutils.syncToSynapse / syncFromSynapse and syn.get are deprecated in
# 4.14 (for removal in 5.0) but are what users run today: they are the proof.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

MiB = 1024 * 1024
FOLDER = "org.sagebionetworks.repo.model.Folder"
TOKEN = "syn-test-token-" + uuid.uuid4().hex  # never to be seen in a log

#: What synapseclient may read from the environment; none may point elsewhere.
_SYNAPSE_ENV = ("SYNAPSE_AUTH_TOKEN", "SYNAPSE_PROFILE", "SYNAPSE_TOKEN_AWS_SSM_PARAMETER_NAME")


@pytest.fixture(scope="module", autouse=True)
def _offline_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No telemetry, no real account, no connection off 127.0.0.1."""
    with pytest.MonkeyPatch.context() as mp:
        for name in _SYNAPSE_ENV:
            mp.delenv(name, raising=False)
        for name in [n for n in os.environ if n.startswith("OTEL_")]:
            mp.delenv(name)
        mp.setenv("OTEL_SDK_DISABLED", "true")
        mp.setenv("OTEL_TRACES_EXPORTER", "none")
        mp.setenv("OTEL_METRICS_EXPORTER", "none")
        mp.setenv("OTEL_LOGS_EXPORTER", "none")
        mp.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        connect = socket.socket.connect

        def loopback_only(self: socket.socket, address: Any) -> Any:
            if self.family in (socket.AF_INET, socket.AF_INET6):
                host = address[0]
                assert host in ("127.0.0.1", "::1", "localhost"), f"connection to {address}"
            return connect(self, address)

        mp.setattr(socket.socket, "connect", loopback_only)
        yield


@pytest.fixture(scope="module")
def s3(seaweed: Any) -> dict[str, str]:
    """SeaweedFS (auth on) and a fresh bucket for the module's service."""
    import botocore.session

    bucket = f"syn-{uuid.uuid4().hex[:12]}"
    client = botocore.session.Session().create_client(
        "s3",
        endpoint_url=seaweed.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=seaweed.access_key,
        aws_secret_access_key=seaweed.secret_key,
        aws_session_token=None,
    )
    client.create_bucket(Bucket=bucket)
    return {
        "endpoint": seaweed.endpoint_url,
        "bucket": bucket,
        "access_key": seaweed.access_key,
        "secret_key": seaweed.secret_key,
    }


@pytest.fixture(scope="module")
def service(s3: dict[str, str]) -> Iterator[SynapseService]:
    with SynapseService(
        s3["endpoint"],
        s3["bucket"],
        access_key=s3["access_key"],
        secret_key=s3["secret_key"],
    ) as svc:
        yield svc


def _client(svc: SynapseService, cache: Path, token: str = TOKEN) -> Any:
    syn = synapseclient.Synapse(
        repoEndpoint=svc.repo_endpoint,
        authEndpoint=svc.auth_endpoint,
        fileHandleEndpoint=svc.file_endpoint,
        skip_checks=True,
        cache_root_dir=str(cache),
        silent=True,
        # Not the default (~/.synapseConfig of the HOME synapseclient was
        # imported under): nothing of a real account may leak in.
        configPath=str(cache.parent / "absent.synapseConfig"),
    )
    syn.login(authToken=token, silent=True)
    return syn


def _config_client(svc: SynapseService, home: Path) -> Any:
    """A client configured as users configure it: ~/.synapseConfig with the
    token and the [endpoints] section, login() without arguments."""
    config = home / ".synapseConfig"
    config.write_text(
        f"[authentication]\nauthtoken = {TOKEN}\n\n"
        f"[endpoints]\nrepoEndpoint = {svc.repo_endpoint}\n"
        f"authEndpoint = {svc.auth_endpoint}\nfileHandleEndpoint = {svc.file_endpoint}\n\n"
        f"[cache]\nlocation = {home / 'cache'}\n"
    )
    syn = synapseclient.Synapse(configPath=str(config), skip_checks=True, silent=True)
    syn.login(silent=True)
    assert syn.repoEndpoint == svc.repo_endpoint
    return syn


def _write(path: Path, size: int, seed: int) -> bytes:
    data = random.Random(seed).randbytes(size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def test_synapseclient_stores_a_tree_and_gets_it_back(
    service: SynapseService, tmp_path: Path
) -> None:
    import synapseutils
    from synapseclient.models import File

    project = service.create_project(f"tree {uuid.uuid4().hex[:8]}")
    src = tmp_path / "src"
    files = {
        "a.txt": 1000,
        "sub/odd name (v2)+x_y-z.csv": 3000,
        "sub/deeper/big.bin": 40 * MiB + 123,  # 6 parts of synapseclient's 8 MiB
    }
    content = {rel: _write(src / rel, size, seed) for seed, (rel, size) in enumerate(files.items())}
    uploader = _client(service, tmp_path / "cache-up")
    manifest = tmp_path / "manifest.tsv"
    synapseutils.generate_sync_manifest(uploader, str(src), project, str(manifest))
    before = service.stats()
    synapseutils.syncToSynapse(uploader, str(manifest), sendMessages=False)
    uploaded = _delta(before, service.stats())
    assert uploaded["POST /file/multipart"] == 3
    assert uploaded["PUT /file/multipart/{up}/add/{part}"] == 1 + 1 + 6
    assert uploaded["PUT /file/multipart/{up}/complete"] == 3
    # syncToSynapse refuses empty files; the models' File.store() takes one.
    (src / "sub" / "empty.bin").write_bytes(b"")
    content["sub/empty.bin"] = b""
    sub = uploader.findEntityId("sub", project)
    empty = File(path=str(src / "sub" / "empty.bin"), parent_id=sub).store(synapse_client=uploader)
    assert empty.data_file_handle_id

    # Another user's machine: configured by ~/.synapseConfig, an empty cache,
    # so every byte comes back through the service's pre-signed URLs.
    home = tmp_path / "home2"
    home.mkdir()
    downloader = _config_client(service, home)
    dst = tmp_path / "dst"
    before = service.stats()
    entities = synapseutils.syncFromSynapse(downloader, project, path=str(dst))
    assert len(entities) == 4
    for rel, data in content.items():
        got = (dst / rel).read_bytes()
        assert got == data, rel
    for entity in entities:
        handle = entity["_file_handle"]
        assert handle["contentMd5"] == _md5(content[os.path.relpath(entity.path, dst)])
    downloaded = _delta(before, service.stats())
    assert downloaded["POST /fileHandle/batch"] >= 4
    assert "501" not in downloaded

    # File(id).get() and syn.get() with a third, empty cache.
    third = _client(service, tmp_path / "cache-3")
    odd_id = third.findEntityId("odd name (v2)+x_y-z.csv", sub)
    odd = File(id=odd_id, path=str(tmp_path / "get")).get(synapse_client=third)
    assert Path(odd.path).read_bytes() == content["sub/odd name (v2)+x_y-z.csv"]
    assert odd.file_handle.content_md5 == _md5(content["sub/odd name (v2)+x_y-z.csv"])
    got_empty = third.get(empty.id, downloadLocation=str(tmp_path / "get2"))
    assert Path(got_empty.path).read_bytes() == b""
    assert "501" not in service.stats()
    # Telemetry stayed off: no SDK tracer provider was installed.
    from opentelemetry import trace

    assert type(trace.get_tracer_provider()).__name__ in (
        "ProxyTracerProvider",
        "NoOpTracerProvider",
    )


def test_a_changed_file_becomes_a_new_version(service: SynapseService, tmp_path: Path) -> None:
    from synapseclient.models import Activity, File, UsedURL

    project = service.create_project(f"versions {uuid.uuid4().hex[:8]}")
    syn = _client(service, tmp_path / "cache")
    path = tmp_path / "data.csv"
    first = _write(path, 2000, seed=1)
    made = Activity(name="made", used=[UsedURL(name="source", url="https://example.org/d")])
    v1 = File(
        path=str(path), parent_id=project, annotations={"site": ["a", "b"], "n": [3]}, activity=made
    )
    v1 = v1.store(synapse_client=syn)
    # The edit, as another copy of the file: synapseclient's cache keys a
    # path by its mtime in seconds, so a rewrite within the second looks unchanged.
    path = tmp_path / "edited" / "data.csv"
    second = _write(path, 2100, seed=2)
    v2 = File(path=str(path), parent_id=project).store(synapse_client=syn)
    assert (v1.id, v1.version_number, v2.id, v2.version_number) == (v1.id, 1, v1.id, 2)
    other = _client(service, tmp_path / "cache-2")
    old = File(id=v1.id, version_number=1, path=str(tmp_path / "old")).get(synapse_client=other)
    new = File(id=v1.id, path=str(tmp_path / "new")).get(synapse_client=other)
    assert Path(old.path).read_bytes() == first
    assert Path(new.path).read_bytes() == second
    assert old.annotations == {"site": ["a", "b"], "n": [3]}
    # Provenance belongs to the version it was stored with.
    first_activity = Activity.from_parent(parent=f"{v1.id}.1", synapse_client=other)
    assert first_activity is not None
    assert (first_activity.name, first_activity.used[0].url) == ("made", "https://example.org/d")
    assert Activity.from_parent(parent=f"{v1.id}.2", synapse_client=other) is None
    # Storing the same bytes again makes no new version.
    v2_again = File(path=str(path), parent_id=project).store(synapse_client=syn)
    assert v2_again.version_number == 2


def test_children_come_in_pages(service: SynapseService, tmp_path: Path) -> None:
    project = service.create_project(f"pages {uuid.uuid4().hex[:8]}")
    names = {f"folder {i:03d}" for i in range(60)}
    for name in sorted(names):  # by REST: synapseclient spends ~0.25 s a store
        folder = {"name": name, "parentId": project, "concreteType": FOLDER}
        assert _http("POST", service.repo_endpoint + "/entity", folder)[0] == 200
    syn = _client(service, tmp_path / "cache")
    before = service.stats()
    children = list(syn.getChildren(project))
    assert {c["name"] for c in children} == names
    assert _delta(before, service.stats())["POST /entity/children"] == 2


def test_a_throttling_and_failing_service_is_survived(
    service: SynapseService, tmp_path: Path
) -> None:
    from synapseclient.models import File

    project = service.create_project(f"throttle {uuid.uuid4().hex[:8]}")
    syn = _client(service, tmp_path / "cache")
    path = tmp_path / "t.bin"
    data = _write(path, 5000, seed=3)
    before = service.stats()
    service.throttle(1, retry_after=1)
    service.fail(1, status=503)
    stored = File(path=str(path), parent_id=project).store(synapse_client=syn)
    faults = _delta(before, service.stats())
    assert (faults["429"], faults["503"]) == (1, 1)
    other = _client(service, tmp_path / "cache-2")
    got = File(id=stored.id, path=str(tmp_path / "out")).get(synapse_client=other)
    assert Path(got.path).read_bytes() == data


def test_throttled_answer_says_when_to_retry(service: SynapseService) -> None:
    service.throttle(1, retry_after=7)
    status, headers, body = _http("GET", service.repo_endpoint + "/userProfile")
    assert status == 429
    assert headers["Retry-After"] == "7"
    assert "throttl" in body["reason"]
    assert _http("GET", service.repo_endpoint + "/userProfile")[0] == 200


def test_connections_stay_open_across_requests(service: SynapseService) -> None:
    """Synapse keeps a client's connection open; a service that closed each one
    would charge every client a connection (a TLS handshake) per request."""
    import http.client

    port = int(service.repo_endpoint.split(":")[2].split("/")[0])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        local_ports = set()
        for _ in range(3):
            conn.request(
                "GET", "/repo/v1/userProfile", headers={"Authorization": f"Bearer {TOKEN}"}
            )
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            assert (response.getheader("Connection") or "").lower() != "close"
            assert conn.sock is not None
            local_ports.add(conn.sock.getsockname()[1])
        assert len(local_ports) == 1  # one connection served all three
    finally:
        conn.close()


def test_urls_that_expire_mid_transfer_are_fetched_again(
    service: SynapseService, tmp_path: Path
) -> None:
    """The first batch of part URLs reaches synapseclient expired: SeaweedFS
    answers its PUT 403 'Request has expired', and the client fetches the
    batch again (once) and finishes. Same for its download URL."""
    from synapseclient.models import File

    project = service.create_project(f"expiry {uuid.uuid4().hex[:8]}")
    syn = _client(service, tmp_path / "cache")
    path = tmp_path / "two-parts.bin"
    data = _write(path, 8 * MiB + 1000, seed=4)
    before = service.stats()
    service.expire_url_batches(1)
    stored = File(path=str(path), parent_id=project).store(synapse_client=syn)
    uploaded = _delta(before, service.stats())
    # The second batch was asked for only because S3 refused the first.
    assert uploaded["POST /file/multipart/{up}/presigned/url/batch"] == 2
    other = _client(service, tmp_path / "cache-2")
    before = service.stats()
    service.expire_url_batches(1)
    got = File(id=stored.id, path=str(tmp_path / "out")).get(synapse_client=other)
    assert Path(got.path).read_bytes() == data
    assert _delta(before, service.stats())["POST /fileHandle/batch"] >= 2


def test_a_rejected_part_is_sent_again_and_a_denied_entity_is_refused(
    service: SynapseService, tmp_path: Path
) -> None:
    from synapseclient.core.exceptions import SynapseHTTPError
    from synapseclient.models import File

    project = service.create_project(f"reject {uuid.uuid4().hex[:8]}")
    syn = _client(service, tmp_path / "cache")
    path = tmp_path / "r.bin"
    _write(path, 4000, seed=7)
    before = service.stats()
    service.reject_parts(1)
    stored = File(path=str(path), parent_id=project).store(synapse_client=syn)
    # synapseclient restarts the upload after an ADD_FAILED part.
    sent = _delta(before, service.stats())
    assert sent["PUT /file/multipart/{up}/add/{part}"] == 2
    assert sent["PUT /file/multipart/{up}/complete"] == 1
    service.deny(project)
    other = _client(service, tmp_path / "cache-2")
    with pytest.raises(SynapseHTTPError, match=rf"403.*{stored.id}"):
        File(id=stored.id, path=str(tmp_path / "out")).get(synapse_client=other)
    request = {
        "requestedFiles": [
            {"fileHandleId": stored.data_file_handle_id, "associateObjectId": stored.id}
        ],
        "includePreSignedURLs": True,
    }
    _, _, answered = _http("POST", service.file_endpoint + "/fileHandle/batch", request)
    assert answered["requestedFiles"][0]["failureCode"] == "UNAUTHORIZED"


def test_an_unknown_route_answers_501_naming_it(service: SynapseService, tmp_path: Path) -> None:
    from synapseclient.core.exceptions import SynapseHTTPError

    status, _, body = _http("POST", service.repo_endpoint + "/evaluation/9/submission")
    assert status == 501
    assert "POST /repo/v1/evaluation/9/submission" in body["reason"]
    syn = _client(service, tmp_path / "cache")
    with pytest.raises(SynapseHTTPError, match=r"(?s)501.*GET /repo/v1/team/42"):
        syn.restGET("/team/42")


# -- the multipart protocol, spoken directly ---------------------------------------


def _http(
    method: str, url: str, body: Any = None, token: str | None = TOKEN, raw: bytes | None = None
) -> tuple[int, dict[str, str], Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, headers, text = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        status, headers, text = exc.code, dict(exc.headers), exc.read()
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = text.decode()
    return status, headers, parsed


def test_add_part_checks_the_md5_against_the_stored_part_and_resumes(
    service: SynapseService,
) -> None:
    part = 5 * MiB
    data = random.Random(6).randbytes(part + 10)
    request = {
        "concreteType": "org.sagebionetworks.repo.model.file.MultipartUploadRequest",
        "contentMD5Hex": _md5(data),
        "fileName": f"raw-{uuid.uuid4().hex[:6]}.bin",
        "fileSizeBytes": len(data),
        "partSizeBytes": part,
        "contentType": "application/octet-stream",
        "storageLocationId": 1,
    }
    files = service.file_endpoint
    status, _, started = _http("POST", files + "/file/multipart?forceRestart=false", request)
    assert status == 200
    assert started["partsState"] == "00"
    upload = started["uploadId"]
    service.url_lifetime = 37
    try:
        _, _, batch = _http(
            "POST",
            f"{files}/file/multipart/{upload}/presigned/url/batch",
            {"uploadId": upload, "partNumbers": [1, 2]},
        )
    finally:
        service.url_lifetime = 900.0
    urls = {p["partNumber"]: p["uploadPresignedUrl"] for p in batch["partPresignedUrls"]}
    assert "X-Amz-Signature=" in urls[1]
    assert "X-Amz-Expires=37&" in urls[2] or urls[2].endswith("X-Amz-Expires=37")
    for number, chunk in ((1, data[:part]), (2, data[part:])):
        put = urllib.request.Request(urls[number], data=chunk, method="PUT")
        with urllib.request.urlopen(put, timeout=30) as response:
            assert response.status == 200
    # A part MD5 that does not match the stored part is refused...
    wrong = _md5(b"not the part")
    _, _, added = _http("PUT", f"{files}/file/multipart/{upload}/add/1?partMD5Hex={wrong}")
    assert added["addPartState"] == "ADD_FAILED"
    assert wrong in added["errorMessage"]
    # ... and the right one accepted.
    right = _md5(data[:part])
    _, _, added = _http("PUT", f"{files}/file/multipart/{upload}/add/1?partMD5Hex={right}")
    assert added["addPartState"] == "ADD_SUCCESS"
    # The same request again resumes the same upload, part 1 done.
    _, _, again = _http("POST", files + "/file/multipart?forceRestart=false", request)
    assert (again["uploadId"], again["partsState"]) == (upload, "10")
    status, _, refused = _http("PUT", f"{files}/file/multipart/{upload}/complete")
    assert status == 400
    assert "[2]" in refused["reason"]
    _http("PUT", f"{files}/file/multipart/{upload}/add/2?partMD5Hex={_md5(data[part:])}")
    _, _, done = _http("PUT", f"{files}/file/multipart/{upload}/complete")
    assert done["state"] == "COMPLETED"
    handle = _http("GET", f"{files}/fileHandle/{done['resultFileHandleId']}")[2]
    assert (handle["contentSize"], handle["contentMd5"]) == (len(data), _md5(data))
    # forceRestart starts afresh.
    _, _, restarted = _http("POST", files + "/file/multipart?forceRestart=true", request)
    assert restarted["uploadId"] != upload
    assert restarted["partsState"] == "00"
    # Restarting an unfinished upload drops its S3 upload: its URLs lead nowhere.
    _, _, batch = _http(
        "POST",
        f"{files}/file/multipart/{restarted['uploadId']}/presigned/url/batch",
        {"uploadId": restarted["uploadId"], "partNumbers": [1]},
    )
    _http("POST", files + "/file/multipart?forceRestart=true", request)
    stale = urllib.request.Request(
        batch["partPresignedUrls"][0]["uploadPresignedUrl"], data=data[:part], method="PUT"
    )
    with pytest.raises(urllib.error.HTTPError) as gone:
        urllib.request.urlopen(stale, timeout=30)
    assert gone.value.code == 404

    # The handle becomes a FileEntity; its bytes come back by every route.
    repo = service.repo_endpoint
    project = service.create_project(f"raw {uuid.uuid4().hex[:8]}")
    entity = {
        "name": request["fileName"],
        "parentId": project,
        "concreteType": "org.sagebionetworks.repo.model.FileEntity",
        "dataFileHandleId": done["resultFileHandleId"],
    }
    status, _, created = _http("POST", repo + "/entity", entity)
    assert status == 200
    syn_id, handle_id = created["id"], done["resultFileHandleId"]
    status, _, url = _http("GET", f"{repo}/entity/{syn_id}/file?redirect=false")
    assert status == 200
    assert "X-Amz-Expires=" in url
    for route in (
        f"{repo}/entity/{syn_id}/file",  # 307 to the pre-signed URL, followed
        f"{repo}/entity/{syn_id}/version/1/file",
        f"{files}/file/{handle_id}?fileAssociateType=FileEntity&fileAssociateId={syn_id}",
    ):
        with urllib.request.urlopen(_authorized(route), timeout=30) as response:
            assert response.read() == data, route
    batch_request = {
        "includeFileHandles": True,
        "includePreSignedURLs": True,
        "requestedFiles": [
            {"fileHandleId": handle_id, "associateObjectId": syn_id},
            {"fileHandleId": handle_id, "associateObjectId": project},
            {"fileHandleId": "999999999", "associateObjectId": syn_id},
        ],
    }
    _, _, answered = _http("POST", files + "/fileHandle/batch", batch_request)
    ok, foreign, missing = answered["requestedFiles"]
    assert ok["fileHandle"]["contentMd5"] == _md5(data)
    with urllib.request.urlopen(ok["preSignedURL"], timeout=30) as response:
        assert response.read() == data
    assert (foreign["failureCode"], missing["failureCode"]) == ("UNAUTHORIZED", "NOT_FOUND")
    assert "preSignedURL" not in foreign


def _authorized(url: str) -> urllib.request.Request:
    request = urllib.request.Request(url)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    return request


def test_entity_rules_as_synapse_has_them(service: SynapseService) -> None:
    repo = service.repo_endpoint
    project = service.create_project(f"rules {uuid.uuid4().hex[:8]}")
    folder = {"name": "a", "parentId": project, "concreteType": FOLDER}
    status, _, created = _http("POST", repo + "/entity", folder)
    assert status == 200
    # Names are unique under a parent, and restricted to Synapse's characters.
    status, _, body = _http("POST", repo + "/entity", folder)
    assert (status, "already exists" in body["reason"]) == (409, True)
    status, _, body = _http("POST", repo + "/entity", {**folder, "name": "a/b"})
    assert (status, "may only contain" in body["reason"]) == (400, True)
    # An update with a stale etag is refused (412), a fresh one accepted.
    stale = {**created, "name": "renamed"}
    assert _http("PUT", f"{repo}/entity/{created['id']}", stale)[0] == 200
    assert _http("PUT", f"{repo}/entity/{created['id']}", stale)[0] == 412
    status, _, body = _http("GET", repo + "/entity/syn999999999")
    assert (status, "syn999999999" in body["reason"]) == (404, True)
    lookup = {"parentId": project, "entityName": "renamed"}
    assert _http("POST", repo + "/entity/child", lookup)[2] == {"id": created["id"]}
    assert _http("DELETE", f"{repo}/entity/{project}")[0] == 204
    assert _http("GET", f"{repo}/entity/{created['id']}")[0] == 404


# -- auth and the command line -----------------------------------------------------


def test_a_wrong_token_is_refused_and_no_token_is_logged(
    s3: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from synapseclient.core.exceptions import SynapseAuthenticationError, SynapseHTTPError

    caplog.set_level(logging.DEBUG)
    wrong = "wrong-token-" + uuid.uuid4().hex
    with SynapseService(
        s3["endpoint"],
        s3["bucket"],
        access_key=s3["access_key"],
        secret_key=s3["secret_key"],
        token=TOKEN,
    ) as svc:
        assert TOKEN not in repr(svc)
        status, _, body = _http("GET", svc.repo_endpoint + "/userProfile", token=wrong)
        assert status == 401
        assert wrong not in json.dumps(body)
        assert _http("GET", svc.repo_endpoint + "/userProfile", token=None)[0] == 401
        with pytest.raises(SynapseAuthenticationError) as refused:
            _client(svc, tmp_path / "cache", token=wrong)
        assert isinstance(refused.value.__cause__, SynapseHTTPError)
        assert "401" in str(refused.value.__cause__)
        syn = _client(svc, tmp_path / "cache")
        assert syn.credentials.username == svc.user_name
        assert svc.stats()["401"] >= 2
    assert "/userProfile -> 401" in caplog.text
    assert TOKEN not in caplog.text
    assert wrong not in caplog.text


def test_command_line_refuses_a_missing_bucket(
    s3: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from synxfer_servers.__main__ import main

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3["secret_key"])
    argv = ["synapse", "--s3", s3["endpoint"], "--bucket", "no-such-bucket"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "bucket 'no-such-bucket' does not exist" in err
    assert "create it first" in err


def test_command_line_service(s3: dict[str, str]) -> None:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": s3["access_key"],
        "AWS_SECRET_ACCESS_KEY": s3["secret_key"],
    }
    env.pop("AWS_SESSION_TOKEN", None)
    command = [sys.executable, "-m", "synxfer_servers", "synapse", "--s3", s3["endpoint"]]
    proc = subprocess.Popen(
        [*command, "--bucket", s3["bucket"], "--token", TOKEN, "--url-lifetime", "60"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        banner = [proc.stdout.readline() for _ in range(4)]
        endpoints = dict(
            m.groups() for line in banner if (m := re.search(r"(\w+Endpoint)=(\S+)", line))
        )
        assert set(endpoints) == {"repoEndpoint", "authEndpoint", "fileHandleEndpoint"}
        repo = endpoints["repoEndpoint"]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/repo/v1", repo)
        assert endpoints["fileHandleEndpoint"] == repo.replace("/repo/", "/file/")
        assert _http("GET", repo + "/userProfile", token="nope")[0] == 401
        assert _http("GET", repo + "/userProfile")[0] == 200
        assert _http("GET", repo + "/no/such/route")[0] == 501
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "GET /repo/v1/userProfile -> 401" in err
    assert TOKEN not in "".join(banner) + out + err
