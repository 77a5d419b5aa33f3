"""Log noise during API-server outages: one line when a request starts failing, not one per retry.

kopf retries each failed API request (every watch among them) with backoff and logs every attempt
as an error line: an API-server restart made ten watches log five to eight lines each. urllib3 logs
a warning for each of its own connection retries, before our own one-line failure
(:class:`~llmaz.operator.kube.KubeUnreachable`). :class:`RetryNoise` keeps the first attempt's line
and the final "escalating" one of kopf's, and drops urllib3's retry warnings; the failures stay
visible, the outage is no longer a wall of text (issue 16).

The kept kopf lines are also shortened: kopf writes the full URL with its query and the repr of
aiohttp's exception (a ``ConnectionKey(...)`` of seven fields), 500 characters for one refused
connection (the watch-410 scenario). They become ``METHOD path[ (watch)] -> ErrorType: message``.

Every other message is cut at :data:`MAX_LOG_MESSAGE` characters: what we log quotes the API server,
whose messages can be long (a restarted API server's 403 lists its RBAC cache misses), and
trimming each quoted piece left lines that named a long namespace twice over the bound.
"""

from __future__ import annotations

import logging
import re

__all__ = ["LOG_FORMAT", "MAX_LOG_MESSAGE", "RetryNoise", "install", "shorten"]

_KOPF_ATTEMPT = re.compile(r"^Request attempt #(\d+)(?:/\d+)? failed; (will retry|escalating)")
_KOPF_REQUEST = re.compile(
    r"^(?P<head>Request attempt \S+ failed; [^:]+): (?P<method>[A-Z]+) (?P<url>\S+) -> (?P<error>.*)$"
)
_INNER_ERROR = re.compile(r"(\w+Error)\((?:-?\d+, )?(['\"])(.*?)\2\)")
_CONNECTION_KEY = re.compile(r"ConnectionKey\([^)]*\),? ?")
"""aiohttp's connection key (host, port, ssl, proxy... seven fields) in its connection errors' repr."""
_URLLIB3_RETRY = "Retrying (Retry("
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The operator's log line: time, level, logger, message."""
MAX_ERROR = 120
"""Characters of an exception's text kept in a shortened kopf line."""
MAX_LOG_MESSAGE = 400
"""Characters of a log message kept (``...`` marks the cut): with the operator's time, level and
logger name a line stays under 500 (issue 16's bound)."""


def shorten(message: str) -> str:
    """A kopf request-failure line, short: the URL's path (``(watch)`` for a watch) and the innermost
    ``ErrorType: text`` of the exception (or its repr, cut at :data:`MAX_ERROR` characters)."""
    found = _KOPF_REQUEST.match(message)
    if found is None:
        return message
    path, _, query = found["url"].partition("?")
    if "://" in path:
        path = "/" + path.split("://", 1)[1].partition("/")[2]
    watch = " (watch)" if "watch=true" in query else ""
    error = _CONNECTION_KEY.sub("", found["error"])
    inner = _INNER_ERROR.findall(error)
    text = f"{inner[-1][0]}: {inner[-1][2]}" if inner else error
    if len(text) > MAX_ERROR:
        text = text[: MAX_ERROR - 3] + "..."
    return f"{found['head']}: {found['method']} {path}{watch} -> {text}"


class RetryNoise(logging.Filter):
    """Drop kopf's second and later "will retry" lines and urllib3's connection-retry warnings;
    shorten the kopf lines kept (:func:`shorten`) and cut every message at :data:`MAX_LOG_MESSAGE`."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.name.startswith("kopf"):
            found = _KOPF_ATTEMPT.match(message)
            if found is not None:
                if found.group(2) == "will retry" and found.group(1) != "1":
                    return False
                message = shorten(message)
        elif record.name.startswith("urllib3") and message.startswith(_URLLIB3_RETRY):
            return False
        if len(message) > MAX_LOG_MESSAGE:
            message = message[: MAX_LOG_MESSAGE - 3] + "..."
        record.msg, record.args = message, None
        return True


def install(root: logging.Logger | None = None) -> None:
    """Add :class:`RetryNoise` to every handler of ``root`` (the root logger by default)."""
    for handler in (root or logging.getLogger()).handlers:
        handler.addFilter(RetryNoise())
