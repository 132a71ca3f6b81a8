"""What the autoscaler records: a decision's life, and the scaler's memory of a pool.

A :class:`DecisionRecord` is what ``GET .../autoscaling/decisions`` answers:
the signals it was taken on, its reason, the run that carries it out, and a
timeline of its phases. Phases:

- scale-up: ``provisioning`` (the run adds the slots' resources) -> ``completed``
  (the pool grew; the new slots are granted from now on) | ``failed``;
- baseline (``direction`` ``baseline``, ``from_size`` = ``to_size``): ``provisioning``
  (the run provisions the slots the pool already has, when a policy is set or its
  infrastructure changes) -> ``completed`` | ``failed``; the size never changes;
- scale-down: ``draining`` (the chosen slots take no new grants; their leases
  end or expire) -> ``removing`` (the run removes their resources) ->
  ``completed`` (the pool shrank) | ``failed`` | ``cancelled`` (demand came back
  or the drain timed out: the slots re-open, nothing was removed).

:class:`ScalerState` is the one row per pool that serialises evaluations
(every write is conditional on its ETag): the samples of the signal window,
the decision number last used, the decision in flight, and the last decision's
time and direction (for cooldowns).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field

from shared.autoscaling.decide import Direction, LastDecision, Sample

MAX_TIMELINE = 20  # a decision row stays small whatever happens to it


class Phase(str, Enum):
    PROVISIONING = "provisioning"
    DRAINING = "draining"
    REMOVING = "removing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in (Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED)


class PhaseEntry(BaseModel):
    phase: Phase
    at: str
    note: str = ""


class DecisionRecord(BaseModel):
    pool: str
    number: int
    direction: Direction
    from_size: int
    to_size: int
    reason: str
    signals: dict[str, Any] = Field(default_factory=dict)
    phase: Phase
    slots: list[int] = Field(default_factory=list, description="a scale-down's chosen (draining) slots")
    run_id: str | None = None
    run_state: str | None = None
    environment: str
    decided_at: str
    updated_at: str
    completed_at: str | None = None
    detail: str | None = None
    infrastructure: str | None = Field(
        default=None, description="digest of the infrastructure settings its run provisions (set once declared)"
    )
    timeline: list[PhaseEntry] = Field(default_factory=list)

    def moved(self, phase: Phase, at: str, note: str = "", **changes: Any) -> DecisionRecord:
        timeline = [*self.timeline, PhaseEntry(phase=phase, at=at, note=note[:500])][-MAX_TIMELINE:]
        final = {"completed_at": at} if phase.is_final else {}
        return self.model_copy(update={"phase": phase, "updated_at": at, "timeline": timeline, **final, **changes})


@dataclass(frozen=True)
class ScalerState:
    samples: list[Sample] = field(default_factory=list)
    number: int = 0  # the last decision number used
    active: int = 0  # the decision in flight (0: none)
    last: LastDecision | None = None
    sampled_at: str = ""  # when the last sample was taken (denials are counted from here)
    # The infrastructure digest the last completed run provisioned every slot with; when the policy's
    # differs (a new policy, a new target or resource type) the next decision is a baseline.
    provisioned: str = ""
    etag: str | None = None  # None: no row yet


class DecisionList(BaseModel):
    decisions: list[DecisionRecord]
    before: int | None = Field(default=None, description="pass as ?before= for older decisions")


class ScalerStatus(BaseModel):
    """``GET /runtime-cloud/pools/{id}/autoscaling``: the policy and what the scaler is doing."""

    pool: str
    size: int
    policy: dict[str, Any] | None
    policy_updated_at: str | None = None
    environment: str
    active_decision: DecisionRecord | None = None
    last_decision_at: str | None = None
    last_direction: Direction | None = None
    signals: dict[str, Any] = Field(default_factory=dict)
