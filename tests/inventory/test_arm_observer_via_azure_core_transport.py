"""The Azure Resource Manager observer, driven through azure-core's transport.

No Azure subscription here: :class:`RecordedArm` is an azure-core
``HttpTransport`` that answers the real ``azure-mgmt-resource`` client's
requests with response documents in ARM's JSON format
(``tests/inventory/arm_responses``). Everything above the transport -- the
SDK's paging, deserialisation and error mapping, and the observer -- is the
code that runs against Azure.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from azure.core.credentials import AccessToken
from azure.core.exceptions import ServiceRequestError
from azure.core.pipeline.transport import HttpTransport
from azure.core.rest._requests_basic import RestRequestsTransportResponse
from azure.mgmt.resource.resources import ResourceManagementClient
from urllib3.response import HTTPResponse

from shared.desired_state.api import EnvironmentSpecification
from shared.inventory.comparison import compare
from shared.inventory.model import FindingKind, Observation
from shared.inventory.observers.arm import ArmObserver, expected_from_outputs
from shared.inventory.observers.base import ObservationFailed, ObservationRequest
from shared.platform.targets import ProvisioningTarget

RESPONSES = Path(__file__).parent / "arm_responses"
SUBSCRIPTION = "6f1c0a52-3b8e-4c1d-9a7e-0d2b5f8e4c11"
RG = f"/subscriptions/{SUBSCRIPTION}/resourceGroups"
ACCOUNT_ID = f"{RG}/rg-shop/providers/Microsoft.Storage/storageAccounts/shopprodorders"
GONE_ID = f"{RG}/rg-gone/providers/Microsoft.Cache/redis/shop-prod-cache"


class RecordedArm(HttpTransport):
    """Answers by path from ARM-format documents; records every request it was sent."""

    def __init__(self, routes: dict[str, tuple[int, str]], fail_with: Exception | None = None) -> None:
        self.routes = routes
        self.fail_with = fail_with
        self.requests: list[Any] = []

    def send(self, request: Any, **kwargs: Any) -> RestRequestsTransportResponse:
        self.requests.append(request)
        if self.fail_with is not None:
            raise self.fail_with
        parts = urlsplit(request.url)
        query = parse_qs(parts.query)
        route = parts.path.lower() + ("?skiptoken=" + query["$skiptoken"][0] if "$skiptoken" in query else "")
        status, document = self.routes.get(route, (404, "rg_not_found.json"))
        answer = requests.Response()
        answer.status_code = status
        body = (RESPONSES / document).read_bytes() if document.endswith(".json") else document.encode()
        answer.headers["Content-Type"] = "application/json; charset=utf-8"
        answer.headers["x-ms-request-id"] = "00000000-0000-0000-0000-000000000001"
        answer.url = request.url
        answer.raw = HTTPResponse(body=io.BytesIO(body), preload_content=False, status=status)
        response = RestRequestsTransportResponse(request=request, internal_response=answer)
        response.read()
        return response

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> RecordedArm:
        return self

    def __exit__(self, *args: Any) -> None:
        pass


class StaticToken:
    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("token-for-tests", int(time.time()) + 3600)


def healthy_routes() -> dict[str, tuple[int, str]]:
    base = f"/subscriptions/{SUBSCRIPTION}".lower()
    return {
        f"{base}/resources": (200, "by_tag.json"),
        f"{base}/resourcegroups/rg-shop/resources": (200, "rg_shop_page1.json"),
        f"{base}/resourcegroups/rg-shop/resources?skiptoken=page2": (200, "rg_shop_page2.json"),
        f"{base}/resourcegroups/rg-extra/resources": (200, "rg_extra.json"),
    }


def observer_with(transport: RecordedArm) -> ArmObserver:
    return ArmObserver(
        lambda target: ResourceManagementClient(
            StaticToken(), target.subscription_id, transport=transport, retry_total=0
        )
    )


def request_for() -> ObservationRequest:
    target = ProvisioningTarget.model_validate(
        {
            "Id": "azure-prod",
            "Kind": "azure-subscription",
            "Region": "westeurope",
            "SubscriptionId": SUBSCRIPTION,
            "ResourceGroup": "rg-shop",
            "Credential": {"Kind": "managed-identity"},
        }
    )
    specification = EnvironmentSpecification.model_validate(
        {
            "tenant": "tenant-a",
            "environment": "prod",
            "environment_class": "production",
            "target": "azure-prod",
            "runner": "pulumi",
            "pulumi": {"project": "shop", "stack": "prod"},
        }
    )
    tags = {"rc_managed_by": "runtime-cloud", "rc_tenant": "tenant-a", "rc_environment": "prod"}
    expected = expected_from_outputs(
        {
            "urn:pulumi:prod::shop::azure-native:storage:StorageAccount::orders": {
                "id": ACCOUNT_ID,
                "location": "westeurope",
                "tags": {**tags, "owner": "team-shop"},
            },
            "urn:pulumi:prod::shop::azure-native:cache:Redis::cache": {
                "id": GONE_ID,
                "location": "westeurope",
                "tags": tags,
            },
        }
    )
    return ObservationRequest(
        tenant="tenant-a", environment="prod", target=target, specification=specification, expected=tuple(expected)
    )


def test_arm_listing_by_tag_and_resource_group_finds_this_environments_resources_only():
    transport = RecordedArm(healthy_routes())

    observation = observer_with(transport).observe(request_for())

    assert sorted(item.name for item in observation.items) == ["shop-prod-plan", "shopprodorders"]
    account = next(item for item in observation.items if item.name == "shopprodorders")
    assert account.state == {
        "location": "westeurope",
        "tags": {
            "rc_managed_by": "runtime-cloud",
            "rc_tenant": "tenant-a",
            "rc_environment": "prod",
            "owner": "ops-oncall",
        },
    }
    assert account.properties["sku"] == "Standard_LRS" and account.managed_here
    paths = [urlsplit(r.url).path.lower() for r in transport.requests]
    assert f"/subscriptions/{SUBSCRIPTION}/resources" in paths  # the tag query; then each group (rg-shop has two pages)
    tag_filter = parse_qs(urlsplit(transport.requests[0].url).query)["$filter"][0]
    assert tag_filter == "tagName eq 'rc_environment' and tagValue eq 'prod'"
    groups = [p for p in paths if p.endswith("/resources") and "/resourcegroups/" in p]
    expected = (f"{RG}/{g}/resources".lower() for g in ("rg-extra", "rg-gone", "rg-shop", "rg-shop"))
    assert sorted(groups) == sorted(expected)
    assert all(r.headers["Authorization"] == "Bearer token-for-tests" for r in transport.requests)


def test_arm_observation_compares_to_missing_changed_and_unexpected_findings():
    request = request_for()
    observation = observer_with(RecordedArm(healthy_routes())).observe(request)

    drift = {(d.kind, d.name): d for d in compare(request.expected, observation)}

    assert set(drift) == {
        (FindingKind.MISSING, "cache"),
        (FindingKind.CHANGED, "shopprodorders"),
        (FindingKind.UNEXPECTED, "shop-prod-plan"),
    }
    changed = drift[(FindingKind.CHANGED, "shopprodorders")]
    assert [(f.path, f.before, f.after) for f in changed.fields] == [("tags.owner", "team-shop", "ops-oncall")]


@pytest.mark.parametrize("status", [401, 403, 500, 503])
def test_an_arm_error_answer_is_a_failed_observation_not_an_empty_one(status):
    routes = dict.fromkeys(healthy_routes(), (status, '{"error": {"code": "Failure", "message": "nope"}}'))

    with pytest.raises(ObservationFailed, match=f"HTTP {status}"):
        observer_with(RecordedArm(routes)).observe(request_for())


def test_an_arm_endpoint_that_does_not_answer_is_a_failed_observation():
    transport = RecordedArm({}, fail_with=ServiceRequestError("connection refused"))

    with pytest.raises(ObservationFailed, match="did not answer"):
        observer_with(transport).observe(request_for())


def test_the_arm_response_documents_are_in_arms_list_format():
    for name in ("by_tag.json", "rg_shop_page1.json", "rg_shop_page2.json", "rg_extra.json"):
        document = json.loads((RESPONSES / name).read_text())
        assert isinstance(document["value"], list)
        prefix = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/"
        assert all(item["id"].startswith(prefix) for item in document["value"])
    assert isinstance(Observation.model_json_schema(), dict)
