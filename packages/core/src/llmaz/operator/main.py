"""``llmaz operator run``: wire configuration, plugins, API client, metrics, health, leader election
and kopf together, and shut down cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import gc
import logging
import os
import signal
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import kopf
from prometheus_client import start_http_server

from llmaz.operator.config import OperatorConfig
from llmaz.operator.connection import ConnectionConfigError
from llmaz.operator.engine import RECONCILERS
from llmaz.operator.handlers import build_registry, watched_kinds
from llmaz.operator.handlers._common import MEMO_KEY
from llmaz.operator.health import HealthServer
from llmaz.operator.kube import Kube
from llmaz.operator.leader import LeaderElector
from llmaz.operator.memory import trim_after_bursts
from llmaz.operator.metrics import Metrics
from llmaz.operator.runtime import Indexes, Runtime
from llmaz.operator.watch import Watches
from llmaz.operator.webhook_server import WebhookError, WebhookServer
from llmaz.plugins.manager import PluginManager

log = logging.getLogger("llmaz.operator")

SHUTDOWN_SECONDS = 20.0
"""How long kopf may take to stop after SIGTERM (within a pod's default 30 s grace period)."""


def identity() -> str:
    """``<hostname>_<random>``: unique per process, readable in the Lease."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def run(config: OperatorConfig, kubeconfig: Path | None = None) -> int:
    """Run until SIGTERM/SIGINT (0) or until the leadership is lost (1)."""
    return asyncio.run(_main(config, kubeconfig))


def load_plugins() -> PluginManager:
    """The installed plugins' backends and autoscalers, without the offline CEL rules (the API
    server checks the plugins' BackendRuntimes when the operator applies them, and not importing
    the CEL interpreter, cel-python and its grammar, keeps ~11 MB out of the operator's memory)
    and without their ``llmaz`` commands (what those import is memory too: 1.7 MB with ``llmaz
    demo``'s, issue 15)."""
    return PluginManager.from_environment(check_rules=False, commands=False)


YOUNG_GENERATION = 7000
"""Allocations between two collections of the youngest generation (Python's default is 700)."""


def tune_gc() -> None:
    """Keep the cyclic garbage collector off what lives as long as the process: everything imported
    and built at start-up goes to the permanent generation (:func:`gc.freeze`), and the youngest
    generation is collected ten times less often, so the older ones are too. Garbage collection
    was 7.5 % of the operator's CPU at N = 300 Playgrounds (1.63 of 21.6 s, two thirds of it full
    collections walking the start-up heap); with this 0.84 s, converging took 6 % less CPU and
    RSS grew by 1.6 MB (issue 15)."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION, middle, old)


TLS_READ_BYTES = 16 * 1024
"""What asyncio reads from a TLS connection at a time: one TLS record at most (asyncio's default,
256 KiB, is also a buffer every connection keeps)."""


def tune_tls_reads() -> None:
    """Every TLS connection on the event loop (the reconciles' writes, the watches, kopf's, the
    webhook server's) keeps a read buffer of ``asyncio.sslproto.SSLProtocol.max_size`` bytes, and
    each read allocates that much again. At 256 KiB that was ~0.33 MB of RSS per connection: 2000
    creates 48 at a time grew the process by 15.8 MB against 4.6 MB with 16 KiB, for the same CPU
    (measured against the real API server), and at N = 100 Playgrounds the operator's steady RSS
    went from 80 to 90 MB when its writes moved onto the event loop (issue 15)."""
    asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BYTES


async def _main(config: OperatorConfig, kubeconfig: Path | None) -> int:
    tune_tls_reads()
    metrics = Metrics(kinds=RECONCILERS)
    # the reconciles' writes run on the event loop (Kube.*_async); the few blocking calls (the
    # integrations' lists, the plugins' BackendRuntimes at start) in threads, as many as objects
    # reconciled at once, with as many HTTP connections (the Lease keeper has a thread of its own)
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=config.workers))
    try:
        kube = Kube.connect(kubeconfig, on_write=metrics.count_write, pool_size=config.workers)
    except ConnectionConfigError as err:
        log.error("exiting: cannot reach the API server: %s", err)
        return 2
    plugins = load_plugins()
    for error in plugins.errors:
        log.error("plugin not loaded: %s", error)
    log.info(
        "backends: %s; autoscalers: %s",
        ", ".join(sorted(plugins.backends)) or "none",
        ", ".join(sorted(plugins.autoscalers)) or "none",
    )
    rt = Runtime(config=config, plugins=plugins, kube=kube, metrics=metrics, identity=identity())
    tune_gc()  # after the imports and plugins: they live as long as the process
    trimmer = asyncio.create_task(trim_after_bursts(rt))  # the first trim: what start-up left free
    start_http_server(config.metrics_port, registry=metrics.registry)
    health = HealthServer(config.health_port)
    await health.start()
    # every replica answers admission requests, standbys included: the webhook Service picks any
    webhooks = WebhookServer(config.webhook, rt.clock) if config.webhook.enabled else None
    if webhooks is not None:
        try:
            await webhooks.start()
        except WebhookError as err:
            log.error("exiting: %s", err)
            await health.stop()
            return 2

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    elector: LeaderElector | None = None
    if config.leader_election.enabled:
        le = config.leader_election
        namespace = le.lease_namespace or os.environ.get("POD_NAMESPACE") or "default"
        elector = LeaderElector(kube, le, namespace, rt.identity)
        health.standing_by()
        log.info("standing by for Lease %s/%s as %s", namespace, le.lease_name, rt.identity)
        if not await elector.acquire(stop):
            await _stop_servers(health, webhooks)
            return 0
        if stop.is_set():  # stopped while the winning attempt was in flight: hand it back
            await elector.release_async()
            await _stop_servers(health, webhooks)
            return 0
        kube.fence = elector.fence  # a leader that may have been replaced writes nothing
    metrics.leader.set(1)
    health.leading()

    # everything reconciles and preheat read: the operator's own lean watches (llmaz.operator.watch)
    watches = Watches(kube, watched_kinds(rt), config.namespaces, metrics.count_event)
    rt.stores, rt.listed = watches.stores, watches.listed
    rt.indexes = Indexes({}, watches.stores)
    watches.start()
    stop_flag: asyncio.Event = asyncio.Event()
    ready_flag: asyncio.Event = asyncio.Event()
    operator = asyncio.create_task(
        kopf.operator(
            registry=build_registry(),
            memo=kopf.Memo(**{MEMO_KEY: rt}),
            clusterwide=not config.namespaces,
            namespaces=list(config.namespaces),
            standalone=True,
            stop_flag=stop_flag,
            ready_flag=ready_flag,
        )
    )

    async def mark_ready() -> None:
        await ready_flag.wait()
        await watches.listed.wait()
        health.listed()

    waiters = [operator, asyncio.create_task(stop.wait()), asyncio.create_task(mark_ready())]
    keeper = asyncio.create_task(elector.keep()) if elector is not None else None
    if keeper is not None:
        waiters.append(keeper)
    done, _ = await asyncio.wait(
        [w for w in waiters if w is not waiters[2]], return_when=asyncio.FIRST_COMPLETED
    )
    lost = keeper is not None and keeper in done
    stop_flag.set()
    # whatever ended the operator, the shutdown below runs to the end: the watches stop, and the
    # Lease is handed over (a standby would otherwise wait a whole leaseDurationSeconds)
    try:
        await asyncio.wait_for(operator, timeout=SHUTDOWN_SECONDS)
    except (TimeoutError, asyncio.CancelledError):
        log.warning("kopf did not stop within %.0fs", SHUTDOWN_SECONDS)
    except Exception:
        log.exception("kopf ended with an error")
    for task in waiters[1:]:
        task.cancel()
    for task in waiters[1:]:
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await task
            except Exception:
                log.exception("a task of the operator ended with an error")
    trimmer.cancel()
    await watches.stop()
    await kube.aclose()
    metrics.leader.set(0)
    if elector is not None and not lost:
        await elector.release_async()
    await _stop_servers(health, webhooks)
    if lost:
        log.error("exiting: the leadership was lost")
        return 1
    return 0


async def _stop_servers(health: HealthServer, webhooks: WebhookServer | None) -> None:
    if webhooks is not None:
        await webhooks.stop()
    await health.stop()
