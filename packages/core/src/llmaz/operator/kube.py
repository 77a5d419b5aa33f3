"""The operator's Kubernetes API adapter: server-side apply, delete, status patch, Events, Leases.

A thin layer over urllib3, reaching the API server as :mod:`llmaz.operator.connection` says
(a kubeconfig or the in-cluster ServiceAccount). Every call is blocking; the handlers run them in a
thread with :func:`asyncio.to_thread`. Every write is counted in :class:`~llmaz.operator.metrics.Metrics`.
"""

from __future__ import annotations

import contextlib
import copy
import json
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    """Blocking Kubernetes API calls for the operator."""

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
        pool_args: dict[str, Any] = {"maxsize": pool_size}
        if retries is not None:
            pool_args["retries"] = retries
        if connection.https:
            pool_args["ssl_context"] = connection.ssl_context()
            if connection.tls_server_name:
                pool_args["server_hostname"] = connection.tls_server_name
        self._pool = urllib3.PoolManager(num_pools=2, **pool_args)

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
        """One request; returns the decoded JSON answer. Raises :class:`KubeError` on HTTP >= 400,
        :class:`WriteFenced` for a write the fence refuses (nothing is sent)."""
        self.check_fence(method, path, resource)
        url_path = path + ("?" + urllib.parse.urlencode(dict(query)) if query else "")
        try:
            auth = self.connection.auth_headers()
        except ConnectionConfigError as err:  # a token file gone, an exec plugin failing: retried
            raise KubeUnreachable(f"{method} {path.partition('?')[0]}: credentials: {err}") from err
        headers = {
            "Accept": "application/json",
            "Content-Type": content_type,
            "User-Agent": USER_AGENT,
            **auth,
        }
        # a body is JSON for JSON and YAML (apply) content types alike: JSON is YAML
        payload = body if body is None or isinstance(body, bytes | str) else json.dumps(body)
        try:
            response = self._pool.request(
                method, self.connection.server + url_path, headers=headers, body=payload, timeout=TIMEOUT
            )
            # the body is read here too: a connection broken mid-answer (ProtocolError) is as
            # transient as a refused one, and escaped as a handler traceback (issue 16, resets)
            data = response.data
        except urllib3.exceptions.HTTPError as err:
            raise KubeUnreachable(f"{method} {path.partition('?')[0]}: {transport_reason(err)}") from err
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data or "")
        if method != "GET" and self._on_write is not None:
            self._on_write(method, resource)
        if response.status >= 400:
            raise KubeError(method, path, response.status, text)
        return json.loads(text) if text else None

    def check_fence(self, method: str, path: str, resource: str) -> None:
        """Raise :class:`WriteFenced` when ``fence`` refuses this write (Lease writes always pass:
        they are how leadership is kept or handed over)."""
        if method == "GET" or resource == "leases" or self.fence is None:
            return
        reason = self.fence()
        if reason is not None:
            raise WriteFenced(method, path, reason)

    # ---------------------------------------------------------------- objects

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = self.request("GET", resource_path(api_version, kind, namespace, name))
        except KubeError as err:
            if err.status == 404:
                return None
            raise
        return result

    def apply(self, obj: Mapping[str, Any], *, force: bool = True) -> dict[str, Any]:
        """Server-side apply ``obj`` with field manager ``llmaz`` (taking back fields we own)."""
        key = ObjectKey.of(obj)
        path = resource_path(key.api_version, key.kind, key.namespace or None, key.name)
        query = {"fieldManager": FIELD_MANAGER}
        if force:
            query["force"] = "true"
        result: dict[str, Any] = self.request(
            "PATCH",
            path,
            query=query,
            body=obj,
            content_type="application/apply-patch+yaml",
            resource=plural_of(key.kind),
        )
        return result

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``obj`` with field manager ``llmaz`` (HTTP 409 if it exists). The fields it sets
        belong to ``llmaz``'s *Update* entry of ``managedFields``; :meth:`claim_fields` turns that
        into an *Apply* entry before the object is ever applied (:meth:`create_or_apply`)."""
        key = ObjectKey.of(obj)
        result: dict[str, Any] = self.request(
            "POST",
            resource_path(key.api_version, key.kind, key.namespace or None),
            query={"fieldManager": FIELD_MANAGER},
            body=obj,
            resource=plural_of(key.kind),
        )
        return result

    def claim_fields(self, key: ObjectKey, attempts: int = 5) -> bool:
        """Make the fields ``llmaz`` set when it POSTed the object part of its server-side apply
        ownership (client-go's ``csaupgrade`` does the same for ``kubectl apply``): the *Update*
        entry of ``managedFields`` is merged into ``llmaz``'s *Apply* entry. Without it a field
        a later render leaves out would stay: an apply removes only fields its own entry owns.
        One GET, and a PATCH only when there is such an entry (with the resourceVersion read, so
        nobody's write in between is lost; 409 reads again). ``False`` if the object is gone."""
        path = resource_path(key.api_version, key.kind, key.namespace or None, key.name)
        for attempt in range(1, attempts + 1):
            live = self.get(key.api_version, key.kind, key.namespace or None, key.name)
            if live is None:
                return False
            meta = live.get("metadata") or {}
            entries = claimed_entries(meta.get("managedFields") or [])
            if entries is None:
                return True
            body = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "managedFields": entries}}
            try:
                self.request(
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

    def create_or_apply(self, obj: Mapping[str, Any], *, exists: bool) -> dict[str, Any]:
        """Write a child: POST it when it is not known to exist, else server-side apply it.

        A POST costs the API server about a quarter less CPU than creating the object with an
        apply (issue 15: 12.3 against 16.0 CPU-seconds for the same 900 children), and creating
        children is what a rollout of many Playgrounds waits for. An object that exists after all
        (409: the watch had not brought it yet, or someone else created it) is applied instead;
        every apply of an existing object first claims the fields an earlier POST of ours set
        (:meth:`claim_fields`), so pruning fields from a later render works either way."""
        key = ObjectKey.of(obj)
        if not exists:
            try:
                return self.create(obj)
            except KubeError as err:
                if err.status != 409:
                    raise
        self.claim_fields(key)
        return self.apply(obj)

    def delete(self, key: ObjectKey, uid: str | None = None) -> bool:
        """Delete (background propagation, only the object with ``uid``); ``False`` if already gone."""
        body: dict[str, Any] = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
        }
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.request(
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

    def patch_status(  # noqa: PLR0917
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any],
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Merge-patch ``status`` (the ``/status`` subresource). With ``resource_version`` the patch
        applies only to that version of the object (else HTTP 409), for read-modify-write of lists."""
        path = resource_path(api_version, kind, namespace, name) + "/status"
        body: dict[str, Any] = {"status": dict(status)}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        result: dict[str, Any] = self.request(
            "PATCH",
            path,
            query={"fieldManager": FIELD_MANAGER},
            body=body,
            content_type="application/merge-patch+json",
            resource=plural_of(kind) + "/status",
        )
        return result

    def post_event(self, event: Mapping[str, Any]) -> None:
        """Create one ``v1`` Event (failures are the caller's to log, never fatal)."""
        namespace = (event.get("metadata") or {}).get("namespace") or "default"
        self.request("POST", f"/api/v1/namespaces/{namespace}/events", body=event, resource="events")


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
