"""The Synapse REST client: JSON calls on the SDK's HttpClient, errors mapped at the boundary.

Three services, as synapseclient addresses them: ``repo`` (entities),
``file`` (multipart uploads, file handles) and ``auth``. Every call carries
the token as ``Authorization: Bearer ...``; the token goes nowhere else
(never to a pre-signed storage URL, never into a message).

Errors (one table, the syn:// retry policy):

=======================  ===================================================
answer                   synxfer error
=======================  ===================================================
401                      NoCredentials (a set-up error, exit 2): the token is
                         missing, expired or revoked; how to set one
403                      PermissionDenied naming the entity: check the token's
                         scopes and the entity's sharing settings
404                      NotFound naming the ``syn://`` URL
409, 412                 :class:`Conflict` (the caller looks again)
408, 429, 500, 502,      TransientError; ``Retry-After`` is honoured by
503, 504, 509            waiting it out (at most :data:`MAX_RETRY_AFTER`)
                         before raising, so the retry layer's next attempt
                         cannot come sooner than the service asked
other 4xx and 5xx        BackendError with the service's ``reason``: 501 Not
                         Implemented, 505 and the like say the request
                         cannot work, and the same request again would not
                         (botocore retries 500, 502, 503, 504, and 509 as
                         throttling)
network trouble          TransientError (the HttpClient's)
=======================  ===================================================
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

from synxfer import BackendError, NoCredentials, NotFound, PermissionDenied, TransientError
from synxfer.backend import TRANSIENT_STATUS, HttpClient

from ._options import TOKEN_HINT, SynapseSettings

__all__ = ["MAX_RETRY_AFTER", "Conflict", "SynapseRest", "retry_after_seconds"]

#: The longest Retry-After waited out before a throttled call is given back
#: to the retry layer (a service asking for more is told no by a failure).
MAX_RETRY_AFTER: Final = 60.0
_USER_AGENT: Final = "synxfer-synapse"


class Conflict(BackendError):
    """409/412: the entity changed or a name is taken; look again."""


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils  # here: the date form is rare, and email loads 16 modules

    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _reason(body: bytes) -> str:
    """The ``reason`` of a Synapse ErrorResponse, else a short printable text."""
    if not body:
        return ""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        text = body[:300].decode("utf-8", "replace").strip()
        return text if text.isprintable() else ""
    if isinstance(doc, dict):
        return str(doc.get("reason") or doc.get("message") or "")[:500]
    return ""


class _Service:
    """One of the three base URLs, split for HttpClient.request."""

    __slots__ = ("host", "hostname", "port", "prefix", "scheme")

    def __init__(self, base: str) -> None:
        parts = urlsplit(base)
        self.scheme = parts.scheme
        self.hostname = parts.hostname or ""
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.host = parts.netloc
        self.prefix = parts.path.rstrip("/")


class SynapseRest:
    """JSON requests to the Synapse services with the bearer token.

    ``http`` gives the pooled client (the backend's, shared with the byte
    transfers: pools are per host). ``sleep`` is how a Retry-After is waited
    out (tests pass their own).
    """

    def __init__(
        self,
        settings: SynapseSettings,
        http: Callable[[], HttpClient],
        *,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self._http = http
        self._sleep = sleep
        self._services = {
            "repo": _Service(settings.repo_endpoint),
            "file": _Service(settings.file_endpoint),
            "auth": _Service(settings.auth_endpoint),
        }
        #: Calls answered 429/5xx, and seconds of Retry-After waited (for tests, stats).
        self.throttled = 0
        self.waited = 0.0

    def __repr__(self) -> str:
        return f"<SynapseRest {self.settings.repo_endpoint}>"

    async def call(
        self,
        method: str,
        service: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        url: str,
        what: str,
        ok: tuple[int, ...] = (200, 201),
        missing_ok: bool = False,
    ) -> Any:
        """One JSON call; the parsed answer (None for an empty body, or a 404
        when ``missing_ok``). ``url`` (a ``syn://`` URL) and ``what`` name
        the call in errors."""
        token = self.settings.token
        if token is None:
            raise NoCredentials(f"no Synapse access token for {url}: {TOKEN_HINT}")
        svc = self._services[service]
        target = f"{svc.prefix}{path}"
        if params:
            target += "?" + urlencode(params)
        headers = {
            "host": svc.host,
            "user-agent": _USER_AGENT,
            "accept": "application/json",
            "authorization": f"Bearer {token}",
        }
        payload: bytes | None = None
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            headers["content-type"] = "application/json; charset=UTF-8"
        response = await self._http().request(
            method, svc.scheme, svc.hostname, svc.port, target, headers, payload, label=url
        )
        status = response.status
        data = bytes(response.body)
        if status in ok:
            if not data.strip():
                return None
            try:
                return json.loads(data)
            except (ValueError, UnicodeDecodeError):
                raise BackendError(
                    f"the Synapse service answered {what} with something that is not JSON",
                    url=url,
                    status=status,
                ) from None
        if status == 404 and missing_ok:
            return None
        # A service that echoes the request (a proxy's error page) must not
        # carry the token into a message.
        reason = _reason(data).replace(token, "<token>")
        detail = f": {reason}" if reason else ""
        if status == 401:
            source = self.settings.token_source or "the configuration"
            raise NoCredentials(
                f"the Synapse service refused the access token from {source} (HTTP 401 on "
                f"{what}{detail}): it is missing, expired or revoked; {TOKEN_HINT}"
            )
        if status == 403:
            raise PermissionDenied(
                f"access denied (HTTP 403 on {what}){detail}; check your token's scopes "
                "(view, download, modify) and the entity's sharing settings",
                url=url,
                status=status,
            )
        if status == 404:
            raise NotFound(f"not found (HTTP 404 on {what}){detail}", url=url, status=status)
        if status in (409, 412):
            raise Conflict(f"HTTP {status} on {what}{detail}", url=url, status=status)
        if status in TRANSIENT_STATUS:
            self.throttled += 1
            wait = retry_after_seconds(response.headers.get("retry-after"))
            exc = TransientError(f"HTTP {status} on {what}{detail}", url=url, status=status)
            if wait is not None:
                # The SDK's retry layer has no Retry-After hint: honour it by
                # waiting here, so its next attempt comes no sooner than asked.
                wait = min(wait, MAX_RETRY_AFTER)
                exc.retry_after = wait  # type: ignore[attr-defined]
                self.waited += wait
                await self._sleep(wait)
            raise exc
        raise BackendError(f"HTTP {status} on {what}{detail}", url=url, status=status)
