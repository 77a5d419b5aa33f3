"""Keep credential values out of everything the loader writes: logs and the termination message.

The termination message becomes the Playground's ``ModelLoadFailed`` condition, readable by anyone
who can read Playgrounds, and a library's exception text can quote a request header verbatim (an
HTTP client rejecting ``Authorization: Bearer hf_...`` names the value it rejected). So instead of
trusting every message, :func:`main` collects the credential values of its environment once and
every line goes through one :class:`Redactor`: the termination message directly, log records through
a filter on the handlers that write them.
"""

from __future__ import annotations

import contextlib
import logging
from base64 import b64encode
from collections.abc import Iterable, Iterator, Mapping
from urllib.parse import unquote, urlsplit

from llmaz.loader import layout

MASK = "<redacted>"
MIN_SECRET = 4
"""Shorter values are not masked: no credential is that short, and masking one would garble text."""
MIN_FRAGMENT = 8
"""A credential spread over several lines is also masked piece by piece, pieces this long or longer
(shorter ones would mask ordinary words)."""
PROXY_ENV = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _forms(value: str) -> set[str]:
    """The ways ``value`` can appear in a message: as is, stripped, escaped by ``repr`` of a str or
    of bytes, and, for a value with whitespace inside, each long enough piece."""
    forms = {value, value.strip(), repr(value)[1:-1], repr(value.encode())[2:-1]}
    forms.update(piece for piece in value.split() if len(piece) >= MIN_FRAGMENT)
    return {f for f in forms if len(f.strip()) >= MIN_SECRET}


class Redactor(logging.Filter):
    """Replaces known secret values with :data:`MASK`; as a logging filter, in every record."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        forms: set[str] = set()
        for secret in secrets:
            if secret and secret.strip():
                forms |= _forms(secret)
        self._forms = sorted(forms, key=len, reverse=True)  # longest first: no half-masked value

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Redactor:
        secrets = [env.get(name, "") for name in layout.CREDENTIAL_ENV]
        for name in PROXY_ENV:  # http://user:password@proxy:3128, and the Basic header made of it
            with contextlib.suppress(ValueError):
                parts = urlsplit(env.get(name, ""))
                if parts.password:
                    user_pass = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
                    secrets += [
                        parts.password,
                        unquote(parts.password),
                        b64encode(user_pass.encode()).decode(),
                    ]
        return cls(secrets)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._forms:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: logging reports it when the handler formats the record
            return True
        record.msg = self(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self(record.exc_text)
        if record.stack_info:
            record.stack_info = self(record.stack_info)
        return True

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Filter every record the root logger's handlers (and ``logging``'s last resort) write."""
        handlers = list(logging.getLogger().handlers)
        if logging.lastResort is not None:
            handlers.append(logging.lastResort)
        for handler in handlers:
            handler.addFilter(self)
        try:
            yield
        finally:
            for handler in handlers:
                handler.removeFilter(self)
