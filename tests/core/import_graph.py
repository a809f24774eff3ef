"""The library's import graph, read from the source with ``ast`` (nothing is imported).

Every ``import`` and ``from … import`` inside ``zeus_core`` and ``zeus_integrations`` becomes an
:class:`ImportEdge` between two library modules, marked with where it runs: at module level
(when the importer is imported), inside a function (when it is called), or only for type
checkers (under ``if TYPE_CHECKING:``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LIBRARY_PACKAGES = ("zeus_core", "zeus_integrations")


@dataclass(frozen=True)
class ImportEdge:
    """``importer`` imports ``imported``, at ``path:line``.

    Attributes:
        importer: Dotted name of the importing module.
        imported: Dotted name of the library module it imports.
        path: Source file of the importer, relative to the repository root.
        line: Line of the import statement.
        module_level: Whether the import runs when the importer is imported (not inside a function).
        type_checking: Whether the import sits under ``if TYPE_CHECKING:`` (never runs).
    """

    importer: str
    imported: str
    path: str
    line: int
    module_level: bool
    type_checking: bool

    @property
    def runs_on_import(self) -> bool:
        """Whether importing ``importer`` imports ``imported``."""
        return self.module_level and not self.type_checking

    def describe(self) -> str:
        """``path:line: importer -> imported``."""
        return f"{self.path}:{self.line}: {self.importer} -> {self.imported}"


def library_modules(root: Path = REPO_ROOT) -> dict[str, Path]:
    """Every module of the library packages, dotted name -> source file."""
    modules: dict[str, Path] = {}
    for package in LIBRARY_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _ImportCollector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: set[str]) -> None:
        self.module, self.is_package, self.known = module, is_package, known
        self.found: list[tuple[str, int, bool, bool]] = []  # imported, line, module_level, type_checking
        self._function_depth = 0
        self._type_checking_depth = 0

    def _targets(self, node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:
            package = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
            anchor = package[: len(package) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        # `from package import submodule` imports the submodule; `from module import name` the module.
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in self.known else base for a in node.names]

    def _record(self, node: ast.Import | ast.ImportFrom) -> None:
        for target in dict.fromkeys(self._targets(node)):
            # `import zeus_core.device._base` names the module itself; keep the longest known prefix.
            parts = target.split(".")
            while parts and ".".join(parts) not in self.known:
                parts.pop()
            if parts:
                self.found.append(
                    (".".join(parts), node.lineno, self._function_depth == 0, self._type_checking_depth > 0)
                )

    def visit_Import(self, node: ast.Import) -> None:
        self._record(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._record(node)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self._function_depth += 1
        self.generic_visit(node)
        self._function_depth -= 1

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function
    visit_Lambda = _visit_function

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self._type_checking_depth += 1
        for stmt in node.body:
            self.visit(stmt)
        self._type_checking_depth -= 1
        for stmt in node.orelse:
            self.visit(stmt)


def import_edges(root: Path = REPO_ROOT) -> list[ImportEdge]:
    """Every import of one library module by another (imports of outside packages are left out)."""
    modules = library_modules(root)
    known = set(modules)
    edges: list[ImportEdge] = []
    for name, path in modules.items():
        collector = _ImportCollector(name, path.name == "__init__.py", known)
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        rel = str(path.relative_to(root))
        for imported, line, module_level, type_checking in collector.found:
            if imported != name:
                edges.append(ImportEdge(name, imported, rel, line, module_level, type_checking))
    return edges


def import_cycles(edges: list[ImportEdge]) -> list[list[ImportEdge]]:
    """The import cycles among ``edges``, each as the edges that close it (Tarjan's SCCs, then a loop).

    Returns one cycle per strongly connected component of more than one module, shortest found
    first, so a failure names concrete lines to change.
    """
    graph: dict[str, list[ImportEdge]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, []).append(edge)
    cycles = []
    for component in _strongly_connected(graph):
        if len(component) > 1:
            cycles.append(_a_cycle_within(graph, component))
    return cycles


def _strongly_connected(graph: dict[str, list[ImportEdge]]) -> list[set[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for edge in graph.get(node, []):
            if edge.imported not in index:
                visit(edge.imported)
                low[node] = min(low[node], low[edge.imported])
            elif edge.imported in on_stack:
                low[node] = min(low[node], index[edge.imported])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _a_cycle_within(graph: dict[str, list[ImportEdge]], component: set[str]) -> list[ImportEdge]:
    """The shortest cycle through the component's first module (breadth-first search)."""
    start = min(component)
    paths: dict[str, list[ImportEdge]] = {start: []}
    frontier = [start]
    while frontier:
        next_frontier = []
        for node in frontier:
            for edge in graph.get(node, []):
                if edge.imported == start:
                    return paths[node] + [edge]
                if edge.imported in component and edge.imported not in paths:
                    paths[edge.imported] = paths[node] + [edge]
                    next_frontier.append(edge.imported)
        frontier = next_frontier
    raise AssertionError(f"no cycle through {start} in its strongly connected component")


def private_module_owner(module: str) -> str | None:
    """The package that owns ``module``'s first private (``_name``) part, or ``None`` if it has none.

    ``zeus_core.optimizer.power_limit._restore`` is owned by ``zeus_core.optimizer.power_limit``.
    """
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def private_imports(edges: list[ImportEdge]) -> list[ImportEdge]:
    """Imports of a private module from outside the code allowed to use it.

    ``zeus_core``'s internals serve the whole library (its adapters in ``zeus_integrations``
    included); ``zeus_integrations``' internals serve only ``zeus_integrations``. Users (examples,
    the README, the docs) import public names only.
    """
    offending = []
    for edge in edges:
        owner = private_module_owner(edge.imported)
        if owner is None:
            continue
        users = ("zeus_core", "zeus_integrations") if owner.split(".")[0] == "zeus_core" else (owner,)
        if not any(edge.importer == u or edge.importer.startswith(u + ".") for u in users):
            offending.append(edge)
    return offending


def imported_modules(tree: ast.AST) -> list[tuple[str, int]]:
    """Every absolute module an ``import`` or ``from … import`` in ``tree`` names, with its line.

    ``from package import name`` gives ``package.name`` too (``name`` may be a submodule), so a
    check for a module prefix sees both forms.
    """
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
            found.extend((f"{node.module}.{alias.name}", node.lineno) for alias in node.names)
    return found


def torch_patches(tree: ast.AST) -> list[int]:
    """Lines that assign to an attribute of ``torch`` (or of a name imported from it), or ``setattr`` one.

    Replacing ``torch.zeros`` or ``Tensor.cuda`` from an installed package changes every user's
    process; these are the lines that would do it.
    """
    bound = {"torch"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update(
                a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "torch"
            )
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            bound.update(a.asname or a.name for a in node.names)

    def rooted_in_torch(target: ast.expr) -> bool:
        if not isinstance(target, ast.Attribute):
            return False
        root: ast.expr = target
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id in bound

    lines = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            if node.args and isinstance(node.args[0], (ast.Name, ast.Attribute)):
                first = node.args[0]
                targets = [
                    first if isinstance(first, ast.Attribute) else ast.Attribute(first, "_", ast.Load())
                ]
        if any(rooted_in_torch(t) for t in targets):
            lines.append(node.lineno)
    return lines
