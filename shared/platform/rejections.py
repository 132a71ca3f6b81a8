"""Rejection records: a message that cannot be acted on is kept, with the reason.

Written to ``rejections/{queue}/{message id}.json`` (a digest of the body
stands in for an id the trigger did not give: the SDK types it optional, and two
different messages must never share a record); nothing is dropped silently,
and retrying a message that can never succeed is pointless, so the trigger
completes after recording it.
"""

from __future__ import annotations

import hashlib
import json

from azure.core.exceptions import ResourceExistsError

from shared.platform import clock
from shared.platform.storage.clients import StorageClients

REJECTIONS_CONTAINER = "rejections"


def record_rejection(
    storage: StorageClients,
    queue: str,
    message_id: str | None,
    body: str,
    reason: str,
    errors: list[dict[str, str]] | None = None,
) -> str:
    """Keep ``body`` with the reason; answers where (``rejections/...``). A repeat delivery is recorded once."""
    message_id = message_id or "sha256-" + hashlib.sha256(body.encode("utf-8")).hexdigest()
    name = f"{queue}/{message_id}.json"
    document = {
        "queue": queue,
        "message_id": message_id,
        "rejected_at": clock.now_iso(),
        "reason": reason,
        "errors": errors or [],
        "message": body,
    }
    try:
        storage.blobs.get_container_client(REJECTIONS_CONTAINER).upload_blob(
            name, json.dumps(document, ensure_ascii=False).encode("utf-8"), overwrite=False
        )
    except ResourceExistsError:
        pass  # the same delivery was recorded before
    return f"{REJECTIONS_CONTAINER}/{name}"
