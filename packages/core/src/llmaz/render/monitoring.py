"""Prometheus Operator objects (``monitoring.coreos.com/v1``): a ``PodMonitor`` per workload on the
port and path its backend plugin declares, and the operator's own ``ServiceMonitor``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmaz.render.objects import LWS_NAME_LABEL, LWS_WORKER_INDEX_LABEL, metadata
from llmaz.render.workload import Workload

__all__ = [
    "MONITORING_API_VERSION",
    "OPERATOR_METRICS",
    "render_operator_service_monitor",
    "render_pod_monitor",
]

MONITORING_API_VERSION = "monitoring.coreos.com/v1"

OPERATOR_METRICS: dict[str, str] = {
    "llmaz_reconcile_total": "counter{kind, result}: reconciles by object kind and result (ok, error)",
    "llmaz_reconcile_duration_seconds_bucket": "histogram{kind}: reconcile duration buckets",
    "llmaz_reconcile_duration_seconds_sum": "histogram{kind}: reconcile duration sum",
    "llmaz_reconcile_duration_seconds_count": "histogram{kind}: reconcile duration count",
    "llmaz_workloads_ready": "gauge{kind}: Playgrounds/Services whose Ready condition is True",
    "llmaz_workloads_total": "gauge{kind}: Playgrounds/Services the operator watches",
    "process_cpu_seconds_total": "counter: CPU time of the operator process (prometheus_client default)",
    "process_resident_memory_bytes": "gauge: resident memory of the operator process",
}
"""The series the operator exports on its ``/metrics`` port, the only operator series dashboards use."""


def render_pod_monitor(
    w: Workload, *, interval: str = "30s", extra_labels: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """A ``PodMonitor`` scraping the serving pods (group leaders) of one workload.

    ``None`` when the backend is unknown, exports no metrics (``metrics_path`` is ``None``: Ollama,
    TensorRT-LLM) or ``pod-monitor`` is disabled for the workload.

    :param extra_labels: labels a Prometheus ``podMonitorSelector`` matches (e.g. ``release``).
    """
    backend = w.backend
    if backend is None or backend.metrics_path is None or not w.enabled("pod-monitor"):
        return None
    labels = {**w.labels(), **(extra_labels or {})}
    return {
        "apiVersion": MONITORING_API_VERSION,
        "kind": "PodMonitor",
        "metadata": metadata(w.name, w.namespace, labels),
        "spec": {
            "selector": {"matchLabels": {LWS_NAME_LABEL: w.name, LWS_WORKER_INDEX_LABEL: "0"}},
            "podMetricsEndpoints": [
                {
                    "portNumber": backend.effective_metrics_port,
                    "path": backend.metrics_path,
                    "interval": interval,
                }
            ],
        },
    }


def render_operator_service_monitor(
    name: str,
    namespace: str,
    selector: Mapping[str, str],
    *,
    port: str = "metrics",
    interval: str = "30s",
    extra_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The operator's ``ServiceMonitor``: scrapes the named ``port`` of the Service matching ``selector``."""
    return {
        "apiVersion": MONITORING_API_VERSION,
        "kind": "ServiceMonitor",
        "metadata": metadata(name, namespace, dict(extra_labels or {})),
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "endpoints": [{"port": port, "path": "/metrics", "interval": interval}],
        },
    }
