"""Discovery: CUDA_VISIBLE_DEVICES parsing, NVIDIA-then-AMD order, RAPL, and the missing-device report."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.fake_amdsmi import FakeAMDSMI, FakeAMDSpec
from zeus_core.device import _rapl as rapl
from zeus_core.device._discovery import discover, get_cpus, get_gpus, parse_visible_devices
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceNotFoundError, ZeusPermissionError
from zeus_core.testing._fake_nvml import FakeGPUSpec, FakeNVML

UUIDS = ["GPU-aaaa1111-0000", "GPU-bbbb2222-0000", "GPU-bbbb3333-0000"]


def _uuids_never_needed() -> list[str]:
    raise AssertionError("UUIDs were read although no entry is a UUID")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(var, raising=False)


def make_rapl(root: Path, packages: int = 2, dram: bool = True) -> Path:
    """A powercap tree with ``packages`` zones (each with a DRAM sub-zone if ``dram``)."""
    for i in range(packages):
        zone = root / f"intel-rapl:{i}"
        zone.mkdir(parents=True)
        (zone / "name").write_text(f"package-{i}\n")
        (zone / "energy_uj").write_text("1000\n")
        (zone / "max_energy_range_uj").write_text("262143328850\n")
        if dram:
            sub = zone / f"intel-rapl:{i}:0"
            sub.mkdir()
            (sub / "name").write_text("dram\n")
            (sub / "energy_uj").write_text("500\n")
            (sub / "max_energy_range_uj").write_text("65712999613\n")
    return root


# -- parse_visible_devices ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "expected"),
    [("0,1,2", [0, 1, 2]), ("2,0", [2, 0]), (" 1 , 0 ", [1, 0]), ("", []), ("-1", []), ("1,-1,0", [1])],
)
def test_integer_lists_map_like_cuda(spec: str, expected: list[int]) -> None:
    assert parse_visible_devices(spec, 3, _uuids_never_needed) == expected


def test_uuid_prefixes_map_to_their_device_and_mix_with_indices() -> None:
    assert parse_visible_devices("GPU-bbbb3333,0", 3, lambda: UUIDS) == [2, 0]
    assert parse_visible_devices("gpu-AAAA1111-0000", 3, lambda: UUIDS) == [0]  # case-insensitive


def test_ambiguous_uuid_prefix_is_refused() -> None:
    with pytest.raises(ZeusConfigError, match=r"matches GPUs \[1, 2\]"):
        parse_visible_devices("GPU-bbbb", 3, lambda: UUIDS)


def test_unknown_uuid_and_index_name_the_devices_that_exist() -> None:
    with pytest.raises(ZeusDeviceNotFoundError, match="GPU-cccc") as e:
        parse_visible_devices("GPU-cccc", 3, lambda: UUIDS)
    assert "GPU-aaaa1111-0000" in str(e.value)
    expected = r"no GPU 3; this machine has 3 GPU\(s\) \(indices 0-2\)"
    with pytest.raises(ZeusDeviceNotFoundError, match=expected):
        parse_visible_devices("0,3", 3, _uuids_never_needed)


def test_mig_entries_are_refused_with_the_fix() -> None:
    with pytest.raises(ZeusConfigError) as e:
        parse_visible_devices("MIG-5f0b1c2d-aaaa-bbbb-cccc-000000000000", 3, lambda: UUIDS)
    message = str(e.value)
    assert "cannot meter" in message and "parent" in message and "nvidia-smi -L" in message


@pytest.mark.parametrize("spec", ["0,0", "1,GPU-bbbb2222"])
def test_duplicates_are_refused(spec: str) -> None:
    with pytest.raises(ZeusConfigError, match="twice"):
        parse_visible_devices(spec, 3, lambda: UUIDS)


@pytest.mark.parametrize("spec", ["zero", "0,,1", "1.5"])
def test_malformed_entries_are_refused(spec: str) -> None:
    with pytest.raises(ZeusConfigError):
        parse_visible_devices(spec, 3, lambda: UUIDS)


# -- get_gpus ------------------------------------------------------------------------------------
def test_nvidia_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNVML([FakeGPUSpec.a40()]).patch(monkeypatch)
    FakeAMDSMI([FakeAMDSpec.mi300x()]).patch(monkeypatch)
    gpus = get_gpus()
    assert [(g.vendor, g.name) for g in gpus] == [("nvidia", "NVIDIA A40")]


def test_amd_when_there_is_no_nvidia_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNVML(library_found=False).patch(monkeypatch)
    FakeAMDSMI([FakeAMDSpec.mi300x(), FakeAMDSpec.mi300x()]).patch(monkeypatch)
    gpus = get_gpus()
    assert [(g.vendor, g.index) for g in gpus] == [("amd", 0), ("amd", 1)]


def test_no_gpu_at_all_is_an_empty_list(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNVML(driver_loaded=False).patch(monkeypatch)
    FakeAMDSMI(driver_loaded=False).patch(monkeypatch)
    assert get_gpus() == []


def test_get_gpus_reads_the_given_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNVML([FakeGPUSpec.a40(), FakeGPUSpec.h100()]).patch(monkeypatch)
    gpus = get_gpus(environ={"CUDA_VISIBLE_DEVICES": "1"})
    assert [g.name for g in gpus] == ["NVIDIA H100 80GB HBM3"]
    with pytest.raises(ZeusConfigError, match="MIG"):
        get_gpus(environ={"CUDA_VISIBLE_DEVICES": "MIG-1234"})


# -- get_cpus and the report ---------------------------------------------------------------------
def test_get_cpus_reads_rapl(tmp_path: Path) -> None:
    cpus = get_cpus(make_rapl(tmp_path / "powercap"))
    try:
        found = [(c.index, c.name, c.has_dram) for c in cpus]
        assert found == [(0, "package-0", True), (1, "package-1", True)]
    finally:
        for c in cpus:
            c.close()


def test_report_lists_devices_and_nothing_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    FakeNVML([FakeGPUSpec.a40()]).patch(monkeypatch)
    report = discover(environ={"CUDA_VISIBLE_DEVICES": "0"}, sysfs_root=make_rapl(tmp_path / "pc", 1))
    try:
        assert [g.name for g in report.gpus] == ["NVIDIA A40"]
        assert [c.name for c in report.cpus] == ["package-0"]
        assert report.missing == []
        assert report.visibility == {"CUDA_VISIBLE_DEVICES": "0"}
    finally:
        for c in report.cpus:
            c.close()


def test_report_explains_every_missing_kind(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    FakeNVML(library_found=False).patch(monkeypatch)
    FakeAMDSMI(driver_loaded=False).patch(monkeypatch)
    report = discover(environ={}, sysfs_root=tmp_path / "absent")
    by_what = {m.what: m for m in report.missing}
    assert set(by_what) == {"NVIDIA GPUs", "AMD GPUs", "CPU energy (RAPL)"}
    assert "libnvidia-ml.so.1" in by_what["NVIDIA GPUs"].reason
    assert "install the NVIDIA driver" in by_what["NVIDIA GPUs"].fix
    assert "amdgpu" in by_what["AMD GPUs"].fix
    assert "modprobe intel_rapl_common" in by_what["CPU energy (RAPL)"].fix
    assert report.gpus == [] and report.cpus == []


def test_report_notes_missing_dram(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    FakeNVML([FakeGPUSpec.a40()]).patch(monkeypatch)
    report = discover(environ={}, sysfs_root=make_rapl(tmp_path / "pc", 1, dram=False))
    try:
        assert [m.what for m in report.missing] == ["DRAM energy (RAPL)"]
        assert len(report.cpus) == 1
    finally:
        for c in report.cpus:
            c.close()


def test_unreadable_rapl_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    FakeNVML([FakeGPUSpec.a40()]).patch(monkeypatch)

    def unreadable(sysfs_root: str = "", **_: object) -> list:
        raise ZeusPermissionError(f"Reading RAPL counter {sysfs_root}/intel-rapl:0/energy_uj failed.")

    monkeypatch.setattr(rapl, "rapl_cpus", unreadable)
    with pytest.raises(ZeusPermissionError):
        get_cpus(tmp_path)
    report = discover(environ={}, sysfs_root=tmp_path)
    (entry,) = report.missing
    assert entry.what == "CPU energy (RAPL)" and "energy_uj failed" in entry.reason
    assert "sudo chmod a+r" in entry.fix


def test_bad_visibility_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    FakeNVML([FakeGPUSpec.a40()]).patch(monkeypatch)
    report = discover(environ={"CUDA_VISIBLE_DEVICES": "MIG-1234"}, sysfs_root=tmp_path)
    gpu_entries = [m for m in report.missing if m.what == "GPUs"]
    assert len(gpu_entries) == 1 and "MIG" in gpu_entries[0].reason
    assert report.gpus == []
