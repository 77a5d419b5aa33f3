"""The umbrella chart on the real API server: install, upgrade and uninstall with real helm.

Tier A (etcd + kube-apiserver with PodSecurity admission): no controller runs, so the operator's
Deployment gets no pods here; Pod Security is proven by a server-side dry-run of a Pod built from the
Deployment's own template in a namespace that enforces ``restricted``. The LeaderWorkerSet chart is
taken from its Go module (never committed) and installed too; tier A runs no LWS controller.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import CHART_SOURCE, Helm, assembled_chart, audit_summary, release_kubeconfig
from cryptography import x509

from llmaz.api import KINDS
from llmaz.operator.admission import WEBHOOKS
from llmaz.operator.config import load_config
from llmaz.operator.rbac import RULES
from llmaz_devkit.cluster import ControlPlane
from llmaz_devkit.crdgen.crds import crd_name

NAMESPACE = "chart-e2e"
RELEASE = "platform"  # not "llmaz": names must come from the release, not from hard-coded strings
FULLNAME = "platform-llmaz"
CRDS = [crd_name(k) for k in KINDS]
INSTANCE = f"app.kubernetes.io/instance={RELEASE}"


@pytest.fixture(scope="module")
def helm(apiserver: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    runner = Helm(apiserver, tmp_path_factory.mktemp("helm-home"))
    yield runner
    runner("uninstall", RELEASE, "-n", NAMESPACE, "--wait=false", check=False)
    apiserver.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
    apiserver.delete_crds(CRDS)
    # the LWS chart's CRDs (Helm never deletes what a chart's crds/ folder installed)
    lws = apiserver.kubectl("get", "crd", "-o", "name").stdout.split()
    apiserver.delete_crds(
        [
            crd.split("/", 1)[1]
            for crd in lws
            if crd.endswith(".x-k8s.io") and ("leaderworkerset" in crd or "disaggregated" in crd)
        ]
    )


@pytest.fixture(scope="module")
def chart(apiserver: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return assembled_chart(apiserver, tmp_path_factory.mktemp("chart"))


@pytest.fixture(scope="module")
def installed(apiserver: ControlPlane, helm: Helm, chart: Path) -> str:
    """The release installed into a namespace that enforces, warns and audits Pod Security restricted."""
    apiserver.delete_crds(CRDS)  # leftovers of other suites
    apiserver.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": NAMESPACE,
                    "labels": {
                        f"pod-security.kubernetes.io/{mode}": "restricted"
                        for mode in ("enforce", "warn", "audit")
                    },
                },
            }
        ]
    )
    res = helm(
        "install",
        RELEASE,
        str(chart),
        "-n",
        NAMESPACE,
        "-f",
        str(CHART_SOURCE / "ci" / "webhook-values.yaml"),
        "--wait=false",
    )
    return res.stderr


def _secret(cp: ControlPlane) -> dict[str, str]:
    data: dict[str, str] = cp.get_json("secret", f"{FULLNAME}-webhook-cert", "-n", NAMESPACE)["data"]
    return data


def _webhooks(cp: ControlPlane) -> list[dict[str, Any]]:
    """The webhooks of the release's Mutating and Validating configurations, in WEBHOOKS order."""
    hooks: list[dict[str, Any]] = []
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        hooks += cp.get_json(kind, f"{FULLNAME}-{NAMESPACE}")["webhooks"]
    return hooks


def _ca_bundles(cp: ControlPlane) -> set[str]:
    return {w["clientConfig"]["caBundle"] for w in _webhooks(cp)}


def test_install_into_restricted_namespace_has_no_warnings(apiserver: ControlPlane, installed: str) -> None:
    warnings = [line for line in installed.splitlines() if "warning" in line.lower()]
    assert warnings == [], installed
    for kind, name in (
        ("deployment", f"{FULLNAME}-operator"),
        ("serviceaccount", FULLNAME),
        ("configmap", f"{FULLNAME}-config"),
        ("service", f"{FULLNAME}-metrics"),
        ("service", f"{FULLNAME}-webhook"),
    ):
        apiserver.kubectl("get", kind, name, "-n", NAMESPACE)
    for crd in CRDS:
        apiserver.kubectl("get", "crd", crd)


def test_operator_pod_template_is_admitted_under_restricted(apiserver: ControlPlane, installed: str) -> None:
    deploy = apiserver.get_json("deployment", f"{FULLNAME}-operator", "-n", NAMESPACE)
    template = deploy["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "operator-template-check",
            "namespace": NAMESPACE,
            "labels": template["metadata"]["labels"],
        },
        "spec": template["spec"],
    }
    res = apiserver.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)
    assert res.returncode == 0, res.stderr
    assert "warning" not in res.stderr.lower(), res.stderr
    # the same check rejects a pod that breaks the profile, so the namespace really enforces it
    pod["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = False
    pod["spec"]["securityContext"]["runAsNonRoot"] = False
    bad = apiserver.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)
    assert bad.returncode != 0
    assert "violates PodSecurity" in bad.stderr


def test_config_map_is_a_valid_operator_config(
    apiserver: ControlPlane, installed: str, tmp_path: Path
) -> None:
    data = apiserver.get_json("configmap", f"{FULLNAME}-config", "-n", NAMESPACE)["data"]["config.yaml"]
    path = tmp_path / "config.yaml"
    path.write_text(data)
    config = load_config(path)  # what `llmaz operator run --config` does; raises on any unknown key
    assert config.leader_election.lease_name == FULLNAME
    assert config.leader_election.lease_namespace == NAMESPACE
    assert config.webhook.enabled


def test_the_deployments_command_line_keeps_the_configs_namespaces(
    apiserver: ControlPlane, installed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator container's command and args, as the installed Deployment has them, parsed by
    the real ``llmaz`` CLI with the ConfigMap's config where the pod mounts it: the namespaces it
    serves are the config's (empty: every namespace), so a Playground in ``default`` is served.
    (The chart once passed ``--namespace=$(POD_NAMESPACE)``, which replaced them with its own.)
    Only the operator's main loop is replaced, by a stand-in that records the config it is given:
    no pod runs in tier A."""
    from typer.testing import CliRunner

    import llmaz.cli
    import llmaz.operator.main

    data = apiserver.get_json("configmap", f"{FULLNAME}-config", "-n", NAMESPACE)["data"]["config.yaml"]
    assert load_config_text(data, tmp_path).namespaces == []
    deployment = apiserver.get_json("deployment", f"{FULLNAME}-operator", "-n", NAMESPACE)
    container = next(
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "operator"
    )
    assert container["command"][:3] == ["llmaz", "operator", "run"]
    env = {
        e["name"]: NAMESPACE
        for e in container.get("env", [])
        if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace"
    }
    args = []
    for word in container["command"][1:] + container.get("args", []):
        expanded = word
        for name, value in env.items():  # the kubelet's $(VAR) expansion
            expanded = expanded.replace(f"$({name})", value)
        if expanded.startswith("--config="):  # where the pod mounts the ConfigMap
            expanded = f"--config={tmp_path / 'config.yaml'}"
        args.append(expanded)
    seen: list[Any] = []
    monkeypatch.setattr(llmaz.operator.main, "run", lambda cfg, kubeconfig: seen.append(cfg) or 0)
    llmaz.cli.mount(plugin_commands=False)
    result = CliRunner().invoke(llmaz.cli.app, args)
    assert result.exit_code == 0, result.output
    assert seen[0].namespaces == []


def load_config_text(text: str, tmp_path: Path) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_config(path)


def test_webhook_uses_a_certificate_for_its_service_signed_by_the_bundle(
    apiserver: ControlPlane, installed: str
) -> None:
    secret = _secret(apiserver)
    assert _ca_bundles(apiserver) == {secret["ca.crt"]}
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["tls.crt"]))
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["ca.crt"]))
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert f"{FULLNAME}-webhook.{NAMESPACE}.svc" in names
    served = [(w["name"], w["clientConfig"]["service"]["path"]) for w in _webhooks(apiserver)]
    assert served == [(h.name, h.path) for h in WEBHOOKS]


def test_release_service_account_has_the_chart_rbac(apiserver: ControlPlane, installed: str) -> None:
    kubeconfig = release_kubeconfig(apiserver, NAMESPACE, RELEASE)
    for verb, resource, subresource, allowed in (
        ("list", "playgrounds.inference.llmaz.io", "", "yes"),
        ("patch", "playgrounds.inference.llmaz.io", "status", "yes"),
        ("update", "playgrounds.inference.llmaz.io", "status", "no"),
        ("patch", "playgrounds.inference.llmaz.io", "", "no"),  # users own their Playgrounds
        ("delete", "playgrounds.inference.llmaz.io", "", "no"),
        ("create", "horizontalpodautoscalers.autoscaling", "", "yes"),
        ("delete", "services", "", "yes"),
        ("get", "services", "", "yes"),  # read only before applying a child it created with a POST
        ("update", "services", "", "no"),  # children are applied, never replaced
        (
            "get",
            "pods",
            "",
            "yes",
        ),  # only to grant it to endpoint pickers (a Role grants what its writer holds)
        ("update", "pods", "", "no"),
        ("create", "roles.rbac.authorization.k8s.io", "", "yes"),  # an endpoint picker's Role
        ("escalate", "roles.rbac.authorization.k8s.io", "", "no"),  # ... granting no more than it holds
        ("bind", "clusterroles.rbac.authorization.k8s.io", "", "no"),
        ("get", "secrets", "", "no"),
    ):
        res = apiserver.kubectl(
            "auth",
            "can-i",
            verb,
            resource,
            *([f"--subresource={subresource}"] if subresource else []),
            "-A",
            f"--kubeconfig={kubeconfig}",
            check=False,
        )
        assert res.stdout.strip() == allowed, (verb, resource, subresource, res.stdout, res.stderr)


def test_audit_summary_sees_what_the_release_service_account_did(
    apiserver: ControlPlane, installed: str
) -> None:
    # The helper the operator e2e uses to prove "zero 403s, no unused grant", checked here on known calls.
    kubeconfig = release_kubeconfig(apiserver, NAMESPACE, RELEASE)
    apiserver.kubectl("get", "playgrounds", "-A", f"--kubeconfig={kubeconfig}")
    denied = apiserver.kubectl("get", "secrets", "-n", NAMESPACE, f"--kubeconfig={kubeconfig}", check=False)
    assert denied.returncode != 0
    summary = audit_summary(apiserver, f"system:serviceaccount:{NAMESPACE}:{FULLNAME}")
    assert "list /secrets" in summary.forbidden
    assert ("inference.llmaz.io", "playgrounds", "list") in summary.used
    unused = summary.unused_grants(RULES)
    assert ("inference.llmaz.io", "playgrounds", "list") not in unused
    assert ("leaderworkerset.x-k8s.io", "leaderworkersets", "delete") in unused


def test_upgrade_applies_a_crd_schema_change_and_keeps_the_certificate(
    apiserver: ControlPlane, helm: Helm, chart: Path, installed: str
) -> None:
    before = _secret(apiserver)
    crd_file = chart / "charts" / "crds" / "templates" / f"{crd_name(KINDS[0])}.yaml"
    text = crd_file.read_text()
    marker = "      openAPIV3Schema:\n"
    assert marker in text
    # A schema change as a new chart version would bring: a new top-level property (in a temp copy).
    crd_file.write_text(
        text.replace(marker, marker + "        x-kubernetes-preserve-unknown-fields: true\n", 1)
    )
    helm(
        "upgrade",
        RELEASE,
        str(chart),
        "-n",
        NAMESPACE,
        "-f",
        str(CHART_SOURCE / "ci" / "webhook-values.yaml"),
    )
    crd = apiserver.get_json("crd", crd_name(KINDS[0]))
    assert crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].get("x-kubernetes-preserve-unknown-fields")
    assert _secret(apiserver) == before
    assert _ca_bundles(apiserver) == {before["ca.crt"]}


def test_uninstall_leaves_only_the_crds(apiserver: ControlPlane, helm: Helm, installed: str) -> None:
    helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    # The namespace is the release's alone, so anything left in it (labelled or not) is a leftover.
    left = apiserver.kubectl(
        "get",
        "all,configmap,secret,serviceaccount,role,rolebinding,networkpolicy,poddisruptionbudget,lease",
        "-n",
        NAMESPACE,
        "-o",
        "name",
    ).stdout.split()
    assert left == []
    cluster = apiserver.kubectl(
        "get",
        "clusterrole,clusterrolebinding,validatingwebhookconfiguration,mutatingwebhookconfiguration",
        "-o",
        "name",
    ).stdout.split()
    assert [name for name in cluster if name.split("/", 1)[1].startswith(RELEASE)] == []
    for crd in CRDS:
        obj = apiserver.get_json("crd", crd)
        assert obj["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_values_global_yaml_wires_envoy_gateway_to_the_ai_gateway(helm: Helm, chart: Path) -> None:
    # the file users pass with -f, under a release name and namespace of its own: accepted by the
    # strict schema and by the wiring check; Envoy Gateway's REAL chart (from its Go module) turns it
    # into its configuration. The Envoy AI Gateway charts are empty stand-ins here (not fetchable).
    out = helm(
        "template",
        RELEASE,
        str(chart),
        "-n",
        NAMESPACE,
        "-f",
        str(CHART_SOURCE / "values.global.yaml"),
        "--set",
        "open-webui.enabled=false",
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "CustomResourceDefinition", "ClusterRole", "Gateway", "EnvoyProxy"} <= kinds
    (config_map,) = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "envoy-gateway-config"
    ]
    config = yaml.safe_load(config_map["data"]["envoy-gateway.yaml"])
    assert config["kind"] == "EnvoyGateway"
    assert config["extensionApis"]["enableBackend"] is True
    manager = config["extensionManager"]
    assert manager["service"]["fqdn"] == {"hostname": "ai-gateway-controller", "port": 1063}
    assert manager["hooks"]["xdsTranslator"]["post"] == ["Translation", "Cluster", "Route"]
    # routes of integrations.inferencePool name Inference Extension v1 pools as backends
    assert {"group": "inference.networking.k8s.io", "kind": "InferencePool", "version": "v1"} in manager[
        "backendResources"
    ]
    # Envoy Gateway's own defaults survive the merge
    assert config["gateway"]["controllerName"] == "gateway.envoyproxy.io/gatewayclass-controller"
    assert config["provider"]["type"] == "Kubernetes"

    # the same file with the AI Gateway switched off alone is refused with what to do
    refused = helm(
        "template", RELEASE, str(chart), "-n", NAMESPACE, "-f", str(CHART_SOURCE / "values.global.yaml"),
        "--set", "open-webui.enabled=false,envoy-ai-gateway.enabled=false", check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "envoy-ai-gateway.enabled is false: Envoy Gateway would wait for" in refused.stderr
