"""``zeus-suite env``: devices, capabilities, visibility mapping, and what is missing with its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.fake_amdsmi import FakeAMDSMI
from zeus_core._cli import main
from zeus_core.testing._fake_nvml import FakeGPUSpec, FakeNVML


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COLUMNS", "250")  # rich: one table row per device
    FakeAMDSMI(driver_loaded=False).patch(monkeypatch)


def make_rapl(root: Path) -> Path:
    zone = root / "intel-rapl:0"
    (zone / "intel-rapl:0:0").mkdir(parents=True)
    for d, name in ((zone, "package-0"), (zone / "intel-rapl:0:0", "dram")):
        (d / "name").write_text(f"{name}\n")
        (d / "energy_uj").write_text("1000\n")
        (d / "max_energy_range_uj").write_text("262143328850\n")
    return root


def env(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["env", *args]) == 0
    return capsys.readouterr().out


def test_table_shows_capabilities_and_permission_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    FakeNVML([FakeGPUSpec.a40(), FakeGPUSpec.p100()], root=False).patch(monkeypatch)
    out = env(capsys, "--sysfs-root", str(make_rapl(tmp_path / "pc")))
    a40 = next(line for line in out.splitlines() if "NVIDIA A40" in line)
    assert "cuda:0" in a40 and "hardware counter" in a40 and "100-300 (default 300, now 300)" in a40
    assert "103 (210-1740 MHz)" in a40 and "4 (405-7251 MHz)" in a40 and "no" in a40
    p100 = next(line for line in out.splitlines() if "P100" in line)
    assert "estimated (power sampling)" in p100
    assert "setcap cap_sys_admin+ep" in out
    assert out.count("setcap cap_sys_admin+ep") == 1  # one fix for both GPUs
    assert "package-0" in out and "CPU packages (RAPL)" in out
    assert "Missing" not in out  # GPUs and RAPL both found


def test_json_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    FakeNVML([FakeGPUSpec.h100()]).patch(monkeypatch)
    data = json.loads(env(capsys, "--json", "--sysfs-root", str(tmp_path / "none")))
    (gpu,) = data["gpus"]
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["energy"] == "counter" and gpu["control"] == "yes"
    assert gpu["power_limit_w"] == {"min": 200.0, "max": 700.0, "default": 700.0, "current": 700.0}
    assert gpu["sm_clocks"] == {"count": 110, "max": 1980, "min": 345}
    assert data["simulated"] is False and data["cpus"] == []
    assert [m["what"] for m in data["missing"]] == ["CPU energy (RAPL)"]


def test_visibility_mapping(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fake = FakeNVML([FakeGPUSpec.a40(), FakeGPUSpec.h100()]).patch(monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    out = env(capsys, "--sysfs-root", str(tmp_path))
    assert "CUDA_VISIBLE_DEVICES='1'" in out
    assert f"cuda:0 -> NVIDIA device 1 ({fake.devices[1].uuid})" in out
    assert "NVIDIA A40" not in out


def test_mig_visibility_is_explained_not_raised(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    FakeNVML([FakeGPUSpec.a100()]).patch(monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-4f3e2d1c-0000-1111-2222-333344445555")
    out = env(capsys, "--sysfs-root", str(tmp_path))
    assert "none found" in out and "cannot meter" in out and "parent" in out


def test_simulate_without_any_gpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    FakeNVML(library_found=False).patch(monkeypatch)
    out = env(capsys, "--simulate", "--sysfs-root", str(tmp_path))
    assert "SIMULATED" in out and "NVIDIA A40 (simulated)" in out
    assert "libnvidia-ml.so.1" in out and "AMD GPUs" in out  # why the real ones are missing
    data = json.loads(env(capsys, "--simulate", "--json", "--sysfs-root", str(tmp_path)))
    (gpu,) = data["gpus"]
    assert gpu["simulated"] is True and data["simulated"] is True and gpu["vendor"] == "simulated"


def test_no_gpu_says_what_still_works(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    FakeNVML(driver_loaded=False).patch(monkeypatch)
    out = env(capsys, "--sysfs-root", str(tmp_path))
    assert "none found" in out and "modprobe nvidia" in out and "--simulate" in out
