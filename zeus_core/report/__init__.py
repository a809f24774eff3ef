"""``zeus-suite report``: one self-contained HTML page of a run, and a terminal summary.

The page shows power per GPU over time (throttled time marked), energy per epoch with J/sample or
J/token, the forecast against the outcome, carbon and cost with their sources, and the power-limit
optimizer's profile and decision, from what the run wrote into its output folder. Drawing needs
matplotlib (``pip install 'zeus-suite[plot]'``), imported only when a page is made. See
docs/insights.md.

Example:
    >>> from zeus_core.report import load_run, render_html  # doctest: +SKIP
    >>> page = render_html(load_run("lightning_logs/version_0"))  # doctest: +SKIP
"""

from zeus_core.report._html import render_html
from zeus_core.report._load import RunData, load_run

__all__ = ["RunData", "load_run", "render_html"]
