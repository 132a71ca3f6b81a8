"""The ``durableClient`` input binding: the JSON the SDK builds ``DurableOrchestrationClient`` from.

In Azure the binding carries the task hub, the public webhook URLs that
``create_check_status_response`` hands to callers, and an RPC base URL on
which the Python SDK calls the extension (a second, local-only port there).
Here both point at this host's management API under
``/runtime/webhooks/durabletask/``: the RPC paths the SDK uses are the
webhook paths, so one set of endpoints answers both and the host claims no
route prefix an app might use. The management URLs offer what the local
engine does: restart (``restartPostUri``) but not rewind.

Both want the Durable system key (``devhost.host_keys``). The webhook URLs
carry it as ``code=``, as Azure's do. The SDK builds its RPC URLs from
``rpcBaseUrl`` without any query string, so there the key is a path segment:
``/runtime/rpc/{key}/...`` answers as ``/runtime/webhooks/durabletask/...``.
"""

from __future__ import annotations

import json
from typing import TypedDict
from urllib.parse import quote

from devhost.catalog import BindingJson, FunctionInfo

WEBHOOK_PREFIX = "runtime/webhooks/durabletask"
RPC_ALIAS = "runtime/rpc"
INSTANCE_PLACEHOLDER = "INSTANCEID"


class CreationUrls(TypedDict):
    createNewInstancePostUri: str
    createAndWaitOnNewInstancePostUri: str


class ManagementUrls(TypedDict):
    """An instance's management URLs: the check-status payload the start API answers with."""

    id: str
    statusQueryGetUri: str
    sendEventPostUri: str
    terminatePostUri: str
    purgeHistoryDeleteUri: str
    restartPostUri: str
    suspendPostUri: str
    resumePostUri: str


class ClientBindingDocument(TypedDict):
    """The binding's value, as the SDK's ``DurableOrchestrationClient`` reads it."""

    taskHubName: str
    creationUrls: CreationUrls
    managementUrls: ManagementUrls  # with the instance id still a placeholder
    baseUrl: str
    requiredQueryStringParameters: str
    rpcBaseUrl: str
    httpBaseUrl: str


class ClientBinding:
    def __init__(self, base_url: str, hub_name: str, system_key: str) -> None:
        self._base_url = base_url.rstrip("/")
        self._hub_name = hub_name
        self._system_key = system_key

    def provide(self, binding: BindingJson, function: FunctionInfo) -> str:
        """The binding's value for one invocation (the invoker calls this per call)."""
        return json.dumps(self.document(str(binding.get("taskHub") or self._hub_name)))

    def document(self, hub: str) -> ClientBindingDocument:
        webhooks = f"{self._base_url}/{WEBHOOK_PREFIX}"
        query = f"taskHub={quote(hub)}&connection=Storage&code={quote(self._system_key, safe='')}"
        instance = f"{webhooks}/instances/{INSTANCE_PLACEHOLDER}"
        return {
            "taskHubName": hub,
            "creationUrls": {
                "createNewInstancePostUri": f"{webhooks}/orchestrators/{{functionName}}[/{{instanceId}}]?{query}",
                "createAndWaitOnNewInstancePostUri": (
                    f"{webhooks}/orchestrators/{{functionName}}[/{{instanceId}}]"
                    f"?timeout={{timeoutInSeconds}}&pollingInterval={{intervalInSeconds}}&{query}"
                ),
            },
            "managementUrls": {
                "id": INSTANCE_PLACEHOLDER,
                "statusQueryGetUri": f"{instance}?{query}",
                "sendEventPostUri": f"{instance}/raiseEvent/{{eventName}}?{query}",
                "terminatePostUri": f"{instance}/terminate?reason={{text}}&{query}",
                "purgeHistoryDeleteUri": f"{instance}?{query}",
                "restartPostUri": f"{instance}/restart?{query}",
                "suspendPostUri": f"{instance}/suspend?reason={{text}}&{query}",
                "resumePostUri": f"{instance}/resume?reason={{text}}&{query}",
            },
            "baseUrl": webhooks,
            "requiredQueryStringParameters": query,
            "rpcBaseUrl": f"{self._base_url}/{RPC_ALIAS}/{quote(self._system_key, safe='')}/",
            "httpBaseUrl": "",
        }

    def management_payload(self, instance_id: str, origin: str | None = None) -> ManagementUrls:
        """The check-status payload for an instance (what the start API answers with)."""
        urls = self.document(self._hub_name)["managementUrls"]
        encoded = quote(instance_id, safe="")

        def url(template: str) -> str:
            if origin:
                template = template.replace(self._base_url, origin.rstrip("/"), 1)
            return template.replace(INSTANCE_PLACEHOLDER, encoded)

        return {
            "id": instance_id,
            "statusQueryGetUri": url(urls["statusQueryGetUri"]),
            "sendEventPostUri": url(urls["sendEventPostUri"]),
            "terminatePostUri": url(urls["terminatePostUri"]),
            "purgeHistoryDeleteUri": url(urls["purgeHistoryDeleteUri"]),
            "restartPostUri": url(urls["restartPostUri"]),
            "suspendPostUri": url(urls["suspendPostUri"]),
            "resumePostUri": url(urls["resumePostUri"]),
        }
