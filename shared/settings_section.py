"""What every settings section shares (kept apart so module settings need not import ``shared.settings``,
which imports them)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

_FIELD = r"[0-9*/,\-A-Za-z]+"
NCRONTAB_6 = re.compile(rf"^\s*{_FIELD}(\s+{_FIELD}){{5}}\s*$")


class Section(BaseModel):
    """A settings section: fields are read by their PascalCase alias."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


def six_field_ncrontab(value: str) -> str:
    """Validate a timer schedule ({second} {minute} {hour} {day} {month} {day-of-week})."""
    if not NCRONTAB_6.match(value):
        raise ValueError("a 6-field NCRONTAB expression, e.g. '0 */15 * * * *' (second minute hour day month dow)")
    return value.strip()
