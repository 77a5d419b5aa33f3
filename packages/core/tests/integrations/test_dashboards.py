"""The Grafana dashboards in charts/llmaz/dashboards/: generated, well-formed, and querying only
series that an engine plugin (``key_metrics``) or the operator (``OPERATOR_METRICS``) declares.

Regenerate with ``LLMAZ_UPDATE_DASHBOARDS=1 .venv/bin/pytest <this file>``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from llmaz.plugins import Backend, PluginManager
from llmaz.render.dashboards import dashboard_files, engine_dashboard
from llmaz.render.monitoring import OPERATOR_METRICS

DASHBOARDS = Path(__file__).resolve().parents[4] / "charts" / "llmaz" / "dashboards"
PROMQL_WORDS = {
    "sum", "avg", "max", "min", "count", "rate", "irate", "increase", "histogram_quantile", "by", "without",
}  # fmt: skip
_SELECTOR = re.compile(r"\{[^{}]*\}")
_GROUPING = re.compile(r"\b(by|without)\s*\([^()]*\)")
_RANGE = re.compile(r"\[[0-9]+[smhd]\]")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def builtin_backends() -> dict[str, Backend]:
    manager = PluginManager.from_environment(environ={})
    assert manager.errors == []
    return {
        name: b
        for name, b in manager.backends.items()
        if (owner := manager.owner_of_backend(name)) is not None and owner.origin == "builtin"
    }


def metric_names(expr: str) -> set[str]:
    """Series names a PromQL expression reads: identifiers left once label matchers, groupings,
    ranges and numbers are removed, minus PromQL functions and keywords."""
    rest = _RANGE.sub(" ", _GROUPING.sub(" ", _SELECTOR.sub(" ", expr)))
    return {tok for tok in _IDENT.findall(rest) if tok not in PROMQL_WORDS}


def declared_series() -> set[str]:
    out = set(OPERATOR_METRICS)
    for backend in builtin_backends().values():
        if backend.key_metrics is not None:
            out |= backend.key_metrics.series()
    return out


def shipped() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


def test_dashboard_files_are_current() -> None:
    expected = dashboard_files(builtin_backends())
    if os.environ.get("LLMAZ_UPDATE_DASHBOARDS"):
        for stale in DASHBOARDS.glob("*.json"):
            stale.unlink()
        for name, text in expected.items():
            (DASHBOARDS / name).write_text(text)
    actual = {p.name: p.read_text() for p in sorted(DASHBOARDS.glob("*.json"))}
    assert actual == expected, f"{DASHBOARDS} is stale: rerun with LLMAZ_UPDATE_DASHBOARDS=1"


def test_operator_and_each_engine_with_metrics_have_a_dashboard() -> None:
    names = set(shipped())
    assert "llmaz-operator.json" in names
    with_metrics = {n for n, b in builtin_backends().items() if b.key_metrics is not None}
    assert with_metrics >= {"vllm", "sglang", "llamacpp", "tgi"}
    assert names == {"llmaz-operator.json"} | {f"llmaz-{n}.json" for n in with_metrics}


@pytest.mark.parametrize("name", sorted(p.name for p in DASHBOARDS.glob("*.json")))
def test_dashboard_is_well_formed_grafana_json(name: str) -> None:
    board = shipped()[name]
    assert {"uid", "title", "panels", "schemaVersion", "templating"} <= set(board)
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,40}", board["uid"])
    variables = {v["name"] for v in board["templating"]["list"]}
    assert "datasource" in variables
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}"
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        for target in panel["targets"]:
            expr = target["expr"]
            assert expr.count("(") == expr.count(")"), expr
            assert expr.count("{") == expr.count("}"), expr
            # every $variable an expression uses is defined by the dashboard
            assert set(re.findall(r"\$(\w+)", expr)) <= variables, expr


@pytest.mark.parametrize("name", sorted(p.name for p in DASHBOARDS.glob("*.json")))
def test_every_queried_metric_is_declared(name: str) -> None:
    declared = declared_series()
    used: set[str] = set()
    for panel in shipped()[name]["panels"]:
        for target in panel["targets"]:
            used |= metric_names(target["expr"])
    assert used, f"{name} queries nothing"
    assert used <= declared, f"{name} queries undeclared series {sorted(used - declared)}"


def test_metric_name_extraction_can_fail() -> None:
    # the check above is only as good as this parser: it must see the series in real queries
    expr = 'histogram_quantile(0.95, sum by (le) (rate(vllm:ttft_bucket{namespace=~"$namespace"}[5m])))'
    assert metric_names(expr) == {"vllm:ttft_bucket"}
    assert metric_names("sum by (pod) (undeclared_series)") == {"undeclared_series"}
    assert "undeclared_series" not in declared_series()


def test_engines_without_metrics_get_no_dashboard() -> None:
    backends = builtin_backends()
    assert engine_dashboard(backends["ollama"]) is None
    assert engine_dashboard(backends["tensorrt-llm"]) is None
