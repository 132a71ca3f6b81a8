"""What the triggers may use of pool autoscaling: decisions, ownership and the scaler.

Other features, the triggers (``functions/``, ``orchestrations/``), health and the runner job
import only this module of the package; only the composition root (``shared/wiring``) reaches
inside (the "api-only" contract in pyproject.toml).
"""

from __future__ import annotations

from shared.autoscaling.ownership import refuse_resize_by_hand
from shared.autoscaling.policy import AutoscalingPolicy
from shared.autoscaling.records import DecisionList, DecisionRecord, ScalerStatus
from shared.autoscaling.responses import DecisionsQuery, EvaluationView
from shared.autoscaling.scaler import Evaluation

__all__ = [
    "AutoscalingPolicy",
    "DecisionList",
    "DecisionRecord",
    "DecisionsQuery",
    "Evaluation",
    "EvaluationView",
    "ScalerStatus",
    "refuse_resize_by_hand",
]
