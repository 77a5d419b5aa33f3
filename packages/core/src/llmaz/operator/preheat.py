"""Preheat, the operator's side: keep one loader Job per selected node for every OpenModel marked
``llmaz.io/model-preheat: "true"`` (rendered by :mod:`llmaz.render.preheat`), and say how far it
got in the OpenModel's status (``Preheated`` condition, ``status.preheat`` counts; written with the
model's ``InUse`` condition by :mod:`llmaz.operator.usage`).

Jobs live in ``modelLoader.preheatNamespace`` (default: the operator's namespace) and are owned by
their OpenModel, so deleting the model deletes them. A Job whose rendered spec changed (a new
revision, another loader image) is deleted and created again: a Job's pod template is immutable.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llmaz.api import OpenModel
from llmaz.operator.kube import KubeError, ObjectKey
from llmaz.operator.runtime import Runtime, Snapshot, owner_reference, resource_version, uid_of
from llmaz.render import preheat
from llmaz.render.errors import RenderError
from llmaz.render.service import DEFAULT_MODEL_LOADER_IMAGE

log = logging.getLogger("llmaz.operator")

RETRY_SECONDS = 5.0
"""A Job write that failed is tried again after this long."""


def namespace(rt: Runtime) -> str:
    """Where preheat Jobs go: the setting, else the operator's namespace, else ``default``."""
    return rt.config.model_loader.preheat_namespace or os.environ.get("POD_NAMESPACE") or "default"


def marked(snap: Mapping[str, Any]) -> bool:
    """Whether a model snapshot carries the preheat label or annotation (before parsing it)."""
    meta = snap.get("metadata") or {}
    key = preheat.PREHEAT_KEY
    return "true" in ((meta.get("labels") or {}).get(key), (meta.get("annotations") or {}).get(key))


@dataclass
class Desired:
    """The preheat Jobs one model should have, or why it has none."""

    requested: bool = False
    jobs: list[dict[str, Any]] = field(default_factory=list)
    blocked: preheat.Report | None = None
    """Set when preheat is requested but cannot or need not run (the status says why)."""


def desired(rt: Runtime, snap: Snapshot) -> Desired:
    """What :func:`llmaz.render.preheat.render_preheat_jobs` gives for ``snap`` with the nodes the
    operator sees."""
    if not marked(snap) or (snap.get("metadata") or {}).get("deletionTimestamp"):
        return Desired()
    try:
        model = OpenModel.from_manifest(dict(snap), check_rules=False)
    except ValueError as err:
        return Desired(True, blocked=preheat.Report(False, preheat.REASON_INVALID_SOURCE, str(err)[:512]))
    if not preheat.requested(model):
        return Desired()
    cache = rt.config.model_loader.shared_cache
    if cache is None:
        message = (
            "preheating writes into the per-node shared cache, and the operator has none: set "
            "modelLoader.sharedCache (chart value operator.config.modelLoader.sharedCache)"
        )
        return Desired(True, blocked=preheat.Report(False, preheat.REASON_NO_CACHE, message))
    try:
        if not preheat.needs_loader(model):
            message = f"source {model.spec.source.uri!r} is read in place by the engine; nothing to download"
            return Desired(True, blocked=preheat.Report(True, preheat.REASON_NOTHING_TO_LOAD, message))
        assert rt.indexes is not None
        nodes = [preheat.Node(str(n["name"]), dict(n.get("labels") or {})) for n in rt.indexes.nodes()]
        jobs = preheat.render_preheat_jobs(
            model,
            nodes,
            namespace=namespace(rt),
            cache=cache,
            loader_image=rt.config.model_loader.image or DEFAULT_MODEL_LOADER_IMAGE,
        )
    except RenderError as err:
        return Desired(True, blocked=preheat.Report(False, preheat.REASON_INVALID_SOURCE, str(err)))
    return Desired(True, jobs=jobs)


def report(rt: Runtime, snap: Snapshot) -> preheat.Report | None:
    """The model's preheat state, or ``None`` when it is not marked for preheating."""
    want = desired(rt, snap)
    if not want.requested:
        return None
    if want.blocked is not None:
        return want.blocked
    assert rt.indexes is not None
    name = snap["metadata"]["name"]
    return preheat.report(want.jobs, rt.indexes.preheat_jobs(name), rt.indexes.preheat_causes(name))


def _digest(job: Mapping[str, Any]) -> str | None:
    value = ((job.get("metadata") or {}).get("annotations") or {}).get(preheat.ANNOTATION_PREHEAT_DIGEST)
    return None if value is None else str(value)


async def reconcile_preheat(rt: Runtime, name: str) -> None:
    """Create the missing preheat Jobs of model ``name``, replace stale ones and delete those no
    longer wanted (label removed, node gone or no longer selected). Writes nothing when the Jobs
    are as desired."""
    idx = rt.indexes
    if idx is None:
        return
    snap = idx.model(name)
    if snap is None:
        return  # deleted: the garbage collector removes the Jobs it owned
    async with rt.lock(f"preheat/{name}"):
        want = {job["metadata"]["name"]: job for job in desired(rt, snap).jobs}
        live = {str(job["metadata"]["name"]): job for job in idx.preheat_jobs(name)}
        try:
            for job_name, job in want.items():
                current = live.get(job_name)
                digest = _digest(job)
                if current is not None:
                    if _digest(current) != digest:
                        await _delete(rt, current)  # created again when its deletion is seen
                    continue
                key = ObjectKey.of(job)
                if rt.applied.get(key, ("", 0))[0] == digest:
                    continue  # applied; the watch has not shown it yet
                job["metadata"]["ownerReferences"] = [owner_reference(snap, block_owner_deletion=False)]
                answer = await rt.kube.apply_async(job)
                rt.applied[key] = (digest or "", resource_version(answer))
                log.info("preheat of %s: Job %s/%s created", name, key.namespace, key.name)
            for job_name, current in live.items():
                if job_name not in want:
                    await _delete(rt, current)
        except (KubeError, OSError) as err:
            log.warning(
                "preheat Jobs of OpenModel %s not written (retry in %.0fs): %s", name, RETRY_SECONDS, err
            )
            asyncio.get_running_loop().call_later(
                RETRY_SECONDS, lambda: rt.spawn(reconcile_preheat(rt, name))
            )


async def _delete(rt: Runtime, job: Snapshot) -> None:
    key = ObjectKey.of({**job, "apiVersion": preheat.JOB_API_VERSION, "kind": "Job"})
    rt.applied.pop(key, None)
    if await rt.kube.delete_async(key, uid_of(job)):
        log.info("preheat: Job %s/%s deleted", key.namespace, key.name)
