"""Benchmark results as JSON files: what the documentation's benchmark tables are generated from.

Each benchmark script takes ``--json PATH`` and, with it, writes its figures there through
:func:`write_json`, with the command that produced them and a description of the machine (the
scripts import this module only then, from beside themselves, so importing a script needs nothing).
``benchmarks/results/<name>.json`` files feed ``docs/benchmarks.md`` when the site is built
(``docs/_hooks/benchmarks.py``): a figure on that page exists only if a results file holds it.

Example:
    >>> _command("benchmarks/nsdi23.py", ["--seeds", "1", "2", "3", "--json", "out.json"])
    'python benchmarks/nsdi23.py --seeds $(seq 1 3)'
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import sys
from pathlib import Path
from typing import Any

__all__ = ["write_json"]

#: The repository root, so that recorded paths are relative to it (no machine's paths in the docs).
ROOT = Path(__file__).resolve().parents[1]


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become None, tuples lists, paths repository-relative strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, Path):
        return _relative(value)
    return value


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


def _command(script: str, argv: list[str] | None) -> str:
    """The command line that produced the results, without ``--json PATH``."""
    args = list(sys.argv[1:] if argv is None else argv)
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--json":
            skip = True
        elif not arg.startswith("--json="):
            kept.append(arg)
    return " ".join(["python", _relative(Path(script)), *_seq(kept)])


def _seq(args: list[str]) -> list[str]:
    """Runs of 3+ consecutive integers written as ``$(seq A B)``, as a shell user would type them."""
    out: list[str] = []
    i = 0
    while i < len(args):
        j = i
        while (
            j + 1 < len(args)
            and args[j].isdigit()
            and args[j + 1].isdigit()
            and int(args[j + 1]) == int(args[j]) + 1
        ):
            j += 1
        if j - i >= 2:
            out.append(f"$(seq {args[i]} {args[j]})")
        else:
            out.extend(args[i : j + 1])
        i = j + 1
    return out


def write_json(path: Path, script: str, argv: list[str] | None, results: dict[str, Any]) -> None:
    """Write ``results`` to ``path`` with the command and the machine that produced them.

    Args:
        path: Where to write (a ``benchmarks/results/<name>.json`` feeds the docs).
        script: The benchmark's ``__file__``.
        argv: The arguments the benchmark parsed (``None``: ``sys.argv[1:]``).
        results: The figures, JSON-serialisable (NaN becomes ``null``).
    """
    payload = {
        "benchmark": Path(script).stem,
        "command": _command(script, argv),
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "machine": {
            "cpus": os.cpu_count(),
            "load_average": round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None,
            "python": platform.python_version(),
            "system": f"{platform.system()} {platform.machine()}",
        },
        "results": _clean(results),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"results written to {_relative(path)}", file=sys.stderr)
