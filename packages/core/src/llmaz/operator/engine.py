"""The one idempotent reconcile of a Playground or inference Service: parse -> observe -> plan ->
apply -> status.

Level based: an object's own events, its children's events, its model's or backend's events and the
slow resync all end here. A reconcile that finds nothing different writes nothing: children are
applied only when the live object lacks a field we set, status only when it changes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any

import orjson
from pydantic import ValidationError

from llmaz.api import BackendRuntime, OpenModel, Playground, Service
from llmaz.api.conventions import ANNOTATION_RENDER_HASH, DEFAULT_BACKEND
from llmaz.api.inference import CONDITION_AVAILABLE
from llmaz.operator.diff import contains
from llmaz.operator.flavors import FlavorChoice, choose_flavor
from llmaz.operator.kube import (
    KubeError,
    NameTaken,
    ObjectKey,
    decode,
    encode,
    namespace_terminating,
    status_target_gone,
)
from llmaz.operator.runtime import (
    CreateLine,
    Creating,
    Indexes,
    QueuedCreate,
    Runtime,
    Settled,
    Settling,
    Snapshot,
    StatusWrite,
    child_id,
    controller_ref,
    controller_uid,
    entry_key,
    held_by_another,
    owner_reference,
    parsed_entries,
    plain,
    reconcile_inputs,
    resource_version,
    settled_state,
    uid_of,
)
from llmaz.operator.status import (
    REASON_NAME_CONFLICT,
    REASON_REJECTED,
    Observation,
    compute_status,
    error_reason,
    event_wanted,
    format_time,
    progress_only,
    same_reason,
    status_changed,
)
from llmaz.render import RenderError, parse_document, plan
from llmaz.render.diagnosis import Reason, diagnose
from llmaz.render.fallback import FLAVOR_FALLBACK, NO_FLAVOR_SCHEDULABLE, Action
from llmaz.render.objects import LWS_API_VERSION, leader_selector
from llmaz.render.plan import Plan
from llmaz.render.service import DEFAULT_MODEL_LOADER_IMAGE

INFERENCE_SERVICE_API_VERSION = Service.api_version_string()

log = logging.getLogger("llmaz.operator")

EVENT_SOURCE = "llmaz-operator"
RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
RECHECK_MARGIN = 0.5
"""Seconds added to a fallback recheck, so the deadline has passed when it runs."""
SETTLE_SECONDS = 10.0
"""How long a progress-only status change (:func:`llmaz.operator.status.progress_only`) that
changes the reason (``Pending`` -> ``Loading``...) or is the first status waits before it is
written; a newer state seen meanwhile replaces it (issue 15: a pod ``Pending`` for a few seconds
before it is Ready cost every Playground and inference Service one more status write; under load a
pod stayed ``Pending`` longer than 3 s, so the window is 10 s)."""
DETAIL_SETTLE_SECONDS = 60.0
"""How long a progress-only change that keeps the reason (only the message or the ready count
changes: ``waiting for pods to be created`` -> ``pod ... is Pending``) waits. The STATUS column does
not change; at N = 1000 on a 2-CPU control plane pods stayed Pending for minutes, and 73 % of the
Playgrounds wrote such a change of their own (issue 15)."""

RENDER_HASH_LENGTH = 16
"""Hex digits of the render hash kept in :data:`~llmaz.api.conventions.ANNOTATION_RENDER_HASH`."""

BUSY_HOLD_SECONDS = 30.0
"""How much longer a held progress-only status waits while the operator is creating children
(:attr:`~llmaz.operator.runtime.Runtime.creating`): creating children is what a rollout waits for,
and on a busy API server every status write slows the creates down (issue 15: at N = 300 each
status patch cost the API server ~4 ms of CPU, as much as creating the Playground). A status that
is not progress-only (Available, a failure) never waits."""
BUSY_RECHECK_SECONDS = 1.0

_DIAGNOSIS_REASONS = frozenset(str(r) for r in Reason)


def _digest(obj: Any) -> str:
    """A hash of ``obj`` (the render hash, and the in-memory keys of status writes). orjson with
    sorted keys: ``json.dumps(..., sort_keys=True)`` took 5 % of the operator's CPU while it
    created children at N = 500 (issue 15's profile). What orjson refuses (an integer beyond 64
    bits) is hashed from :mod:`json`'s text instead, as :func:`~llmaz.operator.kube.encode` does."""
    try:
        return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()
    except TypeError:
        return _legacy_digest(obj)


def _legacy_digest(obj: Any) -> str:
    """The render hash as releases before :func:`_digest` took orjson wrote it (``json.dumps`` with
    sorted keys: another text, so another hash, for the same render)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _render_hash_of(obj: Mapping[str, Any]) -> str | None:
    """The ``llmaz.io/render-hash`` annotation of a live child, if it has one."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    found = annotations.get(ANNOTATION_RENDER_HASH)
    return found if isinstance(found, str) else None


def _parse_all(
    rt: Runtime, kind: type[OpenModel] | type[BackendRuntime], entries: list[Any]
) -> dict[str, Any]:
    """Every valid object of the index ``entries`` by name, parsed once per resourceVersion: every
    reconcile needs all models, and validating them again each time was 4-6 % of the operator's
    CPU at N = 100 (issue 15's profile). An invalid object is left out (reported as not found)."""

    def parse(snap: Snapshot) -> Any:
        try:
            return kind.model_validate({k: v for k, v in snap.items() if k != "status"})
        except ValidationError:
            return None

    return {obj.name: obj for obj in parsed_entries(rt.parsed, entries, parse)}


def models_by_name(rt: Runtime, idx: Indexes) -> dict[str, OpenModel]:
    """Every valid OpenModel by name (parsed once per resourceVersion)."""
    return _parse_all(rt, OpenModel, idx.model_entries())


def desired_child(obj: Mapping[str, Any], ref: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """A rendered child as the operator writes it (owner reference ``ref``, render hash
    annotation) and the hash of the render."""
    desired = dict(obj)
    meta = dict(desired.get("metadata") or {})
    meta["ownerReferences"] = [dict(ref)]
    desired["metadata"] = meta
    digest = _digest(desired)
    # "the live object contains the desired one" cannot see a field the render dropped; this can
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        ANNOTATION_RENDER_HASH: digest[:RENDER_HASH_LENGTH],
    }
    return desired, digest


def without_render_hash(desired: Mapping[str, Any]) -> dict[str, Any]:
    """``desired`` without the render hash, to compare with a child an older release wrote
    (an upgrade, issue 15): an older operator's child that holds the whole render is left alone
    rather than written again only to gain the annotation (or its new text); it gains it with its
    next change."""
    meta = dict(desired["metadata"])
    annotations = {k: v for k, v in meta.pop("annotations").items() if k != ANNOTATION_RENDER_HASH}
    if annotations:
        meta["annotations"] = annotations
    return {**desired, "metadata": meta}


def _as_written(current: Mapping[str, Any], desired: dict[str, Any], digest: str) -> dict[str, Any]:
    """What ``current`` must contain to be as rendered: ``desired``, or ``desired`` without the
    render hash when an older release wrote the child, before it had the annotation or when the
    hash was made by ``json`` (:func:`_legacy_digest`; only computed when the hash differs from
    the current one: on an upgrade, or when the render changed)."""
    live = _render_hash_of(current)
    if live is None:
        return without_render_hash(desired)
    if live != digest[:RENDER_HASH_LENGTH]:
        plain_desired = without_render_hash(desired)
        if live == _legacy_digest(plain_desired)[:RENDER_HASH_LENGTH]:
            return plain_desired
    return desired


async def apply_children(
    rt: Runtime, owner: Snapshot, result: Plan, live: list[Snapshot], inputs: tuple[Any, ...] | None = None
) -> None:
    """Apply what the plan wants and is not live yet (children not seen yet are created in the
    background: :func:`_start_create`); delete owned objects it no longer wants.
    When every wanted child was live and held what the plan wants, and nothing was pruned, the
    owner is recorded as :class:`~llmaz.operator.runtime.Settled` for the render ``inputs``."""
    ref = owner_reference(owner)
    live_by_key = {ObjectKey.of(o): o for o in live}
    wanted: set[ObjectKey] = set()
    verified = 0
    todo: list[tuple[ObjectKey, str, dict[str, Any], bool]] = []
    for obj in result.objects:
        desired, digest = desired_child(obj, ref)
        key = ObjectKey.of(desired)
        wanted.add(key)
        current = live_by_key.get(key)
        if current is not None:
            # comparing field by field (~130 us for an LWS) was 9 % of the operator's CPU at
            # N = 300 (issue 15's profile); the hash is a third of that and the answer is kept
            seen = (resource_version(current), digest)
            if rt.contained.get(key) == seen:
                verified += 1
                continue
            if contains(current, _as_written(current, desired, digest)):
                rt.contained[key] = seen
                verified += 1
                continue
        creating = rt.creates.get(key)
        if creating is not None:
            # being created: a different render is applied once that create ends
            creating.stale = creating.stale or creating.digest != digest
            continue
        cached = rt.applied.get(key)
        if cached is not None and cached[0] == digest and resource_version(current) < cached[1]:
            continue  # our own write, not yet seen by the watch
        # a child not seen yet is POSTed (cheaper for the API server), a known one applied
        todo.append((key, digest, desired, current is not None or cached is not None))

    # a child not seen yet is created in the background: the reconcile does not wait for it, so a
    # slow create (a cluster IP is allocated one Service at a time) holds up neither this owner's
    # other children nor other owners; the children that exist are applied together, one round
    # trip for all of them (issue 15)
    applies = []
    for key, digest, desired, exists in todo:
        if exists:
            applies.append(_write_child(rt, owner, key, digest, desired, exists=True))
        else:
            _start_create(rt, owner, key, digest, desired)
    await asyncio.gather(*applies)
    prunable = set(result.prune_kinds)
    pruned = False
    for obj in live:
        key = ObjectKey.of(obj)
        if key in wanted or (key.api_version, key.kind) not in prunable:
            continue
        if controller_uid(obj) != ref["uid"]:
            continue
        await rt.kube.delete_async(key, uid_of(obj))
        rt.forget_child(key)
        pruned = True
        log.info("pruned %s %s/%s of %s %s", key.kind, key.namespace, key.name, owner["kind"], ref["name"])
    if inputs is None:
        return
    if verified == len(wanted) and not todo and not pruned:
        children = [(child_id(o), resource_version(o)) for o in live]
        rt.settled[ref["uid"]] = Settled(settled_state(inputs, children), result.flavor)
    else:
        rt.settled.pop(ref["uid"], None)


async def _write_child(
    rt: Runtime, owner: Snapshot, key: ObjectKey, digest: str, desired: dict[str, Any], *, exists: bool
) -> None:
    """POST (``exists`` False) or apply one child and remember the answer. An inference Service a
    Playground wrote is reconciled next, from the answer: no wait for the watch or the queue.
    A write the API server refuses for the object itself, or a name someone else's object holds,
    is recorded for the owner's status (:func:`_child_problem`) and raised."""
    owner_ref = controller_ref(desired)
    try:
        answer = await rt.kube.create_or_apply_async(
            desired, exists=exists, held=lambda live: held_by_another(live, owner_ref)
        )
    except (KubeError, OSError) as err:
        problem = _child_problem(err, key, owner)
        if problem is not None:
            rt.child_problems.setdefault(uid_of(owner), {})[key] = problem
        raise
    problems = rt.child_problems.get(uid_of(owner))
    if problems is not None and problems.pop(key, None) is not None:
        if not problems:
            del rt.child_problems[uid_of(owner)]
        meta = owner["metadata"]  # its status still shows the problem
        enqueue(rt, str(owner["kind"]), meta.get("namespace") or "", meta["name"])
    rt.applied[key] = (digest, resource_version(answer))
    log.info(
        "%s %s %s/%s for %s %s",
        "applied" if exists else "created",
        key.kind,
        key.namespace,
        key.name,
        owner["kind"],
        owner["metadata"]["name"],
    )
    if key.api_version == INFERENCE_SERVICE_API_VERSION and key.kind == "Service":
        rt.fresh[("Service", key.namespace, key.name)] = plain(answer)
        enqueue(rt, "Service", key.namespace, key.name, urgent=True)


REFUSED = frozenset({400, 403, 422})
"""HTTP statuses of a child write the API server refused for the object itself (schema, name,
admission webhook, RBAC): retrying without a change cannot help, so the owner's status says why."""


def _child_problem(err: BaseException, key: ObjectKey, owner: Snapshot) -> tuple[str, str] | None:
    """``(reason, message)`` for the owner's status when writing child ``key`` failed for a reason
    the user must act on; ``None`` for a failure a retry may get past (the API server unreachable,
    a conflict between writers, the namespace being deleted)."""
    if isinstance(err, NameTaken):
        return (
            REASON_NAME_CONFLICT,
            f"{err.message}, so llmaz cannot create its {key.kind}: delete or rename that one, or "
            f"rename this {owner.get('kind')}",
        )
    if isinstance(err, KubeError) and err.status in REFUSED and not namespace_terminating(err):
        return REASON_REJECTED, f"the API server refused {key.kind} {key.namespace}/{key.name}: {err.message}"
    return None


def child_problem(rt: Runtime, uid: str) -> tuple[str, str] | None:
    """The first recorded problem writing one of ``uid``'s children, if any (for its status)."""
    problems = rt.child_problems.get(uid)
    return next(iter(problems.values())) if problems else None


CREATE_SLOTS_PER_KIND = 0.5
"""Creates of one kind in flight at once, as a share of ``workers``: the `-lb` Services waiting in
line for their cluster IPs never take every thread from the LeaderWorkerSets and inference
Services created meanwhile."""


def _start_create(rt: Runtime, owner: Snapshot, key: ObjectKey, digest: str, desired: dict[str, Any]) -> None:
    """Queue a child's create (:attr:`Runtime.creates` until it ends); it runs in the background,
    in the order queued, with at most :data:`CREATE_SLOTS_PER_KIND` of ``workers`` creates of its
    kind in flight. The reconcile never waits, for a slot or for room in the queue.

    Why nothing waits (issue 15): the API server allocates cluster IPs one at a time, and each
    allocation is slow while the API server is also busy creating other objects. When a
    reconcile waited for room among the ``-lb`` Service creates, every LeaderWorkerSet and
    inference Service was created only as fast as cluster IPs were allocated, so the allocator
    shared the machine with them for the whole rollout: at N = 500, 40-46 ``-lb`` Services per
    second. Queued without waiting, the other children are created as fast as the API server
    takes them, while the allocator could not go fast anyway (the Playgrounds themselves are being
    created), and most ``-lb`` Services come after them, at 60-170 per second (N = 500 and 1000).
    A queued create keeps its object encoded (<1 KB for a ``-lb`` Service, ~4 KB for an LWS), not
    as the rendered dicts: when ~900 waiting creates held those at N = 1000, the operator's RSS went
    past its budget."""
    uid = uid_of(owner)
    rt.creates[key] = Creating(digest)
    rt.creates_of[uid] = rt.creates_of.get(uid, 0) + 1
    meta = owner["metadata"]
    stub = {
        "apiVersion": owner.get("apiVersion"),
        "kind": owner.get("kind"),
        "metadata": {"name": meta["name"], "namespace": meta.get("namespace"), "uid": uid},
    }
    line = rt.create_lines.get((key.api_version, key.kind))
    if line is None:
        line = rt.create_lines[(key.api_version, key.kind)] = CreateLine()
    line.waiting.append(QueuedCreate(stub, key, digest, encode(desired)))
    slots = max(1, int(rt.config.workers * CREATE_SLOTS_PER_KIND))
    while line.running < slots and line.running < len(line.waiting):
        line.running += 1
        rt.spawn(_run_creates(rt, line), work=True)


async def _run_creates(rt: Runtime, line: CreateLine) -> None:
    """One of a kind's create slots: create queued children until none is left (or, once the
    operator stops, until the create in flight ends: the next leader creates the others)."""
    try:
        while line.waiting and not rt.queue.closed:
            queued = line.waiting.popleft()
            await _create(rt, queued.owner, queued.key, queued.digest, decode(queued.body))
    finally:
        line.running -= 1


async def _create(rt: Runtime, owner: Snapshot, key: ObjectKey, digest: str, desired: dict[str, Any]) -> None:
    """One background create. A failure is retried as a failed reconcile of the owner is (with a
    growing delay: :func:`reconcile` keeps the owner's failure count while any of its creates is
    in flight); a create that a later reconcile found stale reconciles the owner again."""
    uid = uid_of(owner)
    failed: Exception | None = None
    try:
        await _write_child(rt, owner, key, digest, desired, exists=False)
    except Exception as err:  # a bug must not end unseen in a task: logged and retried
        failed = err
    finally:
        creating = rt.creates.pop(key, None)
        left = rt.creates_of.get(uid, 1) - 1
        if left > 0:
            rt.creates_of[uid] = left
        else:
            rt.creates_of.pop(uid, None)
    meta = owner["metadata"]
    if failed is None:
        if creating is not None and creating.stale:
            enqueue(rt, str(owner["kind"]), meta.get("namespace") or "", meta["name"])
        return
    if isinstance(failed, KubeError | OSError) and namespace_terminating(failed):
        log.debug("not creating %s %s/%s: %s", key.kind, key.namespace, key.name, failed)
        return
    if _gone(rt, owner):  # deleted meanwhile: nothing to retry, nothing to keep for it
        rt.child_problems.pop(uid, None)
        log.debug("not creating %s %s/%s: its owner is gone", key.kind, key.namespace, key.name)
        return
    if not isinstance(failed, KubeError | OSError):
        log.error("creating %s %s/%s failed", key.kind, key.namespace, key.name, exc_info=failed)
    _schedule_retry(rt, owner, failed)


def _gone(rt: Runtime, owner: Snapshot) -> bool:
    """Whether ``owner`` was deleted (the indexes no longer hold it, or hold a newer object of its
    name)."""
    idx, uid = rt.indexes, uid_of(owner)
    if idx is None or uid in rt.gone:
        return idx is not None
    meta = owner["metadata"]
    ns, name = meta.get("namespace") or "", meta["name"]
    live = idx.playground(ns, name) if owner.get("kind") == "Playground" else idx.service(ns, name)
    return live is None or uid_of(live) != uid


def render_inputs(snap: Snapshot, idx: Indexes, *more: Any) -> tuple[Any, ...]:
    """What a reconcile renders ``snap``'s children from, as a comparable value: what it reads of
    ``snap`` itself (:func:`~llmaz.operator.runtime.reconcile_inputs`), every OpenModel's uid and
    resourceVersion (read without unpickling), and ``more``. The operator's configuration and
    plugins are fixed for the life of the process."""
    return (
        *reconcile_inputs(snap),
        tuple(sorted(entry_key(e) for e in idx.model_entries())),
        *more,
    )


def unchanged(rt: Runtime, idx: Indexes, uid: str, inputs: tuple[Any, ...]) -> Settled | None:
    """The owner's :class:`~llmaz.operator.runtime.Settled` record when its render inputs and
    every child are as they were then (a child edited, deleted or added by anyone has another
    resourceVersion or key, and the owner renders and compares again)."""
    found = rt.settled.get(uid)
    if found is None or found.state != settled_state(inputs, idx.owned_versions(uid)):
        return None
    return found


def _event(rt: Runtime, owner: Snapshot, reason: str, message: str, warning: bool) -> dict[str, Any]:
    meta = owner["metadata"]
    now = format_time(rt.clock())
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta.get("namespace") or "default"},
        "involvedObject": {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta["uid"],
        },
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": EVENT_SOURCE},
        "reportingComponent": EVENT_SOURCE,
        "reportingInstance": rt.identity[:128],
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def _available_condition(status: Mapping[str, Any] | None) -> tuple[str, str] | None:
    for cond in (status or {}).get("conditions") or []:
        if cond.get("type") == CONDITION_AVAILABLE:
            return str(cond.get("status")), str(cond.get("reason"))
    return None


async def patch_status_once(rt: Runtime, owner: Snapshot, desired: dict[str, Any]) -> bool:
    """Patch ``status`` to ``desired`` unless it holds that already or we just wrote it (the watch
    has not caught up). True when written."""
    current = owner.get("status")
    if not status_changed(current, desired):
        return False
    uid = uid_of(owner)
    digest = _digest(
        [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in desired.get("conditions") or []]
        + [desired.get("replicas"), desired.get("selector"), desired.get("flavor"), desired.get("preheat")]
    )
    cached = rt.statuses.get(uid)
    if cached is not None and cached[0] == digest and resource_version(owner) < cached[1]:
        return False
    meta = owner["metadata"]
    rt.status_writes[uid] = StatusWrite(desired, reconcile_inputs(owner))
    try:
        answer = await rt.kube.patch_status_async(
            owner["apiVersion"], owner["kind"], meta.get("namespace"), meta["name"], desired
        )
        rt.statuses[uid] = (digest, resource_version(answer))
    finally:
        rt.status_writes.pop(uid, None)
    return True


async def write_status(rt: Runtime, owner: Snapshot, seen: Observation) -> None:
    """Patch ``status`` when it changes; post one Event when the Available reason changes to or from
    a warning (:func:`~llmaz.operator.status.event_wanted`; no Normal Event on an inference Service
    whose Playground reports the same). A status that only says the rollout is under way (the first
    ``Pending`` included) is written once it has held for :data:`SETTLE_SECONDS`, unless a newer
    state supersedes it first; on the inference Service of a Playground it is not written at all
    (the Playground says the same: issue 15, one status write per rollout step, not two)."""
    current = owner.get("status")
    desired = compute_status(owner["kind"], seen, current, rt.clock())
    desired.setdefault("selector", None)
    desired.setdefault("flavor", None)
    warning = seen.blocked is not None or seen.failing
    if not warning and status_changed(current, desired) and progress_only(current, desired):
        if _reported_by_playground(owner):
            return  # its Playground reports the rollout; this status changes when it ends
        if _settling(rt, owner, DETAIL_SETTLE_SECONDS if same_reason(current, desired) else SETTLE_SECONDS):
            return
    _settled(rt, uid_of(owner))
    if not await patch_status_once(rt, owner, desired):
        return
    meta = owner["metadata"]
    before, after = _available_condition(current), _available_condition(desired)
    if after is None or before == after or not event_wanted(current, warning=warning):
        return
    if not warning and _reported_by_playground(owner):
        return
    message = next(c["message"] for c in desired["conditions"] if c["type"] == CONDITION_AVAILABLE)
    try:
        await rt.kube.post_event_async(_event(rt, owner, after[1], message, warning))
    except KubeError as err:  # an Event is best effort
        if not namespace_terminating(err):
            log.warning("could not post Event for %s %s: %s", owner["kind"], meta["name"], err)


def _reported_by_playground(owner: Snapshot) -> bool:
    """Whether ``owner`` is an inference Service controlled by a Playground, whose status and Events
    say the same (its warnings are still posted on both: ``kubectl describe`` of either explains)."""
    if owner.get("kind") != "Service":
        return False
    return any(
        ref.get("controller") and ref.get("kind") == "Playground"
        for ref in owner["metadata"].get("ownerReferences") or []
    )


def _settling(rt: Runtime, owner: Snapshot, seconds: float) -> bool:
    """Whether a progress-only change of ``owner``'s status should wait: True until it has been
    held for ``seconds`` (then a reconcile comes back to write it). A hold already running is
    shortened when this change may wait less (a new reason after a message-only change)."""
    uid = uid_of(owner)
    loop = asyncio.get_running_loop()
    held = rt.settling.get(uid)
    if held is not None:
        if held.due:
            return False
        if loop.time() + seconds >= held.deadline:
            return True
        held.handle.cancel()
    meta = owner["metadata"]
    kind, ns, name = str(owner.get("kind")), meta.get("namespace") or "", meta["name"]

    def due() -> None:
        entry = rt.settling.get(uid)
        if entry is None:
            return
        if rt.creating and loop.time() < entry.deadline + BUSY_HOLD_SECONDS:
            entry.handle = loop.call_later(BUSY_RECHECK_SECONDS, due)
            return
        entry.due = True
        enqueue(rt, kind, ns, name)

    rt.settling[uid] = Settling(loop.call_later(seconds, due), loop.time() + seconds)
    return True


def _settled(rt: Runtime, uid: str) -> None:
    held = rt.settling.pop(uid, None)
    if held is not None:
        held.handle.cancel()


def _parse(snap: Snapshot) -> tuple[Any, tuple[str, str] | None]:
    """The typed object of a watched Playground or Service, or ``(None, (reason, message))`` for its
    schema problems. Not its CEL rules: the API server enforced those when the object was written
    (they are in the CRD), and evaluating them again with the pure-Python CEL interpreter cost
    ~0.5 s of CPU per reconcile on the event loop (issue 15's profile)."""
    try:
        return parse_document({k: v for k, v in snap.items() if k != "status"}, check_rules=False), None
    except RenderError as err:
        return None, (error_reason(err), str(err))


async def post_event(rt: Runtime, owner: Snapshot, reason: str, message: str, *, warning: bool) -> None:
    """Post an Event about ``owner`` (best effort: a failure is logged, not retried)."""
    try:
        await rt.kube.post_event_async(_event(rt, owner, reason, message, warning))
    except KubeError as err:
        if not namespace_terminating(err):
            log.warning("could not post Event for %s %s: %s", owner["kind"], owner["metadata"]["name"], err)


def _desired_replicas(snap: Snapshot) -> int:
    return int((snap.get("spec") or {}).get("replicas", 1) or 0)


async def reconcile_playground(rt: Runtime, idx: Indexes, snap: Snapshot) -> None:
    meta = snap["metadata"]
    uid, ns, name = uid_of(snap), meta.get("namespace") or "", meta["name"]
    now = rt.clock()
    pg, blocked = _parse(snap)
    live = idx.owned(uid)
    pods = idx.pods(ns, name)
    desired = _desired_replicas(snap)
    choice: FlavorChoice | None = None
    flavor: str | None = None
    children: Coroutine[Any, Any, None] | None = None
    settled: Settled | None = None
    if blocked is None:
        assert isinstance(pg, Playground)
        models = models_by_name(rt, idx)
        try:
            choice = choose_flavor(
                rt.config,
                pg,
                models,
                snap.get("status"),
                pods=pods,
                now=now,
                created=meta.get("creationTimestamp"),
            )
            render_flavor = choice.render_flavor if choice is not None else None
            runtimes = tuple(sorted(entry_key(e) for e in idx.runtime_entries()))
            inputs = render_inputs(snap, idx, runtimes, render_flavor)
            settled = unchanged(rt, idx, uid, inputs)
            if settled is None:
                result = plan(
                    pg,
                    models,
                    _parse_all(rt, BackendRuntime, idx.runtime_entries()),
                    rt.plugins,
                    plugin_runtimes=False,
                    flavor=render_flavor,
                )
        except RenderError as err:
            blocked = (error_reason(err), str(err))
        else:
            if settled is not None:
                flavor = settled.flavor  # its inference Service is ours and as rendered
            else:
                flavor = result.flavor
                rt.scaling[uid] = tuple((p.reason, p.message) for p in result.problems)
                same_name = idx.service(ns, name)
                if same_name is not None and controller_uid(same_name) != uid:
                    blocked = (
                        REASON_NAME_CONFLICT,
                        f"inference Service {ns}/{name} exists and is not owned by this Playground; "
                        "delete or rename it",
                    )
                else:
                    children = _apply_and_announce(rt, snap, result, live, choice, inputs)
    child = next(
        (
            o
            for o in live
            if o.get("apiVersion") == Service.api_version_string() and o["metadata"]["name"] == name
        ),
        None,
    )
    child_status = (child or {}).get("status") or {}
    found = diagnose(pods, desired_replicas=desired, flavor=flavor, now=now)
    workload: tuple[str, str] = (str(found.reason), found.message)
    failing = found.failing
    child_blocked = _condition_of(child_status)
    selector = child_status.get("selector")
    if child_blocked is not None and child_blocked[0] not in _DIAGNOSIS_REASONS:
        workload, failing = child_blocked, True  # the Service cannot render: show why
    elif selector is None and blocked is None:
        selector = leader_selector(name)  # the Service's LWS is named after it, and it after us
    if choice is not None and choice.decision.action is Action.EXHAUSTED and not found.available:
        workload, failing = (NO_FLAVOR_SCHEDULABLE, choice.decision.message), True
    seen = Observation(
        generation=int(meta.get("generation") or 0),
        blocked=blocked or child_problem(rt, uid),
        desired=desired,
        ready=found.ready_replicas,
        available=found.available,
        selector=selector,
        workload=workload,
        failing=failing,
        flavor=choice.status if choice is not None else None,
        scaling=rt.scaling.get(uid, ()) if blocked is None else (),
    )
    await _children_and_status(rt, snap, children, seen)
    _schedule_recheck(rt, snap, choice.decision.recheck_after if choice is not None else None)


async def _apply_and_announce(  # noqa: PLR0917
    rt: Runtime,
    snap: Snapshot,
    result: Plan,
    live: list[Snapshot],
    choice: FlavorChoice | None,
    inputs: tuple[Any, ...],
) -> None:
    await apply_children(rt, snap, result, live, inputs)
    if choice is not None and choice.moved:
        await post_event(rt, snap, FLAVOR_FALLBACK, choice.decision.message, warning=False)


async def _children_and_status(
    rt: Runtime, snap: Snapshot, children: Coroutine[Any, Any, None] | None, seen: Observation
) -> None:
    """Apply the children and write the status at the same time. The status is computed from what
    was observed before the apply either way; one round trip instead of two per reconcile, so a
    hop of the chain Playground -> Service -> LWS no longer waits for a status write before the
    next object gets the worker (issue 15: at N = 100 two thirds of the time until every child
    existed went to the first hop). Both finish before a failure of either is raised (and retried)."""
    if children is None:
        await write_status(rt, snap, seen)
        return
    for outcome in await asyncio.gather(children, write_status(rt, snap, seen), return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome


def _condition_of(status: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(reason, message)`` of a status's ``Available=False`` condition, if any."""
    for cond in status.get("conditions") or []:
        if cond.get("type") == CONDITION_AVAILABLE and cond.get("status") == "False":
            return str(cond.get("reason")), str(cond.get("message") or "")
    return None


def _service_backend(idx: Indexes, snap: Snapshot) -> str | None:
    """Name of the backend plugin serving a Playground's inference Service (``None`` for a
    standalone one)."""
    meta = snap["metadata"]
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Playground":
            owner = idx.playground(meta.get("namespace") or "", str(ref.get("name")))
            if owner is None:
                return None
            config = (owner.get("spec") or {}).get("backendRuntimeConfig") or {}
            return str(config.get("backendName") or DEFAULT_BACKEND)
    return None


LWS_KIND = (LWS_API_VERSION, "LeaderWorkerSet")


async def reconcile_service(rt: Runtime, idx: Indexes, snap: Snapshot) -> None:
    meta = snap["metadata"]
    uid, ns, name = uid_of(snap), meta.get("namespace") or "", meta["name"]
    svc, blocked = _parse(snap)
    desired = _desired_replicas(snap)
    flavor: str | None = None
    children: Coroutine[Any, Any, None] | None = None
    live: list[Snapshot] | None = None
    if blocked is None:
        assert isinstance(svc, Service)
        backend_name = _service_backend(idx, snap)
        inputs = render_inputs(snap, idx, backend_name)
        settled = unchanged(rt, idx, uid, inputs)
        if settled is not None:
            flavor = settled.flavor
            live = idx.owned(uid, (LWS_KIND,))  # its status is all this reconcile reads
        else:
            live = idx.owned(uid)
            try:
                result = plan(
                    svc,
                    models_by_name(rt, idx),
                    model_loader_image=rt.config.model_loader.image or DEFAULT_MODEL_LOADER_IMAGE,
                    model_cache=rt.config.model_loader.shared_cache,
                    scheduler_name=rt.config.scheduler_name or None,
                    backend=rt.plugins.get_backend(backend_name) if backend_name is not None else None,
                    dra=rt.config.dra,
                )
            except RenderError as err:
                blocked = (error_reason(err), str(err))
            else:
                flavor = result.flavor
                children = apply_children(rt, snap, result, live, inputs)
    if live is None:
        live = idx.owned(uid)
    lws = next(
        (o for o in live if o.get("kind") == "LeaderWorkerSet" and o["metadata"]["name"] == name), None
    )
    lws_status = (lws or {}).get("status") or {}
    selector = lws_status.get("hpaPodSelector")
    if selector is None and blocked is None:
        selector = leader_selector(name)  # what the LWS controller will report; no second write
    found = diagnose(idx.pods(ns, name), desired_replicas=desired, flavor=flavor, now=rt.clock())
    seen = Observation(
        generation=int(meta.get("generation") or 0),
        blocked=blocked or child_problem(rt, uid),
        desired=desired,
        ready=found.ready_replicas,
        available=found.available,
        selector=selector,
        workload=(str(found.reason), found.message),
        failing=found.failing,
    )
    await _children_and_status(rt, snap, children, seen)


RECONCILERS = {"Playground": reconcile_playground, "Service": reconcile_service}


async def reconcile(rt: Runtime, idx: Indexes, snap: Snapshot) -> None:
    """Reconcile one Playground or inference Service; failures are retried with backoff (and by the
    resync) without blocking other objects. Called by the work queue's workers only
    (:func:`enqueue`), which never run one object twice at the same time."""
    kind = str(snap.get("kind"))
    uid = uid_of(snap)
    if snap["metadata"].get("deletionTimestamp"):
        return  # being deleted: garbage collection removes the children; nothing to write
    try:
        with rt.metrics.reconciling(kind):
            await RECONCILERS[kind](rt, idx, snap)
    except (KubeError, OSError) as err:
        meta = snap["metadata"]
        gone = status_target_gone(err, str(snap.get("apiVersion")), kind, meta.get("namespace"), meta["name"])
        if gone or namespace_terminating(err):  # no retry: the object is gone or going
            log.debug("not reconciling %s %s/%s: %s", kind, meta.get("namespace"), meta["name"], err)
        else:
            _schedule_retry(rt, snap, err)
    else:
        if uid not in rt.creates_of:  # (a create in flight may still fail: its delay must grow)
            rt.failures.pop(uid, None)
            handle = rt.retries.pop(uid, None)
            if handle is not None:
                handle.cancel()


def enqueue(
    rt: Runtime,
    kind: str,
    namespace: str,
    name: str,
    *,
    urgent: bool = False,
    later: bool = False,
    verify: bool = False,
) -> None:
    """Queue a reconcile of an object (``kind`` is ``Playground`` or ``Service``). An object already
    waiting is not queued twice, one being reconciled is queued again once that ends: every event,
    resync and timer only names the object, and the reconcile reads its latest version from the
    indexes. So a burst of events costs one reconcile per object, and no handler holds its event
    while it waits (at N = 1000, thousands of kopf handlers waiting for a reconcile slot, each
    holding its decoded event, took the operator's RSS past 400 MB; issue 15).

    ``urgent`` objects are taken before the others: a Playground's reconcile queues the inference
    Service it just created or changed this way, so that Service's children are applied next
    instead of after every Playground queued meanwhile. At N = 300 the ``-lb`` Services, whose
    cluster IPs the API server allocates at ~30 per second whoever asks, then started only once
    most Playgrounds had their inference Service (issue 15).

    ``later``: a pod changed (or the Playground's inference Service wrote its status); what that
    changes is the status, and a flavor fallback that has minutes to go. The reconcile waits behind
    the others (:attr:`~llmaz.operator.runtime.WorkQueue.later`); queued otherwise, it moves up.

    ``verify``: one of the object's children was deleted; its reconcile first checks with the API
    server that the object itself still exists (:func:`reconcile_named`)."""
    key = (kind, namespace, name)
    queue = rt.queue
    if queue.closed:
        return
    if verify:
        queue.verify.add(key)
    if key in queue.busy:
        if not later:
            queue.again.add(key)
            queue.again_later.discard(key)
        elif key not in queue.again:
            queue.again_later.add(key)
        return
    if key in queue.urgent:
        return
    if key in queue.waiting:
        if not urgent:
            return
        del queue.waiting[key]
    if key in queue.later:
        if later:
            return
        del queue.later[key]
    if later:
        queue.later[key] = asyncio.get_running_loop().time()
    else:
        (queue.urgent if urgent else queue.waiting)[key] = None
    rt.metrics.queue_depth.set(queue.depth())
    if queue.workers < rt.config.workers:
        queue.workers += 1
        rt.spawn(_work(rt), work=True)


POD_COALESCE_SECONDS = 1.0
"""How long a pod event waits before it queues its owners' reconciles (:func:`enqueue_soon`)."""


def enqueue_soon(rt: Runtime, kind: str, namespace: str, name: str) -> None:
    """Queue a status-only reconcile (``later``: :func:`enqueue`) :data:`POD_COALESCE_SECONDS` from
    now; an object already due to be queued is not timed again. Pod events come in bursts (created,
    bound, started, Ready; every pod of a multi-host group at once), each of which reconciled both
    owners of the pod: at N = 300, 11 reconciles per Playground, most of them for pod events, while
    the operator's CPU was what the API server lacked to create children (issue 15). One reconcile
    per owner and second sees the burst's last state."""
    key = (kind, namespace, name)
    if key in rt.queue.soon:
        return

    def fire() -> None:
        rt.queue.soon.pop(key, None)
        enqueue(rt, kind, namespace, name, later=True)

    rt.queue.soon[key] = asyncio.get_running_loop().call_later(POD_COALESCE_SECONDS, fire)


def enqueue_now(rt: Runtime, kind: str, namespace: str, name: str) -> None:
    """Queue a status-only reconcile now, instead of when an :func:`enqueue_soon` timer would have."""
    handle = rt.queue.soon.pop((kind, namespace, name), None)
    if handle is not None:
        handle.cancel()
    enqueue(rt, kind, namespace, name, later=True)


def enqueue_many(rt: Runtime, targets: Iterable[tuple[str, str, str]]) -> None:
    for kind, namespace, name in targets:
        enqueue(rt, kind, namespace, name)


async def _work(rt: Runtime) -> None:
    """One of at most ``config.workers`` workers: reconciles queued objects (in the order of
    :meth:`~llmaz.operator.runtime.WorkQueue.take`) and ends when the queue is empty."""
    queue = rt.queue
    loop = asyncio.get_running_loop()
    try:
        if rt.listed is not None:
            # a reconcile before the children are listed would not see those that exist
            await rt.listed.wait()
        while not queue.closed and (key := queue.take(loop.time())) is not None:
            queue.busy.add(key)
            try:
                await reconcile_named(rt, *key)
            except Exception:  # a bug must not stop the worker; the next event or resync retries
                log.exception("reconcile of %s %s/%s failed", *key)
            finally:
                queue.busy.discard(key)
                queue.done += 1
                rt.metrics.queue_depth.set(queue.depth())
                if key in queue.again:
                    queue.again.discard(key)
                    queue.waiting[key] = None
                elif key in queue.again_later:
                    queue.again_later.discard(key)
                    queue.later[key] = loop.time()
    finally:
        queue.workers -= 1


DRAIN_SECONDS = 15.0
"""How long a stopping operator waits for the reconciles and child creates already running
(:func:`drain`). Within the operator's 20 s for kopf to stop and the chart's 30 s grace period, so
the Lease is still handed over before the kubelet kills the pod."""


async def drain(rt: Runtime, timeout: float = DRAIN_SECONDS) -> int:
    """Stop taking work and let what runs finish: queue nothing more (events, timers and retries
    included), start no reconcile or create, and wait up to ``timeout`` seconds for the reconciles
    and child creates in flight. Returns how many were still running then (the caller cancels
    them). A reconcile cut in the middle had written some of its objects and not the others, and
    an owner's status not at all; one that finishes leaves the next leader nothing half done."""
    rt.queue.closed = True
    for handle in [*rt.retries.values(), *rt.rechecks.values(), *rt.queue.soon.values()]:
        handle.cancel()
    if rt.listed is not None and not rt.listed.is_set():
        return 0  # no reconcile has started: the workers still wait for the listing
    running = [task for task in rt.work if not task.done()]
    if not running:
        return 0
    log.info("stopping: waiting up to %.0fs for %d reconciles and creates", timeout, len(running))
    _, pending = await asyncio.wait(running, timeout=timeout)
    if pending:
        log.warning(
            "stopping: %d reconciles or creates still running after %.0fs are cancelled",
            len(pending),
            timeout,
        )
    return len(pending)


def _schedule_recheck(rt: Runtime, snap: Snapshot, delay: float | None) -> None:
    """Reconcile ``snap`` again after ``delay`` seconds (flavor fallback's deadline), replacing an
    earlier recheck; ``None`` cancels it (only a pod or spec change can change the decision)."""
    uid = uid_of(snap)
    old = rt.rechecks.pop(uid, None)
    if old is not None:
        old.cancel()
    if delay is None:
        return
    meta = snap["metadata"]
    kind, ns, name = str(snap.get("kind")), meta.get("namespace") or "", meta["name"]
    loop = asyncio.get_running_loop()
    rt.rechecks[uid] = loop.call_later(max(delay, 0.0) + RECHECK_MARGIN, enqueue, rt, kind, ns, name)


def _schedule_retry(rt: Runtime, snap: Snapshot, err: Exception) -> None:
    uid = uid_of(snap)
    count = rt.failures.get(uid, 0)
    rt.failures[uid] = count + 1
    delay = RETRY_DELAYS[min(count, len(RETRY_DELAYS) - 1)]
    meta = snap["metadata"]
    log.warning(
        "reconcile of %s %s/%s failed (retry in %.0fs): %s",
        snap.get("kind"),
        meta.get("namespace"),
        meta.get("name"),
        delay,
        err,
    )
    old = rt.retries.pop(uid, None)
    if old is not None:
        old.cancel()
    kind, ns, name = str(snap.get("kind")), meta.get("namespace") or "", meta["name"]
    loop = asyncio.get_running_loop()
    rt.retries[uid] = loop.call_later(delay, enqueue, rt, kind, ns, name)


async def reconcile_named(rt: Runtime, kind: str, namespace: str, name: str) -> None:
    """Reconcile the latest known version of an object, if it still exists: the indexes' or, when
    newer, the answer to our own apply of it (:attr:`Runtime.fresh`)."""
    idx = rt.indexes
    if idx is None:
        return
    snap = idx.playground(namespace, name) if kind == "Playground" else idx.service(namespace, name)
    fresh = rt.fresh.pop((kind, namespace, name), None)
    if fresh is not None and resource_version(fresh) > resource_version(snap):
        snap = fresh
    # the check is for the object this reconcile finds, whatever it finds: a flag left behind by
    # an owner that was gone already made a new object of the same name wait for a GET in its
    # first reconcile (at N = 100, 200 GETs in the critical path of every Playground created
    # again under an earlier name), and kept the name in memory for good
    verify = (kind, namespace, name) in rt.queue.verify
    rt.queue.verify.discard((kind, namespace, name))
    if snap is None or uid_of(snap) in rt.gone:
        return
    if verify:
        snap = await _still_there(rt, snap)
        if snap is None:
            return
    await reconcile(rt, idx, snap)


async def _still_there(rt: Runtime, snap: Snapshot) -> Snapshot | None:
    """``snap`` as the API server has it now, or ``None`` when it was deleted (its uid is then
    :attr:`Runtime.gone`). A failed request keeps ``snap``."""
    meta = snap["metadata"]
    where = (str(snap.get("apiVersion")), str(snap.get("kind")), meta.get("namespace"), meta["name"])
    try:
        live = await rt.kube.get_async(*where)
    except (KubeError, OSError):
        return snap
    if live is not None and uid_of(live) == uid_of(snap):
        return plain(live)
    rt.gone.add(uid_of(snap))
    # (debug: in a namespace deletion most owners go this way before their own deletion arrives)
    log.debug("%s %s/%s is gone: not reconciled again", snap.get("kind"), meta.get("namespace"), meta["name"])
    return None if live is None else plain(live)
