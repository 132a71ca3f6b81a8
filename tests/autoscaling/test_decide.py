"""The pure scaling decision: policy + signals window -> decision with reason, cooldowns and stabilization.

No host, no storage: a synthetic clock (seconds) and hand-made samples.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.autoscaling.decide import (
    Direction,
    LastDecision,
    Sample,
    decide,
    flaps,
    held_by_setup,
    hold_reason,
    need,
    trimmed,
)
from shared.autoscaling.infrastructure import environment_for, slot_resource_name, slots_declared, specification_for
from shared.autoscaling.policy import AutoscalingPolicy


def policy(**changes: object) -> AutoscalingPolicy:
    base: dict[str, object] = {
        "min_slots": 1,
        "max_slots": 10,
        "target_utilization": 0.5,
        "scale_up_step": 2,
        "scale_down_step": 1,
        "scale_up_cooldown_seconds": 60,
        "scale_down_cooldown_seconds": 300,
        "window_seconds": 120,
        "stabilization_seconds": 300,
        "idle_seconds": 600,
    }
    return AutoscalingPolicy.model_validate({**base, **changes})


def steady(held: int, size: int, until: float, every: float = 30, since: float = 0, denied: int = 0) -> list[Sample]:
    count = int((until - since) // every) + 1
    return [Sample(since + i * every, held, size, denied) for i in range(count)]


def test_denials_in_the_window_scale_up_by_one_step():
    samples = [*steady(2, 2, until=60), Sample(90, 2, 2, denied=5)]

    decision = decide(policy(), samples, size=2, held_now=2, last=None, now=90)

    assert decision is not None
    assert (decision.direction, decision.to_size, decision.reason) == (Direction.UP, 4, "capacity-unavailable")
    assert decision.signals["denials"] == 5 and decision.signals["held"] == 2


def test_high_utilization_scales_up_to_the_need_within_one_step_and_the_maximum():
    assert decide(policy(), steady(3, 4, until=60), 4, 3, None, 60).to_size == 6  # need ceil(3/0.5)=6
    assert decide(policy(max_slots=5), steady(3, 4, until=60), 4, 3, None, 60).to_size == 5
    assert decide(policy(), steady(2, 4, until=60), 4, 2, None, 60) is None  # need 4 = size: hold


def test_a_scale_up_waits_for_its_cooldown_after_any_decision():
    samples = [Sample(100, 2, 2, denied=1)]
    recent = LastDecision(at=70, direction=Direction.DOWN)

    assert decide(policy(), samples, 2, 2, recent, now=100) is None
    assert decide(policy(), samples, 2, 2, recent, now=130).direction is Direction.UP


def test_scale_down_needs_the_whole_stabilization_window_observed():
    short = steady(1, 6, until=240)  # 240 s observed, 300 needed

    assert decide(policy(), short, 6, 1, None, now=240) is None
    full = steady(1, 6, until=330)
    decision = decide(policy(), full, 6, 1, None, now=330)
    assert (decision.direction, decision.to_size, decision.reason) == (Direction.DOWN, 5, "utilization-low")


def test_scale_down_goes_only_as_low_as_the_busiest_sample_in_the_window():
    samples = steady(1, 8, until=330)
    samples[5] = Sample(samples[5].at, 3, 8)  # need 6 once in the window

    decision = decide(policy(scale_down_step=5), samples, 8, 1, None, now=330)

    assert decision.to_size == 6


def test_a_denial_in_the_stabilization_window_blocks_scale_down():
    samples = steady(1, 6, until=330)
    samples[3] = Sample(samples[3].at, 1, 6, denied=1)  # outside the up window (120 s), inside stabilization

    assert decide(policy(), samples, 6, 1, None, now=330) is None


def test_idle_goes_straight_to_the_minimum_but_never_below_leases_held():
    idle = steady(0, 8, until=660)

    decision = decide(policy(min_slots=2), idle, 8, 0, None, now=660)

    assert (decision.to_size, decision.reason) == (2, "idle")
    assert decide(policy(min_slots=2, idle_seconds=0), idle, 8, 0, None, now=660).reason == "utilization-low"


def test_never_fewer_slots_than_live_leases():
    samples = steady(0, 6, until=660)  # the window says idle, but 4 leases are held right now

    decision = decide(policy(), samples, 6, held_now=4, last=None, now=660)

    assert decision.to_size == 4
    assert decide(policy(max_slots=3), [], 6, held_now=5, last=None, now=0).to_size == 5  # above max, 5 held


def test_bounds_are_restored_at_once_whatever_the_cooldown():
    recent = LastDecision(at=0, direction=Direction.DOWN)

    assert decide(policy(min_slots=3), [], 1, 0, recent, now=1).to_size == 3
    assert decide(policy(max_slots=4), [], 6, 0, recent, now=1).reason == "above-maximum"


def test_scale_down_waits_for_its_cooldown_after_a_scale_up():
    samples = steady(1, 6, until=330)

    assert decide(policy(), samples, 6, 1, LastDecision(100, Direction.UP), now=330) is None
    assert decide(policy(), samples, 6, 1, LastDecision(30, Direction.UP), now=330) is not None


def test_flaps_counts_reversals_within_the_reversing_cooldown():
    p = policy()
    decisions = [(0.0, Direction.UP), (200.0, Direction.DOWN), (230.0, Direction.UP), (900.0, Direction.DOWN)]

    assert flaps(decisions, p) == 2  # down 200 s after up (< 300); up 30 s after down (< 60)
    assert flaps([(0.0, Direction.UP), (400.0, Direction.DOWN), (470.0, Direction.UP)], p) == 0


def test_trimmed_keeps_the_longest_window_and_the_sample_that_proves_it():
    samples = steady(1, 2, until=900)

    kept = trimmed(samples, policy(), now=900, limit=400)

    assert kept[0].at <= 900 - 600 < kept[1].at
    assert len(trimmed(samples, policy(), now=900, limit=5)) == 5


def test_need_rounds_up():
    assert [need(h, policy(target_utilization=0.7)) for h in (0, 1, 7, 8)] == [0, 2, 10, 12]


def test_a_policy_with_min_over_max_names_the_field():
    with pytest.raises(ValidationError) as error:
        policy(min_slots=5, max_slots=2)
    assert "min_slots" in str(error.value)


def test_the_specification_has_one_tagged_resource_per_slot_and_the_same_digest_every_time():
    p = policy()
    spec = specification_for("sandbox-burst", None, p, 3, "local-storage")

    assert (spec.tenant, spec.environment, spec.environment_class.value) == (
        "platform",
        "pool-sandbox-burst",
        "non-production",
    )
    assert [r.name for r in spec.resources] == [f"sandbox-burst-s000{i}" for i in range(3)]
    assert {r.metadata["pool"] for r in spec.resources} == {"sandbox-burst"} and slots_declared(spec) == 3
    assert spec.digest() == specification_for("sandbox-burst", None, p, 3, "local-storage").digest()
    empty = specification_for("sandbox-burst", "tenant-a", p, 0, "local-storage")
    assert empty.tenant == "tenant-a" and slots_declared(empty) == 0 and len(empty.resources) == 1


def test_long_pool_ids_still_make_valid_names():
    pool = "p" * 40 + "-" + "q" * 22  # 63 characters, the longest pool id

    assert len(environment_for(pool)) <= 63 and len(slot_resource_name(pool, 9999)) <= 63
    assert environment_for(pool) != environment_for(pool[:-1] + "r")
    specification_for(pool, None, policy(), 2, "local-storage")  # validates every name


def test_every_hold_says_why():
    samples_up = [Sample(100, 2, 2, denied=1)]
    recent = LastDecision(at=70, direction=Direction.DOWN)
    cases = [
        (policy(), [], 2, 0, None, 100, "no samples yet"),
        (policy(), samples_up, 2, 2, recent, 100, "scale_up_cooldown_seconds (60)"),
        (policy(max_slots=2), samples_up, 2, 2, None, 100, "at max_slots (2)"),
        (policy(), steady(0, 1, until=600), 1, 0, None, 600, "at the floor: 1 slot(s)"),
        (policy(), steady(1, 6, until=400), 6, 1, LastDecision(300, Direction.UP), 400, "scale_down_cooldown"),
        (policy(idle_seconds=0), steady(1, 6, until=240), 6, 1, None, 240, "stabilization_seconds (300)"),
        (policy(), steady(2, 4, until=60), 4, 2, None, 60, "not yet observed for stabilization_seconds"),
    ]
    for chosen, samples, size, held, last, now, expected in cases:
        assert decide(chosen, samples, size, held, last, now) is None, expected
        assert expected in hold_reason(chosen, samples, size, held, last, now)
    assert held_by_setup(policy(enabled=False), draining=False) == "the policy is disabled"
    assert held_by_setup(policy(), draining=True) == "the pool is draining"
    assert held_by_setup(policy(), draining=False) is None


@pytest.mark.parametrize("target", [0, 5e-324, 0.009, 1.01])
def test_a_target_utilization_outside_0_01_to_1_is_refused(target: float) -> None:
    """Schemathesis found it: a target of 5e-324 made one held lease need infinitely many slots (a 500)."""
    with pytest.raises(ValidationError):
        policy(target_utilization=target)


def test_the_smallest_target_asks_for_a_hundred_slots_a_lease() -> None:
    assert need(3, policy(target_utilization=0.01)) == 300
