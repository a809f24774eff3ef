"""The documentation: a short README linking into a strictly built site, no machine paths, no typed figures.

The README fits on a page and its links lead into the site; the site builds with ``--strict``; no
page names a path of the machine the docs were written on; no benchmark figure is typed in by hand.

Benchmark figures are produced only by ``docs/_hooks/benchmark_tables.py`` from the results files in
``benchmarks/results/`` while the site is built. "Typed in by hand" is checked on the Markdown
sources: a *figure* is a decimal number with a unit (``4.6 %``, ``0.014 ms``, ``53.1×``, ``1515.0 J``);
a *results table* is a table row with two or more figures; a *results dump* is an unlabelled or
``text`` block with three or more figures; a *comparison* is a prose line that puts a figure next to
Zeus or lowtime. None of these may appear in a source page, and the benchmarks page holds no figure
at all outside its ``<!-- benchmark: NAME TABLE -->`` markers (integers that describe a method, such
as "60 windows", are not figures).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
HOOKS = DOCS / "_hooks"
RESULTS = REPO_ROOT / "benchmarks" / "results"
README_MAX_LINES = 200

#: A path of a particular machine: a home directory, root's, a scratch or temporary folder.
MACHINE_PATH = re.compile(
    r"(?<![\w.~$-])(?:/work/|/root/|/tmp/|/home/[\w.-]+|/Users/[\w.-]+|/mnt/[\w.-]+|/scratch/|[A-Za-z]:\\Users\\)"
)
#: Notes for the developers that users should not read.
INTERNAL = re.compile(
    r"\b\d-core\b|\bshared (?:box|machine)\b|\bmet,? narrowly\b|\btarget\s*(?:≤|<=)|\(target \d", re.I
)
FIGURE = re.compile(r"(?<![\w.])[−+-]?\d[\d,]*\.\d+\s?(?:%|ms|µs|us|s|J|kJ|MJ|W|×|TFLOP/s)(?![\w/])")
ZEUS_OR_LOWTIME = re.compile(r"\bZeus(?!\s+Suite)\b|\bzeus\s*(?:==\s*)?0\.\d|\blowtime\b")
MARKER = re.compile(r"^<!-- benchmark: (?P<name>[\w.-]+) (?P<table>[\w-]+) -->$")


def source_pages() -> list[Path]:
    """The Markdown users read: README.md, ARCHITECTURE.md (included in the site) and docs/**/*.md."""
    docs = sorted(p for p in DOCS.rglob("*.md") if HOOKS not in p.parents)
    return [README, REPO_ROOT / "ARCHITECTURE.md", *docs]


def _rel(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def _load_hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", HOOKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _prose_and_blocks(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str, list[str]]]]:
    """The lines outside fenced blocks (number, text), and the blocks (line, language, lines)."""
    prose: list[tuple[int, str]] = []
    blocks: list[tuple[int, str, list[str]]] = []
    fence: tuple[int, str, str, list[str]] | None = None
    for n, line in enumerate(text.splitlines(), start=1):
        m = re.match(r"^\s*(`{3,})(\S*)\s*$", line)
        if fence is None and m:
            fence = (n, m.group(1), m.group(2), [])
        elif fence is not None and line.strip() == fence[1]:
            blocks.append((fence[0], fence[2], fence[3]))
            fence = None
        elif fence is not None:
            fence[3].append(line)
        else:
            prose.append((n, line))
    return prose, blocks


# --- the README -------------------------------------------------------------------------------


def test_readme_fits_on_a_page() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the site holds the details"


def _readme_links() -> list[str]:
    text = README.read_text(encoding="utf-8")
    prose, _ = _prose_and_blocks(text)
    return [m.group(1) for _, line in prose for m in re.finditer(r"\]\(([^)\s]+)\)", line)]


def test_readme_links_point_into_the_site() -> None:
    """Relative links name a page of docs/ (a source page or a generated one: ``api/``)."""
    links = _readme_links()
    assert links
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        page = link.split("#", 1)[0]
        assert page.startswith("docs/") and page.endswith(".md"), (
            f"README link {link!r} does not lead into the site"
        )
        assert (REPO_ROOT / page).is_file() or page.startswith("docs/api/"), (
            f"README link {link!r}: no such page"
        )


# --- what no page may contain -----------------------------------------------------------------


def test_pages_name_no_path_of_this_machine() -> None:
    found = [
        f"{_rel(page)}:{n}: {m.group(0)}"
        for page in source_pages()
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        for m in MACHINE_PATH.finditer(line)
    ]
    found += [
        f"{_rel(path)}: {m.group(0)}"
        for path in sorted(RESULTS.rglob("*.json"))
        for m in MACHINE_PATH.finditer(path.read_text(encoding="utf-8"))
    ]
    assert not found, "paths of a particular machine in what users read:\n" + "\n".join(found)


def test_pages_hold_no_internal_notes() -> None:
    found = [
        f"{_rel(page)}:{n}: {line.strip()[:100]}"
        for page in source_pages()
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        if INTERNAL.search(line)
    ]
    assert not found, "internal notes (machine, targets) in what users read:\n" + "\n".join(found)


def hand_typed_figures(text: str) -> list[str]:
    """Results tables, results dumps and comparisons with figures in a Markdown page (see the module doc)."""
    prose, blocks = _prose_and_blocks(text)
    found = []
    for n, line in prose:
        if line.lstrip().startswith("|"):
            if len(FIGURE.findall(line)) >= 2:
                found.append(f"{n}: results table row {line.strip()[:80]!r}")
        elif FIGURE.search(line) and ZEUS_OR_LOWTIME.search(line):
            found.append(f"{n}: comparison {line.strip()[:80]!r}")
    for n, language, body in blocks:
        if language in {"", "text", "console"} and len(FIGURE.findall("\n".join(body))) >= 3:
            found.append(f"{n}: results dump in a ```{language} block")
    return found


def test_the_figure_check_finds_what_it_should() -> None:
    assert hand_typed_figures("| 50 ms windows | **1.9 % / 8.6 %** | 100 % / 132 % |\n")
    assert hand_typed_figures("Ours spends 15.9 % of Zeus's extra profiling cost.\n")
    assert hand_typed_figures("```\nmax-frequency 0.6764 s 784.9 J 0.0%\nzero 0.6764 s 723.2 J 7.9%\n```\n")
    assert not hand_typed_figures("| `min_sample_s` | 0.25 s |\n| `tolerance` | 0.005 |\n")
    assert not hand_typed_figures("The counter refreshes every 100 ms; Zeus reads it at both edges.\n")
    assert not hand_typed_figures("```python\nx = [0.5 * 2.0, 1.5, 3.25]  # 1.5 s, 2.5 s, 3.5 s\n```\n")


def test_no_page_types_in_benchmark_figures() -> None:
    found = [
        f"{_rel(page)}:{f}" for page in source_pages() for f in hand_typed_figures(page.read_text("utf-8"))
    ]
    assert not found, (
        "benchmark figures typed into a page (write them to benchmarks/results/<name>.json with the "
        "benchmark's --json and show them on docs/benchmarks.md with a marker):\n" + "\n".join(found)
    )


def test_the_benchmarks_page_shows_figures_only_through_markers() -> None:
    page = DOCS / "benchmarks.md"
    prose, blocks = _prose_and_blocks(page.read_text(encoding="utf-8"))
    markers = [MARKER.match(line.strip()) for _, line in prose]
    assert sum(m is not None for m in markers) >= 10
    bad = [
        f"{n}: {line.strip()[:80]!r}"
        for n, line in prose
        if line.lstrip().startswith("|") or FIGURE.search(line)
    ]
    bad += [f"{n}: a ```{lang} block" for n, lang, _ in blocks if lang not in {"bash", "sh"}]
    assert not bad, "docs/benchmarks.md shows figures only through its markers:\n" + "\n".join(bad)


# --- the generated parts ----------------------------------------------------------------------


def _markers() -> list[tuple[str, str, str]]:
    return [
        (_rel(page), m["name"], m["table"])
        for page in sorted(DOCS.rglob("*.md"))
        for line in page.read_text(encoding="utf-8").splitlines()
        if (m := MARKER.match(line.strip()))
    ]


def test_every_benchmark_table_renders_from_its_results_file() -> None:
    tables = _load_hook("benchmark_tables")
    for page, name, table in _markers():
        text = tables.render(name, table)
        assert f"benchmarks/results/{name}.json" in text, f"{page}: {name} {table} says where it came from"
        assert not MACHINE_PATH.search(text), f"{page}: {name} {table} names a machine's path"


def test_every_results_file_is_shown() -> None:
    shown = {name for _, name, _ in _markers()}
    files = {p.stem for p in RESULTS.glob("*.json")}
    assert files <= shown, f"results files no page shows: {sorted(files - shown)}"


def test_the_api_reference_documents_each_public_name_once() -> None:
    api = _load_hook("api_reference")
    faces = api.build_faces()
    names = {f.name for f in faces}
    assert {"zeus_core", "zeus_core.monitor", "zeus_integrations"} <= names
    assert not [n for n in names if any(part.startswith("_") for part in n.split("."))]
    for face in faces:
        for name, home in face.homes.items():
            assert home in names and name in next(f for f in faces if f.name == home).exports
    pages = {f.page for f in faces}
    assert len(pages) == len(faces)


def test_the_navigation_answers_a_newcomer() -> None:
    """From the navigation alone: measure an HF run, choose a power limit, run the batch-size service."""
    yaml = pytest.importorskip("yaml")
    nav = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def entries(items: list) -> list[tuple[str, str]]:
        out = []
        for item in items:
            for title, target in item.items():
                out += entries(target) if isinstance(target, list) else [(title, target)]
        return out

    flat = dict((page, title) for title, page in entries(nav))
    assert "Hugging Face" in flat["integrations/huggingface.md"]
    assert "power limit" in flat["optimizers/power-limit.md"].lower()
    assert "batch-size service" in flat["optimizers/batch-size.md"].lower()
    written = {_rel(p)[len("docs/") :] for p in DOCS.rglob("*.md") if HOOKS not in p.parents}
    assert written <= set(flat), f"pages missing from the navigation: {sorted(written - set(flat))}"


# --- the built site ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as `make docs` builds it (strict)."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, (
        f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    )
    return out


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(v for k, v in attrs if k == "id" and v)


def _html_of(site: Path, page: str) -> Path:
    """Where ``docs/<page>.md`` lands (directory URLs)."""
    stem = page[len("docs/") : -len(".md")]
    return site / ("index.html" if stem == "index" else f"{stem.removesuffix('/index')}/index.html")


@pytest.mark.slow
def test_readme_links_resolve_into_the_built_site(site: Path) -> None:
    for link in _readme_links():
        if link.startswith(("http://", "https://")):
            continue
        page, _, anchor = link.partition("#")
        html = _html_of(site, page)
        assert html.is_file(), f"README link {link!r}: the site has no {html.relative_to(site)}"
        if anchor:
            parser = _Ids()
            parser.feed(html.read_text(encoding="utf-8"))
            assert anchor in parser.ids, f"README link {link!r}: no such anchor on the built page"


@pytest.mark.slow
def test_the_built_site_names_no_path_of_this_machine(site: Path) -> None:
    found = []
    for path in sorted(site.rglob("*")):
        if path.suffix in {".html", ".json", ".xml", ".txt"}:
            for m in MACHINE_PATH.finditer(path.read_text(encoding="utf-8", errors="replace")):
                found.append(f"{path.relative_to(site)}: {m.group(0)}")
    assert not found, "\n".join(found[:20])


@pytest.mark.slow
def test_the_built_benchmarks_page_has_the_generated_tables(site: Path) -> None:
    html = (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
    markers = [m for m in _markers() if m[0] == "docs/benchmarks.md"]  # other pages show theirs too
    assert html.count("<table>") >= len(markers) - 1
    for name in {n for _, n, _ in markers}:
        assert f"benchmarks/results/{name}.json" in html
    assert json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))["docs"]
