"""Our API in the real API server: CRDs install, the invalid corpus is rejected with the offline
messages, and every documented example is accepted (``--dry-run=server``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmaz_devkit.cluster import ControlPlane
from llmaz_devkit.demo import llmaz_crd_documents
from llmaz_devkit.schemas import INTEGRATION_CRDS, module_file

ROOT = Path(__file__).resolve().parents[1]
CORPUS = sorted((ROOT / "packages" / "core" / "tests" / "corpus" / "invalid").glob("*.yaml"))
EXAMPLES = sorted(
    p for p in (ROOT / "docs" / "examples").rglob("*.yaml") if p != ROOT / "docs" / "examples" / "index.yaml"
)


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> list[str]:
    docs = llmaz_crd_documents(ROOT, control_plane.binary("helm"))
    control_plane.apply(docs)
    names = [d["metadata"]["name"] for d in docs]
    control_plane.wait_established(names)
    return names


def test_crds_install_and_become_established(control_plane: ControlPlane, crds: list[str]) -> None:
    assert len(crds) >= 4
    for name in crds:
        crd = control_plane.get_json("crd", name)
        conds = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conds.get("Established") == "True", (name, conds)
        assert conds.get("NamesAccepted") == "True", (name, conds)
    names = control_plane.kubectl("api-resources", "--api-group=inference.llmaz.io", "-o", "name").stdout
    assert "playgrounds.inference.llmaz.io" in names


def test_invalid_corpus_is_not_empty() -> None:
    assert CORPUS, "packages/core/tests/corpus/invalid/*.yaml is empty"


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_invalid_object_is_rejected_with_offline_message(
    control_plane: ControlPlane, crds: list[str], path: Path
) -> None:
    case = yaml.safe_load(path.read_text())
    res = control_plane.kubectl("create", "--dry-run=server", "-f", "-", input=case["object"], check=False)
    assert res.returncode != 0, f"{path.name} ({case['rule']}) was accepted by the API server"
    # "<field>: <reason>: <message>[ (got <value>)]", e.g.
    # "spec.source.uri: Invalid value: unsupported uri protocol: ... (got file:///models/qwen2)"
    error = (
        re.escape(case["field"]) + r": (Invalid value|Forbidden|Required value): " + re.escape(case["expect"])
    )
    if "got" in case:
        error += r".* \(got " + re.escape(case["got"]) + r"\)$"
    assert re.search(error, res.stderr, re.MULTILINE), res.stderr


def _served_kinds(cp: ControlPlane, api_version: str, cache: dict[str, set[str] | None]) -> set[str] | None:
    if api_version not in cache:
        path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        res = cp.kubectl("get", "--raw", path, check=False)
        cache[api_version] = (
            {r["kind"] for r in json.loads(res.stdout)["resources"]} if res.returncode == 0 else None
        )
    return cache[api_version]


GATEWAY_API_VERSIONS = ("v1.6.3",)
"""Gateway API module versions tried in order (v1.7 needs a newer Go than the machines have)."""
UNAVAILABLE_KINDS = {"AIGatewayRoute", "AIServiceBackend"}
"""Envoy AI Gateway kinds: the Go module proxy refuses every github.com/envoyproxy/ai-gateway
version, so their CRDs cannot be installed here and these documents are listed, not validated."""


@pytest.fixture(scope="module")
def gateway_api_crds(control_plane: ControlPlane) -> list[str]:
    """The real Gateway API CRDs (with their CEL rules) and Envoy Gateway's Backend CRD for the
    gateway examples."""
    files = [
        module_file("sigs.k8s.io/gateway-api", GATEWAY_API_VERSIONS, f"config/crd/standard/{name}")
        for name in (
            "gateway.networking.k8s.io_gatewayclasses.yaml",
            "gateway.networking.k8s.io_gateways.yaml",
            "gateway.networking.k8s.io_httproutes.yaml",
        )
    ]
    files.append(INTEGRATION_CRDS[("gateway.envoyproxy.io/v1alpha1", "Backend")].fetch())  # the chart's pin
    control_plane.apply(files, "--server-side")
    names = [
        "gatewayclasses.gateway.networking.k8s.io",
        "gateways.gateway.networking.k8s.io",
        "backends.gateway.envoyproxy.io",
    ]
    control_plane.wait_established(names)
    return names


def test_every_example_is_accepted_by_the_api_server(
    control_plane: ControlPlane, crds: list[str], gateway_api_crds: list[str]
) -> None:
    assert EXAMPLES, "docs/examples holds no manifests"
    cache: dict[str, set[str] | None] = {}
    accepted, skipped, failures = 0, [], []
    for path in EXAMPLES:
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict):
                continue
            kinds = _served_kinds(control_plane, str(doc.get("apiVersion")), cache)
            label = f"{path.relative_to(ROOT)}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
            if kinds is None or doc.get("kind") not in kinds:
                skipped.append(label)
                continue
            obj: dict[str, Any] = doc
            res = control_plane.kubectl("apply", "--dry-run=server", "-f", "-", input=obj, check=False)
            if res.returncode != 0:
                failures.append(f"{label}: {res.stderr.strip()}")
            else:
                accepted += 1
    print(f"examples: {accepted} accepted, {len(skipped)} not validated (CRD unavailable): {skipped}")
    assert not failures, "\n".join(failures)
    assert accepted >= 10
    # Only kinds whose CRDs truly cannot be had may go unvalidated; any other kind must be installed.
    assert {label.rsplit(": ", 1)[1].split("/")[0] for label in skipped} <= UNAVAILABLE_KINDS, skipped


def test_llmaz_crds_output_passes_kubectl_client_and_server_dry_run(apiserver: ControlPlane) -> None:
    # What a user runs: `llmaz crds | kubectl apply -f -`, here with the built kubectl against a
    # real kube-apiserver (client dry-run still needs the server's discovery).
    out = subprocess.run(
        [sys.executable, "-m", "llmaz.cli", "crds"], capture_output=True, text=True, check=True
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert sorted(d["metadata"]["name"] for d in docs) == [
        "backendruntimes.inference.llmaz.io",
        "openmodels.llmaz.io",
        "playgrounds.inference.llmaz.io",
        "services.inference.llmaz.io",
    ]
    for mode in ("client", "server"):
        res = apiserver.kubectl("apply", f"--dry-run={mode}", "-f", "-", input=out, check=False)
        assert res.returncode == 0, (mode, res.stderr)
        assert res.stdout.count("customresourcedefinition.apiextensions.k8s.io/") == 4, res.stdout


def test_llmaz_category_printer_columns_and_scale_subresource(
    control_plane: ControlPlane, crds: list[str], namespace: str
) -> None:
    # What users (and HPAs) touch: `kubectl get llmaz`, the printer columns, `kubectl scale`.
    docs = [
        d for d in yaml.safe_load_all((ROOT / "docs/examples/huggingface/playground.yaml").read_text()) if d
    ]
    for doc in docs:
        if doc["kind"] == "Playground":
            doc["metadata"]["namespace"] = namespace
    control_plane.kubectl("apply", "-f", "-", input=docs)
    listed = control_plane.kubectl("get", "llmaz", "-A", "-o", "name").stdout.split()
    assert "openmodel.llmaz.io/opt-125m" in listed
    assert "playground.inference.llmaz.io/opt-125m" in listed
    table = control_plane.kubectl("get", "pl", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "MODEL", "REPLICAS", "STATUS", "AGE"]
    assert table[1].split()[:2] == ["opt-125m", "opt-125m"]
    om = control_plane.kubectl("get", "om", "opt-125m").stdout.splitlines()
    assert om[0].split()[:3] == ["NAME", "OWNEDBY", "AGE"]
    assert "facebook/opt-125m" in om[1]
    control_plane.kubectl("scale", "playground/opt-125m", "-n", namespace, "--replicas=3")
    pg = control_plane.get_json("playground", "opt-125m", "-n", namespace)
    assert pg["spec"]["replicas"] == 3
    control_plane.kubectl("delete", "openmodel", "opt-125m")


# ------------------------------------------- llmaz's webhook suite (test/integration/webhook), here


def _om(name: str, source: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "llmaz.io/v1alpha1",
        "kind": "OpenModel",
        "metadata": {"name": name},
        "spec": {"familyName": "qwen2", "source": source, **spec},
    }


def _pl(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Playground",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def _isvc(name: str, models: list[dict[str, Any]]) -> dict[str, Any]:
    runner = {"name": "model-runner", "image": "example.com/engine:v1"}
    return {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "modelClaims": {"models": models},
            "workloadTemplate": {"workerTemplate": {"spec": {"containers": [runner]}}},
        },
    }


def _br(name: str, **spec: Any) -> dict[str, Any]:
    configs = [{"name": "default", "args": ["--model", "{{ .ModelPath }}"]}]
    return {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "BackendRuntime",
        "metadata": {"name": name},
        "spec": {"image": "vllm/vllm-openai", "version": "v0.6.0", "recommendedConfigs": configs, **spec},
    }


HUB = {"modelHub": {"modelID": "Qwen/Qwen2-0.5B-Instruct"}}
CPU = {"limits": {"cpu": "5"}}

LLMAZ_WEBHOOK_SUITE_ACCEPTS: dict[str, dict[str, Any]] = {
    "model-huggingface": _om("m-hf", HUB),
    "model-modelscope": _om("m-ms", {"modelHub": {"name": "ModelScope", "modelID": "qwen/Qwen2-0.5B"}}),
    "model-oss-uri": _om("m-oss", {"uri": "oss://bucket.endpoint/models/qwen2"}),
    "model-host-uri": _om("m-host", {"uri": "host:///models/qwen2"}),
    "model-hf-filename": _om(
        "m-gguf", {"modelHub": {"modelID": "Qwen/Qwen2-0.5B-Instruct-GGUF", "filename": "q5.gguf"}}
    ),
    "model-allow-and-ignore-patterns": _om(
        "m-pat", {"modelHub": {**HUB["modelHub"], "allowPatterns": ["*.json"], "ignorePatterns": ["*.bin"]}}
    ),
    "model-custom-owned-by-and-created-at": _om(
        "m-own", HUB, ownedBy="team-search", createdAt="2024-01-02T03:04:05Z"
    ),
    "playground": _pl("p", modelClaim={"modelName": "m"}),
    "playground-limit-without-request": _pl(
        "p-lim", modelClaim={"modelName": "m"}, backendRuntimeConfig={"resources": CPU}
    ),
    "playground-unknown-backend-name": _pl(
        "p-be", modelClaim={"modelName": "m"}, backendRuntimeConfig={"backendName": "not-installed"}
    ),
    "playground-claims-main-without-role": _pl(
        "p-role", modelClaims={"models": [{"name": "m"}, {"name": "d", "role": "draft"}]}
    ),
    # llmaz rejects min == max (its bug 10); a fixed-size elastic Playground is valid here
    "playground-min-equals-max": _pl(
        "p-mm", modelClaim={"modelName": "m"}, elasticConfig={"minReplicas": 2, "maxReplicas": 2}
    ),
    "service": _isvc("s", [{"name": "m"}]),
    "service-main-without-role": _isvc("s-role", [{"name": "m"}, {"name": "d", "role": "draft"}]),
    "backendruntime-vllm": _br(
        "b-vllm",
        recommendedConfigs=[
            {
                "name": "default",
                "args": ["--model", "{{ .ModelPath }}"],
                "resources": {
                    "requests": {"cpu": "4", "memory": "8Gi"},
                    "limits": {"cpu": "4", "memory": "8Gi"},
                },
            }
        ],
    ),
    "backendruntime-extra-config-unknown": _br(
        "b-extra",
        recommendedConfigs=[
            {"name": "default", "args": ["--model", "{{ .ModelPath }}"]},
            {"name": "unknown", "args": ["--model", "{{ .ModelPath }}", "--served-model-name", "x"]},
        ],
    ),
    "backendruntime-without-resources": _br("b-nores"),
}
"""Every object llmaz's webhook integration suite expects to be admitted (its ``model_test.go``,
``playground_test.go``, ``service_test.go`` and ``backendruntime_test.go``)."""

LLMAZ_WEBHOOK_SUITE_REJECTS: dict[str, tuple[dict[str, Any], str]] = {
    "model-unknown-hub": (
        _om("m-hub", {"modelHub": {"name": "GitHub", "modelID": "Qwen/Qwen2"}}),
        'spec.source.modelHub.name: Unsupported value: "GitHub"',
    ),
    "service-single-draft": (
        _isvc("s-draft", [{"name": "d", "role": "draft"}]),
        "spec.modelClaims",
    ),
}
"""Rejections of that suite the invalid corpus (``test_invalid_object_is_rejected_with_offline_message``)
does not hold, each with the field the API server's answer must name. (A BackendRuntime limit below
its request is refused by the operator's webhook: ``e2e/test_operator.py``.)"""


@pytest.mark.parametrize("case", sorted(LLMAZ_WEBHOOK_SUITE_ACCEPTS))
def test_llmaz_webhook_suite_accepts(control_plane: ControlPlane, crds: list[str], case: str) -> None:
    obj = LLMAZ_WEBHOOK_SUITE_ACCEPTS[case]
    res = control_plane.kubectl("create", "--dry-run=server", "-f", "-", input=obj, check=False)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("case", sorted(LLMAZ_WEBHOOK_SUITE_REJECTS))
def test_llmaz_webhook_suite_rejects(control_plane: ControlPlane, crds: list[str], case: str) -> None:
    obj, field = LLMAZ_WEBHOOK_SUITE_REJECTS[case]
    res = control_plane.kubectl("create", "--dry-run=server", "-f", "-", input=obj, check=False)
    assert res.returncode != 0, f"{case} was accepted"
    assert field in res.stderr, res.stderr
