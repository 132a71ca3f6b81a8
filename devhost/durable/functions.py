"""The app's orchestrator and activity functions, by the names orchestrations call them."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor

from devhost.catalog import FunctionCatalog, FunctionInfo
from devhost.durable.episode import Runner, start_input
from devhost.durable.history import Record
from devhost.durable.replay import OrchestratorError, OrchestratorResult, context_json, run_handle


class DurableFunctions:
    def __init__(self, catalog: FunctionCatalog) -> None:
        self._orchestrators = _by_name(catalog, "orchestrationTrigger", "orchestration")
        self._activities = _by_name(catalog, "activityTrigger", "activity")

    @property
    def any(self) -> bool:
        return bool(self._orchestrators or self._activities)

    def orchestrator(self, name: str) -> FunctionInfo | None:
        return self._orchestrators.get(name.lower())

    def orchestrator_names(self) -> list[str]:
        return sorted({function.name for function in self._orchestrators.values()})

    def activity(self, name: str) -> FunctionInfo | None:
        return self._activities.get(name.lower())

    def runner(self, instance_id: str, name: str, executor: Executor, timeout: float) -> Runner:
        """Replays orchestrator ``name`` for ``instance_id`` through the SDK's handle, off the event loop.

        An episode that runs longer than ``timeout`` (host.json ``functionTimeout``) fails the
        instance; its thread cannot be stopped, but the instance no longer waits on it.
        """

        async def run(history: list[Record], replayed: int) -> OrchestratorResult:
            function = self.orchestrator(name)
            if function is None:
                return OrchestratorResult(
                    {},
                    OrchestratorError(
                        "FunctionNotFoundException", f"the orchestrator function '{name}' does not exist in this app"
                    ),
                )
            input_json, parent_id = start_input(history)
            context = context_json(instance_id, parent_id, input_json, history, replayed)
            loop = asyncio.get_running_loop()
            episode = loop.run_in_executor(executor, run_handle, function.user_function, context)
            try:
                return await asyncio.wait_for(episode, timeout)
            except TimeoutError:
                return OrchestratorResult(
                    {},
                    OrchestratorError(
                        "FunctionTimeoutException", f"an episode of '{name}' ran longer than {timeout:g} s"
                    ),
                )

        return run


def _by_name(catalog: FunctionCatalog, trigger: str, name_key: str) -> dict[str, FunctionInfo]:
    found: dict[str, FunctionInfo] = {}
    for function in catalog.with_trigger(trigger):
        found[function.name.lower()] = function
        alias = function.trigger.get(name_key)
        if alias:
            found.setdefault(str(alias).lower(), function)
    return found
