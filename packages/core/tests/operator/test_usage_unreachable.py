"""An OpenModel's ``InUse`` status write while the API server is unreachable: one warning line, no
exception escaping into kopf (which logged each as a multi-line traceback during an API-server
restart, issue 16), and the write is made once the API server answers again. The API server is an
in-memory stand-in that refuses the first two writes."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from llmaz.operator import usage
from llmaz.operator.config import OperatorConfig
from llmaz.operator.kube import KubeUnreachable
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import IDX_MODELS, Indexes, Runtime
from llmaz.plugins.manager import PluginManager

MODEL = {
    "apiVersion": "llmaz.io/v1alpha1",
    "kind": "OpenModel",
    "metadata": {"name": "qwen", "uid": "uid-qwen", "generation": 1, "resourceVersion": "5"},
    "spec": {"familyName": "qwen2", "source": {"modelHub": {"modelID": "Qwen/qwen"}}},
}


class FlakyStatusWrites:
    """``patch_status_async`` refuses (as a refused connection) ``failures`` times, then records."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.written: list[dict[str, Any]] = []

    async def patch_status_async(
        self, api_version: str, kind: str, ns: str | None, name: str, status: Any
    ) -> Any:
        if self.failures:
            self.failures -= 1
            raise KubeUnreachable(f"PATCH {kind}/{name}/status: Connection refused")
        self.written.append(dict(status))
        return {"metadata": {"resourceVersion": "6"}}


def test_an_unreachable_api_server_is_one_warning_line_then_the_status_is_written(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    kube = FlakyStatusWrites(failures=2)
    rt = Runtime(OperatorConfig(), PluginManager(), kube, Metrics(), "test")  # type: ignore[arg-type]
    rt.indexes = Indexes({IDX_MODELS: {"qwen": [MODEL]}})
    monkeypatch.setattr(usage, "RETRY_SECONDS", 0.01)
    monkeypatch.setattr(usage, "COALESCE_SECONDS", 0.0)

    async def scenario() -> None:
        await usage.refresh_or_retry(rt, "model", "qwen")  # must not raise
        for _ in range(500):  # bounded: the retries are scheduled on the loop
            if kube.written:
                return
            await asyncio.sleep(0.01)

    with caplog.at_level(logging.WARNING, logger="llmaz.operator"):
        asyncio.run(scenario())
    assert len(kube.written) == 1
    assert kube.written[0]["conditions"][0]["type"] == "InUse"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, [r.getMessage() for r in warnings]
    assert all("OpenModel qwen not written" in r.getMessage() for r in warnings)
    assert all(r.exc_info is None for r in warnings)  # one line each, no traceback
