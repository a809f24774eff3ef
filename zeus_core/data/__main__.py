"""``python -m zeus_core.data [NAME]``: print a bundled data set's path, or list what is bundled."""

from __future__ import annotations

import sys

from zeus_core.data import DATASETS, path
from zeus_core.exceptions import ZeusConfigError


def main(argv: list[str] | None = None) -> int:
    """Print the path of ``argv[0]`` (exit 0), or the bundled data sets when no name is given.

    Args:
        argv: Command-line arguments without the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit code: 0, or 2 for a name that is not bundled.
    """
    args = sys.argv[1:] if argv is None else argv
    if not args:
        for name, what in DATASETS.items():
            print(f"{name:34} {path(name)}  ({what})")
        return 0
    try:
        print(path(args[0]))
    except ZeusConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
