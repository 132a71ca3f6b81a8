"""An apply split into slices (each one activity, inside functionTimeout) does the plan exactly once."""

from __future__ import annotations

import time

import pytest

from shared.iac.embedded import EmbeddedRunner
from shared.iac.model import ApplySliceEnded, StepStatus
from tests.iac.conftest import DictJournal, specification, tags_for
from tests.iac.test_embedded_apply import three_resources


def test_an_apply_past_its_deadline_stops_after_each_step_and_goes_on_from_the_journal(
    target, account, names, environment
):
    spec = specification(environment, three_resources(names))
    runner = EmbeddedRunner()
    plan = runner.plan(spec, target)
    journal = DictJournal()
    slices = 0

    while True:
        slices += 1
        try:
            # A deadline already past: every call does one step (at least one, so it always progresses).
            result = runner.apply(spec, target, plan, journal, {}, deadline=time.monotonic() - 1)
            break
        except ApplySliceEnded as paused:
            assert paused.result is not None and len(paused.result.steps) == slices
            assert len(journal) == slices

    assert slices == 3
    assert [step.status for step in result.steps] == [StepStatus.APPLIED] * 3
    assert sum("already recorded" in line for line in result.logs) == 2
    assert account.queue_metadata(names("orders")) == tags_for(environment)
    assert runner.plan(spec, target).counts["no-change"] == 3


def test_without_a_deadline_the_apply_is_one_call(target, account, names, environment):
    spec = specification(environment, three_resources(names))
    runner = EmbeddedRunner()

    result = runner.apply(spec, target, runner.plan(spec, target), DictJournal(), {}, deadline=None)

    assert len(result.steps) == 3


def test_a_deadline_in_the_future_does_not_cut_the_apply(target, account, names, environment):
    spec = specification(environment, three_resources(names))
    runner = EmbeddedRunner()

    result = runner.apply(spec, target, runner.plan(spec, target), DictJournal(), {}, deadline=time.monotonic() + 3600)

    assert len(result.steps) == 3


@pytest.mark.parametrize("deadline", [None, 0.0])
def test_no_slice_ends_before_a_first_step(target, account, names, environment, deadline):
    spec = specification(environment, three_resources(names)[:1])
    runner = EmbeddedRunner()

    result = runner.apply(spec, target, runner.plan(spec, target), DictJournal(), {}, deadline=deadline)

    assert len(result.steps) == 1
