"""Starting an orchestration instance: what the management API's start and restart share.

As the Durable extension does it with the Azure Storage provider, the start
(the ``ExecutionStarted`` event of a new execution) is sent to the instance's
control queue first, and then the instance row is marked Pending with that
execution, so that its status shows at once and the engine knows which start
is the current one (see ``triage``).

An instance id already in use follows host.json
``extensions.durableTask.overridableExistingInstanceStates``:

- ``AnyState`` (the default, as in Azure): the new execution replaces the
  instance whatever its state. A running instance is not asked to stop: its
  pending tasks' results find a newer execution and are dropped, and its
  sub-orchestrations run on, orphaned.
- ``NonRunningStates``: only a completed, failed or terminated instance is
  replaced; starting a pending, running or suspended one raises
  :class:`InstanceExists` (the API answers 409, and the SDK's ``start_new``
  raises).
"""

from __future__ import annotations

import logging
import uuid

from devhost.durable import history as h
from devhost.durable.functions import DurableFunctions
from devhost.durable.instances import InstanceState
from devhost.durable.queues import ControlMessage
from devhost.durable.store import InstanceConflict
from devhost.durable.task_hub import TaskHub

log = logging.getLogger("devhost.durable")

PENDING_MARK_ATTEMPTS = 5


class UnknownOrchestrator(ValueError):
    """No orchestrator function by that name (the extension's ``ArgumentException``)."""

    def __init__(self, name: str, known: list[str]) -> None:
        listed = ", ".join(f"'{n}'" for n in known) or "none"
        super().__init__(
            f"The function '{name}' doesn't exist, is disabled, or is not an orchestrator function. "
            f"Additional info: the orchestrator functions in this app are: {listed}."
        )


class InstanceExists(Exception):
    """The instance id is in use and host.json says not to replace it (the extension's words)."""

    def __init__(self, status: str) -> None:
        super().__init__(f"An Orchestration instance with the status {status} already exists.")


class Starter:
    def __init__(self, hub: TaskHub, functions: DurableFunctions) -> None:
        self._hub = hub
        self._functions = functions

    async def start(
        self, name: str, instance_id: str, input_json: str | None, trace_context: dict[str, str] | None = None
    ) -> None:
        """Start ``name`` as ``instance_id`` with ``input_json`` (JSON text or ``None``), in the W3C
        ``trace_context`` of the caller (its orchestration and activity spans join that trace)."""
        function = self._functions.orchestrator(name)
        if function is None:
            raise UnknownOrchestrator(name, self._functions.orchestrator_names())
        await self._hub.ready()
        existing = await self._hub.store.get(instance_id)
        if existing is not None and not existing.status.finished and not self._hub.settings.replaces_running_instances:
            raise InstanceExists(existing.status.value)
        if existing is not None and not existing.status.finished:
            log.info(
                "instance %s is %s; a new start replaces it (overridableExistingInstanceStates: AnyState)",
                instance_id,
                existing.status.value,
            )
        execution_id = uuid.uuid4().hex
        event = h.execution_started(
            h.now(), instance_id, execution_id, function.name, input_json, trace_context=trace_context
        )
        await self._hub.queues.send_control(ControlMessage(instance_id, execution_id, event))
        await self._mark_pending(InstanceState(instance_id, function.name, execution_id, input=input_json), existing)

    async def _mark_pending(self, fresh: InstanceState, seen: InstanceState | None) -> None:
        """Show the new execution as Pending until its first episode.

        The engine may commit meanwhile: an episode of the execution being replaced (read the row
        again and mark it over that), or the new execution's first episode (it is ahead: leave it).
        """
        current = seen
        self._hub.cache.forget(fresh.instance_id)
        for _ in range(PENDING_MARK_ATTEMPTS):
            if current is not None and current.execution_id == fresh.execution_id:
                return
            fresh.etag = current.etag if current is not None else None
            try:
                await self._hub.store.replace(fresh)
                self._hub.cache.forget(fresh.instance_id)  # (an episode may have remembered the row meanwhile)
                return
            except InstanceConflict:
                current = await self._hub.store.get(fresh.instance_id)
        # The start is on its queue and newer than the execution there: the engine begins it anyway.
        log.info(
            "instance %s changed while its start was recorded; the engine takes the start from its queue",
            fresh.instance_id,
        )
