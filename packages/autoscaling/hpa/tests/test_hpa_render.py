from __future__ import annotations

from typing import Any

from syrupy.assertion import SnapshotAssertion

from llmaz.api import BackendRuntime, Playground
from llmaz.plugins import ANNOTATION_AUTOSCALER, AutoscalingInput
from llmaz_autoscaler_hpa import HPAAutoscaler
from llmaz_autoscaler_hpa.autoscaler import REASON_MIN_RAISED, REASON_NO_TRIGGER

CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
}
MEMORY = {
    "type": "Resource",
    "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 80}},
}


def playground(elastic: dict[str, Any] | None, config_name: str | None = None) -> Playground:
    spec: dict[str, Any] = {"modelClaim": {"modelName": "qwen"}}
    if config_name:
        spec["backendRuntimeConfig"] = {"backendName": "fake", "configName": config_name}
    if elastic is not None:
        spec["elasticConfig"] = elastic
    # model_validate (schema only): the HPA plugin must also cope with objects the CRD's CEL rules
    # (which from_manifest evaluates) refuse, such as minReplicas 0 stored before the rule existed.
    return Playground.model_validate(
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "Playground",
            "metadata": {"name": "qwen", "namespace": "llm"},
            "spec": spec,
        }
    )


RUNTIME = BackendRuntime.from_manifest(
    {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "BackendRuntime",
        "metadata": {"name": "fake"},
        "spec": {
            "image": "busybox",
            "version": "latest",
            "recommendedConfigs": [
                {"name": "default", "scaleTrigger": {"hpa": {"metrics": [CPU]}}},
                {"name": "fuz", "scaleTrigger": {"hpa": {"metrics": [MEMORY]}}},
                {"name": "bare"},
            ],
        },
    }
)


def render(pg: Playground, config_name: str = "default") -> Any:
    return HPAAutoscaler().render(
        AutoscalingInput(playground=pg, backend_runtime=RUNTIME, config_name=config_name)
    )


def test_hpa_from_elastic_config(snapshot: SnapshotAssertion) -> None:
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 300}}
    out = render(
        playground(
            {
                "minReplicas": 1,
                "maxReplicas": 3,
                "scaleTrigger": {"hpa": {"metrics": [CPU], "behavior": behavior}},
            }
        )
    )
    assert out.objects == snapshot
    assert not out.problems


def test_no_elastic_config_renders_nothing_and_declares_the_kind() -> None:
    out = render(playground(None))
    assert out.objects == []
    assert ("autoscaling/v2", "HorizontalPodAutoscaler") in HPAAutoscaler.managed_kinds


def test_trigger_falls_back_to_the_resolved_config_name() -> None:
    out = render(playground({"maxReplicas": 2}, config_name="fuz"), config_name="fuz")
    assert out.objects[0]["spec"]["metrics"] == [MEMORY]


def test_default_config_trigger() -> None:
    out = render(playground({"maxReplicas": 2}))
    assert out.objects[0]["spec"]["metrics"] == [CPU]
    assert out.objects[0]["spec"]["scaleTargetRef"] == {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Playground",
        "name": "qwen",
    }


def test_playground_trigger_wins_over_the_backends() -> None:
    """llmaz's hpa_test (c): a trigger on both the Playground and the runtime's config."""
    out = render(playground({"maxReplicas": 2, "scaleTrigger": {"hpa": {"metrics": [MEMORY]}}}))
    assert out.objects[0]["spec"]["metrics"] == [MEMORY]


def test_elastic_without_trigger_explains_why() -> None:
    out = render(playground({"maxReplicas": 2}, config_name="bare"), config_name="bare")
    assert out.objects == []
    assert [p.reason for p in out.problems] == [REASON_NO_TRIGGER]
    assert "'bare'" in out.problems[0].message


def test_min_equal_max_is_allowed_and_zero_min_is_raised() -> None:
    out = render(playground({"minReplicas": 2, "maxReplicas": 2}))
    assert (out.objects[0]["spec"]["minReplicas"], out.objects[0]["spec"]["maxReplicas"]) == (2, 2)
    out = render(playground({"minReplicas": 0, "maxReplicas": 2}))
    assert out.objects[0]["spec"]["minReplicas"] == 1
    assert [p.reason for p in out.problems] == [REASON_MIN_RAISED]


def test_no_hpa_when_the_playground_chooses_another_autoscaler() -> None:
    pg = playground({"maxReplicas": 2})
    assert pg.metadata.annotations is None
    chosen = Playground.from_manifest(
        {
            **pg.to_manifest(),
            "metadata": {"name": "qwen", "namespace": "llm", "annotations": {ANNOTATION_AUTOSCALER: "keda"}},
        }
    )
    assert render(chosen).objects == []
    assert render(chosen).problems == []
    named = Playground.from_manifest(
        {
            **pg.to_manifest(),
            "metadata": {"name": "qwen", "namespace": "llm", "annotations": {ANNOTATION_AUTOSCALER: "hpa"}},
        }
    )
    assert render(named).objects[0]["kind"] == "HorizontalPodAutoscaler"
