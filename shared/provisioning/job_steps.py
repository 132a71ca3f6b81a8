"""The runner-job side of a run's steps: launch the plan or apply job, and tell whether it finished.

The orchestration calls :meth:`JobSteps.start` (activity
``provisioning_start_job``) and then the plan or apply step with the ticket
each time the job's notice or its check timer wakes it; the step answers
``waiting`` (:meth:`JobSteps.pending`) until the job's row says it finished.

Two things happen here rather than in the plan step, to save a run time:

- **the policy bundle is loaded before the plan job starts**: GovernanceHost
  down fails the run ``policy-unavailable`` (with its receipt, written by
  ``finish``) before a job runs a preview; the plan step loads it again to
  evaluate the job's plan, so a policy that changed meanwhile is the one
  that judges it;
- **the apply job starts from the plan step** when the run needs no approval
  (:meth:`JobSteps.launch_apply`), after the policy verdict and the plan
  receipt are recorded: one activity round less, and the job is already
  running while the orchestration takes the plan's answer. Such a run's plan
  job waits for it (``hands_over``): the apply is handed to that execution,
  not queued, so the run starts one job (:mod:`shared.iac.jobs.handover`);
  a plan answered otherwise tells the waiting job to stop.

Every call is idempotent: a job id names one attempt of one step, its input
is written once and its row inserted once, and a request sent twice runs once
(the job claims its row under its ETag).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shared.iac.api import JobKind, PlanResult
from shared.platform.targets import ProvisioningTarget, target_for
from shared.provisioning.configuration import ConfigPlatformClient, resolve_configuration
from shared.provisioning.outcomes import Outcome, StepAnswer
from shared.provisioning.policy_gate import PolicyGate, PolicyUnavailable, load_policy
from shared.provisioning.run_records import RunRecords
from shared.provisioning.runner_jobs import JobTicket, RunnerJobs
from shared.provisioning.runs import FailureReason, Run, RunState
from shared.provisioning.step_answers import RunRef, failed, unresolved
from shared.provisioning.store import ProvisioningStore


class JobSteps:
    def __init__(
        self,
        store: ProvisioningStore,
        records: RunRecords,
        jobs: RunnerJobs,
        *,
        targets: Sequence[ProvisioningTarget],
        config_platform: ConfigPlatformClient,
        policy_gate: PolicyGate | None,
        requires_approval: Callable[[str], bool] = lambda environment_class: True,
    ) -> None:
        self._requires_approval = requires_approval  # by the run's class: a plan job waits to apply when not
        self._store = store
        self._records = records
        self._jobs = jobs
        self._targets = targets
        self._config_platform = config_platform
        self._gate = policy_gate

    @property
    def enabled(self) -> bool:
        return self._jobs.enabled

    def start(self, ref: RunRef, kind: JobKind, attempt: int) -> JobTicket | StepAnswer:
        """Hand the plan or the apply to a runner job: its ticket; an empty one when the step runs without
        one (jobs off, or nothing to run: cancelled, planned or applied already, target gone); a ``failed``
        answer when the plan cannot start (the policy cannot be read)."""
        if not self._jobs.enabled:
            return JobTicket()
        run, _ = self._store.run_with_etag(ref.tenant, ref.environment, ref.run_id)
        if kind is JobKind.PLAN:
            if _cancelled(run) or run.plan_digest or run.state is not RunState.PLANNING:
                return JobTicket()
            if (unknown := unresolved(run)) is not None:  # fail fast: no plan job for an unknown class
                return unknown
            if (unavailable := self._policy_unavailable(run)) is not None:
                return unavailable
            return self._launch(run, kind, attempt, None)
        return self._launch_apply(ref, attempt, None)

    def launch_apply(self, ref: RunRef, answer: StepAnswer, plan_job: JobTicket | None = None) -> StepAnswer:
        """The plan step's answer, with the apply job launched when the run goes on without approval: handed
        to the plan job when it waits for it (``hands_over``), else queued. A waiting plan job whose run does
        not go on is told to stop."""
        waiting = plan_job.get("job_id") if plan_job and plan_job.get("hands_over") else None
        goes_on = answer.get("outcome") == Outcome.PLANNED and not answer.get("requires_approval")
        ticket = self._launch_apply(ref, 1, waiting) if self._jobs.enabled and goes_on else JobTicket()
        if waiting and not ticket:
            self._jobs.stop_handover(ref.run_id, waiting)
        return {**answer, "apply_job": ticket} if ticket else answer

    def pending(self, ref: RunRef, job: JobTicket, wait_seconds: float = 0.0) -> StepAnswer | None:
        """``waiting`` while the step's job has not finished (None: it did, or it was declared dead).

        ``wait_seconds`` (the call right after the launch): a job still running is read again until it
        finishes or the wait is over, so a short job needs no notice and no timer to be found."""
        if job.get("dead"):
            return None
        check = self._jobs.check(ref.run_id, job["job_id"], wait_seconds)
        if check["state"] == "finished":
            return None
        if check["state"] == "running" and self._cancel_requested(ref):
            # Set by the cancel itself; again at each check, in case the store failed it just after the run's.
            self._jobs.request_cancel(ref.run_id)
        return {"outcome": Outcome.WAITING, "job_state": check["state"], "detail": check["detail"]}

    def _launch_apply(self, ref: RunRef, attempt: int, via: str | None) -> JobTicket:
        run, _ = self._store.run_with_etag(ref.tenant, ref.environment, ref.run_id)
        if run.cancel_requested and run.state in (RunState.PLANNING, RunState.AWAITING_APPROVAL):
            return JobTicket()
        run = self._records.start_applying(ref)
        if run.apply_receipt_digest or run.cancel_requested:
            return JobTicket()
        plan = self._records.reviewed_plan(run)
        if plan is None:
            return JobTicket()
        return self._launch(run, JobKind.APPLY, attempt, plan, via)

    def _launch(
        self, run: Run, kind: JobKind, attempt: int, plan: PlanResult | None, via: str | None = None
    ) -> JobTicket:
        ref = RunRef(run.tenant, run.environment, run.id)
        target = target_for(self._targets, run.target, run.tenant)
        if target is None:
            return JobTicket()  # the step itself fails the run, naming the missing target
        specification = self._store.load_specification(run.tenant, run.environment, run.specification_digest)
        configuration = resolve_configuration(specification.configuration, run.environment, self._config_platform)
        hands_over = kind is JobKind.PLAN and not self._requires_approval(run.environment_class)
        return self._jobs.launch(
            run,
            specification,
            target,
            kind,
            attempt,
            plan,
            configuration,
            lambda: self._cancel_requested(ref),
            hands_over=hands_over,
            via=via,
        )

    def _cancel_requested(self, ref: RunRef) -> bool:
        found = self._store.find_run(ref.tenant, ref.environment, ref.run_id)
        return found is not None and found.cancel_requested

    def _policy_unavailable(self, run: Run) -> StepAnswer | None:
        """Fail fast: the policy is read before a job runs the preview (evaluated after, in the plan step)."""
        if self._gate is None:
            return None
        try:
            load_policy(self._gate, run)
        except PolicyUnavailable as error:
            return failed(FailureReason.POLICY_UNAVAILABLE, str(error))
        return None


def _cancelled(run: Run) -> bool:
    return run.decision is not None and run.decision.decision == "cancelled"


__all__ = ["JobSteps", "JobTicket"]
