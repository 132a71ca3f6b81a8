"""GitOps tests drive the session's host (tests/conftest.py gives it the allowed Git folder, the
installation's webhook secret and a poll that runs only when a test asks)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import git_sources_root
from tests.gitops.helpers import OPERATOR, BareRepository
from tests.provisioning.helpers import unique


@pytest.fixture
def tenant() -> str:
    return f"gitops-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def operator(mint, tenant) -> str:
    return mint(tenant, **OPERATOR)


@pytest.fixture
def environment() -> str:
    return unique("follow")


@pytest.fixture
def repository(key_dir: Path, environment: str) -> Iterator[BareRepository]:
    """A bare repository in the folder the test hosts allow."""
    repo = BareRepository(git_sources_root(key_dir) / f"{environment}.git")
    yield repo
    repo.close()


@pytest.fixture
def new_repository(key_dir: Path) -> Callable[[str], BareRepository]:
    return lambda name: BareRepository(git_sources_root(key_dir) / f"{name}.git")
