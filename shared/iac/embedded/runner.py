"""The embedded runner: plan and apply of Azure Storage data-plane resources, in process.

It implements :class:`~shared.iac.model.IaCRunner`. ``plan`` reads the target
account once and compares it with the specification; ``apply`` checks that the
plan really is this specification's (a plan read back from a receipt could be
anyone's) and hands it to the :class:`~shared.iac.embedded.applier.Applier`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import shared
from shared.desired_state.api import EnvironmentSpecification, RunnerName
from shared.iac.embedded.access import AccessPolicy, open_target
from shared.iac.embedded.applier import Applier, ApplyProgress
from shared.iac.embedded.errors import PlanNotForThisRunner, UnsupportedTarget
from shared.iac.embedded.observed import ObservedState
from shared.iac.embedded.planner import plan_changes
from shared.iac.embedded.reader import read_state
from shared.iac.embedded.state import desired_state
from shared.iac.model import Action, ApplyResult, PlanResult, RunnerError, StepJournal
from shared.iac.settings import IaCSettings
from shared.iac.tags import ManagementTags
from shared.platform.targets import ProvisioningTarget, TargetKind


class EmbeddedRunner:
    """Blob containers, queues and tables in a target storage account.

    ``step_interval_seconds`` (setting ``RuntimeCloud:IaC:StepIntervalSeconds``,
    default 0) pauses between changes; ``access`` bounds how long an unreachable
    target is tried (see :class:`AccessPolicy`).
    """

    name = RunnerName.EMBEDDED.value

    def __init__(
        self,
        step_interval_seconds: float = 0.0,
        access: AccessPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.version = shared.__version__
        self.step_interval_seconds = step_interval_seconds
        self.access = access or AccessPolicy()
        self._sleep = sleep

    @classmethod
    def from_settings(cls, settings: IaCSettings) -> EmbeddedRunner:
        return cls(step_interval_seconds=settings.step_interval_seconds)

    def observe(self, target: ProvisioningTarget) -> ObservedState:
        """The target account's actual state (what the inventory records)."""
        _check_target(target)
        with open_target(target, self.access) as clients:
            return read_state(clients)

    def plan(self, specification: EnvironmentSpecification, target: ProvisioningTarget) -> PlanResult:
        _check_specification(specification, target)
        planned = plan_changes(specification, self.observe(target))
        return PlanResult(
            runner=self.name, runner_version=self.version, changes=planned.changes, diagnostics=planned.diagnostics
        )

    def apply(
        self,
        specification: EnvironmentSpecification,
        target: ProvisioningTarget,
        plan: PlanResult,
        journal: StepJournal,
        resolved_configuration: dict[str, str],
        *,
        deadline: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> ApplyResult:
        _check_specification(specification, target)
        _check_plan(specification, plan)
        progress = ApplyProgress(runner=self.name, runner_version=self.version)
        progress.log(
            f"apply of {len(plan.changes)} planned change(s) {plan.counts} to target {target.id} "
            f"by runner {self.name} {self.version}"
        )
        # Names only: values may be secrets and never reach a log or a receipt.
        supplied = ", ".join(sorted(resolved_configuration)) or "none"
        progress.log(f"configuration supplied: {supplied} (the embedded runner writes no configuration)")
        with open_target(target, self.access) as clients:
            applier = Applier(clients, journal, self.step_interval_seconds, self._sleep)
            return applier.apply(plan.changes, progress, deadline, stop)


def _check_target(target: ProvisioningTarget) -> None:
    if target.kind is not TargetKind.STORAGE_ACCOUNT:
        raise UnsupportedTarget(
            f"target {target.id} is a {target.kind.value}; the embedded runner manages storage-account targets only"
        )


def _check_specification(specification: EnvironmentSpecification, target: ProvisioningTarget) -> None:
    _check_target(target)
    if specification.runner is not RunnerName.EMBEDDED:
        raise RunnerError(f"the specification names runner {specification.runner.value}, not embedded")
    if specification.target != target.id:
        raise RunnerError(f"the specification names target {specification.target}, not {target.id}")


def _check_plan(specification: EnvironmentSpecification, plan: PlanResult) -> None:
    """Refuse a plan that is not this specification's: apply does only what was reviewed for it."""
    if plan.runner != RunnerName.EMBEDDED.value:
        raise PlanNotForThisRunner(f"the plan was made by runner {plan.runner}, not embedded")
    ours = ManagementTags(tenant=specification.tenant, environment=specification.environment)
    declared = {resource.address: desired_state(resource, ours) for resource in specification.resources}
    kept = {change.address: change.after for change in plan.changes if change.action is not Action.DELETE}
    if kept != declared:
        raise PlanNotForThisRunner(
            f"the plan does not match specification {specification.digest()[:12]} of environment "
            f"{specification.environment}: plan again"
        )
    for change in plan.changes:
        if change.action is Action.REPLACE:
            raise PlanNotForThisRunner(f"{change.address}: the embedded runner never replaces")
        before = change.before or {}
        owner = ManagementTags.from_metadata(before.get("metadata") or before.get("registration") or {})
        if change.action is Action.DELETE and owner != ours:
            raise PlanNotForThisRunner(f"{change.address}: the plan deletes a resource this environment does not own")
