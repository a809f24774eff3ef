"""MkDocs hook: the API reference, generated from the package faces' ``__all__`` at build time.

A *face* is what users import: every package of ``zeus_core`` and ``zeus_integrations`` whose
path has no ``_``-prefixed part, the public modules ``zeus_core.{exceptions,callback,console,settings}``,
and the adapter modules of ``zeus_integrations`` (its non-underscore modules). Each face with a
non-empty ``__all__`` gets one page, ``api/<face>.md``, rendering each exported name with
mkdocstrings; the nav entry ``API reference: api/index.md`` in ``mkdocs.yml`` becomes the section of
those pages. Faces are read statically (the ``__all__`` literal, or the ``__init__.pyi`` stub of a
lazy face), so nothing heavy is imported and a face missing from this checkout just has no page.

Each object is rendered once, on its *home* page: the most specific face that exports it (the top
level packages only list what their sub-faces document, with links).
"""

from __future__ import annotations

import ast
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.api_reference")

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("zeus_core", "zeus_integrations")
#: Public modules that are not packages (besides zeus_integrations' adapter modules).
PUBLIC_MODULES = ("zeus_core.exceptions", "zeus_core.callback", "zeus_core.console", "zeus_core.settings")
#: Faces in reading order; faces found in the code but not listed here follow, alphabetically.
ORDER = (
    "zeus_core",
    "zeus_core.device",
    "zeus_core.monitor",
    "zeus_core.settings",
    "zeus_core.training",
    "zeus_core.optimizer.power_limit",
    "zeus_core.optimizer.batch_size",
    "zeus_core.optimizer.pipeline_frequency",
    "zeus_core.optimizer.pipeline_frequency.planner",
    "zeus_core.optimizer.pipeline_frequency.runtime",
    "zeus_core.simulate",
    "zeus_core.testing",
    "zeus_core.data",
    "zeus_core.exceptions",
    "zeus_core.callback",
    "zeus_core.console",
    "zeus_integrations",
    "zeus_integrations.lightning",
    "zeus_integrations.huggingface",
    "zeus_integrations.accelerate",
    "zeus_integrations.fabric",
    "zeus_integrations.pipeline",
)
NAV_TITLE = "API reference"
INDEX = "api/index.md"


@dataclass
class Face:
    """One public module or package and what it exports.

    Attributes:
        name: Dotted name, e.g. ``zeus_core.monitor``.
        summary: First line of its docstring.
        exports: Exported name -> the module it is defined in (or imported from).
        homes: Exported name -> the face whose page documents it (itself, or a more specific face).
    """

    name: str
    summary: str
    exports: dict[str, str]
    homes: dict[str, str] = field(default_factory=dict)

    @property
    def page(self) -> str:
        """The page's path inside docs/."""
        return f"api/{self.name}.md"


def _module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _literal_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id == "__all__" and node.value is not None:
                try:
                    return [str(v) for v in ast.literal_eval(node.value)]
                except ValueError:
                    return None
    return None


def _imported(tree: ast.Module, module: str) -> dict[str, str]:
    """Name -> source module of every ``from x import y`` at the top of a module (stubs included)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            source = node.module
            if node.level:  # relative import
                source = ".".join(module.split(".")[: -node.level] + [node.module])
            for alias in node.names:
                found[alias.asname or alias.name] = source
    return found


def read_face(name: str) -> Face | None:
    """The face ``name`` as its source says (``None``: absent, or it exports nothing)."""
    path = _module_file(name)
    if path is None:
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    summary = (ast.get_docstring(tree) or "").strip().splitlines()
    names = _literal_all(tree)
    imported = _imported(tree, name if path.name == "__init__.py" else name.rsplit(".", 1)[0])
    stub = path.with_suffix(".pyi")
    if names is None and stub.is_file():  # a lazy face: its stub lists the exports
        stub_imports = _imported(ast.parse(stub.read_text(encoding="utf-8")), name)
        imported.update(stub_imports)
        names = list(stub_imports)
    if not names:
        return None
    exports = {n: imported.get(n, name) for n in names if not n.startswith("_")}
    return Face(name, summary[0] if summary else "", exports)


def discover() -> list[str]:
    """Every face's dotted name, in reading order."""
    found: set[str] = set()
    for package in PACKAGES:
        for init in (ROOT / package).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            if not any(p.startswith("_") for p in parts):
                found.add(".".join(parts))
    for module in PUBLIC_MODULES:
        found.add(module)
    for folder in (ROOT / "zeus_integrations", ROOT / "zeus_integrations" / "pipeline"):
        for path in folder.glob("*.py"):
            if not path.name.startswith("_"):
                found.add(".".join(path.with_suffix("").relative_to(ROOT).parts))
    ordered = [f for f in ORDER if f in found]
    return ordered + sorted(found - set(ordered))


def build_faces() -> list[Face]:
    """The faces that exist, each knowing where each of its names is documented (once, site-wide)."""
    faces = [f for f in (read_face(n) for n in discover()) if f is not None]
    claimed: dict[tuple[str, str], str] = {}  # (source module, name) -> home face
    # The most specific face first: sub-faces and adapter modules before the top-level packages.
    for face in sorted(faces, key=lambda f: -f.name.count(".")):
        for name, source in face.exports.items():
            claimed.setdefault((source, name), face.name)
    for face in faces:
        face.homes = {name: claimed[(source, name)] for name, source in face.exports.items()}
    return faces


def face_page(face: Face) -> str:
    """The Markdown of one face's page: its docstring, then each name it is the home of."""
    lines = [
        f"# `{face.name}`",
        "",
        f"::: {face.name}",
        "    options:",
        "      members: false",
        "      show_root_heading: false",
        "",
    ]
    elsewhere = sorted((n for n, home in face.homes.items() if home != face.name), key=str.lower)
    if elsewhere:
        lines += [
            f"Also importable from `{face.name}`, documented on the page of their module:",
            "",
            "| name | documented in |",
            "|---|---|",
        ]
        for name in elsewhere:
            home = face.homes[name]
            lines.append(f"| [`{name}`][{home}.{name}] | [`{home}`]({home}.md) |")
        lines.append("")
    for name, home in face.homes.items():
        if home == face.name:
            lines += [f"::: {face.name}.{name}", ""]
    return "\n".join(lines)


def index_page(faces: list[Face]) -> str:
    """The reference's front page: one line per face."""
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings of the public surface: what each package face lists in "
        "`__all__`. Modules whose name starts with `_` are internal and not documented here; "
        "import the names below from the face that lists them.",
        "",
        "| import from | what |",
        "|---|---|",
    ]
    for face in faces:
        lines.append(f"| [`{face.name}`]({Path(face.page).name}) | {face.summary} |")
    return "\n".join(lines) + "\n"


_PAGES: dict[str, str] = {}


def on_config(config: Any) -> Any:
    """Generate the pages and put them into the nav where ``API reference: api/index.md`` stands."""
    faces = build_faces()
    _PAGES.clear()
    _PAGES[INDEX] = index_page(faces)
    for face in faces:
        _PAGES[face.page] = face_page(face)
    section: list[Any] = [{"Overview": INDEX}]
    for package in PACKAGES:  # one group per package, its faces named relative to it
        group = [
            {face.name if face.name == package else face.name[len(package) + 1 :]: face.page}
            for face in faces
            if face.name.split(".")[0] == package
        ]
        if group:
            section.append({package: group})
    nav = config.get("nav") or []
    for i, entry in enumerate(nav):
        if isinstance(entry, dict) and entry.get(NAV_TITLE) == INDEX:
            nav[i] = {NAV_TITLE: section}
            break
    else:
        log.warning(
            "mkdocs.yml's nav has no '%s: %s' entry; the API pages are not in the nav", NAV_TITLE, INDEX
        )
    log.info("API reference: %d faces, %d pages", len(faces), len(_PAGES))
    return config


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages."""
    for path, content in _PAGES.items():
        files.append(File.generated(config, path, content=content))
    return files
