"""``contains``: a live object that already holds what we apply must not be written again."""

from __future__ import annotations

from llmaz.operator.diff import contains

DESIRED = {
    "metadata": {"name": "a", "labels": {"app.kubernetes.io/managed-by": "llmaz"}},
    "spec": {"replicas": 1, "ports": [{"port": 8080, "protocol": "TCP"}], "cpu": "1"},
}


def test_server_defaults_and_user_labels_are_not_a_difference() -> None:
    live = {
        "metadata": {
            "name": "a",
            "uid": "u",
            "labels": {"app.kubernetes.io/managed-by": "llmaz", "team": "x"},
        },
        "spec": {
            "replicas": 1,
            "ports": [{"port": 8080, "protocol": "TCP", "targetPort": 8080}],
            "cpu": "1000m",
            "clusterIP": "10.0.0.1",
        },
        "status": {"ready": True},
    }
    assert contains(live, DESIRED)


def test_a_changed_owned_field_or_list_length_is_a_difference() -> None:
    live = {
        "metadata": {"name": "a", "labels": {"app.kubernetes.io/managed-by": "llmaz"}},
        "spec": {"replicas": 3, "ports": [{"port": 8080, "protocol": "TCP"}], "cpu": "1"},
    }
    assert not contains(live, DESIRED)
    live["spec"]["replicas"] = 1
    live["spec"]["ports"].append({"port": 9090})
    assert not contains(live, DESIRED)
    assert not contains({"metadata": {"name": "a"}}, DESIRED)
    assert not contains({"spec": {"flag": "true"}}, {"spec": {"flag": True}})


def test_a_digest_that_looks_like_a_huge_exponent_is_compared_as_text() -> None:
    """A 16-hex-digit render hash such as ``4e93284729384729`` matches the quantity syntax with an
    exponent no Decimal can hold: comparing two of them overflowed, and every reconcile of that
    child failed (seen in e2e: a Playground's fallback never completed)."""
    live = {"metadata": {"annotations": {"llmaz.io/render-hash": "4e93284729384729"}}}
    assert contains(live, {"metadata": {"annotations": {"llmaz.io/render-hash": "4e93284729384729"}}})
    assert not contains(live, {"metadata": {"annotations": {"llmaz.io/render-hash": "5e93284729384729"}}})
