"""The policy gate's objects, built once per process from settings and storage."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from shared.platform.credentials import azure_credential
from shared.platform.manifest import FeatureManifest
from shared.platform.storage.clients import shared_host_storage
from shared.policy.exceptions import ExceptionStore
from shared.policy.gate import PolicyGate, PolicyStatus, tree_for
from shared.wiring.settings import get_settings

# The folder of function_app.py: relative Directory settings start here. In Azure it is the
# deployment package's root, which holds policies/ (tools/package.py), so the default works there.
APP_ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def gate() -> PolicyGate:
    """One per process, so GovernanceHost's answers are cached across runs (``CacheSeconds``)."""
    settings = get_settings().runtime_cloud.policy
    token = governance_host_token(settings.governance_host_scope) if settings.governance_host_scope else None
    return PolicyGate(shared_host_storage(), tree_for(settings, APP_ROOT, token), settings.max_bundle_bytes)


def governance_host_token(scope: str) -> Callable[[], str]:
    """GovernanceHost's bearer token from the host's one credential (it caches tokens until they near expiry)."""

    def token() -> str:
        return azure_credential().get_token(scope).token

    return token


def status() -> PolicyStatus:
    """Health's view of the gate (source, installation bundle digest); raises when the policy cannot be read."""
    return gate().status()


@functools.lru_cache(maxsize=1)
def exceptions() -> ExceptionStore:
    return ExceptionStore(shared_host_storage())


MANIFEST = FeatureManifest(name="policy", module="provisioning", triggers=("functions.policy",))
