"""A lean list-and-watch, with indexes of its own, for the high-volume kinds whose events only feed
an index and, now and then, queue a reconcile: the children the operator creates (LeaderWorkerSets,
``-lb`` Services, HPAs, ResourceClaimTemplates) and serving pods.

kopf runs a generic pipeline for every event of every watched object (its per-object memory, a
patch, three loggers, throttling, index handlers, cause detection, handler invocation): in issue
15's profile that was ~30 % of the operator's CPU while it created children, ten times what the
handlers themselves took, and most of those events were of these kinds (a LeaderWorkerSet's
status changes while its pods start; every pod event). Here an event costs its JSON decoding, an
index update and one plain function call.

Each :class:`WatchedKind` is listed (in pages) and then watched from the list's resourceVersion,
with bookmarks, per namespace the operator serves (or cluster-wide). A watch that ends is resumed
from the last resourceVersion seen; one the API server no longer can resume (410 Gone) is listed
again, and what the new listing lacks is handled as deleted, what changed as modified (kopf sent a
relisting as unchanged objects). Connection failures are retried with growing delays. Reconciles
wait for :attr:`Watches.listed`, the first complete listing of every kind (else a reconcile at
start-up would not see children that exist and would try to create them again); a kind the API
server refuses (not served, or no permission) counts as listed, is logged and retried, so one
missing CRD does not stop every reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from llmaz.operator.kube import USER_AGENT, Kube, decode, resource_path
from llmaz.operator.runtime import Packed, resource_version, uid_of

log = logging.getLogger("llmaz.operator")

WATCH_SECONDS = 300
"""How long the API server keeps one watch request open (``timeoutSeconds``); it is then resumed."""
INACTIVITY_SECONDS = 70.0
"""A watch that delivers nothing, not even a bookmark (the API server sends one about every 60 s),
for this long is taken as dead and resumed on a new connection: a connection a load balancer
silently dropped would otherwise hide every change until ``WATCH_SECONDS`` ran out (kopf's
inactivity timeout, which its watches keep, is the same)."""
PAGE_SIZE = 500
"""Objects per page of a listing."""
RETRY_DELAYS = (0.5, 1.0, 2.0, 3.0, 5.0)
"""Seconds before a failed list or watch is tried again, growing with each failure in a row up to
5 s: one request per kind, and after an outage of the API server (or of the path to it) the
operator catches up within seconds of its return (with delays of 1, 2, 5, 10 and 30 s it converged
6.1 s after the proxy of the watch-gone fault test reopened; 2.4-3.7 s when kopf, which reconnects
within 0.1-5 s, watched the children)."""
REFUSED_RETRY_SECONDS = 60.0
"""Seconds before a kind the API server refused (:data:`REFUSED`) is tried again."""
REFUSED = frozenset({403, 404})
"""Answers that say the kind cannot be watched at all (no permission, not served); any other error
is retried after :data:`RETRY_DELAYS`."""
LISTING_GRACE_SECONDS = 60.0
"""How long reconciles wait for a kind whose first listing keeps failing with an error that may
pass (5xx, 429: a CRD's broken conversion webhook, say). After that they go on without it, the
listing still retried: one failing kind must not stop every Playground from being reconciled
(and from saying in its status what is wrong), while an API server that is only restarting has
that long to come back."""

Handler = Callable[[str | None, Mapping[str, Any]], None]
"""Called with each event's type (``ADDED``, ``MODIFIED``, ``DELETED``; ``None`` for the first
listing) and object, after the index holds the change."""


Entries = Mapping[Any, Any]
"""What an index keeps of one object: index key -> value (several keys, e.g. a Playground by
``(namespace, name)`` and by each model it references; none keeps the object out)."""


def keyed(
    key_of: Callable[[Mapping[str, Any]], Any], value_of: Callable[[Mapping[str, Any]], Any]
) -> Callable[[Mapping[str, Any]], Entries]:
    """The ``entries_of`` of a kind indexed under one key per object (``key_of`` returning ``None``
    keeps it out)."""

    def entries_of(obj: Mapping[str, Any]) -> Entries:
        key = key_of(obj)
        return {} if key is None else {key: value_of(obj)}

    return entries_of


def first_packed(entries: Entries) -> Mapping[str, Any]:
    """The body kept among an object's entries (its one :class:`~llmaz.operator.runtime.Packed`
    value, unpacked): the ``body_of`` of every watched kind."""
    return next(v for v in entries.values() if isinstance(v, Packed)).load()


class Store(Mapping[Any, Collection[Any]]):
    """An index as :class:`~llmaz.operator.runtime.Indexes` reads it (kopf's have the same shape):
    index key -> the values of the objects under it. ``entries_of`` gives an object's keys and
    values."""

    def __init__(self, entries_of: Callable[[Mapping[str, Any]], Entries]) -> None:
        self._entries_of = entries_of
        self._by_key: dict[Any, dict[str, Any]] = {}
        self._where: dict[str, tuple[Any, ...]] = {}

    def put(self, obj: Mapping[str, Any]) -> None:
        uid = uid_of(obj)
        entries = self._entries_of(obj)
        keys = tuple(entries)
        if self._where.get(uid, keys) != keys:
            self.discard(uid)
        if not keys:
            return
        for key, value in entries.items():
            self._by_key.setdefault(key, {})[uid] = value
        self._where[uid] = keys

    def discard(self, uid: str) -> None:
        for key in self._where.pop(uid, ()):
            bucket = self._by_key[key]
            bucket.pop(uid, None)
            if not bucket:
                del self._by_key[key]

    def kept(self, uid: str) -> Entries | None:
        """What is kept of object ``uid`` (its entries), or ``None``."""
        keys = self._where.get(uid)
        return None if keys is None else {key: self._by_key[key][uid] for key in keys}

    def __getitem__(self, key: Any) -> Collection[Any]:
        return self._by_key[key].values()

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __iter__(self) -> Iterator[Any]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)


@dataclass(frozen=True)
class WatchedKind:
    """One kind to list and watch: what (``api_version``, ``kind``; both are filled into listed
    items, which the API server sends without them), which objects (``selector``, a label
    selector the API server applies; empty: all), the index it fills (``store_id``,
    ``entries_of``; a deletion found by relisting is handled with the body kept there, see
    :func:`first_packed`), and the ``handler`` of its events. ``resource`` is the
    ``llmaz_watch_events_total`` label. A kind that is not ``namespaced`` is watched cluster-wide
    even when the operator serves some namespaces only; one with a ``namespace`` is watched there
    only, whatever the operator serves (preheat's Jobs and pods, in the preheat namespace).
    ``metadata_only``: the API server sends each object's metadata only (``PartialObjectMetadata``:
    name, uid, resourceVersion, labels, annotations...), for a kind whose index keeps nothing else
    (nodes: most of their events are status updates, and the status is left out)."""

    api_version: str
    kind: str
    selector: str
    store_id: str
    entries_of: Callable[[Mapping[str, Any]], Entries]
    handler: Handler
    resource: str
    namespaced: bool = True
    namespace: str | None = None
    metadata_only: bool = False

    def path(self, namespace: str | None) -> str:
        return resource_path(self.api_version, self.kind, namespace)


class WatchGone(Exception):
    """The API server cannot resume the watch from our resourceVersion (410): list again."""


class _Refused(Exception):
    """The API server answered the list or watch with an error (other than 410 Gone)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message[:300]}")
        self.status = status


class Watches:
    """The streams of every :class:`WatchedKind` in every namespace served, with their indexes
    (:attr:`stores`, by ``store_id``) and :attr:`listed`."""

    def __init__(
        self,
        kube: Kube,
        kinds: Collection[WatchedKind],
        namespaces: Collection[str],
        count_event: Callable[[str], None],
    ) -> None:
        self._kube = kube
        self._count = count_event
        self.stores: dict[str, Store] = {k.store_id: Store(k.entries_of) for k in kinds}
        scopes: list[str | None] = list(namespaces) or [None]  # None: cluster-wide
        self._streams = [_Stream(self, kind, ns) for kind in kinds for ns in _scopes(kind, scopes)]
        self._unlisted = set(range(len(self._streams)))
        self._failing: set[int] = set()
        self.listed = asyncio.Event()
        """Set once every stream has listed its objects once (or found its kind refused)."""
        if not self._streams:
            self.listed.set()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(s.run(i)) for i, s in enumerate(self._streams)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def stream(self, kind: str, namespace: str | None = None, *, store_id: str | None = None) -> _Stream:
        """The stream of ``kind`` in ``namespace`` (``None``: cluster-wide); ``store_id`` tells
        apart two watches of one kind (serving pods and preheat pods)."""
        return next(
            s
            for s in self._streams
            if s.kind.kind == kind and s.namespace == namespace and store_id in (None, s.kind.store_id)
        )

    def _failed(self, index: int) -> bool:
        """Record that stream ``index`` failed; True when no stream was failing before (an outage
        of the API server fails every stream at once: one log line for all of them, kopf's
        retries being cut to one line per failing request too)."""
        first = not self._failing
        self._failing.add(index)
        return first

    def _connected(self, index: int) -> None:
        self._failing.discard(index)

    def _done_listing(self, index: int) -> None:
        self._unlisted.discard(index)
        if not self._unlisted:
            self.listed.set()

    async def _get(
        self, path: str, params: dict[str, str], read_timeout: float, accept: str = "application/json"
    ) -> aiohttp.ClientResponse:
        conn = self._kube.connection
        headers = {"Accept": accept, "User-Agent": USER_AGENT}
        # an exec plugin run is not for the event loop
        headers.update(
            await asyncio.to_thread(conn.auth_headers) if conn.auth_may_block() else conn.auth_headers()
        )
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout)
        # (the session is the Kube's, closed with it)
        return await self._kube.session().get(
            conn.server + path,
            params=params,
            headers=headers,
            timeout=timeout,
            server_hostname=conn.tls_server_name,
        )


def _scopes(kind: WatchedKind, served: list[str | None]) -> list[str | None]:
    if kind.namespace is not None:
        return [kind.namespace]
    return served if kind.namespaced else [None]


_METADATA_ONLY = "application/json;as={};g=meta.k8s.io;v=v1,application/json"
"""``Accept`` of a metadata-only list (``PartialObjectMetadataList``) or watch
(``PartialObjectMetadata``); plain JSON is the fallback of an API server that cannot convert."""


class _Stream:
    """One kind in one namespace (or all)."""

    def __init__(self, owner: Watches, kind: WatchedKind, namespace: str | None) -> None:
        self._owner = owner
        self.kind = kind
        self.namespace = namespace
        self._path = kind.path(namespace)
        self._store = owner.stores[kind.store_id]
        self._known: dict[str, int] = {}
        """uid -> resourceVersion of every object this stream has seen and not seen deleted."""
        self._listed_once = False
        self._index = 0
        self._version: str | None = None
        """Where a watch resumes: the resourceVersion of the last event or bookmark taken (a
        watch that breaks mid-stream goes on from there, not from where it started: every event
        since would be taken again, older states after newer ones, and an old version is more
        likely to be 410 Gone, which lists every object again); ``None``: list first."""
        meta = kind.metadata_only
        self._accept_list = _METADATA_ONLY.format("PartialObjectMetadataList") if meta else "application/json"
        self._accept_watch = _METADATA_ONLY.format("PartialObjectMetadata") if meta else "application/json"

    def _where(self) -> str:
        return self.kind.resource + (f" in {self.namespace}" if self.namespace else "")

    async def run(self, index: int) -> None:
        self._index = index
        failures = 0
        self._version = None
        started = asyncio.get_running_loop().time()
        while True:
            try:
                if self._version is None:
                    self._version = await self._list()
                    self._owner._done_listing(index)
                await self._watch()
                failures = 0
            except WatchGone:
                self._version = None
            except TimeoutError:
                # nothing arrived for INACTIVITY_SECONDS: resume at once on a new connection (a
                # listing that timed out is retried the same way)
                log.debug("watch of %s silent for %.0fs: resuming", self._where(), INACTIVITY_SECONDS)
            except _Refused as err:
                if err.status not in REFUSED:
                    self._past_grace(started, err)
                    await self._retry(failures, err)  # 401 (a token to refresh), 429, 5xx...
                    failures += 1
                    continue
                # not served (a CRD not installed) or no permission: reconciles need not wait for it
                self._owner._done_listing(index)
                log.warning("cannot watch %s: %s (retry in %.0fs)", self._where(), err, REFUSED_RETRY_SECONDS)
                self._version = None
                await asyncio.sleep(REFUSED_RETRY_SECONDS)
            except (aiohttp.ClientError, OSError, ValueError) as err:
                self._past_grace(started, err)
                await self._retry(failures, err)
                failures += 1

    def _past_grace(self, started: float, err: Exception) -> None:
        """Let reconciles go on without this kind once its first listing has failed for
        :data:`LISTING_GRACE_SECONDS` (once; the listing goes on being retried)."""
        if self._listed_once or self._index not in self._owner._unlisted:
            return
        if asyncio.get_running_loop().time() - started < LISTING_GRACE_SECONDS:
            return
        log.warning(
            "could not list %s for %.0fs (%s): reconciling without it until it can be listed",
            self._where(),
            LISTING_GRACE_SECONDS,
            str(err) or type(err).__name__,
        )
        self._owner._done_listing(self._index)

    async def _retry(self, failures: int, err: Exception) -> None:
        delay = RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)]
        reason = str(err) or type(err).__name__
        level = logging.WARNING if self._owner._failed(self._index) else logging.DEBUG
        log.log(level, "watch of %s failed (retry in %.1fs): %s", self._where(), delay, reason)
        await asyncio.sleep(delay)

    async def _list(self) -> str:
        """List every object, a page at a time (each page handled before the next is fetched, so
        a large listing is never held decoded all at once); the listing's resourceVersion."""
        first = not self._listed_once
        seen: set[str] = set()
        params = {"labelSelector": self.kind.selector, "limit": str(PAGE_SIZE)}
        while True:
            async with await self._owner._get(self._path, params, 60, self._accept_list) as answer:
                if answer.status == 410 and "continue" in params:
                    # the continue token expired: list from the start (seen objects stay seen)
                    params = {"labelSelector": self.kind.selector, "limit": str(PAGE_SIZE)}
                    continue
                data = await answer.read()
                if answer.status >= 400:
                    raise _Refused(answer.status, _message(data.decode("utf-8", errors="replace")))
            self._owner._connected(self._index)
            page = decode(data)
            del data
            self._take_page(page.get("items") or [], seen, first)
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                self._end_listing(seen)
                return str(meta.get("resourceVersion") or "")
            params = {**params, "continue": str(meta["continue"])}

    def relisted(self, items: list[dict[str, Any]]) -> None:
        """Take a complete listing: the first one as the initial state (events of type ``None``);
        a later one (after 410 Gone) as the changes since the last event seen: new or changed
        objects as ``ADDED`` / ``MODIFIED``, objects it lacks as ``DELETED``."""
        seen: set[str] = set()
        self._take_page(items, seen, not self._listed_once)
        self._end_listing(seen)

    def _take_page(self, items: list[dict[str, Any]], seen: set[str], first: bool) -> None:
        for obj in items:
            obj.setdefault("apiVersion", self.kind.api_version)  # items of a list come without them
            obj.setdefault("kind", self.kind.kind)
            uid = uid_of(obj)
            seen.add(uid)
            before = self._known.get(uid)
            if not first and before == resource_version(obj):
                continue
            self._dispatch(None if first else ("ADDED" if before is None else "MODIFIED"), obj)

    def _end_listing(self, seen: set[str]) -> None:
        self._listed_once = True
        for uid in [u for u in self._known if u not in seen]:
            kept = self._store.kept(uid)
            self._known.pop(uid, None)
            self._store.discard(uid)
            if kept:
                self._handle("DELETED", first_packed(kept))

    async def _watch(self) -> None:
        """Watch from :attr:`_version` until the API server ends the watch, keeping
        :attr:`_version` at the last event taken."""
        params = {
            "watch": "1",
            "labelSelector": self.kind.selector,
            "resourceVersion": self._version or "",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        answering = self._owner._get(self._path, params, INACTIVITY_SECONDS, self._accept_watch)
        async with await answering as answer:
            if answer.status == 410:
                raise WatchGone
            if answer.status >= 400:
                raise _Refused(answer.status, _message(await answer.text()))
            self._owner._connected(self._index)
            pending = b""
            async for chunk in answer.content.iter_any():
                pending += chunk
                if b"\n" not in chunk:
                    continue
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        self._version = self.event(decode(line), self._version or "")

    def event(self, event: Mapping[str, Any], version: str) -> str:
        """Take one watch event; the resourceVersion to resume from after it."""
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise WatchGone
            raise _Refused(int(obj.get("code") or 0), str(obj.get("message") or ""))
        seen = str((obj.get("metadata") or {}).get("resourceVersion") or version)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._dispatch(str(kind), obj)
        return seen

    def _dispatch(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        uid = uid_of(obj)
        if kind == "DELETED":
            self._known.pop(uid, None)
            self._store.discard(uid)
        else:
            self._known[uid] = resource_version(obj)
            self._store.put(obj)
        self._handle(kind, obj)

    def _handle(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        self._owner._count(self.kind.resource)
        try:
            self.kind.handler(kind, obj)
        except Exception:  # a bug in a handler must not end the watch
            log.exception("handling %s %s of %s failed", kind or "listed", uid_of(obj), self._where())


def _message(text: str) -> str:
    with contextlib.suppress(ValueError, AttributeError):
        return str(json.loads(text).get("message", text))
    return text
