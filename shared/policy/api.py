"""What provisioning and the triggers may use of the policy gate: bundles, facts, verdicts, exceptions.

Other features, the triggers (``functions/``, ``orchestrations/``), health and the runner job
import only this module of the package; only the composition root (``shared/wiring``) reaches
inside (the "api-only" contract in pyproject.toml).
"""

from __future__ import annotations

from shared.policy.bundle import EffectiveBundle
from shared.policy.exceptions import NewPolicyException, PolicyException, check_expiry
from shared.policy.facts import PlanFacts
from shared.policy.gate import PolicyGate, PolicyStatus
from shared.policy.responses import (
    DryRunVerdict,
    EffectivePolicy,
    PolicyExceptionList,
    PolicyExceptionsQuery,
    PolicyExceptionView,
)
from shared.policy.sources import PolicyUnavailable
from shared.policy.verdict import PolicySummary, PolicyVerdict

__all__ = [
    "DryRunVerdict",
    "EffectiveBundle",
    "EffectivePolicy",
    "NewPolicyException",
    "PlanFacts",
    "PolicyException",
    "PolicyExceptionList",
    "PolicyExceptionView",
    "PolicyExceptionsQuery",
    "PolicyGate",
    "PolicyStatus",
    "PolicySummary",
    "PolicyUnavailable",
    "PolicyVerdict",
    "check_expiry",
]
