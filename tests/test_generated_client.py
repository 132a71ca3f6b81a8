"""Issue 27: a typed client generated from the API's own document builds and sends a specification.

openapi-python-client (``requirements-codegen.txt``; ``make setup`` installs it into ``.venv/codegen``)
generates a client from the document the session's local host serves, offline, from the file. The test
imports that client and, with its models only (no dicts), declares an environment whose resources
are each member of the discriminated union, as a caller holding a token of the local issuer would; the
server's 202 must parse into the generated ``RunAccepted`` and the run it names must read back as the
generated ``RunView``. A value the document forbids, built with the same models, must be refused by the
document's schema and by the server (a 422 whose problem document names the field).

The generator is strict about what it can model: a body whose alternatives were stated as bare
``required`` lists, or a schema returned inline where a component exists, leaves it a warning and the
operation a body of ``Any``; the test fails on any warning it reports.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from http import HTTPStatus
from types import ModuleType
from typing import Any

import jsonschema_rs
import pytest

from tests.conftest import REPO

GENERATOR = REPO / ".venv" / "codegen"  # make setup: requirements-codegen.txt, --target (see that file)
PACKAGE = "runtime_cloud_client"
DOCUMENT = "runtime-cloud/openapi.json"

# Run in a child interpreter with the generator's folder on its path, so that the test process never
# imports the generator's own dependencies; it prints the generator's problems as JSON on its last line.
# Post hooks (ruff over the output) are left out: the generated code is imported, not kept.
_GENERATE = """
import json, sys
from pathlib import Path
from openapi_python_client import generate
from openapi_python_client.config import Config, ConfigFile, MetaType

document, output, package = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
config = Config.from_sources(
    ConfigFile(post_hooks=[], package_name_override=package),
    MetaType.NONE, document, "utf-8", overwrite=False, output_path=output,
)
problems = generate(config=config)
print(json.dumps([f"{p.level.value}: {p.header} {p.detail or ''}".strip() for p in problems]))
"""


@pytest.fixture(scope="module")
def document(runtime_host, mint) -> dict[str, Any]:
    answer = runtime_host.request("GET", DOCUMENT, token=mint("tenant-a", scopes=["factory.meta.read"]))
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture(scope="module")
def client_package(document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The client generated from the served document, imported from a folder of this module's own."""
    assert (GENERATOR / "openapi_python_client").is_dir(), (
        f"the client generator is not installed in {GENERATOR}: run `make setup` (requirements-codegen.txt)"
    )
    folder = tmp_path_factory.mktemp("generated-client")
    source = folder / "openapi.json"
    source.write_text(json.dumps(document), encoding="utf-8")
    generated = subprocess.run(
        [sys.executable, "-c", _GENERATE, str(source), str(folder / PACKAGE), PACKAGE],
        env={**os.environ, "PYTHONPATH": str(GENERATOR)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert generated.returncode == 0, generated.stderr
    problems = json.loads(generated.stdout.strip().splitlines()[-1])
    assert problems == [], "the generator could not model all of the document:\n" + "\n".join(problems)

    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(PACKAGE)
    finally:  # this worker's later modules must not find a stale client under the same name
        sys.path.remove(str(folder))
        for name in [name for name in sys.modules if name == PACKAGE or name.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def _module(package: ModuleType, name: str) -> Any:
    return importlib.import_module(f"{package.__name__}.{name}")


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _declaration(client_package: ModuleType, environment: str, queue_name: str, metadata_key: str = "team") -> Any:
    """A declaration built with the generated models only: one resource of each type of the union."""
    models = _module(client_package, "models")
    assert hasattr(models, "DeclarationSpecification"), "the document gives a declaration with a specification no type"
    suffix = environment[-8:]
    metadata = models.QueueResourceMetadata()
    metadata[metadata_key] = "checkout"
    container_metadata = models.BlobContainerResourceMetadata()
    container_metadata["retention"] = "short"
    specification = models.DeclaredSpecification(
        environment=environment,
        environment_class=models.EnvironmentClass.NON_PRODUCTION,
        target="local-storage",
        runner=models.RunnerName.EMBEDDED,
        resources=[
            models.QueueResource(type_="queue", name=queue_name, metadata=metadata),
            models.BlobContainerResource(
                type_="blob-container", name=f"invoices-{suffix}", metadata=container_metadata
            ),
            models.TableResource(type_="table", name=f"Ledger{suffix}"),
        ],
    )
    return models.DeclarationSpecification(specification=specification)


def _body_schema(document: dict[str, Any]) -> Any:
    """A validator of the declaration's body as the document states it (its references resolved in it)."""
    post = document["paths"]["/runtime-cloud/specifications"]["post"]
    schema = post["requestBody"]["content"]["application/json"]["schema"]
    return jsonschema_rs.validator_for({**schema, "components": document["components"]})


def test_a_generated_client_declares_a_specification_built_from_its_models(
    client_package, document, runtime_host, mint
):
    generated_client = _module(client_package, "client")
    declare = _module(client_package, "api.provisioning.declare_specification")
    get_run = _module(client_package, "api.provisioning.get_run")
    models = _module(client_package, "models")
    tenant, environment = _unique("tenant-client"), _unique("client")
    token = mint(tenant, scopes=["factory.runtime.write", "factory.runtime.read"])
    body = _declaration(client_package, environment, queue_name=f"orders-{environment[-8:]}")
    client = generated_client.AuthenticatedClient(base_url=runtime_host.base_url, token=token, timeout=60.0)

    assert _body_schema(document).is_valid(body.to_dict())
    with client:
        answer = declare.sync_detailed(client=client, body=body, idempotency_key=_unique("client-key"))
        accepted = answer.parsed
        assert answer.status_code == HTTPStatus.ACCEPTED, answer.content
        assert isinstance(accepted, models.RunAccepted)
        assert accepted.run_id and isinstance(accepted.state, models.RunState)
        assert answer.headers["Location"] == accepted.status_url
        run = get_run.sync(client=client, id=accepted.run_id)

    assert isinstance(run, models.RunView), run
    assert (run.id, run.tenant, run.environment) == (accepted.run_id, tenant, environment)
    assert run.specification_digest == accepted.specification_digest


def test_a_value_the_document_forbids_is_refused_by_its_schema_and_by_the_server(
    client_package, document, runtime_host, mint
):
    generated_client = _module(client_package, "client")
    declare = _module(client_package, "api.provisioning.declare_specification")
    models = _module(client_package, "models")
    token = mint(_unique("tenant-client"), scopes=["factory.runtime.write"])
    # The models are plain attrs classes: they take any string, so the rule is the document's to state.
    body = _declaration(client_package, _unique("client"), queue_name="Orders_Queue")
    client = generated_client.AuthenticatedClient(base_url=runtime_host.base_url, token=token, timeout=60.0)

    valid_by_the_document = _body_schema(document).is_valid(body.to_dict())
    with client:
        answer = declare.sync_detailed(client=client, body=body)
    # A metadata key's rule too (propertyNames, not patternProperties, which would let any other key through).
    bad_key = _declaration(client_package, _unique("client"), queue_name="orders-queue", metadata_key="Team")

    assert not valid_by_the_document
    assert not _body_schema(document).is_valid(bad_key.to_dict())
    assert answer.status_code == HTTPStatus.UNPROCESSABLE_ENTITY, answer.content
    assert isinstance(answer.parsed, models.ProblemDocument)
    assert "/specification/resources/0/name" in [error.path for error in answer.parsed.errors]
