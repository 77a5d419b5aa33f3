"""CPU per watch event of a LeaderWorkerSet or a serving pod: through the operator's own watch
(:mod:`llmaz.operator.watch`, which takes those kinds), and through kopf's own event processing
with no-op handlers, for comparison (issue 15: what one event costs the operator before any
reconcile).

Events are decoded already (the JSON decoding costs the same either way) and are handed one after
another to the operator's watch stream, or replayed through kopf's event processing
(:func:`llmaz.operator.replay.replay`: what kopf's per-object workers do for every event of a
watch) on one event loop; the process's CPU time is divided by their number. The LeaderWorkerSet
is the one ``llmaz render`` makes of ``docs/examples/huggingface/playground.yaml``, with the
fields the API server and the LWS controller add; it has no owner, so the operator's watch
neither indexes it (packing is measured on its own) nor queues a reconcile (this measures the
event, not a reconcile). Pods are fed as a listing, which the pod handler only records.

Run: ``.venv/bin/python benchmarks/kopf_events_bench.py [EVENTS]``. It is a benchmark, not a test:
it prints a table and never fails on a number.
"""

from __future__ import annotations

import argparse
import copy
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kopf
import yaml

from llmaz.api.conventions import LABEL_MODEL_NAME, MANAGED_BY, MANAGER
from llmaz.operator.handlers import watched_kinds
from llmaz.operator.replay import offline_runtime, replay
from llmaz.operator.runtime import pack
from llmaz.operator.watch import Watches
from llmaz.plugins.manager import PluginManager
from llmaz.render.manifests import render_manifests
from llmaz.render.objects import LWS_NAME_LABEL

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "huggingface" / "playground.yaml"
LWS = kopf.Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", namespaced=True)
PODS = kopf.Resource("", "v1", "pods", namespaced=True)


def rendered_lws() -> dict[str, Any]:
    """The example's LeaderWorkerSet as the operator's watch receives it."""
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    rendered = render_manifests(docs, plugins=PluginManager.from_environment(check_rules=False))
    lws = copy.deepcopy(next(o for o in rendered if o["kind"] == "LeaderWorkerSet"))
    meta = lws["metadata"]
    meta.setdefault("labels", {})[MANAGED_BY] = MANAGER
    meta.update(
        uid="lws-uid",
        resourceVersion="1",
        generation=1,
        creationTimestamp="2026-01-01T00:00:00Z",
        managedFields=[{"manager": MANAGER, "operation": "Apply", "fieldsV1": {"f:spec": {}}}],
    )
    lws["status"] = {
        "conditions": [{"type": "Available", "status": "True", "reason": "AllGroupsReady"}],
        "replicas": 1,
        "readyReplicas": 1,
    }
    return lws


def serving_pod(i: int) -> dict[str, Any]:
    name = f"pg-{i % 300}"
    return {
        "metadata": {
            "name": f"{name}-0",
            "namespace": "bench",
            "uid": f"pod-{i % 300}",
            "resourceVersion": str(i + 2),
            "labels": {LABEL_MODEL_NAME: "m", LWS_NAME_LABEL: name},
        },
        "spec": {"containers": [{"name": "model-runner", "image": "vllm/vllm-openai:v0.8.5"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def cpu_per_event(registry: kopf.OperatorRegistry, resource: kopf.Resource, events: list[Any]) -> float:
    """Microseconds of process CPU per event."""
    return replay([(resource, event) for event in events], registry=registry) / len(events) * 1e6


def own_watch(kind: str, events: list[Any]) -> float:
    """Microseconds of process CPU per event handed to the operator's own watch stream of ``kind``."""
    rt = offline_runtime()
    stream = Watches(None, watched_kinds(rt), [], rt.metrics.count_event).stream(kind)  # type: ignore[arg-type]
    stream.relisted([])
    start = time.process_time()
    for event in events:
        stream.event(event, "1")
    return (time.process_time() - start) / len(events) * 1e6


def own_listing(kind: str, objects: list[Any]) -> float:
    """Microseconds of process CPU per object of a listing taken by the operator's own watch."""
    rt = offline_runtime()
    stream = Watches(None, watched_kinds(rt), [], rt.metrics.count_event).stream(kind)  # type: ignore[arg-type]
    start = time.process_time()
    stream.relisted(objects)
    return (time.process_time() - start) / len(objects) * 1e6


def noop_registry(*, index: bool) -> kopf.OperatorRegistry:
    """One no-op event handler for LeaderWorkerSets, and a no-op index when ``index``."""
    registry = kopf.OperatorRegistry()

    @kopf.on.event(LWS.group, LWS.version, LWS.plural, registry=registry)
    async def event(**_: Any) -> None:
        return None

    if index:

        @kopf.index(LWS.group, LWS.version, LWS.plural, id="noop", registry=registry)
        async def by_nothing(**_: Any) -> dict[Any, Any]:
            return {}

    return registry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("events", nargs="?", type=int, default=3000, help="events per measurement")
    args = parser.parse_args(argv)
    lws = rendered_lws()

    def lws_events(kind: str | None) -> list[Any]:
        out = []
        for i in range(args.events):  # 300 objects, each seen again and again with a new version
            body = copy.deepcopy(lws)
            body["metadata"].update(uid=f"lws-{i % 300}", name=f"pg-{i % 300}", resourceVersion=str(i + 2))
            out.append({"type": kind, "object": body})
        return out

    pods = [serving_pod(i) for i in range(args.events)]
    rows: list[tuple[str, Callable[[], float]]] = [
        (
            "LWS update, the operator's own watch (no owner: not indexed)",
            lambda: own_watch("LeaderWorkerSet", lws_events("MODIFIED")),
        ),
        ("pod listed, the operator's own watch", lambda: own_listing("Pod", pods)),
        (
            "LWS update, one no-op event handler",
            lambda: cpu_per_event(noop_registry(index=False), LWS, lws_events("MODIFIED")),
        ),
        (
            "LWS update, a no-op index and a no-op event handler",
            lambda: cpu_per_event(noop_registry(index=True), LWS, lws_events("MODIFIED")),
        ),
    ]
    print(f"| CPU per event ({args.events} events) | us |")
    print("|---|---:|")
    for label, measure in rows:
        print(f"| {label} | {measure():.0f} |")
    body = kopf.Body(lws)
    packing = timeit.timeit(lambda: pack(body), number=2000) / 2000 * 1e6
    print(f"| packing the LWS into an index (`runtime.pack`) | {packing:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
