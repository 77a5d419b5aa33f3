"""How the operator classifies the API server's refusals (issue 16: namespace deletion)."""

from __future__ import annotations

import json

from llmaz.operator.kube import KubeError, KubeUnreachable, namespace_terminating, status_target_gone


def status(code: int, message: str) -> str:
    """A ``Status`` body as kube-apiserver sends it."""
    return json.dumps(
        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
    )


TERMINATING = (
    'leaderworkersets.leaderworkerset.x-k8s.io "r35" is forbidden: unable to create new content in '
    "namespace t2-loop because it is being terminated"
)
"""The refusal the random kill loop's namespace produced (NamespaceLifecycle admission)."""


def test_a_create_into_a_terminating_namespace_is_recognised() -> None:
    path = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/t2-loop/leaderworkersets/r35"
    assert namespace_terminating(KubeError("PATCH", path, 403, status(403, TERMINATING)))


def test_rbac_refusals_and_other_failures_are_not() -> None:
    rbac = 'leases.coordination.k8s.io "x" is forbidden: User "u" cannot get resource "leases"'
    assert not namespace_terminating(KubeError("GET", "/x", 403, status(403, rbac)))
    assert not namespace_terminating(KubeError("PATCH", "/x", 409, status(409, TERMINATING)))
    assert not namespace_terminating(KubeUnreachable("GET /x: ConnectionResetError: reset"))


def test_a_404_on_the_objects_own_status_means_it_is_gone() -> None:
    own = "/apis/inference.llmaz.io/v1alpha1/namespaces/n/playgrounds/r33/status"
    gone = KubeError("PATCH", own + "?fieldManager=llmaz", 404, status(404, '"r33" not found'))
    assert status_target_gone(gone, "inference.llmaz.io/v1alpha1", "Playground", "n", "r33")
    # another object's 404 (a child, a missing CRD) is not: it may need the retry
    assert not status_target_gone(gone, "inference.llmaz.io/v1alpha1", "Playground", "n", "r34")
    child = KubeError("PATCH", "/apis/leaderworkerset.x-k8s.io/v1/namespaces/n/leaderworkersets/r33", 404, "")
    assert not status_target_gone(child, "inference.llmaz.io/v1alpha1", "Playground", "n", "r33")
    conflict = KubeError("PATCH", own, 409, status(409, "conflict"))
    assert not status_target_gone(conflict, "inference.llmaz.io/v1alpha1", "Playground", "n", "r33")


def test_a_write_into_a_namespace_already_gone_is_recognised() -> None:
    gone = status(404, 'namespaces "t0-loop" not found')
    assert namespace_terminating(KubeError("PATCH", "/apis/inference.llmaz.io/v1alpha1/x", 404, gone))
    missing = status(404, 'services.inference.llmaz.io "r01" not found')
    assert not namespace_terminating(KubeError("GET", "/apis/inference.llmaz.io/v1alpha1/x", 404, missing))


def test_a_long_api_server_message_is_cut_in_the_error_text_but_kept_whole() -> None:
    rbac_misses = ", ".join(f'clusterrole.rbac.authorization.k8s.io "role-{i}" not found' for i in range(12))
    refused = 'leases.coordination.k8s.io "x" is forbidden: User "u" cannot get resource "leases"'
    text = f"{refused}: RBAC: [{rbac_misses}]"
    err = KubeError("GET", "/apis/coordination.k8s.io/v1/namespaces/n/leases/x", 403, status(403, text))
    assert err.message == text
    assert len(str(err)) < 400
    assert str(err).endswith("...")
    assert 'cannot get resource "leases"' in str(err)


def test_the_brief_form_names_the_resource_without_the_namespace_path() -> None:
    """For a log line that names the namespace already (the integrations' retry warning): after an
    API server restart its 403 for one list in a 50-character namespace made a 535-character line."""
    namespace = "t1-test-apiserver-restart-operator-stays-up-and-co"
    refused = f'backends.gateway.envoyproxy.io is forbidden: User "u" cannot list "backends" in "{namespace}"'
    path = f"/apis/gateway.envoyproxy.io/v1alpha1/namespaces/{namespace}/backends"
    err = KubeError("GET", path, 403, status(403, refused))
    assert err.brief == f"GET backends.gateway.envoyproxy.io: HTTP 403: {refused}"
    assert KubeError("PATCH", "/api/v1/namespaces/n/services/a-lb", 409, "x").brief.startswith(
        "PATCH services/a-lb:"
    )
    assert KubeError("GET", "/api/v1/nodes", 500, "x").brief.startswith("GET nodes:")
