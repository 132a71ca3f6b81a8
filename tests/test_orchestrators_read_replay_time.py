"""Orchestrator functions read time only from their context, never from the app's clock.

An orchestrator is replayed from its history: ``context.current_utc_datetime``
gives each replay the time the first execution saw, while the wall clock
(``shared.platform.clock``, ``datetime.now``, ``time.time``) answers something
new each time, so a decision made on it could differ on replay. Activities, which
run once per scheduled call, may read the clock. This reads the source of every
orchestrator in ``orchestrations/`` and of the module's functions it calls (at
any depth), and fails naming the function that reads the wall clock.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

WALL_CLOCK = {("clock", "utcnow"), ("clock", "now_iso"), ("datetime", "now"), ("datetime", "utcnow"), ("time", "time")}


def orchestrators(tree: ast.Module) -> list[ast.FunctionDef]:
    def is_orchestration(decorator: ast.expr) -> bool:
        return (
            isinstance(decorator, ast.Call)
            and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "orchestration_trigger"
        )

    return [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and any(is_orchestration(d) for d in node.decorator_list)
    ]


def reached(start: ast.FunctionDef, functions: dict[str, ast.FunctionDef]) -> list[ast.FunctionDef]:
    """``start`` and the module's functions it names, at any depth."""
    seen: dict[str, ast.FunctionDef] = {}
    todo = [start]
    while todo:
        function = todo.pop()
        if function.name in seen:
            continue
        seen[function.name] = function
        todo += [
            functions[node.id] for node in ast.walk(function) if isinstance(node, ast.Name) and node.id in functions
        ]
    return list(seen.values())


def wall_clock_reads(function: ast.FunctionDef) -> list[str]:
    return [
        f"{node.value.id}.{node.attr} (line {node.lineno})"
        for node in ast.walk(function)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and (node.value.id, node.attr) in WALL_CLOCK
    ]


def test_no_orchestrator_reads_the_wall_clock():
    found, checked = [], 0
    for path in sorted((REPO / "orchestrations").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        for orchestrator in orchestrators(tree):
            checked += 1
            for function in reached(orchestrator, functions):
                found += [
                    f"{Path(path).name}: {orchestrator.name} → {function.name}: {read}"
                    for read in wall_clock_reads(function)
                ]

    assert checked >= 3  # provisioning, inventory's scan, capacity's expiry: the check saw them
    assert not found, found


def test_the_check_sees_a_wall_clock_read_in_a_helper():
    source = """
@bp.orchestration_trigger(context_name="context")
def run(context):
    yield from step(context)

def step(context):
    return clock.utcnow()
"""
    tree = ast.parse(source)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    [orchestrator] = orchestrators(tree)

    assert [read for function in reached(orchestrator, functions) for read in wall_clock_reads(function)] == [
        "clock.utcnow (line 7)"
    ]
