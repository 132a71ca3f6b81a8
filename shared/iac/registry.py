"""Which IaC runner serves a run: the one the specification (or the setting) names."""

from __future__ import annotations

from shared.desired_state import RunnerName
from shared.iac.model import IaCRunner
from shared.iac.settings import IaCSettings


def runner_for(name: RunnerName, iac_settings: IaCSettings) -> IaCRunner:
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

        return PulumiRunner.from_settings(iac_settings)
    raise ValueError(f"unknown IaC runner {name!r}")
