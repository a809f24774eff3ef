"""RAPL backend against temporary sysfs-like powercap trees."""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from zeus_core.device._rapl import RaplCPU, rapl_cpus
from zeus_core.exceptions import ZeusDeviceError, ZeusPermissionError
from zeus_core.monitor._energy import ZeusMonitor

RANGE_UJ = 1_000_000  # a 1 J counter range keeps wraparound arithmetic readable


def write_atomic(path: Path, value: object) -> None:
    """Replace a file's content at once, as sysfs reads never see half a value."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{value}\n")
    os.replace(tmp, path)


def make_zone(
    root: Path,
    index: int,
    energy_uj: int = 0,
    range_uj: int = RANGE_UJ,
    dram_uj: int | None = None,
    name: str | None = None,
) -> Path:
    """Create ``intel-rapl:<index>`` (and a ``core`` plus optional ``dram`` sub-zone) under ``root``."""
    zone = root / f"intel-rapl:{index}"
    zone.mkdir(parents=True)
    (zone / "name").write_text(f"{name or f'package-{index}'}\n")
    write_atomic(zone / "energy_uj", energy_uj)
    (zone / "max_energy_range_uj").write_text(f"{range_uj}\n")
    subs = [("core", 5)] + ([("dram", dram_uj)] if dram_uj is not None else [])
    for k, (sub_name, value) in enumerate(subs):
        sub = zone / f"intel-rapl:{index}:{k}"
        sub.mkdir()
        (sub / "name").write_text(f"{sub_name}\n")
        write_atomic(sub / "energy_uj", value)
        (sub / "max_energy_range_uj").write_text(f"{range_uj}\n")
    return zone


def dram_file(zone: Path) -> Path:
    subs = [p for p in zone.iterdir() if p.is_dir()]
    return next(p for p in subs if (p / "name").read_text().strip() == "dram") / "energy_uj"


def wait_for_polls(cpu: RaplCPU, path: Path, raw: int, timeout_s: float = 5.0) -> None:
    """Wait until the background thread has read ``raw`` from ``path`` (observed through its state)."""
    counter = next(c for c in cpu._counters if c.path == path)
    deadline = time.monotonic() + timeout_s
    while counter._last_raw != raw:
        if time.monotonic() > deadline:
            raise AssertionError(f"background poller did not read {raw} from {path} within {timeout_s} s")
        time.sleep(0.002)


def test_package_and_dram_read_in_joules(tmp_path: Path) -> None:
    make_zone(tmp_path, 0, energy_uj=2_500_000, range_uj=262_143_328_850, dram_uj=750_000)
    (cpu,) = rapl_cpus(tmp_path)
    with cpu:
        assert cpu.index == 0 and cpu.name == "package-0" and cpu.has_dram
        assert cpu.describe() == "CPU 0: package-0 + DRAM (RAPL)"
        e = cpu.get_energy()
        assert e.cpu_j == pytest.approx(2.5) and e.dram_j == pytest.approx(0.75)
        write_atomic(tmp_path / "intel-rapl:0" / "energy_uj", 4_000_000)
        assert cpu.get_energy().cpu_j == pytest.approx(4.0)


def test_package_without_dram(tmp_path: Path) -> None:
    make_zone(tmp_path, 0, energy_uj=10)
    (cpu,) = rapl_cpus(tmp_path)
    with cpu:
        assert not cpu.has_dram and cpu.get_energy().dram_j is None
        assert cpu.describe() == "CPU 0: package-0 (RAPL)"


def test_several_packages_sorted_numerically_ignoring_other_zones(tmp_path: Path) -> None:
    for i in (10, 2, 0, 1):
        make_zone(tmp_path, i, energy_uj=i * 1_000, dram_uj=i)
    # Flat sibling links of sub-zones and MMIO zones are not packages.
    shutil.copytree(tmp_path / "intel-rapl:0" / "intel-rapl:0:1", tmp_path / "intel-rapl:0:1")
    make_zone(tmp_path / "mmio", 0).rename(tmp_path / "intel-rapl-mmio:0")
    cpus = rapl_cpus(tmp_path)
    try:
        assert [c.index for c in cpus] == [0, 1, 2, 10]
        assert [c.name for c in cpus] == ["package-0", "package-1", "package-2", "package-10"]
        assert [c.get_energy().cpu_j for c in cpus] == pytest.approx([0.0, 0.001, 0.002, 0.010])
        assert all(c.has_dram for c in cpus)
    finally:
        for c in cpus:
            c.close()


def test_flat_layout_finds_dram_among_siblings(tmp_path: Path) -> None:
    zone = make_zone(tmp_path, 0, energy_uj=1, dram_uj=3_000_000)
    for sub in [p for p in zone.iterdir() if p.is_dir()]:
        sub.rename(tmp_path / sub.name)
    (cpu,) = rapl_cpus(tmp_path)
    with cpu:
        assert cpu.has_dram and cpu.get_energy().dram_j == pytest.approx(3.0)


def test_no_rapl_gives_empty_list(tmp_path: Path) -> None:
    assert rapl_cpus(tmp_path / "absent") == []
    assert rapl_cpus(tmp_path) == []


def test_single_wraparound_between_reads(tmp_path: Path) -> None:
    zone = make_zone(tmp_path, 0, energy_uj=900_000, dram_uj=990_000)
    (cpu,) = rapl_cpus(tmp_path)
    with cpu:
        first = cpu.get_energy()
        write_atomic(zone / "energy_uj", 100_000)
        write_atomic(dram_file(zone), 10_000)
        second = cpu.get_energy()
        assert second.cpu_j - first.cpu_j == pytest.approx(0.2)
        assert second.dram_j - first.dram_j == pytest.approx(0.02)


def test_wraparounds_during_a_zeus_monitor_window_are_all_counted(tmp_path: Path) -> None:
    """Two wraps of the package counter and one of DRAM while the window is open.

    The monitor reads nothing in between: only the background poller sees the intermediate values.
    """
    zone = make_zone(tmp_path, 0, energy_uj=100_000, dram_uj=500_000)
    package, dram = zone / "energy_uj", dram_file(zone)
    cpus = rapl_cpus(tmp_path, poll_interval_s=0.005)
    monitor = ZeusMonitor(gpus=[], cpus=cpus)
    try:
        monitor.begin_window("train")
        assert cpus[0].polling
        for raw in (700_000, 300_000, 900_000, 200_000):  # wraps after 700k and after 900k
            write_atomic(package, raw)
            wait_for_polls(cpus[0], package, raw)
        write_atomic(dram, 100_000)
        wait_for_polls(cpus[0], dram, 100_000)
        write_atomic(dram, 400_000)  # a second, smaller value that the end reading sees itself
        m = monitor.end_window("train")
        # package: 100k -> 1M (0.9 J), 0 -> 1M (1 J), 0 -> 200k (0.2 J); DRAM: 500k -> 1M -> 400k.
        assert m.cpu_energy == {0: pytest.approx(2.1)}
        assert m.dram_energy == {0: pytest.approx(0.9)}
        assert m.gpu_energy == {} and not m.simulated
    finally:
        monitor.close()
        cpus[0].close()


def test_poll_interval_derived_from_counter_range(tmp_path: Path) -> None:
    make_zone(tmp_path / "a", 0, range_uj=262_143_328_850)  # Intel server: 262 kJ lasts 262 s at 1 kW
    make_zone(tmp_path / "b", 0, range_uj=4_294_967_295)  # 4295 J: 4.3 s at 1 kW
    make_zone(tmp_path / "c", 0, range_uj=1_000)
    (big,), (mid,), (tiny,) = (rapl_cpus(tmp_path / d) for d in "abc")
    assert big.poll_interval_s == 60.0
    assert mid.poll_interval_s == pytest.approx(4.294967295 / 4)
    assert tiny.poll_interval_s == 0.01


def test_poller_starts_lazily_and_stops_on_close_and_collection(tmp_path: Path) -> None:
    make_zone(tmp_path, 0, energy_uj=1)
    (cpu,) = rapl_cpus(tmp_path, poll_interval_s=0.01)
    assert not cpu.polling  # discovery itself starts no thread
    cpu.get_energy()
    thread = cpu._thread
    assert cpu.polling and thread is not None and thread.daemon
    cpu.close()
    cpu.close()  # idempotent
    assert not cpu.polling and not thread.is_alive()

    (other,) = rapl_cpus(tmp_path, poll_interval_s=0.01)
    other.get_energy()
    thread = other._thread
    del other
    gc.collect()
    assert thread is not None
    thread.join(timeout=2.0)
    assert not thread.is_alive()


def test_concurrent_reads_never_count_a_false_wrap(tmp_path: Path) -> None:
    zone = make_zone(tmp_path, 0, energy_uj=0)
    (cpu,) = rapl_cpus(tmp_path, poll_interval_s=0.001)
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                cpu.get_energy()
        except BaseException as e:  # reported below
            errors.append(e)

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for t in readers:
        t.start()
    for raw in range(0, 500_000, 2_500):  # increasing: any counted wrap would be false
        write_atomic(zone / "energy_uj", raw)
    stop.set()
    for t in readers:
        t.join()
    with cpu:
        assert not errors
        assert cpu.get_energy().cpu_j == pytest.approx(0.4975)


def _unreadable_tree() -> Path:
    root = Path(tempfile.mkdtemp(prefix="zeus-rapl-"))
    root.chmod(0o755)  # traversable by an unprivileged user
    zone = make_zone(root, 0, energy_uj=1, dram_uj=1)
    (zone / "energy_uj").chmod(0o000)
    return root


def _rapl_error_as_nobody(root: Path) -> str:
    """Run rapl_cpus(root) in a forked child that dropped root privileges; return what it raised."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(read_fd)
            os.setgid(65534)
            os.setuid(65534)
            try:
                rapl_cpus(root)
                msg = "no error"
            except Exception as e:
                msg = f"{type(e).__name__}: {e}"
            os.write(write_fd, msg.encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    return out


def test_unreadable_counter_raises_permission_error_with_fix() -> None:
    """A real EACCES from the kernel: chmod 000 as a normal user, or as root in a child that drops root."""
    root = _unreadable_tree()
    try:
        if os.geteuid() != 0:
            with pytest.raises(ZeusPermissionError) as info:
                rapl_cpus(root)
            message = f"ZeusPermissionError: {info.value}"
            assert isinstance(info.value, PermissionError)
        else:
            message = _rapl_error_as_nobody(root)
        assert message.startswith("ZeusPermissionError: ")
        assert str(root / "intel-rapl:0" / "energy_uj") in message
        assert f"sudo chmod a+r {root}/intel-rapl:*/energy_uj" in message
        assert "cpu_indices=[]" in message and "CVE-2020-8694" in message
    finally:
        shutil.rmtree(root)


@pytest.mark.parametrize(
    ("file", "content", "expected"),
    [
        ("energy_uj", "abc", "not a non-negative integer"),
        ("energy_uj", "-5", "not a non-negative integer"),
        ("energy_uj", "", "not a non-negative integer"),
        ("max_energy_range_uj", "1.5e6", "not a non-negative integer"),
        ("max_energy_range_uj", "0", "range is 0"),
    ],
)
def test_malformed_files_raise_device_error_naming_the_file(
    tmp_path: Path, file: str, content: str, expected: str
) -> None:
    zone = make_zone(tmp_path, 0, energy_uj=1)
    (zone / file).write_text(content)
    with pytest.raises(ZeusDeviceError, match=expected) as info:
        rapl_cpus(tmp_path)
    assert str(zone / file) in str(info.value)


def test_missing_or_broken_files_raise_device_error(tmp_path: Path) -> None:
    zone = make_zone(tmp_path, 0, energy_uj=1)
    (zone / "max_energy_range_uj").unlink()
    with pytest.raises(ZeusDeviceError, match="max_energy_range_uj"):
        rapl_cpus(tmp_path)

    other = make_zone(tmp_path / "b", 0)
    (other / "energy_uj").unlink()
    (other / "energy_uj").mkdir()  # not a file: reading it fails with IsADirectoryError
    with pytest.raises(ZeusDeviceError, match="Reading RAPL file"):
        rapl_cpus(tmp_path / "b")


def test_counter_that_breaks_later_raises_on_read(tmp_path: Path) -> None:
    zone = make_zone(tmp_path, 0, energy_uj=1)
    (cpu,) = rapl_cpus(tmp_path)
    with cpu:
        write_atomic(zone / "energy_uj", "garbage")
        with pytest.raises(ZeusDeviceError, match="garbage"):
            cpu.get_energy()
