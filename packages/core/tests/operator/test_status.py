"""Status conditions are pure functions of what the operator saw, with ``now`` injected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from llmaz.operator.status import (
    IntegrationProblem,
    Observation,
    compute_status,
    condition_differs,
    error_reason,
    event_wanted,
    integrations_condition,
    managed_by_condition,
    progress_only,
    same_reason,
    status_changed,
    with_condition,
)
from llmaz.render import ModelNotFound, UnknownTemplateVariable
from llmaz.render.objects import leader_selector

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def conditions(status: dict) -> dict[str, dict]:
    return {c["type"]: c for c in status["conditions"]}


def test_blocked_reason_shows_on_available_with_generation_and_time() -> None:
    status = compute_status(
        "Playground",
        Observation(generation=3, blocked=("ModelNotFound", "OpenModel 'x' not found")),
        None,
        T0,
    )
    c = conditions(status)
    assert c["Available"]["status"] == "False"
    assert c["Available"]["reason"] == "ModelNotFound"
    assert c["Progressing"] == {
        "type": "Progressing",
        "status": "False",
        "reason": "ModelNotFound",
        "message": "OpenModel 'x' not found",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 3,
    }
    assert status["replicas"] == 0


def test_transition_time_only_moves_when_the_status_flips() -> None:
    pending = compute_status("Service", Observation(generation=1, desired=2, ready=1), None, T0)
    still = compute_status("Service", Observation(generation=1, desired=2, ready=1), pending, T1)
    assert not status_changed(pending, still)
    assert conditions(still)["Available"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    ready = compute_status(
        "Service", Observation(generation=1, desired=2, ready=2, available=True, selector="a=b"), still, T1
    )
    assert status_changed(still, ready)
    c = conditions(ready)
    assert (c["Available"]["status"], c["Available"]["reason"]) == ("True", "Available")
    assert c["Available"]["lastTransitionTime"] == "2026-01-01T00:05:00Z"
    assert (c["Progressing"]["status"], c["Progressing"]["reason"]) == ("False", "Available")
    assert ready["replicas"] == 2
    assert ready["selector"] == "a=b"


def test_available_needs_every_desired_replica() -> None:
    status = compute_status(
        "Playground", Observation(generation=1, desired=3, ready=2, available=True), None, T0
    )
    assert conditions(status)["Available"]["reason"] == "Pending"


def test_template_errors_are_invalid_template() -> None:
    err = UnknownTemplateVariable("spec.x", "no TP", variable="TP", config="default")
    assert error_reason(err) == "InvalidTemplate"
    assert error_reason(ModelNotFound("spec.modelClaim.modelName", "missing")) == "ModelNotFound"


class _Plugins:
    backends = {"vllm": object()}

    def owner_of_backend(self, name: str) -> object:
        class Info:
            distribution = "llmaz-backend-vllm"

        return Info()


def test_backendruntime_says_who_manages_it() -> None:
    managed = {"app.kubernetes.io/managed-by": "llmaz"}
    plugin = managed_by_condition(managed, "vllm", _Plugins(), 1, None, T0)
    assert (plugin["status"], plugin["reason"]) == ("True", "Plugin")
    assert "llmaz-backend-vllm" in plugin["message"]
    gone = managed_by_condition(managed, "tgi", _Plugins(), 1, None, T0)
    assert gone["reason"] == "PluginNotInstalled"
    user = managed_by_condition({}, "vllm", _Plugins(), 1, None, T0)
    assert user["reason"] == "UserCreated"


def test_in_use_names_users_and_says_unused() -> None:
    from llmaz.operator.status import in_use_condition

    users = [("Playground", "a", f"p{i}") for i in range(12)]
    cond = in_use_condition(users, 1, None, T0)
    assert (cond["status"], cond["reason"]) == ("True", "Referenced")
    assert cond["message"].startswith("used by 12 objects: Playground a/p0, ")
    assert cond["message"].endswith(" and 2 more")
    assert in_use_condition([], 1, None, T0)["reason"] == "Unused"


# ------------------------------------------------------------------------------ IntegrationsReady

MISSING = IntegrationProblem("CRDNotInstalled", "AIServiceBackend is not installed: install its CRDs")
NO_GATEWAY = IntegrationProblem("GatewayNotFound", "Gateway llm/llmaz-gateway does not exist: create it")


def test_integrations_condition_is_false_with_every_problem_in_a_stable_order() -> None:
    one = integrations_condition({"Backend"}, [NO_GATEWAY, MISSING, MISSING], 4, None, T0)
    two = integrations_condition({"Backend"}, [MISSING, NO_GATEWAY], 4, None, T0)
    assert one == two
    assert one is not None
    assert (one["type"], one["status"], one["reason"]) == ("IntegrationsReady", "False", "CRDNotInstalled")
    assert one["message"] == f"{MISSING.message}; {NO_GATEWAY.message}"
    assert one["observedGeneration"] == 4


def test_integrations_condition_is_true_naming_the_kinds_and_absent_when_nothing_applies() -> None:
    failing = integrations_condition(set(), [MISSING], 1, None, T0)
    fixed = integrations_condition({"Backend", "AIServiceBackend"}, [], 1, {"conditions": [failing]}, T1)
    assert fixed is not None
    assert (fixed["status"], fixed["reason"]) == ("True", "Applied")
    assert fixed["message"] == "in place: AIServiceBackend, Backend"
    assert fixed["lastTransitionTime"] == "2026-01-01T00:05:00Z"  # the status changed
    again = integrations_condition(
        {"Backend", "AIServiceBackend"}, [], 1, {"conditions": [fixed]}, T1 + timedelta(hours=1)
    )
    assert again is not None
    assert again["lastTransitionTime"] == fixed["lastTransitionTime"]
    assert integrations_condition(set(), [], 1, None, T0) is None


def test_a_long_list_of_problems_is_cut() -> None:
    many = [IntegrationProblem("Rejected", f"object {i} " + "x" * 100) for i in range(20)]
    cond = integrations_condition(set(), many, 1, None, T0)
    assert cond is not None
    assert len(cond["message"]) == 1024
    assert cond["message"].endswith("...")


def test_compute_status_keeps_the_condition_the_integration_reconcile_owns() -> None:
    integrations = integrations_condition(set(), [MISSING], 2, None, T0)
    before = {"conditions": [integrations], "replicas": 0}
    status = compute_status(
        "Playground", Observation(generation=2, desired=1, ready=1, available=True), before, T1
    )
    c = conditions(status)
    assert set(c) == {"Progressing", "Available", "IntegrationsReady"}
    assert c["IntegrationsReady"] == integrations
    # and a status whose only change would be dropping it is not a change it makes
    assert not status_changed(
        status,
        compute_status(
            "Playground", Observation(generation=2, desired=1, ready=1, available=True), status, T1
        ),
    )


def test_with_condition_replaces_or_removes_one_type_and_differs_ignores_time() -> None:
    status = compute_status("Service", Observation(generation=1), None, T0)
    cond = integrations_condition({"PodMonitor"}, [], 1, None, T0)
    added = {"conditions": with_condition(status, cond, "IntegrationsReady")}
    assert [c["type"] for c in added["conditions"]] == ["Progressing", "Available", "IntegrationsReady"]
    assert condition_differs(status, cond, "IntegrationsReady")
    assert cond is not None
    later = {**cond, "lastTransitionTime": "2030-01-01T00:00:00Z"}
    assert not condition_differs(added, later, "IntegrationsReady")
    removed = {"conditions": with_condition(added, None, "IntegrationsReady")}
    assert removed == {"conditions": status["conditions"]}
    assert not condition_differs(removed, None, "IntegrationsReady")


def _status(reason: str, message: str, *, generation: int = 1, ready: int = 0, failing: bool = False) -> dict:
    return compute_status(
        "Playground",
        Observation(generation=generation, ready=ready, workload=(reason, message), failing=failing),
        None,
        T0,
    )


def test_rollout_progress_may_wait_but_availability_failures_and_spec_changes_may_not() -> None:
    waiting = _status("Pending", "0/1 replicas ready; waiting for pods to be created")
    pod_pending = _status("Pending", "pod pg-0-0 is Pending; 0/1 replicas ready")
    loading = _status("Loading", "model-loader downloading; 0/1 replicas ready")
    # superseded within a moment by the next state: not worth a write of its own
    assert progress_only(waiting, pod_pending)
    assert progress_only(pod_pending, loading)
    # the first status too, when it only says the rollout is under way: a pod Ready within the
    # moment makes the first status Available, one write instead of two (issue 15)
    assert progress_only(None, waiting)
    assert progress_only({"conditions": [{"type": "IntegrationsReady", "status": "True"}]}, loading)
    # becoming available, losing it, a failure, a blocked render, a new generation: written at once
    assert not progress_only(None, _status("Available", "1/1 replicas ready", ready=1))
    assert not progress_only(None, _status("ImagePullBackOff", "no such image", failing=True))
    assert not progress_only(loading, _status("Available", "1/1 replicas ready", ready=1))
    assert not progress_only(_status("Available", "1/1 replicas ready", ready=1), waiting)
    assert not progress_only(loading, _status("CrashLoopBackOff", "engine exits", failing=True))
    assert not progress_only(_status("ImagePullBackOff", "no such image", failing=True), loading)
    assert not progress_only(waiting, _status("Pending", "0/2 replicas ready", generation=2))
    blocked = compute_status(
        "Playground", Observation(generation=1, blocked=("ModelNotFound", "x")), None, T0
    )
    assert not progress_only(waiting, blocked)
    assert not progress_only(None, blocked)


def test_a_change_of_message_only_keeps_the_reason_a_user_sees() -> None:
    waiting = _status("Pending", "0/1 replicas ready; waiting for pods to be created")
    pod_pending = _status("Pending", "pod pg-0-0 is Pending; 0/1 replicas ready")
    loading = _status("Loading", "model-loader downloading; 0/1 replicas ready")
    assert same_reason(waiting, pod_pending)
    assert not same_reason(pod_pending, loading)
    assert not same_reason(None, waiting)  # the first status
    assert not same_reason(loading, _status("Available", "1/1 replicas ready", ready=1))


def test_events_tell_of_problems_and_their_end_not_of_rollout_steps() -> None:
    waiting = _status("Pending", "0/1 replicas ready; waiting for pods to be created")
    available = _status("Available", "1/1 replicas ready", ready=1)
    unschedulable = _status("Unschedulable", "0/3 nodes have a free nvidia.com/gpu")
    missing_model = _status("ModelNotFound", "OpenModel qwen not found")
    # a first Pending or Available, becoming Available after Pending, losing availability to a
    # waiting reason: the condition and its lastTransitionTime say it all
    assert not event_wanted(None, warning=False)
    assert not event_wanted({"conditions": []}, warning=False)
    assert not event_wanted(waiting, warning=False)
    assert not event_wanted(available, warning=False)
    # a reason a user must act on has its Event, first status or not
    assert event_wanted(None, warning=True)
    assert event_wanted(waiting, warning=True)
    assert event_wanted(available, warning=True)
    # and so has its end, whatever comes next (a pod failure or a blocked render alike)
    assert event_wanted(unschedulable, warning=False)
    assert event_wanted(missing_model, warning=False)


def test_leader_selector_is_what_the_lws_controller_reports() -> None:
    # LWS v0.9 writes labels.SelectorFromSet({name, worker-index: "0"}).String(): keys sorted
    assert leader_selector("chat") == (
        "leaderworkerset.sigs.k8s.io/name=chat,leaderworkerset.sigs.k8s.io/worker-index=0"
    )


def test_autoscaler_problems_show_in_autoscaling_ready_only_while_there_are_some() -> None:
    serving = {"generation": 2, "desired": 1, "ready": 1, "available": True}
    fine = compute_status("Playground", Observation(**serving), None, T0)
    assert "AutoscalingReady" not in conditions(fine)  # nothing to say, nothing written
    one = (("NoScaleTrigger", "no scale trigger: no HPA"),)
    told = compute_status("Playground", Observation(**serving, scaling=one), fine, T0)
    assert conditions(told)["AutoscalingReady"] == {
        "type": "AutoscalingReady",
        "status": "False",
        "reason": "NoScaleTrigger",
        "message": "no scale trigger: no HPA",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 2,
    }
    assert conditions(told)["Available"]["status"] == "True"  # the model still serves
    assert not status_changed(
        told, compute_status("Playground", Observation(**serving, scaling=one), told, T1)
    )
    two = (*one, ("UnknownAutoscaler", "'kedaa' names no installed autoscaler"))
    both = conditions(compute_status("Playground", Observation(**serving, scaling=two), told, T1))
    assert both["AutoscalingReady"]["message"] == (
        "NoScaleTrigger: no scale trigger: no HPA; UnknownAutoscaler: 'kedaa' names no installed autoscaler"
    )
    assert both["AutoscalingReady"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    fixed = compute_status("Playground", Observation(**serving), told, T1)
    assert "AutoscalingReady" not in conditions(fixed)
    assert status_changed(told, fixed)
