"""When the engine writes a child (issue 15): never when the live object already holds what the
plan wants, always when it drifted, whatever the engine remembers of earlier comparisons. Against a
recording stand-in for the API server (the real one is in e2e/test_operator.py)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest

from llmaz.api import Service
from llmaz.api.conventions import ANNOTATION_RENDER_HASH
from llmaz.operator import engine
from llmaz.operator.runtime import Indexes, Runtime, owned_index_id, owner_reference, pack
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
    """The LWS as the operator's write left it (plus what the API server adds), at ``version``."""
    live = copy.deepcopy(engine.desired_child(LWS, owner_reference(OWNER))[0])
    live["metadata"].update(resourceVersion=version, uid="lws-uid")
    live["spec"]["replicas"] = replicas
    live["status"] = {"replicas": replicas}  # what the API server and the LWS controller add
    return live


def _live_service(version: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "chat-lb", "namespace": "ns", "resourceVersion": version},
    }


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


def _indexes(*children: dict[str, Any]) -> Indexes:
    """Indexes holding ``children`` (packed, as the watches keep them) under their owner."""
    raw: dict[str, dict[Any, list[Any]]] = {}
    for child in children:
        index = raw.setdefault(owned_index_id(child["apiVersion"], child["kind"]), {})
        index.setdefault(OWNER["metadata"]["uid"], []).append(pack(child))
    return Indexes(raw)


def test_an_owner_whose_inputs_and_children_are_unchanged_is_neither_rendered_nor_compared(
    make_runtime: Callable[[Any], Runtime], child_writes: Any
) -> None:
    rt = make_runtime(child_writes)
    inputs = ("generation 1", "model v1")

    def reconcile(live: list[dict[str, Any]], with_inputs: tuple[Any, ...] = inputs) -> None:
        asyncio.run(engine.apply_children(rt, OWNER, Plan(objects=(LWS,)), live, with_inputs))

    uid = OWNER["metadata"]["uid"]
    reconcile([])  # created; not settled: nothing was there to compare
    assert engine.unchanged(rt, _indexes(), uid, inputs) is None
    reconcile([_live("101")])
    assert engine.unchanged(rt, _indexes(_live("101")), uid, inputs) is not None
    # anything else is rendered and compared again: a new version of the child (a hand edit, the
    # LWS controller's status), a child more or less, other inputs
    assert engine.unchanged(rt, _indexes(_live("102")), uid, inputs) is None
    assert engine.unchanged(rt, _indexes(), uid, inputs) is None
    assert engine.unchanged(rt, _indexes(_live("101"), _live_service("7")), uid, inputs) is None
    assert engine.unchanged(rt, _indexes(_live("101")), uid, ("generation 2", "model v1")) is None
    # a drifted child is repaired and the record dropped until a reconcile finds it as wanted
    reconcile([_live("103", replicas=3)])
    assert [verb for verb, _ in child_writes.writes] == ["create", "apply"]
    assert engine.unchanged(rt, _indexes(_live("103", replicas=3)), uid, inputs) is None


def test_a_child_written_but_not_seen_yet_never_makes_its_owner_settled(
    make_runtime: Callable[[Any], Runtime], child_writes: Any
) -> None:
    """Were the owner recorded as settled without the child, a deletion of that child before the
    watch ever brought it would leave the owner's children as recorded, and never repaired."""
    rt = make_runtime(child_writes)
    asyncio.run(engine.apply_children(rt, OWNER, Plan(objects=(LWS,)), [], ("in",)))
    asyncio.run(engine.apply_children(rt, OWNER, Plan(objects=(LWS,)), [], ("in",)))  # still unseen
    assert len(child_writes.writes) == 1
    assert engine.unchanged(rt, _indexes(), OWNER["metadata"]["uid"], ("in",)) is None


def test_reconcile_service_renders_only_when_its_inputs_or_children_changed(
    make_runtime: Callable[[Any], Runtime], child_writes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's own reconcile of an inference Service, with the render counted."""
    rt = make_runtime(child_writes)
    renders: list[str] = []

    def counted(*args: Any, **kwargs: Any) -> Plan:
        renders.append("plan")
        return Plan(objects=(LWS,))

    async def no_status(*_: Any) -> None:
        return None

    monkeypatch.setattr(engine, "plan", counted)
    monkeypatch.setattr(engine, "write_status", no_status)
    monkeypatch.setattr(engine, "_parse", lambda snap: (Service.model_construct(), None))
    service = {**OWNER, "kind": "Service", "metadata": {**OWNER["metadata"], "generation": 1}}
    live = copy.deepcopy(engine.desired_child(LWS, owner_reference(service))[0])
    live["metadata"].update(resourceVersion="101", uid="lws-uid")
    rt.indexes = _indexes(live)
    asyncio.run(engine.reconcile(rt, rt.indexes, service))
    asyncio.run(engine.reconcile(rt, rt.indexes, service))  # a pod event, say: nothing new
    assert renders == ["plan"]
    service["metadata"] = {**service["metadata"], "generation": 2}
    asyncio.run(engine.reconcile(rt, rt.indexes, service))
    assert renders == ["plan", "plan"]
    assert child_writes.writes == []


def test_a_field_the_render_no_longer_sets_is_written_away(
    make_runtime: Callable[[Any], Runtime], child_writes: Any
) -> None:
    """The live LWS still holds everything the new render wants, plus an env var the old render
    set: only the render hash tells them apart, and the apply (server-side) drops the env var."""
    rt = make_runtime(child_writes)
    old = copy.deepcopy(LWS)
    old["spec"]["env"] = [{"name": "EXTRA", "value": "1"}]
    live = copy.deepcopy(engine.desired_child(old, owner_reference(OWNER))[0])
    live["metadata"].update(resourceVersion="7", uid="lws-uid")
    asyncio.run(engine.apply_children(rt, OWNER, Plan(objects=(LWS,)), [live]))
    assert [(verb, "env" in obj["spec"]) for verb, obj in child_writes.writes] == [("apply", False)]


def _written_before_the_hash(desired: dict[str, Any]) -> dict[str, Any]:
    """``desired`` as an operator from before the render hash left it live."""
    live = copy.deepcopy(desired)
    del live["metadata"]["annotations"][ANNOTATION_RENDER_HASH]
    live["metadata"].update(resourceVersion="7", uid="lws-uid")
    return live


def test_a_child_an_older_operator_wrote_as_rendered_is_not_written_again_after_an_upgrade(
    make_runtime: Callable[[Any], Runtime], child_writes: Any
) -> None:
    """No hash annotation yet (written before there was one) but every rendered field live: an
    upgrade must not rewrite every child of the cluster just to add the annotation."""
    rt = make_runtime(child_writes)
    live = _written_before_the_hash(engine.desired_child(LWS, owner_reference(OWNER))[0])
    asyncio.run(engine.apply_children(rt, OWNER, Plan(objects=(LWS,)), [live]))
    assert child_writes.writes == []


def test_a_child_an_older_operator_wrote_is_applied_with_the_hash_when_the_render_changed(
    make_runtime: Callable[[Any], Runtime], child_writes: Any
) -> None:
    rt = make_runtime(child_writes)
    old = copy.deepcopy(LWS)
    old["spec"]["replicas"] = 3
    live = _written_before_the_hash(engine.desired_child(old, owner_reference(OWNER))[0])
    asyncio.run(engine.apply_children(rt, OWNER, Plan(objects=(LWS,)), [live]))
    [(verb, written)] = child_writes.writes
    assert verb == "apply"
    assert written["spec"] == LWS["spec"]
    assert ANNOTATION_RENDER_HASH in written["metadata"]["annotations"]
