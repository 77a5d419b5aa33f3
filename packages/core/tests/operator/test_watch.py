"""The operator's own watches of children and serving pods (:mod:`llmaz.operator.watch`): what a
listing, a relisting after the API server lost our place (410 Gone) and each watch event do to
the index a reconcile reads and to the handlers, and that reconciles wait for the first listing.
Events are fed to the real stream objects and handlers; the HTTP side is exercised against the
real API server by every operator test in e2e/."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import pytest

from llmaz.operator import engine
from llmaz.operator import watch as watch_module
from llmaz.operator.handlers import watched_kinds
from llmaz.operator.runtime import IDX_PREHEAT_PODS, IDX_SERVICES, Indexes, Runtime
from llmaz.operator.watch import Store, WatchedKind, Watches, WatchGone

LWS_API = "leaderworkerset.x-k8s.io/v1"


def lws(name: str, owner_uid: str, version: int, replicas: int = 1) -> dict[str, Any]:
    """A LeaderWorkerSet as a listing sends it (no apiVersion and kind on the items)."""
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": str(version),
            "labels": {"app.kubernetes.io/managed-by": "llmaz"},
            "ownerReferences": [
                {
                    "apiVersion": "inference.llmaz.io/v1alpha1",
                    "kind": "Service",
                    "name": name,
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {"replicas": replicas},
    }


@pytest.fixture
def rt(make_runtime: Callable[[Any], Runtime]) -> Runtime:
    return make_runtime(None)


def recording(rt: Runtime) -> tuple[Watches, list[tuple[str | None, str]]]:
    """Watches of the operator's real kinds whose LeaderWorkerSet handler also records each call."""
    calls: list[tuple[str | None, str]] = []
    kinds = []
    for kind in watched_kinds(rt):
        if kind.kind == "LeaderWorkerSet":
            real = kind.handler

            def handler(change: str | None, body: Mapping[str, Any], real: Any = real) -> None:
                calls.append((change, body["metadata"]["name"]))
                real(change, body)

            kinds.append(WatchedKind(**{**kind.__dict__, "handler": handler}))
        else:
            kinds.append(kind)
    return Watches(None, kinds, ["ns"], rt.metrics.count_event), calls  # type: ignore[arg-type]


def owned_names(watches: Watches, owner_uid: str) -> list[str]:
    idx = Indexes({}, watches.stores)
    return sorted(o["metadata"]["name"] for o in idx.owned(owner_uid, [(LWS_API, "LeaderWorkerSet")]))


def test_a_listing_fills_the_index_a_reconcile_reads_and_reconciles_nobody(rt: Runtime) -> None:
    async def scenario() -> Watches:
        watches, calls = recording(rt)
        watches.stream("LeaderWorkerSet", "ns").relisted([lws("a", "svc-a", 5), lws("b", "svc-b", 6)])
        assert calls == [(None, "a"), (None, "b")]
        return watches

    watches = asyncio.run(scenario())
    assert owned_names(watches, "svc-a") == ["a"]
    found = Indexes({}, watches.stores).owned("svc-b")
    assert found[0]["kind"] == "LeaderWorkerSet"  # filled in: listed items come without it
    assert found[0]["apiVersion"] == LWS_API
    assert rt.queue.depth() == 0
    assert not rt.queue.soon


def test_a_relisting_after_gone_reports_what_changed_meanwhile(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a 410 the stream lists again: an object the listing lacks was deleted meanwhile
    (its owner must repair it), a changed one was modified, a new one added; an unchanged one
    is not reported again."""
    queued: list[tuple[str, str, str]] = []
    monkeypatch.setattr("llmaz.operator.handlers.children.enqueue", lambda _rt, *key, **_: queued.append(key))

    watches, calls = recording(rt)
    stream = watches.stream("LeaderWorkerSet", "ns")
    stream.relisted([lws("kept", "svc-1", 5), lws("edited", "svc-2", 6), lws("deleted", "svc-3", 7)])
    calls.clear()
    stream.relisted([lws("kept", "svc-1", 5), lws("edited", "svc-2", 9, replicas=3), lws("new", "svc-4", 10)])
    assert sorted(calls) == sorted([("MODIFIED", "edited"), ("ADDED", "new"), ("DELETED", "deleted")])
    assert owned_names(watches, "svc-3") == []
    assert owned_names(watches, "svc-2") == ["edited"]
    # the deleted child's and the hand-edited child's owners are reconciled (the new one's
    # owner too: nobody here applied it)
    assert sorted(queued) == [
        ("Service", "ns", "deleted"),
        ("Service", "ns", "edited"),
        ("Service", "ns", "new"),
    ]


def test_watch_events_update_the_index_and_a_410_error_ends_the_watch(rt: Runtime) -> None:
    watches, calls = recording(rt)
    stream = watches.stream("LeaderWorkerSet", "ns")
    stream.relisted([])
    added = {**lws("a", "svc-a", 11), "apiVersion": LWS_API, "kind": "LeaderWorkerSet"}

    async def events() -> str:
        version = stream.event({"type": "ADDED", "object": added}, "10")
        assert owned_names(watches, "svc-a") == ["a"]
        version = stream.event(
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}}, version
        )
        assert version == "20"  # resumed from the bookmark
        moved = copy.deepcopy(added)
        moved["metadata"]["ownerReferences"][0]["uid"] = "svc-b"
        moved["metadata"]["resourceVersion"] = "21"
        version = stream.event({"type": "MODIFIED", "object": moved}, version)
        assert owned_names(watches, "svc-a") == []
        assert owned_names(watches, "svc-b") == ["a"]
        return stream.event({"type": "DELETED", "object": moved}, version)

    assert asyncio.run(events()) == "21"
    assert owned_names(watches, "svc-b") == []
    assert [c[0] for c in calls] == ["ADDED", "MODIFIED", "DELETED"]
    with pytest.raises(WatchGone):  # run() lists again instead of resuming the watch
        stream.event({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}, "21")


def test_a_failing_handler_keeps_the_index_and_the_stream(
    rt: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(change: str | None, body: Mapping[str, Any]) -> None:
        raise RuntimeError("bug")

    kind = next(k for k in watched_kinds(rt) if k.kind == "Pod")
    watches = Watches(None, [WatchedKind(**{**kind.__dict__, "handler": broken})], [], rt.metrics.count_event)  # type: ignore[arg-type]
    pod = {
        "metadata": {
            "name": "chat-0",
            "namespace": "ns",
            "uid": "pod-1",
            "resourceVersion": "3",
            "labels": {"llmaz.io/model-name": "m", "leaderworkerset.sigs.k8s.io/name": "chat"},
        }
    }
    watches.stream("Pod").event({"type": "ADDED", "object": pod}, "2")
    assert [p["metadata"]["name"] for p in Indexes({}, watches.stores).pods("ns", "chat")] == ["chat-0"]
    assert "handling ADDED pod-1 of pods failed" in caplog.text


def test_store_keeps_each_object_under_its_keys() -> None:
    store = Store(lambda o: dict.fromkeys(o["keys"], o["value"]))
    store.put({"metadata": {"uid": "1"}, "keys": ["a"], "value": 1})
    store.put({"metadata": {"uid": "2"}, "keys": ["a", "r"], "value": 2})
    assert sorted(store["a"]) == [1, 2]
    assert list(store["r"]) == [2]
    store.put({"metadata": {"uid": "1"}, "keys": ["b"], "value": 3})
    assert list(store["a"]) == [2]
    assert list(store["b"]) == [3]
    store.put({"metadata": {"uid": "2"}, "keys": ["a"], "value": 5})  # one key fewer: gone from it
    assert "r" not in store
    assert store.kept("2") == {"a": 5}
    store.put({"metadata": {"uid": "2"}, "keys": [], "value": 4})  # no key: out of the index
    assert "a" not in store
    assert list(store) == ["b"]
    store.discard("1")
    assert len(store) == 0
    assert store.kept("1") is None


def test_reconciles_wait_until_the_children_are_listed(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """At start-up a reconcile that ran before the children were listed would not see those that
    exist, and would create them again."""
    done: list[tuple[str, str, str]] = []

    async def reconciled(_rt: Runtime, *key: str) -> None:
        done.append(key)

    monkeypatch.setattr(engine, "reconcile_named", reconciled)

    async def scenario() -> tuple[list[Any], list[Any]]:
        rt.listed = asyncio.Event()
        engine.enqueue(rt, "Playground", "ns", "chat")
        await asyncio.sleep(0.05)
        before = list(done)
        rt.listed.set()
        while rt.tasks:
            await asyncio.gather(*list(rt.tasks))
        return before, list(done)

    before, after = asyncio.run(scenario())
    assert before == []
    assert after == [("Playground", "ns", "chat")]


class OwnerLookup:
    """Stand-in for the API adapter's GET of the owner (``None``: deleted)."""

    def __init__(self, answer: dict[str, Any] | None) -> None:
        self.answer = answer
        self.asked: list[tuple[Any, ...]] = []

    async def get_async(self, *where: Any) -> dict[str, Any] | None:
        self.asked.append(where)
        return copy.deepcopy(self.answer)


STALE_SERVICE = {
    "apiVersion": "inference.llmaz.io/v1alpha1",
    "kind": "Service",
    "metadata": {"name": "c", "namespace": "ns", "uid": "svc-c", "resourceVersion": "4"},
}


class OneService:
    """kopf's index as it is after a relisting that did not send a Service deleted meanwhile."""

    def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(STALE_SERVICE) if (namespace, name) == ("ns", "c") else None


@pytest.mark.parametrize("exists", [False, True])
def test_a_deleted_childs_owner_is_checked_before_it_is_reconciled(
    make_runtime: Callable[[Any], Runtime], monkeypatch: pytest.MonkeyPatch, exists: bool
) -> None:
    """A child's deletion (the watch, or a relisting that lacks it) queues its owner with a check:
    an owner the API server no longer has is never reconciled again, even by the resync (its
    reconcile would create children the garbage collector deletes at once, whose deletion queues it
    again: the loop the watch-gone scenario found); one that exists is reconciled as always."""
    lookup = OwnerLookup(copy.deepcopy(STALE_SERVICE) if exists else None)
    rt = make_runtime(lookup)
    rt.indexes = OneService()  # type: ignore[assignment]
    reconciled: list[str] = []

    async def record(_rt: Runtime, _idx: Any, snap: dict[str, Any]) -> None:
        reconciled.append(snap["metadata"]["uid"])

    monkeypatch.setattr(engine, "reconcile", record)

    async def scenario() -> None:
        engine.enqueue(rt, "Service", "ns", "c", verify=True)  # its LWS was deleted
        await asyncio.gather(*list(rt.tasks))
        engine.enqueue(rt, "Service", "ns", "c")  # the resync, later
        await asyncio.gather(*list(rt.tasks))

    asyncio.run(scenario())
    assert lookup.asked == [("inference.llmaz.io/v1alpha1", "Service", "ns", "c")]  # once
    assert reconciled == (["svc-c", "svc-c"] if exists else [])
    assert ("svc-c" in rt.gone) is not exists


class NoServiceThenOne:
    """kopf's index: no Service ``ns/c`` (deleted with its owner), then a new one of that name."""

    def __init__(self) -> None:
        self.current: dict[str, Any] | None = None

    def service(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.current) if (namespace, name) == ("ns", "c") else None


def test_a_new_object_under_the_name_of_a_deleted_one_is_reconciled_without_a_check(
    make_runtime: Callable[[Any], Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check a child's deletion asks for is for the owner of that child: when that owner is
    gone already, it ends with it. A Service created again under the same name (``kubectl delete``,
    then ``apply``) is reconciled at once, with no GET in front, and nothing of the old name is kept."""
    lookup = OwnerLookup(None)
    rt = make_runtime(lookup)
    index = NoServiceThenOne()
    rt.indexes = index  # type: ignore[assignment]
    reconciled: list[str] = []

    async def record(_rt: Runtime, _idx: Any, snap: dict[str, Any]) -> None:
        reconciled.append(snap["metadata"]["uid"])

    monkeypatch.setattr(engine, "reconcile", record)

    async def scenario() -> None:
        engine.enqueue(rt, "Service", "ns", "c", verify=True)  # its LWS deleted by the collector
        await asyncio.gather(*list(rt.tasks))
        index.current = {**STALE_SERVICE, "metadata": {**STALE_SERVICE["metadata"], "uid": "svc-new"}}
        engine.enqueue(rt, "Service", "ns", "c")  # the new one's ADDED event
        await asyncio.gather(*list(rt.tasks))

    asyncio.run(scenario())
    assert lookup.asked == []
    assert reconciled == ["svc-new"]
    assert not rt.queue.verify


def test_an_owner_found_gone_is_forgotten_once_its_deletion_arrives(
    make_runtime: Callable[[Any], Runtime],
) -> None:
    rt = make_runtime(OwnerLookup(None))
    rt.indexes = OneService()  # type: ignore[assignment]

    async def scenario() -> None:
        engine.enqueue(rt, "Service", "ns", "c", verify=True)
        await asyncio.gather(*list(rt.tasks))

    asyncio.run(scenario())
    assert "svc-c" in rt.gone  # never reconciled again while the index still holds it
    rt.forget("svc-c")  # its DELETED event
    assert "svc-c" not in rt.gone


def test_cluster_scoped_kinds_are_watched_once_when_the_operator_serves_some_namespaces(rt: Runtime) -> None:
    watches = Watches(None, watched_kinds(rt), ["a", "b"], rt.metrics.count_event)  # type: ignore[arg-type]
    for kind in ("OpenModel", "BackendRuntime"):
        stream = watches.stream(kind)
        assert stream.kind.path(stream.namespace) == f"/apis/{stream.kind.api_version}/{kind.lower()}s"
        with pytest.raises(StopIteration):
            watches.stream(kind, "a")
    for kind in ("Playground", "LeaderWorkerSet", "Pod"):
        assert {watches.stream(kind, ns).namespace for ns in ("a", "b")} == {"a", "b"}


def test_preheat_jobs_and_pods_are_watched_in_the_preheat_namespace_whatever_is_served(
    make_runtime: Callable[[Any], Runtime],
) -> None:
    """The Jobs preheat creates live in its namespace; an operator serving other namespaces still
    sees them finish (and nodes, cluster-scoped, are watched once)."""
    rt = make_runtime(None)
    rt.config.model_loader.preheat_namespace = "models"
    watches = Watches(None, watched_kinds(rt), ["a", "b"], rt.metrics.count_event)  # type: ignore[arg-type]
    assert watches.stream("Job", "models").kind.selector == "llmaz.io/preheat-model"
    preheat_pods = watches.stream("Pod", "models", store_id=IDX_PREHEAT_PODS)
    assert preheat_pods.kind.selector == "llmaz.io/preheat-model"
    for ns in ("a", "b", None):
        with pytest.raises(StopIteration):
            watches.stream("Job", ns)
        with pytest.raises(StopIteration):
            watches.stream("Pod", ns, store_id=IDX_PREHEAT_PODS)
    assert watches.stream("Node").namespace is None


def test_a_playground_deleted_while_the_watch_was_down_is_dropped_with_what_is_kept_of_it(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relisting after 410 Gone that lacks a Playground hands its deletion to the handler (kopf's
    relisting sent only what exists): out of the index, what the operator kept of it forgotten, and
    its model's status refreshed (it is no longer a user)."""
    marked: list[Any] = []
    monkeypatch.setattr("llmaz.operator.usage.mark", lambda _rt, refs: marked.append(sorted(refs)))
    pg = {
        "metadata": {"name": "chat", "namespace": "ns", "uid": "pg-1", "resourceVersion": "4"},
        "spec": {"modelClaim": {"modelName": "qwen"}},
    }

    async def scenario() -> Indexes:
        watches = Watches(None, watched_kinds(rt), [], rt.metrics.count_event)  # type: ignore[arg-type]
        rt.stores, rt.indexes = watches.stores, Indexes({}, watches.stores)
        stream = watches.stream("Playground")
        stream.relisted([copy.deepcopy(pg)])
        stream.event(
            {"type": "MODIFIED", "object": {**pg, "metadata": {**pg["metadata"], "resourceVersion": "5"}}},
            "4",
        )
        rt.statuses["pg-1"] = ({}, 5)
        stream.relisted([])  # after 410 Gone: the Playground was deleted meanwhile
        return rt.indexes

    idx = asyncio.run(scenario())
    assert idx.playground("ns", "chat") is None
    assert idx.dependents("model", "qwen") == []
    assert "pg-1" not in rt.statuses
    assert "pg-1" not in rt.references
    assert ("model", "qwen") in marked[-1]


class _Body:
    """The part of an aiohttp response a stream reads: a status, a body, the lines of a watch."""

    def __init__(
        self, status: int, body: Any = None, lines: tuple[Any, ...] = (), breaks: bool = False
    ) -> None:
        self.status, self._body, self._lines, self._breaks = status, body, lines, breaks
        self.content = self

    async def __aenter__(self) -> _Body:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def read(self) -> bytes:
        return json.dumps(self._body).encode()

    async def iter_any(self) -> Any:
        for line in self._lines:
            yield json.dumps(line).encode() + b"\n"
        if self._breaks:
            raise aiohttp.ClientPayloadError("connection reset mid-stream")


def test_a_watch_that_breaks_goes_on_from_the_last_event_it_took(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection reset in the middle of a watch: the next watch starts at the last event or
    bookmark taken, so nothing is handled twice (an older state after a newer one) and no
    version the API server may have compacted meanwhile forces a new listing of every object."""
    monkeypatch.setattr(watch_module, "RETRY_DELAYS", (0.0,))
    watches, calls = recording(rt)
    stream = watches.stream("LeaderWorkerSet", "ns")
    asked: list[tuple[str, str]] = []

    async def answer(path: str, params: dict[str, str], read_timeout: float, accept: str = "") -> _Body:
        if "watch" not in params:
            asked.append(("list", ""))
            return _Body(200, {"metadata": {"resourceVersion": "100"}, "items": [lws("a", "svc-a", 90)]})
        asked.append(("watch", params["resourceVersion"]))
        if len(asked) == 2:
            events = (
                {"type": "MODIFIED", "object": lws("a", "svc-a", 120, replicas=2)},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "150"}}},
            )
            return _Body(200, lines=events, breaks=True)
        raise asyncio.CancelledError

    monkeypatch.setattr(watches, "_get", answer)

    async def scenario() -> None:
        with pytest.raises(asyncio.CancelledError):
            await stream.run(0)

    asyncio.run(scenario())
    assert asked == [("list", ""), ("watch", "100"), ("watch", "150")]
    assert calls == [(None, "a"), ("MODIFIED", "a")]


def test_deleting_the_service_a_playground_conflicted_with_reconciles_that_playground(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Playground whose name a user's inference Service already had reports ``NameConflict``
    and tells the user to delete or rename that Service; once it is deleted the Playground is
    reconciled at once, not at the next resync (10 minutes by default)."""
    queued: list[tuple[str, str, str]] = []
    monkeypatch.setattr("llmaz.operator.handlers.service.enqueue", lambda _rt, *key, **_: queued.append(key))
    watches, _ = recording(rt)
    rt.stores, rt.indexes = watches.stores, Indexes({}, watches.stores)
    users = {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Service",
        "metadata": {"name": "chat", "namespace": "ns", "uid": "users-uid", "resourceVersion": "5"},
        "spec": {"modelClaims": {"models": [{"name": "qwen"}]}},
    }
    pg = {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Playground",
        "metadata": {"name": "chat", "namespace": "ns", "uid": "pg-uid", "resourceVersion": "6"},
        "spec": {"modelClaim": {"modelName": "qwen"}},
    }

    async def scenario() -> None:  # (as the watches run: on the event loop)
        services = watches.stream("Service", "ns", store_id=IDX_SERVICES)
        services.relisted([copy.deepcopy(users)])
        watches.stream("Playground", "ns").relisted([copy.deepcopy(pg)])
        queued.clear()
        deleted = {**users, "metadata": {**users["metadata"], "resourceVersion": "9"}}
        services.event({"type": "DELETED", "object": deleted}, "6")

    asyncio.run(scenario())
    assert ("Playground", "ns", "chat") in queued


@pytest.mark.parametrize("grace", [0.0, 3600.0])
def test_a_kind_that_cannot_be_listed_holds_reconciles_back_only_for_a_while(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch, grace: float
) -> None:
    """A kind whose listing keeps failing with an error that may pass (here 500, as from a CRD's
    broken conversion webhook) holds every reconcile back for LISTING_GRACE_SECONDS at most; after
    that the operator reconciles without it and keeps trying to list it."""
    monkeypatch.setattr(watch_module, "RETRY_DELAYS", (0.0,))
    monkeypatch.setattr(watch_module, "LISTING_GRACE_SECONDS", grace)
    watches, _ = recording(rt)
    stream = watches.stream("LeaderWorkerSet", "ns")
    others = [i for i, s in enumerate(watches._streams) if s is not stream]
    for i in others:  # every other kind listed already
        watches._done_listing(i)
    asked: list[str] = []

    async def answer(path: str, params: dict[str, str], read_timeout: float, accept: str = "") -> _Body:
        asked.append("list")
        if len(asked) > 3:
            raise asyncio.CancelledError
        return _Body(500, {"message": "conversion webhook for leaderworkerset.x-k8s.io failed"})

    monkeypatch.setattr(watches, "_get", answer)

    async def scenario() -> None:
        with pytest.raises(asyncio.CancelledError):
            await stream.run(watches._streams.index(stream))

    asyncio.run(scenario())
    assert len(asked) == 4  # still tried after the grace
    assert watches.listed.is_set() is (grace == 0.0)
