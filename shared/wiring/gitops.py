"""The GitOps reconciler's objects, built once per process from settings and storage; and the one place
the inventory's proposals meet bindings (adopting drift of an environment that follows Git)."""

from __future__ import annotations

import functools

from shared.gitops.adoption import check_adoption
from shared.gitops.reconcile import Reconciler
from shared.gitops.service import GitOpsBindings
from shared.gitops.store import BindingStore
from shared.inventory.adoption_preview import adopted_specification
from shared.inventory.decisions import AcceptBody
from shared.platform.manifest import FeatureManifest
from shared.platform.storage.clients import shared_host_storage
from shared.wiring import inventory, provisioning
from shared.wiring.settings import get_settings


@functools.lru_cache(maxsize=1)
def store() -> BindingStore:
    return BindingStore(shared_host_storage())


@functools.lru_cache(maxsize=1)
def bindings() -> GitOpsBindings:
    return GitOpsBindings(store(), provisioning.api(), get_settings().runtime_cloud.gitops)


@functools.lru_cache(maxsize=1)
def reconciler() -> Reconciler:
    return Reconciler(store(), provisioning.api(), get_settings().runtime_cloud.gitops)


def check_proposal_adoption(tenant: str, proposal_id: str, body: AcceptBody) -> None:
    """:class:`shared.gitops.adoption.FollowsGit` when accepting ``body`` would adopt drift of an environment
    whose binding is active (the change belongs in a commit); nothing otherwise."""
    adopted = adopted_specification(inventory.store(), provisioning.api(), tenant, proposal_id, body)
    if adopted is not None:
        check_adoption(store(), tenant, adopted)


MANIFEST = FeatureManifest(
    name="gitops", module="provisioning", triggers=("functions.gitops",), inbound_queues=("gitops-sync",)
)
