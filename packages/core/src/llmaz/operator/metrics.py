"""Prometheus metrics of the operator, in a registry of their own (no process globals); the families
are declared in :data:`llmaz.render.monitoring.OPERATOR_METRIC_FAMILIES`."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

from llmaz.render.monitoring import OPERATOR_METRIC_FAMILIES

FAMILIES = {m.name: m for m in OPERATOR_METRIC_FAMILIES}
"""Names, help and labels come from :data:`~llmaz.render.monitoring.OPERATOR_METRIC_FAMILIES`,
which the operator dashboard is checked against."""

__all__ = ["Metrics"]


class Metrics:
    """Reconciles, errors, durations, managed objects, queue depth, writes, leadership and watch events."""

    def __init__(self, kinds: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        self.reconciles = self._counter("llmaz_reconciles")
        self.errors = self._counter("llmaz_reconcile_errors")
        family = FAMILIES["llmaz_reconcile_duration_seconds"]
        self.duration = Histogram(
            family.name,
            family.help,
            family.labels,
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.managed = self._gauge("llmaz_objects_managed")
        self.queue_depth = self._gauge("llmaz_queue_depth")
        self.writes = self._counter("llmaz_api_writes")
        self.leader = self._gauge("llmaz_leader")
        self.watch_events = self._counter("llmaz_watch_events")
        self._events_of: dict[str, Any] = {}  # resource -> its series (one lookup per resource)
        for kind in kinds:  # every per-kind series from the start, at 0: a dashboard sees no gaps
            self.reconciles.labels(kind=kind)
            self.errors.labels(kind=kind)
            self.managed.labels(kind=kind).set(0)

    def _counter(self, name: str) -> Counter:
        family = FAMILIES[name]
        return Counter(family.name, family.help, family.labels, registry=self.registry)

    def _gauge(self, name: str) -> Gauge:
        family = FAMILIES[name]
        return Gauge(family.name, family.help, family.labels, registry=self.registry)

    def count_write(self, verb: str, resource: str) -> None:
        self.writes.labels(verb=verb, resource=resource).inc()

    def count_event(self, resource: str) -> None:
        """One watch event of ``resource`` handled (called for every event: the series is looked up
        once per resource)."""
        series = self._events_of.get(resource)
        if series is None:
            series = self._events_of[resource] = self.watch_events.labels(resource=resource)
        series.inc()

    @contextmanager
    def reconciling(self, kind: str) -> Iterator[None]:
        self.reconciles.labels(kind=kind).inc()
        start = time.perf_counter()
        try:
            yield
        except BaseException:
            self.errors.labels(kind=kind).inc()
            raise
        finally:
            self.duration.labels(kind=kind).observe(time.perf_counter() - start)
