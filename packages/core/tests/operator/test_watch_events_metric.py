"""``llmaz_watch_events_total``: one count per watch event and resource, whatever number of handlers
the operator registered for that resource. Events go through kopf's own event processing with the
operator's real registry and settings (:func:`llmaz.operator.replay.replay`); they are
initial-listing events, which these handlers only record (no API request)."""

from __future__ import annotations

from typing import Any

import kopf

from llmaz.api.conventions import LABEL_MODEL_NAME, MANAGED_BY, MANAGER
from llmaz.operator.handlers._common import watched
from llmaz.operator.replay import offline_runtime, replay
from llmaz.render.objects import LWS_NAME_LABEL
from llmaz.render.preheat import LABEL_PREHEAT_MODEL

PODS = kopf.Resource("", "v1", "pods", namespaced=True)
NODES = kopf.Resource("", "v1", "nodes", namespaced=False)
LWS = kopf.Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", namespaced=True)


def _object(name: str, labels: dict[str, str], namespace: str | None = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "labels": labels, "resourceVersion": "1"}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta}


def _counted(events: list[tuple[kopf.Resource, dict[str, Any]]]) -> dict[str, float]:
    rt = offline_runtime()
    replay([(resource, {"type": None, "object": body}) for resource, body in events], rt=rt)
    out: dict[str, float] = {}
    for resource in (watched("", "pods"), watched("", "nodes"), watched(LWS.group, LWS.plural)):
        value = rt.metrics.registry.get_sample_value("llmaz_watch_events_total", {"resource": resource})
        out[resource] = value or 0.0
    return out


def test_each_event_is_counted_once_by_resource() -> None:
    serving_pod = _object("pg-0-0", {LABEL_MODEL_NAME: "m", LWS_NAME_LABEL: "pg-0"})
    preheat_pod = _object("preheat-m-abc", {LABEL_MODEL_NAME: "m", LABEL_PREHEAT_MODEL: "m"})
    lws = _object("pg-0", {MANAGED_BY: MANAGER})
    node = _object("gpu-0", {"nvidia.com/gpu.product": "L4"}, namespace=None)
    events = [(PODS, serving_pod), (PODS, preheat_pod), (PODS, serving_pod), (LWS, lws), (NODES, node)]
    counts = _counted(events)
    assert counts == {
        "pods": 3,  # serving and preheat pods have a handler each, with disjoint label filters
        "nodes": 1,
        "leaderworkersets.leaderworkerset.x-k8s.io": 1,
    }
