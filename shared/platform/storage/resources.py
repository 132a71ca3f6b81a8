"""Tables, containers and queues the host needs, created idempotently at start.

Modules add their own names here as they grow; creating an existing resource is
a no-op, so every instance can run this at start without coordination.
"""

from __future__ import annotations

from azure.core.exceptions import ResourceExistsError

from shared.platform.storage.clients import StorageClients

TABLES: tuple[str, ...] = (
    "OutboxPending",
    "ProvisioningRuns",
    "ProvisioningSteps",
    "CapacityPools",
    "CapacitySlots",
    "CapacityQuotas",
    "CapacityLeases",
    "Inventory",
    "GitOpsBindings",
    "RunnerJobs",
    "PolicyExceptions",
    "Environments",  # the environment registry (shared.provisioning.environment_registry)
    "KnowledgeArtifacts",  # artifacts to mirror to KnowledgeHost (shared.platform.events.artifact_outbox)
)

# Tables whose partitions carry outbox rows (see shared.platform.events.outbox); the
# dispatcher timer sweeps these for events a crash left unsent.
OUTBOX_TABLES: tuple[str, ...] = (
    "ProvisioningRuns",
    "CapacityPools",
    "CapacitySlots",
    "Inventory",
)
# Queues of this host's own modules that receive a table's events besides the
# public events queue (see shared.platform.events.outbox).
OUTBOX_SUBSCRIBERS: dict[str, tuple[str, ...]] = {
    "ProvisioningRuns": ("inventory-inbox",),
}
CONTAINERS: tuple[str, ...] = (
    "receipts",
    "specifications",
    "rejections",
    "inventory",
    "runner-jobs",
    "pulumi-plans",
    "policy-bundles",
)
QUEUES: tuple[str, ...] = (
    "promotions",
    "promotions-poison",
    "approvals",
    "approvals-poison",
    "inventory-inbox",
    "inventory-inbox-poison",
    "gitops-sync",
    "gitops-sync-poison",
    "runtime-cloud-events",
    "runner-jobs",
    "runner-jobs-poison",
    "runner-job-results",
    "runner-job-results-poison",
)


def ensure_resources(clients: StorageClients) -> None:
    for table in TABLES:
        clients.tables.create_table_if_not_exists(table)
    for container in CONTAINERS:
        try:
            clients.blobs.create_container(container)
        except ResourceExistsError:
            pass
    for queue in QUEUES:
        try:
            clients.queues.create_queue(queue)
        except ResourceExistsError:
            pass
