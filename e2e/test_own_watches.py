"""The operator's own watches of children and serving pods (:mod:`llmaz.operator.watch`) against the
real API server, in the situations a user meets them outside a steady run:

* a kind the operator may not list (its ServiceAccount lacks ResourceClaimTemplates, as a chart
  with DRA's rule removed would) is named in the log with the API server's answer, and does not
  hold up reconciles of everything else;
* a child deleted while no operator ran is recreated by the next one, which lists every child kind
  before it reconciles: the children that exist are not created a second time;
* nodes come metadata-only (preheat's watch), and a relabelled node still reaches the index.

The operator is a local process (no container runtime here), with leader election off, watching
only the test namespace; KWOK pods stand in for the engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

from operator_helpers import (
    SA_NAMESPACE,
    audit_entries,
    get,
    install_crds,
    model,
    playground,
    reason,
    running_operator,
    wait_until,
)

from llmaz.operator.config import OperatorConfig
from llmaz.operator.handlers import preheat
from llmaz.operator.kube import Kube
from llmaz.operator.metrics import Metrics
from llmaz.operator.rbac import RULES
from llmaz.operator.runtime import Indexes, Runtime
from llmaz.operator.watch import Watches
from llmaz_devkit.cluster import ControlPlane, NodePool

ACCOUNT = "llmaz-operator-own-watches"


def _config(namespace: str) -> dict[str, Any]:
    return {"namespaces": [namespace], "leaderElection": {"enabled": False}}


def _ready_and_available(cp: ControlPlane, op: Any, namespace: str, name: str) -> None:
    wait_until(op.ready, "operator ready", 60, op.log)
    wait_until(
        lambda: reason(cp, f"pl/{name}", namespace) == "Available", f"Playground {name} Available", 90, op.log
    )


def test_a_kind_the_operator_may_not_list_is_logged_and_does_not_stop_reconciles(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    cp = control_plane
    install_crds(cp)
    rules = [r for r in RULES if "resourceclaimtemplates" not in r.resources]
    assert len(rules) == len(RULES) - 1  # the rule is there to remove
    kubeconfig = cp.account_bound_to(
        SA_NAMESPACE, ACCOUNT, "llmaz-operator-e2e-no-dra", [r.to_dict() for r in rules]
    )
    cp.apply([model("qwen-own-watch"), playground("chat", namespace, "qwen-own-watch")])
    with running_operator(cp, tmp_path, ACCOUNT, _config(namespace), kubeconfig=kubeconfig) as op:
        _ready_and_available(cp, op, namespace, "chat")
        assert get(cp, "lws/chat", namespace) is not None
        log = op.log.read_text()
        refused = [line for line in log.splitlines() if "cannot watch resourceclaimtemplates" in line]
        assert refused, log[-3000:]
        assert f"resourceclaimtemplates.resource.k8s.io in {namespace}: HTTP 403" in refused[0]
        assert "retry in 60s" in refused[0]


def test_a_child_deleted_while_no_operator_ran_is_recreated_and_nothing_is_created_twice(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    cp = control_plane
    install_crds(cp)
    cp.apply([model("qwen-restart"), playground("chat", namespace, "qwen-restart")])
    with running_operator(cp, tmp_path, ACCOUNT + "-1", _config(namespace)) as first:
        _ready_and_available(cp, first, namespace, "chat")
    old_lws = get(cp, "lws/chat", namespace)
    assert old_lws is not None
    cp.kubectl("delete", "service", "chat-lb", "-n", namespace)  # deleted while nobody watches

    since = time.time() - 1  # audit stamps have whole seconds
    with running_operator(cp, tmp_path, ACCOUNT + "-2", _config(namespace)) as second:
        wait_until(second.ready, "second operator ready", 60, second.log)
        wait_until(
            lambda: get(cp, "service/chat-lb", namespace) is not None, "chat-lb recreated", 30, second.log
        )
        wait_until(lambda: reason(cp, "pl/chat", namespace) == "Available", "still Available", 30, second.log)
        creates = sorted(
            f"{e['objectRef'].get('resource')}/{e['objectRef'].get('name')}"
            for e in audit_entries(cp, second.user, since)
            if e.get("verb") == "create" and (e.get("objectRef") or {}).get("namespace") == namespace
        )
    assert creates == ["services/chat-lb"], creates  # only the deleted one: the LWS and isvc were listed
    lws = get(cp, "lws/chat", namespace)
    assert lws is not None
    assert lws["metadata"]["uid"] == old_lws["metadata"]["uid"]


def test_nodes_are_watched_metadata_only_and_a_relabelled_node_reaches_the_index(
    control_plane: ControlPlane, namespace: str
) -> None:
    """Preheat's node watch asks the real API server for ``PartialObjectMetadata``: every listed or
    watched node comes without spec and status (KWOK updates a node's status here as a kubelet
    does: most of a node's events), and a label set on a node still reaches the index preheat
    selects nodes from."""
    cp = control_plane
    rt = Runtime(OperatorConfig(), None, None, Metrics(), "e2e")  # type: ignore[arg-type]
    (node_kind,) = [k for k in preheat.watched_kinds(rt) if k.kind == "Node"]
    seen: list[tuple[str | None, dict[str, Any]]] = []
    kind = dataclasses.replace(node_kind, handler=lambda change, body: seen.append((change, dict(body))))
    (node,) = NodePool(f"meta-{namespace}"[:40].rstrip("-"), 1).manifests()
    name = node["metadata"]["name"]
    taint = {"key": "llmaz.io/e2e-metadata-only", "value": "only", "effect": "NoSchedule"}
    node["spec"] = {"taints": [taint]}

    async def scenario() -> list[dict[str, Any]]:
        kube = Kube.connect(cp.admin_kubeconfig)
        watches = Watches(kube, [kind], [], rt.metrics.count_event)
        indexes = Indexes({}, watches.stores)
        watches.start()
        try:
            await asyncio.wait_for(watches.listed.wait(), 30)
            await asyncio.to_thread(cp.apply, [node])
            await asyncio.to_thread(cp.kubectl, "label", "node", name, "llmaz.io/e2e-relabelled=yes")
            for _ in range(300):
                labels = {n["name"]: n["labels"] for n in indexes.nodes()}.get(name) or {}
                if labels.get("llmaz.io/e2e-relabelled") == "yes":
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError(f"the label never reached the index: {indexes.nodes()}")
        finally:
            await watches.stop()
            await kube.aclose()
            await asyncio.to_thread(cp.kubectl, "delete", "node", name, "--ignore-not-found")
        return [body for _, body in seen]

    bodies = asyncio.run(scenario())
    assert len(bodies) >= 3  # listed (other nodes), added, relabelled
    for body in bodies:
        assert "status" not in body, body
        assert "spec" not in body, body
        assert body["metadata"]["name"]
    mine = [b for b in bodies if b["metadata"]["name"] == name]
    assert mine, [b["metadata"]["name"] for b in bodies]
    assert {b["kind"] for b in mine} == {"PartialObjectMetadata"}
