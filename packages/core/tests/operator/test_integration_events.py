"""The integrations' share of a Playground's, inference Service's or OpenModel's event is run by that
kind's own watch handler (no watch of their own; issue 15): the namespace is queued for an
integrations pass and the object for a reconcile, and a failure in the integrations' part is logged
without keeping the object from its reconcile. The operator's real handlers, called as its watches
call them; the namespace queue and the work queue are recorded instead of run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from llmaz.operator.handlers import _common, integrations, playground, service, watched_kinds
from llmaz.operator.integrations import IntegrationState
from llmaz.operator.runtime import IDX_PLAYGROUNDS, Indexes, Runtime


def _workload(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "team-a", "uid": f"{kind}-{name}", "resourceVersion": "1"},
        "spec": spec,
    }


PLAYGROUND = _workload("Playground", "chat", {"modelClaim": {"modelName": "qwen"}})
SERVICE = _workload("Service", "embed", {"modelClaims": {"models": [{"name": "qwen"}]}})
MODEL = {
    "apiVersion": "llmaz.io/v1alpha1",
    "kind": "OpenModel",
    "metadata": {"name": "qwen", "uid": "model-qwen", "resourceVersion": "5"},
    "spec": {"familyName": "qwen2"},
}


@pytest.fixture
def recorded(
    monkeypatch: pytest.MonkeyPatch, make_runtime: Callable[[Any], Runtime]
) -> tuple[Runtime, list[tuple[str, ...]], list[tuple[str, str, str]]]:
    """A runtime, the namespaces queued for an integrations pass, the objects queued for a reconcile."""
    passes: list[tuple[str, ...]] = []
    reconciles: list[tuple[str, str, str]] = []
    monkeypatch.setattr(integrations, "mark", lambda _rt, _state, *namespaces: passes.append(namespaces))
    for module in (playground, service):
        monkeypatch.setattr(module, "enqueue", lambda _rt, *key: reconciles.append(key))
    monkeypatch.setattr(_common, "enqueue_many", lambda _rt, keys: reconciles.extend(keys))
    return make_runtime(None), passes, reconciles


def _deliver(rt: Runtime, body: dict[str, Any], indexes: dict[str, Any] | None = None) -> None:
    rt.indexes = Indexes(indexes or {})
    handler = next(
        k.handler for k in watched_kinds(rt) if (k.api_version, k.kind) == (body["apiVersion"], body["kind"])
    )

    async def deliver() -> None:  # (as the watches do: on the event loop)
        handler("MODIFIED", body)

    asyncio.run(deliver())


def test_a_workload_event_queues_its_namespace_and_its_reconcile(recorded: Any) -> None:
    rt, passes, reconciles = recorded
    _deliver(rt, PLAYGROUND)
    _deliver(rt, SERVICE)
    assert passes == [("team-a",), ("team-a",)]
    assert reconciles == [("Playground", "team-a", "chat"), ("Service", "team-a", "embed")]


def test_a_model_event_queues_the_namespaces_of_its_dependents(recorded: Any) -> None:
    rt, passes, reconciles = recorded
    index = {IDX_PLAYGROUNDS: {k: [v] for k, v in playground.index_entries(PLAYGROUND).items()}}
    _deliver(rt, MODEL, index)
    assert passes == [("team-a",)]
    assert reconciles == [("Playground", "team-a", "chat")]  # its first sight of the model's spec


def test_a_failing_integrations_part_is_logged_and_the_object_still_reconciled(
    recorded: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rt, passes, reconciles = recorded

    def broken(*_: Any) -> bool:
        raise RuntimeError("integration state broken")

    monkeypatch.setattr(IntegrationState, "relevant", broken)
    with caplog.at_level(logging.ERROR, logger=integrations.__name__):
        _deliver(rt, PLAYGROUND)
    assert reconciles == [("Playground", "team-a", "chat")]
    assert passes == []
    assert "integration state broken" in caplog.text
