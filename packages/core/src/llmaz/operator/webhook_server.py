"""The admission webhook server: HTTPS on ``webhook.port``, one path per entry of
:data:`llmaz.operator.admission.WEBHOOKS`, answered by the pure :func:`llmaz.operator.admission.review`.

It runs in every replica, the leader and the standbys alike: the chart's webhook Service sends
requests to any ready replica, and the answers need no cluster state. The certificate is read from
``tls.crt``/``tls.key`` in ``webhook.cert_dir`` and re-read when either file changes (a rotated
Secret reaches the pod as new files), without dropping the listening socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from llmaz.operator.admission import WEBHOOKS, AdmissionWebhook, review
from llmaz.operator.config import Webhook

__all__ = ["WebhookError", "WebhookServer"]

log = logging.getLogger("llmaz.operator")

RELOAD_SECONDS = 10.0
"""How often the certificate files are checked for a change."""
MAX_BODY = 3 * 1024 * 1024
"""The API server caps objects at ~1.5 MiB; an AdmissionReview carries at most two of them."""


class WebhookError(RuntimeError):
    """The webhook server cannot start (certificate unreadable or invalid, port taken)."""


class WebhookServer:
    """Serve the admission webhooks until :meth:`stop`."""

    def __init__(self, config: Webhook, clock: Callable[[], datetime], host: str = "0.0.0.0") -> None:
        self.config = config
        self.clock = clock
        self.host = host
        self.cert = Path(config.cert_dir) / "tls.crt"
        self.key = Path(config.cert_dir) / "tls.key"
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._loaded: tuple[float, float] | None = None
        self._runner: web.AppRunner | None = None
        self._reloader: asyncio.Task[None] | None = None

    def _stamp(self) -> tuple[float, float]:
        return (self.cert.stat().st_mtime, self.key.stat().st_mtime)

    def reload(self) -> bool:
        """Load the certificate if its files changed since the last load; True when it did.

        A broken or half-written pair is logged and the previous certificate kept."""
        try:
            stamp = self._stamp()
            if stamp == self._loaded:
                return False
            self.context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as err:
            if self._loaded is None:
                raise
            log.error(
                "webhook certificate in %s not reloaded, keeping the previous one: %s", self.cert.parent, err
            )
            return False
        if self._loaded is not None:
            log.info("webhook certificate reloaded from %s", self.cert.parent)
        self._loaded = stamp
        return True

    async def _watch_files(self) -> None:
        while True:
            await asyncio.sleep(RELOAD_SECONDS)
            self.reload()

    def _handler(self, hook: AdmissionWebhook) -> Callable[[web.Request], Any]:
        async def answer(request: web.Request) -> web.Response:
            try:
                body = await request.json(loads=json.loads)
                admission = body["request"]
                if not isinstance(admission, dict):
                    raise TypeError("request is not an object")
            except (ValueError, KeyError, TypeError) as err:
                return web.json_response({"error": f"not an AdmissionReview: {err}"}, status=400)
            try:
                response = review(hook, admission, self.clock())
            except Exception as err:  # a bug: a clear refusal, not "HTTP 500" at kubectl apply
                log.exception("webhook %s failed on %s", hook.handler_id, admission.get("operation"))
                response = {
                    "uid": admission.get("uid", ""),
                    "allowed": False,
                    "status": {
                        "code": 500,
                        "reason": "InternalError",
                        "message": f"llmaz's {hook.handler_id} webhook failed on this object "
                        f"({type(err).__name__}: {err}); the operator's log has the details",
                    },
                }
            if not response["allowed"]:
                log.info(
                    "webhook %s refused %s %s: %s",
                    hook.handler_id,
                    admission.get("operation"),
                    (admission.get("object") or {}).get("metadata", {}).get("name"),
                    response["status"]["message"],
                )
            return web.json_response(
                {
                    "apiVersion": body.get("apiVersion", "admission.k8s.io/v1"),
                    "kind": "AdmissionReview",
                    "response": response,
                }
            )

        return answer

    async def start(self) -> None:
        """Load the certificate (a missing or invalid one fails here, naming the files) and listen."""
        try:
            self.reload()
        except (OSError, ssl.SSLError) as err:
            raise WebhookError(
                f"webhook certificate {self.cert} / {self.key} cannot be loaded: {err}"
            ) from err
        app = web.Application(client_max_size=MAX_BODY)
        for hook in WEBHOOKS:
            app.router.add_post(hook.path, self._handler(hook))
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self.host, self.config.port, ssl_context=self.context).start()
        except OSError as err:
            await self._runner.cleanup()
            raise WebhookError(f"webhook port {self.config.port} cannot be opened: {err}") from err
        self._reloader = asyncio.create_task(self._watch_files())
        log.info(
            "serving admission webhooks on :%d (%s)", self.config.port, ", ".join(h.path for h in WEBHOOKS)
        )

    async def stop(self) -> None:
        if self._reloader is not None:
            self._reloader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reloader
        if self._runner is not None:
            await self._runner.cleanup()
