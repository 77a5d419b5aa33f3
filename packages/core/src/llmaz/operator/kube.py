"""The operator's Kubernetes API adapter: server-side apply, delete, status patch, Events, Leases.

A thin layer over urllib3 (blocking calls, run in a thread) and aiohttp (the same operations on
the event loop, for the reconciles' child and status writes), reaching the API server as
:mod:`llmaz.operator.connection` says (a kubeconfig or the in-cluster ServiceAccount). Every write
is counted in :class:`~llmaz.operator.metrics.Metrics`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import orjson
import urllib3

from llmaz.api.conventions import MANAGER
from llmaz.operator import connection
from llmaz.operator.connection import Connection, ConnectionConfigError

FIELD_MANAGER = MANAGER
"""Field manager of every server-side apply and patch the operator makes."""
USER_AGENT = f"{MANAGER}-operator"
"""The ``User-Agent`` of every request (what the API server's audit log and metrics show)."""
TIMEOUT = urllib3.Timeout(total=30)
"""A request that has not been answered after this long fails as :class:`KubeUnreachable`."""
ATIMEOUT = aiohttp.ClientTimeout(total=30)
""":data:`TIMEOUT` of requests on the event loop."""
T = TypeVar("T")

_KNOWN_PLURALS: dict[str, str] = {
    "Service": "services",
    "LeaderWorkerSet": "leaderworkersets",
    "HorizontalPodAutoscaler": "horizontalpodautoscalers",
    "Playground": "playgrounds",
    "BackendRuntime": "backendruntimes",
    "OpenModel": "openmodels",
    "Event": "events",
    "Lease": "leases",
}


def decode(data: bytes | str) -> Any:
    """A JSON document from the API server (an answer, a listing, one watch event). orjson decodes
    them 2.5 times as fast as :func:`json.loads`, which was the operator's largest single share of
    CPU while it created children (9 % at N = 500 Playgrounds, issue 15). An integer beyond 64 bits
    comes back as a float, as the API server itself keeps such a number."""
    return orjson.loads(data)


def encode(body: Any) -> bytes:
    """A request body as JSON (orjson: 14 times as fast as :func:`json.dumps` on a
    LeaderWorkerSet). An integer beyond 64 bits, which orjson refuses, is written by :mod:`json`."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()


def plural_of(kind: str) -> str:
    """Resource name of a kind (the kinds llmaz and its plugins render; else lowercase + s)."""
    return _KNOWN_PLURALS.get(kind, kind.lower() + "s")


def resource_path(api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
    """``/apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>]`` (``/api/v1`` for the core group)."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{plural_of(kind)}"
    if name:
        base += f"/{name}"
    return base


MAX_MESSAGE = 300
"""Characters of the API server's message shown in a :class:`KubeError` (``message`` keeps it all).
A restarted API server's 403 appends its RBAC cache misses: 785 to 918 characters per log line."""


class KubeError(RuntimeError):
    """A failed API call: HTTP status and the API server's message."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        message = body
        with contextlib.suppress(ValueError, AttributeError):
            message = json.loads(body).get("message", body)
        shown = message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."
        super().__init__(f"{method} {path}: HTTP {status}: {shown}")
        self.method = method
        self.path = path.partition("?")[0]
        self.status = status
        self.message = message
        self.shown = shown

    @property
    def brief(self) -> str:
        """The error without the namespace part of the path (``GET backends.gateway.envoyproxy.io:
        HTTP 403: ...``), for a log line that names the namespace already: a restarted API server's
        403 for one list in a long namespace made a 535-character line (issue 16's bound is 500)."""
        parts = self.path.strip("/").split("/")
        group = parts[1] if parts[:1] == ["apis"] and len(parts) > 1 else ""
        if "namespaces" in parts[:-1]:
            parts = parts[parts.index("namespaces") + 2 :]
        else:
            parts = parts[3 if group else 2 :]
        target = "/".join(parts) or self.path
        if group and parts:
            target = "/".join([f"{parts[0]}.{group}", *parts[1:]])
        return f"{self.method} {target}: HTTP {self.status}: {self.shown}"


class KubeUnreachable(ConnectionError):
    """The API server did not answer (refused, reset, timed out after the transport's retries).

    An ``OSError``, so every ``except (KubeError, OSError)`` treats it as the transient fault it is;
    urllib3's own ``MaxRetryError`` is not one, and escaped the Lease renewal loop (issue 16).
    """


class NameTaken(KubeError):
    """A child could not be created: an object of its name exists that llmaz may not take over
    (``why``: not made by llmaz, or controlled by another object)."""

    def __init__(self, key: ObjectKey, why: str) -> None:
        path = resource_path(key.api_version, key.kind, key.namespace or None, key.name)
        super().__init__("POST", path, 409, f"{key.kind} {key.namespace}/{key.name} exists and {why}")
        self.why = why


def namespace_terminating(err: BaseException) -> bool:
    """A write refused because its namespace is being deleted (403 from admission,
    ``NamespaceLifecycle``) or is gone already (404 naming the namespace): retrying cannot help,
    and the object being reconciled goes with its namespace. Seen after the random kill loop: the
    next operator logged 420, then 49, retry lines for the 50 Playgrounds of that namespace."""
    if not isinstance(err, KubeError):
        return False
    if err.status == 403:
        return "because it is being terminated" in err.message
    return err.status == 404 and err.message.startswith('namespaces "')


def status_target_gone(
    err: BaseException, api_version: str, kind: str, namespace: str | None, name: str
) -> bool:
    """A status patch of this very object answered 404: it was deleted while being reconciled, and
    its deletion event is on its way; a retry would find nothing to do. Seen after namespace
    deletions: 159 retry lines of Playgrounds that were gone (issue 16)."""
    if not isinstance(err, KubeError) or err.status != 404:
        return False
    return bool(err.path == resource_path(api_version, kind, namespace, name) + "/status")


MAX_REASON = 120
"""Characters of a transport failure's text kept in a :class:`KubeUnreachable` message."""


def transport_reason(err: BaseException) -> str:
    """The innermost cause of a urllib3 transport error as ``Type: text`` (at most
    :data:`MAX_REASON` characters). urllib3's own text repeats the pool, host, port and URL around
    it: 450 to 620 characters per log line in the watch-410 scenario (issue 16)."""
    inner = err
    for _ in range(8):  # MaxRetryError -> SSLError -> SSLEOFError, ProtocolError -> OSError, ...
        cause = getattr(inner, "reason", None)
        if not isinstance(cause, BaseException):
            cause = next((a for a in inner.args if isinstance(a, BaseException)), None)
        if cause is None or cause is inner:
            break
        inner = cause
    text = f"{type(inner).__name__}: {inner}"
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


@dataclass(frozen=True)
class ObjectKey:
    """Identity of one object: ``(apiVersion, kind, namespace, name)``."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectKey:
        meta = obj.get("metadata") or {}
        return cls(
            str(obj.get("apiVersion", "")),
            str(obj.get("kind", "")),
            str(meta.get("namespace") or ""),
            str(meta.get("name", "")),
        )


WriteHook = Callable[[str, str], None]
"""Called with ``(verb, kind)`` after every write request (metrics)."""

Fence = Callable[[], "str | None"]
"""Asked before every write except to Leases: a reason to refuse it, or ``None`` (leader election's
:meth:`~llmaz.operator.leader.LeaderElector.fence`)."""


class WriteFenced(KubeError):
    """A write refused by this process itself: it may no longer be the leader (issue 16)."""

    def __init__(self, method: str, path: str, reason: str) -> None:
        super().__init__(method, path, 0, f"write refused: {reason}")


class Kube:
    """Kubernetes API calls for the operator, blocking or on the event loop.

    Each operation (get, apply, create, create-or-apply, delete, status patch, Event) is written
    once, as the requests it makes (:data:`Steps`), and sent either way: the blocking methods
    (``create_or_apply``; run in a thread, or by the Lease keeper in its own) send through urllib3,
    their ``*_async`` twins through aiohttp on the event loop. The reconciles write children and
    statuses with the latter: a request from a thread cost the operator ~1.1 ms of CPU (urllib3,
    the hand-off to and from the thread), on the loop ~0.55 ms (1500 POSTs to the real API server,
    issue 15), and that CPU is what the API server lacks while children are created."""

    def __init__(
        self,
        connection: Connection,
        on_write: WriteHook | None = None,
        pool_size: int = 8,
        retries: int | None = None,
    ) -> None:
        self.connection = connection
        self._on_write = on_write
        self.fence: Fence | None = None
        self._pool_args: dict[str, Any] = {"maxsize": pool_size}
        if retries is not None:  # of the blocking requests (urllib3's default: 3)
            self._pool_args["retries"] = retries
        self._certificate = connection.client_certificate()
        self._ssl = connection.ssl_context()
        self._pool = self._new_pool()
        self._tls_lock = threading.Lock()
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self._session_ssl: ssl.SSLContext | None = None
        self._closing: set[asyncio.Task[None]] = set()

    @classmethod
    def connect(
        cls,
        kubeconfig: Path | None = None,
        on_write: WriteHook | None = None,
        pool_size: int = 8,
        retries: int | None = None,
    ) -> Kube:
        """From ``kubeconfig``, else the in-cluster account, else ``$KUBECONFIG``/``~/.kube/config``
        (:func:`llmaz.operator.connection.load`)."""
        return cls(connection.load(kubeconfig), on_write, pool_size, retries)

    def credentials(self) -> dict[str, Any]:
        """Server, CA, client certificate or token of this client, for kopf's own login."""
        return self.connection.kopf_credentials()

    # ---------------------------------------------------------------- transport

    def _new_pool(self) -> urllib3.PoolManager:
        args = dict(self._pool_args)
        if self._ssl is not None:
            args["ssl_context"] = self._ssl
            if self.connection.tls_server_name:
                args["server_hostname"] = self.connection.tls_server_name
        return urllib3.PoolManager(num_pools=2, **args)

    def _renew_tls(self) -> None:
        """Make the TLS settings again when the connection's client certificate is no longer the
        one they were made from (an exec plugin gave a new one before the old expired). Requests
        from then on connect with it: the blocking pool is replaced, and the event loop's session
        (:meth:`session`) with its keep-alive connections, as client-go closes its connections on
        a certificate rotation; a watch on an old connection is resumed on a new one."""
        if self.connection.client_certificate() == self._certificate:
            return
        with self._tls_lock:
            certificate = self.connection.client_certificate()
            if certificate == self._certificate:
                return
            try:
                context = self.connection.ssl_context()
            except ConnectionConfigError as err:  # the plugin's files unusable: retried
                raise KubeUnreachable(f"client certificate: {err}") from err
            old = self._pool
            self._ssl, self._certificate = context, certificate
            self._pool = self._new_pool()
        old.clear()

    def session(self) -> aiohttp.ClientSession:
        """The HTTP session of the running event loop (made on first use, and again after a
        client certificate renewal): :meth:`arequest` and the operator's own watches
        (:mod:`llmaz.operator.watch`) share it."""
        loop = asyncio.get_running_loop()
        self._renew_tls()
        session = self._session
        if (
            session is None
            or session.closed
            or self._session_loop is not loop
            or self._session_ssl is not self._ssl
        ):
            if session is not None and not session.closed and self._session_loop is loop:
                task = loop.create_task(session.close())  # a renewal: its connections end
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
            # (a session of another loop is that loop's to close: tests run one loop each)
            session = self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else True, limit=0)
            )
            self._session_loop, self._session_ssl = loop, self._ssl
        return session

    async def aclose(self) -> None:
        """Close the event loop's HTTP session (at shutdown)."""
        if self._session is not None and self._session_loop is asyncio.get_running_loop():
            await self._session.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        self._session = self._session_loop = self._session_ssl = None

    def _auth(self, method: str, path: str, headers: Callable[[], dict[str, str]]) -> dict[str, str]:
        try:
            return headers()
        except ConnectionConfigError as err:  # a token file gone, an exec plugin failing: retried
            raise KubeUnreachable(f"{method} {path.partition('?')[0]}: credentials: {err}") from err

    @staticmethod
    def _headers(content_type: str, auth: Mapping[str, str]) -> dict[str, str]:
        return {"Accept": "application/json", "Content-Type": content_type, "User-Agent": USER_AGENT, **auth}

    @staticmethod
    def _payload(body: Any) -> Any:
        # a body is JSON for JSON and YAML (apply) content types alike: JSON is YAML
        return body if body is None or isinstance(body, bytes | str) else encode(body)

    def _answer(self, method: str, path: str, resource: str, status: int, data: bytes) -> Any:
        if method != "GET" and self._on_write is not None:
            self._on_write(method, resource)
        if status >= 400:
            raise KubeError(method, path, status, data.decode("utf-8", errors="replace"))
        return decode(data) if data else None

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        resource: str = "",
    ) -> Any:
        """One blocking request; returns the decoded JSON answer. Raises :class:`KubeError` on HTTP
        >= 400, :class:`WriteFenced` for a write the fence refuses (nothing is sent),
        :class:`KubeUnreachable` when the API server does not answer."""
        fenced = self.check_fence(method, path, resource)
        url_path = path + ("?" + urllib.parse.urlencode(dict(query)) if query else "")
        headers = self._headers(content_type, self._auth(method, path, self.connection.auth_headers))
        self._renew_tls()  # after the headers: making them may have renewed the certificate
        # a fenced write is sent once: urllib3's own retries would send it again later, unchecked
        # (the caller's retry goes through the fence again)
        extra: dict[str, Any] = {"retries": False} if fenced else {}
        try:
            response = self._pool.request(
                method,
                self.connection.server + url_path,
                headers=headers,
                body=self._payload(body),
                timeout=TIMEOUT,
                **extra,
            )
            # the body is read here too: a connection broken mid-answer (ProtocolError) is as
            # transient as a refused one, and escaped as a handler traceback (issue 16, resets)
            data = response.data
        except urllib3.exceptions.HTTPError as err:
            raise KubeUnreachable(f"{method} {path.partition('?')[0]}: {transport_reason(err)}") from err
        return self._answer(method, path, resource, response.status, data or b"")

    async def arequest(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        resource: str = "",
    ) -> Any:
        """:meth:`request` on the event loop. A connection the API server closed while it was idle
        in the pool (or reset) is tried once more on a new one: every operation here is safe to
        repeat (a repeated create answers 409, which creating children handles); a fenced write
        is checked against the fence again before it is sent again."""
        self.check_fence(method, path, resource)
        conn = self.connection
        auth = conn.auth_headers if not conn.auth_may_block() else None
        if auth is not None:
            headers = self._headers(content_type, self._auth(method, path, auth))
        else:  # an exec plugin is run: not on the event loop
            got = await asyncio.to_thread(self._auth, method, path, conn.auth_headers)
            headers = self._headers(content_type, got)
        payload = self._payload(body)
        for attempt in (1, 2):
            if attempt == 2:
                self.check_fence(method, path, resource)
            try:
                async with self.session().request(
                    method,
                    conn.server + path,
                    params=query,
                    headers=headers,
                    data=payload,
                    timeout=ATIMEOUT,
                    server_hostname=conn.tls_server_name,
                ) as response:
                    data = await response.read()
                    status = response.status
                break
            except aiohttp.ClientConnectionError as err:
                if attempt == 1 and not isinstance(err, TimeoutError):
                    continue
                raise KubeUnreachable(f"{method} {path}: {transport_reason(err)}") from err
            except (aiohttp.ClientError, TimeoutError) as err:
                raise KubeUnreachable(f"{method} {path}: {transport_reason(err)}") from err
        return self._answer(method, path, resource, status, data)

    def run(self, steps: Steps[T]) -> T:
        """Carry out an operation with blocking requests (:meth:`request`)."""
        answer: Any = None
        error: Exception | None = None
        while True:
            try:
                call = steps.send(answer) if error is None else steps.throw(error)
            except StopIteration as done:
                result: T = done.value
                return result
            try:
                answer, error = self.request(call.method, call.path, **call.options()), None
            except Exception as err:  # the operation decides: e.g. 404 on a get, 409 on a create
                answer, error = None, err

    async def arun(self, steps: Steps[T]) -> T:
        """Carry out an operation on the event loop (:meth:`arequest`)."""
        answer: Any = None
        error: Exception | None = None
        while True:
            try:
                call = steps.send(answer) if error is None else steps.throw(error)
            except StopIteration as done:
                result: T = done.value
                return result
            try:
                answer, error = await self.arequest(call.method, call.path, **call.options()), None
            except Exception as err:  # the operation decides: e.g. 404 on a get, 409 on a create
                answer, error = None, err

    def check_fence(self, method: str, path: str, resource: str) -> bool:
        """Raise :class:`WriteFenced` when ``fence`` refuses this write (Lease writes always pass:
        they are how leadership is kept or handed over); ``True`` when the fence let it pass."""
        if method == "GET" or resource == "leases" or self.fence is None:
            return False
        reason = self.fence()
        if reason is not None:
            raise WriteFenced(method, path, reason)
        return True

    # ---------------------------------------------------------------- objects (blocking)

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object, or ``None`` when it does not exist."""
        return self.run(get_steps(api_version, kind, namespace, name))

    def apply(self, obj: Mapping[str, Any], *, force: bool = True) -> dict[str, Any]:
        """Server-side apply ``obj`` with field manager ``llmaz`` (taking back fields we own)."""
        return self.run(apply_steps(obj, force=force))

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``obj`` (:func:`create_steps`)."""
        return self.run(create_steps(obj))

    def claim_fields(self, key: ObjectKey, attempts: int = 5) -> bool:
        """Claim the fields of our POST for our apply (:func:`claim_fields_steps`)."""
        return self.run(claim_fields_steps(key, attempts))

    def create_or_apply(
        self,
        obj: Mapping[str, Any],
        *,
        exists: bool,
        held: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> dict[str, Any]:
        """Write a child (:func:`create_or_apply_steps`)."""
        return self.run(create_or_apply_steps(obj, exists=exists, held=held))

    def delete(self, key: ObjectKey, uid: str | None = None) -> bool:
        """Delete (:func:`delete_steps`); ``False`` if already gone."""
        return self.run(delete_steps(key, uid))

    def patch_status(  # noqa: PLR0917
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any],
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Merge-patch ``status`` (:func:`patch_status_steps`)."""
        return self.run(patch_status_steps(api_version, kind, namespace, name, status, resource_version))

    def post_event(self, event: Mapping[str, Any]) -> None:
        """Create one ``v1`` Event (failures are the caller's to log, never fatal)."""
        self.run(post_event_steps(event))

    # ---------------------------------------------------------------- objects (event loop)

    async def get_async(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        return await self.arun(get_steps(api_version, kind, namespace, name))

    async def apply_async(self, obj: Mapping[str, Any], *, force: bool = True) -> dict[str, Any]:
        return await self.arun(apply_steps(obj, force=force))

    async def create_or_apply_async(
        self,
        obj: Mapping[str, Any],
        *,
        exists: bool,
        held: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> dict[str, Any]:
        return await self.arun(create_or_apply_steps(obj, exists=exists, held=held))

    async def delete_async(self, key: ObjectKey, uid: str | None = None) -> bool:
        return await self.arun(delete_steps(key, uid))

    async def patch_status_async(  # noqa: PLR0917
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any],
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        return await self.arun(
            patch_status_steps(api_version, kind, namespace, name, status, resource_version)
        )

    async def post_event_async(self, event: Mapping[str, Any]) -> None:
        await self.arun(post_event_steps(event))


# -------------------------------------------------------------------- operations


@dataclass(frozen=True, slots=True)
class Call:
    """One request of an operation (:data:`Steps`)."""

    method: str
    path: str
    query: Mapping[str, str] | None = None
    body: Any = None
    content_type: str = "application/json"
    resource: str = ""
    """The resource written, for the fence and the metrics (``""`` for reads)."""

    def options(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "body": self.body,
            "content_type": self.content_type,
            "resource": self.resource,
        }


Steps = Generator[Call, Any, T]
"""An operation as the requests it makes: each :class:`Call` yielded is sent, and its decoded
answer sent back (or its :class:`KubeError` / :class:`KubeUnreachable` thrown in, for the
operation to handle or let through); what the generator returns is the operation's result.
:meth:`Kube.run` sends the requests blocking, :meth:`Kube.arun` on the event loop."""


def get_steps(api_version: str, kind: str, namespace: str | None, name: str) -> Steps[dict[str, Any] | None]:
    try:
        result: dict[str, Any] = yield Call("GET", resource_path(api_version, kind, namespace, name))
    except KubeError as err:
        if err.status == 404:
            return None
        raise
    return result


def apply_steps(obj: Mapping[str, Any], *, force: bool = True) -> Steps[dict[str, Any]]:
    """Server-side apply ``obj`` with field manager ``llmaz`` (taking back fields we own)."""
    key = ObjectKey.of(obj)
    query = {"fieldManager": FIELD_MANAGER}
    if force:
        query["force"] = "true"
    result: dict[str, Any] = yield Call(
        "PATCH",
        resource_path(key.api_version, key.kind, key.namespace or None, key.name),
        query=query,
        body=obj,
        content_type="application/apply-patch+yaml",
        resource=plural_of(key.kind),
    )
    return result


def create_steps(obj: Mapping[str, Any]) -> Steps[dict[str, Any]]:
    """POST ``obj`` with field manager ``llmaz`` (HTTP 409 if it exists). The fields it sets
    belong to ``llmaz``'s *Update* entry of ``managedFields``; :func:`claim_fields_steps` turns
    that into an *Apply* entry before the object is ever applied (:func:`create_or_apply_steps`)."""
    key = ObjectKey.of(obj)
    result: dict[str, Any] = yield Call(
        "POST",
        resource_path(key.api_version, key.kind, key.namespace or None),
        query={"fieldManager": FIELD_MANAGER},
        body=obj,
        resource=plural_of(key.kind),
    )
    return result


def claim_fields_steps(
    key: ObjectKey, attempts: int = 5, held: Callable[[dict[str, Any]], str | None] | None = None
) -> Steps[bool]:
    """Make the fields ``llmaz`` set when it POSTed the object part of its server-side apply
    ownership (client-go's ``csaupgrade`` does the same for ``kubectl apply``): the *Update*
    entry of ``managedFields`` is merged into ``llmaz``'s *Apply* entry. Without it a field
    a later render leaves out would stay: an apply removes only fields its own entry owns.
    One GET, and a PATCH only when there is such an entry (with the resourceVersion read, so
    nobody's write in between is lost; 409 reads again). ``False`` if the object is gone.
    ``held`` says why the object read is someone else's (:class:`NameTaken` is raised, nothing
    written), or ``None``."""
    path = resource_path(key.api_version, key.kind, key.namespace or None, key.name)
    for attempt in range(1, attempts + 1):
        live = yield from get_steps(key.api_version, key.kind, key.namespace or None, key.name)
        if live is None:
            return False
        why = held(live) if held is not None else None
        if why is not None:
            raise NameTaken(key, why)
        meta = live.get("metadata") or {}
        entries = claimed_entries(meta.get("managedFields") or [])
        if entries is None:
            return True
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "managedFields": entries}}
        try:
            yield Call(
                "PATCH",
                path,
                query={"fieldManager": FIELD_MANAGER},
                body=body,
                content_type="application/merge-patch+json",
                resource=plural_of(key.kind),
            )
        except KubeError as err:
            if err.status != 409 or attempt == attempts:
                raise
        else:
            return True
    return True  # attempts < 1: nothing tried


def create_or_apply_steps(
    obj: Mapping[str, Any], *, exists: bool, held: Callable[[dict[str, Any]], str | None] | None = None
) -> Steps[dict[str, Any]]:
    """Write a child: POST it when it is not known to exist, else server-side apply it.

    A POST costs the API server about a quarter less CPU than creating the object with an
    apply (issue 15: 12.3 against 16.0 CPU-seconds for the same 900 children), and creating
    children is what a rollout of many Playgrounds waits for. An object that exists after all
    (409: the watch had not brought it yet, or someone else created it) is applied instead;
    every apply of an existing object first claims the fields an earlier POST of ours set
    (:func:`claim_fields_steps`), so pruning fields from a later render works either way. An
    object found by a 409 is taken over only when ``held`` finds it is not someone else's (else
    :class:`NameTaken`): an apply would rewrite the spec of a user's object of the same name and
    make it our child, for the garbage collector to delete with its owner."""
    check = None
    if not exists:
        try:
            return (yield from create_steps(obj))
        except KubeError as err:
            if err.status != 409:
                raise
        check = held
    yield from claim_fields_steps(ObjectKey.of(obj), held=check)
    return (yield from apply_steps(obj))


def delete_steps(key: ObjectKey, uid: str | None = None) -> Steps[bool]:
    """Delete (background propagation, only the object with ``uid``); ``False`` if already gone."""
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    if uid:
        body["preconditions"] = {"uid": uid}
    try:
        yield Call(
            "DELETE",
            resource_path(key.api_version, key.kind, key.namespace or None, key.name),
            body=body,
            resource=plural_of(key.kind),
        )
    except KubeError as err:
        if err.status in (404, 409):
            return False
        raise
    return True


def patch_status_steps(  # noqa: PLR0917
    api_version: str,
    kind: str,
    namespace: str | None,
    name: str,
    status: Mapping[str, Any],
    resource_version: str | None = None,
) -> Steps[dict[str, Any]]:
    """Merge-patch ``status`` (the ``/status`` subresource). With ``resource_version`` the patch
    applies only to that version of the object (else HTTP 409), for read-modify-write of lists."""
    body: dict[str, Any] = {"status": dict(status)}
    if resource_version:
        body["metadata"] = {"resourceVersion": resource_version}
    result: dict[str, Any] = yield Call(
        "PATCH",
        resource_path(api_version, kind, namespace, name) + "/status",
        query={"fieldManager": FIELD_MANAGER},
        body=body,
        content_type="application/merge-patch+json",
        resource=plural_of(kind) + "/status",
    )
    return result


def post_event_steps(event: Mapping[str, Any]) -> Steps[None]:
    namespace = (event.get("metadata") or {}).get("namespace") or "default"
    yield Call("POST", f"/api/v1/namespaces/{namespace}/events", body=event, resource="events")


def _merge_fields(into: dict[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """The union of two ``fieldsV1`` sets (nested maps whose leaves are empty maps)."""
    for name, sub in more.items():
        if isinstance(sub, Mapping) and isinstance(into.get(name), dict):
            _merge_fields(into[name], sub)
        else:
            into[name] = copy.deepcopy(sub)
    return into


def claimed_entries(entries: list[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """``managedFields`` with ``llmaz``'s *Update* entries of the object itself (not of its
    ``status``) merged into its *Apply* entry, or ``None`` when there is nothing to merge."""

    def ours(entry: Mapping[str, Any], operation: str) -> bool:
        return (
            entry.get("manager") == FIELD_MANAGER
            and entry.get("operation") == operation
            and not entry.get("subresource")
        )

    updates = [e for e in entries if ours(e, "Update")]
    if not updates:
        return None
    applied = next((e for e in entries if ours(e, "Apply")), None)
    base = dict(applied if applied is not None else updates[0])
    fields: dict[str, Any] = _merge_fields({}, base.get("fieldsV1") or {})
    for entry in updates:
        _merge_fields(fields, entry.get("fieldsV1") or {})
    merged = {**base, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields}
    out: list[dict[str, Any]] = []
    for entry in entries:
        if entry is applied or (applied is None and entry is updates[0]):
            out.append(merged)
        elif not any(entry is u for u in updates):
            out.append(dict(entry))
    return out
