"""The public names of the library: every package face's ``__all__`` and the lazy stubs' exports.

Used by ``tests/core/test_public_docs.py``, which checks that each has a docstring with an example
and runs those examples.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_core._lazy import stub_exports

# The package faces and public modules users import (CONVENTIONS.md, "Layout and privacy").
FACES = (
    "zeus_core",
    "zeus_core.device",
    "zeus_core.monitor",
    "zeus_core.training",
    "zeus_core.testing",
    "zeus_core.exceptions",
    "zeus_core.callback",
    "zeus_core.console",
    "zeus_core.settings",
    "zeus_core.data",
    "zeus_core.carbon",
    "zeus_core.profile",
    "zeus_core.report",
    "zeus_core.optimizer.power_limit",
    "zeus_core.optimizer.batch_size",
    "zeus_core.optimizer.pipeline_frequency",
    "zeus_core.simulate",
    "zeus_integrations",
    "zeus_integrations.lightning",
    "zeus_integrations.huggingface",
    "zeus_integrations.accelerate",
    "zeus_integrations.fabric",
)


@dataclass(frozen=True)
class PublicName:
    """One exported name: where users import it from, and the module that defines it."""

    face: str
    name: str
    module: str

    @property
    def qualified(self) -> str:
        """``face.name``."""
        return f"{self.face}.{self.name}"


def public_names() -> list[PublicName]:
    """Every (face, name) pair, with the module that defines the name."""
    found: list[PublicName] = []
    for face in FACES:
        module = importlib.import_module(face)
        init = getattr(module, "__file__", "") or ""
        stub = Path(init).with_suffix(".pyi")
        if init.endswith("__init__.py") and stub.exists():
            for name, source in stub_exports(init).items():
                found.append(PublicName(face, name, source))
            continue
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            found.append(PublicName(face, name, _defining_module(obj, face)))
    return found


def _defining_module(obj: Any, face: str) -> str:
    module = getattr(obj, "__module__", None)
    if inspect.ismodule(obj):
        return obj.__name__
    if isinstance(module, str) and module.startswith(("zeus_core", "zeus_integrations")):
        return module
    return face  # data (a dict, a tuple, a type alias): documented where the face imports it from


def docstring_of(entry: PublicName) -> str | None:
    """The name's docstring: its own, or for data the string literal after its assignment."""
    module = importlib.import_module(entry.module)
    obj = getattr(module, entry.name)
    own = getattr(obj, "__module__", None)
    if inspect.ismodule(obj) or (isinstance(own, str) and own.startswith(("zeus_core", "zeus_integrations"))):
        return inspect.getdoc(obj)
    return _attribute_docstring(_source_module(module, entry.name), entry.name)


def _source_module(module: Any, name: str) -> Any:
    """The module whose source assigns ``name`` (following ``from x import name`` in faces)."""
    tree = ast.parse(inspect.getsource(module))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and any(a.name == name for a in node.names):
            return _source_module(importlib.import_module(node.module), name)
    return module


def _attribute_docstring(module: Any, name: str) -> str | None:
    body = ast.parse(inspect.getsource(module)).body
    for node, following in zip(body, body[1:]):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                return str(following.value.value)
            return None
    return None
