"""Pool autoscaling, simulated: a synthetic demand curve against fixed pools and an autoscaled one.

In process, on a synthetic clock (one-second ticks): what is measured is the
policy's behaviour, not storage speed, so no Azurite is needed and the result
does not depend on the machine's load. The autoscaled pool is driven by the
real decision logic (:func:`shared.autoscaling.decide.decide`) every
``EVALUATE_EVERY`` seconds (the timer's default), with the scaler's lifecycle
modelled as it runs in the host:

- a scale-up is a provisioning run that takes ``RUN_SECONDS``; the new slots
  are granted only after it;
- a scale-down drains the top slots first (no new grants), waits until their
  leases ended, then its run takes ``RUN_SECONDS``, then the pool shrinks;
  denials while draining cancel it (nothing removed, no run);
- a lease is never revoked: leases run to their end whatever the pool does.

Demand: workers arrive (Poisson) at a rate that alternates quiet periods and
bursts, and hold a lease for an exponentially distributed time. A refused
worker (``capacity-unavailable``: a denial) retries every ``RETRY_SECONDS`` and
gives up after ``GIVE_UP_SECONDS``. The fixed pools are the seed's size (8) and
the burst peak's (24, what it takes to refuse nobody); the autoscaled pool
scales within 2..24. Printed as a table, with the autoscaled pool's figures as
ratios against the fixed pools measured in the same run, and recorded in
``.data/bench/latest.json``.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._results import record
from shared.autoscaling.decide import Direction, LastDecision, Sample, decide, flaps, trimmed
from shared.autoscaling.policy import AutoscalingPolicy

SEED = 17
HOURS = 8
EVALUATE_EVERY = 30  # seconds: the timer's default schedule
RUN_SECONDS = 45  # a provisioning run of the pool's specification (plan + apply)
RETRY_SECONDS = 10
GIVE_UP_SECONDS = 180
MEAN_HOLD_SECONDS = 150.0
POLICY = AutoscalingPolicy(
    min_slots=2,
    max_slots=24,
    target_utilization=0.7,
    scale_up_step=4,
    scale_down_step=2,
    scale_up_cooldown_seconds=60,
    scale_down_cooldown_seconds=300,
    window_seconds=120,
    stabilization_seconds=300,
    idle_seconds=600,
)


def demand_rate(t: int) -> float:
    """Arrivals per second: a quiet baseline, two-hourly bursts of 20 minutes, and long idle stretches."""
    hour, minute = divmod(t // 60, 60)
    if hour % 4 == 3:  # an idle hour in every four
        return 0.0
    if (t // 60) % 120 < 20:  # a burst for 20 minutes in every two hours
        return 0.11  # ~16 leases held at once on average
    return 0.02 if minute % 30 < 20 else 0.005


@dataclass
class Worker:
    arrived: int
    hold: float
    next_try: int


@dataclass
class Slot:
    lease_ends: float = 0.0  # 0: free
    draining: bool = False


@dataclass
class Pool:
    """A modelled pool: slots ``0..size-1`` are open; leases end on their own time, never revoked."""

    slots: list[Slot]
    denials: int = 0
    granted: int = 0
    abandoned: int = 0
    utilization_sum: float = 0.0
    slot_seconds: float = 0.0
    over_grants: int = 0

    @property
    def size(self) -> int:
        return len(self.slots)

    def held(self, now: float) -> int:
        return sum(1 for s in self.slots if s.lease_ends > now) + sum(1 for s in self.retired if s.lease_ends > now)

    retired: list[Slot] = field(default_factory=list)  # shrunk away (only ever free ones: checked)

    def try_grant(self, now: float, hold: float) -> bool:
        free = [s for s in self.slots if s.lease_ends <= now and not s.draining]
        if not free:
            self.denials += 1
            return False
        free[0].lease_ends = now + hold
        self.granted += 1
        return True


@dataclass
class Scaler:
    """The host's decision lifecycle, modelled: provisioning -> grow; draining -> removing -> shrink."""

    pool: Pool
    samples: list[Sample] = field(default_factory=list)
    last: LastDecision | None = None
    log: list[tuple[float, Direction]] = field(default_factory=list)
    runs: int = 0
    cancelled: int = 0
    phase: str = ""
    target: int = 0
    decided_at: float = 0.0
    run_done_at: float = 0.0
    denials_seen: int = 0

    def evaluate(self, now: float) -> None:
        denied, self.denials_seen = self.pool.denials - self.denials_seen, self.pool.denials
        held = self.pool.held(now)
        self.samples = trimmed([*self.samples, Sample(now, held, self.pool.size, denied)], POLICY, now, 400)
        if self.phase:
            self._advance(now)
            return
        decision = decide(POLICY, self.samples, self.pool.size, held, self.last, now)
        if decision is None:
            return
        self.last = LastDecision(now, decision.direction)
        self.log.append((now, decision.direction))
        self.target, self.decided_at = decision.to_size, now
        if decision.direction is Direction.UP:
            self.phase, self.run_done_at, self.runs = "provisioning", now + RUN_SECONDS, self.runs + 1
        else:
            self.phase = "draining"
            for slot in self.pool.slots[self.target :]:
                slot.draining = True
        self._advance(now)

    def _advance(self, now: float) -> None:
        pool = self.pool
        if self.phase == "provisioning" and now >= self.run_done_at:
            pool.slots.extend(Slot() for _ in range(self.target - pool.size))
            self._done()
        elif self.phase == "draining":
            chosen = pool.slots[self.target :]
            if sum(s.denied for s in self.samples if s.at > self.decided_at):
                for slot in chosen:
                    slot.draining = False
                self.cancelled += 1
                self._done()
            elif all(s.lease_ends <= now for s in chosen):
                self.phase, self.run_done_at, self.runs = "removing", now + RUN_SECONDS, self.runs + 1
        elif self.phase == "removing" and now >= self.run_done_at:
            removed = pool.slots[self.target :]
            pool.over_grants += sum(1 for s in removed if s.lease_ends > now)  # a removed slot in use: never
            pool.retired.extend(removed)
            del pool.slots[self.target :]
            self._done()

    def _done(self) -> None:
        self.phase = ""
        latest = self.samples[-1]
        self.samples = [Sample(latest.at, latest.held, self.pool.size, 0)]


def simulate(pool: Pool, scaler: Scaler | None, seed: int = SEED) -> Pool:
    rng = random.Random(seed)
    waiting: list[Worker] = []
    for t in range(HOURS * 3600):
        rate = demand_rate(t)
        arrivals = _poisson(rng, rate)
        waiting.extend(Worker(t, rng.expovariate(1 / MEAN_HOLD_SECONDS), t) for _ in range(arrivals))
        still: list[Worker] = []
        for worker in waiting:
            if worker.next_try > t:
                still.append(worker)
            elif pool.try_grant(t, worker.hold):
                continue
            elif t - worker.arrived >= GIVE_UP_SECONDS:
                pool.abandoned += 1
            else:
                worker.next_try = t + RETRY_SECONDS
                still.append(worker)
        waiting = still
        if scaler is not None and t % EVALUATE_EVERY == 0:
            scaler.evaluate(float(t))
        held = sum(1 for s in pool.slots if s.lease_ends > t)
        pool.utilization_sum += held / pool.size if pool.size else 0.0
        pool.slot_seconds += pool.size
    return pool


def _poisson(rng: random.Random, rate: float) -> int:
    if rate <= 0:
        return 0
    limit, product, count = math.exp(-rate), rng.random(), 0
    while product > limit:
        product *= rng.random()
        count += 1
    return count


def main() -> None:
    seconds = HOURS * 3600
    fixed = {size: simulate(Pool([Slot() for _ in range(size)]), None) for size in (8, 24)}
    pool = Pool([Slot() for _ in range(POLICY.min_slots)])
    scaler = Scaler(pool)
    simulate(pool, scaler)

    def row(name: str, p: Pool, runs: str, flap: str) -> str:
        utilization = p.utilization_sum / seconds
        return (
            f"{name:<28}{p.denials:>9}{p.abandoned:>10}{p.granted:>9}{utilization:>11.1%}"
            f"{p.slot_seconds / 3600:>12.1f}{runs:>7}{flap:>7}"
        )

    flap_count = flaps(scaler.log, POLICY)
    print(f"pool autoscaling simulation: {HOURS} h of synthetic demand (bursts, quiet, idle), seed {SEED}")
    print(
        f"{'pool':<28}{'denials':>9}{'abandoned':>10}{'granted':>9}{'mean util':>11}{'slot-hours':>12}"
        f"{'runs':>7}{'flaps':>7}"
    )
    for size, p in fixed.items():
        print(row(f"fixed, {size} slots", p, "0", "-"))
    print(row(f"autoscaled, {POLICY.min_slots}..{POLICY.max_slots} slots", pool, str(scaler.runs), str(flap_count)))
    ups = sum(1 for _, d in scaler.log if d is Direction.UP)
    print(
        f"decisions: {len(scaler.log)} ({ups} up, {len(scaler.log) - ups} down, {scaler.cancelled} drains cancelled"
        f" by returning demand); leases on removed slots: {pool.over_grants}"
    )
    assert pool.over_grants == 0, "a slot was removed while in use"
    small, peak = fixed[8], fixed[24]

    def ratio(value: float, base: float) -> float:
        return value / base if base else math.inf

    util: Callable[[Pool], float] = lambda p: p.utilization_sum / seconds  # noqa: E731
    values = {
        "autoscaling_denials_vs_fixed8": ratio(pool.denials, small.denials),
        "autoscaling_utilization_vs_fixed24": ratio(util(pool), util(peak)),
        "autoscaling_slot_hours_vs_fixed24": ratio(pool.slot_seconds, peak.slot_seconds),
        "autoscaling_mean_utilization": util(pool),
        "autoscaling_scaling_runs": scaler.runs,
        "autoscaling_flaps": flap_count,
    }
    print(
        f"autoscaled vs fixed 8: denials {values['autoscaling_denials_vs_fixed8']:.2f}x; vs fixed 24: "
        f"mean utilization {values['autoscaling_utilization_vs_fixed24']:.2f}x, slot-hours "
        f"{values['autoscaling_slot_hours_vs_fixed24']:.2f}x"
    )
    record(
        "autoscaling",
        values,
        {
            "denials": {"fixed8": small.denials, "fixed24": peak.denials, "autoscaled": pool.denials},
            "mean_utilization": {"fixed8": round(util(small), 3), "fixed24": round(util(peak), 3)},
            "decisions": len(scaler.log),
            "drains_cancelled": scaler.cancelled,
            "seed": SEED,
            "hours": HOURS,
        },
    )


if __name__ == "__main__":
    main()
