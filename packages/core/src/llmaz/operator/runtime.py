"""What the handlers share, kept in kopf's memo (built at start-up; no module globals).

* :class:`Runtime`: configuration, plugin manager, API adapter, metrics, the work queue and the
  small caches that keep an event caused by our own write from writing again.
* :class:`Indexes`: the operator's indexes (:mod:`llmaz.operator.watch`: objects by name,
  dependents by referenced model/backend, children by owner uid, serving pods by LeaderWorkerSet,
  preheat's nodes, Jobs and pods), as one typed view.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import pickle
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from llmaz.api import Service as InferenceService
from llmaz.api.conventions import ANNOTATION_RENDER_HASH, MANAGED_BY, MANAGER
from llmaz.operator.config import OperatorConfig
from llmaz.operator.kube import Kube, ObjectKey
from llmaz.operator.metrics import Metrics
from llmaz.operator.status import status_changed
from llmaz.plugins.manager import PluginManager

if TYPE_CHECKING:
    from llmaz.operator.integrations import IntegrationState

log = logging.getLogger("llmaz.operator")

Snapshot = dict[str, Any]
"""A plain-dict copy of an object as last seen by a watch."""

# Index ids (the stores of llmaz.operator.watch.Watches).
IDX_MODELS = "llmaz_openmodels"
IDX_RUNTIMES = "llmaz_backendruntimes"
IDX_PLAYGROUNDS = "llmaz_playgrounds"
"""Playgrounds by ``(namespace, name)``, and their ``(namespace, name)`` by :class:`RefKey`."""
IDX_SERVICES = "llmaz_services"
"""inference Services by ``(namespace, name)`` and, when a Playground controls them, by
:class:`OwnerKey`; their ``(namespace, name)`` by :class:`RefKey`."""
IDX_PODS = "llmaz_pods"
"""Serving pods by ``(namespace, LeaderWorkerSet name)``; the LeaderWorkerSet is named after its
inference Service (and a Playground's Service after the Playground)."""
IDX_NODES = "llmaz_nodes"
"""Nodes by name: their metadata, name and labels only (what preheat selects them by)."""
IDX_PREHEAT_JOBS = "llmaz_preheat_jobs"
"""Preheat Jobs by the OpenModel they download (label ``llmaz.io/preheat-model``)."""
IDX_PREHEAT_PODS = "llmaz_preheat_pods"
"""Preheat pods by model: their metadata and ``cause``, the loader's termination message (or
``None``)."""
IDX_PICKERS = "llmaz_endpoint_pickers"
"""Endpoint-picker Deployments the operator deployed, by ``(namespace, name)``: their metadata
only (read by nothing but the watch's relisting; see
:func:`llmaz.operator.handlers.integrations.watched_kinds`)."""
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""Set by the Job controller on the pods of a Job."""
IDX_OWNED = "llmaz_owned_"
"""Prefix of the per-kind indexes of children by controller owner uid."""
CHILD_KINDS: tuple[tuple[str, str, str], ...] = (
    ("inference.llmaz.io/v1alpha1", "Service", "services"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets"),
    ("v1", "Service", "services"),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate", "resourceclaimtemplates"),
)
"""Kinds the operator creates and watches back: ``(apiVersion, kind, plural)``."""


@dataclass(frozen=True, slots=True)
class RefKey:
    """A model or backend a Playground or Service references (``ref`` is ``"model"`` or
    ``"backend"``), as a key of :data:`IDX_PLAYGROUNDS` / :data:`IDX_SERVICES`.

    Each kind has one index holding its objects by ``(namespace, name)`` and, under keys of their
    own type (never equal to a tuple), its dependents by reference and its children by owner: kopf
    runs every index handler of a resource for each of its events (~0.2 ms of CPU each), and
    Playgrounds and Services have several events each (issue 15)."""

    ref: str
    name: str


@dataclass(frozen=True, slots=True)
class OwnerKey:
    """A controller owner's uid, as the key of its children in their kind's index."""

    uid: str


def owned_lookup(api_version: str, kind: str, owner_uid: str) -> tuple[str, Any]:
    """``(index id, key)`` under which children of ``kind`` controlled by ``owner_uid`` are indexed:
    inference Services in :data:`IDX_SERVICES`, other kinds in an index of their own."""
    if api_version == InferenceService.api_version_string() and kind == InferenceService.kind_name():
        return IDX_SERVICES, OwnerKey(owner_uid)
    return owned_index_id(api_version, kind), owner_uid


def owned_index_id(api_version: str, kind: str) -> str:
    group = api_version.split("/", maxsplit=1)[0] if "/" in api_version else "core"
    return IDX_OWNED + f"{group}_{kind}".replace(".", "_").replace("-", "_").lower()


def plain(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as the indexes keep it: without ``metadata.managedFields`` (shallow copy)."""
    meta = body.get("metadata")
    plain = {k: body[k] for k in ("apiVersion", "kind", "spec", "status") if k in body}
    if meta is not None:
        plain["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return plain


class Packed:
    """A watched object as the indexes keep it: pickled, unpickled into a fresh :data:`Snapshot`
    (a deep, plain copy: kopf bodies must not be kept) on every read through :class:`Indexes`.

    At N = 1000 Playgrounds the operator keeps ~5000 objects; as decoded dicts they took ~60 MB,
    and their many small long-lived objects, scattered among the short-lived ones of every decoded
    event, kept the allocator's arenas from being returned: RSS 433 MB after converging (issue 15).
    Pickled they take a fifth of the space in a few large blocks; unpickling an applied
    LeaderWorkerSet takes ~20 us. The pickles are also compressed (zlib level 1: half the size,
    ~60 us to pack and ~20 us to unpack an LWS), which at N = 1000 keeps ~6 MB of the ~13 MB
    they took out of the operator's memory."""

    __slots__ = ("data", "key", "uid", "version")

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self.data = zlib.compress(pickle.dumps(dict(obj), pickle.HIGHEST_PROTOCOL), 1)
        # kept outside the pickle so a cache keyed by them is read without unpickling
        self.uid = uid_of(obj)
        self.version = resource_version(obj)
        self.key = child_id(obj)

    def load(self) -> Snapshot:
        loaded: Snapshot = pickle.loads(zlib.decompress(self.data))
        return loaded


def child_id(obj: Mapping[str, Any]) -> str:
    """``apiVersion/kind/name``: which child of its owner an object is (one string, kept for every
    packed object)."""
    return f"{obj.get('apiVersion', '')}/{obj.get('kind', '')}/{(obj.get('metadata') or {}).get('name', '')}"


def settled_state(inputs: tuple[Any, ...], children: Iterable[tuple[str, int]]) -> bytes:
    """A short digest of render inputs and children's ``(child_id, resourceVersion)``: what
    :class:`Settled` keeps of them (1000s of owners, each a few tuples, were ~6 MB)."""
    text = repr((inputs, sorted(children)))
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def pack(body: Mapping[str, Any]) -> Packed:
    """What an index keeps of a watched object: everything but ``metadata.managedFields``, which
    nothing reads and which is the largest part of an applied object."""
    return Packed(plain(body))


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def resource_version(obj: Mapping[str, Any] | None) -> int:
    """``metadata.resourceVersion`` as a number (0 when absent or not numeric)."""
    raw = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    try:
        return int(str(raw))
    except (TypeError, ValueError):
        return 0


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference of ``obj``'s controller, if it has one."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def held_by_another(current: Mapping[str, Any], owner: Mapping[str, Any] | None) -> str | None:
    """Why the live object ``current``, of a name llmaz wants for a child of ``owner`` (that
    child's owner reference; ``None``: the child has no controller), is someone else's, or
    ``None`` when llmaz may take it over. Ours: controlled by ``owner`` (even with our label
    removed by hand: the apply puts it back), our own child left without a controller, or a child
    of an earlier object of the owner's kind and name (deleted and made again before the garbage
    collector removed its children). Someone else's: not labelled as made by llmaz (written by
    hand or by another tool), or controlled by another object."""
    controller = controller_ref(current)
    if controller is not None and owner is not None and controller.get("uid") == owner.get("uid"):
        return None
    meta = current.get("metadata") or {}
    if (meta.get("labels") or {}).get(MANAGED_BY) != MANAGER:
        return "was not made by llmaz for this object"
    if controller is None or owner is None:
        return None
    earlier = all(controller.get(k) == owner.get(k) for k in ("apiVersion", "kind", "name"))
    return None if earlier else f"is controlled by {controller.get('kind')} {controller.get('name')}"


def _unpacked(value: Any) -> Any:
    return value.load() if isinstance(value, Packed) else value


def entry_key(value: Any) -> tuple[str, int]:
    """``(uid, resourceVersion)`` of an index entry (packed or plain) without unpickling it."""
    if isinstance(value, Packed):
        return value.uid, value.version
    return uid_of(value), resource_version(value)


def parsed_entries(
    cache: dict[str, tuple[int, Any]], entries: Iterable[Any], parse: Callable[[Snapshot], Any]
) -> list[Any]:
    """``parse`` of each index entry, memoised in ``cache`` by uid and resourceVersion: an entry
    whose version is cached is not even unpickled. Every reconcile needs every OpenModel and
    BackendRuntime; unpickling them all only to find them cached was 9 % of the operator's CPU at
    N = 300 (issue 15's profile). ``parse`` returns None for an unusable object (cached too)."""
    out: list[Any] = []
    for entry in entries:
        uid, version = entry_key(entry)
        cached = cache.get(uid)
        if cached is not None and cached[0] == version:
            obj = cached[1]
        else:
            obj = parse(_unpacked(entry))
            cache[uid] = (version, obj)
        if obj is not None:
            out.append(obj)
    return out


class Indexes:
    """Typed access to the operator's indexes (``own``: :attr:`Runtime.stores`; ``raw``: more of
    them, or stand-ins in tests), by index id: key -> the values kept under it."""

    def __init__(self, raw: Mapping[str, Any], own: Mapping[str, Any] | None = None) -> None:
        self._raw = {k: v for k, v in raw.items() if k.startswith("llmaz_")}
        if own:
            self._raw.update(own)

    def _values(self, index: str, key: Any) -> list[Any]:
        idx = self._raw.get(index)
        if idx is None or key not in idx:
            return []
        return [_unpacked(v) for v in idx[key]]

    def _all(self, index: str) -> Iterable[Any]:
        idx = self._raw.get(index)
        if idx is None:
            return []
        return [_unpacked(v) for key in list(idx) for v in idx[key]]

    def _entries(self, index: str) -> list[Any]:
        idx = self._raw.get(index)
        return [v for key in list(idx) for v in idx[key]] if idx is not None else []

    def _objects(self, index: str) -> list[Any]:
        """The objects of a workload index (keyed by ``(namespace, name)``; :class:`RefKey` and
        :class:`OwnerKey` entries left out)."""
        idx = self._raw.get(index)
        if idx is None:
            return []
        return [_unpacked(v) for key in list(idx) if type(key) is tuple for v in idx[key]]

    def _in_namespace(self, index: str, namespace: str) -> list[Any]:
        """The objects of a workload index in one namespace, others not unpickled."""
        idx = self._raw.get(index)
        if idx is None:
            return []
        return [
            _unpacked(v) for key in list(idx) if type(key) is tuple and key[0] == namespace for v in idx[key]
        ]

    def _count(self, index: str) -> int:
        """Objects in a workload index, without unpickling them (that, after each reconcile, was a
        quarter of the operator's CPU at N = 1000; issue 15)."""
        idx = self._raw.get(index)
        return sum(1 for key in list(idx) if type(key) is tuple) if idx is not None else 0

    def model(self, name: str) -> Snapshot | None:
        found = self._values(IDX_MODELS, name)
        return found[0] if found else None

    def models(self) -> list[Snapshot]:
        return list(self._all(IDX_MODELS))

    def model_entries(self) -> list[Any]:
        """The models as the index keeps them (see :func:`parsed_entries`)."""
        return self._entries(IDX_MODELS)

    def runtime(self, name: str) -> Snapshot | None:
        found = self._values(IDX_RUNTIMES, name)
        return found[0] if found else None

    def runtime_entries(self) -> list[Any]:
        return self._entries(IDX_RUNTIMES)

    def playground(self, namespace: str, name: str) -> Snapshot | None:
        found = self._values(IDX_PLAYGROUNDS, (namespace, name))
        return found[0] if found else None

    def playgrounds(self) -> list[Snapshot]:
        return self._objects(IDX_PLAYGROUNDS)

    def playgrounds_in(self, namespace: str) -> list[Snapshot]:
        return self._in_namespace(IDX_PLAYGROUNDS, namespace)

    def playground_count(self) -> int:
        return self._count(IDX_PLAYGROUNDS)

    def service(self, namespace: str, name: str) -> Snapshot | None:
        found = self._values(IDX_SERVICES, (namespace, name))
        return found[0] if found else None

    def services(self) -> list[Snapshot]:
        return self._objects(IDX_SERVICES)

    def services_in(self, namespace: str) -> list[Snapshot]:
        return self._in_namespace(IDX_SERVICES, namespace)

    def service_count(self) -> int:
        return self._count(IDX_SERVICES)

    def pods(self, namespace: str, workload: str) -> list[Snapshot]:
        """Pods of the LeaderWorkerSet ``workload`` (leaders and workers)."""
        return self._values(IDX_PODS, (namespace, workload))

    def nodes(self) -> list[Snapshot]:
        """Every node as ``{"name": ..., "labels": {...}}``."""
        metas = [node.get("metadata") or {} for node in self._all(IDX_NODES)]
        return [{"name": m.get("name", ""), "labels": dict(m.get("labels") or {})} for m in metas]

    def preheat_jobs(self, model: str) -> list[Snapshot]:
        return self._values(IDX_PREHEAT_JOBS, model)

    def preheat_causes(self, model: str) -> dict[str, str]:
        """The loader's failure line (termination message) by preheat Job name."""
        pods = [p for p in self._values(IDX_PREHEAT_PODS, model) if p.get("cause")]
        return {str(p["metadata"]["labels"].get(JOB_NAME_LABEL, "")): str(p["cause"]) for p in pods}

    def preheat_models(self) -> list[str]:
        """Names of the models that have preheat Jobs."""
        idx = self._raw.get(IDX_PREHEAT_JOBS)
        return sorted(str(k) for k in idx) if idx is not None else []

    def dependents(self, ref: str, name: str) -> list[tuple[str, str, str]]:
        """``(kind, namespace, name)`` of Playgrounds/Services referencing model or backend ``name``
        (``ref`` is ``"model"`` or ``"backend"``)."""
        key = RefKey(ref, name)
        out = [("Playground", ns, n) for ns, n in self._values(IDX_PLAYGROUNDS, key)]
        out += [("Service", ns, n) for ns, n in self._values(IDX_SERVICES, key)]
        return sorted(set(out))

    def owned_versions(self, owner_uid: str) -> list[tuple[str, int]]:
        """``(child_id, resourceVersion)`` of every child controlled by ``owner_uid``, none
        unpickled: what :attr:`Runtime.settled` compares."""
        out: list[tuple[str, int]] = []
        for api_version, kind, _ in CHILD_KINDS:
            index, key = owned_lookup(api_version, kind, owner_uid)
            idx = self._raw.get(index)
            if idx is None or key not in idx:
                continue
            for value in idx[key]:
                if isinstance(value, Packed):
                    out.append((value.key, value.version))
                else:
                    out.append((child_id(value), resource_version(value)))
        return out

    def owned(self, owner_uid: str, kinds: Iterable[tuple[str, str]] | None = None) -> list[Snapshot]:
        """Children controlled by ``owner_uid`` (of ``kinds`` when given)."""
        wanted = list(kinds) if kinds is not None else [(a, k) for a, k, _ in CHILD_KINDS]
        out: list[Snapshot] = []
        for api_version, kind in wanted:
            out += self._values(*owned_lookup(api_version, kind, owner_uid))
        return out


LATER_MAX_WAIT = 5.0
"""Seconds a status-only reconcile (:attr:`WorkQueue.later`) waits at most behind the others."""


@dataclass
class WorkQueue:
    """Objects waiting for a reconcile (:func:`llmaz.operator.engine.enqueue`), as
    ``(kind, namespace, name)``, oldest first after the urgent ones; each is waiting at most once."""

    waiting: dict[tuple[str, str, str], None] = field(default_factory=dict)
    urgent: dict[tuple[str, str, str], None] = field(default_factory=dict)
    """Taken before :attr:`waiting`: inference Services their Playground's reconcile just created
    or changed, so each chain Playground -> Service -> LWS and ``-lb`` Service runs through
    before the next Playground's starts (:func:`llmaz.operator.engine.enqueue`)."""
    later: dict[tuple[str, str, str], float] = field(default_factory=dict)
    """Taken after :attr:`waiting`: objects whose reconcile only brings their status up to date with
    their pods (or with their inference Service's status), with the loop time each was queued.
    While Playgrounds wait for their children, their pods' reconciles wait for them, and a burst of
    pod events for one object while it waits costs one reconcile (issue 15: at N = 1000 those
    reconciles took the CPU the operator and the API server needed to create children). One that
    has waited :data:`LATER_MAX_WAIT` is taken first, so a steady stream of new objects never
    holds a status back longer than that."""
    busy: set[tuple[str, str, str]] = field(default_factory=set)
    """Being reconciled now."""
    again: set[tuple[str, str, str]] = field(default_factory=set)
    """Busy objects queued again meanwhile: waiting once their reconcile ends."""
    again_later: set[tuple[str, str, str]] = field(default_factory=set)
    """Busy objects queued again meanwhile for their status only (and not in :attr:`again`): in
    :attr:`later` once their reconcile ends."""
    soon: dict[tuple[str, str, str], asyncio.TimerHandle] = field(default_factory=dict)
    """Objects to queue when their timer fires (:func:`llmaz.operator.engine.enqueue_soon`)."""
    verify: set[tuple[str, str, str]] = field(default_factory=set)
    """Objects whose next reconcile first asks the API server whether they still exist (one of
    their children was deleted: :func:`llmaz.operator.engine.reconcile_named`)."""
    workers: int = 0
    done: int = 0
    """Reconciles finished since start-up (:mod:`llmaz.operator.memory` trims after bursts)."""
    closed: bool = False
    """The operator is stopping (:func:`llmaz.operator.engine.drain`): nothing is queued any more,
    and the reconciles and child creates already running finish without taking new ones."""

    def depth(self) -> int:
        return len(self.waiting) + len(self.urgent) + len(self.later) + len(self.busy)

    def take(self, now: float = 0.0) -> tuple[str, str, str] | None:
        """The next object to reconcile, or ``None``: a :attr:`later` one that has waited
        :data:`LATER_MAX_WAIT` at loop time ``now``, else the urgent ones, the oldest waiting, the
        oldest later one."""
        if self.later:
            key, since = next(iter(self.later.items()))
            if now - since >= LATER_MAX_WAIT:
                del self.later[key]
                return key
        for lane in (self.urgent, self.waiting, self.later):
            if lane:
                key = next(iter(lane))
                del lane[key]
                return key
        return None


@dataclass
class Settling:
    """A status change held back until ``handle`` fires (then ``due``) and reconciles the owner."""

    handle: asyncio.TimerHandle
    deadline: float
    """Loop time at which the hold ends, unless children are being created then
    (:data:`llmaz.operator.engine.BUSY_HOLD_SECONDS`)."""
    due: bool = False


@dataclass(frozen=True)
class Settled:
    """An owner whose children held everything the render wanted: the render's inputs then, the
    children's keys and resourceVersions then, and the flavor the render chose. While both are
    the same, a reconcile neither renders nor compares children again: at N = 300 rendering,
    hashing and comparing took a fifth of the operator's CPU, mostly in reconciles a pod event
    caused (issue 15)."""

    state: bytes
    """:func:`settled_state` of the render inputs and the children."""
    flavor: str | None


@dataclass
class Creating:
    """A child whose create is in flight (:func:`llmaz.operator.engine.apply_children`)."""

    digest: str
    """Hash of the render being created."""
    stale: bool = False
    """A later reconcile of the owner rendered the child differently: reconcile the owner again
    once the create ends."""


@dataclass(frozen=True, slots=True)
class QueuedCreate:
    """A child's create waiting for a slot of its kind (:func:`llmaz.operator.engine.apply_children`)."""

    owner: Snapshot
    """The owner's apiVersion, kind, name, namespace and uid."""
    key: ObjectKey
    digest: str
    body: bytes
    """The child to create, encoded: a fraction of the memory of the rendered dicts."""


@dataclass
class CreateLine:
    """The creates of one kind: waiting in order, and how many slots are creating them."""

    waiting: deque[QueuedCreate] = field(default_factory=deque)
    running: int = 0


def _sorted_items(strings: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    """Labels or annotations in key order: comparable and hashable (four times as fast as
    ``json.dumps(..., sort_keys=True)``, 1.7 % of the operator's CPU at N = 500, issue 15)."""
    return tuple(sorted(strings.items())) if strings else ()


def reconcile_inputs(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a reconcile of a Playground or inference Service reads of the object itself, status
    aside, as a comparable value: its generation (every spec change), labels and annotations (in
    any key order) and deletion."""
    meta = obj.get("metadata") or {}
    return (
        meta.get("generation"),
        _sorted_items(meta.get("labels")),
        _sorted_items(meta.get("annotations")),
        meta.get("deletionTimestamp"),
    )


@dataclass(frozen=True)
class StatusWrite:
    """A status patch in flight (:func:`llmaz.operator.engine.patch_status_once`)."""

    status: Mapping[str, Any]
    """The status being written."""
    inputs: tuple[Any, ...]
    """:func:`reconcile_inputs` of the object the reconcile that writes it read."""


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Runtime:
    """Everything a handler needs, built once at start-up and kept in ``memo.llmaz``."""

    config: OperatorConfig
    plugins: PluginManager
    kube: Kube
    metrics: Metrics
    identity: str
    clock: Callable[[], datetime] = utcnow
    indexes: Indexes | None = None
    applied: dict[ObjectKey, tuple[str, int]] = field(default_factory=dict)
    """Child -> (hash of what we applied, resourceVersion the API server answered)."""
    contained: dict[ObjectKey, tuple[int, str]] = field(default_factory=dict)
    """Child -> (resourceVersion of the live object, hash of the desired object it was found to
    contain): the same pair again needs no field-by-field comparison."""
    fresh: dict[tuple[str, str, str], Snapshot] = field(default_factory=dict)
    """``(kind, namespace, name)`` -> the API server's answer to our apply of an inference
    Service, read by its reconcile when the watch has not brought that version yet
    (:func:`llmaz.operator.engine.reconcile_named`), and dropped by that reconcile."""
    statuses: dict[str, tuple[Any, int]] = field(default_factory=dict)
    """Owner uid -> (status we wrote, resourceVersion answered)."""
    status_writes: dict[str, StatusWrite] = field(default_factory=dict)
    """Owner uid -> its status patch waiting for the API server's answer."""
    creates: dict[ObjectKey, Creating] = field(default_factory=dict)
    """Children being created, which no reconcile waits for (:func:`llmaz.operator.engine.apply_children`)."""
    creates_of: dict[str, int] = field(default_factory=dict)
    """Owner uid -> how many of :attr:`creates` are its children."""
    create_lines: dict[tuple[str, str], CreateLine] = field(default_factory=dict)
    """``(apiVersion, kind)`` -> the creates of that kind waiting and running."""
    queue: WorkQueue = field(default_factory=WorkQueue)
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    """Named locks of work outside the queue (a model's preheat Jobs)."""
    retries: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    rechecks: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    """Owner uid -> a reconcile scheduled for when flavor fallback's decision may change."""
    settling: dict[str, Settling] = field(default_factory=dict)
    """Owner uid -> a progress-only status change waiting to be written
    (:func:`llmaz.operator.engine.write_status`)."""
    failures: dict[str, int] = field(default_factory=dict)
    scaling: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    """Playground uid -> the autoscaler problems of its last render (its ``AutoscalingReady``)."""
    child_problems: dict[str, dict[ObjectKey, tuple[str, str]]] = field(default_factory=dict)
    """Owner uid -> child -> ``(reason, message)`` of the last write of that child the API server
    refused, or of a name someone else's object holds; shown in the owner's status until a write of
    the child succeeds (:func:`llmaz.operator.engine.child_problem`)."""
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    work: set[asyncio.Task[Any]] = field(default_factory=set)
    """The reconcile workers and child-create slots among :attr:`tasks`: what a shutdown lets
    finish (:func:`llmaz.operator.engine.drain`) before it cancels the rest."""
    references: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    """Owner uid -> the ``("model"|"backend", name)`` it referenced when last seen."""
    parsed: dict[str, tuple[int, Any]] = field(default_factory=dict)
    """OpenModel/BackendRuntime uid -> (resourceVersion, the typed object or ``None`` if invalid)."""
    settled: dict[str, Settled] = field(default_factory=dict)
    """Owner uid -> what its last reconcile that wrote no child found (:class:`Settled`)."""
    usage_pending: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    """``(ref, name)`` -> loop times of the first and the last change not yet refreshed
    (:mod:`llmaz.operator.usage`)."""
    usage_flush: asyncio.Task[Any] | None = None
    gone: set[str] = field(default_factory=set)
    """uids of Playgrounds and inference Services the API server no longer has although the index
    still holds them (their deletion comes on another watch than their children's, and may come
    later; until issue 15's twenty-fourth round kopf watched them, whose relisting after 410 Gone
    never reported one deleted meanwhile). Never reconciled again: creating children for it made
    children the garbage collector deleted at once, whose deletion queued the same reconcile, in a
    loop (found by the watch-gone scenario)."""
    stores: dict[str, Any] = field(default_factory=dict)
    """The indexes of :class:`llmaz.operator.watch.Watches` (everything reconciles read) by index
    id, read through :class:`Indexes` with kopf's (preheat's)."""
    integrations: IntegrationState | None = None
    """What the integrations' passes keep (:func:`llmaz.operator.handlers.integrations.state`)."""
    listed: asyncio.Event | None = None
    """Set once those watches have listed every object once: reconciles wait for it (``None``: no
    such watches, nothing to wait for)."""

    def __post_init__(self) -> None:
        # llmaz_objects_managed is counted from the indexes when scraped, not after every reconcile
        def counter(count: Callable[[Indexes], int]) -> Callable[[], int]:
            return lambda: count(self.indexes) if self.indexes is not None else 0

        self.metrics.managed.labels(kind="Playground").set_function(counter(lambda i: i.playground_count()))
        self.metrics.managed.labels(kind="Service").set_function(counter(lambda i: i.service_count()))

    def lock(self, key: str) -> asyncio.Lock:
        lock = self.locks.get(key)
        if lock is None:
            lock = self.locks[key] = asyncio.Lock()
        return lock

    def own_echo(self, body: Mapping[str, Any]) -> bool:
        """``body`` (not a deletion) is our own write coming back through the watch: its owner's
        reconcile that made the write found nothing else to do, and would find the same again.
        Children and a Playground's inference Service arrive this way right after being created;
        reconciling their owner for it was two of every five reconciles while converging (issue 15).
        Either the object exactly as our last apply's answer left it, or, before that answer, a
        child whose create is in flight carrying the render hash being created (the answer queues
        what comes next, e.g. an inference Service's own reconcile): at N = 100 half of the
        inference Services came back before their answer, and each reconciled its Playground
        again, render included. Any other version reconciles as always."""
        key = ObjectKey.of(body)
        cached = self.applied.get(key)
        if cached is not None and cached[1] == resource_version(body):
            return True
        creating = self.creates.get(key)
        if creating is None:
            return False
        rendered = ((body.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RENDER_HASH)
        return bool(rendered) and creating.digest.startswith(str(rendered))

    @property
    def creating(self) -> int:
        """Child creates (POSTs) in flight: while there are any, progress-only status writes wait."""
        return len(self.creates)

    def own_status_echo(self, body: Mapping[str, Any]) -> bool:
        """``body`` is a Playground or inference Service exactly as our last status write left it
        (the watch bringing that write back). The reconcile that wrote it had read everything else
        it depends on, and rendered and applied with the same decision it recorded in the status
        (flavor fallback included), so reconciling it again finds nothing to do: at N = 300 those
        reconciles were a third of all (issue 15). Either the version our last patch's answer
        named, or, while the patch waits for its answer, an object holding the status being written
        and what the writing reconcile read of it (:func:`reconcile_inputs`): an inference Service's
        status coming back before its answer reconciled that Service again (at N = 100, 2.22
        inference Service reconciles per Playground to converge before, 2.00 after). Anyone else's
        write since has another resourceVersion, or other content, and reconciles as always."""
        uid = uid_of(body)
        cached = self.statuses.get(uid)
        if cached is not None and cached[1] == resource_version(body):
            return True
        writing = self.status_writes.get(uid)
        return (
            writing is not None
            and not status_changed(body.get("status"), writing.status)
            and reconcile_inputs(body) == writing.inputs
        )

    def forget(self, uid: str) -> None:
        """Drop what is kept for a deleted owner."""
        self.gone.discard(uid)  # its deletion has reached the indexes: it is not found any more
        self.statuses.pop(uid, None)
        self.failures.pop(uid, None)
        self.child_problems.pop(uid, None)
        self.scaling.pop(uid, None)
        self.references.pop(uid, None)
        self.settled.pop(uid, None)
        for timers in (self.retries, self.rechecks):
            handle = timers.pop(uid, None)
            if handle is not None:
                handle.cancel()
        settling = self.settling.pop(uid, None)
        if settling is not None:
            settling.handle.cancel()

    def forget_child(self, key: ObjectKey) -> None:
        """Drop what is kept of our last write of a child that is gone (deleted, or pruned by us):
        its owner's next reconcile must create it again, not take its absence for a write the
        watch has not brought yet."""
        self.applied.pop(key, None)
        self.contained.pop(key, None)

    def spawn(self, coro: Any, *, work: bool = False) -> None:
        """Run ``coro`` in the background, keeping a reference until it ends; ``work``: it is a
        reconcile worker or create slot (:attr:`work`)."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        if work:
            self.work.add(task)
            task.add_done_callback(self.work.discard)


def owner_reference(owner: Snapshot, *, block_owner_deletion: bool = True) -> dict[str, Any]:
    """The controller owner reference every child carries. ``block_owner_deletion`` needs update
    on the owner's ``finalizers`` subresource; children nothing waits for go without it."""
    meta = owner["metadata"]
    ref: dict[str, Any] = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    if block_owner_deletion:
        ref["blockOwnerDeletion"] = True
    return ref
