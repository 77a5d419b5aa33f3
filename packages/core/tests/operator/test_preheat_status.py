"""An OpenModel's status while it is marked for preheating (:mod:`llmaz.operator.preheat` and the
status refresh of :mod:`llmaz.operator.usage`), from the indexes the operator keeps."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from llmaz.operator import preheat as op_preheat
from llmaz.operator import usage
from llmaz.operator.config import ModelLoader, OperatorConfig
from llmaz.operator.handlers import watched_kinds
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import IDX_MODELS, IDX_NODES, IDX_PREHEAT_JOBS, Indexes, Runtime
from llmaz.operator.usage import desired_status
from llmaz.operator.watch import Store
from llmaz.plugins.manager import PluginManager
from llmaz.render import preheat
from llmaz.render.cache import SharedCache

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def runtime(cache: SharedCache | None, jobs: list[dict[str, Any]] | None = None, **labels: str) -> Runtime:
    config = OperatorConfig(model_loader=ModelLoader(shared_cache=cache, preheat_namespace="models"))
    rt = Runtime(config, PluginManager.from_environment(environ={}), cast(Any, None), Metrics(), "test")
    rt.clock = lambda: T0
    model = {
        "apiVersion": "llmaz.io/v1alpha1",
        "kind": "OpenModel",
        "metadata": {"name": "qwen", "uid": "u1", "generation": 2, "labels": labels},
        "spec": {
            "familyName": "qwen2",
            "source": {"modelHub": {"modelID": "Qwen/Qwen2-0.5B"}},
            "inferenceConfig": {"flavors": [{"name": "l4", "nodeSelector": {"pool": "l4"}}]},
        },
    }
    # nodes and Jobs go into the stores of the operator's own watches as their watches bring them
    # (nodes as PartialObjectMetadata: their metadata only)
    kinds = {kind.store_id: kind for kind in watched_kinds(rt)}
    stores = {store_id: Store(kinds[store_id].entries_of) for store_id in (IDX_NODES, IDX_PREHEAT_JOBS)}
    for name, pool in (("n1", "l4"), ("n2", "cpu")):
        meta = {"name": name, "uid": f"node-{name}", "resourceVersion": "7", "labels": {"pool": pool}}
        partial = {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": meta}
        stores[IDX_NODES].put(partial)
    for job in jobs or []:
        stores[IDX_PREHEAT_JOBS].put(job)
    rt.indexes = Indexes({IDX_MODELS: {"qwen": [model]}}, stores)
    return rt


MARKED = {preheat.PREHEAT_KEY: "true"}
CACHE = SharedCache(host_path="/var/lib/llmaz/models")


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_without_a_shared_cache_the_model_says_what_to_configure() -> None:
    rt = runtime(None, **MARKED)
    status = desired_status(rt, "model", rt.indexes.model("qwen"))  # type: ignore[union-attr, arg-type]
    cond = conditions(status)["Preheated"]
    assert (cond["status"], cond["reason"]) == ("False", "SharedCacheNotConfigured")
    assert "modelLoader.sharedCache" in cond["message"]
    assert op_preheat.desired(rt, rt.indexes.model("qwen")).jobs == []  # type: ignore[union-attr, arg-type]


def test_unmarked_models_have_no_preheat_status_and_the_counts_are_removed() -> None:
    rt = runtime(CACHE)
    status = desired_status(rt, "model", rt.indexes.model("qwen"))  # type: ignore[union-attr, arg-type]
    assert set(conditions(status)) == {"InUse"}
    assert status["preheat"] is None  # a merge patch with null deletes the counts


def test_marked_model_gets_one_job_in_the_configured_namespace_and_reports_progress() -> None:
    rt = runtime(CACHE, **MARKED)
    snap = rt.indexes.model("qwen")  # type: ignore[union-attr]
    (job,) = op_preheat.desired(rt, snap).jobs  # type: ignore[arg-type]
    assert job["metadata"]["namespace"] == "models"
    assert job["spec"]["template"]["spec"]["nodeName"] == "n1"
    status = desired_status(rt, "model", snap)  # type: ignore[arg-type]
    assert conditions(status)["Preheated"]["reason"] == "Preheating"
    assert status["preheat"] == {"nodes": 1, "preheated": 0, "failed": 0}
    done = {**job, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    rt = runtime(CACHE, [done], **MARKED)
    status = desired_status(rt, "model", rt.indexes.model("qwen"))  # type: ignore[union-attr, arg-type]
    cond = conditions(status)["Preheated"]
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == ("True", "Preheated", 2)
    assert status["preheat"] == {"nodes": 1, "preheated": 1, "failed": 0}


def test_status_refreshes_wait_until_every_watch_has_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model's status refresh queued at start-up (its listing queues one) waits for every watch
    to have listed: before that, its users, the nodes or its preheat Jobs may be missing, and the
    status would say the Jobs do not exist (or the model is unused) and be written again at once."""
    rt = runtime(CACHE, **MARKED)
    refreshed: list[tuple[str, str]] = []

    async def refresh(_rt: Runtime, ref: str, name: str) -> bool:
        refreshed.append((ref, name))
        return True

    monkeypatch.setattr(usage, "refresh", refresh)
    monkeypatch.setattr(usage, "COALESCE_SECONDS", 0.01)

    async def scenario() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        rt.listed = asyncio.Event()
        usage.mark(rt, [("model", "qwen")])
        await asyncio.sleep(0.2)  # twenty times the coalescing delay
        before = list(refreshed)
        rt.listed.set()
        for _ in range(100):
            await asyncio.sleep(0.01)
            if refreshed:
                break
        return before, list(refreshed)

    before, after = asyncio.run(scenario())
    assert before == []
    assert after == [("model", "qwen")]
