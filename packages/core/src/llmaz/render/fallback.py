"""Flavor fallback: when to move a workload to the next claimed flavor (pure decision).

Pods sized for one flavor cannot land on another flavor's nodes when the accelerator counts differ
(one A100 or two L4s), so the stock scheduler cannot fall back by itself. The operator does:

* while pods stay ``Unschedulable`` on the current flavor for ``fallback_seconds`` (operator config
  ``flavorFallback.unschedulableSeconds``, per object the annotation
  ``llmaz.io/flavor-fallback-seconds``), it re-renders with the next claimed flavor not tried yet
  and rolls the workload;
* flavors compatible with the current one (same accelerator counts and shape params) are already in
  the pods' node affinity, so they count as tried along with it;
* when every flavor was tried, it reports ``NoFlavorSchedulable`` and keeps the last flavor; after
  ``retry_all_seconds`` more it starts again from the first flavor with an empty tried list;
* it never moves while a pod of the workload is Ready.

:func:`decide_fallback` is the whole decision; it takes ``now`` and returns when to look again.
The operator keeps its inputs in ``status.flavor`` (:class:`llmaz.api.FlavorStatus`): ``selected``,
``tried`` and ``selectedAt``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from llmaz.api import Flavor
from llmaz.render import flavors as flavor_mod
from llmaz.render.errors import InvalidManifest

ANNOTATION_FALLBACK_SECONDS = "llmaz.io/flavor-fallback-seconds"
"""Per-object override of ``flavorFallback.unschedulableSeconds`` (0 disables fallback)."""
MAX_FALLBACK_SECONDS = 86400
NO_FLAVOR_SCHEDULABLE = "NoFlavorSchedulable"
"""Condition reason when every claimed flavor was tried and none could be scheduled."""
FLAVOR_FALLBACK = "FlavorFallback"
"""Event reason of a move to another flavor."""


class Action(StrEnum):
    STAY = "Stay"
    """Keep the current flavor (nothing to do, or not waited long enough)."""
    MOVE = "Move"
    """Re-render with :attr:`FallbackDecision.flavor` and roll the workload."""
    EXHAUSTED = "Exhausted"
    """Every flavor failed: keep the current one, report ``NoFlavorSchedulable``."""


@dataclass(frozen=True)
class FallbackDecision:
    """What to do with the workload's flavor.

    :param action: see :class:`Action`.
    :param flavor: the flavor to render with (the current one unless ``action`` is ``MOVE``).
    :param tried: flavors tried so far, in order, to record in status.
    :param message: one line for an Event (``MOVE``) or the condition (``EXHAUSTED``); empty on STAY.
    :param recheck_after: seconds after which the decision may change with no other input change
        (the operator's requeue delay), or ``None`` when only a pod change can change it.
    """

    action: Action
    flavor: str | None
    tried: tuple[str, ...]
    message: str = ""
    recheck_after: float | None = None


def fallback_seconds(annotations: Mapping[str, str] | None, default: int) -> int:
    """The fallback delay of one object: its annotation, else the operator's default.

    :raises InvalidManifest: naming the annotation when its value is not a whole number of seconds
        between 0 and 86400.
    """
    raw = (annotations or {}).get(ANNOTATION_FALLBACK_SECONDS)
    if raw is None:
        return default
    field = f"metadata.annotations[{ANNOTATION_FALLBACK_SECONDS}]"
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidManifest(field, f"{raw!r} is not a whole number of seconds") from None
    if not 0 <= value <= MAX_FALLBACK_SECONDS:
        raise InvalidManifest(field, f"{value} must be between 0 and {MAX_FALLBACK_SECONDS} seconds")
    return value


def _after(start: dt.datetime, seconds: float, now: dt.datetime) -> float:
    """Seconds left until ``start + seconds`` (<= 0 when reached)."""
    return seconds - (now - start).total_seconds()


def decide_fallback(
    *,
    claimed: Sequence[Flavor],
    current: str | None,
    tried: Sequence[str],
    unschedulable_since: dt.datetime | None,
    selected_since: dt.datetime | None,
    any_ready: bool,
    fallback_seconds: int,
    retry_all_seconds: int,
    now: dt.datetime,
) -> FallbackDecision:
    """Stay on the current flavor, move to the next one, or report that none fits.

    :param claimed: the claimed flavors in priority order.
    :param current: the flavor the workload is rendered for (``None``: the first claimed).
    :param tried: flavors already tried (from status), in order.
    :param unschedulable_since: :attr:`llmaz.render.diagnosis.Diagnosis.unschedulable_since`.
    :param selected_since: when ``current`` was selected (from status); pods are only held against
        a flavor from that time on, so pods left over from the previous flavor do not count.
    :param any_ready: whether any pod of the workload is Ready (then nothing moves).
    :param fallback_seconds: from :func:`fallback_seconds`; 0 disables fallback.
    :param retry_all_seconds: after every flavor failed, wait this long before starting over.
    :param now: the current time (aware).
    """
    names = [f.name for f in claimed]
    if not names:
        return FallbackDecision(Action.STAY, None, ())
    if current not in names:
        # No flavor selected yet, or the claim changed under us: start at the first.
        return FallbackDecision(
            Action.STAY if current is None else Action.MOVE,
            names[0],
            (),
            "" if current is None else f"flavor {current!r} is no longer claimed; using {names[0]!r}",
        )
    done = tuple(dict.fromkeys(t for t in tried if t in names))
    if any_ready or unschedulable_since is None or fallback_seconds <= 0 or len(names) < 2:
        return FallbackDecision(Action.STAY, current, done)
    since = max(unschedulable_since, selected_since) if selected_since else unschedulable_since
    left = _after(since, fallback_seconds, now)
    if left > 0:
        return FallbackDecision(Action.STAY, current, done, recheck_after=left)
    by_name = {f.name: f for f in claimed}
    group = [f.name for f in flavor_mod.compatible(claimed, by_name[current])]
    now_tried = tuple(dict.fromkeys([*done, current, *group]))
    waited = f"pods stayed Unschedulable on flavor {current!r} for {fallback_seconds}s"
    for name in names:
        if name not in now_tried:
            return FallbackDecision(
                Action.MOVE, name, now_tried, f"{waited}; moving to flavor {name!r}", recheck_after=None
            )
    retry_left = _after(since, fallback_seconds + retry_all_seconds, now)
    if retry_left > 0:
        return FallbackDecision(
            Action.EXHAUSTED,
            current,
            now_tried,
            f"no claimed flavor can be scheduled (tried {', '.join(now_tried)}); "
            f"retrying from {names[0]!r} every {retry_all_seconds}s",
            recheck_after=retry_left,
        )
    return FallbackDecision(
        Action.MOVE,
        names[0],
        (),
        f"no claimed flavor could be scheduled for {retry_all_seconds}s; retrying from flavor {names[0]!r}",
    )
