"""The Durable engine as a host extension: orchestration and activity triggers, the client binding.

``attach`` wires the engine into the host before it listens: the
``durableClient`` binding provider and the management API routes. ``run``
(supervised by the host, so restarted if the store goes away) creates the task
hub's storage, takes the hub's lease, and runs the orchestration and activity
dispatchers until the host stops.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from devhost.catalog import FunctionCatalog
from devhost.durable.activities import ActivityDispatcher
from devhost.durable.client_binding import RPC_ALIAS, WEBHOOK_PREFIX, ClientBinding
from devhost.durable.functions import DurableFunctions
from devhost.durable.hub_lease import HubLease
from devhost.durable.management_api import ManagementApi
from devhost.durable.orchestrations import OrchestrationDispatcher
from devhost.durable.settings import DurableSettings, DurableSettingsError
from devhost.durable.task_hub import TaskHub

if TYPE_CHECKING:
    from devhost.host import LocalHost

log = logging.getLogger("devhost.durable")


class DurableExtension:
    trigger_types = frozenset({"orchestrationtrigger", "activitytrigger"})

    def __init__(self) -> None:
        self._host: LocalHost | None = None
        self._hub: TaskHub | None = None
        self._functions: DurableFunctions | None = None
        self._orchestrations: OrchestrationDispatcher | None = None

    def attach(self, host: LocalHost) -> None:
        from devhost.host import StartupError

        assert host.catalog is not None and host.front_door is not None
        if not _uses_durable(host.catalog):
            return  # nothing Durable in this app: no task hub, no storage needed
        try:
            settings = DurableSettings.from_host_json(host.host_json.durable_task, host.host_json.function_timeout)
        except DurableSettingsError as error:
            raise StartupError(f"{host.app_dir / 'host.json'}: extensions.{error}") from None
        except KeyError as error:  # a %Setting% reference to an app setting that is not set
            raise StartupError(str(error).strip("'\"")) from None
        try:
            self._hub = TaskHub(settings)
        except DurableSettingsError as error:
            raise StartupError(str(error)) from None
        self._host = host
        self._functions = DurableFunctions(host.catalog)
        keys = host.front_door.keys
        binding = ClientBinding(_reachable(host.bind, host.port), settings.hub_name, keys.durable)
        host.invoker.add_provider("durableClient", binding.provide)
        host.front_door.add_key_path_alias(RPC_ALIAS, WEBHOOK_PREFIX, keys.is_durable)
        for template, methods, handler in ManagementApi(self._hub, self._functions, binding).routes():
            host.front_door.add_host_route(template, methods, handler, keys.is_durable)

    async def run(self) -> None:
        if self._hub is None or self._functions is None or self._host is None or not self._functions.any:
            return  # no orchestrations or activities here: nothing to run (a client binding still works)
        await self._hub.ready()
        lease = HubLease(self._hub.lease_container())
        await lease.acquire()
        self._hub.cache.clear()  # copies from before the hub was lost are older than what others committed
        settings = self._hub.settings
        log.info(
            "Durable task hub %s: up to %d orchestrations and %d activities at once",
            settings.hub_name,
            settings.max_concurrent_orchestrators,
            settings.max_concurrent_activities,
        )
        self._orchestrations = OrchestrationDispatcher(
            settings, self._hub.store, self._hub.queues, self._functions, self._hub.cache
        )
        activities = ActivityDispatcher(settings, self._hub.queues, self._functions, self._host.invoker)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(lease.keep())
                group.create_task(self._orchestrations.run())
                group.create_task(activities.run())
        finally:
            self._orchestrations.shutdown()
            try:  # a store that went away must not hold the host's shutdown up
                await asyncio.wait_for(asyncio.shield(lease.release()), timeout=5)
            except TimeoutError:
                log.warning("could not release the task hub lease; it expires on its own")

    async def stop(self) -> None:
        if self._hub is not None:
            await self._hub.close()
        await _close_client_session()


async def _close_client_session() -> None:
    """The SDK's client keeps one HTTP session per process for its calls to the host; close it with the host."""
    try:
        from azure.durable_functions.models.utils import http_utils

        await http_utils._close_session()
    except (ImportError, AttributeError):  # another SDK version: nothing to close, or its own way
        pass


def _uses_durable(catalog: FunctionCatalog) -> bool:
    kinds = {"orchestrationtrigger", "activitytrigger", "durableclient"}
    return any(binding["type"].lower() in kinds for function in catalog for binding in function.bindings)


def _reachable(bind: str, port: int) -> str:
    host = "127.0.0.1" if bind in ("", "0.0.0.0", "::") else bind
    return f"http://{host}:{port}"
