"""Leader election on a ``coordination.k8s.io/v1`` Lease (kopf's peering only pauses operators; it
does not elect one).

The algorithm of client-go's leaderelection: a candidate takes the Lease when nobody holds it, or
when the holder has not renewed it for ``leaseDurationSeconds`` as measured by the candidate's own
monotonic clock since it last saw the record change (no clock synchronisation needed). The leader
renews every ``retryPeriodSeconds`` and gives up when it could not renew for
``renewDeadlineSeconds``. A standby only reads the Lease: it writes nothing while standing by.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from llmaz.operator.config import LeaderElection
from llmaz.operator.kube import Kube, KubeError

log = logging.getLogger("llmaz.operator.leader")

LEASE_API = "/apis/coordination.k8s.io/v1"


def _micro_time(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquire, renew and release one Lease for ``identity``."""

    def __init__(
        self,
        kube: Kube,
        settings: LeaderElection,
        namespace: str,
        identity: str,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.namespace = namespace
        self.identity = identity
        self._monotonic = monotonic
        self._wall = wall
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None
        self.is_leader = False
        self._stopping = False
        """Set by :meth:`release_async`: no attempt takes or renews the Lease any more."""
        # its own thread: a renewal never queues behind reconciles' API calls in the default pool
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lease")

    async def _attempt(self) -> bool:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self.try_acquire_or_renew)

    @property
    def path(self) -> str:
        return f"{LEASE_API}/namespaces/{self.namespace}/leases/{self.settings.lease_name}"

    def _spec(self, previous: dict[str, Any] | None) -> dict[str, Any]:
        now = _micro_time(self._wall())
        spec = dict(previous or {})
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if previous else 0)
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = self.settings.lease_duration_seconds
        spec["renewTime"] = now
        return spec

    def try_acquire_or_renew(self) -> bool:
        """One attempt (blocking). True when this process holds the Lease afterwards."""
        if self._stopping:
            return False
        try:
            lease = self.kube.request("GET", self.path)
        except KubeError as err:
            if err.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.settings.lease_name, "namespace": self.namespace},
                "spec": self._spec(None),
            }
            started = self._monotonic()
            try:
                self.kube.request(
                    "POST", f"{LEASE_API}/namespaces/{self.namespace}/leases", body=body, resource="leases"
                )
            except KubeError as create_err:
                if create_err.status == 409:
                    return False
                raise
            self._renewed_at = started
            return True
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        now = self._monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self.settings.lease_duration_seconds)
        if holder and holder != self.identity and now < self._observed_at + duration:
            return False
        lease["spec"] = self._spec(spec)
        started = self._monotonic()
        try:
            self.kube.request("PUT", self.path, body=lease, resource="leases")
        except KubeError as err:
            if err.status == 409:
                return False
            raise
        self._renewed_at = started
        return True

    def fence(self) -> str | None:
        """Why this process must not write now (``None``: it may). A leader that has not renewed the
        Lease for ``renewDeadlineSeconds`` may have been replaced (it was paused, or cut off from the
        API server) and is about to give up: its writes are refused, so two leaders never write.
        Measured from when the last successful renewal was *sent*, on the monotonic clock (which
        keeps counting while the process is stopped)."""
        if not self.is_leader or self._renewed_at is None:
            return "this process does not hold the Lease"
        age = self._monotonic() - self._renewed_at
        if age > self.settings.renew_deadline_seconds:
            return (
                f"the Lease was last renewed {age:.0f}s ago, more than renewDeadlineSeconds "
                f"({self.settings.renew_deadline_seconds}); another replica may lead"
            )
        return None

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until this process leads (True) or ``stop`` is set (False)."""
        while not stop.is_set():
            try:
                if await self._attempt():
                    self.is_leader = True
                    log.info("became the leader (Lease %s/%s)", self.namespace, self.settings.lease_name)
                    return True
            except (KubeError, OSError) as err:
                log.warning("leader election: %s", err)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.settings.retry_period_seconds)
        return False

    async def keep(self) -> None:
        """Renew until the Lease cannot be renewed for ``renewDeadlineSeconds``; then return."""
        last_ok = self._monotonic()
        while True:
            await asyncio.sleep(self.settings.retry_period_seconds)
            try:
                ok = await self._attempt()
            except (KubeError, OSError) as err:
                log.warning("renewing the Lease failed: %s", err)
                ok = False
            except Exception:  # a bug must not end the renewals unseen: it counts as a failed one
                log.exception("renewing the Lease failed")
                ok = False
            if ok:
                last_ok = self._monotonic()
            elif self._monotonic() - last_ok > self.settings.renew_deadline_seconds:
                self.is_leader = False
                log.error("lost the leadership (Lease %s/%s)", self.namespace, self.settings.lease_name)
                return

    def release(self) -> None:
        """Hand the Lease over at once on a clean shutdown (blocking, best effort). A conflict
        (the Lease changed since it was read) reads it again, once."""
        if not self.is_leader:
            return
        for attempt in (1, 2):
            try:
                lease = self.kube.request("GET", self.path)
                spec = lease.get("spec") or {}
                if spec.get("holderIdentity") == self.identity:
                    spec["holderIdentity"] = ""
                    spec["leaseDurationSeconds"] = 1
                    lease["spec"] = spec
                    self.kube.request("PUT", self.path, body=lease, resource="leases")
            except KubeError as err:
                if err.status == 409 and attempt == 1:
                    continue
                log.warning("releasing the Lease failed: %s", err)
            except OSError as err:
                log.warning("releasing the Lease failed: %s", err)
            break
        self.is_leader = False

    async def release_async(self) -> None:
        """:meth:`release` on the Lease's own thread, after any attempt still in flight there (a
        renewal started before shutdown would otherwise race the release: its PUT could make the
        release's fail, or take the Lease back after it), and with no attempt allowed after it."""
        self._stopping = True
        await asyncio.get_running_loop().run_in_executor(self._thread, self.release)
