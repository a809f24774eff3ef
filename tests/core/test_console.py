"""Console messages: visible on rank zero by default, silent on other ranks and when turned off."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zeus_core import console

SCRIPT = (
    "from zeus_core import console; console.info('limit chosen: 250 W'); "
    "console.warn_once('k', 'no GPU'); console.warn_once('k', 'no GPU')"
)


def run(env: dict[str, str]) -> str:
    import os

    full = {
        k: v
        for k, v in os.environ.items()
        if k not in {"RANK", "LOCAL_RANK", "NODE_RANK", "ZEUS_SUITE_QUIET"}
    }
    full.update(env)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=full, capture_output=True, text=True, check=True)
    return out.stderr


def test_visible_by_default_without_logging_setup() -> None:
    err = run({})
    assert "[zeus-suite] limit chosen: 250 W" in err
    assert err.count("no GPU") == 1  # once per key


@pytest.mark.parametrize("env", [{"RANK": "1"}, {"LOCAL_RANK": "1"}, {"LOCAL_RANK": "0", "NODE_RANK": "2"}])
def test_silent_off_rank_zero(env: dict[str, str]) -> None:
    assert run(env) == ""


def test_quiet_switches(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert run({"ZEUS_SUITE_QUIET": "1"}) == ""
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("ZEUS_SUITE_QUIET", raising=False)
    console.set_enabled(False)
    try:
        assert not console.enabled()
    finally:
        console.set_enabled(True)
    assert console.enabled()
