"""One Pulumi stack per tenant and environment, through the local host: a declaration naming another
environment's stack is refused (422 at ``/specification/pulumi/stack``); a stack the installation adopted
(the factory's ``factory``, bootstrapped by hand) is accepted for its one environment and no other.

No run here reaches the Pulumi CLI's work: the checks are the declaration's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devhost.azurite import Azurite
from shared.iac.stacks import derived_stack, parse_adopted
from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import WRITE, declare, specification, unique
from tests.support.host import HostProcess

ADOPTED = {"tenant-a/factory-host": "factory"}


def pulumi_spec(environment: str, stack: str) -> dict[str, Any]:
    return {
        **specification(environment, resources=[]),
        "runner": "pulumi",
        "pulumi": {"project": "runtime-cloud-infra", "stack": stack, "work_dir": "infra"},
    }


@pytest.fixture
def adopting_host(azurite: Azurite, key_dir: Path, tmp_path: Path) -> Iterator[HostProcess]:
    queue = unique("stacks")  # job queues of its own: no other test host's scaler takes its jobs
    settings = provisioning_settings(
        azurite,
        key_dir,
        RuntimeCloud__IaC__PulumiAdoptedStacks=json.dumps(ADOPTED),
        RuntimeCloud__IaC__JobQueue=queue,
        RuntimeCloud__IaC__JobResultsQueue=f"{queue}-results",
    )
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    yield host
    host.stop()


def stack_error(answer: Any) -> str:
    assert answer.status_code == 422, answer.text
    assert answer.headers["Content-Type"].startswith("application/problem+json")
    errors = {error["path"]: error["message"] for error in answer.json()["errors"]}
    return errors["/specification/pulumi/stack"]


def test_a_specification_naming_another_environment_s_stack_is_refused_with_the_stack_it_must_use(
    provisioning_host, mint
):
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("shop")

    shared_name = stack_error(declare(provisioning_host, token, pulumi_spec(environment, "prod")))
    other_tenant = stack_error(declare(provisioning_host, token, pulumi_spec(environment, f"tenant-b.{environment}")))

    assert f"'tenant-a.{environment}'" in shared_name and "'prod'" in shared_name
    assert f"'tenant-a.{environment}'" in other_tenant
    accepted = declare(provisioning_host, token, pulumi_spec(environment, derived_stack("tenant-a", environment)))
    assert accepted.status_code in (201, 202), accepted.text


def test_an_adopted_stack_is_its_one_environment_s_and_refused_to_every_other(adopting_host, mint):
    tenant_a = mint("tenant-a", scopes=WRITE)
    tenant_b = mint("tenant-b", scopes=WRITE)

    adopted = declare(adopting_host, tenant_a, pulumi_spec("factory-host", "factory"))
    derived_instead = stack_error(
        declare(adopting_host, tenant_a, pulumi_spec("factory-host", "tenant-a.factory-host"))
    )
    elsewhere = stack_error(declare(adopting_host, tenant_a, pulumi_spec(unique("shop"), "factory")))
    other_tenant = stack_error(declare(adopting_host, tenant_b, pulumi_spec("factory-host", "factory")))

    assert adopted.status_code in (201, 202), adopted.text
    assert "'factory'" in derived_instead  # adopted: that name and no other
    assert "'factory'" in elsewhere and "'tenant-b.factory-host'" in other_tenant


def test_the_adoption_setting_refuses_one_stack_for_two_environments_and_names_with_a_dot():
    assert parse_adopted('{"tenant-a/factory-host": "factory"}') == ADOPTED
    with pytest.raises(ValueError, match="one environment per stack"):
        parse_adopted({"tenant-a/one": "factory", "tenant-b/two": "factory"})
    with pytest.raises(ValueError, match="letters, digits"):
        parse_adopted({"tenant-a/one": "tenant-b.two"})  # could be another pair's derived name
    with pytest.raises(ValueError, match="<tenant>/<environment>"):
        parse_adopted({"factory-host": "factory"})


def test_the_factory_specification_keeps_its_bootstrapped_stack_only_where_the_installation_adopted_it():
    import yaml

    from shared.desired_state.api import EnvironmentSpecification
    from shared.iac.pulumi.workspace import locate_program
    from shared.iac.stacks import StackNotOwned

    document = yaml.safe_load((REPO / "environments" / "factory" / "host.yaml").read_text(encoding="utf-8"))
    factory = EnvironmentSpecification.model_validate({**document, "tenant": "connectsoft-factory"})

    location = locate_program(factory, str(REPO), {"connectsoft-factory/factory-host": "factory"})

    assert location.stack_reference == "runtime-cloud-infra/factory"  # the state the bootstrap left
    with pytest.raises(StackNotOwned, match="'connectsoft-factory.factory-host'"):
        locate_program(factory, str(REPO), {})  # not adopted: its own derived stack only
