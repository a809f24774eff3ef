"""Read a run's output folder into :class:`RunData`, whatever wrote it.

In order of preference: the run record Zeus Suite writes (``zeus_run.json`` and ``zeus_power.csv``,
see :mod:`zeus_core.training._run_record`; the newest one anywhere under the folder), Lightning's
``CSVLogger`` ``metrics.csv``, Hugging Face's ``trainer_state.json`` (the folder's, else the newest
checkpoint's), or a ``zeus-suite measure --csv`` file. What a source lacks (a power timeline, a
forecast) is listed in :attr:`RunData.notes`, and the report leaves that part out.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zeus_core.exceptions import ZeusConfigError
from zeus_core.training._run_record import POWER_FILE, RUN_FILE

__all__ = ["RunData", "load_run"]

_MEASURE_HEADER = ["start_time", "command", "exit_code", "elapsed_time"]


@dataclass
class RunData:
    """Everything a report shows of one run (empty parts were not recorded).

    Attributes:
        folder: The folder read.
        source: What it was read from, e.g. ``"zeus_run.json"``.
        kind: ``"training"`` or ``"command"``.
        who: The adapter or command that measured it.
        simulated: Whether a simulated device was measured.
        devices: One line per measured device.
        epochs: Per epoch: ``epoch``, ``start_s``/``end_s`` (s from the start, when known),
            ``samples``/``tokens`` and ``metrics``.
        stages: Evaluation stages with ``stage``, ``start_s``, ``end_s``, ``metrics``.
        train: The run's totals (metric keys as logged).
        forecasts: Forecasts after each epoch (``energy_j``, ``time_s``, ``after_epoch`` ...).
        footprint: Carbon intensity and price with their sources.
        power: Device label -> ``[(t s, W)]``.
        temperature: Device label -> ``[(t s, °C)]``.
        slowdown: Device label -> ``[(start s, end s)]`` of thermal or hardware slowdowns.
        power_limit: The power-limit optimizer's profile and decision.
        command: For a measured command: ``command``, ``exit_code``, per-device energy.
        notes: What the source lacks, in words.

    Example:
        >>> from pathlib import Path
        >>> from zeus_core.report import RunData
        >>> slowed = {"gpu0": [(3.0, 4.5)]}  # a thermal slowdown from 3 s to 4.5 s
        >>> run = RunData(Path("runs/1"), "zeus_run.json", who="ZeusCallback", slowdown=slowed)
        >>> run.title, run.throttled_s
        ('Training run measured by ZeusCallback', 1.5)
    """

    folder: Path
    source: str
    kind: str = "training"
    who: str = ""
    simulated: bool = False
    devices: list[str] = field(default_factory=list)
    epochs: list[dict[str, Any]] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    train: dict[str, float] = field(default_factory=dict)
    forecasts: list[dict[str, Any]] = field(default_factory=list)
    footprint: dict[str, Any] | None = None
    power: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    temperature: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    slowdown: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    power_limit: dict[str, Any] | None = None
    command: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        """A heading for the run."""
        if self.kind == "command" and self.command:
            return f"zeus-suite measure: {self.command.get('command', '')}"
        return f"Training run measured by {self.who or 'Zeus Suite'}"

    @property
    def throttled_s(self) -> float:
        """Total time some device was slowed down, s (overlaps counted once per device)."""
        return sum(end - start for spans in self.slowdown.values() for start, end in spans)


def load_run(path: str | Path) -> RunData:
    r"""Read the run in ``path`` (a folder, or one of the files named in the module docstring).

    Raises:
        ZeusConfigError: Nothing readable was found (the message says what was looked for).

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from zeus_core.report import load_run
        >>> folder = Path(tempfile.mkdtemp())  # a Lightning CSVLogger's folder, say
        >>> rows = "epoch,energy/epoch_j,time/epoch_s\n0,300.0,1.0\n1,290.0,1.0\n"
        >>> _ = (folder / "metrics.csv").write_text(rows)
        >>> run = load_run(folder)
        >>> run.source, [e["metrics"]["energy/epoch_j"] for e in run.epochs]
        ('metrics.csv (Lightning CSVLogger)', [300.0, 290.0])
    """
    path = Path(path)
    if not path.exists():
        raise ZeusConfigError(f"zeus-suite report {str(path)!r}: no such file or folder.")
    folder = path if path.is_dir() else path.parent
    candidates = [path] if path.is_file() else []
    records = [path] if path.name == RUN_FILE else _newest_first(folder.rglob(RUN_FILE))
    if records:
        return _from_record(records[0])
    for loader in (_from_lightning, _from_huggingface, _from_measure_csv):
        found = loader(candidates[0] if candidates else folder)
        if found is not None:
            return found
    raise ZeusConfigError(
        f"zeus-suite report {str(path)!r}: found none of {RUN_FILE} (written by Zeus Suite's adapters and "
        "`zeus-suite measure --output DIR`), Lightning's metrics.csv with energy/ columns, Hugging Face's "
        "trainer_state.json with energy entries, or a `zeus-suite measure --csv` file. Point it at the "
        "run's output folder."
    )


def _newest_first(paths: Any) -> list[Path]:
    return sorted((p for p in paths if p.is_file()), key=lambda p: p.stat().st_mtime, reverse=True)


# -- Zeus Suite's run record ----------------------------------------------------------------------------
def _from_record(path: Path) -> RunData:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ZeusConfigError(f"zeus-suite report: {path} is not a readable run record ({e}).") from e
    run = RunData(
        folder=path.parent,
        source=RUN_FILE,
        kind=str(doc.get("kind", "training")),
        who=str(doc.get("who", "")),
        simulated=bool(doc.get("simulated")),
        devices=list(doc.get("devices", [])),
        epochs=list(doc.get("epochs", [])),
        stages=list(doc.get("stages", [])),
        train={k: v for k, v in dict(doc.get("train", {})).items() if isinstance(v, (int, float))},
        forecasts=list(doc.get("forecasts", [])),
        footprint=doc.get("footprint"),
        power_limit=doc.get("power_limit"),
        command=doc.get("command"),
    )
    power_file = path.parent / str(doc.get("power_file") or POWER_FILE)
    if doc.get("power_file") and power_file.is_file():
        _read_power_csv(power_file, run)
    else:
        run.notes.append("No power timeline was recorded (no GPU sampled, or an older Zeus Suite).")
    return run


def _read_power_csv(path: Path, run: RunData) -> None:
    """Read ``zeus_power.csv`` (or a ``PowerMonitor.to_csv`` file) into ``run``'s timelines."""
    open_slowdown: dict[str, float] = {}
    last_t: dict[str, float] = {}
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            try:
                t, device, watts = float(row["time_s"]), row["device"], float(row["power_w"])
            except (KeyError, TypeError, ValueError):
                continue
            run.power.setdefault(device, []).append((t, watts))
            if row.get("temperature_c"):
                run.temperature.setdefault(device, []).append((t, float(row["temperature_c"])))
            slowed = row.get("slowdown") == "1"
            if slowed and device not in open_slowdown:
                open_slowdown[device] = last_t.get(device, t)
            elif not slowed and device in open_slowdown:
                run.slowdown.setdefault(device, []).append((open_slowdown.pop(device), t))
            last_t[device] = t
    for device, start in open_slowdown.items():
        run.slowdown.setdefault(device, []).append((start, last_t[device]))


# -- Lightning's CSVLogger --------------------------------------------------------------------------------
def _from_lightning(where: Path) -> RunData | None:
    files = (
        [where]
        if where.is_file() and where.name == "metrics.csv"
        else _newest_first(where.rglob("metrics.csv"))
    )
    for path in files:
        rows: list[dict[str, float]] = []
        with path.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                values = {k: _number(v) for k, v in row.items() if k and v not in ("", None)}
                rows.append({k: v for k, v in values.items() if v is not None})
        run = _run_from_logged(path, rows, source=f"{path.name} (Lightning CSVLogger)", who="ZeusCallback")
        if run is not None:
            return run
    return None


def _run_from_logged(path: Path, rows: list[dict[str, float]], *, source: str, who: str) -> RunData | None:
    """A run from the metrics an adapter logged (one dict per logged row), or None if it logged none."""
    epochs = [r for r in rows if "energy/epoch_j" in r]
    train: dict[str, float] = next((r for r in reversed(rows) if "energy/train_j" in r), {})
    if not epochs and not train:
        return None
    run = RunData(folder=path.parent, source=source, who=who)
    run.epochs = [{"epoch": i + 1, "metrics": r} for i, r in enumerate(epochs)]
    run.train = train
    run.simulated = bool(train.get("simulated") or any(r.get("simulated") for r in epochs))
    run.forecasts = _forecasts_from(epochs)
    run.notes.append(f"Read from {path.name}: no power timeline or run record (older Zeus Suite).")
    return run


# -- Hugging Face's trainer_state.json ----------------------------------------------------------------------
def _from_huggingface(where: Path) -> RunData | None:
    if where.is_file():
        files = [where] if where.name == "trainer_state.json" else []
    else:
        own = where / "trainer_state.json"
        files = [own] if own.is_file() else _newest_first(where.glob("checkpoint-*/trainer_state.json"))
    for path in files:
        try:
            history = json.loads(path.read_text(encoding="utf-8")).get("log_history", [])
        except (OSError, ValueError):
            continue
        entries: list[dict[str, float]] = [
            {k: float(v) for k, v in e.items() if isinstance(v, (int, float))} for e in history
        ]
        run = _run_from_logged(path, entries, source=f"{path.name} (Hugging Face)", who="ZeusTrainerCallback")
        if run is not None:
            return run
    return None


# -- zeus-suite measure --csv ----------------------------------------------------------------------------
def _from_measure_csv(where: Path) -> RunData | None:
    files = [where] if where.is_file() else sorted(where.glob("*.csv"))
    for path in files:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if (reader.fieldnames or [])[:4] != _MEASURE_HEADER:
                continue
            rows = list(reader)
        if not rows:
            continue
        last = rows[-1]
        energies = {
            k[: -len("_energy")]: float(v)
            for k, v in last.items()
            if k.endswith("_energy") and k != "total_energy" and v
        }
        run = RunData(folder=path.parent, source=f"{path.name} (zeus-suite measure --csv)", kind="command")
        run.who = "zeus-suite measure"
        run.simulated = last.get("simulated") == "1"
        run.train = {
            "energy/train_j": float(last["total_energy"]),
            "time/train_s": float(last["elapsed_time"]),
        }
        run.command = {"command": last["command"], "exit_code": int(last["exit_code"]), "energy_j": energies}
        run.notes.append("Read from a --csv file: no power timeline (use `zeus-suite measure --output DIR`).")
        return run
    return None


def _number(text: Any) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _forecasts_from(epochs: list[dict[str, float]]) -> list[dict[str, Any]]:
    return [
        {"after_epoch": i + 1, "energy_j": e["energy/forecast_j"], "time_s": e.get("energy/forecast_time_s")}
        for i, e in enumerate(epochs)
        if "energy/forecast_j" in e
    ]
