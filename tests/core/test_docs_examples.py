"""Every ```python block of the docs/ pages runs as pasted.

A block whose first line is ``# needs: ...`` is skipped: it needs a GPU, a server or a cluster.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

BLOCKS = [
    pytest.param(code, id=f"{page.name}:{i + 1}")
    for page in sorted((REPO_ROOT / "docs").rglob("*.md"))
    for i, code in enumerate(re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M))
]


def test_the_docs_have_blocks() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("code", BLOCKS)
def test_a_docs_block_runs(code: str, tmp_path: Path) -> None:
    if code.startswith("# needs:"):
        pytest.skip(code.splitlines()[0])
    env = {k: v for k, v in os.environ.items() if k != "ZEUS_SUITE_SIMULATE"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
