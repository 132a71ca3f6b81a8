"""``RuntimeCloud:IaC:*``: which runner applies by default and how it paces and slices an apply."""

from __future__ import annotations

from pydantic import Field

from shared.desired_state import RunnerName
from shared.settings_section import Section


class IaCSettings(Section):
    runner: RunnerName = Field(default=RunnerName.PULUMI, alias="Runner")
    # Pause between resource changes of one apply, to stay under a target API's rate limits.
    step_interval_seconds: float = Field(default=0.0, ge=0, le=60, alias="StepIntervalSeconds")
    # An apply runs in slices of about this long, each one activity call: a slice plus one last step
    # (at most a minute's pause and a target's retries) stays far inside the 30-minute functionTimeout,
    # so no apply is ever cut off there. 0 stops after every change.
    apply_slice_seconds: float = Field(default=300.0, ge=0, le=1200, alias="ApplySliceSeconds")
    pulumi_backend_url: str | None = Field(default=None, alias="PulumiBackendUrl")
    pulumi_work_root: str | None = Field(default=None, alias="PulumiWorkRoot")
