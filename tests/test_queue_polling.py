"""The local host polls queues as the Functions queue extension does (``RandomizedExponentialBackoffStrategy``).

Pure: the delays are computed with a seeded random source, never slept; no
assertion is about how long anything took.
"""

from __future__ import annotations

import random

import pytest

from devhost.config import ConfigError
from devhost.queue_listener import MIN_POLL_SECONDS, PollingDelay


def test_empty_polls_back_off_by_randomised_doublings_up_to_the_maximum_and_a_found_message_resets_it():
    delay = PollingDelay(2.0, random.Random(7))

    empty = [delay.next(found=False) for _ in range(8)]

    increments = [(wait - MIN_POLL_SECONDS) / (MIN_POLL_SECONDS * 2**n) for n, wait in enumerate(empty[:4])]
    assert all(0.8 <= factor <= 1.2 for factor in increments), increments  # 100 ms + 100 ms x 2^n x (0.8..1.2)
    assert empty == sorted(empty) and empty[-1] == 2.0  # never beyond maxPollingInterval
    assert delay.next(found=True) == MIN_POLL_SECONDS  # after messages: the minimum, not at once
    assert delay.next(found=False) < 0.35  # the back-off starts again from the bottom


def test_a_max_polling_interval_under_100_ms_is_refused_as_azure_refuses_it():
    with pytest.raises(ConfigError, match="must not be less than 00:00:00.100"):
        PollingDelay(0.05)
    assert PollingDelay(0.1).next(found=False) == 0.1  # the minimum itself is allowed
