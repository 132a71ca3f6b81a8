"""The typed surface of the Durable SDK (orchestrations.durable) names only what the SDK has.

The SDK ships no types, so mypy cannot hold the Protocols to it: this test does. Every member a
Protocol declares must exist on the SDK's class, as a property where the Protocol has one, as a
coroutine where the Protocol's is one, and taking every parameter the Protocol names.
"""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from typing import Any

import azure.durable_functions as df
import pytest
from azure.durable_functions.models.actions.CreateTimerAction import CreateTimerAction
from azure.durable_functions.models.DurableOrchestrationStatus import DurableOrchestrationStatus
from azure.durable_functions.models.Task import TimerTask

from orchestrations import durable

SDK_CLASSES: dict[type, type] = {
    durable.OrchestrationContext: df.DurableOrchestrationContext,
    durable.DurableClient: df.DurableOrchestrationClient,
    durable.OrchestrationStatus: DurableOrchestrationStatus,
    durable.DurableBlueprint: df.Blueprint,
    durable.RetryOptions: df.RetryOptions,
    durable.TimerTask: TimerTask,
}


def _members(protocol: type) -> dict[str, Any]:
    """What the Protocol declares itself and inherits from the Protocols it extends."""
    found: dict[str, Any] = {}
    for klass in reversed(protocol.__mro__):
        if getattr(klass, "_is_protocol", False) and klass is not protocol.__mro__[-1]:
            found.update({name: value for name, value in vars(klass).items() if not name.startswith("_")})
    return found


@pytest.mark.parametrize("protocol", list(SDK_CLASSES), ids=lambda protocol: protocol.__name__)
def test_every_member_of_the_protocol_is_the_sdk_s(protocol: type) -> None:
    sdk = SDK_CLASSES[protocol]
    members = _members(protocol)
    assert members, f"{protocol.__name__} declares nothing"
    for name, declared in members.items():
        if isinstance(declared, property):
            assert name in _instance_attributes(sdk) or isinstance(inspect.getattr_static(sdk, name, None), property), (
                f"{sdk.__name__} has no {name}"
            )
            continue
        actual = inspect.getattr_static(sdk, name, None)
        assert callable(actual), f"{sdk.__name__} has no method {name}"
        assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(declared), name
        parameters = inspect.signature(actual).parameters
        takes_any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        for parameter in list(inspect.signature(declared).parameters)[1:]:
            assert parameter in parameters or takes_any_keyword, f"{sdk.__name__}.{name} takes no {parameter}"


def _instance_attributes(sdk: type) -> set[str]:
    """Attributes the SDK sets on an instance rather than declares on its class (a task's ``result``)."""
    if sdk is TimerTask:
        return set(vars(TimerTask(0, CreateTimerAction(datetime.now(UTC)))))
    return set()


def test_the_helpers_build_the_sdk_s_own_objects() -> None:
    assert isinstance(durable.blueprint(), df.Blueprint)
    retry = durable.retry_options(first_retry_ms=2000, max_attempts=3)
    assert isinstance(retry, df.RetryOptions)
    assert (retry.first_retry_interval_in_milliseconds, retry.max_number_of_attempts) == (2000, 3)
