"""Creating the host's storage resources when the app starts."""

from __future__ import annotations

from shared.platform.logs import app_logger
from shared.platform.storage.clients import host_storage
from shared.platform.storage.resources import ensure_resources

log = app_logger("storage")


def prepare_store() -> bool:
    """Create tables, containers and queues if missing. A store that is down is
    reported, not fatal: readiness says so and the next start tries again."""
    try:
        clients = host_storage(retry_total=1, connection_timeout=5, read_timeout=10)
        try:
            ensure_resources(clients)
        finally:
            clients.close()
    except Exception as error:  # noqa: BLE001 - whatever stops it, the host starts
        first_line = str(error).splitlines()[0] if str(error) else error
        log.warning("could not prepare the runtime-cloud store: %s", first_line)
        return False
    return True
