"""Finding repeats among identifiers (used by validators that require unique ids)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def repeated(values: Iterable[str]) -> list[str]:
    """The values that occur more than once, sorted."""
    return sorted(value for value, count in Counter(values).items() if count > 1)
