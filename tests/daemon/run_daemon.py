"""``python -m tests.daemon.run_daemon ARGS``: ``zeus-suite daemon ARGS`` on the shared fake NVML."""

from __future__ import annotations

import sys

from tests.daemon.fake_gpus import install_from_env

install_from_env()

from zeus_core._cli import main  # noqa: E402  (after the fake is installed)

sys.exit(main(["daemon", *sys.argv[1:]]))
