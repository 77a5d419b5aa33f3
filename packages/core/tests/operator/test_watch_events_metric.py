"""``llmaz_watch_events_total``: one count per watch event and resource, whatever number of watches
the operator has of that resource (serving pods and preheat pods are two). Events go through the
operator's own watch streams with its real watched kinds; they are initial-listing events and one
pod update, which these handlers only record (no API request)."""

from __future__ import annotations

import asyncio
from typing import Any

from llmaz.api.conventions import LABEL_MODEL_NAME, MANAGED_BY, MANAGER
from llmaz.operator.handlers import watched_kinds
from llmaz.operator.handlers._common import watched
from llmaz.operator.replay import offline_runtime
from llmaz.operator.runtime import IDX_PODS, IDX_PREHEAT_PODS
from llmaz.operator.watch import Watches
from llmaz.render.objects import LWS_NAME_LABEL
from llmaz.render.preheat import LABEL_PREHEAT_MODEL


def _object(name: str, labels: dict[str, str], namespace: str | None = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "labels": labels, "resourceVersion": "1"}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta}


def test_each_event_is_counted_once_by_resource() -> None:
    """Preheat pods and serving pods (two watches of pods), nodes and children count into one
    series per resource."""
    serving_pod = _object("pg-0-0", {LABEL_MODEL_NAME: "m", LWS_NAME_LABEL: "pg-0"})
    preheat_pod = _object("preheat-m-abc", {LABEL_MODEL_NAME: "m", LABEL_PREHEAT_MODEL: "m"}, "models")
    lws = _object("pg-0", {MANAGED_BY: MANAGER})
    node = _object("gpu-0", {"nvidia.com/gpu.product": "L4"}, namespace=None)
    rt = offline_runtime()
    rt.config.model_loader.preheat_namespace = "models"

    async def own_watches() -> None:
        watches = Watches(None, watched_kinds(rt), [], rt.metrics.count_event)  # type: ignore[arg-type]
        watches.stream("Pod", store_id=IDX_PODS).relisted([serving_pod])
        watches.stream("Pod", store_id=IDX_PODS).event({"type": "MODIFIED", "object": serving_pod}, "1")
        watches.stream("Pod", "models", store_id=IDX_PREHEAT_PODS).relisted([preheat_pod])
        watches.stream("Node").relisted([node])
        watches.stream("LeaderWorkerSet").relisted([lws])

    asyncio.run(own_watches())
    counts = {}
    lws_resource = watched("leaderworkerset.x-k8s.io", "leaderworkersets")
    for resource in (watched("", "pods"), watched("", "nodes"), lws_resource):
        value = rt.metrics.registry.get_sample_value("llmaz_watch_events_total", {"resource": resource})
        counts[resource] = value or 0.0
    assert counts == {
        "pods": 3,  # two serving pod events, one preheat pod
        "nodes": 1,
        "leaderworkersets.leaderworkerset.x-k8s.io": 1,
    }
