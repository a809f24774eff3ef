"""How much of Zeus 0.16's documented code runs on Zeus Suite with only the imports changed (issue 31).

Runs every item of Zeus's corpus that is marked ``runs`` in ``tests/compat/zeus_snippets`` (docs
blocks, examples and module-style commands, verbatim apart from their ``zeus`` imports) on a fake
NVIDIA A40, as tests/compat/test_zeus_snippets.py does, and counts those that exit 0; items marked
``not run`` are counted as not running, with their reason. ``--json PATH`` writes the results that
docs/migrating.md shows (``<!-- benchmark: zeus_compat items -->``).

Usage: ``python benchmarks/zeus_compat.py --json benchmarks/results/zeus_compat.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    """Run the corpus; print the count and, with ``--json``, write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tests.compat.zeus_corpus import CORPUS_SIZE, ZEUS_COMMIT, corpus, run_batch, run_torchrun

    items = corpus()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        codes = run_batch([i for i in items if i.runs and not i.torchrun], out)
        for item in items:
            if item.runs and item.torchrun:
                codes[item.name] = run_torchrun(item, out)
    rows = []
    for item in items:
        ran = item.runs and codes.get(item.name) == 0
        why = (
            ""
            if ran
            else (
                item.meta.get("status", "").removeprefix("not run: ")
                if not item.runs
                else f"exit code {codes.get(item.name)}"
            )
        )
        rows.append(
            {
                "source": item.source,
                "kind": item.kind,
                "runs": ran,
                "why": why,
                "change": item.meta.get("change", ""),
            }
        )
    results = {
        "zeus_commit": ZEUS_COMMIT,
        "corpus": CORPUS_SIZE,
        "run": sum(r["runs"] for r in rows),
        "by_kind": {
            k: [sum(r["runs"] for r in rows if r["kind"] == k), sum(r["kind"] == k for r in rows)]
            for k in ("docs block", "example", "command")
        },
        "seconds": round(time.monotonic() - started, 1),
        "items": rows,
    }
    print(
        f"{results['run']} of {results['corpus']} items of Zeus's documented code run "
        "with only the imports changed"
    )
    for r in rows:
        print(f"  {'runs' if r['runs'] else 'NOT '} {r['source']}" + (f": {r['why']}" if r["why"] else ""))
    if args.json:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from _results import write_json

        write_json(args.json, __file__, argv, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
