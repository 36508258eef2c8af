"""Imports point one way (docs/architecture.md "Layers"): the shared runtime `tidelake/` imports nothing of
the products or the simulator, and what `backfill run` and `reconcile run` can reach imports nothing of the
simulator (`tidbsim/`, used only by `backfill demo`/`simulate`, the tests and the benches).

Read from the source with `ast`, every import included (also those inside functions and under
TYPE_CHECKING), so a lazy import that would reach across at run time fails here too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests import CHECKOUT

pytestmark = pytest.mark.unit

PACKAGES = ("tidelake", "backfill", "reconcile", "tidbsim")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(CHECKOUT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for pkg in PACKAGES for p in (CHECKOUT / pkg).rglob("*.py")}


def imports_of(module: str) -> set[str]:
    """Our modules that `module` imports anywhere in its text (the nearest module each import names)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def reachable(start: str) -> dict[str, str]:
    """Every module of ours that `start` reaches through imports, each with the module that imports it."""
    seen = {start: ""}
    todo = [start]
    while todo:
        current = todo.pop()
        for target in imports_of(current):
            if target not in seen:
                seen[target] = current
                todo.append(target)
    return seen


def chain(seen: dict[str, str], module: str) -> str:
    steps = [module]
    while seen[steps[-1]]:
        steps.append(seen[steps[-1]])
    return " <- ".join(steps)


def test_the_shared_runtime_imports_nothing_of_the_products_or_the_simulator() -> None:
    assert any(m.startswith("tidelake.") for m in MODULES)
    reaching_up = sorted(
        f"{module} -> {target}"
        for module in MODULES
        if module.split(".")[0] == "tidelake"
        for target in imports_of(module)
        if target.split(".")[0] != "tidelake"
    )
    assert reaching_up == []


@pytest.mark.parametrize(
    "command_module",
    ["backfill.run", "backfill.status", "backfill.maintain", "backfill.snapshot", "reconcile.cli"],
)
def test_the_production_commands_reach_nothing_of_the_simulator(command_module: str) -> None:
    seen = reachable(command_module)
    assert len(seen) > 10  # the walk found the command's modules (a wrong root would pass vacuously)
    simulator = [chain(seen, m) for m in sorted(seen) if m.split(".")[0] == "tidbsim" or m == "backfill.demo"]
    assert simulator == []


def test_the_walk_sees_lazy_imports() -> None:
    """The check must be able to fail: the `backfill` command module reaches the simulator through its
    `simulate` command's import inside a function."""
    seen = reachable("backfill.cli")
    assert "tidbsim.cli" in seen and "backfill.demo" in seen


def test_row_changes_flow_one_way_from_the_sources_through_the_changes_and_the_apply_stage_to_the_sink() -> (
    None
):
    """Sources import the row-change contract and the collapse rule (`backfill.changes`) downward and never
    the apply stage; the changes import neither; the apply stage imports no source; the sink, which the
    apply stage commits through, imports none of them."""
    below = {
        "backfill.sources": ("backfill.apply", "backfill.sink"),
        "backfill.changes": ("backfill.apply", "backfill.sources", "backfill.sink"),
        "backfill.apply": ("backfill.sources",),
        "backfill.sink": ("backfill.apply", "backfill.sources", "backfill.changes"),
    }
    wrong = sorted(
        f"{module} -> {target}"
        for module in MODULES
        for layer, forbidden in below.items()
        if module == layer or module.startswith(f"{layer}.")
        for target in imports_of(module)
        if any(target == f or target.startswith(f"{f}.") for f in forbidden)
    )
    assert any(m.startswith("backfill.changes.") for m in MODULES)
    assert "backfill.sink" in imports_of("backfill.apply.merge")  # the apply stage commits through it
    assert wrong == []


def test_only_one_module_names_delta_sparks_private_classes() -> None:
    """`tidelake.delta_internals` is the one module behind the delta-spark version check that drives
    `org.apache.spark.sql.delta.*` (test_delta_internals.py probes them); the session's catalog setting,
    which Delta documents, names one too."""
    public = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    naming = sorted(
        module
        for module, path in MODULES.items()
        if "org.apache.spark.sql.delta." in path.read_text(encoding="utf-8").replace(public, "")
    )
    assert naming == ["tidelake.delta_internals"]
