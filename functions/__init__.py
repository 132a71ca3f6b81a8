"""HTTP, queue and timer triggers, one module per area.

``blueprints_for`` answers which blueprints the app registers: those of every
enabled feature's manifest (:mod:`shared.wiring.features`), the host's own always.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

import azure.durable_functions as df

from shared.wiring.features import enabled_manifests


def blueprints_for(enabled_modules: Iterable[str]) -> list[df.Blueprint]:
    names = [name for manifest in enabled_manifests(list(enabled_modules)) for name in manifest.triggers]
    return [importlib.import_module(name).bp for name in names]
