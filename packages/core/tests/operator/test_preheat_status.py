"""An OpenModel's status while it is marked for preheating (:mod:`llmaz.operator.preheat` and the
status refresh of :mod:`llmaz.operator.usage`), from the indexes the operator keeps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from llmaz.operator import preheat as op_preheat
from llmaz.operator.config import ModelLoader, OperatorConfig
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import IDX_MODELS, IDX_NODES, IDX_PREHEAT_JOBS, Indexes, Runtime
from llmaz.operator.usage import desired_status
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
    rt.indexes = Indexes(
        {
            IDX_MODELS: {"qwen": [model]},
            IDX_NODES: {
                "n1": [{"name": "n1", "labels": {"pool": "l4"}}],
                "n2": [{"name": "n2", "labels": {"pool": "cpu"}}],
            },
            IDX_PREHEAT_JOBS: {"qwen": jobs or []},
        }
    )
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


def test_before_kopf_lists_nodes_and_jobs_the_preheat_part_of_the_status_stays() -> None:
    """The OpenModels come through the operator's own watch, the nodes and preheat Jobs through
    kopf's, which may list them later: a refresh in between must not report the Jobs as missing
    (nor drop the counts); it keeps what the status says, and once kopf's indexes are there the
    refresh reports them."""
    rt = runtime(CACHE, **MARKED)
    model = rt.indexes.model("qwen")  # type: ignore[union-attr]
    assert model is not None
    before = {
        "conditions": [
            {
                "type": "Preheated",
                "status": "True",
                "reason": "Preheated",
                "message": "1 of 1",
                "lastTransitionTime": "2025-12-31T00:00:00Z",
            }
        ],
        "preheat": {"nodes": 1, "preheated": 1, "failed": 0},
    }
    model["status"] = before
    rt.indexes = Indexes({IDX_MODELS: {"qwen": [model]}})  # kopf's indexes not adopted yet
    status = desired_status(rt, "model", model)
    assert conditions(status)["Preheated"] == before["conditions"][0]
    assert status["preheat"] == before["preheat"]
    assert set(conditions(status)) == {"InUse", "Preheated"}
    rt.indexes.adopt({IDX_NODES: {"n1": [{"name": "n1", "labels": {"pool": "l4"}}]}, IDX_PREHEAT_JOBS: {}})
    status = desired_status(rt, "model", model)
    assert conditions(status)["Preheated"]["reason"] == "Preheating"  # its Job does not exist
    assert status["preheat"] == {"nodes": 1, "preheated": 0, "failed": 0}
