"""Starting an orchestration instance: what the management API's start and restart share.

As the Durable extension does it with the Azure Storage provider, the
instance row is written first, Pending with the new execution, on a condition:
created if there was none, replaced only if unchanged since it was read. Only
then is the start (the ``ExecutionStarted`` event) sent to the instance's
control queue. Two callers starting the same id at the same moment therefore
give one execution: the second one's write fails and its start is refused with
the extension's words, and sends nothing. (Sending first and marking after let
both starts onto the queue, each marking its own execution over the other's;
the engine then discarded one start as stale and the other had been discarded
against the first mark, leaving an instance that never began. Chaos run.)

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
from devhost.durable.instances import InstanceState, RuntimeStatus
from devhost.durable.queues import ControlMessage
from devhost.durable.store import InstanceConflict
from devhost.durable.task_hub import TaskHub
from devhost.tracing import TraceCarrier

log = logging.getLogger("devhost.durable")


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
        self, name: str, instance_id: str, input_json: str | None, trace_context: TraceCarrier | None = None
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
        fresh = InstanceState(instance_id, function.name, execution_id, input=input_json)
        fresh.etag = existing.etag if existing is not None else None
        marked = await self._mark_pending(fresh)
        event = h.execution_started(
            h.now(), instance_id, execution_id, function.name, input_json, trace_context=trace_context
        )
        try:
            await self._hub.queues.send_control(ControlMessage(instance_id, execution_id, event))
        except Exception:
            await self._unmark(instance_id, marked, existing)
            raise

    async def _unmark(self, instance_id: str, marked: str, existing: InstanceState | None) -> None:
        """The start could not be sent (the store failing): put the row back as it was, so that the
        instance is not left Pending with no start to begin it (a caller may try again). Best effort:
        a store that refused the send may refuse this too."""
        try:
            if existing is None:
                await self._hub.store.delete_row(instance_id, marked)
            else:
                await self._hub.store.replace(existing.copy(etag=marked))
        except Exception as error:  # noqa: BLE001 - the send's failure is the one to report
            log.warning("instance %s left Pending without its start: %s", instance_id, error)
        finally:
            self._hub.cache.forget(instance_id)

    async def _mark_pending(self, fresh: InstanceState) -> str:
        """Record the new execution as Pending, unless someone changed the instance since it was read:
        then another start (or an episode) got there first, and this start is refused, as the extension
        refuses it (its row write is conditional on the ETag it read)."""
        self._hub.cache.forget(fresh.instance_id)
        try:
            return await self._hub.store.replace(fresh)
        except InstanceConflict:
            current = await self._hub.store.get(fresh.instance_id)
            status = current.status.value if current is not None else RuntimeStatus.PENDING.value
            log.info("instance %s changed while its start was recorded; start refused", fresh.instance_id)
            raise InstanceExists(status) from None
        finally:
            self._hub.cache.forget(fresh.instance_id)
