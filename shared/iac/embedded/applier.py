"""Applying exactly a reviewed plan, idempotently per step.

For each change, in plan order:

1. the journal says the step is finished -> skip it (its recorded result stands);
2. read that one resource now;
3. it already has the planned ``after`` -> record it without touching it (an
   earlier attempt of this run applied it and stopped before recording);
4. it still has the planned ``before`` -> perform the change, then record it;
5. anything else -> :class:`PlanNoLongerHolds` naming the resource: the target
   changed since the plan was reviewed, and nothing unreviewed is applied.

A ``create`` skips the read of step 2: creating is itself conditional (the
service refuses a name that exists), so the create is tried at once and,
when refused, the resource is read and steps 3 and 5 decide. That makes the
common step of a large first apply one storage call instead of three (its
outputs are what was planned, so nothing is read back either).

So a retried or restarted apply never creates anything twice. A ``no-change``
step is checked the same way: if its resource changed since the plan, the
reviewed outcome is no longer what apply would produce.

Between changes the applier pauses ``step_interval_seconds`` (to stay under a
target's rate limits; the crash test uses it to stop the host mid-apply).

Given a ``deadline``, the applier stops between two changes once it is past it
(having done at least one change in this call, so every call makes progress)
and raises :class:`ApplySliceEnded`: the caller calls it again, and the journal
makes it go on from where it stopped. So an apply of any length runs as slices,
each well inside the Functions host's ``functionTimeout``. The
check in step 2 and the write in step 4 are not atomic (the data plane offers
no condition on metadata writes); the window is one round trip.

Resolved configuration values are never written or logged: the log records
only which names were supplied.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError

from shared.desired_state.api import ResourceType
from shared.iac.embedded.access import TargetClients, unreachable_on_failure
from shared.iac.embedded.observed import ObservedResource
from shared.iac.embedded.reader import read_resource
from shared.iac.embedded.table_registry import registry_of
from shared.iac.model import (
    Action,
    ApplyFailed,
    ApplyResult,
    ApplySliceEnded,
    PlanNoLongerHolds,
    ResourceChange,
    RunnerError,
    StepJournal,
    StepResult,
    StepStatus,
)
from shared.iac.tags import ManagementTags, split_metadata
from shared.platform import clock
from shared.platform.logs import app_logger

logger = app_logger("iac")

# A deleted container or queue keeps its name for a while; creating it again is refused meanwhile.
BEING_DELETED = {"ContainerBeingDeleted", "QueueBeingDeleted"}
FOUND_ALREADY = "found already in the planned state (an earlier attempt applied it before recording)"


@dataclass
class ApplyProgress:
    """What one apply call has done so far: the receipt's steps, outputs and log lines."""

    runner: str
    runner_version: str
    steps: list[StepResult] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)

    def log(self, line: str) -> None:
        self.logs.append(line)
        logger.info(line)

    def add(self, step: StepResult) -> None:
        self.steps.append(step)
        if step.outputs:
            self.outputs[step.address] = step.outputs

    def result(self) -> ApplyResult:
        return ApplyResult(
            runner=self.runner,
            runner_version=self.runner_version,
            steps=list(self.steps),
            outputs=dict(self.outputs),
            logs=list(self.logs),
        )


@dataclass(frozen=True)
class Applier:
    clients: TargetClients
    journal: StepJournal
    step_interval_seconds: float = 0.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def apply(
        self,
        changes: list[ResourceChange],
        progress: ApplyProgress,
        deadline: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> ApplyResult:
        """Apply ``changes`` in order; raise with ``result`` set to what was done when a step cannot be,
        or (:class:`ApplySliceEnded`) when ``deadline`` passed or ``stop()`` answers true between two steps."""
        try:
            return self._apply(changes, progress, deadline, stop)
        finally:
            self.journal.flush()  # the journal may batch its writes

    def _apply(
        self,
        changes: list[ResourceChange],
        progress: ApplyProgress,
        deadline: float | None,
        stop: Callable[[], bool] | None,
    ) -> ApplyResult:
        acted = False
        performed = 0
        for change in changes:
            done = self.journal.finished(change.address)
            if done is not None:
                progress.add(done)
                progress.log(f"{change.address}: already recorded as {done.status.value} by an earlier attempt")
                continue
            if deadline is not None and performed and self.clock() >= deadline:
                progress.log(f"slice ended after {performed} step(s); the apply goes on from {change.address}")
                raise ApplySliceEnded(f"slice ended before {change.address}", progress.result())
            if stop is not None and stop():  # e.g. an operator cancelled the run
                progress.log(f"stopped on request after {performed} step(s) of this slice, before {change.address}")
                raise ApplySliceEnded(f"stopped before {change.address}", progress.result())
            if acted and change.action is not Action.NO_CHANGE and self.step_interval_seconds > 0:
                self.sleep(self.step_interval_seconds)
            try:
                step = self._step(change, progress)
            except RunnerError as error:
                error.result = progress.result()
                raise
            self.journal.record(step)
            progress.add(step)
            performed += 1
            acted = acted or change.action is not Action.NO_CHANGE
        return progress.result()

    def _step(self, change: ResourceChange, progress: ApplyProgress) -> StepResult:
        started = clock.now_iso()
        resource_type = ResourceType(change.type)
        if change.action is Action.CREATE:  # conditional by itself: see the module's notes
            return self._perform_step(change, resource_type, started, progress)
        current = read_resource(self.clients, resource_type, change.name)
        state = current.state() if current is not None else None
        if change.action is Action.NO_CHANGE:
            if state != change.after:
                raise _no_longer_holds(change, state)
            return self._result(change, StepStatus.UNCHANGED, started, current, "unchanged, as planned")
        if state == change.after:
            message = FOUND_ALREADY
            progress.log(f"{change.address}: {message}")
            if change.action is Action.DELETE and resource_type is ResourceType.TABLE:
                registry_of(self.clients.tables).release(change.name, _registered(change.before))
            return self._result(change, StepStatus.APPLIED, started, current, message)
        if state != change.before:
            raise _no_longer_holds(change, state)
        return self._perform_step(change, resource_type, started, progress)

    def _perform_step(
        self, change: ResourceChange, resource_type: ResourceType, started: str, progress: ApplyProgress
    ) -> StepResult:
        try:
            with unreachable_on_failure(self.clients.target, f"applying {change.action.value} of {change.address}"):
                after, message = self._perform(change, resource_type)
        except HttpResponseError as error:
            failed = StepResult(
                address=change.address,
                action=change.action,
                status=StepStatus.FAILED,
                started_at=started,
                finished_at=clock.now_iso(),
                message=_reason(error),
            )
            progress.add(failed)
            progress.log(f"{change.address}: {change.action.value} failed: {failed.message}")
            raise ApplyFailed(
                f"{change.address}: {change.action.value} failed: {failed.message}", progress.result()
            ) from error
        progress.log(f"{change.address}: {message}")
        return self._result(change, StepStatus.APPLIED, started, after, message)

    def _perform(self, change: ResourceChange, resource_type: ResourceType) -> tuple[ObservedResource | None, str]:
        """Make the change; returns the resource as it is afterwards (None when deleted) and what happened."""
        try:
            _write(self.clients, change, resource_type)
        except (ResourceExistsError, ResourceNotFoundError) as error:
            if getattr(error, "error_code", None) in BEING_DELETED:
                raise  # transient: the step fails and a later run may retry it
            # Someone (or an earlier attempt of this run) got there first:
            # accept it only if the outcome is exactly the planned one.
            now = read_resource(self.clients, resource_type, change.name)
            if (now.state() if now is not None else None) != change.after:
                raise _no_longer_holds(change, now.state() if now is not None else None) from None
            return now, FOUND_ALREADY
        if change.action is Action.DELETE:
            return None, _done_word(change.action)
        if change.action is Action.CREATE:  # just made as planned: nothing to read back
            return _as_planned(self.clients, change, resource_type), _done_word(change.action)
        return read_resource(self.clients, resource_type, change.name), _done_word(change.action)

    def _result(
        self, change: ResourceChange, status: StepStatus, started: str, resource: ObservedResource | None, message: str
    ) -> StepResult:
        facts = {"name": resource.name, **resource.properties} if resource is not None else {}
        # last_modified changes on every write; nobody consumes it as an output.
        outputs = {key: value for key, value in facts.items() if value is not None and key != "last_modified"}
        return StepResult(
            address=change.address,
            action=change.action,
            status=status,
            started_at=started,
            finished_at=clock.now_iso(),
            outputs=outputs,
            message=message,
        )


def _as_planned(clients: TargetClients, change: ResourceChange, resource_type: ResourceType) -> ObservedResource:
    """A resource just created, as the plan describes it (what reading it back would show)."""
    after = change.after or {}
    if resource_type is ResourceType.TABLE:
        return ObservedResource(
            type=resource_type,
            name=change.name,
            tags=dict(after.get("registration") or {}),
            properties={"url": clients.table_url(change.name)},
        )
    user, tags = split_metadata(after.get("metadata") or {})
    url = (clients.container_url if resource_type is ResourceType.BLOB_CONTAINER else clients.queue_url)(change.name)
    return ObservedResource(type=resource_type, name=change.name, metadata=user, tags=tags, properties={"url": url})


def _write(clients: TargetClients, change: ResourceChange, resource_type: ResourceType) -> None:
    if resource_type is ResourceType.TABLE:
        _write_table(clients, change)
        return
    metadata = dict((change.after or {}).get("metadata", {}))
    name = change.name
    if change.action is Action.CREATE:
        if resource_type is ResourceType.BLOB_CONTAINER:
            clients.blobs.create_container(name, metadata=metadata)
        else:
            clients.queues.create_queue(name, metadata=metadata)
    elif change.action is Action.UPDATE:
        # Both calls replace the whole metadata set, so removed keys disappear too.
        if resource_type is ResourceType.BLOB_CONTAINER:
            clients.blobs.get_container_client(name).set_container_metadata(metadata)
        else:
            clients.queues.get_queue_client(name).set_queue_metadata(metadata)
    elif change.action is Action.DELETE:
        if resource_type is ResourceType.BLOB_CONTAINER:
            clients.blobs.delete_container(name)
        else:
            clients.queues.delete_queue(name)
    else:
        raise RunnerError(f"{change.address}: the embedded runner cannot {change.action.value}")


def _write_table(clients: TargetClients, change: ResourceChange) -> None:
    """A table and its registration (a table carries no metadata: see :mod:`.table_registry`).

    The registration is claimed before the table is created and released after it is
    deleted, so a step interrupted in between is finished by its retry, never blocked by it.
    """
    registry = registry_of(clients.tables)
    name = change.name
    if change.action in (Action.CREATE, Action.UPDATE):  # an update registers a table found unregistered
        owner = _registered(change.after)
        registry.claim(name, owner, lambda: read_resource(clients, ResourceType.TABLE, name) is not None)
        if change.action is Action.CREATE:
            clients.tables.create_table(name)
    elif change.action is Action.DELETE:
        clients.tables.delete_table(name)
        registry.release(name, _registered(change.before))
    else:
        raise RunnerError(f"{change.address}: the embedded runner cannot {change.action.value}")


def _registered(state: dict[str, Any] | None) -> ManagementTags:
    owner = ManagementTags.from_metadata((state or {}).get("registration") or {})
    if owner is None:
        raise RunnerError("a table's planned state names no owner: plan again")
    return owner


def _no_longer_holds(change: ResourceChange, found: dict[str, Any] | None) -> PlanNoLongerHolds:
    seen = "absent" if found is None else f"now {found}"
    planned = "absent" if change.before is None else f"{change.before}"
    return PlanNoLongerHolds(
        f"{change.address} changed since the plan (planned from {planned}, {seen}); "
        "nothing further was applied: make a new plan and review it"
    )


def _reason(error: HttpResponseError) -> str:
    code = getattr(error, "error_code", None) or ""
    first_line = (str(error.message or error).splitlines() or [""])[0][:300]
    return f"HTTP {error.status_code} {code}: {first_line}".strip()


def _done_word(action: Action) -> str:
    return {Action.CREATE: "created", Action.UPDATE: "updated", Action.DELETE: "deleted"}.get(action, action.value)
