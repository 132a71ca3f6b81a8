"""The scaling decision: a policy and a window of signals in, at most one decision (with its reason) out.

Pure: no storage, no clock (``now`` is an argument), so the tests and the
simulation benchmark (``bench/autoscaling.py``) drive exactly the logic the
timer runs, on a synthetic clock.

Signals are samples taken at each evaluation: the leases held (valid on their
slot rows), the pool's size, and the ``capacity-unavailable`` denials recorded
since the previous sample. A sample's *need* is ``ceil(held / target_utilization)``.

Rules, in order:

1. Outside the policy's bounds the pool goes back inside at once (``below-minimum``,
   ``above-maximum``; never below the leases held).
2. **Up** when the signal window holds denials (``capacity-unavailable``: demand
   the pool turned away, so one step up) or the latest need exceeds the size
   (``utilization-high``: up to the need). At most ``scale_up_step`` slots.
3. **Idle**: no lease held and no denial for ``idle_seconds`` (and that long
   observed): straight to ``min_slots``.
4. **Down** (``utilization-low``) only when ``stabilization_seconds`` of samples
   have been observed and even the highest need among them is below the size
   and none of them saw a denial; at most ``scale_down_step`` slots, never
   below the leases held now.

Cooldowns: a decision of direction *d* waits ``cooldown(d)`` after the
previous decision of either direction. So an opposite decision never follows
within its cooldown (no flapping), which :func:`flaps` measures independently.
Bounds (rule 1) ignore cooldowns: they only ever move toward the policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from shared.autoscaling.policy import AutoscalingPolicy


class Direction(str, Enum):
    UP = "up"
    DOWN = "down"
    # Not a resize: the run that provisions the slots a pool already has (a new policy, or new
    # infrastructure settings). :func:`decide` never answers it; the scaler takes it (see scaler.py).
    BASELINE = "baseline"


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the epoch (or since a simulation began)
    held: int
    size: int
    denied: int = 0  # capacity-unavailable denials since the previous sample

    def to_list(self) -> list[float | int]:
        return [round(self.at, 3), self.held, self.size, self.denied]

    @classmethod
    def from_list(cls, item: Sequence[Any]) -> Sample:
        return cls(float(item[0]), int(item[1]), int(item[2]), int(item[3]))


@dataclass(frozen=True)
class LastDecision:
    at: float
    direction: Direction


@dataclass(frozen=True)
class Decision:
    direction: Direction
    from_size: int
    to_size: int
    reason: str
    signals: dict[str, Any] = field(default_factory=dict)


def need(held: int, policy: AutoscalingPolicy) -> int:
    """Slots that hold ``held`` leases at the target utilization."""
    return math.ceil(held / policy.target_utilization - 1e-9) if held else 0


def within(samples: Sequence[Sample], now: float, seconds: float) -> list[Sample]:
    return [s for s in samples if s.at > now - seconds]


def observed_for(samples: Sequence[Sample], now: float, seconds: float) -> bool:
    """Were samples taken across the whole of the last ``seconds`` (the oldest one at least that old)?"""
    return bool(samples) and samples[0].at <= now - seconds


def summarize(samples: Sequence[Sample], policy: AutoscalingPolicy, now: float) -> dict[str, Any]:
    """The signals a decision records: what the scaler saw in its window."""
    window = within(samples, now, policy.window_seconds)
    latest = samples[-1] if samples else None
    utilizations = [s.held / s.size for s in window if s.size]
    return {
        "window_seconds": policy.window_seconds,
        "samples": len(window),
        "held": latest.held if latest else 0,
        "size": latest.size if latest else 0,
        "utilization": round(latest.held / latest.size, 3) if latest and latest.size else None,
        "mean_utilization": round(sum(utilizations) / len(utilizations), 3) if utilizations else None,
        "peak_held": max((s.held for s in window), default=0),
        "denials": sum(s.denied for s in window),
    }


def decide(
    policy: AutoscalingPolicy,
    samples: Sequence[Sample],
    size: int,
    held_now: int,
    last: LastDecision | None,
    now: float,
) -> Decision | None:
    """The decision for a pool of ``size`` slots holding ``held_now`` leases, or None (hold)."""
    signals = summarize(samples, policy, now)

    def made(direction: Direction, to_size: int, reason: str) -> Decision:
        return Decision(direction, size, to_size, reason, signals)

    floor = max(policy.min_slots, held_now)  # never fewer slots than live leases
    if size < policy.min_slots:
        return made(Direction.UP, policy.min_slots, "below-minimum")
    if size > policy.max_slots and max(policy.max_slots, held_now) < size:
        return made(Direction.DOWN, max(policy.max_slots, held_now), "above-maximum")
    if not samples:
        return None
    up = _up(policy, samples, size, now)
    if up is not None:
        return made(Direction.UP, *up) if _cooled(policy, last, Direction.UP, now) else None
    if not _cooled(policy, last, Direction.DOWN, now):
        return None
    down = _down(policy, samples, size, floor, now)
    return made(Direction.DOWN, *down) if down is not None else None


def _up(policy: AutoscalingPolicy, samples: Sequence[Sample], size: int, now: float) -> tuple[int, str] | None:
    ceiling = min(policy.max_slots, size + policy.scale_up_step)
    if ceiling <= size:
        return None
    window = within(samples, now, policy.window_seconds)
    if sum(s.denied for s in window):
        return ceiling, "capacity-unavailable"
    wanted = need(samples[-1].held, policy)
    if wanted > size:
        return min(ceiling, wanted), "utilization-high"
    return None


def _down(
    policy: AutoscalingPolicy, samples: Sequence[Sample], size: int, floor: int, now: float
) -> tuple[int, str] | None:
    if floor >= size:
        return None
    if policy.idle_seconds and observed_for(samples, now, policy.idle_seconds):
        recent = within(samples, now, policy.idle_seconds)
        if all(s.held == 0 and s.denied == 0 for s in recent):
            return floor, "idle"
    if not observed_for(samples, now, policy.stabilization_seconds):
        return None
    # With no stabilization window only the latest sample counts: a sample taken a moment ago
    # must not hold a scale-down back by how fast the evaluations came.
    settled = within(samples, now, policy.stabilization_seconds) if policy.stabilization_seconds else [samples[-1]]
    if any(s.denied for s in settled):
        return None
    highest = max(need(s.held, policy) for s in settled)
    if highest >= size:
        return None
    return max(floor, highest, size - policy.scale_down_step), "utilization-low"


def held_by_setup(policy: AutoscalingPolicy, draining: bool) -> str | None:
    """Why a pool is not decided on at all (its policy off, the pool draining, bounds that cross), or None."""
    if not policy.enabled:
        return "the policy is disabled"
    if draining:
        return "the pool is draining"
    if policy.min_slots > policy.max_slots:
        return f"min_slots {policy.min_slots} exceeds max_slots {policy.max_slots} within the pool's min..max"
    return None


def hold_reason(
    policy: AutoscalingPolicy,
    samples: Sequence[Sample],
    size: int,
    held_now: int,
    last: LastDecision | None,
    now: float,
) -> str:
    """Why :func:`decide` held (answered None), in the terms of the policy an operator can change."""
    if not samples:
        return "no samples yet"
    if _up(policy, samples, size, now) is not None:
        return (
            f"a scale-up is wanted but the last decision is within scale_up_cooldown_seconds ({policy.cooldown(True)})"
        )
    if size >= policy.max_slots and (need(held_now, policy) > size or any(s.denied for s in samples)):
        return f"at max_slots ({policy.max_slots}) although more is wanted"
    if max(policy.min_slots, held_now) >= size:
        return f"at the floor: {size} slot(s), min_slots {policy.min_slots}, {held_now} lease(s) held"
    if not _cooled(policy, last, Direction.DOWN, now):
        return f"the last decision is within scale_down_cooldown_seconds ({policy.cooldown(False)})"
    if not observed_for(samples, now, policy.stabilization_seconds):
        return f"not yet observed for stabilization_seconds ({policy.stabilization_seconds})"
    return f"utilization is within target_utilization ({policy.target_utilization})"


def _cooled(policy: AutoscalingPolicy, last: LastDecision | None, direction: Direction, now: float) -> bool:
    return last is None or now - last.at >= policy.cooldown(direction is Direction.UP)


def flaps(decisions: Sequence[tuple[float, Direction]], policy: AutoscalingPolicy) -> int:
    """Decisions that reverse the previous one within the reversing direction's cooldown."""
    count = 0
    for (before_at, before), (at, direction) in zip(decisions, decisions[1:], strict=False):
        if direction is not before and at - before_at < policy.cooldown(direction is Direction.UP):
            count += 1
    return count


def trimmed(samples: Sequence[Sample], policy: AutoscalingPolicy, now: float, limit: int) -> list[Sample]:
    """The samples worth keeping: the longest window back, plus the one just before it (it proves the
    window was observed), and at most ``limit`` of them."""
    horizon = now - policy.memory_seconds
    keep = [s for s in samples if s.at > horizon]
    older = [s for s in samples if s.at <= horizon]
    if older:
        keep.insert(0, older[-1])
    return keep[-limit:]
