"""Autoscaling settings: ``RuntimeCloud:Autoscaling:*`` (app settings ``RuntimeCloud__Autoscaling__...``).

Defaults:

- ``EvaluateSchedule``: ``*/30 * * * * *`` (every 30 seconds): the timer that
  samples every pool with a policy, decides, and moves decisions in flight on.
  A decision's cooldowns and windows are in seconds of the policy, so a slower
  schedule only coarsens the samples.
- ``DefaultTarget``: none: a policy that names no target provisions its slots
  in the first ``storage-account`` target of ``RuntimeCloud:Targets``.
- ``KeepDecisions``: ``1000``: the decisions kept per pool (newest first);
  each new decision purges those older than this. At the default schedule and
  the default cooldowns that is days to weeks of history; the runs they
  declared (and their receipts) are kept as every run is.
"""

from __future__ import annotations

from pydantic import Field

from shared.platform.settings_section import NcrontabSchedule, Section


class AutoscalingSettings(Section):
    evaluate_schedule: NcrontabSchedule = Field(default="*/30 * * * * *", alias="EvaluateSchedule")
    default_target: str | None = Field(default=None, alias="DefaultTarget", min_length=1)
    keep_decisions: int = Field(default=1000, ge=1, le=100_000, alias="KeepDecisions")
