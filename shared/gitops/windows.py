"""Sync windows: when automatic syncs may start runs (Argo CD's sync windows, in NCRONTAB).

A window opens at each time its ``schedule`` fires (a 6-field NCRONTAB
expression, seconds first, UTC) and stays open ``duration_minutes``. ``allow``
windows say when automatic syncs may declare; ``deny`` windows when they may
not. At a given moment automatic syncs may declare when no deny window is open
and, if the binding has allow windows, one of them is open. With no windows at
all they always may.

Windows gate only what the reconciler does on its own (polls, webhooks,
resume): an Operator's "sync now" is a decision of its own and is not gated. A
commit seen while the windows are closed is remembered and declared by the
first automatic sync once they open.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, field_validator

from shared.platform.settings_section import six_field_ncrontab

MAX_WINDOWS = 20
MAX_DURATION_MINUTES = 7 * 24 * 60


# Six fields of NCRONTAB's characters (the document states the shape; each field's range is checked too).
SCHEDULE_SHAPE = r"^\s*[0-9A-Za-z*,/?#-]+(?:\s+[0-9A-Za-z*,/?#-]+){5}\s*$"


class SyncWindow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["allow", "deny"]
    schedule: str = Field(
        max_length=200,
        pattern=SCHEDULE_SHAPE,
        description="6-field NCRONTAB (second minute hour day month day-of-week), UTC; each field's values "
        "within its range",
    )
    duration_minutes: int = Field(ge=1, le=MAX_DURATION_MINUTES)

    # Before the field's own pattern: a wrong schedule is told why in NCRONTAB's terms, not as a regex.
    @field_validator("schedule", mode="before")
    @classmethod
    def _schedule(cls, value: object) -> object:
        return six_field_ncrontab(value) if isinstance(value, str) else value

    def is_open(self, at: datetime) -> bool:
        """The window opened at its latest firing at or before ``at``, and has not closed yet."""
        latest = croniter(self.schedule, at + timedelta(seconds=1), second_at_beginning=True).get_prev(datetime)
        return at < latest + timedelta(minutes=self.duration_minutes)


def automatic_sync_allowed(windows: Sequence[SyncWindow], at: datetime) -> bool:
    if any(window.kind == "deny" and window.is_open(at) for window in windows):
        return False
    allows = [window for window in windows if window.kind == "allow"]
    return not allows or any(window.is_open(at) for window in allows)
