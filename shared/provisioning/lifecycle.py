"""The steps of a run, as its orchestration's activities perform them.

Each step reads the run, acts, and records the outcome on the run, so a step
that runs again (activities are at-least-once) finds its own earlier outcome
and returns it instead of acting twice. Only the steps here move a run's
state; HTTP and queue triggers only record declarations and decisions.

One concept per module: this one holds the steps themselves (claim, plan,
approval, apply, finish) and runs the runner in process when jobs are off;
:mod:`.job_steps` launches and checks runner jobs; :mod:`.run_records` writes
receipts and the run's row; :mod:`.step_answers` shapes the answers.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from shared.iac.api import ApplyResult, ApplySliceEnded, IaCSettings, JobKind, RunnerError, runner_for
from shared.platform import clock, telemetry
from shared.platform.events.artifact_outbox import ArtifactOutbox
from shared.platform.logs import app_logger
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.optimistic import on_conflict
from shared.platform.targets import ProvisioningTarget, target_for
from shared.platform.telemetry import names
from shared.provisioning import events
from shared.provisioning.cancellation import CancelWatch
from shared.provisioning.configuration import (
    ConfigPlatformClient,
    ResolvedConfiguration,
    SecretUnresolvable,
    resolve_configuration,
    resolve_secrets,
)
from shared.provisioning.environment_rules import EnvironmentRegistration
from shared.provisioning.failure_reasons import apply_failure, plan_failure
from shared.provisioning.job_steps import JobSteps
from shared.provisioning.journal import TableStepJournal
from shared.provisioning.outcomes import Claim, ClaimAnswer, Outcome, StepAnswer
from shared.provisioning.outputs import OutputsReference, OutputsStore
from shared.provisioning.policy_gate import PolicyGate, PolicyUnavailable, check_plan, denial_of, load_policy
from shared.provisioning.receipt_settings import ReceiptSettings
from shared.provisioning.receipts import ReceiptStore
from shared.provisioning.run_records import Failure, RunRecords
from shared.provisioning.runner_jobs import JobTicket, RunnerJobs
from shared.provisioning.runs import FINAL_STATES, FailureReason, Run, RunState
from shared.provisioning.settings import ProvisioningSettings
from shared.provisioning.step_answers import RunRef, outcome_of, unresolved
from shared.provisioning.step_answers import cancelled as _cancelled
from shared.provisioning.step_answers import failed as _failed
from shared.provisioning.store import ProvisioningStore
from shared.provisioning.supersession import newer_run, supersede_awaiting_approval, superseded_by

__all__ = ["FINAL_STATE_BY_OUTCOME", "RunRef", "RunSteps"]

log = app_logger("provisioning")

# What a run ends as, by the outcome its orchestration reports.
FINAL_STATE_BY_OUTCOME = {
    Outcome.APPLIED: RunState.APPLIED,
    Outcome.FAILED: RunState.FAILED,
    Outcome.REJECTED: RunState.REJECTED,
    Outcome.EXPIRED: RunState.EXPIRED,
    Outcome.SUPERSEDED: RunState.SUPERSEDED,
    Outcome.CANCELLED: RunState.CANCELLED,
}
REASON_BY_OUTCOME = {
    Outcome.REJECTED: FailureReason.APPROVAL_REJECTED,
    Outcome.EXPIRED: FailureReason.APPROVAL_EXPIRED,
    Outcome.SUPERSEDED: FailureReason.SUPERSEDED,
    Outcome.CANCELLED: FailureReason.CANCELLED,
}


class RunSteps:
    def __init__(
        self,
        storage: StorageClients,
        *,
        source: str,
        policy: ProvisioningSettings,
        iac: IaCSettings,
        targets: Sequence[ProvisioningTarget],
        config_platform: ConfigPlatformClient,
        policy_gate: PolicyGate | None = None,
        receipts: ReceiptSettings | None = None,
        environments: EnvironmentRegistration | None = None,
        mirror: ArtifactOutbox | None = None,  # KnowledgeHost's outbox: receipts and outputs are mirrored
    ) -> None:
        self._storage = storage
        self._gate = policy_gate  # None: no policy gate at all (the gate itself may be configured "none")
        self._environments = environments  # records a registry change when the run that makes it applies
        self._policy = policy
        self._iac = iac
        self._targets = targets
        self._config_platform = config_platform
        self._store = ProvisioningStore(storage, source)
        self._receipts = ReceiptStore(storage, receipts, mirror)  # written under their first policy
        self._records = RunRecords(storage, self._store, self._receipts)
        self._outputs = OutputsStore(storage, mirror)
        self._jobs = RunnerJobs(storage, iac)
        self._job_steps = JobSteps(
            self._store,
            self._records,
            self._jobs,
            targets=targets,
            config_platform=config_platform,
            policy_gate=policy_gate,
            requires_approval=policy.requires_approval,
        )

    # -- waiting for the environment ------------------------------------------------------

    @on_conflict
    def claim_environment(self, ref: RunRef) -> Claim:
        """Take the environment for the run, or say why not (see :class:`Claim`)."""
        run, etag = self._store.run_with_etag(ref.tenant, ref.environment, ref.run_id)
        if run.state in FINAL_STATES:
            return Claim.FINISHED
        if run.decision is not None and run.decision.decision == "cancelled":
            return Claim.CANCELLED
        if run.state is not RunState.QUEUED:
            return Claim.PROCEED  # claimed by an earlier attempt of this step
        if newer_run(self._store, run) is not None:
            return Claim.SUPERSEDED
        env = self._store.environment(ref.tenant, ref.environment)
        active = env.get("ActiveRunId")
        if active and active != run.id and not self._is_finished(ref, active):
            return Claim.WAIT
        self._store.save_run(run.moved_to(RunState.PLANNING), etag, env_changes={"ActiveRunId": run.id}, env=env)
        return Claim.PROCEED

    def claim_and_start_plan(self, ref: RunRef) -> ClaimAnswer:
        """:meth:`claim_environment`, and when the run may plan, the plan's start (:meth:`start_job`, first
        attempt) in the same step: ``{"claim": ..., "plan_job": ...}``. Retried, both parts are idempotent:
        the claim answers ``proceed`` for a run it already moved, and the job's launch is one per attempt."""
        claim = self.claim_environment(ref)
        if claim is not Claim.PROCEED:
            return {"claim": claim.value}
        return {"claim": claim.value, "plan_job": self.start_job(ref, JobKind.PLAN, 1)}

    def _is_finished(self, ref: RunRef, run_id: str) -> bool:
        # A lock held by a run that already ended is orphaned (a crash between steps): take it over.
        active = self._store.find_run(ref.tenant, ref.environment, run_id)
        return active is None or active.state in FINAL_STATES

    def waiting_runs(self, ref: RunRef) -> list[str]:
        return [r.id for r in self._store.runs(ref.tenant, ref.environment, RunState.QUEUED) if r.id != ref.run_id]

    def supersede_awaiting_approval(self, ref: RunRef) -> list[str]:
        """Older runs awaiting approval that the newly declared run ``ref`` supersedes (see :mod:`.supersession`)."""
        return supersede_awaiting_approval(self._store, ref.tenant, ref.environment, ref.run_id)

    # -- plan ---------------------------------------------------------------------------------

    def plan(self, ref: RunRef, job: JobTicket | None = None, wait_seconds: float = 0.0) -> StepAnswer:
        """Plan (or take the plan a runner job made: ``job``), write the plan receipt, say whether to wait.

        With a ``job`` that has not finished (within ``wait_seconds``), answers ``waiting`` (and whether the
        job lives). A run that goes on without approval gets its apply job launched here (``apply_job`` in
        the answer)."""
        if job and (pending := self._job_steps.pending(ref, job, wait_seconds)):
            return pending
        return self._job_steps.launch_apply(ref, self._plan(ref, job), job)

    def _plan(self, ref: RunRef, job: JobTicket | None) -> StepAnswer:
        run, _ = self._store.run_with_etag(ref.tenant, ref.environment, ref.run_id)
        if run.decision is not None and run.decision.decision == "cancelled":
            return _cancelled("cancelled")
        if run.plan_digest:
            return self._planned(run)
        if run.state is not RunState.PLANNING:
            return _failed(FailureReason.PLAN_FAILED, f"run is {run.state.value}, not planning")
        if (unknown := unresolved(run)) is not None:  # its class (or its release's desired state) is unknown
            return unknown
        specification = self._store.load_specification(run.tenant, run.environment, run.specification_digest)
        target = target_for(self._targets, run.target, run.tenant)  # its tenants may have changed since
        if target is None:
            return _failed(FailureReason.PLAN_FAILED, f"target {run.target} is no longer configured")
        try:  # the policy gate: read before the plan (a job's start read it too) and judged after it
            bundle = load_policy(self._gate, run) if self._gate else None
        except PolicyUnavailable as error:
            return _failed(FailureReason.POLICY_UNAVAILABLE, str(error))
        try:
            if job:
                plan = self._jobs.plan_of(run, job)
            else:
                plan = runner_for(specification.runner, self._iac).plan(specification, target)
        except RunnerError as error:  # its reason by its kind (failure_reasons.py)
            return _failed(*plan_failure(error))
        verdict = check_plan(self._gate, bundle, run, specification, target, plan) if self._gate else None
        digest = self._records.write_plan_receipt(run, plan, verdict)
        summary = verdict.summary() if verdict else None
        update = self._records.update
        if verdict is not None and verdict.denied:  # it never awaits approval: no approval overrides a deny
            update(ref, plan_digest=digest, plan_counts=plan.counts, requires_approval=False, policy=summary)
            return _failed(FailureReason.POLICY_DENIED, verdict.denial_detail())
        requires = self._policy.requires_approval(run.environment_class)
        return self._planned(
            update(ref, plan_digest=digest, plan_counts=plan.counts, requires_approval=requires, policy=summary)
        )

    @staticmethod
    def _planned(run: Run) -> StepAnswer:
        if (denial := denial_of(run)) is not None:  # a retried plan step of a denied run stays denied
            return _failed(FailureReason.POLICY_DENIED, denial)
        return {
            "outcome": Outcome.PLANNED,
            "plan_digest": run.plan_digest,
            "requires_approval": bool(run.requires_approval),
        }

    # -- approval ---------------------------------------------------------------------------

    @on_conflict
    def await_approval(self, ref: RunRef) -> str:
        """Move to awaiting-approval with a deadline; returns how long to wait (ISO 8601).

        If newer desired state was declared meanwhile, the run is superseded at once (its
        decision says so) and the answer is *now*, so the orchestration reads the decision
        without waiting. The move is written with the environment row under that row's
        ETag: a declaration committed between our read of the runs and this write moves
        the row, so the step runs again and sees it.
        """
        run, etag = self._store.run_with_etag(ref.tenant, ref.environment, ref.run_id)
        if run.approval_deadline:
            return clock.now_iso() if run.decision is not None else run.approval_deadline
        env = self._store.environment(ref.tenant, ref.environment)
        timeout = self._policy.approval_timeout_seconds
        deadline = (clock.utcnow() + timedelta(seconds=timeout)).isoformat()
        waiting = run.moved_to(RunState.AWAITING_APPROVAL, approval_deadline=deadline)
        if (newer := newer_run(self._store, run)) is not None and run.decision is None:
            waiting = waiting.model_copy(update={"decision": superseded_by(newer, run.plan_digest)})
        self._store.save_run(waiting, etag, env_changes={}, env=env)
        return clock.now_iso() if waiting.decision is not None else deadline

    def decision(self, ref: RunRef) -> str | None:
        run = self._store.find_run(ref.tenant, ref.environment, ref.run_id)
        return run.decision.decision if run and run.decision else None

    # -- apply --------------------------------------------------------------------------------

    def apply(self, ref: RunRef, job: JobTicket | None = None, wait_seconds: float = 0.0) -> StepAnswer:
        """Apply the reviewed plan, or one slice of it: ``{"outcome": "continue"}`` asks to be called
        again (the journal makes the next call go on from the next step); any other outcome is final,
        with the apply receipt written and the run finished (``finished``, ``waiting_runs``: the
        orchestration needs no finish step of its own). With ``job``, the runner job applied it: its
        result (or, for a job that died, what the journal holds) goes into the receipt; one still
        running (after ``wait_seconds``): ``waiting``."""
        answer = self._apply(ref, job, wait_seconds)
        if Outcome(answer["outcome"]) in (Outcome.CONTINUE, Outcome.WAITING):
            return answer
        waiting = self.finish(ref, Outcome(answer["outcome"]), answer.get("reason"), answer.get("detail", ""))
        return {**answer, "finished": True, "waiting_runs": waiting}

    def _apply(self, ref: RunRef, job: JobTicket | None, wait_seconds: float) -> StepAnswer:
        if job and (pending := self._job_steps.pending(ref, job, wait_seconds)):
            return pending  # first: nothing may end the run while its job still applies
        waiting, _ = self._store.run_with_etag(ref.tenant, ref.environment, ref.run_id)
        if waiting.cancel_requested and waiting.state in (RunState.PLANNING, RunState.AWAITING_APPROVAL):
            return _cancelled("cancelled before the apply began: nothing was applied")
        run = self._records.start_applying(ref)
        if run.apply_receipt_digest:  # an earlier attempt finished and recorded its receipt
            return outcome_of(run)
        if run.cancel_requested:  # asked between two slices: stop here, recording what was applied
            return self._end_cancelled(ref, run, clock.now_iso(), None)
        specification = self._store.load_specification(run.tenant, run.environment, run.specification_digest)
        target = target_for(self._targets, run.target, run.tenant)
        plan = self._records.reviewed_plan(run)
        if job:
            configuration = self._jobs.configuration_of(run, job)
        else:
            configuration = resolve_configuration(specification.configuration, run.environment, self._config_platform)
        started = clock.now_iso()
        result: ApplyResult | None = None
        failure: tuple[FailureReason, str] | None = None
        try:
            if target is None or plan is None:
                raise RunnerError("the reviewed plan or its target is gone")
            if job:  # not sliced: the job applied all of it (or died; the journal says how far it got)
                result = self._jobs.apply_of(run, job, self._records.journal_result(run, plan))
                return self._receipted(ref, run, started, result, None, configuration)
            secrets = resolve_secrets(specification.secrets)
            runner = runner_for(specification.runner, self._iac)
            result = runner.apply(
                specification,
                target,
                plan,
                TableStepJournal(self._storage, run.id),
                {**configuration.values, **secrets},
                deadline=self._slice_deadline(),
                stop=CancelWatch(self._store, ref.tenant, ref.environment, ref.run_id),
            )
        except ApplySliceEnded as paused:  # not an end: no receipt until the last slice
            current, _ = self._store.run_with_etag(ref.tenant, ref.environment, ref.run_id)
            if current.cancel_requested:
                return self._end_cancelled(ref, current, started, paused.result)
            if job:  # a job stops early only for a cancel; anything else is a failure, never a resumed slice
                result, failure = apply_failure(paused)
                return self._receipted(ref, run, started, result, failure, configuration)
            return {"outcome": Outcome.CONTINUE, "steps_done": len(paused.result.steps) if paused.result else 0}
        except (SecretUnresolvable, RunnerError) as error:  # the receipt and reason by its kind (failure_reasons.py)
            result, failure = apply_failure(error)
        return self._receipted(ref, run, started, result, failure, configuration)

    def _receipted(
        self,
        ref: RunRef,
        run: Run,
        started: str,
        result: ApplyResult | None,
        failure: Failure | None,
        configuration: ResolvedConfiguration,
    ) -> StepAnswer:
        """Write the apply receipt and record its digest and the failure on the run."""
        digest = self._records.write_apply_receipt(run, started, result, failure, configuration)
        updated = self._records.update(
            ref,
            apply_receipt_digest=digest,
            failure_reason=failure[0] if failure else None,
            failure_detail=failure[1] if failure else None,
        )
        return outcome_of(updated)  # the outputs are in the receipt: a history event stays small

    def _end_cancelled(self, ref: RunRef, run: Run, started: str, result: ApplyResult | None) -> StepAnswer:
        """Record an apply an operator stopped between steps: its receipt lists what was applied."""
        if result is None:
            result = self._records.journal_result(run, self._records.reviewed_plan(run))
        by = run.cancellation or run.decision  # the cancel: beside an approval, or as the decision
        planned = sum((run.plan_counts or {}).values())
        detail = (
            f"cancelled by {by.by if by else 'an operator'} after {len(result.steps)} of {planned} step(s); "
            "what was applied stays, listed in the apply receipt"
        )
        digest = self._records.write_apply_receipt(run, started, result, (FailureReason.CANCELLED, detail))
        self._records.update(
            ref, apply_receipt_digest=digest, failure_reason=FailureReason.CANCELLED, failure_detail=detail
        )
        return _cancelled(detail)

    def start_job(self, ref: RunRef, kind: JobKind, attempt: int) -> JobTicket | StepAnswer:
        """See :meth:`.job_steps.JobSteps.start`."""
        return self._job_steps.start(ref, kind, attempt)

    def _slice_deadline(self) -> float:
        return time.monotonic() + self._iac.apply_slice_seconds

    # -- finish -------------------------------------------------------------------------------

    @on_conflict
    def finish(self, ref: RunRef, outcome: Outcome, reason: str | None, detail: str) -> list[str]:
        """End the run, free its environment, tell delivery; returns the runs to wake."""
        run, etag = self._store.run_with_etag(ref.tenant, ref.environment, ref.run_id)
        if run.state not in FINAL_STATES:
            self._end(run, etag, outcome, reason, detail)
        return self.waiting_runs(ref)

    def _end(self, run: Run, etag: str, outcome: Outcome, reason: str | None, detail: str) -> None:
        failure = FailureReason(reason) if reason else REASON_BY_OUTCOME.get(outcome)
        receipted: tuple[FailureReason, ...] = (
            FailureReason.PLAN_FAILED,
            FailureReason.TARGET_UNREACHABLE,
            FailureReason.STORE_RESTORED,
        )
        receipted += (
            FailureReason.POLICY_DENIED,
            FailureReason.POLICY_UNAVAILABLE,
            FailureReason.ENVIRONMENT_UNRESOLVED,
            FailureReason.RELEASE_UNRESOLVED,
        )
        applying = run.state is RunState.APPLYING  # whatever ended it (the reconciler too): the journal says
        if not run.apply_receipt_digest and outcome is not Outcome.APPLIED and (applying or failure in receipted):
            # A run that applied nothing has one too where its reason says so: the receipt chain records why.
            applied = self._records.applied_so_far(run) if applying else None
            ending = (failure or FailureReason.APPLY_FAILED, detail)
            digest = self._records.write_apply_receipt(run, clock.now_iso(), applied, ending)
            run = run.model_copy(update={"apply_receipt_digest": digest})
        final = run.moved_to(
            FINAL_STATE_BY_OUTCOME[outcome],
            note=detail,
            failure_reason=failure if outcome is not Outcome.APPLIED else None,
            failure_detail=detail if outcome is not Outcome.APPLIED else None,
        )
        env = self._store.environment(run.tenant, run.environment)
        env_changes: dict[str, Any] = {}
        if env.get("ActiveRunId") == run.id:
            env_changes["ActiveRunId"] = ""
        if final.apply_receipt_digest:
            env_changes["LastReceiptDigest"] = final.apply_receipt_digest
        if outcome is Outcome.APPLIED:
            env_changes.update(AppliedDigest=run.specification_digest, AppliedRunId=run.id)
            self._register_change(run)  # before the run is final: a retried finish registers it again
        event = (
            events.provisioning_applied(final, self._publish_outputs(final))
            if outcome is Outcome.APPLIED
            else events.provisioning_failed(final, failure or FailureReason.APPLY_FAILED, detail)
        )
        self._store.save_run(final, etag, [event], env_changes=env_changes or None, env=env)
        _measure_ended(final, outcome, failure)

    def _register_change(self, run: Run) -> None:
        """A PlatformAdmin's run that loosened the class or moved the target changes the registry once applied."""
        if run.registry_change is not None and self._environments is not None:
            change = run.registry_change
            self._environments.apply_change(run.tenant, run.environment, change, by=run.requested_by, run_id=run.id)

    def _publish_outputs(self, run: Run) -> OutputsReference:
        """The outputs go by reference: an environment's outputs outgrow any event (claim check)."""
        document, _ = self._receipts.read(run.tenant, run.environment, run.id, "apply")
        return self._outputs.publish(run.tenant, run.environment, run.id, document.get("outputs", {}))


def _measure_ended(run: Run, outcome: Outcome, failure: FailureReason | None) -> None:
    """Metrics of a run that ended: its outcome, why it failed, how long it spent in each state."""
    telemetry.count(names.RUNS, outcome=outcome.value, environment_class=run.environment_class)
    if outcome is Outcome.FAILED:
        telemetry.count(
            names.RUNS_FAILED,
            reason=(failure or FailureReason.APPLY_FAILED).value,
            environment_class=run.environment_class,
        )
    for entry, following in zip(run.timeline, run.timeline[1:], strict=False):
        try:
            seconds = (datetime.fromisoformat(following.at) - datetime.fromisoformat(entry.at)).total_seconds()
        except ValueError:
            continue
        telemetry.record(names.STATE_DURATION, max(0.0, seconds), state=entry.state.value)
