"""Verify an environment's receipt chain from the command line.

    python -m shared.provisioning.verify_receipts --tenant tenant-a --environment demo

It reads the host's store directly (the same tables and blobs the host uses)
and prints the report of :func:`shared.provisioning.verification.verify_environment`
as JSON. Exit status: 0 the chain verifies, 1 it is broken (``first_broken``
says where), 2 the environment is unknown or the store cannot be reached.

The store is ``--connection-string``, else the app settings the host reads
(``AzureWebJobsStorage`` or its identity-based ``AzureWebJobsStorage__*``
form), else ``AzureWebJobsStorage`` in ``local.settings.json`` of the current
folder (so it works beside ``make run`` without exporting anything).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from shared.platform.errors import InvalidSettings, NotFound
from shared.platform.storage.clients import StorageClients, clients_from_connection_string, host_storage
from shared.provisioning.receipts import ReceiptStore
from shared.provisioning.store import ProvisioningStore
from shared.provisioning.verification import verify_environment

SETTING = "AzureWebJobsStorage"


def storage_for(connection_string: str | None) -> StorageClients:
    if connection_string:
        return clients_from_connection_string(connection_string)
    if not any(name.lower().startswith(SETTING.lower()) for name in os.environ):
        local = Path("local.settings.json")
        values = json.loads(local.read_text()).get("Values", {}) if local.exists() else {}
        if values.get(SETTING):
            return clients_from_connection_string(values[SETTING])
    return host_storage(SETTING)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shared.provisioning.verify_receipts",
        description="Verify the digests and the hash chain of an environment's receipts.",
    )
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--environment", required=True)
    parser.add_argument("--connection-string", help="the host's store (default: the app settings)")
    args = parser.parse_args(argv)
    try:
        storage = storage_for(args.connection_string)
        report = verify_environment(
            ProvisioningStore(storage, "/runtime-cloud/verify-receipts"),
            ReceiptStore(storage),
            args.tenant,
            args.environment,
        )
    except (NotFound, InvalidSettings) as error:
        print(json.dumps({"error": str(error)}), file=sys.stderr)
        return 2
    print(json.dumps(report.model_dump(mode="json"), indent=2))
    return 0 if report.verified else 1


if __name__ == "__main__":
    sys.exit(main())
