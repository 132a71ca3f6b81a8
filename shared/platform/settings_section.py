"""What every settings section shares (kept apart so module settings need not import ``shared.wiring.settings``,
which imports them)."""

from __future__ import annotations

import re
from typing import Annotated

from croniter import croniter
from pydantic import AfterValidator, BaseModel, ConfigDict


class Section(BaseModel):
    """A settings section: fields are read by their PascalCase alias."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


# NCRONTAB, as the Functions host reads a timer's schedule: six fields, seconds first.
FIELD_NAMES = ("second", "minute", "hour", "day", "month", "day-of-week")
_BOUNDS = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_NAMES = {
    4: ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    5: ("sun", "mon", "tue", "wed", "thu", "fri", "sat"),
}
_ITEM = re.compile(r"(?P<start>\*|\d+|[a-z]{3})(?:-(?P<end>\d+|[a-z]{3}))?(?:/(?P<step>\d+))?")
EXAMPLE = "'0 */15 * * * *' (second minute hour day month day-of-week)"


def six_field_ncrontab(value: str) -> str:
    """Validate a timer schedule as NCRONTAB does ({second} {minute} {hour} {day} {month} {day-of-week}).

    Each field is checked against NCRONTAB's grammar and bounds (so ``L``, ``#``,
    ``?`` and day-of-week ``7``, which croniter would take, are refused as the
    Functions host refuses them), then croniter confirms the expression."""
    expression = value.strip()
    fields = expression.split()
    if len(fields) != 6:
        raise ValueError(f"{expression!r} has {len(fields)} field(s); a 6-field NCRONTAB expression, e.g. {EXAMPLE}")
    for index, field in enumerate(fields):
        for item in field.lower().split(","):
            if problem := _item_problem(index, item):
                raise ValueError(
                    f"{expression!r} is not a valid NCRONTAB expression: {FIELD_NAMES[index]} {problem}; e.g. {EXAMPLE}"
                )
    if not croniter.is_valid(expression, second_at_beginning=True):
        raise ValueError(f"{expression!r} is not a valid NCRONTAB expression, e.g. {EXAMPLE}")
    return expression


def _item_problem(index: int, item: str) -> str | None:
    match = _ITEM.fullmatch(item)
    if match is None:
        return f"{item!r} is not a number, a range, a list, '*' or a step"
    low, high = _BOUNDS[index]
    values = []
    for part in (match["start"], match["end"]):
        if part is None or part == "*":
            continue
        if part.isdigit():
            values.append(int(part))
        elif part in _NAMES.get(index, ()):
            values.append(_NAMES[index].index(part) + low)
        else:
            return f"{part!r} is not a name NCRONTAB knows here"
    if any(not low <= number <= high for number in values):
        return f"{item!r} is out of {low}-{high}"
    if match["start"] == "*" and match["end"] is not None:
        return f"{item!r}: '*' cannot start a range"
    if len(values) == 2 and values[0] > values[1]:
        return f"{item!r} is a range that runs backwards"
    if match["step"] is not None and int(match["step"]) < 1:
        return f"{item!r} has a step of 0"
    return None


# A schedule setting: validated when the settings are read, so a bad one stops the host naming it.
NcrontabSchedule = Annotated[str, AfterValidator(six_field_ncrontab)]
