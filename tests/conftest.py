"""Session fixtures: one Azurite of the tests' own and local hosts against it.

Nothing here fakes storage: every test talks to Azurite over its real protocol
and drives the app through a local host process over HTTP and queues.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devhost.azurite import TARGET_ACCOUNT, Azurite, free_port
from devhost.tokens import mint_token
from tests.support.host import HostProcess

REPO = Path(__file__).resolve().parents[1]
FIXTURE_APP = Path(__file__).resolve().parent / "fixture_app"


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    instance = Azurite(tmp_path_factory.mktemp("azurite")).start()
    yield instance
    instance.stop(grace_seconds=0.5)  # its data is thrown away; clients of this process hold connections


@pytest.fixture(scope="session")
def key_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("auth")


def git_sources_root(key_dir: Path) -> Path:
    """The folder test hosts allow Git specifications from (in the session's temporary folder)."""
    return key_dir.parent / "git-sources"


RESERVED_TENANT = "tenant-reserved"  # the only tenant that may use target reserved-storage


def app_settings(azurite: Azurite, key_dir: Path, **overrides: str) -> dict[str, str]:
    """The app's settings for a test host: the sample's shape, pointed at the test Azurite.

    Three targets: the local one (Azurite's second account), one that never
    answers, and the local one again reserved for :data:`RESERVED_TENANT`.
    Every host of the app gets the same settings (plus overrides), so that
    whichever host takes a queue message acts on it the same way.
    """
    closed = free_port()  # nothing listens here: the target cannot be reached
    targets = [
        {
            "Id": "local-storage",
            "Kind": "storage-account",
            "Region": "local",
            "Endpoint": azurite.blob_endpoint(TARGET_ACCOUNT),
            "Credential": {"Kind": "app-setting", "Name": "RuntimeCloudTarget__local_storage__Connection"},
        },
        {
            "Id": "unreachable-storage",
            "Kind": "storage-account",
            "Region": "nowhere",
            "Endpoint": f"http://127.0.0.1:{closed}/{TARGET_ACCOUNT}",
            "Credential": {"Kind": "app-setting", "Name": "RuntimeCloudTarget__unreachable__Connection"},
        },
        {  # the local account again, reserved for one tenant (tests/provisioning/test_environment_authority.py)
            "Id": "reserved-storage",
            "Kind": "storage-account",
            "Region": "local",
            "Endpoint": azurite.blob_endpoint(TARGET_ACCOUNT),
            "Credential": {"Kind": "app-setting", "Name": "RuntimeCloudTarget__local_storage__Connection"},
            "Tenants": [RESERVED_TENANT],
        },
    ]
    unreachable = (
        azurite.connection_string(TARGET_ACCOUNT)
        .replace(str(azurite.blob_port), str(closed))
        .replace(str(azurite.queue_port), str(closed))
        .replace(str(azurite.table_port), str(closed))
    )
    hub = uuid.uuid4().hex[:12]
    settings = {
        "AzureWebJobsStorage": azurite.connection_string(),
        "RuntimeCloud__Host__EnabledModules": "provisioning, inventory, capacity",
        "RuntimeCloud__Topology": "saas-default",
        "RuntimeCloud__IaC__Runner": "embedded",
        "RuntimeCloud__Targets": json.dumps(targets),
        "RuntimeCloudTarget__local_storage__Connection": azurite.connection_string(TARGET_ACCOUNT),
        "RuntimeCloudTarget__unreachable__Connection": unreachable,
        "RuntimeCloud__Auth__Issuer": "runtime-cloud-local-issuer",
        "RuntimeCloud__Auth__Audience": "api://runtime-cloud",
        "RuntimeCloud__Auth__LocalSigningKeyDirectory": str(key_dir),
        "RuntimeCloud__ConfigPlatform__Url": "",
        "RuntimeCloud__Health__ProbeTimeoutSeconds": "2",
        "RuntimeCloud__Health__CacheSeconds": "0",  # tests see a change at once (tests/test_health_single_flight.py)
        "RuntimeCloud__Provisioning__QueueRecheckSeconds": "2",
        "RuntimeCloud__Provisioning__GitAllowedSources": json.dumps([str(git_sources_root(key_dir))]),
        # Tests run the reconciler through the admin endpoint; on a timer it would reach
        # runs that other test hosts (with other task hubs) are running.
        "RuntimeCloud__Provisioning__ReconcileSchedule": "0 0 0 1 1 *",
        # The GitOps poll too (tests/gitops/ run it through the admin endpoint); and the installation's
        # webhook secret, by reference (tests/gitops/helpers.py signs with the same value).
        "RuntimeCloud__GitOps__PollSchedule": "0 0 0 1 1 *",
        # The autoscaler's timer too (tests/autoscaling/ evaluate through the API or the admin endpoint):
        # every host would evaluate every test's pools, between a test's own steps.
        "RuntimeCloud__Autoscaling__EvaluateSchedule": "0 0 0 1 1 *",
        "RuntimeCloudGitOps__WebhookSecret": "test-webhook-secret-0123456789abcdef",
        "AzureFunctionsWebHost__hostid": f"test-{uuid.uuid4().hex[:8]}",
        # Each host its own Durable task hub, so hosts sharing the test Azurite do not share work.
        "AzureFunctionsJobHost__extensions__durableTask__hubName": f"Test{hub}",
        # And its own runner-job queues: a job runs with the settings (targets, credentials) of the
        # host that launched it, and its completion notice reaches that host's orchestrations.
        "RuntimeCloud__IaC__JobQueue": f"runner-jobs-{hub}",
        "RuntimeCloud__IaC__JobResultsQueue": f"runner-job-results-{hub}",
        # A host a test kills hands its Durable messages back after 5 s instead of Azure's 5 min.
        "AzureFunctionsJobHost__extensions__durableTask__storageProvider__controlQueueVisibilityTimeout": "00:00:05",
        "AzureFunctionsJobHost__extensions__durableTask__storageProvider__workItemQueueVisibilityTimeout": "00:00:05",
    }
    settings.update(overrides)
    return settings


@pytest.fixture(scope="session")
def runtime_host(azurite: Azurite, key_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """The product itself, on a local host of the session (the one every API test drives)."""
    log = tmp_path_factory.mktemp("logs") / "runtime-host.log"
    host = HostProcess(REPO, app_settings(azurite, key_dir), log).start()
    yield host
    host.stop()


@pytest.fixture(scope="session")
def fixture_host(azurite: Azurite, key_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A small app of the tests' own, for the local host's own behaviour."""
    log = tmp_path_factory.mktemp("logs") / "fixture-host.log"
    host = HostProcess(FIXTURE_APP, app_settings(azurite, key_dir, FIXTURE_WORK_QUEUE="fixture-work"), log).start()
    yield host
    host.stop()


Mint = Callable[..., str]


@pytest.fixture(scope="session")
def mint(key_dir: Path) -> Mint:
    """Mint a token of the local issuer: ``mint("tenant-a", scopes=[...], roles=[...])``."""

    def _mint(
        tenant: str = "tenant-a",
        scopes: tuple[str, ...] | list[str] = (),
        roles: tuple[str, ...] | list[str] = (),
        **claims: object,
    ) -> str:
        return mint_token(key_dir, tenant=tenant, scopes=scopes, roles=roles, **claims)  # type: ignore[arg-type]

    return _mint
