"""``python -m zeus_core.show_env``: Zeus's ``python -m zeus.show_env`` (see docs/migrating.md).

The command lives in :mod:`zeus_core.compat.show_env`; ``zeus-suite env`` is the suite's own.
"""

import sys

from zeus_core.compat.show_env import main

if __name__ == "__main__":
    sys.exit(main())
