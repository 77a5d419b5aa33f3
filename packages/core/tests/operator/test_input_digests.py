"""Which OpenModel/BackendRuntime events re-reconcile their dependents (issue 15): a change of what
the dependents render from does; the operator's own status writes do not."""

from __future__ import annotations

import copy
from typing import Any

from llmaz.operator.handlers._common import InputDigests


def model(rv: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "llmaz.io/v1alpha1",
        "kind": "OpenModel",
        "metadata": {"name": "qwen", "uid": "u-1", "resourceVersion": rv, "labels": {"team": "a"}},
        "spec": {"familyName": "qwen2", **spec},
    }


def test_status_and_bookkeeping_changes_do_not_reach_dependents() -> None:
    inputs = InputDigests()
    first = model("1")
    assert inputs.changed(None, first)  # the initial listing records it
    in_use = copy.deepcopy(first)
    in_use["metadata"]["resourceVersion"] = "2"
    in_use["metadata"]["managedFields"] = [{"manager": "llmaz", "operation": "Update"}]
    in_use["status"] = {"conditions": [{"type": "InUse", "status": "True"}]}
    assert not inputs.changed("MODIFIED", in_use)


def test_spec_labels_and_deletion_reach_dependents() -> None:
    inputs = InputDigests()
    inputs.changed("ADDED", model("1"))
    assert inputs.changed("MODIFIED", model("2", familyName="llama"))
    relabelled = model("3", familyName="llama")
    relabelled["metadata"]["labels"] = {"team": "b"}
    assert inputs.changed("MODIFIED", relabelled)
    assert inputs.changed("DELETED", relabelled)
    assert inputs.changed("ADDED", relabelled)  # recreated with the same content


def test_equal_content_is_unchanged_however_the_decoder_shared_its_strings() -> None:
    """JSON decoders reuse one string object for repeated keys; whether two equal bodies share their
    strings or not must not make an event look like a change (a needless reconcile)."""
    inputs = InputDigests()
    shared = "model-runner"
    first = model("1", containers=[{"name": shared}, {"name": shared}])
    inputs.changed(None, first)
    again = model("2", containers=[{"name": "".join(["model-", "runner"])}, {"name": "model-runner"[:]}])
    assert not inputs.changed("MODIFIED", again)
    assert inputs.changed("MODIFIED", model("3", containers=[{"name": "other"}]))


def test_values_marshal_does_not_take_are_still_compared() -> None:
    import datetime

    inputs = InputDigests()
    stamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    inputs.changed(None, model("1", since=stamp))
    assert not inputs.changed("MODIFIED", model("2", since=stamp))
    assert inputs.changed("MODIFIED", model("3", since=stamp + datetime.timedelta(seconds=1)))
