"""diagnose(): one reason and message from pod dicts shaped like the API server's."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from llmaz.render.diagnosis import PRECEDENCE, Reason, diagnose, one_line

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
IMAGE = "vllm/vllm-openai:v0.25.0"
LOADER_IMAGE = "inftyai/model-loader:v0.0.10"


def ts(seconds_ago: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    *,
    phase: str = "Pending",
    ready: bool = False,
    unschedulable: str | None = None,
    since: float = 30,
    init: list[dict[str, Any]] | None = None,
    containers: list[dict[str, Any]] | None = None,
    group: str = "0",
    worker: str = "0",
    size: int = 1,
    deleting: bool = False,
) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = []
    if unschedulable is not None:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
                "lastTransitionTime": ts(since),
            }
        )
    else:
        conditions.append({"type": "PodScheduled", "status": "True"})
    conditions.append({"type": "Ready", "status": "True" if ready else "False"})
    meta: dict[str, Any] = {
        "name": name,
        "creationTimestamp": ts(since + 5),
        "labels": {
            "leaderworkerset.sigs.k8s.io/group-index": group,
            "leaderworkerset.sigs.k8s.io/worker-index": worker,
        },
        "annotations": {"leaderworkerset.sigs.k8s.io/size": str(size)},
    }
    if deleting:
        meta["deletionTimestamp"] = ts(1)
    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if init is not None:
        status["initContainerStatuses"] = init
    if containers is not None:
        status["containerStatuses"] = containers
    return {
        "metadata": meta,
        "spec": {
            "initContainers": [{"name": "model-loader", "image": LOADER_IMAGE}],
            "containers": [{"name": "model-runner", "image": IMAGE}],
        },
        "status": status,
    }


def running(name: str = "model-runner") -> dict[str, Any]:
    return {"name": name, "state": {"running": {"startedAt": ts(10)}}, "ready": False}


def loader_done() -> dict[str, Any]:
    return {"name": "model-loader", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}


def ready_pod(name: str, group: str = "0", worker: str = "0", size: int = 1) -> dict[str, Any]:
    return pod(
        name,
        phase="Running",
        ready=True,
        init=[loader_done()],
        containers=[{**running(), "ready": True}],
        group=group,
        worker=worker,
        size=size,
    )


SCHED_MSG = "0/5 nodes are available: 5 Insufficient nvidia.com/gpu. preemption: not helpful."


def test_available_counts_ready_replicas() -> None:
    d = diagnose([ready_pod("a-0"), ready_pod("a-1", group="1")], desired_replicas=2, now=NOW)
    assert d.reason is Reason.AVAILABLE
    assert d.message == "2/2 replicas ready"
    assert d.available
    assert not d.failing


def test_unschedulable_names_flavor_and_scheduler_message() -> None:
    d = diagnose(
        [pod("a-0", unschedulable=SCHED_MSG, since=90)], desired_replicas=1, flavor="a100x8", now=NOW
    )
    assert d.reason is Reason.UNSCHEDULABLE
    assert "flavor 'a100x8'" in d.message
    assert "0/5 nodes are available: 5 Insufficient nvidia.com/gpu." in d.message
    assert d.message.endswith("0/1 replicas ready")
    assert d.unschedulable_seconds == 90
    assert d.unschedulable_since == NOW - dt.timedelta(seconds=90)
    assert d.failing


def test_message_is_stable_over_time() -> None:
    """Nothing in the message changes while the pods do not: no status write per reconcile."""
    pods = [pod("a-0", unschedulable=SCHED_MSG, since=90)]
    first = diagnose(pods, desired_replicas=1, flavor="l4", now=NOW)
    later = diagnose(pods, desired_replicas=1, flavor="l4", now=NOW + dt.timedelta(minutes=7))
    assert (first.reason, first.message) == (later.reason, later.message)
    assert later.unschedulable_seconds == first.unschedulable_seconds + 420


@pytest.mark.parametrize("reason", ["ImagePullBackOff", "ErrImagePull"])
def test_image_pull_names_image(reason: str) -> None:
    waiting = {"reason": reason, "message": f'Back-off pulling image "{IMAGE}"'}
    p = pod(
        "a-0",
        init=[loader_done()],
        containers=[{"name": "model-runner", "image": IMAGE, "state": {"waiting": waiting}}],
    )
    d = diagnose([p], desired_replicas=1, now=NOW)
    assert d.reason == reason
    assert f"cannot pull image {IMAGE!r}" in d.message
    assert "model-runner" in d.message


def test_image_pull_of_loader_names_loader_image() -> None:
    init = [{"name": "model-loader", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]
    d = diagnose([pod("a-0", init=init)], desired_replicas=1, now=NOW)
    assert d.reason is Reason.IMAGE_PULL_BACK_OFF
    assert repr(LOADER_IMAGE) in d.message  # from the pod spec when the status does not say


def test_crash_loop_names_container_and_last_termination() -> None:
    runner = {
        "name": "model-runner",
        "restartCount": 4,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
        "lastState": {
            "terminated": {
                "exitCode": 1,
                "reason": "Error",
                "message": "Traceback...\n  File x\nValueError: max_model_len 32768 exceeds KV cache\n",
            }
        },
    }
    d = diagnose(
        [pod("a-0", phase="Running", init=[loader_done()], containers=[runner])], desired_replicas=1, now=NOW
    )
    assert d.reason is Reason.CRASH_LOOP_BACK_OFF
    assert "container model-runner" in d.message
    assert "exit code 1: ValueError: max_model_len 32768 exceeds KV cache" in d.message
    assert "restart" not in d.message
    assert "4 " not in d.message


def test_oom_killed_without_message_uses_reason() -> None:
    runner = {
        "name": "model-runner",
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
    }
    d = diagnose(
        [pod("a-0", phase="Running", init=[loader_done()], containers=[runner])], desired_replicas=1, now=NOW
    )
    assert d.reason is Reason.CRASH_LOOP_BACK_OFF
    assert "exit code 137: OOMKilled" in d.message


def test_model_load_failed_takes_loader_message_last_line() -> None:
    init = [
        {
            "name": "model-loader",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {
                "terminated": {
                    "exitCode": 1,
                    "message": "downloading...\n401 Client Error: repository Qwen/Nope is gated\n\n",
                }
            },
        }
    ]
    d = diagnose([pod("a-0", init=init, containers=[])], desired_replicas=1, now=NOW)
    assert d.reason is Reason.MODEL_LOAD_FAILED
    assert "model-loader of pod a-0 failed: 401 Client Error: repository Qwen/Nope is gated" in d.message


def test_failed_init_that_is_not_a_loader_is_a_crash() -> None:
    init = [{"name": "setup", "state": {"terminated": {"exitCode": 2, "message": "bad flag"}}}]
    d = diagnose([pod("a-0", init=init)], desired_replicas=1, now=NOW)
    assert d.reason is Reason.CRASH_LOOP_BACK_OFF
    assert "container setup" in d.message
    assert "bad flag" in d.message


def test_loader_running_is_loading() -> None:
    d = diagnose([pod("a-0", init=[running("model-loader")])], desired_replicas=1, now=NOW)
    assert d.reason is Reason.LOADING
    assert "model-loader of pod a-0 is fetching the model" in d.message
    assert not d.failing


def test_loader_retrying_after_failure_is_loading() -> None:
    init = [{**running("model-loader"), "lastState": {"terminated": {"exitCode": 1, "message": "timeout"}}}]
    d = diagnose([pod("a-0", init=init)], desired_replicas=1, now=NOW)
    assert d.reason is Reason.LOADING


def test_engine_running_not_ready_is_starting() -> None:
    d = diagnose(
        [pod("a-0", phase="Running", init=[loader_done()], containers=[running()])],
        desired_replicas=1,
        now=NOW,
    )
    assert d.reason is Reason.STARTING
    assert "model-runner of pod a-0 started" in d.message


def test_no_pods_is_pending() -> None:
    d = diagnose([], desired_replicas=2, now=NOW)
    assert d.reason is Reason.PENDING
    assert d.message == "0/2 replicas ready; waiting for pods to be created"


def test_scaled_to_zero_is_available() -> None:
    d = diagnose([], desired_replicas=0, now=NOW)
    assert d.reason is Reason.AVAILABLE
    assert d.message == "scaled to 0 replicas"


def test_partially_ready_reports_the_blocked_replica() -> None:
    pods = [ready_pod("a-0"), pod("a-1", group="1", unschedulable=SCHED_MSG)]
    d = diagnose(pods, desired_replicas=2, flavor="l4", now=NOW)
    assert d.reason is Reason.UNSCHEDULABLE
    assert d.message.endswith("1/2 replicas ready")
    assert d.any_ready


def test_deleted_and_finished_pods_do_not_count() -> None:
    old = pod("a-0", unschedulable=SCHED_MSG, since=900, deleting=True)
    done = pod("a-x", phase="Failed")
    d = diagnose([old, done, ready_pod("a-1")], desired_replicas=1, now=NOW)
    assert d.reason is Reason.AVAILABLE
    assert d.unschedulable_since is None


def test_multi_host_group_is_ready_only_with_every_worker() -> None:
    leader = ready_pod("a-0", worker="0", size=2)
    d = diagnose([leader], desired_replicas=1, now=NOW)
    assert d.reason is Reason.PENDING  # the worker does not exist yet
    assert d.ready_replicas == 0


def test_multi_host_worker_failure_names_the_worker() -> None:
    leader = ready_pod("a-0", worker="0", size=2)
    worker = pod(
        "a-0-1",
        worker="1",
        size=2,
        phase="Running",
        containers=[
            {
                "name": "model-runner",
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "message": "ray: cannot reach leader"}},
            }
        ],
    )
    d = diagnose([leader, worker], desired_replicas=1, now=NOW)
    assert d.reason is Reason.CRASH_LOOP_BACK_OFF
    assert "worker pod a-0-1" in d.message
    assert "ray: cannot reach leader" in d.message


def test_multi_host_unschedulable_worker_counts_for_fallback() -> None:
    leader = ready_pod("a-0", worker="0", size=2)
    worker = pod("a-0-1", worker="1", size=2, unschedulable=SCHED_MSG, since=200)
    d = diagnose([leader, worker], desired_replicas=1, flavor="a100x8", now=NOW)
    assert d.reason is Reason.UNSCHEDULABLE
    assert d.unschedulable_seconds == 200


def _stuck(reason: Reason, name: str) -> dict[str, Any]:
    """A pod stuck for ``reason`` (for the precedence table)."""
    if reason is Reason.MODEL_LOAD_FAILED:
        init = [{"name": "model-loader", "state": {"terminated": {"exitCode": 1, "message": "gated"}}}]
        return pod(name, init=init)
    if reason is Reason.CRASH_LOOP_BACK_OFF:
        runner = {
            "name": "model-runner",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1}},
        }
        return pod(name, phase="Running", init=[loader_done()], containers=[runner])
    if reason in (Reason.IMAGE_PULL_BACK_OFF, Reason.ERR_IMAGE_PULL):
        runner = {"name": "model-runner", "state": {"waiting": {"reason": str(reason)}}}
        return pod(name, init=[loader_done()], containers=[runner])
    if reason is Reason.UNSCHEDULABLE:
        return pod(name, unschedulable=SCHED_MSG)
    if reason is Reason.LOADING:
        return pod(name, init=[running("model-loader")])
    if reason is Reason.STARTING:
        return pod(name, phase="Running", init=[loader_done()], containers=[running()])
    return pod(name)


@pytest.mark.parametrize("i", range(len(PRECEDENCE) - 1))
def test_precedence(i: int) -> None:
    """Each reason beats every later one, whichever pod (by name) carries it."""
    higher = PRECEDENCE[i]
    for lower in PRECEDENCE[i + 1 :]:
        for names in (("a-0", "a-1"), ("a-1", "a-0")):
            pods = [_stuck(higher, names[0]), _stuck(lower, names[1])]
            for p, g in zip(pods, ("0", "1"), strict=True):
                p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] = g
            assert diagnose(pods, desired_replicas=2, now=NOW).reason is higher, (higher, lower)


def test_same_reason_on_several_pods_is_counted() -> None:
    pods = [pod(f"a-{i}", group=str(i), unschedulable=SCHED_MSG) for i in range(3)]
    d = diagnose(pods, desired_replicas=3, flavor="l4", now=NOW)
    assert d.message.startswith("pod a-0 (and 2 more pods) cannot be scheduled on flavor 'l4'")


def test_one_line_takes_last_line_and_truncates() -> None:
    assert one_line("a\nb\n\n") == "b"
    assert one_line(None) == ""
    assert len(one_line("x" * 1000)) == 300


def test_missing_secret_is_pending_with_the_kubelet_message() -> None:
    waiting = {"reason": "CreateContainerConfigError", "message": 'secret "hf-token" not found'}
    init = [{"name": "model-loader", "state": {"waiting": waiting}}]
    d = diagnose([pod("a-0", init=init)], desired_replicas=1, now=NOW)
    assert d.reason is Reason.PENDING
    expected = 'is waiting: CreateContainerConfigError: secret "hf-token" not found'
    assert f"container model-loader of pod a-0 {expected}" in d.message


def test_routine_waiting_is_plain_pending() -> None:
    init = [{"name": "model-loader", "state": {"waiting": {"reason": "PodInitializing"}}}]
    d = diagnose([pod("a-0", init=init)], desired_replicas=1, now=NOW)
    assert d.reason is Reason.PENDING
    assert "waiting:" not in d.message
