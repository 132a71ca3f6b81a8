"""The local job scaler's reads of the job queue: quick while requests come, once a second when idle
(and from its start: most hosts ask for no job)."""

from __future__ import annotations

from runner_job.scaler import HOT_POLL_SECONDS, HOT_SECONDS, IDLE_POLL_SECONDS, MIN_POLL_SECONDS, PollingDelay


def _delays(polling: PollingDelay, empty_polls_at: list[float]) -> list[float]:
    waits = []
    for now in empty_polls_at:
        polling.after_poll(found=False, now=now)
        waits.append(polling.delay)
    return waits


def test_a_new_scaler_reads_at_once_then_backs_off_to_once_a_second() -> None:
    polling = PollingDelay(started=0.0)
    assert polling.delay == MIN_POLL_SECONDS
    # no request found since it started: it doubles its wait, up to once a second, and stays there
    assert _delays(polling, [0.05, 0.15, 0.4, 0.8, 1.6, 2.6, 60]) == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert (HOT_POLL_SECONDS, IDLE_POLL_SECONDS) == (0.1, 1.0)


def test_a_request_found_makes_the_next_read_quick_and_the_scaler_hot_again() -> None:
    polling = PollingDelay(started=0.0)
    _delays(polling, [HOT_SECONDS + t for t in range(10)])
    assert polling.delay == IDLE_POLL_SECONDS
    polling.after_poll(found=True, now=100.0)
    assert polling.delay == MIN_POLL_SECONDS
    assert _delays(polling, [100.1, 100.2, 100.0 + HOT_SECONDS - 0.1]) == [0.1, 0.1, 0.1]
    # past the window it doubles its wait, up to once a second, and stays there
    assert _delays(polling, [100.0 + HOT_SECONDS + t for t in (0.1, 1, 2, 3, 4, 60)]) == [0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
