"""SIGKILL at named points of a reconcile, and a random kill loop, on the real control plane (tier B).

A named point is a request the operator makes (the POST that creates the inference Service, the
LeaderWorkerSet or the ``-lb`` Service, the first Playground status patch): :class:`KillAfter` tails the
API server's audit log and kills the operator as soon as that request was answered, with no hook in
the operator. While it is down the user edits the Playground it was working on; the next operator
must converge to that edit with one child of each kind, all owned. The loop kills operators at
random moments while they work through 50 Playgrounds (200 objects with their children). Both are
in the full set (``nox -s reliability``).
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from reliability_helpers import (
    Figures,
    KillAfter,
    Matcher,
    audit_writes,
    check_healthy,
    check_unique_and_owned,
    child_writes,
    converged,
    edited,
    elapsed,
    get,
    leading_operator,
    lws_arg,
    model,
    playground,
    request_is,
    rss_mib,
    wait_until,
)

from llmaz_devkit.cluster import ControlPlane

pytestmark = pytest.mark.slow

T_CONV = 180.0
"""Convergence bound after a kill, on 2 shared CPUs (includes the new process's start and Lease)."""

API_GROUP = "inference.llmaz.io"
LWS_GROUP = "leaderworkerset.x-k8s.io"

POINTS: list[tuple[str, Callable[[str], Matcher]]] = [
    ("inference Service created", lambda n: request_is("create", API_GROUP, "services", n)),
    ("LeaderWorkerSet created", lambda n: request_is("create", LWS_GROUP, "leaderworkersets", n)),
    ("-lb Service created", lambda n: request_is("create", "", "services", f"{n}-lb")),
    ("first Playground status patch", lambda n: request_is("patch", API_GROUP, "playgrounds", n, "status")),
]
"""Where a reconcile of a new Playground is cut: right after the API server answered this request."""


def all_carry(cp: ControlPlane, namespace: str, args: dict[str, str]) -> bool:
    """C for every Playground in ``args`` and L: each LWS carries the user's last argument."""
    return converged(cp, namespace, set(args)) and all(
        lws_arg(cp, namespace, name)[-1:] == [arg] for name, arg in args.items()
    )


def test_sigkill_right_after_each_named_request_then_restart_converges_to_the_edit(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    cp, fig = control_plane, Figures("sigkill-at-named-points")
    mdl = "qwen-rel-points"
    cp.apply([model(mdl)])
    args: dict[str, str] = {}  # Playground -> the argument of the user's last edit
    killed_at = 0.0
    for i, (point, matcher) in enumerate([*POINTS, ("", lambda n: request_is("", "", "", n))]):
        with leading_operator(cp, tmp_path / f"op{i}") as op:
            if args:
                what = f"convergence after kill {i}"
                wait_until(lambda: all_carry(cp, namespace, args), what, T_CONV, op.log)
                fig.add(f"kill {i}: converged after", elapsed(killed_at), " s")
                check_unique_and_owned(cp, namespace, set(args))
            if not point:  # the last operator: checks only
                since = time.time()
                time.sleep(12)  # longer than one resync: no child left to write
                assert child_writes(cp, op.user, since, namespace) == []
                check_healthy(op)
                fig.add("RSS", rss_mib(op), " MiB")
                break
            name = f"k{i}"
            with KillAfter(cp, op, matcher(name)) as killer:
                cp.apply([playground(name, namespace, mdl)])
                entry = killer.wait(60)
            killed_at = time.monotonic()
            fig.add(f"kill {i + 1}", point)
            ref = entry["objectRef"]
            print(f"kill {i + 1} after {entry['verb']} {ref['resource']} {ref.get('name')}")
        # the operator is dead; the user edits the Playground it was reconciling
        args[name] = f"--after-kill-{i + 1}"
        cp.apply([edited(name, namespace, mdl, args[name])])
    fig.report()


N_PLAYGROUNDS = 50
"""50 Playgrounds: 200 objects with their inference Services, LeaderWorkerSets and ``-lb`` Services."""
ROUNDS = 5
"""Operators killed in the loop (each at a random moment 0.5 to 6 s after it leads)."""


def test_random_kill_loop_over_200_objects_converges_without_duplicates(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    cp, fig = control_plane, Figures("random-kill-loop")
    seed = int(time.time())
    rng = random.Random(seed)
    fig.add("seed", seed)
    mdl = "qwen-rel-loop"
    names = [f"r{i:02d}" for i in range(N_PLAYGROUNDS)]
    args = dict.fromkeys(names, "--v0")
    cp.apply([model(mdl)] + [edited(n, namespace, mdl, "--v0") for n in names])
    since = time.time()
    children_at_kill = []
    for round_ in range(1, ROUNDS + 1):
        with leading_operator(cp, tmp_path / f"op{round_}") as op:
            time.sleep(rng.uniform(0.5, 6.0))
            # users keep editing while operators come and go
            for name in rng.sample(names, 3):
                args[name] = f"--v{round_}"
                cp.apply([edited(name, namespace, mdl, args[name])])
            op.stop(signal.SIGKILL)
            children_at_kill.append(len((get(cp, "leaderworkersets", namespace) or {}).get("items", [])))
    fig.add("LWS present at each kill", "/".join(map(str, children_at_kill)))
    killed = time.monotonic()
    with leading_operator(cp, tmp_path / "last") as op:
        wait_until(lambda: all_carry(cp, namespace, args), "convergence after the loop", T_CONV * 2, op.log)
        fig.add("converged after the last kill", elapsed(killed), " s")
        check_unique_and_owned(cp, namespace, set(names))
        fig.add("operator writes, all rounds", len(audit_writes(cp, op.user, since)))
        quiet_from = time.time() + 1
        time.sleep(13)
        assert child_writes(cp, op.user, quiet_from, namespace) == []
        check_healthy(op)
        fig.add("RSS", rss_mib(op), " MiB")
    fig.report()
