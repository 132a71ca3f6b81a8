"""The comparison's results, whichever way it gets to them, and the items it is fed.

:func:`shared.inventory.comparison.compare` skips its look for ``unexpected``
items when the expected resources found every observed key; these tests pin
the cases where that shortcut must not apply (a key declared twice, an
observed item no expected resource found, an item listed twice) to the
results of the plain definition, written out here. ``ObservedItem.trusted``
items share one set of field names: copying one must leave the others alone.
Pure: no storage, no host (the end-to-end drift tests run the same code
through the scan).
"""

from __future__ import annotations

import random
from typing import Any

from shared.desired_state.api import ResourceType
from shared.iac.embedded.observed import ObservedResource, ObservedState
from shared.inventory.comparison import compare
from shared.inventory.model import ExpectedResource, FindingKind, Observation, ObservedItem
from shared.inventory.observers.base import ObservationRequest
from shared.inventory.observers.embedded import observation_for
from tests.inventory.helpers import tags_of


def _expected(name: str, owner: str = "a") -> ExpectedResource:
    return ExpectedResource(
        key=f"queue/{name}", address=f"queue/{name}", type="queue", name=name, state={"metadata": {"owner": owner}}
    )


def _item(name: str, owner: str = "a", managed_here: bool = True) -> ObservedItem:
    return ObservedItem(
        key=f"queue/{name}",
        address=f"queue/{name}",
        type="queue",
        name=name,
        state={"metadata": {"owner": owner}},
        managed_here=managed_here,
    )


def _observation(items: list[ObservedItem]) -> Observation:
    return Observation(observer="test", target="local", observed_at="2030-01-01T00:00:00+00:00", items=items)


def _by_definition(expected: list[ExpectedResource], observation: Observation) -> list[tuple[str, str, Any]]:
    """What compare must answer, straight from the module's definition (kind, address, fields)."""
    observed = {item.key: item for item in observation.items}
    declared = {resource.key for resource in expected}
    found: list[tuple[str, str, Any]] = []
    for resource in expected:
        item = observed.get(resource.key)
        if item is None:
            found.append(("missing", resource.address, None))
        elif item.state != resource.state:
            found.append(("changed", resource.address, item.state))
    for item in observation.items:
        if item.managed_here and item.key not in declared:
            found.append(("unexpected", item.address, item.state))
    return sorted(found, key=lambda entry: (entry[0], entry[1]))


def _answered(expected: list[ExpectedResource], observation: Observation) -> list[tuple[str, str, Any]]:
    return [(d.kind.value, d.address, d.observed) for d in compare(expected, observation)]


def test_an_undeclared_managed_item_is_unexpected_even_when_every_expected_resource_was_found():
    observation = _observation([_item("orders"), _item("stray"), _item("foreign", managed_here=False)])

    drift = compare([_expected("orders")], observation)

    assert [(d.kind, d.address) for d in drift] == [(FindingKind.UNEXPECTED, "queue/stray")]


def test_a_key_declared_twice_still_leaves_the_undeclared_item_unexpected():
    # Two expected resources with one key find the same item: counting them as two found keys
    # would take "orders" and "stray" as all of the observed keys.
    expected = [_expected("orders"), _expected("orders", owner="b")]
    observation = _observation([_item("orders"), _item("stray")])

    assert _answered(expected, observation) == [
        ("changed", "queue/orders", {"metadata": {"owner": "a"}}),
        ("unexpected", "queue/stray", {"metadata": {"owner": "a"}}),
    ]


def test_an_item_listed_twice_and_undeclared_is_reported_as_listed():
    observation = _observation([_item("orders"), _item("stray"), _item("stray", owner="b")])

    assert _answered([_expected("orders")], observation) == _by_definition([_expected("orders")], observation)
    assert [entry[0] for entry in _answered([_expected("orders")], observation)] == ["unexpected", "unexpected"]


def test_when_every_observed_key_is_declared_only_missing_and_changed_are_reported():
    expected = [_expected("orders"), _expected("billing"), _expected("gone")]
    observation = _observation([_item("orders"), _item("billing", owner="someone")])

    assert _answered(expected, observation) == [
        ("changed", "queue/billing", {"metadata": {"owner": "someone"}}),
        ("missing", "queue/gone", None),
    ]


def test_random_environments_compare_as_the_definition_says():
    rng = random.Random(13)
    for _ in range(400):
        expected = [_expected(f"q{rng.randint(0, 9)}", rng.choice("ab")) for _ in range(rng.randint(0, 8))]
        items = [
            _item(f"q{rng.randint(0, 9)}", rng.choice("ab"), managed_here=rng.random() < 0.8)
            for _ in range(rng.randint(0, 8))
        ]
        observation = _observation(items)

        assert _answered(expected, observation) == _by_definition(expected, observation)


def test_items_of_one_observation_share_their_field_names_and_a_copy_changes_only_itself():
    tags = tags_of("tenant-a", "dev")
    state = ObservedState(
        target="local",
        account="acct",
        observed_at="2030-01-01T00:00:00+00:00",
        resources=[
            ObservedResource(type=ResourceType.QUEUE, name="orders", metadata={"owner": "a"}, tags=tags),
            ObservedResource(type=ResourceType.BLOB_CONTAINER, name="logs", tags=tags),
            ObservedResource(type=ResourceType.QUEUE, name="elsewhere", tags=tags_of("tenant-a", "prod")),
        ],
    )
    # observation_for reads the tenant, the environment and the expected keys only
    request = ObservationRequest(tenant="tenant-a", environment="dev", target=None, specification=None, expected=())

    first, second = observation_for(request, state).items
    renamed = first.model_copy(update={"name": "renamed"})

    assert [(item.type, item.address) for item in (first, second)] == [
        ("queue", "queue/orders"),
        ("blob-container", "blob-container/logs"),
    ]
    assert type(first.type) is str  # the type's name, not the enum member
    assert renamed.name == "renamed" and first.name == "orders" and second.name == "logs"
    assert first.model_fields_set == second.model_fields_set == set(ObservedItem.model_fields)
    assert renamed.model_fields_set == set(ObservedItem.model_fields)
    for item in (first, second):
        assert item == ObservedItem.model_validate(item.model_dump())
