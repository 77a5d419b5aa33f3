"""The plugins' BackendRuntimes at start-up: applied in the background and retried until they are
admitted, so an operator whose own webhook is not reachable yet still starts (and becomes ready,
which is what makes its webhook reachable)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from llmaz.operator.backendruntimes import apply_plugin_runtimes_at_startup
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


def _runtime(api: RefusingApiServer, plugins: PluginManager) -> Runtime:
    return Runtime(
        config=OperatorConfig(),
        plugins=plugins,
        kube=api,  # type: ignore[arg-type]
        metrics=Metrics(),
        identity="unit",
    )


async def _start_up_then_background(rt: Runtime) -> tuple[int, int]:
    """What start-up does; returns (background tasks left by start-up, tasks still running after
    they were awaited)."""
    await apply_plugin_runtimes_at_startup(rt, delays=(0.0,))
    left = len(rt.tasks)
    await asyncio.gather(*list(rt.tasks))
    return left, len(rt.tasks)


def test_start_up_applies_every_plugin_runtime_before_going_on() -> None:
    api = RefusingApiServer([])
    plugins = PluginManager.from_environment(environ={})
    assert asyncio.run(_start_up_then_background(_runtime(api, plugins))) == (0, 0)
    assert sorted(api.applied) == sorted(plugins.backends)


def test_refused_applies_do_not_hold_up_start_up_and_are_retried_until_applied() -> None:
    webhook_down = KubeError(
        "PATCH",
        "/apis/inference.llmaz.io/v1alpha1/backendruntimes/ollama",
        500,
        'failed calling webhook "backendruntime-args.inference.llmaz.io": connection refused',
    )
    api = RefusingApiServer([webhook_down, KubeUnreachable("connection reset"), webhook_down])
    plugins = PluginManager.from_environment(environ={})
    left, running = asyncio.run(_start_up_then_background(_runtime(api, plugins)))
    assert (left, running) == (1, 0)  # start-up went on with one retry task, which finished
    assert api.refusals == []
    assert sorted(api.applied) == sorted(plugins.backends)


def test_a_runtime_the_crd_rules_refuse_is_logged_and_the_others_are_applied(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The operator loads plugins without the offline CEL rules (the API server checks them): a
    plugin whose BackendRuntime breaks one is refused with 422, which no retry can change."""
    plugins = PluginManager.from_environment(environ={}, check_rules=False)
    first = sorted(plugins.backends)[0]
    invalid = KubeError(
        "PATCH",
        f"/apis/inference.llmaz.io/v1alpha1/backendruntimes/{first}",
        422,
        f'BackendRuntime.inference.llmaz.io "{first}" is invalid: spec.image: Invalid value: "": '
        "image must not be empty",
    )
    api = RefusingApiServer([invalid])
    with caplog.at_level(logging.ERROR, logger="llmaz.operator"):
        left, _ = asyncio.run(_start_up_then_background(_runtime(api, plugins)))
    assert left == 0  # nothing to retry
    assert sorted(api.applied) == sorted(set(plugins.backends) - {first})
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert f"backend plugin {first}: its BackendRuntime is invalid" in line
    assert "image must not be empty" in line
