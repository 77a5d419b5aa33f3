"""decide_fallback(): stay, move to the next flavor, or NoFlavorSchedulable."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from llmaz.api import Flavor
from llmaz.render import InvalidManifest
from llmaz.render.fallback import ANNOTATION_FALLBACK_SECONDS, Action, decide_fallback, fallback_seconds

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
A100X8 = Flavor(name="a100x8", limits={"nvidia.com/gpu": 8}, params={"TP": "8"})
H100X8 = Flavor(name="h100x8", limits={"nvidia.com/gpu": 8}, params={"TP": "8"})
L4 = Flavor(name="l4", limits={"nvidia.com/gpu": 1})
T4X2 = Flavor(name="t4x2", limits={"nvidia.com/gpu": 2}, params={"TP": "2"})


def ago(seconds: float) -> dt.datetime:
    return NOW - dt.timedelta(seconds=seconds)


def decide(**kw: Any) -> Any:
    args: dict[str, Any] = {
        "claimed": [A100X8, L4],
        "current": "a100x8",
        "tried": (),
        "unschedulable_since": None,
        "selected_since": None,
        "any_ready": False,
        "fallback_seconds": 120,
        "retry_all_seconds": 600,
        "now": NOW,
    }
    args.update(kw)
    return decide_fallback(**args)


def test_stays_while_schedulable() -> None:
    d = decide()
    assert (d.action, d.flavor, d.recheck_after) == (Action.STAY, "a100x8", None)


def test_stays_until_the_delay_then_says_when_to_look_again() -> None:
    d = decide(unschedulable_since=ago(100))
    assert (d.action, d.flavor) == (Action.STAY, "a100x8")
    assert d.recheck_after == pytest.approx(20)


def test_moves_to_next_flavor_after_the_delay() -> None:
    d = decide(unschedulable_since=ago(121))
    assert (d.action, d.flavor, d.tried) == (Action.MOVE, "l4", ("a100x8",))
    assert "'a100x8'" in d.message
    assert "'l4'" in d.message


def test_never_moves_while_a_pod_is_ready() -> None:
    d = decide(unschedulable_since=ago(5000), any_ready=True)
    assert (d.action, d.flavor) == (Action.STAY, "a100x8")


def test_zero_disables_fallback() -> None:
    assert decide(unschedulable_since=ago(5000), fallback_seconds=0).action is Action.STAY


def test_time_counts_from_selection_of_the_current_flavor() -> None:
    """Pods left from the previous flavor do not count against the new one."""
    d = decide(
        current="l4",
        tried=("a100x8",),
        claimed=[A100X8, L4, T4X2],
        unschedulable_since=ago(500),
        selected_since=ago(30),
    )
    assert d.action is Action.STAY
    assert d.recheck_after == pytest.approx(90)


def test_compatible_flavors_are_tried_together() -> None:
    """h100x8 has the same shape as a100x8: it was already in the pods' node affinity."""
    d = decide(claimed=[A100X8, H100X8, L4], unschedulable_since=ago(200))
    assert (d.action, d.flavor, d.tried) == (Action.MOVE, "l4", ("a100x8", "h100x8"))


def test_exhausted_reports_then_retries_from_first() -> None:
    d = decide(current="l4", tried=("a100x8",), unschedulable_since=ago(130), selected_since=ago(130))
    assert (d.action, d.flavor) == (Action.EXHAUSTED, "l4")
    assert d.tried == ("a100x8", "l4")
    assert "tried a100x8, l4" in d.message
    assert d.recheck_after == pytest.approx(600 - 10)
    later = decide(
        current="l4", tried=("a100x8", "l4"), unschedulable_since=ago(721), selected_since=ago(721)
    )
    assert (later.action, later.flavor, later.tried) == (Action.MOVE, "a100x8", ())


def test_exhausted_message_is_stable() -> None:
    a = decide(current="l4", tried=("a100x8",), unschedulable_since=ago(130))
    b = decide(current="l4", tried=("a100x8", "l4"), unschedulable_since=ago(400))
    assert a.message == b.message


def test_unclaimed_current_moves_to_first() -> None:
    d = decide(current="gone", tried=("gone",))
    assert (d.action, d.flavor, d.tried) == (Action.MOVE, "a100x8", ())


def test_nothing_selected_yet_starts_at_first() -> None:
    assert decide(current=None).flavor == "a100x8"


def test_single_flavor_never_moves() -> None:
    assert decide(claimed=[L4], current="l4", unschedulable_since=ago(9999)).action is Action.STAY


def test_no_flavors() -> None:
    assert decide(claimed=[], current=None).flavor is None


def test_fallback_seconds_annotation() -> None:
    assert fallback_seconds(None, 120) == 120
    assert fallback_seconds({ANNOTATION_FALLBACK_SECONDS: "30"}, 120) == 30
    assert fallback_seconds({ANNOTATION_FALLBACK_SECONDS: "0"}, 120) == 0


@pytest.mark.parametrize("value", ["abc", "-1", "90000", "1.5"])
def test_fallback_seconds_annotation_rejects_bad_values(value: str) -> None:
    with pytest.raises(InvalidManifest) as err:
        fallback_seconds({ANNOTATION_FALLBACK_SECONDS: value}, 120)
    assert ANNOTATION_FALLBACK_SECONDS in str(err.value)
    assert value in str(err.value)
