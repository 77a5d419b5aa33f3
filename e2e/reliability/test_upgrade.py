"""Upgrade from the previous release with live objects (RELIABILITY.md row 23), on tier B.

Release N-1 (each of :data:`PREVIOUS_RELEASES`) is materialized from git history: its chart is installed with
Helm and its operator runs as a local process with the release's ServiceAccount (the chart's RBAC);
20 Playgrounds of one shared OpenModel converge. Then the N-1 operator gets SIGTERM, ``helm upgrade``
moves the release to today's chart (a real CRD change: new printer columns, ``status.preheat``),
and today's operator takes over. It must adopt what exists: same child UIDs, no child created
again, Playgrounds still Available, the new status fields filled, then quiet; RBAC refused nothing.

The N-1 operator runs in release N-1's own environment, installed the way that release installs
itself (its ``tools/bootstrap.sh``: ``uv sync --locked`` of its ``uv.lock``, from the uv cache and
PyPI), and the test asserts that it imports ``llmaz`` from the old tree. (It used to run from the
old sources over the current ``.venv``, which holds only while both locks pin the same packages;
since the operator dropped the ``kubernetes`` client they do not.)
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import Helm, assembled_chart, release_kubeconfig
from operator_helpers import SA_NAMESPACE, condition, running_operator
from reliability_helpers import (
    LEAD_TIMEOUT,
    SETTLED,
    Figures,
    audit_entries,
    audit_line_count,
    audit_writes,
    check_healthy,
    check_rbac_enough,
    check_unique_and_owned,
    elapsed,
    get,
    model,
    playground,
    rss_mib,
    wait_converged,
    wait_until,
)

from llmaz_devkit.chartgen import assemble
from llmaz_devkit.cluster import ControlPlane
from llmaz_devkit.demo import llmaz_crd_documents

pytestmark = pytest.mark.slow

PREVIOUS_RELEASES = {
    "crd-columns": ("0f5130c", True),
    "json-render-hash": ("3cf50cf", False),
}
"""Release N-1 by what changed since (git history is in every clone): ``crd-columns``, the last
landed main before the CRDs gained the InUse/Preheated printer columns and ``status.preheat``
(``True``: the test checks the CRD change) and before children carried ``llmaz.io/render-hash``;
``json-render-hash``, the last one whose render hash was made by ``json.dumps`` (every child's
annotation differs from today's for the same render). Move them forward when a release is cut."""

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "llmaz-upgrade"
"""Helm release (its fullname, so also its ServiceAccount) in SA_NAMESPACE."""
VALUES = ("--set", "operator.replicas=0", "--set", "leaderWorkerSet.enabled=false")
"""No container runtime here (the operator runs as a local process); the cluster has LWS already."""
CHILDREN = ("services.inference.llmaz.io", "leaderworkersets", "services")
COUNT = 20
T_CONV = 300.0
QUIET_WINDOW = 15.0


def runtimes_n_renews(cp: ControlPlane) -> set[str]:
    """The plugin BackendRuntimes that release N's operator applies again at start-up: those whose
    live object (N-1's) lacks something N's plugin renders."""
    from llmaz.operator.diff import contains
    from llmaz.operator.main import load_plugins  # the operator's own plugin loading

    renews = set()
    for name, backend in load_plugins().backends.items():
        live = get(cp, f"backendruntimes.inference.llmaz.io/{name}")
        if live is None or not contains(live, backend.backend_runtime(check_rules=False).to_manifest()):
            renews.add(name)
    return renews


def status_follows(cp: ControlPlane, name: str) -> bool:
    """Whether every condition of BackendRuntime ``name`` was written for its current generation."""
    live = get(cp, f"backendruntimes.inference.llmaz.io/{name}") or {}
    generation = (live.get("metadata") or {}).get("generation")
    conditions = (live.get("status") or {}).get("conditions") or []
    return bool(conditions) and all(c.get("observedGeneration") == generation for c in conditions)


def materialize(release: str, dest: Path) -> Path:
    """The tree of ``release`` under ``dest`` (``git archive``: no worktree left behind)."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", release], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(dest, filter="data")
    return dest


def old_environment(old: Path) -> Path:
    """The Python of release N-1's environment (``old/.venv``), built by its own bootstrap."""
    # (this environment's variables must not point uv at the current .venv)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    script = str(old / "tools" / "bootstrap.sh")
    done = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"N-1's tools/bootstrap.sh failed: {done.stderr[-2000:]}"
    return old / ".venv" / "bin" / "python"


def child_uids(cp: ControlPlane, namespace: str) -> dict[str, str]:
    """UID of each operator child: inference Service, LWS and ``-lb`` Service (not the LWS's own
    headless Service, also named after the Playground)."""
    out = {}
    for kind in CHILDREN:
        for item in (get(cp, kind, namespace) or {}).get("items", []):
            name = item["metadata"]["name"]
            if kind != "services" or name.endswith("-lb"):
                out[f"{kind}/{name}"] = item["metadata"]["uid"]
    return out


def reasons(cp: ControlPlane, namespace: str) -> dict[str, str]:
    items = (get(cp, "playgrounds", namespace) or {}).get("items", [])
    return {p["metadata"]["name"]: condition(p, "Available").get("reason", "") for p in items}


def printer_columns(cp: ControlPlane, crd: str) -> list[str]:
    obj = get(cp, f"crd/{crd}") or {}
    return [c["name"] for c in obj["spec"]["versions"][0].get("additionalPrinterColumns", [])]


def object_writes(cp: ControlPlane, user: str, since: float) -> list[str]:
    """Writes of ``user`` after ``since`` (epoch s) other than its Lease renewals and Events."""
    return [w for w in audit_writes(cp, user, since) if " leases " not in w and " events " not in w]


def lead(op: Any) -> None:
    wait_until(op.ready, "the operator to lead", LEAD_TIMEOUT, op.log)


@pytest.mark.parametrize("change", sorted(PREVIOUS_RELEASES))
def test_upgrade_from_the_previous_release_adopts_live_objects(
    control_plane: ControlPlane, namespace: str, tmp_path: Path, change: str
) -> None:
    release, crd_change = PREVIOUS_RELEASES[change]
    cp, fig = control_plane, Figures(f"upgrade-n-1-to-n ({change})")
    old = materialize(release, tmp_path / "n-1")
    python = old_environment(old)
    where = subprocess.run(
        [str(python), "-c", "import llmaz; print(llmaz.__file__)"], capture_output=True, text=True, check=True
    ).stdout
    assert where.startswith(str(old)), f"N-1 imports llmaz from {where}"

    # The llmaz CRDs belong to whoever installed them last (another module's kubectl apply): the
    # N-1 release must own them, as on a cluster that ran release N-1.
    crds = [d["metadata"]["name"] for d in llmaz_crd_documents(ROOT, cp.binary("helm"))]
    cp.delete_crds(crds)
    helm = Helm(cp, tmp_path / "helm-home")
    old_chart = assemble(tmp_path / "chart-n-1", cp.tools_root.parent / "gomod", source=old / "charts/llmaz")
    new_chart = assembled_chart(cp, tmp_path / "chart-n")
    model_name = "qwen-rel-upgrade"
    for workdir in ("op-n-1", "op-n"):
        (tmp_path / workdir).mkdir()
    try:
        helm("install", RELEASE, str(old_chart), "-n", SA_NAMESPACE, "--create-namespace", *VALUES)
        if crd_change:
            assert "InUse" not in printer_columns(cp, "openmodels.llmaz.io"), "N-1 CRDs are not N-1's"
        kubeconfig = release_kubeconfig(cp, SA_NAMESPACE, RELEASE)
        names = {f"u{i:02d}" for i in range(COUNT)}
        since_line = audit_line_count(cp)
        n_1 = running_operator(cp, tmp_path / "op-n-1", RELEASE, kubeconfig=kubeconfig, python=python)
        with n_1 as old_op:
            lead(old_op)
            began, n_1_began = time.monotonic(), time.time() - 1  # audit stamps are whole seconds
            cp.apply([model(model_name)] + [playground(n, namespace, model_name) for n in sorted(names)])
            wait_converged(cp, namespace, names, old_op, T_CONV)
            wait_until(
                lambda: set(reasons(cp, namespace).values()) == {"Available"},
                "every Playground Available under N-1",
                T_CONV,
                old_op.log,
            )
            fig.add("N-1 converge 20 Playgrounds", elapsed(began), " s")
            # positive control for the "nothing written again" check below: N-1's child writes
            # (server-side apply, a PATCH that creates) are seen under this user in the audit log
            old_writes = object_writes(cp, old_op.user, n_1_began)
            unwritten = [
                n for n in names if not any(f"leaderworkersets {namespace}/{n}" in w for w in old_writes)
            ]
            assert unwritten == [], f"no N-1 write of these LWS in the audit log: {unwritten}"
            fig.add("N-1 writes to converge", len(old_writes))
            fig.add("N-1 write verbs", "/".join(sorted({w.split()[0] for w in old_writes})))
            # N-1 already writes the InUse condition; only its printer column is new in N
            in_use = condition(get(cp, f"openmodel/{model_name}"), "InUse").get("reason")
            assert in_use == "Referenced", in_use
            if crd_change:
                assert "INUSE" not in cp.kubectl("get", "openmodel", model_name).stdout
            before = child_uids(cp, namespace)
            assert len(before) == 3 * COUNT, sorted(before)
            assert old_op.stop(signal.SIGTERM, timeout=40) == 0, old_op.log.read_text()[-3000:]
        check_rbac_enough(cp, old_op.user, since_line)
        # what N applies again on purpose: its plugins' BackendRuntimes that differ from N-1's
        # (a changed engine flag, a new image), nothing else
        renewed_names = runtimes_n_renews(cp)
        renewed = sorted(f"patch backendruntimes /{n}" for n in renewed_names)
        fig.add("plugin BackendRuntimes N renders differently", len(renewed))

        began = time.monotonic()
        helm("upgrade", RELEASE, str(new_chart), "-n", SA_NAMESPACE, *VALUES)
        fig.add("helm upgrade", elapsed(began), " s")
        for crd, column in (("openmodels.llmaz.io", "InUse"), ("openmodels.llmaz.io", "Preheated")):
            assert column in printer_columns(cp, crd), f"helm upgrade did not update CRD {crd}"
        assert "InUse" in printer_columns(cp, "backendruntimes.inference.llmaz.io")
        preheat = (get(cp, "crd/openmodels.llmaz.io") or {})["spec"]["versions"][0]["schema"]
        assert "preheat" in preheat["openAPIV3Schema"]["properties"]["status"]["properties"]

        # audit stamps are whole seconds: N's first writes (its BackendRuntimes) can land in the
        # second this is taken (seen once: every one of them left out, as if N wrote nothing);
        # N-1 stopped before the helm upgrade, seconds earlier
        since, since_line = time.time() - 1, audit_line_count(cp)
        with running_operator(cp, tmp_path / "op-n", RELEASE, kubeconfig=kubeconfig) as op:
            lead(op)
            fig.add("N leading, from the helm upgrade start", elapsed(began), " s")
            wait_until(
                lambda: condition(get(cp, f"openmodel/{model_name}"), "InUse").get("reason") == "Referenced",
                "the InUse status on the OpenModel",
                T_CONV,
                op.log,
            )
            table = cp.kubectl("get", "openmodel", model_name).stdout
            assert "INUSE" in table, table
            assert "Referenced" in table, table
            wait_converged(cp, namespace, names, op, T_CONV)
            fig.add("N converged, from the helm upgrade start", elapsed(began), " s")
            assert set(reasons(cp, namespace).values()) <= SETTLED
            assert child_uids(cp, namespace) == before, "children were replaced by the upgrade"
            writes = object_writes(cp, op.user, since)
            creates = [w for w in writes if w.split()[0] in ("create", "patch") and "/status" not in w]
            assert sorted(creates) == renewed, f"N created or re-applied objects after the upgrade: {creates}"
            requests = sum(1 for _ in audit_entries(cp, op.user, since))
            assert requests > 0, "no request of the N operator in the audit log: the filter sees nothing"
            fig.add("N requests until converged", requests)
            fig.add("N writes until converged", len(writes))

            # a BackendRuntime N applied again has a new generation, which its status follows about
            # a second later (debounced): with nothing else to do, N can be converged before that
            wait_until(
                lambda: all(status_follows(cp, name) for name in renewed_names),
                "the status of the BackendRuntimes N applied again",
                30,
                op.log,
            )
            window = time.time()
            time.sleep(QUIET_WINDOW)
            noise = object_writes(cp, op.user, window)
            assert noise == [], f"writes in the quiet window after the upgrade: {noise}"
            fig.add("writes in the 15 s quiet window", len(noise))
            assert set(reasons(cp, namespace).values()) == {"Available"}, reasons(cp, namespace)
            check_unique_and_owned(cp, namespace, names)
            check_healthy(op)
            fig.add("RSS", rss_mib(op), " MiB")
            assert op.stop(signal.SIGTERM, timeout=40) == 0
        check_rbac_enough(cp, op.user, since_line)
        fig.add("child UIDs unchanged", f"{len(before)}/{len(before)}")
    finally:
        helm("uninstall", RELEASE, "-n", SA_NAMESPACE, "--wait=false", check=False)
        cp.kubectl("delete", "openmodel", model_name, "--ignore-not-found", "--wait=false", check=False)
    fig.report()
