"""Lease leader election against an in-memory stand-in for the API server's Lease endpoint (the
real one is exercised by e2e/test_operator.py); clocks are injected."""

from __future__ import annotations

import asyncio
import copy
import threading
from typing import Any

from llmaz.operator.config import LeaderElection
from llmaz.operator.kube import KubeError
from llmaz.operator.leader import LeaderElector


class LeaseStandIn:
    """GET/POST/PUT of one Lease with resourceVersion conflicts; records every write."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.writes: list[str] = []

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        if method == "GET":
            if self.lease is None:
                raise KubeError(method, path, 404, "not found")
            return copy.deepcopy(self.lease)
        self.writes.append(method)
        if method == "POST":
            if self.lease is not None:
                raise KubeError(method, path, 409, "exists")
            self.lease = {**copy.deepcopy(body), "metadata": {**body["metadata"], "resourceVersion": "1"}}
            return self.lease
        assert self.lease is not None
        if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise KubeError(method, path, 409, "conflict")
        rv = str(int(self.lease["metadata"]["resourceVersion"]) + 1)
        self.lease = {**copy.deepcopy(body), "metadata": {**body["metadata"], "resourceVersion": rv}}
        return self.lease


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


SETTINGS = LeaderElection(enabled=True, lease_duration_seconds=15)


def elector(server: LeaseStandIn, clock: Clock, who: str) -> LeaderElector:
    return LeaderElector(server, SETTINGS, "llmaz-system", who, monotonic=clock)  # type: ignore[arg-type]


def test_first_candidate_leads_and_a_standby_only_reads_until_the_lease_expires() -> None:
    server, clock = LeaseStandIn(), Clock()
    a, b = elector(server, clock, "a"), elector(server, clock, "b")
    assert a.try_acquire_or_renew()
    assert server.lease is not None
    assert server.lease["spec"]["holderIdentity"] == "a"
    writes = len(server.writes)
    for t in (1.0, 5.0, 14.0):
        clock.now = t
        assert not b.try_acquire_or_renew()
    assert len(server.writes) == writes, "a standby wrote"
    # the leader stops renewing (killed): after the lease duration on b's own clock, b takes over
    clock.now = 16.1
    assert b.try_acquire_or_renew()
    assert server.lease["spec"]["holderIdentity"] == "b"
    assert server.lease["spec"]["leaseTransitions"] == 1


def test_renewals_keep_a_standby_out_and_release_hands_over_at_once() -> None:
    server, clock = LeaseStandIn(), Clock()
    a, b = elector(server, clock, "a"), elector(server, clock, "b")
    assert a.try_acquire_or_renew()
    a.is_leader = True
    for t in range(1, 40, 2):
        clock.now = float(t)
        assert a.try_acquire_or_renew()  # renews; the record changes every time
        assert not b.try_acquire_or_renew()
    a.release()
    assert server.lease is not None
    assert server.lease["spec"]["holderIdentity"] == ""
    assert b.try_acquire_or_renew()


def test_an_unreachable_api_server_is_a_transient_oserror_not_a_transport_exception() -> None:
    """A refused connection (the API server restarting) surfaces as ``KubeUnreachable``, an
    ``OSError``, which the Lease loops and handlers treat as transient. urllib3's ``MaxRetryError``
    escaped them before and crashed the operator on an apiserver restart."""
    import socket

    import pytest

    from llmaz.operator.connection import Connection
    from llmaz.operator.kube import Kube, KubeUnreachable

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kube = Kube(Connection(server=f"http://127.0.0.1:{port}"), retries=0)
    with pytest.raises(KubeUnreachable, match=r"GET /apis/coordination.k8s.io/v1/leases: ") as err:
        kube.request("GET", "/apis/coordination.k8s.io/v1/leases")
    assert isinstance(err.value, OSError)
    # one short line: the innermost cause, not urllib3's pool, host, port and URL around it
    assert str(err.value).startswith("GET /apis/coordination.k8s.io/v1/leases: NewConnectionError: ")
    assert "HTTPConnectionPool" not in str(err.value)
    assert len(str(err.value)) <= 170


def test_a_leader_that_missed_its_renew_deadline_may_not_write() -> None:
    """Leader split (issue 16): a leader paused (SIGSTOP) past renewDeadlineSeconds may have been
    replaced; when it resumes, its writes are refused before anything is sent."""
    server, clock = LeaseStandIn(), Clock()
    a = elector(server, clock, "a")
    assert a.fence() is not None  # not leading yet
    assert a.try_acquire_or_renew()
    a.is_leader = True
    assert a.fence() is None
    clock.now = SETTINGS.renew_deadline_seconds - 0.5
    assert a.fence() is None
    clock.now = SETTINGS.renew_deadline_seconds + 20.0  # paused, then resumed
    reason = a.fence()
    assert reason is not None
    assert "renewDeadlineSeconds" in reason
    assert a.try_acquire_or_renew()  # renewed again (nobody took over): writes allowed again
    assert a.fence() is None


def test_the_fence_refuses_writes_but_not_reads_or_lease_writes() -> None:
    import socket

    import pytest

    from llmaz.operator.connection import Connection
    from llmaz.operator.kube import Kube, KubeUnreachable, WriteFenced

    with socket.socket() as sock:  # nobody listens: a request that is sent fails as unreachable
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kube = Kube(Connection(server=f"http://127.0.0.1:{port}"), retries=0)
    kube.fence = lambda: "the Lease was last renewed 30s ago"
    with pytest.raises(WriteFenced, match="write refused: the Lease was last renewed 30s ago"):
        kube.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n"}})
    with pytest.raises(KubeUnreachable):  # sent (and failed): reads are not fenced
        kube.request("GET", "/api/v1/namespaces/n/services/s")
    with pytest.raises(KubeUnreachable):  # sent: Lease writes keep or hand over leadership
        kube.request("PUT", "/apis/coordination.k8s.io/v1/namespaces/n/leases/l", body={}, resource="leases")


def test_a_connection_broken_mid_answer_is_unreachable_too() -> None:
    """A stand-in server that accepts, reads the request, promises a body and closes the connection
    halfway (what a reset during an answer looks like): ``KubeUnreachable``, not urllib3's
    ``ProtocolError``, which escaped the handlers as a traceback in the resets scenario."""
    import socket
    import threading

    import pytest

    from llmaz.operator.connection import Connection
    from llmaz.operator.kube import Kube, KubeUnreachable

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def answer_half() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")

    thread = threading.Thread(target=answer_half, daemon=True)
    thread.start()
    kube = Kube(Connection(server=f"http://127.0.0.1:{port}"), retries=0)
    try:
        with pytest.raises(KubeUnreachable, match="PATCH /api/v1/namespaces/n/services/s"):
            kube.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n"}})
    finally:
        thread.join(timeout=10)
        server.close()


class SlowReadLease(LeaseStandIn):
    """The stand-in whose next GET waits until ``go`` is set (a renewal stuck on a slow API server)."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = threading.Event()
        self.go = threading.Event()
        self.held = threading.Event()

    def request(self, method: str, path: str, *, body: Any = None, **kw: Any) -> Any:
        if method == "GET" and self.hold.is_set():
            self.hold.clear()
            self.held.set()
            self.go.wait(10)
        return super().request(method, path, body=body, **kw)


def test_a_release_at_shutdown_waits_for_a_renewal_in_flight_and_nothing_takes_the_lease_back() -> None:
    """SIGTERM while a renewal waits on a slow API server: the release runs after it (one thread
    for the Lease), so its write neither meets a conflict nor is undone by the late renewal, and a
    standby can take the Lease at once."""
    server, clock = SlowReadLease(), Clock()
    a, b = elector(server, clock, "a"), elector(server, clock, "b")
    assert a.try_acquire_or_renew()
    a.is_leader = True

    async def scenario() -> None:
        server.hold.set()
        renewal = asyncio.ensure_future(a._attempt())
        await asyncio.to_thread(server.held.wait, 10)
        releasing = asyncio.ensure_future(a.release_async())
        await asyncio.sleep(0.05)
        server.go.set()
        assert await renewal  # the renewal in flight ends first
        await releasing
        assert not await a._attempt()  # and no attempt takes the Lease back

    asyncio.run(scenario())
    assert server.lease is not None
    assert server.lease["spec"]["holderIdentity"] == ""
    assert b.try_acquire_or_renew()


class _HangUp:
    """A stand-in API server that reads each request and closes the connection without an answer
    (a reset load balancer, a restarting API server); counts the requests it read."""

    def __init__(self) -> None:
        import socket

        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.requests = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            with conn:
                if conn.recv(65536):
                    self.requests += 1

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=10)
        self.server.close()


def test_a_write_sent_again_after_a_hang_up_goes_through_the_fence_again() -> None:
    """A write whose connection broke is sent again by the transport; by then the leader may be
    past its renew deadline. The event-loop client checks the fence before the second attempt,
    and the blocking client leaves the repeat to its caller (whose next write is checked)."""
    import asyncio

    import pytest

    from llmaz.operator.connection import Connection
    from llmaz.operator.kube import Kube, KubeUnreachable, WriteFenced

    server = _HangUp()
    try:
        verdicts = iter([None, "the Lease was last renewed 12s ago"])
        kube = Kube(Connection(server=f"http://127.0.0.1:{server.port}"))
        kube.fence = lambda: next(verdicts)

        async def write() -> None:
            try:
                await kube.arequest("PATCH", "/api/v1/namespaces/n/services/s", body={}, resource="services")
            finally:
                await kube.aclose()

        with pytest.raises(WriteFenced, match="renewed 12s ago"):
            asyncio.run(write())
        assert server.requests == 1

        blocking = Kube(Connection(server=f"http://127.0.0.1:{server.port}"))  # urllib3's 3 retries
        blocking.fence = lambda: None
        with pytest.raises(KubeUnreachable):  # PUT: a method urllib3 repeats after a hang-up
            blocking.request("PUT", "/api/v1/namespaces/n/services/s", body={}, resource="services")
        assert server.requests == 2
        with pytest.raises(KubeUnreachable):  # unfenced (a Lease write): the transport's retries stay
            blocking.request(
                "PUT", "/apis/coordination.k8s.io/v1/namespaces/n/leases/l", body={}, resource="leases"
            )
        assert server.requests > 3
    finally:
        server.close()
