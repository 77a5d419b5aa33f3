"""What the indexes keep of a watched object and what a read returns (issue 15: objects are kept
pickled and unpacked on each read)."""

from __future__ import annotations

import pickle
import sys
from typing import Any

from llmaz.operator.handlers import playground, service
from llmaz.operator.runtime import (
    IDX_OWNED,
    IDX_PLAYGROUNDS,
    IDX_SERVICES,
    Indexes,
    Packed,
    pack,
    parsed_entries,
)

LWS_INDEX = IDX_OWNED + "leaderworkerset_x_k8s_io_leaderworkerset"


def _lws(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "7",
            "labels": {"app.kubernetes.io/managed-by": "llmaz"},
            "ownerReferences": [{"kind": "Service", "uid": "svc", "controller": True}],
            "managedFields": [{"manager": "llmaz", "fieldsV1": {"f:spec": {}}}] * 20,
        },
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {}}}},
        "status": {"hpaPodSelector": f"leaderworkerset.sigs.k8s.io/name={name}"},
    }


def test_a_read_returns_the_object_without_managed_fields_as_a_fresh_copy() -> None:
    body = _lws("chat")
    idx = Indexes({LWS_INDEX: {"svc": [pack(body)]}})
    (first,) = idx.owned("svc")
    expected = dict(body)
    expected["metadata"] = {k: v for k, v in body["metadata"].items() if k != "managedFields"}
    assert first == expected
    # a reconcile may change what it read; the index keeps what the watch saw
    first["spec"]["replicas"] = 5
    (second,) = idx.owned("svc")
    assert second["spec"]["replicas"] == 1
    # the watched body is not shared either
    body["spec"]["replicas"] = 3
    assert idx.owned("svc")[0]["spec"]["replicas"] == 1


def test_lookups_and_counts() -> None:
    idx = Indexes({IDX_PLAYGROUNDS: {("ns", "a"): [pack({"metadata": {"name": "a"}})]}})
    assert idx.playground("ns", "a") == {"metadata": {"name": "a"}}
    assert idx.playground("ns", "missing") is None
    assert idx.playground_count() == 1
    assert Indexes({}).playground_count() == 0


def test_a_packed_object_is_smaller_than_its_dicts() -> None:
    body = _lws("chat")
    del body["metadata"]["managedFields"]
    packed = Packed(body)

    def deep_size(obj: Any) -> int:
        size = sys.getsizeof(obj)
        if isinstance(obj, dict):
            size += sum(deep_size(k) + deep_size(v) for k, v in obj.items())
        elif isinstance(obj, list):
            size += sum(deep_size(v) for v in obj)
        return size

    assert packed.load() == body
    assert sys.getsizeof(packed.data) < deep_size(packed.load()) / 2
    # compressed too: smaller than the pickle itself
    assert len(packed.data) < len(pickle.dumps(body, pickle.HIGHEST_PROTOCOL)) * 0.75


def _model(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": version}, "spec": {}}


def test_parsed_entries_parse_each_version_once_without_unpickling_cached_ones() -> None:
    cache: dict[str, tuple[int, Any]] = {}
    parsed: list[str] = []

    def parse(snap: dict[str, Any]) -> Any:
        parsed.append(snap["metadata"]["resourceVersion"])
        return None if snap["metadata"]["name"] == "bad" else snap["metadata"]["name"]

    entries = [pack(_model("a", "1")), pack(_model("bad", "1"))]
    assert parsed_entries(cache, entries, parse) == ["a"]
    # the same versions again: taken from the cache; a damaged pickle proves nothing is loaded
    for entry in entries:
        entry.data = b"not a pickle"
    assert parsed_entries(cache, entries, parse) == ["a"]
    assert parsed == ["1", "1"]
    # a new version of "a" is parsed again
    assert parsed_entries(cache, [pack(_model("a", "2"))], parse) == ["a"]
    assert parsed == ["1", "1", "2"]


def test_a_namespace_read_returns_only_that_namespace() -> None:
    idx = Indexes(
        {
            IDX_PLAYGROUNDS: {
                ("ns", "a"): [pack({"metadata": {"name": "a", "namespace": "ns"}})],
                ("other", "b"): [Packed.__new__(Packed)],  # never unpickled: it has no data at all
            }
        }
    )
    assert idx.playgrounds_in("ns") == [{"metadata": {"name": "a", "namespace": "ns"}}]
    assert idx.playgrounds_in("none") == []


def _as_kopf_keeps(*entries: dict[Any, Any]) -> dict[Any, list[Any]]:
    """An index as kopf keeps it: each key with the values the objects' index handlers returned."""
    index: dict[Any, list[Any]] = {}
    for each in entries:
        for key, value in each.items():
            index.setdefault(key, []).append(value)
    return index


def _workload(kind: str, namespace: str, name: str, spec: dict[str, Any], owner: str | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    if owner:
        meta["labels"] = {"app.kubernetes.io/managed-by": "llmaz"}
        meta["ownerReferences"] = [{"kind": "Playground", "name": name, "uid": owner, "controller": True}]
    return {"apiVersion": "inference.llmaz.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}


def test_one_index_per_workload_kind_answers_names_references_owners_and_counts() -> None:
    """Playgrounds and inference Services each have one kopf index (one handler run per event)
    holding the objects, their references and, for Services, their owner; every read sees only
    what it asks for, even where a namespace is named like a reference kind."""
    claim = {"modelClaim": {"modelName": "qwen"}}
    playgrounds = [
        _workload("Playground", "ns", "a", claim),
        _workload(
            "Playground", "model", "qwen", {**claim, "backendRuntimeConfig": {"backendName": "sglang"}}
        ),
    ]
    services = [
        _workload("Service", "ns", "a", {"modelClaims": {"models": [{"name": "qwen"}]}}, owner="pg-a"),
        _workload("Service", "ns", "own", {"modelClaims": {"models": [{"name": "llama"}]}}),  # a user's
    ]
    idx = Indexes(
        {
            IDX_PLAYGROUNDS: _as_kopf_keeps(*(playground.index_entries(b) for b in playgrounds)),
            IDX_SERVICES: _as_kopf_keeps(*(service.index_entries(b) for b in services)),
        }
    )
    assert idx.playground_count() == 2
    assert idx.service_count() == 2
    assert sorted(p["metadata"]["name"] for p in idx.playgrounds()) == ["a", "qwen"]
    assert [p["metadata"]["name"] for p in idx.playgrounds_in("model")] == ["qwen"]
    assert [s["metadata"]["name"] for s in idx.services_in("ns")] == ["a", "own"]
    assert idx.playground("model", "qwen") is not None
    assert idx.dependents("model", "qwen") == [
        ("Playground", "model", "qwen"),
        ("Playground", "ns", "a"),
        ("Service", "ns", "a"),
    ]
    assert idx.dependents("backend", "sglang") == [("Playground", "model", "qwen")]
    assert idx.dependents("model", "llama") == [("Service", "ns", "own")]
    assert [s["metadata"]["name"] for s in idx.owned("pg-a")] == ["a"]
    assert idx.owned_versions("pg-a") == [("inference.llmaz.io/v1alpha1/Service/a", 0)]
    assert idx.owned("uid-ns-own") == []  # a user's Service is nobody's child
