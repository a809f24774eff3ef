"""Runs a Hugging Face example's tiny mode as a user would: a subprocess, offline, on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def run_tiny(script: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict[str, Any]]:
    """Run ``examples/<script> --tiny --simulate``; returns the process and its JSON report."""
    report = tmp_path / "report.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [
        sys.executable,
        str(REPO / "examples" / script),
        "--tiny",
        "--simulate",
        "--out",
        str(tmp_path / "run"),
        "--json",
        str(report),
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads(report.read_text())
