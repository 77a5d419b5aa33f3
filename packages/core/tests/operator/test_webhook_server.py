"""The admission webhook server over real TLS on loopback: AdmissionReviews answered, a rotated
certificate picked up without a restart, a broken rotation keeping the old certificate."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from llmaz.operator.admission import BACKENDRUNTIME_ARGS, webhook
from llmaz.operator.config import Webhook
from llmaz.operator.webhook_server import WebhookError, WebhookServer
from llmaz_devkit.cluster import free_port
from llmaz_devkit.webhooks import issue_tls

NOW = datetime(2026, 1, 2, tzinfo=UTC)


def _post(port: int, path: str, body: Any, ca: bytes) -> tuple[int, dict[str, Any]]:
    context = ssl.create_default_context(cadata=ca.decode())
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _review(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": "CREATE", "object": obj},
    }


BAD = {"metadata": {"name": "typo"}, "spec": {"recommendedConfigs": [{"name": "d", "args": ["{{ .X }}"]}]}}


@contextlib.asynccontextmanager
async def _serving(cert_dir: Path) -> AsyncIterator[tuple[WebhookServer, int]]:
    """A webhook server on loopback with the certificate in ``cert_dir``, and its port."""
    port = free_port()
    server = WebhookServer(Webhook(enabled=True, port=port, cert_dir=str(cert_dir)), lambda: NOW, "127.0.0.1")
    await server.start()
    try:
        yield server, port
    finally:
        await server.stop()


def test_serves_reviews_and_picks_up_a_rotated_certificate(tmp_path: Path) -> None:
    async def scenario() -> None:
        certs = tmp_path / "certs"
        first_ca = issue_tls(certs)
        async with _serving(certs) as (server, port):
            path = webhook(BACKENDRUNTIME_ARGS).path
            status, answer = await asyncio.to_thread(_post, port, path, _review(BAD), first_ca)
            assert status == 200
            assert answer["kind"] == "AdmissionReview"
            assert answer["response"]["uid"] == "u-1"
            assert answer["response"]["allowed"] is False
            assert "unknown template variable '{{ .X }}'" in answer["response"]["status"]["message"]

            status, answer = await asyncio.to_thread(_post, port, path, {"no": "request"}, first_ca)
            assert status == 400

            # a half-written rotation (key missing) keeps serving the old certificate
            (certs / "tls.key").write_text("not a key")
            assert server.reload() is False
            status, _ = await asyncio.to_thread(_post, port, path, _review(BAD), first_ca)
            assert status == 200

            second_ca = issue_tls(certs)  # a new CA and certificate, as after a Secret rotation
            assert server.reload() is True
            status, _ = await asyncio.to_thread(_post, port, path, _review(BAD), second_ca)
            assert status == 200
            with pytest.raises(urllib.error.URLError):
                await asyncio.to_thread(_post, port, path, _review(BAD), first_ca)

    asyncio.run(scenario())


def test_a_missing_certificate_is_a_clear_start_up_error(tmp_path: Path) -> None:
    server = WebhookServer(Webhook(enabled=True, port=free_port(), cert_dir=str(tmp_path)), lambda: NOW)
    with pytest.raises(WebhookError, match=r"webhook certificate .*tls\.crt .* cannot be loaded"):
        asyncio.run(server.start())


def test_a_failing_review_is_a_refusal_that_says_so_not_an_http_500(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a rule (here: a review that raises) must reach ``kubectl`` as a refusal naming the
    webhook, not as the API server's "failed calling webhook ... 500"."""

    def broken(*_: Any) -> dict[str, Any]:
        raise ValueError("boom")

    monkeypatch.setattr("llmaz.operator.webhook_server.review", broken)

    async def scenario() -> tuple[int, dict[str, Any]]:
        ca = issue_tls(tmp_path)
        async with _serving(tmp_path) as (_, port):
            return await asyncio.to_thread(_post, port, webhook(BACKENDRUNTIME_ARGS).path, _review(BAD), ca)

    status, answer = asyncio.run(scenario())
    assert status == 200
    assert answer["response"]["uid"] == "u-1"
    assert answer["response"]["allowed"] is False
    assert (
        "backendruntime-args webhook failed on this object (ValueError: boom)"
        in (answer["response"]["status"]["message"])
    )
