"""``llmaz_watch_events_total``: one count per watch event and resource, whatever number of handlers
the operator registered for that resource. Events go through kopf's own event processing with the
operator's real registry and settings (:func:`llmaz.operator.replay.replay`); they are
initial-listing events, which these handlers only record (no API request)."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from llmaz.api.conventions import LABEL_MODEL_NAME, MANAGED_BY, MANAGER
from llmaz.operator.handlers import watched_kinds
from llmaz.operator.handlers._common import watched
from llmaz.operator.replay import offline_runtime, replay
from llmaz.operator.watch import Watches
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


def _listed(body: dict[str, Any]) -> dict[str, Any]:
    return {"type": None, "object": body}


def test_each_event_is_counted_once_by_resource() -> None:
    """kopf's watches (preheat pods, nodes) and the operator's own (serving pods, children) count
    into the same series."""
    serving_pod = _object("pg-0-0", {LABEL_MODEL_NAME: "m", LWS_NAME_LABEL: "pg-0"})
    preheat_pod = _object("preheat-m-abc", {LABEL_MODEL_NAME: "m", LABEL_PREHEAT_MODEL: "m"})
    lws = _object("pg-0", {MANAGED_BY: MANAGER})
    node = _object("gpu-0", {"nvidia.com/gpu.product": "L4"}, namespace=None)
    rt = offline_runtime()
    replay([(PODS, _listed(preheat_pod)), (NODES, _listed(node))], rt=rt)

    async def own_watches() -> None:
        watches = Watches(None, watched_kinds(rt), [], rt.metrics.count_event)  # type: ignore[arg-type]
        watches.stream("Pod").relisted([serving_pod])
        watches.stream("Pod").event({"type": "MODIFIED", "object": serving_pod}, "1")
        watches.stream("LeaderWorkerSet").relisted([lws])

    asyncio.run(own_watches())
    counts = {}
    for resource in (watched("", "pods"), watched("", "nodes"), watched(LWS.group, LWS.plural)):
        value = rt.metrics.registry.get_sample_value("llmaz_watch_events_total", {"resource": resource})
        counts[resource] = value or 0.0
    assert counts == {
        "pods": 3,  # preheat pods through kopf, serving pods through the operator's own watch
        "nodes": 1,
        "leaderworkersets.leaderworkerset.x-k8s.io": 1,
    }
