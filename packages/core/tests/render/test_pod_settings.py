"""A Playground's ``spec.pod``: what a cluster asks of pods before it runs them (tolerations for
tainted GPU nodes, image pull Secrets, a service account...) reaches every pod template of the
LeaderWorkerSet, leader and workers, next to llmaz's own labels, annotations and flavor affinity.
llmaz (Go)'s Playground had none of these: users had to write the whole inference Service."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from render_helpers import StandInAutoscaler, StandInBackend, hub, model, one, playground, templates
from typer.testing import CliRunner

from llmaz.api import Playground, Service
from llmaz.cli import app, mount
from llmaz.plugins.autoscaler import AutoscalingInput, AutoscalingOutput, NodeAffinityHints
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


def _lws_templates(
    pg: Playground, flavors: list[dict[str, Any]], *, autoscalers: tuple[Any, ...] = (), **kw: Any
) -> list[dict[str, Any]]:
    backend = StandInBackend()
    models = [model("m", hub("org/m"), flavors)]
    rendered = render_playground(
        pg, models, backend.backend_runtime(), backend=backend, autoscalers=autoscalers
    )
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


# --- affinity and topology spread -------------------------------------------------------------

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
H100 = {"name": "h100", "limits": {"nvidia.com/gpu": 1}, "nodeSelector": {"gpu": "h100"}}
F_A100 = {"key": "gpu", "operator": "In", "values": ["a100"]}
F_H100 = {"key": "gpu", "operator": "In", "values": ["h100"]}
ZONE_A = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}
SPOT = {"key": "example.com/capacity", "operator": "NotIn", "values": ["spot"]}
NODE_1 = {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
USER_TERMS = [
    {"matchExpressions": [ZONE_A, SPOT]},
    {"matchExpressions": [SPOT], "matchFields": [NODE_1]},
]
USER_PREFERRED = [{"weight": 5, "preference": {"matchExpressions": [ZONE_A]}}]
ANTI = {
    "requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "other"}}, "topologyKey": "kubernetes.io/hostname"}
    ]
}
TOGETHER = {
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {
            "weight": 10,
            "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"app": "cache"}},
                "topologyKey": "topology.kubernetes.io/zone",
            },
        }
    ]
}
SPREAD = {
    "maxSkew": 1,
    "topologyKey": "topology.kubernetes.io/zone",
    "whenUnsatisfiable": "ScheduleAnyway",
    "labelSelector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "p"}},
    "matchLabelKeys": ["leaderworkerset.sigs.k8s.io/template-revision-hash"],
}


def _node_affinity(template: dict[str, Any]) -> dict[str, Any]:
    node = template["spec"]["affinity"]["nodeAffinity"]
    assert isinstance(node, dict)
    return node


def _service_template(pg: Playground, flavors: list[dict[str, Any]]) -> dict[str, Any]:
    """The worker template of the Service a Playground renders to (before render_service's merge)."""
    backend = StandInBackend()
    rendered = render_playground(
        pg, [model("m", hub("org/m"), flavors)], backend.backend_runtime(), backend=backend
    )
    template = rendered.objects[0]["spec"]["workloadTemplate"]["workerTemplate"]
    assert isinstance(template, dict)
    return template


def test_required_node_affinity_is_the_cross_product_of_the_flavors_and_the_users_terms() -> None:
    """(a100 or h100) and (U1 or U2) = four terms, flavor order outer and user order inner, each with
    both terms' matchExpressions (the flavor's first) and matchFields. The Service the Playground
    renders carries them, and the LeaderWorkerSet after render_service's own merge still does."""
    pg = playground(
        "p",
        {
            "modelClaim": {"modelName": "m"},
            "pod": {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": USER_TERMS}}}},
        },
    )
    expected = [
        {"matchExpressions": [F_A100, ZONE_A, SPOT]},
        {"matchExpressions": [F_A100, SPOT], "matchFields": [NODE_1]},
        {"matchExpressions": [F_H100, ZONE_A, SPOT]},
        {"matchExpressions": [F_H100, SPOT], "matchFields": [NODE_1]},
    ]
    assert _node_affinity(_service_template(pg, [A100, H100]))[REQUIRED] == {"nodeSelectorTerms": expected}
    (template,) = _lws_templates(pg, [A100, H100])
    assert _node_affinity(template)[REQUIRED] == {"nodeSelectorTerms": expected}


def test_identical_pairs_give_one_term() -> None:
    """Two flavors with one node selector (one term) and a user term listed twice: one term."""
    twin = {**H100, "name": "a100-spot", "nodeSelector": {"gpu": "a100"}}
    user = [{"matchExpressions": [ZONE_A]}, {"matchExpressions": [ZONE_A]}]
    pg = playground(
        "p",
        {
            "modelClaim": {"modelName": "m"},
            "pod": {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": user}}}},
        },
    )
    node = _node_affinity(_service_template(pg, [A100, twin]))
    assert node[REQUIRED] == {"nodeSelectorTerms": [{"matchExpressions": [F_A100, ZONE_A]}]}


def test_the_users_required_terms_alone_when_no_flavor_selects_nodes() -> None:
    no_selector = {"name": "cpu", "limits": {"cpu": 4}}
    pod = {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": USER_TERMS}}}}
    for flavors in ([], [no_selector]):
        pg = playground("p", {"modelClaim": {"modelName": "m"}, "pod": pod})
        (template,) = _lws_templates(pg, flavors)
        assert _node_affinity(template) == {REQUIRED: {"nodeSelectorTerms": USER_TERMS}}


def test_the_flavors_required_terms_alone_when_the_user_gives_none() -> None:
    """Only preferred terms, or only pod anti-affinity, from the user: the flavors' required terms
    are unchanged."""
    flavor_terms = {"nodeSelectorTerms": [{"matchExpressions": [F_A100]}, {"matchExpressions": [F_H100]}]}
    for affinity in ({"nodeAffinity": {PREFERRED: USER_PREFERRED}}, {"podAntiAffinity": ANTI}):
        pg = playground("p", {"modelClaim": {"modelName": "m"}, "pod": {"affinity": affinity}})
        (template,) = _lws_templates(pg, [A100, H100])
        assert _node_affinity(template)[REQUIRED] == flavor_terms


class _PreferringAutoscaler(StandInAutoscaler):
    """Test double: an autoscaler with a preferred node-affinity hint."""

    name = "prefers"

    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        hint = {"weight": 3, "preference": {"matchExpressions": [{"key": "warm", "operator": "Exists"}]}}
        return AutoscalingOutput(node_affinity_hints=NodeAffinityHints(preferred=[hint]))


def test_preferred_terms_are_the_flavors_then_the_autoscalers_then_the_users() -> None:
    pg = playground(
        "p",
        {
            "modelClaim": {"modelName": "m"},
            "pod": {"affinity": {"nodeAffinity": {PREFERRED: USER_PREFERRED}}},
        },
    )
    (template,) = _lws_templates(pg, [A100, H100], autoscalers=(_PreferringAutoscaler(),))
    preferred = _node_affinity(template)[PREFERRED]
    assert [p["preference"]["matchExpressions"] for p in preferred] == [
        [F_A100],  # the flavors' fallback order, highest weight first
        [F_H100],
        [{"key": "warm", "operator": "Exists"}],
        [ZONE_A],
    ]
    assert preferred[-1] == USER_PREFERRED[0]
    assert preferred[0]["weight"] > preferred[1]["weight"]


def test_pod_affinity_and_spread_reach_the_leader_and_the_workers_of_a_multi_host_playground() -> None:
    pod = {
        "affinity": {
            "podAffinity": TOGETHER,
            "podAntiAffinity": ANTI,
            "nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [ZONE_A]}]}},
        },
        "topologySpreadConstraints": [SPREAD],
    }
    pg = playground("p", {"modelClaim": {"modelName": "m"}, "pod": pod})
    found = _lws_templates(pg, [{**A100, "params": {"NODES": "2"}}])
    assert len(found) == 2  # leader and worker templates
    for template in found:
        affinity = template["spec"]["affinity"]
        assert affinity["podAffinity"] == TOGETHER
        assert affinity["podAntiAffinity"] == ANTI
        assert affinity["nodeAffinity"][REQUIRED] == {
            "nodeSelectorTerms": [{"matchExpressions": [F_A100, ZONE_A]}]
        }
        assert template["spec"]["topologySpreadConstraints"] == [SPREAD]


def test_rendering_changes_no_input_and_templates_share_nothing() -> None:
    pod = {
        "affinity": {
            "podAffinity": TOGETHER,
            "podAntiAffinity": ANTI,
            "nodeAffinity": {REQUIRED: {"nodeSelectorTerms": USER_TERMS}, PREFERRED: USER_PREFERRED},
        },
        "topologySpreadConstraints": [SPREAD],
    }
    before = copy.deepcopy(pod)
    pg = playground("p", {"modelClaim": {"modelName": "m"}, "pod": pod})
    flavors = [{**A100, "params": {"NODES": "2"}}, {**H100, "params": {"NODES": "2"}}]
    leader, worker = _lws_templates(pg, flavors)
    again = _lws_templates(pg, flavors)
    assert pg.spec.pod is not None
    assert pg.spec.pod.model_dump(by_alias=True, exclude_none=True) == before
    assert pod == before
    # a change to one template's lists reaches neither the other template nor the Playground
    _node_affinity(leader)[REQUIRED]["nodeSelectorTerms"][0]["matchExpressions"].append({"key": "x"})
    _node_affinity(leader)[PREFERRED].append({"weight": 1})
    leader["spec"]["affinity"]["podAntiAffinity"][REQUIRED].append({"topologyKey": "x"})
    leader["spec"]["topologySpreadConstraints"][0]["matchLabelKeys"].append("x")
    assert worker == again[1]
    assert pg.spec.pod.model_dump(by_alias=True, exclude_none=True) == before


def test_a_playground_without_affinity_keeps_the_flavors_node_affinity_only() -> None:
    (template,) = _lws_templates(playground("p", {"modelClaim": {"modelName": "m"}}), [A100, H100])
    assert set(template["spec"]["affinity"]) == {"nodeAffinity"}
    assert "topologySpreadConstraints" not in template["spec"]
