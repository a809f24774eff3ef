"""Every code block of docs/optimizers/perseus.md runs as pasted, so the page cannot drift from the code.

Each ```python block runs as its own script in a fresh temporary folder, and each ``zeus-suite``
line of a ```bash block through the shell there. A block whose first line is ``# needs: <what>``
(a GPU, torchrun, a cluster) is skipped with that reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "optimizers" / "perseus.md"
FENCE = re.compile(r"^```(\S*)\s*$")


def blocks(text: str) -> list[tuple[str, int, str]]:
    """``(language, line, code)`` of every fenced block of ``text``."""
    found, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        found.append((fence.group(1), start + 1, "\n".join(body) + "\n"))
        i += 1
    return found


RUNNABLE = [b for b in blocks(PAGE.read_text(encoding="utf-8")) if b[0] in {"python", "bash"}]


def _env(tmp_path: Path) -> dict[str, str]:
    """A user's environment: this interpreter as ``python``, ``zeus-suite`` of this tree on ``PATH``."""
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    launcher = bin_dir / "zeus-suite"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m zeus_core._cli "$@"\n')
    launcher.chmod(0o755)
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {
        **os.environ,
        "PYTHONPATH": path,
        "PATH": str(bin_dir) + os.pathsep + os.environ.get("PATH", ""),
        "MPLBACKEND": "Agg",
    }


def test_the_page_has_runnable_blocks() -> None:
    assert sum(lang == "python" for lang, _, _ in RUNNABLE) >= 8
    assert any(code.startswith("# needs: ") for _, _, code in RUNNABLE)


@pytest.mark.parametrize(("language", "line", "code"), RUNNABLE, ids=[f"line{b[1]}" for b in RUNNABLE])
def test_block_runs(language: str, line: int, code: str, tmp_path: Path) -> None:
    first = code.splitlines()[0] if code.strip() else ""
    if first.startswith("# needs: "):
        pytest.skip(first[2:])
    if language == "python":
        commands = [[sys.executable, "-c", code]]
    else:
        commands = [["bash", "-c", c] for c in code.splitlines() if c.startswith("zeus-suite")]
    env, cwd = _env(tmp_path), tmp_path / "run"
    cwd.mkdir()
    for command in commands:
        proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (
            f"{PAGE.name}:{line} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
