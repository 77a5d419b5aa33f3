"""Grafana dashboards as data: one for the operator and one per engine that declares key metrics.

Pure: the chart ships the JSON under ``charts/llmaz/dashboards/`` and a test regenerates it from the
installed plugins, so a dashboard only ever queries series an engine plugin
(:attr:`~llmaz.plugins.backend.Backend.key_metrics`) or the operator
(:data:`~llmaz.render.monitoring.OPERATOR_METRICS`) declares.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from llmaz.plugins.backend import Backend
from llmaz.plugins.metrics import EngineMetrics

__all__ = ["dashboard_files", "engine_dashboard", "operator_dashboard"]

SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
NS = 'namespace=~"$namespace"'
RATE = "[5m]"


def _panel(
    pid: int, title: str, exprs: list[tuple[str, str]], unit: str, *, x: int, y: int
) -> dict[str, Any]:
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "datasource": dict(DATASOURCE),
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "datasource": dict(DATASOURCE)}
            for i, (expr, legend) in enumerate(exprs)
        ],
    }


def _templating(with_namespace: bool) -> dict[str, Any]:
    variables: list[dict[str, Any]] = [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"}
    ]
    if with_namespace:
        variables.append(
            {
                "name": "namespace",
                "type": "custom",
                "label": "Namespace (regex)",
                "query": ".*",
                "current": {"text": ".*", "value": ".*"},
                "options": [{"text": ".*", "value": ".*", "selected": True}],
            }
        )
    return {"list": variables}


def _dashboard(uid: str, title: str, panels: list[dict[str, Any]], *, namespaced: bool) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "tags": ["llmaz"],
        "editable": True,
        "schemaVersion": SCHEMA_VERSION,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": _templating(namespaced),
        "panels": panels,
    }


def _engine_panels(m: EngineMetrics) -> list[tuple[str, list[tuple[str, str]], str]]:
    panels: list[tuple[str, list[tuple[str, str]], str]] = []
    if m.requests_running:
        panels.append(
            ("Requests running", [(f"sum by (pod) ({m.requests_running}{{{NS}}})", "{{pod}}")], "short")
        )
    if m.requests_waiting:
        panels.append(
            ("Requests waiting", [(f"sum by (pod) ({m.requests_waiting}{{{NS}}})", "{{pod}}")], "short")
        )
    if m.time_to_first_token:
        bucket = f"sum by (le) (rate({m.time_to_first_token}_bucket{{{NS}}}{RATE}))"
        panels.append(
            (
                "Time to first token",
                [(f"histogram_quantile({q}, {bucket})", f"p{int(q * 100)}") for q in (0.5, 0.95, 0.99)],
                "s",
            )
        )
    if m.generation_tokens:
        panels.append(
            (
                "Generated tokens per second",
                [(f"sum by (pod) (rate({m.generation_tokens}{{{NS}}}{RATE}))", "{{pod}}")],
                "short",
            )
        )
    if m.kv_cache_usage:
        panels.append(
            ("KV-cache use", [(f"avg by (pod) ({m.kv_cache_usage}{{{NS}}})", "{{pod}}")], "percentunit")
        )
    return panels


def _layout(specs: list[tuple[str, list[tuple[str, str]], str]]) -> list[dict[str, Any]]:
    return [
        _panel(i + 1, title, exprs, unit, x=(i % 2) * 12, y=(i // 2) * 8)
        for i, (title, exprs, unit) in enumerate(specs)
    ]


def engine_dashboard(backend: Backend) -> dict[str, Any] | None:
    """The dashboard of one engine; ``None`` when it declares no key metrics."""
    if backend.key_metrics is None:
        return None
    title = f"llmaz / {backend.engine or backend.name}"
    return _dashboard(
        f"llmaz-{backend.name}", title, _layout(_engine_panels(backend.key_metrics)), namespaced=True
    )


def operator_dashboard() -> dict[str, Any]:
    """The operator's dashboard: reconcile rate, errors and latency, watched objects, API writes,
    watch events, queue depth, leadership and process use."""
    duration = "sum by (le, kind) (rate(llmaz_reconcile_duration_seconds_bucket[5m]))"
    specs: list[tuple[str, list[tuple[str, str]], str]] = [
        (
            "Reconciles per second",
            [
                ("sum by (kind) (rate(llmaz_reconciles_total[5m]))", "{{kind}}"),
                ("sum by (kind) (rate(llmaz_reconcile_errors_total[5m]))", "{{kind}} errors"),
            ],
            "ops",
        ),
        ("Reconcile latency p95", [(f"histogram_quantile(0.95, {duration})", "{{kind}}")], "s"),
        ("Objects watched", [("sum by (kind) (llmaz_objects_managed)", "{{kind}}")], "short"),
        (
            "API writes per second",
            [("sum by (verb, resource) (rate(llmaz_api_writes_total[5m]))", "{{verb}} {{resource}}")],
            "ops",
        ),
        (
            "Watch events per second",
            [("sum by (resource) (rate(llmaz_watch_events_total[5m]))", "{{resource}}")],
            "ops",
        ),
        (
            "Queue depth and leadership",
            [("max(llmaz_queue_depth)", "queue depth"), ("max by (pod) (llmaz_leader)", "leader {{pod}}")],
            "short",
        ),
        ("Operator CPU", [('rate(process_cpu_seconds_total{job=~".*llmaz.*"}[5m])', "{{pod}}")], "short"),
        ("Operator memory", [('process_resident_memory_bytes{job=~".*llmaz.*"}', "{{pod}}")], "bytes"),
    ]
    return _dashboard("llmaz-operator", "llmaz / operator", _layout(specs), namespaced=False)


def dashboard_files(backends: Mapping[str, Backend]) -> dict[str, str]:
    """File name -> JSON text of every dashboard (operator plus each engine with key metrics)."""
    out = {"llmaz-operator.json": operator_dashboard()}
    for name in sorted(backends):
        board = engine_dashboard(backends[name])
        if board is not None:
            out[f"llmaz-{name}.json"] = board
    return {name: json.dumps(board, indent=2, sort_keys=True) + "\n" for name, board in out.items()}
