"""The small builders render_playground is made of, each on its own."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from render_helpers import StandInBackend, hub, model, playground, runtime

from llmaz.api import BackendRuntimeConfig, LeaderWorkerTemplate, RecommendedConfig, Service
from llmaz.api.conventions import ANNOTATION_SELECTED_FLAVOR, MANAGED_BY, MANAGER, MODEL_RUNNER
from llmaz.plugins import Autoscaler, AutoscalingInput, AutoscalingOutput
from llmaz.render import InvalidManifest
from llmaz.render.models import resolve_claims
from llmaz.render.playground import (
    autoscaler_children,
    build_runner_spec,
    inference_service,
    run_autoscalers,
    runner_container,
)

BACKEND = StandInBackend()
RUNTIME = runtime(BACKEND)


def test_runner_spec_playground_overrides_win_over_the_runtime_and_config() -> None:
    config = RecommendedConfig(name="default", resources={"requests": {"cpu": "2"}}, shared_memory_size="1Gi")
    overrides = BackendRuntimeConfig.model_validate(
        {
            "backendName": "standin",
            "version": "v9",
            "envs": [{"name": "EXTRA", "value": "1"}],
            "resources": {"requests": {"cpu": "4"}},
            "sharedMemorySize": "2Gi",
            "args": ["--verbose"],
        }
    )
    spec = build_runner_spec(RUNTIME, overrides, config, BACKEND)
    assert spec.image == f"{BACKEND.image}:v9"
    assert {"name": "EXTRA", "value": "1"} in spec.envs
    assert spec.resources["requests"]["cpu"] == "4"
    assert (spec.shm, spec.extra_args, spec.port) == ("2Gi", ["--verbose"], BACKEND.port)
    plain = build_runner_spec(RUNTIME, None, config, BACKEND)
    assert (plain.image, plain.shm, plain.extra_args) == (f"{BACKEND.image}:{BACKEND.version}", "1Gi", [])
    assert plain.resources["requests"]["cpu"] == "2"


def test_only_a_container_that_serves_http_gets_port_probes_and_drain() -> None:
    spec = build_runner_spec(RUNTIME, None, None, BACKEND)
    leader = runner_container(spec, ["serve"], ["--x"], serves_http=True)
    worker = runner_container(spec, ["join"], [], serves_http=False)
    assert leader["name"] == worker["name"] == MODEL_RUNNER
    assert leader["ports"][0]["containerPort"] == BACKEND.port
    assert "readinessProbe" in leader
    assert "lifecycle" in leader
    assert not {"ports", "readinessProbe", "startupProbe", "livenessProbe", "lifecycle", "args"} & set(worker)


class _Scaler(Autoscaler):
    managed_kinds: ClassVar[tuple[tuple[str, str], ...]] = (("v1", "ConfigMap"),)

    def __init__(self, name: str, objects: list[dict[str, Any]] | None = None) -> None:
        self.name = name  # type: ignore[misc]
        self._objects = objects or []

    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        return AutoscalingOutput(
            objects=self._objects, pod_labels={"by": self.name}, pod_annotations={self.name: "1"}
        )


def _request() -> AutoscalingInput:
    return AutoscalingInput(
        playground=playground("p", {"modelClaim": {"modelName": "m"}}),
        models=[model("m", hub("o/m"))],
        backend_runtime=RUNTIME,
        config_name="default",
        flavors=[],
    )


def test_autoscalers_run_in_name_order_whatever_the_plugin_order() -> None:
    results = run_autoscalers([_Scaler("zeta"), _Scaler("alpha")], _request())
    assert [s.name for s, _ in results.outputs] == ["alpha", "zeta"]
    assert results.pod_labels == {"by": "zeta"}  # the last in name order wins, every time
    assert results.pod_annotations == {"alpha": "1", "zeta": "1"}
    assert results.prune_kinds == (("v1", "ConfigMap"),)  # managed by both, listed once


def test_autoscaler_children_are_labelled_and_kept_in_the_namespace() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "b"}}}
    results = run_autoscalers([_Scaler("s", [obj])], _request())
    (child,) = autoscaler_children(results.outputs, "team")
    assert child["metadata"] == {"name": "c", "labels": {"a": "b", MANAGED_BY: MANAGER}, "namespace": "team"}
    assert obj["metadata"] == {"name": "c", "labels": {"a": "b"}}  # the plugin's object is not mutated
    elsewhere = {**obj, "metadata": {"name": "c", "namespace": "other"}}
    results = run_autoscalers([_Scaler("s", [elsewhere])], _request())
    with pytest.raises(InvalidManifest, match="autoscaler 's' rendered object #0 in namespace 'other'"):
        autoscaler_children(results.outputs, "team")


def test_inference_service_names_a_fallback_flavor_only_when_one_was_selected() -> None:
    pg = playground("p", {"modelClaim": {"modelName": "m"}, "replicas": 3}, namespace="team")
    claimed = resolve_claims(pg.spec.model_claim, pg.spec.model_claims, [model("m", hub("o/m"))])
    workload = LeaderWorkerTemplate(worker_template={"spec": {"containers": [{"name": MODEL_RUNNER}]}})
    plain = inference_service(pg, claimed, workload, skip_loader=False, selected_flavor=None)
    assert isinstance(plain, Service)
    assert (plain.metadata.namespace, plain.spec.replicas) == ("team", 3)
    assert plain.metadata.annotations is None
    fallback = inference_service(pg, claimed, workload, skip_loader=False, selected_flavor="l4")
    assert fallback.metadata.annotations == {ANNOTATION_SELECTED_FLAVOR: "l4"}


def test_inference_service_manifest_writes_what_llmaz_sets_and_no_unset_defaults() -> None:
    """The manifest is the typed Service dumped once: every claimed role is written (main too), the
    rollout strategy is explicit, and fields llmaz does not set (a namespace the Playground lacks,
    annotations, claimed flavors, the workload's size) stay out rather than appear as nulls."""
    pg = playground("p", {"modelClaim": {"modelName": "m"}})
    claimed = resolve_claims(pg.spec.model_claim, pg.spec.model_claims, [model("m", hub("o/m"))])
    template = {"spec": {"containers": [{"name": MODEL_RUNNER}]}}
    manifest = inference_service(
        pg, claimed, LeaderWorkerTemplate(worker_template=template), skip_loader=False, selected_flavor=None
    ).to_manifest()
    assert manifest == {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Service",
        "metadata": {"name": "p", "labels": {MANAGED_BY: MANAGER, "llmaz.io/model-name": "m"}},
        "spec": {
            "modelClaims": {"models": [{"name": "m", "role": "main"}]},
            "replicas": 1,
            "workloadTemplate": {"workerTemplate": template},
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0},
            },
        },
    }
