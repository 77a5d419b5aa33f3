"""When the engine writes a child (issue 15): never when the live object already holds what the
plan wants, always when it drifted, whatever the engine remembers of earlier comparisons. Against a
recording stand-in for the API server (the real one is in e2e/test_operator.py)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from llmaz.operator import engine
from llmaz.operator.config import OperatorConfig
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import Runtime, owner_reference
from llmaz.render.plan import Plan

OWNER = {
    "apiVersion": "inference.llmaz.io/v1alpha1",
    "kind": "Playground",
    "metadata": {"name": "chat", "namespace": "ns", "uid": "pg-uid", "resourceVersion": "1"},
}
LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "chat", "namespace": "ns"},
    "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1}},
}


class RecordingKube:
    """Stand-in for the API server: records applies and answers a new resourceVersion."""

    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.applied.append(obj)
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(100 + len(self.applied))}}


def _live(version: str, replicas: int = 1) -> dict[str, Any]:
    live = copy.deepcopy(LWS)
    live["metadata"].update(resourceVersion=version, uid="lws-uid", ownerReferences=[owner_reference(OWNER)])
    live["spec"]["replicas"] = replicas
    live["status"] = {"replicas": replicas}  # what the API server and the LWS controller add
    return live


def test_a_child_is_written_only_when_the_live_object_lacks_what_the_plan_wants() -> None:
    kube = RecordingKube()
    rt = Runtime(
        config=OperatorConfig(),
        plugins=None,  # type: ignore[arg-type]
        kube=kube,  # type: ignore[arg-type]
        metrics=Metrics(kinds=("Playground", "Service")),
        identity="unit",
    )
    plan = Plan(objects=(LWS,))

    def reconcile(live: list[dict[str, Any]]) -> None:
        asyncio.run(engine.apply_children(rt, OWNER, plan, live))

    reconcile([])
    assert len(kube.applied) == 1  # missing: created (the stand-in answers resourceVersion 101)
    reconcile([_live("101")])
    reconcile([_live("101")])  # the same live version again (answered from what was compared)
    reconcile([_live("102")])  # a status change: a new version holding the same spec
    assert len(kube.applied) == 1
    reconcile([_live("103", replicas=3)])  # someone changed the spec: repaired
    assert len(kube.applied) == 2
    assert kube.applied[-1]["spec"]["replicas"] == 1
    reconcile([_live("104")])
    assert len(kube.applied) == 2
