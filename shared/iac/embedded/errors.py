"""The embedded runner's own named failures (all are :class:`RunnerError`).

The run records the message, so each message says what was found and what an
operator can do about it; none names another tenant.
"""

from __future__ import annotations

from shared.iac.model import RunnerError


class UnsupportedTarget(RunnerError):
    """The embedded runner manages storage accounts only; the target is something else."""


class OwnedElsewhere(RunnerError):
    """A declared resource exists but carries another environment's or tenant's management tags.

    Planning stops rather than adopting it: taking it over would silently change
    (or, on a later removal, delete) something another environment relies on.
    """


class PlanNotForThisRunner(RunnerError):
    """The plan handed to apply was not made by this runner for this specification."""
