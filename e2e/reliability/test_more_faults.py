"""Faults between the operator and the control plane, on the real control plane (tier B).

Each scenario injects a real fault: latency, resets and stalled connections through the loopback
fault proxy (:mod:`fault_proxy`, the stand-in for a flaky network path or load balancer); etcd
frozen with SIGSTOP; API Priority and Fairness rejecting the operator's requests with 429; two
operator replicas with the leader frozen and resumed (leader split); the operator's admission
webhooks down and hung. Afterwards RELIABILITY.md's invariants are checked with
:mod:`reliability_helpers`. Measured figures are printed as ``RELIABILITY <scenario>: ...`` lines.
All are in the full set (``nox -s reliability``); docs/development/reliability.md has timings.
"""

from __future__ import annotations

import signal
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
from fault_proxy import FaultProxy, proxied_kubeconfig
from operator_helpers import SA_NAMESPACE, backend_runtime, bind_operator_account, running_operator
from reliability_helpers import (
    ACCOUNT,
    OUTLASTING_LEASE,
    Figures,
    audit_entries,
    audit_writes,
    check_bounded_log,
    check_healthy,
    check_rbac_enough,
    check_unique_and_owned,
    converged_with_arg,
    edited,
    elapsed,
    get,
    leading_operator,
    log_lines,
    model,
    playground,
    rss_mib,
    wait_converged,
    wait_until,
)

from llmaz_devkit.cluster import ControlPlane
from llmaz_devkit.webhooks import by_url_configurations, issue_tls

pytestmark = pytest.mark.slow

T_CONV = 180.0
"""Convergence bound after a fault ends, on 2 shared CPUs."""


# ----------------------------------------------------------------------------------- network


def test_latency_and_connection_resets_during_churn_converge(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    """Plan §2.2 row 6a: every chunk in both directions delayed 300 ms, and every open connection
    of the operator aborted every 3 s while users create and edit Playgrounds."""
    cp, fig = control_plane, Figures("latency-and-resets")
    names = {f"n{i}" for i in range(4)}
    cp.apply([model("qwen-rel-net")])
    with FaultProxy(cp.ports["apiserver"]) as proxy:
        kubeconfig = proxied_kubeconfig(
            bind_operator_account(cp, ACCOUNT), proxy.port, tmp_path / "proxied.kubeconfig"
        )
        with leading_operator(cp, tmp_path, kubeconfig=kubeconfig, lease=OUTLASTING_LEASE) as op:
            pid, before = op.proc.pid, log_lines(op.log)
            began = time.monotonic()
            proxy.latency = 0.3
            cp.apply([playground(n, namespace, "qwen-rel-net") for n in sorted(names)])
            for round_ in range(6):
                time.sleep(3)
                proxy.reset_all()
                if round_ == 2:
                    cp.apply([edited("n0", namespace, "qwen-rel-net", "--during-resets")])
            proxy.latency = 0.0
            fig.add("connections reset", proxy.resets)
            fig.add("connections accepted", proxy.accepted)
            wait_until(
                lambda: converged_with_arg(cp, namespace, names, "n0", "--during-resets"),
                "convergence after latency and resets",
                T_CONV,
                op.log,
            )
            fig.add("time to converge from the first fault", elapsed(began), " s")
            assert op.proc.pid == pid
            check_unique_and_owned(cp, namespace, names)
            check_healthy(op)
            check_bounded_log(fig, op.log, before, began, per_fault=proxy.resets)
            fig.add("RSS", rss_mib(op), " MiB")
    fig.report()


def test_stalled_connections_are_noticed_and_the_operator_watches_again(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    """Plan §2.2 row 6b: every open connection of the operator (its watches among them) silently
    stops delivering, for good; new connections pass. Changes made afterwards reach the operator
    only if it notices the silent watches (the inactivity timeout of kopf's and of its own, 70 s) and
    watches again."""
    cp, fig = control_plane, Figures("stalled-watch")
    cp.apply([model("qwen-rel-stall"), playground("a", namespace, "qwen-rel-stall")])
    # a Lease renewal on a stalled pooled connection waits for the 30 s request timeout before a
    # fresh connection is tried: the renew deadline must outlast a few of those
    lease = {"leaseDurationSeconds": 130, "renewDeadlineSeconds": 120, "retryPeriodSeconds": 2}
    with FaultProxy(cp.ports["apiserver"]) as proxy:
        kubeconfig = proxied_kubeconfig(
            bind_operator_account(cp, ACCOUNT), proxy.port, tmp_path / "proxied.kubeconfig"
        )
        with leading_operator(cp, tmp_path, kubeconfig=kubeconfig, lease=lease) as op:
            wait_converged(cp, namespace, {"a"}, op, T_CONV)
            pid = op.proc.pid
            stalled = proxy.stall_existing()
            accepted = proxy.accepted
            began = time.monotonic()
            cp.apply([edited("a", namespace, "qwen-rel-stall", "--after-stall")])
            cp.apply([playground("b", namespace, "qwen-rel-stall")])
            wait_until(
                lambda: converged_with_arg(cp, namespace, {"a", "b"}, "a", "--after-stall"),
                "convergence after the stall",
                70 + T_CONV,
                op.log,
            )
            fig.add("connections stalled", stalled)
            fig.add("new connections after the stall", proxy.accepted - accepted)
            fig.add("time to converge after the stall", elapsed(began), " s")
            assert proxy.accepted > accepted, "converged without a new connection: nothing was stalled"
            assert op.proc.pid == pid
            check_unique_and_owned(cp, namespace, {"a", "b"})
            check_healthy(op)
            fig.add("RSS", rss_mib(op), " MiB")
    fig.report()


# ----------------------------------------------------------------------------------- control plane


def test_etcd_paused_then_resumed_operator_stays_up_and_converges(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    """Plan §2.2 row 5c: etcd frozen (SIGSTOP) for 20 s: the API server answers with errors and
    timeouts. A user edit just before the freeze and a new Playground right after it converge with
    the same operator process, which logs a bounded number of lines."""
    cp, fig = control_plane, Figures("etcd-paused")
    cp.apply([model("qwen-rel-etcd"), playground("a", namespace, "qwen-rel-etcd")])
    with leading_operator(cp, tmp_path, lease=OUTLASTING_LEASE) as op:
        wait_converged(cp, namespace, {"a"}, op, T_CONV)
        pid, before = op.proc.pid, log_lines(op.log)
        cp.apply([edited("a", namespace, "qwen-rel-etcd", "--before-freeze")])
        began = time.monotonic()
        cp.kill_component("etcd", signal.SIGSTOP)
        try:
            time.sleep(20)
        finally:
            cp.kill_component("etcd", signal.SIGCONT)
        wait_until(
            lambda: cp.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
            "the API server ready again",
            120,
        )
        fig.add("API server ready after SIGCONT", elapsed(began) - 20, " s")
        cp.apply([playground("b", namespace, "qwen-rel-etcd")])
        wait_until(
            lambda: converged_with_arg(cp, namespace, {"a", "b"}, "a", "--before-freeze"),
            "convergence after etcd resumed",
            T_CONV,
            op.log,
        )
        fig.add("time to converge from the freeze", elapsed(began), " s")
        assert op.proc.pid == pid
        check_unique_and_owned(cp, namespace, {"a", "b"})
        check_healthy(op)
        check_bounded_log(fig, op.log, before, began)
        fig.add("RSS", rss_mib(op), " MiB")
    fig.report()


TINY = "llmaz-rel-tiny-quota"


def tiny_quota(account: str) -> list[dict[str, Any]]:
    """API Priority and Fairness: the operator's ServiceAccount gets its own priority level with the
    smallest share (about 3 concurrent requests here) and no queue: the rest is rejected with 429."""
    return [
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": TINY},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 1,
                    "lendablePercent": 0,
                    # no borrowing either: unset, the level may borrow every seat other levels
                    # lend, and after a quiet spell it did (no 429 when run after the etcd pause)
                    "borrowingLimitPercent": 0,
                    "limitResponse": {"type": "Reject"},
                },
            },
        },
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": TINY},
            "spec": {
                "priorityLevelConfiguration": {"name": TINY},
                "matchingPrecedence": 500,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [
                    {
                        "subjects": [
                            {
                                "kind": "ServiceAccount",
                                "serviceAccount": {"name": account, "namespace": SA_NAMESPACE},
                            }
                        ],
                        "resourceRules": [
                            {
                                "verbs": ["*"],
                                "apiGroups": ["*"],
                                "resources": ["*"],
                                "clusterScope": True,
                                "namespaces": ["*"],
                            }
                        ],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    }
                ],
            },
        },
    ]


def throttled(cp: ControlPlane, user: str, since: float) -> int:
    """Requests of ``user`` answered 429 after ``since`` (epoch seconds), from the audit log."""
    return sum((e.get("responseStatus") or {}).get("code") == 429 for e in audit_entries(cp, user, since))


def test_api_priority_and_fairness_429s_slow_the_operator_down_but_lose_nothing(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    """Plan §2.2 row 8: a FlowSchema puts the operator's ServiceAccount on a priority level of about
    3 seats that rejects the rest with 429; the operator starts (lists, watches, Lease) and
    reconciles 20 Playgrounds created at once. Everything converges, nothing is duplicated, the
    process stays up, and the audit log proves the 429s happened."""
    cp, fig = control_plane, Figures("apf-429")
    names = {f"t{i:02d}" for i in range(20)}
    cp.apply([model("qwen-rel-apf")])
    since = time.time()
    cp.apply(tiny_quota(ACCOUNT))
    try:
        began = time.monotonic()
        with leading_operator(cp, tmp_path, lease=OUTLASTING_LEASE) as op:
            cp.apply([playground(n, namespace, "qwen-rel-apf") for n in sorted(names)])
            wait_converged(cp, namespace, names, op, T_CONV)
            fig.add("time from start to converged", elapsed(began), " s")
            rejected = throttled(cp, op.user, since)
            fig.add("requests answered 429", rejected)
            assert rejected > 0, "no 429 was seen: the quota did not bite and the scenario proves nothing"
            check_unique_and_owned(cp, namespace, names)
            check_healthy(op)
            fig.add("operator writes", len(audit_writes(cp, op.user, since)))
            fig.add("RSS", rss_mib(op), " MiB")
    finally:
        cp.kubectl("delete", "flowschema", TINY, "--ignore-not-found", check=False)
        cp.kubectl("delete", "prioritylevelconfiguration", TINY, "--ignore-not-found", check=False)
    fig.report()


# ----------------------------------------------------------------------------------- replicas


def test_leader_split_the_paused_leader_resumes_writes_nothing_and_exits(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    """Plan §2.2 row 16, the split: replica A leads, B stands by (two ServiceAccounts, so the audit
    log tells them apart). A is frozen (SIGSTOP); B takes over the Lease and converges a user's
    edit; then A resumes with its stale view. A must write nothing but Lease requests from then on
    and exit with status 1 (its pod restarts as a standby); B stays the only writer."""
    cp, fig = control_plane, Figures("leader-split")
    cp.apply([model("qwen-rel-split"), playground("s", namespace, "qwen-rel-split")])
    with running_operator(cp, tmp_path / "a", "llmaz-operator-rel-a") as a:
        wait_until(a.ready, "replica A to lead", 150, a.log)
        wait_converged(cp, namespace, {"s"}, a, T_CONV)
        with running_operator(cp, tmp_path / "b", "llmaz-operator-rel-b") as b:
            wait_until(
                lambda: b.http(b.health_port, "/readyz")[0] == 200, "replica B standing by", 150, b.log
            )
            a.proc.send_signal(signal.SIGSTOP)
            paused = time.monotonic()
            try:
                wait_until(b.ready, "replica B to take over", 60, b.log)
                fig.add("B leads after A froze", elapsed(paused), " s")
                cp.apply(
                    [
                        edited("s", namespace, "qwen-rel-split", "--by-b"),
                        playground("t", namespace, "qwen-rel-split"),
                    ]
                )
                wait_until(
                    lambda: converged_with_arg(cp, namespace, {"s", "t"}, "s", "--by-b"),
                    "B converges the edit",
                    T_CONV,
                    b.log,
                )
                resumed = time.time()
            finally:
                a.proc.send_signal(signal.SIGCONT)
            code = a.proc.wait(timeout=90)
            fig.add("A exited after SIGCONT", time.time() - resumed, " s")
            assert code == 1, a.log.read_text()[-3000:]
            assert "lost the leadership" in a.log.read_text()
            # A's writes after it resumed: Lease requests only (its renewal attempt), nothing else
            stray = [w for w in audit_writes(cp, a.user, resumed - 1) if " leases " not in w]
            assert stray == [], f"the replaced leader wrote: {stray}"
            refused = a.log.read_text().count("write refused")
            fig.add("writes A refused itself", refused)
            check_unique_and_owned(cp, namespace, {"s", "t"})
            check_healthy(b)
            check_rbac_enough(cp, a.user)
            check_rbac_enough(cp, b.user)
            b.stop(signal.SIGTERM, timeout=40)  # hands the Lease over for the next scenario
    fig.report()


# ----------------------------------------------------------------------------------- webhooks

WEBHOOK_CONFIG = "llmaz-rel-webhooks"


def drop_webhooks(cp: ControlPlane) -> None:
    """Unregister the scenario's webhooks: a dangling one would refuse every later scenario's creates."""
    cp.kubectl(
        "delete",
        f"mutatingwebhookconfiguration/{WEBHOOK_CONFIG}",
        f"validatingwebhookconfiguration/{WEBHOOK_CONFIG}",
        "--ignore-not-found",
        check=False,
    )


def admitted(cp: ControlPlane) -> tuple[int, str, float]:
    """A BackendRuntime create, server-side dry run (so the webhooks see it): kubectl's exit code,
    its output and how long the API server took."""
    start = time.monotonic()
    res = cp.kubectl("create", "--dry-run=server", "-f", "-", input=backend_runtime("rel-hook"), check=False)
    return res.returncode, res.stderr + res.stdout, time.monotonic() - start


def test_webhook_hung_or_down_fails_fast_naming_the_webhook_then_recovers(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    """Plan §2.2 row 17: the operator's admission webhooks registered (failurePolicy Fail, timeout
    5 s, as the chart does). With the operator frozen (hung webhook) a BackendRuntime create is
    refused within the webhook timeout, and the message names the webhook; with the operator killed
    (webhook down) it is refused at once; Playgrounds, which no webhook intercepts, are created all
    along. With the webhook back, the same create is admitted."""
    cp, fig = control_plane, Figures("webhook-down-hung")

    def dry_run_create() -> tuple[int, str, float]:
        return admitted(cp)

    try:
        # the Lease outlasts the freeze: this scenario is about the webhook, not the leader split
        with leading_operator(cp, tmp_path / "first", lease=OUTLASTING_LEASE) as op:
            cp.apply(by_url_configurations(f"https://127.0.0.1:{op.webhook_port}", op.ca, WEBHOOK_CONFIG))
            wait_until(lambda: dry_run_create()[0] == 0, "the webhook to admit", 60, op.log)
            op.proc.send_signal(signal.SIGSTOP)
            try:
                code, message, took = dry_run_create()
                cp.apply([playground("unaffected", namespace, "qwen-rel-hook")])
            finally:
                op.proc.send_signal(signal.SIGCONT)
            fig.add("hung: refused after", took, " s")
            assert code != 0, message
            assert "backendruntime-args.inference.llmaz.io" in message, message
            assert took < 5 + 25, f"the hung webhook held the request {took:.0f}s"
            wait_until(lambda: dry_run_create()[0] == 0, "the webhook to admit after SIGCONT", 60, op.log)
            op.stop(signal.SIGKILL)
            code, message, took = dry_run_create()
            fig.add("down: refused after", took, " s")
            assert code != 0, message
            assert "backendruntime-args.inference.llmaz.io" in message, message
            assert "connection refused" in message, message
            assert get(cp, "pl/unaffected", namespace) is not None
        with leading_operator(cp, tmp_path / "second") as op:
            # a new process serves on another port: re-register, as a chart upgrade would
            cp.apply(by_url_configurations(f"https://127.0.0.1:{op.webhook_port}", op.ca, WEBHOOK_CONFIG))
            wait_until(lambda: dry_run_create()[0] == 0, "the webhook to admit again", 60, op.log)
            check_healthy(op)
    finally:
        drop_webhooks(cp)
    fig.report()


def handshake(port: int, ca: bytes) -> str:
    """A TLS handshake with 127.0.0.1:``port`` trusting only ``ca``: "" when it verifies, else why not."""
    context = ssl.create_default_context(cadata=ca.decode())
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1"),
        ):
            return ""
    except ssl.SSLError as err:
        return str(err)


def test_webhook_certificate_rotated_admission_keeps_working_without_a_restart(
    control_plane: ControlPlane, crds: None, tmp_path: Path
) -> None:
    """Plan §2.2 row 17, rotation: the operator's serving certificate is replaced by one from a new
    CA, the way cert-manager rotates a Secret that reaches the pod as new files. The caBundle first
    trusts both CAs, the files are swapped, the old CA is dropped: every create sent meanwhile is
    admitted, by the same process; then with only the new CA trusted admission still works, and a
    handshake trusting only the old CA fails (the server really serves the new certificate)."""
    cp, fig = control_plane, Figures("webhook-cert-rotation")
    try:
        with leading_operator(cp, tmp_path) as op:
            base = f"https://127.0.0.1:{op.webhook_port}"
            cp.apply(by_url_configurations(base, op.ca, WEBHOOK_CONFIG))
            wait_until(lambda: admitted(cp)[0] == 0, "the webhook to admit", 60, op.log)
            pid = op.proc.pid
            new_ca = issue_tls(tmp_path / "rotated")  # a new CA and its serving certificate, aside
            cp.apply(by_url_configurations(base, op.ca + new_ca, WEBHOOK_CONFIG))
            began = time.monotonic()
            for name in ("tls.key", "tls.crt"):  # swapped in place, as a projected Secret is
                (tmp_path / "rotated" / name).replace(op.cert_dir / name)
            refused: list[str] = []
            tries = 0
            while "webhook certificate reloaded" not in op.log.read_text():
                code, message, _ = admitted(cp)
                tries += 1
                if code:
                    refused.append(message)
                assert elapsed(began) < 60, "the certificate was not reloaded within 60 s"
                time.sleep(0.5)
            fig.add("reloaded after", elapsed(began), " s")
            fig.add("creates during the rotation", tries)
            assert refused == [], refused
            cp.apply(by_url_configurations(base, new_ca, WEBHOOK_CONFIG))  # the old CA dropped
            wait_until(lambda: admitted(cp)[0] == 0, "admission trusting only the new CA", 30, op.log)
            code, message, _ = admitted(cp)
            assert code == 0, message
            # the served certificate itself: a handshake trusting only the old CA fails now (the API
            # server cannot show this: it reuses kept-alive connections of an identical TLS config)
            assert handshake(op.webhook_port, new_ca) == ""
            assert "CERTIFICATE_VERIFY_FAILED" in handshake(op.webhook_port, op.ca)
            assert op.proc.pid == pid
            check_healthy(op)
    finally:
        drop_webhooks(cp)
    fig.report()
