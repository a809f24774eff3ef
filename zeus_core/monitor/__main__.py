"""``python -m zeus_core.monitor energy|power``: Zeus's ``python -m zeus.monitor`` (see docs/migrating.md).

The command lives in :mod:`zeus_core.compat.monitor.__main__`; ``zeus-suite measure`` and
``zeus-suite power`` are the suite's own commands.
"""

import sys

from zeus_core.compat.monitor.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
