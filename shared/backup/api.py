"""What the triggers and health may use of backup and restore.

Other features, the triggers (``functions/``, ``orchestrations/``), health and the runner job
import only this module of the package; only the composition root (``shared/wiring``) reaches
inside (the "api-only" contract in pyproject.toml).
"""

from __future__ import annotations

from shared.backup.location import BackupLocation, open_location
from shared.backup.settings import BackupSettings
from shared.backup.status import backup_health

__all__ = [
    "BackupLocation",
    "BackupSettings",
    "backup_health",
    "open_location",
]
