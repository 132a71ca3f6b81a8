"""The Pulumi runner where the CLI is missing, the registry, and the test that needs the CLI."""

from __future__ import annotations

import shutil

import pytest
from azure.storage.blob import BlobServiceClient

from shared.desired_state.api import EnvironmentSpecification, RunnerName
from shared.iac.embedded import EmbeddedRunner
from shared.iac.model import PlanResult
from shared.iac.pulumi import PulumiRunner, RunnerUnavailable
from shared.iac.pulumi.errors import ProgramNotFound
from shared.iac.pulumi.saved_plans import SavedPlans
from shared.iac.pulumi.workspace import locate_program
from shared.iac.registry import TracedRunner, runner_for
from shared.iac.settings import IaCSettings
from tests.iac.conftest import DictJournal

CLI_MISSING_REASON = "the Pulumi CLI is not installed here (cannot be downloaded on this machine)"


def pulumi_specification(work_dir: str | None = "programs/shop") -> EnvironmentSpecification:
    return EnvironmentSpecification.model_validate(
        {
            "tenant": "tenant-a",
            "environment": "prod",
            "environment_class": "production",
            "target": "iac-tests",
            "runner": "pulumi",
            "pulumi": {"project": "shop", "stack": "tenant-a.prod", "work_dir": work_dir},
        }
    )


def test_registry_builds_each_runner_from_the_settings():
    settings = IaCSettings(StepIntervalSeconds=2, PulumiBackendUrl="file:///tmp/state", PulumiWorkRoot="/srv/iac")

    traced_embedded = runner_for(RunnerName.EMBEDDED, settings)
    traced_pulumi = runner_for(RunnerName.PULUMI, settings)
    embedded, pulumi = traced_embedded.wrapped, traced_pulumi.wrapped

    assert isinstance(traced_embedded, TracedRunner) and isinstance(traced_pulumi, TracedRunner)
    assert isinstance(embedded, EmbeddedRunner) and embedded.step_interval_seconds == 2
    assert embedded.name == "embedded" and embedded.version
    assert isinstance(pulumi, PulumiRunner) and pulumi.name == "pulumi"
    assert (pulumi.backend_url, pulumi.work_root) == ("file:///tmp/state", "/srv/iac")


def test_without_the_cli_plan_and_apply_say_the_runner_is_unavailable(target, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without pulumi
    runner = PulumiRunner(work_root=str(tmp_path))
    plan = PlanResult(runner="pulumi", runner_version="x", changes=[])

    with pytest.raises(RunnerUnavailable, match="Pulumi CLI is not on PATH"):
        runner.plan(pulumi_specification(), target)
    with pytest.raises(RunnerUnavailable):
        runner.apply(pulumi_specification(), target, plan, DictJournal(), {})


def test_the_program_must_be_a_project_inside_the_work_root(tmp_path):
    (tmp_path / "programs" / "shop").mkdir(parents=True)

    with pytest.raises(ProgramNotFound, match="no Pulumi project"):
        locate_program(pulumi_specification(), str(tmp_path))
    with pytest.raises(ProgramNotFound, match="outside"):
        locate_program(pulumi_specification(work_dir="../elsewhere"), str(tmp_path))
    (tmp_path / "programs" / "shop" / "Pulumi.yaml").write_text("name: shop\nruntime: python\n")
    assert locate_program(pulumi_specification(), str(tmp_path)).stack_reference == "shop/tenant-a.prod"


@pytest.mark.skipif(shutil.which("pulumi") is None, reason=CLI_MISSING_REASON)
def test_preview_and_bound_update_of_a_local_program_through_the_cli(target, tmp_path, monkeypatch, azurite):
    program = tmp_path / "programs" / "shop"
    program.mkdir(parents=True)
    (program / "Pulumi.yaml").write_text("name: shop\nruntime: yaml\noutputs:\n  hello: world\n")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "test-only")
    plans = BlobServiceClient.from_connection_string(azurite.connection_string()).get_container_client("pulumi-plans")
    if not plans.exists():
        plans.create_container()
    runner = PulumiRunner(
        backend_url=f"file://{tmp_path / 'state'}",
        work_root=str(tmp_path),
        saved_plans=SavedPlans(plans, tmp_path / "scratch"),
    )
    spec = pulumi_specification()

    plan = runner.plan(spec, target)
    result = runner.apply(spec, target, plan, DictJournal(), {})

    assert plan.binding["pulumi_plan_sha256"] and plan.changes == []
    assert result.runner == "pulumi" and result.outputs["stack"] == {"hello": "world"}
