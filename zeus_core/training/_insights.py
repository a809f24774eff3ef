"""Energy insights of a training run: J/sample and J/token, the forecast, carbon and cost, the run record.

:class:`EnergyInsights` holds the options; the lifecycle opens one :class:`InsightsRun` per training
run and calls it at the run's, epochs' and steps' ends. It adds these keys to the figures every
adapter logs (J, s, gCO2e, the currency of the price):

* each epoch: ``energy/j_per_sample``, ``energy/j_per_token`` (language-model batches),
  ``energy/co2_g``, ``energy/cost`` (with a price), and the whole run's forecast
  ``energy/forecast_j``, ``energy/forecast_time_s``, ``energy/forecast_co2_g``, ``energy/forecast_cost``;
* the run: ``energy/train_j_per_sample``, ``energy/train_j_per_token``, ``energy/train_co2_g``,
  ``energy/train_cost``, and how far the first forecast was off, ``energy/forecast_error_pct`` and
  ``energy/forecast_time_error_pct`` (%).

The forecast is shown once on rank zero after the first epoch, and the end-of-run summary says how
far it was off. See docs/insights.md.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from zeus_core import _distributed as distributed
from zeus_core import console
from zeus_core.carbon import Footprint
from zeus_core.exceptions import ZeusConfigError
from zeus_core.training._efficiency import WorkCounter, count_batch, count_call, efficiency_metrics
from zeus_core.training._forecast import Forecast, Forecaster
from zeus_core.training._run_record import Timeline, power_limit_record, write_record
from zeus_core.training._tracker import metric_key

if TYPE_CHECKING:
    from zeus_core.monitor._energy import ZeusMonitor
    from zeus_core.training._tracker import TrainingTracker

__all__ = ["EnergyInsights", "InsightsRun", "format_energy", "format_duration", "format_money"]

logger = logging.getLogger(__name__)


class EnergyInsights:
    """What a training adapter adds to its energy figures: efficiency, forecast, carbon, cost, a report.

    Every adapter uses one by default (J/sample, the forecast where the run's length is known, and
    the world-average carbon intensity, or the one ``ZEUS_SUITE_CARBON_REGION`` /
    ``ZEUS_SUITE_CARBON_INTENSITY`` / ``ZEUS_SUITE_PRICE_PER_KWH`` set). Pass one to say more.

    Args:
        footprint: Carbon intensity and electricity price (see :class:`~zeus_core.carbon.Footprint`);
            default: :meth:`Footprint.from_env <zeus_core.carbon.Footprint.from_env>`.
        total_epochs: Epochs the run is planned for, where the framework cannot say (Accelerate,
            Fabric loops); Lightning and Hugging Face report it themselves.
        total_steps: Optimizer steps the run is planned for (wins over ``total_epochs``).
        run_dir: Where to write ``zeus_run.json`` and ``zeus_power.csv`` for ``zeus-suite report``;
            ``None``: the framework's output folder (Lightning's logger directory, Hugging Face's
            ``output_dir``, Accelerate's ``project_dir``); ``False``: write nothing.
        power_interval_s: Sampling period of the power and temperature timeline, s.
        enabled: ``False`` turns every insight off (the plain energy figures stay).

    Raises:
        ZeusConfigError: A negative count or period.

    Example:
        >>> from zeus_core.carbon import Footprint
        >>> insights = EnergyInsights(footprint=Footprint("DE", price_per_kwh=0.30, currency="EUR"))
        >>> # ZeusCallback(insights=insights), ZeusTrainerCallback(insights=insights), ...
    """

    def __init__(
        self,
        *,
        footprint: Footprint | None = None,
        total_epochs: int | None = None,
        total_steps: int | None = None,
        run_dir: str | Path | bool | None = None,
        power_interval_s: float = 0.5,
        enabled: bool = True,
    ) -> None:
        for name, value in (("total_epochs", total_epochs), ("total_steps", total_steps)):
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ZeusConfigError(f"EnergyInsights({name}={value!r}): give a positive count or None.")
        if not power_interval_s > 0:
            raise ZeusConfigError(f"EnergyInsights(power_interval_s={power_interval_s}): must be > 0.")
        if run_dir is True:
            raise ZeusConfigError(
                "EnergyInsights(run_dir=True): give a folder, None (the framework's) or False."
            )
        self._footprint = footprint
        self.total_epochs = total_epochs
        self.total_steps = total_steps
        self.run_dir = run_dir
        self.power_interval_s = float(power_interval_s)
        self.enabled = bool(enabled)

    @property
    def footprint(self) -> Footprint:
        """The carbon intensity and price in use (built from the environment on first use)."""
        if self._footprint is None:
            self._footprint = Footprint.from_env()
        return self._footprint

    def begin(self, who: str, monitor: ZeusMonitor | None, verbose: bool = True) -> InsightsRun | None:
        """Open the insights of one training run (``None`` when disabled); ``verbose`` shows its lines."""
        if not self.enabled:
            return None
        return InsightsRun(self, who, monitor, verbose)


class InsightsRun:
    """The insights of one training run; the lifecycle calls it (see the module docstring)."""

    def __init__(self, options: EnergyInsights, who: str, monitor: ZeusMonitor | None, verbose: bool) -> None:
        self.options = options
        self.who = who
        self.verbose = verbose
        self.footprint = options.footprint
        self.counter = WorkCounter()
        self.forecaster = Forecaster(options.total_steps, options.total_epochs)
        self.forecasts: list[Forecast] = []
        self.run_dir: Path | None = (
            Path(options.run_dir) if isinstance(options.run_dir, (str, Path)) else None
        )
        self.monitor = monitor
        self.clock = monitor.clock if monitor is not None else time.time
        self.started_at = time.time()
        self.t0 = self.clock()
        self.epochs: list[dict[str, Any]] = []
        self.stages: list[dict[str, Any]] = []
        self.samples = 0
        self.tokens = 0
        self._epoch_start = self.t0
        self._epoch_step0 = 0
        self._stage_start: float | None = None
        self._told_unknown = False
        self.timeline: Timeline | None = None
        self.footprint.start()
        if self.run_dir is not None:
            self._start_timeline()

    # -- set-up ---------------------------------------------------------------------------------------
    def plan(
        self, epochs: float | None = None, steps: float | None = None, run_dir: str | Path | None = None
    ) -> None:
        """What the framework knows: planned epochs and optimizer steps, and its output folder."""
        if self.options.total_steps is None and self.options.total_epochs is None:
            self.forecaster.plan(total_steps=steps, total_epochs=epochs)
        if self.run_dir is None and self.options.run_dir is None and run_dir:
            self.run_dir = Path(run_dir)
        if self.run_dir is not None and self.timeline is None and self.monitor is not None:
            self._start_timeline()

    def _start_timeline(self) -> None:
        if self.monitor is None:
            return
        try:
            self.timeline = Timeline(self.monitor.gpus, self.options.power_interval_s, self.monitor.clock)
            self.timeline.start()
            self.timeline.start_s = self.t0
        except Exception as e:  # the record loses its timeline, training goes on
            logger.warning("%s: no power timeline for the report: %s", self.who, e)
            self.timeline = None

    # -- events ---------------------------------------------------------------------------------------
    def count(self, batch: Any = None, args: Sequence[Any] | None = None, kwargs: dict | None = None) -> None:
        """Count the samples and tokens of one training batch (or model call)."""
        try:
            samples, tokens = count_call(args or (), kwargs or {}) if batch is None else count_batch(batch)
        except Exception as e:  # an unusual batch must never stop training
            logger.debug("%s: could not count a batch: %s", self.who, e)
            return
        self.counter.add(samples, tokens)

    def epoch_begin(self, steps_done: int) -> None:
        """An epoch opens after ``steps_done`` optimizer steps of the run."""
        self._epoch_start = self.clock()
        self._epoch_step0 = steps_done

    def step_end(self, tracker: TrainingTracker) -> None:
        """After a step: snapshots of the first epoch for the warm-up, and a timeline sample."""
        if self.timeline is not None:
            self.timeline.tick()
        if not self.forecaster.in_first_epoch or not tracker.in_epoch:
            return
        step = tracker.steps_done - self._epoch_step0
        if self.forecaster.wants_snapshot(step):
            time_s, energy_j = tracker.running_epoch()
            self.forecaster.snapshot(step, time_s, energy_j)

    def stage_begin(self) -> None:
        """An evaluation stage opens (for the report's timeline)."""
        self._stage_start = self.clock()

    def stage_end(self, stage: str, metrics: dict[str, float]) -> None:
        """An evaluation stage closed with ``metrics``."""
        if metrics and self._stage_start is not None:
            self.stages.append(
                {"stage": stage, **self._span(self._stage_start, self.clock()), "metrics": dict(metrics)}
            )
        self._stage_start = None

    def epoch_end(self, metrics: dict[str, float], tracker: TrainingTracker) -> dict[str, float]:
        """Figures to add to the epoch's (a collective under torch.distributed); shows the first forecast."""
        samples, tokens = self.counter.take()
        if distributed.world_size() > 1:
            samples, tokens = (int(v) for v in distributed.all_reduce([samples, tokens]))
        self.samples += samples
        self.tokens += tokens
        energy = metrics.get(metric_key("energy", "epoch"), 0.0)
        time_s = metrics.get(metric_key("time", "epoch"), 0.0)
        out = efficiency_metrics(energy, samples, tokens if self.counter.saw_tokens else None, "epoch")
        out.update(self._footprint_metrics(energy, "energy/co2_g", "energy/cost"))
        spent_t, spent_e = tracker.running_train()  # the run so far, set-up included (job-wide below)
        if distributed.world_size() > 1:
            spent_e = distributed.all_reduce([spent_e], "sum")[0]
            spent_t = distributed.all_reduce([spent_t], "max")[0]
        steps = tracker.steps_done - self._epoch_step0
        forecast = self.forecaster.epoch_end(steps, time_s, energy, spent=(spent_t, spent_e))
        if forecast is not None:
            self.forecasts.append(forecast)
            out["energy/forecast_j"] = forecast.energy_j
            out["energy/forecast_time_s"] = forecast.time_s
            out.update(
                self._footprint_metrics(forecast.energy_j, "energy/forecast_co2_g", "energy/forecast_cost")
            )
            if len(self.forecasts) == 1 and self.verbose:
                console.info(self._forecast_line(forecast) + _simulated_mark(metrics))
        elif not self._told_unknown and self.verbose:
            self._told_unknown = True
            console.info(
                f"{self.who}: no forecast, the run's length is unknown; pass "
                "insights=EnergyInsights(total_epochs=...) to get one."
            )
        self.epochs.append(
            {
                "epoch": len(self.epochs) + 1,
                **self._span(self._epoch_start, self.clock()),
                "samples": samples,
                "tokens": tokens,
                "metrics": {**metrics, **out},
            }
        )
        return out

    def train_end(
        self, metrics: dict[str, float], failed: bool, optimizers: Sequence[Any]
    ) -> dict[str, float]:
        """Figures to add to the run's totals; shows the summary and writes the run record."""
        samples, tokens = self.counter.take()  # steps after the last full epoch (max_steps, a stop)
        if distributed.world_size() > 1 and not failed:
            samples, tokens = (int(v) for v in distributed.all_reduce([samples, tokens]))
        self.samples += samples
        self.tokens += tokens
        energy = metrics.get(metric_key("energy", "train"), 0.0)
        time_s = metrics.get(metric_key("time", "train"), 0.0)
        out = efficiency_metrics(
            energy, self.samples, self.tokens if self.counter.saw_tokens else None, "train"
        )
        out.update(self._footprint_metrics(energy, "energy/train_co2_g", "energy/train_cost"))
        error = self.forecaster.error_pct(energy, time_s) if not failed else None
        if error is not None:
            out["energy/forecast_error_pct"], out["energy/forecast_time_error_pct"] = error
        if metrics and self.verbose:
            console.info(self._summary_line(out, energy, error) + _simulated_mark(metrics))
        self._write(metrics, out, failed, optimizers)
        return out

    # -- helpers -------------------------------------------------------------------------------------
    def _span(self, start: float, end: float) -> dict[str, float]:
        return {"start_s": start - self.t0, "end_s": end - self.t0}

    def _footprint_metrics(self, energy_j: float, co2_key: str, cost_key: str) -> dict[str, float]:
        out = {co2_key: self.footprint.co2_g(energy_j)}
        cost = self.footprint.cost(energy_j)
        if cost is not None:
            out[cost_key] = cost
        return out

    def _forecast_line(self, f: Forecast) -> str:
        co2 = self.footprint.co2_g(f.energy_j)
        cost = self.footprint.cost(f.energy_j)
        money = f", {format_money(cost)} {self.footprint.currency}" if cost is not None else ""
        count = "first step" if f.warmup_steps == 1 else f"first {f.warmup_steps} steps"
        warmup = f"; {count} left out as warm-up" if f.warmup_steps else ""
        return (
            f"Forecast for the whole run ({f.total_steps} steps): {format_energy(f.energy_j)} in "
            f"{format_duration(f.time_s)}, {co2:.3g} g CO2e{money} (after epoch {f.after_epoch}{warmup}; "
            f"evaluation not included; carbon: {self.footprint.intensity().describe()})"
        )

    def _summary_line(self, out: dict[str, float], energy: float, error: tuple[float, float] | None) -> str:
        parts = []
        if "energy/train_j_per_sample" in out:
            parts.append(f"{out['energy/train_j_per_sample']:.4g} J/sample")
        if "energy/train_j_per_token" in out:
            parts.append(f"{out['energy/train_j_per_token']:.4g} J/token")
        parts.append(f"{out['energy/train_co2_g']:.3g} g CO2e ({self.footprint.intensity().describe()})")
        if "energy/train_cost" in out:
            parts.append(f"{format_money(out['energy/train_cost'])} {self.footprint.currency}")
        text = f"{self.who}: {format_energy(energy)} used: " + ", ".join(parts)
        first = self.forecaster.first
        if first is not None and error is not None:
            text += (
                f". The forecast after epoch {first.after_epoch} was {format_energy(first.energy_j)} in "
                f"{format_duration(first.time_s)}: off by {error[0]:+.1f} % (energy), "
                f"{error[1]:+.1f} % (time)"
            )
        return text

    def _write(
        self, metrics: dict[str, float], out: dict[str, float], failed: bool, optimizers: Sequence[Any]
    ) -> None:
        rows = None
        if self.timeline is not None:
            self.timeline.stop()
            rows = self.timeline.rows()
        if distributed.world_size() > 1 and not failed:  # every rank gets here: gather the timelines
            parts = distributed.all_gather_object(rows)
            if all(part is not None for part in parts):
                rows = [[r[0], f"rank{rank}_{r[1]}", *r[2:]] for rank, part in enumerate(parts) for r in part]
                rows.sort(key=lambda r: (r[0], r[1]))
        if self.run_dir is None or not distributed.is_rank_zero():
            return
        record = {
            "kind": "training",
            "who": self.who,
            "failed": failed,
            "started_at": self.started_at,
            "simulated": bool(metrics.get("simulated")),
            "devices": [g.describe() for g in self.monitor.gpus] if self.monitor is not None else [],
            "epochs": self.epochs,
            "stages": self.stages,
            "train": {**metrics, **out},
            "samples": self.samples,
            "tokens": self.tokens if self.counter.saw_tokens else None,
            "forecasts": [f.__dict__ for f in self.forecasts],
            "footprint": self.footprint.as_dict(),
            "power_limit": power_limit_record(optimizers),
        }
        try:
            path = write_record(self.run_dir, record, rows)
            if self.verbose:
                console.info(
                    f"{self.who}: run record for `zeus-suite report {path.parent}` written to {path}"
                )
        except OSError as e:  # the figures are logged already; the report is a convenience
            console.warn(f"{self.who}: could not write the run record into {self.run_dir}: {e}")


def _simulated_mark(metrics: dict[str, float]) -> str:
    """`` [simulated]`` when the figures come from a simulated device (as the lifecycle's summaries)."""
    return " [simulated]" if metrics.get("simulated") else ""


def format_energy(joules: float) -> str:
    """``1234.5`` -> ``"1.23 kJ"``; up to MJ and kWh for large values."""
    if abs(joules) >= 3.6e6:
        return f"{joules / 3.6e6:.3g} kWh"
    for unit, scale in (("MJ", 1e6), ("kJ", 1e3)):
        if abs(joules) >= scale:
            return f"{joules / scale:.3g} {unit}"
    return f"{joules:.3g} J"


def format_money(amount: float) -> str:
    """``12.345`` -> ``"12.35"``; small amounts keep two significant digits without an exponent."""
    if amount == 0 or abs(amount) >= 0.01:
        return f"{amount:.2f}"
    digits = 1 - int(f"{abs(amount):e}".split("e")[1])
    return f"{amount:.{digits}f}"


def format_duration(seconds: float) -> str:
    """``3725`` -> ``"1 h 02 min"``, ``75.2`` -> ``"1 min 15 s"``, ``4.2`` -> ``"4.2 s"``."""
    if seconds >= 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
    if seconds >= 60:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{seconds:.3g} s"
