"""The local host's keys, as Azure's Functions host has them.

Azure protects the admin API (``/admin/functions/{name}``) with the host's
*master* key and the Durable webhooks (``/runtime/webhooks/durabletask/...``)
with the *system* key ``durabletask_extension``; a caller passes a key as the
``x-functions-key`` header or the ``code`` query parameter, and the Durable
client's check-status URLs carry ``code=`` so that whoever receives them can
use them. The local host does the same, so that nothing on the developer's
machine (another user, a web page in their browser) can start functions,
raise approval events or read orchestration inputs without a key.

The keys are random, created on first start under the git-ignored data folder
(``DEVHOST_KEY_DIRECTORY``, default ``.data/keys``) with owner-only access,
and shown by ``python -m devhost keys``.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

KEYS_FILE = "host-keys.json"
KEY_DIRECTORY_SETTING = "DEVHOST_KEY_DIRECTORY"
DURABLE_SYSTEM_KEY = "durabletask_extension"
KEY_HEADER = "x-functions-key"
KEY_QUERY = "code"


class HostKeysDocument(TypedDict):
    """The keys file (and ``devhost keys``): the master key and the system keys by name."""

    masterKey: str
    systemKeys: dict[str, str]


@dataclass(frozen=True)
class HostKeys:
    master: str
    durable: str

    def is_master(self, presented: str | None) -> bool:
        return _same(presented, self.master)

    def is_durable(self, presented: str | None) -> bool:
        """The Durable webhooks take their system key, or the master key (as in Azure)."""
        return _same(presented, self.durable) or _same(presented, self.master)

    def as_document(self) -> HostKeysDocument:
        return {"masterKey": self.master, "systemKeys": {DURABLE_SYSTEM_KEY: self.durable}}


def presented_key(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The key a request carries: the header wins over the query parameter, as in Azure."""
    return headers.get(KEY_HEADER) or query.get(KEY_QUERY)


def key_directory(app_dir: Path) -> Path:
    configured = os.environ.get(KEY_DIRECTORY_SETTING)
    return Path(configured) if configured else app_dir / ".data" / "keys"


def ensure_host_keys(directory: Path) -> HostKeys:
    """Load the host's keys, creating them (atomically, readable by the owner only) the first time."""
    path = directory / KEYS_FILE
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        fresh = HostKeys(master=secrets.token_urlsafe(32), durable=secrets.token_urlsafe(32))
        _write_once(path, json.dumps(fresh.as_document(), indent=2).encode())
    document = json.loads(path.read_text())
    return HostKeys(master=document["masterKey"], durable=document["systemKeys"][DURABLE_SYSTEM_KEY])


def _write_once(path: Path, content: bytes) -> None:
    """Write to a private temporary file, then link it in place; a concurrent first start keeps the winner's keys."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".keys-")
    try:
        os.fchmod(handle, 0o600)
        os.write(handle, content)
        os.close(handle)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(temporary)


def _same(presented: str | None, expected: str) -> bool:
    return bool(presented) and hmac.compare_digest(presented.encode(), expected.encode())  # type: ignore[union-attr]
