"""The package's shape: no import cycles, no private cross-imports, layers that import only downwards.

The graph comes from the source (``tests/core/import_graph.py``), so a failure names the
``file:line`` of each import to change. ARCHITECTURE.md describes the layers checked here.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.core.import_graph import (
    REPO_ROOT,
    ImportEdge,
    import_cycles,
    import_edges,
    library_modules,
    private_imports,
    private_module_owner,
)

EDGES = import_edges()

# The bottom of zeus_core: what each may import from the library, whether at module level, inside a
# function or for type checkers. Everything else stands on these, so they must not point back up.
FOUNDATION: dict[str, set[str]] = {
    "zeus_core.exceptions": set(),
    "zeus_core.callback": set(),
    "zeus_core.distributed": set(),
    "zeus_core.console": {"zeus_core.distributed"},
    "zeus_core.metric": {"zeus_core.exceptions"},
    "zeus_core.monitor.measurement": set(),
    "zeus_core.data": {"zeus_core.exceptions"},  # the bundled measured data
    "zeus_core.data.__main__": {"zeus_core.data", "zeus_core.exceptions"},
    # carbon intensity and cost of energy (the shipped table, a user's value, live providers)
    "zeus_core.carbon": {"zeus_core.carbon._footprint", "zeus_core.carbon._table"},
}

# What the device layer may stand on besides itself.
DEVICE_FOUNDATION = {"zeus_core.exceptions", "zeus_core.console"}
# `zeus-suite env` lives beside discovery but is a command: it may use layers above the devices.
DEVICE_COMMANDS = {"zeus_core.device._cli_env"}


# The layers of ARCHITECTURE.md, bottom first: (name, module prefixes). A module imports only from its
# own layer or a lower one. Commands and the package facades (cli.py, zeus_core/__init__.py,
# device/_cli_env.py) sit outside the layers and are not checked here.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", tuple(FOUNDATION)),
    # settings (and its process-wide exit hooks): recording and restoring GPU settings
    ("device", ("zeus_core.device", "zeus_core.settings", "zeus_core._restore_hooks")),
    ("monitor", ("zeus_core.monitor", "zeus_core.profile")),
    ("optimizers", ("zeus_core.optimizer",)),
    # simulated devices and fakes: built on the devices and on the optimizers' data (Perseus profiles)
    ("testing", ("zeus_core.testing",)),
    # the session under every adapter: lifecycle, tracker, batch-size trial reporter
    ("training", ("zeus_core.training",)),
    ("simulate", ("zeus_core.simulate",)),
    ("integrations", ("zeus_integrations",)),
    # `zeus-suite report`: reads run folders, draws; nothing in the library imports it
    ("report", ("zeus_core.report",)),
]
OUTSIDE_LAYERS = {"zeus_core", "zeus_core._cli", "zeus_core._lazy", "zeus_integrations", *DEVICE_COMMANDS}


def _outside_layers(module: str) -> bool:
    """The command line (``_cli_<command>`` modules) and the package faces sit beside the layers."""
    return module in OUTSIDE_LAYERS or module.rsplit(".", 1)[-1].startswith("_cli_")


def _layer(module: str) -> int | None:
    if _outside_layers(module):
        return None
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


def _listing(edges: list[ImportEdge]) -> str:
    return "\n  " + "\n  ".join(e.describe() for e in edges)


def test_the_graph_sees_the_library() -> None:
    modules = library_modules()
    assert {"zeus_core", "zeus_core.device.base", "zeus_integrations.lightning"} <= set(modules)
    importers = {e.importer for e in EDGES}
    assert "zeus_core.device.nvidia" in importers and "zeus_integrations.lightning" in importers
    # function-level and TYPE_CHECKING imports are seen too
    assert any(not e.module_level for e in EDGES) and any(e.type_checking for e in EDGES)


def test_no_import_cycle_among_module_level_imports() -> None:
    cycles = import_cycles([e for e in EDGES if e.runs_on_import])
    message = "".join(f"\nimport cycle:{_listing(cycle)}" for cycle in cycles)
    assert not cycles, message + "\nMove the shared names into a lower module, or import inside the function."


def test_no_cycle_through_the_device_layer_even_via_function_imports() -> None:
    runtime = [e for e in EDGES if not e.type_checking]
    cycles = [c for c in import_cycles(runtime) if any(e.importer.startswith("zeus_core.device") for e in c)]
    message = "".join(f"\nimport cycle:{_listing(cycle)}" for cycle in cycles)
    assert not cycles, message + "\nVendors use zeus_core.device.registry, never discovery."


def test_no_module_imports_another_packages_private_module() -> None:
    offending = private_imports(EDGES)
    assert not offending, (
        "private modules imported from outside their package:"
        + _listing(offending)
        + "\nMake the module public (no leading underscore) and document it, or move what is shared."
    )


@pytest.mark.parametrize(
    ("module", "owner"),
    [
        ("zeus_core.optimizer.power_limit._restore", "zeus_core.optimizer.power_limit"),
        ("zeus_core._private.deep", "zeus_core"),
        ("zeus_core.device.base", None),
        ("zeus_core.__init__", None),
    ],
)
def test_private_module_owner(module: str, owner: str | None) -> None:
    assert private_module_owner(module) == owner


def test_private_imports_are_found_only_outside_the_code_allowed_to_use_them() -> None:
    def edge(importer: str, imported: str) -> ImportEdge:
        return ImportEdge(importer, imported, "x.py", 1, True, False)

    inside = edge("zeus_core.optimizer.power_limit._optimizer", "zeus_core.optimizer.power_limit._restore")
    library = edge("zeus_core.training._lifecycle", "zeus_core.testing._simulated_gpu")
    adapter = edge("zeus_integrations.lightning", "zeus_core.training._lifecycle")
    into_adapters = edge("zeus_core.training._lifecycle", "zeus_integrations.pipeline._emulation")
    user = edge("examples.quickstart", "zeus_core.monitor._energy")
    assert private_imports([inside, library, adapter, into_adapters, user]) == [into_adapters, user]


def test_a_cycle_is_reported_with_its_lines() -> None:
    a_to_b = ImportEdge("pkg.a", "pkg.b", "pkg/a.py", 3, True, False)
    b_to_a = ImportEdge("pkg.b", "pkg.a", "pkg/b.py", 7, False, False)
    c_to_a = ImportEdge("pkg.c", "pkg.a", "pkg/c.py", 1, True, False)
    assert import_cycles([a_to_b, b_to_a, c_to_a]) == [[a_to_b, b_to_a]]
    assert import_cycles([a_to_b, c_to_a]) == []


@pytest.mark.parametrize("module", sorted(FOUNDATION))
def test_foundation_modules_import_nothing_above_them(module: str) -> None:
    above = [e for e in EDGES if e.importer == module and e.imported not in FOUNDATION[module]]
    assert not above, f"{module} is at the bottom of zeus_core and must not import:" + _listing(above)


def test_devices_stand_only_on_the_foundation() -> None:
    above = [
        e
        for e in EDGES
        if e.importer.startswith("zeus_core.device")
        and e.importer not in DEVICE_COMMANDS
        and not e.imported.startswith("zeus_core.device")
        and e.imported not in DEVICE_FOUNDATION
    ]
    assert not above, "device modules import layers above them:" + _listing(above)


def test_layers_import_only_downwards() -> None:
    upwards = []
    for edge in EDGES:
        low, high = _layer(edge.importer), _layer(edge.imported)
        if not edge.type_checking and low is not None and high is not None and high > low:
            upwards.append(edge)
    names = " < ".join(name for name, _ in LAYERS)
    assert not upwards, f"imports that point up the layers ({names}):" + _listing(upwards)


def test_every_library_module_has_a_layer() -> None:
    unplaced = sorted(m for m in library_modules() if _layer(m) is None and not _outside_layers(m))
    assert not unplaced, (
        f"modules in no layer: {unplaced}. Add each to LAYERS in tests/core/test_architecture.py (and "
        "to ARCHITECTURE.md), by what it imports and what imports it."
    )


def test_every_device_module_imports_first_in_a_fresh_interpreter() -> None:
    modules = sorted(m for m in library_modules() if m.startswith("zeus_core.device"))
    for module in modules:
        out = subprocess.run(
            [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, cwd=REPO_ROOT
        )
        assert out.returncode == 0, f"`import {module}` failed on its own:\n{out.stderr}"
