"""Nothing the program declares, exports or reads from the repository holds a key, password or token.

The test uses the host's own detector (shared.platform.secret_values: the shapes of keys,
connection strings with keys, SAS signatures, private keys, JWTs, credentials in
URLs, long random strings, and fields named like secrets).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from shared.platform.secret_values import find_secrets, secret_kind
from tests.infra.conftest import FACTORY_SPEC, INFRA, Deployment

# Named like a secret, and not one: Application Insights' connection string carries an instrumentation
# key that is an identifier, and with local authentication off it can send nothing without a token;
# the store's credential setting names the mechanism (managedidentity).
NOT_SECRETS = {
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
    "AzureWebJobsStorage__credential",
    "RuntimeCloudBackup__credential",  # "managedidentity", the backup account's like the store's
}
# Files that spell secret shapes on purpose: the program's own detector.
DETECTORS = {"infra/runtime_cloud_infra/host_settings.py"}
TEXT_SUFFIXES = {".py", ".yaml", ".yml", ".md", ".json", ".txt"}


def test_no_resource_input_holds_a_secret_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    found = {
        f"{r.type} {r.name}{hit['path']}": hit["message"]
        for r in deployment.resources
        for hit in find_secrets(r.inputs)
    }

    assert not found


def test_no_app_setting_holds_a_secret_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    settings = {name: value for name, value in deployment.app_settings().items() if name not in NOT_SECRETS}
    targets = json.loads(settings["RuntimeCloud__Targets"])

    assert not find_secrets(settings)
    assert not find_secrets(targets)
    assert not any("AccountKey" in value or "SharedAccessSignature" in value for value in settings.values())


def test_no_export_holds_a_secret_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    assert deployment.exports["hostUrl"].startswith("https://")
    assert not find_secrets(deployment.exports)


def test_the_program_asks_azure_for_no_key_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    """Only the deployer's tenant and subscription are looked up; no listKeys, no SAS."""
    assert set(deployment.calls) == {"azure-native:authorization:getClientConfig"}


def test_stack_files_and_specifications_hold_no_secret() -> None:
    stack = yaml.safe_load((INFRA / "Pulumi.dev.yaml").read_text(encoding="utf-8"))
    specification = yaml.safe_load(FACTORY_SPEC.read_text(encoding="utf-8"))
    structured = {
        key: json.loads(value)
        for key, value in specification["pulumi"]["config"].items()
        if value.lstrip().startswith(("[", "{"))
    }

    assert "encryptionsalt" not in stack and "secretsprovider" not in stack
    assert not any(isinstance(value, dict) and "secure" in value for value in stack["config"].values())
    assert not find_secrets(stack) and not find_secrets(specification) and not find_secrets(structured)


def test_no_file_in_infra_or_environments_holds_a_secret() -> None:
    roots = [INFRA, FACTORY_SPEC.parents[1]]
    files = [
        path
        for root in roots
        for path in root.rglob("*")
        if path.suffix in TEXT_SUFFIXES
        and "__pycache__" not in path.parts
        and path.relative_to(INFRA.parent).as_posix() not in DETECTORS
    ]
    assert files

    found = [f"{path.relative_to(INFRA.parent)}: {kind}" for path in files for kind in _secret_tokens(path)]

    assert not found


def _secret_tokens(path: Path) -> list[str]:
    tokens = re.split(r"[\s\"'`,;()\[\]{}]+", path.read_text(encoding="utf-8"))
    return [kind for token in tokens if token and (kind := secret_kind(token))]
