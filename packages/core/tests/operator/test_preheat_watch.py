"""Preheat's watches (:mod:`llmaz.operator.handlers.preheat`) on the operator's own watch streams:
what reconciles a model's preheat Jobs and when. No API server: the reconcile and the status
refresh are recorded instead of run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from llmaz.operator import usage
from llmaz.operator.config import ModelLoader, OperatorConfig
from llmaz.operator.handlers import preheat as handlers
from llmaz.operator.handlers import watched_kinds
from llmaz.operator.kube import ObjectKey
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import IDX_PREHEAT_PODS, Indexes, Runtime
from llmaz.operator.watch import Watches
from llmaz.render.preheat import LABEL_PREHEAT_MODEL, PREHEAT_KEY


def _model(name: str, marked: bool) -> dict[str, Any]:
    labels = {PREHEAT_KEY: "true"} if marked else {}
    return {
        "metadata": {"name": name, "uid": f"m-{name}", "resourceVersion": "1", "labels": labels},
        "spec": {"familyName": "qwen2", "source": {"modelHub": {"modelID": "Qwen/Qwen2-0.5B"}}},
    }


def _node(name: str, version: str, **labels: str) -> dict[str, Any]:
    """A node as a metadata-only watch brings it."""
    meta = {"name": name, "uid": f"n-{name}", "resourceVersion": version, "labels": labels}
    return {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": meta}


class Recorder:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reconciled: list[str] = []
        self.marked: list[str] = []

        async def reconcile(_rt: Runtime, name: str) -> None:
            self.reconciled.append(name)

        monkeypatch.setattr(handlers, "reconcile_preheat", reconcile)
        monkeypatch.setattr(usage, "mark", lambda _rt, refs: self.marked.extend(n for _, n in refs))


def _runtime() -> tuple[Runtime, Watches]:
    config = OperatorConfig(model_loader=ModelLoader(preheat_namespace="models"))
    rt = Runtime(config, None, None, Metrics(), "unit")  # type: ignore[arg-type]
    watches = Watches(None, watched_kinds(rt), [], rt.metrics.count_event)  # type: ignore[arg-type]
    rt.stores, rt.listed = watches.stores, watches.listed
    rt.indexes = Indexes({}, watches.stores)
    return rt, watches


async def _settle(rt: Runtime) -> None:
    for _ in range(5):
        await asyncio.sleep(0)
    await asyncio.gather(*list(rt.tasks))


def test_models_are_reconciled_once_every_watch_has_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model listed before the nodes and Jobs are must not be reconciled yet: it would not see
    the Jobs that exist and would create them again."""
    seen = Recorder(monkeypatch)

    async def scenario() -> tuple[list[str], list[str]]:
        rt, watches = _runtime()
        watches.stream("OpenModel").relisted([_model("qwen", True), _model("plain", False)])
        await asyncio.sleep(0.05)
        before = list(seen.reconciled)
        rt.listed.set()  # type: ignore[union-attr]
        await _settle(rt)
        return before, sorted(seen.reconciled)

    before, after = asyncio.run(scenario())
    assert before == []
    assert after == ["plain", "qwen"]  # an unmarked model too: Jobs it may still have are deleted


def test_a_node_label_change_reconciles_marked_models_and_a_status_update_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = Recorder(monkeypatch)

    async def scenario() -> list[list[str]]:
        rt, watches = _runtime()
        rt.listed.set()  # type: ignore[union-attr]
        watches.stream("OpenModel").relisted([_model("qwen", True), _model("plain", False)])
        await _settle(rt)
        nodes = watches.stream("Node")
        nodes.relisted([_node("gpu-0", "5", pool="l4")])
        steps: list[list[str]] = []
        for event in (
            {"type": "MODIFIED", "object": _node("gpu-0", "6", pool="l4")},  # a heartbeat
            {"type": "MODIFIED", "object": _node("gpu-0", "7", pool="a100")},  # relabelled
            {"type": "ADDED", "object": _node("gpu-1", "8", pool="l4")},
            {"type": "DELETED", "object": _node("gpu-1", "9", pool="l4")},
        ):
            seen.reconciled.clear()
            nodes.event(event, "5")
            await _settle(rt)
            steps.append(sorted(seen.reconciled))
        assert rt.indexes is not None
        assert rt.indexes.nodes() == [{"name": "gpu-0", "labels": {"pool": "a100"}}]
        return steps

    assert asyncio.run(scenario()) == [[], ["qwen"], ["qwen"], ["qwen"]]


def test_a_deleted_preheat_job_is_forgotten_and_its_model_reconciled(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = Recorder(monkeypatch)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "preheat-qwen-gpu-0",
            "namespace": "models",
            "uid": "j1",
            "resourceVersion": "3",
            "labels": {LABEL_PREHEAT_MODEL: "qwen"},
        },
    }

    async def scenario() -> tuple[Runtime, list[str]]:
        rt, watches = _runtime()
        rt.listed.set()  # type: ignore[union-attr]
        rt.applied[ObjectKey.of(job)] = ("digest", 3)
        jobs = watches.stream("Job", "models")
        jobs.relisted([job])
        await _settle(rt)
        assert seen.reconciled == []  # the listing: the models' own listing reconciles them
        assert rt.indexes is not None
        assert rt.indexes.preheat_models() == ["qwen"]
        jobs.event({"type": "DELETED", "object": job}, "3")
        await _settle(rt)
        return rt, list(seen.reconciled)

    rt, reconciled = asyncio.run(scenario())
    assert reconciled == ["qwen"]
    assert ObjectKey.of(job) not in rt.applied
    assert seen.marked == ["qwen"]
    assert rt.indexes is not None
    assert rt.indexes.preheat_models() == []


def test_a_failed_preheat_pod_queues_its_models_status_with_the_loaders_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = Recorder(monkeypatch)
    pod: dict[str, Any] = {
        "metadata": {
            "name": "preheat-qwen-gpu-0-x1",
            "namespace": "models",
            "uid": "p1",
            "resourceVersion": "4",
            "labels": {LABEL_PREHEAT_MODEL: "qwen", "batch.kubernetes.io/job-name": "preheat-qwen-gpu-0"},
        },
        "status": {"containerStatuses": [{"state": {"running": {}}}]},
    }
    failed = {
        **pod,
        "status": {
            "containerStatuses": [
                {"state": {"terminated": {"exitCode": 3, "message": "no space left on device\nat ..."}}}
            ]
        },
    }

    async def scenario() -> Runtime:
        rt, watches = _runtime()
        rt.listed.set()  # type: ignore[union-attr]
        pods = watches.stream("Pod", "models", store_id=IDX_PREHEAT_PODS)
        pods.relisted([pod])
        pods.event({"type": "MODIFIED", "object": pod}, "4")
        assert seen.marked == []  # running: nothing the status says changes
        pods.event({"type": "MODIFIED", "object": failed}, "4")
        return rt

    rt = asyncio.run(scenario())
    assert seen.marked == ["qwen"]
    assert rt.indexes is not None
    assert rt.indexes.preheat_causes("qwen") == {"preheat-qwen-gpu-0": "no space left on device"}
