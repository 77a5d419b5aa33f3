"""When the engine writes a child (issue 15): never when the live object already holds what the
plan wants, always when it drifted, whatever the engine remembers of earlier comparisons. Against a
recording stand-in for the API server (the real one is in e2e/test_operator.py)."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from llmaz.api import Service
from llmaz.api.conventions import ANNOTATION_RENDER_HASH
from llmaz.operator import engine
from llmaz.operator.kube import KubeError, NameTaken, ObjectKey
from llmaz.operator.runtime import IDX_PLAYGROUNDS, Indexes, Runtime, owned_index_id, owner_reference, pack
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
    make_runtime: Callable[[Any], Runtime], child_writes: Any, apply_children: Callable[..., None]
) -> None:
    kube = child_writes
    rt = make_runtime(kube)
    plan = Plan(objects=(LWS,))

    def reconcile(live: list[dict[str, Any]]) -> None:
        apply_children(rt, OWNER, plan, live)

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
    make_runtime: Callable[[Any], Runtime], child_writes: Any, apply_children: Callable[..., None]
) -> None:
    rt = make_runtime(child_writes)
    apply_children(rt, OWNER, Plan(objects=(LWS,)), [])
    changed = copy.deepcopy(LWS)
    changed["spec"]["replicas"] = 2
    # the watch has not brought the created object back: a second POST would only meet a 409
    apply_children(rt, OWNER, Plan(objects=(changed,)), [])
    assert [(verb, obj["spec"]["replicas"]) for verb, obj in child_writes.writes] == [
        ("create", 1),
        ("apply", 2),
    ]


def _indexes(*children: dict[str, Any]) -> Indexes:
    """Indexes holding the owner and ``children`` (packed, as the watches keep them) under it."""
    raw: dict[str, dict[Any, list[Any]]] = {IDX_PLAYGROUNDS: {("ns", "chat"): [pack(OWNER)]}}
    for child in children:
        index = raw.setdefault(owned_index_id(child["apiVersion"], child["kind"]), {})
        index.setdefault(OWNER["metadata"]["uid"], []).append(pack(child))
    return Indexes(raw)


def test_an_owner_whose_inputs_and_children_are_unchanged_is_neither_rendered_nor_compared(
    make_runtime: Callable[[Any], Runtime], child_writes: Any, apply_children: Callable[..., None]
) -> None:
    rt = make_runtime(child_writes)
    inputs = ("generation 1", "model v1")

    def reconcile(live: list[dict[str, Any]], with_inputs: tuple[Any, ...] = inputs) -> None:
        apply_children(rt, OWNER, Plan(objects=(LWS,)), live, with_inputs)

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
    make_runtime: Callable[[Any], Runtime], child_writes: Any, apply_children: Callable[..., None]
) -> None:
    """Were the owner recorded as settled without the child, a deletion of that child before the
    watch ever brought it would leave the owner's children as recorded, and never repaired."""
    rt = make_runtime(child_writes)
    apply_children(rt, OWNER, Plan(objects=(LWS,)), [], ("in",))
    apply_children(rt, OWNER, Plan(objects=(LWS,)), [], ("in",))  # still unseen
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
    make_runtime: Callable[[Any], Runtime], child_writes: Any, apply_children: Callable[..., None]
) -> None:
    """The live LWS still holds everything the new render wants, plus an env var the old render
    set: only the render hash tells them apart, and the apply (server-side) drops the env var."""
    rt = make_runtime(child_writes)
    old = copy.deepcopy(LWS)
    old["spec"]["env"] = [{"name": "EXTRA", "value": "1"}]
    live = copy.deepcopy(engine.desired_child(old, owner_reference(OWNER))[0])
    live["metadata"].update(resourceVersion="7", uid="lws-uid")
    apply_children(rt, OWNER, Plan(objects=(LWS,)), [live])
    assert [(verb, "env" in obj["spec"]) for verb, obj in child_writes.writes] == [("apply", False)]


def _written_before_the_hash(desired: dict[str, Any]) -> dict[str, Any]:
    """``desired`` as an operator from before the render hash left it live."""
    live = copy.deepcopy(desired)
    del live["metadata"]["annotations"][ANNOTATION_RENDER_HASH]
    live["metadata"].update(resourceVersion="7", uid="lws-uid")
    return live


def test_a_child_an_older_operator_wrote_as_rendered_is_not_written_again_after_an_upgrade(
    make_runtime: Callable[[Any], Runtime], child_writes: Any, apply_children: Callable[..., None]
) -> None:
    """No hash annotation yet (written before there was one) but every rendered field live: an
    upgrade must not rewrite every child of the cluster just to add the annotation."""
    rt = make_runtime(child_writes)
    live = _written_before_the_hash(engine.desired_child(LWS, owner_reference(OWNER))[0])
    apply_children(rt, OWNER, Plan(objects=(LWS,)), [live])
    assert child_writes.writes == []


def test_a_child_an_older_operator_wrote_is_applied_with_the_hash_when_the_render_changed(
    make_runtime: Callable[[Any], Runtime], child_writes: Any, apply_children: Callable[..., None]
) -> None:
    rt = make_runtime(child_writes)
    old = copy.deepcopy(LWS)
    old["spec"]["replicas"] = 3
    live = _written_before_the_hash(engine.desired_child(old, owner_reference(OWNER))[0])
    apply_children(rt, OWNER, Plan(objects=(LWS,)), [live])
    [(verb, written)] = child_writes.writes
    assert verb == "apply"
    assert written["spec"] == LWS["spec"]
    assert ANNOTATION_RENDER_HASH in written["metadata"]["annotations"]


def _written_with_the_json_hash(rendered: dict[str, Any]) -> dict[str, Any]:
    """``rendered`` as a release whose render hash was made by ``json.dumps`` left it live: the
    render with its owner reference, hashed as that release did (the same render, another text,
    so another hash), the hash annotation added, then what the API server adds."""
    before = copy.deepcopy(rendered)
    before["metadata"]["ownerReferences"] = [dict(owner_reference(OWNER))]
    old_hash = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:16]
    live = copy.deepcopy(before)
    live["metadata"]["annotations"] = {ANNOTATION_RENDER_HASH: old_hash}
    live["metadata"].update(resourceVersion="7", uid="lws-uid")
    return live


def _todays_hash(rendered: dict[str, Any]) -> str:
    desired, _ = engine.desired_child(rendered, owner_reference(OWNER))
    return str(desired["metadata"]["annotations"][ANNOTATION_RENDER_HASH])


def test_a_child_hashed_by_an_older_release_is_not_written_again_after_an_upgrade(
    make_runtime: Callable[[Any], Runtime], child_writes: Any, apply_children: Callable[..., None]
) -> None:
    """The render hash text changed (``json`` to orjson): a child an older release wrote with the
    same render carries a hash the new one does not make, and is still left alone."""
    rt = make_runtime(child_writes)
    live = _written_with_the_json_hash(LWS)
    assert live["metadata"]["annotations"][ANNOTATION_RENDER_HASH] != _todays_hash(LWS)
    apply_children(rt, OWNER, Plan(objects=(LWS,)), [live])
    assert child_writes.writes == []


def test_a_field_dropped_since_an_older_release_hashed_the_child_is_written_away(
    make_runtime: Callable[[Any], Runtime], child_writes: Any, apply_children: Callable[..., None]
) -> None:
    """The older release's hash is honoured only for the render it was made of: a live child that
    still holds an env var the new render dropped is applied, with today's hash."""
    rt = make_runtime(child_writes)
    old = copy.deepcopy(LWS)
    old["spec"]["env"] = [{"name": "EXTRA", "value": "1"}]
    apply_children(rt, OWNER, Plan(objects=(LWS,)), [_written_with_the_json_hash(old)])
    [(verb, written)] = child_writes.writes
    assert verb == "apply"
    assert "env" not in written["spec"]
    assert written["metadata"]["annotations"][ANNOTATION_RENDER_HASH] == _todays_hash(LWS)


def test_a_render_orjson_refuses_is_still_hashed_and_created(
    make_runtime: Callable[[Any], Runtime], child_writes: Any, apply_children: Callable[..., None]
) -> None:
    """An integer beyond 64 bits (orjson refuses it) fails no reconcile: the child is created."""
    rt = make_runtime(child_writes)
    big = copy.deepcopy(LWS)
    big["spec"]["startupPolicy"] = 2**70
    apply_children(rt, OWNER, Plan(objects=(big,)), [])
    [(verb, written)] = child_writes.writes
    assert verb == "create"
    assert written["spec"]["startupPolicy"] == 2**70
    assert len(written["metadata"]["annotations"][ANNOTATION_RENDER_HASH]) == 16


LB = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "chat-lb", "namespace": "ns"},
    "spec": {"ports": [{"port": 8080}]},
}


class SlowServiceCreates:
    """The recording stand-in ``inner``, with each Service create held until ``release`` is set,
    as the API server holds a ClusterIP Service's create while it allocates cluster IPs one at a
    time (no API server here); ``fail`` makes every Service create answer HTTP 500 instead,
    ``refuse`` raise that error."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes: list[tuple[str, dict[str, Any]]] = inner.writes
        self.release = threading.Event()
        self.fail = False
        self.refuse: KubeError | None = None

    async def create_or_apply_async(
        self, obj: dict[str, Any], *, exists: bool, held: Any = None
    ) -> dict[str, Any]:
        if obj["kind"] == "Service" and not exists:
            await asyncio.to_thread(self.release.wait, 10)
            if self.fail:
                raise KubeError("POST", "/api/v1/namespaces/ns/services", 500, "try again")
            if self.refuse is not None:
                raise self.refuse
        answer: dict[str, Any] = self.inner.create_or_apply(obj, exists=exists)
        return answer


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


async def _creates_done(rt: Runtime) -> None:
    while rt.tasks:
        await asyncio.gather(*list(rt.tasks))


def test_a_slow_create_holds_up_neither_the_reconcile_nor_the_owners_other_children(
    make_runtime: Callable[[Any], Runtime], child_writes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At N = 300 each inference Service's reconcile waited ~2.7 s for its ``-lb`` Service's
    cluster IP, so LeaderWorkerSets were created only as fast as cluster IPs (issue 15). The
    reconcile now returns with the create in flight, the LWS is created meanwhile, a reconcile
    in between does not POST the Service again, and one that renders it differently reconciles
    the owner again once the create ends."""
    kube = SlowServiceCreates(child_writes)
    rt = make_runtime(kube)
    queued: list[tuple[str, str, str]] = []
    monkeypatch.setattr(engine, "enqueue", lambda _rt, *key, **_: queued.append(key))
    changed = copy.deepcopy(LB)
    changed["spec"]["ports"] = [{"port": 9090}]

    async def scenario() -> None:
        await engine.apply_children(rt, OWNER, Plan(objects=(LWS, LB)), [])
        await _until(lambda: len(kube.writes) == 1)
        assert [(verb, obj["kind"]) for verb, obj in kube.writes] == [("create", "LeaderWorkerSet")]
        assert rt.creating == 1  # what holds progress-only status writes back
        await engine.apply_children(rt, OWNER, Plan(objects=(LWS, LB)), [])
        await engine.apply_children(rt, OWNER, Plan(objects=(LWS, changed)), [])
        assert queued == []
        kube.release.set()
        await _creates_done(rt)

    asyncio.run(scenario())
    assert [(verb, obj["kind"]) for verb, obj in kube.writes] == [
        ("create", "LeaderWorkerSet"),
        ("create", "Service"),
    ]
    assert rt.creating == 0
    assert rt.creates == {}
    assert queued == [("Playground", "ns", "chat")]  # the changed render is applied next


def test_a_create_that_keeps_failing_is_retried_later_and_later(
    make_runtime: Callable[[Any], Runtime], child_writes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed background create retries its owner's reconcile with the growing delays of a
    failed reconcile, although every reconcile that starts the create succeeds itself: no loop
    hammering the API server (RELIABILITY.md)."""
    kube = SlowServiceCreates(child_writes)
    kube.release.set()
    kube.fail = True
    rt = make_runtime(kube)

    async def reconciler(rt_: Runtime, _idx: Any, snap: dict[str, Any]) -> None:
        await engine.apply_children(rt_, snap, Plan(objects=(LB,)), [])

    monkeypatch.setitem(engine.RECONCILERS, "Playground", reconciler)
    rt.indexes = _indexes()
    delays: list[float] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        for _ in range(3):  # the retry's reconcile, run at once instead of after the delay
            await engine.reconcile(rt, rt.indexes, OWNER)
            await _creates_done(rt)
            delays.append(round(rt.retries[OWNER["metadata"]["uid"]].when() - loop.time()))

    asyncio.run(scenario())
    assert delays == [round(d) for d in engine.RETRY_DELAYS[:3]]
    assert rt.creates == {}
    assert rt.creates_of == {}
    assert [verb for verb, _ in kube.writes] == []  # nothing written: every create failed


def test_creates_waiting_for_cluster_ips_hold_up_no_reconcile_and_no_other_kind(
    make_runtime: Callable[[Any], Runtime], child_writes: Any
) -> None:
    """The API server allocates cluster IPs one at a time, slowly while it also creates other
    objects. When a reconcile waited for room among the ``-lb`` Service creates, LeaderWorkerSets
    came only as fast as cluster IPs and the allocator shared the machine with them all along
    (issue 15). Now every reconcile returns at once, however many Service creates wait; every
    owner's LWS is created while they wait; at most ``CREATE_SLOTS_PER_KIND * workers`` creates of
    a kind are in flight; and the Services are created in the order their owners queued them."""
    kube = SlowServiceCreates(child_writes)
    rt = make_runtime(kube)
    rt.config = rt.config.model_copy(update={"workers": 4})
    slots = int(4 * engine.CREATE_SLOTS_PER_KIND)
    owners = 25  # many times the slots, and more than four times `workers`
    in_flight: list[int] = []
    started: list[str] = []
    inner = kube.create_or_apply_async

    async def counting(obj: dict[str, Any], *, exists: bool, held: Any = None) -> dict[str, Any]:
        if obj["kind"] == "Service":
            started.append(obj["metadata"]["name"])
            in_flight.append(1)
            try:
                return await inner(obj, exists=exists, held=held)
            finally:
                in_flight.pop()
        return await inner(obj, exists=exists, held=held)

    kube.create_or_apply_async = counting  # type: ignore[method-assign]
    most: list[int] = []

    def owner(i: int) -> dict[str, Any]:
        return {**OWNER, "metadata": {**OWNER["metadata"], "name": f"chat{i}", "uid": f"uid-{i}"}}

    def lws(i: int) -> dict[str, Any]:
        return {**LWS, "metadata": {**LWS["metadata"], "name": f"chat{i}"}}

    def lb(i: int) -> dict[str, Any]:
        return {**LB, "metadata": {**LB["metadata"], "name": f"chat{i}-lb"}}

    async def scenario() -> None:
        for i in range(owners):  # a Service before its LWS, as the render orders them
            done, _ = await asyncio.wait(
                {
                    asyncio.ensure_future(
                        engine.apply_children(rt, owner(i), Plan(objects=(lb(i), lws(i))), [])
                    )
                },
                timeout=1,
            )
            assert done, f"the reconcile of owner {i} waited"
        await _until(lambda: sum(obj["kind"] == "LeaderWorkerSet" for _, obj in kube.writes) == owners)
        most.append(len(in_flight))
        assert not any(obj["kind"] == "Service" for _, obj in kube.writes)
        assert rt.creating == owners  # the Services, each known as being created
        kube.release.set()
        await _creates_done(rt)

    asyncio.run(scenario())
    assert most == [slots]
    assert started == [f"chat{i}-lb" for i in range(owners)]
    assert sorted(obj["metadata"]["name"] for _, obj in kube.writes if obj["kind"] == "Service") == sorted(
        started
    )
    assert rt.creates == {}
    assert rt.creates_of == {}


def test_a_child_the_api_server_refuses_is_shown_on_its_owner_until_it_is_written(
    make_runtime: Callable[[Any], Runtime], child_writes: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create refused for the object itself (here 422, as for a name too long for a Service) is
    kept for the owner's status (``Rejected``, quoting the API server) and retried with backoff;
    once a write of that child succeeds the problem is gone and the owner is reconciled, so its
    status says so. A name someone else's object holds is kept the same way (``NameConflict``)."""
    kube = SlowServiceCreates(child_writes)
    kube.release.set()
    kube.refuse = KubeError(
        "POST", "/api/v1/namespaces/ns/services", 422, json.dumps({"message": 'Service "chat-lb" is invalid'})
    )
    rt = make_runtime(kube)
    rt.indexes = _indexes()
    queued: list[tuple[str, str, str]] = []
    monkeypatch.setattr(engine, "enqueue", lambda _rt, *key, **_: queued.append(key))
    uid = OWNER["metadata"]["uid"]

    async def scenario() -> None:
        await engine.apply_children(rt, OWNER, Plan(objects=(LB,)), [])
        await _creates_done(rt)
        assert engine.child_problem(rt, uid) == (
            "Rejected",
            'the API server refused Service ns/chat-lb: Service "chat-lb" is invalid',
        )
        assert uid in rt.retries
        kube.refuse = NameTaken(ObjectKey.of(LB), "was not made by llmaz")
        await engine.apply_children(rt, OWNER, Plan(objects=(LB,)), [])
        await _creates_done(rt)
        reason, message = engine.child_problem(rt, uid) or ("", "")
        assert reason == "NameConflict"
        assert message.startswith("Service ns/chat-lb exists and was not made by llmaz")
        assert queued == []
        kube.refuse = None
        await engine.apply_children(rt, OWNER, Plan(objects=(LB,)), [])
        await _creates_done(rt)

    asyncio.run(scenario())
    assert engine.child_problem(rt, uid) is None
    assert queued == [("Playground", "ns", "chat")]  # to write a status without the problem


def test_a_failed_create_of_an_owner_deleted_meanwhile_is_not_retried(
    make_runtime: Callable[[Any], Runtime], child_writes: Any
) -> None:
    kube = SlowServiceCreates(child_writes)
    kube.release.set()
    kube.fail = True
    rt = make_runtime(kube)
    rt.indexes = Indexes({})  # the owner's deletion has reached the indexes

    async def scenario() -> None:
        await engine.apply_children(rt, OWNER, Plan(objects=(LB,)), [])
        await _creates_done(rt)

    asyncio.run(scenario())
    assert rt.retries == {}
    assert rt.failures == {}
    assert rt.child_problems == {}
