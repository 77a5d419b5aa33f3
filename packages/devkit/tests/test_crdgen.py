"""The generated CRDs: structural, bounded, complete, in sync with the committed copies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmaz.api import KINDS, OpenModel, Playground, Resource, Service
from llmaz_devkit import crdgen

REPO = Path(__file__).resolve().parents[3]
_JUNCTOR_FORBIDDEN = ("type", "description", "default", "additionalProperties", "nullable")


@pytest.fixture(scope="module")
def generated() -> dict[Path, str]:
    return crdgen.generate()


@pytest.fixture(scope="module")
def all_crds() -> dict[str, dict[str, Any]]:
    return {c["spec"]["names"]["kind"]: c for c in crdgen.crds()}


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


def _nodes(node: Any, path: str = "", in_junctor: bool = False) -> Iterator[tuple[str, dict[str, Any], bool]]:
    if not isinstance(node, dict):
        return
    yield path, node, in_junctor
    for key in ("anyOf", "allOf", "oneOf"):
        for i, sub in enumerate(node.get(key, ())):
            yield from _nodes(sub, f"{path}.{key}[{i}]", True)
    for prop, sub in node.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{prop}", in_junctor)
    for key, suffix in (("items", "[]"), ("additionalProperties", ".*")):
        if isinstance(node.get(key), dict):
            yield from _nodes(node[key], path + suffix, in_junctor)


def test_generated_files_are_committed(generated: dict[Path, str]) -> None:
    assert crdgen.check(REPO, generated) == [], "run `python -m llmaz_devkit.crdgen` and commit"


def test_check_reports_drift(generated: dict[Path, str], tmp_path: Path) -> None:
    crdgen.write(tmp_path, generated)
    assert crdgen.check(tmp_path, generated) == []
    target = tmp_path / crdgen.PACKAGE_CRDS_DIR / "openmodels.llmaz.io.yaml"
    target.write_text(target.read_text().replace("maxItems: 8", "maxItems: 9"))
    (tmp_path / crdgen.DOCS_DIR / "stale.md").write_text("old")
    problems = crdgen.check(tmp_path, generated)
    assert any("maxItems: 9" in p for p in problems)
    assert any("stale.md" in p for p in problems)
    assert crdgen.main(["--check", "--out", str(tmp_path)]) == 1


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_schema_is_structural(kind: type[Resource], all_crds: dict[str, dict[str, Any]]) -> None:
    schema = _schema(all_crds[kind.__name__])
    text = json.dumps(schema)
    assert "$ref" not in text
    assert "x-llmaz" not in text
    for path, node, in_junctor in _nodes(schema):
        int_or_string = node.get("x-kubernetes-int-or-string", False)
        if in_junctor:
            if not path.endswith(("anyOf[0]", "anyOf[1]")) or "type" not in node:
                assert not any(k in node for k in _JUNCTOR_FORBIDDEN), path
            continue
        assert "type" in node or int_or_string or node.get("x-kubernetes-preserve-unknown-fields"), path
        assert not ("properties" in node and "additionalProperties" in node), path
        assert node.get("additionalProperties") is not False, path
        if int_or_string:
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        if node.get("x-kubernetes-list-type") == "map":
            items = node["items"]
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in items.get("required", ()) or "default" in items["properties"][key], path
        for rule in node.get("x-kubernetes-validations", ()):
            assert set(rule) <= {"rule", "message", "fieldPath", "reason", "messageExpression"}, path
            assert rule["message"]


def _own_nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Nodes of our own types (embedded Kubernetes schemas excluded)."""
    yield path, node
    if crdgen.K8S_SCHEMA_KEY in node:
        return
    for prop, sub in node.get("properties", {}).items():
        if path == "" and prop == "metadata":
            continue
        yield from _own_nodes(sub, f"{path}.{prop}")
    for key, suffix in (("items", "[]"), ("additionalProperties", ".*")):
        sub = node.get(key)
        if isinstance(sub, dict):
            yield from _own_nodes(sub, path + suffix)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_own_strings_lists_and_maps_are_bounded(kind: type[Resource]) -> None:
    schema = crdgen.internal_schema(kind)
    for path, node in _own_nodes(schema):
        if crdgen.K8S_SCHEMA_KEY in node or path in (".apiVersion", ".kind", ".status.conditions[].status"):
            continue
        if node.get("type") == "string" and "enum" not in node and node.get("format") != "date-time":
            assert "maxLength" in node, path
        if node.get("type") == "array":
            assert "maxItems" in node, path
        if node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
            assert "maxProperties" in node, path


def test_names_scope_and_categories(all_crds: dict[str, dict[str, Any]]) -> None:
    expected = {
        "OpenModel": ("llmaz.io", "openmodels", "om", "Cluster"),
        "BackendRuntime": ("inference.llmaz.io", "backendruntimes", "br", "Cluster"),
        "Playground": ("inference.llmaz.io", "playgrounds", "pl", "Namespaced"),
        "Service": ("inference.llmaz.io", "services", "isvc", "Namespaced"),
    }
    for kind, (group, plural, short, scope) in expected.items():
        crd = all_crds[kind]
        assert crd["metadata"]["name"] == f"{plural}.{group}"
        assert crd["spec"]["group"] == group
        assert crd["spec"]["scope"] == scope
        names = crd["spec"]["names"]
        assert names == {
            "kind": kind,
            "listKind": f"{kind}List",
            "plural": plural,
            "singular": kind.lower(),
            "shortNames": [short],
            "categories": ["llmaz"],
        }
        (version,) = crd["spec"]["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)


def test_subresources(all_crds: dict[str, dict[str, Any]]) -> None:
    scale = {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    for kind in ("Playground", "Service"):
        assert all_crds[kind]["spec"]["versions"][0]["subresources"] == {"status": {}, "scale": scale}
    for kind in ("OpenModel", "BackendRuntime"):
        assert all_crds[kind]["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_printer_columns(all_crds: dict[str, dict[str, Any]]) -> None:
    def columns(kind: str) -> dict[str, str]:
        version = all_crds[kind]["spec"]["versions"][0]
        return {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}

    # llmaz's columns in llmaz's order (kubectl prints them in this order), then preheat's and usage
    assert list(columns("OpenModel").items()) == [
        ("OwnedBy", ".spec.ownedBy"),
        ("Age", ".metadata.creationTimestamp"),
        ("ModelHub", ".spec.source.modelHub.name"),
        ("ModelID", ".spec.source.modelHub.modelID"),
        ("URI", ".spec.source.uri"),
        ("Preheated", ".status.conditions[?(@.type=='Preheated')].reason"),
        ("InUse", ".status.conditions[?(@.type=='InUse')].reason"),
    ]
    assert list(columns("BackendRuntime").items()) == [
        ("Image", ".spec.image"),
        ("Version", ".spec.version"),
        ("Managed", ".status.conditions[?(@.type=='Managed')].reason"),
        ("InUse", ".status.conditions[?(@.type=='InUse')].reason"),
        ("Age", ".metadata.creationTimestamp"),
    ]
    assert list(columns("Playground")) == ["Model", "Replicas", "Status", "Age"]
    assert columns("Playground")["Model"] == ".spec.modelClaim.modelName"
    assert columns("Service")["Status"] == ".status.conditions[?(@.type=='Available')].reason"
    for kind in ("OpenModel", "BackendRuntime", "Playground", "Service"):
        assert columns(kind)["Age"] == ".metadata.creationTimestamp"


def test_defaults_enums_and_bounds(all_crds: dict[str, dict[str, Any]]) -> None:
    om = _schema(all_crds["OpenModel"])["properties"]["spec"]["properties"]
    hub = om["source"]["properties"]["modelHub"]["properties"]
    assert hub["name"] == {
        "default": "Huggingface",
        "description": hub["name"]["description"],
        "enum": ["Huggingface", "ModelScope"],
        "type": "string",
    }
    assert hub["revision"]["default"] == "main"
    assert om["ownedBy"]["default"] == "llmaz"
    assert om["inferenceConfig"]["properties"]["flavors"]["maxItems"] == 8
    assert om["createdAt"]["format"] == "date-time"
    pl = _schema(all_crds["Playground"])["properties"]["spec"]["properties"]
    assert pl["replicas"]["default"] == 1
    assert pl["backendRuntimeConfig"]["properties"]["backendName"]["default"] == "vllm"
    assert pl["elasticConfig"]["required"] == ["maxReplicas"]
    assert pl["elasticConfig"]["properties"]["maxReplicas"]["minimum"] == 1
    assert pl["elasticConfig"]["properties"]["minReplicas"]["default"] == 1
    models = pl["modelClaims"]["properties"]["models"]
    assert models["minItems"] == 1
    assert models["items"]["properties"]["role"]["enum"] == ["main", "draft"]
    assert models["items"]["properties"]["role"]["default"] == "main"
    svc = _schema(all_crds["Service"])["properties"]["spec"]
    assert set(svc["required"]) == {"modelClaims", "workloadTemplate"}
    wt = svc["properties"]["workloadTemplate"]["properties"]
    assert wt["restartPolicy"]["enum"] == [
        "Default",
        "RecreateGroupOnPodRestart",
        "RecreateGroupAfterStart",
        "None",
    ]
    assert wt["restartPolicy"]["default"] == "RecreateGroupOnPodRestart"
    rollout = svc["properties"]["rolloutStrategy"]
    # llmaz (and LWS) default the whole object, so a Service without it still rolls out one by one
    assert rollout["default"] == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert rollout["properties"]["type"]["enum"] == ["RollingUpdate"]
    rolling = rollout["properties"]["rollingUpdateConfiguration"]["properties"]
    assert rolling["maxUnavailable"]["x-kubernetes-int-or-string"] is True
    assert rolling["maxUnavailable"]["default"] == 1
    assert rolling["maxSurge"]["default"] == 0
    sub_group = wt["subGroupPolicy"]["properties"]["subGroupPolicyType"]
    assert (sub_group["enum"], sub_group["default"]) == (["LeaderWorker", "LeaderExcluded"], "LeaderWorker")
    assert wt["size"]["default"] == 1
    assert svc["properties"]["replicas"]["default"] == 1


def test_name_rule_reports_metadata_name(all_crds: dict[str, dict[str, Any]]) -> None:
    """The name rules (DNS label; for Playgrounds and Services also room for the children's
    names) point at metadata.name (not at the object root, which the API server prints as
    ``<nil>``); a fieldPath must name a declared property, so the root declares name."""
    for kind, rules in (("OpenModel", 1), ("Playground", 2), ("Service", 2)):
        schema = _schema(all_crds[kind])
        assert schema["properties"]["metadata"] == {
            "type": "object",
            "properties": {"name": {"type": "string"}},
        }
        assert len(schema["x-kubernetes-validations"]) == rules
        for rule in schema["x-kubernetes-validations"]:
            assert rule["fieldPath"] == ".metadata.name"


def test_embedded_kubernetes_schemas_are_real(all_crds: dict[str, dict[str, Any]]) -> None:
    wt = _schema(all_crds["Service"])["properties"]["spec"]["properties"]["workloadTemplate"]["properties"]
    worker = wt["workerTemplate"]
    assert set(worker["properties"]["metadata"]["properties"]) == {
        "annotations",
        "finalizers",
        "labels",
        "name",
        "namespace",
    }
    containers = worker["properties"]["spec"]["properties"]["containers"]
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["maxItems"] == 64  # bound added for the model-runner rule
    container = containers["items"]
    assert "name" in container["required"]
    assert container["properties"]["name"]["maxLength"] == 63
    resources = container["properties"]["resources"]["properties"]["limits"]["additionalProperties"]
    assert resources["x-kubernetes-int-or-string"] is True
    assert resources["pattern"] == crdgen.QUANTITY_PATTERN
    ports = container["properties"]["ports"]["items"]["properties"]
    assert ports["protocol"]["default"] == "TCP"
    assert "description" not in container["properties"]["image"]
    assert "maxItems" not in wt["leaderTemplate"]["properties"]["spec"]["properties"]["containers"]
    br = _schema(all_crds["BackendRuntime"])["properties"]["spec"]["properties"]
    assert br["envs"]["items"]["required"] == ["name"]
    assert "valueFrom" in br["envs"]["items"]["properties"]
    assert "httpGet" in br["readinessProbe"]["properties"]
    hpa = br["recommendedConfigs"]["items"]["properties"]["scaleTrigger"]["properties"]["hpa"]["properties"]
    assert hpa["metrics"]["items"]["required"] == ["type"]


def test_recursive_definitions_stay_open() -> None:
    api = crdgen.KubernetesOpenAPI(
        {
            "definitions": {
                "a.Node": {
                    "type": "object",
                    "properties": {"child": {"$ref": "#/definitions/a.Node"}, "n": {"type": "integer"}},
                }
            }
        }
    )
    schema = api.schema("a.Node")
    assert schema["properties"]["child"] == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }


def test_chart_templates_escape_go_templates_and_add_keep(generated: dict[Path, str]) -> None:
    for kind in KINDS:
        name = f"{crdgen.crd_name(kind)}.yaml"
        template = generated[crdgen.CHART_DIR / "templates" / name]
        plain = generated[crdgen.PACKAGE_CRDS_DIR / name]
        assert "{{- if .Values.keep }}" in template
        assert "helm.sh/resource-policy" not in plain
        rendered = template.replace('{{ "{{" }}', "{{")
        rendered = rendered.replace(
            "{{- if .Values.keep }}\n  annotations:\n    helm.sh/resource-policy: keep\n{{- end }}\n", ""
        )
        assert rendered == plain
        assert yaml.safe_load(plain) == crdgen.crd(kind)
    assert (
        "{{ .ModelPath }}" in generated[crdgen.PACKAGE_CRDS_DIR / "backendruntimes.inference.llmaz.io.yaml"]
    )
    chart = yaml.safe_load(generated[crdgen.CHART_DIR / "Chart.yaml"])
    assert (chart["name"], chart["version"]) == ("crds", "0.1.0")
    assert yaml.safe_load(generated[crdgen.CHART_DIR / "values.yaml"]) == {"keep": True}


def test_api_reference_pages(generated: dict[Path, str]) -> None:
    pages = {p.name: t for p, t in generated.items() if p.parent == crdgen.DOCS_DIR}
    assert set(pages) == {"index.md", "openmodel.md", "backendruntime.md", "playground.md", "service.md"}
    assert "`spec.source.modelHub.modelID` (required)" in pages["openmodel.md"]
    assert "### `speculative-decoding-pair`" in pages["playground.md"]
    assert "speculative decoding needs exactly two models" in pages["service.md"]
    assert (
        "`spec.workloadTemplate.workerTemplate` (required) | Kubernetes `PodTemplateSpec`"
        in pages["service.md"]
    )
    for kind in (OpenModel, Playground, Service):
        assert "metadata-name-dns-label" in pages[f"{kind.__name__.lower()}.md"]
    # each rule shows the exact error line the API server prints (field path, reason, message, value)
    assert (
        "spec.elasticConfig.minReplicas: Forbidden: minReplicas must be at least 1\n"
        in pages["playground.md"]
    )
    assert (
        "spec.recommendedConfigs[i].scaleTrigger: Required value: scaleTrigger needs hpa\n"
        in pages["backendruntime.md"]
    )
    assert (
        "spec.source.uri: Invalid value: unsupported uri protocol: use oss, s3, gcs, ollama, host or pvc "
        "(got <self.uri>)\n" in pages["openmodel.md"]
    )
    assert "\nmetadata.name: Invalid value: metadata.name must be a DNS-1123 label" in pages["service.md"]
    assert "## Python SDK" in pages["index.md"]
    assert "(../sdk.md)" in pages["index.md"]  # the guide itself is a hand-written docs page


def _validator(crd: dict[str, Any]) -> Any:
    import jsonschema

    return jsonschema.Draft7Validator(_schema(crd))


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_defaults_are_valid_against_their_nodes(
    kind: type[Resource], all_crds: dict[str, dict[str, Any]]
) -> None:
    import jsonschema

    for path, node, in_junctor in _nodes(_schema(all_crds[kind.__name__])):
        if "default" in node and not in_junctor:
            assert not list(jsonschema.Draft7Validator(node).iter_errors(node["default"])), path


def test_examples_and_corpus_are_schema_valid(all_crds: dict[str, dict[str, Any]]) -> None:
    """Every documented example and invalid-corpus object passes the OpenAPI part of its CRD (the
    corpus is meant to fail its CEL rule only), embedded pod templates included."""
    docs: list[dict[str, Any]] = []
    for path in sorted((REPO / "docs" / "examples").rglob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    for path in sorted((REPO / "packages" / "core" / "tests" / "corpus" / "invalid").glob("*.yaml")):
        docs.append(yaml.safe_load(path.read_text())["object"])
    checked = 0
    for doc in docs:
        kind = str(doc.get("kind"))
        if kind not in all_crds or not str(doc.get("apiVersion", "")).startswith(
            all_crds[kind]["spec"]["group"] + "/"
        ):
            continue
        errors = [e.message for e in _validator(all_crds[kind]).iter_errors(doc)]
        assert errors == [], (doc["metadata"], errors)
        checked += 1
    assert checked >= 60


def test_bad_pod_template_is_rejected_by_the_schema(all_crds: dict[str, dict[str, Any]]) -> None:
    service = {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {
            "modelClaims": {"models": [{"name": "m"}]},
            "workloadTemplate": {
                "workerTemplate": {
                    "spec": {"containers": [{"name": "model-runner", "ports": [{"containerPort": "http"}]}]}
                }
            },
        },
    }
    errors = list(_validator(all_crds["Service"]).iter_errors(service))
    assert errors, "containerPort must be an integer"
    del service["spec"]["workloadTemplate"]["workerTemplate"]["spec"]["containers"][0]["name"]
    service["spec"]["workloadTemplate"]["workerTemplate"]["spec"]["containers"][0]["ports"] = []
    assert any(
        "'name' is a required property" in e.message
        for e in _validator(all_crds["Service"]).iter_errors(service)
    )
