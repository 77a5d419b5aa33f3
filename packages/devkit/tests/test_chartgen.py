"""The chart's values, schema, RBAC and webhook rules come from one source and cannot drift."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from llmaz.operator.admission import WEBHOOKS
from llmaz.operator.config import OperatorConfig
from llmaz.operator.rbac import RULES
from llmaz_devkit import chartgen

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


def test_webhook_paths_are_unique_and_cover_every_kind() -> None:
    assert len({h.path for h in WEBHOOKS}) == len(WEBHOOKS) == 4
    text = (CHART / "templates" / "webhook" / "_webhooks.tpl").read_text()
    for hook in WEBHOOKS:
        assert f"path: {hook.path}" in text


def test_values_reference_lists_every_leaf(schema: dict[str, Any]) -> None:
    page = (ROOT / chartgen.DOCS_PAGE).read_text()
    for key in ("operator.config.flavorFallback.unschedulableSeconds", "webhook.certManager.issuerRef.kind"):
        assert f"| `{key}` |" in page
    assert json.loads((CHART / "values.schema.json").read_text()) == schema
