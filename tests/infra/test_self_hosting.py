"""The host provisions itself: environments/factory/host.yaml is a specification the host accepts,
that names this repository's program, and that drives the program to the same secure stack."""

from __future__ import annotations

import json

import yaml

from shared.desired_state.api import EnvironmentSpecification
from shared.iac.pulumi.workspace import locate_program
from tests.infra.conftest import FACTORY_SPEC, INFRA, PROJECT, REPO, Deployment, stack_file_config


def _specification() -> EnvironmentSpecification:
    document = yaml.safe_load(FACTORY_SPEC.read_text(encoding="utf-8"))
    return EnvironmentSpecification.model_validate({**document, "tenant": "connectsoft-factory"})


def test_factory_specification_is_one_the_host_accepts() -> None:
    specification = _specification()

    assert specification.runner.value == "pulumi"
    assert specification.environment_class.value == "production"  # an operator approves every change
    assert specification.pulumi is not None and specification.pulumi.project == PROJECT


def test_the_host_runner_finds_this_repository_program() -> None:
    """With the repository checkout as RuntimeCloud__IaC__PulumiWorkRoot, the runner opens infra/."""
    location = locate_program(_specification(), str(REPO))

    assert location.program_dir == INFRA
    assert yaml.safe_load((INFRA / "Pulumi.yaml").read_text(encoding="utf-8"))["name"] == location.project


def test_the_factory_target_is_the_stack_own_resource_group_with_mocked_pulumi_engine(factory: Deployment) -> None:
    specification = _specification()
    targets = {t["Id"]: t for t in json.loads(factory.config["runtime-cloud-infra:targets"])}
    target = targets[specification.target]

    assert target["Kind"] == "azure-subscription"
    assert (
        target["ResourceGroup"] == factory.one("resources:ResourceGroup", "resource-group").inputs["resourceGroupName"]
    )
    assert factory.config["azure-native:useMsi"] == "true"  # the runner acts as its managed identity


def test_resources_carry_the_management_tags_of_the_run_with_mocked_pulumi_engine(factory: Deployment) -> None:
    """The host's runner passes runtime-cloud:managementTags; the inventory finds the resources by them."""
    tags = json.loads(factory.config["runtime-cloud:managementTags"])
    tagged = [r for r in factory.resources if "tags" in r.inputs]

    assert tagged
    for resource in tagged:
        assert tags.items() <= resource.inputs["tags"].items(), f"{resource.type} {resource.name}"


def test_the_sample_stack_and_the_factory_specification_set_every_key_the_program_reads_with_mocked_pulumi_engine(
    dev: Deployment, factory: Deployment
) -> None:
    def program_keys(keys: set[str]) -> set[str]:
        return {key for key in keys if key.startswith(f"{PROJECT}:")}

    assert program_keys(set(dev.config)) == program_keys(dev.read_keys), "Pulumi.dev.yaml holds every value"
    assert program_keys(set(factory.config)) == program_keys(factory.read_keys)


def test_the_bootstrap_stack_file_is_written_from_the_specification() -> None:
    """infra/stack_config.py: the operator's bootstrap applies exactly what the host will apply."""
    import stack_config

    document = yaml.safe_load(FACTORY_SPEC.read_text(encoding="utf-8"))
    written = stack_config.stack_file(document)["config"]
    specification_config = document["pulumi"]["config"]

    assert set(written) == set(specification_config) - set(stack_config.RUNNER_ONLY)
    for key, value in written.items():
        round_trip = json.dumps(value) if isinstance(value, (list, dict)) else value
        expected = specification_config[key]
        assert round_trip == expected or json.loads(expected) == value
    assert stack_file_config(INFRA / "Pulumi.dev.yaml")  # the same reader the tests use for stack files
