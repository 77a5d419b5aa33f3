"""Prometheus Operator objects (``monitoring.coreos.com/v1``): a ``PodMonitor`` per workload on the
port and path its backend plugin declares, and the operator's own ``ServiceMonitor``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llmaz.render.objects import LWS_NAME_LABEL, LWS_WORKER_INDEX_LABEL, metadata
from llmaz.render.workload import Workload

__all__ = [
    "MONITORING_API_VERSION",
    "OPERATOR_METRICS",
    "OPERATOR_METRIC_FAMILIES",
    "PROCESS_METRICS",
    "OperatorMetric",
    "render_operator_service_monitor",
    "render_pod_monitor",
]

MONITORING_API_VERSION = "monitoring.coreos.com/v1"


@dataclass(frozen=True)
class OperatorMetric:
    """One metric family the operator exports (:mod:`llmaz.operator.metrics` builds it from this)."""

    name: str
    type: str
    """``counter``, ``gauge`` or ``histogram``."""
    help: str
    labels: tuple[str, ...] = ()

    def series(self) -> tuple[str, ...]:
        """The series names Prometheus stores for this family."""
        if self.type == "counter":
            return (f"{self.name}_total",)
        if self.type == "histogram":
            return tuple(f"{self.name}_{suffix}" for suffix in ("bucket", "sum", "count"))
        return (self.name,)


OPERATOR_METRIC_FAMILIES: tuple[OperatorMetric, ...] = (
    OperatorMetric("llmaz_reconciles", "counter", "Reconciles run, per kind.", ("kind",)),
    OperatorMetric(
        "llmaz_reconcile_errors", "counter", "Reconciles that failed (and were retried), per kind.", ("kind",)
    ),
    OperatorMetric(
        "llmaz_reconcile_duration_seconds", "histogram", "Time of one reconcile, per kind.", ("kind",)
    ),
    OperatorMetric("llmaz_objects_managed", "gauge", "Objects the operator watches, per kind.", ("kind",)),
    OperatorMetric("llmaz_queue_depth", "gauge", "Objects waiting for or in a reconcile (the work queue)."),
    OperatorMetric(
        "llmaz_api_writes",
        "counter",
        "Write requests sent to the API server, per verb and resource.",
        ("verb", "resource"),
    ),
    OperatorMetric("llmaz_leader", "gauge", "1 while this process is the leader."),
    OperatorMetric(
        "llmaz_watch_events",
        "counter",
        "Watch events the operator handled, per resource (plural.group; the initial listing included).",
        ("resource",),
    ),
)
"""The operator's own metric families: the one home of their names, types, help and labels."""

PROCESS_METRICS: dict[str, str] = {
    "process_cpu_seconds_total": "counter: CPU time of the operator process (ProcessCollector)",
    "process_resident_memory_bytes": "gauge: resident memory of the operator process",
}

OPERATOR_METRICS: dict[str, str] = {
    **{
        series: f"{m.type}{{{', '.join(m.labels)}}}: {m.help}"
        for m in OPERATOR_METRIC_FAMILIES
        for series in m.series()
    },
    **PROCESS_METRICS,
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
