"""A plan's counts name every action, also when they were stored before an action existed."""

from __future__ import annotations

from pydantic import TypeAdapter

from shared.iac.model import Action, PlanCounts

COUNTS = TypeAdapter(PlanCounts)


def test_counts_stored_before_replace_existed_read_with_replace_at_zero():
    stored = {"create": 2, "update": 1, "delete": 0, "no-change": 5}
    assert COUNTS.validate_python(stored) == {**stored, "replace": 0}


def test_counts_with_every_action_are_kept_as_they_are():
    counts = {action.value: index for index, action in enumerate(Action)}
    assert COUNTS.validate_python(counts) == counts
