"""kube-linter's checks, as tests, on the chart rendered by real helm for every values scenario.

kube-linter (golang.stackrox.io/kube-linter) cannot be had here: the Go module proxy refuses its
module path. These tests implement the checks of its default set that apply to what the chart
renders, plus a few stricter ones; each exception is listed in EXPLAINED with its reason. Only the
llmaz templates are checked: the dependency charts (LWS, Envoy Gateway) are their owners' business.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import CHART_SOURCE, helm_template

from llmaz_devkit.chartgen import assemble
from llmaz_devkit.cluster import go_tools_root

SCENARIOS = [CHART_SOURCE / "values.global.yaml", *sorted((CHART_SOURCE / "ci").glob("*-values.yaml"))]
EXTRA = [  # every toggle at once, so objects that are off by default are checked too
    "operator.config.webhook.enabled=true",
    "operator.extraPlugins.packages[0]=llmaz-backend-foo",
    "networkPolicy.enabled=true",
]
EXPLAINED = {
    "unset-cpu-limit": "CPU limits throttle the operator's event loop; a CPU request is set instead",
}
WORKLOADS = {"Deployment"}


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = go_tools_root()
    return assemble(tmp_path_factory.mktemp("lint-chart"), root.parent / "gomod", source=CHART_SOURCE)


@pytest.fixture(scope="module", params=[*SCENARIOS, "all-toggles"], ids=lambda p: getattr(p, "name", p))
def objects(
    request: pytest.FixtureRequest, chart: Path, tmp_path_factory: pytest.TempPathFactory
) -> list[Any]:
    home = tmp_path_factory.mktemp("helm")
    if request.param == "all-toggles":
        return helm_template(chart, home, values=CHART_SOURCE / "ci" / "default-values.yaml", sets=EXTRA)
    return helm_template(chart, home, values=request.param)


def _pods(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    for obj in objects:
        if obj["kind"] in WORKLOADS:
            template = obj["spec"]["template"]
            yield obj["metadata"]["name"], template["metadata"], template["spec"]


def _containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_containers_are_locked_down(objects: list[dict[str, Any]]) -> None:
    # kube-linter: privileged-container, privilege-escalation-container, run-as-non-root,
    # no-read-only-root-fs, drop-net-raw-capability (stricter: drop ALL)
    for name, _, spec in _pods(objects):
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        for c in _containers(spec):
            sc = c["securityContext"]
            assert not sc.get("privileged"), (name, c["name"])
            assert sc["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert sc["readOnlyRootFilesystem"] is True, (name, c["name"])
            assert sc["capabilities"]["drop"] == ["ALL"], (name, c["name"])
            assert isinstance(sc["runAsUser"], int), (name, c["name"])
            assert sc["runAsUser"] > 0, (name, c["name"])


def test_no_host_access(objects: list[dict[str, Any]]) -> None:
    # kube-linter: host-network, host-pid, host-ipc, host-mounts, privileged-ports
    for name, _, spec in _pods(objects):
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(key), (name, key)
        assert all("hostPath" not in v for v in spec.get("volumes", [])), name
        for c in _containers(spec):
            for port in c.get("ports", []):
                assert "hostPort" not in port, (name, port)
                assert port["containerPort"] >= 1024, (name, port)


def test_resources_probes_and_images(objects: list[dict[str, Any]]) -> None:
    # kube-linter: unset-cpu-requirements, unset-memory-requirements, no-liveness-probe,
    # no-readiness-probe, latest-tag, default-service-account
    assert "unset-cpu-limit" in EXPLAINED
    for name, _, spec in _pods(objects):
        assert spec["serviceAccountName"] not in ("", "default"), name
        for c in _containers(spec):
            res = c["resources"]
            assert res["requests"]["cpu"], name
            assert res["requests"]["memory"], name
            assert res["limits"]["memory"], name
            tag = c["image"].rsplit("@", 1)[0].rsplit(":", 1)
            assert len(tag) == 2, c["image"]
            assert tag[1] != "latest", c["image"]
        main = spec["containers"][0]
        assert main["livenessProbe"]["httpGet"]["port"] == "health", name
        assert main["readinessProbe"]["httpGet"]["port"] == "health", name


def test_selectors_match_pods(objects: list[dict[str, Any]]) -> None:
    # kube-linter: dangling-service, non-isolated-pod (NetworkPolicy selects), mismatching-selector,
    # dangling-networkpolicy, pdb (selects something), no-anti-affinity for replicas > 1
    pods = list(_pods(objects))
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind == "Deployment":
            assert _matches(
                obj["spec"]["selector"]["matchLabels"], obj["spec"]["template"]["metadata"]["labels"]
            )
            if obj["spec"]["replicas"] > 1:
                assert "podAntiAffinity" in obj["spec"]["template"]["spec"].get("affinity", {}), name
        selector = {
            "Service": lambda o: o["spec"]["selector"],
            "NetworkPolicy": lambda o: o["spec"]["podSelector"]["matchLabels"],
            "PodDisruptionBudget": lambda o: o["spec"]["selector"]["matchLabels"],
        }.get(kind)
        if selector:
            assert any(_matches(selector(obj), meta["labels"]) for _, meta, _ in pods), (kind, name)
        if kind == "Service":
            ports = {p["name"] for _, _, s in pods for p in s["containers"][0].get("ports", [])}
            for port in obj["spec"]["ports"]:
                assert port["targetPort"] in ports, (name, port)


def test_rbac_is_least_privilege_and_bound(objects: list[dict[str, Any]]) -> None:
    # kube-linter: access-to-secrets, wildcard-in-rules, access-to-create-pods, cluster-admin-role-binding,
    # dangling-clusterrolebinding (role and subject exist in the release)
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRole"}
    accounts = {o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"}
    for role in roles.values():
        for rule in role["rules"]:
            assert "*" not in rule["verbs"], rule
            assert "*" not in rule["resources"], rule
            assert "secrets" not in rule["resources"], rule
            assert not ("pods" in rule["resources"] and "create" in rule["verbs"]), rule
    for binding in (o for o in objects if o["kind"] == "ClusterRoleBinding"):
        assert binding["roleRef"]["name"] in roles
        assert all(s["name"] in accounts for s in binding["subjects"])


def test_no_secret_values_in_env(objects: list[dict[str, Any]]) -> None:
    # kube-linter: env-var-secret
    for name, _, spec in _pods(objects):
        for c in _containers(spec):
            for env in c.get("env", []):
                if any(word in env["name"].upper() for word in ("SECRET", "TOKEN", "PASSWORD", "KEY")):
                    assert "value" not in env, (name, env["name"])
