"""Loggers and the ids a log line carries as fields.

One naming scheme: the app logs under ``runtime_cloud.<area>`` (``provisioning``,
``inventory``, ``capacity``, ``outbox``, ``http``, ``storage``, ``iac``, ``durable``),
the local host under ``devhost.<part>``. Raise a level per area with
``logging.getLogger("runtime_cloud.capacity").setLevel(...)``.

A line about a tenant's object names it in its text and also carries the ids as
fields (logging's ``extra=``, built by :func:`ids`): ``tenant_id``,
``environment_id``, ``run_id``, ``lease_id``. Application Insights keeps them as
custom dimensions and the local host prints them after the message, so an
operator filters one tenant's, environment's, run's or lease's lines by field
instead of parsing messages. Ids only: never a secret, a token or a payload.
"""

from __future__ import annotations

import logging

FIELDS = ("tenant_id", "environment_id", "run_id", "lease_id")


def app_logger(area: str) -> logging.Logger:
    """The logger of one area of the app: ``runtime_cloud.<area>``."""
    return logging.getLogger(f"runtime_cloud.{area}")


def ids(
    *, tenant: str | None = None, environment: str | None = None, run: str | None = None, lease: str | None = None
) -> dict[str, str]:
    """``extra=`` for a log call: the ids that are known, under their field names."""
    given = {"tenant_id": tenant, "environment_id": environment, "run_id": run, "lease_id": lease}
    return {name: value for name, value in given.items() if value is not None}
