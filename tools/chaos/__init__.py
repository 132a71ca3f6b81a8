"""The chaos run (``make chaos``): two local hosts on one Azurite under mixed load and injected faults.

Not part of ``make test``: a bounded, seeded run that ends with invariant checks and a report under
``.data/chaos/`` (docs/development.md, Chaos run). Modules: :mod:`cluster` (Azurite and the hosts), :mod:`load`
(the drivers), :mod:`faults`, :mod:`evidence` (what the store and the hosts recorded),
:mod:`invariants` and :mod:`report`.
"""
