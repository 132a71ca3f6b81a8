"""Print the span tree of one provisioning run from the local telemetry (``make run`` writes it).

    .venv/bin/python -m tools.trace <run id> [--dir .data/telemetry]

Finds the traces that hold a span naming the run (attribute ``run_id``, or the
Durable instance id, which is the run id) in ``traces.jsonl`` and prints each
as a tree: offset from the trace's start, duration, span name, and the ids it
names. Spans are written in batches about a second after they end.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from shared.platform.telemetry.files import read_spans

SHOWN = (
    "tenant_id",
    "environment_id",
    "run_id",
    "lease_id",
    "pool",
    "durable.instance_id",
    "iac.runner",
    "http.response.status_code",
    "messaging.destination.name",
)


def traces_of(spans: list[dict[str, Any]], run_id: str) -> list[str]:
    found = []
    for span in spans:
        attributes = span["attributes"]
        if run_id in (attributes.get("run_id"), attributes.get("durable.instance_id")) and span["traceId"] not in found:
            found.append(span["traceId"])
    return found


def tree_lines(spans: list[dict[str, Any]], trace_id: str) -> list[str]:
    in_trace = [span for span in spans if span["traceId"] == trace_id]
    ids = {span["spanId"] for span in in_trace}
    children: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for span in in_trace:
        parent = span.get("parentSpanId") or None
        children[parent if parent in ids else None].append(span)
    start = min(int(span["startTimeUnixNano"]) for span in in_trace)
    lines = [f"trace {trace_id} ({len(in_trace)} spans)"]

    def walk(span: dict[str, Any], depth: int) -> None:
        began = (int(span["startTimeUnixNano"]) - start) / 1e6
        took = (int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])) / 1e6
        named = " ".join(f"{key}={span['attributes'][key]}" for key in SHOWN if key in span["attributes"])
        failed = " ERROR" if span.get("status", {}).get("code") == 2 else ""
        lines.append(f"{began:9.1f} ms {took:9.1f} ms  {'  ' * depth}{span['name']}{failed}  {named}".rstrip())
        for child in sorted(children.get(span["spanId"], []), key=lambda s: int(s["startTimeUnixNano"])):
            walk(child, depth + 1)

    for root in sorted(children[None], key=lambda s: int(s["startTimeUnixNano"])):
        walk(root, 0)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.trace", description=__doc__.splitlines()[0])
    parser.add_argument("run_id")
    parser.add_argument("--dir", default=".data/telemetry", help="the folder of traces.jsonl")
    args = parser.parse_args(argv)
    spans = read_spans(Path(args.dir))
    traces = traces_of(spans, args.run_id)
    if not traces:
        print(f"no span names run {args.run_id} in {Path(args.dir) / 'traces.jsonl'}", file=sys.stderr)
        return 1
    for trace_id in traces:
        print("\n".join(tree_lines(spans, trace_id)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
