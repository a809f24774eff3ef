"""Every code block of README.md runs as pasted, so the README cannot drift from the code.

Each ```python block runs as its own script in a fresh temporary folder (a subprocess of this
interpreter, with a timeout); each line starting with ``zeus-suite`` in a ```bash block runs
through the shell there. ``ZEUS_SUITE_SIMULATE=1`` is set, so on a machine without a GPU the blocks
measure a simulated one (and say so), as a user following the README's no-GPU advice would. A block
whose opening fence has the line ``<!-- readme-test: skip (reason) -->`` directly above it is skipped
with that reason (for blocks that need a real GPU, a server, a cluster or the user's own files).
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
SKIP_MARKER = re.compile(r"^<!-- readme-test: skip \((?P<reason>[^)]+(?:\([^)]*\)[^)]*)*)\) -->$")
#: Seconds one block may take here (the README's blocks aim at < 20 s; CI machines are loaded).
TIMEOUT_S = 120


@dataclass(frozen=True)
class Block:
    """One fenced code block of the README.

    Attributes:
        language: The fence's info string (``python``, ``bash``, or empty).
        line: The line number of the opening fence (1-based).
        code: The block's text.
        skip_reason: The reason of a skip marker directly above the fence, else ``None``.
    """

    language: str
    line: int
    code: str
    skip_reason: str | None


def readme_blocks(text: str) -> list[Block]:
    """Every fenced block of ``text``, with the skip marker that precedes it, if any."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[i])
        if fence is None:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        marker = SKIP_MARKER.match(lines[start - 1].strip()) if start else None
        blocks.append(Block(fence.group(1), start + 1, "\n".join(body) + "\n", marker and marker["reason"]))
        i += 1
    return blocks


BLOCKS = readme_blocks(README.read_text())
PYTHON_BLOCKS = [b for b in BLOCKS if b.language == "python"]
COMMAND_BLOCKS = [
    b
    for b in BLOCKS
    if b.language in {"bash", "sh", "shell", "console"}
    and any(line.startswith("zeus-suite") for line in b.code.splitlines())
]


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


def test_the_readme_has_blocks_to_check() -> None:
    assert len(PYTHON_BLOCKS) >= 10 and len(COMMAND_BLOCKS) >= 4
    assert sum(b.skip_reason is None for b in PYTHON_BLOCKS) >= len(PYTHON_BLOCKS) // 2


def test_every_skip_marker_sits_directly_above_a_fence() -> None:
    lines = README.read_text().splitlines()
    for n, line in enumerate(lines):
        if line.lstrip().startswith("<!--") and "readme-test" in line:
            assert SKIP_MARKER.match(line.strip()), f"README.md:{n + 1}: malformed marker {line!r}"
            assert n + 1 < len(lines) and lines[n + 1].startswith("```"), (
                f"README.md:{n + 1}: the skip marker must be the line directly above a block's opening fence"
            )


def test_every_skipped_block_says_what_it_needs_in_a_visible_first_line() -> None:
    for block in BLOCKS:
        if block.skip_reason and block.language:
            assert block.code.startswith("#"), (
                f"README.md:{block.line}: a skipped block starts with a comment saying what it needs "
                f"(the marker {block.skip_reason!r} is invisible on the rendered page)"
            )


def test_block_parser_reads_markers_and_languages() -> None:
    text = (
        "intro\n```python\nprint(1)\n```\n<!-- readme-test: skip (needs a real GPU (H100)) -->\n"
        "```bash\nzeus-suite env\n```\n```\nplain\n```\n"
    )
    blocks = readme_blocks(text)
    assert [(b.language, b.line, b.skip_reason) for b in blocks] == [
        ("python", 2, None),
        ("bash", 6, "needs a real GPU (H100)"),
        ("", 9, None),
    ]
    assert blocks[0].code == "print(1)\n"


def _commands(block: Block, cwd: Path) -> list[tuple[list[str], str]]:
    """What running ``block`` means: its script (python), or its ``zeus-suite`` lines in order (shell)."""
    if block.language == "python":
        script = cwd / f"readme_block_L{block.line}.py"
        script.write_text(block.code)
        return [([sys.executable, str(script)], f"README.md:{block.line} (python block)")]
    return [
        (["bash", "-c", line], f"README.md:{block.line} `{line}`")
        for line in block.code.splitlines()
        if line.startswith("zeus-suite")
    ]


RUNNABLE = PYTHON_BLOCKS + COMMAND_BLOCKS


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=[f"{b.language}-L{b.line}" for b in RUNNABLE])
def test_block_runs_as_pasted(block: Block, workdir: tuple[Path, dict[str, str]]) -> None:
    """A python block as its own script; a shell block's lines in one folder (in order)."""
    if block.skip_reason:
        pytest.skip(f"README.md:{block.line}: {block.skip_reason}")
    cwd, env = workdir
    for command, what in _commands(block, cwd):
        _run(command, cwd, env, what)
