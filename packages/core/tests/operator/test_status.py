"""Status conditions are pure functions of what the operator saw, with ``now`` injected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from llmaz.operator.status import (
    Observation,
    compute_status,
    error_reason,
    managed_by_condition,
    status_changed,
)
from llmaz.render import ModelNotFound, UnknownTemplateVariable

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
