"""Zeus 0.16's documented code (its corpus) as stored in ``tests/compat/zeus_snippets``, and how to run it.

The corpus is every Python block of Zeus's ``README.md``, ``docs/``, its energy-measurement skill
file (``skills/measuring-energy/SKILL.md``) and its examples' READMEs, every Python file under its
``examples/``, and its module-style commands (``python -m zeus.monitor energy|power``,
``python -m zeus.show_env``), at Zeus commit ``ZEUS_COMMIT``. Each item is one file here: Zeus's
text verbatim except its ``zeus`` import lines (``zeus.`` -> ``zeus_core.compat.``, the migration
table of docs/migrating.md), below a header naming its source, the SHA-256 of the original, what
stands in for CI's missing hardware and data (``zeus_runner.py``), and its status: ``runs``, or
``not run: WHY`` with ``change: THE ONE-LINE CHANGE`` (both listed on docs/migrating.md).

Used by tests/compat/test_zeus_snippets.py and benchmarks/zeus_compat.py.

Example:
    >>> items = corpus()
    >>> len(items) == CORPUS_SIZE
    True
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
SNIPPETS = HERE / "zeus_snippets"
RUNNER = HERE / "zeus_runner.py"
REPO = HERE.parents[1]

#: The Zeus commit whose documented code is stored here (ml-energy/zeus, v0.16).
ZEUS_COMMIT = "75a8b93"
#: Items of that corpus: 19 Python blocks (docs, skill file, examples' READMEs), 16 example files, 3 commands.
CORPUS_SIZE = 38

_IMPORT = re.compile(r"^(\s*)(from|import)\s+zeus_core\.compat\b")


@dataclass(frozen=True)
class Item:
    """One stored item of Zeus's corpus."""

    path: Path
    meta: dict[str, str]
    body: str

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def source(self) -> str:
        return self.meta["zeus-source"]

    @property
    def kind(self) -> str:
        if self.path.suffix == ".sh":
            return "command"
        return "example" if self.source.endswith(".py") else "docs block"

    @property
    def runs(self) -> bool:
        return self.meta.get("status", "runs") == "runs"

    @property
    def torchrun(self) -> int:
        return int(self.meta.get("torchrun", "0"))

    def original(self) -> str:
        """Zeus's text: the import lines (and ``python -m``) mapped back from ``zeus_core.compat``."""
        if self.kind == "command":
            return self.body.replace("python -m zeus_core.compat.", "python -m zeus.")
        lines = []
        for line in self.body.splitlines():
            if _IMPORT.match(line):
                line = line.replace("zeus_core.compat", "zeus", 1)
            lines.append(line)
        return "\n".join(lines) + "\n"

    def verbatim(self) -> bool:
        """Whether the stored text is Zeus's apart from the import lines (by the recorded SHA-256)."""
        return hashlib.sha256(self.original().encode()).hexdigest() == self.meta["sha256"]


def read(path: Path) -> Item:
    """One stored item: its ``# key: value`` header lines above ``# ---``, and Zeus's text below."""
    text = path.read_text()
    head, _, body = text.partition("# ---\n")
    meta: dict[str, str] = {}
    for line in head.splitlines():
        key, _, value = line[2:].partition(":")
        meta[key.strip()] = value.strip()
    return Item(path, meta, body)


def corpus() -> list[Item]:
    """Every stored item, by file name."""
    return [read(p) for p in sorted(SNIPPETS.iterdir()) if p.suffix in (".py", ".sh")]


def run_batch(
    items: list[Item], out_dir: Path, parallel: int = 2, timeout_s: float = 180.0
) -> dict[str, int]:
    """Run single-process items (forked children of one process); returns name -> exit code."""
    cmd = [sys.executable, str(RUNNER), "--batch", str(out_dir), str(parallel), str(timeout_s)]
    subprocess.run(
        [*cmd, *(str(i.path) for i in items)], cwd=REPO, check=True, timeout=timeout_s * len(items)
    )
    return {
        i.name: int((out_dir / f"{i.name}.rc").read_text()) if (out_dir / f"{i.name}.rc").exists() else -9
        for i in items
    }


def run_torchrun(item: Item, out_dir: Path, timeout_s: float = 240.0) -> int:
    """Run an item under ``torchrun --nproc-per-node N`` (gloo on the CPU); returns the exit code."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(item.torchrun),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(port),
        str(RUNNER),
        str(item.path),
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / f"{item.name}.log", "w") as log:
        job = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        try:
            return job.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            # A job that hangs: the ranks and their DataLoader workers print their threads' stacks
            # into the log (SIGUSR1, see zeus_runner), then the whole tree is killed, leaving no
            # orphan (torchrun starts each rank in a session of its own).
            tree = psutil.Process(job.pid).children(recursive=True)
            for proc in tree:
                with contextlib.suppress(psutil.Error):
                    if any("zeus_runner" in arg for arg in proc.cmdline()):
                        proc.send_signal(signal.SIGUSR1)
            time.sleep(3)
            for proc in [psutil.Process(job.pid), *tree]:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            job.wait()
            return -9
