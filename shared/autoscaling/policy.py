"""A pool's autoscaling policy: bounds, target, steps, cooldowns, windows, and its infrastructure.

Body of ``PUT /runtime-cloud/pools/{id}/autoscaling`` and the row it is kept
in. Every default is here, in one place:

- ``min_slots`` / ``max_slots``: required; within the pool's own ``min``..``max``
  (checked against the pool when the policy is written) and at most
  :data:`~shared.desired_state.MAX_RESOURCES` (one resource per slot).
- ``target_utilization``: ``0.7``; held leases over slots the scaler steers to, 0.01..1 (a
  smaller target would ask for more slots than any pool holds: one lease over 5e-324 is infinite).
- ``scale_up_step`` / ``scale_down_step``: ``2`` / ``1`` slots at most per decision.
- ``scale_up_cooldown_seconds`` / ``scale_down_cooldown_seconds``: ``60`` / ``300``;
  no decision of that direction sooner than this after the previous decision
  (of either direction), so no decision is ever reversed within its cooldown.
- ``window_seconds``: ``120``; the signal window (utilization, ``capacity-unavailable``
  denials) a scale-up looks at.
- ``stabilization_seconds``: ``300``; a scale-down needs this long of observed
  samples, and goes only as low as the highest need among them.
- ``idle_seconds``: ``600``; with no lease held and no denial for this long the
  pool goes to ``min_slots`` at once (``0``: never).
- ``drain_timeout_seconds``: ``3600``; a scale-down whose chosen slots still hold
  leases after this is cancelled (the slots re-open; nothing is revoked).
- ``infrastructure``: what a slot is in the target (see :class:`Infrastructure`).
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from shared.desired_state.api import MAX_RESOURCES, EnvironmentClass, PulumiProgram, ResourceType, RunnerName
from shared.platform.errors import FieldError
from shared.platform.json_types import JsonTyped


class _Strict(JsonTyped):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Infrastructure(_Strict):
    """The pool's infrastructure specification, generated from the pool and this.

    ``embedded`` (the default): one ``resource_type`` (queue or blob container)
    per slot in ``target``, tagged with the pool and the slot. ``pulumi``: the
    ``pulumi`` program, given the pool and its slot count as config (``pool``,
    ``slots``). ``target``: a configured target (default: the setting
    ``RuntimeCloud:Autoscaling:DefaultTarget``, else the first storage-account
    target). ``environment_class``: ``non-production`` unless said otherwise; a
    production pool's scaling runs wait for an operator's approval.
    """

    target: str | None = Field(default=None, min_length=1, max_length=128)
    environment_class: EnvironmentClass = EnvironmentClass.NON_PRODUCTION
    runner: RunnerName = RunnerName.EMBEDDED
    resource_type: ResourceType = ResourceType.QUEUE
    pulumi: PulumiProgram | None = None

    @model_validator(mode="after")
    def _runner_has_its_program(self) -> Infrastructure:
        if self.runner is RunnerName.PULUMI and self.pulumi is None:
            raise FieldError(("pulumi",), "the pulumi runner needs a pulumi program")
        if self.runner is RunnerName.EMBEDDED and self.pulumi is not None:
            raise FieldError(("pulumi",), "the embedded runner takes no pulumi program")
        if self.resource_type is ResourceType.TABLE:  # tables carry no metadata: a slot could not be tagged
            raise FieldError(("resource_type",), "one of queue, blob-container")
        return self


class AutoscalingPolicy(_Strict):
    enabled: bool = True
    min_slots: int = Field(ge=0, le=MAX_RESOURCES)
    max_slots: int = Field(ge=0, le=MAX_RESOURCES)
    target_utilization: float = Field(default=0.7, ge=0.01, le=1)
    scale_up_step: int = Field(default=2, ge=1, le=MAX_RESOURCES)
    scale_down_step: int = Field(default=1, ge=1, le=MAX_RESOURCES)
    scale_up_cooldown_seconds: int = Field(default=60, ge=0, le=86_400)
    scale_down_cooldown_seconds: int = Field(default=300, ge=0, le=86_400)
    window_seconds: int = Field(default=120, ge=1, le=3_600)
    stabilization_seconds: int = Field(default=300, ge=0, le=3_600)
    idle_seconds: int = Field(default=600, ge=0, le=86_400)
    drain_timeout_seconds: int = Field(default=3_600, ge=1, le=7 * 86_400)
    infrastructure: Infrastructure = Field(default_factory=Infrastructure)

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingPolicy:
        if self.min_slots > self.max_slots:
            raise FieldError(("min_slots",), "min_slots must not exceed max_slots")
        return self

    def cooldown(self, up: bool) -> int:
        return self.scale_up_cooldown_seconds if up else self.scale_down_cooldown_seconds

    @property
    def memory_seconds(self) -> int:
        """How far back samples are kept: the longest window any rule looks at."""
        return max(self.window_seconds, self.stabilization_seconds, self.idle_seconds)
