"""Hosts of the app with the policy gate on: one reading a bundle tree from files, one from a
stand-in GovernanceHost (a local static HTTP server: the edge of the world, as GovernanceHost is
another service). Each test uses a tenant of its own and writes that tenant's layer, so tests
sharing a host never see each other's rules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devhost.azurite import Azurite
from tests.conftest import REPO, app_settings
from tests.policy.helpers import INSTALLATION, PRODUCTION, GovernanceHostStandIn, write_layer
from tests.support.host import HostProcess


@pytest.fixture(scope="session")
def policy_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("policy-tree")
    write_layer(tree, "installation.yaml", INSTALLATION)
    write_layer(tree, "classes/production.yaml", PRODUCTION)
    return tree


@pytest.fixture(scope="package")
def policy_host(
    azurite: Azurite, key_dir: Path, policy_tree: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HostProcess]:
    """The product with ``RuntimeCloud__Policy__Source=files`` on the session's tree.

    Package-scoped, like the other hosts with settings of their own: every host on the session's
    account takes from the same queues (promotions, syncs), so one with other settings must be gone
    before other packages' tests send messages that any host may take."""
    settings = app_settings(
        azurite, key_dir, RuntimeCloud__Policy__Source="files", RuntimeCloud__Policy__Directory=str(policy_tree)
    )
    host = HostProcess(REPO, settings, tmp_path_factory.mktemp("logs") / "policy-host.log").start()
    yield host
    host.stop()


@pytest.fixture(scope="session")
def governance_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("governance-tree")
    write_layer(tree, "installation.yaml", INSTALLATION)
    return tree


@pytest.fixture(scope="package")
def governance_stand_in(governance_tree: Path) -> Iterator[GovernanceHostStandIn]:
    server = GovernanceHostStandIn(governance_tree).start()
    yield server
    server.stop()


@pytest.fixture(scope="package")
def governed_host(
    azurite: Azurite,
    key_dir: Path,
    governance_stand_in: GovernanceHostStandIn,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[HostProcess]:
    """The product reading its policy from the stand-in GovernanceHost, uncached (every plan asks)."""
    settings = app_settings(
        azurite,
        key_dir,
        RuntimeCloud__Policy__Source="http",
        RuntimeCloud__Policy__GovernanceHostUrl=governance_stand_in.url,
        RuntimeCloud__Policy__CacheSeconds="0",
        RuntimeCloud__Policy__TimeoutSeconds="2",
    )
    host = HostProcess(REPO, settings, tmp_path_factory.mktemp("logs") / "governed-host.log").start()
    yield host
    host.stop()
