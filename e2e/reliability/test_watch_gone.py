"""Watch 410 Gone after an etcd compaction, on the real control plane (tier B).

The API server of this scenario runs with ``--watch-cache=false`` (restarted with the flag, then
restarted again without it for the rest of the session), so watches are served by etcd itself and
a watch that resumes from a compacted resourceVersion is answered ``410 Gone``, as in a cluster
whose watch cache lost that history. The operator reaches the API server through the fault proxy,
which refuses it while users edit and etcd is compacted through its v3 JSON gateway; when the proxy
lets it through again, the operator's watches (every kind it reads, preheat's included) resume
from the last resourceVersion they saw, get 410, and must list again; a
LeaderWorkerSet deleted meanwhile is missing from that listing, which must count as its deletion
(it is recreated). In the full set (``nox -s reliability``).
"""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fault_proxy import FaultProxy, proxied_kubeconfig
from operator_helpers import bind_operator_account
from reliability_helpers import (
    ACCOUNT,
    OUTLASTING_LEASE,
    Figures,
    audit_entries,
    audit_writes,
    check_bounded_log,
    check_healthy,
    check_unique_and_owned,
    converged_with_arg,
    edited,
    elapsed,
    get,
    leading_operator,
    log_lines,
    model,
    playground,
    rss_mib,
    wait_converged,
    wait_until,
)

from llmaz_devkit.cluster import ControlPlane

pytestmark = pytest.mark.slow

T_CONV = 180.0
"""Convergence bound after the fault ends, on 2 shared CPUs."""


def etcd_call(cp: ControlPlane, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST to etcd's v3 JSON gateway (etcd of the harness listens on plain HTTP on loopback)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{cp.ports['etcd-client']}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        result: dict[str, Any] = json.loads(answer.read())
    return result


def etcd_revision(cp: ControlPlane) -> int:
    """etcd's current revision (the header of any range request carries it)."""
    key = base64.b64encode(b"/registry/namespaces/default").decode()
    return int(etcd_call(cp, "/v3/kv/range", {"key": key, "keys_only": True})["header"]["revision"])


def compact(cp: ControlPlane, revision: int) -> None:
    """Compact etcd's history up to ``revision``: older revisions cannot be watched from any more."""
    etcd_call(cp, "/v3/kv/compaction", {"revision": str(revision), "physical": True})


def relists(cp: ControlPlane, user: str, since: float, resource: str) -> int:
    """LIST requests of ``user`` for ``resource`` after ``since``: the operator lists a kind only when
    it starts and after a watch answered 410 (a broken connection resumes the watch, no list)."""
    return sum(
        e.get("verb") == "list" and (e.get("objectRef") or {}).get("resource") == resource
        for e in audit_entries(cp, user, since)
    )


def test_watch_gone_after_compaction_relists_and_converges_without_duplicates(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    cp, fig = control_plane, Figures("watch-410-gone")
    mdl = "qwen-rel-gone"
    first = {"a", "b", "c"}
    cp.apply([model(mdl)] + [playground(n, namespace, mdl) for n in sorted(first)])
    original = cp.component_args("apiserver")
    began = time.monotonic()
    cp.restart_component("apiserver", [*original, "--watch-cache=false"])
    fig.add("apiserver restart without watch cache", elapsed(began), " s")
    try:
        with FaultProxy(cp.ports["apiserver"]) as proxy:
            kubeconfig = proxied_kubeconfig(
                bind_operator_account(cp, ACCOUNT), proxy.port, tmp_path / "proxied.kubeconfig"
            )
            with leading_operator(cp, tmp_path, kubeconfig=kubeconfig, lease=OUTLASTING_LEASE) as op:
                wait_converged(cp, namespace, first, op, T_CONV)
                pid, before = op.proc.pid, log_lines(op.log)
                # cut the operator off: every open connection aborted, new ones refused
                proxy.refuse = True
                proxy.reset_all()
                cut = time.time()
                began = time.monotonic()
                # while it cannot see: an edit, a create and a delete, then the history compacted
                cp.apply([edited("a", namespace, mdl, "--after-gone"), playground("d", namespace, mdl)])
                cp.kubectl("delete", "pl/c", "-n", namespace, "--wait=false")
                # and a child deleted: only a relisting that reports what it lacks brings it back
                lost_uid = (get(cp, "leaderworkerset/b", namespace) or {})["metadata"]["uid"]
                cp.kubectl("delete", "leaderworkerset/b", "-n", namespace, "--wait=false")
                revision = etcd_revision(cp)
                compact(cp, revision)
                fig.add("compacted at revision", revision)
                time.sleep(3)  # a few refused reconnects: the watches are retried with their old RVs
                proxy.refuse = False
                reopened = time.monotonic()
                final = {"a", "b", "d"}
                wait_until(
                    lambda: (
                        converged_with_arg(cp, namespace, final, "a", "--after-gone")
                        and get(cp, "leaderworkerset/c", namespace) is None
                        and (get(cp, "leaderworkerset/b", namespace) or {}).get("metadata", {}).get("uid")
                        not in (None, lost_uid)
                    ),
                    "convergence after the 410",
                    T_CONV,
                    op.log,
                )
                fig.add("time to converge after the proxy reopened", elapsed(reopened), " s")
                # the positive control: the Playground watch resumed from a compacted RV, got 410
                # and was listed again (without a 410 it would only have been watched again)
                listed = relists(cp, op.user, cut, "playgrounds")
                fig.add("Playground re-lists", listed)
                assert listed >= 1, "no re-list after the compaction: no watch got 410, nothing proven"
                # the operator's own watch of children (llmaz.operator.watch) relisted too
                lws_listed = relists(cp, op.user, cut, "leaderworkersets")
                fig.add("LeaderWorkerSet re-lists", lws_listed)
                assert lws_listed >= 1, "the children's watch did not list again after the 410"
                assert op.proc.pid == pid
                check_unique_and_owned(cp, namespace, final)
                check_healthy(op)
                check_bounded_log(fig, op.log, before, began)
                fig.add("operator writes to converge", len(audit_writes(cp, op.user, cut)))
                fig.add("RSS", rss_mib(op), " MiB")
    finally:
        cp.restart_component("apiserver", original)
    fig.report()
