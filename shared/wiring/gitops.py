"""The GitOps reconciler's objects, built once per process from settings and storage."""

from __future__ import annotations

import functools

from shared.gitops.reconcile import Reconciler
from shared.gitops.service import GitOpsBindings
from shared.gitops.store import BindingStore
from shared.settings import get_settings
from shared.storage.clients import shared_host_storage
from shared.wiring import provisioning


@functools.lru_cache(maxsize=1)
def store() -> BindingStore:
    return BindingStore(shared_host_storage())


@functools.lru_cache(maxsize=1)
def bindings() -> GitOpsBindings:
    return GitOpsBindings(store(), provisioning.api(), get_settings().runtime_cloud.gitops)


@functools.lru_cache(maxsize=1)
def reconciler() -> Reconciler:
    return Reconciler(store(), provisioning.api(), get_settings().runtime_cloud.gitops)
