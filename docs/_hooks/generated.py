"""MkDocs hook: content generated at build time, so that no page pastes what a program produces.

* ``<!-- benchmark: NAME TABLE -->`` on a line of its own becomes the table ``TABLE`` built from
  ``benchmarks/results/NAME.json`` (``benchmark_tables.py``), with the command that produced it;
  a missing results file or an unknown table is a warning, so ``mkdocs build --strict`` fails.
* ``<!-- cli-help: COMMAND -->`` becomes ``zeus-suite COMMAND --help`` as the parser prints it.
* The plots in ``benchmarks/results/`` are published as ``results/<path>`` for the benchmarks page.
* Sphinx roles left in docstrings (``:class:`X```) render as plain code in the API reference.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

import benchmark_tables  # beside this file (MkDocs puts a hook's folder on sys.path while loading it)
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.generated")

ROOT = Path(__file__).resolve().parents[2]
BENCHMARK = re.compile(r"^<!-- benchmark: (?P<name>[\w.-]+) (?P<table>[\w-]+) -->$", re.M)
CLI_HELP = re.compile(r"^<!-- cli-help: (?P<command>[\w-]+) -->$", re.M)
ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):(<code>)~?")


def cli_help(command: str) -> str:
    """``zeus-suite COMMAND --help`` as argparse formats it (88 columns)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from zeus_core import _cli

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "88"
    try:
        parser = _cli.build_parser(command)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        text = sub.choices[command].format_help()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return f"```text\n{text.rstrip()}\n```"


def _benchmark(match: re.Match[str], page: str) -> str:
    try:
        return benchmark_tables.render(match["name"], match["table"])
    except benchmark_tables.ResultsMissing as e:
        log.warning("%s: %s", page, e)
        return f'!!! warning "No results"\n    {e}'


def _cli(match: re.Match[str], page: str) -> str:
    try:
        return cli_help(match["command"])
    except (KeyError, StopIteration, ImportError) as e:
        log.warning("%s: no help for zeus-suite %s (%s)", page, match["command"], e)
        return ""


def on_files(files: Files, config: Any) -> Files:
    """Publish the benchmark plots under ``results/`` (the benchmarks page shows them)."""
    for path in sorted(benchmark_tables.RESULTS.rglob("*.png")):
        uri = "results/" + path.relative_to(benchmark_tables.RESULTS).as_posix()
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the markers with generated content."""
    where = page.file.src_uri
    markdown = BENCHMARK.sub(lambda m: _benchmark(m, where), markdown)
    return CLI_HELP.sub(lambda m: _cli(m, where), markdown)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Drop Sphinx roles (``:class:``) that docstrings carry in front of inline code."""
    return ROLE.sub(r"\1", html)
