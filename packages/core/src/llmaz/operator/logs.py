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
"""

from __future__ import annotations

import logging
import re

__all__ = ["RetryNoise", "install", "shorten"]

_KOPF_ATTEMPT = re.compile(r"^Request attempt #(\d+)(?:/\d+)? failed; (will retry|escalating)")
_KOPF_REQUEST = re.compile(
    r"^(?P<head>Request attempt \S+ failed; [^:]+): (?P<method>[A-Z]+) (?P<url>\S+) -> (?P<error>.*)$"
)
_INNER_ERROR = re.compile(r"(\w+Error)\((?:-?\d+, )?(['\"])(.*?)\2\)")
_CONNECTION_KEY = re.compile(r"ConnectionKey\([^)]*\),? ?")
"""aiohttp's connection key (host, port, ssl, proxy... seven fields) in its connection errors' repr."""
_URLLIB3_RETRY = "Retrying (Retry("
MAX_ERROR = 120
"""Characters of an exception's text kept in a shortened kopf line."""


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
    shorten the kopf lines kept (:func:`shorten`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("kopf"):
            message = record.getMessage()
            found = _KOPF_ATTEMPT.match(message)
            if found is None:
                return True
            if found.group(2) == "will retry" and found.group(1) != "1":
                return False
            record.msg, record.args = shorten(message), None
            return True
        if record.name.startswith("urllib3"):
            return not record.getMessage().startswith(_URLLIB3_RETRY)
        return True


def install(root: logging.Logger | None = None) -> None:
    """Add :class:`RetryNoise` to every handler of ``root`` (the root logger by default)."""
    for handler in (root or logging.getLogger()).handlers:
        handler.addFilter(RetryNoise())
