"""The host's own triggers: health and meta, the outbox dispatcher, the KnowledgeHost mirror, Durable history."""

from __future__ import annotations

from shared.platform.manifest import FeatureManifest

MANIFEST = FeatureManifest(
    name="host",
    module=None,
    triggers=(
        "functions.host_api",
        "functions.outbox",
        "functions.artifacts",  # mirrors receipts, outputs and drift reports to KnowledgeHost when configured
        "functions.durable_history",
    ),
)
