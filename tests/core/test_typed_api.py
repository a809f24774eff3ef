"""The public API is typed: lazy exports are real types for type checkers, and stay lazy at run time.

Each package that exports names lazily (a module-level ``_EXPORTS`` table read by ``__getattr__``)
must import every one of those names under ``if TYPE_CHECKING:`` from the module the table names;
otherwise editors and mypy see ``Any``. A mypy run then checks that the two names users touch
first resolve to their classes.
"""

from __future__ import annotations

import ast
import os
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LIBRARY_PACKAGES = ("zeus_core", "zeus_integrations")


def _lazy_init_modules() -> list[Path]:
    """Every ``__init__.py`` in the library that assigns a module-level ``_EXPORTS`` table."""
    found = []
    for package in LIBRARY_PACKAGES:
        for init in sorted((REPO_ROOT / package).rglob("__init__.py")):
            tree = ast.parse(init.read_text(encoding="utf-8"))
            if any(_assigned_name(node) == "_EXPORTS" for node in tree.body):
                found.append(init)
    return found


def _assigned_name(node: ast.stmt) -> str | None:
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    return None


def _package_name(init: Path) -> str:
    return ".".join(init.parent.relative_to(REPO_ROOT).parts)


def _declared_exports(init: Path) -> dict[str, str]:
    """``_EXPORTS`` as name -> absolute module (relative entries are resolved against the package)."""
    tree = ast.parse(init.read_text(encoding="utf-8"))
    package = _package_name(init)
    for node in tree.body:
        if _assigned_name(node) == "_EXPORTS":
            assert isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
            table = ast.literal_eval(node.value)
            return {
                name: module if module.split(".")[0] in LIBRARY_PACKAGES else f"{package}.{module}"
                for name, module in table.items()
            }
    raise AssertionError(f"{init} has no _EXPORTS table")


def _type_checking_imports(init: Path) -> dict[str, str]:
    """Names imported under ``if TYPE_CHECKING:`` at module level, name -> module."""
    tree = ast.parse(init.read_text(encoding="utf-8"))
    imported: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                    for alias in stmt.names:
                        imported[alias.asname or alias.name] = stmt.module
    return imported


def _literal_all(init: Path) -> list[str] | None:
    """``__all__`` if the module assigns it a literal list or tuple of strings (what type checkers read)."""
    tree = ast.parse(init.read_text(encoding="utf-8"))
    for node in tree.body:
        if _assigned_name(node) == "__all__":
            assert isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return list(value)
    return None


def test_the_lazy_packages_are_found() -> None:
    packages = {_package_name(p) for p in _lazy_init_modules()}
    assert {"zeus_core", "zeus_integrations", "zeus_core.optimizer.pipeline_frequency"} <= packages


@pytest.mark.parametrize("init", _lazy_init_modules(), ids=_package_name)
def test_every_lazy_export_is_imported_under_type_checking(init: Path) -> None:
    exports = _declared_exports(init)
    typed = _type_checking_imports(init)
    missing = sorted(f"from {module} import {name}" for name, module in exports.items() if name not in typed)
    wrong = sorted(
        f"{name}: _EXPORTS says {module}, TYPE_CHECKING imports it from {typed[name]}"
        for name, module in exports.items()
        if name in typed and typed[name] != module
    )
    extra = sorted(name for name in typed if name not in exports)
    assert not missing, f"{init}: add under `if TYPE_CHECKING:` " + "; ".join(missing)
    assert not wrong, f"{init}: " + "; ".join(wrong)
    assert not extra, f"{init}: imported under TYPE_CHECKING but missing from _EXPORTS: {extra}"


@pytest.mark.parametrize("init", _lazy_init_modules(), ids=_package_name)
def test_all_is_a_literal_list_of_the_lazy_exports(init: Path) -> None:
    # mypy and pyright re-export only names they can read in __all__; a computed __all__ hides them all.
    listed = _literal_all(init)
    assert listed is not None, f"{init}: write __all__ as a literal list of names, not an expression"
    exports, listed_names = set(_declared_exports(init)), set(listed) - {"__version__"}
    assert listed_names == exports, (
        f"{init}: __all__ and _EXPORTS differ: only in __all__ {sorted(listed_names - exports)}, "
        f"only in _EXPORTS {sorted(exports - listed_names)}"
    )


@pytest.mark.parametrize("package", LIBRARY_PACKAGES)
def test_each_package_ships_its_py_typed_marker(package: str) -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    assert (REPO_ROOT / package / "py.typed").is_file(), f"add an empty {package}/py.typed"
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    package_data = config["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data.get(package, []), (
        f'pyproject.toml: add {package} = ["py.typed"] under [tool.setuptools.package-data]'
    )


@pytest.mark.slow
def test_mypy_sees_the_real_classes() -> None:
    mypy_api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra: pip install -e '.[dev]'")
    # The `from … import` form fails (not just reveals Any) where a facade does not re-export a name.
    source = (
        "from zeus_core import ZeusMonitor\n"
        "from zeus_integrations import ZeusCallback\n"
        "reveal_type(ZeusMonitor)\n"
        "reveal_type(ZeusCallback)\n"
    )
    # The file lives in the repository root so that mypy resolves this checkout's packages.
    fd, path = tempfile.mkstemp(prefix="_reveal_api_", suffix=".py", dir=REPO_ROOT)
    with os.fdopen(fd, "w") as f:
        f.write(source)
    # The project's configuration and cache: after `make lint` (or any mypy run) this takes seconds.
    config = str(REPO_ROOT / "pyproject.toml")
    cache = str(REPO_ROOT / ".mypy_cache")
    try:
        stdout, stderr, _ = mypy_api.run(
            [path, "--config-file", config, "--cache-dir", cache, "--no-error-summary"]
        )
    finally:
        os.unlink(path)
    not_exported = [line for line in stdout.splitlines() if "does not explicitly export" in line]
    assert not not_exported, not_exported
    revealed = [line for line in stdout.splitlines() if "Revealed type" in line]
    assert len(revealed) == 2, stdout + stderr
    assert "zeus_core.monitor.energy.ZeusMonitor" in revealed[0], revealed[0]
    assert "zeus_integrations.lightning.ZeusCallback" in revealed[1], revealed[1]
    assert not any(line.rstrip().endswith('Revealed type is "Any"') for line in revealed), revealed
