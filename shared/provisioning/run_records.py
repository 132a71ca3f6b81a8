"""What a run's steps record: its receipts, and the changes they make to its row.

Every write here is safe to repeat (steps are at-least-once): receipts are
written once (a retried step finds its receipt and keeps it,
:class:`~shared.provisioning.receipts.ReceiptStore`), and a row change is
read-modify-write under the row's ETag (:func:`~shared.platform.storage.optimistic.on_conflict`
reads again and retries when another writer moved it). The apply is bound to
the plan as reviewed: :meth:`RunRecords.reviewed_plan` refuses a plan receipt
that no longer hashes to the digest on the run.
"""

from __future__ import annotations

from typing import Any

from shared.iac.api import ApplyResult, PlanNoLongerHolds, PlanResult
from shared.platform import clock
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.optimistic import on_conflict
from shared.policy.api import PolicyVerdict
from shared.provisioning.configuration import ResolvedConfiguration
from shared.provisioning.journal import TableStepJournal
from shared.provisioning.receipts import ApplyReceipt, ConfigurationRecord, PlanReceipt, ReceiptStore
from shared.provisioning.runs import FailureReason, Run, RunState
from shared.provisioning.step_answers import RunRef
from shared.provisioning.store import ProvisioningStore

Failure = tuple[FailureReason, str]


class RunRecords:
    def __init__(self, storage: StorageClients, store: ProvisioningStore, receipts: ReceiptStore) -> None:
        self._storage = storage
        self._store = store
        self._receipts = receipts

    # -- the run's row ------------------------------------------------------------------------

    @on_conflict
    def update(self, ref: RunRef, **changes: Any) -> Run:
        run, etag = self._store.run_with_etag(ref.tenant, ref.environment, ref.run_id)
        updated = run.model_copy(update=changes)
        self._store.save_run(updated, etag)
        return updated

    @on_conflict
    def start_applying(self, ref: RunRef) -> Run:
        """Move a planned (or approved) run to ``applying``; a run already past it is answered as it is."""
        run, etag = self._store.run_with_etag(ref.tenant, ref.environment, ref.run_id)
        if run.state in (RunState.PLANNING, RunState.AWAITING_APPROVAL):
            run = run.moved_to(RunState.APPLYING)
            self._store.save_run(run, etag)
        return run

    # -- receipts -----------------------------------------------------------------------------

    def write_plan_receipt(self, run: Run, plan: PlanResult, verdict: PolicyVerdict | None) -> str:
        return self._receipts.write(
            PlanReceipt(
                run_id=run.id,
                tenant=run.tenant,
                environment=run.environment,
                target=run.target,
                runner=plan.runner,
                runner_version=plan.runner_version,
                specification_digest=run.specification_digest,
                source=run.source,
                changes=plan.changes,
                counts=plan.counts,
                diagnostics=plan.diagnostics,
                binding=plan.binding,
                planned_at=clock.now_iso(),
                policy=verdict,
            )
        )

    def reviewed_plan(self, run: Run) -> PlanResult | None:
        """The plan exactly as reviewed: its receipt must still hash to the digest on the run."""
        document, digest = self._receipts.read(run.tenant, run.environment, run.id, "plan")
        if digest != run.plan_digest:
            raise PlanNoLongerHolds(f"the plan receipt no longer verifies ({digest} != {run.plan_digest})")
        return PlanResult(
            runner=document["runner"],
            runner_version=document["runner_version"],
            changes=document["changes"],
            diagnostics=document.get("diagnostics", []),
            binding=document.get("binding", {}),
        )

    def journal_result(self, run: Run, plan: PlanResult | None) -> ApplyResult:
        """What the step journal says was applied of the plan (an apply that stopped without its own result)."""
        steps = {step.address: step for step in TableStepJournal(self._storage, run.id).all()}
        done = [steps[change.address] for change in (plan.changes if plan else []) if change.address in steps]
        return ApplyResult(
            runner=run.runner,
            runner_version="",
            steps=done,
            outputs={step.address: step.outputs for step in done if step.outputs},
        )

    def applied_so_far(self, run: Run) -> ApplyResult:
        """What the step journal says was applied of the reviewed plan (a run that ended while applying,
        whatever ended it); every journalled step when the plan no longer verifies: the receipt must still
        say what changed."""
        try:
            return self.journal_result(run, self.reviewed_plan(run))
        except PlanNoLongerHolds:
            steps = TableStepJournal(self._storage, run.id).all()
            outputs = {step.address: step.outputs for step in steps if step.outputs}
            return ApplyResult(runner=run.runner, runner_version="", steps=steps, outputs=outputs)

    def write_apply_receipt(
        self,
        run: Run,
        started: str,
        result: ApplyResult | None,
        failure: Failure | None,
        configuration: ResolvedConfiguration | None = None,
    ) -> str:
        """The apply receipt, chained to the environment's previous one (also for a run that applied nothing)."""
        env = self._store.environment(run.tenant, run.environment)
        return self._receipts.write(
            ApplyReceipt(
                run_id=run.id,
                tenant=run.tenant,
                environment=run.environment,
                target=run.target,
                runner=result.runner if result else run.runner,
                runner_version=result.runner_version if result else "",
                specification_digest=run.specification_digest,
                plan_digest=run.plan_digest,
                outcome=("cancelled" if failure[0] is FailureReason.CANCELLED else "failed") if failure else "applied",
                failure_reason=failure[0].value if failure else None,
                failure_detail=failure[1] if failure else None,
                steps=result.steps if result else [],
                outputs=result.outputs if result else {},
                logs=result.logs if result else [],
                approvals=[run.decision] if run.decision else [],
                configuration=ConfigurationRecord(
                    resolved=configuration.resolved, unresolved=configuration.unresolved, note=configuration.note
                )
                if configuration
                else ConfigurationRecord(),
                started_at=started,
                finished_at=clock.now_iso(),
                previous_receipt_digest=env.get("LastReceiptDigest"),
            )
        )
