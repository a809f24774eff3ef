"""``zeus-suite report RUN -o report.html``: one self-contained HTML page and a terminal summary of a run.

``RUN`` is a run's output folder: a Lightning logger directory, a Hugging Face ``output_dir``, or a
``zeus-suite measure --output`` folder (see :mod:`zeus_core.report._load` for what is read).
``--region``/``--intensity``/``--price-per-kwh`` recompute carbon and cost offline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from zeus_core.exceptions import ZeusError

if TYPE_CHECKING:
    from zeus_core.report._load import RunData

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``zeus-suite report``."""
    parser.add_argument(
        "run", type=Path, metavar="RUN", help="the run's output folder (or its zeus_run.json)"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="the HTML file to write (default: RUN/zeus_report.html)",
    )
    parser.add_argument("--region", help="recompute carbon for this country (name or ISO code) or 'World'")
    parser.add_argument(
        "--intensity", type=float, metavar="G_PER_KWH", help="recompute carbon with this intensity"
    )
    parser.add_argument("--price-per-kwh", type=float, metavar="PRICE", help="recompute cost with this price")
    parser.add_argument("--currency", default=None, help="currency of --price-per-kwh (default: USD)")
    parser.add_argument("--quiet", action="store_true", help="no terminal summary")
    parser.epilog = "Example: zeus-suite report lightning_logs/version_0 -o report.html"


def run(args: argparse.Namespace) -> int:
    """Write the report; returns 0, or 2 when the run cannot be read."""
    from zeus_core.carbon import Footprint
    from zeus_core.report._html import render_html
    from zeus_core.report._load import load_run
    from zeus_core.report._summary import print_summary

    try:
        data = load_run(args.run)
        footprint = None
        if args.region or args.intensity is not None or data.footprint is None:
            footprint = Footprint(
                args.region,
                intensity_g_per_kwh=args.intensity,
                price_per_kwh=args.price_per_kwh,
                currency=args.currency or "USD",
            )
        elif args.price_per_kwh is not None:  # the recorded intensity stays, the price is new
            _reprice(data, args.price_per_kwh, args.currency or "USD")
        page = render_html(data, footprint)
    except ZeusError as e:
        print(f"zeus-suite report: {e}", file=sys.stderr)
        return 2
    out = args.output or (data.folder / "zeus_report.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    if not args.quiet:
        print_summary(data, footprint, out)
    return 0


def _reprice(data: RunData, price_per_kwh: float, currency: str) -> None:
    """Cost of the run (and of each epoch) at another price, in place."""
    data.footprint = data.footprint or {}
    data.footprint = {**data.footprint, "price_per_kwh": price_per_kwh, "currency": currency}
    if "energy/train_j" in data.train:
        data.train["energy/train_cost"] = data.train["energy/train_j"] / 3.6e6 * price_per_kwh
    for epoch in data.epochs:
        if "energy/epoch_j" in epoch["metrics"]:
            epoch["metrics"]["energy/cost"] = epoch["metrics"]["energy/epoch_j"] / 3.6e6 * price_per_kwh
