"""Workloads for the integration render tests: real API models and stand-in backends."""

from __future__ import annotations

from typing import Any, ClassVar

from llmaz.api import OpenModel, Playground, RecommendedConfig
from llmaz.plugins import Backend, EngineMetrics
from llmaz.render.workload import Workload


class MetricsEngine(Backend):
    """A stand-in backend exporting metrics on a separate port."""

    name: ClassVar[str] = "metrics-engine"
    image: ClassVar[str] = "example/engine"
    version: ClassVar[str] = "v1"
    port: ClassVar[int] = 8000
    metrics_port: ClassVar[int | None] = 9400
    metrics_path: ClassVar[str | None] = "/stats"
    key_metrics: ClassVar[EngineMetrics | None] = EngineMetrics(requests_waiting="engine_queue")

    def recommended_configs(self) -> list[RecommendedConfig]:
        return [RecommendedConfig(name="default")]


class SilentEngine(MetricsEngine):
    """A stand-in backend exporting no metrics."""

    name: ClassVar[str] = "silent-engine"
    metrics_path: ClassVar[str | None] = None
    key_metrics: ClassVar[EngineMetrics | None] = None


def model(name: str, **spec: Any) -> OpenModel:
    return OpenModel.from_manifest(
        {
            "apiVersion": "llmaz.io/v1alpha1",
            "kind": "OpenModel",
            "metadata": {"name": name},
            "spec": {"familyName": "qwen", "source": {"modelHub": {"modelID": f"Qwen/{name}"}}, **spec},
        }
    )


def playground(name: str, model_name: str, namespace: str = "llm", **annotations: str) -> Playground:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return Playground.from_manifest(
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "Playground",
            "metadata": meta,
            "spec": {"replicas": 1, "modelClaim": {"modelName": model_name}},
        }
    )


def workload(
    name: str,
    model_name: str | None = None,
    namespace: str = "llm",
    backend: Backend | None = None,
    **ann: str,
) -> Workload:
    model_name = model_name or name
    return Workload.of(
        playground(name, model_name, namespace, **ann), model(model_name), backend=backend or MetricsEngine()
    )
