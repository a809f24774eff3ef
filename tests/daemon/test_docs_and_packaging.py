"""docs/daemon.md's shell blocks say what they need; the systemd files' configuration and arguments are valid.

(tests/test_readme.py runs the page's python blocks, as it does every page's.)
"""

from __future__ import annotations

import grp
import re
import shlex

import pytest

from tests.conftest import REPO_ROOT
from zeus_core._cli import build_parser
from zeus_core.daemon import parse_config

DOC = REPO_ROOT / "docs" / "daemon.md"
SYSTEMD = REPO_ROOT / "packaging" / "systemd"


def test_every_block_that_cannot_run_in_ci_says_what_it_needs() -> None:
    fenced = re.findall(r"^```(\w+)\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
    for language, code in fenced:
        if language == "bash":  # every shell block here needs root or a running daemon
            assert code.startswith("# needs:"), code


def test_the_example_config_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    real = grp.getgrnam
    monkeypatch.setattr(grp, "getgrnam", lambda name: real("root") if name == "zeus" else real(name))
    config = parse_config((SYSTEMD / "daemon.toml.example").read_text(), "daemon.toml.example")
    assert (
        config.heartbeat_s == 10 and config.lease_ttl_s == 30 and config.grants[0].power_limit_w == (150, 300)
    )
    doc_config = re.search(r"^```toml\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
    assert doc_config is not None
    assert parse_config(doc_config.group(1)).grants[1].subjects == ("ci",)


def test_the_unit_runs_the_daemon_with_arguments_it_accepts() -> None:
    unit = (SYSTEMD / "zeus-suite-daemon.service").read_text()
    assert "ExecStart=/opt/zeus-suite/bin/zeus-suite daemon $ZEUS_SUITE_DAEMON_ARGS" in unit
    assert (
        "Type=notify" in unit
        and "StateDirectory=zeus-suite" in unit
        and "RuntimeDirectory=zeus-suite" in unit
    )
    defaults = (SYSTEMD / "zeus-suite-daemon.defaults").read_text()
    variants = re.findall(r'^#?ZEUS_SUITE_DAEMON_ARGS="(.*)"$', defaults, flags=re.M)
    assert len(variants) == 3
    for args in variants:
        parsed = build_parser("daemon").parse_args(["daemon", *shlex.split(args)])
        assert parsed.command == "daemon" and not parsed.check
