"""What a run leaves in its output folder for ``zeus-suite report``: a summary JSON and a power timeline CSV.

Training adapters write them into the framework's own output folder (Lightning's logger
directory, Hugging Face's ``output_dir``, Accelerate's project directory), and
``zeus-suite measure --output DIR`` into ``DIR``:

* :data:`RUN_FILE` (``zeus_run.json``): what was run, on which devices, every epoch's and stage's
  figures with their start and end (s from the run's start), the run's totals, the forecasts,
  carbon and cost with their sources, and the power-limit optimizer's profile and decision;
* :data:`POWER_FILE` (``zeus_power.csv``): ``time_s,device,power_w,temperature_c,clock_events,
  slowdown,simulated`` per sample (s from the run's start, W, °C, NVML's clock-event bit mask,
  1 while a thermal or hardware slowdown was reported).
"""

from __future__ import annotations

import bisect
import csv
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Sequence

from zeus_core.device._base import GPU, Clock, ClockEventReasons, wall_clock
from zeus_core.monitor._power import PowerMonitor
from zeus_core.monitor._thermal import TemperatureMonitor

__all__ = [
    "RUN_FILE",
    "POWER_FILE",
    "RECORD_VERSION",
    "Timeline",
    "write_record",
    "power_limit_record",
    "command_record",
]

logger = logging.getLogger(__name__)

RUN_FILE = "zeus_run.json"
POWER_FILE = "zeus_power.csv"
RECORD_VERSION = 1
POWER_COLUMNS = ["time_s", "device", "power_w", "temperature_c", "clock_events", "slowdown", "simulated"]


class Timeline:
    """Power, temperature and clock-event reasons of GPUs over a run, for the report.

    On the wall clock a :class:`~zeus_core.monitor._power.PowerMonitor` and a
    :class:`~zeus_core.monitor._thermal.TemperatureMonitor` sample in daemon threads every
    ``interval_s``; on another clock (simulated GPUs on a virtual clock, where time only moves
    with the work) :meth:`tick`, called at each step, samples whenever the clock moved
    ``interval_s``, and power is the average since the last tick (from the energy counters).

    Args:
        gpus: The GPUs to follow.
        interval_s: Sampling period, s.
        clock: The GPUs' clock (default: the first GPU's).
    """

    def __init__(self, gpus: Sequence[GPU], interval_s: float = 0.5, clock: Clock | None = None) -> None:
        self.gpus = list(gpus)
        self.clock: Clock = clock or (self.gpus[0].clock if self.gpus else wall_clock)
        self.interval_s = float(interval_s)
        # 200,000 samples per GPU: 28 hours at 0.5 s (about 3 MB per series); older ones are dropped
        self.power = PowerMonitor(gpus=self.gpus, interval_s=interval_s, clock=self.clock, capacity=200_000)
        self.thermal = TemperatureMonitor(
            self.gpus, update_period=interval_s, clock=self.clock, capacity=200_000
        )
        self._threads = self.clock is wall_clock
        self._last = float("-inf")
        self._energy: dict[int, list[tuple[float, float]]] = {g.index: [] for g in self.gpus}
        self.start_s = self.clock()

    def start(self) -> None:
        """Start sampling (threads on the wall clock; a first sample otherwise)."""
        self.start_s = self.clock()
        if not self.gpus:
            return
        if self._threads:
            self.power.start()
            self.thermal.start()
        else:
            self.tick()

    def tick(self) -> None:
        """Sample now if the clock moved ``interval_s`` since the last sample (for non-wall clocks)."""
        if self._threads or not self.gpus:
            return
        now = self.clock()
        if now - self._last >= self.interval_s:
            self._last = now
            for gpu in self.gpus:
                try:
                    reading = gpu.get_total_energy() if gpu.has_energy_counter else gpu.get_power()
                except Exception as e:  # one failing read loses one sample
                    logger.debug("Timeline: reading GPU %d failed: %s", gpu.index, e)
                    continue
                self._energy[gpu.index].append((now, reading))
            self.thermal.sample_now()

    def stop(self) -> None:
        """Stop the sampling threads (a last sample first)."""
        if not self.gpus:
            return
        if not self._threads:
            self._last = float("-inf")
            self.tick()
            return
        self.power.stop()
        self.thermal.stop()
        try:
            self.power.sample_now()
            self.thermal.sample_now()
        except Exception as e:  # a failing last read loses one sample, not the record
            logger.debug("Timeline: last sample failed: %s", e)

    def rows(self, label: str = "gpu{index}") -> list[list[Any]]:
        """One row per power sample with the nearest temperature and clock events (see :data:`POWER_FILE`)."""
        temps = self.thermal.get_temperature_timeline()
        events = self.thermal.get_clock_event_timeline()
        simulated = {g.index: int(g.simulated) for g in self.gpus}
        out: list[list[Any]] = []
        power = self.power.get_power_timeline() if self._threads else self._tick_power()
        for index, samples in power.items():
            t_series, e_series = temps.get(index, []), events.get(index, [])
            for t, watts in samples:
                temp = _nearest(t_series, t)
                ev = _nearest(e_series, t)
                mask = ev.mask if isinstance(ev, ClockEventReasons) else None
                out.append(
                    [
                        round(t - self.start_s, 4),
                        label.format(index=index),
                        round(watts, 3),
                        "" if temp is None else round(float(temp), 1),
                        "" if mask is None else mask,
                        "" if mask is None else int(ClockEventReasons(mask).slowdown),
                        simulated.get(index, 0),
                    ]
                )
        out.sort(key=lambda r: (r[0], r[1]))
        return out

    def _tick_power(self) -> dict[int, list[tuple[float, float]]]:
        """Average power between ticks (counter GPUs), or the power read at each tick, W."""
        by_index = {g.index: g for g in self.gpus}
        out: dict[int, list[tuple[float, float]]] = {}
        for index, series in self._energy.items():
            if not by_index[index].has_energy_counter:
                out[index] = list(series)
                continue
            out[index] = [
                (t1, (e1 - e0) / (t1 - t0)) for (t0, e0), (t1, e1) in zip(series, series[1:]) if t1 > t0
            ]
        return out


def _nearest(series: Sequence[tuple[float, Any]], t: float) -> Any:
    """The value of the sample nearest ``t`` in a time-sorted series (``None`` if empty)."""
    if not series:
        return None
    k = bisect.bisect_left(series, t, key=lambda p: p[0])
    candidates = series[max(0, k - 1) : k + 1]
    return min(candidates, key=lambda p: abs(p[0] - t))[1]


def power_limit_record(optimizers: Iterable[Any]) -> dict[str, Any] | None:
    """The power-limit optimizer's profile and decision, read from its public views (``None`` without one)."""
    for opt in optimizers:
        measurements = getattr(opt, "measurements", None)
        if measurements is None or not hasattr(opt, "optimal_power_limit_w"):
            continue
        rows = []
        for m in measurements:
            try:
                rows.append(
                    {
                        "power_limit_w": float(m.power_limit_w),
                        "time_per_step_s": float(m.time_per_step_s),
                        "energy_per_step_j": float(m.energy_per_step_j),
                        "steps": int(getattr(m, "steps", 0)),
                    }
                )
            except (AttributeError, TypeError, ValueError):
                continue
        optimal = opt.optimal_power_limit_w
        selector = getattr(opt, "optimum_selector", None)
        return {
            "optimizer": type(opt).__name__,
            "selector": type(selector).__name__ if selector is not None else None,
            "measurements": rows,
            "optimal_w": None if optimal is None else float(optimal),
        }
    return None


def command_record(
    command: str,
    exit_code: int,
    measurement: Any,
    gpus: Sequence[GPU],
    cpus: Sequence[Any],
    started_at: float,
    footprint: Any,
) -> dict[str, Any]:
    """The run record of a command measured by ``zeus-suite measure`` (one window over its whole run).

    Args:
        command: The command line as run.
        exit_code: Its exit code.
        measurement: The window's :class:`~zeus_core.monitor._measurement.Measurement`.
        gpus: The measured GPUs.
        cpus: The measured CPU packages.
        started_at: Wall-clock start, s since the epoch.
        footprint: A :class:`~zeus_core.carbon.Footprint` for carbon and cost.
    """
    m = measurement
    energy = {f"gpu{i}": j for i, j in m.gpu_energy.items()}
    energy.update({f"cpu{i}": j for i, j in (m.cpu_energy or {}).items()})  # None: not measured
    energy.update({f"dram{i}": j for i, j in (m.dram_energy or {}).items()})
    total = sum(energy.values())
    train = {"energy/train_j": total, "time/train_s": m.time, "energy/train_co2_g": footprint.co2_g(total)}
    cost = footprint.cost(total)
    if cost is not None:
        train["energy/train_cost"] = cost
    return {
        "kind": "command",
        "who": "zeus-suite measure",
        "started_at": started_at,
        "simulated": bool(m.simulated),
        "devices": [d.describe() for d in [*gpus, *cpus]],
        "train": train,
        "command": {"command": command, "exit_code": exit_code, "energy_j": energy},
        "footprint": footprint.as_dict(),
    }


def write_record(run_dir: str | Path, record: dict[str, Any], rows: list[list[Any]] | None) -> Path:
    """Write :data:`RUN_FILE` (and :data:`POWER_FILE` when ``rows`` are given) into ``run_dir``.

    Files are written to a temporary name and renamed, so a report never reads half a file.

    Returns:
        The path of the run file.
    """
    folder = Path(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"version": RECORD_VERSION, **record}
    if rows is not None:
        doc["power_file"] = POWER_FILE
        _atomic_write(folder / POWER_FILE, lambda f: _write_rows(f, rows))
    path = folder / RUN_FILE
    _atomic_write(path, lambda f: json.dump(_json_safe(doc), f, indent=1))
    return path


def _write_rows(f: Any, rows: list[list[Any]]) -> None:
    writer = csv.writer(f)
    writer.writerow(POWER_COLUMNS)
    writer.writerows(rows)


def _atomic_write(path: Path, write: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_safe(value: Any) -> Any:
    """NaN and infinities become ``None`` (JSON has no such numbers)."""
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value
