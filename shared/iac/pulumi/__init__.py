"""The Pulumi IaC runner: the Automation API driving the Pulumi CLI.

- :mod:`.events`: pure translation of engine events into plan and apply results;
- :mod:`.workspace`: selecting the stack from a specification, backend and configuration;
- :mod:`.program_copy`: the run's own copy of the program, where Pulumi writes (never the program's folder);
- :mod:`.saved_plans`: the update plans a preview saves and an apply is bound to;
- :mod:`.recovery`: pending operations of a dead update, and a cancel reaching a running one;
- :mod:`.locks`: a stack lock a dead job left in a self-managed backend, removed once its owner is proven dead;
- :mod:`.runner`: :class:`PulumiRunner`, the :class:`~shared.iac.model.IaCRunner`.

Nothing here imports the CLI at import time: a host without it can still load
the module, report the runner unavailable, and run the embedded runner.
"""

from __future__ import annotations

from shared.iac.pulumi.errors import ProgramNotFound, RunnerUnavailable, StackBusy
from shared.iac.pulumi.events import apply_from_events, plan_from_events
from shared.iac.pulumi.runner import PulumiRunner

__all__ = [
    "ProgramNotFound",
    "PulumiRunner",
    "RunnerUnavailable",
    "StackBusy",
    "apply_from_events",
    "plan_from_events",
]
