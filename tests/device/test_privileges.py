"""has_admin_rights: CAP_SYS_ADMIN in the effective capabilities, asked without writing anything."""

from __future__ import annotations

from pathlib import Path

import zeus_core.device._privileges as privileges

# conftest.py replaces the module attribute for the fakes; the real function is kept here.
from zeus_core.device._privileges import has_admin_rights as real_has_admin_rights


def status(tmp_path: Path, cap_eff: str) -> Path:
    path = tmp_path / "status"
    path.write_text(
        f"Name:\tpython\nCapInh:\t0000000000000000\nCapEff:\t{cap_eff}\nCapBnd:\t000001ffffffffff\n"
    )
    return path


def test_root_with_all_capabilities(tmp_path: Path) -> None:
    assert real_has_admin_rights(status(tmp_path, "000001ffffffffff"))


def test_a_container_root_without_cap_sys_admin(tmp_path: Path) -> None:
    assert not real_has_admin_rights(status(tmp_path, "00000000a80425fb"))  # Docker's default set


def test_a_user_granted_only_cap_sys_admin(tmp_path: Path) -> None:  # `setcap cap_sys_admin+ep python`
    assert real_has_admin_rights(status(tmp_path, f"{1 << privileges.CAP_SYS_ADMIN:016x}"))


def test_without_proc_the_effective_user_decides(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(privileges.os, "geteuid", lambda: 1000)
    assert not real_has_admin_rights(tmp_path / "missing")
    monkeypatch.setattr(privileges.os, "geteuid", lambda: 0)
    assert real_has_admin_rights(tmp_path / "missing")
