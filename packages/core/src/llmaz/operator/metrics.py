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
        self._series: dict[tuple[int, tuple[str, ...]], Any] = {}
        """Each labelled series by metric and label values: ``labels()`` looked up per call was
        ~2 % of the operator's CPU while it created children (issue 15's profile)."""
        for kind in kinds:  # every per-kind series from the start, at 0: a dashboard sees no gaps
            self._of(self.reconciles, kind)
            self._of(self.errors, kind)
            self._of(self.managed, kind).set(0)

    def _counter(self, name: str) -> Counter:
        family = FAMILIES[name]
        return Counter(family.name, family.help, family.labels, registry=self.registry)

    def _gauge(self, name: str) -> Gauge:
        family = FAMILIES[name]
        return Gauge(family.name, family.help, family.labels, registry=self.registry)

    def _of(self, metric: Any, *values: str) -> Any:
        """``metric``'s series for the label ``values`` (in the family's label order), looked up
        once."""
        key = (id(metric), values)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = metric.labels(*values)
        return series

    def count_write(self, verb: str, resource: str) -> None:
        self._of(self.writes, verb, resource).inc()

    def count_event(self, resource: str) -> None:
        """One watch event of ``resource`` handled."""
        self._of(self.watch_events, resource).inc()

    @contextmanager
    def reconciling(self, kind: str) -> Iterator[None]:
        self._of(self.reconciles, kind).inc()
        start = time.perf_counter()
        try:
            yield
        except BaseException:
            self._of(self.errors, kind).inc()
            raise
        finally:
            self._of(self.duration, kind).observe(time.perf_counter() - start)
