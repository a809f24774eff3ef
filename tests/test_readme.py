"""Every code block of README.md and of the documentation (docs/**/*.md) runs as pasted.

Each ```python block runs as its own script in a fresh temporary folder (a subprocess of this
interpreter, with a timeout); each line starting with ``zeus-suite`` in a ```bash block runs
through the shell there. ``ZEUS_SUITE_SIMULATE=1`` is set, so on a machine without a GPU the blocks
measure a simulated one (and say so), as a user following the no-GPU advice would.

A block that cannot run here says what it needs in its first line, a comment visible on the page:
``# needs: gpu``, ``# needs: server``, ``# needs: torchrun``, optionally with details in brackets
(``# needs: server (a running zeus-suite bso-server)``). It is skipped with that reason. Identical
blocks on several pages run once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
#: The first line of a block that cannot run here: ``# needs: <what>``.
NEEDS = re.compile(r"^#\s*needs:\s*(?P<what>\S.*?)\s*$")
#: Something that looks like a needs line but is not one (a typo would make the block run or hide it).
NEEDS_LIKE = re.compile(r"^#\s*needs?\b", re.I)
#: Seconds one block may take here (the blocks aim at < 20 s; CI machines are loaded).
TIMEOUT_S = 120
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page.

    Attributes:
        page: The page's path relative to the repository root (``README.md``, ``docs/cli.md``).
        language: The fence's info string (``python``, ``bash``, or empty).
        line: The line number of the opening fence (1-based).
        code: The block's text.
        needs: What the block needs that a test machine lacks (its ``# needs:`` line), else ``None``.
    """

    page: str
    language: str
    line: int
    code: str
    needs: str | None

    @property
    def where(self) -> str:
        """``page:line`` of the opening fence."""
        return f"{self.page}:{self.line}"


def blocks_of(text: str, page: str = "page.md") -> list[Block]:
    """Every fenced block of ``text`` (a Markdown page), with what it needs, if it says."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)(`{3,})(\S*)\s*$", lines[i])
        if fence is None:
            i += 1
            continue
        indent, ticks, language = fence.groups()
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != ticks:
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        needs = NEEDS.match(body[0]) if body else None
        blocks.append(Block(page, language, start + 1, "\n".join(body) + "\n", needs and needs["what"]))
        i += 1
    return blocks


def pages() -> list[Path]:
    """README.md and every Markdown page of the site (generated ones are built, not written)."""
    return [README, *sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)]


BLOCKS = [
    b
    for page in pages()
    for b in blocks_of(page.read_text(encoding="utf-8"), page.relative_to(REPO_ROOT).as_posix())
]
PYTHON_BLOCKS = [b for b in BLOCKS if b.language == "python"]
COMMAND_BLOCKS = [
    b
    for b in BLOCKS
    if b.language in SHELL_LANGUAGES and any(line.startswith("zeus-suite") for line in b.code.splitlines())
]


def _unique(blocks: list[Block]) -> list[Block]:
    """One block per distinct code (the first page that shows it); the same example runs once."""
    seen: dict[tuple[str, str], Block] = {}
    for block in blocks:
        seen.setdefault((block.language, block.code), block)
    return list(seen.values())


RUNNABLE = _unique(PYTHON_BLOCKS + COMMAND_BLOCKS)


@pytest.fixture
def workdir(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A fresh folder and the environment a new user would have there (venv on PATH, a simulated GPU)."""
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    launcher = bin_dir / "zeus-suite"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m zeus_core._cli "$@"\n')
    launcher.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ZEUS_SUITE_QUIET"))}
    env.update(
        ZEUS_SUITE_SIMULATE="1",
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
        PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        MPLBACKEND="Agg",
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return run_dir, env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], what: str) -> None:
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{what} did not finish in {TIMEOUT_S} s; output so far:\n{e.stdout}\n{e.stderr}")
    took = time.monotonic() - started
    assert proc.returncode == 0, (
        f"{what} failed (exit {proc.returncode}, {took:.1f} s):\n--- stdout\n{proc.stdout[-4000:]}\n"
        f"--- stderr\n{proc.stderr[-6000:]}"
    )


def test_the_pages_have_blocks_to_check() -> None:
    readme = [b for b in PYTHON_BLOCKS if b.page == "README.md"]
    assert len(readme) >= 3 and len(PYTHON_BLOCKS) >= 10 and len(COMMAND_BLOCKS) >= 4
    assert sum(b.needs is None for b in PYTHON_BLOCKS) >= len(PYTHON_BLOCKS) // 2


def test_blocks_that_cannot_run_say_so_in_the_needs_form() -> None:
    """``# needs: <what>`` exactly, on the first line: a near miss would run the block, or hide it."""
    bad = []
    for block in BLOCKS:
        first = block.code.splitlines()[0] if block.code.strip() else ""
        if block.needs is None and NEEDS_LIKE.match(first):
            bad.append(f"{block.where}: {first!r} (write `# needs: gpu`, `# needs: server`, ...)")
        for n, line in enumerate(block.code.splitlines()[1:], start=2):
            if NEEDS.match(line.strip()):
                bad.append(f"{block.where}: `# needs:` on line {n} of the block; it must be the first line")
    assert not bad, "\n".join(bad)


def test_no_page_uses_the_old_skip_markers() -> None:
    old = [
        f"{page.relative_to(REPO_ROOT)}:{n}"
        for page in pages()
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        if "readme-test: skip" in line
    ]
    assert not old, f"replace `<!-- readme-test: skip (...) -->` by a first line `# needs: <what>`: {old}"


def test_block_parser_reads_needs_and_languages() -> None:
    text = (
        "intro\n```python\nprint(1)\n```\n"
        "```bash\n# needs: gpu (an H100)\nzeus-suite env\n```\n```\nplain\n```\n"
        "- item\n\n    ```python\n    print(2)\n    ```\n"
    )
    blocks = blocks_of(text, "x.md")
    assert [(b.language, b.line, b.needs) for b in blocks] == [
        ("python", 2, None),
        ("bash", 5, "gpu (an H100)"),
        ("", 9, None),
        ("python", 14, None),
    ]
    assert blocks[0].code == "print(1)\n" and blocks[3].code == "print(2)\n"


def _commands(block: Block, cwd: Path) -> list[tuple[list[str], str]]:
    """What running ``block`` means: its script (python), or its ``zeus-suite`` lines in order (shell)."""
    if block.language == "python":
        script = cwd / f"block_L{block.line}.py"
        script.write_text(block.code)
        return [([sys.executable, str(script)], f"{block.where} (python block)")]
    return [
        (["bash", "-c", line], f"{block.where} `{line}`")
        for line in block.code.splitlines()
        if line.startswith("zeus-suite")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=[f"{b.page}-{b.language}-L{b.line}" for b in RUNNABLE])
def test_block_runs_as_pasted(block: Block, workdir: tuple[Path, dict[str, str]]) -> None:
    """A python block as its own script; a shell block's lines in one folder (in order)."""
    if block.needs:
        pytest.skip(f"{block.where}: needs {block.needs}")
    cwd, env = workdir
    for command, what in _commands(block, cwd):
        _run(command, cwd, env, what)
