"""The plugins' BackendRuntimes at start-up: applied in the background and retried until they are
admitted, so an operator whose own webhook is not reachable yet still starts (and becomes ready,
which is what makes its webhook reachable)."""

from __future__ import annotations

import asyncio
from typing import Any

from llmaz.operator.backendruntimes import keep_applying_plugin_runtimes
from llmaz.operator.config import OperatorConfig
from llmaz.operator.kube import KubeError, KubeUnreachable
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import Runtime
from llmaz.plugins import PluginManager


class RefusingApiServer:
    """Stands in for the API server (no cluster in unit tests): answers reads with "not found"
    and refuses the first ``refusals`` writes the way it does when a webhook cannot be called."""

    def __init__(self, refusals: list[Exception]) -> None:
        self.refusals = refusals
        self.applied: list[str] = []

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return None

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.refusals:
            raise self.refusals.pop(0)
        self.applied.append(obj["metadata"]["name"])
        return obj


def test_refused_applies_are_retried_until_every_plugin_runtime_is_applied() -> None:
    webhook_down = KubeError(
        "PATCH",
        "/apis/inference.llmaz.io/v1alpha1/backendruntimes/ollama",
        500,
        'failed calling webhook "backendruntime-args.inference.llmaz.io": connection refused',
    )
    api = RefusingApiServer([webhook_down, KubeUnreachable("connection reset")])
    plugins = PluginManager.from_environment(environ={})
    rt = Runtime(
        config=OperatorConfig(),
        plugins=plugins,
        kube=api,  # type: ignore[arg-type]
        metrics=Metrics(),
        identity="unit",
    )
    failures = asyncio.run(keep_applying_plugin_runtimes(rt, delays=(0.0,)))
    assert failures == 2
    assert sorted(api.applied) == sorted(plugins.backends)
    assert "vllm" in api.applied
