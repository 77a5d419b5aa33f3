"""When the usage status (``InUse``) of a model or backend is refreshed while its users change."""

from __future__ import annotations

from llmaz.operator.usage import COALESCE_SECONDS, MAX_WAIT_SECONDS, refresh_due


def test_refreshed_after_a_quiet_second_or_every_half_minute_while_users_keep_changing() -> None:
    # hundreds of Playgrounds created over four minutes: a user changes every 0.25 s
    writes, first = [], None
    for tick in range(1, 960):
        now = tick * 0.25
        first = now if first is None else first
        if refresh_due(first, now, now + 0.25):
            writes.append(now)
            first = None
    assert 6 <= len(writes) <= 9, writes  # every 30 s, not once per second (240)
    # a single change is written a second later; the operator is quiet right after the last one
    assert not refresh_due(100.0, 100.0, 100.5)
    assert refresh_due(100.0, 100.0, 100.0 + COALESCE_SECONDS)
    assert refresh_due(0.0, 100.0, MAX_WAIT_SECONDS + 0.1)
