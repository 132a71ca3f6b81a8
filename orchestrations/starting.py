"""Starting a Durable orchestration once, whoever else starts it at the same moment.

The instance id names the work (a run id, a pool's sweep), so starting is
idempotent: an instance already there is left alone. The Durable client cannot
start conditionally, so two starters may both find nothing and both call
``start_new``; the loser's call fails (the app's singletons start under
``NonRunningStates``, see ``host.json``) and finds the winner's instance, which
is all it wanted.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from azure.durable_functions import OrchestrationRuntimeStatus as Status

from orchestrations.durable import DurableClient

log = logging.getLogger("runtime_cloud.orchestrations")

# The states of an instance that is still at work (a finished one may be started again, if wanted).
ACTIVE: frozenset[Status] = frozenset({Status.Running, Status.Pending, Status.ContinuedAsNew})


async def start_once(
    client: DurableClient,
    *,
    orchestrator: str,
    instance_id: str,
    document: Mapping[str, object],  # the orchestration's input (a TypedDict of its module)
    present_when: Collection[Status] | None = None,
) -> bool:
    """Start ``orchestrator`` as ``instance_id`` unless the instance is there. True if this call started it.

    ``present_when`` names the states in which an existing instance counts as there; None (the
    default) means any state, so work that finished is never started again.
    """
    if await _present(client, instance_id, present_when):
        return False
    try:
        await client.start_new(orchestrator, instance_id, document)
    except Exception as error:  # a racing starter won: its instance is there, which is all we want
        if not await _present(client, instance_id, present_when):
            raise
        log.info("%s %s was started concurrently (%s)", orchestrator, instance_id, error)
        return False
    return True


async def _present(client: DurableClient, instance_id: str, present_when: Collection[Status] | None) -> bool:
    status = await client.get_status(instance_id)
    if status.runtime_status is None:
        return False
    return present_when is None or status.runtime_status in present_when
