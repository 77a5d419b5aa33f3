"""Dangling references, reference churn and reference "cycles" of dependents (plan §2.2 row 20).

Playgrounds and Services name OpenModels and BackendRuntimes; the operator indexes them by those
names, so a dependent converges when its referent appears, changes or goes. One operator and one
namespace go through three phases on the real control plane (tier B):

1. dangling: a missing OpenModel, BackendRuntime and recommended config; a speculative-decoding
   Service whose draft model is missing; an OpenModel deleted while three Playgrounds serve it.
   Each shows the reason naming the object. The children of a Playground whose model vanished are
   kept (it keeps serving what it last rendered; the Go llmaz does not tear them down either).
2. churn: a Playground switched A -> B -> A; a model deleted and re-created with another source; a
   BackendRuntime deleted and re-created with another version. Each ends on the latest referents,
   and editing a model a Playground no longer names writes nothing about it (no stale index entry).
3. "cycles": a claim whose main and draft are the same model; two Playgrounds swapping their models
   in one apply. No loop: no child write in a quiet window.

Afterwards C, U, O, H (short log lines) and R (RBAC refused nothing, checked by ``leading_operator``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from operator_helpers import backend_runtime, condition
from reliability_helpers import (
    Figures,
    audit_writes,
    check_bounded_log,
    check_healthy,
    check_unique_and_owned,
    child_writes,
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

T_CONV = 120.0
"""Convergence bound per step, on 2 shared CPUs."""
QUIET = 12.0
"""Seconds without a child write that make a dependent "not looping"."""

A, B, SHARED = "qwen-ref-a", "qwen-ref-b", "qwen-ref-shared"
ENGINE = "ref-engine"


def sourced(name: str, model_id: str) -> dict[str, Any]:
    """OpenModel ``name`` whose hub source is ``model_id``."""
    doc = model(name)
    doc["spec"]["source"]["modelHub"]["modelID"] = model_id
    return doc


def engine(version: str) -> dict[str, Any]:
    doc = backend_runtime(ENGINE)
    doc["spec"]["version"] = version
    return doc


def claims(pl: dict[str, Any], main: str, draft: str) -> dict[str, Any]:
    """``pl`` claiming ``main`` and a ``draft`` model (speculative decoding)."""
    del pl["spec"]["modelClaim"]
    pl["spec"]["modelClaims"] = {"models": [{"name": main, "role": "main"}, {"name": draft, "role": "draft"}]}
    return pl


def inference_service(name: str, namespace: str, main: str, draft: str) -> dict[str, Any]:
    runner = {"name": "model-runner", "image": "example.com/engine:v1"}
    models = [{"name": main, "role": "main"}, {"name": draft, "role": "draft"}]
    return {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "modelClaims": {"models": models},
            "workloadTemplate": {"workerTemplate": {"spec": {"containers": [runner]}}},
        },
    }


def available(cp: ControlPlane, what: str, namespace: str) -> dict[str, Any]:
    return condition(get(cp, what, namespace), "Available")


def wait_reason(
    cp: ControlPlane, what: str, namespace: str, reason: str, *, names: str, op_log: Path
) -> None:
    """Wait for ``what``'s Available reason ``reason`` with a message naming ``names``."""
    wait_until(
        lambda: (
            available(cp, what, namespace).get("reason") == reason
            and names in available(cp, what, namespace).get("message", "")
        ),
        f"{what}: {reason} naming {names}",
        T_CONV,
        op_log,
    )


def settled(cp: ControlPlane, namespace: str, names: set[str]) -> bool:
    """C for ``names`` only (the dangling Playgrounds beside them never converge): each reports a
    settled reason for its current generation and has its inference Service, LWS and -lb Service."""
    for name in names:
        pl = get(cp, f"pl/{name}", namespace) or {"metadata": {}}
        avail = condition(pl, "Available")
        if avail.get("reason") not in {"Available", "Pending"}:
            return False
        if avail.get("observedGeneration") != pl["metadata"].get("generation"):
            return False
        for child in (f"isvc/{name}", f"leaderworkerset/{name}", f"service/{name}-lb"):
            if get(cp, child, namespace) is None:
                return False
    return True


def lws_text(cp: ControlPlane, namespace: str, name: str) -> str:
    return json.dumps(get(cp, f"leaderworkerset/{name}", namespace) or {})


def serves(cp: ControlPlane, namespace: str, name: str, model_id: str, *others: str) -> bool:
    """The LWS of ``name`` loads ``model_id`` and none of ``others``."""
    text = lws_text(cp, namespace, name)
    return f'"{model_id}"' in text and not any(f'"{o}"' in text for o in others)


def writes_about(cp: ControlPlane, user: str, since: float, namespace: str, name: str) -> list[str]:
    """Operator writes to ``name`` or its children (``name``, ``name-lb``) in ``namespace``."""
    return [
        w
        for w in audit_writes(cp, user, since)
        if w.endswith((f" {namespace}/{name}", f" {namespace}/{name}-lb"))
    ]


def test_dangling_references_churn_and_cycles_converge_without_loops(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    cp, fig, ns = control_plane, Figures("references"), namespace
    cp.apply([model(A), model(B), sourced(SHARED, "Qwen/shared-v1"), engine("v1")])
    with leading_operator(cp, tmp_path) as op:
        began, before, since_start = time.monotonic(), log_lines(op.log), time.time()

        # ---------------------------------------------------------------- 1. dangling
        cp.apply(
            [
                playground("no-model", ns, "qwen-ref-missing"),
                playground("no-backend", ns, A, backendRuntimeConfig={"backendName": "ref-missing-engine"}),
                playground(
                    "no-config", ns, A, backendRuntimeConfig={"backendName": ENGINE, "configName": "ref-nope"}
                ),
                inference_service("draft-missing", ns, A, "qwen-ref-missing-draft"),
                *(playground(f"u{i}", ns, SHARED) for i in range(3)),
            ]
        )
        users = {"u0", "u1", "u2"}
        wait_reason(cp, "pl/no-model", ns, "ModelNotFound", names="'qwen-ref-missing'", op_log=op.log)
        wait_reason(
            cp, "pl/no-backend", ns, "BackendRuntimeNotFound", names="'ref-missing-engine'", op_log=op.log
        )
        wait_reason(cp, "pl/no-config", ns, "ConfigNotFound", names="'ref-nope'", op_log=op.log)
        wait_reason(
            cp, "isvc/draft-missing", ns, "ModelNotFound", names="'qwen-ref-missing-draft'", op_log=op.log
        )
        for name in ("no-model", "no-backend", "no-config"):
            assert get(cp, f"leaderworkerset/{name}", ns) is None, f"{name} rendered a workload"
        assert get(cp, "leaderworkerset/draft-missing", ns) is None

        wait_until(
            lambda: settled(cp, ns, users), "the three users of the shared model converged", T_CONV, op.log
        )
        lws_uids = {u: get(cp, f"leaderworkerset/{u}", ns)["metadata"]["uid"] for u in users}  # type: ignore[index]
        t0 = time.monotonic()
        cp.kubectl("delete", f"openmodel/{SHARED}")
        for u in users:
            wait_reason(cp, f"pl/{u}", ns, "ModelNotFound", names=f"'{SHARED}'", op_log=op.log)
        fig.add("3 users show ModelNotFound after the model's deletion", elapsed(t0), " s")
        # keep serving: the workloads rendered from the vanished model stay as they were
        for u in users:
            lws = get(cp, f"leaderworkerset/{u}", ns)
            assert lws is not None, f"{u}'s LWS was torn down"
            assert lws["metadata"]["uid"] == lws_uids[u], f"{u}'s LWS was replaced"
            assert serves(cp, ns, u, "Qwen/shared-v1"), lws_text(cp, ns, u)[:2000]

        # ---------------------------------------------------------------- 2. churn
        t0 = time.monotonic()
        cp.apply([sourced(SHARED, "Qwen/shared-v2")])  # re-created with another source
        wait_until(
            lambda: all(serves(cp, ns, u, "Qwen/shared-v2", "Qwen/shared-v1") for u in users),
            "the users on the re-created model's new source",
            T_CONV,
            op.log,
        )
        fig.add("3 users on the re-created model", elapsed(t0), " s")

        cp.apply(
            [
                playground("sw", ns, A),
                playground("br-user", ns, A, backendRuntimeConfig={"backendName": ENGINE}),
            ]
        )
        wait_until(lambda: serves(cp, ns, "sw", f"Qwen/{A}"), "sw on A", T_CONV, op.log)
        t0 = time.monotonic()
        cp.apply([playground("sw", ns, B)])
        cp.apply([playground("sw", ns, A)])
        cp.apply([playground("sw", ns, B)])
        cp.apply([playground("sw", ns, A)])
        wait_until(lambda: settled(cp, ns, users | {"sw", "br-user"}), "all but the dangling", T_CONV, op.log)
        wait_until(lambda: serves(cp, ns, "sw", f"Qwen/{A}", f"Qwen/{B}"), "sw back on A", T_CONV, op.log)
        fig.add("A->B->A->B->A switch converged", elapsed(t0), " s")

        # no stale reference: A's InUse names sw, B's (sw named it twice) does not; written after a
        # quiet second, at most 30 s later
        def in_use_of(m: str) -> str:
            return str(condition(get(cp, f"openmodel/{m}"), "InUse").get("message", ""))

        wait_until(
            lambda: f"Playground {ns}/sw" in in_use_of(A) and f"Playground {ns}/sw" not in in_use_of(B),
            "A's InUse names sw and B's does not",
            40,
            op.log,
        )
        # and editing B writes nothing about sw
        time.sleep(2)
        rv = get(cp, "pl/sw", ns)["metadata"]["resourceVersion"]  # type: ignore[index]
        since = time.time() + 1
        time.sleep(1.5)
        cp.apply([sourced(B, "Qwen/qwen-ref-b-v2")])
        time.sleep(6)
        assert writes_about(cp, op.user, since, ns, "sw") == []
        assert get(cp, "pl/sw", ns)["metadata"]["resourceVersion"] == rv  # type: ignore[index]

        # BackendRuntime deleted and re-created with another version
        wait_until(
            lambda: '"example.com/engine:v1"' in lws_text(cp, ns, "br-user"), "br-user on v1", T_CONV, op.log
        )
        cp.kubectl("delete", f"backendruntime/{ENGINE}")
        wait_reason(cp, "pl/br-user", ns, "BackendRuntimeNotFound", names=f"'{ENGINE}'", op_log=op.log)
        assert '"example.com/engine:v1"' in lws_text(cp, ns, "br-user"), "kept serving"
        t0 = time.monotonic()
        cp.apply([engine("v2")])
        wait_until(
            lambda: '"example.com/engine:v2"' in lws_text(cp, ns, "br-user"), "br-user on v2", T_CONV, op.log
        )
        fig.add("BackendRuntime re-created: dependent on v2", elapsed(t0), " s")

        # ---------------------------------------------------------------- 3. "cycles"
        cp.apply([claims(playground("self-draft", ns, A), A, A)])
        cp.apply([playground("sx", ns, A), playground("sy", ns, B)])
        wait_until(
            lambda: serves(cp, ns, "sx", f"Qwen/{A}") and serves(cp, ns, "sy", "Qwen/qwen-ref-b-v2"),
            "sx on A and sy on B",
            T_CONV,
            op.log,
        )
        t0 = time.monotonic()
        cp.apply([playground("sx", ns, B), playground("sy", ns, A)])  # the swap, in one apply
        wait_until(
            lambda: (
                serves(cp, ns, "sx", "Qwen/qwen-ref-b-v2", f"Qwen/{A}")
                and serves(cp, ns, "sy", f"Qwen/{A}", "Qwen/qwen-ref-b-v2")
            ),
            "sx and sy swapped",
            T_CONV,
            op.log,
        )
        fig.add("swap converged", elapsed(t0), " s")
        # main and draft the same model: a valid claim (a reference is one-way, Playground -> model, so
        # no real cycle can form); it renders like any speculative-decoding claim and settles
        wait_until(lambda: settled(cp, ns, {"self-draft"}), "self-draft settled", T_CONV, op.log)
        assert serves(cp, ns, "self-draft", f"Qwen/{A}")

        # tidy the dangling ones away so U and O can be checked on what serves
        cp.kubectl("delete", "playground", "no-model", "no-backend", "no-config", "-n", ns)
        cp.kubectl("delete", "isvc/draft-missing", "-n", ns)
        done = users | {"sw", "br-user", "sx", "sy", "self-draft"}
        wait_converged(cp, ns, done, op, T_CONV)
        quiet_from = time.time() + 1
        time.sleep(QUIET + 1)
        assert child_writes(cp, op.user, quiet_from, ns) == []
        fig.add(
            "writes in the namespace during the quiet window",
            len([w for w in audit_writes(cp, op.user, quiet_from) if f" {ns}/" in w]),
        )
        check_unique_and_owned(cp, ns, done)
        check_healthy(op)
        check_bounded_log(fig, op.log, before, began)
        fig.add(
            "operator writes in the namespace",
            len([w for w in audit_writes(cp, op.user, since_start) if f" {ns}/" in w]),
        )
        fig.add("scenario", elapsed(began), " s")
        fig.add("RSS", rss_mib(op), " MiB")
    fig.report()
