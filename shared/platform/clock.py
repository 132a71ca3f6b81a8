"""The one clock: the current time in UTC, as a timezone-aware ``datetime`` or its ISO 8601 text.

App code (``shared/``, ``functions/``, activities, ``runner_job/``) reads wall-clock
time only here, so every row, receipt and event agrees on the zone and the
format, and a test that moves time has one name to replace
(``shared.platform.clock.utcnow``; callers write ``clock.utcnow()``, so a patch
reaches them). Code whose tests pass their own time takes
``now: Callable[[], datetime] | None = None`` and reads ``clock.utcnow`` when it
is None (at the call, or when the object is made), never a default bound at
import, which a replaced clock would not reach.

Not here: durations and deadlines, which use ``time.monotonic`` (no wall-clock
step can make them run backwards), and orchestrator functions, which read the
replay-safe ``context.current_utc_datetime`` instead. ``pyproject.toml`` bans
``datetime.now`` and its siblings everywhere else in the app (ruff TID251).
"""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """Now, in UTC (timezone-aware)."""
    return datetime.now(UTC)


def now_iso() -> str:
    """``utcnow()`` as ISO 8601 text (``2025-01-31T12:00:00.000000+00:00``), as rows and receipts store it."""
    return utcnow().isoformat()
