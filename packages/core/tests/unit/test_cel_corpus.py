"""The CEL rules of the CRDs, evaluated offline with cel-python on the invalid corpus and the examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from llmaz.api import KINDS, Resource, kind_for, parse_manifest
from llmaz.api._base import RULE_ID_KEY
from llmaz.api.validation import CelValidator, all_rule_ids, field_location, validate_manifest

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "invalid"
CASES = sorted(CORPUS.glob("*.yaml"))


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def test_corpus_is_big_enough_and_covers_every_rule() -> None:
    assert len(CASES) >= 40
    covered = {_load(path)["rule"] for path in CASES}
    assert covered == all_rule_ids()


def _rules_showing_the_value() -> set[str]:
    return {
        str(rule[RULE_ID_KEY])
        for kind in KINDS
        for _path, rule in CelValidator.for_kind(kind).rules()
        if "messageExpression" in rule
    }


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_invalid_case_fails_exactly_its_rule(path: Path) -> None:
    """Each case names its rule, the message, the field the API server reports and, for rules whose
    message carries the offending value, that value: the error a user sees is pinned down fully."""
    case = _load(path)
    assert {"rule", "expect", "field", "object"} <= set(case) <= {"rule", "expect", "field", "got", "object"}
    assert ("got" in case) == (case["rule"] in _rules_showing_the_value()), "got: iff the rule shows a value"
    obj = case["object"]
    # schema-valid: only the CEL rule rejects it
    model = kind_of(obj).model_validate(obj)
    assert model.to_manifest() == json.loads(json.dumps(obj))
    failures = validate_manifest(obj)
    assert [f.rule_id for f in failures] == [case["rule"]], failures
    failure = failures[0]
    assert failure.error is None, failure.error
    assert failure.field == case["field"]
    assert failure.message.startswith(case["expect"]), failure.message
    if "got" in case:
        assert failure.message.endswith(f" (got {case['got']})"), failure.message


def kind_of(obj: dict[str, Any]) -> type[Resource]:
    kind = kind_for(obj["apiVersion"], obj["kind"])
    assert kind is not None
    return kind


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_sdk_refuses_every_invalid_case_like_the_api_server(path: Path) -> None:
    """``from_manifest``/``parse_manifest`` and ``new`` raise the field and message the CRD rule gives."""
    case = _load(path)
    obj = case["object"]
    for build in (
        lambda: parse_manifest(obj),
        lambda: kind_of(obj).from_manifest(obj),
        lambda: kind_of(obj).new(
            obj["metadata"]["name"],
            namespace=obj["metadata"].get("namespace"),
            **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")},
        ),
    ):
        with pytest.raises(ValidationError) as raised:
            build()
        errors = raised.value.errors()
        assert len(errors) == 1, errors
        error = errors[0]
        assert error["type"] == "cel_rule"
        assert error["loc"] == field_location(case["field"])
        assert error["msg"].startswith(case["expect"])
        if "got" in case:
            assert error["msg"].endswith(f" (got {case['got']})")


@pytest.mark.parametrize(
    "manifest",
    [
        pytest.param(
            {"source": {"uri": uri}},
            id=uri,
        )
        for uri in (
            "oss://bucket.oss-cn-hangzhou.aliyuncs.com/models/qwen2",
            "OSS://bucket.endpoint/m",
            "s3://bucket/DeepSeek-R1-Distill-Qwen-1.5B",
            "GCS://bucket/path/to/model",
            "ollama://qwen2:0.5b",
            "host:///mnt/models/qwen2",
            "Host:///mnt/models",
            "pvc://models-claim",
            "pvc://models-claim/qwen2/Qwen2-0.5B",
            "PVC://team.models/qwen2",
        )
    ],
)
def test_valid_uris_pass(manifest: dict[str, Any]) -> None:
    obj = {
        "apiVersion": "llmaz.io/v1alpha1",
        "kind": "OpenModel",
        "metadata": {"name": "m"},
        "spec": {"familyName": "f", **manifest},
    }
    assert validate_manifest(obj) == []


def _playground(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.llmaz.io/v1alpha1",
        "kind": "Playground",
        "metadata": {"name": "p"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    "spec",
    [
        {"modelClaim": {"modelName": "m"}, "elasticConfig": {"minReplicas": 2, "maxReplicas": 2}},
        {"modelClaim": {"modelName": "m"}, "elasticConfig": {"maxReplicas": 1}},
        {"modelClaims": {"models": [{"name": "a"}, {"name": "b", "role": "draft"}]}},
        {"modelClaims": {"models": [{"name": "b", "role": "draft"}, {"name": "a", "role": "main"}]}},
        {"modelClaims": {"models": [{"name": "a"}]}},
        {
            "modelClaim": {"modelName": "m"},
            "backendRuntimeConfig": {
                "resources": {
                    "limits": {"cpu": "1", "memory": "16Gi", "nvidia.com/gpu": 1},
                    "requests": {"cpu": "1000m", "memory": "16Gi", "ephemeral-storage": "1Ti"},
                }
            },
        },
        {
            "modelClaim": {"modelName": "m"},
            "backendRuntimeConfig": {
                "resources": {"limits": {"memory": "1Gi"}, "requests": {"memory": "1G"}}
            },
        },
    ],
    ids=[
        "min-equals-max",
        "min-defaults-to-1",
        "main-then-draft",
        "draft-then-main",
        "single-implicit-main",
        "limits-equal-requests",
        "gi-above-g",
    ],
)
def test_valid_playground_edges_pass(spec: dict[str, Any]) -> None:
    assert validate_manifest(_playground(**spec)) == []


EXAMPLES = Path(__file__).resolve().parents[4] / "docs" / "examples"


def _example_manifests() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        if path.name == "index.yaml" and path.parent == EXAMPLES:
            continue
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and kind_for(str(doc.get("apiVersion", "")), str(doc.get("kind", ""))):
                out.append((f"{path.relative_to(EXAMPLES)}#{index}", doc))
    return out


EXAMPLE_MANIFESTS = _example_manifests()


def test_enough_example_manifests_are_checked() -> None:
    assert len(EXAMPLE_MANIFESTS) >= 15


@pytest.mark.parametrize("manifest", [m for _, m in EXAMPLE_MANIFESTS], ids=[i for i, _ in EXAMPLE_MANIFESTS])
def test_example_round_trips_and_passes_every_rule(manifest: dict[str, Any]) -> None:
    model = parse_manifest(manifest)
    assert model.to_manifest() == json.loads(json.dumps(manifest))
    assert validate_manifest(manifest) == []
