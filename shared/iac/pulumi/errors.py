"""The Pulumi runner's own named failures (all are :class:`RunnerError`)."""

from __future__ import annotations

from shared.iac.model import RunnerError

CLI_MISSING = (
    "the Pulumi CLI is not on PATH: the pulumi runner drives it through the Automation API. "
    "Install it on the host (it cannot be downloaded on machines without internet access), "
    "or use the embedded runner (RuntimeCloud:IaC:Runner=embedded)"
)


class RunnerUnavailable(RunnerError):
    """The runner cannot run on this host (the Pulumi CLI is missing or unusable)."""


class ProgramNotFound(RunnerError):
    """The specification's Pulumi project is not where the runner looks for it."""


class StackBusy(RunnerError):
    """Another update holds the stack's lock; it must finish, or be cancelled by an operator."""
