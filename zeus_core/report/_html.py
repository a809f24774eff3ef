"""One self-contained HTML page for a run: figures embedded as PNG data URIs, inline CSS, no scripts."""

from __future__ import annotations

import base64
import datetime as _dt
import html
from typing import Any

from zeus_core.carbon import Footprint
from zeus_core.report._load import RunData
from zeus_core.report._plots import FIGURES
from zeus_core.training._insights import format_duration, format_energy, format_money

__all__ = ["render_html", "headline"]

_CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;
background:#f6f7f9;color:#1d2430}
main{max-width:1080px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 10px}
.sub{color:#5b6577;font-size:13px}
.banner{background:#fff4d6;border:1px solid #f0c040;padding:8px 12px;border-radius:6px;
margin:12px 0;font-size:14px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px;margin-top:16px}
.card{background:#fff;border:1px solid #e1e4ea;border-radius:8px;padding:10px 12px}
.card .v{font-size:19px;font-weight:600;white-space:nowrap}
.card .k{font-size:12px;color:#5b6577}
figure{background:#fff;border:1px solid #e1e4ea;border-radius:8px;margin:12px 0;padding:8px}
figure img{width:100%;height:auto;display:block}
figcaption{font-size:13px;color:#5b6577;padding:4px 6px}
table{border-collapse:collapse;background:#fff;font-size:13px;width:100%}
th,td{border:1px solid #e1e4ea;padding:4px 8px;text-align:right}
table.text td,table.text th{text-align:left}
th{background:#eef1f5}
td:first-child,th:first-child{text-align:left}
.notes li{font-size:13px;color:#5b6577}
footer{font-size:12px;color:#8a93a3;margin-top:28px}
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _footprint(
    run: RunData, override: Footprint | None
) -> tuple[dict[str, Any] | None, float | None, float | None]:
    """The carbon intensity used, and the run's gCO2e and cost (recomputed when ``override`` is given)."""
    energy = run.train.get("energy/train_j")
    if override is not None:
        if energy is None:
            return override.as_dict(), None, None
        return override.as_dict(), override.co2_g(energy), override.cost(energy)
    return run.footprint, run.train.get("energy/train_co2_g"), run.train.get("energy/train_cost")


def headline(run: RunData, footprint: Footprint | None = None) -> list[tuple[str, str]]:
    """The run's key figures as ``(label, value)``, in display order (also the terminal summary's)."""
    t = run.train
    out: list[tuple[str, str]] = []
    if "energy/train_j" in t:
        out.append(("energy", format_energy(t["energy/train_j"])))
    if "time/train_s" in t:
        out.append(("time", format_duration(t["time/train_s"])))
    if t.get("energy/train_j") and t.get("time/train_s"):
        out.append(("average power", f"{t['energy/train_j'] / t['time/train_s']:.1f} W"))
    if "energy/train_j_per_sample" in t:
        out.append(("per sample", f"{t['energy/train_j_per_sample']:.4g} J"))
    if "energy/train_j_per_token" in t:
        out.append(("per token", f"{t['energy/train_j_per_token']:.4g} J"))
    fp, co2, cost = _footprint(run, footprint)
    if co2 is not None:
        out.append(("carbon", f"{co2:.3g} g CO2e"))
    if cost is not None and fp is not None:
        out.append(("cost", f"{format_money(cost)} {fp.get('currency', '')}"))
    if "energy/forecast_error_pct" in t:
        out.append(("first forecast off (energy)", f"{t['energy/forecast_error_pct']:+.1f} %"))
    if run.slowdown:
        out.append(("throttled", f"{run.throttled_s:.1f} s"))
    if run.command is not None:
        out.append(("exit code", str(run.command.get("exit_code"))))
    return out


def render_html(run: RunData, footprint: Footprint | None = None) -> str:
    """The report page of ``run``; ``footprint`` recomputes carbon and cost (another intensity or price).

    Drawing the plots needs matplotlib (``pip install 'zeus-suite[plot]'``); the page embeds them,
    so it is one self-contained file.

    Example:
        >>> from pathlib import Path
        >>> from zeus_core.carbon import Footprint
        >>> from zeus_core.report import RunData, render_html
        >>> totals = {"energy/train_j": 7.2e6, "time/train_s": 3600.0}
        >>> run = RunData(Path("runs/1"), "zeus_run.json", train=totals)
        >>> page = render_html(run, Footprint("FR", price_per_kwh=0.5))
        >>> page.startswith("<!DOCTYPE html>"), "France (FR)" in page, "1.00 USD" in page
        (True, True, True)
    """
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(run.title)} – Zeus Suite report</title><style>{_CSS}</style></head><body><main>",
        f"<h1>{_e(run.title)}</h1>",
        f'<div class="sub">Read from {_e(run.source)} in {_e(run.folder)}</div>',
    ]
    if run.simulated:
        parts.append(
            '<div class="banner" id="simulated">Simulated devices were measured: these figures illustrate, '
            "they are not measurements of real hardware.</div>"
        )
    parts.append('<div class="cards" id="headline">')
    for label, value in headline(run, footprint):
        parts.append(
            f'<div class="card"><div class="v">{_e(value)}</div><div class="k">{_e(label)}</div></div>'
        )
    parts.append("</div>")
    if run.devices:
        parts.append(f'<div class="sub" style="margin-top:10px">Devices: {_e("; ".join(run.devices))}</div>')
    for fig_id, caption, draw in FIGURES:
        png = draw(run)
        if png is None:
            continue
        data = base64.b64encode(png).decode("ascii")
        parts.append(
            f'<figure id="fig-{fig_id}"><img class="plot" data-plot="{fig_id}" alt="{_e(caption)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{_e(caption)}</figcaption></figure>'
        )
    parts += _carbon_section(run, footprint)
    parts += _tables(run)
    if run.notes:
        parts.append(
            '<h2>Notes</h2><ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in run.notes) + "</ul>"
        )
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f"<footer>Made by <code>zeus-suite report</code> on {stamp}.</footer></main></body></html>")
    return "\n".join(parts)


def _carbon_section(run: RunData, footprint: Footprint | None) -> list[str]:
    fp, co2, cost = _footprint(run, footprint)
    if fp is None:
        return []
    lines = [
        '<h2 id="carbon">Carbon and cost</h2><table class="text">',
        "<tr><th>what</th><th>value</th><th>source</th></tr>",
        f"<tr><td>carbon intensity</td><td>{fp.get('g_per_kwh'):g} gCO2e/kWh</td>"
        f"<td>{_e(fp.get('region'))}: {_e(fp.get('source'))}{' (live)' if fp.get('live') else ''}</td></tr>",
    ]
    if co2 is not None:
        lines.append(
            f"<tr><td>carbon of the run</td><td>{co2:.4g} g CO2e</td><td>energy × intensity</td></tr>"
        )
    if fp.get("live_error"):
        lines.append(f"<tr><td>live provider</td><td>not used</td><td>{_e(fp['live_error'])}</td></tr>")
    if cost is not None:
        lines.append(
            f"<tr><td>cost of the run</td><td>{format_money(cost)} {_e(fp.get('currency'))}</td>"
            f"<td>{fp.get('price_per_kwh'):g} {_e(fp.get('currency'))}/kWh, given by you</td></tr>"
        )
    forecast = run.forecasts[0] if run.forecasts else None
    if forecast is not None and fp.get("g_per_kwh") is not None:
        grams = forecast["energy_j"] / 3.6e6 * float(fp["g_per_kwh"])
        lines.append(
            f"<tr><td>forecast after epoch {forecast['after_epoch']}</td><td>{grams:.4g} g CO2e</td>"
            "<td>forecast energy × intensity</td></tr>"
        )
    lines.append("</table>")
    return lines


def _tables(run: RunData) -> list[str]:
    out: list[str] = []
    if run.epochs:
        cols = [
            ("energy/epoch_j", "energy (J)"),
            ("time/epoch_s", "time (s)"),
            ("power/avg_w", "power (W)"),
            ("energy/j_per_sample", "J/sample"),
            ("energy/j_per_token", "J/token"),
            ("energy/co2_g", "g CO2e"),
            ("energy/forecast_j", "forecast (J)"),
        ]
        cols = [(k, label) for k, label in cols if any(k in e["metrics"] for e in run.epochs)]
        out.append(
            '<h2 id="epochs">Epochs</h2><table><tr><th>epoch</th>'
            + "".join(f"<th>{_e(c)}</th>" for _, c in cols)
            + "</tr>"
        )
        for e in run.epochs:
            cells = "".join(f"<td>{_num(e['metrics'].get(k))}</td>" for k, _ in cols)
            out.append(f"<tr><td>{e.get('epoch', '')}</td>{cells}</tr>")
        out.append("</table>")
    if run.command is not None and run.command.get("energy_j"):
        out.append(
            '<h2 id="devices">Energy per device</h2><table><tr><th>device</th><th>energy (J)</th></tr>'
        )
        for device, joules in run.command["energy_j"].items():
            out.append(f"<tr><td>{_e(device)}</td><td>{_num(joules)}</td></tr>")
        out.append("</table>")
    limit = run.power_limit
    if limit and limit.get("measurements"):
        chosen = limit.get("optimal_w")
        out.append(
            '<h2 id="power-limit">Power-limit optimizer</h2>'
            f'<div class="sub">{_e(limit.get("optimizer"))} with '
            f"{_e(limit.get('selector'))}: chose {chosen if chosen is not None else 'nothing yet'} W</div>"
            "<table><tr><th>limit (W)</th><th>energy/step (J)</th><th>time/step (s)</th><th>steps</th></tr>"
        )
        for r in sorted(limit["measurements"], key=lambda r: -r["power_limit_w"]):
            out.append(
                f"<tr><td>{r['power_limit_w']:g}</td><td>{_num(r['energy_per_step_j'])}</td>"
                f"<td>{_num(r['time_per_step_s'])}</td><td>{r.get('steps', '')}</td></tr>"
            )
        out.append("</table>")
    return out


def _num(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return _e(value)
