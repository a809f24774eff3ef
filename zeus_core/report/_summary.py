"""The terminal summary of ``zeus-suite report`` (rich)."""

from __future__ import annotations

from pathlib import Path

from zeus_core.carbon import Footprint
from zeus_core.report._html import headline
from zeus_core.report._load import RunData

__all__ = ["print_summary"]


def print_summary(run: RunData, footprint: Footprint | None, written: Path) -> None:
    """Print the run's key figures and where the page went."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    console.print(Text(run.title + (" [simulated]" if run.simulated else "")), soft_wrap=True)
    table = Table()
    table.add_column("figure")
    table.add_column("value", justify="right")
    for label, value in headline(run, footprint):
        table.add_row(label, value)
    console.print(table, markup=False)
    for note in run.notes:
        console.print(f"note: {note}", markup=False)
    console.print(f"report: {written}", markup=False)
