"""The chart's values, schema, RBAC and webhook rules come from one source and cannot drift."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from llmaz.loader.layout import IMAGE_REPOSITORY, default_loader_image
from llmaz.operator.admission import WEBHOOKS
from llmaz.operator.config import OperatorConfig
from llmaz.operator.rbac import RULES
from llmaz_devkit import chartgen
from llmaz_devkit.webhooks import by_url_configurations

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "llmaz"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return chartgen.values_schema()


def test_committed_files_match_the_generator() -> None:
    assert chartgen.check(ROOT, chartgen.generate()) == []


def test_check_reports_a_hand_edit(tmp_path: Path) -> None:
    files = chartgen.generate()
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    values = tmp_path / chartgen.CHART_DIR / "values.yaml"
    values.write_text(values.read_text().replace("replicas: 1", "replicas: 3"))
    problems = chartgen.check(tmp_path, files)
    assert len(problems) == 1
    assert "-  replicas: 3" in problems[0]


def test_defaults_and_values_global_pass_the_schema(schema: dict[str, Any]) -> None:
    jsonschema.validate(yaml.safe_load((CHART / "values.yaml").read_text()), schema)
    jsonschema.validate(yaml.safe_load((CHART / "values.global.yaml").read_text()), schema)


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"operator": {"replica": 2}}, "replica"),
        ({"operator": {"config": {"workers": 0}}}, "0"),
        ({"operator": {"config": {"backends": {}}}}, "backends"),  # the chart fills it from backendRuntime
        ({"backendRuntime": {"vllm": {"image": {"repo": "x"}}}}, "repo"),
        ({"image": {"digest": "latest"}}, "latest"),
        ({"webhook": {"failurePolicy": "Sometimes"}}, "Sometimes"),
    ],
)
def test_schema_rejects_bad_values_naming_them(schema: dict[str, Any], values: Any, where: str) -> None:
    with pytest.raises(jsonschema.ValidationError, match=where):
        jsonschema.validate(values, schema)


def test_schema_passes_dependency_values_through(schema: dict[str, Any]) -> None:
    jsonschema.validate(
        {"open-webui": {"enabled": True, "persistence": {"enabled": True}}, "lws": {"x": 1}}, schema
    )


def test_every_operator_setting_is_a_value_except_what_the_chart_fills() -> None:
    values = chartgen.default_values()["operator"]["config"]
    settings = set(OperatorConfig.model_json_schema(by_alias=True)["properties"])
    assert settings - set(values) == {"backends"}
    assert "leaseName" not in values["leaderElection"]


def test_clusterrole_is_rules() -> None:
    text = (CHART / "templates" / "operator" / "clusterrole.yaml").read_text()
    body = yaml.safe_load(text.split("rules:\n", 1)[1].join(["rules:\n", ""]))
    assert body["rules"] == [r.to_dict() for r in RULES]


def _render_stub(template: str) -> list[dict[str, Any]]:
    """The generated webhook template with its Go template actions stubbed out, as YAML documents."""
    body = "\n".join(
        line for line in template.splitlines() if not re.fullmatch(r"\s*\{\{-?[^}]*-?\}\}\s*", line)
    )
    return [d for d in yaml.safe_load_all(re.sub(r"\{\{[^}]*\}\}", "stub", body)) if d]


def _shape(doc: dict[str, Any]) -> tuple[str, list[tuple[str, str, Any]]]:
    hooks = []
    for hook in doc["webhooks"]:
        config = hook["clientConfig"]
        path = config["service"]["path"] if "service" in config else "/" + config["url"].split("/", 3)[3]
        hooks.append((hook["name"], path, hook["rules"]))
    return doc["kind"], hooks


def test_chart_and_e2e_webhook_configurations_agree_with_webhooks() -> None:
    chart_docs = _render_stub((CHART / "templates" / "webhook" / "_webhooks.tpl").read_text())
    url_docs = by_url_configurations("https://127.0.0.1:9443", b"CA", "e2e")
    assert [_shape(d) for d in chart_docs] == [_shape(d) for d in url_docs]
    kinds = {d["kind"]: [h["name"] for h in d["webhooks"]] for d in chart_docs}
    assert kinds == {
        "MutatingWebhookConfiguration": [h.name for h in WEBHOOKS if h.type == "mutating"],
        "ValidatingWebhookConfiguration": [h.name for h in WEBHOOKS if h.type == "validating"],
    }
    for doc in url_docs:
        for hook in doc["webhooks"]:
            assert hook["rules"][0]["operations"] == ["CREATE", "UPDATE"]  # deletes never blocked
            assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:9443/")


def test_values_reference_lists_every_leaf(schema: dict[str, Any]) -> None:
    page = (ROOT / chartgen.DOCS_PAGE).read_text()
    for key in ("operator.config.flavorFallback.unschedulableSeconds", "webhook.certManager.issuerRef.kind"):
        assert f"| `{key}` |" in page
    assert json.loads((CHART / "values.schema.json").read_text()) == schema


def test_one_image_name_for_chart_loader_and_release() -> None:
    # The chart runs the operator from the image the loader init containers default to, and the
    # release workflow pushes exactly that repository, with both tag forms in use.
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["repository"] == IMAGE_REPOSITORY
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yaml").read_text())
    meta = next(
        step["with"]
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if str(step.get("uses", "")).startswith("docker/metadata-action")
    )
    assert meta["images"] == IMAGE_REPOSITORY
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = str(chart["appVersion"])
    assert default_loader_image(version) == f"{IMAGE_REPOSITORY}:v{version}"
    assert set(meta["tags"].split()) == {
        "type=semver,pattern={{version}}",
        "type=semver,pattern=v{{version}}",
    }
