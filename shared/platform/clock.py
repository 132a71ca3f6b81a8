"""The one clock: the current time in UTC, as a timezone-aware ``datetime`` or its ISO 8601 text.

Everything that stamps a row, a receipt or an event reads the time here, so
all of them agree on the zone and the format. Code whose tests need to move
time takes a ``Callable[[], datetime]`` defaulting to :func:`now`.
"""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)


def now_iso() -> str:
    """``now()`` as ISO 8601 text (``2025-01-31T12:00:00.000000+00:00``), as rows and receipts store it."""
    return now().isoformat()
