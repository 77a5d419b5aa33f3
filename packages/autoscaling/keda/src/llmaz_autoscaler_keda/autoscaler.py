"""A KEDA ``ScaledObject`` scaling a Playground on its engine's metrics, read from Prometheus.

The Playground chooses KEDA with the annotation ``llmaz.io/autoscaler: keda`` (the HPA plugin then
steps aside: KEDA creates its own HPA, two on one target would fight). Bounds come from
``spec.elasticConfig``, or from the annotations ``llmaz.io/keda-min-replicas`` and
``llmaz.io/keda-max-replicas`` when the Playground has no ``elasticConfig``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from llmaz.api import Playground
from llmaz.api.conventions import LABEL_PLAYGROUND, MANAGED_BY, MANAGER
from llmaz.plugins import (
    ANNOTATION_AUTOSCALER,
    Autoscaler,
    AutoscalingInput,
    AutoscalingOutput,
    AutoscalingProblem,
    EngineMetrics,
)

KEDA_API_VERSION = "keda.sh/v1alpha1"
SCALED_OBJECT = "ScaledObject"

ANNOTATION_METRIC = "llmaz.io/keda-metric"
"""``queue`` (default: waiting requests per replica) or ``kv-cache`` (average KV-cache use)."""
ANNOTATION_THRESHOLD = "llmaz.io/keda-threshold"
"""Target value: waiting requests per replica (default 5) or KV-cache ratio (default 0.8)."""
ANNOTATION_QUERY = "llmaz.io/keda-query"
"""A PromQL query replacing the one built from the engine's metric (for engines that declare none)."""
ANNOTATION_PROMETHEUS = "llmaz.io/keda-prometheus-url"
"""Prometheus server address; default :data:`DEFAULT_PROMETHEUS_URL`."""
ANNOTATION_MIN = "llmaz.io/keda-min-replicas"
ANNOTATION_MAX = "llmaz.io/keda-max-replicas"

DEFAULT_PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"
"""The Service the Prometheus Operator creates for a Prometheus in namespace ``monitoring``."""
METRICS: dict[str, tuple[str, str, str, str]] = {
    # name -> (EngineMetrics field, PromQL aggregation, KEDA metricType, default threshold)
    "queue": ("requests_waiting", "sum", "AverageValue", "5"),
    "kv-cache": ("kv_cache_usage", "avg", "Value", "0.8"),
}

REASON_NO_BOUNDS = "NoScaleBounds"
REASON_NO_METRIC = "NoEngineMetric"
REASON_INVALID = "InvalidAnnotation"
REASON_MIN_RAISED = "MinReplicasRaised"

_NUMBER = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_MAX_REPLICAS = 10_000


class KEDAAutoscaler(Autoscaler):
    """Renders one ScaledObject named like the Playground when the Playground chooses ``keda``."""

    name: ClassVar[str] = "keda"
    description: ClassVar[str] = (
        "KEDA ScaledObject on engine metrics (queue length, KV-cache use) via Prometheus"
    )
    managed_kinds: ClassVar[tuple[tuple[str, str], ...]] = ((KEDA_API_VERSION, SCALED_OBJECT),)

    def render(self, inp: AutoscalingInput) -> AutoscalingOutput:
        out = AutoscalingOutput()
        if inp.requested_autoscaler != self.name:
            return out
        playground = inp.playground
        annotations = playground.metadata.annotations or {}
        try:
            bounds = _bounds(playground, annotations)
            if bounds is None:
                out.problems.append(
                    AutoscalingProblem(
                        REASON_NO_BOUNDS,
                        f"{ANNOTATION_AUTOSCALER}=keda needs spec.elasticConfig or the annotation "
                        f"{ANNOTATION_MAX}; no ScaledObject is created",
                    )
                )
                return out
            trigger = _trigger(playground, annotations, inp.engine_metrics)
        except _Invalid as err:
            out.problems.append(AutoscalingProblem(REASON_INVALID, str(err)))
            return out
        if trigger is None:
            metric = annotations.get(ANNOTATION_METRIC, "queue")
            runtime = inp.backend_runtime.name if inp.backend_runtime else "(unresolved)"
            out.problems.append(
                AutoscalingProblem(
                    REASON_NO_METRIC,
                    f"the backend of BackendRuntime {runtime} declares no {metric!r} metric; set "
                    f"{ANNOTATION_QUERY} to a PromQL query; no ScaledObject is created",
                )
            )
            return out
        low, high = bounds
        if low < 1:
            out.problems.append(
                AutoscalingProblem(
                    REASON_MIN_RAISED, "minReplicas 0 is not supported; the ScaledObject uses 1"
                )
            )
            low = 1
        out.objects.append(build_scaled_object(playground, low, max(low, high), trigger))
        return out


class _Invalid(ValueError):
    pass


def _int_annotation(annotations: Mapping[str, str], key: str) -> int | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    if not raw.strip().isdigit() or not 0 <= int(raw) <= _MAX_REPLICAS:
        raise _Invalid(f"annotation {key}={raw!r} must be a whole number 0..{_MAX_REPLICAS}")
    return int(raw)


def _bounds(playground: Playground, annotations: Mapping[str, str]) -> tuple[int, int] | None:
    elastic = playground.spec.elastic_config
    low = _int_annotation(annotations, ANNOTATION_MIN)
    high = _int_annotation(annotations, ANNOTATION_MAX)
    if elastic is not None:
        low = elastic.min_replicas if low is None else low
        high = elastic.max_replicas if high is None else high
    if high is None:
        return None
    low = 1 if low is None else low
    if low > high:
        raise _Invalid(f"min replicas {low} is above max replicas {high} ({ANNOTATION_MIN}/{ANNOTATION_MAX})")
    return low, high


def _trigger(
    playground: Playground, annotations: Mapping[str, str], metrics: EngineMetrics | None
) -> dict[str, Any] | None:
    metric = annotations.get(ANNOTATION_METRIC, "queue")
    if metric not in METRICS:
        raise _Invalid(f"annotation {ANNOTATION_METRIC}={metric!r} must be one of {', '.join(METRICS)}")
    field, aggregation, metric_type, default_threshold = METRICS[metric]
    threshold = annotations.get(ANNOTATION_THRESHOLD, default_threshold).strip()
    if not _NUMBER.match(threshold) or float(threshold) <= 0:
        raise _Invalid(f"annotation {ANNOTATION_THRESHOLD}={threshold!r} must be a positive number")
    query = annotations.get(ANNOTATION_QUERY, "").strip()
    if not query:
        series = getattr(metrics, field) if metrics is not None else None
        if series is None:
            return None
        # LeaderWorkerSet leader pods are named <playground>-<group index>; only leaders serve.
        namespace = playground.metadata.namespace or "default"
        query = f'{aggregation}({series}{{namespace="{namespace}",pod=~"{playground.name}-[0-9]+"}})'
    url = annotations.get(ANNOTATION_PROMETHEUS, DEFAULT_PROMETHEUS_URL).strip()
    if not re.match(r"^https?://[^\s]+$", url):
        raise _Invalid(f"annotation {ANNOTATION_PROMETHEUS}={url!r} must be an http(s) URL")
    return {
        "type": "prometheus",
        "metricType": metric_type,
        "metadata": {"serverAddress": url, "query": query, "threshold": threshold},
    }


def build_scaled_object(
    playground: Playground, min_replicas: int, max_replicas: int, trigger: Mapping[str, Any]
) -> dict[str, Any]:
    """The ScaledObject manifest on the Playground's ``/scale`` subresource (owner refs: caller)."""
    metadata: dict[str, Any] = {
        "name": playground.name,
        "labels": {MANAGED_BY: MANAGER, LABEL_PLAYGROUND: playground.name},
    }
    if playground.metadata.namespace:
        metadata["namespace"] = playground.metadata.namespace
    return {
        "apiVersion": KEDA_API_VERSION,
        "kind": SCALED_OBJECT,
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": {
                "apiVersion": playground.api_version_string(),
                "kind": playground.kind_name(),
                "name": playground.name,
            },
            "minReplicaCount": min_replicas,
            "maxReplicaCount": max_replicas,
            "triggers": [dict(trigger)],
        },
    }
