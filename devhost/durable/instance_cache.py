"""Instances as this host last committed them: the row and the history, kept between episodes.

The Durable extension's extended sessions keep an orchestration in memory
between episodes; this is the local engine's version. The store stays the
source of truth, so the copy is only ever a guess that the store confirms:

- an episode played on a remembered copy commits by the conditional write of
  the instance row on the remembered ETag, so if anyone changed the row
  meanwhile the commit fails, the copy is dropped, and the batch is handled
  again at once from a fresh read (what it implied and had already sent is
  sent again or dropped as any replayed episode's is);
- a batch that would be settled *without* a commit (repeats, messages for a
  finished instance) is not trusted to the copy: the row is read first, and
  if its ETag moved the batch is handled again from the fresh read;
- writers in this process other than the engine (the management API's start
  and purge) drop the instance's copy, so the engine does not guess wrong in
  the first place. A host that starts (after a crash, say) has no copies,
  and neither has one that takes the task hub's lease again in the same
  process (:meth:`InstanceCache.clear`): while it did not hold the hub,
  another host may have committed episodes, and an episode played on an
  older copy writes its history rows where that host's committed rows are.
  The instance row's ETag fails the commit, but only after those rows were
  replaced, and the replay that follows reads a history that never happened
  (found by the chaos run: a run failed as non-deterministic).

What it saves is the read of the instance row at the start of each episode
(and of its history, which the host's own commit wrote).
"""

from __future__ import annotations

from collections import OrderedDict

from devhost.durable.history import Record
from devhost.durable.instances import InstanceState

CACHE_SIZE = 500


class InstanceCache:
    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[str, tuple[InstanceState, list[Record]]] = OrderedDict()

    def get(self, instance_id: str) -> tuple[InstanceState, list[Record]] | None:
        """A copy of the remembered row and history (the caller may change them freely)."""
        entry = self._entries.get(instance_id)
        if entry is None:
            return None
        self._entries.move_to_end(instance_id)
        return entry[0].copy(), list(entry[1])

    def history(self, state: InstanceState) -> list[Record] | None:
        """The remembered history, if it is the one of the row ``state`` was read as (same ETag)."""
        entry = self._entries.get(state.instance_id)
        if entry is None or state.etag is None or entry[0].etag != state.etag:
            return None
        self._entries.move_to_end(state.instance_id)
        return list(entry[1])

    def clear(self) -> None:
        """Forget every copy (the hub's lease was (re)acquired: another host may have moved on)."""
        self._entries.clear()

    def remember(self, state: InstanceState, records: list[Record]) -> None:
        if state.etag is None:
            return
        self._entries[state.instance_id] = (state.copy(), list(records))
        self._entries.move_to_end(state.instance_id)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def forget(self, instance_id: str) -> None:
        self._entries.pop(instance_id, None)
