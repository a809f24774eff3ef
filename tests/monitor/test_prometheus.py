"""PrometheusExporter: scrape-time reads, window histograms, HTTP /metrics, Pushgateway, the CLI.

Also: failing devices, bad arguments and the hint when prometheus_client is missing.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import free_port
from tests.fakes.clock_cpu import CPU_ORIGIN_J, DRAM_ORIGIN_J
from tests.fakes.clock_cpu import ClockCPU as FakeCPU
from zeus_core.exceptions import ZeusConfigError, ZeusDeviceError
from zeus_core.monitor._energy import ZeusMonitor
from zeus_core.monitor._measurement import Measurement
from zeus_core.monitor._prometheus import PrometheusExporter
from zeus_core.testing import PhysicalModel, SimulatedGPU, VirtualClock
from zeus_core.testing._fake_nvml import FakeGPUSpec, FakeNVML

BUSY_W, IDLE_W = 300.0, 30.0  # PhysicalModel.a40() busy at its default 300 W limit, and idle
SIM = "NVIDIA A40 (simulated)"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class BrokenCounterGPU(SimulatedGPU):
    """A simulated GPU whose energy-counter read fails (power and limit still answer)."""

    def get_total_energy(self) -> float:
        raise ZeusDeviceError("GPU fell off the bus")


def parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(exporter: PrometheusExporter) -> Samples:
    return parse(generate_latest(exporter.registry).decode())


def value(samples: Samples, metric: str, **labels: str) -> float:
    return samples[(metric, frozenset(labels.items()))]


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


def gpu_labels(i: int, name: str = SIM, simulated: str = "true") -> dict[str, str]:
    return {"gpu": str(i), "name": name, "simulated": simulated}


def power_labels(i: int, name: str = SIM, simulated: str = "true") -> dict[str, str]:
    """Labels of Zeus's power gauge (``index`` as in ``zeus.metric.PowerGauge``)."""
    return {"index": str(i), "name": name, "simulated": simulated}


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(0.0)


@pytest.fixture
def exporter(clock: VirtualClock) -> Iterator[PrometheusExporter]:
    """GPU 0 busy, GPU 1 idle with a 200 W limit, one CPU package with DRAM; all on ``clock``."""
    busy = SimulatedGPU(PhysicalModel.a40(), index=0, clock=clock, busy=True)
    idle = SimulatedGPU(PhysicalModel.a40(), index=1, clock=clock)
    idle.set_power_limit(200.0)
    monitor = ZeusMonitor(gpus=[busy, idle], cpus=[FakeCPU(0, clock)], sync_execution_with=None)
    with PrometheusExporter(monitor) as exp:
        yield exp
    monitor.close()


# -- scrape-time device readings --------------------------------------------------------------------
def test_scrape_reads_energy_power_and_limit_at_scrape_time(
    exporter: PrometheusExporter, clock: VirtualClock
) -> None:
    clock.advance(10.0)
    first = scrape(exporter)
    assert value(first, "zeus_gpu_energy_joules_total", **gpu_labels(0)) == pytest.approx(10 * BUSY_W)
    assert value(first, "zeus_gpu_energy_joules_total", **gpu_labels(1)) == pytest.approx(10 * IDLE_W)
    assert value(first, "power_monitor_gpu_power_watts", **power_labels(0)) == BUSY_W
    assert value(first, "power_monitor_gpu_power_watts", **power_labels(1)) == IDLE_W
    assert value(first, "zeus_gpu_power_limit_watts", **gpu_labels(0)) == 300.0
    assert value(first, "zeus_gpu_power_limit_watts", **gpu_labels(1)) == 200.0
    cpu = {"cpu": "0", "name": "package-0", "simulated": "false"}
    assert value(first, "zeus_cpu_energy_joules_total", **cpu) == pytest.approx(CPU_ORIGIN_J + 50.0 * 10)
    assert value(first, "zeus_dram_energy_joules_total", **cpu) == pytest.approx(DRAM_ORIGIN_J + 5.0 * 10)

    # The counters advance with the devices between scrapes; gauges follow the device's state.
    clock.advance(5.0)
    exporter.monitor.gpus[0].set_busy(False)
    second = scrape(exporter)
    assert value(second, "zeus_gpu_energy_joules_total", **gpu_labels(0)) == pytest.approx(15 * BUSY_W)
    assert value(second, "power_monitor_gpu_power_watts", **power_labels(0)) == IDLE_W
    assert value(second, "zeus_cpu_energy_joules_total", **cpu) == pytest.approx(CPU_ORIGIN_J + 50.0 * 15)


def test_gpus_without_an_energy_counter_get_no_energy_sample_on_the_nvml_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the real NVML backend (mW/mJ converted): a Pascal GPU has power, not invented energy."""
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    fake_clock = VirtualClock(1000.0)
    FakeNVML([FakeGPUSpec.a40(), FakeGPUSpec.p100()], clock=fake_clock).patch(monkeypatch)
    from zeus_core.device._nvidia import nvidia_gpus

    monitor = ZeusMonitor(gpus=nvidia_gpus(environ={}), cpu_indices=[], sync_execution_with=None)
    exporter = PrometheusExporter(monitor, namespace="node")
    before = scrape(exporter)
    fake_clock.advance(4.0)
    after = scrape(exporter)
    a40 = gpu_labels(0, "NVIDIA A40", simulated="false")
    p100 = gpu_labels(1, "Tesla P100-PCIE-16GB", simulated="false")
    p100_power = power_labels(1, "Tesla P100-PCIE-16GB", simulated="false")
    energy = "node_gpu_energy_joules_total"
    assert value(after, energy, **a40) - value(before, energy, **a40) == pytest.approx(4.0 * 250.0)  # 250 W
    assert ("node_gpu_energy_joules_total", frozenset(p100.items())) not in after
    assert value(after, "node_power_monitor_gpu_power_watts", **p100_power) == pytest.approx(150.0)
    assert value(after, "node_gpu_power_limit_watts", **p100) == pytest.approx(250.0)
    assert not any(name.startswith("zeus_") for name in names(after))  # the namespace is the prefix
    assert ("node_read_errors_total", frozenset({("device", "gpu1"), ("reading", "energy")})) not in after


def test_a_failing_device_read_is_left_out_counted_and_warned_once(
    clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    good = SimulatedGPU(PhysicalModel.a40(), index=0, clock=clock, busy=True)
    bad = BrokenCounterGPU(PhysicalModel.a40(), index=1, clock=clock, busy=True)
    cpu = FakeCPU(0, clock)
    cpu.broken = True
    exporter = PrometheusExporter(ZeusMonitor(gpus=[good, bad], cpus=[cpu], sync_execution_with=None))
    clock.advance(2.0)
    with caplog.at_level(logging.WARNING, logger="zeus_core.monitor._prometheus"):
        first = scrape(exporter)
        second = scrape(exporter)
    for samples in (first, second):
        assert (
            value(samples, "power_monitor_gpu_power_watts", **power_labels(0)) == BUSY_W
        )  # the rest is there
        assert value(samples, "zeus_gpu_energy_joules_total", **gpu_labels(0)) == pytest.approx(2 * BUSY_W)
        assert value(samples, "power_monitor_gpu_power_watts", **power_labels(1)) == BUSY_W
        assert value(samples, "zeus_gpu_power_limit_watts", **gpu_labels(1)) == 300.0
        assert ("zeus_gpu_energy_joules_total", frozenset(gpu_labels(1).items())) not in samples
        assert "zeus_cpu_energy_joules_total" not in names(samples)
    assert value(second, "zeus_read_errors_total", device="gpu1", reading="energy") == 2.0
    assert value(second, "zeus_read_errors_total", device="cpu0", reading="energy") == 2.0
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2  # once per (device, reading), not once per scrape
    assert any("energy of gpu1" in w and "fell off the bus" in w for w in warnings)


# -- window histograms ----------------------------------------------------------------------------
def test_observe_puts_each_devices_window_energy_into_the_histogram(clock: VirtualClock) -> None:
    monitor = ZeusMonitor(gpus=[SimulatedGPU(PhysicalModel.a40(), clock=clock)], cpu_indices=[])
    exporter = PrometheusExporter(monitor, energy_buckets_j=[100.0, 1000.0, 10000.0])
    m1 = Measurement(5.0, {0: 1500.0, 1: 40.0}, {0: 200.0}, {0: 20.0}, frozenset({1}), simulated=True)
    m2 = Measurement(1.0, {0: 500.0, 1: 60.0}, {0: 100.0}, {0: 10.0}, frozenset({1}), simulated=True)
    exporter.observe("epoch", m1)
    exporter.observe("epoch", m2)
    s = scrape(exporter)

    def labels(index: int, estimated: str | None = "false") -> dict[str, str]:
        out = {"window": "epoch", "index": str(index), "simulated": "true"}
        return {**out, "estimated": estimated} if estimated else out

    hist = "energy_monitor_gpu_energy_joules"  # Zeus's EnergyHistogram names
    assert value(s, f"{hist}_sum", **labels(0)) == 2000.0
    assert value(s, f"{hist}_count", **labels(0)) == 2.0
    assert value(s, f"{hist}_sum", **labels(1, estimated="true")) == 100.0  # sampled-power estimate
    assert value(s, "energy_monitor_cpu_energy_joules_sum", **labels(0, None)) == 300.0
    assert value(s, "energy_monitor_dram_energy_joules_sum", **labels(0, None)) == 30.0
    assert value(s, f"{hist}_bucket", le="1000.0", **labels(0)) == 1.0  # 500 J only
    assert value(s, f"{hist}_bucket", le="10000.0", **labels(0)) == 2.0
    assert value(s, "zeus_window_time_seconds_sum", window="epoch", simulated="true") == 6.0
    assert value(s, "zeus_window_time_seconds_count", window="epoch", simulated="true") == 2.0


def test_window_measures_a_block_and_observes_it_even_when_it_raises(
    exporter: PrometheusExporter, clock: VirtualClock
) -> None:
    with exporter.window("step") as handle:
        clock.advance(2.0)
    assert handle.measurement is not None and handle.measurement.gpu_energy[0] == pytest.approx(2 * BUSY_W)
    with pytest.raises(RuntimeError, match="diverged"), exporter.window("step"):
        clock.advance(1.0)
        raise RuntimeError("loss diverged")
    s = scrape(exporter)
    gpu0 = {"window": "step", "index": "0", "simulated": "true", "estimated": "false"}
    assert value(s, "energy_monitor_gpu_energy_joules_sum", **gpu0) == pytest.approx(3 * BUSY_W)
    assert value(s, "energy_monitor_gpu_energy_joules_count", **gpu0) == 2.0
    assert value(s, "zeus_window_time_seconds_sum", window="step", simulated="true") == pytest.approx(3.0)
    assert exporter.monitor.open_windows == []


# -- /metrics over HTTP ---------------------------------------------------------------------------
def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        return response.read().decode()


def test_serve_answers_get_metrics_over_http_and_close_frees_the_port(
    exporter: PrometheusExporter, clock: VirtualClock
) -> None:
    port = free_port()
    server = exporter.serve(port)
    assert (server.port, server.url) == (port, f"http://127.0.0.1:{port}/metrics")
    clock.advance(3.0)
    s = parse(get(server.url))
    assert value(s, "zeus_gpu_energy_joules_total", **gpu_labels(0)) == pytest.approx(3 * BUSY_W)
    assert value(s, "power_monitor_gpu_power_watts", **power_labels(1)) == IDLE_W
    clock.advance(1.0)  # a new scrape reads the devices again
    s = parse(get(server.url))
    assert value(s, "zeus_gpu_energy_joules_total", **gpu_labels(0)) == pytest.approx(4 * BUSY_W)

    with exporter.serve(0) as second:  # port 0: the OS picks one, reported on the server
        assert second.port not in (0, port)
        assert "power_monitor_gpu_power_watts" in get(second.url)
    with pytest.raises(urllib.error.URLError):
        get(second.url)

    exporter.close()  # stops the first server too
    with pytest.raises(urllib.error.URLError):
        get(server.url)
    with socket.socket() as s2:  # nobody listens on the port any more (TIME_WAIT is fine)
        s2.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s2.bind(("127.0.0.1", port))
        s2.listen()


def test_serve_on_a_busy_port_names_the_fix(exporter: PrometheusExporter) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ZeusConfigError, match=rf"serve\(port={port}.*Pick another port"):
            exporter.serve(port)


# -- Pushgateway ----------------------------------------------------------------------------------
class Gateway:
    """A tiny stand-in for a Pushgateway that records each request (and answers ``status``)."""

    def __init__(self, status: int = 200) -> None:
        self.requests: list[tuple[str, str, str]] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                gateway.requests.append((self.command, self.path, body))
                self.send_response(status)
                self.end_headers()

            do_PUT = do_POST = _record

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    gw = Gateway()
    yield gw
    gw.close()


def test_push_puts_the_metrics_to_the_pushgateway(
    exporter: PrometheusExporter, clock: VirtualClock, gateway: Gateway
) -> None:
    clock.advance(10.0)
    exporter.observe("train", Measurement(10.0, {0: 3000.0}))
    exporter.push(gateway.address, job="nightly")
    exporter.push(f"http://{gateway.address}", job="nightly", grouping_key={"instance": "node3"})
    (method, path, body), (method2, path2, _) = gateway.requests
    assert (method, path) == ("PUT", "/metrics/job/nightly")
    assert (method2, path2) == ("PUT", "/metrics/job/nightly/instance/node3")
    pushed = parse(body)
    assert value(pushed, "zeus_gpu_energy_joules_total", **gpu_labels(0)) == pytest.approx(10 * BUSY_W)
    assert {
        "power_monitor_gpu_power_watts",
        "zeus_gpu_power_limit_watts",
        "zeus_cpu_energy_joules_total",
        "zeus_dram_energy_joules_total",
        "energy_monitor_gpu_energy_joules_sum",
    } <= names(pushed)


def test_push_failures_name_the_gateway_and_the_fix(exporter: PrometheusExporter) -> None:
    refusing = Gateway(status=500)
    try:
        with pytest.raises(ZeusConfigError, match="did not take the metrics.*500"):
            exporter.push(refusing.address, job="j")
    finally:
        refusing.close()
    with pytest.raises(ZeusConfigError, match="Check that a Pushgateway runs at that address"):
        exporter.push(refusing.address, job="j", timeout_s=2.0)  # closed now: connection refused


# -- bad arguments, missing package -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e: e.serve(70000), r"serve\(port=70000\): the port must be an integer in 0-65535"),
        (lambda e: e.serve(-1), "0 lets the OS pick a free one"),
        (lambda e: e.serve("9400"), r"port='9400'"),
        (lambda e: e.serve(True), "port=True"),
        (lambda e: e.serve(9400, addr=" "), "give an address to listen on, such as '127.0.0.1'"),
        (lambda e: e.push("", job="j"), "give the Pushgateway address, e.g. 'localhost:9091'"),
        (lambda e: e.push("ftp://gw:9091", job="j"), "speaks http or https, not 'ftp'"),
        (lambda e: e.push("gw:9091", job=""), "give a non-empty job name, e.g. job='nightly-train'"),
        (lambda e: e.push("gw:9091", job="j", grouping_key={"job": "x"}), "not 'job', which the job"),
        (lambda e: e.push("gw:9091", job="j", grouping_key={"my-host": "x"}), "'my-host' is not a usable"),
        (lambda e: e.push("gw:9091", job="j", grouping_key={"rank": 3}), r"must be a string, not int"),
        (lambda e: e.push("gw:9091", job="j", timeout_s=0), "must be > 0 s, or None"),
        (lambda e: e.observe("", Measurement(1.0, {})), "window name must be a non-empty string"),
    ],
)
def test_bad_arguments_raise_config_errors_naming_the_fix(
    exporter: PrometheusExporter, call, message: str
) -> None:
    with pytest.raises(ZeusConfigError, match=message):
        call(exporter)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"namespace": "9lives"}, "letters, digits and underscores, not starting with a digit"),
        ({"energy_buckets_j": []}, "non-empty, strictly increasing"),
        ({"time_buckets_s": [1.0, 1.0, 2.0]}, r"time_buckets_s=\[1.0, 1.0, 2.0\]"),
        ({"energy_buckets_j": [0.0, 1.0]}, "finite bucket bounds > 0"),
    ],
)
def test_bad_constructor_arguments(clock: VirtualClock, kwargs: dict, message: str) -> None:
    monitor = ZeusMonitor(gpus=[SimulatedGPU(PhysicalModel.a40(), clock=clock)], cpu_indices=[])
    with pytest.raises(ZeusConfigError, match=message):
        PrometheusExporter(monitor, **kwargs)


def test_not_a_monitor_and_a_shared_registry(exporter: PrometheusExporter) -> None:
    with pytest.raises(ZeusConfigError, match="expected a ZeusMonitor"):
        PrometheusExporter([0, 1])  # type: ignore[arg-type]
    registry = CollectorRegistry()
    first = PrometheusExporter(exporter.monitor, registry=registry)
    with pytest.raises(ZeusConfigError, match="close\\(\\) the other exporter first, or give this one"):
        PrometheusExporter(exporter.monitor, registry=registry)
    PrometheusExporter(exporter.monitor, registry=registry, namespace="job2")  # another namespace fits
    first.close()  # frees its names
    PrometheusExporter(exporter.monitor, registry=registry)


def test_missing_prometheus_client_gives_the_pip_command(
    exporter: PrometheusExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(ModuleNotFoundError, match=re.escape("pip install 'zeus-suite[prometheus]'")):
        PrometheusExporter(exporter.monitor)


def test_top_level_export_stays_lazy() -> None:
    code = (
        "import sys, zeus_core; cls = zeus_core.PrometheusExporter; import zeus_core.monitor._prometheus;"
        "print(cls.__module__, 'prometheus_client' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["zeus_core.monitor._prometheus", "False"]


# -- zeus-suite metrics -----------------------------------------------------------------------------
def test_cli_serves_metrics_until_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "zeus_core._cli", "metrics", "--simulate", "--cpu-indices", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = re.match(
            r"zeus-suite metrics: serving (http://127\.0\.0\.1:\d+/metrics) for 1 GPU\(s\), "
            r"0 CPU package\(s\) \[simulated\]",
            first,
        )
        assert match, first
        one, two = parse(get(match.group(1))), parse(get(match.group(1)))
        assert value(one, "power_monitor_gpu_power_watts", **power_labels(0)) == BUSY_W
        energy = [value(s, "zeus_gpu_energy_joules_total", **gpu_labels(0)) for s in (one, two)]
        assert 0 < energy[0] < energy[1]  # wall clock: the busy simulated GPU keeps drawing 300 W
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "zeus-suite metrics: stopped." in out and "Traceback" not in err


def test_cli_bad_port_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from zeus_core._cli import main

    assert main(["metrics", "--simulate", "--cpu-indices", "--port", "70000"]) == 2
    assert "port must be an integer in 0-65535" in capsys.readouterr().err


def test_docstring_example_runs() -> None:
    import doctest

    import zeus_core.monitor._prometheus as module

    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_metrics_zeus_also_publishes_carry_zeus_names(exporter: PrometheusExporter) -> None:
    """Names and window/index labels match the installed Zeus's zeus/metric.py, so Zeus dashboards work."""
    spec = importlib.util.find_spec("zeus.metric")
    if spec is None or spec.origin is None:
        pytest.skip("Zeus (pip install zeus) is not installed")
    zeus_source = Path(spec.origin).read_text()
    zeus_names = set(re.findall(r'"((?:energy|power)_monitor_\w+)"', zeus_source))
    assert zeus_names == {
        "energy_monitor_gpu_energy_joules",
        "energy_monitor_cpu_energy_joules",
        "energy_monitor_dram_energy_joules",
        "power_monitor_gpu_power_watts",
    }
    exporter.observe("epoch", Measurement(1.0, {0: 5.0}, {0: 1.0}, {0: 0.5}, frozenset(), simulated=True))
    ours = names(scrape(exporter))
    for name in zeus_names - {"power_monitor_gpu_power_watts"}:  # histograms in Zeus, here too
        assert f"{name}_sum" in ours
    assert "power_monitor_gpu_power_watts" in ours
    samples = scrape(exporter)
    assert (
        "energy_monitor_gpu_energy_joules_count",
        frozenset({("window", "epoch"), ("index", "0"), ("simulated", "true"), ("estimated", "false")}),
    ) in samples
