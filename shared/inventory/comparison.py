"""Expected vs observed -> drift. Pure, so it is tested and benchmarked without I/O.

- ``missing``: an expected resource the observation does not hold;
- ``changed``: present, and some compared field differs; every differing
  leaf field is listed with ``before`` (as applied) and ``after`` (as observed);
- ``unexpected``: an observed resource tagged as managed for this tenant and
  environment that the applied desired state does not declare. Untagged
  resources are someone else's business and never reported: the target may
  be shared.

Cost: one dictionary of the observation by key, then one lookup per expected
resource and one per observed item, so a scan compares in time linear in the
number of resources. An unchanged resource (nearly all of them) costs one
dictionary comparison and allocates nothing: at 10,000 resources the
allocations of flattening every state were what made the comparison grow
faster than the resources (Python's collector runs more often, over more objects).
The look for ``unexpected`` items is skipped when the expected resources
found every observed key (distinct keys, counted): then no observed item
can be undeclared, and a pass over thousands of items that finds nothing is
the most common case.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from shared.iac.api import field_changes, flatten
from shared.inventory.model import Drift, ExpectedResource, FieldDifference, FindingKind, Observation


def compare(expected: Iterable[ExpectedResource], observation: Observation) -> list[Drift]:
    """Every difference between what was applied and what is there, ordered by kind and address."""
    observed = observation.by_key()
    declared: set[str] = set()
    drift: list[Drift] = []
    resources = found_keys = 0
    for resource in expected:
        resources += 1
        key = resource.key
        declared.add(key)
        found = observed.get(key)
        if found is None:
            drift.append(
                Drift(
                    kind=FindingKind.MISSING,
                    key=key,
                    address=resource.address,
                    type=resource.type,
                    name=resource.name,
                    expected=resource.state,
                    fields=_differences(resource.state, None, resource.compared_fields),
                )
            )
            continue
        found_keys += 1
        fields = _differences(resource.state, found.state, resource.compared_fields)
        if fields:
            drift.append(
                Drift(
                    kind=FindingKind.CHANGED,
                    key=key,
                    address=resource.address,
                    type=resource.type,
                    name=found.name,
                    fields=fields,
                    expected=resource.state,
                    observed=found.state,
                )
            )
    # With no key declared twice, each found key is a distinct observed key: all of them found, none is left.
    if len(declared) != resources or found_keys != len(observed):
        drift.extend(_unexpected(observation, declared))
    return sorted(drift, key=lambda d: (d.kind.value, d.address))


def _unexpected(observation: Observation, declared: set[str]) -> Iterator[Drift]:
    """The observed items tagged as managed here that the applied desired state does not declare."""
    for item in observation.items:
        if item.managed_here and item.key not in declared:
            yield Drift(
                kind=FindingKind.UNEXPECTED,
                key=item.key,
                address=item.address,
                type=item.type,
                name=item.name,
                observed=item.state,
                fields=_differences(None, item.state, None),
            )


def _differences(
    before: dict[str, Any] | None, after: dict[str, Any] | None, compared: tuple[str, ...] | None
) -> list[FieldDifference]:
    if before is not None and before == after:
        return []  # the common case, decided by one comparison in C: nothing flattened, nothing allocated
    changes = field_changes(before, after)
    if compared is not None:
        changes = [c for c in changes if any(c.path == f or c.path.startswith(f + ".") for f in compared)]
    return [FieldDifference(path=c.path, before=c.before, after=c.after) for c in changes]


def comparable(state: dict[str, Any] | None) -> dict[str, Any]:
    """A state as flat ``path -> value`` (for views and diffs)."""
    return flatten(state or {})
