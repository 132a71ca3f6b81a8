"""The local Durable engine's episodes over a product orchestrator, and its histories as JSON.

``devhost.durable.episode.play`` is what the local host runs for each
episode; here it runs in process over a history kept in a list, so a test can
save a history exactly as the engine stored it (events and the engine's own
``Origin`` and ``MessageId`` beside each) and replay it later.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from devhost.durable.episode import Execution, Outcome, play
from devhost.durable.history import EventType, Origin, Record
from devhost.durable.replay import context_json, run_handle

FIXTURES = Path(__file__).parent / "fixtures"


class Engine:
    """One execution of ``handle`` played episode by episode, as the local host plays it."""

    def __init__(self, handle: Callable[..., Any], execution: Execution) -> None:
        self._handle = handle
        self.execution = execution

    async def episode(self, committed: list[Record], incoming: list[Record], at: datetime) -> Outcome:
        return await play(self.execution, committed, incoming, False, self._run, at)

    async def _run(self, history: list[Record], replayed: int):  # type: ignore[no-untyped-def]
        input_json = next(r.event["Input"] for r in history if r.type == EventType.EXECUTION_STARTED)
        context = context_json(self.execution.instance_id, None, input_json, history, replayed)
        return run_handle(self._handle, context)


def to_json(records: list[Record]) -> list[dict[str, Any]]:
    return [
        {
            "event": record.event,
            "origin": record.origin.to_json() if record.origin else None,
            "message_id": record.message_id,
        }
        for record in records
    ]


def from_json(rows: list[dict[str, Any]]) -> list[Record]:
    return [
        Record(row["event"], Origin.from_json(row["origin"]) if row["origin"] else None, row["message_id"])
        for row in rows
    ]


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))
