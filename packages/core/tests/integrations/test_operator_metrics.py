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
    metrics.count_event("pods")
    exported = exported_series(metrics)
    missing = set(OPERATOR_METRICS) - exported
    assert not missing, f"declared in OPERATOR_METRICS but not exported: {sorted(missing)}"
    # ``*_created`` are prometheus_client's creation timestamps, not series a dashboard reads
    ours = {s for s in exported if s.startswith("llmaz_") and not s.endswith("_created")}
    undeclared = ours - set(OPERATOR_METRICS)
    assert not undeclared, f"exported but not declared in OPERATOR_METRICS: {sorted(undeclared)}"


def test_per_kind_series_exist_at_zero_before_the_first_reconcile() -> None:
    """A dashboard's error rate and managed count read 0, not "no data", on a fresh operator."""
    text = generate_latest(Metrics(kinds=("Playground", "Service")).registry).decode()
    samples = {
        (s.name, s.labels.get("kind")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    for kind in ("Playground", "Service"):
        assert samples[("llmaz_reconcile_errors_total", kind)] == 0
        assert samples[("llmaz_reconciles_total", kind)] == 0
        assert samples[("llmaz_objects_managed", kind)] == 0
    assert samples[("llmaz_queue_depth", None)] == 0


def test_each_label_set_counts_on_its_own_series() -> None:
    """Series are looked up once per label set and kept: every call still counts on its own series."""
    metrics = Metrics()
    for _ in range(3):
        with metrics.reconciling("Playground"):
            pass
    with metrics.reconciling("Service"):
        pass
    try:
        with metrics.reconciling("Service"):
            raise RuntimeError("a failed reconcile")
    except RuntimeError:
        pass
    metrics.count_write("POST", "leaderworkersets")
    metrics.count_write("POST", "leaderworkersets")
    metrics.count_write("PATCH", "leaderworkersets")
    metrics.count_event("pods")
    text = generate_latest(metrics.registry).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    assert samples[("llmaz_reconciles_total", (("kind", "Playground"),))] == 3
    assert samples[("llmaz_reconciles_total", (("kind", "Service"),))] == 2
    assert samples[("llmaz_reconcile_errors_total", (("kind", "Service"),))] == 1
    assert samples[("llmaz_reconcile_duration_seconds_count", (("kind", "Playground"),))] == 3
    writes = "llmaz_api_writes_total"
    assert samples[(writes, (("resource", "leaderworkersets"), ("verb", "POST")))] == 2
    assert samples[(writes, (("resource", "leaderworkersets"), ("verb", "PATCH")))] == 1
    assert samples[("llmaz_watch_events_total", (("resource", "pods"),))] == 1
