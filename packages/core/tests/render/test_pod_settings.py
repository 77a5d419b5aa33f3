"""A Playground's ``spec.pod``: what a cluster asks of pods before it runs them (tolerations for
tainted GPU nodes, image pull Secrets, a service account...) reaches every pod template of the
LeaderWorkerSet, leader and workers, next to llmaz's own labels, annotations and flavor affinity.
llmaz (Go)'s Playground had none of these: users had to write the whole inference Service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from render_helpers import StandInBackend, hub, model, one, playground, templates
from typer.testing import CliRunner

from llmaz.api import Playground, Service
from llmaz.cli import app, mount
from llmaz.render import plan, render_playground, render_service

GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
POD = {
    "labels": {"team": "search"},
    "annotations": {"example.com/cost-center": "42"},
    "nodeSelector": {"example.com/pool": "inference"},
    "tolerations": [GPU_TAINT],
    "imagePullSecrets": [{"name": "registry"}],
    "serviceAccountName": "serving",
    "priorityClassName": "llm-high",
    "runtimeClassName": "nvidia",
    "schedulerName": "gpu-scheduler",
}
A100 = {"name": "a100", "limits": {"nvidia.com/gpu": 1}, "nodeSelector": {"gpu": "a100"}}


def _lws_templates(pg: Playground, flavors: list[dict[str, Any]], **kw: Any) -> list[dict[str, Any]]:
    backend = StandInBackend()
    models = [model("m", hub("org/m"), flavors)]
    rendered = render_playground(pg, models, backend.backend_runtime(), backend=backend)
    service = Service.from_manifest(rendered.objects[0])
    return templates(one(render_service(service, models, backend=backend, **kw).objects, "LeaderWorkerSet"))


@pytest.mark.parametrize("nodes", [1, 2])
def test_every_pod_template_carries_the_settings_next_to_llmazs_own(nodes: int) -> None:
    flavor = {**A100, "params": {"NODES": str(nodes)}} if nodes > 1 else A100
    pg = playground("p", {"modelClaim": {"modelName": "m"}, "pod": POD})
    found = _lws_templates(pg, [flavor])
    assert len(found) == nodes  # a group of two has a leader and a worker template
    for template in found:
        meta, spec = template["metadata"], template["spec"]
        assert meta["labels"]["team"] == "search"
        assert meta["labels"]["llmaz.io/model-name"] == "m"
        assert meta["annotations"]["example.com/cost-center"] == "42"
        assert meta["annotations"]["llmaz.io/inference-service-flavors"] == "a100"
        assert spec["nodeSelector"] == {"example.com/pool": "inference"}
        assert spec["tolerations"] == [GPU_TAINT]
        assert spec["imagePullSecrets"] == [{"name": "registry"}]
        assert spec["serviceAccountName"] == "serving"
        assert spec["priorityClassName"] == "llm-high"
        assert spec["runtimeClassName"] == "nvidia"
        assert spec["schedulerName"] == "gpu-scheduler"
        # the flavor's placement is kept: its node selector stays a required node affinity
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert {"key": "gpu", "operator": "In", "values": ["a100"]} in terms["nodeSelectorTerms"][0][
            "matchExpressions"
        ]


def test_templates_do_not_share_the_users_lists() -> None:
    pg = playground("p", {"modelClaim": {"modelName": "m"}, "pod": POD})
    leader, worker = _lws_templates(pg, [{**A100, "params": {"NODES": "2"}}])
    leader["spec"]["tolerations"].append({"key": "x"})
    assert worker["spec"]["tolerations"] == [GPU_TAINT]
    assert pg.spec.pod is not None
    assert pg.spec.pod.tolerations == [GPU_TAINT]


def test_the_playgrounds_scheduler_wins_over_the_operators_default() -> None:
    backend = StandInBackend()
    models = {"m": model("m", hub("org/m"))}
    for pod, expected in (({"schedulerName": "gpu-scheduler"}, "gpu-scheduler"), ({}, "cluster-default")):
        pg = playground("p", {"modelClaim": {"modelName": "m"}, "pod": pod})
        top = plan(pg, models, {"vllm": backend.backend_runtime()}, plugin_runtimes=False)
        assert top.service is not None
        lws = one(
            plan(top.service, models, backend=backend, scheduler_name="cluster-default").objects,
            "LeaderWorkerSet",
        )
        assert [t["spec"].get("schedulerName") for t in templates(lws)] == [expected]


def test_a_playground_without_settings_renders_as_before() -> None:
    (template,) = _lws_templates(playground("p", {"modelClaim": {"modelName": "m"}}), [A100])
    spec = template["spec"]
    for key in ("nodeSelector", "tolerations", "imagePullSecrets", "serviceAccountName", "schedulerName"):
        assert key not in spec
    assert "team" not in template["metadata"]["labels"]


def test_render_refuses_a_label_llmaz_sets_itself_naming_the_field(tmp_path: Path) -> None:
    """The CRD rule runs offline too (``llmaz render`` evaluates the CRDs' CEL rules)."""
    manifest = tmp_path / "pg.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "inference.llmaz.io/v1alpha1",
                    "kind": "Playground",
                    "metadata": {"name": "p"},
                    "spec": {
                        "modelClaim": {"modelName": "m"},
                        "pod": {"labels": {"llmaz.io/model-name": "x"}},
                    },
                }
            ]
        )
    )
    mount()
    result = CliRunner().invoke(app, ["render", "-f", str(manifest), "--no-plugins"])
    assert result.exit_code == 1
    assert (
        "spec.pod.labels: labels under llmaz.io/ and leaderworkerset.sigs.k8s.io/ are set by llmaz"
        in result.stderr
    )
