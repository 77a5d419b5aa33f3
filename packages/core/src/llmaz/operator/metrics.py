"""Prometheus metrics of the operator, in a registry of their own (no process globals)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]


class Metrics:
    """Reconciles, errors, durations, managed objects, queue depth, writes and leadership."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.reconciles = Counter(
            "llmaz_reconciles", "Reconciles run, per kind.", ["kind"], registry=self.registry
        )
        self.errors = Counter(
            "llmaz_reconcile_errors",
            "Reconciles that failed (and were retried), per kind.",
            ["kind"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "llmaz_reconcile_duration_seconds",
            "Time of one reconcile, per kind.",
            ["kind"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.managed = Gauge(
            "llmaz_objects_managed",
            "Objects the operator watches, per kind.",
            ["kind"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "llmaz_queue_depth", "Reconciles waiting for or holding an object's lock.", registry=self.registry
        )
        self.writes = Counter(
            "llmaz_api_writes",
            "Write requests sent to the API server, per verb and resource.",
            ["verb", "resource"],
            registry=self.registry,
        )
        self.leader = Gauge("llmaz_leader", "1 while this process is the leader.", registry=self.registry)

    def count_write(self, verb: str, resource: str) -> None:
        self.writes.labels(verb=verb, resource=resource).inc()

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
