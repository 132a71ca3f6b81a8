"""Record that an environment was deleted, so that its receipts are kept seven years from that day.

    python -m tools.record_deletion --tenant tenant-a --environment demo --by ops@example.com

Writes the environment's deletion marker beside its receipts
(:func:`shared.provisioning.receipt_sweep.record_environment_deleted`), which
the retention timer reads: from its next firing the receipts need *deletion +
RetentionDays* and nothing more (an expiry already later stays). Until a
marker exists an environment counts as alive and its receipts keep being
extended. Declaring the environment again later makes it alive again.

The store is found as ``verify_receipts`` finds it (``--connection-string``,
else the app settings, else ``local.settings.json``). Exit status: 0 the marker
is written (or was already), 2 the environment has no receipts (a typo?) or the
store cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from shared.platform import clock
from shared.platform.errors import InvalidSettings
from shared.provisioning.receipt_retention import PolicyMode
from shared.provisioning.receipt_settings import ReceiptSettings
from shared.provisioning.receipt_sweep import record_environment_deleted
from shared.provisioning.receipts import RECEIPTS_CONTAINER
from shared.provisioning.verify_receipts import storage_for


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.record_deletion",
        description="Record an environment's deletion: its receipts are then kept seven years from it.",
    )
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--environment", required=True)
    parser.add_argument("--by", required=True, help="who deleted it (recorded in the marker)")
    parser.add_argument("--at", type=datetime.fromisoformat, help="when (ISO 8601 with an offset; default: now)")
    parser.add_argument("--policy-mode", choices=[mode.value for mode in PolicyMode], default=PolicyMode.LOCKED.value)
    parser.add_argument("--connection-string", help="the host's store (default: the app settings)")
    args = parser.parse_args(argv)
    deleted_at = args.at or clock.utcnow()
    if deleted_at.tzinfo is None:
        parser.error("--at needs an offset (e.g. 2030-01-31T12:00:00+00:00)")
    try:
        container = storage_for(args.connection_string).blobs.get_container_client(RECEIPTS_CONTAINER)
        prefix = f"{args.tenant}/{args.environment}/"
        if next(iter(container.list_blobs(name_starts_with=prefix, results_per_page=1)), None) is None:
            print(json.dumps({"error": f"no receipts under {RECEIPTS_CONTAINER}/{prefix}"}), file=sys.stderr)
            return 2
        settings = ReceiptSettings.model_validate({"PolicyMode": args.policy_mode})
        marker = record_environment_deleted(container, settings, args.tenant, args.environment, deleted_at, args.by)
    except InvalidSettings as error:
        print(json.dumps({"error": str(error)}), file=sys.stderr)
        return 2
    keep_until = deleted_at + settings.rule().retention
    print(json.dumps({"marker": f"{RECEIPTS_CONTAINER}/{marker}", "receipts_kept_until": keep_until.isoformat()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
