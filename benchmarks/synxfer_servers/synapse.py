"""A local Synapse-style REST service on 127.0.0.1, backed by a real S3 server.

Synapse (and Terra/DRS, Gen3 ...) never gives a client storage credentials: a
REST service registers files and hands out pre-signed URLs. This module is the
subset of Synapse's public REST API that the real ``synapseclient`` (4.14)
uses to store and get files and folders, so that synxfer's ``syn://`` path
and synapseclient can be tested against the same thing, both ways, on this
machine:

* auth: a bearer token (any, unless ``token=`` is given), ``GET /userProfile``;
* entities: Project / Folder / FileEntity create, get, update (``newVersion``;
  a handle of another MD5 makes a new version by itself, one of the same MD5
  does not), delete, versions (list, get, delete one), ``/entity/child``
  lookup, ``/entity/children`` pages, ``bundle2`` (read, create and update:
  an entity with its annotations in one call), ``annotations2`` (checked as
  Synapse checks them), ``type``,
  ``path``, ``permissions``, ``benefactor``, ``accessRequirement``, and
  provenance (``/activity``, ``generatedBy``);
* uploads: upload destination, multipart upload (``POST /file/multipart``,
  batches of pre-signed part URLs, add-part with the part's MD5 checked
  against the part S3 stored, complete, ``partsState`` for server-side resume;
  the same request by the same user resumes the same upload, as Synapse does);
* downloads: file handles, ``/fileHandle/batch`` with pre-signed URLs,
  ``/entity/{id}/file`` and ``/file/{id}`` (redirect or not).

Bytes never pass through the service: parts go to, and downloads come from,
the S3 server (stock moto or SeaweedFS) through real SigV4 pre-signed URLs
that expire after :attr:`SynapseService.url_lifetime` seconds -- moto does
not check expiry, SeaweedFS with auth on does. Any other request answers
``501`` naming its method and path, so a gap shows instead of hiding.

Faults on request, so that clients' error paths can be reached on a stock
S3 server: :meth:`~SynapseService.throttle` (429 with ``Retry-After``),
:meth:`~SynapseService.fail` (5xx), :meth:`~SynapseService.expire_url_batches`
(URLs that expired before the client uses them),
:meth:`~SynapseService.reject_parts` (``ADD_FAILED``),
:meth:`~SynapseService.deny` (403); :attr:`~SynapseService.url_lifetime` is
settable. :meth:`~SynapseService.stats` counts requests by route.

State lives in memory, behind one lock. The token is never logged (the log
has method, path and status only). Requests and answers are werkzeug's
(which moto already brings); the server is cheroot's, which keeps
connections open as Synapse does. Run it by hand with ``python -m
synxfer_servers synapse --s3 URL --bucket B``.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import hashlib
import json
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from .s3 import HOST

if TYPE_CHECKING:
    import ssl

    from cheroot.ssl import Adapter
    from cheroot.wsgi import Server
    from werkzeug.wrappers import Request, Response

__all__ = ["SynapseService", "log"]

log = logging.getLogger("synxfer_servers.synapse")

#: Worker threads: a kept-open connection waits in cheroot's selector, not in
#: a thread, so these bound requests being answered at once, not clients.
_THREADS = 32
#: The listen backlog (cheroot's default of 5 refuses bursts of new connections).
_BACKLOG = 256

#: Synapse's default storage location (S3, Synapse-managed).
STORAGE_LOCATION_ID = 1
#: The parent of every Project in Synapse.
ROOT_ID = 4489
#: Synapse's multipart limits.
MIN_PART_SIZE = 5 * 1024 * 1024
MAX_PARTS = 10_000
#: Children per ``/entity/children`` page, so that paging is exercised.
CHILDREN_PAGE = 50

_REPO = "org.sagebionetworks.repo.model."
PROJECT = _REPO + "Project"
FOLDER = _REPO + "Folder"
FILE = _REPO + "FileEntity"
#: A Link entity (``linksTo``: a Reference to another entity), so that clients
#: can meet an entity that is neither a container nor a file.
LINK = _REPO + "Link"
S3_FILE_HANDLE = _REPO + "file.S3FileHandle"
_KINDS = {PROJECT: "project", FOLDER: "folder", FILE: "file", LINK: "link"}
#: Entity names Synapse accepts: ModelConstants.VALID_ENTITY_NAME_REGEX of
#: Synapse-Repository-Services, plus the apostrophe its REST docs now allow.
_NAME = re.compile(r"^[a-zA-Z0-9,_. \-+()']{1,256}$")
_NAME_RULE = (
    "Entity names may only contain: letters, numbers, spaces, underscores, hyphens, "
    "periods, plus signs, apostrophes, and parentheses"
)
#: Annotation names and limits: AnnotationsV2Utils of Synapse-Repository-Services.
_ANNOTATION_NAME = re.compile(r"[a-zA-Z0-9,_.]+")
_MAX_ANNOTATION_KEYS = 100
_MAX_ANNOTATION_VALUES = 100
_ANNOTATION_TYPES = frozenset({"STRING", "LONG", "DOUBLE", "BOOLEAN", "TIMESTAMP_MS"})


def _now() -> str:
    now = datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _etag() -> str:
    return str(uuid.uuid4())


class _HttpError(Exception):
    """An error answer: Synapse sends ``{"reason": ...}`` with the status."""

    def __init__(self, status: int, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers or {}


def _syn_id(value: Any) -> int:
    text = str(value).strip().lower()
    text = text.split(".", 1)[0]
    if text.startswith("syn"):
        text = text[3:]
    if not text.isdigit():
        raise _HttpError(400, f"Invalid Synapse ID: {value!r}")
    return int(text)


@dataclasses.dataclass
class _Entity:
    id: int
    kind: str  # project | folder | file
    parent: int
    #: The entity's JSON at each version (folders and projects have one).
    versions: dict[int, dict[str, Any]]
    annotations: dict[int, dict[str, Any]]
    current: int = 1
    #: version -> the id of the Activity that generated it (provenance).
    generated_by: dict[int, str] = dataclasses.field(default_factory=dict)

    @property
    def syn(self) -> str:
        return f"syn{self.id}"

    @property
    def body(self) -> dict[str, Any]:
        return self.versions[self.current]

    @property
    def name(self) -> str:
        return str(self.body["name"])


@dataclasses.dataclass
class _Upload:
    id: str
    request: dict[str, Any]
    key: str
    s3_upload_id: str
    part_size: int
    #: The MD5 (hex) of each added part, None until added.
    parts: list[str | None]
    started_on: str
    handle_id: str | None = None
    #: The size of each added part, as stored.
    sizes: dict[int, int] = dataclasses.field(default_factory=dict)
    #: Held while completing, so that two completes make one file handle.
    completing: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def parts_state(self) -> str:
        return "".join("0" if md5 is None else "1" for md5 in self.parts)

    def status(self, user: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "uploadId": self.id,
            "startedBy": user,
            "startedOn": self.started_on,
            "updatedOn": _now(),
            "partsState": self.parts_state,
            "state": "COMPLETED" if self.handle_id else "UPLOADING",
        }
        if self.handle_id:
            body["resultFileHandleId"] = self.handle_id
        return body


Handler = Callable[["Request", "re.Match[str]"], Any]


@dataclasses.dataclass(frozen=True)
class _Route:
    service: str  # repo | auth | file
    method: str
    pattern: re.Pattern[str]
    name: str
    handler: Handler


class SynapseService:
    """The service in a thread of this process, on 127.0.0.1 and a free port::

        with SynapseService(s3_url, "bucket", access_key=..., secret_key=...) as svc:
            project = svc.create_project("p")
            Synapse(repoEndpoint=svc.repo_endpoint, authEndpoint=svc.auth_endpoint,
                    fileHandleEndpoint=svc.file_endpoint, skip_checks=True)

    ``token``: the only bearer token accepted (default: any). ``url_lifetime``
    (settable while running): seconds a pre-signed URL stays valid.
    ``ssl_context``: serve HTTPS with it (its certificate chain loaded), as
    the real Synapse does; the endpoints are then ``https://``. The pre-signed
    URLs' scheme is the S3 endpoint's, whose CA botocore finds in
    ``AWS_CA_BUNDLE``.
    """

    def __init__(
        self,
        s3_endpoint: str,
        bucket: str,
        *,
        access_key: str,
        secret_key: str,
        region: str = "us-east-1",
        token: str | None = None,
        url_lifetime: float = 900.0,
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.s3_endpoint = s3_endpoint
        self.ssl_context = ssl_context
        self.bucket = bucket
        self.region = region
        self.url_lifetime = url_lifetime
        self.port = port
        self._access_key = access_key
        self._secret_key = secret_key
        self._token = token
        self._lock = threading.RLock()
        self._stats: collections.Counter[str] = collections.Counter()
        self._throttle_left = 0
        self._retry_after = 1
        self._expire_left = 0
        self._fail_left = 0
        self._fail_status = 503
        self._reject_left = 0
        self._denied: set[int] = set()
        self._next_id = 1000
        self._entities: dict[int, _Entity] = {}
        #: parent id -> {child name: child id}: lookups and listings without a scan.
        self._names: dict[int, dict[str, int]] = {}
        self._handles: dict[str, dict[str, Any]] = {}
        self._activities: dict[str, dict[str, Any]] = {}
        self._uploads: dict[str, _Upload] = {}
        self._upload_by_request: dict[str, str] = {}
        self._s3: Any = None
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self.user_id = "3350001"
        self.user_name = "synxfer-tester"
        self._routes = self._make_routes()

    # -- the Python API ---------------------------------------------------------

    def __repr__(self) -> str:
        # Never the token or the S3 secret.
        return f"SynapseService(repo={self._base('repo')!r}, s3={self.s3_endpoint!r})"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        # cheroot, not werkzeug's development server: werkzeug closes every
        # connection after one answer, and the real service keeps them open,
        # so a client would pay a TCP connection (a TLS handshake over HTTPS)
        # per request here that it does not pay against Synapse.
        from cheroot import wsgi

        self._s3 = self._make_s3_client()
        self._check_bucket()
        server = wsgi.Server(
            (HOST, self.port),
            self._wsgi,
            numthreads=_THREADS,
            server_name="synapse-service",
            request_queue_size=_BACKLOG,
        )
        if self.ssl_context is not None:
            server.ssl_adapter = _tls_adapter(self.ssl_context)
        server.prepare()  # binds: a port of 0 gets its number here
        self.port = int(server.bind_addr[1])
        self._server = server
        self._thread = threading.Thread(target=server.serve, name="synapse-service", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _base(self, service: str) -> str:
        scheme = "http" if self.ssl_context is None else "https"
        return f"{scheme}://{HOST}:{self.port}/{service}/v1"

    @property
    def repo_endpoint(self) -> str:
        return self._base("repo")

    @property
    def auth_endpoint(self) -> str:
        return self._base("auth")

    @property
    def file_endpoint(self) -> str:
        return self._base("file")

    def stats(self) -> dict[str, int]:
        """Requests so far by route (``"POST /file/multipart"``), plus
        ``"429"``, ``"401"`` and ``"501"`` for throttled, refused and unknown ones."""
        with self._lock:
            return dict(self._stats)

    def throttle(self, n_requests: int, retry_after: int = 1) -> None:
        """The next ``n_requests`` requests answer 429 with ``Retry-After``."""
        with self._lock:
            self._throttle_left = n_requests
            self._retry_after = retry_after

    def fail(self, n_requests: int, status: int = 503) -> None:
        """The next ``n_requests`` requests (after any throttled ones) answer
        ``status`` (a 5xx, as a service in trouble does)."""
        with self._lock:
            self._fail_left = n_requests
            self._fail_status = status

    def reject_parts(self, n_parts: int = 1) -> None:
        """The next ``n_parts`` add-part calls answer ``ADD_FAILED`` (as when the
        stored part does not match its MD5), whatever was stored."""
        with self._lock:
            self._reject_left = n_parts

    def deny(self, entity_id: str) -> None:
        """The user loses every permission on ``entity_id`` and all under it:
        requests about them answer 403, file handle batches ``UNAUTHORIZED``."""
        with self._lock:
            self._denied.add(_syn_id(entity_id))

    def expire_url_batches(self, n_answers: int = 1) -> None:
        """The next ``n_answers`` answers that carry pre-signed URLs (a batch
        of part URLs, a file handle batch, a download redirect) deliver URLs
        that have already expired.

        They are signed as usual, with a one-second lifetime, and the answer
        waits until the S3 server must refuse them (403 "Request has
        expired"): what a client sees when its URLs expire in the middle of a
        transfer, made deterministic. S3 servers that check expiry (SeaweedFS
        with auth, Ceph RGW, AWS) refuse them; stock moto does not check.
        """
        with self._lock:
            self._expire_left = n_answers

    def create_project(self, name: str) -> str:
        """A new Project named ``name``; returns its id (``"syn1000"``)."""
        with self._lock:
            entity = self._create({"name": name, "concreteType": PROJECT})
            return entity.syn

    # -- S3 ----------------------------------------------------------------------

    def _make_s3_client(self) -> Any:
        import botocore.session
        from botocore.config import Config

        session = botocore.session.Session()
        return session.create_client(
            "s3",
            endpoint_url=self.s3_endpoint,
            region_name=self.region,
            aws_access_key_id=self._access_key,
            aws_secret_access_key=self._secret_key,
            aws_session_token=None,
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                retries={"max_attempts": 3, "mode": "standard"},
            ),
        )

    def _check_bucket(self) -> None:
        """Refuse to start (ValueError, a message for the user) without the bucket."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._s3.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 404:
                raise ValueError(
                    f"bucket {self.bucket!r} does not exist on {self.s3_endpoint}: create it "
                    "first (e.g. python -m synxfer_servers s3 --bucket NAME)"
                ) from None
            raise ValueError(
                f"the S3 server at {self.s3_endpoint} refused bucket {self.bucket!r} "
                f"(HTTP {status}): check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"
            ) from None
        except BotoCoreError as exc:
            raise ValueError(f"cannot reach the S3 server at {self.s3_endpoint}: {exc}") from None

    def _take_expired(self) -> bool:
        """Whether this answer's URLs are to be expired ones (expire_url_batches)."""
        with self._lock:
            if self._expire_left <= 0:
                return False
            self._expire_left -= 1
            return True

    def _presign(self, operation: str, params: dict[str, Any], *, expired: bool = False) -> str:
        lifetime = 1 if expired else max(1, round(self.url_lifetime))
        url: str = self._s3.generate_presigned_url(
            operation, Params={"Bucket": self.bucket, **params}, ExpiresIn=lifetime
        )
        return url

    @staticmethod
    def _until_expired(signed_at: float) -> None:
        """Wait until a URL signed at ``signed_at`` with a one-second lifetime is
        past it by a clear margin (X-Amz-Date has one-second resolution)."""
        time.sleep(max(0.0, math.floor(signed_at) + 2.2 - time.time()))

    def _download_url(self, handle: dict[str, Any]) -> str:
        """One download URL, as a redirect or a plain answer carries it."""
        return self._download_urls([handle])[0]

    def _download_urls(self, handles: list[dict[str, Any]]) -> list[str]:
        """Download URLs for one answer (expired ones if expire_url_batches says so)."""
        expired = self._take_expired()
        signed_at = time.time()
        urls = [self._presign("get_object", {"Key": h["key"]}, expired=expired) for h in handles]
        if expired:
            self._until_expired(signed_at)
        return urls

    # -- WSGI --------------------------------------------------------------------

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        from werkzeug.wrappers import Request

        request = Request(environ)
        response = self._respond(request)
        log.info("%s %s -> %s", request.method, request.path, response.status_code)
        return response(environ, start_response)

    def _respond(self, request: Request) -> Response:
        from werkzeug.wrappers import Response

        try:
            with self._lock:
                if self._throttle_left > 0:
                    self._throttle_left -= 1
                    self._stats["429"] += 1
                    raise _HttpError(
                        429,
                        "Too many requests: the service is throttling (test setting)",
                        {"Retry-After": str(self._retry_after)},
                    )
                if self._fail_left > 0:
                    self._fail_left -= 1
                    self._stats[str(self._fail_status)] += 1
                    raise _HttpError(self._fail_status, "The service is unavailable (test setting)")
            route, match = self._route(request)
            self._authenticate(request)
            with self._lock:
                self._stats[route.name] += 1
            result = route.handler(request, match)
        except _HttpError as exc:
            if exc.status >= 500 and exc.status != 501:
                log.warning("%s %s: %s", request.method, request.path, exc.reason)
            body = json.dumps({"reason": exc.reason})
            return Response(
                body, status=exc.status, headers=exc.headers, content_type="application/json"
            )
        except Exception as exc:  # the storage behind us failed: say so, as a 500
            log.exception("%s %s failed", request.method, request.path)
            body = json.dumps({"reason": f"Internal error: {type(exc).__name__}: {exc}"})
            return Response(body, status=500, content_type="application/json")
        if isinstance(result, Response):
            return result
        if result is None:
            return Response(status=204)
        return Response(json.dumps(result), status=200, content_type="application/json")

    def _route(self, request: Request) -> tuple[_Route, re.Match[str]]:
        path = request.path
        parts = path.split("/", 3)  # "", service, "v1", rest
        if len(parts) == 4 and parts[2] == "v1" and parts[1] in ("repo", "auth", "file"):
            service, rest = parts[1], "/" + parts[3]
            for route in self._routes:
                if route.method != request.method:
                    continue
                match = route.pattern.fullmatch(rest)
                if match is None:
                    continue
                if route.service != service:
                    continue
                return route, match
        with self._lock:
            self._stats["501"] += 1
        raise _HttpError(
            501,
            f"Not implemented by the local Synapse-style service: {request.method} {path}",
        )

    def _authenticate(self, request: Request) -> None:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            with self._lock:
                self._stats["401"] += 1
            raise _HttpError(401, "Missing bearer token: log in with a personal access token")
        if self._token is not None and not _same(token.strip(), self._token):
            with self._lock:
                self._stats["401"] += 1
            raise _HttpError(401, "Invalid access token")

    def _make_routes(self) -> list[_Route]:
        table: list[tuple[str, str, str, Handler]] = [
            ("repo", "GET", r"/userProfile", self._user_profile),
            ("repo", "GET", r"/userProfile/(?P<user>\d+)", self._user_profile),
            ("repo", "GET", r"/version", self._version),
            ("repo", "POST", r"/entity", self._post_entity),
            ("repo", "GET", r"/entity/(?P<id>syn\d+|\d+)", self._get_entity),
            ("repo", "GET", r"/entity/(?P<id>syn\d+|\d+)/version/(?P<v>\d+)", self._get_entity),
            ("repo", "PUT", r"/entity/(?P<id>syn\d+|\d+)", self._put_entity),
            ("repo", "DELETE", r"/entity/(?P<id>syn\d+|\d+)", self._delete_entity),
            (
                "repo",
                "DELETE",
                r"/entity/(?P<id>syn\d+|\d+)/version/(?P<v>\d+)",
                self._delete_version,
            ),
            ("repo", "GET", r"/entity/(?P<id>syn\d+|\d+)/version", self._versions),
            ("repo", "POST", r"/entity/child", self._child),
            ("repo", "POST", r"/entity/children", self._children),
            ("repo", "GET", r"/entity/(?P<id>syn\d+|\d+)/type", self._type),
            ("repo", "GET", r"/entity/(?P<id>syn\d+|\d+)/path", self._path),
            ("repo", "GET", r"/entity/(?P<id>syn\d+|\d+)/benefactor", self._benefactor),
            ("repo", "GET", r"/entity/(?P<id>syn\d+|\d+)/permissions", self._permissions),
            (
                "repo",
                "GET",
                r"/entity/(?P<id>syn\d+|\d+)/accessRequirement",
                self._access_requirements,
            ),
            ("repo", "POST", r"/entity/bundle2/create", self._create_bundle),
            ("repo", "POST", r"/entity/(?P<id>syn\d+|\d+)/bundle2", self._bundle),
            ("repo", "PUT", r"/entity/(?P<id>syn\d+|\d+)/bundle2", self._update_bundle),
            (
                "repo",
                "POST",
                r"/entity/(?P<id>syn\d+|\d+)/version/(?P<v>\d+)/bundle2",
                self._bundle,
            ),
            ("repo", "GET", r"/entity/(?P<id>syn\d+|\d+)/annotations2", self._get_annotations),
            (
                "repo",
                "GET",
                r"/entity/(?P<id>syn\d+|\d+)/version/(?P<v>\d+)/annotations2",
                self._get_annotations,
            ),
            ("repo", "PUT", r"/entity/(?P<id>syn\d+|\d+)/annotations2", self._put_annotations),
            ("repo", "GET", r"/entity/(?P<id>syn\d+|\d+)/filehandles", self._entity_handles),
            (
                "repo",
                "GET",
                r"/entity/(?P<id>syn\d+|\d+)/version/(?P<v>\d+)/filehandles",
                self._entity_handles,
            ),
            ("repo", "GET", r"/entity/(?P<id>syn\d+|\d+)/file", self._entity_file),
            (
                "repo",
                "GET",
                r"/entity/(?P<id>syn\d+|\d+)/version/(?P<v>\d+)/file",
                self._entity_file,
            ),
            ("repo", "GET", r"/entity/(?P<id>syn\d+|\d+)/generatedBy", self._generated_by),
            ("repo", "PUT", r"/entity/(?P<id>syn\d+|\d+)/generatedBy", self._set_generated_by),
            (
                "repo",
                "DELETE",
                r"/entity/(?P<id>syn\d+|\d+)/generatedBy",
                self._delete_generated_by,
            ),
            ("repo", "POST", r"/activity", self._post_activity),
            ("repo", "GET", r"/activity/(?P<act>\d+)", self._get_activity),
            ("repo", "PUT", r"/activity/(?P<act>\d+)", self._put_activity),
            ("repo", "DELETE", r"/activity/(?P<act>\d+)", self._delete_activity),
            (
                "repo",
                "GET",
                r"/entity/(?P<id>syn\d+|\d+)/version/(?P<v>\d+)/generatedBy",
                self._generated_by,
            ),
            ("repo", "GET", r"/entity/md5/(?P<md5>[0-9a-fA-F]{32})", self._by_md5),
            (
                "repo",
                "GET",
                r"/projectSettings/(?P<id>syn\d+|\d+)/type/(?P<type>\w+)",
                self._project_setting,
            ),
            ("file", "GET", r"/entity/(?P<id>syn\d+|\d+)/uploadDestination", self._destination),
            (
                "file",
                "GET",
                r"/entity/(?P<id>syn\d+|\d+)/uploadDestination/(?P<loc>\d+)",
                self._destination,
            ),
            ("file", "POST", r"/file/multipart", self._start_upload),
            ("file", "GET", r"/file/multipart/(?P<up>\d+)", self._upload_status),
            (
                "file",
                "POST",
                r"/file/multipart/(?P<up>\d+)/presigned/url/batch",
                self._part_urls,
            ),
            ("file", "PUT", r"/file/multipart/(?P<up>\d+)/add/(?P<part>\d+)", self._add_part),
            ("file", "PUT", r"/file/multipart/(?P<up>\d+)/complete", self._complete),
            ("file", "GET", r"/fileHandle/(?P<fh>\d+)", self._get_handle),
            ("file", "GET", r"/fileHandle/(?P<fh>\d+)/url", self._handle_url),
            ("file", "POST", r"/fileHandle/batch", self._handle_batch),
            ("file", "GET", r"/file/(?P<fh>\d+)", self._associated_file),
        ]
        routes = []
        for service, method, pattern, handler in table:
            # The route's name in stats(): its method and path template.
            template = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern).replace("\\", "")
            name = f"{method} {template}"
            routes.append(_Route(service, method, re.compile(pattern), name, handler))
        return routes

    # -- helpers -----------------------------------------------------------------

    @staticmethod
    def _json(request: Request) -> dict[str, Any]:
        data = request.get_data(cache=True)
        if not data:
            return {}
        try:
            body = json.loads(data)
        except ValueError as exc:
            raise _HttpError(400, f"The request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise _HttpError(400, "The request body must be a JSON object")
        return body

    def _entity(self, value: Any) -> _Entity:
        entity = self._entities.get(_syn_id(value))
        if entity is None:
            raise _HttpError(
                404, f"The resource you are attempting to access cannot be found: {value}"
            )
        if self._is_denied(entity):
            raise _HttpError(
                403,
                f"You do not have READ permission for the requested entity, {entity.syn}.",
            )
        return entity

    def _is_denied(self, entity: _Entity) -> bool:
        """Whether deny() took the user's permissions on ``entity`` (or above it)."""
        if not self._denied:
            return False
        current: _Entity | None = entity
        while current is not None:
            if current.id in self._denied:
                return True
            current = self._entities.get(current.parent)
        return False

    def _version_of(self, entity: _Entity, match: re.Match[str]) -> int:
        version = match.groupdict().get("v")
        if version is None:
            return entity.current
        number = int(version)
        if number not in entity.versions:
            raise _HttpError(404, f"Cannot find version {number} of {entity.syn}")
        return number

    def _header(self, entity: _Entity, version: int | None = None) -> dict[str, Any]:
        body = entity.versions[version or entity.current]
        header = {
            "id": entity.syn,
            "name": body["name"],
            "type": body["concreteType"],
            "benefactorId": self._project_of(entity).id,
            "createdOn": body["createdOn"],
            "modifiedOn": body["modifiedOn"],
            "createdBy": body["createdBy"],
            "modifiedBy": body["modifiedBy"],
            "isLatestVersion": (version or entity.current) == entity.current,
        }
        if entity.kind == "file":
            header["versionNumber"] = body["versionNumber"]
            header["versionLabel"] = body["versionLabel"]
        return header

    def _project_of(self, entity: _Entity) -> _Entity:
        while entity.kind != "project":
            entity = self._entities[entity.parent]
        return entity

    def _create(self, request: dict[str, Any]) -> _Entity:
        kind = _KINDS.get(str(request.get("concreteType")))
        if kind is None:
            raise _HttpError(
                400,
                f"Unsupported concreteType {request.get('concreteType')!r}: this service "
                "stores Projects, Folders, FileEntities and Links",
            )
        name = request.get("name")
        if kind == "project":
            parent = ROOT_ID
        else:
            if not request.get("parentId"):
                raise _HttpError(400, "parentId cannot be null")
            parent_entity = self._entity(request["parentId"])
            if parent_entity.kind == "file":
                raise _HttpError(400, f"A FileEntity ({parent_entity.syn}) cannot have children")
            parent = parent_entity.id
        if not name and kind == "file":
            handle = self._handles.get(str(request.get("dataFileHandleId")))
            name = handle["fileName"] if handle else None
        if not isinstance(name, str) or not _NAME.match(name):
            raise _HttpError(400, f"Invalid entity name {name!r}. {_NAME_RULE}")
        if name in self._names.get(parent, {}):
            raise _HttpError(
                409, f"An entity with the name: {name} already exists with a parentId: syn{parent}"
            )
        if kind == "file":
            self._check_handle(request.get("dataFileHandleId"))
        if kind == "link":
            target = (request.get("linksTo") or {}).get("targetId")
            if not target:
                raise _HttpError(400, "Link.linksTo cannot be null")
            self._entity(target)  # Synapse: the target must exist
        entity_id = self._next_id
        self._next_id += 1
        now = _now()
        body = {k: v for k, v in request.items() if v is not None}
        body.update(
            id=f"syn{entity_id}",
            name=name,
            parentId=f"syn{parent}",
            etag=_etag(),
            createdOn=now,
            modifiedOn=now,
            createdBy=self.user_id,
            modifiedBy=self.user_id,
        )
        if kind == "file":
            body.update(
                versionNumber=1,
                versionLabel=str(request.get("versionLabel") or 1),
                isLatestVersion=True,
            )
        entity = _Entity(entity_id, kind, parent, {1: body}, {1: {}})
        self._entities[entity_id] = entity
        self._names.setdefault(parent, {})[name] = entity_id
        return entity

    def _check_handle(self, handle_id: Any) -> dict[str, Any]:
        handle = self._handles.get(str(handle_id))
        if handle is None:
            raise _HttpError(404, f"FileHandle does not exist for id: {handle_id}")
        return handle

    def _entity_json(self, entity: _Entity, version: int | None = None) -> dict[str, Any]:
        body = dict(entity.versions[version or entity.current])
        if entity.kind == "file":
            body["isLatestVersion"] = (version or entity.current) == entity.current
        return body

    # -- auth --------------------------------------------------------------------

    def _user_profile(self, request: Request, match: re.Match[str]) -> Any:
        user = match.groupdict().get("user")
        if user is not None and user != self.user_id:
            raise _HttpError(404, f"UserProfile cannot be found for: {user}")
        return {
            "ownerId": self.user_id,
            "userName": self.user_name,
            "displayName": "synxfer tester",
            "firstName": "synxfer",
            "lastName": "tester",
            "emails": [f"{self.user_name}@example.invalid"],
            "etag": "0",
            "createdOn": "2026-01-01T00:00:00.000Z",
        }

    def _version(self, request: Request, match: re.Match[str]) -> Any:
        return {"version": "local-synxfer-service"}

    # -- entities ----------------------------------------------------------------

    def _post_entity(self, request: Request, match: re.Match[str]) -> Any:
        body = self._json(request)
        with self._lock:
            entity = self._create(body)
            return self._entity_json(entity)

    def _get_entity(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            entity = self._entity(match["id"])
            return self._entity_json(entity, self._version_of(entity, match))

    def _put_entity(self, request: Request, match: re.Match[str]) -> Any:
        body = self._json(request)
        new_version = request.args.get("newVersion", "false").lower() == "true"
        with self._lock:
            entity = self._entity(match["id"])
            self._update(entity, body, new_version)
            return self._entity_json(entity)

    def _update(self, entity: _Entity, body: dict[str, Any], new_version: bool) -> None:
        """Apply ``body`` (the entity's JSON) to ``entity`` as ``PUT /entity/{id}``
        does: etag checked (412), name kept unique (409), a new version when
        asked or when a file's handle changes. The lock is held."""
        current = entity.body
        if body.get("etag") != current["etag"]:
            raise _HttpError(
                412,
                f"Object: {entity.syn} was updated since you last fetched it, "
                "retrieve it again and re-apply the update",
            )
        if body.get("concreteType", current["concreteType"]) != current["concreteType"]:
            raise _HttpError(400, f"Cannot change the type of {entity.syn}")
        name = body.get("name", current["name"])
        if not isinstance(name, str) or not _NAME.match(name):
            raise _HttpError(400, f"Invalid entity name {name!r}. {_NAME_RULE}")
        parent = entity.parent
        if entity.kind != "project" and body.get("parentId"):
            parent = self._entity(body["parentId"]).id
        if self._names.get(parent, {}).get(name, entity.id) != entity.id:
            raise _HttpError(
                409,
                f"An entity with the name: {name} already exists with a parentId: syn{parent}",
            )
        updated = {k: v for k, v in body.items() if v is not None}
        for field in ("id", "createdOn", "createdBy", "versionNumber", "isLatestVersion"):
            if field in current:
                updated[field] = current[field]
        updated.update(
            name=name,
            parentId=f"syn{parent}",
            etag=_etag(),
            modifiedOn=_now(),
            modifiedBy=self.user_id,
        )
        if entity.kind == "file":
            handle = self._check_handle(updated.get("dataFileHandleId"))
            auto = not new_version and self._other_content(current, handle)
            if new_version or auto:
                number = max(entity.versions) + 1
                label = None if auto else body.get("versionLabel")
                if label is None or label == current.get("versionLabel"):
                    label = str(number)
                updated.update(versionNumber=number, versionLabel=label)
                if auto or body.get("versionComment") == current.get("versionComment"):
                    updated.pop("versionComment", None)
                entity.versions[number] = updated
                entity.annotations[number] = dict(entity.annotations[entity.current])
                entity.current = number
            else:
                entity.versions[entity.current] = updated
        else:
            entity.versions[entity.current] = updated
        del self._names[entity.parent][current["name"]]
        self._names.setdefault(parent, {})[name] = entity.id
        entity.parent = parent

    def _other_content(self, current: dict[str, Any], handle: dict[str, Any]) -> bool:
        """Whether a File entity whose version is ``current`` gets a new version
        by itself when its handle becomes ``handle``: Synapse's
        EntityManagerImpl.updateEntity (PLFM-1744, PLFM-6429) makes one when
        the handle's id changes and its MD5 does not match the current
        handle's (``FileHandleManager.isMatchingMD5``: both known and equal);
        the same MD5 under another handle updates the version in place."""
        if str(handle.get("id")) == str(current.get("dataFileHandleId")):
            return False
        before = self._handles.get(str(current.get("dataFileHandleId"))) or {}
        md5, was = handle.get("contentMd5"), before.get("contentMd5")
        return not (md5 and was and md5 == was)

    def _delete_entity(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            entity = self._entities.get(_syn_id(match["id"]))
            if entity is None:
                return None  # Synapse: deleting a missing entity is not an error
            self._entity(match["id"])  # 403 when denied
            del self._names[entity.parent][entity.name]
            doomed = [entity.id]
            while doomed:
                entity_id = doomed.pop()
                del self._entities[entity_id]
                doomed.extend(self._names.pop(entity_id, {}).values())
        return None

    def _delete_version(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            entity = self._entity(match["id"])
            number = self._version_of(entity, match)
            if len(entity.versions) == 1:
                raise _HttpError(400, f"Cannot delete the only version of {entity.syn}")
            del entity.versions[number]
            del entity.annotations[number]
            entity.current = max(entity.versions)
        return None

    def _versions(self, request: Request, match: re.Match[str]) -> Any:
        offset = int(request.args.get("offset", 0))
        limit = int(request.args.get("limit", 10))
        with self._lock:
            entity = self._entity(match["id"])
            if entity.kind != "file":
                raise _HttpError(400, f"{entity.syn} is not versionable")
            numbers = sorted(entity.versions, reverse=True)
            results = []
            for number in numbers[offset : offset + limit]:
                body = entity.versions[number]
                info = {
                    "id": entity.syn,
                    "versionNumber": number,
                    "versionLabel": body.get("versionLabel"),
                    "versionComment": body.get("versionComment"),
                    "modifiedOn": body["modifiedOn"],
                    "modifiedBy": body["modifiedBy"],
                    "isLatestVersion": number == entity.current,
                }
                handle = self._handles.get(str(body.get("dataFileHandleId")))
                if handle is not None:
                    info["contentSize"] = str(handle["contentSize"])
                    info["contentMd5"] = handle["contentMd5"]
                results.append({k: v for k, v in info.items() if v is not None})
            return {"results": results, "totalNumberOfResults": len(numbers)}

    def _child(self, request: Request, match: re.Match[str]) -> Any:
        body = self._json(request)
        name = body.get("entityName")
        with self._lock:
            parent = ROOT_ID if not body.get("parentId") else self._entity(body["parentId"]).id
            child = self._names.get(parent, {}).get(str(name))
            if child is not None:
                return {"id": f"syn{child}"}
        raise _HttpError(404, f"No entity named {name!r} in {body.get('parentId') or 'the root'}")

    def _children(self, request: Request, match: re.Match[str]) -> Any:
        body = self._json(request)
        types = {str(t).lower() for t in body.get("includeTypes") or ["folder", "file"]}
        token = body.get("nextPageToken")
        offset = int(token) if token else 0
        with self._lock:
            parent = ROOT_ID if not body.get("parentId") else self._entity(body["parentId"]).id
            children = [
                e
                for e in map(self._entities.__getitem__, self._names.get(parent, {}).values())
                if e.kind in types
            ]
            if body.get("sortBy") == "CREATED_ON":
                children.sort(key=lambda e: e.id)
            else:
                children.sort(key=lambda e: e.name)
            if body.get("sortDirection") == "DESC":
                children.reverse()
            page = [self._header(e) for e in children[offset : offset + CHILDREN_PAGE]]
            result: dict[str, Any] = {"page": page}
            if offset + CHILDREN_PAGE < len(children):
                result["nextPageToken"] = str(offset + CHILDREN_PAGE)
            return result

    def _type(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            return self._header(self._entity(match["id"]))

    def _path(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            entity = self._entity(match["id"])
            path = []
            while True:
                path.append(self._header(entity))
                if entity.kind == "project":
                    break
                entity = self._entities[entity.parent]
            root = {"id": f"syn{ROOT_ID}", "name": "root", "type": FOLDER}
            return {"path": [root, *reversed(path)]}

    def _benefactor(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            return self._header(self._project_of(self._entity(match["id"])))

    def _permissions_of(self, entity: _Entity) -> dict[str, Any]:
        return {
            "canView": True,
            "canEdit": True,
            "canMove": True,
            "canAddChild": True,
            "canCertifiedUserEdit": True,
            "canCertifiedUserAddChild": True,
            "isCertifiedUser": True,
            "canChangePermissions": True,
            "canChangeSettings": True,
            "canDelete": True,
            "canDownload": True,
            "canUpload": True,
            "canEnableInheritance": entity.kind != "project",
            "ownerPrincipalId": int(self.user_id),
            "canPublicRead": False,
            "canModerate": True,
            "isCertificationRequired": False,
            "isEntityOpenData": False,
        }

    def _permissions(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            return self._permissions_of(self._entity(match["id"]))

    def _access_requirements(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            self._entity(match["id"])
        return {"results": [], "totalNumberOfResults": 0}

    def _annotations_json(self, entity: _Entity, version: int) -> dict[str, Any]:
        return {
            "id": entity.syn,
            "etag": entity.body["etag"],
            "annotations": entity.annotations[version],
        }

    def _bundle(self, request: Request, match: re.Match[str]) -> Any:
        body = self._json(request)
        with self._lock:
            entity = self._entity(match["id"])
            version = self._version_of(entity, match)
            bundle: dict[str, Any] = {}
            if body.get("includeEntity"):
                bundle["entity"] = self._entity_json(entity, version)
                bundle["entityType"] = entity.kind
            if body.get("includeAnnotations"):
                bundle["annotations"] = self._annotations_json(entity, version)
            if body.get("includePermissions"):
                bundle["permissions"] = self._permissions_of(entity)
            if body.get("includeEntityPath"):
                bundle["path"] = self._path(request, match)
            if body.get("includeHasChildren"):
                bundle["hasChildren"] = bool(self._names.get(entity.id))
            if body.get("includeFileHandles"):
                handle_id = entity.versions[version].get("dataFileHandleId")
                handle = self._handles.get(str(handle_id))
                bundle["fileHandles"] = [handle] if handle else []
            if body.get("includeBenefactorACL"):
                bundle["benefactorAcl"] = self._acl(self._project_of(entity))
            if body.get("includeRestrictionInformation"):
                bundle["restrictionInformation"] = {
                    "objectId": entity.id,
                    "restrictionLevel": "OPEN",
                    "hasUnmetAccessRequirement": False,
                    "userEntityPermissionsState": {"hasDownload": True},
                    "restrictionDetails": [],
                }
            return bundle

    def _acl(self, project: _Entity) -> dict[str, Any]:
        return {
            "id": project.syn,
            "creationDate": project.body["createdOn"],
            "etag": project.body["etag"],
            "resourceAccess": [
                {
                    "principalId": int(self.user_id),
                    "accessType": [
                        "READ",
                        "DOWNLOAD",
                        "CREATE",
                        "UPDATE",
                        "DELETE",
                        "CHANGE_PERMISSIONS",
                        "CHANGE_SETTINGS",
                        "MODERATE",
                    ],
                }
            ],
        }

    def _create_bundle(self, request: Request, match: re.Match[str]) -> Any:
        """``POST /entity/bundle2/create``: an entity and its annotations in one
        transaction (Synapse's EntityBundleServiceImpl.createEntityBundle):
        the annotations are checked first, so a refused one creates nothing."""
        from werkzeug.wrappers import Response

        body = self._json(request)
        entity_json = body.get("entity")
        if not isinstance(entity_json, dict):
            raise _HttpError(400, "Invalid request: no entity to create")
        self._no_acl(body)
        annotations = self._bundle_annotations(body)
        with self._lock:
            entity = self._create(entity_json)
            bundle: dict[str, Any] = {"entity": self._entity_json(entity)}
            if annotations is not None:
                entity.annotations[entity.current].update(annotations)
                bundle["annotations"] = self._annotations_json(entity, entity.current)
        return Response(json.dumps(bundle), status=201, content_type="application/json")

    def _update_bundle(self, request: Request, match: re.Match[str]) -> Any:
        """``PUT /entity/{id}/bundle2``: update the entity (``PUT /entity/{id}``
        without ``newVersion``: a handle of other content still makes a new
        version) and put the given annotations over the current version's
        (keys not given are kept), in one transaction, as Synapse's
        EntityBundleServiceImpl.updateEntityBundle does."""
        body = self._json(request)
        entity_json = body.get("entity")
        self._no_acl(body)
        annotations = self._bundle_annotations(body)
        wanted = f"syn{_syn_id(match['id'])}"
        if entity_json is not None and (
            not isinstance(entity_json, dict) or entity_json.get("id") != wanted
        ):
            raise _HttpError(400, "Entity does not match requested entity ID")
        if annotations is not None and body["annotations"].get("id") != wanted:
            raise _HttpError(400, "Annotations do not match requested entity ID")
        with self._lock:
            entity = self._entity(match["id"])
            bundle: dict[str, Any] = {}
            if entity_json is not None:
                self._update(entity, entity_json, new_version=False)
                bundle["entity"] = self._entity_json(entity)
            if annotations is not None:
                entity.annotations[entity.current].update(annotations)
                entity.body["etag"] = _etag()
                bundle["annotations"] = self._annotations_json(entity, entity.current)
                if "entity" in bundle:
                    bundle["entity"] = self._entity_json(entity)
            return bundle

    @staticmethod
    def _no_acl(body: dict[str, Any]) -> None:
        if body.get("accessControlList") is not None:
            raise _HttpError(
                501, "Not implemented by the local Synapse-style service: an ACL in a bundle"
            )

    @classmethod
    def _bundle_annotations(cls, body: dict[str, Any]) -> dict[str, Any] | None:
        """The checked annotations of an EntityBundleCreate, None if it has none."""
        doc = body.get("annotations")
        if doc is None:
            return None
        if not isinstance(doc, dict):
            raise _HttpError(400, "annotations must be an Annotations object")
        return cls._check_annotations(doc.get("annotations") or {})

    @staticmethod
    def _check_annotations(annotations: Any) -> dict[str, Any]:
        """Annotations (v2) as Synapse validates them (AnnotationsV2Utils): at
        most 100 names of letters, digits, ``_ . ,``; a type and at most 100
        values each, every value valid for its type. 400 otherwise."""
        if not isinstance(annotations, dict):
            raise _HttpError(400, "annotations must be an object")
        if len(annotations) > _MAX_ANNOTATION_KEYS:
            raise _HttpError(
                400, f"Exceeded maximum number of annotation keys: {_MAX_ANNOTATION_KEYS}"
            )
        for key, entry in annotations.items():
            name = key.strip()
            if not name:
                raise _HttpError(400, "Annotation names cannot be empty strings")
            if not _ANNOTATION_NAME.fullmatch(name):
                raise _HttpError(
                    400,
                    f"Invalid annotation name: '{key}'. Annotation names may only contain; "
                    "letters, numbers, '_' and '.'",
                )
            values = entry.get("value") if isinstance(entry, dict) else None
            if not isinstance(values, list):
                raise _HttpError(400, f"value list for key={key} can not be null")
            if len(values) > _MAX_ANNOTATION_VALUES:
                raise _HttpError(
                    400,
                    f"key={key} has exceeded the maximum number of values allowed: "
                    f"{_MAX_ANNOTATION_VALUES}",
                )
            kind = entry.get("type")
            if kind not in _ANNOTATION_TYPES:
                raise _HttpError(
                    400, f"a value type must be set for values associated with key={key}"
                )
            for value in values:
                if not isinstance(value, str):
                    raise _HttpError(
                        400, "null is not allowed. To indicate no values, use an empty list."
                    )
                if not _annotation_value_ok(kind, value):
                    raise _HttpError(
                        400,
                        f"Value associated with key={key} is not valid for type={kind}: {value}",
                    )
        return annotations

    def _get_annotations(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            entity = self._entity(match["id"])
            return self._annotations_json(entity, self._version_of(entity, match))

    def _put_annotations(self, request: Request, match: re.Match[str]) -> Any:
        body = self._json(request)
        with self._lock:
            entity = self._entity(match["id"])
            if body.get("etag") != entity.body["etag"]:
                raise _HttpError(
                    412,
                    f"Object: {entity.syn} was updated since you last fetched it, "
                    "retrieve it again and re-apply the update",
                )
            annotations = self._check_annotations(body.get("annotations") or {})
            entity.annotations[entity.current] = annotations
            entity.body["etag"] = _etag()
            entity.body["modifiedOn"] = _now()
            return self._annotations_json(entity, entity.current)

    def _entity_handles(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            entity = self._entity(match["id"])
            body = entity.versions[self._version_of(entity, match)]
            handle = self._handles.get(str(body.get("dataFileHandleId")))
            return {"list": [handle] if handle else []}

    def _entity_file(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            entity = self._entity(match["id"])
            body = entity.versions[self._version_of(entity, match)]
            if entity.kind != "file":
                raise _HttpError(400, f"{entity.syn} is a {entity.kind}, not a FileEntity")
            handle = self._check_handle(body.get("dataFileHandleId"))
        return self._url_answer(request, self._download_url(handle))

    @staticmethod
    def _url_answer(request: Request, url: str) -> Any:
        from werkzeug.wrappers import Response

        if request.args.get("redirect", "true").lower() == "false":
            return Response(url, status=200, content_type="text/plain")
        return Response(status=307, headers={"Location": url})

    # -- provenance --------------------------------------------------------------

    def _generated_by(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            entity = self._entity(match["id"])
            version = self._version_of(entity, match)
            activity = self._activities.get(entity.generated_by.get(version, ""))
            if activity is None:
                raise _HttpError(404, f"No activity for Entity {entity.syn} version {version}")
            return activity

    def _set_generated_by(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            entity = self._entity(match["id"])
            activity_id = request.args.get("generatedBy", "")
            activity = self._activity(activity_id)
            entity.generated_by[entity.current] = activity_id
            entity.body["etag"] = _etag()
            return activity

    def _delete_generated_by(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            entity = self._entity(match["id"])
            if entity.generated_by.pop(entity.current, None) is None:
                raise _HttpError(404, f"No activity for Entity {entity.syn}")
            entity.body["etag"] = _etag()
        return None

    def _activity(self, activity_id: str) -> dict[str, Any]:
        activity = self._activities.get(activity_id)
        if activity is None:
            raise _HttpError(404, f"Activity {activity_id} does not exist")
        return activity

    def _post_activity(self, request: Request, match: re.Match[str]) -> Any:
        body = self._json(request)
        with self._lock:
            activity_id = str(self._next_id)
            self._next_id += 1
            now = _now()
            activity = {k: v for k, v in body.items() if v is not None}
            activity.update(
                id=activity_id,
                etag=_etag(),
                createdOn=now,
                modifiedOn=now,
                createdBy=self.user_id,
                modifiedBy=self.user_id,
            )
            self._activities[activity_id] = activity
            return activity

    def _get_activity(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            return self._activity(match["act"])

    def _put_activity(self, request: Request, match: re.Match[str]) -> Any:
        body = self._json(request)
        with self._lock:
            current = self._activity(match["act"])
            if body.get("etag") != current["etag"]:
                raise _HttpError(
                    412,
                    f"Activity {current['id']} was updated since you last fetched it, "
                    "retrieve it again and re-apply the update",
                )
            activity = {k: v for k, v in body.items() if v is not None}
            for field in ("id", "createdOn", "createdBy"):
                activity[field] = current[field]
            activity.update(etag=_etag(), modifiedOn=_now(), modifiedBy=self.user_id)
            self._activities[current["id"]] = activity
            return activity

    def _delete_activity(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            self._activity(match["act"])
            del self._activities[match["act"]]
            for entity in self._entities.values():
                for version, activity_id in list(entity.generated_by.items()):
                    if activity_id == match["act"]:
                        del entity.generated_by[version]
        return None

    def _by_md5(self, request: Request, match: re.Match[str]) -> Any:
        md5 = match["md5"].lower()
        with self._lock:
            results = []
            for entity in self._entities.values():
                for number, body in entity.versions.items():
                    handle = self._handles.get(str(body.get("dataFileHandleId")))
                    if handle is not None and handle["contentMd5"] == md5:
                        results.append(self._header(entity, number))
            return {"results": results, "totalNumberOfResults": len(results)}

    def _project_setting(self, request: Request, match: re.Match[str]) -> Any:
        from werkzeug.wrappers import Response

        with self._lock:
            self._entity(match["id"])
        # Synapse answers an empty body when a project has no such setting.
        return Response(status=204)

    # -- uploads -----------------------------------------------------------------

    def _destination(self, request: Request, match: re.Match[str]) -> Any:
        location = match.groupdict().get("loc")
        if location is not None and int(location) != STORAGE_LOCATION_ID:
            raise _HttpError(404, f"Storage location {location} does not exist")
        with self._lock:
            self._entity(match["id"])
        return {
            "concreteType": _REPO + "file.S3UploadDestination",
            "storageLocationId": STORAGE_LOCATION_ID,
            "uploadType": "S3",
            "stsEnabled": False,
        }

    def _start_upload(self, request: Request, match: re.Match[str]) -> Any:
        body = self._json(request)
        restart = request.args.get("forceRestart", "false").lower() == "true"
        if body.get("concreteType", _REPO + "file.MultipartUploadRequest") != (
            _REPO + "file.MultipartUploadRequest"
        ):
            raise _HttpError(400, f"Unsupported multipart request {body.get('concreteType')!r}")
        md5 = str(body.get("contentMD5Hex") or "").lower()
        if not re.fullmatch(r"[0-9a-f]{32}", md5):
            raise _HttpError(400, "contentMD5Hex is required: the file's MD5 as 32 hex digits")
        name = body.get("fileName")
        if not isinstance(name, str) or not name:
            raise _HttpError(400, "fileName is required")
        size = body.get("fileSizeBytes")
        part_size = body.get("partSizeBytes")
        if not isinstance(size, int) or size < 0:
            raise _HttpError(400, "fileSizeBytes is required (a non-negative integer)")
        if not isinstance(part_size, int) or part_size <= 0:
            raise _HttpError(400, "partSizeBytes is required (a positive integer)")
        n_parts = max(1, math.ceil(size / part_size))
        if n_parts > 1 and part_size < MIN_PART_SIZE:
            raise _HttpError(400, f"partSizeBytes must be at least {MIN_PART_SIZE} bytes")
        if n_parts > MAX_PARTS:
            raise _HttpError(
                400, f"{n_parts} parts: a file may have at most {MAX_PARTS}; use larger parts"
            )
        location = body.get("storageLocationId")
        if location is not None and int(location) != STORAGE_LOCATION_ID:
            raise _HttpError(404, f"Storage location {location} does not exist")
        # Synapse: the same request by the same user is the same upload (resume).
        request_hash = hashlib.sha256(
            json.dumps([self.user_id, body], sort_keys=True).encode()
        ).hexdigest()
        with self._lock:
            previous = self._upload_by_request.get(request_hash)
            if previous is not None and not restart:
                return self._uploads[previous].status(self.user_id)
        key = f"{self.user_id}/{uuid.uuid4()}/{name}"
        created = self._s3.create_multipart_upload(
            Bucket=self.bucket,
            Key=key,
            ContentType=str(body.get("contentType") or "application/octet-stream"),
        )
        with self._lock:
            current = self._upload_by_request.get(request_hash)
            raced = current != previous and not restart
            if not raced and current is not None:
                # A restart: the parts of the upload it replaces are dropped.
                old = self._uploads[current]
                abandoned = None if old.handle_id else (old.key, old.s3_upload_id)
            else:
                abandoned = None
        if raced:
            # The same request, started meanwhile by another thread: one upload.
            assert current is not None
            self._abort(key, created["UploadId"])
            with self._lock:
                return self._uploads[current].status(self.user_id)
        if abandoned is not None:
            self._abort(*abandoned)
        with self._lock:
            upload_id = str(self._next_id)
            self._next_id += 1
            upload = _Upload(
                upload_id,
                body,
                key,
                created["UploadId"],
                part_size,
                [None] * n_parts,
                _now(),
            )
            self._uploads[upload_id] = upload
            self._upload_by_request[request_hash] = upload_id
            return upload.status(self.user_id)

    def _abort(self, key: str, s3_upload_id: str) -> None:
        """Drop an S3 multipart upload nobody will complete (best effort)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=s3_upload_id)
        except (BotoCoreError, ClientError) as exc:
            log.warning("could not abort an abandoned S3 upload of %s: %s", key, exc)

    def _upload(self, upload_id: str) -> _Upload:
        upload = self._uploads.get(upload_id)
        if upload is None:
            raise _HttpError(404, f"Multipart upload {upload_id} does not exist")
        return upload

    def _upload_status(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            return self._upload(match["up"]).status(self.user_id)

    def _part_urls(self, request: Request, match: re.Match[str]) -> Any:
        body = self._json(request)
        numbers = body.get("partNumbers")
        if not isinstance(numbers, list) or not numbers:
            raise _HttpError(400, "partNumbers is required (a non-empty list)")
        with self._lock:
            upload = self._upload(match["up"])
            if upload.handle_id is not None:
                raise _HttpError(400, f"Multipart upload {upload.id} is already complete")
            for number in numbers:
                if not isinstance(number, int) or not 1 <= number <= len(upload.parts):
                    raise _HttpError(
                        400,
                        f"Part number {number!r} out of range: this upload has "
                        f"{len(upload.parts)} parts",
                    )
        expired = self._take_expired()
        signed_at = time.time()
        urls = [
            {
                "partNumber": number,
                "uploadPresignedUrl": self._presign(
                    "upload_part",
                    {"Key": upload.key, "UploadId": upload.s3_upload_id, "PartNumber": number},
                    expired=expired,
                ),
                "signedHeaders": {},
            }
            for number in numbers
        ]
        if expired:
            self._until_expired(signed_at)
        return {"partPresignedUrls": urls}

    def _stored_part(self, upload: _Upload, number: int) -> dict[str, Any] | None:
        """Part ``number`` as S3 lists it (one ListParts page of one part)."""
        page = self._s3.list_parts(
            Bucket=self.bucket,
            Key=upload.key,
            UploadId=upload.s3_upload_id,
            PartNumberMarker=number - 1,
            MaxParts=1,
        )
        for part in page.get("Parts", []):
            if int(part["PartNumber"]) == number:
                return dict(part)
        return None

    def _add_part(self, request: Request, match: re.Match[str]) -> Any:
        number = int(match["part"])
        md5 = request.args.get("partMD5Hex", "").lower()
        with self._lock:
            upload = self._upload(match["up"])
            if not 1 <= number <= len(upload.parts):
                raise _HttpError(400, f"Part number {number} out of range")

        def answer(state: str, error: str | None = None) -> dict[str, Any]:
            body = {"uploadId": upload.id, "partNumber": number, "addPartState": state}
            if error:
                body["errorMessage"] = error
            return body

        if not re.fullmatch(r"[0-9a-f]{32}", md5):
            return answer("ADD_FAILED", "partMD5Hex is required: the part's MD5 as 32 hex digits")
        with self._lock:
            rejected = self._reject_left > 0
            self._reject_left -= rejected
        if rejected:
            return answer(
                "ADD_FAILED",
                f"The MD5 of part {number} as stored does not match partMD5Hex ({md5}) "
                "(test setting)",
            )
        # The part as S3 stored it: its ETag is the MD5 of its bytes (a plain
        # upload, no SSE-KMS), so the claim is checked without reading the part.
        stored = self._stored_part(upload, number)
        if stored is None:
            return answer("ADD_FAILED", f"Part {number} has not been uploaded to storage")
        etag = str(stored.get("ETag", "")).strip('"').lower()
        if etag != md5:
            return answer(
                "ADD_FAILED",
                f"The MD5 of part {number} as stored ({etag}) does not match partMD5Hex ({md5})",
            )
        with self._lock:
            upload.parts[number - 1] = md5
            upload.sizes[number] = int(stored.get("Size", 0))
        return answer("ADD_SUCCESS")

    def _complete(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            upload = self._upload(match["up"])
        with upload.completing:
            return self._complete_once(upload)

    def _complete_once(self, upload: _Upload) -> Any:
        from botocore.exceptions import ClientError

        with self._lock:
            if upload.handle_id is not None:
                return upload.status(self.user_id)
            missing = [i + 1 for i, md5 in enumerate(upload.parts) if md5 is None]
            if missing:
                raise _HttpError(
                    400,
                    f"Cannot complete upload {upload.id}: parts {missing[:10]} "
                    f"({len(missing)} in all) have not been added",
                )
            md5s = list(upload.parts)
            size = sum(upload.sizes.values())
        declared = int(upload.request["fileSizeBytes"])
        if size != declared:
            raise _HttpError(
                400,
                f"Cannot complete upload {upload.id}: its parts hold {size} bytes, "
                f"fileSizeBytes said {declared}; upload the parts again (forceRestart=true)",
            )
        parts = [{"PartNumber": i, "ETag": f'"{md5}"'} for i, md5 in enumerate(md5s, 1)]
        try:
            self._s3.complete_multipart_upload(
                Bucket=self.bucket,
                Key=upload.key,
                UploadId=upload.s3_upload_id,
                MultipartUpload={"Parts": parts},
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise _HttpError(
                400,
                f"Cannot complete upload {upload.id}: the storage refused it "
                f"({error.get('Code')}: {error.get('Message')}); upload the parts again",
            ) from None
        with self._lock:
            handle_id = str(self._next_id)
            self._next_id += 1
            now = _now()
            self._handles[handle_id] = {
                "id": handle_id,
                "etag": _etag(),
                "createdBy": self.user_id,
                "createdOn": now,
                "modifiedOn": now,
                "concreteType": S3_FILE_HANDLE,
                "contentType": upload.request.get("contentType") or "application/octet-stream",
                "contentMd5": str(upload.request["contentMD5Hex"]).lower(),
                "fileName": upload.request["fileName"],
                "storageLocationId": STORAGE_LOCATION_ID,
                "contentSize": size,
                "status": "AVAILABLE",
                "bucketName": self.bucket,
                "key": upload.key,
                "isPreviewable": False,
            }
            upload.handle_id = handle_id
            return upload.status(self.user_id)

    # -- file handles and downloads ----------------------------------------------

    def _get_handle(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            return dict(self._check_handle(match["fh"]))

    def _handle_url(self, request: Request, match: re.Match[str]) -> Any:
        with self._lock:
            handle = dict(self._check_handle(match["fh"]))
        return self._url_answer(request, self._download_url(handle))

    def _associated(self, handle_id: str, object_id: Any, object_type: Any) -> str | None:
        """None when ``object_id`` may read ``handle_id``, else the failure code."""
        if handle_id not in self._handles:
            return "NOT_FOUND"
        if object_type not in (None, "FileEntity"):
            return "UNAUTHORIZED"
        try:
            entity = self._entities.get(_syn_id(object_id))
        except _HttpError:
            return "UNAUTHORIZED"
        if entity is None:
            return "NOT_FOUND"
        if self._is_denied(entity):
            return "UNAUTHORIZED"
        if any(str(b.get("dataFileHandleId")) == handle_id for b in entity.versions.values()):
            return None
        return "UNAUTHORIZED"

    def _handle_batch(self, request: Request, match: re.Match[str]) -> Any:
        body = self._json(request)
        wanted = body.get("requestedFiles") or []
        results = []
        with_urls: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for item in wanted:
            handle_id = str(item.get("fileHandleId"))
            with self._lock:
                failure = self._associated(
                    handle_id, item.get("associateObjectId"), item.get("associateObjectType")
                )
                handle = dict(self._handles[handle_id]) if failure is None else None
            result: dict[str, Any] = {"fileHandleId": handle_id}
            if handle is None:
                result["failureCode"] = failure
            else:
                if body.get("includeFileHandles"):
                    result["fileHandle"] = handle
                if body.get("includePreSignedURLs"):
                    with_urls.append((result, handle))
            results.append(result)
        if with_urls:
            urls = self._download_urls([handle for _, handle in with_urls])
            for (result, _), url in zip(with_urls, urls, strict=True):
                result["preSignedURL"] = url
        return {"requestedFiles": results}

    def _associated_file(self, request: Request, match: re.Match[str]) -> Any:
        handle_id = match["fh"]
        with self._lock:
            failure = self._associated(
                handle_id,
                request.args.get("fileAssociateId"),
                request.args.get("fileAssociateType"),
            )
            if failure == "NOT_FOUND":
                raise _HttpError(404, f"FileHandle {handle_id} not found")
            if failure is not None:
                raise _HttpError(403, f"FileHandle {handle_id} is not associated with that object")
            handle = dict(self._handles[handle_id])
        return self._url_answer(request, self._download_url(handle))


def _annotation_value_ok(kind: str, value: str) -> bool:
    """Whether Synapse's validator for ``kind`` takes ``value`` (Java's
    Long.parseLong, Double.parseDouble, "true"/"false" in any case)."""
    if kind == "STRING":
        return True
    if kind == "BOOLEAN":
        return value.lower() in ("true", "false")
    if kind in ("LONG", "TIMESTAMP_MS"):
        return re.fullmatch(r"[+-]?\d+", value) is not None and -(2**63) <= int(value) < 2**63
    try:
        float(value)
    except ValueError:
        return False
    return True


def _same(a: str, b: str) -> bool:
    import hmac

    return hmac.compare_digest(a.encode(), b.encode())


def _tls_adapter(context: ssl.SSLContext) -> Adapter:
    """cheroot's ``ssl`` adapter serving with ``context`` (its chain loaded).

    cheroot's adapter loads a certificate from files; the service is given a
    context, so the adapter takes it as it is (no client certificates).
    """
    from cheroot.ssl.builtin import BuiltinSSLAdapter

    class _Given(BuiltinSSLAdapter):
        def __init__(self) -> None:  # the base's __init__ reads files: not called
            self.context = context
            self._server_env: dict[str, Any] = {}

    return _Given()
