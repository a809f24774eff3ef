"""The Device base and the GPU vendor registry that discovery iterates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Iterator, Mapping

import pytest

from tests.fakes.clock_cpu import ClockCPU
from tests.fakes.fake_amdsmi import FakeAMDSMI, FakeAMDSpec
from zeus_core.device import CPU, GPU, Device, Unavailable, register_gpu_vendor, unregister_gpu_vendor
from zeus_core.device._discovery import discover, get_gpus
from zeus_core.device._registry import gpu_vendors
from zeus_core.exceptions import ZeusConfigError
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
from zeus_core.testing._fake_nvml import FakeGPUSpec, FakeNVML

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _restore_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    before = gpu_vendors()
    yield
    for vendor in gpu_vendors():
        unregister_gpu_vendor(vendor.name)
    for vendor in before:
        register_gpu_vendor(vendor.name, vendor.probe)


def _simulated_probe(count: int) -> object:
    def probe(environ: Mapping[str, str]) -> tuple[list[GPU], Unavailable | None]:
        clock = VirtualClock()
        return [SimulatedGPU(PhysicalModel(), i, clock=clock) for i in range(count)], None

    return probe


def _none_probe(environ: Mapping[str, str]) -> tuple[list[GPU], Unavailable | None]:
    return [], Unavailable("Acme GPUs", "no Acme driver.", "install the Acme driver.")


# -- the Device base ------------------------------------------------------------------------------
def test_every_backend_is_a_device_with_its_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNVML([FakeGPUSpec.a40()]).patch(monkeypatch)
    nvidia = get_gpus()[0]
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(library_found=False))
    FakeAMDSMI([FakeAMDSpec.mi300x()]).patch(monkeypatch)
    amd = get_gpus()[0]
    simulated = SimulatedGPU(PhysicalModel(), 0)
    cpu = ClockCPU(0, clock=lambda: 0.0)
    for device, kind, vendor in [
        (nvidia, "gpu", "nvidia"),
        (amd, "gpu", "amd"),
        (simulated, "gpu", "simulated"),
        (cpu, "cpu", "fake"),
    ]:
        assert isinstance(device, Device)
        assert (device.kind, device.vendor) == (kind, vendor)
        assert device.name and device.describe().startswith(f"{kind.upper()} 0: ")
    assert [d.simulated for d in (nvidia, amd, simulated, cpu)] == [False, False, True, False]
    assert nvidia.has_energy_counter and nvidia.has_power_reading
    assert cpu.has_energy_counter and not cpu.has_power_reading
    assert isinstance(cpu, CPU) and not isinstance(cpu, GPU)


# -- the vendor registry --------------------------------------------------------------------------
def test_builtin_vendors_are_nvidia_then_amd() -> None:
    assert [v.name for v in gpu_vendors()] == ["nvidia", "amd"]


def test_a_registered_vendor_is_discovered_after_the_builtin_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNVML(driver_loaded=False).patch(monkeypatch)
    FakeAMDSMI(driver_loaded=False).patch(monkeypatch)
    register_gpu_vendor("acme", _simulated_probe(2))
    gpus = get_gpus(environ={})
    assert [(g.vendor, g.index) for g in gpus] == [("simulated", 0), ("simulated", 1)]


def test_the_first_vendor_with_gpus_wins_and_the_others_are_not_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    FakeNVML([FakeGPUSpec.a40()]).patch(monkeypatch)
    register_gpu_vendor("acme", _none_probe, before="nvidia")
    report = discover(environ={}, sysfs_root=tmp_path / "absent")
    assert [g.vendor for g in report.gpus] == ["nvidia"]
    assert "Acme GPUs" not in {m.what for m in report.missing}


def test_vendors_without_gpus_explain_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    FakeNVML(driver_loaded=False).patch(monkeypatch)
    FakeAMDSMI(driver_loaded=False).patch(monkeypatch)
    register_gpu_vendor("acme", _none_probe)
    report = discover(environ={}, sysfs_root=tmp_path / "absent")
    assert [m.what for m in report.missing][:3] == ["NVIDIA GPUs", "AMD GPUs", "Acme GPUs"]
    assert "install the Acme driver" in report.missing[2].describe()


def test_a_probe_reference_is_imported_only_when_discovery_runs() -> None:
    code = (
        "import sys\n"
        "import zeus_core.device._registry as r\n"
        "r.register_gpu_vendor('acme', 'tests.fakes.fake_amdsmi:no_such_probe')\n"
        "assert 'zeus_core.device._nvidia' not in sys.modules, 'registering imported a vendor'\n"
        "assert 'tests.fakes.fake_amdsmi' not in sys.modules\n"
        "try:\n"
        "    r.gpu_vendors()[-1].load_probe()\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True
    )
    assert "'tests.fakes.fake_amdsmi:no_such_probe' cannot be loaded" in out.stdout
    assert "register_gpu_vendor" in out.stdout


@pytest.mark.parametrize(
    ("name", "probe", "before", "message"),
    [
        ("", _none_probe, None, "give the vendor a name"),
        ("nvidia", _none_probe, None, "already registered"),
        ("acme", "zeus_core.device.acme", None, "is not a 'package.module:function' reference"),
        ("acme", _none_probe, "intel", "before='intel' is not a registered GPU vendor"),
    ],
)
def test_bad_registrations_are_refused(name: str, probe: object, before: str | None, message: str) -> None:
    with pytest.raises(ZeusConfigError, match=message):
        register_gpu_vendor(name, probe, before=before)  # type: ignore[arg-type]
    assert [v.name for v in gpu_vendors()] == ["nvidia", "amd"]


def test_unregistering_an_unknown_vendor_names_the_registered_ones() -> None:
    with pytest.raises(
        ZeusConfigError, match=r"no GPU vendor named 'acme' \(registered: \['nvidia', 'amd'\]\)"
    ):
        unregister_gpu_vendor("acme")
