"""The package's shape: no import cycles, no private cross-imports, layers that import only downwards.

The graph comes from the source (``tests/core/import_graph.py``), so a failure names the
``file:line`` of each import to change. ARCHITECTURE.md describes the layers checked here.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.import_graph import (
    REPO_ROOT,
    ImportEdge,
    import_cycles,
    import_edges,
    imported_modules,
    library_modules,
    private_imports,
    private_module_owner,
    torch_patches,
)

EDGES = import_edges()

# The bottom of zeus_core: what each may import from the library, whether at module level, inside a
# function or for type checkers. Everything else stands on these, so they must not point back up.
FOUNDATION: dict[str, set[str]] = {
    "zeus_core.exceptions": set(),
    "zeus_core.callback": set(),
    "zeus_core._distributed": set(),
    "zeus_core.console": {"zeus_core._distributed"},
    "zeus_core._cost": {"zeus_core.exceptions"},
    "zeus_core._deprecation": set(),
    "zeus_core.monitor._measurement": set(),
    "zeus_core.data": {"zeus_core.exceptions"},  # the bundled measured data
    "zeus_core._files": {"zeus_core.exceptions"},  # file errors naming the field; safe writes
    "zeus_core._arg_types": set(),  # command-line numbers: finite, within bounds
    "zeus_core.data.__main__": {"zeus_core.data", "zeus_core.exceptions"},
    # carbon intensity and cost of energy (the shipped table, a user's value, live providers)
    "zeus_core.carbon": {"zeus_core.carbon._footprint", "zeus_core.carbon._table"},
    "zeus_core.carbon._footprint": {
        "zeus_core.carbon._table",
        "zeus_core.console",
        "zeus_core.exceptions",
    },
    "zeus_core.carbon._table": {"zeus_core.data", "zeus_core.exceptions"},
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
    (
        "device",
        ("zeus_core.device", "zeus_core.settings", "zeus_core._restore_hooks", "zeus_core._settings_record"),
    ),
    # the privileged daemon (`zeus-suite daemon`): zeusd's API over the devices, with leases
    ("daemon", ("zeus_core.daemon",)),
    # measurement, and `zeus_core.profile` (a callable's energy per call, thermally stable)
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
    # Zeus 0.16's import paths (issue 31): thin wrappers over every layer, integrations included
    ("compat", ("zeus_core.compat",)),
]
# Deprecation aliases: kept only for import paths a README example used, each warns
# DeprecationWarning naming the new import and re-exports from it. They sit outside the layers.
DEPRECATION_ALIASES: dict[str, str] = {
    "zeus_core.monitor.energy": "from zeus_core import ZeusMonitor",
    "zeus_core.monitor.power": "from zeus_core import PowerMonitor",
    "zeus_core.device.discovery": "from zeus_core import get_gpus",
    "zeus_core.device.simulated": "from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock",
    # written by the perseus helper (issue 27): the old home of SimulatedPipelineGPU
    "zeus_core.optimizer.pipeline_frequency.simulated_gpu": (
        "from zeus_core.testing import InstructionWork, SimulatedPipelineGPU"
    ),
}
OUTSIDE_LAYERS = {
    "zeus_core",
    "zeus_core._cli",
    "zeus_core._lazy",
    "zeus_integrations",
    *DEVICE_COMMANDS,
    *DEPRECATION_ALIASES,
    # Zeus's module-style commands (`python -m zeus_core.monitor`, `python -m zeus_core.show_env`)
    "zeus_core.monitor.__main__",
    "zeus_core.show_env",
}


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
    assert {"zeus_core", "zeus_core.device._base", "zeus_integrations.lightning"} <= set(modules)
    importers = {e.importer for e in EDGES}
    assert "zeus_core.device._nvidia" in importers and "zeus_integrations.lightning" in importers
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
    assert not cycles, message + "\nVendors use zeus_core.device._registry, never discovery."


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
        ("zeus_core.device._base", "zeus_core.device"),
        ("zeus_core.device", None),
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
        and e.importer not in DEPRECATION_ALIASES
        and not e.imported.startswith("zeus_core.device")
        and e.imported not in DEVICE_FOUNDATION
    ]
    assert not above, "device modules import layers above them:" + _listing(above)


def test_layers_import_only_downwards() -> None:
    """Type-only imports count too: an annotation that names a higher layer is an arrow up."""
    upwards = []
    for edge in EDGES:
        low, high = _layer(edge.importer), _layer(edge.imported)
        if low is not None and high is not None and high > low:
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


# Library files still above the limit in areas other helpers are reworking (issue 27); the lead
# removes each line when its owner's change lands.
LONG_FILES_PENDING: dict[str, str] = {}
# Installed modules that still patch torch, pending their move out of the packages (issue 27).
TORCH_PATCHES_PENDING: dict[str, str] = {}
MAX_LIBRARY_LINES = 600


def _parsed_library() -> dict[str, tuple[Path, ast.Module]]:
    return {m: (p, ast.parse(p.read_text(encoding="utf-8"))) for m, p in library_modules().items()}


LIBRARY = _parsed_library()


def test_no_library_module_imports_tests() -> None:
    offending = [
        f"{path.relative_to(REPO_ROOT)}:{line}: imports {name}"
        for path, tree in LIBRARY.values()
        for name, line in imported_modules(tree)
        if name == "tests" or name.startswith("tests.")
    ]
    assert not offending, (
        "library modules import the test suite, which is not installed:\n  "
        + "\n  ".join(offending)
        + "\nMove what they need into zeus_core.testing."
    )


def test_no_installed_module_patches_torch() -> None:
    offending = [
        f"{path.relative_to(REPO_ROOT)}:{line}"
        for module, (path, tree) in LIBRARY.items()
        if module not in TORCH_PATCHES_PENDING
        for line in torch_patches(tree)
    ]
    assert not offending, (
        "installed modules assign to torch's attributes, which changes every user's process:\n  "
        + "\n  ".join(offending)
        + "\nKeep such shims in examples/ or tests/."
    )


def test_no_library_file_above_the_line_limit() -> None:
    too_long = {
        rel: n
        for path, _ in LIBRARY.values()
        if (rel := str(path.relative_to(REPO_ROOT))) not in LONG_FILES_PENDING
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LIBRARY_LINES
    }
    assert not too_long, (
        f"library files above {MAX_LIBRARY_LINES} lines: {too_long}. Split each by job (not by "
        "slicing functions): one module per concern."
    )


def _user_code() -> list[tuple[str, ast.Module]]:
    """What users copy: the examples, and every ```python block of the README and the docs pages."""
    sources = [(str(p.relative_to(REPO_ROOT)), p.read_text(encoding="utf-8")) for p in EXAMPLES]
    for page in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for i, block in enumerate(re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)):
            sources.append((f"{page.relative_to(REPO_ROOT)} (python block {i + 1})", block))
    return [(where, ast.parse(code)) for where, code in sources]


EXAMPLES = sorted(p for p in (REPO_ROOT / "examples").glob("*.py"))


def test_the_user_code_is_found() -> None:
    where = [w for w, _ in _user_code()]
    assert any(w.startswith("examples/") for w in where) and any(w.startswith("README.md") for w in where)


def test_users_import_only_public_modules() -> None:
    offending = []
    for where, tree in _user_code():
        for name, line in imported_modules(tree):
            parts = name.split(".")
            library = parts[0] in ("zeus_core", "zeus_integrations")
            if library and any(p.startswith("_") and not p.startswith("__") for p in parts):
                offending.append(f"{where}:{line}: {name}")
            elif library and name in DEPRECATION_ALIASES:
                offending.append(f"{where}:{line}: {name} (deprecated)")
    assert not offending, (
        "examples, the README and the docs import internal or deprecated modules:\n  "
        + "\n  ".join(offending)
        + "\nImport from the package faces (zeus_core, zeus_core.monitor, zeus_integrations, ...)."
    )


@pytest.mark.parametrize("alias", sorted(DEPRECATION_ALIASES))
def test_a_deprecation_alias_warns_and_re_exports(alias: str) -> None:
    if alias not in library_modules():
        pytest.skip(f"{alias} is written by another helper's change")
    new_import = DEPRECATION_ALIASES[alias]
    names = [n.strip() for n in new_import.split(" import ", 1)[1].split(",")]
    code = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({alias!r})\n"
        f"new = importlib.import_module({new_import.split()[1]!r})\n"
        "assert any(issubclass(w.category, DeprecationWarning) and "
        f"{new_import!r} in str(w.message) for w in caught), [str(w.message) for w in caught]\n"
        f"assert all(getattr(old, n) is getattr(new, n) for n in {names!r})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr


def test_nothing_in_the_library_imports_a_deprecation_alias() -> None:
    users = [e for e in EDGES if e.imported in DEPRECATION_ALIASES]
    assert not users, "library modules import deprecated aliases:" + _listing(users)
