"""The public API is typed: lazy exports are real types for type checkers, and stay lazy at run time.

A lazy package face lists its exports once, in an ``__init__.pyi`` stub of
``from module import Name as Name`` lines; type checkers read the stub, and ``zeus_core/_lazy.py``
reads the same lines at run time. These tests check that every listed name resolves to the object
the stub names, and that mypy sees the classes.
"""

from __future__ import annotations

import ast
import importlib
import os
import tempfile
from pathlib import Path

import pytest

from zeus_core._lazy import stub_exports

REPO_ROOT = Path(__file__).resolve().parents[2]
LIBRARY_PACKAGES = ("zeus_core", "zeus_integrations")


def _lazy_init_modules() -> list[Path]:
    """Every ``__init__.py`` in the library that has an ``__init__.pyi`` stub beside it."""
    return [
        init
        for package in LIBRARY_PACKAGES
        for init in sorted((REPO_ROOT / package).rglob("__init__.py"))
        if init.with_suffix(".pyi").is_file()
    ]


def _package_name(init: Path) -> str:
    return ".".join(init.parent.relative_to(REPO_ROOT).parts)


def test_the_lazy_packages_are_found() -> None:
    packages = {_package_name(p) for p in _lazy_init_modules()}
    assert {"zeus_core", "zeus_integrations", "zeus_core.optimizer.pipeline_frequency"} <= packages


@pytest.mark.parametrize("init", _lazy_init_modules(), ids=_package_name)
def test_every_stub_export_resolves_to_the_object_it_names(init: Path) -> None:
    package = importlib.import_module(_package_name(init))
    exports = stub_exports(init)
    assert exports, f"{init.with_suffix('.pyi')} lists no `from module import Name as Name` lines"
    for name, module in exports.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), name), name
    assert set(exports) <= set(package.__all__) and set(exports) <= set(dir(package))


@pytest.mark.parametrize("init", _lazy_init_modules(), ids=_package_name)
def test_stub_lines_re_export_explicitly(init: Path) -> None:
    # mypy re-exports a name from a stub only in the `import Name as Name` form (or through __all__).
    tree = ast.parse(init.with_suffix(".pyi").read_text(encoding="utf-8"))
    implicit = [
        f"{node.module}.{alias.name}"
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname != alias.name
    ]
    assert not implicit, f"{init.with_suffix('.pyi')}: write `from m import N as N` for {implicit}"


def test_unknown_names_raise_attribute_error() -> None:
    import zeus_core

    with pytest.raises(AttributeError, match="no attribute 'NotAThing'"):
        zeus_core.NotAThing  # noqa: B018


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
    assert "ZeusMonitor" in revealed[0], revealed[0]
    assert "zeus_integrations.lightning.ZeusCallback" in revealed[1], revealed[1]
    assert not any(line.rstrip().endswith('Revealed type is "Any"') for line in revealed), revealed
