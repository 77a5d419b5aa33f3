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
    assert inputs.changed({"type": None}, first)  # the initial listing records it
    in_use = copy.deepcopy(first)
    in_use["metadata"]["resourceVersion"] = "2"
    in_use["metadata"]["managedFields"] = [{"manager": "llmaz", "operation": "Update"}]
    in_use["status"] = {"conditions": [{"type": "InUse", "status": "True"}]}
    assert not inputs.changed({"type": "MODIFIED"}, in_use)


def test_spec_labels_and_deletion_reach_dependents() -> None:
    inputs = InputDigests()
    inputs.changed({"type": "ADDED"}, model("1"))
    assert inputs.changed({"type": "MODIFIED"}, model("2", familyName="llama"))
    relabelled = model("3", familyName="llama")
    relabelled["metadata"]["labels"] = {"team": "b"}
    assert inputs.changed({"type": "MODIFIED"}, relabelled)
    assert inputs.changed({"type": "DELETED"}, relabelled)
    assert inputs.changed({"type": "ADDED"}, relabelled)  # recreated with the same content
