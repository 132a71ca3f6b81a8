"""Which Git repositories a specification may come from (``RuntimeCloud:Provisioning:GitAllowedSources``).

A Git source is read by the host's own identity, from the host's own disk
or network, so a caller must not be able to name just any path or URL: the
installation lists what it allows, and nothing else is read.

The setting is a JSON array (or a comma list) of allowed sources, each one of:

- an absolute folder (``/srv/desired-state``): any repository inside it. The
  repository path is resolved (symlinks followed) before it is compared, and
  the repository's Git folder, shared folder and object alternates must be
  inside the folder too;
- an https URL prefix (``https://github.com/contoso/``): scheme, host and
  port must equal the prefix's, and the path must start with the prefix's
  path at a ``/`` boundary. URLs with credentials, a query or a fragment, and
  redirects, are refused.

Or a JSON object from tenant (or ``*``, every tenant) to such an array, when
tenants may read different sources. Nothing is allowed by default.

Why a module of its own: ``shared.wiring.settings`` imports it, so it must not import
``shared.wiring.settings``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from shared.platform.errors import RuntimeCloudError

EVERY_TENANT = "*"


@dataclass(frozen=True)
class LocalRoot:
    folder: Path


@dataclass(frozen=True)
class UrlPrefix:
    host: str
    port: int
    path: str  # always ends with "/"


AllowedSource = LocalRoot | UrlPrefix


@dataclass(frozen=True)
class LocalRepository:
    path: Path
    root: Path


@dataclass(frozen=True)
class RemoteRepository:
    url: str


class NotAllowed(RuntimeCloudError):
    """The repository is not one the installation allows (the message never says why)."""


def parse_allowed_sources(value: Any) -> dict[str, list[str]]:
    """The setting as ``{tenant or "*": [source, ...]}``; ValueError naming a bad entry."""
    if isinstance(value, str):
        text = value.strip()
        value = json.loads(text) if text[:1] in ("[", "{") else [p.strip() for p in text.split(",") if p.strip()]
    if value is None:
        return {}
    if isinstance(value, list):
        value = {EVERY_TENANT: value}
    if not isinstance(value, dict):
        raise ValueError("a JSON array of sources, or an object from tenant (or '*') to such an array")
    parsed: dict[str, list[str]] = {}
    for tenant, sources in value.items():
        if not isinstance(sources, list) or not all(isinstance(source, str) for source in sources):
            raise ValueError(f"{tenant}: a list of folders and https:// URL prefixes")
        for source in sources:
            allowed_source(source)  # refuses what cannot be an allowed source
        parsed[str(tenant)] = list(sources)
    return parsed


def allowed_source(entry: str) -> AllowedSource:
    if entry.startswith("https://"):
        parts = _clean_url(entry)
        if parts is None:
            raise ValueError(f"{entry!r}: an https:// URL prefix without credentials, query or fragment")
        return UrlPrefix(parts.hostname or "", parts.port or 443, parts.path.rstrip("/") + "/")
    if os.path.isabs(entry):
        return LocalRoot(Path(entry).resolve())
    raise ValueError(f"{entry!r}: an absolute folder or an https:// URL prefix")


def sources_for(configured: dict[str, list[str]], tenant: str) -> list[AllowedSource]:
    entries = configured.get(EVERY_TENANT, []) + configured.get(tenant, [])
    return [allowed_source(entry) for entry in entries]


def locate(repository: str, allowed: list[AllowedSource]) -> LocalRepository | RemoteRepository:
    """Where to read ``repository`` from, if one of ``allowed`` covers it; else :class:`NotAllowed`."""
    if repository.startswith("https://"):
        parts = _clean_url(repository)
        if parts is not None:
            port, path = parts.port or 443, parts.path or "/"
            for source in allowed:
                if (
                    isinstance(source, UrlPrefix)
                    and source.host == parts.hostname
                    and source.port == port
                    and (path.rstrip("/") + "/").startswith(source.path)
                ):
                    return RemoteRepository(parts.geturl())
        raise NotAllowed()
    if "://" in repository or not os.path.isabs(repository) or "\0" in repository:
        raise NotAllowed()  # ssh://, file://, git://, http://, relative paths: never
    resolved = Path(repository).resolve()
    for source in allowed:
        if isinstance(source, LocalRoot) and resolved.is_relative_to(source.folder):
            return LocalRepository(resolved, source.folder)
    raise NotAllowed()


def _clean_url(url: str) -> SplitResult | None:
    """The URL's parts if it is a plain https URL (no credentials, query, fragment, or odd path)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return None
    segments = parts.path.split("/")
    if (
        parts.scheme != "https"
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or parts.query
        or parts.fragment
        or "%" in parts.path
        or "\\" in parts.path
        or any(segment in (".", "..") for segment in segments)
        or not url.isprintable()
        or " " in url
    ):
        return None
    return parts
