"""Children are created with a POST and applied after that; before the first apply of a child the
operator created, the fields that POST set become part of its server-side apply ownership, so a
field a later render leaves out is removed (issue 15). The requests are checked against a
recording stand-in for the API server's transport (named so: no API server here); the real API
server removing such a field is in e2e/test_operator.py."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from llmaz.operator.connection import Connection
from llmaz.operator.kube import Kube, KubeError, NameTaken, claimed_entries
from llmaz.operator.runtime import held_by_another

LWS_PATH = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/ns/leaderworkersets"
LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "chat", "namespace": "ns"},
    "spec": {"replicas": 1},
}
POSTED = {
    "manager": "llmaz",
    "operation": "Update",
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "time": "2026-11-25T10:00:00Z",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:spec": {"f:replicas": {}, "f:leaderWorkerTemplate": {"f:size": {}}}},
}
APPLIED = {
    "manager": "llmaz",
    "operation": "Apply",
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "time": "2026-11-25T10:05:00Z",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:spec": {"f:replicas": {}}, "f:metadata": {"f:labels": {"f:app": {}}}},
}
OUR_STATUS = {
    "manager": "llmaz",
    "operation": "Update",
    "subresource": "status",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:status": {"f:conditions": {}}},
}
CONTROLLER = {
    "manager": "lws-controller",
    "operation": "Update",
    "subresource": "status",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:status": {"f:replicas": {}}},
}
KUBECTL = {
    "manager": "kubectl-annotate",
    "operation": "Update",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:metadata": {"f:annotations": {"f:owner": {}}}},
}


def test_nothing_to_claim_without_an_update_entry_of_ours() -> None:
    assert claimed_entries([APPLIED, OUR_STATUS, CONTROLLER, KUBECTL]) is None
    assert claimed_entries([]) is None


def test_a_posted_childs_entry_becomes_our_apply_entry_and_nobody_elses_changes() -> None:
    entries = [CONTROLLER, POSTED, KUBECTL, OUR_STATUS]
    before = copy.deepcopy(entries)
    out = claimed_entries(entries)
    assert out == [CONTROLLER, {**POSTED, "operation": "Apply"}, KUBECTL, OUR_STATUS]
    assert entries == before  # the input is not changed


def test_update_and_apply_entries_of_ours_are_merged_into_one_apply_entry() -> None:
    out = claimed_entries([POSTED, CONTROLLER, APPLIED])
    assert out is not None
    ours = [e for e in out if e["manager"] == "llmaz"]
    assert len(ours) == 1
    assert ours[0]["operation"] == "Apply"
    assert ours[0]["time"] == APPLIED["time"]
    assert ours[0]["fieldsV1"] == {
        "f:spec": {"f:replicas": {}, "f:leaderWorkerTemplate": {"f:size": {}}},
        "f:metadata": {"f:labels": {"f:app": {}}},
    }
    assert CONTROLLER in out


class Transport(Kube):
    """Kube whose transport is a recording stand-in: answers from ``script`` by ``(method,
    path)``, each answer a dict or a KubeError to raise, in order; ``blocking`` False sends the
    same requests the way the reconciles do, on the event loop (``create_or_apply_async``)."""

    def __init__(self, script: dict[tuple[str, str], list[Any]], *, blocking: bool = True) -> None:
        super().__init__(Connection(server="http://stand-in.invalid"))
        self.script = script
        self.calls: list[tuple[str, str, Any]] = []
        self.blocking = blocking

    def write(self, obj: dict[str, Any], *, exists: bool) -> dict[str, Any]:
        if self.blocking:
            return self.create_or_apply(obj, exists=exists)
        return asyncio.run(self.create_or_apply_async(obj, exists=exists))

    async def arequest(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        self.calls.append((method, path, kwargs.get("body")))
        answer = self.script[(method, path)].pop(0)
        if isinstance(answer, KubeError):
            raise answer
        return answer


BOTH_WAYS = pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "event-loop"])


def _exists() -> KubeError:
    body = json.dumps({"kind": "Status", "code": 409, "message": 'leaderworkersets "chat" already exists'})
    return KubeError("POST", LWS_PATH, 409, body)


def _live(version: str, *entries: dict[str, Any]) -> dict[str, Any]:
    live = copy.deepcopy(LWS)
    live["metadata"].update(resourceVersion=version, managedFields=list(entries))
    return live


@BOTH_WAYS
def test_a_child_not_seen_yet_is_created_with_one_post(blocking: bool) -> None:
    kube = Transport({("POST", LWS_PATH): [_live("5", POSTED)]}, blocking=blocking)
    answer = kube.write(LWS, exists=False)
    assert [(m, p) for m, p, _ in kube.calls] == [("POST", LWS_PATH)]
    assert answer["metadata"]["resourceVersion"] == "5"


@BOTH_WAYS
def test_a_post_that_finds_the_child_claims_its_fields_then_applies(blocking: bool) -> None:
    one = f"{LWS_PATH}/chat"
    kube = Transport(
        {
            ("POST", LWS_PATH): [_exists()],
            ("GET", one): [_live("7", POSTED, CONTROLLER)],
            ("PATCH", one): [{}, _live("9", {**POSTED, "operation": "Apply"})],
        },
        blocking=blocking,
    )
    kube.write(LWS, exists=False)
    assert [(m, p) for m, p, _ in kube.calls] == [
        ("POST", LWS_PATH),
        ("GET", one),
        ("PATCH", one),
        ("PATCH", one),
    ]
    claim = kube.calls[2][2]
    assert claim["metadata"]["resourceVersion"] == "7"  # nobody's write in between is lost
    assert claim["metadata"]["managedFields"] == [{**POSTED, "operation": "Apply"}, CONTROLLER]
    assert kube.calls[3][2] == LWS  # then the apply itself


@BOTH_WAYS
def test_an_applied_child_is_only_read_before_the_apply(blocking: bool) -> None:
    one = f"{LWS_PATH}/chat"
    kube = Transport(
        {("GET", one): [_live("7", APPLIED, CONTROLLER)], ("PATCH", one): [_live("8", APPLIED)]},
        blocking=blocking,
    )
    kube.write(LWS, exists=True)
    assert [(m, p) for m, p, _ in kube.calls] == [("GET", one), ("PATCH", one)]
    assert kube.calls[1][2] == LWS


@BOTH_WAYS
def test_a_claim_that_meets_a_newer_version_reads_again(blocking: bool) -> None:
    one = f"{LWS_PATH}/chat"
    conflict = KubeError("PATCH", one, 409, json.dumps({"message": "the object has been modified"}))
    kube = Transport(
        {
            ("GET", one): [_live("7", POSTED), _live("8", POSTED, CONTROLLER)],
            ("PATCH", one): [conflict, {}, _live("10", APPLIED)],
        },
        blocking=blocking,
    )
    kube.write(LWS, exists=True)
    claims = [
        body for m, _, body in kube.calls if m == "PATCH" and "managedFields" in body.get("metadata", {})
    ]
    assert [c["metadata"]["resourceVersion"] for c in claims] == ["7", "8"]


@BOTH_WAYS
def test_a_claim_that_keeps_conflicting_fails_the_reconcile(blocking: bool) -> None:
    one = f"{LWS_PATH}/chat"
    conflict = KubeError("PATCH", one, 409, json.dumps({"message": "the object has been modified"}))
    kube = Transport(
        {("GET", one): [_live(str(v), POSTED) for v in range(5)], ("PATCH", one): [conflict] * 5}
    )
    with pytest.raises(KubeError) as err:
        kube.write(LWS, exists=True)
    assert err.value.status == 409  # retried by the reconcile's backoff
    assert sum(1 for m, _, _ in kube.calls if m == "PATCH") == 5


SVC_PATH = "/api/v1/namespaces/ns/services"
OWNER_REF = {
    "apiVersion": "inference.llmaz.io/v1alpha1",
    "kind": "Service",
    "name": "chat",
    "uid": "uid-new",
    "controller": True,
}
OUR_LB = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {
        "name": "chat-lb",
        "namespace": "ns",
        "labels": {"app.kubernetes.io/managed-by": "llmaz"},
        "ownerReferences": [OWNER_REF],
    },
    "spec": {"selector": {"leaderworkerset.sigs.k8s.io/name": "chat"}},
}


def _lb_exists() -> KubeError:
    body = json.dumps({"kind": "Status", "code": 409, "message": 'services "chat-lb" already exists'})
    return KubeError("POST", SVC_PATH, 409, body)


def _write_lb(kube: Transport) -> dict[str, Any]:
    return asyncio.run(
        kube.create_or_apply_async(OUR_LB, exists=False, held=lambda live: held_by_another(live, OWNER_REF))
    )


def test_a_users_object_of_a_childs_name_is_left_alone() -> None:
    """A Service a user made by hand holds the name of our ``-lb`` Service: the create's 409 reads
    it and stops there (``NameTaken``, shown in the owner's status). An apply would have replaced
    its selector and made it our child, for the garbage collector to delete with its owner."""
    users = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "chat-lb", "namespace": "ns", "resourceVersion": "50"},
        "spec": {"selector": {"app": "mine"}},
    }
    kube = Transport({("POST", SVC_PATH): [_lb_exists()], ("GET", SVC_PATH + "/chat-lb"): [users]})
    with pytest.raises(NameTaken) as taken:
        _write_lb(kube)
    assert [m for m, _, _ in kube.calls] == ["POST", "GET"]  # nothing written to it
    assert taken.value.message == "Service ns/chat-lb exists and was not made by llmaz for this object"
    controlled = copy.deepcopy(OUR_LB)
    other = {**OWNER_REF, "name": "other", "uid": "uid-other"}
    controlled["metadata"].update(resourceVersion="51", ownerReferences=[other])
    kube = Transport({("POST", SVC_PATH): [_lb_exists()], ("GET", SVC_PATH + "/chat-lb"): [controlled]})
    with pytest.raises(NameTaken, match="is controlled by Service other"):
        _write_lb(kube)


def test_a_child_of_an_earlier_owner_of_the_same_name_is_taken_over() -> None:
    """An inference Service deleted and made again before the garbage collector removed its
    ``-lb`` Service: that one is ours, and the new owner applies over it (its ownerReferences
    now name the new uid)."""
    earlier = copy.deepcopy(OUR_LB)
    earlier["metadata"].update(resourceVersion="52", ownerReferences=[{**OWNER_REF, "uid": "uid-old"}])
    applied = copy.deepcopy(OUR_LB)
    applied["metadata"]["resourceVersion"] = "53"
    kube = Transport(
        {
            ("POST", SVC_PATH): [_lb_exists()],
            ("GET", SVC_PATH + "/chat-lb"): [earlier],
            ("PATCH", SVC_PATH + "/chat-lb"): [applied],
        }
    )
    assert _write_lb(kube)["metadata"]["resourceVersion"] == "53"
    assert [m for m, _, _ in kube.calls] == ["POST", "GET", "PATCH"]
    assert kube.calls[-1][2]["metadata"]["ownerReferences"] == [OWNER_REF]
