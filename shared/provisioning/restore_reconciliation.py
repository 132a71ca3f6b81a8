"""Runs caught mid-flight by a restore of the store: queued ones plan afresh, the others fail with a receipt.

A restored row may be older than what the run's orchestration already did, so
a run that was planning, awaiting approval or applying does not continue from
it: it fails ``store-restored`` (its receipt says so) and is declared again.
A queued run has done nothing yet: the reconciler starts its orchestration.
"""

from __future__ import annotations

from shared.platform.logs import app_logger, ids
from shared.provisioning.lifecycle import RunRef, RunSteps
from shared.provisioning.outcomes import Outcome
from shared.provisioning.runs import FailureReason, RunState
from shared.provisioning.store import ProvisioningStore

log = app_logger("provisioning.restore")


def settle_runs_after_restore(store: ProvisioningStore, steps: RunSteps, detail: str) -> dict[str, list[str]]:
    """Fail every unfinished run but the queued ones (``detail`` says why); answers the ids of each."""
    done: dict[str, list[str]] = {"failed": [], "replanned": []}
    for run in store.unfinished_runs():
        if run.state is RunState.QUEUED:
            done["replanned"].append(run.id)  # the reconciler starts its orchestration: a fresh plan
            continue
        ref = RunRef(run.tenant, run.environment, run.id)
        steps.finish(ref, Outcome.FAILED, FailureReason.STORE_RESTORED.value, detail)
        log.warning("restore: run %s failed (%s)", run.id, run.state.value, extra=ids(tenant=run.tenant, run=run.id))
        done["failed"].append(run.id)
    return done
