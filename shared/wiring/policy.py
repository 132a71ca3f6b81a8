"""The policy gate's objects, built once per process from settings and storage."""

from __future__ import annotations

import functools
from pathlib import Path

from shared.policy.exceptions import ExceptionStore
from shared.policy.gate import PolicyGate, tree_for
from shared.settings import get_settings
from shared.storage.clients import shared_host_storage

APP_ROOT = Path(__file__).resolve().parents[2]  # the folder of function_app.py: relative Directory settings start here


@functools.lru_cache(maxsize=1)
def gate() -> PolicyGate:
    """One per process, so GovernanceHost's answers are cached across runs (``CacheSeconds``)."""
    settings = get_settings().runtime_cloud.policy
    return PolicyGate(shared_host_storage(), tree_for(settings, APP_ROOT), settings.max_bundle_bytes)


@functools.lru_cache(maxsize=1)
def exceptions() -> ExceptionStore:
    return ExceptionStore(shared_host_storage())
