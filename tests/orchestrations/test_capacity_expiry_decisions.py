"""The lease-expiry orchestration, replayed in process: sweep, sleep one interval, continue as new."""

from __future__ import annotations

from datetime import timedelta

from orchestrations.capacity import SWEEP_ACTIVITY
from tests.support.orchestrator_replay import T0, Call, ContinueAsNew, OrchestratorReplay, Timer

ORDER = {"pool": "pool-1", "interval_seconds": 30, "periods": 4}
SWEPT = {"expired": 2, "freed": 2}


def test_each_period_sweeps_then_continues_as_new_after_one_interval_with_the_period_counted(orchestrators):
    replay = OrchestratorReplay(orchestrators.capacity_lease_expiry, ORDER)
    assert replay.decide().new == [Call(SWEEP_ACTIVITY, {"pool": "pool-1"})]
    replay.complete(SWEEP_ACTIVITY, SWEPT)

    sleeping = replay.decide()
    assert sleeping.new == [Timer(T0 + timedelta(seconds=30))]
    assert sleeping.custom_status == {"last_sweep": SWEPT, "periods": 5}
    assert sleeping.done is False

    replay.fire_timer()
    continued = replay.decide()
    assert continued.new == [ContinueAsNew({"pool": "pool-1", "interval_seconds": 30, "periods": 5})]
    assert continued.done is True


def test_a_sweep_that_fails_every_retry_keeps_the_orchestration_alive(orchestrators):
    replay = OrchestratorReplay(orchestrators.capacity_lease_expiry, ORDER)
    replay.decide()

    replay.fail(SWEEP_ACTIVITY, attempts=3)  # orchestrations.capacity.SWEEP_RETRY

    sleeping = replay.decide()
    assert sleeping.new == [Timer(replay.now + timedelta(seconds=30))]
    assert sleeping.custom_status["periods"] == 5
    assert "the store is down" in sleeping.custom_status["last_error"]
    replay.fire_timer()
    assert replay.decide().new == [ContinueAsNew({"pool": "pool-1", "interval_seconds": 30, "periods": 5})]


def test_an_order_without_an_interval_sweeps_every_30_seconds(orchestrators):
    replay = OrchestratorReplay(orchestrators.capacity_lease_expiry, {"pool": "pool-2"})
    replay.decide()
    replay.complete(SWEEP_ACTIVITY, SWEPT)

    assert replay.decide().new == [Timer(T0 + timedelta(seconds=30))]
