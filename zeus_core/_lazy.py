"""Lazy package exports, listed once: in the package's ``__init__.pyi`` stub.

A package face that must stay cheap to import (``zeus_core`` imports neither torch nor any
framework) names each export in its stub as ``from zeus_core.x import Name as Name``. Type
checkers and editors read the stub; at run time :func:`attach_stub` reads the same lines and loads
each module on first use of one of its names. Adding an export is one line in the stub.

Example:
    >>> import zeus_core
    >>> "ZeusMonitor" in zeus_core.__all__
    True
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any, Callable

__all__ = ["attach_stub", "stub_exports"]


def stub_exports(init_file: str | Path) -> dict[str, str]:
    """The names a package's ``__init__.pyi`` re-exports, name -> absolute module.

    Args:
        init_file: The package's ``__init__.py`` (the stub lies beside it).

    Raises:
        FileNotFoundError: The stub is missing (a broken installation).
    """
    stub = Path(init_file).with_suffix(".pyi")
    exports: dict[str, str] = {}
    for node in ast.parse(stub.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                exports[alias.asname or alias.name] = node.module
    return exports


def attach_stub(
    package: str, init_file: str, namespace: dict[str, Any], extra: tuple[str, ...] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for a package whose exports its stub lists.

    Args:
        package: The package's name (``__name__``).
        init_file: Its ``__init__.py`` (``__file__``).
        namespace: Its ``globals()``, where a loaded name is cached.
        extra: Names defined in ``__init__.py`` itself (e.g. ``__version__``), also in ``__all__``.
    """
    exports = stub_exports(init_file)
    names = sorted([*exports, *extra])

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__, names
