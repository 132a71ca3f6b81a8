"""The provisioning module's objects, built once per process from settings and storage."""

from __future__ import annotations

import functools

from shared.provisioning.lifecycle import RunSteps
from shared.provisioning.outputs import OutputsStore
from shared.provisioning.receipts import ReceiptStore
from shared.provisioning.service import ProvisioningService
from shared.provisioning.store import ProvisioningStore
from shared.settings import get_settings
from shared.storage.clients import shared_host_storage


def event_source() -> str:
    return f"/{get_settings().messaging.service_name}/provisioning"


@functools.lru_cache(maxsize=1)
def store() -> ProvisioningStore:
    return ProvisioningStore(shared_host_storage(), event_source())


@functools.lru_cache(maxsize=1)
def service() -> ProvisioningService:
    return ProvisioningService(store(), get_settings())


@functools.lru_cache(maxsize=1)
def steps() -> RunSteps:
    return RunSteps(shared_host_storage(), get_settings(), event_source())


@functools.lru_cache(maxsize=1)
def receipts() -> ReceiptStore:
    return ReceiptStore(shared_host_storage())


@functools.lru_cache(maxsize=1)
def outputs() -> OutputsStore:
    return OutputsStore(shared_host_storage())
