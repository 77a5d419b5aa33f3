from __future__ import annotations

from typing import Any

import pytest

from llmaz.api import BackendRuntime, Playground
from llmaz.plugins import AutoscalingInput, AutoscalingOutput, EngineMetrics
from llmaz_autoscaler_keda import KEDAAutoscaler
from llmaz_autoscaler_keda.autoscaler import (
    DEFAULT_PROMETHEUS_URL,
    REASON_INVALID,
    REASON_MIN_RAISED,
    REASON_NO_BOUNDS,
    REASON_NO_METRIC,
)

ENGINE = EngineMetrics(requests_waiting="eng:waiting", kv_cache_usage="eng:kv")
RUNTIME = BackendRuntime.from_manifest(
    {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "BackendRuntime",
        "metadata": {"name": "fake"},
        "spec": {"image": "busybox", "version": "latest", "recommendedConfigs": [{"name": "default"}]},
    }
)


def playground(annotations: dict[str, str], elastic: dict[str, Any] | None = None) -> Playground:
    spec: dict[str, Any] = {"modelClaim": {"modelName": "qwen"}}
    if elastic is not None:
        spec["elasticConfig"] = elastic
    return Playground.from_manifest(
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "Playground",
            "metadata": {"name": "qwen", "namespace": "llm", "annotations": annotations},
            "spec": spec,
        }
    )


def render(
    annotations: dict[str, str], elastic: dict[str, Any] | None = None, metrics: EngineMetrics | None = ENGINE
) -> AutoscalingOutput:
    pg = playground({"llmaz.io/autoscaler": "keda", **annotations}, elastic)
    return KEDAAutoscaler().render(
        AutoscalingInput(playground=pg, backend_runtime=RUNTIME, engine_metrics=metrics)
    )


def test_queue_length_scaled_object_from_elastic_config() -> None:
    out = render({}, {"minReplicas": 1, "maxReplicas": 4})
    assert not out.problems
    assert out.objects == [
        {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": {
                "name": "qwen",
                "labels": {"app.kubernetes.io/managed-by": "llmaz", "llmaz.io/playground": "qwen"},
                "namespace": "llm",
            },
            "spec": {
                "scaleTargetRef": {
                    "apiVersion": "inference.llmaz.io/v1alpha1",
                    "kind": "Playground",
                    "name": "qwen",
                },
                "minReplicaCount": 1,
                "maxReplicaCount": 4,
                "triggers": [
                    {
                        "type": "prometheus",
                        "metricType": "AverageValue",
                        "metadata": {
                            "serverAddress": DEFAULT_PROMETHEUS_URL,
                            "query": 'sum(eng:waiting{namespace="llm",pod=~"qwen-[0-9]+"})',
                            "threshold": "5",
                        },
                    }
                ],
            },
        }
    ]


def test_kv_cache_metric_and_bounds_from_annotations() -> None:
    out = render(
        {
            "llmaz.io/keda-metric": "kv-cache",
            "llmaz.io/keda-threshold": "0.7",
            "llmaz.io/keda-min-replicas": "2",
            "llmaz.io/keda-max-replicas": "6",
            "llmaz.io/keda-prometheus-url": "http://prom.obs:9090",
        }
    )
    spec = out.objects[0]["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 6)
    trigger = spec["triggers"][0]
    assert trigger["metricType"] == "Value"
    assert trigger["metadata"] == {
        "serverAddress": "http://prom.obs:9090",
        "query": 'avg(eng:kv{namespace="llm",pod=~"qwen-[0-9]+"})',
        "threshold": "0.7",
    }


def test_nothing_without_the_keda_choice() -> None:
    pg = playground({}, {"maxReplicas": 3})
    out = KEDAAutoscaler().render(AutoscalingInput(playground=pg, engine_metrics=ENGINE))
    assert out.objects == []
    assert out.problems == []
    assert ("keda.sh/v1alpha1", "ScaledObject") in KEDAAutoscaler.managed_kinds


def test_engine_without_the_metric_asks_for_a_query() -> None:
    out = render(
        {"llmaz.io/keda-metric": "kv-cache"}, {"maxReplicas": 3}, EngineMetrics(requests_waiting="w")
    )
    assert out.objects == []
    assert [p.reason for p in out.problems] == [REASON_NO_METRIC]
    assert "llmaz.io/keda-query" in out.problems[0].message
    custom = render({"llmaz.io/keda-query": "sum(my_queue)"}, {"maxReplicas": 3}, None)
    assert custom.objects[0]["spec"]["triggers"][0]["metadata"]["query"] == "sum(my_queue)"


def test_no_bounds_is_explained() -> None:
    out = render({})
    assert out.objects == []
    assert [p.reason for p in out.problems] == [REASON_NO_BOUNDS]


def test_zero_min_is_raised() -> None:
    out = render({"llmaz.io/keda-min-replicas": "0", "llmaz.io/keda-max-replicas": "2"})
    assert out.objects[0]["spec"]["minReplicaCount"] == 1
    assert [p.reason for p in out.problems] == [REASON_MIN_RAISED]


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({"llmaz.io/keda-metric": "gpu"}, "llmaz.io/keda-metric='gpu' must be one of queue, kv-cache"),
        ({"llmaz.io/keda-threshold": "-1"}, "llmaz.io/keda-threshold='-1' must be a positive number"),
        ({"llmaz.io/keda-max-replicas": "many"}, "llmaz.io/keda-max-replicas='many' must be a whole number"),
        ({"llmaz.io/keda-min-replicas": "5"}, "min replicas 5 is above max replicas 3"),
        ({"llmaz.io/keda-prometheus-url": "prom:9090"}, "must be an http(s) URL"),
    ],
)
def test_bad_annotations_name_the_annotation(annotations: dict[str, str], message: str) -> None:
    out = render(annotations, {"maxReplicas": 3})
    assert out.objects == []
    assert [p.reason for p in out.problems] == [REASON_INVALID]
    assert message in out.problems[0].message
