"""The operator's ``/metrics`` exports exactly the series the operator dashboard may query
(:data:`~llmaz.render.monitoring.OPERATOR_METRICS`), so a renamed metric breaks this test, not a
dashboard in production."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from llmaz.operator.metrics import Metrics
from llmaz.render.monitoring import OPERATOR_METRICS


def exported_series(metrics: Metrics) -> set[str]:
    text = generate_latest(metrics.registry).decode()
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_every_declared_operator_series_is_exported() -> None:
    metrics = Metrics()
    # labelled series appear once a label set was used, as after the first reconcile and write
    with metrics.reconciling("Playground"):
        pass
    metrics.errors.labels(kind="Playground").inc(0)
    metrics.managed.labels(kind="Playground").set(1)
    metrics.count_write("PATCH", "services")
    exported = exported_series(metrics)
    missing = set(OPERATOR_METRICS) - exported
    assert not missing, f"declared in OPERATOR_METRICS but not exported: {sorted(missing)}"
    # ``*_created`` are prometheus_client's creation timestamps, not series a dashboard reads
    ours = {s for s in exported if s.startswith("llmaz_") and not s.endswith("_created")}
    undeclared = ours - set(OPERATOR_METRICS)
    assert not undeclared, f"exported but not declared in OPERATOR_METRICS: {sorted(undeclared)}"
