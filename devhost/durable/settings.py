"""host.json ``extensions.durableTask`` as the local engine reads it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from devhost.config import parse_timespan, resolve_app_setting_references
from devhost.json_value import JsonObject, JsonValue

_HUB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]{2,44}")

AZURE_VISIBILITY = 300.0  # the Azure Storage provider's control and work-item queue visibility timeout
ANY_STATE = "AnyState"
NON_RUNNING_STATES = "NonRunningStates"


class DurableSettingsError(ValueError):
    """host.json asks for something the engine cannot do; the host stops and says what."""


@dataclass(frozen=True)
class DurableSettings:
    """The task hub's settings.

    Defaults (Azure's, unless noted):

    - ``hub_name``: ``hubName``, default ``TestHubName``; ``%Setting%`` references
      are resolved from app settings, as in Azure.
    - ``max_concurrent_activities``: ``maxConcurrentActivityFunctions``, default
      10 per processor.
    - ``max_concurrent_orchestrators``: ``maxConcurrentOrchestratorFunctions``,
      default 10 per processor.
    - ``partition_count``: ``storageProvider.partitionCount``, default 4 control queues.
    - ``control_queue_batch_size``: ``storageProvider.controlQueueBatchSize``, default 32.
    - ``control_visibility`` / ``work_item_visibility``: how long a message that
      a crashed host was holding stays invisible
      (``storageProvider.controlQueueVisibilityTimeout`` /
      ``workItemQueueVisibilityTimeout``); default 5 min, as in Azure. Set them
      shorter in a development host.json to resume sooner after a crash.
    - ``max_polling_interval``: ``storageProvider.maxQueuePollingInterval``;
      default 2 s locally (Azure: 30 s). Messages the host sends itself wake its
      pollers at once; polling only matters for other writers.
    - ``connection_setting``: ``storageProvider.connectionStringName`` (or
      ``connectionName``), default ``AzureWebJobsStorage``.
    - ``function_timeout``: host.json ``functionTimeout``, for each activity call
      and each orchestrator episode (a run past it fails the task or instance).
    - ``overridable_states``: ``overridableExistingInstanceStates``, default
      ``AnyState``: starting an instance id that exists replaces that instance
      whatever its state; with ``NonRunningStates`` only a finished one is
      replaced, and starting a pending, running or suspended one is refused.
    """

    hub_name: str = "TestHubName"
    max_concurrent_activities: int = 10
    max_concurrent_orchestrators: int = 10
    partition_count: int = 4
    control_queue_batch_size: int = 32
    control_visibility: float = AZURE_VISIBILITY
    work_item_visibility: float = AZURE_VISIBILITY
    max_polling_interval: float = 2.0
    connection_setting: str = "AzureWebJobsStorage"
    function_timeout: float = 300.0
    overridable_states: str = ANY_STATE

    @property
    def replaces_running_instances(self) -> bool:
        return self.overridable_states == ANY_STATE

    @classmethod
    def from_host_json(cls, durable_task: JsonObject, function_timeout: float = 300.0) -> DurableSettings:
        provider = durable_task.get("storageProvider") or {}
        if not isinstance(provider, dict):
            raise DurableSettingsError(f"durableTask.storageProvider must be an object, not {provider!r}")
        cores = os.cpu_count() or 1
        settings = cls(
            hub_name=_hub_name(durable_task.get("hubName")),
            max_concurrent_activities=_positive(durable_task, "maxConcurrentActivityFunctions", 10 * cores),
            max_concurrent_orchestrators=_positive(durable_task, "maxConcurrentOrchestratorFunctions", 10 * cores),
            partition_count=_positive(provider, "partitionCount", 4, "storageProvider."),
            control_queue_batch_size=min(32, _positive(provider, "controlQueueBatchSize", 32, "storageProvider.")),
            control_visibility=_timespan(provider, "controlQueueVisibilityTimeout", AZURE_VISIBILITY),
            work_item_visibility=_timespan(provider, "workItemQueueVisibilityTimeout", AZURE_VISIBILITY),
            max_polling_interval=_timespan(provider, "maxQueuePollingInterval", 2.0),
            connection_setting=str(
                provider.get("connectionStringName") or provider.get("connectionName") or "AzureWebJobsStorage"
            ),
            function_timeout=function_timeout,
            overridable_states=_overridable_states(durable_task.get("overridableExistingInstanceStates")),
        )
        if settings.partition_count > 16:
            raise DurableSettingsError("durableTask.storageProvider.partitionCount can be at most 16")
        if settings.control_visibility < 3 or settings.work_item_visibility < 3:
            raise DurableSettingsError(
                "durableTask.storageProvider: queue visibility timeouts must be at least 00:00:03"
            )
        return settings

    @property
    def queue_prefix(self) -> str:
        return self.hub_name.lower()

    def connection_string(self) -> str:
        value = os.environ.get(self.connection_setting)
        if not value:
            raise DurableSettingsError(
                f"the Durable task hub's connection setting {self.connection_setting} is not set"
            )
        return value


def _hub_name(value: JsonValue) -> str:
    name = resolve_app_setting_references(str(value)) if value else "TestHubName"
    if not _HUB_NAME.fullmatch(name):
        raise DurableSettingsError(
            f"durableTask.hubName {name!r} is not valid: 3 to 45 letters and digits, starting with a letter"
        )
    return name


def _positive(section: JsonObject, key: str, default: int, where: str = "") -> int:
    value = section.get(key, default)
    try:
        if value is None or isinstance(value, (list, dict)):
            raise TypeError(value)
        number = int(value)
    except (TypeError, ValueError):
        raise DurableSettingsError(f"durableTask.{where}{key} must be a whole number, not {value!r}") from None
    if number < 1:
        raise DurableSettingsError(f"durableTask.{where}{key} must be at least 1")
    return number


def _timespan(section: JsonObject, key: str, default: float) -> float:
    try:
        return parse_timespan(section.get(key), default)
    except ValueError as error:
        raise DurableSettingsError(f"durableTask.storageProvider.{key}: {error}") from None


def _overridable_states(value: JsonValue) -> str:
    """Read as the extension's enum is: by name, in any case."""
    if value is None:
        return ANY_STATE
    for name in (ANY_STATE, NON_RUNNING_STATES):
        if str(value).lower() == name.lower():
            return name
    raise DurableSettingsError(
        f"durableTask.overridableExistingInstanceStates must be {ANY_STATE} or {NON_RUNNING_STATES}, not {value!r}"
    )
