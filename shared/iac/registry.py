"""Which IaC runner serves a run: the one the specification (or the setting) names."""

from __future__ import annotations

from typing import Any

from shared.desired_state.api import EnvironmentSpecification, RunnerName
from shared.iac.model import ApplyResult, IaCRunner, PlanResult
from shared.iac.settings import IaCSettings
from shared.platform import telemetry
from shared.platform.targets import ProvisioningTarget


def runner_for(name: RunnerName, iac_settings: IaCSettings, **options: Any) -> TracedRunner:
    """The runner ``name``, its plan and apply each a span (``iac.plan``, ``iac.apply``; see :func:`_runner_for`).

    ``options`` go to the Pulumi runner only (``saved_plans``, ``event_sink``: what a runner job gives it)."""
    return TracedRunner(_runner_for(name, iac_settings, **options))


class TracedRunner:
    """An IaC runner whose plan and apply are spans naming the runner, the environment and the target."""

    def __init__(self, runner: IaCRunner) -> None:
        self._runner = runner
        self.name = runner.name
        self.version = runner.version

    @property
    def wrapped(self) -> IaCRunner:
        """The runner itself."""
        return self._runner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def plan(self, specification: EnvironmentSpecification, target: ProvisioningTarget) -> PlanResult:
        with telemetry.span(
            "iac.plan",
            attributes=self._attributes(target),
            tenant=specification.tenant,
            environment=specification.environment,
        ):
            return self._runner.plan(specification, target)

    def apply(
        self,
        specification: EnvironmentSpecification,
        target: ProvisioningTarget,
        plan: PlanResult,
        *args: Any,
        **kwargs: Any,
    ) -> ApplyResult:
        with telemetry.span(
            "iac.apply",
            attributes=self._attributes(target),
            tenant=specification.tenant,
            environment=specification.environment,
        ):
            return self._runner.apply(specification, target, plan, *args, **kwargs)

    def _attributes(self, target: ProvisioningTarget) -> dict[str, str]:
        return {"iac.runner": self.name, "iac.runner.version": self.version or "", "iac.target": target.id}


def _runner_for(name: RunnerName, iac_settings: IaCSettings, **options: Any) -> IaCRunner:
    """A runner configured from ``RuntimeCloud:IaC``; cheap to call (no I/O beyond a cached CLI probe).

    The Pulumi runner is returned even where the CLI is missing: its ``plan`` and
    ``apply`` then raise :class:`~shared.iac.pulumi.RunnerUnavailable`, so a run
    fails with that reason instead of the host refusing to start.
    """
    if name is RunnerName.EMBEDDED:
        from shared.iac.embedded import EmbeddedRunner

        return EmbeddedRunner.from_settings(iac_settings)
    if name is RunnerName.PULUMI:
        from shared.iac.pulumi import PulumiRunner

        return PulumiRunner.from_settings(iac_settings, **options)
    raise ValueError(f"unknown IaC runner {name!r}")
