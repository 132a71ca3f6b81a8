"""Execution capacity: worker pools, edition quotas and fenced capacity leases.

Runtime workers and the tool executor ask for a lease before they start an
attempt, a sandbox, a build or a browser session. The package never hands
out more than exists, never leaks a slot forever and answers fast. Where to
read first:

- :mod:`shared.capacity.slots`: one table row per slot; the row *is* the
  lease, its generation is the fencing token, its expiry is on the row.
- :mod:`shared.capacity.quota`: the per-tenant edition limit as quota token
  rows (no counter that can drift).
- :mod:`shared.capacity.leases`: acquire, renew, release, idempotent by a
  client-chosen lease id; composes the two above.
- :mod:`shared.capacity.pools` and :mod:`shared.capacity.editions`: the
  catalogue an administrator edits; :mod:`shared.capacity.sweeper`: the
  expiry sweep the Durable orchestration runs (correctness never waits for it).

This ``__init__`` imports nothing so that ``shared.wiring.settings`` can import the
settings section without pulling in storage code.
"""
