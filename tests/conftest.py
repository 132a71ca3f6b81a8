"""Session fixtures: one Azurite of the tests' own and local hosts against it.

Nothing here fakes storage: every test talks to Azurite over its real protocol
and drives the app through a local host process over HTTP and queues.

`make test` runs the suite in pytest-xdist workers (Makefile, TEST_WORKERS): each worker is a
session of its own, so it starts its own Azurite (on free ports, in its own temporary folder) and
its own hosts; workers share nothing but the machine. Two tiers, told apart at collection
(:func:`pytest_collection_modifyitems`): the ``domain`` tier, tests that need neither Azurite nor a
host process (`make test-domain`), and everything else.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devhost.azurite import BACKUP_ACCOUNT, TARGET_ACCOUNT, Azurite
from devhost.tokens import mint_token
from tests.durable.support import DurableApp
from tests.support.host import HostProcess
from tests.support.host_groups import HostGroup
from tests.support.ports import closed_port

REPO = Path(__file__).resolve().parents[1]
FIXTURE_APP = Path(__file__).resolve().parent / "fixture_app"
# A timer schedule (NCRONTAB, valid on Azure) that fires on 1 January at midnight: a moment no test reaches.
NEVER_IN_A_TEST = "0 0 0 1 1 *"


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    instance = Azurite(tmp_path_factory.mktemp("azurite"), persist=False).start()
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
    closed = closed_port()  # nothing listens here, nor will: the target cannot be reached
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
    unreachable, backup = (
        azurite.connection_string(account)
        .replace(str(azurite.blob_port), str(closed))
        .replace(str(azurite.queue_port), str(closed))
        .replace(str(azurite.table_port), str(closed))
        for account in (TARGET_ACCOUNT, BACKUP_ACCOUNT)
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
        # The backup location local.settings.json names is `make run`'s Azurite (127.0.0.1:10000), which
        # may be running on this machine: a test host's backup timer would write into it. Unreachable as
        # before, but surely so (tests/backup/ give their hosts a location of their own).
        "RuntimeCloudBackup": backup,
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
        "RuntimeCloud__Provisioning__ReconcileSchedule": NEVER_IN_A_TEST,
        # The GitOps poll too (tests/gitops/ run it through the admin endpoint); and the installation's
        # webhook secret, by reference (tests/gitops/helpers.py signs with the same value).
        "RuntimeCloud__GitOps__PollSchedule": NEVER_IN_A_TEST,
        # The autoscaler's timer too (tests/autoscaling/ evaluate through the API or the admin endpoint):
        # every host would evaluate every test's pools, between a test's own steps.
        "RuntimeCloud__Autoscaling__EvaluateSchedule": NEVER_IN_A_TEST,
        # The inventory scan too (tests scan through the API or the admin endpoint): every quarter hour, a timer's
        # scan of every environment would resolve a finding between a test's own steps, and the test's scan
        # would then report nothing resolved (tests/inventory/test_drift_end_to_end.py).
        "RuntimeCloud__Inventory__ScanSchedule": NEVER_IN_A_TEST,
        # The outbox dispatcher too (tests/test_outbox*.py call dispatch_pending themselves): every 15 s, every
        # host on a worker's Azurite read the pending markers of every stream any host there touched in the
        # last five minutes, one query a stream; py-spy put it at 15-18 % of a session host's CPU.
        "RuntimeCloud__Outbox__DispatchSchedule": NEVER_IN_A_TEST,
        # And the timers that only tend in the background: the artifact publisher every 10 s (the neighbours
        # tests that publish set a schedule of their own), the capacity maintenance every minute (the first
        # capacity call of a host seeds pools and editions) and the expiry sweeps' starter every minute (tests
        # that sweep start it through the admin endpoint). Each firing read storage on every test host, and
        # did work there: an idle test host read 5.75 times a second with them, 5.28 without (Azurite --debug).
        "RuntimeCloud__KnowledgeHost__PublishSchedule": NEVER_IN_A_TEST,
        "RuntimeCloud__Capacity__MaintenanceSchedule": NEVER_IN_A_TEST,
        "RuntimeCloud__Capacity__ExpiryStarterSchedule": NEVER_IN_A_TEST,
        # The backup export too (tests/backup/ run it themselves, with a location of their own): every 5 min each
        # host's export to the unreachable location failed and logged a stack trace, which a test watching
        # the session host's log for one (tests/test_security.py) could catch. A year's RPO, as the host demands.
        "RuntimeCloud__Backup__Schedule": NEVER_IN_A_TEST,
        "RuntimeCloud__Backup__RpoMinutes": str(366 * 24 * 60),
        "RuntimeCloudGitOps__WebhookSecret": "test-webhook-secret-0123456789abcdef",
        "AzureFunctionsWebHost__hostid": f"test-{uuid.uuid4().hex[:8]}",
        # Each host its own Durable task hub, so hosts sharing the test Azurite do not share work.
        "AzureFunctionsJobHost__extensions__durableTask__hubName": f"Test{hub}",
        # And its own runner-job queues: a job runs with the settings (targets, credentials) of the
        # host that launched it, and its completion notice reaches that host's orchestrations.
        "RuntimeCloud__IaC__JobQueue": f"runner-jobs-{hub}",
        "RuntimeCloud__IaC__JobResultsQueue": f"runner-job-results-{hub}",
        # Queue triggers read an idle queue every 2 s at most, not host.json's 0.5 s: a worker of `make test`
        # keeps several hosts running (each polling six queues) while its tests use one, and on two cores
        # those reads cost the suite more than a message found up to 1.5 s later does.
        "AzureFunctionsJobHost__extensions__queues__maxPollingInterval": "00:00:02",
        # One Durable control queue, not four: an idle host polls each of them, and on two cores those reads
        # cost the suite more than they show (one host serves every partition of its own hub anyway;
        # tests/durable_app/host.json keeps two for the tests of partitions). Azure accepts 1 to 16.
        "AzureFunctionsJobHost__extensions__durableTask__storageProvider__partitionCount": "1",
        # Each pool's expiry sweep every ten minutes, not every 30 s: no lease waits for a sweep (the next
        # acquirer takes an expired slot), and tests/capacity/test_expiry.py runs its own host sweeping every second.
        "RuntimeCloud__Capacity__SweepIntervalSeconds": "600",
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


# Hosts a few modules share, up only while a worker runs those modules (tests/support/host_groups.py).
FIXTURE_HOST_GROUP: HostGroup[HostProcess] = HostGroup(
    "fixture_host",
    frozenset(
        {
            "tests/test_host_keys.py",
            "tests/test_local_host_http.py",
            "tests/test_local_host_triggers.py",
            "tests/test_worker_validation.py",
        }
    ),
)
DURABLE_HOST_GROUP: HostGroup[DurableApp] = HostGroup(
    "durable",
    frozenset(
        {
            "tests/durable/test_failures.py",
            "tests/durable/test_management.py",
            "tests/durable/test_patterns.py",
            "tests/durable/test_restart.py",
            "tests/durable/test_webhook_keys.py",
        }
    ),
)
HOST_GROUPS: tuple[HostGroup[Any], ...] = (FIXTURE_HOST_GROUP, DURABLE_HOST_GROUP)


@pytest.fixture
def fixture_host(azurite: Azurite, key_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> HostProcess:
    """A small app of the tests' own, for the local host's own behaviour (one host for FIXTURE_HOST_GROUP)."""

    def start() -> HostProcess:
        log = tmp_path_factory.mktemp("logs") / "fixture-host.log"
        settings = app_settings(azurite, key_dir, FIXTURE_WORK_QUEUE="fixture-work")
        return HostProcess(FIXTURE_APP, settings, log).start()

    return FIXTURE_HOST_GROUP.shared(start, HostProcess.stop)


@pytest.hookimpl(trylast=True)  # after the test's own fixtures are torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    for group in HOST_GROUPS:
        group.leave(nextitem)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's, under `make test`
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with each host group's modules as one unit of work (one worker, one after another)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class ModulesAndHostGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            grouped = (f"host group {group.fixture}" for group in HOST_GROUPS if module in group.modules)
            return next(grouped, None) or str(super()._split_scope(nodeid))

    return ModulesAndHostGroups(config, log)


def _check_host_groups(item: pytest.Item) -> None:
    """A module that uses a group's host is in the group (else its host would start and stop around it)."""
    for group in HOST_GROUPS:
        if group.fixture in getattr(item, "fixturenames", ()) and not group.holds(item):
            message = f"{item.nodeid} uses {group.fixture}: add its module to that fixture's group in tests/conftest.py"
            raise pytest.UsageError(message)


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


# The tiers. A test is in the ``domain`` tier when it needs neither Azurite nor a host process: it
# does not request the session's Azurite (every host fixture does, through it), and neither its module
# nor any fixture it uses starts an Azurite or a host of its own. Everything else needs "the world".
# `make test-domain` runs the domain tier alone (pytest.ini, markers); `make test` runs both.
DOMAIN = "domain"
_STARTS_THE_WORLD = ("Azurite(", "HostProcess(")


@functools.cache
def _source_starts_the_world(source: str) -> bool:
    return any(call in source for call in _STARTS_THE_WORLD)


@functools.cache
def _module_starts_the_world(path: Path) -> bool:
    return _source_starts_the_world(path.read_text(encoding="utf-8"))


def _fixture_defs(item: pytest.Item) -> list[pytest.FixtureDef[object]]:
    """The fixtures ``item`` uses, its own and those they use in turn (the last definition of each name)."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's record of the closure, on every Function
    if info is None:
        return []
    return [definitions[-1] for definitions in info.name2fixturedefs.values() if definitions]


@functools.cache
def _fixture_starts_the_world(function: Callable[..., object]) -> bool:
    try:
        return _source_starts_the_world(inspect.getsource(function))
    except (OSError, TypeError):  # no source (a fixture pytest makes itself): none of ours
        return False


def _needs_the_world(item: pytest.Item, fixtures: list[pytest.FixtureDef[object]]) -> bool:
    if "azurite" in getattr(item, "fixturenames", ()) or _module_starts_the_world(item.path):
        return True
    return any(_fixture_starts_the_world(fixture.func) for fixture in fixtures)


# Under `make test` (pytest-xdist, `--dist loadscope`) each module's tests run together on one worker, so a
# host or an Azurite of a module's own starts once; the workers take modules in collection order. The
# modules that start hosts or Azurites of their own take longest, so they go first and the quick ones fill
# in at the end; first of all the suite's long poles (the longest modules of a run in four workers here,
# each over a minute), which would otherwise start last and keep every other worker waiting. Order only:
# an entry that is no longer long (or no longer there) costs some time, never a test.
LONG_POLES = (
    "tests/test_api_fuzz.py",
    "tests/test_orchestration_outage.py",
    "tests/provisioning/test_runner_jobs.py",
    "tests/neighbours/test_artifact_mirror.py",
    # Mostly waiting on a 100 s apply while its task hub moves twice (the module says why so long): last
    # of all, on a quiet machine, it kept one worker busy for a minute after the other three were done.
    "tests/provisioning/test_hub_move.py",
    "tests/gitops/test_crash_recovery.py",
    "tests/provisioning/test_runner_job_boundary.py",
)


def _starts_a_world_of_its_own(item: pytest.Item, fixtures: list[pytest.FixtureDef[object]]) -> bool:
    """Starts an Azurite or a host beyond the session's (in the module, or in a fixture narrower than the session)."""
    if _module_starts_the_world(item.path):
        return True
    return any(fixture.scope != "session" and _fixture_starts_the_world(fixture.func) for fixture in fixtures)


def _in_parallel_order(items: list[pytest.Item], own_world: set[str]) -> list[pytest.Item]:
    def rank(item: pytest.Item) -> tuple[int, int]:
        module = item.nodeid.split("::", 1)[0]
        if module in LONG_POLES:
            return (0, LONG_POLES.index(module))
        return (1, 0) if module in own_world else (2, 0)

    return sorted(items, key=rank)  # stable: a module's tests stay together and in their order


# The build tier: tests of what is built and deployed rather than of the product's logic (the Pulumi
# program under a mocked engine, the deployment zip, importing every module with no setting). They need
# no Azurite either, but they are not the domain tier's fast feedback; `make test` runs them with the rest.
BUILD = "build"
BUILD_TESTS = ("tests/infra/", "tests/test_package.py", "tests/test_import_reads_no_settings.py")


def _in_the_build_tier(item: pytest.Item) -> bool:
    return item.nodeid.startswith(BUILD_TESTS)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the marks added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    own_world: set[str] = set()
    for item in items:
        _check_host_groups(item)
        fixtures = _fixture_defs(item)
        if _in_the_build_tier(item):
            item.add_marker(BUILD)
        elif item.get_closest_marker(DOMAIN) is None and not _needs_the_world(item, fixtures):
            item.add_marker(DOMAIN)
        if _starts_a_world_of_its_own(item, fixtures):
            own_world.add(item.nodeid.split("::", 1)[0])
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker of `make test`; every worker orders alike
        items[:] = _in_parallel_order(items, own_world)


def _refuse_in_the_domain_tier(*args: object, **kwargs: object) -> None:
    raise AssertionError(
        "a test of the domain tier started an Azurite or a host process: request the azurite fixture "
        f"(or a fixture that starts one) so that it is counted as needing them ({_STARTS_THE_WORLD})"
    )


@pytest.fixture(autouse=True)
def _domain_tier_stays_domain(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tier's promise, kept: a test marked ``domain`` that starts Azurite or a host fails, in every run."""
    if request.node.get_closest_marker(DOMAIN) is not None:
        monkeypatch.setattr(Azurite, "start", _refuse_in_the_domain_tier)
        monkeypatch.setattr(HostProcess, "start", _refuse_in_the_domain_tier)
