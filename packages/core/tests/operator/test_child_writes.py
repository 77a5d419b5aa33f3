"""When the engine writes a child (issue 15): never when the live object already holds what the
plan wants, always when it drifted, whatever the engine remembers of earlier comparisons. Against a
recording stand-in for the API server (the real one is in e2e/test_operator.py)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from llmaz.operator import engine
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


def _live(version: str, replicas: int = 1) -> dict[str, Any]:
    live = copy.deepcopy(LWS)
    live["metadata"].update(resourceVersion=version, uid="lws-uid", ownerReferences=[owner_reference(OWNER)])
    live["spec"]["replicas"] = replicas
    live["status"] = {"replicas": replicas}  # what the API server and the LWS controller add
    return live


def test_a_child_is_written_only_when_the_live_object_lacks_what_the_plan_wants(
    make_runtime: Callable[[Any], Runtime], child_writes: Any
) -> None:
    kube = child_writes
    rt = make_runtime(kube)
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
    # created with a POST when not seen, applied once it exists (e2e: fields still pruned)
    assert [verb for verb, _ in kube.writes] == ["create", "apply"]


def test_a_child_written_but_not_seen_yet_is_applied_when_the_render_changes(
    make_runtime: Callable[[Any], Runtime], child_writes: Any
) -> None:
    rt = make_runtime(child_writes)
    asyncio.run(engine.apply_children(rt, OWNER, Plan(objects=(LWS,)), []))
    changed = copy.deepcopy(LWS)
    changed["spec"]["replicas"] = 2
    # the watch has not brought the created object back: a second POST would only meet a 409
    asyncio.run(engine.apply_children(rt, OWNER, Plan(objects=(changed,)), []))
    assert [(verb, obj["spec"]["replicas"]) for verb, obj in child_writes.writes] == [
        ("create", 1),
        ("apply", 2),
    ]
