"""Verifying an environment's receipts: every digest, and the hash chain that links them.

Each run records the SHA-256 of its receipts on its own row (``plan_digest``,
``apply_receipt_digest``), apart from the blobs; each apply receipt names the
digest of the environment's previous apply receipt (``previous_receipt_digest``),
and the environment row names the newest (``LastReceiptDigest``). So:

- a receipt whose stored bytes no longer hash to the digest its run recorded
  was edited (``digest``), or is gone (``missing``);
- an apply receipt whose ``previous_receipt_digest`` is not the digest of the
  apply receipt recorded before it breaks the chain (``link``): a receipt was
  removed, inserted or rewritten together with its run's digest;
- an environment whose ``LastReceiptDigest`` is not the newest receipt's
  digest has lost its head (``head``).

The chain's order is the order in which runs recorded their receipts: a run
ends (its final timeline entry) in the same write that moves the
environment's head to its receipt, and only one run of an environment is
active at a time. Problems are reported oldest first; ``first_broken`` is
where an auditor starts. ``receipts`` lists every receipt checked with where
it came from (``source``): ``store`` (written here), ``backup`` or ``mirror``
(a restore wrote it back from the backup, or from KnowledgeHost when the
backup lacked it).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from shared.platform.errors import NotFound
from shared.provisioning.receipts import ReceiptKind, ReceiptSource, ReceiptStore
from shared.provisioning.runs import Run
from shared.provisioning.store import ProvisioningStore

ProblemKind = Literal["digest", "missing", "link", "head"]


class ChainProblem(BaseModel):
    run_id: str | None
    receipt: ReceiptKind | None
    problem: ProblemKind
    detail: str


class CheckedReceipt(BaseModel):
    run_id: str
    receipt: ReceiptKind
    source: ReceiptSource  # store: written here; backup, mirror: a restore wrote it back from there


class ChainReport(BaseModel):
    tenant: str
    environment: str
    verified: bool
    receipts_checked: int
    chain_length: int
    head: str | None
    first_broken: ChainProblem | None = None
    problems: list[ChainProblem] = Field(default_factory=list)
    receipts: list[CheckedReceipt] = Field(default_factory=list)  # oldest first, with where each came from


def verify_environment(store: ProvisioningStore, receipts: ReceiptStore, tenant: str, environment: str) -> ChainReport:
    """Walk the environment's receipts oldest first; :class:`NotFound` for an unknown environment."""
    env = store.environment(tenant, environment)
    if env.etag is None:
        raise NotFound(f"environment {environment}")
    walk = _ChainWalk(receipts, tenant, environment)
    for run in sorted(store.runs(tenant, environment), key=_chain_order):
        walk.visit(run)
    head = env.get("LastReceiptDigest") or None
    if head != walk.previous:
        walk.problem(
            None,
            None,
            "head",
            f"the environment names {head or 'no receipt'} as its newest apply "
            f"receipt, but the newest recorded is {walk.previous or 'none'}",
        )
    problems = walk.problems
    return ChainReport(
        tenant=tenant,
        environment=environment,
        verified=not problems,
        receipts_checked=walk.checked,
        chain_length=walk.length,
        head=head,
        first_broken=problems[0] if problems else None,
        problems=problems,
        receipts=walk.receipts,
    )


def _chain_order(run: Run) -> tuple[int, str, int]:
    # Ended runs in the order they ended; runs still going (not yet in the chain) last.
    if run.state.is_final and run.timeline:
        return (0, run.timeline[-1].at, run.ordinal)
    return (1, "", run.ordinal)


class _ChainWalk:
    def __init__(self, receipts: ReceiptStore, tenant: str, environment: str) -> None:
        self._receipts = receipts
        self._tenant = tenant
        self._environment = environment
        self.previous: str | None = None  # the digest of the last apply receipt in the chain so far
        self.problems: list[ChainProblem] = []
        self.checked = 0
        self.length = 0
        self.receipts: list[CheckedReceipt] = []

    def problem(self, run_id: str | None, receipt: ReceiptKind | None, kind: ProblemKind, detail: str) -> None:
        self.problems.append(ChainProblem(run_id=run_id, receipt=receipt, problem=kind, detail=detail))

    def visit(self, run: Run) -> None:
        if run.plan_digest:
            self._check(run, "plan", run.plan_digest)
        if not run.apply_receipt_digest:
            return
        document = self._check(run, "apply", run.apply_receipt_digest)
        if document is not None:
            link = document.get("previous_receipt_digest")
            if link != self.previous:
                self.problem(
                    run.id,
                    "apply",
                    "link",
                    f"the apply receipt names {link or 'no receipt'} as the "
                    f"previous one, but the previous recorded is {self.previous or 'none'}",
                )
        if run.state.is_final:  # a run still finishing is not in the chain yet
            self.previous = run.apply_receipt_digest
            self.length += 1

    def _check(self, run: Run, kind: ReceiptKind, recorded: str) -> dict[str, Any] | None:
        self.checked += 1
        try:
            document, digest, source = self._receipts.read_with_source(self._tenant, self._environment, run.id, kind)
        except NotFound:
            self.problem(run.id, kind, "missing", f"the {kind} receipt recorded as {recorded} is gone")
            return None
        self.receipts.append(CheckedReceipt(run_id=run.id, receipt=kind, source=source))
        if digest != recorded:
            self.problem(
                run.id,
                kind,
                "digest",
                f"the stored {kind} receipt hashes to {digest}, not to the {recorded} its run recorded: it was altered",
            )
        return document
