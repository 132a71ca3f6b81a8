"""The runner job's stack settings: the scale rule's poll, warm runners, and a timeout that holds a handover."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pulumi
import pytest
from runtime_cloud_infra.runner_job_settings import (
    HANDOVER_DEFAULT_SECONDS,
    HANDOVER_SETTING,
    MIN_WORK_SECONDS,
    SECONDS_A_MONTH,
)
from runtime_cloud_infra.settings import StackConfigError, load

from shared.iac.settings import IaCSettings
from tests.infra.conftest import INFRA, REPO, stack_file_config

Configure = Callable[..., None]


@pytest.fixture
def configure() -> Iterator[Configure]:
    def apply(host: dict[str, str] | None = None, **changes: Any) -> None:
        config = stack_file_config(INFRA / "Pulumi.dev.yaml")
        config.update({f"runtime-cloud-infra:{key}": str(value) for key, value in changes.items()})
        if host is not None:
            settings = json.loads(config["runtime-cloud-infra:hostSettings"])
            config["runtime-cloud-infra:hostSettings"] = json.dumps({**settings, **host})
        pulumi.runtime.set_all_config(config)

    yield apply
    pulumi.runtime.set_all_config({})


def test_the_handover_the_stack_checks_is_the_app_s_setting() -> None:
    field = IaCSettings.model_fields["job_handover_seconds"]

    assert HANDOVER_SETTING == f"RuntimeCloud__IaC__{field.alias}"
    assert HANDOVER_DEFAULT_SECONDS == IaCSettings().job_handover_seconds


def test_the_sample_stack_polls_every_5_s_keeps_no_warm_runner_and_holds_a_handover(configure: Configure) -> None:
    configure()

    job = load(stack="dev").runner_job

    assert (job.polling_interval_seconds, job.warm_replicas) == (5, 0)
    assert job.timeout_seconds >= HANDOVER_DEFAULT_SECONDS + MIN_WORK_SECONDS


def test_the_poll_s_cost_is_one_queue_read_a_poll_as_the_docs_state(configure: Configure) -> None:
    deploying = (REPO / "docs" / "azure.md").read_text(encoding="utf-8")
    runner_jobs = (REPO / "docs" / "provisioning.md").read_text(encoding="utf-8")
    configure(runnerJobPollingIntervalSeconds=5)
    at_five = load(stack="dev").runner_job.queue_reads_a_month
    configure(runnerJobPollingIntervalSeconds=30)
    at_thirty = load(stack="dev").runner_job.queue_reads_a_month

    assert at_five == SECONDS_A_MONTH // 5 == 518_400 and at_thirty == 86_400
    assert "518,400 queue reads a month" in deploying and "86,400 at Container Apps' default" in runner_jobs


@pytest.mark.parametrize(
    "key, value, problem",
    [
        ("runnerJobPollingIntervalSeconds", 0, "between 1 and 300"),
        ("runnerJobPollingIntervalSeconds", 301, "between 1 and 300"),
        ("runnerJobWarmReplicas", -1, "between 0 and 20"),
        ("runnerJobWarmReplicas", 21, "between 0 and 20"),
    ],
)
def test_a_poll_or_warm_count_out_of_bounds_is_refused_naming_the_key(
    configure: Configure, key: str, value: int, problem: str
) -> None:
    configure(**{key: value})

    with pytest.raises(StackConfigError, match=f"runtime-cloud-infra:{key} must be {problem}"):
        load(stack="dev")


def test_a_timeout_that_cannot_hold_the_handover_s_wait_and_the_work_is_refused(configure: Configure) -> None:
    configure(runnerJobTimeoutSeconds=600, host={HANDOVER_SETTING: "600"})

    with pytest.raises(StackConfigError) as refused:
        load(stack="dev")

    assert "runtime-cloud-infra:runnerJobTimeoutSeconds (600)" in str(refused.value)
    assert f"{HANDOVER_SETTING} (600) + {MIN_WORK_SECONDS}" in str(refused.value)


def test_the_default_handover_counts_when_the_host_settings_name_none(configure: Configure) -> None:
    configure(runnerJobTimeoutSeconds=300)  # enough for a plan or an apply alone, not for both and the wait

    with pytest.raises(StackConfigError, match=rf"{HANDOVER_SETTING} \(60\) \+ 300"):
        load(stack="dev")


@pytest.mark.parametrize("timeout, handover", [(900, "600"), (360, "60"), (300, "0")])
def test_a_timeout_that_holds_the_handover_s_wait_and_the_work_is_accepted(
    configure: Configure, timeout: int, handover: str
) -> None:
    configure(runnerJobTimeoutSeconds=timeout, host={HANDOVER_SETTING: handover})

    assert load(stack="dev").runner_job.timeout_seconds == timeout
