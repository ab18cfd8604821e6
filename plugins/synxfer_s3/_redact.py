"""Keep credentials out of botocore's own DEBUG log.

synxfer never turns botocore's DEBUG log on, but a library user may, and
botocore then prints the session token: in ``botocore.endpoint``'s "Sending
http request" line (the ``X-Amz-Security-Token`` header) and in
``botocore.auth``'s canonical request. This filter rewrites such records
with the token masked. Logger filters run only for records that are
actually emitted, so it costs nothing while DEBUG is off.
"""

from __future__ import annotations

import logging
import re

__all__ = ["install"]

_TOKEN = re.compile(r"(?i)(x-amz-security-token['\"]?\s*[:=]\s*b?['\"]?)[^'\"\s,&>}]+")

#: botocore's loggers that print request headers or canonical requests.
_LOGGERS = ("botocore.endpoint", "botocore.auth", "botocore.parsers", "botocore.hooks")


class _RedactSessionToken(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "ecurity-token" in message or "ECURITY-TOKEN" in message:
            record.msg = _TOKEN.sub(r"\1****", message)
            record.args = None
        return True


_FILTER = _RedactSessionToken()


def install() -> None:
    """Attach the filter to botocore's loggers (idempotent)."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
