"""No library function is more complex than rank C on radon's scale (cyclomatic complexity <= 20).

Above that a function has too many paths to read or test; split it into helpers with one job each.
"""

from __future__ import annotations

import pytest

from tests.core.import_graph import REPO_ROOT, library_modules

radon_complexity = pytest.importorskip(
    "radon.complexity", reason="radon is in the dev extra: pip install -e '.[dev]'"
)

WORST_ALLOWED_RANK = "C"


def _too_complex(source: str) -> list[tuple[str, int, int, str]]:
    """(name, line, complexity, rank) of every function or method ranked above C."""
    found = []
    for block in radon_complexity.cc_visit(source):
        rank = radon_complexity.cc_rank(block.complexity)
        if rank > WORST_ALLOWED_RANK and block.letter in ("F", "M"):
            found.append((block.fullname, block.lineno, block.complexity, rank))
    return found


def test_the_rank_check_catches_a_complex_function() -> None:
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(25))
    assert _too_complex(f"def tangled(x):\n{branches}    return -1\n") == [("tangled", 1, 26, "D")]
    assert _too_complex("def simple(x):\n    return x\n") == []


def test_no_library_function_is_above_rank_c() -> None:
    offending = []
    for path in library_modules().values():
        for name, line, complexity, rank in _too_complex(path.read_text(encoding="utf-8")):
            offending.append(f"{path.relative_to(REPO_ROOT)}:{line}: {name} - {rank} ({complexity})")
    assert not offending, "functions above complexity rank C (split them):\n  " + "\n  ".join(offending)
