"""Shared fixtures. No test needs a GPU; data-driven tests skip where ../shared/data is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """The measured traces and profiles in ../shared/data (skips the test if absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"measured data not found at {SHARED_DATA} (the shared/ folder beside the repo)")
    return SHARED_DATA
