"""Every Python block of docs/optimizers/power-limit.md runs as printed (but ``# needs: ...`` ones)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "optimizers" / "power-limit.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def test_the_page_has_its_figure_and_blocks() -> None:
    assert (PAGE.parent / "power-limit-run.png").is_file() and len(BLOCKS) >= 4


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_a_block_runs(code: str, tmp_path) -> None:
    if code.startswith("# needs:"):
        pytest.skip(code.splitlines()[0])
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(REPO_ROOT), "ZEUS_SUITE_QUIET": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize(
    "module", sorted(p.stem for p in (REPO_ROOT / "zeus_core/optimizer/power_limit").glob("_[a-z]*.py"))
)
def test_the_examples_of_the_internal_modules_run(module: str) -> None:
    import doctest
    import importlib

    mod = importlib.import_module(f"zeus_core.optimizer.power_limit.{module}")
    assert doctest.testmod(mod, optionflags=doctest.ELLIPSIS).failed == 0
