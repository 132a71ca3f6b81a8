"""The Pulumi runner: preview -> plan result, up (bound to the saved plan) -> apply result.

It implements :class:`~shared.iac.model.IaCRunner` through the Automation API,
which drives the Pulumi CLI. Without the CLI on PATH (these development
machines cannot download it) ``plan`` and ``apply`` raise
:class:`RunnerUnavailable` at once, before touching anything.

Idempotency: Pulumi's own state makes a repeated ``up`` converge, but an
``up`` bound to a plan that already went through would be refused as a
deviation, so when the journal already holds every changing step of the plan,
``apply`` answers from the journal without running the CLI again.

Each preview and update runs in the run's own copy of the program
(:mod:`.program_copy`): the program's folder is never written.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from shared.desired_state.api import EnvironmentSpecification, RunnerName
from shared.iac.model import (
    Action,
    ApplyFailed,
    ApplyResult,
    ApplySliceEnded,
    PlanResult,
    RunnerError,
    StepJournal,
    StepStatus,
)
from shared.iac.pulumi.errors import CLI_MISSING, RunnerUnavailable, StackBusy
from shared.iac.pulumi.events import apply_from_events, plain_message, plan_from_events
from shared.iac.pulumi.locks import LockOwners, LockStore, clear_stale_locks, lock_store_for
from shared.iac.pulumi.program_copy import program_copy
from shared.iac.pulumi.recovery import CancelOnStop, clear_pending_operations
from shared.iac.pulumi.saved_plans import BINDING_KEY, STACK_KEY, SavedPlans
from shared.iac.pulumi.workspace import ProgramLocation, locate_program, open_stack, stack_configuration
from shared.iac.runner_info import describe_runner
from shared.iac.settings import IaCSettings
from shared.platform.logs import app_logger
from shared.platform.targets import ProvisioningTarget

logger = app_logger("iac")


class EventCollector:
    """The ``on_event`` callback: keeps every engine event and streams it on (the watcher thread calls it)."""

    def __init__(self, sink: Callable[[Any], None] | None = None) -> None:
        self.events: list[Any] = []
        self._sink = sink

    def __call__(self, event: Any) -> None:
        self.events.append(event)
        if self._sink is not None:
            self._sink(event)


class PulumiRunner:
    """Pulumi programs under ``PulumiWorkRoot``, state in ``PulumiBackendUrl``, saved plans in blob.

    ``saved_plans`` is where previews' update plans are kept (blob, see
    :mod:`.saved_plans`); ``event_sink`` receives every engine event as it
    arrives (the runner job streams them into the run's log).
    """

    name = RunnerName.PULUMI.value

    def __init__(
        self,
        backend_url: str | None = None,
        work_root: str | None = None,
        *,
        saved_plans: SavedPlans | None = None,
        secrets_provider: str | None = None,
        event_sink: Callable[[Any], None] | None = None,
        adopted_stacks: Mapping[str, str] | None = None,
        lock_owners: LockOwners | None = None,
        lock_stale_seconds: float = 90.0,
        lock_store: LockStore | None = None,
    ) -> None:
        self.backend_url = backend_url
        self.adopted_stacks = dict(adopted_stacks or {})
        # A runner job passes who may hold a stack lock (its job rows) and the staleness limit; the lock
        # store is the backend's own unless given (see :mod:`.locks`).
        self.lock_owners = lock_owners
        self.lock_stale_seconds = lock_stale_seconds
        self.lock_store = lock_store
        self.work_root = work_root
        self.saved_plans = saved_plans
        self.secrets_provider = secrets_provider
        self.event_sink = event_sink
        self.version = describe_runner(RunnerName.PULUMI).version or "unavailable"

    @classmethod
    def from_settings(cls, settings: IaCSettings, **options: Any) -> PulumiRunner:
        return cls(
            backend_url=settings.pulumi_backend_url,
            work_root=settings.pulumi_work_root,
            secrets_provider=settings.pulumi_secrets_provider,
            adopted_stacks=settings.pulumi_adopted_stacks,
            **options,
        )

    @staticmethod
    def available() -> bool:
        return shutil.which("pulumi") is not None

    def plan(
        self,
        specification: EnvironmentSpecification,
        target: ProvisioningTarget,
        resolved_configuration: dict[str, str] | None = None,
    ) -> PlanResult:
        """Preview the stack and save its update plan (in blob, by digest).

        ``resolved_configuration`` (optional, beyond the interface) lets the caller
        preview with the values apply will use, so the saved plan accepts them.
        """
        self._require_cli(specification)
        location = locate_program(specification, self.work_root, self.adopted_stacks)
        saved = self._saved_plans()
        events = EventCollector(self.event_sink)
        scratch = saved.scratch_path()
        with program_copy(location) as copy:
            stack = self._stack(copy, specification, target, resolved_configuration)
            try:
                stack.preview(on_event=events, plan=str(scratch), color="never")
            except Exception as error:  # the CLI's failures, classified below
                scratch.unlink(missing_ok=True)
                raise _failure("preview", location, error, events) from error
        digest = saved.seal(specification, scratch)
        result = plan_from_events(events.events, self.name, self.version)
        return result.model_copy(update={"binding": {BINDING_KEY: digest, STACK_KEY: location.stack_reference}})

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
        # ``deadline`` is not used: a Pulumi update is one engine operation and cannot stop between
        # resources and resume, which is why it runs in a runner job, not in an activity. ``stop`` (an
        # operator's cancel) is asked while the update runs and cancels it (see :mod:`.recovery`).
        self._require_cli(specification)
        location = locate_program(specification, self.work_root, self.adopted_stacks)
        digest = _check_plan(plan, location)
        logs = [
            f"apply of stack {location.stack_reference} bound to update plan {digest[:12]} "
            f"by runner {self.name} {self.version}",
            f"configuration supplied: {', '.join(sorted(resolved_configuration)) or 'none'}",
        ]
        finished = _from_journal(plan, journal, self.name, self.version, logs)
        if finished is not None:
            return finished
        plan_file = self._saved_plans().bound(specification, digest)
        try:
            with program_copy(location) as copy:
                return self._update(copy, specification, target, resolved_configuration, plan_file, journal, logs, stop)
        finally:
            plan_file.unlink(missing_ok=True)

    def _update(
        self,
        location: ProgramLocation,
        specification: EnvironmentSpecification,
        target: ProvisioningTarget,
        resolved_configuration: dict[str, str],
        plan_file: Path,
        journal: StepJournal,
        logs: list[str],
        stop: Callable[[], bool] | None,
    ) -> ApplyResult:
        """``pulumi up`` bound to the saved plan, in the run's copy of the program."""
        stack = self._stack(location, specification, target, resolved_configuration)
        events = EventCollector(self.event_sink)
        watch = CancelOnStop(stack, stop)
        try:
            logs.extend(self._clear_stale_locks(location))
            logs.extend(clear_pending_operations(stack))
            with watch:
                stack.up(plan=str(plan_file), on_event=events, color="never")
        except Exception as error:  # the CLI's failures, classified below
            failure = _failure("update", location, error, events)
            partial = self._record(events, journal, logs)
            if isinstance(failure, StackBusy):
                failure.result = partial
                raise failure from error
            if watch.cancelled:
                raise ApplySliceEnded("the update was cancelled by an operator", partial) from error
            raise ApplyFailed(str(failure), partial) from error
        return self._record(events, journal, logs)

    def _clear_stale_locks(self, location: ProgramLocation) -> list[str]:
        """A lock a dead job left would refuse the update: removed when its owner is proven dead."""
        store = self.lock_store or lock_store_for(self.backend_url)
        if store is None or self.lock_owners is None:
            return []
        return clear_stale_locks(
            store, location.project, location.stack, self.lock_owners, stale_seconds=self.lock_stale_seconds
        )

    def _saved_plans(self) -> SavedPlans:
        if self.saved_plans is None:
            raise RunnerError("the pulumi runner keeps saved update plans in blob: it runs in a runner job")
        return self.saved_plans

    def _record(self, events: EventCollector, journal: StepJournal, logs: list[str]) -> ApplyResult:
        result = apply_from_events(events.events, self.name, self.version)
        for step in result.steps:
            if step.status is not StepStatus.FAILED:
                journal.record(step)
        journal.flush()
        return result.model_copy(update={"logs": logs + result.logs})

    def _stack(
        self,
        location: ProgramLocation,
        specification: EnvironmentSpecification,
        target: ProvisioningTarget,
        resolved: dict[str, str] | None,
    ) -> Any:
        try:
            stack = open_stack(location, self.backend_url, self.secrets_provider)
            stack.set_all_config(stack_configuration(specification, target, resolved))
        except RunnerError:
            raise
        except Exception as error:
            raise _failure("selecting the stack", location, error, None) from error
        return stack

    def _require_cli(self, specification: EnvironmentSpecification) -> None:
        if not self.available():
            raise RunnerUnavailable(CLI_MISSING)
        if specification.runner is not RunnerName.PULUMI:
            raise RunnerError(f"the specification names runner {specification.runner.value}, not pulumi")


def _check_plan(plan: PlanResult, location: ProgramLocation) -> str:
    if plan.runner != RunnerName.PULUMI.value:
        raise RunnerError(f"the plan was made by runner {plan.runner}, not pulumi")
    digest = plan.binding.get(BINDING_KEY)
    if not digest:
        raise RunnerError("the plan carries no saved Pulumi update plan to bind the apply to: plan again")
    if plan.binding.get(STACK_KEY) != location.stack_reference:
        raise RunnerError(f"the plan is for stack {plan.binding.get(STACK_KEY)}, not {location.stack_reference}")
    return digest


def _from_journal(
    plan: PlanResult, journal: StepJournal, runner: str, version: str, logs: list[str]
) -> ApplyResult | None:
    """The result of an apply that already finished every changing step (a retried activity)."""
    changing = [change for change in plan.changes if change.action is not Action.NO_CHANGE]
    recorded = [journal.finished(change.address) for change in changing]
    if not changing or any(step is None for step in recorded):
        return None
    steps = [step for step in recorded if step is not None]
    outputs = {step.address: step.outputs for step in steps if step.outputs}
    return ApplyResult(
        runner=runner,
        runner_version=version,
        steps=steps,
        outputs=outputs,
        logs=logs + ["every planned change is already recorded: the update is not run again"],
    )


def _failure(doing: str, location: ProgramLocation, error: Exception, events: EventCollector | None) -> RunnerError:
    """A CLI failure as a runner error whose message an operator can act on."""
    from pulumi.automation import errors

    if isinstance(error, errors.ConcurrentUpdateError):
        return StackBusy(
            f"stack {location.stack_reference} is locked by another update; wait for it, or run "
            "'pulumi cancel' if that update is known to be dead"
        )
    reasons: list[str] = []
    if events is not None:
        reasons = [
            plain_message(event.diagnostic_event.message)
            for event in events.events
            if event.diagnostic_event is not None and event.diagnostic_event.severity == "error"
        ]
    if not reasons:
        reasons = [line for line in str(error).splitlines() if line.strip()][-3:]
    logger.warning("pulumi %s of %s failed: %s", doing, location.stack_reference, reasons)
    return RunnerError(f"pulumi {doing} of stack {location.stack_reference} failed: " + " | ".join(reasons)[:2000])
