"""Log noise during API-server outages: one line when a request starts failing, not one per retry.

kopf retries each failed API request (every watch among them) with backoff and logs every attempt
as an error line: an API-server restart made ten watches log five to eight lines each. urllib3 logs
a warning for each of its own connection retries, before our own one-line failure
(:class:`~llmaz.operator.kube.KubeUnreachable`). :class:`RetryNoise` keeps the first attempt's line
and the final "escalating" one of kopf's, and drops urllib3's retry warnings; the failures stay
visible, the outage is no longer a wall of text (issue 16).
"""

from __future__ import annotations

import logging
import re

__all__ = ["RetryNoise", "install"]

_KOPF_ATTEMPT = re.compile(r"^Request attempt #(\d+)(?:/\d+)? failed; will retry")
_URLLIB3_RETRY = "Retrying (Retry("


class RetryNoise(logging.Filter):
    """Drop kopf's second and later "will retry" lines and urllib3's connection-retry warnings."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("kopf"):
            found = _KOPF_ATTEMPT.match(record.getMessage())
            return found is None or found.group(1) == "1"
        if record.name.startswith("urllib3"):
            return not record.getMessage().startswith(_URLLIB3_RETRY)
        return True


def install(root: logging.Logger | None = None) -> None:
    """Add :class:`RetryNoise` to every handler of ``root`` (the root logger by default)."""
    for handler in (root or logging.getLogger()).handlers:
        handler.addFilter(RetryNoise())
