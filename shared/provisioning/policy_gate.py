"""The plan step's two calls into the policy gate (:mod:`shared.policy.gate`), kept out of the lifecycle.

``load_policy`` runs before the runner plans (fail fast when GovernanceHost
cannot be read); ``check_plan`` after it, with the run's facts. A denied
verdict ends the run ``failed`` (``policy-denied``) before it can await
approval; :func:`denied_answer` is what a retried plan step answers for a run
whose recorded verdict was a denial, so a retry never turns a denial into a
plan to approve.
"""

from __future__ import annotations

from shared.desired_state.api import EnvironmentSpecification
from shared.iac.api import PlanResult
from shared.platform.targets import ProvisioningTarget
from shared.policy.api import EffectiveBundle, PlanFacts, PolicyGate, PolicyUnavailable, PolicyVerdict
from shared.provisioning.runs import Run

__all__ = ["PolicyGate", "PolicyUnavailable", "check_plan", "denial_of", "load_policy"]


def load_policy(gate: PolicyGate, run: Run) -> EffectiveBundle | None:
    """The run's effective bundle (None: no gate configured); :class:`PolicyUnavailable` when it cannot be read."""
    return gate.load(run.tenant, run.environment_class)


def check_plan(
    gate: PolicyGate,
    bundle: EffectiveBundle | None,
    run: Run,
    specification: EnvironmentSpecification,
    target: ProvisioningTarget,
    plan: PlanResult,
) -> PolicyVerdict:
    facts = PlanFacts.of(
        tenant=run.tenant,
        environment=run.environment,
        environment_class=run.environment_class,
        target=target,
        requester=run.requester,
        specification=specification.model_dump(mode="json", exclude_none=True),
        changes=plan.changes,
    )
    return gate.check(bundle, facts)


def denial_of(run: Run) -> str | None:
    """The failure detail of a run whose plan the policy denied (from its recorded summary), else None."""
    if run.policy is None or run.policy.outcome != "deny":
        return None
    return "policy denied the plan: " + ", ".join(run.policy.denied_rules)
