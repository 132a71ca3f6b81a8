"""The policy gate: load the effective bundle, check a plan against it, keep the bundle it used.

Provisioning calls it twice in a run's plan step (``shared.provisioning.lifecycle``):

1. :meth:`PolicyGate.load` *before* the runner plans, so that an unreachable
   GovernanceHost or an invalid bundle fails the run at once
   (:class:`~shared.policy.sources.PolicyUnavailable`, reason ``policy-unavailable``)
   instead of after a long plan -- and never lets it through unchecked;
2. :meth:`PolicyGate.check` with the planned changes: the verdict goes into the
   plan receipt and (summarised) onto the run.

A checked bundle is kept as a snapshot blob, ``policy-bundles/{digest}.json``
(written once; each layer's text with its SHA-256), so the digest a receipt
records can always be turned back into the rules that allowed the apply. A
dry run (``record=False``) writes nothing.

The gate is on by default (``Source`` ``files`` on the shipped ``policies/``).
With ``Source`` ``none`` -- an explicit opt-out, warned about in the log when
the gate is built -- :meth:`load` answers None and every verdict is ``allow``
with ``source: none``, which the receipt records as such; :meth:`status`
(health's ``policy`` check) shows it off.

Snapshots are audit records, like receipts: the host never deletes one (the
same digest is rewritten by no one), so a receipt's digest always resolves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from azure.core.exceptions import ResourceExistsError

from shared.platform import clock
from shared.platform.logs import app_logger
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import store_errors
from shared.policy.bundle import EffectiveBundle, InvalidBundle, effective_bundle, layer_paths, parse_layer
from shared.policy.evaluation import compile_bundle, evaluate_rules
from shared.policy.exceptions import ExceptionStore
from shared.policy.facts import PlanFacts
from shared.policy.settings import PolicySettings, PolicySource
from shared.policy.sources import BundleTree, FileTree, HttpTree, PolicyUnavailable
from shared.policy.verdict import PolicyVerdict, verdict_of

SNAPSHOTS_CONTAINER = "policy-bundles"
INSTALLATION_LAYER = "installation.yaml"

log = app_logger("policy")


def tree_for(settings: PolicySettings, app_root: Path, token: Callable[[], str] | None = None) -> BundleTree | None:
    """Where the layers come from; ``token``: GovernanceHost's bearer token, used when a scope is configured."""
    if settings.source is PolicySource.FILES:
        directory = Path(settings.directory)
        return FileTree(directory if directory.is_absolute() else app_root / directory, settings.max_bundle_bytes)
    if settings.source is PolicySource.HTTP:
        return HttpTree(
            settings.governance_host_url,
            timeout=settings.timeout_seconds,
            cache_seconds=settings.cache_seconds,
            max_bytes=settings.max_bundle_bytes,
            token=token if settings.governance_host_scope else None,
        )
    log.warning("RuntimeCloud:Policy:Source is none: plans are NOT checked against any policy (receipts say so)")
    return None


@dataclass(frozen=True)
class PolicyStatus:
    """What health shows: the source, and the digest and size of the installation's bundle as read now."""

    source: str
    enabled: bool
    installation_digest: str | None  # the digest of installation.yaml alone as an effective bundle
    rules: int

    @property
    def detail(self) -> str:
        if not self.enabled:
            return "none: the gate is off (RuntimeCloud:Policy:Source=none); plans are not checked against policy"
        return f"{self.source}: installation bundle {self.installation_digest}, {self.rules} rules"


class PolicyGate:
    def __init__(self, storage: StorageClients, tree: BundleTree | None, max_bundle_bytes: int) -> None:
        self._tree = tree
        self._max_bytes = max_bundle_bytes
        self._exceptions = ExceptionStore(storage)
        self._snapshots = storage.blobs.get_container_client(SNAPSHOTS_CONTAINER)

    @property
    def source(self) -> str:
        return self._tree.name if self._tree is not None else PolicySource.NONE.value

    def status(self) -> PolicyStatus:
        """The installation layer read now (:class:`PolicyUnavailable` when it cannot be, as a run would fail)."""
        if self._tree is None:
            return PolicyStatus(source=self.source, enabled=False, installation_digest=None, rules=0)
        data = self._tree.read(INSTALLATION_LAYER)
        if data is None:
            raise PolicyUnavailable(f"the policy source ({self._tree.name}) has no {INSTALLATION_LAYER}")
        try:
            bundle = effective_bundle(self._tree.name, [parse_layer(INSTALLATION_LAYER, data, self._max_bytes)])
            compile_bundle(bundle)
        except InvalidBundle as error:
            raise PolicyUnavailable(f"the policy bundle is invalid: {error}") from None
        return PolicyStatus(self._tree.name, True, bundle.digest, len(bundle.layers[0].bundle.rules))

    def load(self, tenant: str, environment_class: str) -> EffectiveBundle | None:
        """The effective bundle for a tenant's environment class; None when no gate is configured."""
        if self._tree is None:
            return None
        layers = []
        try:
            for path, required in layer_paths(tenant, environment_class):
                data = self._tree.read(path)
                if data is None:
                    if required:
                        raise PolicyUnavailable(f"the policy source ({self._tree.name}) has no {path}")
                    continue
                layers.append(parse_layer(path, data, self._max_bytes))
            bundle = effective_bundle(self._tree.name, layers)
            compile_bundle(bundle)  # a rule that is not CEL refuses the bundle now, not half-way through a check
        except InvalidBundle as error:
            raise PolicyUnavailable(f"the policy bundle is invalid: {error}") from None
        return bundle

    def check(self, bundle: EffectiveBundle | None, facts: PlanFacts, *, record: bool = True) -> PolicyVerdict:
        """The verdict on a plan. ``record``: keep the bundle's snapshot (a dry run records nothing)."""
        moment = clock.utcnow()
        if bundle is None:
            return PolicyVerdict(
                source=self.source, bundle_digest=None, outcome="allow", evaluated_at=moment.isoformat()
            )
        results = evaluate_rules(bundle, facts)
        violated = any(result.violations for result in results)
        # Exceptions are read only when something is violated: a clean plan costs no table query.
        exceptions = self._exceptions.active(facts.tenant, facts.environment, moment) if violated else []
        verdict = verdict_of(bundle.source, bundle.digest, results, exceptions, moment)
        if record:
            self._snapshot(bundle)
        return verdict

    def _snapshot(self, bundle: EffectiveBundle) -> None:
        data = json.dumps(bundle.document(with_text=True), sort_keys=True, separators=(",", ":")).encode()
        try:
            with store_errors():
                self._snapshots.upload_blob(f"{bundle.digest}.json", data, overwrite=False)
        except ResourceExistsError:
            pass  # the same digest is the same policy: written once, by whoever checked it first

    def snapshot(self, digest: str) -> dict[str, object] | None:
        """A recorded bundle by its digest (what a receipt names), or None."""
        from azure.core.exceptions import ResourceNotFoundError

        try:
            with store_errors():
                data = self._snapshots.download_blob(f"{digest}.json").readall()
        except ResourceNotFoundError:
            return None
        document: dict[str, object] = json.loads(data)
        return document
