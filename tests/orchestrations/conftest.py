"""The product's orchestrators as the worker finds them, for replay in process (no host, no storage).

Importing the orchestration modules reads the app's settings once (their timer
schedules are settings); the fixture gives that import the least it needs and
then forgets the settings again, so nothing else in this process inherits them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

# Read at import only; nothing is ever connected to (no test here touches storage or keys).
_IMPORT_SETTINGS = {
    "AzureWebJobsStorage": "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
    "BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;"
    "QueueEndpoint=http://127.0.0.1:9/devstoreaccount1;"
    "TableEndpoint=http://127.0.0.1:9/devstoreaccount1;",
    "RuntimeCloud__Auth__LocalSigningKeyDirectory": "/nonexistent/replay-tests",
}


@dataclass(frozen=True)
class Orchestrators:
    provisioning_run: Callable[..., Any]
    capacity_lease_expiry: Callable[..., Any]


def _handle(function_builder: Any) -> Callable[..., Any]:
    """The handle ``DFApp.orchestration_trigger`` registered: what the worker calls with the context JSON."""
    return function_builder._function.get_user_function()


def _import_orchestrations() -> tuple[Any, Any]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in _IMPORT_SETTINGS.items():
            patch.setenv(name, value)
        provisioning = importlib.import_module("orchestrations.provisioning")
        capacity = importlib.import_module("orchestrations.capacity")
        importlib.import_module("shared.wiring.settings").get_settings.cache_clear()
    return provisioning, capacity


# At collection, before the test modules import names from these modules.
_PROVISIONING, _CAPACITY = _import_orchestrations()


@pytest.fixture(scope="session")
def orchestrators() -> Orchestrators:
    return Orchestrators(_handle(_PROVISIONING.provisioning_run), _handle(_CAPACITY.capacity_lease_expiry))
