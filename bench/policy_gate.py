"""What the policy gate costs a plan step: the shipped bundle (policies/, production) with the stricter
examples (policies/examples/stricter.yaml) as the tenant's layer, 20 to 2,000 changes.

In process, no I/O (the gate's reads -- a bundle tree, one exceptions query when
something is violated -- are a file or HTTP read and one table query, small
beside a plan). Measured in one run, on one machine:

- **gate**: ``evaluate_rules`` + ``verdict_of`` of the repository's bundle
  (installation + production + the examples as a tenant layer: 7 rules, 5 of them per change) on a plan of N
  creates of queues, 1 in 10 without a ``team`` (so there are warnings and
  denials to record);
- **receipt** (the baseline): what the plan step already does with every plan,
  the plan receipt's canonical JSON and its SHA-256, for the same plan;
- the first evaluation of a bundle compiles it (cached by digest after that):
  measured apart as **compile**.

Printed: milliseconds per plan and per change, the gate ÷ receipt ratio per size,
and growth 200 -> 2,000 (10x: linear is 10). Recorded in ``.data/bench/latest.json``:
``policy_gate_vs_receipt_2000`` (gate ÷ receipt at 2,000 changes) and
``policy_gate_growth_10x``.

Run: ``.venv/bin/python bench/policy_gate.py [sizes...]`` (under a minute).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._results import record
from shared.iac.model import Action, ResourceChange
from shared.platform.auth.principal import PrincipalKind, Requester
from shared.platform.targets import ProvisioningTarget
from shared.policy.bundle import EffectiveBundle, effective_bundle, layer_paths, parse_layer
from shared.policy.evaluation import compile_bundle, evaluate_rules
from shared.policy.facts import PlanFacts
from shared.policy.sources import FileTree
from shared.policy.verdict import verdict_of

REPO = Path(__file__).resolve().parents[1]
TARGET = ProvisioningTarget.model_validate(
    {
        "Id": "bench",
        "Kind": "storage-account",
        "Region": "local",
        "Endpoint": "https://bench.blob.core.windows.net",
        "Credential": {"Kind": "managed-identity"},
    }
)


def changes(count: int) -> list[ResourceChange]:
    made = []
    for index in range(count):
        metadata = {"rc_tenant": "bench", "rc_environment": "bench"} | ({} if index % 10 == 0 else {"team": "t"})
        name = f"queue-{index:05d}"
        made.append(
            ResourceChange(
                address=f"queue/{name}", type="queue", name=name, action=Action.CREATE, after={"metadata": metadata}
            )
        )
    return made


def gate(bundle: EffectiveBundle, facts: PlanFacts) -> object:
    return verdict_of("files", bundle.digest, evaluate_rules(bundle, facts), [], datetime.now(UTC))


def receipt(planned: list[ResourceChange]) -> str:
    document = {"changes": [c.model_dump(mode="json") for c in planned]}
    return hashlib.sha256(json.dumps(document, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def main(sizes: list[int]) -> None:
    tree = FileTree(REPO / "policies", 1 << 20)
    layers = [parse_layer(p, d, 1 << 20) for p, _ in layer_paths("bench", "production") if (d := tree.read(p))]
    # The shipped default has 3 rules; the stricter examples as the tenant's layer make it 7 (5 per change).
    stricter = (REPO / "policies" / "examples" / "stricter.yaml").read_bytes()
    layers.append(parse_layer("tenants/bench/tenant.yaml", stricter, 1 << 20))
    bundle = effective_bundle("files", layers)
    compile_seconds = median_seconds(lambda: compile_bundle(bundle), 1)  # the first call compiles
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"compile of {len(bundle.rules())} rules: {compile_seconds * 1000:.1f} ms (once per bundle digest)")
    gate_ms: dict[int, float] = {}
    ratios: dict[int, float] = {}
    for size in sizes:
        planned = changes(size)
        facts = PlanFacts.of(
            tenant="bench",
            environment="bench",
            environment_class="production",
            target=TARGET,
            requester=Requester("bench", PrincipalKind.SERVICE),
            specification={"environment": "bench"},
            changes=planned,
        )
        repeat = 5 if size <= 200 else 3

        gate_s = median_seconds(functools.partial(gate, bundle, facts), repeat)
        receipt_s = median_seconds(functools.partial(receipt, planned), repeat)
        gate_ms[size] = gate_s * 1000
        ratios[size] = gate_s / receipt_s
        print(
            f"{size:>5} changes: gate {gate_s * 1000:8.1f} ms ({gate_s / size * 1e6:6.1f} µs/change), "
            f"receipt {receipt_s * 1000:7.1f} ms, gate/receipt {ratios[size]:.1f}x"
        )
    values: dict[str, float] = {}
    if 2000 in ratios:
        values["policy_gate_vs_receipt_2000"] = ratios[2000]
    if 200 in gate_ms and 2000 in gate_ms:
        values["policy_gate_growth_10x"] = gate_ms[2000] / gate_ms[200]
        print(f"growth 200 -> 2,000 changes: {values['policy_gate_growth_10x']:.1f}x (linear: 10)")
    if values:
        record("policy_gate", values, {"sizes": sizes, "gate_ms": {str(k): round(v, 1) for k, v in gate_ms.items()}})


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [20, 200, 2000])
