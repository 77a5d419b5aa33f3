"""The operator's flavor-fallback choice for a Playground: pure, with pods and ``now`` injected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llmaz.api import OpenModel, Playground
from llmaz.operator.config import OperatorConfig
from llmaz.operator.flavors import choose_flavor
from llmaz.operator.status import Observation, compute_status, status_changed
from llmaz.render import InvalidManifest
from llmaz.render.fallback import Action

T0 = datetime(2026, 1, 1, tzinfo=UTC)
A100 = {"name": "a100x8", "limits": {"nvidia.com/gpu": 8}, "nodeSelector": {"gpu": "a100"}}
L4 = {"name": "l4", "limits": {"nvidia.com/gpu": 1}, "nodeSelector": {"gpu": "l4"}}
CONFIG = OperatorConfig.model_validate(
    {"flavorFallback": {"unschedulableSeconds": 60, "retryAllSeconds": 600}}
)


def models(*flavors: dict[str, Any]) -> dict[str, OpenModel]:
    om = OpenModel.from_manifest(
        {
            "apiVersion": "llmaz.io/v1alpha1",
            "kind": "OpenModel",
            "metadata": {"name": "m"},
            "spec": {
                "familyName": "qwen2",
                "source": {"modelHub": {"modelID": "Qwen/Qwen2-7B"}},
                "inferenceConfig": {"flavors": list(flavors)},
            },
        }
    )
    return {"m": om}


def pg(annotations: dict[str, str] | None = None) -> Playground:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if annotations:
        meta["annotations"] = annotations
    return Playground.from_manifest(
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "Playground",
            "metadata": meta,
            "spec": {"replicas": 1, "modelClaim": {"modelName": "m"}},
        }
    )


def unschedulable(since: datetime) -> dict[str, Any]:
    stamp = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {"name": "p-0", "labels": {}},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
                    "lastTransitionTime": stamp,
                }
            ],
        },
    }


def ready() -> dict[str, Any]:
    return {
        "metadata": {"name": "p-0", "labels": {}},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_one_flavor_or_dra_mode_needs_no_choice() -> None:
    assert choose_flavor(CONFIG, pg(), models(A100), None, pods=[], now=T0) is None
    dra = OperatorConfig.model_validate({"dra": {"enabled": True, "deviceClass": "gpu.example.com"}})
    assert choose_flavor(dra, pg(), models(A100, L4), None, pods=[], now=T0) is None


def test_first_selection_is_recorded_without_an_annotation() -> None:
    choice = choose_flavor(CONFIG, pg(), models(A100, L4), None, pods=[], now=T0)
    assert choice is not None
    assert choice.render_flavor is None  # the default flavor: the Service carries no selection
    assert choice.status == {"selected": "a100x8", "tried": [], "selectedAt": "2026-01-01T00:00:00Z"}
    assert not choice.moved


def test_moves_after_the_configured_time_and_keeps_selected_at_while_staying() -> None:
    status = {"flavor": {"selected": "a100x8", "tried": [], "selectedAt": "2026-01-01T00:00:00Z"}}
    pods = [unschedulable(T0)]
    early = choose_flavor(CONFIG, pg(), models(A100, L4), status, pods=pods, now=T0 + timedelta(seconds=20))
    assert early is not None
    assert early.decision.action is Action.STAY
    assert early.decision.recheck_after == pytest.approx(40)
    assert early.status == status["flavor"]  # nothing to write while waiting
    later = T0 + timedelta(seconds=61)
    moved = choose_flavor(CONFIG, pg(), models(A100, L4), status, pods=pods, now=later)
    assert moved is not None
    assert moved.moved
    assert moved.render_flavor == "l4"
    assert moved.status == {"selected": "l4", "tried": ["a100x8"], "selectedAt": "2026-01-01T00:01:01Z"}
    assert "moving to flavor 'l4'" in moved.decision.message


def test_never_moves_while_a_pod_is_ready_and_annotation_overrides_delay() -> None:
    status = {"flavor": {"selected": "a100x8", "tried": [], "selectedAt": "2026-01-01T00:00:00Z"}}
    later = T0 + timedelta(hours=1)
    stay = choose_flavor(CONFIG, pg(), models(A100, L4), status, pods=[ready(), unschedulable(T0)], now=later)
    assert stay is not None
    assert stay.decision.action is Action.STAY
    fast = pg({"llmaz.io/flavor-fallback-seconds": "5"})
    soon = choose_flavor(
        CONFIG, fast, models(A100, L4), status, pods=[unschedulable(T0)], now=T0 + timedelta(seconds=6)
    )
    assert soon is not None
    assert soon.decision.action is Action.MOVE
    with pytest.raises(InvalidManifest, match=r"flavor-fallback-seconds.*'soon'"):
        choose_flavor(
            CONFIG,
            pg({"llmaz.io/flavor-fallback-seconds": "soon"}),
            models(A100, L4),
            status,
            pods=[],
            now=T0,
        )


def test_diagnosis_decides_available_and_flavor_is_part_of_status() -> None:
    flavor = {"selected": "l4", "tried": ["a100x8"], "selectedAt": "2026-01-01T00:00:00Z"}
    seen = Observation(
        generation=1,
        workload=("Unschedulable", "pod p-0 cannot be scheduled on flavor 'l4': no node"),
        failing=True,
        flavor=flavor,
    )
    status = compute_status("Playground", seen, None, T0)
    conds = {c["type"]: c for c in status["conditions"]}
    assert (conds["Available"]["status"], conds["Available"]["reason"]) == ("False", "Unschedulable")
    assert conds["Progressing"]["status"] == "True"  # fallback may still resolve it
    assert status["flavor"] == flavor
    crash = compute_status(
        "Playground", Observation(generation=1, workload=("CrashLoopBackOff", "x"), failing=True), status, T0
    )
    assert {c["type"]: c["status"] for c in crash["conditions"]}["Progressing"] == "False"
    moved = Observation(
        generation=1, workload=seen.workload, failing=True, flavor={**flavor, "selected": "x"}
    )
    assert status_changed(status, compute_status("Playground", moved, status, T0))
    assert not status_changed(status, compute_status("Playground", seen, status, T0))


def test_pods_of_the_previous_flavor_do_not_count_against_the_new_one() -> None:
    moved_at = T0 + timedelta(seconds=61)
    status = {"flavor": {"selected": "l4", "tried": ["a100x8"], "selectedAt": "2026-01-01T00:01:01Z"}}
    old_pod = unschedulable(T0)
    old_pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    later = moved_at + timedelta(minutes=10)
    stay = choose_flavor(CONFIG, pg(), models(A100, L4), status, pods=[old_pod], now=later)
    assert stay is not None
    assert stay.decision.action is Action.STAY  # the a100x8 pod LWS has not replaced yet
    new_pod = unschedulable(moved_at)
    new_pod["metadata"]["creationTimestamp"] = "2026-01-01T00:01:01Z"
    gone = choose_flavor(CONFIG, pg(), models(A100, L4), status, pods=[old_pod, new_pod], now=later)
    assert gone is not None
    assert gone.decision.action is Action.EXHAUSTED


def test_first_flavor_counts_from_the_playground_creation() -> None:
    created = "2025-12-31T23:59:00Z"
    choice = choose_flavor(CONFIG, pg(), models(A100, L4), None, pods=[], now=T0, created=created)
    assert choice is not None
    assert choice.status["selectedAt"] == created
