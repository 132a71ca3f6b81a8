"""Observing Azure resources through Azure Resource Manager (azure-mgmt-resource).

For environments whose target is an Azure subscription (the Pulumi runner's
programs). Resources are found two ways, because each alone misses some:

1. **by the product's tags**: ``tagName eq 'rc_environment' and tagValue eq
   '<environment>'`` across the subscription finds this environment's
   resources wherever they were created. ARM leaves the tags out of answers to
   a tag filter, so this query only tells *which resource groups* to read;
2. **by resource group**: the target's ``ResourceGroup``, the groups found in
   step 1 and the groups of every expected resource are listed in full, tags
   included. Group names are compared case-insensitively, as ARM does.

An item is kept when it is expected (its id, compared case-insensitively as
ARM does) or carries ``rc_managed_by``/``rc_tenant``/``rc_environment`` for
exactly this tenant and environment. Compared fields are ``tags`` and
``location``: what a listing shows and a program controls.

A listing that fails (no connection, 5xx, a refused credential) raises
:class:`ObservationFailed`; a resource group that does not exist is an empty
group (its resources really are gone), not a failure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError, ServiceRequestError, ServiceResponseError

from shared.iac.api import ENVIRONMENT_KEY, ManagementTags
from shared.inventory.model import ExpectedResource, Observation, ObservedItem
from shared.inventory.observers.base import ObservationFailed, ObservationRequest
from shared.platform import clock
from shared.platform.credentials import target_identity
from shared.platform.targets import ProvisioningTarget

if TYPE_CHECKING:  # for the annotation only: an observer needs none of provisioning at run time
    from shared.provisioning.api import ResourceOutputs

DEFAULT_ARM_ENDPOINT = "https://management.azure.com"
COMPARED_FIELDS = ("tags", "location")
_GROUP = re.compile(r"/resourcegroups/([^/]+)", re.IGNORECASE)

ClientFactory = Callable[[ProvisioningTarget], Any]


def resource_group_of(resource_id: str) -> str | None:
    match = _GROUP.search(resource_id)
    return match.group(1) if match else None


def arm_state(tags: dict[str, str] | None, location: str | None) -> dict[str, Any]:
    state: dict[str, Any] = {"tags": dict(tags or {})}
    if location:
        state["location"] = location
    return state


def default_client(target: ProvisioningTarget, **options: Any) -> Any:
    """A Resource Manager client for the target, with the process's credential and short time-outs.

    The token's audience follows the endpoint, so a sovereign cloud's Resource
    Manager (``Endpoint``, e.g. ``https://management.chinacloudapi.cn``) gets a
    token for itself, not for the public cloud's."""
    from azure.mgmt.resource.resources import ResourceManagementClient

    endpoint = (target.endpoint or DEFAULT_ARM_ENDPOINT).rstrip("/")
    return ResourceManagementClient(
        target_identity(target.credential.client_id, target.credential.observer_client_id),
        target.subscription_id or "",
        base_url=endpoint,
        credential_scopes=[f"{endpoint}/.default"],
        retry_total=1,
        connection_timeout=5,
        read_timeout=15,
        **options,
    )


class ArmObserver:
    name = "azure-resource-manager"

    def __init__(self, client_factory: ClientFactory = default_client) -> None:
        self._client_factory = client_factory

    def observe(self, request: ObservationRequest) -> Observation:
        if not request.target.subscription_id:
            raise ObservationFailed(f"target {request.target.id} names no subscription to list")
        observed_at = clock.now_iso()
        client = self._client_factory(request.target)
        try:
            groups = {group.lower(): group for group in sorted(self._groups_to_list(client, request))}
            resources = [resource for group in sorted(groups.values()) for resource in _list_group(client, group)]
        except (ServiceRequestError, ServiceResponseError) as error:
            raise ObservationFailed(
                f"target {request.target.id}: Resource Manager did not answer ({type(error).__name__})"
            ) from error
        except HttpResponseError as error:
            raise ObservationFailed(
                f"target {request.target.id}: Resource Manager answered HTTP "
                f"{error.status_code} ({getattr(error, 'error_code', None) or 'error'})"
            ) from error
        finally:
            close = getattr(client, "close", None)
            if close:
                close()
        return Observation(
            observer=self.name,
            target=request.target.id,
            observed_at=observed_at,
            items=select_items(resources, request),
        )

    @staticmethod
    def _groups_to_list(client: Any, request: ObservationRequest) -> set[str]:
        groups = {request.target.resource_group} if request.target.resource_group else set()
        tag_filter = f"tagName eq '{ENVIRONMENT_KEY}' and tagValue eq '{request.environment}'"
        for resource in client.resources.list(filter=tag_filter):
            group = resource_group_of(resource.id or "")
            if group:
                groups.add(group)
        groups.update(g for g in (resource_group_of(key) for key in request.expected_keys) if g)
        return groups


def _list_group(client: Any, group: str) -> list[Any]:
    try:
        return list(client.resources.list_by_resource_group(group))
    except ResourceNotFoundError:
        return []  # the group is gone, and with it its resources: that is an answer, not a failure


def select_items(resources: Iterable[Any], request: ObservationRequest) -> list[ObservedItem]:
    ours = ManagementTags(tenant=request.tenant, environment=request.environment)
    expected = request.expected_keys
    items: dict[str, ObservedItem] = {}
    for resource in resources:
        key = (resource.id or "").lower()
        tags = dict(resource.tags or {})
        managed_here = ManagementTags.from_metadata(tags) == ours
        if key in items or not (key in expected or managed_here):
            continue
        sku = getattr(resource, "sku", None)
        items[key] = ObservedItem(
            key=key,
            address=resource.id,
            type=resource.type or "",
            name=resource.name or "",
            state=arm_state(tags, resource.location),
            managed_here=managed_here,
            properties={
                "kind": getattr(resource, "kind", None),
                "sku": getattr(sku, "name", None),
                "resource_group": resource_group_of(resource.id or ""),
            },
        )
    return sorted(items.values(), key=lambda item: item.key)


def expected_from_outputs(outputs: ResourceOutputs) -> list[ExpectedResource]:
    """Applied Azure resources from an apply receipt's outputs (URN -> outputs with an ARM ``id``)."""
    expected = []
    for urn, values in sorted(outputs.items()):
        resource_id = str(values.get("id") or "")
        if not resource_id.lower().startswith("/subscriptions/"):
            continue
        parts = urn.split("::")
        # Compare only what the program's outputs state: a field it never set is not drift.
        state = {name: values[name] for name in COMPARED_FIELDS if values.get(name) is not None}
        expected.append(
            ExpectedResource(
                key=resource_id.lower(),
                address=resource_id,
                type=parts[-2] if len(parts) >= 3 else "",
                name=parts[-1],
                state=state,
                compared_fields=tuple(state),
            )
        )
    return expected
