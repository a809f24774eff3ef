"""Look at the built documentation site in headless Chromium, as a reader would.

Serves ``site/`` (built by ``make docs``) on 127.0.0.1, opens the home page, an optimizer page and
an API reference page in headless Chromium, checks from the rendered DOM that each shows its title,
its content and the site navigation (with the entries a newcomer needs), and saves a screenshot of
each to ``out/ci-artifacts/docs/`` (kept as the CI artifact). Exits 1 naming what is missing.

Usage: ``python .ci/docs_browser_check.py [--site site] [--out out/ci-artifacts/docs]``. Chromium
is ``$CHROMIUM`` or the first of chromium / chromium-browser / google-chrome on the PATH.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=5000",
]
#: Navigation entries every page must show: how to measure a Hugging Face run, how to choose a
#: power limit, how to run the batch-size service, and the API reference.
NAV_ENTRIES = (
    "Getting started",
    "Hugging Face Trainer and SFTTrainer",
    "Choosing a power limit",
    "Batch-size service for recurring jobs",
    "API reference",
)


@dataclass(frozen=True)
class Page:
    """A page to look at: its URL path, screenshot name, and text its content must show."""

    path: str
    name: str
    title: str
    content: tuple[str, ...]


PAGES = (
    Page("", "home", "Zeus Suite", ("Find your way", "ZeusCallback")),
    Page("optimizers/power-limit/", "optimizer-power-limit", "power-limit optimizer", ()),
    Page(
        "api/zeus_core.monitor/",
        "api-zeus_core.monitor",
        "zeus_core.monitor",
        ("ZeusMonitor", "begin_window"),
    ),
)


class _Dom(HTMLParser):
    """The text of the page's first h1, of its primary navigation, and of its article."""

    def __init__(self) -> None:
        super().__init__()
        self.h1 = ""
        self.nav = ""
        self.article = ""
        self._stack: list[str] = []  # what each open element contributes to: "", "nav", "article", "h1"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        parent = self._stack[-1] if self._stack else ""
        if tag == "nav" and "md-nav--primary" in classes:
            self._stack.append("nav")
        elif tag == "article":
            self._stack.append("article")
        elif tag == "h1" and parent == "article" and not self.h1:
            self._stack.append("h1")
        elif tag not in {"br", "img", "input", "meta", "link", "hr", "source", "wbr"}:
            self._stack.append(parent if parent != "h1" else "h1")

    def handle_endtag(self, tag: str) -> None:
        if self._stack and tag not in {"br", "img", "input", "meta", "link", "hr", "source", "wbr"}:
            self._stack.pop()

    def handle_data(self, data: str) -> None:
        where = self._stack[-1] if self._stack else ""
        if where == "nav":
            self.nav += data + " "
        elif where in {"article", "h1"}:
            self.article += data + " "
            if where == "h1":
                self.h1 += data


def chromium() -> str:
    """The Chromium binary."""
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name) or name
    raise SystemExit("no Chromium found: apt-get install chromium chromium-driver, or set CHROMIUM")


def run_chromium(binary: str, profile: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """One headless Chromium run with a fresh profile folder."""
    command = [binary, *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=90)


def check(binary: str, base: str, page: Page, out: Path) -> list[str]:
    """Render ``page``; returns the problems found (empty: it renders with its navigation)."""
    url = base + page.path
    with tempfile.TemporaryDirectory(prefix="zeus-docs-chromium-") as profile:
        dom = run_chromium(binary, Path(profile), ["--dump-dom", url])
    with tempfile.TemporaryDirectory(prefix="zeus-docs-chromium-") as profile:
        shot = out / f"{page.name}.png"
        run_chromium(binary, Path(profile), ["--window-size=1280,1600", f"--screenshot={shot}", url])
    problems = []
    parsed = _Dom()
    parsed.feed(dom.stdout)
    nav = " ".join(parsed.nav.split())
    if dom.returncode != 0 or not dom.stdout.strip():
        problems.append(f"{url}: Chromium rendered nothing (exit {dom.returncode}): {dom.stderr[-500:]}")
    if page.title.lower() not in parsed.h1.lower():
        problems.append(f"{url}: title {parsed.h1.strip()!r} does not show {page.title!r}")
    problems += [f"{url}: navigation lacks {entry!r}" for entry in NAV_ENTRIES if entry not in nav]
    problems += [f"{url}: content lacks {text!r}" for text in page.content if text not in parsed.article]
    if not shot.is_file() or shot.stat().st_size < 10_000:
        problems.append(f"{url}: no screenshot ({shot})")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Serve the site, look at the pages, write the screenshots; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site", help="the built site (make docs)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "out" / "ci-artifacts" / "docs", help="screenshots"
    )
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"no built site at {args.site}: run `make docs` first", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    binary = chromium()
    handler = functools.partial(_QuietHandler, directory=str(args.site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        problems = [p for page in PAGES for p in check(binary, base, page, args.out)]
    finally:
        server.shutdown()
    for page in PAGES:
        print(f"screenshot: {args.out / (page.name + '.png')}")
    if problems:
        print("docs browser check FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"docs browser check: {len(PAGES)} pages render with their navigation")
    return 0


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


if __name__ == "__main__":
    sys.exit(main())
